//! `GET /status`: every member's health and weights, each pool's state, the
//! operator overrides and the runtime weights, as one JSON document (serde structs, field order as written).

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use serde::{Serialize, Serializer};

use crate::engine::{weight_for, Engine, WeightMap};
use crate::health::{override_for, override_name, state_name, CheckKind, CheckSpec, OverrideMap};
use crate::pool::WEIGHT_UNIT;

#[derive(Serialize)]
struct Status<'a> {
    generation: u64,
    members: Vec<MemberStatus<'a>>,
    pools: Vec<PoolStatus<'a>>,
    overrides: Vec<OverrideStatus>,
    weights: Vec<WeightStatus>,
    /// Fleet mode: this node, whether it follows etcd, and who set each
    /// shared override and weight, where and when.
    #[serde(skip_serializing_if = "Option::is_none")]
    fleet: Option<serde_json::Value>,
}

/// One runtime weight in force.
#[derive(Serialize)]
struct WeightStatus {
    address: IpAddr,
    port: Option<u16>,
    weight: f64,
}

/// One pool member (a member in two pools appears twice).
#[derive(Serialize)]
struct MemberStatus<'a> {
    pool: &'a str,
    address: IpAddr,
    port: Option<u16>,
    check: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    up: bool,
    state: &'static str,
    #[serde(rename = "override")]
    override_state: &'static str,
    /// The configured weight.
    weight: u32,
    /// The operator's runtime factor (1 when none is set).
    runtime_weight: f64,
    /// What answers use: configured weight × every factor below.
    effective_weight: f64,
    /// The filter stage's decision: usable, ejected, "kept: ejection cap",
    /// "kept: panic", "down (override)", drained, "ejected: outlier", "unproven (registry)" or "ejected: registration gone".
    standing: &'static str,
    /// The factors of the effective weight.
    factors: Factors,
    /// This node runs the check itself: always on a single node; in a
    /// fleet, when it is one of the member's checkers, when none of them
    /// has a fresh result, or when etcd is lost past `fleet_grace`.
    probed_here: bool,
    /// "ok", "fail", or null before the first probe.
    last_result: Option<&'static str>,
    reason: Option<String>,
    last_check: Option<String>,
    latency_ms: Option<f64>,
    consecutive_ok: u32,
    consecutive_fail: u32,
    last_change: Option<String>,
    change_reason: Option<String>,
    checks: u64,
    failures: u64,
    /// Peak-EWMA of the passing probes' durations, in ms (null: no sample yet, or no check).
    rtt_estimate_ms: Option<f64>,
    /// The damped load the backend reports, 0..1 (null: the check reads none, or none yet).
    load: Option<f64>,
    /// Why the last load figure could not be read (null: it could, or none is read).
    load_error: Option<String>,
    /// The damped success ratio of the probes, 0..1 (null: no check, or no probe yet).
    success_ratio: Option<f64>,
    /// Outlier ejections counted against the member (`outlier_detection`; 0 when off).
    outlier_ejections: u32,
}

/// One pool in one address family.
#[derive(Serialize)]
struct PoolStatus<'a> {
    pool: &'a str,
    family: &'static str,
    members: usize,
    up_members: usize,
    #[serde(serialize_with = "plain_number")]
    min_up: f64,
    up: bool,
    /// The share of members passing their checks.
    passing_share: f64,
    /// Too few pass (`panic_below`): every member the operator did not
    /// take out answers.
    panic: bool,
}

/// A member's weight factors (each 1 when its rule is off).
#[derive(Serialize)]
struct Factors {
    slow_start: f64,
    latency: f64,
    load: f64,
    runtime: f64,
    errors: f64,
}

/// One override in force and how many entries it decides.
#[derive(Serialize)]
struct OverrideStatus {
    address: IpAddr,
    port: Option<u16>,
    state: &'static str,
    entries: usize,
}

/// `2` rather than `2.0` for a whole number (as `min_up` is written in the
/// config), a fraction as it is; null if not finite.
fn plain_number<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        s.serialize_i64(*v as i64)
    } else if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_none()
    }
}

/// RFC 3339 UTC time with milliseconds, e.g. `2026-05-01T12:00:00.123Z`.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

fn kind_name(spec: &CheckSpec) -> &'static str {
    match spec.check.as_ref().map(|c| &c.kind) {
        Some(CheckKind::Tcp) => "tcp",
        Some(CheckKind::Http) => "http",
        Some(CheckKind::Https) => "https",
        _ => "none",
    }
}

/// Three decimals are enough for a factor, and keep `/status` readable.
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The `/status` document.
pub(crate) fn status_json(
    e: &Engine,
    ovr: &OverrideMap,
    wts: &WeightMap,
    fleet: Option<serde_json::Value>,
) -> String {
    // The caller took the overrides before any entry lock (lock order:
    // runner, entry).
    let t = &e.health;
    let mut members = Vec::new();
    for p in &e.pools {
        let reports = [p.report[0].snapshot(), p.report[1].snapshot()];
        let fams =
            p.v4.iter()
                .zip(&reports[0])
                .chain(p.v6.iter().zip(&reports[1]));
        for (m, r) in fams {
            let i = m.health;
            let spec = &e.checks[i as usize];
            let stats = t.stats(i);
            let d = stats.detail().clone();
            let probed = d.last_ok.is_some();
            members.push(MemberStatus {
                pool: &p.name,
                address: m.addr,
                port: spec.effective_port(),
                check: spec.check_name(),
                kind: kind_name(spec),
                up: m.usable(),
                state: state_name(t.state(i)),
                override_state: override_name(t.override_of(i)),
                weight: m.weight,
                runtime_weight: weight_for(wts, spec),
                effective_weight: m.effective() as f64 / WEIGHT_UNIT as f64,
                standing: r.standing.name(),
                factors: Factors {
                    slow_start: round3(r.slow_start),
                    latency: round3(r.latency),
                    load: round3(r.load),
                    runtime: r.runtime,
                    errors: round3(r.errors),
                },
                probed_here: spec.check.is_some() && !stats.remote.load(Ordering::Relaxed),
                last_result: d.last_ok.map(|ok| if ok { "ok" } else { "fail" }),
                reason: probed.then(|| d.reason.clone()),
                last_check: d.last_check.map(rfc3339),
                // Microsecond precision, as milliseconds with 3 decimals.
                latency_ms: probed.then(|| (d.latency_s * 1e6).round() / 1e3),
                consecutive_ok: d.ok_run,
                consecutive_fail: d.fail_run,
                last_change: d.last_change.map(rfc3339),
                change_reason: d.last_change.map(|_| d.change_reason.clone()),
                checks: stats.checks.load(Ordering::Relaxed),
                failures: stats.failures.load(Ordering::Relaxed),
                // µs as ms with 3 decimals, like latency_ms.
                rtt_estimate_ms: t.rtt_estimate_us(i).map(|us| us as f64 / 1e3),
                // f32 → shortest decimal that reads back the same (0.8, not 0.800000011920929).
                load: t.load(i).and_then(|l| l.to_string().parse().ok()),
                load_error: d.load_error.clone(),
                success_ratio: t.success(i).map(|(r, _)| round3(f64::from(r))),
                outlier_ejections: r.ejections,
            });
        }
    }
    let mut pools = Vec::new();
    for p in &e.pools {
        for v6 in [false, true] {
            let fam = p.family(v6);
            if fam.is_empty() {
                continue;
            }
            let g = p.gate(v6);
            pools.push(PoolStatus {
                pool: &p.name,
                family: if v6 { "ipv6" } else { "ipv4" },
                members: fam.len(),
                up_members: usize::from(g.usable),
                min_up: p.min_up,
                up: g.up,
                passing_share: round3(f64::from(g.share) / f64::from(crate::pool::SHARE_ONE)),
                panic: g.panic,
            });
        }
    }
    let overrides = ovr
        .iter()
        .map(|(&(address, port), &state)| OverrideStatus {
            address,
            port,
            state: override_name(state),
            entries: e
                .checks
                .iter()
                .filter(|sp| sp.addr == address && override_for(ovr, sp) == state)
                .count(),
        })
        .collect();
    let weights = wts
        .iter()
        .map(|(&(address, port), &weight)| WeightStatus {
            address,
            port,
            weight,
        })
        .collect();
    let doc = Status {
        generation: e.generation,
        members,
        pools,
        overrides,
        weights,
        fleet,
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn rfc3339_millis() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(1_709_251_199_250)),
            "2024-02-29T23:59:59.250Z"
        );
    }

    #[test]
    fn min_up_is_written_as_in_the_config() {
        let j = |v: f64| {
            #[derive(Serialize)]
            struct T {
                #[serde(serialize_with = "plain_number")]
                v: f64,
            }
            serde_json::to_string(&T { v }).unwrap()
        };
        assert_eq!(j(2.0), r#"{"v":2}"#);
        assert_eq!(j(0.5), r#"{"v":0.5}"#);
        assert_eq!(j(f64::NAN), r#"{"v":null}"#);
    }
}
