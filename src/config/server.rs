//! The `[server]` table, checked: what the process needs to run (listen
//! addresses, workers, TCP limits, the HTTP listener, the user, RRL), as
//! typed values. `meridian check` builds it, so a config it accepts is one
//! `serve` can start with.

use std::net::SocketAddr;

use toml::Spanned;

use super::{parse_listen, RrlCfg, ServerCfg, Source};
use crate::error::LocatedError;

/// The checked `[server]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSettings {
    /// Addresses to serve UDP and TCP on.
    pub listen: Vec<SocketAddr>,
    /// Largest UDP answer, and the size we advertise in OPT.
    pub edns_udp_payload: u16,
    /// The tracing filter.
    pub log: String,
    /// UDP worker threads per address; 0 = one per core.
    pub workers: usize,
    /// Close a TCP connection idle this long (ms).
    pub tcp_idle_timeout_ms: u64,
    /// Most TCP connections at once.
    pub tcp_max_connections: usize,
    /// A started TCP query must finish within this (ms).
    pub tcp_read_timeout_ms: u64,
    /// Queries on one TCP connection before it is closed; 0 = no cap.
    pub tcp_max_queries: usize,
    /// The HTTP API's address, as written (None: off).
    pub http_listen: Option<String>,
    /// Started as root: the user to switch to after binding.
    pub user: Option<String>,
    /// Started as root: stay root.
    pub allow_root: bool,
    /// Response rate limiting, if configured.
    pub rrl: Option<RrlConfig>,
    // Identity (RFC 5001 NSID; CH TXT id.server, hostname.bind, version.bind).
    /// The NSID returned to an empty NSID option; None: off.
    pub nsid: Option<Box<[u8]>>,
    /// The CH TXT id.server / hostname.bind answer; None: REFUSED.
    pub identity: Option<Box<str>>,
    /// The CH TXT version.bind answer; None (the default): REFUSED.
    pub version: Option<Box<str>>,
    /// The dnstap query log; None (the default): off.
    pub query_log: Option<QueryLogConfig>,
}

/// `query_log` and `query_log_sample`, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryLogConfig {
    /// Where the dnstap frames go.
    pub sink: QueryLogSink,
    /// Log one query in this many (1: all).
    pub sample: u32,
}

/// The query log's destination, as `query_log` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueryLogSink {
    /// `file:PATH`: a Frame Streams file, rewritten at start, reopened on
    /// reload when it was renamed (logrotate).
    File(std::path::PathBuf),
    /// `unix:PATH`: a dnstap collector listening on a Unix stream socket
    /// (bidirectional Frame Streams, as Knot, BIND and Unbound send).
    Unix(std::path::PathBuf),
}

impl std::fmt::Display for QueryLogSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryLogSink::File(p) => write!(f, "file:{}", p.display()),
            QueryLogSink::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// Range of `query_log_sample`.
pub const QUERY_LOG_SAMPLE: std::ops::RangeInclusive<i64> = 1..=1_000_000;

/// Most UDP worker threads per listen address (0 means one per core).
pub const MAX_WORKERS: usize = 256;
/// Range of `tcp_idle_timeout_ms` and `tcp_read_timeout_ms`: 0.1 s to 1 h.
/// Below 100 ms a TCP client on a distant network never gets its query in.
pub const TCP_TIMEOUT_MS: std::ops::RangeInclusive<u64> = 100..=3_600_000;
/// Range of `tcp_max_connections` (each open connection holds a 64 KiB buffer).
pub const TCP_MAX_CONNECTIONS: std::ops::RangeInclusive<usize> = 1..=65_536;
/// Most `tcp_max_queries` (0 means no cap).
pub const MAX_TCP_QUERIES: usize = 1_000_000_000;
/// Range of RRL `responses_per_second`.
pub const RRL_RATE: std::ops::RangeInclusive<u32> = 1..=1_000_000;
/// Most RRL `slip` (BIND allows 0..=10 too).
pub const MAX_SLIP: u32 = 10;

/// The levels a `log` filter may name.
const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// Check a `log` filter: comma-separated directives, each a level or
/// `target=level` (tracing's `EnvFilter` syntax). A bare word that is not a
/// level would be read as a target with every level, which leaves all of
/// meridian's own logging off (`log = "debugg"`): refuse it.
pub fn check_log_filter(filter: &str) -> Result<(), String> {
    if filter.trim().is_empty() {
        return Err("log is empty: give a level (trace, debug, info, warn, error or off)".into());
    }
    for d in filter.split(',') {
        let d = d.trim();
        if d.is_empty() {
            return Err(format!("log {filter:?}: empty directive (a stray comma)"));
        }
        let level = match d.rsplit_once('=') {
            Some((target, level)) => {
                if target.trim().is_empty() {
                    return Err(format!("log directive {d:?} names no target before '='"));
                }
                level.trim()
            }
            None => d,
        };
        if !LEVELS.contains(&level.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "log directive {d:?}: {level:?} is not a level (trace, debug, info, warn, error, off); a target is written target=level"
            ));
        }
    }
    tracing_subscriber::EnvFilter::try_new(filter)
        .map(|_| ())
        .map_err(|e| format!("log {filter:?}: {e}"))
}

impl ServerSettings {
    /// Check `[server]`, every key against its range; errors name the line
    /// of the bad key. This is the one place `[server]` is checked: what
    /// passes here `serve` can start with.
    pub fn from_cfg(src: &Source, c: &ServerCfg) -> Result<ServerSettings, LocatedError> {
        let payload = *c.edns_udp_payload.get_ref();
        // Workers keep 4096-octet response buffers; RFC 9715 advises 1232 anyway.
        if !(512..=4096).contains(&payload) {
            return Err(src.err(
                c.edns_udp_payload.span(),
                "edns_udp_payload must be 512..=4096",
            ));
        }
        let mut listen: Vec<SocketAddr> = Vec::new();
        for l in &c.listen {
            match parse_listen(l.get_ref()) {
                Some(a) if listen.contains(&a) => {
                    return Err(src.err(l.span(), format!("listen address {a} is listed twice")))
                }
                Some(a) => listen.push(a),
                None => {
                    return Err(src.err(l.span(), format!("bad listen address {:?}", l.get_ref())))
                }
            }
        }
        if listen.is_empty() {
            return Err(src.err(
                key_span(src, "listen"),
                "listen must name at least one address",
            ));
        }
        let workers = *c.workers.get_ref();
        if workers > MAX_WORKERS {
            return Err(src.err(
                c.workers.span(),
                format!("workers must be 0 (one per core) to {MAX_WORKERS}, not {workers}"),
            ));
        }
        if let Err(e) = check_log_filter(c.log.get_ref()) {
            return Err(src.err(c.log.span(), e));
        }
        for (key, v) in [
            ("tcp_idle_timeout_ms", &c.tcp_idle_timeout_ms),
            ("tcp_read_timeout_ms", &c.tcp_read_timeout_ms),
        ] {
            if !TCP_TIMEOUT_MS.contains(v.get_ref()) {
                return Err(src.err(
                    v.span(),
                    format!(
                        "{key} must be {} to {} (ms), not {}",
                        TCP_TIMEOUT_MS.start(),
                        TCP_TIMEOUT_MS.end(),
                        v.get_ref()
                    ),
                ));
            }
        }
        let conns = &c.tcp_max_connections;
        if !TCP_MAX_CONNECTIONS.contains(conns.get_ref()) {
            return Err(src.err(
                conns.span(),
                format!(
                    "tcp_max_connections must be {} to {}, not {}",
                    TCP_MAX_CONNECTIONS.start(),
                    TCP_MAX_CONNECTIONS.end(),
                    conns.get_ref()
                ),
            ));
        }
        if *c.tcp_max_queries.get_ref() > MAX_TCP_QUERIES {
            return Err(src.err(
                c.tcp_max_queries.span(),
                format!("tcp_max_queries must be 0 (no cap) to {MAX_TCP_QUERIES}"),
            ));
        }
        let http_listen = match &c.http_listen {
            None => None,
            // As `--http-listen none`: the API off, said explicitly.
            Some(h) if h.get_ref().trim().eq_ignore_ascii_case("none") => None,
            Some(h) => match parse_listen(h.get_ref()) {
                Some(_) => Some(h.get_ref().clone()),
                None => {
                    return Err(src.err(
                        h.span(),
                        format!(
                            "bad http_listen address {:?} (ADDR:PORT, e.g. 127.0.0.1:8053; \"none\" or leaving it out turns the API off)",
                            h.get_ref()
                        ),
                    ))
                }
            },
        };
        let user = match &c.user {
            None => None,
            Some(u) if u.get_ref().trim().is_empty() => {
                return Err(src.err(u.span(), "user must name a user (or leave it out)"))
            }
            Some(u) => Some(u.get_ref().clone()),
        };
        Ok(ServerSettings {
            listen,
            edns_udp_payload: payload,
            log: c.log.get_ref().clone(),
            workers,
            tcp_idle_timeout_ms: *c.tcp_idle_timeout_ms.get_ref(),
            tcp_max_connections: *conns.get_ref(),
            tcp_read_timeout_ms: *c.tcp_read_timeout_ms.get_ref(),
            tcp_max_queries: *c.tcp_max_queries.get_ref(),
            http_listen,
            user,
            allow_root: c.allow_root,
            rrl: RrlConfig::from_cfg(src, c.rrl.as_ref())?,
            nsid: nsid(src, c)?,
            identity: identity(src, c)?,
            version: txt_string(src, c.version.as_ref(), "version")?.filter(|v| !v.is_empty()),
            query_log: query_log(src, c)?,
        })
    }
}

/// The span of `key =` in the config text (for a key whose value is a
/// list that may be empty); 0..0 when it is not written.
fn key_span(src: &Source, key: &str) -> std::ops::Range<usize> {
    let mut at = 0;
    for line in src.text.split_inclusive('\n') {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix(key) {
            if rest.trim_start().starts_with('=') {
                let start = at + (line.len() - t.len());
                return start..start + key.len();
            }
        }
        at += line.len();
    }
    0..0
}

/// `query_log = "file:PATH" | "unix:PATH"` and `query_log_sample = N`,
/// in one place.
fn query_log(src: &Source, c: &ServerCfg) -> Result<Option<QueryLogConfig>, LocatedError> {
    let sample = match &c.query_log_sample {
        None => 1,
        Some(n) if QUERY_LOG_SAMPLE.contains(n.get_ref()) => *n.get_ref() as u32,
        Some(n) => {
            return Err(src.err(
                n.span(),
                format!(
                    "query_log_sample must be {} (every query) to {}, not {}",
                    QUERY_LOG_SAMPLE.start(),
                    QUERY_LOG_SAMPLE.end(),
                    n.get_ref()
                ),
            ))
        }
    };
    let Some(q) = &c.query_log else {
        if let Some(n) = &c.query_log_sample {
            return Err(src.err(n.span(), "query_log_sample without query_log"));
        }
        return Ok(None);
    };
    let v = q.get_ref();
    let sink = match v.split_once(':') {
        Some(("file", path)) if !path.is_empty() => QueryLogSink::File(path.into()),
        Some(("unix", path)) => {
            let p = std::path::Path::new(path);
            // Reconnected to for as long as meridian runs: an absolute path
            // names the same socket whatever the working directory.
            if !p.is_absolute() {
                return Err(src.err(
                    q.span(),
                    format!("query_log {v:?}: the unix: socket path must be absolute"),
                ));
            }
            match p.parent() {
                Some(d) if d.is_dir() => {}
                _ => {
                    return Err(src.err(
                        q.span(),
                        format!(
                            "query_log {v:?}: the socket's directory {} does not exist",
                            p.parent().unwrap_or(p).display()
                        ),
                    ))
                }
            }
            if p.file_name().is_none() {
                return Err(src.err(
                    q.span(),
                    format!("query_log {v:?}: name the socket, not a directory"),
                ));
            }
            QueryLogSink::Unix(p.into())
        }
        _ => {
            return Err(src.err(
                q.span(),
                format!(
                    "bad query_log {v:?}: write file:PATH or unix:PATH (leave it out to turn the log off)"
                ),
            ))
        }
    };
    Ok(Some(QueryLogConfig { sink, sample }))
}

/// `nsid` (text) or `nsid_hex`: 1 to 512 octets.
fn nsid(src: &Source, c: &ServerCfg) -> Result<Option<Box<[u8]>>, LocatedError> {
    let (octets, span) = match (&c.nsid, &c.nsid_hex) {
        (Some(_), Some(h)) => return Err(src.err(h.span(), "set nsid or nsid_hex, not both")),
        (Some(t), None) => (t.get_ref().as_bytes().to_vec(), t.span()),
        (None, Some(h)) => {
            let text = h.get_ref();
            let ok = text.len() % 2 == 0 && text.bytes().all(|b| b.is_ascii_hexdigit());
            let octets = (0..text.len() / 2)
                .filter_map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok())
                .collect::<Vec<u8>>();
            if !ok {
                return Err(src.err(h.span(), "nsid_hex must be pairs of hex digits"));
            }
            (octets, h.span())
        }
        (None, None) => return Ok(None),
    };
    if octets.is_empty() || octets.len() > 512 {
        return Err(src.err(span, "the NSID must be 1 to 512 octets"));
    }
    Ok(Some(octets.into()))
}

/// `identity`: default the host name; "" turns the identity queries off.
fn identity(src: &Source, c: &ServerCfg) -> Result<Option<Box<str>>, LocatedError> {
    match txt_string(src, c.identity.as_ref(), "identity")? {
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => Ok(Some(s)),
        None => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            let host = host.trim();
            Ok((!host.is_empty() && host.len() <= 255).then(|| host.into()))
        }
    }
}

/// A value that goes into one TXT string: at most 255 octets.
fn txt_string(
    src: &Source,
    v: Option<&Spanned<String>>,
    key: &str,
) -> Result<Option<Box<str>>, LocatedError> {
    let Some(v) = v else { return Ok(None) };
    if v.get_ref().len() > 255 {
        return Err(src.err(v.span(), format!("{key} must be at most 255 octets")));
    }
    Ok(Some(v.get_ref().as_str().into()))
}

/// Default RRL slip: every 2nd limited response is sent truncated.
pub const DEFAULT_SLIP: u32 = 2;
/// Default RRL IPv4 prefix length: clients in one /24 share a limit.
pub const DEFAULT_V4_PREFIX: u8 = 24;
/// Default RRL IPv6 prefix length: clients in one /56 share a limit.
pub const DEFAULT_V6_PREFIX: u8 = 56;
/// Default RRL buckets per UDP worker.
pub const DEFAULT_TABLE: usize = 65_536;
const MAX_TABLE: usize = 1 << 22;

/// The checked `[server.rrl]` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RrlConfig {
    /// Responses per second per client prefix.
    pub responses_per_second: u32,
    /// Every `slip`-th limited response is sent truncated; 0 = drop all.
    pub slip: u32,
    /// Clients in one IPv4 prefix of this length share a limit.
    pub ipv4_prefix: u8,
    /// Clients in one IPv6 prefix of this length share a limit.
    pub ipv6_prefix: u8,
    /// Buckets per worker, a power of two.
    pub table_size: usize,
    /// The DNS Cookie secret (`cookie_secret`); None: random at start.
    pub cookie_secret: Option<[u8; 16]>,
}

impl RrlConfig {
    /// Check `[server.rrl]`; None when it is absent.
    pub fn from_cfg(
        src: &Source,
        cfg: Option<&Spanned<RrlCfg>>,
    ) -> Result<Option<RrlConfig>, LocatedError> {
        let Some(c) = cfg else { return Ok(None) };
        let r = c.get_ref();
        let rate = *r.responses_per_second.get_ref();
        if !RRL_RATE.contains(&rate) {
            return Err(src.err(
                r.responses_per_second.span(),
                format!(
                    "rrl responses_per_second must be {} to {} (remove [server.rrl] to turn rate limiting off)",
                    RRL_RATE.start(),
                    RRL_RATE.end()
                ),
            ));
        }
        if let Some(s) = &r.slip {
            if *s.get_ref() > MAX_SLIP {
                return Err(src.err(
                    s.span(),
                    format!("rrl slip must be 0 (drop all) to {MAX_SLIP}"),
                ));
            }
        }
        let v4 = r.ipv4_prefix.as_ref().map(|v| (*v.get_ref(), v.span()));
        if let Some((v, span)) = &v4 {
            if *v > 32 {
                return Err(src.err(span.clone(), "rrl ipv4_prefix must be 0 to 32"));
            }
        }
        let v6 = r.ipv6_prefix.as_ref().map(|v| (*v.get_ref(), v.span()));
        if let Some((v, span)) = &v6 {
            if *v > 128 {
                return Err(src.err(span.clone(), "rrl ipv6_prefix must be 0 to 128"));
            }
        }
        let table = match &r.table_size {
            Some(t) => {
                let n = *t.get_ref();
                if !(2..=MAX_TABLE).contains(&n) {
                    return Err(
                        src.err(t.span(), format!("rrl table_size must be 2 to {MAX_TABLE}"))
                    );
                }
                n.next_power_of_two()
            }
            None => DEFAULT_TABLE,
        };
        let cookie_secret = match &r.cookie_secret {
            None => None,
            Some(h) => {
                let t = h.get_ref().trim();
                let mut k = [0u8; 16];
                let ok = t.len() == 32
                    && t.is_ascii()
                    && k.iter_mut().enumerate().all(|(i, b)| {
                        u8::from_str_radix(&t[2 * i..2 * i + 2], 16)
                            .map(|v| *b = v)
                            .is_ok()
                    });
                if !ok {
                    return Err(src.err(
                        h.span(),
                        "rrl cookie_secret must be 32 hex digits (128 bits)",
                    ));
                }
                Some(k)
            }
        };
        Ok(Some(RrlConfig {
            cookie_secret,
            responses_per_second: rate,
            slip: r
                .slip
                .as_ref()
                .map(|s| *s.get_ref())
                .unwrap_or(DEFAULT_SLIP),
            ipv4_prefix: v4.map(|v| v.0).unwrap_or(DEFAULT_V4_PREFIX),
            ipv6_prefix: v6.map(|v| v.0).unwrap_or(DEFAULT_V6_PREFIX),
            table_size: table,
        }))
    }
}
