//! A pool's balancing policy (issue #16) and the decisions published for
//! answers: what the filter stage (overrides, checks, ejection cap, panic)
//! and the choice stage (effective weights) decided, per member and per
//! pool family.
//!
//! The decisions are computed off the query path (`balance::refresh`) and
//! published in atomics the answer path reads with relaxed loads:
//!
//! - per member, one word: its effective weight and whether it is out of
//!   the answers (so a member's gate and weight are always read together);
//! - per pool family, one word ([`Gate`]): how many members answer, the
//!   share that passes its checks (for spillover), panic, and whether the
//!   family counts as up (`min_up`).
//!
//! Invariant: the family word is stored after every member word of the same
//! refresh, so an answer that sees a new family word sees at least that
//! refresh's members. Answers never wait on a refresh.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// `max_ejected`: how many members the checks may take out of a family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cap {
    /// At most this many (>= 1).
    Count(u32),
    /// At most this fraction of the family (in (0, 1]), rounded down, and
    /// never fewer than one.
    Fraction(f64),
}

impl Cap {
    /// Members the checks may eject from a family of `n`: never fewer
    /// than 1 (Envoy: "always allows at least one").
    pub fn limit(self, n: usize) -> usize {
        match self {
            Cap::Count(c) => c as usize,
            Cap::Fraction(f) => ((f * n as f64).floor() as usize).max(1),
        }
    }
}

/// The pool's rules beyond health: all off by default, which keeps the
/// behaviour of a plain health-checked pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// `max_ejected`: cap on members the checks take out (None: no cap).
    pub max_ejected: Option<Cap>,
    /// `panic_below`: when the share of members passing their checks is
    /// below this, answer with every member not taken out by the operator.
    pub panic_below: Option<f64>,
    /// `slow_start`: ramp a member's weight up over this long after it
    /// comes up (None: full weight at once).
    pub slow_start: Option<Duration>,
    /// `slow_start_min`: the ramp's start, a fraction of the weight.
    pub slow_start_min: f64,
    /// `latency_aware`: scale weights by (best estimate ÷ own estimate) of
    /// the check round-trip time.
    pub latency_aware: bool,
    /// `latency_floor`: the lowest that latency factor goes.
    pub latency_floor: f64,
    /// `error_penalty`: scale checked members' weights by their success
    /// ratio (`balance::errors`). On by default.
    pub error_penalty: bool,
    /// `outlier_detection`: success-rate outlier ejection (None: off).
    pub outlier: Option<OutlierRule>,
}

/// Success-rate outlier ejection (Envoy's `outlier_detection`), per pool.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutlierRule {
    /// `outlier_k`: eject below the mean success ratio minus this many
    /// standard deviations.
    pub k: f64,
    /// `outlier_min_members`: members with enough samples needed to judge.
    pub min_members: u32,
    /// `outlier_min_samples`: probes a member needs to be judged.
    pub min_samples: u64,
    /// `outlier_ejection`: the first ejection's length; the n-th lasts n times it.
    pub base_ejection: Duration,
}

impl Default for OutlierRule {
    /// Envoy's defaults (`success_rate_stdev_factor` 1900, i.e. 1.9;
    /// `success_rate_minimum_hosts` 5; `base_ejection_time` 30 s); 10
    /// probes stand for Envoy's 100 requests (a probe is rarer).
    fn default() -> OutlierRule {
        OutlierRule {
            k: 1.9,
            min_members: 5,
            min_samples: 10,
            base_ejection: Duration::from_secs(30),
        }
    }
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            max_ejected: None,
            panic_below: None,
            slow_start: None,
            slow_start_min: 0.1,
            latency_aware: false,
            latency_floor: 0.1,
            error_penalty: true,
            outlier: None,
        }
    }
}

/// Scale of [`Gate::share`]: a share of 1 is this.
pub const SHARE_ONE: u32 = 1 << 16;

/// One pool family's published decision, unpacked from its word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gate {
    /// Members that answers may use.
    pub usable: u16,
    /// The share of members passing their checks, in 1/[`SHARE_ONE`]s.
    pub share: u32,
    /// The panic threshold is crossed: answers use every member the
    /// operator did not take out.
    pub panic: bool,
    /// Enough members are usable for the family to count as up (`min_up`).
    pub up: bool,
}

impl Gate {
    fn pack(self) -> u64 {
        u64::from(self.share.min(SHARE_ONE))
            | u64::from(self.usable) << 17
            | u64::from(self.panic) << 33
            | u64::from(self.up) << 34
    }

    fn unpack(w: u64) -> Gate {
        Gate {
            share: (w & 0x1_FFFF) as u32,
            usable: (w >> 17) as u16,
            panic: w & (1 << 33) != 0,
            up: w & (1 << 34) != 0,
        }
    }
}

/// Where a pool family's [`Gate`] is published.
#[derive(Debug)]
pub struct GateCell(AtomicU64);

impl GateCell {
    /// A family with `n` members, all usable, none checked yet (what a new
    /// pool answers with until its first refresh).
    pub fn new(n: usize) -> GateCell {
        let g = Gate {
            usable: n as u16,
            share: SHARE_ONE,
            panic: false,
            up: n > 0,
        };
        GateCell(AtomicU64::new(g.pack()))
    }

    /// The published decision. One relaxed load.
    #[inline]
    pub fn load(&self) -> Gate {
        Gate::unpack(self.0.load(Ordering::Acquire))
    }

    /// Publish a decision (after the members' words).
    pub fn store(&self, g: Gate) {
        self.0.store(g.pack(), Ordering::Release);
    }
}

impl Default for GateCell {
    fn default() -> GateCell {
        GateCell::new(0)
    }
}

impl Clone for GateCell {
    fn clone(&self) -> GateCell {
        GateCell(AtomicU64::new(self.0.load(Ordering::Relaxed)))
    }
}

/// Why a member is, or is not, in the answers (for `/status`, metrics and
/// `meridian lookup`; never read by answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Standing {
    /// In the answers: its checks pass (or it has none).
    #[default]
    Usable,
    /// Out: its checks fail.
    Ejected,
    /// In, although its checks fail: the ejection cap keeps it.
    KeptByCap,
    /// In, although its checks fail: the pool is in panic.
    KeptByPanic,
    /// Out: the operator set it down.
    Down,
    /// Out: the operator drained it.
    Drained,
    /// Out: its success ratio is an outlier in its pool (`outlier_detection`).
    Outlier,
    /// Out, and not counted for panic: registered (`members_from`) but not
    /// yet passing a check.
    Unproven,
    /// Out: its registration vanished (`members_from`); bound by the cap
    /// and panic like a failing check until it leaves the pool.
    Gone,
}

impl Standing {
    /// How `/status` and metrics name it.
    pub fn name(self) -> &'static str {
        match self {
            Standing::Usable => "usable",
            Standing::Ejected => "ejected",
            Standing::KeptByCap => "kept: ejection cap",
            Standing::KeptByPanic => "kept: panic",
            Standing::Down => "down (override)",
            Standing::Drained => "drained",
            Standing::Outlier => "ejected: outlier",
            Standing::Unproven => "unproven (registry)",
            Standing::Gone => "ejected: registration gone",
        }
    }

    /// Taken out by a rule the cap and panic bound: failing checks, an
    /// outlier success ratio, or a vanished registration.
    pub fn is_ejection(self) -> bool {
        matches!(self, Standing::Ejected | Standing::Outlier | Standing::Gone)
    }

    /// Does an answer use it?
    pub fn answers(self) -> bool {
        matches!(
            self,
            Standing::Usable | Standing::KeptByCap | Standing::KeptByPanic
        )
    }
}

/// One member's last decision, with every factor of its effective weight.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MemberReport {
    /// In or out, and why.
    pub standing: Standing,
    /// Slow-start ramp, in (0, 1] (1 when off or done).
    pub slow_start: f64,
    /// Latency factor, in [`Policy::latency_floor`, 1] (1 when off).
    pub latency: f64,
    /// Reported-load factor, 1 − load, in [0, 1] (1 without a figure).
    pub load: f64,
    /// The operator's runtime weight (1 when none).
    pub runtime: f64,
    /// Error penalty, in [0.02, 1] (1 when off, unchecked, out, or kept
    /// although its checks fail).
    pub errors: f64,
    /// Configured weight × every factor above.
    pub effective: f64,
    /// Outlier ejections so far (decays by one per ejection-free
    /// `outlier_ejection`); the state the next refresh starts from.
    pub ejections: u32,
    /// Outlier-ejected until this balancing-clock time (ms); 0: never.
    pub ejected_until_ms: u64,
}

/// The last refresh of one pool family, for `/status` (a lock only the
/// refresh and the status page take).
#[derive(Debug, Default)]
pub struct Report(Mutex<Vec<MemberReport>>);

impl Report {
    /// A copy of the last refresh's member reports (config order).
    pub fn snapshot(&self) -> Vec<MemberReport> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Does any member's last report satisfy `f`?
    pub fn any(&self, f: impl Fn(&MemberReport) -> bool) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(f)
    }

    /// Replace them.
    pub fn set(&self, r: Vec<MemberReport>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = r;
    }
}

impl Clone for Report {
    fn clone(&self) -> Report {
        Report(Mutex::new(self.snapshot()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_never_below_one() {
        assert_eq!(Cap::Fraction(0.1).limit(10), 1);
        assert_eq!(Cap::Fraction(0.1).limit(5), 1);
        assert_eq!(Cap::Fraction(0.25).limit(10), 2);
        assert_eq!(Cap::Count(3).limit(10), 3);
    }

    #[test]
    fn gate_round_trips() {
        for g in [
            Gate {
                usable: 256,
                share: SHARE_ONE,
                panic: true,
                up: true,
            },
            Gate {
                usable: 0,
                share: 0,
                panic: false,
                up: false,
            },
            Gate {
                usable: 7,
                share: 12345,
                panic: false,
                up: true,
            },
        ] {
            assert_eq!(Gate::unpack(g.pack()), g);
        }
    }
}
