//! `meridian dnssec keygen` (writes a new key pair in BIND's format) and
//! `meridian dnssec ds` (the DS record of a `.key` file, or of a configured
//! zone's KSKs, for the parent).

use std::io::Write;
use std::path::Path;

use crate::dnssec::keys::{self, DigestType, GenAlgorithm};

/// Writes a new key pair for `zone` into `dir` and returns its base name
/// (`K<zone>.+<alg>+<tag>`). The `.private` file is created with mode 0600;
/// an existing file of the same name is not overwritten.
pub fn keygen(
    zone: &str,
    algorithm: GenAlgorithm,
    ksk: bool,
    dir: &Path,
) -> Result<String, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let g = keys::generate(zone, algorithm, ksk, now)?;
    let key = dir.join(format!("{}.key", g.base));
    let private = dir.join(format!("{}.private", g.base));
    write_new(&private, g.private_text.as_bytes(), 0o600)?;
    if let Err(e) = write_new(&key, g.key_text.as_bytes(), 0o644) {
        let _ = std::fs::remove_file(&private);
        return Err(e);
    }
    Ok(g.base)
}

/// Creates `path` (failing if it exists) with `mode` and writes `bytes`.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(fail)?;
    f.write_all(bytes).and_then(|()| f.sync_all()).map_err(fail)
}

/// The DS record of the key in `key_file` (its `.key` file, or the base name).
pub fn ds(key_file: &Path, digest: DigestType) -> Result<String, String> {
    let (key_file, _) = keys::key_paths(key_file);
    let (key, _) = keys::read_dnskey(&key_file).map_err(|e| e.to_string())?;
    Ok(key.ds(digest))
}

/// The DS records of the zone `zone` in the config file `config`, one per
/// line: every KSK or CSK (flags 257) of its `dnssec` keys, or every key
/// when it has none. The zone's `dnssec` table is checked as `check` does
/// (missing, foreign or expired keys are errors); the zone file is not read.
pub fn ds_config(config: &Path, zone: &str, digest: DigestType) -> Result<String, String> {
    use crate::config::{dnssec, Source};
    let src = Source::read(config).map_err(|e| e.to_string())?;
    let cfg = src.parse().map_err(|e| e.to_string())?;
    let want = keys::absolute(zone).to_ascii_lowercase();
    let Some(z) = cfg
        .zone
        .iter()
        .find(|z| keys::absolute(&z.get_ref().origin).eq_ignore_ascii_case(&want))
    else {
        return Err(format!(
            "{}: no [[zone]] has origin {want}",
            config.display()
        ));
    };
    let Some(d) = &z.get_ref().dnssec else {
        return Err(src
            .err(z.span(), format!("zone {want} has no dnssec keys"))
            .to_string());
    };
    let mut warnings = Vec::new();
    let checked =
        dnssec::check(&src, &want, d, dnssec::now(), &mut warnings).map_err(|e| e.to_string())?;
    for w in warnings {
        eprintln!("meridian: {w}");
    }
    let lines: Vec<String> = checked
        .entry_keys()
        .iter()
        .map(|k| k.dnskey.ds(digest))
        .collect();
    Ok(lines.join("\n"))
}
