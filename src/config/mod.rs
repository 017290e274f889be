//! The TOML configuration file: listeners, zones, pools, names bound to pools
//! and geo rules. Parsing is strict: unknown keys are errors, and every error
//! names the file and line.

pub mod settings;

pub use settings::{RrlConfig, ServerSettings};

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::error::{line_of, LocatedError};

/// The parsed file, before it is checked against zones and the geo database.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub server: ServerCfg,
    #[serde(default)]
    pub geo: Option<GeoCfg>,
    #[serde(default)]
    pub zone: Vec<Spanned<ZoneCfg>>,
    #[serde(default)]
    pub pool: BTreeMap<String, Spanned<PoolCfg>>,
    #[serde(default)]
    pub name: BTreeMap<String, Spanned<NameCfg>>,
    #[serde(default)]
    pub check: BTreeMap<String, Spanned<CheckCfg>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerCfg {
    #[serde(default = "default_listen")]
    pub listen: Vec<Spanned<String>>,
    /// UDP worker threads; 0 means one per core.
    #[serde(default)]
    pub workers: usize,
    /// Largest UDP response we send and the size we advertise (RFC 6891 §6.2.5).
    #[serde(default = "default_payload")]
    pub edns_udp_payload: Spanned<u16>,
    /// tracing filter, e.g. "info" or "meridian=debug".
    #[serde(default = "default_log")]
    pub log: String,
    #[serde(default = "default_tcp_idle")]
    pub tcp_idle_timeout_ms: u64,
    #[serde(default = "default_tcp_max")]
    pub tcp_max_connections: usize,
    /// HTTP listener for /metrics and /status.
    #[serde(default)]
    pub http_listen: Option<Spanned<String>>,
    /// Time allowed to receive the rest of a TCP query once its first octet
    /// arrived, and to send one response (never more than the idle timeout).
    #[serde(default = "default_tcp_read")]
    pub tcp_read_timeout_ms: u64,
    /// Most queries answered on one TCP connection before it is closed (0: no cap).
    #[serde(default = "default_tcp_queries")]
    pub tcp_max_queries: usize,
    /// Started as root: bind the sockets, then switch to this user and its group.
    #[serde(default)]
    pub user: Option<Spanned<String>>,
    /// Started as root: keep running as root (`user` is then not applied)
    /// instead of refusing when there is no `user`.
    #[serde(default)]
    pub allow_root: bool,
    /// Response rate limiting (`[server.rrl]`); off when absent.
    #[serde(default)]
    pub rrl: Option<Spanned<RrlCfg>>,
}

/// `[server.rrl]`: responses per second per client prefix, over UDP only.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RrlCfg {
    pub responses_per_second: Spanned<u32>,
    /// Every N-th limited response is sent truncated (TC=1); 0 drops them all.
    #[serde(default)]
    pub slip: Option<Spanned<u32>>,
    #[serde(default)]
    pub ipv4_prefix: Option<Spanned<u8>>,
    #[serde(default)]
    pub ipv6_prefix: Option<Spanned<u8>>,
    /// Buckets per UDP worker (rounded up to a power of two).
    #[serde(default)]
    pub table_size: Option<Spanned<usize>>,
}

impl Default for ServerCfg {
    fn default() -> Self {
        ServerCfg {
            listen: default_listen(),
            workers: 0,
            edns_udp_payload: default_payload(),
            log: default_log(),
            tcp_idle_timeout_ms: default_tcp_idle(),
            tcp_max_connections: default_tcp_max(),
            http_listen: None,
            tcp_read_timeout_ms: default_tcp_read(),
            tcp_max_queries: default_tcp_queries(),
            user: None,
            allow_root: false,
            rrl: None,
        }
    }
}

fn default_listen() -> Vec<Spanned<String>> {
    vec![Spanned::new(0..0, "127.0.0.1:5380".to_string())]
}
fn default_payload() -> Spanned<u16> {
    Spanned::new(0..0, 1232)
}
fn default_log() -> String {
    "info".into()
}
fn default_tcp_idle() -> u64 {
    10_000
}
fn default_tcp_max() -> usize {
    512
}
fn default_tcp_read() -> u64 {
    2_000
}
fn default_tcp_queries() -> usize {
    10_000
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeoCfg {
    pub database: Spanned<String>,
    #[serde(default = "default_schema")]
    pub schema: Spanned<String>,
}

fn default_schema() -> Spanned<String> {
    Spanned::new(0..0, "auto".into())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneCfg {
    pub origin: String,
    pub file: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolCfg {
    pub members: Vec<Spanned<MemberCfg>>,
    /// Coordinates (latitude, longitude) for nearest-pool geo rules.
    #[serde(default)]
    pub location: Option<[f64; 2]>,
    /// Default health check for members (a key of `[check]`).
    #[serde(default)]
    pub check: Option<Spanned<String>>,
    /// Members that must be up for the pool to count as up: a count (>= 1) or a fraction (< 1).
    #[serde(default)]
    pub min_up: Option<f64>,
}

/// A pool member: `"192.0.2.1"` or `{ address = "192.0.2.1", weight = 5 }`.
#[derive(Debug)]
pub enum MemberCfg {
    Addr(String),
    Full {
        address: String,
        weight: Option<i64>,
        check: Option<String>,
        /// Port the health check connects to, if it differs from the check's.
        port: Option<u16>,
    },
}

/// The table form of a member; strict, so a misspelt key is an error.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemberTable {
    address: String,
    #[serde(default)]
    weight: Option<i64>,
    #[serde(default)]
    check: Option<String>,
    #[serde(default)]
    port: Option<u16>,
}

// Hand-written rather than `untagged`, so errors name the bad key or value
// (and its line) instead of "did not match any variant".
impl<'de> Deserialize<'de> for MemberCfg {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = MemberCfg;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an address string or a table { address, weight, check, port }")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<MemberCfg, E> {
                Ok(MemberCfg::Addr(s.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<MemberCfg, A::Error> {
                let t = MemberTable::deserialize(serde::de::value::MapAccessDeserializer::new(m))?;
                Ok(MemberCfg::Full {
                    address: t.address,
                    weight: t.weight,
                    check: t.check,
                    port: t.port,
                })
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NameCfg {
    /// A plain pool-backed name.
    #[serde(default)]
    pub pool: Option<Spanned<String>>,
    /// A geo-balanced name.
    #[serde(default)]
    pub geo: Option<GeoRulesCfg>,
    #[serde(default = "default_mode")]
    pub mode: Spanned<String>,
    /// How many members `some` returns.
    #[serde(default)]
    pub count: Option<Spanned<i64>>,
    #[serde(default)]
    pub ttl: Option<Spanned<i64>>,
    #[serde(default)]
    pub degraded_ttl: Option<Spanned<i64>>,
    #[serde(default)]
    pub when_all_down: Option<Spanned<String>>,
}

fn default_mode() -> Spanned<String> {
    Spanned::new(0..0, "all".into())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeoRulesCfg {
    pub default: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub nets: BTreeMap<String, Vec<Spanned<String>>>,
    #[serde(default)]
    pub subdivision: BTreeMap<String, Vec<Spanned<String>>>,
    #[serde(default)]
    pub country: BTreeMap<String, Vec<Spanned<String>>>,
    #[serde(default)]
    pub continent: BTreeMap<String, Vec<Spanned<String>>>,
    /// Nearest mode: pools with a `location`, ordered by distance.
    #[serde(default)]
    pub nearest: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CheckCfg {
    /// `tcp`, `http`, `https` or `none`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub interval_ms: Option<u64>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// `interval_ms` in seconds (`interval = 10`, `interval = 0.5`).
    #[serde(default)]
    pub interval: Option<f64>,
    /// `timeout_ms` in seconds.
    #[serde(default)]
    pub timeout: Option<f64>,
    #[serde(default)]
    pub rise: Option<u32>,
    #[serde(default)]
    pub fall: Option<u32>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub expect_status: Option<Vec<String>>,
    #[serde(default)]
    pub expect_body: Option<String>,
    #[serde(default)]
    pub tls_verify: Option<bool>,
    #[serde(default)]
    pub unknown_is_up: Option<bool>,
}

/// A config file read from disk, with the text kept for line numbers.
pub struct Source {
    pub path: PathBuf,
    pub text: String,
}

impl Source {
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
