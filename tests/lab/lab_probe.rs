//! The local resolver lab, seen by `meridian-probe` (tools/probe): what a
//! client behind each caching resolver observes.
//!
//! - `ecs geo.example.test` through Unbound: `tailored`. Unbound passes the
//!   client's subnet to meridian and returns meridian's scope to the client.
//! - `ecs geo.example.test` through PowerDNS Recursor: the four subnets get
//!   meridian's four different answers, but the verdict is `mixed`, because
//!   the Recursor never returns an ECS option to its clients (a known
//!   Recursor limitation, PowerDNS/pdns#14022), so the probe cannot tell ECS
//!   tailoring from rotation. The answers are still exactly meridian's.
//! - `rotation shuffle.example.test` (mode `all`, a new order per answer at
//!   meridian): the resolver answers from its cache for the TTL (30 s), so
//!   meridian's shuffle is not seen. Unbound hands out the cached RRset
//!   rotated (`rrset-roundrobin: yes`), so the probe says `client-chooses`
//!   (the whole set every time, reordered); the Recursor replays its packet
//!   cache byte for byte, so the probe says `static`. Either way the client
//!   always gets the whole set of four.
//!
//! The probe binary is built by `cargo build -p meridian-probe` (and by
//! `cargo test --workspace`, which builds it for its own tests).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use hickory_proto::rr::RecordType;
use serde_json::Value;

use crate::lab_common::{ask, Kind, Lab};

fn probe_bin() -> PathBuf {
    let p = std::path::Path::new(crate::common::BIN).with_file_name("meridian-probe");
    assert!(
        p.exists(),
        "{} is missing: build it with `cargo build -p meridian-probe` (cargo test --workspace builds it)",
        p.display()
    );
    p
}

fn probe(args: &[&str]) -> Value {
    let out = Command::new(probe_bin())
        .args(args)
        .args(["--json", "--timeout", "3000"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "meridian-probe {args:?} failed: {}{}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("probe JSON ({e}): {text}"))
}

fn sorted(v: &Value) -> Vec<String> {
    let mut a: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect();
    a.sort();
    a
}

#[test]
fn ecs_probe_through_each_resolver() {
    if !crate::common::need(
        "ecs_probe_through_each_resolver",
        &["unbound", "pdns_recursor", "dig"],
    ) {
        return;
    }
    let lab = Lab::start(&crate::common::example_config());
    for kind in Kind::ALL {
        let r = lab.resolver(kind);
        let server = r.addr.to_string();
        for qtype in ["A", "AAAA"] {
            let rep = probe(&[
                "ecs",
                "geo.example.test",
                "--server",
                &server,
                "--type",
                qtype,
            ]);
            let verdict = rep["verdict"].as_str().unwrap().to_string();
            let results = rep["results"].as_array().unwrap();
            assert_eq!(results.len(), 6, "{rep}");
            let mut sets = BTreeSet::new();
            for res in results {
                let subnet = res["subnet"].as_str().unwrap();
                assert_eq!(res["rcode"], "NOERROR", "{} {subnet}: {res}", kind.name());
                let got = sorted(&res["answers"]);
                // Exactly meridian's answer for that subnet.
                let rt = if qtype == "A" {
                    RecordType::A
                } else {
                    RecordType::AAAA
                };
                let want = ask(
                    lab.meridian.addr(),
                    "geo.example.test.",
                    rt,
                    Some(subnet),
                    false,
                );
                assert_eq!(got, want.addrs, "{} {qtype} {subnet}", kind.name());
                sets.insert(got);
                match kind {
                    Kind::Unbound => {
                        assert_eq!(res["ecs_echoed"], true, "{res}");
                        assert!(res["scope"].as_u64().unwrap() > 0, "{res}");
                    }
                    Kind::Recursor => {
                        assert_eq!(
                            res["ecs_echoed"], false,
                            "the Recursor started echoing ECS: {res}"
                        );
                    }
                }
            }
            // Four continents, and the default pool for ZA (no rule names
            // Africa) and for 192.0.2.0/24 (in no database).
            assert_eq!(sets.len(), 5, "six subnets, five answers: {rep}");
            let expected = match kind {
                Kind::Unbound => "tailored",
                // Different answers without an ECS echo (pdns#14022).
                Kind::Recursor => "mixed",
            };
            println!(
                "ecs probe via {} ({qtype}): {verdict} ({})",
                kind.name(),
                rep["verdict_text"].as_str().unwrap_or("")
            );
            assert_eq!(verdict, expected, "{}: {rep}", kind.name());
        }
    }
    // And meridian itself, for comparison.
    let rep = probe(&[
        "ecs",
        "geo.example.test",
        "--server",
        &lab.meridian.addr().to_string(),
    ]);
    assert_eq!(rep["verdict"], "tailored", "{rep}");
}

#[test]
fn rotation_probe_through_each_resolver() {
    if !crate::common::need(
        "rotation_probe_through_each_resolver",
        &["unbound", "pdns_recursor", "dig"],
    ) {
        return;
    }
    let lab = Lab::start(&crate::common::example_config());
    let full: Vec<String> = ["192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.13"]
        .map(String::from)
        .to_vec();
    let run = |server: &str| {
        probe(&[
            "rotation",
            "shuffle.example.test",
            "--server",
            server,
            "--count",
            "12",
            "--interval",
            "20",
        ])
    };
    // meridian directly: a new order per answer.
    let direct = run(&lab.meridian.addr().to_string());
    assert_eq!(direct["verdict"], "client-chooses", "{direct}");
    for kind in Kind::ALL {
        let rep = run(&lab.resolver(kind).addr.to_string());
        println!(
            "rotation probe via {}: {} ({})",
            kind.name(),
            rep["verdict"],
            rep["verdict_text"].as_str().unwrap_or("")
        );
        // Whatever the order, a client behind the resolver gets the whole set.
        assert_eq!(rep["answered"], 12, "{rep}");
        assert_eq!(sorted(&rep["distinct"]), full, "{rep}");
        assert_eq!(rep["distinct_sets"], 1, "{rep}");
        for resp in rep["responses"].as_array().unwrap() {
            assert_eq!(sorted(&resp["answers"]), full, "{resp}");
            assert!(resp["ttl"].as_u64().unwrap() <= 30, "{resp}");
        }
        match kind {
            // rrset-roundrobin rotates the cached RRset: at most 4 orders.
            Kind::Unbound => {
                assert_eq!(rep["verdict"], "client-chooses", "{rep}");
                assert!(rep["distinct_orders"].as_u64().unwrap() <= 4, "{rep}");
            }
            // The packet cache replays one answer for the TTL.
            Kind::Recursor => {
                assert_eq!(rep["verdict"], "static", "{rep}");
                assert_eq!(rep["distinct_orders"], 1, "{rep}");
            }
        }
    }
}
