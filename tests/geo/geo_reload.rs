//! Spec 7: SIGHUP, or a new geo database file (polled each second), reloads
//! config and database without dropping or failing a query; a failed
//! reload (broken TOML, corrupt mmdb) keeps the old state and says why on
//! stderr ("reload failed"). Query loops over UDP and TCP run throughout
//! and must see zero timeouts or failures.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{root, Server, TempDir};
use crate::geo_common::*;

const NAME: &str = "geo.geo.test.";

fn config(eu: &str) -> String {
    format!(
        r#"# reload test config
[server]
log = "warn"
[geo]
database = "geo.mmdb"
[[zone]]
origin = "geo.test."
file = "geo.test.zone"
[pool.na]
members = ["192.0.2.1", "192.0.2.11", "2001:db8::1"]
[pool.eu]
members = ["192.0.2.2", "2001:db8::2"]
[pool.as]
members = ["192.0.2.3", "2001:db8::3"]
[pool.sa]
members = ["192.0.2.4", "2001:db8::4"]
[pool.def]
members = ["192.0.2.9", "2001:db8::9"]
[name."geo.geo.test"]
mode = "all"
[name."geo.geo.test".geo]
continent = {{ NA = ["na"], EU = [{eu}], AS = ["as"], SA = ["sa"] }}
default = ["def"]
"#
    )
}

/// Every answer the loops may legitimately see, in any state.
fn allowed() -> Vec<Vec<String>> {
    ["na", "eu", "as", "sa", "def"]
        .iter()
        .map(|p| pool4(p))
        .collect()
}

/// Replace a file by rename, as the docs require for the database.
fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

struct Loops {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failures: Arc<Mutex<Vec<String>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// UDP and TCP query loops over several subnets and a static name.
fn start_loops(server: SocketAddr) -> Loops {
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for tcp_mode in [false, true] {
        let (stop, ok, failures) = (stop.clone(), ok.clone(), failures.clone());
        threads.push(std::thread::spawn(move || {
            let subnets: [(IpAddr, u8); 5] = [
                ("8.8.8.0".parse().unwrap(), 24),
                ("85.214.0.0".parse().unwrap(), 24),
                ("133.242.0.0".parse().unwrap(), 24),
                ("2001:4860::".parse().unwrap(), 48),
                ("7.7.7.0".parse().unwrap(), 24),
            ];
            let allowed = allowed();
            let mut c = Client::new(server);
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let (name, (a, l)) = if i.is_multiple_of(6) {
                    ("www.geo.test.", subnets[0])
                } else {
                    (NAME, subnets[i % subnets.len()])
                };
                let req = ecs_query(name, A, a, l);
                let raw = if tcp_mode {
                    let mut s = match std::net::TcpStream::connect(server) {
                        Ok(s) => s,
                        Err(e) => {
                            failures.lock().unwrap().push(format!("tcp connect: {e}"));
                            continue;
                        }
                    };
                    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                    crate::common::tcp_send(&mut s, &req);
                    crate::common::tcp_recv(&mut s)
                } else {
                    c.raw(&req)
                };
                let what = format!("{} {name} {a}/{l}", if tcp_mode { "tcp" } else { "udp" });
                let Some(raw) = raw else {
                    failures.lock().unwrap().push(format!("{what}: no answer"));
                    continue;
                };
                let r = parse(&raw);
                let good = r.rcode() == NOERROR
                    && r.ecs().as_ref().map(|e| e.1) == Some(l)
                    && if name == NAME {
                        allowed.contains(&r.addrs())
                    } else {
                        r.addrs() == vec!["192.0.2.80".to_string()]
                    };
                if good {
                    ok.fetch_add(1, Ordering::Relaxed);
                } else {
                    failures.lock().unwrap().push(format!("{what}: {r:?}"));
                }
            }
        }));
    }
    Loops {
        stop,
        ok,
        failures,
        threads,
    }
}

impl Loops {
    fn finish(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        let f = self.failures.lock().unwrap();
        assert!(
            f.is_empty(),
            "{} failed queries during reloads, first: {:?}",
            f.len(),
            &f[..f.len().min(5)]
        );
        self.ok.load(Ordering::Relaxed)
    }
}

fn pool_of(c: &mut Client, subnet: &str) -> Vec<String> {
    let (a, l) = subnet.split_once('/').unwrap();
    c.geo(NAME, A, a.parse().unwrap(), l.parse().unwrap()).0
}

/// Wait for the next stderr line with `needle` after `before` of them.
fn expect_log(s: &Server, needle: &str, before: usize) {
    assert!(
        wait_log_count(s, needle, before, Duration::from_secs(15)),
        "no new {needle:?} line; stderr: {:?}",
        s.stderr.lock().unwrap()
    );
}

#[test]
fn reload_by_database_change_and_sighup_without_failures() {
    let dir = TempDir::new("geo-reload");
    std::fs::copy(fixture("geo.test.zone"), dir.0.join("geo.test.zone")).unwrap();
    let example_csv = std::fs::read_to_string(root().join("geo/example.csv")).unwrap();
    let csv_a = dir.write("a.csv", &example_csv);
    // B: the US /9 moves to Germany (continent EU).
    let moved = example_csv.replace("8.0.0.0/9,NA,US,,", "8.0.0.0/9,EU,DE,,");
    assert_ne!(moved, example_csv);
    let csv_b = dir.write("b.csv", &moved);
    let db = dir.0.join("geo.mmdb");
    mkgeo(&csv_a, &db);
    let cfg = dir.write("meridian.toml", &config("\"eu\""));

    let s = Server::start(&cfg, &[]);
    let mut c = Client::new(s.addr);
    assert_eq!(pool_of(&mut c, "8.8.8.0/24"), pool4("na"));
    assert_eq!(pool_of(&mut c, "85.214.0.0/24"), pool4("eu"));
    let loops = start_loops(s.addr);
    std::thread::sleep(Duration::from_millis(300));

    const DB_OK: &str = "meridian: reloaded (geo database changed)";
    const HUP_OK: &str = "meridian: reloaded (SIGHUP)";
    const FAILED: &str = "reload failed";

    // 1. A new database file (mkgeo writes beside it and renames).
    let n = log_count(&s, DB_OK);
    mkgeo(&csv_b, &db);
    expect_log(&s, DB_OK, n);
    assert_eq!(
        pool_of(&mut c, "8.8.8.0/24"),
        pool4("eu"),
        "the new database is in use"
    );
    assert_eq!(c.geo(NAME, A, "8.8.8.0".parse().unwrap(), 24).1, 9);
    assert_eq!(
        pool_of(&mut c, "8.128.0.0/24"),
        pool4("na"),
        "US-CA stays NA"
    );

    // 2. SIGHUP after editing the rules.
    let n = log_count(&s, HUP_OK);
    std::fs::write(&cfg, config("\"as\"")).unwrap();
    s.signal("HUP");
    expect_log(&s, HUP_OK, n);
    assert_eq!(pool_of(&mut c, "85.214.0.0/24"), pool4("as"));
    assert_eq!(pool_of(&mut c, "8.8.8.0/24"), pool4("as"));

    // 3. Broken TOML: the reload fails, says where, and the old state stays.
    let n = log_count(&s, FAILED);
    std::fs::write(&cfg, "[server\nlog = \"warn\"\n").unwrap();
    s.signal("HUP");
    expect_log(&s, FAILED, n);
    let line = last_line(&s, FAILED);
    assert!(
        line.contains("meridian.toml:1"),
        "names file and line: {line}"
    );
    assert_eq!(pool_of(&mut c, "85.214.0.0/24"), pool4("as"));

    // A config that parses but is wrong (unknown pool): same.
    let n = log_count(&s, FAILED);
    std::fs::write(&cfg, config("\"nope\"")).unwrap();
    s.signal("HUP");
    expect_log(&s, FAILED, n);
    assert!(
        last_line(&s, FAILED).contains("unknown pool"),
        "{}",
        last_line(&s, FAILED)
    );
    assert_eq!(pool_of(&mut c, "85.214.0.0/24"), pool4("as"));

    // 4. A good config again, then a corrupt database file.
    let n = log_count(&s, HUP_OK);
    std::fs::write(&cfg, config("\"sa\"")).unwrap();
    s.signal("HUP");
    expect_log(&s, HUP_OK, n);
    assert_eq!(pool_of(&mut c, "85.214.0.0/24"), pool4("sa"));
    let good = std::fs::read(&db).unwrap();
    for corrupt in [
        b"this is not a MaxMind database".to_vec(),
        good[..good.len() / 2].to_vec(),
    ] {
        let n = log_count(&s, FAILED);
        replace(&db, &corrupt);
        expect_log(&s, FAILED, n);
        assert!(
            last_line(&s, FAILED).contains("geo.mmdb"),
            "{}",
            last_line(&s, FAILED)
        );
        assert_eq!(pool_of(&mut c, "85.214.0.0/24"), pool4("sa"));
        assert_eq!(
            pool_of(&mut c, "8.8.8.0/24"),
            pool4("sa"),
            "database B still in use"
        );
    }
    // SIGHUP with the database still corrupt fails too.
    let n = log_count(&s, FAILED);
    s.signal("HUP");
    expect_log(&s, FAILED, n);
    assert_eq!(pool_of(&mut c, "8.8.8.0/24"), pool4("sa"));

    // 5. The original database back: reloaded, the US is NA again.
    let n = log_count(&s, DB_OK);
    mkgeo(&csv_a, &db);
    expect_log(&s, DB_OK, n);
    assert_eq!(pool_of(&mut c, "8.8.8.0/24"), pool4("na"));
    assert_eq!(pool_of(&mut c, "85.214.0.0/24"), pool4("sa"));

    std::thread::sleep(Duration::from_millis(300));
    let answered = loops.finish();
    assert!(answered > 200, "only {answered} queries answered");
    eprintln!("{answered} queries answered during reloads, none failed");
}

fn last_line(s: &Server, needle: &str) -> String {
    s.stderr
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|l| l.contains(needle))
        .cloned()
        .unwrap_or_default()
}

/// Many reloads back to back while queries run: the swap never shows a
/// half-built state.
#[test]
fn rapid_sighup_reloads_without_failures() {
    let dir = TempDir::new("geo-reload-rapid");
    std::fs::copy(fixture("geo.test.zone"), dir.0.join("geo.test.zone")).unwrap();
    std::fs::copy(root().join("geo/example.mmdb"), dir.0.join("geo.mmdb")).unwrap();
    let cfg = dir.write("meridian.toml", &config("\"eu\""));
    let s = Server::start(&cfg, &[]);
    let loops = start_loops(s.addr);
    let n = log_count(&s, "meridian: reloaded (SIGHUP)");
    for i in 0..20 {
        let eu = ["\"eu\"", "\"na\"", "\"as\", \"eu\""][i % 3];
        // By rename: a reload still reading the previous version must not
        // see a half-written file.
        replace(&cfg, config(eu).as_bytes());
        s.signal("HUP");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Signals may coalesce (a reload builds at lower priority, so on a busy
    // machine several arrive during one build), but the last config is
    // always read: a signal during a reload starts another one after it.
    expect_log(&s, "meridian: reloaded (SIGHUP)", n + 1);
    let mut c = Client::new(s.addr);
    let t0 = std::time::Instant::now();
    while pool_of(&mut c, "85.214.0.0/24") != pool4("na") && t0.elapsed() < Duration::from_secs(15)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        pool_of(&mut c, "85.214.0.0/24"),
        pool4("na"),
        "20th config: EU = [\"na\"]"
    );
    // And it stays: no reload of an older version comes after it.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(pool_of(&mut c, "85.214.0.0/24"), pool4("na"));
    let answered = loops.finish();
    assert!(answered > 100, "only {answered}");
}
