//! Member health: the check definitions from the config and the lock-free
//! state table that the answer path reads. One entry per distinct
//! (address, port, check), however many pools share it.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, Ordering};

use toml::Spanned;

use crate::config::{CheckCfg, Source};
use crate::error::LocatedError;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CheckKind {
    None,
    Tcp,
    Http,
    Https,
}

/// A check as configured (timings in milliseconds).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Check {
    pub name: String,
    pub kind: CheckKind,
    pub port: Option<u16>,
    pub interval_ms: u64,
    pub timeout_ms: u64,
    pub rise: u32,
    pub fall: u32,
    pub path: String,
    pub host: Option<String>,
    /// Inclusive ranges of accepted HTTP status codes.
    pub expect_status: Vec<(u16, u16)>,
    pub expect_body: Option<String>,
    pub tls_verify: bool,
    pub unknown_is_up: bool,
}

/// What is probed: a member address with its check. `check: None` is always up.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CheckSpec {
    pub addr: IpAddr,
    pub port: Option<u16>,
    pub check: Option<Check>,
}

impl CheckSpec {
    pub fn new(addr: IpAddr, port: Option<u16>, check: Option<Check>) -> CheckSpec {
        let check = check.filter(|c| c.kind != CheckKind::None);
        CheckSpec { addr, port, check }
    }
}

pub const UNKNOWN: u8 = 0;
pub const UP: u8 = 1;
pub const DOWN: u8 = 2;

/// Operator override of a member's state.
pub const OVR_NONE: u8 = 0;
pub const OVR_UP: u8 = 1;
pub const OVR_DOWN: u8 = 2;
pub const OVR_DRAIN: u8 = 3;

/// Health states, read per query with relaxed atomic loads.
pub struct HealthTable {
    state: Vec<AtomicU8>,
    overrides: Vec<AtomicU8>,
    unknown_up: Vec<bool>,
}

impl HealthTable {
    /// A table for `specs`, carrying states over from a previous table for
    /// specs that did not change.
    pub fn new(specs: &[CheckSpec], prev: Option<(&HealthTable, &[CheckSpec])>) -> HealthTable {
        let mut state = Vec::with_capacity(specs.len());
        let mut overrides = Vec::with_capacity(specs.len());
        let mut unknown_up = Vec::with_capacity(specs.len());
        for s in specs {
            let old = prev.and_then(|(t, ps)| ps.iter().position(|p| p == s).map(|i| (t, i)));
            let (st, ov) = match old {
                Some((t, i)) => (t.state(i as u32), t.override_of(i as u32)),
                None => (if s.check.is_none() { UP } else { UNKNOWN }, OVR_NONE),
            };
            state.push(AtomicU8::new(st));
            overrides.push(AtomicU8::new(ov));
            unknown_up.push(s.check.as_ref().map(|c| c.unknown_is_up).unwrap_or(true));
        }
        HealthTable {
            state,
            overrides,
            unknown_up,
        }
    }

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

    pub fn state(&self, i: u32) -> u8 {
        self.state[i as usize].load(Ordering::Relaxed)
    }

    pub fn set_state(&self, i: u32, s: u8) {
        self.state[i as usize].store(s, Ordering::Relaxed);
    }

    pub fn override_of(&self, i: u32) -> u8 {
        self.overrides[i as usize].load(Ordering::Relaxed)
    }

    pub fn set_override(&self, i: u32, o: u8) {
        self.overrides[i as usize].store(o, Ordering::Relaxed);
    }

    pub fn len(&self) -> usize {
        self.state.len()
    }

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
                    format!("unknown check type {other:?} (tcp, http, https or none)"),
                ))
            }
        };
        let interval_ms = c.interval_ms.unwrap_or(10_000);
        let timeout_ms = c.timeout_ms.unwrap_or(3_000.min(interval_ms / 2).max(1));
        if timeout_ms >= interval_ms {
            return Err(src.err(span, "timeout_ms must be less than interval_ms"));
        }
        let rise = c.rise.unwrap_or(2);
        let fall = c.fall.unwrap_or(3);
        if rise == 0 || fall == 0 {
            return Err(src.err(span, "rise and fall must be at least 1"));
        }
        let mut expect_status = Vec::new();
        for s in c.expect_status.clone().unwrap_or_else(|| vec!["200-399".into()]) {
            let r = match s.split_once('-') {
                Some((a, b)) => (a.trim().parse::<u16>(), b.trim().parse::<u16>()),
                None => (s.trim().parse::<u16>(), s.trim().parse::<u16>()),
            };
            match r {
                (Ok(a), Ok(b)) if a <= b && (100..=599).contains(&a) && b <= 599 => {
                    expect_status.push((a, b))
                }
                _ => return Err(src.err(span, format!("bad expect_status {s:?}"))),
            }
        }
        if matches!(kind, CheckKind::Tcp | CheckKind::Http | CheckKind::Https)
            && c.port.is_none()
            && kind == CheckKind::Tcp
        {
            return Err(src.err(span, "a tcp check needs a port"));
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
                path: c.path.clone().unwrap_or_else(|| "/".into()),
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

/// Start the health checkers for the current engine. (Checks run in `checker`.)
pub fn start(_rt: &tokio::runtime::Runtime, _shared: &std::sync::Arc<crate::server::Shared>) {}

/// Restart checkers after a reload.
pub fn restart(_shared: &std::sync::Arc<crate::server::Shared>) {}
