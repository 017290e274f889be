//! Query counters. UDP workers count into a thread-local `Local` and flush
//! to the shared atomics every batch or so, so the hot path touches no
//! shared cache line per query. Rendered in Prometheus text format by
//! `admin::prometheus`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What the answer path reports for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The response's RCODE (extended RCODEs such as BADVERS included).
    pub rcode: u16,
    /// The question's QTYPE (0 when the query could not be parsed).
    pub qtype: u16,
    /// The query carried an EDNS Client Subnet option (RFC 7871).
    pub ecs: bool,
    /// The ECS scope prefix length answered, when the query had ECS.
    pub scope: Option<u8>,
    /// The response was sent truncated (TC=1) because it did not fit.
    pub truncated: bool,
    /// Binding and pool used for a dynamic answer.
    pub pool: Option<(u32, u32)>,
}

/// RCODE counters kept: 0..=22 each, and one slot for anything higher.
pub const RCODES: usize = 24;
/// qtypes counted by name; everything else is "other".
pub const QTYPES: [(u16, &str); 12] = [
    (1, "A"),
    (28, "AAAA"),
    (5, "CNAME"),
    (15, "MX"),
    (16, "TXT"),
    (2, "NS"),
    (6, "SOA"),
    (33, "SRV"),
    (257, "CAA"),
    (12, "PTR"),
    (255, "ANY"),
    (43, "DS"),
];
/// Dynamic answers per pool of one engine, indexed like `Engine::pools`:
/// one counter per pool, built with the engine. A reload hands a pool's
/// counter to the new engine by the pool's name ([`PoolCounters::carry`]),
/// so a count stays with its pool whatever the other pools do; a removed or
/// renamed pool's counter goes with the old engine, and a new pool starts at
/// zero. Counting is one relaxed add into a slice (no lock, no allocation).
#[derive(Clone, Debug, Default)]
pub struct PoolCounters(Arc<[Arc<AtomicU64>]>);

impl PoolCounters {
    /// Counters for the pools `names` (in engine order): a name that `prev`
    /// also has (`prev_names`, in its order) keeps that counter, the others
    /// start at zero.
    pub fn carry<'a>(
        names: impl IntoIterator<Item = &'a str>,
        prev: Option<(&PoolCounters, Vec<&str>)>,
    ) -> PoolCounters {
        let old: std::collections::HashMap<&str, &Arc<AtomicU64>> = prev
            .as_ref()
            .map(|(c, n)| n.iter().copied().zip(c.0.iter()).collect())
            .unwrap_or_default();
        PoolCounters(
            names
                .into_iter()
                .map(|n| {
                    old.get(n)
                        .map(|c| Arc::clone(c))
                        .unwrap_or_else(|| Arc::new(AtomicU64::new(0)))
                })
                .collect(),
        )
    }

    /// The count of pool `i` (engine order), 0 for no such pool.
    pub fn get(&self, i: usize) -> u64 {
        self.0.get(i).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Pools counted.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// No pools.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Add `n` answers to pool `i` (ignored if there is no such pool).
    #[inline]
    pub fn add(&self, i: usize, n: u64) {
        if let Some(c) = self.0.get(i) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Whether `self` and `other` are the counters of the same engine.
    pub fn same(&self, other: &PoolCounters) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

fn qtype_slot(t: u16) -> usize {
    QTYPES
        .iter()
        .position(|&(q, _)| q == t)
        .unwrap_or(QTYPES.len())
}

/// Process-wide counters, shared by every transport and rendered at
/// `/metrics`. All are monotonic and updated with relaxed atomics: UDP
/// workers add in batches (see [`Local`]), TCP per query
/// ([`Metrics::record_one`]). They live in `ServerState`, not in the engine,
/// so reloads keep them.
pub struct Metrics {
    /// Queries received, answered or not.
    pub queries: AtomicU64,
    /// Queries given no response at all (too malformed to answer).
    pub dropped: AtomicU64,
    /// Responses sent truncated (TC=1), including those the kernel refused as too large.
    pub truncated: AtomicU64,
    /// Answered queries that carried ECS.
    pub ecs: AtomicU64,
    /// Responses by RCODE (see [`RCODES`]).
    pub rcode: [AtomicU64; RCODES],
    /// Answered queries by QTYPE: one slot per [`QTYPES`] entry, then "other".
    pub qtype: [AtomicU64; QTYPES.len() + 1],
    /// ECS responses by returned scope prefix length (0..=128).
    pub scope: [AtomicU64; 129],
    /// TCP connections closed at once because `tcp_max_connections` were
    /// open and none of them was idle.
    pub tcp_rejected: AtomicU64,
    /// Idle TCP connections closed to make room for a new one at the cap.
    pub tcp_evicted: AtomicU64,
    /// TCP connections closed by the idle or read timeout.
    pub tcp_timeouts: AtomicU64,
    /// UDP responses withheld by rate limiting.
    pub rrl_dropped: AtomicU64,
    /// UDP responses over the rate limit sent truncated instead (slipped).
    pub rrl_slipped: AtomicU64,
    /// UDP datagrams dropped unread: longer than the receive buffer.
    pub udp_dropped_truncated: AtomicU64,
    /// UDP datagrams dropped unread: from source port 0, which no reply reaches.
    pub udp_dropped_port_0: AtomicU64,
    /// Query log: dnstap frames written.
    pub query_log_frames: AtomicU64,
    /// Query log: sampled queries dropped (the ring was full, or the
    /// messages did not fit a slot).
    pub query_log_dropped: AtomicU64,
    /// Reloads that swapped in a new engine.
    pub reloads_ok: AtomicU64,
    /// Reloads that failed (the old engine kept serving).
    pub reloads_failed: AtomicU64,
    /// Zone files read (parsed) at start and by reloads; a reload keeps a
    /// zone whose files did not change and does not count it.
    pub zone_loads: AtomicU64,
    /// Geo decision tables compiled at start and by reloads.
    pub geo_table_builds: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All counters at zero.
    pub fn new() -> Metrics {
        Metrics {
            queries: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            truncated: AtomicU64::new(0),
            ecs: AtomicU64::new(0),
            rcode: std::array::from_fn(|_| AtomicU64::new(0)),
            qtype: std::array::from_fn(|_| AtomicU64::new(0)),
            scope: std::array::from_fn(|_| AtomicU64::new(0)),
            tcp_rejected: AtomicU64::new(0),
            tcp_evicted: AtomicU64::new(0),
            tcp_timeouts: AtomicU64::new(0),
            rrl_dropped: AtomicU64::new(0),
            rrl_slipped: AtomicU64::new(0),
            udp_dropped_truncated: AtomicU64::new(0),
            udp_dropped_port_0: AtomicU64::new(0),
            query_log_frames: AtomicU64::new(0),
            query_log_dropped: AtomicU64::new(0),
            reloads_ok: AtomicU64::new(0),
            reloads_failed: AtomicU64::new(0),
            zone_loads: AtomicU64::new(0),
            geo_table_builds: AtomicU64::new(0),
        }
    }

    /// Count one query straight into the atomics (TCP, where there is no
    /// batch to amortise a `Local` over); a pool answer goes to `pools`, the
    /// counters of the engine that answered.
    pub fn record_one(&self, o: &Outcome, answered: bool, pools: &PoolCounters) {
        let add = |a: &AtomicU64| {
            a.fetch_add(1, Ordering::Relaxed);
        };
        add(&self.queries);
        if !answered {
            add(&self.dropped);
            return;
        }
        add(&self.rcode[(o.rcode as usize).min(RCODES - 1)]);
        add(&self.qtype[qtype_slot(o.qtype)]);
        if o.truncated {
            add(&self.truncated);
        }
        if o.ecs {
            add(&self.ecs);
        }
        if let Some(s) = o.scope {
            add(&self.scope[(s as usize).min(128)]);
        }
        if let Some((_, p)) = o.pool {
            pools.add(p as usize, 1);
        }
    }
}

/// A worker's unflushed counts.
pub struct Local {
    queries: u64,
    dropped: u64,
    truncated: u64,
    /// Datagrams dropped unread: cut by the kernel, and from port 0.
    unread: [u64; 2],
    ecs: u64,
    rcode: [u64; RCODES],
    qtype: [u64; QTYPES.len() + 1],
    scope: [u64; 129],
    /// Answers per pool of the engine whose counters are `pool_counters`.
    pools: Vec<u64>,
    pool_counters: PoolCounters,
}

impl Default for Local {
    fn default() -> Self {
        Local {
            queries: 0,
            dropped: 0,
            truncated: 0,
            unread: [0; 2],
            ecs: 0,
            rcode: [0; RCODES],
            qtype: [0; QTYPES.len() + 1],
            scope: [0; 129],
            pools: Vec::new(),
            pool_counters: PoolCounters::default(),
        }
    }
}

impl Local {
    /// A response that the kernel refused as too large (DF) and that went
    /// out truncated instead.
    pub fn truncated_on_send(&mut self) {
        self.truncated += 1;
    }

    /// A datagram dropped unread because the kernel cut it (MSG_TRUNC).
    pub fn unread_truncated(&mut self) {
        self.unread[0] += 1;
    }

    /// A datagram dropped unread because it came from port 0.
    pub fn unread_port_0(&mut self) {
        self.unread[1] += 1;
    }

    /// Count one query; `answered` is false when no response was sent.
    #[inline]
    pub fn record(&mut self, o: &Outcome, answered: bool) {
        self.queries += 1;
        if !answered {
            self.dropped += 1;
            return;
        }
        self.rcode[(o.rcode as usize).min(RCODES - 1)] += 1;
        self.qtype[qtype_slot(o.qtype)] += 1;
        if o.truncated {
            self.truncated += 1;
        }
        if o.ecs {
            self.ecs += 1;
        }
        if let Some(s) = o.scope {
            self.scope[(s as usize).min(128)] += 1;
        }
        if let Some((_, p)) = o.pool {
            if let Some(c) = self.pools.get_mut(p as usize) {
                *c += 1;
            }
        }
    }

    /// Count pool answers for the engine whose counters are `pools` from
    /// now on: call it with the engine that answers each batch. When the
    /// engine changed (a reload), what was counted for the old one is
    /// flushed to it first; only then does the slot table grow.
    #[inline]
    pub fn use_pools(&mut self, pools: &PoolCounters) {
        if !self.pool_counters.same(pools) {
            self.flush_pools();
            self.pool_counters = pools.clone();
            self.pools.clear();
            self.pools.resize(pools.len(), 0);
        }
    }

    fn flush_pools(&mut self) {
        for (i, v) in self.pools.iter_mut().enumerate() {
            if *v > 0 {
                self.pool_counters.add(i, *v);
                *v = 0;
            }
        }
    }

    /// Queries counted since the last flush.
    pub fn pending(&self) -> u64 {
        self.queries
    }

    /// Add the counts to the shared `m` and start again from zero.
    pub fn flush(&mut self, m: &Metrics) {
        let add = |a: &AtomicU64, v: u64| {
            if v > 0 {
                a.fetch_add(v, Ordering::Relaxed);
            }
        };
        add(&m.udp_dropped_truncated, self.unread[0]);
        add(&m.udp_dropped_port_0, self.unread[1]);
        self.unread = [0; 2];
        if self.queries == 0 {
            return;
        }
        add(&m.queries, self.queries);
        add(&m.dropped, self.dropped);
        add(&m.truncated, self.truncated);
        add(&m.ecs, self.ecs);
        for (a, v) in m.rcode.iter().zip(self.rcode.iter()) {
            add(a, *v);
        }
        for (a, v) in m.qtype.iter().zip(self.qtype.iter()) {
            add(a, *v);
        }
        for (a, v) in m.scope.iter().zip(self.scope.iter()) {
            add(a, *v);
        }
        self.flush_pools();
        self.queries = 0;
        self.dropped = 0;
        self.truncated = 0;
        self.ecs = 0;
        self.rcode = [0; RCODES];
        self.qtype = [0; QTYPES.len() + 1];
        self.scope = [0; 129];
    }
}

/// Upper bounds (seconds) of the health check latency histogram buckets.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A Prometheus histogram of durations with fixed buckets (`LATENCY_BUCKETS`),
/// lock-free. Used for health check latency.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Per-bucket counts (not cumulative); the last slot is +Inf.
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// Record one duration.
    pub fn observe(&self, d: std::time::Duration) {
        let s = d.as_secs_f64();
        let i = LATENCY_BUCKETS
            .iter()
            .position(|&b| s <= b)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(
            d.as_micros().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Durations recorded so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Each bucket's upper bound (the last is +Inf) with its own count (not
    /// cumulative), for the exposition in `admin::prometheus`.
    pub fn buckets(&self) -> [(f64, u64); LATENCY_BUCKETS.len() + 1] {
        std::array::from_fn(|i| {
            let le = LATENCY_BUCKETS.get(i).copied().unwrap_or(f64::INFINITY);
            (le, self.buckets[i].load(Ordering::Relaxed))
        })
    }

    /// The sum of all observations, in seconds.
    pub fn sum_seconds(&self) -> f64 {
        self.sum_us.load(Ordering::Relaxed) as f64 / 1e6
    }
}
