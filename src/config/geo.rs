//! `[geo]`: the MaxMind-format database geo rules look clients up in.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use super::{GeoCfg, Source};
use crate::error::LocatedError;
use crate::geo::{GeoDb, Schema};

/// The checked `[geo]` table: where the database is and how to read it.
/// Opened only when a table must be built (or the file changed).
#[derive(Debug, Clone)]
pub struct GeoSource {
    /// The database file, resolved against the config's folder.
    pub path: PathBuf,
    /// How its records are laid out.
    pub schema: Schema,
    span: Range<usize>,
}

impl GeoSource {
    /// Open (map and check) the database; the error names the file.
    pub fn open(&self, src: &Source) -> Result<Arc<GeoDb>, LocatedError> {
        GeoDb::open(&self.path, self.schema)
            .map(Arc::new)
            .map_err(|e| src.err(self.span.clone(), e))
    }
}

/// Check `[geo]`, if the config has one.
pub fn source(src: &Source, cfg: Option<&GeoCfg>) -> Result<Option<GeoSource>, LocatedError> {
    let Some(g) = cfg else { return Ok(None) };
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
    Ok(Some(GeoSource {
        path: src.resolve(g.database.get_ref()),
        schema,
        span: g.database.span(),
    }))
}
