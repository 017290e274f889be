//! The geo database rewritten in place (truncated, then written slowly, as
//! `cp` does) while reloads read it never kills the server: the database is
//! read into memory (`std::fs::read`), not memory-mapped, so a file that
//! shrinks under a reload gives a failed reload, not SIGBUS.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::geo_common::mkgeo;

/// A database of `n` /24 blocks over five countries: large enough that a
/// build reads it for a while.
fn csv(n: u32) -> String {
    let mut s = String::from("network,continent,country,subdivision,latitude,longitude\n");
    let cc = [
        ("NA", "US"),
        ("EU", "DE"),
        ("AS", "JP"),
        ("SA", "BR"),
        ("OC", "AU"),
    ];
    for i in 0..n {
        let (c, k) = cc[(i % 5) as usize];
        let _ = writeln!(
            s,
            "{}.{}.{}.0/24,{c},{k},,10,20",
            11 + i / 65536,
            (i / 256) % 256,
            i % 256
        );
    }
    s
}

/// Rewrite `path` in place: truncate, then write `bytes` in 16 slow pieces.
fn rewrite_in_place(path: &std::path::Path, bytes: &[u8], total: Duration) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .unwrap();
    for chunk in bytes.chunks(bytes.len().div_ceil(16)) {
        f.write_all(chunk).unwrap();
        f.flush().unwrap();
        std::thread::sleep(total / 16);
    }
}

#[test]
fn rewriting_the_database_in_place_never_kills_the_server() {
    let dir = TempDir::new("geo-rewrite");
    let csv_path = dir.write("big.csv", &csv(60_000));
    let db = dir.0.join("geo.mmdb");
    mkgeo(&csv_path, &db);
    let bytes = std::fs::read(&db).unwrap();
    std::fs::copy(
        root().join("zones/example.test.zone"),
        dir.0.join("example.test.zone"),
    )
    .unwrap();
    let example = std::fs::read_to_string(example_config()).unwrap();
    let cfg = dir.write(
        "meridian.toml",
        &example
            .replace("../geo/example.mmdb", "geo.mmdb")
            .replace("user = \"nobody\"", ""),
    );
    let mut s = Server::start(&cfg, &[]);
    assert!(s.alive());
    let t0 = Instant::now();
    for round in 0..6u64 {
        // A complete file (a new stamp), a reload that reads it, and while
        // it builds, the file cut to nothing and written again slowly.
        rewrite_in_place(&db, &bytes, Duration::from_millis(16));
        s.signal("HUP");
        std::thread::sleep(Duration::from_millis(10 * round));
        rewrite_in_place(&db, &bytes, Duration::from_millis(800));
        assert!(
            s.child.try_wait().unwrap().is_none(),
            "the server died in round {round}: {:?}\n{:#?}",
            s.child.try_wait(),
            s.stderr.lock().unwrap()
        );
    }
    // Let the last reloads finish, then it still answers, geo names too.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "the server died: {:#?}",
        s.stderr.lock().unwrap()
    );
    assert!(s.alive());
    let m =
        s.query(&Q::new("geo.example.test.", hickory_proto::rr::RecordType::A).ecs("11.0.1.0/24"));
    assert_eq!(
        m.metadata.response_code,
        hickory_proto::op::ResponseCode::NoError
    );
    let lines = s.stderr.lock().unwrap().clone();
    eprintln!(
        "{:?}: {} reload(s) ok, {} failed",
        t0.elapsed(),
        lines
            .iter()
            .filter(|l| l.contains("meridian: reloaded"))
            .count(),
        lines.iter().filter(|l| l.contains("reload failed")).count()
    );
}
