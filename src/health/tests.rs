//! Unit tests of the health state machine, config parsing and helpers.
//! Probes against real loopback backends are in tests/health_*.rs.

use super::checker::step;
use super::overrides::{override_for, OverrideMap as Overrides};
use super::probe::{dechunk, parse_status, request};
use super::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn check(kind: CheckKind) -> Check {
    Check {
        name: "c".into(),
        kind,
        port: Some(8080),
        interval_ms: 200,
        timeout_ms: 100,
        rise: 2,
        fall: 3,
        path: "/health".into(),
        host: None,
        expect_status: vec![(200, 399)],
        expect_body: None,
        tls_verify: true,
        unknown_is_up: true,
        latency_decay_ms: 10_000,
        load: None,
    }
}

fn run(state: &mut u8, d: &mut Detail, results: &[bool]) -> Vec<u8> {
    results
        .iter()
        .map(|&ok| {
            if let Some(to) = step(*state, d, ok, 2, 3) {
                *state = to;
            }
            *state
        })
        .collect()
}

#[test]
fn first_result_decides() {
    let mut d = Detail::default();
    assert_eq!(step(UNKNOWN, &mut d, true, 2, 3), Some(UP));
    let mut d = Detail::default();
    assert_eq!(step(UNKNOWN, &mut d, false, 2, 3), Some(DOWN));
}

#[test]
fn fall_and_rise_hysteresis() {
    let mut s = UP;
    let mut d = Detail::default();
    // Two failures in a row (< fall = 3) never take it down.
    let seen = run(
        &mut s,
        &mut d,
        &[false, false, true, false, false, true, false, false],
    );
    assert!(seen.iter().all(|&x| x == UP), "{seen:?}");
    // The third failure in a row does.
    assert_eq!(run(&mut s, &mut d, &[false]), vec![DOWN]);
    // One success (< rise = 2) is not enough; a failure resets the run.
    assert_eq!(
        run(&mut s, &mut d, &[true, false, true]),
        vec![DOWN, DOWN, DOWN]
    );
    assert_eq!(run(&mut s, &mut d, &[true]), vec![UP]);
    assert_eq!((d.ok_run, d.fail_run), (2, 0));
}

#[test]
fn table_carries_state_and_stats_for_equal_specs() {
    let a = CheckSpec::new(
        "127.0.0.1".parse().unwrap(),
        None,
        Some(Arc::new(check(CheckKind::Tcp))),
    );
    let b = CheckSpec::new(
        "127.0.0.2".parse().unwrap(),
        None,
        Some(Arc::new(check(CheckKind::Tcp))),
    );
    let none = CheckSpec::new(
        "127.0.0.3".parse().unwrap(),
        None,
        Some(Arc::new(check(CheckKind::None))),
    );
    assert!(none.check.is_none());
    let t1 = HealthTable::new(&[a.clone(), b.clone(), none.clone()], None);
    assert_eq!(t1.state(0), UNKNOWN);
    assert_eq!(t1.state(2), UP);
    assert!(t1.is_up(0), "unknown counts as up by default");
    t1.set_state(0, DOWN);
    t1.set_state(1, DOWN);
    t1.stats(0).checks.fetch_add(5, Ordering::Relaxed);
    // b retuned (interval only): the same probe, so it continues b's entry.
    let mut b2 = b.clone();
    Arc::make_mut(b2.check.as_mut().unwrap()).interval_ms = 300;
    // a with another path probes something else: a new entry.
    let mut a2 = a.clone();
    Arc::make_mut(a2.check.as_mut().unwrap()).path = "/other".into();
    let specs2 = [b2, a.clone(), a2];
    let t2 = HealthTable::new(&specs2, Some((&t1, &[a, b, none][..])));
    assert_eq!(t2.state(1), DOWN, "unchanged spec keeps its state");
    assert_eq!(t2.stats(1).checks.load(Ordering::Relaxed), 5);
    assert!(Arc::ptr_eq(t2.stats(1), t1.stats(0)));
    assert_eq!(t2.state(0), DOWN, "retuned check keeps its state");
    assert!(Arc::ptr_eq(t2.stats(0), t1.stats(1)));
    assert_eq!(t2.state(2), UNKNOWN, "changed probe starts over");
}

#[test]
fn carry_map_claims_each_old_entry_once() {
    let ip = "127.0.0.1".parse().unwrap();
    let c = check(CheckKind::Http);
    let mut slow = c.clone();
    slow.name = "slow".into();
    slow.interval_ms = 1000;
    let mut slower = slow.clone();
    slower.interval_ms = 2000;
    let old = [CheckSpec::new(ip, None, Some(Arc::new(c.clone())))];
    // The exact match claims the old entry; the retuned twin starts over.
    let new = [
        CheckSpec::new(ip, None, Some(Arc::new(slow.clone()))),
        CheckSpec::new(ip, None, Some(Arc::new(c.clone()))),
    ];
    assert_eq!(carry_map(&new, &old), vec![None, Some(0)]);
    // Without an exact match the first retuned one continues it.
    let new = [
        CheckSpec::new(ip, None, Some(Arc::new(slow))),
        CheckSpec::new(ip, None, Some(Arc::new(slower))),
    ];
    assert_eq!(carry_map(&new, &old), vec![Some(0), None]);
    // Another port is another probe.
    let new = [CheckSpec::new(ip, Some(9), Some(Arc::new(c)))];
    assert_eq!(carry_map(&new, &old), vec![None]);
}

#[test]
fn unknown_is_up_false_and_overrides() {
    let mut c = check(CheckKind::Http);
    c.unknown_is_up = false;
    let a = CheckSpec::new("127.0.0.1".parse().unwrap(), None, Some(Arc::new(c)));
    let t = HealthTable::new(&[a], None);
    assert!(!t.is_up(0));
    t.set_override(0, OVR_UP);
    assert!(t.is_up(0));
    t.set_state(0, UP);
    t.set_override(0, OVR_DRAIN);
    assert!(!t.is_up(0));
    assert!(t.is_drained(0));
    t.set_override(0, OVR_DOWN);
    assert!(!t.is_up(0) && !t.is_drained(0));
    t.set_override(0, OVR_NONE);
    assert!(t.is_up(0));
}

#[test]
fn effective_port_and_override_precedence() {
    let ip = "127.0.0.1".parse().unwrap();
    let mut c = check(CheckKind::Http);
    c.port = None;
    let s = CheckSpec::new(ip, None, Some(Arc::new(c.clone())));
    assert_eq!(s.effective_port(), Some(80));
    let s2 = CheckSpec::new(ip, Some(9000), Some(Arc::new(c)));
    assert_eq!(s2.effective_port(), Some(9000));
    assert_eq!(s2.target(), "127.0.0.1:9000");
    let mut m = Overrides::new();
    m.insert((ip, None), OVR_DOWN);
    m.insert((ip, Some(9000)), OVR_UP);
    assert_eq!(override_for(&m, &s), OVR_DOWN);
    assert_eq!(override_for(&m, &s2), OVR_UP);
    let v6 = CheckSpec::new(
        "::1".parse().unwrap(),
        Some(8443),
        Some(Arc::new(check(CheckKind::Https))),
    );
    assert_eq!(v6.target(), "[::1]:8443");
}

#[test]
fn http_helpers() {
    assert_eq!(parse_status("HTTP/1.1 204 No Content\r\n"), Some(204));
    assert_eq!(parse_status("HTTP/1.0 200\r\n"), Some(200));
    assert_eq!(parse_status("SSH-2.0-OpenSSH\r\n"), None);
    assert_eq!(
        dechunk(b"2\r\nok\r\n3\r\n!!!\r\n0\r\n\r\n"),
        (b"ok!!!".to_vec(), true)
    );
    assert_eq!(dechunk(b"5\r\nhel"), (b"hel".to_vec(), false));
    let mut c = check(CheckKind::Http);
    c.host = Some("svc.example".into());
    let r = String::from_utf8(request("127.0.0.1".parse().unwrap(), 8080, &c)).unwrap();
    assert!(
        r.starts_with("GET /health HTTP/1.1\r\nHost: svc.example:8080\r\n"),
        "{r}"
    );
    c.host = None;
    c.kind = CheckKind::Https;
    let r = String::from_utf8(request("::1".parse().unwrap(), 443, &c)).unwrap();
    assert!(r.contains("\r\nHost: [::1]\r\n"), "{r}");
}

#[test]
fn signals_publish_carry_over_and_bump_the_generation() {
    let a = CheckSpec::new(
        "127.0.0.1".parse().unwrap(),
        None,
        Some(Arc::new(check(CheckKind::Http))),
    );
    let t1 = HealthTable::new(std::slice::from_ref(&a), None);
    assert_eq!((t1.rtt_estimate_us(0), t1.load(0)), (None, None));
    let g0 = t1.generation();
    t1.set_rtt_estimate(0, Some(0.2005));
    assert_eq!(t1.rtt_estimate_us(0), Some(200_500));
    t1.set_load(0, Some(1.7));
    assert_eq!(t1.load(0), Some(1.0), "clamped into 0..1");
    t1.set_load(0, Some(0.25));
    assert_eq!(t1.load(0), Some(0.25));
    assert_eq!(t1.generation(), g0 + 3);
    // Writing the same value again is no change.
    t1.set_load(0, Some(0.25));
    t1.set_state(0, UNKNOWN);
    assert_eq!(t1.generation(), g0 + 3);
    t1.set_state(0, UP);
    t1.set_override(0, OVR_DOWN);
    assert_eq!(t1.generation(), g0 + 5);
    // A reload with the same spec keeps the signals, and the count goes on.
    let t2 = HealthTable::new(
        std::slice::from_ref(&a),
        Some((&t1, std::slice::from_ref(&a))),
    );
    assert_eq!(t2.rtt_estimate_us(0), Some(200_500));
    assert_eq!(t2.load(0), Some(0.25));
    assert!(t2.generation() > t1.generation());
    t2.set_rtt_estimate(0, None);
    assert_eq!(t2.rtt_estimate_us(0), None);
}

#[test]
fn load_from_a_json_body() {
    use super::probe::json_load;
    assert_eq!(json_load(br#"{"load": 0.42, "x": "y"}"#, "load"), Ok(0.42));
    assert_eq!(json_load(br#"{"load": 3}"#, "load"), Ok(1.0));
    assert!(json_load(br#"{"load": "banana"}"#, "load")
        .unwrap_err()
        .contains("not a number"));
    assert!(json_load(br#"{"other": 1}"#, "load")
        .unwrap_err()
        .contains("no JSON field"));
    assert!(json_load(b"ok", "load").unwrap_err().contains("not JSON"));
    // Only a top-level field counts.
    assert!(json_load(br#"{"a": {"load": 0.5}}"#, "load").is_err());
}

/// A stand-in for the serving engine: its health table and specs.
struct Served {
    table: HealthTable,
    specs: Vec<CheckSpec>,
}

impl super::overrides::Served for Served {
    fn health_table(&self) -> &HealthTable {
        &self.table
    }
    fn check_specs(&self) -> &[CheckSpec] {
        &self.specs
    }
}

impl Served {
    fn new(addr: &str) -> Arc<Served> {
        let spec = CheckSpec::new(
            addr.parse().unwrap(),
            None,
            Some(Arc::new(check(CheckKind::Tcp))),
        );
        let specs = vec![spec];
        let table = HealthTable::new(&specs, None);
        Arc::new(Served { table, specs })
    }
}

/// How the API and the fleet set an override on the serving engine.
fn set_serving(
    ov: &super::overrides::Overrides,
    serving: &arc_swap::ArcSwap<Served>,
    addr: std::net::IpAddr,
    state: u8,
) -> Result<usize, String> {
    ov.set(serving, addr, None, state)
}

/// An override set while a reload holds the lock (new table filled, not yet
/// published) must land in the engine the reload publishes: the serving
/// engine is read under the lock, not before it (review F5).
#[test]
fn override_set_during_reload_lands_in_the_published_engine() {
    use std::sync::{mpsc, Barrier};
    let ov = Arc::new(super::overrides::Overrides::new());
    let old = Served::new("127.0.0.1");
    let serving = Arc::new(arc_swap::ArcSwap::new(old.clone()));
    let new = Served::new("127.0.0.1");
    let (in_publish, publishing) = mpsc::channel();
    let go = Arc::new(Barrier::new(2));
    let reload = {
        let (ov, serving, new, go) = (ov.clone(), serving.clone(), new.clone(), go.clone());
        std::thread::spawn(move || {
            ov.apply_then(&new.table, &new.specs, || {
                in_publish.send(()).unwrap();
                go.wait();
                serving.store(new.clone());
            })
        })
    };
    publishing.recv().unwrap();
    let setter = {
        let (ov, serving) = (ov.clone(), serving.clone());
        std::thread::spawn(move || {
            set_serving(&ov, &serving, "127.0.0.1".parse().unwrap(), OVR_DOWN)
        })
    };
    // Let the setter reach the lock the reload holds, then publish.
    std::thread::sleep(std::time::Duration::from_millis(200));
    go.wait();
    reload.join().unwrap();
    assert_eq!(setter.join().unwrap(), Ok(1));
    let e = serving.load();
    assert!(Arc::ptr_eq(&e, &new));
    assert_eq!(
        e.table.override_of(0),
        OVR_DOWN,
        "override missing from the serving engine"
    );
}
