//! A reload runs off the signal loop: SIGTERM sent while a slow reload is
//! building stops the server at once, instead of after the build.
//! Before, the rebuild ran inside the signal loop and SIGTERM waited for it.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::common::*;

const NAMES: usize = 300_000;

fn zone(extra: &str) -> String {
    let mut z = String::with_capacity(NAMES * 40);
    z.push_str("$ORIGIN big.test.\n$TTL 300\n");
    z.push_str("@ IN SOA ns1 host 1 3600 600 86400 300\n@ IN NS ns1\nns1 IN A 192.0.2.1\n");
    for i in 0..NAMES {
        let _ = writeln!(z, "h{i} IN A 192.0.{}.{}", (i >> 8) & 255, i & 255);
    }
    z.push_str(extra);
    z
}

#[test]
fn sigterm_does_not_wait_for_a_reload() {
    let dir = TempDir::new("reload-term");
    dir.write("big.zone", &zone(""));
    let cfg = dir.write(
        "meridian.toml",
        "[server]\nlog = \"info\"\n\n[[zone]]\norigin = \"big.test.\"\nfile = \"big.zone\"\n",
    );
    let mut s = Server::start(&cfg, &[]);
    let ready = s
        .stderr
        .lock()
        .unwrap()
        .iter()
        .find(|l| l.contains("meridian: ready"))
        .cloned()
        .unwrap();
    // "loaded in N ms": the reload of the changed zone takes about as long.
    let ms: u64 = ready
        .split("loaded in ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no load time in {ready}"));
    assert!(
        ms > 600,
        "the zone loads in {ms} ms: too fast for this test to mean anything"
    );
    // A changed file, so the reload reads the zone again.
    dir.write("big.zone", &zone("extra IN A 192.0.2.9\n"));
    s.signal("HUP");
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    s.signal("TERM");
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no exit 10 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = t0.elapsed();
    let lines = s.stderr.lock().unwrap().clone();
    assert!(
        took < Duration::from_millis(500),
        "exit took {took:?} after SIGTERM (load time {ms} ms):\n{lines:#?}"
    );
    assert!(status.success(), "{status:?}\n{lines:#?}");
    // The reload was still building when the server stopped.
    assert!(!lines.iter().any(|l| l.contains("reloaded")), "{lines:#?}");
}
