//! `[[zone]]`: the served zones, each loaded from its master file, or kept
//! from the running state when its files have not changed.

use std::sync::Arc;

use hickory_proto::rr::Name;
use toml::Spanned;

use super::dnssec::ZoneDnssec;
use super::{Source, ZoneCfg};
use crate::error::LocatedError;
use crate::zone::{NameMap, Zone};

/// The served zones as one build has them.
pub struct Zones {
    /// The zones, in config order.
    pub list: Vec<Arc<Zone>>,
    /// Each apex (lower-cased wire) to its place in `list`.
    pub index: NameMap<usize>,
    /// How many were read from their files (the others were kept).
    pub loaded: usize,
    /// Each zone's checked `dnssec` table, indexed like `list` (None:
    /// unsigned). Its keys are read again by every build.
    pub dnssec: Vec<Option<Arc<ZoneDnssec>>>,
    /// Warnings about the keys, each `file:line: warning: ...`.
    pub warnings: Vec<String>,
}

/// The zones, the index of each apex (lower-cased wire) in the list, and
/// how many were read from their files. `keep` is the running state's zone
/// list when it may be reused: a zone at the same place, with the same
/// origin and file, whose files all look unchanged, is shared instead of
/// read again. A zone listed twice, a bad origin, or no zone at all is an
/// error, and so is a `dnssec` table that does not check (see
/// [`super::dnssec::check`]).
pub fn zones(
    src: &Source,
    cfg: &[Spanned<ZoneCfg>],
    keep: Option<&[Arc<Zone>]>,
) -> Result<Zones, LocatedError> {
    // Zones. A config that serves nothing is almost always a file caught
    // mid-write, so it is refused rather than answered with REFUSED.
    if cfg.is_empty() {
        return Err(LocatedError::new(&src.path, 0, "no [[zone]] is configured"));
    }
    let mut zones: Vec<Arc<Zone>> = Vec::new();
    let mut zone_index = NameMap::default();
    let mut loaded = 0;
    let mut dnssec = Vec::new();
    let mut warnings = Vec::new();
    let now = super::dnssec::now();
    for (i, z) in cfg.iter().enumerate() {
        let zc = z.get_ref();
        let origin = Name::from_ascii(&zc.origin)
            .map(|mut n| {
                n.set_fqdn(true);
                n
            })
            .map_err(|e| src.err(z.span(), format!("bad zone origin {:?}: {e}", zc.origin)))?;
        let file = src.resolve(zc.file.get_ref());
        let kept = keep.and_then(|k| k.get(i)).filter(|old| {
            old.origin == crate::zone::wire_name(&origin)
                && old.sources.first().is_some_and(|s| s.path == file)
                && old.sources_unchanged()
        });
        let zone = match kept {
            Some(old) => old.clone(),
            None => {
                // A file that cannot be opened is the config's error: name
                // its line and the path as resolved from it.
                if let Err(e) = std::fs::File::open(&file) {
                    let full = std::path::absolute(&file).unwrap_or_else(|_| file.clone());
                    return Err(src.err(
                        zc.file.span(),
                        format!(
                            "zone {}: cannot read file {:?} ({}): {e}",
                            zc.origin,
                            zc.file.get_ref(),
                            full.display()
                        ),
                    ));
                }
                loaded += 1;
                Arc::new(Zone::load(&origin, &file)?)
            }
        };
        if zone_index
            .insert(zone.origin.clone(), zones.len())
            .is_some()
        {
            return Err(src.err(
                z.span(),
                format!("zone {} is listed twice", zone.origin_text),
            ));
        }
        let signed = match &zc.dnssec {
            Some(d) => Some(Arc::new(super::dnssec::check(
                src,
                &zone.origin_text,
                d,
                now,
                &mut warnings,
            )?)),
            None => None,
        };
        dnssec.push(signed);
        zones.push(zone);
    }

    Ok(Zones {
        list: zones,
        index: zone_index,
        loaded,
        dnssec,
        warnings,
    })
}
