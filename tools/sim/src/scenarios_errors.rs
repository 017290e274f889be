//! The scenarios of issue #31 (sick members): a member whose checks flap,
//! and one that fails requests fast while a shallow check passes, each
//! with and without the error penalty and outlier ejection.

use crate::model::{m, mean, Backend, CheckErrors, Row, Setup, World};
use crate::out::{Report, Run};
use crate::scenarios::Opts;

/// When the member turns sick, and when it recovers.
const SICK_AT: u64 = 60;
const WELL_AT: u64 = 200;
/// Simulated seconds per variant.
const SECS: u64 = 320;

/// Ten warm members of 100 req/s at 20 ms at 70 % load; m10 turns sick
/// at [`SICK_AT`] (fails `errors` of its requests, its checks seeing them
/// as `seen`) and recovers at [`WELL_AT`].
fn run(o: Opts, tag: &str, pool_keys: &str, errors: f64, seen: CheckErrors) -> Vec<Row> {
    let mut w = World::new(
        tag,
        Setup {
            backends: (0..10).map(|_| Backend::new(100.0, 20.0)).collect(),
            pool_keys: pool_keys.to_string(),
            name_keys: String::new(),
            load: 700.0,
            resolvers: o.resolvers,
            seed: o.seed,
            down: Vec::new(),
            backup: 0,
            report_load: false,
        },
    );
    w.backends[9].check_errors = seen;
    for t in 1..=SECS {
        match t {
            SICK_AT => w.backends[9].errors = errors,
            WELL_AT => w.backends[9].errors = 0.0,
            _ => {}
        }
        w.step();
    }
    w.rows
}

/// What both scenarios report about m10 and the clients.
fn metrics(rows: &[Row]) -> Vec<(String, f64)> {
    vec![
        m(
            "sick share 30 s in %",
            mean(rows, SICK_AT + 25, SICK_AT + 35, |r| r.share[9]),
        ),
        m(
            "sick share %",
            mean(rows, SICK_AT + 30, WELL_AT, |r| r.share[9]),
        ),
        m("bad while sick %", mean(rows, SICK_AT, WELL_AT, |r| r.bad)),
        m(
            "share first 30 s well %",
            mean(rows, WELL_AT, WELL_AT + 30, |r| r.share[9]),
        ),
        m(
            "share after 60 s well %",
            mean(rows, WELL_AT + 60, SECS, |r| r.share[9]),
        ),
    ]
}

fn report(name: &'static str, title: &str, runs: Vec<Run>) -> Report {
    Report {
        name,
        title: title.into(),
        runs,
        events: vec![(SICK_AT, "sick"), (WELL_AT, "well")],
        highlight: vec![9],
    }
}

/// The flapping member: m10 fails every other check (never `fall`
/// in a row, so it stays up) and half its requests, from 60 s to 200 s.
pub(crate) fn flapping_member(o: Opts) -> Report {
    let variants = [
        (
            "error_penalty = false",
            "latency_aware = true\nerror_penalty = false",
        ),
        ("error penalty (default)", "latency_aware = true"),
        (
            "penalty + outlier_detection",
            "latency_aware = true\noutlier_detection = true",
        ),
        (
            "penalty + outliers + max_ejected = 0.1",
            "latency_aware = true\noutlier_detection = true\nmax_ejected = 0.1",
        ),
    ];
    let runs = variants
        .iter()
        .map(|(v, keys)| {
            let rows = run(o, "flapping-member", keys, 0.5, CheckErrors::Alternate);
            Run {
                variant: v.to_string(),
                metrics: metrics(&rows),
                rows,
            }
        })
        .collect();
    report(
        "flapping-member",
        "m10 fails every other check and half its requests (70 % load)",
        runs,
    )
}

/// m10 fails 60 % of its requests fast from 60 s to 200 s. A shallow
/// (TCP) check passes throughout; a deep one fails as often as requests.
pub(crate) fn fail_fast(o: Opts) -> Report {
    let variants = [
        (
            "shallow check",
            "latency_aware = true",
            CheckErrors::Shallow,
        ),
        (
            "deep check: error_penalty = false",
            "latency_aware = true\nerror_penalty = false",
            CheckErrors::Deep,
        ),
        (
            "deep check: error penalty",
            "latency_aware = true",
            CheckErrors::Deep,
        ),
        (
            "deep check: penalty + outlier_detection",
            "latency_aware = true\noutlier_detection = true",
            CheckErrors::Deep,
        ),
        (
            "deep check: penalty + outliers + max_ejected = 0.1",
            "latency_aware = true\noutlier_detection = true\nmax_ejected = 0.1",
            CheckErrors::Deep,
        ),
    ];
    let runs = variants
        .iter()
        .map(|&(v, keys, seen)| {
            let rows = run(o, "fail-fast", keys, 0.6, seen);
            Run {
                variant: v.to_string(),
                metrics: metrics(&rows),
                rows,
            }
        })
        .collect();
    report(
        "fail-fast",
        "m10 fails 60 % of its requests fast; shallow and deep checks (70 % load)",
        runs,
    )
}
