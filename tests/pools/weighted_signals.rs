//! The measured signals as weight factors (issue #16): with
//! `latency_aware = true` a member much slower than its pool loses most of
//! its share without being ejected; a reported load scales the weight by
//! (1 − load). Shares are counted over real answers, with tolerances from
//! the sample size.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::health_support::*;

/// An HTTP backend that answers after `delay_ms`, with `X-Load: load/100`.
fn backend(ip: &str, delay_ms: Arc<AtomicU64>, load_pct: Arc<AtomicU64>) -> Backend {
    Backend::http(
        ip,
        handler(move |_| Reply::Custom {
            delay: Duration::from_millis(delay_ms.load(Ordering::Relaxed)),
            code: 200,
            headers: vec![(
                "X-Load".into(),
                format!("{:.2}", load_pct.load(Ordering::Relaxed) as f64 / 100.0),
            )],
            body: "ok".into(),
        }),
    )
}

fn share(s: &crate::common::Server, name: &str, ip: &str, n: usize) -> f64 {
    (0..n)
        .filter(|_| ask(s, name).addrs == [ip.to_string()])
        .count() as f64
        / n as f64
}

#[test]
fn a_slow_member_loses_most_of_its_share_and_stays_in() {
    let fast = backend("127.0.0.71", Arc::new(AtomicU64::new(0)), Arc::default());
    let slow = backend("127.0.0.72", Arc::new(AtomicU64::new(60)), Arc::default());
    let members = format!("{}, {}", member(&fast, None), member(&slow, None));
    let body = format!(
        "{}\n[pool.aware]\ncheck = \"web\"\nlatency_aware = true\nlatency_floor = 0.1\nmembers = [{members}]\n\n\
         [pool.blind]\ncheck = \"web\"\nmembers = [{members}]\n\n\
         [name.\"aware.health.test\"]\npool = \"aware\"\nmode = \"one\"\nttl = 30\n\n\
         [name.\"blind.health.test\"]\npool = \"blind\"\nmode = \"one\"\nttl = 30\n",
        check_table("web", "http", ""),
    );
    let (_dir, cfg) = setup("latency-aware", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    // The estimates exist and differ by far more than 10x.
    assert!(
        wait_for(Duration::from_secs(5), || {
            member_status(api, "aware", &slow.ip())["factors"]["latency"]
                .as_f64()
                .is_some_and(|f| f < 0.2)
        })
        .is_some(),
        "latency factor: {}",
        member_status(api, "aware", &slow.ip())
    );
    let n = 2000;
    let tol = 5.0 * (0.25 / n as f64).sqrt();
    let aware = share(&s, "aware.health.test.", &slow.ip(), n);
    let blind = share(&s, "blind.health.test.", &slow.ip(), n);
    // The floor (0.1) leaves it 0.1 / 1.1 = 9 %.
    assert!(
        aware < 0.09 + tol,
        "slow member's share with latency_aware: {aware}"
    );
    assert!(aware > 0.0, "the slow member is not ejected: {aware}");
    assert!((blind - 0.5).abs() < tol, "without latency_aware: {blind}");
    assert_eq!(
        member_status(api, "aware", &slow.ip())["standing"],
        "usable"
    );
}

#[test]
fn reported_load_scales_the_weight() {
    let a_load = Arc::new(AtomicU64::new(0));
    let b_load = Arc::new(AtomicU64::new(0));
    let a = backend("127.0.0.73", Arc::default(), a_load.clone());
    let b = backend("127.0.0.74", Arc::default(), b_load.clone());
    let body = format!(
        "{}\n[pool.web]\ncheck = \"web\"\nmembers = [{}, {}]\n\n\
         [name.\"load.health.test\"]\npool = \"web\"\nmode = \"one\"\nttl = 30\n",
        check_table(
            "web",
            "http",
            "load_header = \"X-Load\"\nload_max_step = 1.0\nload_smoothing = 1.0"
        ),
        member(&a, None),
        member(&b, None),
    );
    let (_dir, cfg) = setup("load-weight", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    // b reports 0.75: its weight becomes 0.25 of a's, share 0.25 / 1.25 = 20 %.
    b_load.store(75, Ordering::Relaxed);
    assert!(
        wait_for(Duration::from_secs(5), || {
            member_status(api, "web", &b.ip())["factors"]["load"]
                .as_f64()
                .is_some_and(|f| (f - 0.25).abs() < 0.01)
        })
        .is_some(),
        "load factor: {}",
        member_status(api, "web", &b.ip())
    );
    let n = 2000;
    let got = share(&s, "load.health.test.", &b.ip(), n);
    let p = 0.2;
    let tol = 5.0 * (p * (1.0 - p) / n as f64).sqrt();
    assert!(
        (got - p).abs() < tol,
        "share of the loaded member {got}, want {p} ± {tol}"
    );
}
