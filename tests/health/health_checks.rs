//! Health checks against real backends on loopback: a stopped backend
//! leaves the answers within fall × interval + timeout and comes back after
//! rise successes; a flapping one that fails fewer than `fall` times in a
//! row never leaves; HTTP status, path, Host and body checks; HTTPS with a
//! self-signed certificate fails with verification on and passes with it
//! off; unknown members count as up, or down with `unknown_is_up = false`.
//!
//! Checks run every 200 ms with a 100 ms timeout, rise 2, fall 3.

use crate::common::*;
use crate::health_support::*;
use hickory_proto::op::ResponseCode;
use std::time::Instant;

#[test]
fn stopped_backend_leaves_and_returns_after_rise() {
    let a = Backend::ok("127.0.0.11");
    let mut b = Backend::ok("127.0.0.12");
    let body = format!(
        "{}\n[pool.web]\ncheck = \"tcp\"\nmembers = [{}, {}]\n\n[name.\"web.health.test\"]\npool = \"web\"\nttl = 60\ndegraded_ttl = 5\n",
        check_table("tcp", "tcp", ""),
        member(&a, None),
        member(&b, None)
    );
    let (_dir, cfg) = setup("stop", &body);
    let (s, api) = serve(&cfg);
    let both = set(&["127.0.0.11", "127.0.0.12"]);
    // Unknown counts as up: both are answered from the first query on.
    assert_eq!(ask(&s, "web.health.test.").addrs, both);
    settle(api);
    let r = ask(&s, "web.health.test.");
    assert_eq!(r.addrs, both);
    assert_eq!(r.ttls, vec![60, 60]);

    // Stop b: it leaves after `fall` failed probes, not before.
    b.stop();
    let took = wait_for(ms(5000), || {
        ask(&s, "web.health.test.").addrs == set(&["127.0.0.11"])
    })
    .expect("stopped backend never left the answers");
    let bound = FALL * INTERVAL_MS + TIMEOUT_MS;
    assert!(
        took <= ms(bound + SLACK_MS),
        "left after {took:?}, bound {bound} ms"
    );
    assert!(
        took >= ms((FALL - 1) * INTERVAL_MS * 8 / 10),
        "left after {took:?}: fewer than {FALL} failures in a row?"
    );
    // A partly failed pool answers with the degraded TTL.
    assert_eq!(ask(&s, "web.health.test.").ttls, vec![5]);
    let st = member_status(api, "web", "127.0.0.12");
    assert_eq!(st["state"], "down");
    assert_eq!(st["last_result"], "fail");
    assert!(st["reason"].as_str().unwrap().contains("connect"), "{st}");
    assert!(
        st["change_reason"]
            .as_str()
            .unwrap()
            .contains("3 failures in a row"),
        "{st}"
    );
    assert!(s.wait_log("is now down", ms(2000)), "transition not logged");

    // Restart b: it returns after `rise` successes in a row.
    let t0 = Instant::now();
    b.restart();
    let took = wait_for(ms(5000), || ask(&s, "web.health.test.").addrs == both)
        .map(|_| t0.elapsed())
        .expect("restarted backend never returned");
    let bound = RISE * INTERVAL_MS + TIMEOUT_MS;
    assert!(
        took <= ms(bound + SLACK_MS),
        "returned after {took:?}, bound {bound} ms"
    );
    assert!(
        took >= ms((RISE - 1) * INTERVAL_MS * 8 / 10),
        "returned after {took:?}: fewer than {RISE} successes in a row?"
    );
    assert_eq!(ask(&s, "web.health.test.").ttls, vec![60, 60]);
    let st = member_status(api, "web", "127.0.0.12");
    assert_eq!(st["state"], "up");
    assert!(
        st["change_reason"]
            .as_str()
            .unwrap()
            .contains("2 successes in a row"),
        "{st}"
    );
    assert!(s.wait_log("is now up", ms(2000)));
}

#[test]
fn flapping_backend_below_fall_never_leaves() {
    // Pass, fail, fail, pass, fail, fail, ...: at most 2 failures in a row, fall = 3.
    // (A longer timeout than the other tests: a pass that timed out on a
    // busy machine would make a third failure in a row.)
    let flappy = Backend::http(
        "127.0.0.13",
        handler(|r| {
            if r.n % 3 == 0 {
                Reply::Status(200, "ok".into())
            } else {
                Reply::Status(500, "oops".into())
            }
        }),
    );
    let body = format!(
        "[check.web]\ntype = \"http\"\ninterval_ms = 250\ntimeout_ms = 200\nrise = 2\nfall = 3\n\n\
         [pool.web]\ncheck = \"web\"\nmembers = [{}]\n\n[name.\"flap.health.test\"]\npool = \"web\"\nwhen_all_down = \"empty\"\n",
        member(&flappy, None)
    );
    let (_dir, cfg) = setup("flap", &body);
    let (s, api) = serve(&cfg);
    let t0 = Instant::now();
    let mut worst = 0;
    while t0.elapsed() < ms(3000) {
        let st = member_status(api, "web", "127.0.0.13");
        assert_eq!(
            ask(&s, "flap.health.test.").addrs,
            set(&["127.0.0.13"]),
            "{st}"
        );
        assert_ne!(st["state"], "down", "{st}");
        worst = worst.max(st["consecutive_fail"].as_u64().unwrap());
        std::thread::sleep(ms(25));
    }
    let st = member_status(api, "web", "127.0.0.13");
    assert!(flappy.hits() >= 8, "only {} probes", flappy.hits());
    assert!(st["failures"].as_u64().unwrap() >= 5, "{st}");
    assert_eq!(
        worst, 2,
        "the backend failed {worst} times in a row at most"
    );
}

#[test]
fn http_status_path_host_and_body() {
    // Each backend answers /healthz for Host svc.health.test with its own
    // status and body; other paths get 404 and other hosts 421.
    fn site(code: u16, body: &'static str) -> Handler {
        handler(move |r| {
            if r.path != "/healthz" {
                Reply::Status(404, "no such page".into())
            } else if !r.host.starts_with("svc.health.test") {
                Reply::Status(421, "wrong host".into())
            } else {
                Reply::Status(code, body.into())
            }
        })
    }
    let good = Backend::http("127.0.0.21", site(200, "all ok here"));
    let err503 = Backend::http("127.0.0.22", site(503, "ok but unavailable"));
    let maint = Backend::http("127.0.0.23", site(200, "maintenance"));
    let nocontent = Backend::http("127.0.0.24", site(204, ""));
    let wrong_path = Backend::http("127.0.0.25", site(200, "ok"));
    let wrong_host = Backend::http("127.0.0.26", site(200, "ok"));
    let chunked = Backend::http(
        "127.0.0.27",
        handler(|_| Reply::Chunked(200, vec!["status: o".into(), "k".into()])),
    );
    let checks = [
        check_table(
            "web",
            "http",
            "path = \"/healthz\"\nhost = \"svc.health.test\"\nexpect_status = [\"200\"]\nexpect_body = \"ok\"",
        ),
        check_table("range", "http", "path = \"/healthz\"\nhost = \"svc.health.test\"\nexpect_status = [\"200\", \"204-299\"]"),
        check_table("badpath", "http", "path = \"/nope\"\nhost = \"svc.health.test\""),
        check_table("nohost", "http", "path = \"/healthz\""),
    ]
    .join("\n");
    let body = format!(
        "{checks}\n[pool.web]\ncheck = \"web\"\nmembers = [{}, {}, {}, {}, {}, {}, {}]\n\n[name.\"http.health.test\"]\npool = \"web\"\n",
        member(&good, None),
        member(&err503, None),
        member(&maint, None),
        member(&nocontent, Some("range")),
        member(&wrong_path, Some("badpath")),
        member(&wrong_host, Some("nohost")),
        member(&chunked, None),
    );
    let (_dir, cfg) = setup("http", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    let want = set(&["127.0.0.21", "127.0.0.24", "127.0.0.27"]);
    assert!(
        wait_for(ms(3000), || ask(&s, "http.health.test.").addrs == want).is_some(),
        "{:?} / {}",
        ask(&s, "http.health.test.").addrs,
        status(api)
    );
    let reason = |ip: &str| {
        member_status(api, "web", ip)["reason"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(reason("127.0.0.21"), "HTTP 200, body matched");
    assert_eq!(reason("127.0.0.22"), "HTTP 503, expected 200");
    assert_eq!(
        reason("127.0.0.23"),
        "HTTP 200, body does not contain \"ok\""
    );
    assert_eq!(reason("127.0.0.24"), "HTTP 204");
    assert_eq!(reason("127.0.0.25"), "HTTP 404, expected 200-399");
    assert_eq!(reason("127.0.0.26"), "HTTP 421, expected 200-399");
    assert_eq!(reason("127.0.0.27"), "HTTP 200, body matched");
    for ip in ["127.0.0.22", "127.0.0.23", "127.0.0.25", "127.0.0.26"] {
        let st = member_status(api, "web", ip);
        assert_eq!(
            (st["state"].as_str(), st["up"].as_bool()),
            (Some("down"), Some(false)),
            "{st}"
        );
    }
}

#[test]
fn https_self_signed_needs_verification_off() {
    let tls = self_signed();
    let ok = || handler(|_| Reply::Status(200, "ok".into()));
    let strict = Backend::https("127.0.0.31", ok(), tls.clone());
    let lax = Backend::https("127.0.0.32", ok(), tls);
    let body = format!(
        "{}\n{}\n[pool.tls]\nmembers = [{}, {}]\n\n[name.\"tls.health.test\"]\npool = \"tls\"\n",
        check_table("strict", "https", "expect_body = \"ok\""),
        check_table("lax", "https", "expect_body = \"ok\"\ntls_verify = false"),
        member(&strict, Some("strict")),
        member(&lax, Some("lax")),
    );
    let (_dir, cfg) = setup("https", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    assert_eq!(ask(&s, "tls.health.test.").addrs, set(&["127.0.0.32"]));
    let st = member_status(api, "tls", "127.0.0.31");
    assert_eq!(st["state"], "down");
    let reason = st["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("tls:") && reason.contains("certificate"),
        "{reason}"
    );
    let st = member_status(api, "tls", "127.0.0.32");
    assert_eq!(
        (st["state"].as_str(), st["type"].as_str()),
        (Some("up"), Some("https"))
    );
    assert_eq!(st["reason"], "HTTP 200, body matched");
    assert!(lax.hits() > 0);
    assert_eq!(
        strict.hits(),
        0,
        "no request may be sent over an unverified connection"
    );
}

#[test]
fn unknown_counts_as_up_unless_configured() {
    // The backend accepts and never answers: every probe takes the whole
    // timeout (1.5 s), so the member stays unknown for the first second.
    let hang = Backend::http("127.0.0.41", handler(|_| Reply::Hang));
    let slow = |name: &str, extra: &str| {
        format!("[check.{name}]\ntype = \"http\"\ninterval_ms = 4000\ntimeout_ms = 1500\n{extra}\n")
    };
    let body = format!(
        "{}\n{}\n[pool.optimist]\ncheck = \"slow\"\nmembers = [{}]\n\n[pool.pessimist]\ncheck = \"careful\"\nmembers = [{}]\n\n\
         [name.\"optimist.health.test\"]\npool = \"optimist\"\nwhen_all_down = \"empty\"\n\n\
         [name.\"pessimist.health.test\"]\npool = \"pessimist\"\nwhen_all_down = \"empty\"\n",
        slow("slow", ""),
        slow("careful", "unknown_is_up = false"),
        member(&hang, None),
        member(&hang, None),
    );
    let (_dir, cfg) = setup("unknown", &body);
    let (s, api) = serve(&cfg);
    assert_eq!(ask(&s, "optimist.health.test.").addrs, set(&["127.0.0.41"]));
    let r = ask(&s, "pessimist.health.test.");
    assert_eq!(
        (r.rcode, r.addrs.len(), r.authority),
        (ResponseCode::NoError, 0, 1)
    );
    for pool in ["optimist", "pessimist"] {
        let st = member_status(api, pool, "127.0.0.41");
        assert_eq!(st["state"], "unknown", "{st}");
        assert_eq!(st["last_result"], serde_json::Value::Null);
        assert_eq!(st["last_change"], serde_json::Value::Null);
    }
    assert_eq!(member_status(api, "optimist", "127.0.0.41")["up"], true);
    assert_eq!(member_status(api, "pessimist", "127.0.0.41")["up"], false);
    // The first probe times out: down, for both.
    assert!(wait_for(ms(4000), || ask(&s, "optimist.health.test.")
        .addrs
        .is_empty())
    .is_some());
    let st = member_status(api, "optimist", "127.0.0.41");
    assert_eq!(st["state"], "down");
    assert_eq!(st["reason"], "timeout after 1500 ms");
    assert!(
        st["change_reason"]
            .as_str()
            .unwrap()
            .starts_with("first check"),
        "{st}"
    );
}

#[test]
fn ipv6_member_on_loopback() {
    let mut v6 = Backend::http(
        "::1",
        handler(|r| {
            // The default Host is the bracketed address with the port.
            if r.host.starts_with("[::1]:") {
                Reply::Status(200, "ok".into())
            } else {
                Reply::Status(400, "bad host".into())
            }
        }),
    );
    let v4 = Backend::ok("127.0.0.14");
    let body = format!(
        "{}\n[pool.dual]\ncheck = \"web\"\nmembers = [{}, {}]\n\n[name.\"dual.health.test\"]\npool = \"dual\"\nwhen_all_down = \"empty\"\n",
        check_table("web", "http", "expect_body = \"ok\""),
        member(&v4, None),
        member(&v6, None)
    );
    let (_dir, cfg) = setup("ipv6", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    let aaaa = |s: &Server| {
        ask_q(
            s,
            &Q::new("dual.health.test.", hickory_proto::rr::RecordType::AAAA),
        )
    };
    assert_eq!(aaaa(&s).addrs, set(&["::1"]));
    let st = member_status(api, "dual", "::1");
    assert_eq!(
        (st["state"].as_str(), st["port"].as_u64()),
        (Some("up"), Some(v6.port() as u64))
    );
    v6.stop();
    assert!(wait_for(ms(3000), || aaaa(&s).addrs.is_empty()).is_some());
    // The IPv4 family is its own pool as far as health goes.
    assert_eq!(ask(&s, "dual.health.test.").addrs, set(&["127.0.0.14"]));
    assert!(s.wait_log("[::1]:", ms(1000)));
}

#[test]
fn example_config_is_valid() {
    let (code, out, err) = run(&[
        "check",
        "--config",
        root().join("zones/health-example.toml").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn config_errors_name_the_line() {
    let cases = [
        (
            "[pool.p]\ncheck = \"nope\"\nmembers = [\"127.0.0.1\"]\n",
            "unknown check \"nope\"",
        ),
        (
            "[check.t]\ntype = \"tcp\"\n\n[pool.p]\nmembers = [{ address = \"127.0.0.1\", check = \"t\" }]\n",
            "is tcp and has no port",
        ),
        (
            "[pool.p]\nmin_up = 1.5\nmembers = [\"127.0.0.1\"]\n",
            "min_up must be a whole count",
        ),
        (
            "[check.t]\ntype = \"http\"\ninterval_ms = 500\ntimeout_ms = 500\n",
            "less than the interval",
        ),
        ("[check.t]\ntype = \"ping\"\n", "unknown type \"ping\""),
        ("[check.t]\ntype = \"tcp\"\nport = 1\nretries = 3\n", "unknown field `retries`"),
    ];
    for (body, want) in cases {
        let (_dir, cfg) = setup("cfgerr", body);
        let (code, out, err) = run(&["check", "--config", cfg.to_str().unwrap()]);
        assert_eq!(code, 1, "{body}: {out}");
        assert!(err.contains(want), "{body}: {err}");
        // file:line: the line is in the body, after the 6 lines of the header.
        let line: usize = err
            .split(':')
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or_else(|| panic!("no line in {err}"));
        assert!(line > 6, "{err}");
    }
    // A member may name "none", and a tcp check may take the member's port.
    let (_dir, cfg) = setup(
        "cfgok",
        "[check.t]\ntype = \"tcp\"\n\n[pool.p]\ncheck = \"t\"\nmin_up = 0.5\n\
         members = [{ address = \"127.0.0.1\", port = 9 }, { address = \"127.0.0.2\", check = \"none\" }]\n",
    );
    let (code, out, err) = run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
}
