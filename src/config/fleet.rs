//! `[fleet]`, checked: fleet mode (#18), where several meridian servers
//! share their operator state through etcd. Without the table a server
//! stands alone and needs no etcd. With it: the etcd endpoints, this
//! node's name, the key prefix, and how to authenticate to etcd (a client
//! certificate, or a user and a password file). Every error names the
//! config line.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::Source;
use crate::error::LocatedError;

/// `[fleet]`, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetCfg {
    /// `etcd`: client URLs of the etcd cluster (`http://` or `https://`).
    pub etcd: Spanned<Vec<Spanned<String>>>,
    /// `node`: this server's name in the fleet (unique per node).
    pub node: Spanned<String>,
    /// `prefix`: where the fleet's keys live (default `/meridian/`).
    #[serde(default)]
    pub prefix: Option<Spanned<String>>,
    /// `ca`: CA certificate (PEM) that signed the etcd servers' certificates.
    #[serde(default)]
    pub ca: Option<Spanned<String>>,
    /// `cert` and `key`: this node's client certificate and key (PEM).
    #[serde(default)]
    pub cert: Option<Spanned<String>>,
    /// See `cert`.
    #[serde(default)]
    pub key: Option<Spanned<String>>,
    /// `user`: etcd user name (with `password_file`).
    #[serde(default)]
    pub user: Option<Spanned<String>>,
    /// `password_file`: a file holding the etcd user's password.
    #[serde(default)]
    pub password_file: Option<Spanned<String>>,
    /// `timeout`: connecting and each request to etcd (default "2s").
    #[serde(default)]
    pub timeout: Option<Spanned<String>>,
    /// `state_dir`: where pushed config revisions are written (default
    /// `fleet-state` beside this config).
    #[serde(default)]
    pub state_dir: Option<Spanned<String>>,
    /// `checkers`: how many live nodes probe each (member, check) (default 3).
    #[serde(default)]
    pub checkers: Option<Spanned<u32>>,
    /// `fleet_grace`: how long a node cut off from etcd trusts the last
    /// shared results before it probes every member itself (default "10s").
    #[serde(default)]
    pub fleet_grace: Option<Spanned<String>>,
    /// `lease`: how long a node stays in the fleet (a registered node, a
    /// checker) after its last keep-alive (default "5s", 2s to 300s).
    #[serde(default)]
    pub lease: Option<Spanned<String>>,
    /// `keep_revisions`: how many pushed revisions are kept, in etcd (by
    /// the pusher) and under `state_dir` (by each node) (default 5).
    #[serde(default)]
    pub keep_revisions: Option<Spanned<i64>>,
    /// `compact_history`: whether `fleet push` compacts etcd's history
    /// below the oldest kept revision (default true; cluster-wide).
    #[serde(default)]
    pub compact_history: Option<bool>,
}

/// TLS to etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetTls {
    /// CA certificate file.
    pub ca: Option<PathBuf>,
    /// Client certificate and key files.
    pub identity: Option<(PathBuf, PathBuf)>,
}

/// The checked `[fleet]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetSettings {
    /// etcd client URLs.
    pub endpoints: Vec<String>,
    /// This node's name.
    pub node: String,
    /// Key prefix, starting and ending with `/`.
    pub prefix: String,
    /// TLS settings, when any is given.
    pub tls: Option<FleetTls>,
    /// etcd user and the file with its password.
    pub user: Option<(String, PathBuf)>,
    /// Connect and request timeout.
    pub timeout: Duration,
    /// Where pushed config revisions are written.
    pub state_dir: PathBuf,
    /// This node's own config file (its `[server]`, `[api]`, `[fleet]`
    /// and key files stay local when a pushed config is served).
    pub local_config: PathBuf,
    /// Nodes that probe each (member, check).
    pub checkers: usize,
    /// Time cut off from etcd before probing every member locally.
    pub grace: Duration,
    /// The etcd lease TTL, in whole seconds.
    pub lease_secs: i64,
    /// Pushed revisions kept in etcd and under the state dir.
    pub keep_revisions: usize,
    /// Whether `fleet push` compacts etcd's history (cluster-wide).
    pub compact_history: bool,
}

/// Check `[fleet]`.
pub fn check(src: &Source, c: &FleetCfg) -> Result<FleetSettings, LocatedError> {
    let endpoints: Vec<String> = c
        .etcd
        .get_ref()
        .iter()
        .map(|e| {
            let u = e.get_ref().trim();
            let rest = u
                .strip_prefix("http://")
                .or_else(|| u.strip_prefix("https://"));
            match rest {
                Some(h) if !h.is_empty() && !h.contains('/') => Ok(u.to_string()),
                _ => Err(src.err(
                    e.span(),
                    format!(
                        "fleet etcd endpoint {u:?} is not http://HOST:PORT or https://HOST:PORT"
                    ),
                )),
            }
        })
        .collect::<Result<_, _>>()?;
    if endpoints.is_empty() {
        return Err(src.err(
            c.etcd.span(),
            "fleet etcd is empty: list the etcd client URLs",
        ));
    }
    let node = c.node.get_ref().trim().to_string();
    let ok = |b: u8| b.is_ascii_alphanumeric() || b"-_.".contains(&b);
    if node.is_empty() || node.len() > 63 || !node.bytes().all(ok) {
        return Err(src.err(
            c.node.span(),
            format!("fleet node {node:?} must be 1 to 63 letters, digits, '-', '_' or '.'"),
        ));
    }
    let prefix = match &c.prefix {
        None => "/meridian/".to_string(),
        Some(p) => {
            let v = p.get_ref().trim();
            if !v.starts_with('/') || !v.ends_with('/') || v.len() < 2 {
                return Err(src.err(
                    p.span(),
                    format!("fleet prefix {v:?} must start and end with '/', as \"/meridian/\""),
                ));
            }
            v.to_string()
        }
    };
    let file = |v: &Option<Spanned<String>>| -> Result<Option<PathBuf>, LocatedError> {
        match v {
            None => Ok(None),
            Some(s) => {
                let p = src.resolve(s.get_ref());
                if !p.is_file() {
                    return Err(src.err(
                        s.span(),
                        format!("fleet: {} is not a readable file", p.display()),
                    ));
                }
                Ok(Some(p))
            }
        }
    };
    let ca = file(&c.ca)?;
    let identity = match (file(&c.cert)?, file(&c.key)?) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => {
            let span = c.cert.as_ref().or(c.key.as_ref()).map(|s| s.span());
            return Err(src.err(
                span.unwrap_or(c.node.span()),
                "fleet cert and key go together: give both or neither",
            ));
        }
    };
    let tls = (ca.is_some() || identity.is_some()).then_some(FleetTls { ca, identity });
    let user = match (&c.user, file(&c.password_file)?) {
        (Some(u), Some(p)) => Some((u.get_ref().clone(), p)),
        (None, None) => None,
        _ => {
            let span = c
                .user
                .as_ref()
                .or(c.password_file.as_ref())
                .map(|s| s.span());
            return Err(src.err(
                span.unwrap_or(c.node.span()),
                "fleet user and password_file go together: give both or neither",
            ));
        }
    };
    let timeout = match &c.timeout {
        None => Duration::from_secs(2),
        Some(t) => humantime::parse_duration(t.get_ref().trim())
            .ok()
            .filter(|d| !d.is_zero() && *d <= Duration::from_secs(60))
            .ok_or_else(|| {
                src.err(
                    t.span(),
                    format!(
                        "fleet timeout {:?} must be a duration up to 60s, as \"2s\"",
                        t.get_ref()
                    ),
                )
            })?,
    };
    // Absolute: a served revision lives elsewhere and reloads read it.
    let local_config = std::fs::canonicalize(&src.path).unwrap_or(src.path.clone());
    let dir = local_config.parent().unwrap_or(std::path::Path::new("/"));
    let state_dir = dir.join(
        c.state_dir
            .as_ref()
            .map_or("fleet-state", |s| s.get_ref().as_str()),
    );
    let checkers = match &c.checkers {
        None => 3,
        Some(k) if (1..=16).contains(k.get_ref()) => *k.get_ref() as usize,
        Some(k) => {
            return Err(src.err(
                k.span(),
                format!("fleet checkers must be from 1 to 16, not {}", k.get_ref()),
            ))
        }
    };
    let grace = match &c.fleet_grace {
        None => Duration::from_secs(10),
        Some(g) => humantime::parse_duration(g.get_ref().trim())
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                src.err(
                    g.span(),
                    format!(
                        "fleet fleet_grace {:?} is not a duration, as \"10s\"",
                        g.get_ref()
                    ),
                )
            })?,
    };
    let lease_secs = match &c.lease {
        None => 5,
        Some(l) => humantime::parse_duration(l.get_ref().trim())
            .ok()
            .filter(|d| d.subsec_nanos() == 0 && (2..=300).contains(&d.as_secs()))
            .map(|d| d.as_secs() as i64)
            .ok_or_else(|| {
                src.err(
                    l.span(),
                    format!(
                        "fleet lease {:?} must be whole seconds from 2s to 300s, as \"5s\"",
                        l.get_ref()
                    ),
                )
            })?,
    };
    let keep_revisions = match &c.keep_revisions {
        None => 5,
        Some(k) if (1..=1000).contains(k.get_ref()) => *k.get_ref() as usize,
        Some(k) => {
            return Err(src.err(
                k.span(),
                format!(
                    "fleet keep_revisions must be from 1 to 1000, not {}",
                    k.get_ref()
                ),
            ))
        }
    };
    Ok(FleetSettings {
        keep_revisions,
        compact_history: c.compact_history.unwrap_or(true),
        checkers,
        grace,
        lease_secs,
        endpoints,
        node,
        prefix,
        tls,
        user,
        timeout,
        state_dir,
        local_config,
    })
}
