//! The lock-free health table the answer path reads: per entry a probed
//! state and an operator override (relaxed atomics), plus counters and
//! details for `/status` that the query path never touches, the measured
//! signals (round-trip estimate, reported load, success ratio) published for the weight
//! computation, and a generation counter that says something changed.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use tokio::sync::Notify;

use super::signal::{DampedLoad, PeakEwma, SuccessEwma};
use super::spec::{carry_map, CheckSpec, LoadSource};
use crate::metrics::Histogram;

/// Health state: not probed yet (counts as up unless `unknown_is_up = false`).
pub const UNKNOWN: u8 = 0;
/// Health state: up.
pub const UP: u8 = 1;
/// Health state: down.
pub const DOWN: u8 = 2;

/// Operator override of a member's state.
pub const OVR_NONE: u8 = 0;
/// Override: up whatever the probes say.
pub const OVR_UP: u8 = 1;
/// Override: down whatever the probes say.
pub const OVR_DOWN: u8 = 2;
/// Override: down, and left out even when every pool is down.
pub const OVR_DRAIN: u8 = 3;

/// The name of a health state (`up`, `down`, `unknown`).
pub fn state_name(s: u8) -> &'static str {
    match s {
        UP => "up",
        DOWN => "down",
        _ => "unknown",
    }
}

/// The name of an override (`up`, `down`, `drain`, `none`).
pub fn override_name(o: u8) -> &'static str {
    match o {
        OVR_UP => "up",
        OVR_DOWN => "down",
        OVR_DRAIN => "drain",
        _ => "none",
    }
}

/// An override from its name (`clear` and the empty string mean `none`).
pub fn parse_override(s: &str) -> Option<u8> {
    match s {
        "up" => Some(OVR_UP),
        "down" => Some(OVR_DOWN),
        "drain" => Some(OVR_DRAIN),
        "none" | "clear" | "" => Some(OVR_NONE),
        _ => None,
    }
}

/// What the checker knows about one entry beyond its state: the run
/// counters of the state machine, the last result and the last change.
/// Written by the entry's checker task, read by `/status`; never touched by
/// the answer path.
#[derive(Debug, Default, Clone)]
pub struct Detail {
    /// Which checker generation may write this entry (see `checker`).
    pub owner: u64,
    /// Passed probes in a row (0 after a failure).
    pub ok_run: u32,
    /// Failed probes in a row (0 after a pass).
    pub fail_run: u32,
    /// Last probe: Some(true) passed, Some(false) failed, None not yet.
    pub last_ok: Option<bool>,
    /// What the last probe saw ("HTTP 200", "connect: Connection refused").
    pub reason: String,
    /// When the last probe finished.
    pub last_check: Option<SystemTime>,
    /// How long the last probe took, in seconds.
    pub latency_s: f64,
    /// When the state last changed (None: never since start-up).
    pub last_change: Option<SystemTime>,
    /// Why the state last changed ("3 failures in a row: ...").
    pub change_reason: String,
    /// When the current or last probe started, to keep the cadence across reloads.
    pub last_start: Option<Instant>,
    /// A probe is running now.
    pub in_flight: bool,
    /// The round-trip estimate, fed by passing probes.
    pub rtt: PeakEwma,
    /// The reported load, damped; fed by passing probes of a check that reads one.
    pub load: DampedLoad,
    /// Where `load` was read from: a reload that changes the source starts over.
    pub load_source: Option<LoadSource>,
    /// Why the last load figure could not be read (None: it could), so a
    /// bad figure is logged once per change, not once per probe.
    pub load_error: Option<String>,
    /// The damped success ratio, fed by every probe.
    pub success: SuccessEwma,
}

/// "None" in a published signal: never a stored value (as f32 bits it is a NaN).
const NO_SIGNAL: u32 = u32::MAX;

/// The signals of one entry as published for lock-free reading: the
/// round-trip estimate in µs, the damped load and the success ratio as f32
/// bits, each `NO_SIGNAL` while there is none. Written by the entry's checker.
#[derive(Debug)]
pub struct Signals {
    rtt_us: AtomicU32,
    load: AtomicU32,
    success: AtomicU32,
}

impl Default for Signals {
    fn default() -> Signals {
        Signals {
            rtt_us: AtomicU32::new(NO_SIGNAL),
            load: AtomicU32::new(NO_SIGNAL),
            success: AtomicU32::new(NO_SIGNAL),
        }
    }
}

/// Counters and details of one entry. Shared (by `Arc`) between the tables
/// of successive reloads while the entry's spec does not change, so the
/// counters stay monotonic and the details carry over.
#[derive(Debug, Default)]
pub struct EntryStats {
    /// The run counters and last result; lock with [`EntryStats::detail`].
    pub detail: Mutex<Detail>,
    /// Probes finished.
    pub checks: AtomicU64,
    /// Probes that failed.
    pub failures: AtomicU64,
    /// Changes to up.
    pub to_up: AtomicU64,
    /// Changes to down.
    pub to_down: AtomicU64,
    /// Probe durations, failures included.
    pub latency: Histogram,
    /// The published signals (see [`HealthTable::rtt_estimate_us`]).
    pub signals: Signals,
    /// Fleet mode: other nodes probe this entry and its state comes from
    /// their results, so the local checker skips its probes.
    pub remote: std::sync::atomic::AtomicBool,
}

impl EntryStats {
    /// Lock the detail, ignoring poisoning (a panicked writer leaves plain data).
    pub fn detail(&self) -> std::sync::MutexGuard<'_, Detail> {
        self.detail.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The health of every distinct check target (an entry per [`CheckSpec`],
/// in `Engine::checks` order; `Member::health` indexes it), read per query
/// with relaxed atomic loads.
///
/// Each entry has a probed state (`UNKNOWN`, `UP`, `DOWN`), written only by
/// its checker task, and an operator override (`OVR_*`), set from the
/// operator's override map (see `overrides`); an override other than `OVR_NONE` wins over the probed state.
/// The table belongs to one engine and is shared (by `Arc`) with the
/// checkers while that engine serves; a reload builds a new table that
/// carries states, overrides and counters over (see [`HealthTable::new`]).
///
/// Besides the state, each checked entry publishes two measured signals
/// ([`HealthTable::rtt_estimate_us`], [`HealthTable::load`]); and
/// [`HealthTable::generation`] counts every change of a state, an override
/// or a signal, so whatever derives values from them (effective weights)
/// can tell cheaply whether to recompute, or wait on
/// [`HealthTable::changed`].
pub struct HealthTable {
    state: Vec<AtomicU8>,
    overrides: Vec<AtomicU8>,
    unknown_up: Vec<bool>,
    stats: Vec<Arc<EntryStats>>,
    generation: AtomicU64,
    changed: Notify,
}

impl HealthTable {
    /// A table for `specs`, carrying states (and counters) over from a
    /// previous table for specs that did not change, or whose check changed
    /// only in timing (see `carry_map`).
    pub fn new(specs: &[CheckSpec], prev: Option<(&HealthTable, &[CheckSpec])>) -> HealthTable {
        let mut state = Vec::with_capacity(specs.len());
        let mut overrides = Vec::with_capacity(specs.len());
        let mut unknown_up = Vec::with_capacity(specs.len());
        let mut stats = Vec::with_capacity(specs.len());
        let carried = prev.map(|(_, ps)| carry_map(specs, ps));
        // Entries without a check are never probed: their counters stay
        // zero, so they share one (50,000 pools of 4 members would
        // otherwise hold 200,000 of them).
        let unchecked = Arc::new(EntryStats::default());
        for (k, s) in specs.iter().enumerate() {
            let old = prev.and_then(|(t, _)| carried.as_ref()?[k].map(|i| (t, i)));
            let (st, ov, stat) = match old {
                Some((t, i)) => (
                    t.state(i as u32),
                    t.override_of(i as u32),
                    t.stats[i].clone(),
                ),
                None if s.check.is_none() => (UP, OVR_NONE, unchecked.clone()),
                None => (UNKNOWN, OVR_NONE, Arc::new(EntryStats::default())),
            };
            state.push(AtomicU8::new(st));
            overrides.push(AtomicU8::new(ov));
            unknown_up.push(s.check.as_ref().map(|c| c.unknown_is_up).unwrap_or(true));
            stats.push(stat);
        }
        HealthTable {
            state,
            overrides,
            unknown_up,
            stats,
            // Continue the previous table's count: a consumer that compares
            // generations across a reload sees a change.
            generation: AtomicU64::new(prev.map_or(0, |(t, _)| t.generation() + 1)),
            changed: Notify::new(),
        }
    }

    /// Count one change and wake whoever waits on [`HealthTable::changed`].
    /// Called by writers only (checker, overrides), never per query.
    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.changed.notify_waiters();
    }

    /// How many times a state, an override or a signal of this table has
    /// changed (continuing the count of the table it replaced). Cheap to
    /// poll; equal values mean nothing changed in between.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Woken (`notify_waiters`) at every change that bumps the generation.
    /// To miss nothing, create the `notified()` future, then read
    /// [`HealthTable::generation`], then await.
    pub fn changed(&self) -> &Notify {
        &self.changed
    }

    /// Entry `i`'s round-trip estimate (peak-EWMA of its passing probes'
    /// durations) in microseconds; None before its first passing probe, and
    /// for entries without a check.
    pub fn rtt_estimate_us(&self, i: u32) -> Option<u32> {
        let v = self.stats[i as usize]
            .signals
            .rtt_us
            .load(Ordering::Relaxed);
        (v != NO_SIGNAL).then_some(v)
    }

    /// Entry `i`'s damped reported load, a fraction in 0..=1; None when its
    /// check reads no load, or before the first figure.
    pub fn load(&self, i: u32) -> Option<f32> {
        let v = self.stats[i as usize].signals.load.load(Ordering::Relaxed);
        (v != NO_SIGNAL).then(|| f32::from_bits(v))
    }

    /// Entry `i`'s damped success ratio (see `signal::SuccessEwma`), in
    /// 0..=1, and the probes it counts (`checks`); None before its first
    /// probe, and for entries without a check.
    pub fn success(&self, i: u32) -> Option<(f32, u64)> {
        let st = &self.stats[i as usize];
        let v = st.signals.success.load(Ordering::Relaxed);
        (v != NO_SIGNAL).then(|| (f32::from_bits(v), st.checks.load(Ordering::Relaxed)))
    }

    /// Publish entry `i`'s success ratio (the checker does; a simulator too).
    pub fn set_success(&self, i: u32, ratio: Option<f64>) {
        let v = match ratio {
            Some(r) if r.is_finite() => (r.clamp(0.0, 1.0) as f32).to_bits(),
            _ => NO_SIGNAL,
        };
        self.publish_signal(&self.stats[i as usize].signals.success, v);
    }

    /// Publish entry `i`'s round-trip estimate, in seconds (the checker does).
    pub fn set_rtt_estimate(&self, i: u32, secs: Option<f64>) {
        let v = match secs {
            // At least 1 µs, at most just under the sentinel (71 minutes).
            Some(s) if s.is_finite() => (s * 1e6).round().clamp(1.0, (NO_SIGNAL - 1) as f64) as u32,
            _ => NO_SIGNAL,
        };
        self.publish_signal(&self.stats[i as usize].signals.rtt_us, v);
    }

    /// Publish entry `i`'s damped load, a fraction clamped into 0..=1 (the checker does).
    pub fn set_load(&self, i: u32, load: Option<f64>) {
        let v = match load {
            Some(l) if l.is_finite() => (l.clamp(0.0, 1.0) as f32).to_bits(),
            _ => NO_SIGNAL,
        };
        self.publish_signal(&self.stats[i as usize].signals.load, v);
    }

    /// Store one signal word; a change moves the generation.
    fn publish_signal(&self, cell: &AtomicU32, v: u32) {
        if cell.swap(v, Ordering::Relaxed) != v {
            self.bump();
        }
    }

    /// Is entry `i` usable in answers? The per-query path: no lock, no allocation.
    #[inline]
    pub fn is_up(&self, i: u32) -> bool {
        let i = i as usize;
        match self.overrides[i].load(Ordering::Relaxed) {
            OVR_UP => return true,
            OVR_DOWN | OVR_DRAIN => return false,
            _ => {}
        }
        match self.state[i].load(Ordering::Relaxed) {
            UP => true,
            DOWN => false,
            _ => self.unknown_up[i],
        }
    }

    /// Drained by the operator: left out even when every pool is down.
    #[inline]
    pub fn is_drained(&self, i: u32) -> bool {
        self.overrides[i as usize].load(Ordering::Relaxed) == OVR_DRAIN
    }

    /// Entry `i`'s probed state (`UNKNOWN`, `UP` or `DOWN`), ignoring overrides.
    pub fn state(&self, i: u32) -> u8 {
        self.state[i as usize].load(Ordering::Relaxed)
    }

    /// Set entry `i`'s probed state (the checker does, under the entry's detail lock).
    pub fn set_state(&self, i: u32, s: u8) {
        if self.state[i as usize].swap(s, Ordering::Relaxed) != s {
            self.bump();
        }
    }

    /// Does entry `i` pass its checks, whatever the operator says? (Unknown
    /// passes unless `unknown_is_up = false`.)
    pub fn passes(&self, i: u32) -> bool {
        match self.state[i as usize].load(Ordering::Relaxed) {
            UP => true,
            DOWN => false,
            _ => self.unknown_up[i as usize],
        }
    }

    /// Entry `i`'s operator override (an `OVR_*` value).
    pub fn override_of(&self, i: u32) -> u8 {
        self.overrides[i as usize].load(Ordering::Relaxed)
    }

    /// Set entry `i`'s operator override.
    pub fn set_override(&self, i: u32, o: u8) {
        if self.overrides[i as usize].swap(o, Ordering::Relaxed) != o {
            self.bump();
        }
    }

    /// Entry `i`'s counters and details.
    pub fn stats(&self, i: u32) -> &Arc<EntryStats> {
        &self.stats[i as usize]
    }

    /// Number of entries (distinct check targets).
    pub fn len(&self) -> usize {
        self.state.len()
    }

    /// No entries: nothing is checked.
    pub fn is_empty(&self) -> bool {
        self.state.is_empty()
    }
}
