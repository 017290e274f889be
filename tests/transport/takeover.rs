//! The takeover guard: a second `meridian serve` on an address that a
//! running one serves is refused (before: it started silently and took
//! part of the traffic through SO_REUSEPORT), unless started with
//! `--replace`, which starts alongside, then stops the old one with no
//! query lost.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use hickory_proto::rr::RecordType;

/// `meridian serve` on `addr`, expected to exit: (code, stderr). One still
/// running after 10 s (it started alongside) is killed and reported.
fn serve_expecting_refusal(addr: &str) -> (i32, String) {
    use std::io::Read;
    let mut child = std::process::Command::new(BIN)
        .args(["serve", "--config", example_config().to_str().unwrap()])
        .args(["--listen", addr, "--http-listen", "none", "--workers", "1"])
        .arg("--allow-root")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    let status = status.unwrap_or_else(|| panic!("a second serve on {addr} kept running:\n{err}"));
    (status.code().unwrap_or(-1), err)
}

#[test]
fn a_second_serve_on_the_same_address_is_refused() {
    let s = Server::example();
    let addr = s.addr.to_string();
    let (code, err) = serve_expecting_refusal(&addr);
    assert_eq!(code, 1, "{err}");
    assert!(!err.contains("meridian: ready"), "{err}");
    assert!(err.contains(&addr), "address not named: {err}");
    assert!(
        err.contains(&format!("pid {}", s.child.id())),
        "pid not named: {err}"
    );
    assert!(err.contains("--replace"), "{err}");
    assert!(s.alive());
}

#[test]
fn replace_takes_over_without_losing_a_query() {
    let mut old = Server::example();
    let addr: SocketAddr = old.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let lost = Arc::new(Mutex::new(Vec::new()));
    let loops: Vec<_> = (0..2)
        .map(|_| {
            let (stop, sent, lost) = (stop.clone(), sent.clone(), lost.clone());
            std::thread::spawn(move || {
                let q = Q::new("www.example.test.", RecordType::A).to_bytes();
                while !stop.load(Ordering::Relaxed) {
                    let n = sent.fetch_add(1, Ordering::Relaxed);
                    if udp_exchange(addr, &q, Duration::from_secs(1)).is_none() {
                        lost.lock().unwrap().push(n);
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let new =
        Server::try_start(&example_config(), &[addr], &["--replace"]).expect("--replace starts");
    // The old instance is told to stop, and does.
    let t0 = Instant::now();
    while old.child.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the old instance still runs: {:#?}",
            new.stderr.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        new.wait_log(
            &format!("replacing pid {}", old.child.id()),
            Duration::from_secs(2)
        ),
        "{:#?}",
        new.stderr.lock().unwrap()
    );
    assert!(
        new.wait_log("took over", Duration::from_secs(5)),
        "{:#?}",
        new.stderr.lock().unwrap()
    );
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for l in loops {
        l.join().unwrap();
    }
    let lost = lost.lock().unwrap();
    let sent = sent.load(Ordering::Relaxed);
    assert!(sent > 100, "only {sent} queries sent");
    assert!(lost.is_empty(), "{} of {sent} queries lost", lost.len());
    assert!(new.alive());

    // The new instance holds the address now: a third one is refused.
    let (code, err) = serve_expecting_refusal(&addr.to_string());
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("pid {}", new.child.id())), "{err}");
}
