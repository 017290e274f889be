//! A config file's text kept beside its parse, so every error names the
//! file and line; relative paths resolve against the file's folder.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use super::file::ConfigFile;
use crate::error::{line_of, LocatedError};

/// A config file read from disk, with the text kept for line numbers.
pub struct Source {
    /// The config file's path, as given.
    pub path: PathBuf,
    /// The file's text.
    pub text: String,
}

impl Source {
    /// Read the config file at `path`.
    pub fn read(path: &Path) -> Result<Source, LocatedError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| LocatedError::new(path, 0, format!("cannot read config: {e}")))?;
        Ok(Source {
            path: path.to_path_buf(),
            text,
        })
    }

    /// Error at the start of a span.
    pub fn err(&self, span: std::ops::Range<usize>, msg: impl Into<String>) -> LocatedError {
        let line = if span.start == 0 && span.end == 0 {
            0
        } else {
            line_of(&self.text, span.start)
        };
        LocatedError::new(&self.path, line, msg)
    }

    /// A path in the config, relative to the config file's folder.
    pub fn resolve(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.path.parent().unwrap_or(Path::new(".")).join(p)
        }
    }

    /// Parse the TOML; an error names the line of the bad key or value.
    pub fn parse(&self) -> Result<ConfigFile, LocatedError> {
        toml::from_str(&self.text).map_err(|e| {
            let line = e.span().map(|s| line_of(&self.text, s.start)).unwrap_or(0);
            LocatedError::new(&self.path, line, e.message().trim().to_string())
        })
    }
}

/// Parse a listen address, accepting `[v6]:port`, `v4:port` and a bare address (port 53).
pub fn parse_listen(s: &str) -> Option<SocketAddr> {
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Some(sa);
    }
    s.trim_matches(|c| c == '[' || c == ']')
        .parse::<IpAddr>()
        .ok()
        .map(|ip| SocketAddr::new(ip, 53))
}
