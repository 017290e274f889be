//! The error penalty (issue #31): a member whose probes fail part of the
//! time loses share long before rise/fall ejects it. A pure function of
//! the member's damped success ratio (`health::signal::SuccessEwma`), the
//! `errors` factor of its effective weight.
//!
//! The curve: 1 down to a ratio of [`FULL_AT`], then a square falling to
//! [`FLOOR`] at [`ZERO_AT`]:
//!
//! ```text
//! factor = max(FLOOR, ((r − ZERO_AT) / (FULL_AT − ZERO_AT))²), capped at 1
//! ```
//!
//! | success ratio | 1 | 0.9 | 0.85 | 0.8 | 0.7 | ≤ 0.64 |
//! | --- | --- | --- | --- | --- | --- | --- |
//! | factor | 1 | 1 | 0.69 | 0.44 | 0.11 | 0.02 |
//!
//! Why this shape: Finagle's failure accrual takes a backend out when its
//! success rate over 30 s falls below 0.8; Envoy's success-rate detection
//! ejects below the pool's mean by 1.9 σ. Both are cliffs. A DNS answer
//! lives for its TTL, so a cliff moves whole caches at once; a steep but
//! continuous curve moves share in proportion: at 0.8 (Finagle's line) the
//! member keeps 44 % of its weight, at 0.7 a ninth, and half failing is
//! the floor. The dead zone down to 0.9 keeps one stray failed probe from
//! moving anything: the ratio's time constant is at least ten check
//! intervals, so one failure costs it at most 9.5 %.
//!
//! The penalty is for members that stay up while failing. One that comes
//! back up through `rise` gets back the ratio of its last pass before it
//! went down (see `SuccessEwma::came_up`): rise/fall judged the outage,
//! and `slow_start` is the rule for ramping returning members. Without
//! that, every member back from an outage would ramp from the floor, and
//! in the simulator's bad deploy the rollback overloaded the rest for half
//! a minute. Probes that time out do not count either (the checker leaves
//! them to the latency signal): counted, overload would shift load onto
//! the others until they time out too.

/// The success ratio at and above which a member keeps its whole weight:
/// one failed probe in the ratio's memory (at least 20 probes) stays above it.
pub const FULL_AT: f64 = crate::health::signal::SUCCESS_WELL;

/// The success ratio at and below which a member is down to [`FLOOR`]:
/// between Finagle's 0.8 and the 0.5 of a member failing every other probe,
/// so a flapping member is at the floor.
pub const ZERO_AT: f64 = 0.6;

/// The least factor: a sick member keeps a trace of its share (2 % of its
/// weight), so a pool where every member is sick still spreads by the
/// configured weights.
pub const FLOOR: f64 = 0.02;

/// The `errors` factor for a success ratio in [0, 1]; 1 when there is
/// none (no check, or no probe yet). Not finite counts as none.
pub fn factor(ratio: Option<f64>) -> f64 {
    let Some(r) = ratio.filter(|r| r.is_finite()) else {
        return 1.0;
    };
    let x = ((r - ZERO_AT) / (FULL_AT - ZERO_AT)).clamp(0.0, 1.0);
    (x * x).max(FLOOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_curve() {
        assert_eq!(factor(None), 1.0);
        assert_eq!(factor(Some(f64::NAN)), 1.0);
        assert_eq!(factor(Some(1.0)), 1.0);
        assert_eq!(factor(Some(FULL_AT)), 1.0);
        assert_eq!(factor(Some(ZERO_AT)), FLOOR);
        assert_eq!(factor(Some(0.0)), FLOOR);
        // The table in the module doc.
        for (r, f) in [(0.85, 0.694), (0.8, 0.444), (0.7, 0.111)] {
            assert!(
                (factor(Some(r)) - f).abs() < 1e-3,
                "{r}: {}",
                factor(Some(r))
            );
        }
        // Never rises as the ratio falls.
        let mut prev = 1.0;
        for k in (0..=1000).rev() {
            let f = factor(Some(k as f64 / 1000.0));
            assert!(f <= prev && f >= FLOOR);
            prev = f;
        }
    }

    #[test]
    fn a_flapping_member_of_two_gets_little() {
        // The issue's case: one of two members failing half its probes.
        let f = factor(Some(0.52));
        let share = f / (1.0 + f);
        assert!(share < 0.03, "{share}");
        // Even a ratio noisy up to 0.7 stays under the 15 % target.
        let f = factor(Some(0.7));
        assert!(f / (1.0 + f) < 0.15);
    }
}
