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
    /// Time constant of the round-trip estimate's decay, in ms
    /// (`latency_decay`; default 10 000). See [`super::signal::PeakEwma`].
    pub latency_decay_ms: u64,
    /// Where an http or https check reads the backend's load figure
    /// (`load_header` or `load_json`), and how it is damped; None: no load.
    pub load: Option<LoadRead>,
}

/// Default `latency_decay`: 10 s.
pub const DEFAULT_LATENCY_DECAY_MS: u64 = 10_000;
/// Default `load_smoothing`: the new sample's weight in the EWMA.
pub const DEFAULT_LOAD_SMOOTHING: f64 = 0.5;
/// Default `load_max_step`: most change of the figure per check.
pub const DEFAULT_LOAD_MAX_STEP: f64 = 0.1;

/// Where a load figure is read from a passing HTTP(S) response.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LoadSource {
    /// A response header (`load_header = "X-Load"`), matched case-insensitively.
    Header(String),
    /// A top-level number field of a JSON body (`load_json = "load"`).
    Json(String),
}

/// A check's load reading: the source and the damping
/// (see [`super::signal::DampedLoad`]).
#[derive(Debug, Clone)]
pub struct LoadRead {
    /// Where the figure is read.
    pub source: LoadSource,
    /// The new sample's weight in the EWMA, in (0, 1] (`load_smoothing`).
    pub smoothing: f64,
    /// Most change of the figure per check, in (0, 1] (`load_max_step`).
    pub max_step: f64,
}

// By bits: the config only admits finite values, so this is an equivalence.
impl PartialEq for LoadRead {
    fn eq(&self, o: &LoadRead) -> bool {
        self.source == o.source
            && self.smoothing.to_bits() == o.smoothing.to_bits()
            && self.max_step.to_bits() == o.max_step.to_bits()
    }
}
impl Eq for LoadRead {}
impl std::hash::Hash for LoadRead {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.source.hash(h);
        self.smoothing.to_bits().hash(h);
        self.max_step.to_bits().hash(h);
    }
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
