//! The checkers: one tokio task per health-table entry that has a check,
//! the rise/fall state machine, and restarts after a reload. The daemon
//! owns the one [`Checker`]; nothing here is process-global.
//!
//! State machine, per entry:
//!
//! - `unknown` until the first probe finishes; the first result decides
//!   (pass: `up`, fail: `down`). While unknown the entry counts as up, or as
//!   down with `unknown_is_up = false`.
//! - `up` goes `down` after `fall` failed probes in a row.
//! - `down` goes `up` after `rise` passed probes in a row.
//!
//! Schedule: probes start `interval` apart (start to start), each gap
//! shortened by a random jitter of up to a tenth of the interval, so entries
//! drift apart instead of firing in lockstep; the first probe after start-up
//! comes after a random delay of up to a quarter interval (at most 1 s). A
//! probe that takes longer than `timeout` fails. So a dead backend leaves the
//! answers at most `fall × interval + timeout` after it died.
//!
//! Reloads: entries whose spec did not change, or changed only in timing,
//! keep their state, counters and cadence (the `EntryStats` is shared
//! between the old and new table, see `carry_map`); the
//! old tasks are aborted and new ones started against the new table. Every
//! write of a result happens under the entry's `Detail` lock after checking
//! that the writing task belongs to the current generation, so an old task
//! that is still finishing a probe can never write a stale state.
//!
//! Signals: every passing probe feeds its duration to the entry's
//! round-trip peak-EWMA and, for a check that reads one, its load figure to
//! the damped load (see `signal`); both are published in the table. Failed
//! probes feed neither: a backend that fails fast would look fast. A load
//! figure that cannot be read keeps the last one and is logged at warn once
//! per distinct error. Every probe but a timeout, pass or fail, feeds the success ratio
//! (`signal::SuccessEwma`, τ = the longer of 15 s and ten intervals), the
//! error penalty's input; a change to up puts back the ratio of the last
//! pass before the change to down (`SuccessEwma::came_up`: an outage is
//! rise/fall's business). The signals carry over a reload with the entry's
//! `EntryStats`; a reload that changes where the load is read starts it over.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::runtime::Handle;
use tokio::sync::Semaphore;
use tokio::task::AbortHandle;

use super::probe::Passed;
use super::signal::DampedLoad;
use super::{probe, state_name, CheckSpec, Detail, HealthTable, DOWN, UNKNOWN, UP};

/// Most probes in flight at once, however many entries there are.
pub const MAX_IN_FLIGHT: usize = 256;

/// The running checkers: one task per checked entry of the current table.
pub struct Checker {
    handle: Handle,
    /// The table (and its specs) that the running tasks write.
    current: Option<(Arc<HealthTable>, Arc<[CheckSpec]>)>,
    tasks: Vec<AbortHandle>,
    generation: u64,
    permits: Arc<Semaphore>,
    rng: fastrand::Rng,
}

impl Checker {
    /// No checks yet; tasks will run on `handle`.
    pub fn new(handle: Handle) -> Checker {
        Checker {
            handle,
            current: None,
            tasks: Vec::new(),
            generation: 0,
            permits: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            rng: fastrand::Rng::new(),
        }
    }

    /// Check the entries of `table` (described by `specs`), stopping the
    /// tasks of the previous table. Entries whose spec did not change keep
    /// their state, counters and cadence. Called at start-up (before the
    /// ready line: checks do not wait for queries) and after each reload.
    pub fn launch(&mut self, table: Arc<HealthTable>, specs: Arc<[CheckSpec]>) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
        self.generation += 1;
        let generation = self.generation;
        let old = self.current.take();
        let carried = old
            .as_ref()
            .map(|(_, o)| super::carry_map(&specs, o))
            .unwrap_or_default();
        let now = Instant::now();
        for (i, spec) in specs.iter().enumerate() {
            let i = i as u32;
            let mut first = None;
            {
                let stats = table.stats(i);
                let mut d = stats.detail();
                d.owner = generation;
                if let (Some((old_table, _)), Some(Some(j))) = (&old, carried.get(i as usize)) {
                    // Results written by the old tasks since the new table was
                    // built: take them over now that those tasks cannot write.
                    if !Arc::ptr_eq(old_table, &table) {
                        table.set_state(i, old_table.state(*j as u32));
                    }
                    if let (Some(c), Some(t), false) = (&spec.check, d.last_start, d.in_flight) {
                        let next = t + Duration::from_millis(c.interval_ms);
                        first = Some(next.saturating_duration_since(now));
                    }
                }
                d.in_flight = false;
                if let Some(c) = &spec.check {
                    retune(&table, i, &mut d, c);
                }
            }
            let Some(check) = &spec.check else {
                continue;
            };
            let first = first.unwrap_or_else(|| {
                let spread = (check.interval_ms / 4).clamp(1, 1000);
                Duration::from_millis(self.rng.u64(..spread))
            });
            let task = self.handle.spawn(run(
                table.clone(),
                i,
                spec.clone(),
                generation,
                first,
                self.rng.u64(..),
                self.permits.clone(),
            ));
            self.tasks.push(task.abort_handle());
        }
        if !self.tasks.is_empty() {
            tracing::info!(
                "health: {} check(s) running (generation {generation})",
                self.tasks.len()
            );
        }
        self.current = Some((table, specs));
    }
}

impl Drop for Checker {
    fn drop(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }
}

/// Set the signals' tuning from the (possibly reloaded) check: a new decay
/// keeps the estimate; a load read from elsewhere, or no longer read,
/// starts over.
fn retune(table: &HealthTable, i: u32, d: &mut Detail, c: &super::Check) {
    d.rtt.set_tau(Duration::from_millis(c.latency_decay_ms));
    d.success.set_tau(super::signal::success_tau(c.interval_ms));
    match &c.load {
        Some(l) if d.load_source.as_ref() == Some(&l.source) => {
            d.load.set_damping(l.smoothing, l.max_step)
        }
        Some(l) => {
            d.load = DampedLoad::new(l.smoothing, l.max_step);
            d.load_source = Some(l.source.clone());
            d.load_error = None;
            table.set_load(i, None);
        }
        None => {
            d.load.clear();
            d.load_source = None;
            d.load_error = None;
            table.set_load(i, None);
        }
    }
}

/// One entry's checker.
async fn run(
    table: Arc<HealthTable>,
    i: u32,
    spec: CheckSpec,
    generation: u64,
    first: Duration,
    seed: u64,
    permits: Arc<Semaphore>,
) {
    let Some(check) = spec.check.clone() else {
        return;
    };
    let interval = Duration::from_millis(check.interval_ms);
    let timeout = Duration::from_millis(check.timeout_ms);
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut next = Instant::now() + first;
    loop {
        tokio::time::sleep_until(next.into()).await;
        // Fleet mode: the nodes this entry is assigned to probe it.
        if table
            .stats(i)
            .remote
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            if table.stats(i).detail().owner != generation {
                return;
            }
            next = Instant::now() + interval;
            continue;
        }
        let permit = permits.acquire().await;
        let t0 = Instant::now();
        {
            let mut d = table.stats(i).detail();
            if d.owner != generation {
                return;
            }
            d.last_start = Some(t0);
            d.in_flight = true;
        }
        let res = match tokio::time::timeout(timeout, probe::probe(&spec)).await {
            Ok(r) => r,
            Err(_) => Err(format!("timeout after {} ms", check.timeout_ms)),
        };
        let took = t0.elapsed();
        drop(permit);
        if !record(&table, i, &spec, generation, res, took, t0 + took) {
            return;
        }
        let jitter = Duration::from_micros(rng.u64(..=interval.as_micros() as u64 / 10));
        next = (t0 + interval - jitter).max(Instant::now());
    }
}

/// The state machine: count the result into `d` and return the new state
/// if it changes.
pub fn step(state: u8, d: &mut Detail, ok: bool, rise: u32, fall: u32) -> Option<u8> {
    if ok {
        d.ok_run = d.ok_run.saturating_add(1);
        d.fail_run = 0;
    } else {
        d.fail_run = d.fail_run.saturating_add(1);
        d.ok_run = 0;
    }
    match state {
        UNKNOWN => Some(if ok { UP } else { DOWN }),
        UP if !ok && d.fail_run >= fall => Some(DOWN),
        DOWN if ok && d.ok_run >= rise => Some(UP),
        _ => None,
    }
}

/// Feed a load reading to the damped figure, or keep the last figure and
/// warn once per distinct error (bad input must not flood the log).
fn record_load(
    table: &HealthTable,
    i: u32,
    spec: &CheckSpec,
    d: &mut Detail,
    load: Result<f64, String>,
) {
    match load {
        Ok(v) => {
            let v = d.load.update(v);
            table.set_load(i, Some(v));
            if d.load_error.take().is_some() {
                tracing::info!(
                    "health: {} (check {}): load readable again: {v:.3}",
                    spec.target(),
                    spec.check_name()
                );
            }
        }
        Err(e) => {
            if d.load_error.as_deref() != Some(e.as_str()) {
                let kept = match d.load.value() {
                    Some(v) => format!("keeping the last figure {v:.3}"),
                    None => "no figure yet".to_string(),
                };
                tracing::warn!(
                    "health: {} (check {}): load {e}; {kept}",
                    spec.target(),
                    spec.check_name()
                );
                d.load_error = Some(e);
            }
        }
    }
}

fn plural(n: u32, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Record one probe result, which finished at `end` after `took`. False if
/// this task's generation is over.
fn record(
    table: &HealthTable,
    i: u32,
    spec: &CheckSpec,
    generation: u64,
    res: Result<Passed, String>,
    took: Duration,
    end: Instant,
) -> bool {
    let Some(check) = &spec.check else {
        return false;
    };
    let stats = table.stats(i);
    let mut d = stats.detail();
    if d.owner != generation {
        return false;
    }
    let ok = res.is_ok();
    stats
        .checks
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    stats.latency.observe(took);
    if !ok {
        stats
            .failures
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    let now = SystemTime::now();
    d.in_flight = false;
    d.last_ok = Some(ok);
    // A timeout is the latency signal's business: counted as a failure,
    // overload would cost weight, push load onto the others and time
    // them out too (the cascade of the ejection cap's reference case).
    if ok || took < Duration::from_millis(check.timeout_ms) {
        let ratio = d.success.update(ok, end);
        table.set_success(i, Some(ratio));
    }
    d.reason = match res {
        Ok(p) => {
            let est = d.rtt.update(took.as_secs_f64(), end);
            table.set_rtt_estimate(i, Some(est));
            if let (Some(l), Some(load)) = (&check.load, p.load) {
                // `launch` tunes every entry first; this keeps a figure from
                // ever being damped with another source's settings.
                if d.load_source.as_ref() != Some(&l.source) {
                    retune(table, i, &mut d, check);
                }
                record_load(table, i, spec, &mut d, load);
            }
            p.what
        }
        Err(s) => s,
    };
    d.last_check = Some(now);
    d.latency_s = took.as_secs_f64();
    let from = table.state(i);
    match step(from, &mut d, ok, check.rise, check.fall) {
        Some(to) => {
            let why = match (from, to) {
                (UNKNOWN, _) => format!("first check: {}", d.reason),
                (_, UP) => format!(
                    "{} in a row: {}",
                    plural(d.ok_run, "success", "successes"),
                    d.reason
                ),
                _ => format!(
                    "{} in a row: {}",
                    plural(d.fail_run, "failure", "failures"),
                    d.reason
                ),
            };
            table.set_state(i, to);
            match to {
                UP => {
                    let ratio = d.success.came_up();
                    table.set_success(i, Some(ratio));
                }
                _ => d.success.went_down(),
            }
            let counter = if to == UP {
                &stats.to_up
            } else {
                &stats.to_down
            };
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            d.last_change = Some(now);
            tracing::info!(
                from = state_name(from),
                "health: {} (check {}) is now {}: {why}",
                spec.target(),
                check.name,
                state_name(to)
            );
            d.change_reason = why;
        }
        None => tracing::debug!(
            "health: {} (check {}) {}: {}",
            spec.target(),
            check.name,
            if ok { "passed" } else { "failed" },
            d.reason
        ),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::{Check, CheckKind, LoadRead, LoadSource};

    fn spec(load: Option<LoadSource>) -> CheckSpec {
        let check = Check {
            name: "c".into(),
            kind: CheckKind::Http,
            port: Some(8080),
            interval_ms: 200,
            timeout_ms: 100,
            rise: 1,
            fall: 1,
            path: "/".into(),
            host: None,
            expect_status: vec![(200, 399)],
            expect_body: None,
            tls_verify: true,
            unknown_is_up: true,
            latency_decay_ms: 1000,
            load: load.map(|source| LoadRead {
                source,
                smoothing: 0.5,
                max_step: 0.1,
            }),
        };
        CheckSpec::new("127.0.0.1".parse().unwrap(), None, Some(Arc::new(check)))
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn passed(load: Option<Result<f64, String>>) -> Result<Passed, String> {
        Ok(Passed {
            what: "HTTP 200".into(),
            load,
        })
    }

    #[test]
    fn only_passing_probes_feed_the_signals() {
        let s = spec(Some(LoadSource::Header("X-Load".into())));
        let t = HealthTable::new(std::slice::from_ref(&s), None);
        t.stats(0).detail().owner = 1;
        let t0 = Instant::now();
        let fail = Err("connect: refused".to_string());
        // A backend that fails fast must not look fast.
        assert!(record(
            &t,
            0,
            &s,
            1,
            fail.clone(),
            Duration::from_millis(1),
            t0
        ));
        assert_eq!((t.rtt_estimate_us(0), t.load(0)), (None, None));
        // But every probe counts in the success ratio (the first sets its clock).
        assert_eq!(t.success(0), Some((1.0, 1)));
        record(
            &t,
            0,
            &s,
            1,
            fail.clone(),
            ms(1),
            t0 + Duration::from_secs(15),
        );
        let (r, n) = t.success(0).unwrap();
        assert!(
            (f64::from(r) - (-1.0f64).exp()).abs() < 1e-6 && n == 2,
            "{r} {n}"
        );
        let ok = passed(Some(Ok(0.4)));
        assert!(record(&t, 0, &s, 1, ok, Duration::from_millis(200), t0));
        assert_eq!(t.rtt_estimate_us(0), Some(200_000));
        assert_eq!(t.load(0), Some(0.4));
        // A failure after it changes neither.
        let g = t.generation();
        record(&t, 0, &s, 1, fail, Duration::from_millis(1), t0);
        assert_eq!(t.rtt_estimate_us(0), Some(200_000));
        assert_eq!(t.generation(), g + 1, "only the state changed (down)");
        // A bad figure keeps the last one and is remembered for the log.
        let bad = passed(Some(Err("X-Load header not a number: \"x\"".into())));
        record(&t, 0, &s, 1, bad, Duration::from_millis(200), t0);
        assert_eq!(t.load(0), Some(0.4));
        assert!(t.stats(0).detail().load_error.is_some());
        // A task of an older generation writes nothing.
        let ok = passed(Some(Ok(1.0)));
        assert!(!record(&t, 0, &s, 0, ok, Duration::from_millis(200), t0));
        assert_eq!(t.load(0), Some(0.4));
    }

    #[test]
    fn retune_keeps_or_starts_over_the_load() {
        let hdr = spec(Some(LoadSource::Header("X-Load".into())));
        let t = HealthTable::new(std::slice::from_ref(&hdr), None);
        t.stats(0).detail().owner = 1;
        let ok = passed(Some(Ok(0.6)));
        record(&t, 0, &hdr, 1, ok, Duration::from_millis(5), Instant::now());
        let c = |s: &CheckSpec| s.check.clone().unwrap();
        let mut d = t.stats(0).detail().clone();
        // Same source: kept.
        retune(&t, 0, &mut d, &c(&hdr));
        assert_eq!((d.load.value(), t.load(0)), (Some(0.6), Some(0.6)));
        // Another source: starts over.
        retune(
            &t,
            0,
            &mut d,
            &c(&spec(Some(LoadSource::Json("load".into())))),
        );
        assert_eq!((d.load.value(), t.load(0)), (None, None));
        // No load keys: no load.
        d.load.update(0.3);
        retune(&t, 0, &mut d, &c(&spec(None)));
        assert_eq!(
            (d.load.value(), t.load(0), d.load_source.clone()),
            (None, None, None)
        );
        assert_eq!(d.rtt.tau(), Duration::from_millis(1000));
    }
}
