//! The measured signals of a health entry, as small pure types: a
//! peak-EWMA of the check's round-trip time ([`PeakEwma`]), the damped
//! load figure a backend reports ([`DampedLoad`]) and the damped success
//! ratio of its probes ([`SuccessEwma`]). Neither reads a clock or
//! does I/O: the checker feeds them with real probes, and a simulator can
//! feed them with a synthetic clock and get the same numbers.
//!
//! Both only describe; what the balancer does with them (weights) is the
//! pool's business.

use std::time::{Duration, Instant};

use super::spec::{DEFAULT_LATENCY_DECAY_MS, DEFAULT_LOAD_MAX_STEP, DEFAULT_LOAD_SMOOTHING};

/// Peak-EWMA of a latency, as Finagle and Linkerd keep it: a sample above
/// the estimate replaces it at once (so a backend that turns slow is seen
/// slow at the next sample); a lower sample pulls the estimate down with
/// time constant `tau`: `est += (sample − est) × (1 − e^(−Δt/τ))`, where
/// Δt is the time since the previous sample. The decay depends on elapsed
/// time, not on the number of samples, so it means the same at any check
/// interval.
#[derive(Debug, Clone, PartialEq)]
pub struct PeakEwma {
    tau: Duration,
    est: Option<f64>,
    last: Option<Instant>,
}

impl PeakEwma {
    /// No estimate yet; lower samples decay with time constant `tau`.
    pub fn new(tau: Duration) -> PeakEwma {
        PeakEwma {
            tau,
            est: None,
            last: None,
        }
    }

    /// The time constant of the decay.
    pub fn tau(&self) -> Duration {
        self.tau
    }

    /// Change the time constant, keeping the estimate (a reload that only
    /// retunes the check).
    pub fn set_tau(&mut self, tau: Duration) {
        self.tau = tau;
    }

    /// Take a sample of `sample_s` seconds measured at `now`; returns the
    /// new estimate in seconds. A sample that is negative or not finite is
    /// ignored. `now` earlier than the previous sample counts as Δt = 0.
    pub fn update(&mut self, sample_s: f64, now: Instant) -> f64 {
        if !(sample_s.is_finite() && sample_s >= 0.0) {
            return self.est.unwrap_or(0.0);
        }
        let est = match (self.est, self.last) {
            (Some(est), _) if sample_s >= est => sample_s,
            (Some(est), Some(last)) => est + (sample_s - est) * step(last, now, self.tau),
            _ => sample_s,
        };
        self.est = Some(est);
        // Keep the latest time even if a clock went back, so Δt never spans
        // more than really passed.
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
        est
    }

    /// The estimate in seconds; None before the first sample.
    pub fn estimate(&self) -> Option<f64> {
        self.est
    }
}

impl Default for PeakEwma {
    /// No estimate, the default time constant (`latency_decay`, 10 s).
    fn default() -> PeakEwma {
        PeakEwma::new(Duration::from_millis(DEFAULT_LATENCY_DECAY_MS))
    }
}

/// A reported load figure (a fraction 0..1), damped so that weights that
/// follow it do not oscillate: each sample moves the figure by an EWMA
/// (`smoothing` is the new sample's weight), and by at most `max_step`.
/// The first sample is taken as it is: there is nothing to damp against.
/// Samples come one per passing check, so `max_step` bounds the change per
/// check interval.
#[derive(Debug, Clone, PartialEq)]
pub struct DampedLoad {
    smoothing: f64,
    max_step: f64,
    value: Option<f64>,
}

impl DampedLoad {
    /// No figure yet. `smoothing` and `max_step` are clamped into (0, 1]
    /// (the config has validated them already).
    pub fn new(smoothing: f64, max_step: f64) -> DampedLoad {
        let unit = |v: f64| {
            if v.is_finite() {
                v.clamp(f64::MIN_POSITIVE, 1.0)
            } else {
                1.0
            }
        };
        DampedLoad {
            smoothing: unit(smoothing),
            max_step: unit(max_step),
            value: None,
        }
    }

    /// Change the damping, keeping the figure (a reload that retunes it).
    pub fn set_damping(&mut self, smoothing: f64, max_step: f64) {
        let v = self.value;
        *self = DampedLoad::new(smoothing, max_step);
        self.value = v;
    }

    /// Take a reported figure; returns the new damped figure. The figure is
    /// clamped into 0..1; one that is not finite is ignored (the caller
    /// reports it).
    pub fn update(&mut self, sample: f64) -> f64 {
        if !sample.is_finite() {
            return self.value.unwrap_or(0.0);
        }
        let sample = sample.clamp(0.0, 1.0);
        let v = match self.value {
            None => sample,
            Some(v) => {
                let step = ((sample - v) * self.smoothing).clamp(-self.max_step, self.max_step);
                (v + step).clamp(0.0, 1.0)
            }
        };
        self.value = Some(v);
        v
    }

    /// The damped figure; None before the first sample.
    pub fn value(&self) -> Option<f64> {
        self.value
    }

    /// Forget the figure (the check stopped reading one, or reads another).
    pub fn clear(&mut self) {
        self.value = None;
    }
}

impl Default for DampedLoad {
    /// No figure, the default damping (`load_smoothing` 0.5, `load_max_step` 0.1).
    fn default() -> DampedLoad {
        DampedLoad::new(DEFAULT_LOAD_SMOOTHING, DEFAULT_LOAD_MAX_STEP)
    }
}

/// Least time constant of [`SuccessEwma`]: 15 s, so at a 1 s check
/// interval the ratio remembers about 2τ/Δt = 30 probes (the window of
/// Finagle's failure accrual is 30 s).
pub const SUCCESS_TAU_MIN_MS: u64 = 15_000;
/// [`SuccessEwma`]'s time constant in check intervals when that is longer
/// than [`SUCCESS_TAU_MIN_MS`]: one failed probe then moves the ratio by
/// at most 1 − e^(−1/10) = 9.5 %, so it stays above the error penalty's
/// dead zone (0.9), and a slow check still averages over about twenty
/// probes instead of following the last one.
pub const SUCCESS_TAU_INTERVALS: u64 = 10;

/// The success ratio from which a member counts as well: the error
/// penalty's dead zone ends here (`balance::errors`).
pub const SUCCESS_WELL: f64 = 0.9;

/// The time constant of the success ratio of a check probing every
/// `interval_ms`: the longer of 15 s and ten intervals.
pub fn success_tau(interval_ms: u64) -> Duration {
    Duration::from_millis(SUCCESS_TAU_MIN_MS.max(interval_ms.saturating_mul(SUCCESS_TAU_INTERVALS)))
}

/// The damped success ratio of a member's probes, fed by every probe,
/// pass (1) or fail (0), but those that time out (the checker leaves them
/// to the latency signal): a time-based EWMA, `r += (x − r) × (1 − e^(−Δt/τ))`
/// with Δt the time since the previous probe, so it means the same at any
/// check interval. It starts at 1 (a new member is presumed well) and the
/// first probe only sets the clock; a member that turns sick loses ratio
/// over about τ, and one that recovers regains it over about τ (a ramp,
/// like slow start). Counts its probes, for outlier detection's
/// `min_samples`.
#[derive(Debug, Clone, PartialEq)]
pub struct SuccessEwma {
    tau: Duration,
    ratio: f64,
    /// The ratio after the last passing probe.
    at_pass: f64,
    /// `at_pass` when the member last went down.
    at_down: f64,
    samples: u64,
    last: Option<Instant>,
}

impl SuccessEwma {
    /// Ratio 1, no probe yet, time constant `tau`.
    pub fn new(tau: Duration) -> SuccessEwma {
        SuccessEwma {
            tau,
            ratio: 1.0,
            at_pass: 1.0,
            at_down: 1.0,
            samples: 0,
            last: None,
        }
    }

    /// Change the time constant, keeping the ratio (a reload that retunes the check).
    pub fn set_tau(&mut self, tau: Duration) {
        self.tau = tau;
    }

    /// The time constant.
    pub fn tau(&self) -> Duration {
        self.tau
    }

    /// Count one probe that finished at `now`; returns the new ratio.
    /// `now` earlier than the previous probe counts as Δt = 0.
    pub fn update(&mut self, ok: bool, now: Instant) -> f64 {
        if let Some(last) = self.last {
            let w = step(last, now, self.tau);
            let x = if ok { 1.0 } else { 0.0 };
            self.ratio = (self.ratio + (x - self.ratio) * w).clamp(0.0, 1.0);
        }
        if ok {
            self.at_pass = self.ratio;
        }
        self.samples = self.samples.saturating_add(1);
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
        self.ratio
    }

    /// The member went down through `fall`: remember the ratio of its
    /// last pass before the failure run.
    pub fn went_down(&mut self) {
        self.at_down = self.at_pass;
    }

    /// The member came up through `rise`: the outage was rise/fall's
    /// business (and ramping a returning member is slow start's), so the
    /// ratio goes back to at least what it was at the last pass before it
    /// went down. A member back from a clean outage starts well; one that
    /// flaps through rise/fall keeps its low ratio. Returns the new ratio.
    pub fn came_up(&mut self) -> f64 {
        self.ratio = self.ratio.max(self.at_down);
        self.ratio
    }

    /// The ratio, in [0, 1].
    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    /// Probes counted.
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

impl Default for SuccessEwma {
    /// Ratio 1, the least time constant (15 s).
    fn default() -> SuccessEwma {
        SuccessEwma::new(Duration::from_millis(SUCCESS_TAU_MIN_MS))
    }
}

/// The weight of a new sample in a time-based EWMA with time constant
/// `tau`, `last` to `now` after the previous one: 1 − e^(−Δt/τ), so the
/// average means the same at any sampling rate. τ = 0 means no memory
/// (follow the sample); `now` before `last` counts as Δt = 0.
fn step(last: Instant, now: Instant, tau: Duration) -> f64 {
    let dt = now.saturating_duration_since(last).as_secs_f64();
    let tau = tau.as_secs_f64();
    if tau > 0.0 {
        1.0 - (-dt / tau).exp()
    } else {
        1.0
    }
}

/// Parse a reported load figure: a decimal number, finite; clamped into
/// 0..1 (a negative figure is 0: idle). Err with the text as it came.
pub fn parse_load(text: &str) -> Result<f64, String> {
    let t = text.trim();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v.clamp(0.0, 1.0)),
        _ => Err(format!(
            "not a number: {:?}",
            t.chars().take(40).collect::<String>()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn peak_replaces_at_once() {
        let t0 = Instant::now();
        let mut e = PeakEwma::new(secs(10.0));
        assert_eq!(e.estimate(), None);
        assert_eq!(e.update(0.010, t0), 0.010);
        // A higher sample is the new estimate however little time passed.
        assert_eq!(e.update(0.200, t0 + secs(0.001)), 0.200);
        assert_eq!(e.estimate(), Some(0.200));
    }

    #[test]
    fn decays_with_the_time_constant() {
        let t0 = Instant::now();
        let tau = 2.0;
        let mut e = PeakEwma::new(secs(tau));
        e.update(1.0, t0);
        // One sample of 0 after exactly τ: 1 − (1 − e^−1) = e^−1.
        let v = e.update(0.0, t0 + secs(tau));
        assert!((v - (-1.0f64).exp()).abs() < 1e-9, "{v}");
        // Many small steps over τ decay by the same factor as one step:
        // the decay follows time, not the number of samples.
        let mut f = PeakEwma::new(secs(tau));
        f.update(1.0, t0);
        for k in 1..=100 {
            f.update(0.0, t0 + secs(tau * k as f64 / 100.0));
        }
        let g = f.estimate().unwrap();
        assert!((g - (-1.0f64).exp()).abs() < 1e-9, "{g}");
        // Towards the sample, never below it.
        let mut h = PeakEwma::new(secs(1.0));
        h.update(0.5, t0);
        let v = h.update(0.1, t0 + secs(30.0));
        assert!((0.1..0.1 + 1e-9).contains(&v), "{v}");
    }

    #[test]
    fn no_time_no_decay_and_bad_samples_ignored() {
        let t0 = Instant::now() + secs(100.0);
        let mut e = PeakEwma::new(secs(1.0));
        e.update(0.3, t0);
        // Same instant, or a clock that went back: Δt = 0, no change.
        assert_eq!(e.update(0.1, t0), 0.3);
        assert_eq!(e.update(0.1, t0 - secs(5.0)), 0.3);
        assert_eq!(e.update(f64::NAN, t0 + secs(1.0)), 0.3);
        assert_eq!(e.update(-1.0, t0 + secs(1.0)), 0.3);
        // A zero τ follows every sample.
        let mut z = PeakEwma::new(Duration::ZERO);
        z.update(0.3, t0);
        assert_eq!(z.update(0.1, t0 + secs(0.1)), 0.1);
    }

    #[test]
    fn load_first_sample_then_smoothed_and_capped() {
        let mut l = DampedLoad::new(0.5, 0.1);
        assert_eq!(l.value(), None);
        assert_eq!(l.update(0.2), 0.2);
        // EWMA half-way would be 0.5; the step cap allows 0.1.
        assert!((l.update(0.8) - 0.3).abs() < 1e-12);
        // Close to the target the EWMA is smaller than the cap.
        let mut m = DampedLoad::new(0.5, 0.1);
        m.update(0.7);
        assert!((m.update(0.8) - 0.75).abs() < 1e-12);
        // Converges, in steps no larger than the cap.
        let mut prev = l.value().unwrap();
        for _ in 0..40 {
            let v = l.update(0.8);
            assert!((v - prev).abs() <= 0.1 + 1e-12);
            prev = v;
        }
        assert!((prev - 0.8).abs() < 1e-3, "{prev}");
        // Out-of-range figures clamp; non-finite ones are ignored.
        let mut c = DampedLoad::new(1.0, 1.0);
        assert_eq!(c.update(7.0), 1.0);
        assert_eq!(c.update(-3.0), 0.0);
        assert_eq!(c.update(f64::INFINITY), 0.0);
        c.clear();
        assert_eq!(c.value(), None);
    }

    #[test]
    fn square_wave_does_not_oscillate_at_full_amplitude() {
        // A backend flipping between idle and saturated at every check,
        // the oscillation undamped weights feed.
        let mut l = DampedLoad::new(0.5, 0.1);
        l.update(0.5);
        let mut seen = Vec::new();
        for k in 0..200 {
            seen.push(l.update(if k % 2 == 0 { 1.0 } else { 0.0 }));
        }
        let tail = &seen[20..];
        let lo = tail.iter().cloned().fold(f64::MAX, f64::min);
        let hi = tail.iter().cloned().fold(f64::MIN, f64::max);
        // The input swings by 1; the output by at most one step each way.
        assert!(hi - lo <= 0.1 + 1e-9, "swing {lo}..{hi}");
        assert!((0.35..=0.65).contains(&lo) && (0.35..=0.65).contains(&hi));
        // A slower wave (5 checks high, 5 low): at most 5 steps of 0.1 per
        // half period, so half the input's swing.
        let mut s = DampedLoad::new(0.5, 0.1);
        s.update(0.5);
        let seen: Vec<f64> = (0..200)
            .map(|k| s.update(if (k / 5) % 2 == 0 { 1.0 } else { 0.0 }))
            .collect();
        let lo = seen[100..].iter().cloned().fold(f64::MAX, f64::min);
        let hi = seen[100..].iter().cloned().fold(f64::MIN, f64::max);
        assert!(hi - lo <= 0.5 + 1e-3, "swing {lo}..{hi}");
        for w in seen.windows(2) {
            assert!((w[1] - w[0]).abs() <= 0.1 + 1e-9);
        }
    }

    #[test]
    fn parse_load_figures() {
        assert_eq!(parse_load(" 0.73 "), Ok(0.73));
        assert_eq!(parse_load("2"), Ok(1.0));
        assert_eq!(parse_load("-0.5"), Ok(0.0));
        assert!(parse_load("banana").unwrap_err().contains("banana"));
        assert!(parse_load("NaN").is_err());
        assert!(parse_load("inf").is_err());
        assert!(parse_load("").is_err());
    }

    #[test]
    fn success_ratio_follows_time_not_probe_count() {
        let t0 = Instant::now();
        let mut e = SuccessEwma::new(secs(10.0));
        assert_eq!((e.ratio(), e.samples()), (1.0, 0));
        // The first probe only sets the clock.
        assert_eq!(e.update(false, t0), 1.0);
        // A failure after exactly τ: 1 − (1 − e^−1) = e^−1.
        let v = e.update(false, t0 + secs(10.0));
        assert!((v - (-1.0f64).exp()).abs() < 1e-9, "{v}");
        // Same decay in many small steps.
        let mut f = SuccessEwma::new(secs(10.0));
        f.update(true, t0);
        for k in 1..=50 {
            f.update(false, t0 + secs(10.0 * k as f64 / 50.0));
        }
        assert!((f.ratio() - (-1.0f64).exp()).abs() < 1e-9);
        assert_eq!(f.samples(), 51);
        // Recovery is a ramp, not a step: half-way back after τ ln 2.
        let mut g = SuccessEwma::new(secs(10.0));
        g.update(false, t0);
        g.update(false, t0 + secs(1000.0));
        assert!(g.ratio() < 1e-9);
        let h = g.update(true, t0 + secs(1000.0 + 10.0 * 2f64.ln()));
        assert!((h - 0.5).abs() < 1e-9, "{h}");
        // A clock that went back changes nothing.
        assert_eq!(g.update(false, t0), h);
    }

    #[test]
    fn an_outage_is_not_counted_twice() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + secs(s);
        // Well, then a clean outage: back where it was at its last pass.
        let mut e = SuccessEwma::new(secs(15.0));
        e.update(true, at(0.0));
        for k in 1..=3 {
            e.update(false, at(k as f64));
        }
        e.went_down();
        for k in 4..=100 {
            e.update(false, at(k as f64));
        }
        e.update(true, at(101.0));
        assert!(e.ratio() < 0.1);
        assert_eq!(e.came_up(), 1.0);
        // Flapping through rise/fall: it keeps the low ratio of its last pass.
        let mut f = SuccessEwma::new(secs(15.0));
        for k in 0..60 {
            f.update(k % 2 == 0, at(k as f64));
        }
        let low = f.ratio();
        f.update(false, at(60.0));
        f.went_down();
        f.update(true, at(61.0));
        assert!(f.came_up() <= low + 0.05, "{low} {}", f.ratio());
    }

    #[test]
    fn flapping_settles_near_its_pass_rate() {
        let t0 = Instant::now();
        let mut e = SuccessEwma::new(success_tau(1000));
        for k in 0..120 {
            e.update(k % 2 == 0, t0 + secs(k as f64));
        }
        assert!((e.ratio() - 0.5).abs() < 0.05, "{}", e.ratio());
        assert_eq!(success_tau(1000), secs(15.0));
        assert_eq!(success_tau(10_000), secs(100.0));
    }
}
