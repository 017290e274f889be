//! `[[zone]]`: the served zones, each loaded from its master file.

use hickory_proto::rr::Name;
use toml::Spanned;

use super::{Source, ZoneCfg};
use crate::error::LocatedError;
use crate::zone::{NameMap, Zone};

/// Load every zone; the index maps each apex (lower-cased wire) to its
/// place in the list. A zone listed twice, a bad origin, or no zone at all
/// is an error.
pub fn zones(
    src: &Source,
    cfg: &[Spanned<ZoneCfg>],
) -> Result<(Vec<Zone>, NameMap<usize>), LocatedError> {
    // Zones. A config that serves nothing is almost always a file caught
    // mid-write, so it is refused rather than answered with REFUSED.
    if cfg.is_empty() {
        return Err(LocatedError::new(&src.path, 0, "no [[zone]] is configured"));
    }
    let mut zones = Vec::new();
    let mut zone_index = NameMap::default();
    for z in cfg {
        let zc = z.get_ref();
        let origin = Name::from_ascii(&zc.origin)
            .map(|mut n| {
                n.set_fqdn(true);
                n
            })
            .map_err(|e| src.err(z.span(), format!("bad zone origin {:?}: {e}", zc.origin)))?;
        let file = src.resolve(&zc.file);
        let zone = Zone::load(&origin, &file)?;
        if zone_index
            .insert(zone.origin.clone(), zones.len())
            .is_some()
        {
            return Err(src.err(
                z.span(),
                format!("zone {} is listed twice", zone.origin_text),
            ));
        }
        zones.push(zone);
    }

    Ok((zones, zone_index))
}
