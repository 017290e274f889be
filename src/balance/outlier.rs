//! Success-rate outlier ejection (issue #31, Envoy's `outlier_detection`
//! success-rate semantics), opt-in per pool: a member whose damped success
//! ratio is below the pool's mean minus k standard deviations leaves the
//! answers for `base_ejection` × (its ejection count), at most
//! [`MAX_EJECTION_MS`]. Judged only when at least `min_members` members
//! have `min_samples` probes each; members already ejected are left out of
//! the mean (as in Envoy, where they get no traffic to measure).
//!
//! One deviation from Envoy, for probes: a member at or above
//! [`errors::FULL_AT`] is never an outlier. When every other member is at
//! 1, σ is tiny, and a single failed probe would otherwise eject (one
//! costs the ratio at most 9.5 %, see `health::signal::SUCCESS_TAU_INTERVALS`).
//!
//! The state (count, ejected-until) is per member, carried from one refresh
//! to the next in the pool family's report; a reload starts it over. It is
//! applied in the filter stage before the ejection cap and panic, which
//! bound it like every other ejection.

use super::errors;
use crate::pool::policy::OutlierRule;
use crate::pool::{MemberReport, Standing};

/// The longest one ejection lasts: Envoy's `max_ejection_time` default.
pub const MAX_EJECTION_MS: u64 = 300_000;

/// One member as the detector sees it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Seen {
    /// Passes its checks and the operator did not take it out.
    pub eligible: bool,
    /// Its success ratio and probe count (None: no check).
    pub success: Option<(f64, u64)>,
    /// Its state after the previous refresh: (ejections, ejected until ms).
    pub prev: (u32, u64),
}

/// The new state of each member: (ejections, ejected until ms); a member
/// is ejected now when `now_ms` < until.
pub fn judge(rule: &OutlierRule, now_ms: u64, seen: &[Seen]) -> Vec<(u32, u64)> {
    let base = rule.base_ejection.as_millis() as u64;
    let mut state: Vec<(u32, u64)> = seen.iter().map(|s| decay(s.prev, now_ms, base)).collect();
    let judged = |i: usize| {
        let s = &seen[i];
        let enough = s.success.filter(|&(_, n)| n >= rule.min_samples);
        (s.eligible && now_ms >= state[i].1)
            .then_some(enough)
            .flatten()
    };
    let ratios: Vec<(usize, f64)> = (0..seen.len())
        .filter_map(|i| judged(i).map(|(r, _)| (i, r)))
        .collect();
    if ratios.is_empty() || ratios.len() < rule.min_members as usize {
        return state;
    }
    let n = ratios.len() as f64;
    let mean = ratios.iter().map(|(_, r)| r).sum::<f64>() / n;
    let var = ratios.iter().map(|(_, r)| (r - mean).powi(2)).sum::<f64>() / n;
    let line = mean - rule.k * var.sqrt();
    for (i, r) in ratios {
        if r < line && r < errors::FULL_AT {
            let (count, _) = state[i];
            let count = count.saturating_add(1);
            let len = base.saturating_mul(u64::from(count)).min(MAX_EJECTION_MS);
            state[i] = (count, now_ms + len);
        }
    }
    state
}

/// Forget one ejection per `base` ms spent out of ejection (Envoy lowers
/// the multiplier while a host stays healthy).
fn decay((mut count, mut until): (u32, u64), now_ms: u64, base: u64) -> (u32, u64) {
    while count > 0 && base > 0 && now_ms >= until.saturating_add(base) {
        count -= 1;
        until += base;
    }
    (count, until)
}

/// The filter-stage step: judge the family's members and mark the
/// ejected ones [`Standing::Outlier`] (only members `Usable` so far: a
/// failing check or the operator decides first). Returns each member's
/// state for its report.
pub fn apply(
    rule: &OutlierRule,
    now_ms: u64,
    success: &[Option<(f64, u64)>],
    prev: &[MemberReport],
    standing: &mut [Standing],
) -> Vec<(u32, u64)> {
    let seen: Vec<Seen> = standing
        .iter()
        .enumerate()
        .map(|(i, s)| Seen {
            eligible: *s == Standing::Usable,
            success: success[i],
            prev: prev
                .get(i)
                .map_or((0, 0), |r| (r.ejections, r.ejected_until_ms)),
        })
        .collect();
    let state = judge(rule, now_ms, &seen);
    for (s, &(_, until)) in standing.iter_mut().zip(&state) {
        if *s == Standing::Usable && now_ms < until {
            *s = Standing::Outlier;
        }
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rule(k: f64, min_members: u32) -> OutlierRule {
        OutlierRule {
            k,
            min_members,
            min_samples: 10,
            base_ejection: Duration::from_secs(30),
        }
    }

    fn seen(ratios: &[f64], samples: u64) -> Vec<Seen> {
        ratios
            .iter()
            .map(|&r| Seen {
                eligible: true,
                success: Some((r, samples)),
                prev: (0, 0),
            })
            .collect()
    }

    #[test]
    fn ejects_below_mean_minus_k_sigma() {
        // One outlier among n otherwise equal members is √(n − 1) σ below
        // the mean. Six at 1 and one at 0.5: √6 ≈ 2.45 > 1.9.
        let mut r = vec![1.0; 6];
        r.push(0.5);
        let st = judge(&rule(1.9, 5), 1000, &seen(&r, 20));
        assert_eq!(st[6], (1, 31_000));
        assert!(st[..6].iter().all(|&s| s == (0, 0)));
        // Five members: 2 σ, ejected at k = 1.9 (Envoy's least 5 hosts);
        // four: √3 ≈ 1.73 σ, kept.
        let st = judge(&rule(1.9, 4), 1000, &seen(&[1.0, 1.0, 1.0, 1.0, 0.2], 20));
        assert_eq!(st[4], (1, 31_000));
        let st = judge(&rule(1.9, 4), 1000, &seen(&[1.0, 1.0, 1.0, 0.2], 20));
        assert_eq!(st[3], (0, 0));
        // Too few members, or too few samples: nothing is judged.
        let st = judge(&rule(1.0, 4), 1000, &seen(&[1.0, 1.0, 0.2], 20));
        assert_eq!(st[2], (0, 0));
        let st = judge(&rule(1.0, 3), 1000, &seen(&[1.0, 1.0, 0.2], 9));
        assert_eq!(st[2], (0, 0));
        // One stray failure (0.905 among ones) is not enough either way.
        let st = judge(&rule(1.0, 3), 1000, &seen(&[1.0, 1.0, 0.905], 20));
        assert_eq!(st[2], (0, 0));
    }

    #[test]
    fn ejection_grows_and_decays() {
        let r = rule(1.0, 3);
        let mut s = seen(&[1.0, 1.0, 0.4], 20);
        let st = judge(&r, 0, &s);
        assert_eq!(st[2], (1, 30_000));
        // Still sick when it ends: the second lasts twice as long.
        s[2].prev = st[2];
        assert_eq!(judge(&r, 10_000, &s)[2], (1, 30_000), "still out");
        let st = judge(&r, 30_000, &s);
        assert_eq!(st[2], (2, 90_000));
        // Healthy again: one ejection forgotten per 30 s out.
        s[2].prev = st[2];
        s[2].success = Some((1.0, 50));
        assert_eq!(judge(&r, 119_999, &s)[2], (2, 90_000));
        assert_eq!(judge(&r, 120_000, &s)[2], (1, 120_000));
        assert_eq!(judge(&r, 150_000, &s)[2], (0, 150_000));
        // Bounded: the 20th ejection lasts MAX_EJECTION_MS.
        s[2].prev = (19, 0);
        s[2].success = Some((0.1, 50));
        assert_eq!(judge(&r, 1, &s)[2], (20, 1 + MAX_EJECTION_MS));
    }

    #[test]
    fn only_usable_members_are_judged_and_marked() {
        let r = rule(0.5, 3);
        let succ = [
            Some((1.0, 20)),
            Some((1.0, 20)),
            Some((0.3, 20)),
            Some((0.1, 20)),
        ];
        let mut st = [
            Standing::Usable,
            Standing::Usable,
            Standing::Usable,
            Standing::Ejected,
        ];
        let out = apply(&r, 5, &succ, &[], &mut st);
        assert_eq!(st[2], Standing::Outlier);
        assert_eq!(st[3], Standing::Ejected, "a failing check decides first");
        assert_eq!(out[3], (0, 0));
    }
}
