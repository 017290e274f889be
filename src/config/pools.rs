//! `[pool.NAME]`: address pools, checked into [`Pool`]s. Each member's
//! (address, port, check) becomes a health-table entry, shared by every
//! pool that names the same one.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use toml::Spanned;

use super::{PoolCfg, Source};
use crate::error::LocatedError;
use crate::health::{Check, CheckSpec};
use crate::pool::policy::OutlierRule;
use crate::pool::{Cap, Member, Policy, Pool, MAX_MEMBERS};

/// Check one pool. `specs` collects the distinct health-table entries and
/// `spec_index` finds them again; members point into it.
pub fn pool(
    src: &Source,
    name: &str,
    p: &Spanned<PoolCfg>,
    checks: &BTreeMap<String, Arc<Check>>,
    specs: &mut Vec<CheckSpec>,
    spec_index: &mut HashMap<CheckSpec, u32>,
) -> Result<Pool, LocatedError> {
    let pc = p.get_ref();
    let members = pc.members.as_deref().unwrap_or_default();
    if pc.members.is_none() && pc.members_from.is_none() {
        return Err(src.err(
            p.span(),
            format!("pool {name:?} has no members: give `members`, or `members_from = \"etcd\"` in fleet mode"),
        ));
    }
    if members.is_empty() && pc.members_from.is_none() {
        return Err(src.err(p.span(), format!("pool {name:?} is empty")));
    }
    // A check by name; "none" (unless a table of that name exists) means no check.
    let find_check =
        |c: &str, span: std::ops::Range<usize>| -> Result<Option<Arc<Check>>, LocatedError> {
            match checks.get(c) {
                Some(x) => Ok(Some(x.clone())),
                None if c == "none" => Ok(None),
                None => Err(src.err(span, format!("pool {name:?}: unknown check {c:?}"))),
            }
        };
    let default_check = match &pc.check {
        None => None,
        Some(c) => find_check(c.get_ref(), c.span())?,
    };
    let mut pool = Pool {
        name: name.to_string(),
        v4: Vec::new(),
        v6: Vec::new(),
        location: pc.location.map(|[a, b]| (a, b)),
        min_up: pc.min_up.unwrap_or(1.0),
        rotation: Default::default(),
        policy: policy(src, name, p)?,
        gate: Default::default(),
        report: Default::default(),
    };
    if !(pool.min_up > 0.0 && (pool.min_up < 1.0 || pool.min_up.fract() == 0.0))
        || pool.min_up > MAX_MEMBERS as f64
    {
        return Err(src.err(
            p.span(),
            format!(
                "pool {name:?}: min_up must be a whole count >= 1 or a fraction in (0, 1), not {}",
                pool.min_up
            ),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for m in members {
        let (addr, weight, check, port) = match m.get_ref() {
            super::MemberCfg::Addr(a) => (a.as_str(), None, None, None),
            super::MemberCfg::Full {
                address,
                weight,
                check,
                port,
            } => (address.as_str(), *weight, check.as_deref(), *port),
        };
        let ip: IpAddr = addr
            .parse()
            .map_err(|_| src.err(m.span(), bad_member(addr)))?;
        let weight = weight.unwrap_or(1);
        if !(1..=65535).contains(&weight) {
            return Err(src.err(m.span(), format!("weight must be 1..=65535, not {weight}")));
        }
        if !seen.insert(ip) {
            return Err(src.err(
                m.span(),
                format!("member {ip} is listed twice in pool {name:?}"),
            ));
        }
        let check = match check {
            Some(c) => find_check(c, m.span())?,
            None => default_check.clone(),
        };
        if port == Some(0) {
            return Err(src.err(m.span(), format!("member {ip}: port 0")));
        }
        let spec = CheckSpec::new(ip, port, check);
        if let Some(c) = &spec.check {
            if spec.effective_port().is_none() {
                return Err(src.err(
                    m.span(),
                    format!(
                        "member {ip} of pool {name:?}: check {:?} is tcp and has no port (give the check or the member a port)",
                        c.name
                    ),
                ));
            }
        }
        let h = *spec_index.entry(spec.clone()).or_insert_with(|| {
            specs.push(spec);
            (specs.len() - 1) as u32
        });
        let member = Member::new(ip, weight as u32, h);
        match ip {
            IpAddr::V4(_) => pool.v4.push(member),
            IpAddr::V6(_) => pool.v6.push(member),
        }
        if pool.v4.len() > MAX_MEMBERS || pool.v6.len() > MAX_MEMBERS {
            return Err(src.err(
                m.span(),
                format!("a pool holds at most {MAX_MEMBERS} members per family"),
            ));
        }
    }
    let fixed = pc.members_from.is_none();
    if let (true, Some(Cap::Count(c)), Some(v)) = (fixed, pool.policy.max_ejected, &pc.max_ejected)
    {
        let n = pool.v4.len().max(pool.v6.len());
        if c as usize > n {
            return Err(src.err(
                v.span(),
                format!(
                    "pool {name:?}: max_ejected = {c} is more than the pool's {n} member(s) per family: it would cap nothing"
                ),
            ));
        }
    }
    pool.seal();
    Ok(pool)
}

/// Default `members_grace`: six of a registrant's 5 s leases, long enough
/// to ride out an agent's restart without the pool shrinking (issue #31).
pub const DEFAULT_MEMBERS_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// A pool that takes members from the fleet's registry (`members_from`).
#[derive(Debug, Clone)]
pub struct MembersFrom {
    /// The check registered members must pass once before they answer.
    pub check: Arc<Check>,
    /// How long a vanished registration stays ejected before it may leave.
    pub grace: std::time::Duration,
}

/// `members_from` and `members_grace` of a `[pool.NAME]` (issue #31):
/// None for a pool of config members only. A registry pool needs fleet
/// mode and a check, since a registered member answers only after its
/// first passing check.
pub fn members_from(
    src: &Source,
    name: &str,
    p: &Spanned<PoolCfg>,
    checks: &BTreeMap<String, Arc<Check>>,
    fleet: bool,
) -> Result<Option<MembersFrom>, LocatedError> {
    let pc = p.get_ref();
    let Some(from) = &pc.members_from else {
        if let Some(g) = &pc.members_grace {
            return Err(src.err(
                g.span(),
                format!("pool {name:?}: members_grace without members_from"),
            ));
        }
        return Ok(None);
    };
    if from.get_ref() != "etcd" {
        return Err(src.err(
            from.span(),
            format!(
                "pool {name:?}: members_from must be \"etcd\", not {:?}",
                from.get_ref()
            ),
        ));
    }
    if !fleet {
        return Err(src.err(
            from.span(),
            format!("pool {name:?}: members_from = \"etcd\" needs fleet mode (a [fleet] table)"),
        ));
    }
    let check = pc.check.as_ref().and_then(|c| checks.get(c.get_ref()));
    let Some(check) = check.filter(|c| c.kind != crate::health::CheckKind::None) else {
        return Err(src.err(
            from.span(),
            format!("pool {name:?}: members_from = \"etcd\" needs the pool's check (a registered member answers only after its first passing check)"),
        ));
    };
    let grace = match &pc.members_grace {
        None => DEFAULT_MEMBERS_GRACE,
        Some(g) => duration(g.get_ref()).ok_or_else(|| {
            src.err(
                g.span(),
                format!("pool {name:?}: members_grace must be a duration from 1s to 1h (seconds, or \"30s\", \"2m\"), not {}", g.get_ref()),
            )
        })?,
    };
    Ok(Some(MembersFrom {
        check: check.clone(),
        grace,
    }))
}

/// The balancing keys of a `[pool.NAME]` (issue #16), checked.
fn policy(src: &Source, name: &str, p: &Spanned<PoolCfg>) -> Result<Policy, LocatedError> {
    let pc = p.get_ref();
    let mut policy = Policy::default();
    let fraction = |v: &Spanned<f64>, key: &str, lo_open: bool, hi_open: bool| {
        let x = *v.get_ref();
        let lo_ok = if lo_open { x > 0.0 } else { x >= 0.0 };
        let hi_ok = if hi_open { x < 1.0 } else { x <= 1.0 };
        if x.is_finite() && lo_ok && hi_ok {
            Ok(x)
        } else {
            let range = format!(
                "{}0, 1{}",
                if lo_open { "(" } else { "[" },
                if hi_open { ")" } else { "]" }
            );
            Err(src.err(
                v.span(),
                format!("pool {name:?}: {key} must be a fraction in {range}, not {x}"),
            ))
        }
    };
    if let Some(v) = &pc.max_ejected {
        let bad = || {
            src.err(
                v.span(),
                format!(
                    "pool {name:?}: max_ejected must be a whole count >= 1 or a fraction in (0, 1], not {}",
                    v.get_ref()
                ),
            )
        };
        policy.max_ejected = Some(match v.get_ref() {
            toml::Value::Integer(n) if *n >= 1 && *n <= MAX_MEMBERS as i64 => Cap::Count(*n as u32),
            toml::Value::Float(f) if *f > 0.0 && *f <= 1.0 => Cap::Fraction(*f),
            toml::Value::Float(f) if *f > 1.0 && f.fract() == 0.0 && *f <= MAX_MEMBERS as f64 => {
                Cap::Count(*f as u32)
            }
            _ => return Err(bad()),
        });
    }
    if let Some(v) = &pc.panic_below {
        policy.panic_below = Some(fraction(v, "panic_below", true, false)?);
    }
    if let Some(v) = &pc.slow_start {
        let d = duration(v.get_ref()).ok_or_else(|| {
            src.err(
                v.span(),
                format!(
                    "pool {name:?}: slow_start must be a duration from 1s to 1h (seconds, or \"30s\", \"2m\"), not {}",
                    v.get_ref()
                ),
            )
        })?;
        policy.slow_start = Some(d);
    }
    if let Some(v) = &pc.slow_start_min {
        if pc.slow_start.is_none() {
            return Err(src.err(
                v.span(),
                format!("pool {name:?}: slow_start_min without slow_start"),
            ));
        }
        policy.slow_start_min = fraction(v, "slow_start_min", false, true)?;
    }
    policy.latency_aware = pc.latency_aware.unwrap_or(false);
    if let Some(v) = &pc.latency_floor {
        if !policy.latency_aware {
            return Err(src.err(
                v.span(),
                format!("pool {name:?}: latency_floor without latency_aware = true"),
            ));
        }
        policy.latency_floor = fraction(v, "latency_floor", true, false)?;
    }
    policy.error_penalty = pc.error_penalty.unwrap_or(true);
    policy.outlier = outlier(src, name, pc)?;
    Ok(policy)
}

/// `outlier_detection` and its `outlier_*` keys (issue #31).
fn outlier(src: &Source, name: &str, pc: &PoolCfg) -> Result<Option<OutlierRule>, LocatedError> {
    let on = pc.outlier_detection.as_ref().is_some_and(|v| *v.get_ref());
    let mut rule = OutlierRule::default();
    let err = |span: std::ops::Range<usize>, what: String| {
        src.err(span, format!("pool {name:?}: {what}"))
    };
    let keys = [
        pc.outlier_k.as_ref().map(Spanned::span),
        pc.outlier_min_members.as_ref().map(Spanned::span),
        pc.outlier_min_samples.as_ref().map(Spanned::span),
        pc.outlier_ejection.as_ref().map(Spanned::span),
    ];
    if let (false, Some(span)) = (on, keys.into_iter().flatten().next()) {
        return Err(err(
            span,
            "outlier_* keys without outlier_detection = true".into(),
        ));
    }
    if let Some(v) = &pc.outlier_k {
        let k = *v.get_ref();
        if !(k.is_finite() && k > 0.0 && k <= 10.0) {
            return Err(err(
                v.span(),
                format!("outlier_k must be in (0, 10], not {k}"),
            ));
        }
        rule.k = k;
    }
    if let Some(v) = &pc.outlier_min_members {
        let n = *v.get_ref();
        if !(2..=MAX_MEMBERS as i64).contains(&n) {
            let what = format!("outlier_min_members must be 2..={MAX_MEMBERS}, not {n}");
            return Err(err(v.span(), what));
        }
        rule.min_members = n as u32;
    }
    if let Some(v) = &pc.outlier_min_samples {
        let n = *v.get_ref();
        if !(1..=1_000_000).contains(&n) {
            let what = format!("outlier_min_samples must be 1..=1000000, not {n}");
            return Err(err(v.span(), what));
        }
        rule.min_samples = n as u64;
    }
    if let Some(v) = &pc.outlier_ejection {
        rule.base_ejection = duration(v.get_ref()).ok_or_else(|| {
            let what = format!(
                "outlier_ejection must be a duration from 1s to 1h (seconds, or \"30s\", \"2m\"), not {}",
                v.get_ref()
            );
            err(v.span(), what)
        })?;
    }
    Ok(on.then_some(rule))
}

/// A duration from 1 s to 1 h: seconds as a number, or a number with a
/// unit (`ms`, `s`, `m`, `h`).
fn duration(v: &toml::Value) -> Option<std::time::Duration> {
    let secs = match v {
        toml::Value::Integer(n) => *n as f64,
        toml::Value::Float(f) => *f,
        toml::Value::String(s) => {
            let s = s.trim();
            let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
                Some(i) => s.split_at(i),
                None => (s, "s"),
            };
            let n: f64 = num.trim().parse().ok()?;
            n * match unit {
                "ms" => 0.001,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                _ => return None,
            }
        }
        _ => return None,
    };
    (secs.is_finite() && (1.0..=3600.0).contains(&secs))
        .then(|| std::time::Duration::from_secs_f64(secs))
}

/// Why a member address does not parse, with the fix for the usual slip:
/// a port written into the address (`"192.0.2.13:80"`), which belongs in
/// the table form's `port`.
fn bad_member(addr: &str) -> String {
    match addr.trim().parse::<std::net::SocketAddr>() {
        Ok(sa) => format!(
            "bad member address {addr:?}: a member is an address without a port; \
             write {{ address = \"{}\", port = {} }} (the port its health check probes)",
            sa.ip(),
            sa.port()
        ),
        Err(_) => format!(
            "bad member address {addr:?}: want an IPv4 or IPv6 address, or a table \
             {{ address = \"...\", port = N }}"
        ),
    }
}
