//! Balancing decisions (issue #16): turn health, operator input and the
//! measured signals into what answers use, per pool and address family,
//! whenever an input changes — never per query.
//!
//! **Filter stage**, in this order:
//! 1. operator overrides: `down` and `drain` take a member out, `up` keeps
//!    it in whatever its checks say;
//! 2. checks: a member whose checks fail is ejected; then, with
//!    `outlier_detection`, a member whose success ratio is an outlier
//!    ([`outlier`], [`Standing::Outlier`]);
//! 3. ejection cap (`max_ejected`): when the checks fail more members than
//!    the cap allows, only the cap's worth leave, those down longest first;
//!    the others stay, [`Standing::KeptByCap`];
//! 4. panic (`panic_below`): when the share of members passing their checks
//!    (among those the operator did not take out) is below the threshold,
//!    every member the operator did not take out answers
//!    ([`Standing::KeptByPanic`]) and the family is marked `panic`.
//!
//! Failover and spillover between pools are per query, from the published
//! [`Gate`]s (see `answer::dynamic`).
//!
//! **Choice stage**: effective weight = configured weight × slow-start ramp
//! × latency factor ([`latency`], with its noise floor) × reported-load
//! factor × runtime weight × error penalty ([`errors`], for members
//! passing their checks), published in the member's word with its gate
//! (see `pool::policy`).
//!
//! Pure given its [`Inputs`]: the clock is a parameter, so `tools/sim` and
//! the tests drive the same code with a synthetic one.

pub mod errors;
pub mod latency;
pub mod outlier;

use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

use crate::health::{HealthTable, OVR_DOWN, OVR_DRAIN, OVR_UP, UP};
use crate::pool::{
    Gate, Hold, Member, MemberReport, Pool, Published, Standing, SHARE_ONE, WEIGHT_UNIT,
};

/// The balancing clock: milliseconds since the first call in this
/// process, plus one (0 means "not usable" in [`Member::since`]).
pub fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// Everything a refresh reads besides the pool.
pub struct Inputs<'a> {
    /// States and overrides, by health index.
    pub health: &'a HealthTable,
    /// The balancing clock ([`now_ms`], or a simulator's).
    pub now_ms: u64,
    /// The operator's runtime weight of a member (1: none).
    pub runtime: &'a dyn Fn(&Member) -> f64,
    /// The check round-trip estimate of a health entry, seconds (None:
    /// no sample yet).
    pub rtt: &'a dyn Fn(u32) -> Option<f64>,
    /// The damped reported load of a health entry, 0..=1 (None: no figure).
    pub load: &'a dyn Fn(u32) -> Option<f64>,
}

/// What a refresh changed that the daemon says once: a family entering
/// (true) or leaving (false) panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PanicChange {
    /// The family: IPv6 (AAAA) or IPv4 (A).
    pub v6: bool,
    /// Entered (true) or left (false).
    pub entered: bool,
}

/// Recompute and publish both families of `pool`. Returns the panic
/// transitions, for the caller to log once each.
pub fn refresh(pool: &Pool, inp: &Inputs<'_>) -> Vec<PanicChange> {
    let mut out = Vec::new();
    for v6 in [false, true] {
        if pool.family(v6).is_empty() {
            continue;
        }
        let was = pool.gate(v6).panic;
        let (gate, words, report) = decide(pool, v6, inp);
        pool.publish(v6, &words, gate);
        pool.report[v6 as usize].set(report);
        if gate.panic != was {
            out.push(PanicChange {
                v6,
                entered: gate.panic,
            });
        }
    }
    out
}

/// The filter and choice stages for one family: the gate, each member's
/// (effective weight, usable) word, and the report for `/status`.
pub fn decide(
    pool: &Pool,
    v6: bool,
    inp: &Inputs<'_>,
) -> (Gate, Vec<Published>, Vec<MemberReport>) {
    let members = pool.family(v6);
    let policy = &pool.policy;
    let h = inp.health;
    let n = members.len();

    // 1-2: overrides, then checks.
    let mut standing: Vec<Standing> = members
        .iter()
        .map(|m| match h.override_of(m.health) {
            OVR_DRAIN => Standing::Drained,
            OVR_DOWN => Standing::Down,
            OVR_UP => Standing::Usable,
            // Registry members (#31): unproven ones wait, vanished ones leave.
            _ if m.hold == Hold::Unproven && h.state(m.health) != UP => Standing::Unproven,
            _ if m.hold == Hold::Gone => Standing::Gone,
            _ if h.passes(m.health) => Standing::Usable,
            _ => Standing::Ejected,
        })
        .collect();
    let success: Vec<Option<(f64, u64)>> = members
        .iter()
        .map(|m| h.success(m.health).map(|(r, n)| (f64::from(r), n)))
        .collect();
    // 2b: success-rate outliers, before the cap and panic bound them.
    let outliers = policy.outlier.map(|rule| {
        let prev = pool.report[v6 as usize].snapshot();
        outlier::apply(&rule, inp.now_ms, &success, &prev, &mut standing)
    });
    let passing = standing.iter().filter(|s| **s == Standing::Usable).count();
    let considered = standing
        .iter()
        .filter(|s| !matches!(s, Standing::Down | Standing::Drained | Standing::Unproven))
        .count();

    // 4 before 3: in panic the cap has nothing left to decide.
    let panic = policy
        .panic_below
        .is_some_and(|t| considered > 0 && (passing as f64) < t * considered as f64);
    if panic {
        for s in standing.iter_mut().filter(|s| s.is_ejection()) {
            *s = Standing::KeptByPanic;
        }
    } else if let Some(cap) = policy.max_ejected {
        // Failing checks leave before outliers.
        let mut ejected: Vec<(bool, Option<SystemTime>, usize)> = standing
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_ejection())
            .map(|(i, s)| (*s == Standing::Outlier, down_since(h, members[i].health), i))
            .collect();
        let limit = cap.limit(n);
        if ejected.len() > limit {
            // Down longest leave first (never-changed counts as longest).
            ejected.sort();
            for &(_, _, i) in &ejected[limit..] {
                standing[i] = Standing::KeptByCap;
            }
        }
    }

    // Choice stage.
    let best_rtt = if policy.latency_aware {
        members
            .iter()
            .zip(&standing)
            .filter(|(_, s)| s.answers())
            .filter_map(|(m, _)| (inp.rtt)(m.health))
            .filter(|r| *r > 0.0)
            .fold(None, |b: Option<f64>, r| Some(b.map_or(r, |b| b.min(r))))
    } else {
        None
    };
    let mut words = Vec::with_capacity(n);
    let mut report = Vec::with_capacity(n);
    for (k, (m, &st)) in members.iter().zip(&standing).enumerate() {
        let answers = st.answers();
        // The slow-start ramp starts when the member becomes usable.
        let since = if answers {
            match m.since.load(Ordering::Relaxed) {
                0 => {
                    m.since.store(inp.now_ms, Ordering::Relaxed);
                    inp.now_ms
                }
                t => t,
            }
        } else {
            m.since.store(0, Ordering::Relaxed);
            0
        };
        let slow_start = match policy.slow_start {
            Some(d) if answers && !d.is_zero() => {
                let t = inp.now_ms.saturating_sub(since) as f64 / d.as_millis() as f64;
                let min = policy.slow_start_min;
                (min + (1.0 - min) * t).min(1.0)
            }
            _ => 1.0,
        };
        let latency = match (best_rtt, (inp.rtt)(m.health)) {
            (Some(best), Some(own)) => latency::latency_factor(best, own, policy.latency_floor),
            _ => 1.0,
        };
        let load = (inp.load)(m.health).map_or(1.0, |l| (1.0 - l).clamp(0.0, 1.0));
        let runtime = (inp.runtime)(m);
        // Only members passing their checks: one the cap or panic keeps
        // although its checks fail keeps its weight (those rules exist
        // to keep its capacity); a kept outlier is penalised as usual.
        let errors = if answers && policy.error_penalty && h.passes(m.health) {
            errors::factor(success[k].map(|s| s.0))
        } else {
            1.0
        };
        let factor = slow_start * latency * load * runtime * errors;
        let factor = if factor.is_finite() && factor > 0.0 {
            factor
        } else {
            0.0
        };
        let mut eff = (f64::from(m.weight) * factor * WEIGHT_UNIT as f64).round() as u64;
        if factor > 0.0 {
            // A tiny factor still leaves the member a share.
            eff = eff.max(1);
        }
        words.push(Published {
            eff,
            usable: answers,
            rtt_us: (inp.rtt)(m.health).map_or(0, |r| (r * 1e6).round().clamp(1.0, 16e6) as u32),
        });
        report.push(MemberReport {
            standing: st,
            slow_start,
            latency,
            load,
            runtime,
            errors,
            effective: f64::from(m.weight) * factor,
            ejections: outliers.as_ref().map_or(0, |o| o[k].0),
            ejected_until_ms: outliers.as_ref().map_or(0, |o| o[k].1),
        });
    }
    let usable = words.iter().filter(|w| w.usable).count();
    let gate = Gate {
        usable: usable as u16,
        share: (passing as u64 * u64::from(SHARE_ONE) / n.max(1) as u64) as u32,
        panic,
        up: usable > 0 && usable >= pool.min_usable(v6),
    };
    (gate, words, report)
}

/// When entry `i` last changed state (for a failing one: since when it is
/// down). Off the query path: takes the entry's detail lock.
fn down_since(h: &HealthTable, i: u32) -> Option<SystemTime> {
    h.stats(i).detail().last_change
}

/// Does `pool`'s decision change with time alone: is a member still
/// ramping up (its last refresh left it below full weight), or does one
/// carry outlier ejections (which end and decay with time)? Then the
/// refresher comes back to it each second; signals change only with a
/// probe, which moves the health table's generation.
pub fn ramping(pool: &Pool) -> bool {
    let slow = pool.policy.slow_start.is_some();
    pool.report
        .iter()
        .any(|r| r.any(|m| (slow && m.standing.answers() && m.slow_start < 1.0) || m.ejections > 0))
}
