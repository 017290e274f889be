//! The latency factor of `latency_aware` (issue #31): how much of its
//! weight a member keeps for being slower than the fastest member of its
//! pool, with a noise floor so that identical members keep equal weights.
//!
//! Round-trip estimates of identical members differ by noise: scheduling
//! on the prober and the backend, and the peak-EWMA itself, which takes a
//! single slow sample at once and lets it decay over `latency_decay`. A
//! difference up to the noise allowance ([`allowance`]: the larger of
//! [`NOISE_FLOOR_US`] and [`NOISE_BAND_PCT`] of the best estimate) moves
//! nothing; beyond it only the excess over the allowance counts, so the
//! factor leaves 1 continuously. `pick = "p2c"` uses the same rule
//! (`pool::select::same_rtt`, there because answers run it).

use crate::pool::select::{NOISE_BAND_PCT, NOISE_FLOOR_US};

/// The noise floor in seconds (the unit of the estimates `decide` reads).
const FLOOR_S: f64 = NOISE_FLOOR_US as f64 / 1e6;

/// How far above `best` (seconds) an estimate may be and still count as
/// equal to it: the floor, or the relative band, whichever is larger.
pub fn allowance(best: f64) -> f64 {
    FLOOR_S.max(best * NOISE_BAND_PCT as f64 / 100.0)
}

/// The weight factor of a member with estimate `own` in a pool whose best
/// estimate is `best` (seconds), never below `min` (`latency_floor`).
///
/// 1 while `own − best` is within [`allowance`]; beyond it,
/// `base ÷ (base + excess − allowance)` with `base = max(best, floor)`:
/// continuous at the edge of the band, and about `best ÷ own` far beyond
/// it. The base is at least the floor because an estimate below it is
/// mostly noise: without that, a 0.1 ms best would make a member at 6 ms
/// look 60 times slower. No estimate, or one that is not a positive
/// number: 1 (a member is not penalised for what is not measured).
pub fn latency_factor(best: f64, own: f64, min: f64) -> f64 {
    if !(best > 0.0 && own > 0.0 && best.is_finite() && own.is_finite()) {
        return 1.0;
    }
    let excess = own - best - allowance(best);
    if excess <= 0.0 {
        return 1.0;
    }
    let base = best.max(FLOOR_S);
    (base / (base + excess)).clamp(min.min(1.0), 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::select::same_rtt;

    const MS: f64 = 1e-3;

    #[test]
    fn noise_moves_nothing() {
        // Loopback: 60 µs against 950 µs (a slow sample the peak kept).
        assert_eq!(latency_factor(0.06 * MS, 0.95 * MS, 0.1), 1.0);
        // Within the absolute floor of a 0.4 ms best.
        assert_eq!(latency_factor(0.4 * MS, 5.39 * MS, 0.1), 1.0);
        // Within the 20 % band of a 30 ms best.
        assert_eq!(latency_factor(30.0 * MS, 35.9 * MS, 0.1), 1.0);
        // The best member itself.
        assert_eq!(latency_factor(5.0 * MS, 5.0 * MS, 0.1), 1.0);
    }

    #[test]
    fn continuous_at_the_edge_of_the_band() {
        for best in [0.05 * MS, 1.0 * MS, 5.0 * MS, 30.0 * MS, 200.0 * MS] {
            let edge = best + allowance(best);
            let inside = latency_factor(best, edge - 1e-9, 0.0);
            let outside = latency_factor(best, edge + 1e-9, 0.0);
            assert_eq!(inside, 1.0);
            assert!(outside < 1.0 && outside > 0.999_99, "{best}: {outside}");
        }
    }

    #[test]
    fn decreasing_beyond_the_band_and_clamped() {
        let best = 20.0 * MS;
        let mut last = 1.0;
        for own in (25..400).map(|o| f64::from(o) * MS) {
            let f = latency_factor(best, own, 0.0);
            assert!(f <= last, "{own}: {f} > {last}");
            last = f;
        }
        // Far beyond: about best ÷ own (the 5 ms allowance forgiven).
        let f = latency_factor(best, 400.0 * MS, 0.0);
        assert!((f - 20.0 / 395.0).abs() < 1e-9, "{f}");
        // A member twice as slow: 20 / (20 + 20 − 5).
        let f = latency_factor(best, 40.0 * MS, 0.0);
        assert!((f - 20.0 / 35.0).abs() < 1e-9, "{f}");
        // Where the band is wider than the floor (30 ms: 6 ms), the band.
        let f = latency_factor(30.0 * MS, 60.0 * MS, 0.0);
        assert!((f - 30.0 / 54.0).abs() < 1e-9, "{f}");
        assert_eq!(latency_factor(best, 4000.0 * MS, 0.1), 0.1);
    }

    #[test]
    fn a_tiny_best_counts_as_the_floor() {
        // 0.1 ms against 12 ms: base 5 ms (the floor), excess 12 − 0.1 − 5
        // = 6.9 ms: 5 / 11.9, not 0.1 / 12.
        let f = latency_factor(0.1 * MS, 12.0 * MS, 0.0);
        assert!((f - 5.0 / 11.9).abs() < 1e-9, "{f}");
        // A real difference still counts: 60 ms against 0.1 ms.
        assert!(latency_factor(0.1 * MS, 60.0 * MS, 0.1) == 0.1);
    }

    #[test]
    fn nonsense_is_neutral() {
        for (b, o) in [
            (0.0, 1.0),
            (1.0, 0.0),
            (-1.0, 1.0),
            (f64::NAN, 1.0),
            (1.0, f64::INFINITY),
        ] {
            assert_eq!(latency_factor(b, o, 0.1), 1.0);
        }
    }

    #[test]
    fn p2c_and_the_factor_agree_on_what_is_noise() {
        let pairs = [
            (60, 950),
            (400, 1399),
            (400, 1402),
            (30_000, 35_999),
            (30_000, 36_010),
        ];
        for (best, own) in pairs {
            let tie = same_rtt(best, own);
            let f = latency_factor(best as f64 / 1e6, own as f64 / 1e6, 0.0);
            assert_eq!(tie, f == 1.0, "{best} {own}: tie {tie}, factor {f}");
        }
    }
}
