//! The `[api]` table, checked: who may use the HTTP API. `tokens` names a
//! token file (one token a line: `NAME SCOPE SECRET`, scope `read` or
//! `write`, `#` comments); without it the API takes no writes.
//! `read_needs_token` closes `/metrics` and `/status` to callers without a
//! token; `host_names` lists the names clients may use in `Host` besides
//! the listen address and `localhost`. `metrics_members = false` leaves the
//! per-member and per-check series out of `/metrics` (Prometheus's advice
//! on cardinality: about ten series a member), keeping the pool ones.
//! Errors name the config line, or the token file's line. The daemon's
//! first read of the token file is made as root, before the privilege
//! drop; a reload that cannot read it as the service user keeps that text
//! and warns once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Deserialize;
use toml::Spanned;

use super::Source;
use crate::error::LocatedError;

/// Shortest secret accepted in a token file.
pub const MIN_SECRET: usize = 16;

/// `[api]`, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiCfg {
    /// `[api] tokens`: the token file, relative to the config's folder.
    #[serde(default)]
    pub tokens: Option<Spanned<String>>,
    /// `[api] read_needs_token`: `/metrics` and `/status` need a token too.
    #[serde(default)]
    pub read_needs_token: Option<Spanned<bool>>,
    /// `[api] host_names`: more names accepted in the `Host` header.
    #[serde(default)]
    pub host_names: Vec<Spanned<String>>,
    /// `[api] metrics_members`: `/metrics` has series per member and per
    /// checked entry (default true).
    #[serde(default)]
    pub metrics_members: Option<bool>,
}

/// What a token allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `GET /metrics` and `GET /status`.
    Read,
    /// Reads, and the writes: overrides, reload, stop.
    Write,
}

/// One line of the token file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The token's name, as the audit log shows it.
    pub name: String,
    /// What it allows.
    pub scope: Scope,
    /// The secret a client sends (`Authorization: Bearer SECRET`).
    pub secret: String,
}

/// The checked `[api]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiSettings {
    /// The token file, resolved (None: no tokens, no writes).
    pub token_file: Option<PathBuf>,
    /// Its tokens.
    pub tokens: Vec<Token>,
    /// Reads need a token as well.
    pub read_needs_token: bool,
    /// Names accepted in `Host` besides the listen address and `localhost`
    /// (lower case).
    pub host_names: Vec<String>,
    /// `/metrics` has the per-member and per-check families.
    pub metrics_members: bool,
    /// Things to tell the operator at start and in `check` (e.g. a token
    /// file other users can read).
    pub warnings: Vec<String>,
}

impl Default for ApiSettings {
    fn default() -> ApiSettings {
        ApiSettings {
            token_file: None,
            tokens: Vec::new(),
            read_needs_token: false,
            host_names: Vec::new(),
            metrics_members: true,
            warnings: Vec::new(),
        }
    }
}

impl ApiSettings {
    /// Check `[api]` and read its token file.
    pub fn from_cfg(src: &Source, c: &ApiCfg) -> Result<ApiSettings, LocatedError> {
        let mut out = ApiSettings {
            metrics_members: c.metrics_members.unwrap_or(true),
            ..ApiSettings::default()
        };
        if let Some(t) = &c.tokens {
            if t.get_ref().trim().is_empty() {
                return Err(src.err(t.span(), "tokens must name a token file"));
            }
            let path = src.resolve(t.get_ref());
            let text = read_kept(&path, &mut out.warnings).map_err(|e| {
                src.err(
                    t.span(),
                    format!("cannot read token file {}: {e}", path.display()),
                )
            })?;
            out.tokens = parse_tokens(&path, &text)?;
            if out.tokens.is_empty() {
                return Err(src.err(
                    t.span(),
                    format!("token file {} holds no token", path.display()),
                ));
            }
            if let Some(w) = world_readable(&path) {
                out.warnings.push(w);
            }
            out.token_file = Some(path);
        }
        if let Some(r) = &c.read_needs_token {
            if *r.get_ref() && c.tokens.is_none() {
                return Err(src.err(
                    r.span(),
                    "read_needs_token = true needs a token file (tokens = \"PATH\")",
                ));
            }
            out.read_needs_token = *r.get_ref();
        }
        for h in &c.host_names {
            let v = h.get_ref().trim().to_ascii_lowercase();
            let ok = !v.is_empty()
                && v.chars().all(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']')
                });
            if !ok {
                return Err(src.err(
                    h.span(),
                    format!(
                        "bad host name {:?} (a DNS name or an address, no port)",
                        h.get_ref()
                    ),
                ));
            }
            out.host_names
                .push(v.trim_matches(|c| c == '[' || c == ']').to_string());
        }
        Ok(out)
    }

    /// The token whose secret is `secret` (compared in constant time).
    pub fn token(&self, secret: &str) -> Option<&Token> {
        let mut found = None;
        for t in &self.tokens {
            if ct_eq(t.secret.as_bytes(), secret.as_bytes()) {
                found = Some(t);
            }
        }
        found
    }
}

/// Token files this process read, by path: (text, whether it said it
/// cannot read the file now).
static TOKEN_FILES: Mutex<BTreeMap<PathBuf, (String, bool)>> = Mutex::new(BTreeMap::new());

/// The token file at `path`. The first read is the daemon's, as root and
/// before the privilege drop; a reload that cannot read it as the service
/// user keeps the text read before and warns once (in `warnings`), naming
/// the file. Other errors are errors.
fn read_kept(path: &Path, warnings: &mut Vec<String>) -> std::io::Result<String> {
    let mut kept = TOKEN_FILES.lock().unwrap_or_else(|e| e.into_inner());
    match std::fs::read_to_string(path) {
        Ok(text) => {
            kept.insert(path.to_path_buf(), (text.clone(), false));
            Ok(text)
        }
        Err(e) => match kept.get_mut(path) {
            Some((text, warned)) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                if !*warned {
                    *warned = true;
                    warnings.push(format!(
                        "token file {} cannot be read now ({e}): keeping the tokens read before; a change to it applies at restart, or make it readable by this user",
                        path.display()
                    ));
                }
                Ok(text.clone())
            }
            _ => Err(e),
        },
    }
}

/// Equal, in time that depends on the lengths only.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Parse a token file: `NAME SCOPE SECRET` a line, `#` comments, blank
/// lines ignored. Errors name the file and line.
pub fn parse_tokens(path: &Path, text: &str) -> Result<Vec<Token>, LocatedError> {
    let mut out: Vec<Token> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let err = |m: String| LocatedError::new(path, i + 1, m);
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let [name, scope, secret] = f[..] else {
            return Err(err(format!(
                "a token line is NAME SCOPE SECRET (3 fields), found {}",
                f.len()
            )));
        };
        let scope = match scope {
            "read" => Scope::Read,
            "write" => Scope::Write,
            s => return Err(err(format!("scope {s:?} is neither read nor write"))),
        };
        if secret.len() < MIN_SECRET {
            return Err(err(format!(
                "the secret of token {name:?} is {} characters, fewer than {MIN_SECRET}",
                secret.len()
            )));
        }
        if out.iter().any(|t| t.name == name) {
            return Err(err(format!("token {name:?} is named twice")));
        }
        if out.iter().any(|t| t.secret == secret) {
            return Err(err(format!(
                "token {name:?} has the secret of another token"
            )));
        }
        out.push(Token {
            name: name.to_string(),
            scope,
            secret: secret.to_string(),
        });
    }
    Ok(out)
}

/// A warning when users other than the owner (and group) can read `path`.
fn world_readable(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode();
    (mode & 0o004 != 0).then(|| {
        format!(
            "token file {} is readable by every user (mode {:o}): chmod 600 it",
            path.display(),
            mode & 0o777
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_lines() {
        let p = Path::new("t");
        let ok = parse_tokens(
            p,
            "# ops\nalice write 0123456789abcdef0123\n\nprom read fedcba9876543210ff # scraper\n",
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!((ok[1].name.as_str(), ok[1].scope), ("prom", Scope::Read));
        let e =
            parse_tokens(p, "a write 0123456789abcdef\nb admin 0123456789abcdefg\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(parse_tokens(p, "a write short").is_err());
        assert!(parse_tokens(p, "a write").is_err());
        assert!(ct_eq(b"abc", b"abc") && !ct_eq(b"abc", b"abd") && !ct_eq(b"a", b"ab"));
    }
}
