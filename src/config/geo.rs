//! `[geo]`: the MaxMind-format database geo rules look clients up in.

use std::path::PathBuf;
use std::sync::Arc;

use super::{GeoCfg, Source};
use crate::error::LocatedError;
use crate::geo::{GeoDb, Schema};

/// Open the database, if the config has one; the path is kept for reloads.
pub fn database(
    src: &Source,
    cfg: Option<&GeoCfg>,
) -> Result<Option<(Arc<GeoDb>, PathBuf)>, LocatedError> {
    // Geo database.
    Ok(match cfg {
        None => None,
        Some(g) => {
            let schema = match g.schema.get_ref().as_str() {
                "auto" => Schema::Auto,
                "maxmind" => Schema::MaxMind,
                "flat" => Schema::Flat,
                other => {
                    return Err(src.err(
                        g.schema.span(),
                        format!("unknown geo schema {other:?} (auto, maxmind or flat)"),
                    ))
                }
            };
            let p = src.resolve(g.database.get_ref());
            // The error already names the file.
            let db = GeoDb::open(&p, schema).map_err(|e| src.err(g.database.span(), e))?;
            Some((Arc::new(db), p))
        }
    })
}
