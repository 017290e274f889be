//! The checkers: one tokio task per health-table entry that has a check,
//! the rise/fall state machine, restarts after a reload, and the operator
//! overrides.
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

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use tokio::runtime::Handle;
use tokio::task::AbortHandle;

use super::{
    override_name, probe, state_name, CheckSpec, Detail, HealthTable, DOWN, OVR_NONE, UNKNOWN, UP,
};
use crate::engine::Engine;
use crate::pool::Rng;
use crate::server::Shared;

/// Most probes in flight at once, however many entries there are.
pub const MAX_IN_FLIGHT: usize = 256;
static PERMITS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_IN_FLIGHT);

/// Operator overrides: (address, port) to state; port None covers every
/// port of the address. Kept here, outside the engine, so they survive
/// reloads whatever the new config changes.
pub type Overrides = BTreeMap<(IpAddr, Option<u16>), u8>;

struct Runner {
    handle: Option<Handle>,
    /// The engine whose table the running tasks write.
    engine: Option<Arc<Engine>>,
    tasks: Vec<AbortHandle>,
    generation: u64,
    overrides: Overrides,
}

static RUNNER: Mutex<Runner> = Mutex::new(Runner {
    handle: None,
    engine: None,
    tasks: Vec::new(),
    generation: 0,
    overrides: BTreeMap::new(),
});

fn runner() -> MutexGuard<'static, Runner> {
    RUNNER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Start the checkers for the current engine, on `rt`. Called once, when
/// the server starts (before the ready line): checks do not wait for queries.
pub fn start(rt: &tokio::runtime::Runtime, shared: &Arc<Shared>) {
    let mut r = runner();
    r.handle = Some(rt.handle().clone());
    let engine = shared.engine.load_full();
    launch(&mut r, engine);
}

/// Restart the checkers against the engine that a reload just swapped in.
pub fn restart(shared: &Arc<Shared>) {
    let mut r = runner();
    if r.handle.is_none() {
        return;
    }
    let engine = shared.engine.load_full();
    launch(&mut r, engine);
}

fn launch(r: &mut Runner, engine: Arc<Engine>) {
    let Some(handle) = r.handle.clone() else {
        return;
    };
    for t in r.tasks.drain(..) {
        t.abort();
    }
    r.generation += 1;
    let generation = r.generation;
    let old = r.engine.take();
    let carried = old
        .as_ref()
        .map(|o| super::carry_map(&engine.checks, &o.checks))
        .unwrap_or_default();
    let table = &engine.health;
    let now = Instant::now();
    let mut rng = Rng::seeded();
    for (i, spec) in engine.checks.iter().enumerate() {
        let i = i as u32;
        let mut first = None;
        {
            let stats = table.stats(i);
            let mut d = stats.detail();
            d.owner = generation;
            if let (Some(o), Some(Some(j))) = (&old, carried.get(i as usize)) {
                // Results written by the old tasks since the new table was
                // built: take them over now that those tasks cannot write.
                if !Arc::ptr_eq(&o.health, &engine.health) {
                    table.set_state(i, o.health.state(*j as u32));
                }
                if let (Some(c), Some(t), false) = (&spec.check, d.last_start, d.in_flight) {
                    let next = t + Duration::from_millis(c.interval_ms);
                    first = Some(next.saturating_duration_since(now));
                }
            }
            d.in_flight = false;
        }
        table.set_override(i, override_for(&r.overrides, spec));
        let Some(check) = &spec.check else {
            continue;
        };
        let first = first.unwrap_or_else(|| {
            let spread = (check.interval_ms / 4).clamp(1, 1000);
            Duration::from_millis(rng.below(spread))
        });
        let seed = rng.next_u64();
        let task = handle.spawn(run(
            engine.health.clone(),
            i,
            spec.clone(),
            generation,
            first,
            seed,
        ));
        r.tasks.push(task.abort_handle());
    }
    if !r.tasks.is_empty() {
        tracing::info!(
            "health: {} check(s) running (generation {generation})",
            r.tasks.len()
        );
    }
    r.engine = Some(engine);
}

/// One entry's checker.
async fn run(
    table: Arc<HealthTable>,
    i: u32,
    spec: CheckSpec,
    generation: u64,
    first: Duration,
    seed: u64,
) {
    let Some(check) = spec.check.clone() else {
        return;
    };
    let interval = Duration::from_millis(check.interval_ms);
    let timeout = Duration::from_millis(check.timeout_ms);
    let mut rng = seed;
    let mut next = Instant::now() + first;
    loop {
        tokio::time::sleep_until(next.into()).await;
        let permit = PERMITS.acquire().await;
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
        if !record(&table, i, &spec, generation, res, took) {
            return;
        }
        let jitter =
            Duration::from_micros(splitmix(&mut rng) % (interval.as_micros() as u64 / 10 + 1));
        next = (t0 + interval - jitter).max(Instant::now());
    }
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
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

fn plural(n: u32, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Record one probe result. False if this task's generation is over.
fn record(
    table: &HealthTable,
    i: u32,
    spec: &CheckSpec,
    generation: u64,
    res: Result<String, String>,
    took: Duration,
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
    d.reason = match res {
        Ok(s) | Err(s) => s,
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

/// The override that applies to `spec`: one for its address and port wins
/// over one for the whole address.
pub fn override_for(map: &Overrides, spec: &CheckSpec) -> u8 {
    if let Some(p) = spec.effective_port() {
        if let Some(&o) = map.get(&(spec.addr, Some(p))) {
            return o;
        }
    }
    map.get(&(spec.addr, None)).copied().unwrap_or(OVR_NONE)
}

/// Put the current overrides into a freshly built table (called by the
/// engine build, so a reloaded engine is right from its first query).
pub fn apply_overrides(table: &HealthTable, specs: &[CheckSpec]) {
    let r = runner();
    for (i, s) in specs.iter().enumerate() {
        table.set_override(i as u32, override_for(&r.overrides, s));
    }
}

/// The overrides in force, for `/status`.
pub fn overrides() -> Overrides {
    runner().overrides.clone()
}

/// Set (or with `OVR_NONE` clear) an operator override for `addr`, or for
/// `addr` on one port. Returns how many entries (distinct address, port,
/// check) it covers now. Setting one for an address that no member has is
/// an error; clearing always works.
pub fn set_override(
    shared: &Shared,
    addr: IpAddr,
    port: Option<u16>,
    state: u8,
) -> Result<usize, String> {
    let mut r = runner();
    let engine = shared.engine.load_full();
    let matches = |s: &CheckSpec| s.addr == addr && (port.is_none() || s.effective_port() == port);
    let matched = engine.checks.iter().filter(|s| matches(s)).count();
    let what = match port {
        Some(p) => format!("{} port {p}", addr),
        None => addr.to_string(),
    };
    if matched == 0 && state != OVR_NONE {
        return Err(match port {
            Some(_) => format!("no member {addr} is checked on port {}", port.unwrap_or(0)),
            None => format!("no pool has a member {addr}"),
        });
    }
    let prev = if state == OVR_NONE {
        r.overrides.remove(&(addr, port))
    } else {
        r.overrides.insert((addr, port), state)
    };
    for (i, s) in engine.checks.iter().enumerate() {
        if s.addr == addr {
            engine
                .health
                .set_override(i as u32, override_for(&r.overrides, s));
        }
    }
    tracing::info!(
        "health: operator override for {what}: {} (was {})",
        override_name(state),
        override_name(prev.unwrap_or(OVR_NONE))
    );
    Ok(matched)
}
