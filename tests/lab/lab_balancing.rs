//! The resolver lab, balancing rules (issue #16): a geo name with
//! `spillover` answered through Unbound and PowerDNS Recursor. Spillover
//! splits answers at random inside one decision block, so resolvers that
//! cache by the ECS scope must never hand a client an answer of another
//! block: 0 wrong answers, for clients in the split block and outside it.
//!
//! A sticky name through the same resolvers: every client must get exactly
//! the member meridian picks for its block (the ECS /24 the resolver sends
//! upstream), however the caches were filled; also when a client in
//! special-purpose space (private, CGNAT, benchmarking, documentation) asks
//! first, whose answer must be cached for its special block only, never for
//! every client (issue #25).
//!
//! Fixture: tests/data/lab/balancing.toml. Backends are TCP listeners on
//! 127.0.0.2 (the only live member of the primary pool) run by this test.

use std::net::TcpListener;
use std::time::Duration;

use hickory_proto::rr::RecordType;

use crate::lab_common::{ask, fixture, render, Kind, Meridian, Resolver};

const NAME: &str = "spill.example.test.";

/// tests/data/lab/balancing.toml rendered into a temp dir, the checks on
/// `check_port`.
fn fixture_config(tag: &str, check_port: u16) -> (crate::common::TempDir, std::path::PathBuf) {
    let dir = crate::common::TempDir::new(tag);
    let text = std::fs::read_to_string(fixture("balancing.toml")).unwrap();
    let config = dir.write(
        "balancing.toml",
        &render(
            &text,
            &[
                ("ROOT", crate::common::root().display().to_string()),
                ("CHECK_PORT", check_port.to_string()),
            ],
        ),
    );
    (dir, config)
}

#[test]
fn spillover_through_resolvers_gives_no_wrong_answer() {
    if !crate::common::need(
        "spillover_through_resolvers_gives_no_wrong_answer",
        &["unbound", "pdns_recursor", "dig"],
    ) {
        return;
    }
    // The live primary member's check target.
    let l = TcpListener::bind("127.0.0.2:0").expect("bind 127.0.0.2");
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            drop(c);
        }
    });
    let (_dir, config) = fixture_config("lab-balancing", port);
    let m = Meridian::start(&config);
    // Wait until the two dead members are out (fall 2 × 200 ms + timeout).
    let split = ["127.0.0.2".to_string(), "127.0.0.4".to_string()];
    let t0 = std::time::Instant::now();
    loop {
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let a = ask(m.addr(), NAME, RecordType::A, Some("20.1.2.0/24"), false);
            seen.extend(a.addrs);
        }
        if seen.iter().all(|a| split.contains(a)) && seen.len() == 2 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "meridian never settled on the split: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Direct: both pools of the block answer, with the block's scope.
    let mut backup = 0;
    for _ in 0..400 {
        let a = ask(m.addr(), NAME, RecordType::A, Some("20.1.2.0/24"), false);
        assert_eq!(a.scope, Some(8));
        assert!(split.contains(&a.addrs[0]), "{a:?}");
        backup += usize::from(a.addrs[0] == split[1]);
    }
    // keep 1/3 × 1.4 = 0.467; backup 0.533 ± 5 sigma.
    let share = backup as f64 / 400.0;
    assert!((share - 0.533).abs() < 0.13, "backup share {share}");

    for kind in [Kind::Unbound, Kind::Recursor] {
        let r = Resolver::start(kind, m.addr(), &["example.test."]);
        let mut wrong = Vec::new();
        let mut answered = 0;
        for round in 0..3 {
            for i in 0..60u32 {
                // Clients inside the split block and outside it, interleaved.
                let (client, allowed): (String, &[&str]) = if i % 2 == 0 {
                    (
                        format!("20.{}.{}.0/24", i * 3 % 256, (i * 7 + round) % 256),
                        &["127.0.0.2", "127.0.0.4"],
                    )
                } else {
                    (
                        format!("30.{}.{}.0/24", i * 5 % 256, (i * 11 + round) % 256),
                        &["127.0.0.6"],
                    )
                };
                let a = ask(r.addr, NAME, RecordType::A, Some(&client), true);
                answered += 1;
                if a.addrs.len() != 1 || !allowed.contains(&a.addrs[0].as_str()) {
                    wrong.push(format!("{client}: {:?}", a.addrs));
                }
            }
            // Past the TTL: the next round fills the caches again.
            std::thread::sleep(Duration::from_millis(1100));
        }
        eprintln!("{}: {answered} answers, {} wrong", r.name(), wrong.len());
        assert!(wrong.is_empty(), "{}: wrong answers: {wrong:?}", r.name());
    }
}

const STICKY: &str = "sticky.example.test.";

/// 150 public client /24s, and the member meridian gives each when asked
/// directly with the /24 a resolver sends (the ground truth).
fn sticky_truth(m: &Meridian) -> (Vec<String>, Vec<String>) {
    let blocks: Vec<String> = (0..150u32)
        .map(|i| format!("{}.{}.{}.0/24", 20 + i % 60, (i * 37) % 256, (i * 91) % 256))
        .collect();
    let truth: Vec<String> = blocks
        .iter()
        .map(|b| {
            let a = ask(m.addr(), STICKY, RecordType::A, Some(b), false);
            assert_eq!(a.scope, Some(24), "{b}: {a:?}");
            a.addrs[0].clone()
        })
        .collect();
    let distinct: std::collections::BTreeSet<&String> = truth.iter().collect();
    assert!(
        distinct.len() >= 8,
        "blocks spread over the members: {distinct:?}"
    );
    (blocks, truth)
}

#[test]
fn sticky_through_resolvers_gives_each_block_its_member() {
    if !crate::common::need(
        "sticky_through_resolvers_gives_each_block_its_member",
        &["unbound", "pdns_recursor", "dig"],
    ) {
        return;
    }
    // No backend needed: the sticky pool is unchecked.
    let (_dir, config) = fixture_config("lab-sticky", 9);
    let m = Meridian::start(&config);
    let name = STICKY;
    let (blocks, truth) = sticky_truth(&m);
    for kind in [Kind::Unbound, Kind::Recursor] {
        let r = Resolver::start(kind, m.addr(), &["example.test."]);
        let mut wrong = Vec::new();
        // Clients anywhere inside each block, in two passes (cold, warm).
        for pass in 0..2u32 {
            for (i, b) in blocks.iter().enumerate() {
                let base = b.trim_end_matches(".0/24");
                let client = format!("{base}.{}/32", (i as u32 * 7 + pass * 101) % 256);
                let a = ask(r.addr, name, RecordType::A, Some(&client), true);
                if a.addrs != [truth[i].clone()] {
                    wrong.push(format!("{client}: {:?}, want {}", a.addrs, truth[i]));
                }
            }
        }
        eprintln!(
            "{}: {} answers, {} wrong",
            r.name(),
            2 * blocks.len(),
            wrong.len()
        );
        assert!(wrong.is_empty(), "{}: {wrong:?}", r.name());
    }
}

/// Special-purpose client subnets (issue #25), the length of their special
/// block, and another client inside that block.
const SPECIAL: &[(&str, u8, &str)] = &[
    ("100.100.1.0/24", 10, "100.65.7.0/24"),
    ("192.168.1.0/24", 16, "192.168.77.0/24"),
    ("198.18.0.0/24", 15, "198.19.3.0/24"),
    ("fd00:1::/56", 7, "fd12:3456::/56"),
    ("2001:db8:1::/56", 32, "2001:db8:ff::/56"),
];

#[test]
fn sticky_special_purpose_client_first_does_not_poison_the_caches() {
    if !crate::common::need(
        "sticky_special_purpose_client_first_does_not_poison_the_caches",
        &["unbound", "pdns_recursor", "dig"],
    ) {
        return;
    }
    let (_dir, config) = fixture_config("lab-sticky-special", 9);
    let m = Meridian::start(&config);
    let (blocks, truth) = sticky_truth(&m);
    // Directly (from 127.0.0.1, the resolvers' source too): decided on the
    // resolver's block, scoped to the whole special block, never /0.
    let special: Vec<String> = SPECIAL
        .iter()
        .map(|&(ecs, len, _)| {
            let a = ask(m.addr(), STICKY, RecordType::A, Some(ecs), false);
            assert_eq!(a.scope, Some(len), "{ecs}: {a:?}");
            assert_eq!(a.addrs.len(), 1, "{ecs}: {a:?}");
            a.addrs[0].clone()
        })
        .collect();
    let mut failed = Vec::new();
    for kind in [Kind::Unbound, Kind::Recursor] {
        // A cold cache filled by the special-purpose clients first, then
        // every public block, all inside the name's 5 s TTL.
        let r = Resolver::start(kind, m.addr(), &["example.test."]);
        let t0 = std::time::Instant::now();
        let mut wrong = Vec::new();
        for (&(ecs, _, _), want) in SPECIAL.iter().zip(&special) {
            let a = ask(r.addr, STICKY, RecordType::A, Some(ecs), true);
            if a.addrs != [want.clone()] {
                wrong.push(format!("{ecs}: {:?}, want {want}", a.addrs));
            }
        }
        for (i, b) in blocks.iter().enumerate() {
            let a = ask(r.addr, STICKY, RecordType::A, Some(b), true);
            if a.addrs != [truth[i].clone()] {
                wrong.push(format!("{b}: {:?}, want {}", a.addrs, truth[i]));
            }
        }
        // Another client of each special block: the answer cached for it.
        for (&(_, _, other), want) in SPECIAL.iter().zip(&special) {
            let a = ask(r.addr, STICKY, RecordType::A, Some(other), true);
            if a.addrs != [want.clone()] {
                wrong.push(format!("{other}: {:?}, want {want}", a.addrs));
            }
        }
        let took = t0.elapsed();
        eprintln!(
            "{}: special first, then {} public blocks: {} wrong ({took:?})",
            r.name(),
            blocks.len(),
            wrong.len()
        );
        // Past the TTL a poisoned entry would have expired unseen.
        assert!(took < Duration::from_secs(4), "{}: took {took:?}", r.name());
        if !wrong.is_empty() {
            failed.push(format!("{}: {} wrong: {wrong:?}", r.name(), wrong.len()));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}
