//! The measured signals of health checks, end to end against real backends
//! on loopback: a backend that answers its check in ~200 ms shows a
//! round-trip estimate of at least 150 ms in `/status`, a fast one under
//! 50 ms, and once the slow one turns fast its estimate decays over a few
//! `latency_decay` time constants instead of dropping at once (and a reload
//! keeps the estimate); a reported
//! `X-Load` converges to its value in steps no larger than `load_max_step`,
//! a JSON load field is read, and a figure that is not a number keeps the
//! last one and is logged once; `meridian check` rejects bad signal keys
//! with `file:line`.

use crate::common::*;
use crate::health_support::*;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A backend answering 200 after `delay_ms` (changeable) with these headers and body.
fn scripted(
    ip: &str,
    delay_ms: Arc<AtomicU64>,
    header: Arc<Mutex<Option<String>>>,
    body: &'static str,
) -> Backend {
    Backend::http(
        ip,
        handler(move |_| Reply::Custom {
            delay: Duration::from_millis(delay_ms.load(Ordering::Relaxed)),
            code: 200,
            headers: header
                .lock()
                .unwrap()
                .iter()
                .map(|v| ("X-Load".to_string(), v.clone()))
                .collect(),
            body: body.to_string(),
        }),
    )
}

fn field(api: SocketAddr, pool: &str, addr: &str, key: &str) -> Option<f64> {
    member_status(api, pool, addr)[key].as_f64()
}

#[test]
fn slow_backend_shows_a_high_rtt_estimate_that_decays_when_it_turns_fast() {
    let fast = Backend::ok("127.0.0.161");
    let delay = Arc::new(AtomicU64::new(200));
    let slow = scripted("127.0.0.162", delay.clone(), Arc::default(), "ok");
    let tcp = Backend::ok("127.0.0.163");
    // Probes 500 ms apart; τ = 1 s, so one probe of the fast backend pulls
    // the slow one's estimate by 1 − e^−0.5 ≈ 40 % of the way down.
    let timing =
        "interval_ms = 500\ntimeout_ms = 450\nrise = 1\nfall = 3\nlatency_decay = \"1s\"\n";
    let body = format!(
        "[check.web]\ntype = \"http\"\n{timing}\n[check.t]\ntype = \"tcp\"\n{timing}\n\
         [pool.web]\ncheck = \"web\"\nmembers = [{}, {}, {}]\n\n\
         [name.\"web.health.test\"]\npool = \"web\"\nttl = 60\n",
        member(&fast, None),
        member(&slow, None),
        member(&tcp, Some("t")),
    );
    let (_dir, cfg) = setup("signals-rtt", &body);
    let (s, api) = serve(&cfg);
    settle(api);

    let got = wait_for(ms(10_000), || {
        field(api, "web", "127.0.0.162", "rtt_estimate_ms").is_some_and(|v| v >= 150.0)
            && field(api, "web", "127.0.0.161", "rtt_estimate_ms").is_some_and(|v| v < 50.0)
    });
    assert!(
        got.is_some(),
        "no slow ≥ 150 ms / fast < 50 ms estimates: {}",
        status(api)
    );
    // A tcp check has a round-trip (the connect) but no load.
    let t = member_status(api, "web", "127.0.0.163");
    assert!(t["rtt_estimate_ms"].as_f64().is_some(), "{t}");
    assert!(t["load"].is_null(), "{t}");
    // The gauge says the same, in seconds.
    let m = metrics(api);
    let g = metric(
        &m,
        "meridian_member_rtt_estimate_seconds{pool=\"web\",address=\"127.0.0.162\"}",
    )
    .unwrap_or_else(|| panic!("no rtt gauge:\n{m}"));
    assert!(g >= 0.150, "{g}");

    // A reload keeps the estimate of an unchanged check: it is there at
    // once, before the first probe of the new table (≥ 200 ms away).
    let gen = status(api)["generation"].as_u64();
    let line = s.reload(ms(10_000));
    assert!(line.contains("reloaded"), "{line}");
    let st = status(api);
    assert_ne!(st["generation"].as_u64(), gen, "no reload happened");
    let kept = member_status(api, "web", "127.0.0.162")["rtt_estimate_ms"].as_f64();
    assert!(
        kept.is_some_and(|v| v >= 150.0),
        "estimate lost over a reload: {kept:?}"
    );

    // The slow backend turns fast: the estimate decays, through values
    // between the two, to under 50 ms within a few τ.
    delay.store(0, Ordering::Relaxed);
    let mut seen = Vec::new();
    let took = wait_for(ms(10_000), || {
        let v = field(api, "web", "127.0.0.162", "rtt_estimate_ms").unwrap();
        if seen.last() != Some(&v) {
            seen.push(v);
        }
        v < 50.0
    });
    assert!(took.is_some(), "estimate never decayed: {seen:?}");
    assert!(
        seen.iter().any(|&v| (60.0..180.0).contains(&v)),
        "no intermediate estimate: it must decay, not drop: {seen:?}"
    );
}

#[test]
fn reported_load_converges_in_bounded_steps_and_bad_figures_keep_the_last() {
    let header = Arc::new(Mutex::new(Some("0".to_string())));
    let hb = scripted("127.0.0.164", Arc::default(), header.clone(), "ok");
    let jb = scripted(
        "127.0.0.165",
        Arc::default(),
        Arc::default(),
        r#"{"status": "ok", "load": 0.3}"#,
    );
    let plain = Backend::ok("127.0.0.166");
    let timing = "interval_ms = 300\ntimeout_ms = 200\nrise = 1\nfall = 3\n";
    let body = format!(
        "[check.h]\ntype = \"http\"\n{timing}load_header = \"X-Load\"\nload_smoothing = 0.5\nload_max_step = 0.1\n\n\
         [check.j]\ntype = \"http\"\n{timing}load_json = \"load\"\n\n\
         [check.p]\ntype = \"http\"\n{timing}\n\
         [pool.web]\nmembers = [{}, {}, {}]\n\n\
         [name.\"web.health.test\"]\npool = \"web\"\nttl = 60\n",
        member(&hb, Some("h")),
        member(&jb, Some("j")),
        member(&plain, Some("p")),
    );
    let (_dir, cfg) = setup("signals-load", &body);
    let (s, api) = serve(&cfg);
    settle(api);

    // The first figure is taken as it is.
    let first = wait_for(ms(5000), || {
        field(api, "web", "127.0.0.164", "load") == Some(0.0)
            && field(api, "web", "127.0.0.165", "load") == Some(0.3)
    });
    assert!(first.is_some(), "no first load figures: {}", status(api));
    // A check without load keys has no load.
    assert!(member_status(api, "web", "127.0.0.166")["load"].is_null());

    // 0 → 0.8: every probe moves the figure by at most load_max_step.
    *header.lock().unwrap() = Some("0.8".into());
    let mut trace: Vec<(u64, f64)> = Vec::new();
    let done = wait_for(ms(15_000), || {
        let m = member_status(api, "web", "127.0.0.164");
        let (n, v) = (m["checks"].as_u64().unwrap(), m["load"].as_f64().unwrap());
        if trace.last().map(|t| t.1) != Some(v) {
            trace.push((n, v));
        }
        (v - 0.8).abs() < 0.01
    });
    assert!(done.is_some(), "load never converged to 0.8: {trace:?}");
    for w in trace.windows(2) {
        let ((n0, v0), (n1, v1)) = (w[0], w[1]);
        // Polls may miss a probe: allow one step per probe in between.
        let probes = n1.saturating_sub(n0).max(1) as f64;
        assert!(
            (v1 - v0).abs() <= 0.1 * probes + 1e-6,
            "step {v0} → {v1} over {probes} probe(s): {trace:?}"
        );
    }
    assert!(trace.len() >= 6, "converged in too few steps: {trace:?}");
    assert!(trace.iter().all(|&(_, v)| v <= 0.8 + 1e-6), "{trace:?}");
    let m = metrics(api);
    let g = metric(
        &m,
        "meridian_member_load{pool=\"web\",address=\"127.0.0.164\"}",
    )
    .unwrap_or_else(|| panic!("no load gauge:\n{m}"));
    assert!((g - 0.8).abs() < 0.01, "{g}");

    // A figure that is not a number: the last figure stays, one warning.
    let last = field(api, "web", "127.0.0.164", "load").unwrap();
    let checks = |api| {
        member_status(api, "web", "127.0.0.164")["checks"]
            .as_u64()
            .unwrap()
    };
    *header.lock().unwrap() = Some("banana".into());
    assert!(
        s.wait_log("not a number: \"banana\"", ms(5000)),
        "bad load figure not logged"
    );
    let n0 = checks(api);
    assert!(
        wait_for(ms(5000), || checks(api) >= n0 + 4).is_some(),
        "checks stopped"
    );
    let m = member_status(api, "web", "127.0.0.164");
    assert_eq!(m["load"].as_f64(), Some(last), "{m}");
    assert_eq!(
        m["state"], "up",
        "a bad figure does not fail the check: {m}"
    );
    assert!(m["load_error"].as_str().unwrap().contains("banana"), "{m}");
    assert_eq!(
        s.log_count("not a number: \"banana\""),
        1,
        "warned more than once"
    );
    let lines = s.stderr.lock().unwrap().clone();
    let line = lines.iter().find(|l| l.contains("banana")).unwrap();
    assert!(
        line.contains("WARN") && line.contains("127.0.0.164") && line.contains("check h"),
        "{line}"
    );
    // A good figure again is read again.
    *header.lock().unwrap() = Some("0.7".into());
    assert!(
        wait_for(ms(5000), || field(api, "web", "127.0.0.164", "load")
            .is_some_and(|v| v < last - 0.01))
        .is_some(),
        "load not read again: {}",
        member_status(api, "web", "127.0.0.164")
    );
    assert!(member_status(api, "web", "127.0.0.164")["load_error"].is_null());
}

#[test]
fn check_rejects_bad_signal_keys_with_file_and_line() {
    for (table, line, words) in [
        (
            "[check.a]\ntype = \"tcp\"\nport = 80\nload_header = \"X-Load\"\n",
            4,
            "load_header applies only to http and https checks",
        ),
        (
            "[check.a]\ntype = \"http\"\nload_header = \"X-Load\"\nload_json = \"load\"\n",
            4,
            "give load_header or load_json, not both",
        ),
        (
            "[check.a]\ntype = \"http\"\nlatency_decay = \"fast\"\n",
            3,
            "latency_decay \"fast\" is not a duration",
        ),
        (
            "[check.a]\ntype = \"http\"\nload_json = \"load\"\nload_max_step = 0\n",
            4,
            "load_max_step must be in (0, 1]",
        ),
        (
            "[check.a]\ntype = \"http\"\nload_smoothing = 0.5\n",
            3,
            "load_smoothing needs load_header or load_json",
        ),
    ] {
        let (dir, cfg) = setup("signals-check", "");
        // The body's first line is after the fixed part of the config.
        let base = config_text("").lines().count();
        let p = dir.write("meridian.toml", &config_text(table));
        assert_eq!(p, cfg);
        let (code, out, err) = run(&["check", "--config", cfg.to_str().unwrap()]);
        assert_eq!(code, 1, "{table}\nstdout: {out}\nstderr: {err}");
        let want = format!("{}:{}: ", cfg.display(), base - 1 + line);
        assert!(
            err.starts_with(&want),
            "{table}: want `{want}...`, got: {err}"
        );
        assert!(err.contains(words), "{table}: `{words}` not in: {err}");
    }
    // And the same keys, well formed, pass.
    let (_dir, cfg) = setup(
        "signals-check-ok",
        "[check.a]\ntype = \"http\"\nlatency_decay = \"2s\"\nload_json = \"load\"\nload_smoothing = 0.3\nload_max_step = 0.05\n",
    );
    let (code, out, err) = run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
}
