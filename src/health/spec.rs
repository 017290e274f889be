//! What is checked: the check kinds and settings, one entry per distinct
//! (address, port, check), and how entries carry over a reload.

use std::net::IpAddr;
use std::sync::Arc;

/// What a check probes (`[check.NAME] type`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CheckKind {
    /// `none`: no probe; the member is always up.
    None,
    /// `tcp`: a TCP connect succeeds.
    Tcp,
    /// `http`: an HTTP/1.1 GET answers with an expected status (and body).
    Http,
    /// `https`: as `http`, over TLS.
    Https,
}

/// A check as configured (timings in milliseconds).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Check {
    /// The check's name, the key of its `[check.NAME]` table.
    pub name: String,
    /// What is probed (`type`).
    pub kind: CheckKind,
    /// Port to probe (`port`); a member's own `port` wins over it.
    pub port: Option<u16>,
    /// Time between probe starts in ms (`interval_ms` or `interval`; default 10 000).
    pub interval_ms: u64,
    /// A probe that takes longer fails, in ms (`timeout_ms` or `timeout`); less than the interval.
    pub timeout_ms: u64,
    /// Passed probes in a row that bring a down member up (`rise`; default 2).
    pub rise: u32,
    /// Failed probes in a row that take an up member down (`fall`; default 3).
    pub fall: u32,
    /// HTTP request path, starting with `/` (`path`; default `/`).
    pub path: String,
    /// HTTP Host header and TLS server name (`host`); default the member's
    /// address.
    pub host: Option<String>,
    /// Inclusive ranges of accepted HTTP status codes.
    pub expect_status: Vec<(u16, u16)>,
    /// A string the response body must contain (`expect_body`).
    pub expect_body: Option<String>,
    /// Verify the server's certificate and name, for `https` (`tls_verify`; default true).
    pub tls_verify: bool,
    /// Count a member as up before its first probe finishes (`unknown_is_up`; default true).
    pub unknown_is_up: bool,
}

/// What is probed: a member address with its check. `check: None` is always up.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CheckSpec {
    /// The member's address.
    pub addr: IpAddr,
    /// The member's own `port`, which wins over the check's.
    pub port: Option<u16>,
    /// The check; None (also for `type = "none"`) means always up. Shared
    /// by every member that names it, so an entry stays small.
    pub check: Option<Arc<Check>>,
}

impl CheckSpec {
    /// A spec; a check of kind `none` is dropped, so such a member is always up.
    pub fn new(addr: IpAddr, port: Option<u16>, check: Option<Arc<Check>>) -> CheckSpec {
        let check = check.filter(|c| c.kind != CheckKind::None);
        CheckSpec { addr, port, check }
    }

    /// The port a probe connects to: the member's, else the check's, else
    /// 80 (http) or 443 (https). None for a member without a check (unless
    /// the member names a port).
    pub fn effective_port(&self) -> Option<u16> {
        let Some(c) = &self.check else {
            return self.port;
        };
        self.port.or(c.port).or(match c.kind {
            CheckKind::Http => Some(80),
            CheckKind::Https => Some(443),
            CheckKind::Tcp | CheckKind::None => None,
        })
    }

    /// `address:port` for logs (`[v6]:port`).
    pub fn target(&self) -> String {
        match (self.addr, self.effective_port()) {
            (IpAddr::V6(a), Some(p)) => format!("[{a}]:{p}"),
            (a, Some(p)) => format!("{a}:{p}"),
            (a, None) => a.to_string(),
        }
    }

    /// The check's name, or `none`.
    pub fn check_name(&self) -> &str {
        self.check
            .as_ref()
            .map(|c| c.name.as_str())
            .unwrap_or("none")
    }

    /// What is sent and how it is judged, without the timing, the check's
    /// name and `unknown_is_up`: two specs with the same key probe the same
    /// thing, so a reload that only retunes a check keeps the state.
    pub fn probe_key(&self) -> ProbeKey {
        ProbeKey {
            addr: self.addr,
            port: self.effective_port(),
            probe: self.check.as_ref().map(|c| {
                (
                    c.kind.clone(),
                    c.path.clone(),
                    c.host.clone(),
                    c.expect_status.clone(),
                    c.expect_body.clone(),
                    c.tls_verify,
                )
            }),
        }
    }
}

/// See `CheckSpec::probe_key`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProbeKey {
    addr: IpAddr,
    port: Option<u16>,
    #[allow(clippy::type_complexity)]
    probe: Option<(
        CheckKind,
        String,
        Option<String>,
        Vec<(u16, u16)>,
        Option<String>,
        bool,
    )>,
}

/// For each of `specs`, the entry of `prev` it continues: the equal spec,
/// or else an unclaimed one with the same probe (`probe_key`). Each entry
/// of `prev` is continued at most once.
pub fn carry_map(specs: &[CheckSpec], prev: &[CheckSpec]) -> Vec<Option<usize>> {
    use std::collections::HashMap;
    let exact: HashMap<&CheckSpec, usize> = prev.iter().enumerate().map(|(i, p)| (p, i)).collect();
    let mut claimed = vec![false; prev.len()];
    let mut out: Vec<Option<usize>> = specs
        .iter()
        .map(|s| {
            let i = exact.get(s).copied();
            if let Some(i) = i {
                claimed[i] = true;
            }
            i
        })
        .collect();
    let mut by_probe: HashMap<ProbeKey, Vec<usize>> = HashMap::new();
    for (i, p) in prev.iter().enumerate().rev() {
        if !claimed[i] {
            by_probe.entry(p.probe_key()).or_default().push(i);
        }
    }
    for (k, s) in specs.iter().enumerate() {
        if out[k].is_none() {
            out[k] = by_probe.get_mut(&s.probe_key()).and_then(|v| v.pop());
        }
    }
    out
}
