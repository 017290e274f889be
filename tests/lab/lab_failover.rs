//! The local resolver lab, failover: a pool member's backend stops, and
//! within TTL + fall × interval + timeout clients behind Unbound and
//! PowerDNS Recursor stop getting that member; answers during the outage
//! carry the degraded TTL; clients of regions that do not use the pool keep
//! the full TTL; and the member comes back once its backend does.
//!
//! Fixture: tests/data/lab/failover.toml (ttl 2, degraded_ttl 1, a TCP check
//! every 200 ms with a 150 ms timeout, rise 2, fall 2). The backends are TCP
//! listeners on 127.0.0.2 and 127.0.0.3 run by this test.
//!
//! Timings are measured from the moment the backend's listener closes and
//! printed; the asserted bounds add a margin for a loaded 2-core CI box.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hickory_proto::rr::RecordType;

use crate::lab_common::{ask, fixture, render, Answer, Kind, Meridian, Resolver};

const TTL: u32 = 2;
const DEGRADED_TTL: u32 = 1;
const INTERVAL_MS: u64 = 200;
const TIMEOUT_MS: u64 = 150;
const RISE: u64 = 2;
const FALL: u64 = 2;
/// Added to every absolute bound: scheduling on a loaded 2-core box (the
/// checker's runtime can be starved), the resolvers' whole-second TTL
/// rounding, and the 50 ms polling step.
const MARGIN: Duration = Duration::from_millis(2500);
/// A resolver holds an answer for its TTL counted in whole seconds: at most
/// TTL + 1 s after meridian changed it, plus this for polling and scheduling.
const RESOLVER_SLACK: Duration = Duration::from_millis(700);

const A: &str = "127.0.0.2";
const B: &str = "127.0.0.3";
const OTHER: &str = "127.0.0.4";

/// A TCP listener that accepts and drops connections until stopped.
struct Backend {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Backend {
    fn start(addr: SocketAddr) -> Option<Backend> {
        let l = TcpListener::bind(addr).ok()?;
        l.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((c, _)) => drop(c),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            // The listener closes here: connections are refused from now on.
        });
        Some(Backend {
            stop,
            thread: Some(thread),
        })
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A port free on both backend addresses, and the backends on it.
fn start_backends() -> (u16, Backend, Backend) {
    for _ in 0..20 {
        let port = crate::common::free_port();
        let a = Backend::start(format!("{A}:{port}").parse().unwrap());
        let b = Backend::start(format!("{B}:{port}").parse().unwrap());
        if let (Some(a), Some(b)) = (a, b) {
            return (port, a, b);
        }
    }
    panic!("no port free on both {A} and {B}");
}

/// What a client sees: through a resolver (RD) or from meridian directly.
#[derive(Clone, Copy)]
struct Client {
    label: &'static str,
    server: SocketAddr,
    rd: bool,
}

/// The names asked: the plain pool name, and the geo name from a North
/// American subnet (the checked pool) and a European one (the other pool).
const QUERIES: [(&str, Option<&str>); 2] = [
    ("web.example.test.", None),
    ("geo.example.test.", Some("8.8.8.0/24")),
];

fn look(c: &Client, name: &str, ecs: Option<&str>) -> Answer {
    ask(c.server, name, RecordType::A, ecs, c.rd)
}

/// Poll every client for every query until `done` holds for each (and keeps
/// holding to the end of the window); returns the time each first held
/// (after which it never failed again), or None if it never settled.
fn measure(
    clients: &[Client],
    t0: Instant,
    window: Duration,
    done: impl Fn(&Answer) -> bool,
    mut during: impl FnMut(&Client, &str, &Answer),
) -> Vec<(String, Option<Duration>)> {
    let keys: Vec<(Client, &str, Option<&str>)> = clients
        .iter()
        .flat_map(|c| QUERIES.iter().map(move |(n, e)| (*c, *n, *e)))
        .collect();
    let mut since: Vec<Option<Duration>> = vec![None; keys.len()];
    while t0.elapsed() < window {
        for (i, (c, name, ecs)) in keys.iter().enumerate() {
            let a = look(c, name, *ecs);
            if done(&a) {
                since[i].get_or_insert(t0.elapsed());
                during(c, name, &a);
            } else {
                since[i] = None;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    keys.iter()
        .zip(since)
        .map(|((c, n, e), s)| {
            (
                format!(
                    "{} {n}{}",
                    c.label,
                    e.map(|x| format!(" ecs {x}")).unwrap_or_default()
                ),
                s,
            )
        })
        .collect()
}

/// Every client changed (`what`) within its bound: meridian within
/// `bound_direct`; a resolver within `bound_resolver` of the backend change
/// and within `ttl` + 1 s (+ slack) of meridian's own change.
fn check_times(
    times: &[(String, Option<Duration>)],
    what: &str,
    bound_direct: Duration,
    bound_resolver: Duration,
    ttl: u32,
) {
    let never = |k: &str| -> ! {
        panic!(
            "{k}: never {what} ({A}) within the window. \
             Are health checks ([check.NAME], pool check) running?"
        )
    };
    let direct = times
        .iter()
        .filter(|(k, _)| k.starts_with("meridian"))
        .map(|(k, s)| s.unwrap_or_else(|| never(k)))
        .max()
        .unwrap();
    assert!(
        direct <= bound_direct,
        "meridian {what} ({A}) only after {direct:?} (bound {bound_direct:?})"
    );
    let follow = Duration::from_secs(ttl as u64 + 1) + RESOLVER_SLACK;
    for (k, s) in times.iter().filter(|(k, _)| !k.starts_with("meridian")) {
        let s = s.unwrap_or_else(|| never(k));
        assert!(
            s <= bound_resolver,
            "{k}: {what} ({A}) only after {s:?} (bound {bound_resolver:?})"
        );
        assert!(
            s.saturating_sub(direct) <= follow,
            "{k}: {what} ({A}) {:?} after meridian did; a cached answer lives at most ttl {ttl}s (+1 s rounding)",
            s - direct
        );
    }
}

fn show(s: &Option<Duration>) -> String {
    s.map(|d| format!("{} ms", d.as_millis()))
        .unwrap_or_else(|| "never".into())
}

#[test]
fn resolvers_stop_handing_out_a_dead_member_within_ttl_plus_detection() {
    if !crate::common::need(
        "resolvers_stop_handing_out_a_dead_member_within_ttl_plus_detection",
        &["unbound", "pdns_recursor", "dig"],
    ) {
        return;
    }
    let (port, mut backend_a, _backend_b) = start_backends();
    let dir = crate::common::TempDir::new("lab-failover");
    let text = std::fs::read_to_string(fixture("failover.toml")).unwrap();
    let config = dir.write(
        "failover.toml",
        &render(
            &text,
            &[
                ("ROOT", crate::common::root().display().to_string()),
                ("CHECK_PORT", port.to_string()),
            ],
        ),
    );
    let m = Meridian::start(&config);
    let unbound = Resolver::start(Kind::Unbound, m.addr(), &["example.test."]);
    let recursor = Resolver::start(Kind::Recursor, m.addr(), &["example.test."]);
    let clients = [
        Client {
            label: "meridian (direct)",
            server: m.addr(),
            rd: false,
        },
        Client {
            label: "unbound",
            server: unbound.addr,
            rd: true,
        },
        Client {
            label: "pdns-recursor",
            server: recursor.addr,
            rd: true,
        },
    ];
    let both = vec![A.to_string(), B.to_string()];
    let only_b = vec![B.to_string()];

    // Healthy: every client gets both members with the full TTL, for a whole
    // check cycle (rise + 1 intervals), so the checker is running.
    let t = Instant::now();
    let healthy = measure(
        &clients,
        t,
        Duration::from_millis((RISE + 1) * INTERVAL_MS + 300),
        |a| a.addrs == both,
        |_, _, _| {},
    );
    for (k, s) in &healthy {
        assert!(s.is_some(), "{k}: not both members while healthy");
    }
    // The other region is served from the unchecked pool.
    for c in &clients {
        let a = look(c, "geo.example.test.", Some("85.214.0.0/24"));
        assert_eq!(a.addrs, vec![OTHER.to_string()], "{}", c.label);
    }

    // Stop backend A; from now on its checks are refused.
    backend_a.stop();
    let t0 = Instant::now();
    let detect = Duration::from_millis(FALL * INTERVAL_MS + TIMEOUT_MS);
    let bound_direct = detect + MARGIN;
    let bound_resolver = Duration::from_secs(TTL as u64) + detect + MARGIN;
    let mut bad_ttl = Vec::new();
    let down = measure(
        &clients,
        t0,
        bound_resolver + Duration::from_secs(3),
        |a| a.addrs == only_b,
        |c, name, a| {
            // meridian gives exactly degraded_ttl; a resolver counts it down.
            let ok = if c.rd {
                a.max_ttl() <= DEGRADED_TTL
            } else {
                a.max_ttl() == DEGRADED_TTL
            };
            if !ok {
                bad_ttl.push(format!(
                    "{} {name}: ttl {} during the outage",
                    c.label,
                    a.max_ttl()
                ));
            }
        },
    );
    println!(
        "member {A} down (backend stopped at t=0; bound: meridian {:?}, resolvers ttl {TTL}s + fall {FALL} x {INTERVAL_MS}ms + timeout {TIMEOUT_MS}ms = {:?}, each + {:?} margin):",
        detect,
        Duration::from_secs(TTL as u64) + detect,
        MARGIN
    );
    for (k, s) in &down {
        println!("  {k:<48} stopped handing out {A} after {}", show(s));
    }
    check_times(
        &down,
        "stopped handing out",
        bound_direct,
        bound_resolver,
        TTL,
    );
    assert!(
        bad_ttl.is_empty(),
        "answers during the outage must carry degraded_ttl {DEGRADED_TTL}:\n{}",
        bad_ttl.join("\n")
    );
    // Clients of the other region are not degraded.
    for c in &clients {
        let a = look(c, "geo.example.test.", Some("85.214.0.0/24"));
        assert_eq!(a.addrs, vec![OTHER.to_string()], "{}", c.label);
        if !c.rd {
            assert_eq!(a.max_ttl(), TTL, "{}: the other region's TTL", c.label);
        }
    }

    // Bring A back: it returns, with the full TTL again.
    let t1 = Instant::now();
    let _backend_a2 = Backend::start(format!("{A}:{port}").parse().unwrap())
        .unwrap_or_else(|| panic!("cannot listen on {A}:{port} again"));
    let rise = Duration::from_millis(RISE * INTERVAL_MS + TIMEOUT_MS);
    let bound_up = Duration::from_secs(DEGRADED_TTL as u64) + rise + MARGIN;
    let up = measure(
        &clients,
        t1,
        bound_up + Duration::from_secs(2),
        |a| a.addrs == both && a.max_ttl() <= TTL,
        |_, _, _| {},
    );
    for (k, s) in &up {
        println!(
            "  {k:<48} hands out {A} again after {} (bound {bound_up:?})",
            show(s)
        );
    }
    check_times(&up, "came back", rise + MARGIN, bound_up, DEGRADED_TTL);
    let a = look(&clients[0], "web.example.test.", None);
    assert_eq!(
        (a.addrs.clone(), a.max_ttl()),
        (both, TTL),
        "meridian after recovery"
    );
}
