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
}

impl ServerSettings {
    /// Check `[server]`; errors name the line of the bad key.
    pub fn from_cfg(src: &Source, c: &ServerCfg) -> Result<ServerSettings, LocatedError> {
        let payload = *c.edns_udp_payload.get_ref();
        // Workers keep 4096-octet response buffers; RFC 9715 advises 1232 anyway.
        if !(512..=4096).contains(&payload) {
            return Err(src.err(
                c.edns_udp_payload.span(),
                "edns_udp_payload must be 512..=4096",
            ));
        }
        let mut listen = Vec::new();
        for l in &c.listen {
            match parse_listen(l.get_ref()) {
                Some(a) => listen.push(a),
                None => {
                    return Err(src.err(l.span(), format!("bad listen address {:?}", l.get_ref())))
                }
            }
        }
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
            log: c.log.clone(),
            workers: c.workers,
            tcp_idle_timeout_ms: c.tcp_idle_timeout_ms,
            tcp_max_connections: c.tcp_max_connections,
            tcp_read_timeout_ms: c.tcp_read_timeout_ms,
            tcp_max_queries: c.tcp_max_queries,
            http_listen: c.http_listen.as_ref().map(|s| s.get_ref().clone()),
            user,
            allow_root: c.allow_root,
            rrl: RrlConfig::from_cfg(src, c.rrl.as_ref())?,
            nsid: nsid(src, c)?,
            identity: identity(src, c)?,
            version: txt_string(src, c.version.as_ref(), "version")?.filter(|v| !v.is_empty()),
        })
    }
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
        if rate == 0 {
            return Err(src.err(
                r.responses_per_second.span(),
                "rrl responses_per_second must be at least 1 (remove [server.rrl] to turn rate limiting off)",
            ));
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
        Ok(Some(RrlConfig {
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
