//! Issue #31's scenario: four identical members whose check round trips
//! differ only by noise (loopback-like 0.1–0.3 ms, and now and then a
//! probe that waited 0.5–4 ms for a CPU), fed to the server's own
//! `PeakEwma`. With the noise floor, `latency_aware` and `pick = "p2c"`
//! keep a quarter each; the rule before #31 is shown beside them.
//!
//! The floor's variants are the real engine: `Engine::rebalance_with` each
//! second, then 2,000 fresh answers through `Engine::answer` counted per
//! member (no resolver caches: this plots the decision itself). The rule
//! before #31 no longer exists in the engine, so its two variants are
//! computed here from the same estimates, as the engine published them
//! (µs, in the member word), by its documented formulas: weights
//! `clamp(best ÷ own, 0.1, 1)` for `latency_aware`, and for p2c the exact
//! probability of winning the strict comparison of two distinct
//! equal-weight draws. They are expectations, so their lines are smooth.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use meridian::answer::{Outcome, Scratch, Transport};
use meridian::engine::{Engine, WeightMap};
use meridian::health::{PeakEwma, UP};
use meridian::pool::Selector;

use crate::model::{self, mean, member_addr, Row, TempDir, EWMA_TAU_S, QNAME};
use crate::out::{Report, Run};
use crate::scenarios::Opts;

/// Members of the pool.
const N: usize = 4;
/// Simulated seconds.
const SECS: u64 = 240;
/// Fresh answers counted per second and variant.
const ANSWERS: usize = 2000;
/// Check interval of the simulator's config (`interval = 2`), ms.
const INTERVAL_MS: u64 = 2000;
/// Median check round trip of an idle loopback member, ms (measured in
/// tests/pools/latency_noise.rs: 0.1–0.3 ms).
const BASE_MS: f64 = 0.18;
/// Spread of the steady samples: ln-normal with this sigma.
const SIGMA: f64 = 0.35;
/// Share of probes that wait for a CPU, and how long (uniform, ms): the
/// stalls seen on a loaded 2-core host (up to 2.9 ms), a little wider.
const STALL_P: f64 = 0.05;
const STALL_MS: (f64, f64) = (0.5, 4.0);

/// The check samples (seconds) of every member, `(t_ms, member, s)`, in
/// time order: the same noise for every variant.
fn samples(seed: u64) -> Vec<(u64, usize, f64)> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x31);
    let phase: Vec<u64> = (0..N).map(|_| rng.u64(..INTERVAL_MS)).collect();
    let mut out = Vec::new();
    let mut t = 0;
    while t < SECS * 1000 {
        for (i, &p) in phase.iter().enumerate() {
            let at = t + p;
            // Box–Muller: one standard normal variate.
            let z =
                (-2.0 * (1.0 - rng.f64()).ln()).sqrt() * (std::f64::consts::TAU * rng.f64()).cos();
            let mut ms = BASE_MS * (SIGMA * z).exp();
            if rng.f64() < STALL_P {
                ms += STALL_MS.0 + (STALL_MS.1 - STALL_MS.0) * rng.f64();
            }
            out.push((at, i, ms / 1000.0));
        }
        t += INTERVAL_MS;
    }
    out.sort_by_key(|s| s.0);
    out
}

/// Each member's estimate (seconds) at the end of every second, from the
/// server's own `PeakEwma`.
fn estimates(seed: u64) -> Vec<[Option<f64>; N]> {
    let epoch = Instant::now();
    let mut ewma: Vec<PeakEwma> = (0..N)
        .map(|_| PeakEwma::new(Duration::from_secs_f64(EWMA_TAU_S)))
        .collect();
    let all = samples(seed);
    let mut next = 0;
    (1..=SECS)
        .map(|t| {
            while next < all.len() && all[next].0 <= t * 1000 {
                let (at, i, s) = all[next];
                ewma[i].update(s, epoch + Duration::from_millis(at));
                next += 1;
            }
            std::array::from_fn(|i| ewma[i].estimate())
        })
        .collect()
}

/// Run the real engine with `pool_keys` / `name_keys` through the
/// estimates: per second, a rebalance and [`ANSWERS`] answers. Also
/// returns the published round trips (µs) per second.
fn engine_run(
    o: Opts,
    est: &[[Option<f64>; N]],
    pool_keys: &str,
    name_keys: &str,
) -> (Vec<Row>, Vec<[u64; N]>) {
    let dir = TempDir::new("noise");
    let addrs: Vec<Ipv4Addr> = (0..N).map(member_addr).collect();
    let cfg = model::write_config(&dir.0, &addrs, pool_keys, name_keys);
    let engine =
        Engine::load(&cfg).unwrap_or_else(|e| panic!("the noise config does not load: {e}"));
    let web = model::pool(&engine, "web");
    let health: Vec<u32> = web.v4.iter().map(|m| m.health).collect();
    for &h in &health {
        engine.health.set_state(h, UP);
    }
    let mut scratch = Scratch {
        selector: Selector::with_rng(fastrand::Rng::with_seed(o.seed ^ 0x5eed)),
        ..Scratch::default()
    };
    let q = model::query(QNAME, Ipv4Addr::new(20, 0, 0, 0), 24);
    let t = Transport {
        src: IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1)),
        tcp: false,
    };
    let (mut buf, mut outcome) = (vec![0u8; 4096], Outcome::default());
    let mut rows = Vec::new();
    let mut published = Vec::new();
    for (k, e) in est.iter().enumerate() {
        let rtt = |h: u32| health.iter().position(|&x| x == h).and_then(|i| e[i]);
        engine.rebalance_with(
            &WeightMap::default(),
            (k as u64 + 1) * 1000,
            &rtt,
            &|_| None,
            |_| true,
        );
        published.push(std::array::from_fn(|i| web.v4[i].weight_and_rtt().1));
        let mut c = [0usize; N];
        for _ in 0..ANSWERS {
            let n = engine
                .answer(&q, t, &mut scratch, &mut buf, &mut outcome)
                .expect("meridian answers");
            let a = model::parse(&buf[..n]).addr.expect("an address");
            c[addrs.iter().position(|x| *x == a).expect("a member")] += 1;
        }
        rows.push(row(k as u64 + 1, c.map(|x| x as f64 / ANSWERS as f64)));
    }
    (rows, published)
}

fn row(t: u64, share: [f64; N]) -> Row {
    Row {
        t,
        share: share.to_vec(),
        usable: N,
        ..Row::default()
    }
}

/// The rule before #31 for `latency_aware`: weight `clamp(best ÷ own, 0.1,
/// 1)` (the default `latency_floor`), shares in proportion.
fn old_latency(rtt: &[u64; N]) -> [f64; N] {
    let best = rtt.iter().copied().filter(|&r| r > 0).min().unwrap_or(0);
    let w: [f64; N] = std::array::from_fn(|i| match (best, rtt[i]) {
        (b, r) if b > 0 && r > 0 => (b as f64 / r as f64).clamp(0.1, 1.0),
        _ => 1.0,
    });
    let sum: f64 = w.iter().sum();
    w.map(|x| x / sum)
}

/// The rule before #31 for p2c with equal weights: first draw `a`, second
/// `b` among the others; `b` wins only when strictly faster.
fn old_p2c(rtt: &[u64; N]) -> [f64; N] {
    let pairs = (N * (N - 1)) as f64;
    std::array::from_fn(|i| {
        let wins: usize = (0..N)
            .filter(|&j| j != i)
            .map(|j| usize::from(rtt[j] >= rtt[i]) + usize::from(rtt[i] < rtt[j]))
            .sum();
        wins as f64 / pairs
    })
}

/// What the table reports, from 30 s (every estimate exists and the
/// first samples have decayed).
fn metrics(rows: &[Row]) -> Vec<(String, f64)> {
    let fair = 1.0 / N as f64;
    let dev = |r: &Row| r.share.iter().map(|s| (s - fair).abs()).fold(0.0, f64::max);
    let lowest = |r: &Row| r.share.iter().copied().fold(1.0, f64::min);
    vec![
        (
            "mean largest deviation %".to_string(),
            mean(rows, 30, SECS + 1, dev),
        ),
        (
            "worst second deviation %".to_string(),
            model::peak(rows, 30, SECS + 1, dev),
        ),
        (
            "mean lowest share %".to_string(),
            mean(rows, 30, SECS + 1, lowest),
        ),
    ]
}

/// Four identical members under check noise: the floor's rule (the
/// engine) against the rule before #31 (computed), for `latency_aware`
/// and for p2c.
pub(crate) fn noise(o: Opts) -> Report {
    let est = estimates(o.seed);
    let (aware, rtts) = engine_run(o, &est, "latency_aware = true", "");
    let (p2c, _) = engine_run(o, &est, "", "pick = \"p2c\"");
    let computed = |f: fn(&[u64; N]) -> [f64; N]| -> Vec<Row> {
        rtts.iter()
            .enumerate()
            .map(|(k, r)| row(k as u64 + 1, f(r)))
            .collect()
    };
    let runs = [
        (
            "latency_aware: before #31 (computed)",
            computed(old_latency),
        ),
        ("latency_aware: noise floor", aware),
        ("pick = p2c: before #31 (computed)", computed(old_p2c)),
        ("pick = p2c: noise floor", p2c),
    ]
    .into_iter()
    .map(|(v, rows)| Run {
        variant: v.to_string(),
        metrics: metrics(&rows),
        rows,
    })
    .collect();
    Report {
        name: "noise",
        title: "four identical members; check round trips differ by noise only".into(),
        runs,
        events: vec![],
        highlight: vec![],
    }
}
