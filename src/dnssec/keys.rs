//! BIND-format DNSSEC key pairs: `K<zone>.+<alg>+<tag>.key` (the DNSKEY
//! record) and `K<zone>.+<alg>+<tag>.private` (the private key fields), as
//! `dnssec-keygen` (bind9-utils), `ldns-keygen` and `meridian dnssec keygen`
//! write them.
//!
//! [`load`] reads a pair, checks it (owner, algorithm, key tag, that the
//! private key belongs to the public one, by signing and verifying a test
//! message) and returns a [`KeyPair`] holding a hickory-proto
//! [`SigningKey`] over ring. Every error is a [`LocatedError`] naming the
//! file, and the line where there is one. The only I/O is reading the two
//! files (and the private file's mode, for the warning).
//!
//! Algorithms: 13 (ECDSAP256SHA256) and 15 (Ed25519); 8 (RSASHA256) is
//! accepted for imported keys but not generated.

use std::fmt;
use std::path::{Path, PathBuf};

use data_encoding::BASE64;
use hickory_proto::dnssec::crypto::{EcdsaSigningKey, Ed25519SigningKey, RsaSigningKey};
use hickory_proto::dnssec::{Algorithm, PublicKey, PublicKeyBuf, SigningKey, TBS};
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{
    EcdsaKeyPair, Ed25519KeyPair, KeyPair as _, ECDSA_P256_SHA256_FIXED_SIGNING,
};
use rustls_pki_types::PrivatePkcs1KeyDer;

use crate::error::LocatedError;

/// A DNSSEC algorithm meridian can load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAlgorithm {
    /// 8, RSA/SHA-256: imported keys only.
    RsaSha256,
    /// 13, ECDSA P-256 with SHA-256.
    EcdsaP256Sha256,
    /// 15, Ed25519.
    Ed25519,
}

impl KeyAlgorithm {
    /// The algorithm number (RFC 8624).
    pub fn number(self) -> u8 {
        match self {
            KeyAlgorithm::RsaSha256 => 8,
            KeyAlgorithm::EcdsaP256Sha256 => 13,
            KeyAlgorithm::Ed25519 => 15,
        }
    }

    /// The algorithm of a number, if meridian supports it.
    pub fn from_number(n: u8) -> Option<Self> {
        match n {
            8 => Some(KeyAlgorithm::RsaSha256),
            13 => Some(KeyAlgorithm::EcdsaP256Sha256),
            15 => Some(KeyAlgorithm::Ed25519),
            _ => None,
        }
    }

    /// The mnemonic BIND writes after the number (`Algorithm: 13 (ECDSAP256SHA256)`).
    pub fn mnemonic(self) -> &'static str {
        match self {
            KeyAlgorithm::RsaSha256 => "RSASHA256",
            KeyAlgorithm::EcdsaP256Sha256 => "ECDSAP256SHA256",
            KeyAlgorithm::Ed25519 => "ED25519",
        }
    }

    fn hickory(self) -> Algorithm {
        match self {
            KeyAlgorithm::RsaSha256 => Algorithm::RSASHA256,
            KeyAlgorithm::EcdsaP256Sha256 => Algorithm::ECDSAP256SHA256,
            KeyAlgorithm::Ed25519 => Algorithm::ED25519,
        }
    }
}

impl fmt::Display for KeyAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.number(), self.mnemonic())
    }
}

/// The digest of a DS record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestType {
    /// 2, SHA-256 (RFC 4509).
    Sha256,
    /// 4, SHA-384 (RFC 6605).
    Sha384,
}

impl DigestType {
    /// The digest type number in the DS record.
    pub fn number(self) -> u8 {
        match self {
            DigestType::Sha256 => 2,
            DigestType::Sha384 => 4,
        }
    }
}

/// A DNSKEY record as a `.key` file holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsKey {
    /// The owner, lower case and absolute (`example.test.`).
    pub owner: String,
    /// 256 (zone key) or 257 (zone key and secure entry point: a KSK or CSK).
    pub flags: u16,
    /// Always 3.
    pub protocol: u8,
    /// The algorithm number, as written (it may be one meridian does not support).
    pub algorithm: u8,
    /// The public key in DNSKEY form.
    pub public_key: Vec<u8>,
}

impl DnsKey {
    /// The DNSKEY RDATA in wire form.
    pub fn rdata(&self) -> Vec<u8> {
        let mut r = Vec::with_capacity(4 + self.public_key.len());
        r.extend_from_slice(&self.flags.to_be_bytes());
        r.push(self.protocol);
        r.push(self.algorithm);
        r.extend_from_slice(&self.public_key);
        r
    }

    /// The key tag (RFC 4034 Appendix B).
    pub fn key_tag(&self) -> u16 {
        key_tag(&self.rdata())
    }

    /// The DNSKEY record in master-file form, as the `.key` file holds it.
    pub fn record(&self) -> String {
        format!(
            "{} IN DNSKEY {} {} {} {}",
            self.owner,
            self.flags,
            self.protocol,
            self.algorithm,
            BASE64.encode(&self.public_key)
        )
    }

    /// The DS record for the parent zone (RFC 4034 §5.1.4, RFC 4509), in the
    /// form `dnssec-dsfromkey` prints: `owner IN DS tag alg type HEX`.
    pub fn ds(&self, digest: DigestType) -> String {
        let rd = self.ds_rdata(digest);
        format!(
            "{} IN DS {} {} {} {}",
            self.owner,
            self.key_tag(),
            self.algorithm,
            digest.number(),
            data_encoding::HEXUPPER.encode(&rd[4..])
        )
    }

    /// The DS (or CDS, RFC 7344) RDATA in wire form: key tag, algorithm,
    /// digest type, digest of owner and DNSKEY RDATA.
    pub fn ds_rdata(&self, digest: DigestType) -> Vec<u8> {
        let mut input = name_wire(&self.owner);
        input.extend_from_slice(&self.rdata());
        let alg = match digest {
            DigestType::Sha256 => &ring::digest::SHA256,
            DigestType::Sha384 => &ring::digest::SHA384,
        };
        let d = ring::digest::digest(alg, &input);
        let mut v = Vec::with_capacity(4 + d.as_ref().len());
        v.extend_from_slice(&self.key_tag().to_be_bytes());
        v.push(self.algorithm);
        v.push(digest.number());
        v.extend_from_slice(d.as_ref());
        v
    }
}

/// The key tag of a DNSKEY RDATA (RFC 4034 Appendix B; not for algorithm 1).
pub fn key_tag(rdata: &[u8]) -> u16 {
    let mut ac: u32 = 0;
    for (i, &b) in rdata.iter().enumerate() {
        ac += if i & 1 == 1 {
            u32::from(b)
        } else {
            u32::from(b) << 8
        };
    }
    ac += (ac >> 16) & 0xffff;
    (ac & 0xffff) as u16
}

/// A name in canonical wire form (lower case, RFC 4034 §6.2).
fn name_wire(name: &str) -> Vec<u8> {
    let mut w = Vec::with_capacity(name.len() + 2);
    for label in name
        .trim_end_matches('.')
        .split('.')
        .filter(|l| !l.is_empty())
    {
        w.push(label.len() as u8);
        w.extend(label.bytes().map(|b| b.to_ascii_lowercase()));
    }
    w.push(0);
    w
}

/// Why `name` (absolute) cannot be a key's owner: meridian takes plain
/// names only, labels of 1 to 63 octets, 255 in all, no escapes.
fn bad_name(name: &str) -> Option<&'static str> {
    if name == "." {
        return None;
    }
    let labels = name.strip_suffix('.').unwrap_or(name).split('.');
    if name.len() > 254 {
        Some("the name is longer than 255 octets")
    } else if name.contains(['\\', '"', '(', ')']) || name.contains(char::is_whitespace) {
        Some("escapes and quotes are not supported in key owner names")
    } else if labels.clone().any(str::is_empty) {
        Some("the name has an empty label")
    } else if labels.into_iter().any(|l| l.len() > 63) {
        Some("a label is longer than 63 octets")
    } else {
        None
    }
}

/// A name lower case with its final dot.
pub fn absolute(name: &str) -> String {
    let n = name.trim().to_ascii_lowercase();
    if n.ends_with('.') {
        n
    } else {
        format!("{n}.")
    }
}

/// BIND's timing metadata, in seconds since the Unix epoch (UTC).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timing {
    /// `Created:`
    pub created: Option<i64>,
    /// `Publish:`: the DNSKEY goes into the zone.
    pub publish: Option<i64>,
    /// `Activate:`: the key signs.
    pub activate: Option<i64>,
    /// `Inactive:`: the key stops signing.
    pub inactive: Option<i64>,
    /// `Delete:`: the DNSKEY leaves the zone.
    pub delete: Option<i64>,
}

impl Timing {
    /// True when `Inactive` or `Delete` is at or before `now` (Unix seconds):
    /// the key must no longer sign.
    pub fn expired(&self, now: i64) -> bool {
        [self.inactive, self.delete]
            .into_iter()
            .flatten()
            .any(|t| t <= now)
    }
}

/// `YYYYMMDDHHMMSS` (UTC) to Unix seconds.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    if s.len() != 14 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s[r].parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(4..6)?, n(6..8)?);
    let (hh, mm, ss) = (n(8..10)?, n(10..12)?, n(12..14)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// Unix seconds to `YYYYMMDDHHMMSS` (UTC).
pub fn format_timestamp(t: i64) -> String {
    let (days, secs) = (t.div_euclid(86_400), t.rem_euclid(86_400));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}{:02}{:02}{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// A loaded, checked key pair.
pub struct KeyPair {
    /// The `.key` file.
    pub key_file: PathBuf,
    /// The `.private` file.
    pub private_file: PathBuf,
    /// The DNSKEY record.
    pub dnskey: DnsKey,
    /// Its algorithm.
    pub algorithm: KeyAlgorithm,
    /// Its key tag (equal to the one in the file name).
    pub tag: u16,
    /// Timing metadata from the `.private` file (BIND writes it there and,
    /// as comments, in the `.key` file).
    pub timing: Timing,
    /// The signing key (ring).
    pub signer: Box<dyn SigningKey>,
}

impl KeyPair {
    /// 257: a KSK or CSK (the secure entry point bit).
    pub fn is_ksk(&self) -> bool {
        self.dnskey.flags & 1 == 1
    }

    /// Signs `message` (the RRSIG's to-be-signed octets).
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, String> {
        self.signer
            .sign(&TBS::from(message))
            .map_err(|e| e.to_string())
    }

    /// Verifies `signature` over `message` with the DNSKEY's public key.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        PublicKeyBuf::new(self.dnskey.public_key.clone(), self.algorithm.hickory())
            .verify(message, signature)
            .is_ok()
    }
}

impl fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyPair")
            .field("key_file", &self.key_file)
            .field("dnskey", &self.dnskey)
            .field("tag", &self.tag)
            .field("timing", &self.timing)
            .finish_non_exhaustive()
    }
}

/// A loaded key and what the caller should log.
#[derive(Debug)]
pub struct Loaded {
    /// The key pair.
    pub key: KeyPair,
    /// Warnings (a private key file readable by other users).
    pub warnings: Vec<String>,
}

/// The parts of a key file's name: `K<zone>.+<alg>+<tag>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyName {
    /// The zone, absolute and lower case.
    pub zone: String,
    /// The algorithm number.
    pub algorithm: u8,
    /// The key tag.
    pub tag: u16,
}

impl KeyName {
    /// The base name (no extension) BIND gives this key.
    pub fn base(&self) -> String {
        format!("K{}+{:03}+{:05}", self.zone, self.algorithm, self.tag)
    }

    /// Parses a base name (no directory, no extension).
    pub fn parse(base: &str) -> Option<KeyName> {
        let rest = base.strip_prefix('K')?;
        let (rest, tag) = rest.rsplit_once('+')?;
        let (zone, alg) = rest.rsplit_once('+')?;
        if !zone.ends_with('.') || tag.len() != 5 || alg.len() != 3 {
            return None;
        }
        Some(KeyName {
            zone: absolute(zone),
            algorithm: alg.parse().ok()?,
            tag: tag.parse().ok()?,
        })
    }
}

/// The two files of a key named by either of them or by their base name.
pub fn key_paths(path: &Path) -> (PathBuf, PathBuf) {
    let s = path.as_os_str().to_string_lossy();
    let base = s
        .strip_suffix(".key")
        .or_else(|| s.strip_suffix(".private"))
        .unwrap_or(&s);
    (
        PathBuf::from(format!("{base}.key")),
        PathBuf::from(format!("{base}.private")),
    )
}

fn read(path: &Path) -> Result<String, LocatedError> {
    std::fs::read_to_string(path).map_err(|e| {
        let what = if e.kind() == std::io::ErrorKind::NotFound {
            "missing key file".to_string()
        } else {
            format!("cannot read key file: {e}")
        };
        LocatedError::new(path, 0, what)
    })
}

/// Reads a `.key` file: its DNSKEY record and the line it is on.
pub fn read_dnskey(path: &Path) -> Result<(DnsKey, usize), LocatedError> {
    parse_dnskey(path, &read(path)?)
}

/// Parses the text of a `.key` file: one DNSKEY record (`owner [TTL] [IN]
/// DNSKEY flags protocol algorithm base64...`); `;` starts a comment.
pub fn parse_dnskey(file: &Path, text: &str) -> Result<(DnsKey, usize), LocatedError> {
    let mut found = None;
    for (l, n) in text.lines().zip(1..) {
        let l = l.split(';').next().unwrap_or_default().trim();
        if l.is_empty() {
            continue;
        }
        if found.is_some() {
            return Err(LocatedError::new(
                file,
                n,
                "more than one record in a key file",
            ));
        }
        found = Some((l, n));
    }
    let Some((l, n)) = found else {
        return Err(LocatedError::new(file, 0, "no DNSKEY record"));
    };
    let err = |m: String| LocatedError::new(file, n, m);
    let words: Vec<&str> = l.split_whitespace().collect();
    let Some(at) = words.iter().position(|w| w.eq_ignore_ascii_case("DNSKEY")) else {
        return Err(err("not a DNSKEY record".into()));
    };
    // Between owner and type: an optional TTL and class IN.
    for w in &words[1.min(at)..at] {
        if !(w.eq_ignore_ascii_case("IN") || w.bytes().all(|b| b.is_ascii_digit())) {
            return Err(err(format!("unexpected `{w}` before DNSKEY")));
        }
    }
    if at == 0 || words.len() < at + 5 {
        return Err(err(
            "a DNSKEY record needs owner, flags, protocol, algorithm and key".into(),
        ));
    }
    let num = |i: usize, what: &str| {
        words[i]
            .parse::<u16>()
            .map_err(|_| err(format!("bad {what} `{}`", words[i])))
    };
    let flags = num(at + 1, "flags")?;
    let protocol = num(at + 2, "protocol")?;
    let algorithm = num(at + 3, "algorithm")?;
    if protocol != 3 {
        return Err(err(format!("protocol {protocol}, not 3")));
    }
    let algorithm = u8::try_from(algorithm).map_err(|_| err("bad algorithm".into()))?;
    let b64: String = words[at + 4..].concat();
    let public_key = BASE64
        .decode(b64.as_bytes())
        .map_err(|e| err(format!("bad base64 in the public key: {e}")))?;
    let owner = absolute(words[0]);
    if let Some(why) = bad_name(&owner) {
        return Err(err(format!("bad owner `{}`: {why}", words[0])));
    }
    let key = DnsKey {
        owner,
        flags,
        protocol: 3,
        algorithm,
        public_key,
    };
    Ok((key, n))
}

/// The fields of a `.private` file, with their lines.
struct Private {
    fields: Vec<(String, String, usize)>,
}

impl Private {
    fn parse(file: &Path, text: &str) -> Result<Private, LocatedError> {
        let mut fields = Vec::new();
        for (l, n) in text.lines().zip(1..) {
            let l = l.trim();
            if l.is_empty() || l.starts_with(';') {
                continue;
            }
            let Some((k, v)) = l.split_once(':') else {
                return Err(LocatedError::new(file, n, "expected `Field: value`"));
            };
            fields.push((k.trim().to_string(), v.trim().to_string(), n));
        }
        Ok(Private { fields })
    }

    fn get(&self, key: &str) -> Option<(&str, usize)> {
        (self.fields.iter())
            .find(|(k, _, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v, n)| (v.as_str(), *n))
    }

    fn base64(&self, file: &Path, key: &str) -> Result<Vec<u8>, LocatedError> {
        let Some((v, n)) = self.get(key) else {
            return Err(LocatedError::new(file, 0, format!("no `{key}:` field")));
        };
        let v: String = v.split_whitespace().collect();
        BASE64
            .decode(v.as_bytes())
            .map_err(|e| LocatedError::new(file, n, format!("bad base64 in {key}: {e}")))
    }

    fn timing(&self, file: &Path) -> Result<Timing, LocatedError> {
        let mut t = Timing::default();
        for (key, slot) in [
            ("Created", &mut t.created),
            ("Publish", &mut t.publish),
            ("Activate", &mut t.activate),
            ("Inactive", &mut t.inactive),
            ("Delete", &mut t.delete),
        ] {
            if let Some((v, n)) = self.get(key) {
                let stamp = v.split_whitespace().next().unwrap_or_default();
                *slot = Some(parse_timestamp(stamp).ok_or_else(|| {
                    LocatedError::new(file, n, format!("bad {key} time `{v}` (YYYYMMDDHHMMSS)"))
                })?);
            }
        }
        Ok(t)
    }
}

/// A key file's identity on disk: a reload may reuse a key pair read
/// before whose files still look like this (size, mtime, inode).
type Stamp = (u64, std::time::SystemTime, u64);

fn stamp(p: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).ok()?;
    Some((m.len(), m.modified().ok()?, m.ino()))
}

/// Key pairs read by this process, by `.key` path.
type Cache = std::collections::HashMap<PathBuf, (Stamp, Stamp, String, std::sync::Arc<KeyPair>)>;

static CACHE: std::sync::Mutex<Option<Cache>> = std::sync::Mutex::new(None);

/// [`load`], but a pair this process already read from files that look
/// unchanged is shared rather than read again: the `.private` file is
/// often readable only by root, and reloads run after the privileges
/// drop. The first load (before the drop) reads and checks it.
pub fn load_shared(
    path: &Path,
    zone: &str,
) -> Result<(std::sync::Arc<KeyPair>, Vec<String>), LocatedError> {
    let (key_file, private_file) = key_paths(path);
    let stamps = stamp(&key_file).zip(stamp(&private_file));
    let zone_abs = absolute(zone);
    if let Some((k, p)) = stamps {
        let cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((ks, ps, z, pair)) = cache.as_ref().and_then(|c| c.get(&key_file)) {
            if *ks == k && *ps == p && *z == zone_abs {
                return Ok((pair.clone(), Vec::new()));
            }
        }
    }
    let loaded = load(path, zone)?;
    let pair = std::sync::Arc::new(loaded.key);
    if let Some((k, p)) = stamps {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get_or_insert_with(Default::default)
            .insert(key_file, (k, p, zone_abs, pair.clone()));
    }
    Ok((pair, loaded.warnings))
}

/// Loads the key pair `path` names (its `.key`, its `.private` or their
/// base name) and checks it belongs to `zone`.
pub fn load(path: &Path, zone: &str) -> Result<Loaded, LocatedError> {
    let (key_file, private_file) = key_paths(path);
    let zone = absolute(zone);
    let base = key_file
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".key").to_string())
        .unwrap_or_default();
    let Some(name) = KeyName::parse(&base) else {
        return Err(LocatedError::new(
            &key_file,
            0,
            "the file name is not K<zone>.+<algorithm>+<tag>.key",
        ));
    };
    let (dnskey, line) = read_dnskey(&key_file)?;
    let at = |m: String| LocatedError::new(&key_file, line, m);
    if dnskey.owner != zone {
        return Err(at(format!(
            "key for zone {}, expected {zone}",
            dnskey.owner
        )));
    }
    if name.zone != zone {
        return Err(LocatedError::new(
            &key_file,
            0,
            format!("the file name is for zone {}, expected {zone}", name.zone),
        ));
    }
    let Some(algorithm) = KeyAlgorithm::from_number(dnskey.algorithm) else {
        return Err(at(format!(
            "unsupported algorithm {} (meridian supports 8, 13 and 15)",
            dnskey.algorithm
        )));
    };
    if name.algorithm != dnskey.algorithm {
        return Err(at(format!(
            "algorithm mismatch: the record has {} but the file name says {}",
            dnskey.algorithm, name.algorithm
        )));
    }
    let tag = dnskey.key_tag();
    if tag != name.tag {
        return Err(at(format!(
            "key tag mismatch: the record's tag is {tag} but the file name says {}",
            name.tag
        )));
    }

    let text = read(&private_file)?;
    let mut warnings = Vec::new();
    if let Some(w) = readable_by_others(&private_file) {
        warnings.push(w);
    }
    let private = Private::parse(&private_file, &text)?;
    let Some((alg_text, alg_line)) = private.get("Algorithm") else {
        return Err(LocatedError::new(&private_file, 0, "no `Algorithm:` field"));
    };
    let private_alg = alg_text
        .split_whitespace()
        .next()
        .and_then(|a| a.parse::<u8>().ok());
    if private_alg != Some(dnskey.algorithm) {
        return Err(LocatedError::new(
            &private_file,
            alg_line,
            format!(
                "algorithm mismatch: `{alg_text}` here but {} in {}",
                algorithm,
                key_file.display()
            ),
        ));
    }
    let timing = private.timing(&private_file)?;
    let mismatch = || {
        LocatedError::new(
            &private_file,
            0,
            format!(
                "the private key does not match the public key in {}",
                key_file.display()
            ),
        )
    };
    let rng = SystemRandom::new();
    let signer: Box<dyn SigningKey> = match algorithm {
        KeyAlgorithm::EcdsaP256Sha256 => {
            let d = private.base64(&private_file, "PrivateKey")?;
            let mut public = vec![4];
            public.extend_from_slice(&dnskey.public_key);
            let pair = EcdsaKeyPair::from_private_key_and_public_key(
                &ECDSA_P256_SHA256_FIXED_SIGNING,
                &d,
                &public,
                &rng,
            )
            .map_err(|_| mismatch())?;
            Box::new(EcdsaSigningKey::from_ecdsa(pair, algorithm.hickory()))
        }
        KeyAlgorithm::Ed25519 => {
            let seed = private.base64(&private_file, "PrivateKey")?;
            let pair = Ed25519KeyPair::from_seed_and_public_key(&seed, &dnskey.public_key)
                .map_err(|_| mismatch())?;
            Box::new(Ed25519SigningKey::from_ed25519(pair))
        }
        KeyAlgorithm::RsaSha256 => {
            let mut parts = Vec::new();
            for f in [
                "Modulus",
                "PublicExponent",
                "PrivateExponent",
                "Prime1",
                "Prime2",
                "Exponent1",
                "Exponent2",
                "Coefficient",
            ] {
                parts.push(private.base64(&private_file, f)?);
            }
            let der = pkcs1_der(&parts);
            let key =
                RsaSigningKey::from_pkcs1(&PrivatePkcs1KeyDer::from(der), Algorithm::RSASHA256)
                    .map_err(|e| {
                        LocatedError::new(&private_file, 0, format!("RSA key rejected: {e}"))
                    })?;
            Box::new(key)
        }
    };
    match signer.to_public_key() {
        Ok(p) if p.public_bytes() == dnskey.public_key.as_slice() => {}
        _ => return Err(mismatch()),
    }
    let key = KeyPair {
        key_file: key_file.clone(),
        private_file: private_file.clone(),
        dnskey,
        algorithm,
        tag,
        timing,
        signer,
    };
    // The proof: a signature the DNSKEY's public key verifies.
    let mut probe = [0u8; 32];
    rng.fill(&mut probe).map_err(|_| mismatch())?;
    let sig = key
        .sign(&probe)
        .map_err(|e| LocatedError::new(&key.private_file, 0, format!("cannot sign: {e}")))?;
    if !key.verify(&probe, &sig) {
        return Err(mismatch());
    }
    Ok(Loaded { key, warnings })
}

/// A warning when `path` is readable by other users.
fn readable_by_others(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode();
    (mode & 0o004 != 0).then(|| {
        format!(
            "{}: private key file is readable by other users (mode {:o}); chmod 600 it",
            path.display(),
            mode & 0o777
        )
    })
}

/// PKCS#1 `RSAPrivateKey` DER from BIND's eight fields (n, e, d, p, q,
/// dp, dq, qinv), for ring.
fn pkcs1_der(parts: &[Vec<u8>]) -> Vec<u8> {
    fn len(out: &mut Vec<u8>, n: usize) {
        if n < 0x80 {
            out.push(n as u8);
        } else {
            let b = n.to_be_bytes();
            let skip = b.iter().take_while(|&&x| x == 0).count();
            out.push(0x80 | (b.len() - skip) as u8);
            out.extend_from_slice(&b[skip..]);
        }
    }
    fn int(out: &mut Vec<u8>, v: &[u8]) {
        let v = &v[v
            .iter()
            .take_while(|&&x| x == 0)
            .count()
            .min(v.len().saturating_sub(1))..];
        let pad = v.first().is_some_and(|&b| b & 0x80 != 0);
        out.push(0x02);
        len(out, v.len() + usize::from(pad));
        if pad {
            out.push(0);
        }
        out.extend_from_slice(v);
    }
    let mut body = Vec::new();
    int(&mut body, &[0]);
    for p in parts {
        int(&mut body, p);
    }
    let mut out = vec![0x30];
    len(&mut out, body.len());
    out.extend(body);
    out
}

/// The algorithms `meridian dnssec keygen` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenAlgorithm {
    /// 13.
    EcdsaP256,
    /// 15.
    Ed25519,
}

/// A new key pair's two files, as text.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The base name: `K<zone>.+<alg>+<tag>`.
    pub base: String,
    /// The DNSKEY record.
    pub dnskey: DnsKey,
    /// The `.key` file.
    pub key_text: String,
    /// The `.private` file.
    pub private_text: String,
}

/// Makes a new key pair for `zone` (flags 257 when `ksk`, else 256); `now`
/// in Unix seconds for the Created/Publish/Activate times.
pub fn generate(
    zone: &str,
    algorithm: GenAlgorithm,
    ksk: bool,
    now: i64,
) -> Result<Generated, String> {
    let zone = absolute(zone);
    if let Some(why) = bad_name(&zone) {
        return Err(format!("bad zone name `{zone}`: {why}"));
    }
    let rng = SystemRandom::new();
    let fail = |_| "the random number generator failed".to_string();
    let (alg, private, public) = match algorithm {
        GenAlgorithm::EcdsaP256 => {
            let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                .map_err(fail)?;
            let pair =
                EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, doc.as_ref(), &rng)
                    .map_err(|_| "ring rejected its own key".to_string())?;
            // The ECPrivateKey inside the PKCS#8 document: version 1, then
            // the 32-octet private key.
            let der = doc.as_ref();
            let at = der
                .windows(5)
                .position(|w| w == [0x02, 0x01, 0x01, 0x04, 0x20])
                .ok_or("no private key in ring's PKCS#8 document")?;
            let d = der[at + 5..at + 37].to_vec();
            let public = pair.public_key().as_ref()[1..].to_vec();
            (KeyAlgorithm::EcdsaP256Sha256, d, public)
        }
        GenAlgorithm::Ed25519 => {
            let mut seed = [0u8; 32];
            rng.fill(&mut seed).map_err(fail)?;
            let pair = Ed25519KeyPair::from_seed_unchecked(&seed)
                .map_err(|_| "ring rejected its own seed".to_string())?;
            (
                KeyAlgorithm::Ed25519,
                seed.to_vec(),
                pair.public_key().as_ref().to_vec(),
            )
        }
    };
    let dnskey = DnsKey {
        owner: zone.clone(),
        flags: if ksk { 257 } else { 256 },
        protocol: 3,
        algorithm: alg.number(),
        public_key: public,
    };
    let tag = dnskey.key_tag();
    let base = KeyName {
        zone: zone.clone(),
        algorithm: alg.number(),
        tag,
    }
    .base();
    let stamp = format_timestamp(now);
    let kind = if ksk { "key-signing" } else { "zone-signing" };
    let key_text = format!(
        "; This is a {kind} key, keyid {tag}, for {zone}\n\
         ; Created: {stamp}\n; Publish: {stamp}\n; Activate: {stamp}\n{}\n",
        dnskey.record()
    );
    let private_text = format!(
        "Private-key-format: v1.3\nAlgorithm: {alg}\nPrivateKey: {}\n\
         Created: {stamp}\nPublish: {stamp}\nActivate: {stamp}\n",
        BASE64.encode(&private)
    );
    Ok(Generated {
        base,
        dnskey,
        key_text,
        private_text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // From RFC 4034 §5.4's example: the DNSKEY of dskey.example.com with tag 60485.
    const RFC_KEY: &str = "dskey.example.com. 86400 IN DNSKEY 256 3 5 \
        AQOeiiR0GOMYkDshWoSKz9XzfwJr1AYtsmx3TGkJaNXVbfi/2pHm822aJ5iI9BMzNXxeYCmZDRD99WYwYqUSdjMmmAphXdvxegXd/M5+X7OrzKBaMbCVdFLUUh6DhweJBjEVv5f2wwjM9XzcnOf+EPbtG9DMBmADjFDc2w/rljwvFw==";

    #[test]
    fn rfc_4034_key_tag() {
        let (k, line) = parse_dnskey(Path::new("t.key"), RFC_KEY).unwrap();
        assert_eq!(line, 1);
        assert_eq!(k.owner, "dskey.example.com.");
        assert_eq!(k.key_tag(), 60485);
        // RFC 4509 §2.2.1's SHA-256 DS of this key.
        assert_eq!(
            k.ds(DigestType::Sha256),
            "dskey.example.com. IN DS 60485 5 2 \
             D4B7D520E7BB5F0F67674A0CCEB1E3E0614B93C4F9E99B8383F6A1E4469DA50A"
        );
    }

    #[test]
    fn dnskey_with_comments_split_base64_and_class() {
        let text = "; comment\n\nExample.Test. IN DNSKEY 257 3 15 \
            WokatUUxUSrJVNcB9iEQGovb8 LeTGGQxAmLWXPb20R0= ;{id = 1}\n";
        let (k, line) = parse_dnskey(Path::new("t.key"), text).unwrap();
        assert_eq!(
            (k.owner.as_str(), k.flags, k.algorithm, line),
            ("example.test.", 257, 15, 3)
        );
        assert_eq!(k.public_key.len(), 32);
    }

    #[test]
    fn dnskey_errors_name_the_line() {
        let e = parse_dnskey(Path::new("a.key"), "\nx. IN DNSKEY 256 3 13 !!!\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().starts_with("a.key:2: bad base64"), "{e}");
        let e = parse_dnskey(Path::new("a.key"), "x. IN A 1.2.3.4\n").unwrap_err();
        assert!(e.to_string().contains("not a DNSKEY"), "{e}");
        let e = parse_dnskey(Path::new("a.key"), "; only\n").unwrap_err();
        assert!(e.to_string().contains("no DNSKEY"), "{e}");
        let e = parse_dnskey(Path::new("a.key"), "a..b. IN DNSKEY 256 3 13 AAAA\n").unwrap_err();
        assert!(e.to_string().contains("empty label"), "{e}");
        let long = format!("{}.test. IN DNSKEY 256 3 13 AAAA", "a".repeat(64));
        let e = parse_dnskey(Path::new("a.key"), &long).unwrap_err();
        assert!(e.to_string().contains("63 octets"), "{e}");
        assert!(generate("a b.test", GenAlgorithm::Ed25519, false, 0).is_err());
        assert!(generate("a..test", GenAlgorithm::Ed25519, false, 0).is_err());
    }

    #[test]
    fn file_names() {
        let n = KeyName::parse("Kexample.test.+013+00360").unwrap();
        assert_eq!(
            (n.zone.as_str(), n.algorithm, n.tag),
            ("example.test.", 13, 360)
        );
        assert_eq!(n.base(), "Kexample.test.+013+00360");
        assert_eq!(KeyName::parse("example.test.+013+00360"), None);
        assert_eq!(KeyName::parse("Kexample.test+013+00360"), None);
        let (k, p) = key_paths(Path::new("d/Kx.+015+00001.private"));
        assert_eq!(
            (k, p),
            (
                "d/Kx.+015+00001.key".into(),
                "d/Kx.+015+00001.private".into()
            )
        );
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp("19700101000000"), Some(0));
        assert_eq!(parse_timestamp("20261201000000"), Some(1_796_083_200));
        assert_eq!(format_timestamp(1_796_083_200), "20261201000000");
        assert_eq!(parse_timestamp("2026120100000"), None);
        assert_eq!(parse_timestamp("20261301000000"), None);
        let t = Timing {
            inactive: Some(100),
            ..Timing::default()
        };
        assert!(t.expired(100) && !t.expired(99));
        assert!(!Timing::default().expired(i64::MAX));
    }

    #[test]
    fn generated_keys_sign_and_verify() {
        for alg in [GenAlgorithm::EcdsaP256, GenAlgorithm::Ed25519] {
            let g = generate("Example.Test", alg, true, 0).unwrap();
            assert_eq!(g.dnskey.flags, 257);
            assert!(g.base.starts_with("Kexample.test.+0"), "{}", g.base);
            let (k, _) = parse_dnskey(Path::new("g.key"), &g.key_text).unwrap();
            assert_eq!(k, g.dnskey);
            assert!(g.private_text.contains("Private-key-format: v1.3\n"));
        }
    }

    #[test]
    fn pkcs1_integers() {
        // 0x80 needs a leading zero; leading zeros are dropped.
        let der = pkcs1_der(&[vec![0x80], vec![0, 1]]);
        assert_eq!(der, [0x30, 10, 2, 1, 0, 2, 2, 0, 0x80, 2, 1, 1]);
    }
}
