//! Memory stays flat across reloads of a large zone: after five reloads
//! of a 100,000-name zone, each one reading the zone again (its file is
//! touched), RSS is within 1.2x of what it was after the first load.

use std::time::Duration;

use crate::common::{Server, TempDir};

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap()
}

fn zone(n: usize) -> String {
    let mut z = String::from(
        "$ORIGIN big.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 7200 1800 1209600 300\n@ IN NS ns1\nns1 IN A 192.0.2.53\n",
    );
    for i in 0..n {
        z += &format!(
            "h{i} IN A 10.{}.{}.{}\n",
            (i >> 16) & 255,
            (i >> 8) & 255,
            i & 255
        );
        if i % 4 != 0 {
            z += &format!("h{i} IN AAAA 2001:db8::{:x}:{:x}\n", i >> 16, i & 0xffff);
        }
        if i % 10 == 0 {
            z += &format!("h{i} IN TXT \"v=spf1 -all\"\n");
        }
    }
    z
}

#[test]
fn five_reloads_of_a_100k_name_zone_keep_memory_flat() {
    let dir = TempDir::new("reload-memory");
    let zf = dir.write("big.zone", &zone(100_000));
    let cfg = dir.write(
        "big.toml",
        "[[zone]]\norigin = \"big.test.\"\nfile = \"big.zone\"\n",
    );
    let s = Server::start(&cfg, &[]);
    let pid = s.child.id();
    let first = rss_kb(pid);
    for k in 1..=5 {
        // A new mtime: the reload reads the zone again.
        let f = std::fs::File::options().append(true).open(&zf).unwrap();
        f.set_modified(std::time::SystemTime::now() + Duration::from_secs(10 * k))
            .unwrap();
        let line = s.reload(Duration::from_secs(120));
        assert!(line.contains("1 of 1 zone(s) read"), "{line}");
        eprintln!("RSS after reload {k}: {} kB", rss_kb(pid));
    }
    // The replaced engine is freed, and its pages returned, by a thread of
    // its own once the last query lets go of it: give it a moment.
    let t = std::time::Instant::now();
    let mut last = rss_kb(pid);
    while last * 10 > first * 12 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(100));
        last = rss_kb(pid);
    }
    eprintln!("RSS after the first load {first} kB, after 5 reloads {last} kB");
    assert!(
        last * 10 <= first * 12,
        "RSS grew from {first} kB to {last} kB over 5 reloads"
    );
}
