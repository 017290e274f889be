//! Member health: the check definitions from the config, the lock-free
//! state table that the answer path reads, and the checkers that write it.
//! One entry (and one probe) per distinct (address, port, check), however
//! many pools share it.
//!
//! - `probe`: one TCP connect, HTTP GET or HTTPS GET, with its verdict.
//! - `checker`: one task per entry, the rise/fall state machine, restarts on
//!   reload, and the operator overrides.
//! - `report`: `/status` JSON and the health part of `/metrics`.
//!
//! The answer path reads only `HealthTable::is_up` (two relaxed atomic loads
//! and a bool); everything else here runs on the tokio runtime.

pub mod checker;
pub mod overrides;
pub mod probe;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use toml::Spanned;

use crate::config::{CheckCfg, Source};
use crate::error::LocatedError;
use crate::metrics::Histogram;

pub use checker::Checker;
pub use overrides::{override_for, OverrideMap, Overrides};

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
    /// The check; None (also for `type = "none"`) means always up.
    pub check: Option<Check>,
}

impl CheckSpec {
    /// A spec; a check of kind `none` is dropped, so such a member is always up.
    pub fn new(addr: IpAddr, port: Option<u16>, check: Option<Check>) -> CheckSpec {
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

/// Health state: not probed yet (counts as up unless `unknown_is_up = false`).
pub const UNKNOWN: u8 = 0;
/// Health state: up.
pub const UP: u8 = 1;
/// Health state: down.
pub const DOWN: u8 = 2;

/// Operator override of a member's state.
pub const OVR_NONE: u8 = 0;
/// Override: up whatever the probes say.
pub const OVR_UP: u8 = 1;
/// Override: down whatever the probes say.
pub const OVR_DOWN: u8 = 2;
/// Override: down, and left out even when every pool is down.
pub const OVR_DRAIN: u8 = 3;

/// The name of a health state (`up`, `down`, `unknown`).
pub fn state_name(s: u8) -> &'static str {
    match s {
        UP => "up",
        DOWN => "down",
        _ => "unknown",
    }
}

/// The name of an override (`up`, `down`, `drain`, `none`).
pub fn override_name(o: u8) -> &'static str {
    match o {
        OVR_UP => "up",
        OVR_DOWN => "down",
        OVR_DRAIN => "drain",
        _ => "none",
    }
}

/// An override from its name (`clear` and the empty string mean `none`).
pub fn parse_override(s: &str) -> Option<u8> {
    match s {
        "up" => Some(OVR_UP),
        "down" => Some(OVR_DOWN),
        "drain" => Some(OVR_DRAIN),
        "none" | "clear" | "" => Some(OVR_NONE),
        _ => None,
    }
}

/// What the checker knows about one entry beyond its state: the run
/// counters of the state machine, the last result and the last change.
/// Written by the entry's checker task, read by `/status`; never touched by
/// the answer path.
#[derive(Debug, Default, Clone)]
pub struct Detail {
    /// Which checker generation may write this entry (see `checker`).
    pub owner: u64,
    /// Passed probes in a row (0 after a failure).
    pub ok_run: u32,
    /// Failed probes in a row (0 after a pass).
    pub fail_run: u32,
    /// Last probe: Some(true) passed, Some(false) failed, None not yet.
    pub last_ok: Option<bool>,
    /// What the last probe saw ("HTTP 200", "connect: Connection refused").
    pub reason: String,
    /// When the last probe finished.
    pub last_check: Option<SystemTime>,
    /// How long the last probe took, in seconds.
    pub latency_s: f64,
    /// When the state last changed (None: never since start-up).
    pub last_change: Option<SystemTime>,
    /// Why the state last changed ("3 failures in a row: ...").
    pub change_reason: String,
    /// When the current or last probe started, to keep the cadence across reloads.
    pub last_start: Option<Instant>,
    /// A probe is running now.
    pub in_flight: bool,
}

/// Counters and details of one entry. Shared (by `Arc`) between the tables
/// of successive reloads while the entry's spec does not change, so the
/// counters stay monotonic and the details carry over.
#[derive(Debug, Default)]
pub struct EntryStats {
    /// The run counters and last result; lock with [`EntryStats::detail`].
    pub detail: Mutex<Detail>,
    /// Probes finished.
    pub checks: AtomicU64,
    /// Probes that failed.
    pub failures: AtomicU64,
    /// Changes to up.
    pub to_up: AtomicU64,
    /// Changes to down.
    pub to_down: AtomicU64,
    /// Probe durations, failures included.
    pub latency: Histogram,
}

impl EntryStats {
    /// Lock the detail, ignoring poisoning (a panicked writer leaves plain data).
    pub fn detail(&self) -> std::sync::MutexGuard<'_, Detail> {
        self.detail.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The health of every distinct check target (an entry per [`CheckSpec`],
/// in `Engine::checks` order; `Member::health` indexes it), read per query
/// with relaxed atomic loads.
///
/// Each entry has a probed state (`UNKNOWN`, `UP`, `DOWN`), written only by
/// its checker task, and an operator override (`OVR_*`), set from the
/// operator's override map (see `overrides`); an override other than `OVR_NONE` wins over the probed state.
/// The table belongs to one engine and is shared (by `Arc`) with the
/// checkers while that engine serves; a reload builds a new table that
/// carries states, overrides and counters over (see [`HealthTable::new`]).
pub struct HealthTable {
    state: Vec<AtomicU8>,
    overrides: Vec<AtomicU8>,
    unknown_up: Vec<bool>,
    stats: Vec<Arc<EntryStats>>,
}

impl HealthTable {
    /// A table for `specs`, carrying states (and counters) over from a
    /// previous table for specs that did not change, or whose check changed
    /// only in timing (see `carry_map`).
    pub fn new(specs: &[CheckSpec], prev: Option<(&HealthTable, &[CheckSpec])>) -> HealthTable {
        let mut state = Vec::with_capacity(specs.len());
        let mut overrides = Vec::with_capacity(specs.len());
        let mut unknown_up = Vec::with_capacity(specs.len());
        let mut stats = Vec::with_capacity(specs.len());
        let carried = prev.map(|(_, ps)| carry_map(specs, ps));
        for (k, s) in specs.iter().enumerate() {
            let old = prev.and_then(|(t, _)| carried.as_ref()?[k].map(|i| (t, i)));
            let (st, ov, stat) = match old {
                Some((t, i)) => (
                    t.state(i as u32),
                    t.override_of(i as u32),
                    t.stats[i].clone(),
                ),
                None => (
                    if s.check.is_none() { UP } else { UNKNOWN },
                    OVR_NONE,
                    Arc::new(EntryStats::default()),
                ),
            };
            state.push(AtomicU8::new(st));
            overrides.push(AtomicU8::new(ov));
            unknown_up.push(s.check.as_ref().map(|c| c.unknown_is_up).unwrap_or(true));
            stats.push(stat);
        }
        HealthTable {
            state,
            overrides,
            unknown_up,
            stats,
        }
    }

    /// Is entry `i` usable in answers? The per-query path: no lock, no allocation.
    #[inline]
    pub fn is_up(&self, i: u32) -> bool {
        let i = i as usize;
        match self.overrides[i].load(Ordering::Relaxed) {
            OVR_UP => return true,
            OVR_DOWN | OVR_DRAIN => return false,
            _ => {}
        }
        match self.state[i].load(Ordering::Relaxed) {
            UP => true,
            DOWN => false,
            _ => self.unknown_up[i],
        }
    }

    /// Drained by the operator: left out even when every pool is down.
    #[inline]
    pub fn is_drained(&self, i: u32) -> bool {
        self.overrides[i as usize].load(Ordering::Relaxed) == OVR_DRAIN
    }

    /// Entry `i`'s probed state (`UNKNOWN`, `UP` or `DOWN`), ignoring overrides.
    pub fn state(&self, i: u32) -> u8 {
        self.state[i as usize].load(Ordering::Relaxed)
    }

    /// Set entry `i`'s probed state (the checker does, under the entry's detail lock).
    pub fn set_state(&self, i: u32, s: u8) {
        self.state[i as usize].store(s, Ordering::Relaxed);
    }

    /// Entry `i`'s operator override (an `OVR_*` value).
    pub fn override_of(&self, i: u32) -> u8 {
        self.overrides[i as usize].load(Ordering::Relaxed)
    }

    /// Set entry `i`'s operator override.
    pub fn set_override(&self, i: u32, o: u8) {
        self.overrides[i as usize].store(o, Ordering::Relaxed);
    }

    /// Entry `i`'s counters and details.
    pub fn stats(&self, i: u32) -> &Arc<EntryStats> {
        &self.stats[i as usize]
    }

    /// Number of entries (distinct check targets).
    pub fn len(&self) -> usize {
        self.state.len()
    }

    /// No entries: nothing is checked.
    pub fn is_empty(&self) -> bool {
        self.state.is_empty()
    }
}

/// Parse the `[check.NAME]` tables.
pub fn parse_checks(
    src: &Source,
    cfg: &BTreeMap<String, Spanned<CheckCfg>>,
) -> Result<BTreeMap<String, Check>, LocatedError> {
    let mut out = BTreeMap::new();
    for (name, c) in cfg {
        let span = c.span();
        let c = c.get_ref();
        let kind = match c.kind.as_str() {
            "none" => CheckKind::None,
            "tcp" => CheckKind::Tcp,
            "http" => CheckKind::Http,
            "https" => CheckKind::Https,
            other => {
                return Err(src.err(
                    span,
                    format!("check {name:?}: unknown type {other:?} (tcp, http, https or none)"),
                ))
            }
        };
        let ms = |ms: Option<u64>,
                  s: Option<f64>,
                  what: &str|
         -> Result<Option<u64>, LocatedError> {
            match (ms, s) {
                (Some(_), Some(_)) => Err(src.err(
                    span.clone(),
                    format!("check {name:?}: give {what}_ms or {what}, not both"),
                )),
                (Some(v), None) => Ok(Some(v)),
                (None, Some(v)) if v.is_finite() && v > 0.0 => {
                    Ok(Some((v * 1000.0).round() as u64))
                }
                (None, Some(v)) => Err(src.err(
                    span.clone(),
                    format!("check {name:?}: {what} must be a positive number of seconds, not {v}"),
                )),
                (None, None) => Ok(None),
            }
        };
        let interval_ms = ms(c.interval_ms, c.interval, "interval")?.unwrap_or(10_000);
        if !(10..=86_400_000).contains(&interval_ms) {
            return Err(src.err(
                span,
                format!("check {name:?}: interval must be 10 ms to 1 day, not {interval_ms} ms"),
            ));
        }
        let timeout_ms =
            ms(c.timeout_ms, c.timeout, "timeout")?.unwrap_or(3_000.min(interval_ms / 2).max(1));
        if timeout_ms == 0 || timeout_ms >= interval_ms {
            return Err(src.err(
                span,
                format!(
                    "check {name:?}: timeout ({timeout_ms} ms) must be at least 1 ms and less than the interval ({interval_ms} ms)"
                ),
            ));
        }
        let rise = c.rise.unwrap_or(2);
        let fall = c.fall.unwrap_or(3);
        if rise == 0 || fall == 0 || rise > 1000 || fall > 1000 {
            return Err(src.err(
                span,
                format!("check {name:?}: rise and fall must be 1..=1000"),
            ));
        }
        let web = matches!(kind, CheckKind::Http | CheckKind::Https);
        if !web {
            let http_only = [
                ("path", c.path.is_some()),
                ("host", c.host.is_some()),
                ("expect_status", c.expect_status.is_some()),
                ("expect_body", c.expect_body.is_some()),
                ("tls_verify", c.tls_verify.is_some()),
            ];
            if let Some((key, _)) = http_only.iter().find(|(_, set)| *set) {
                return Err(src.err(
                    span,
                    format!("check {name:?}: {key} applies only to http and https checks"),
                ));
            }
        }
        if c.tls_verify.is_some() && kind != CheckKind::Https {
            return Err(src.err(
                span,
                format!("check {name:?}: tls_verify applies only to https checks"),
            ));
        }
        let path = c.path.clone().unwrap_or_else(|| "/".into());
        if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(src.err(
                span,
                format!("check {name:?}: path must start with / and hold no spaces or control characters"),
            ));
        }
        if let Some(h) = &c.host {
            if h.is_empty() || h.bytes().any(|b| b <= b' ' || b == 0x7f || b == b'/') {
                return Err(src.err(span, format!("check {name:?}: bad host {h:?}")));
            }
        }
        if c.expect_body.as_deref() == Some("") {
            return Err(src.err(span, format!("check {name:?}: expect_body is empty")));
        }
        let mut expect_status = Vec::new();
        for s in c
            .expect_status
            .clone()
            .unwrap_or_else(|| vec!["200-399".into()])
        {
            let r = match s.split_once('-') {
                Some((a, b)) => (a.trim().parse::<u16>(), b.trim().parse::<u16>()),
                None => (s.trim().parse::<u16>(), s.trim().parse::<u16>()),
            };
            match r {
                (Ok(a), Ok(b)) if a <= b && (100..=599).contains(&a) && b <= 599 => {
                    expect_status.push((a, b))
                }
                _ => {
                    return Err(src.err(
                        span,
                        format!("check {name:?}: bad expect_status {s:?} (a code like \"200\" or a range like \"200-299\")"),
                    ))
                }
            }
        }
        if expect_status.is_empty() {
            return Err(src.err(span, format!("check {name:?}: expect_status is empty")));
        }
        if c.port == Some(0) {
            return Err(src.err(span, format!("check {name:?}: port 0")));
        }
        out.insert(
            name.clone(),
            Check {
                name: name.clone(),
                kind,
                port: c.port,
                interval_ms,
                timeout_ms,
                rise,
                fall,
                path,
                host: c.host.clone(),
                expect_status,
                expect_body: c.expect_body.clone(),
                tls_verify: c.tls_verify.unwrap_or(true),
                unknown_is_up: c.unknown_is_up.unwrap_or(true),
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
