//! The scenarios of issue #16, each a few variants of one pool's config
//! run through the same events.

use std::net::Ipv4Addr;

use meridian::answer::{Outcome, Scratch, Transport};
use meridian::engine::{Engine, WeightMap};

use crate::model::{self, m, mean, peak, usable_min, Backend, Row, Setup, World};
use crate::out::{Report, Run};

/// Scale and seed, from the command line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opts {
    /// Resolvers in the population.
    pub(crate) resolvers: usize,
    /// Seed of every random choice.
    pub(crate) seed: u64,
}

/// Ten warm members of 100 req/s at 20 ms idle latency.
fn ten() -> Vec<Backend> {
    (0..10).map(|_| Backend::new(100.0, 20.0)).collect()
}

/// Run one variant for `secs` simulated seconds; `events(t, world)` runs
/// before second `t` is stepped.
fn run(tag: &str, setup: Setup, secs: u64, mut events: impl FnMut(u64, &mut World)) -> Vec<Row> {
    let mut w = World::new(tag, setup);
    for t in 1..=secs {
        events(t, &mut w);
        w.step();
    }
    w.rows
}

fn setup(o: Opts, load: f64, pool_keys: &str, name_keys: &str) -> Setup {
    Setup {
        backends: ten(),
        pool_keys: pool_keys.to_string(),
        name_keys: name_keys.to_string(),
        load,
        resolvers: o.resolvers,
        seed: o.seed,
        down: Vec::new(),
        backup: 0,
        report_load: false,
    }
}

/// m10 slows at 60 s: `capacity` req/s, `base_ms` of service time.
fn m10_slows(capacity: f64, base_ms: f64) -> impl FnMut(u64, &mut World) {
    move |t, w| {
        if t == 60 {
            w.backends[9].capacity = capacity;
            w.backends[9].base_ms = base_ms;
        }
    }
}

/// What the slow-member scenarios report: m10's share and what clients
/// see, from 120 s (60 s after it slowed); bad answers from 60 s.
fn slow_member_metrics(rows: &[Row]) -> Vec<(String, f64)> {
    vec![
        m("slow member share %", mean(rows, 120, 300, |r| r.share[9])),
        m("slow requests %", mean(rows, 120, 300, |r| r.slow)),
        m("mean latency ms", mean(rows, 120, 300, |r| r.latency_ms)),
        m("bad %", mean(rows, 60, 300, |r| r.bad)),
    ]
}

/// 3 of 10 members fail at 80 % load (a rolling deploy at 60, 62, 64 s,
/// rolled back at 200 s): no rule, a 10 % ejection cap, panic at 50 %.
pub(crate) fn bad_deploy(o: Opts) -> Report {
    let variants = [
        ("no cap", ""),
        ("max_ejected = 0.1", "max_ejected = 0.1"),
        ("panic_below = 0.5", "panic_below = 0.5"),
        (
            "max_ejected = 0.1 + panic_below = 0.5",
            "max_ejected = 0.1\npanic_below = 0.5",
        ),
    ];
    let runs = variants
        .iter()
        .map(|(v, keys)| {
            let rows = run(
                "bad-deploy",
                setup(o, 800.0, keys, ""),
                300,
                |t, w| match t {
                    60 | 62 | 64 => w.backends[((t - 60) / 2) as usize].broken = true,
                    200 => w.backends.iter_mut().for_each(|b| b.broken = false),
                    _ => {}
                },
            );
            let metrics = vec![
                m("bad during deploy %", mean(&rows, 60, 200, |r| r.bad)),
                m("bad peak %", peak(&rows, 60, 300, |r| r.bad)),
                m("bad after rollback %", mean(&rows, 200, 300, |r| r.bad)),
                m("min usable members", usable_min(&rows, 0, u64::MAX)),
            ];
            Run {
                variant: v.to_string(),
                rows,
                metrics,
            }
        })
        .collect();
    Report {
        name: "bad-deploy",
        title: "3 of 10 members fail at 80 % load".into(),
        runs,
        events: vec![(60, "deploy"), (200, "rollback")],
        highlight: vec![0, 1, 2],
    }
}

/// Checks fail from 60 s to 180 s while the backends are fine (70 %
/// load). Every check at once: with and without panic, the pool's
/// `when_all_down = "servfail"` making "no member passes" visible, and the
/// default fail-open `all`. Then 7 of 10 checks (a shared dependency some
/// members use), with the default `when_all_down`: with and without panic.
pub(crate) fn broken_checks(o: Opts) -> Report {
    let servfail = "when_all_down = \"servfail\"";
    let variants = [
        ("every check: no panic (servfail)", "", servfail, 10),
        (
            "every check: panic_below = 0.5 (servfail)",
            "panic_below = 0.5",
            servfail,
            10,
        ),
        ("every check: no panic (when_all_down = all)", "", "", 10),
        ("7 of 10 checks: no panic", "", "", 7),
        (
            "7 of 10 checks: panic_below = 0.5",
            "panic_below = 0.5",
            "",
            7,
        ),
    ];
    let runs = variants
        .iter()
        .map(|&(v, pool, name, broken)| {
            let rows = run(
                "broken-checks",
                setup(o, 700.0, pool, name),
                300,
                |t, w| match t {
                    60 => w.checks_broken[..broken].iter_mut().for_each(|c| *c = true),
                    180 => w.checks_broken.iter_mut().for_each(|c| *c = false),
                    _ => {}
                },
            );
            let metrics = vec![
                m("bad while checks fail %", mean(&rows, 60, 210, |r| r.bad)),
                m("bad peak %", peak(&rows, 60, 300, |r| r.bad)),
                m("panic s", rows.iter().filter(|r| r.panic).count() as f64),
            ];
            Run {
                variant: v.to_string(),
                rows,
                metrics,
            }
        })
        .collect();
    Report {
        name: "broken-checks",
        title: "checks fail while the backends are fine (70 % load)".into(),
        runs,
        events: vec![(60, "checks break"), (180, "fixed")],
        highlight: vec![7, 8, 9],
    }
}

/// One member (m10) drops to half speed at 60 s (half the capacity,
/// twice the idle latency) at 45 % load: `latency_aware` off and on.
pub(crate) fn slow_member(o: Opts) -> Report {
    let variants = [
        ("latency_aware off", ""),
        ("latency_aware = true", "latency_aware = true"),
        (
            "latency_aware + latency_floor = 0.5",
            "latency_aware = true\nlatency_floor = 0.5",
        ),
    ];
    let runs = variants
        .iter()
        .map(|(v, keys)| {
            let rows = run(
                "slow-member",
                setup(o, 450.0, keys, ""),
                300,
                m10_slows(50.0, 40.0),
            );
            let metrics = slow_member_metrics(&rows);
            Run {
                variant: v.to_string(),
                rows,
                metrics,
            }
        })
        .collect();
    Report {
        name: "slow-member",
        title: "one member at half speed from 60 s (45 % load)".into(),
        runs,
        events: vec![(60, "m10 slows")],
        highlight: vec![9],
    }
}

/// m10 is down from the start and returns at 60 s with cold caches (its
/// capacity starts at 25 % and warms to full over 90 s), at 60 % load:
/// without and with `slow_start = "60s"`.
pub(crate) fn returning_member(o: Opts) -> Report {
    let variants = [
        ("no slow_start", ""),
        ("slow_start = \"60s\"", "slow_start = \"60s\""),
    ];
    let runs = variants
        .iter()
        .map(|(v, keys)| {
            let mut s = setup(o, 600.0, keys, "");
            s.down = vec![9];
            let rows = run("returning-member", s, 240, |t, w| {
                if t == 60 {
                    w.backends[9].broken = false;
                    w.backends[9].warm = Some((60_000, 90_000, 0.25));
                }
            });
            // Its window starts when the engine lets answers use it again.
            let up = rows
                .iter()
                .find(|r| r.t >= 60 && r.usable == 10)
                .map_or(60, |r| r.t);
            let metrics = vec![
                m("up at s", up as f64),
                m(
                    "share first 60 s %",
                    mean(&rows, up, up + 60, |r| r.share[9]),
                ),
                m(
                    "share next 60 s %",
                    mean(&rows, up + 60, up + 120, |r| r.share[9]),
                ),
                m("bad after return %", mean(&rows, up, 240, |r| r.bad)),
                m("bad peak %", peak(&rows, up, 240, |r| r.bad)),
            ];
            Run {
                variant: v.to_string(),
                rows,
                metrics,
            }
        })
        .collect();
    Report {
        name: "returning-member",
        title: "a member returns with cold caches (60 % load)".into(),
        runs,
        events: vec![(60, "m10 returns")],
        highlight: vec![9],
    }
}

/// Population standard deviation of `f` over the rows with `from <= t < to`.
fn std_dev(rows: &[Row], from: u64, to: u64, f: impl Fn(&Row) -> f64) -> f64 {
    let mu = mean(rows, from, to, &f);
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| r.t >= from && r.t < to)
        .map(|r| (f(r) - mu).powi(2))
        .collect();
    if v.is_empty() {
        0.0
    } else {
        (v.iter().sum::<f64>() / v.len() as f64).sqrt()
    }
}

/// A geo name failing over from `web` (m1–m5) to `backup` (m6–m8), all
/// members of 100 req/s, at 70 % of `web`'s capacity (350 req/s); m1 and m2
/// fail at 60 s: hard failover against `spillover = 1.4` (Envoy's factor,
/// which leaves the survivors at 0.6 × 1.4 × 70 % ÷ 0.6 = 98 % of their
/// capacity) and `spillover = 1.2` (84 %).
pub(crate) fn spillover(o: Opts) -> Report {
    let variants = [
        ("hard failover", ""),
        ("spillover = 1.4", "spillover = 1.4"),
        ("spillover = 1.2", "spillover = 1.2"),
    ];
    let survivors = |r: &Row| r.share[2] + r.share[3] + r.share[4];
    let survivor_peak = |r: &Row| r.util[2].max(r.util[3]).max(r.util[4]);
    let runs = variants
        .iter()
        .map(|(v, keys)| {
            let mut s = setup(o, 350.0, "", keys);
            s.backends = (0..8).map(|_| Backend::new(100.0, 20.0)).collect();
            s.backup = 3;
            let rows = run("spillover", s, 300, |t, w| {
                if t == 60 {
                    w.backends[0].broken = true;
                    w.backends[1].broken = true;
                }
            });
            let metrics = vec![
                m("survivors' share %", mean(&rows, 90, 300, survivors)),
                m(
                    "backup share %",
                    mean(&rows, 90, 300, |r| r.share[5] + r.share[6] + r.share[7]),
                ),
                m("survivor peak util %", peak(&rows, 90, 300, survivor_peak)),
                m("bad after failure %", mean(&rows, 60, 300, |r| r.bad)),
                m("bad peak %", peak(&rows, 60, 300, |r| r.bad)),
            ];
            Run {
                variant: v.to_string(),
                rows,
                metrics,
            }
        })
        .collect();
    Report {
        name: "spillover",
        title: "2 of 5 primary members fail at 70 % load; 3 backup members".into(),
        runs,
        events: vec![(60, "m1 m2 fail")],
        highlight: vec![2, 3, 4],
    }
}

/// One member (m10) drops to a third of the speed at 60 s (a third of the
/// capacity, three times the idle latency) at 45 % load: plain weighted
/// `one`, `latency_aware`, and `pick = "p2c"`.
pub(crate) fn p2c(o: Opts) -> Report {
    let variants = [
        ("one (weighted)", "", ""),
        ("one + latency_aware", "latency_aware = true", ""),
        ("one + pick = p2c", "", "pick = \"p2c\""),
    ];
    let runs = variants
        .iter()
        .map(|(v, pool, name)| {
            let rows = run(
                "p2c",
                setup(o, 450.0, pool, name),
                300,
                m10_slows(100.0 / 3.0, 60.0),
            );
            let metrics = slow_member_metrics(&rows);
            Run {
                variant: v.to_string(),
                rows,
                metrics,
            }
        })
        .collect();
    Report {
        name: "p2c",
        title: "one member at a third of the speed from 60 s (45 % load)".into(),
        runs,
        events: vec![(60, "m10 slows")],
        highlight: vec![9],
    }
}

/// m10 has half the capacity of the other nine (50 against 100 req/s) at
/// 60 % load: without and with the backends reporting their utilisation as
/// load (damped by the server's own `DampedLoad`, default damping).
pub(crate) fn reported_load(o: Opts) -> Report {
    let variants = [
        ("no load reporting", "", false),
        ("latency_aware = true", "latency_aware = true", false),
        ("load reported", "", true),
    ];
    let runs = variants
        .iter()
        .map(|&(v, pool, report)| {
            let mut s = setup(o, 600.0, pool, "");
            s.backends[9].capacity = 50.0;
            s.report_load = report;
            let rows = run("reported-load", s, 300, |_, _| {});
            let metrics = vec![
                m(
                    "small member share %",
                    mean(&rows, 120, 300, |r| r.share[9]),
                ),
                m(
                    "small member peak util %",
                    peak(&rows, 120, 300, |r| r.util[9]),
                ),
                m("bad %", mean(&rows, 1, 300, |r| r.bad)),
                m(
                    "share std-dev last 3 min %",
                    std_dev(&rows, 120, 300, |r| r.share[9]),
                ),
            ];
            Run {
                variant: v.to_string(),
                rows,
                metrics,
            }
        })
        .collect();
    Report {
        name: "reported-load",
        title: "one member with half the capacity (60 % load)".into(),
        runs,
        events: vec![],
        highlight: vec![9],
    }
}

/// Removing one member of ten under sticky answers: which member each of
/// `blocks` client /24s gets, before and after the removal (a reload
/// without m10) and after it returns, against a modulo baseline. Runs only
/// when this build's config accepts `sticky`; otherwise says so and
/// returns None.
pub(crate) fn sticky_removal(o: Opts) -> Option<Report> {
    let blocks = 4096u32;
    let dir = model::TempDir::new("sticky-removal");
    let ten: Vec<Ipv4Addr> = (0..10).map(model::member_addr).collect();
    let nine = &ten[..9];
    // `sticky = true` belongs with `mode = "one"` in the name's table;
    // a build that takes it in the pool's table works too.
    let load = |members: &[Ipv4Addr]| -> Result<Engine, String> {
        let sub = dir.0.join(format!("n{}", members.len()));
        std::fs::create_dir_all(&sub).map_err(|e| e.to_string())?;
        let cfg = model::write_config(&sub, members, "", "sticky = true");
        let e = match Engine::load(&cfg) {
            Ok(e) => e,
            Err(first) => {
                let cfg = model::write_config(&sub, members, "sticky = true", "");
                Engine::load(&cfg).map_err(|_| first.to_string())?
            }
        };
        for m in &e.pools[0].v4 {
            e.health.set_state(m.health, meridian::health::UP);
        }
        e.rebalance(&WeightMap::default(), 1);
        Ok(e)
    };
    let before = match load(&ten) {
        Ok(e) => e,
        Err(e) => {
            println!(
                "\n## sticky-removal\n\nsticky answers not in this build (the config key \
                 `sticky` is rejected: {e}); skipping this scenario."
            );
            return None;
        }
    };
    let after = load(nine).expect("the nine-member config loads");
    let back = load(&ten).expect("the ten-member config loads again");
    // Which member each block gets from `e` (index into `ten`).
    let assign = |e: &Engine| -> Vec<Option<usize>> {
        let mut scratch = Scratch::default();
        let (mut buf, mut outcome) = (vec![0u8; 4096], Outcome::default());
        let t = Transport {
            src: "198.51.100.1".parse().unwrap(),
            tcp: false,
        };
        (0..blocks)
            .map(|b| {
                let q = model::query(model::QNAME, Ipv4Addr::from((20u32 << 24) | (b << 8)), 24);
                let n = e.answer(&q, t, &mut scratch, &mut buf, &mut outcome)?;
                let a = model::parse(&buf[..n]).addr?;
                ten.iter().position(|x| *x == a)
            })
            .collect()
    };
    let (a0, a0_again, a1, a2) = (
        assign(&before),
        assign(&before),
        assign(&after),
        assign(&back),
    );
    let frac = |n: usize| n as f64 / f64::from(blocks);
    let moved = (0..a0.len()).filter(|&i| a0[i] != a1[i]).count();
    let moved_other = (0..a0.len())
        .filter(|&i| a0[i] != a1[i] && a0[i] != Some(9))
        .count();
    let returned = (0..a0.len()).filter(|&i| a0[i] == a2[i]).count();
    let stable = (0..a0.len()).filter(|&i| a0[i] == a0_again[i]).count();
    // The baseline: a block's hash modulo the member count.
    let h = |b: u32| {
        let mut x = u64::from(b).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 31;
        x
    };
    let m_moved = (0..blocks).filter(|&b| h(b) % 10 != h(b) % 9).count();
    let m_other = (0..blocks)
        .filter(|&b| h(b) % 10 != h(b) % 9 && h(b) % 10 != 9)
        .count();
    let shares = |a: &[Option<usize>]| -> Vec<f64> {
        (0..10)
            .map(|k| frac(a.iter().filter(|x| **x == Some(k)).count()))
            .collect()
    };
    let rows = |a: &[&[Option<usize>]]| -> Vec<Row> {
        a.iter()
            .enumerate()
            .map(|(t, a)| Row {
                t: t as u64,
                share: shares(a),
                ..Row::default()
            })
            .collect()
    };
    let modulo: Vec<Vec<Option<usize>>> = [10u64, 9, 10]
        .iter()
        .map(|&n| (0..blocks).map(|b| Some((h(b) % n) as usize)).collect())
        .collect();
    let _ = o;
    Some(Report {
        name: "sticky-removal",
        title: format!("removing one member of ten, {blocks} client /24s"),
        runs: vec![
            Run {
                variant: "sticky = true (rendezvous)".into(),
                rows: rows(&[&a0, &a1, &a2]),
                metrics: vec![
                    m("blocks moved %", frac(moved)),
                    m("moved from other members %", frac(moved_other)),
                    m("back after return %", frac(returned)),
                    m("same answer twice %", frac(stable)),
                ],
            },
            Run {
                variant: "modulo baseline (hash mod n)".into(),
                rows: rows(&[&modulo[0], &modulo[1], &modulo[2]]),
                metrics: vec![
                    m("blocks moved %", frac(m_moved)),
                    m("moved from other members %", frac(m_other)),
                    m("back after return %", 1.0),
                    m("same answer twice %", 1.0),
                ],
            },
        ],
        events: vec![(1, "m10 removed"), (2, "m10 back")],
        highlight: vec![9],
    })
}
