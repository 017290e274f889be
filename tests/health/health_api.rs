//! The health HTTP API and reloads: operator overrides (up, down, drain,
//! none; by address or address and port) and their survival across SIGHUP
//! reloads; reloads keep the state of unchanged checks; `/metrics` and
//! `/status` reflect every state; one probe per distinct (address, port,
//! check) however many pools share it.

use std::time::Instant;

use crate::health_support::*;

fn api_config(a: &Backend, b: &Backend, c: &Backend, ttl: u32, interval: u64) -> String {
    format!(
        "[check.tcp]\ntype = \"tcp\"\ninterval_ms = {interval}\ntimeout_ms = {TIMEOUT_MS}\nrise = {RISE}\nfall = {FALL}\n\n\
         [pool.web]\ncheck = \"tcp\"\nmembers = [{}, {}, {}]\n\n[name.\"ov.health.test\"]\npool = \"web\"\nttl = {ttl}\ndegraded_ttl = 4\n",
        member(a, None),
        member(b, None),
        member(c, None),
    )
}

#[test]
fn overrides_survive_reload() {
    let a = Backend::ok("127.0.0.81");
    let b = Backend::ok("127.0.0.82");
    let c = Backend::stopped("127.0.0.83");
    let (dir, cfg) = setup("override", &api_config(&a, &b, &c, 60, INTERVAL_MS));
    let (s, api) = serve(&cfg);
    settle(api);
    let name = "ov.health.test.";
    assert_eq!(ask(&s, name).addrs, set(&["127.0.0.81", "127.0.0.82"]));

    // Force a healthy member down, an unhealthy one up, drain another.
    let (code, body) = http(api, "POST", "/override/127.0.0.81?state=down");
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["override"].as_str(), v["entries"].as_u64()),
        (Some("down"), Some(1))
    );
    assert_eq!(ask(&s, name).addrs, set(&["127.0.0.82"]));
    let (code, _) = http(api, "POST", "/override/127.0.0.83?state=up");
    assert_eq!(code, 200);
    assert_eq!(ask(&s, name).addrs, set(&["127.0.0.82", "127.0.0.83"]));
    // By address and port (percent-encoded form of the same thing works too).
    let (code, body) = http(
        api,
        "POST",
        &format!("/override/127.0.0.82%3A{}?state=drain", b.port()),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(ask(&s, name).addrs, set(&["127.0.0.83"]));
    assert_eq!(
        ask(&s, name).ttls,
        vec![4],
        "a partly failed pool is degraded"
    );

    let st = member_status(api, "web", "127.0.0.81");
    assert_eq!(
        (
            st["override"].as_str(),
            st["state"].as_str(),
            st["up"].as_bool()
        ),
        (Some("down"), Some("up"), Some(false))
    );
    let st = member_status(api, "web", "127.0.0.83");
    assert_eq!(
        (
            st["override"].as_str(),
            st["state"].as_str(),
            st["up"].as_bool()
        ),
        (Some("up"), Some("down"), Some(true))
    );
    let m = metrics(api);
    assert_eq!(
        metric(
            &m,
            "meridian_member_override{pool=\"web\",address=\"127.0.0.82\",state=\"drain\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &m,
            "meridian_member_up{pool=\"web\",address=\"127.0.0.81\"}"
        ),
        Some(0.0)
    );
    assert_eq!(
        metric(
            &m,
            "meridian_member_up{pool=\"web\",address=\"127.0.0.83\"}"
        ),
        Some(1.0)
    );

    // Reload with a changed TTL and a changed check interval: the overrides stay.
    dir.write(
        "meridian.toml",
        &config_text(&api_config(&a, &b, &c, 61, 250)),
    );
    s.signal("HUP");
    assert!(s.wait_log("reloaded", ms(5000)), "no reload");
    let r = ask(&s, name);
    assert_eq!((r.addrs, r.ttls), (set(&["127.0.0.83"]), vec![4]));
    let st = status(api);
    let ovr = st["overrides"].as_array().unwrap();
    assert_eq!(ovr.len(), 3, "{st}");
    assert!(ovr
        .iter()
        .any(|o| o["address"] == "127.0.0.82" && o["port"] == b.port() && o["state"] == "drain"));
    settle(api);
    assert_eq!(ask(&s, name).addrs, set(&["127.0.0.83"]));

    // Clearing: DELETE, or state=none.
    let (code, _) = http(api, "DELETE", "/override/127.0.0.81");
    assert_eq!(code, 200);
    let (code, _) = http(
        api,
        "POST",
        &format!("/override/127.0.0.82?state=none&port={}", b.port()),
    );
    assert_eq!(code, 200);
    assert_eq!(
        ask(&s, name).addrs,
        set(&["127.0.0.81", "127.0.0.82", "127.0.0.83"])
    );
    let (code, _) = http(api, "POST", "/override/127.0.0.83?state=none");
    assert_eq!(code, 200);
    assert_eq!(ask(&s, name).addrs, set(&["127.0.0.81", "127.0.0.82"]));
    assert_eq!(status(api)["overrides"].as_array().unwrap().len(), 0);
    assert!(s.wait_log("operator override for 127.0.0.81: down", ms(1000)));

    // Errors.
    assert_eq!(http(api, "POST", "/override/192.0.2.99?state=down").0, 404);
    assert_eq!(
        http(api, "POST", "/override/127.0.0.81?state=sideways").0,
        400
    );
    assert_eq!(http(api, "POST", "/override/127.0.0.81").0, 400);
    assert_eq!(http(api, "POST", "/override/not-an-ip?state=up").0, 400);
    assert_eq!(
        http(api, "POST", "/override/127.0.0.81?state=down&port=1").0,
        404
    );
    assert_eq!(http(api, "GET", "/override/127.0.0.81").0, 405);
    assert_eq!(http(api, "POST", "/status").0, 405);
    assert_eq!(http(api, "GET", "/nope").0, 404);
}

#[test]
fn reload_keeps_state_of_unchanged_checks() {
    let a = Backend::ok("127.0.0.91");
    let mut b = Backend::stopped("127.0.0.92");
    let c = Backend::ok("127.0.0.93");
    let (dir, cfg) = setup("reload", &api_config(&a, &b, &c, 60, INTERVAL_MS));
    let (s, api) = serve(&cfg);
    settle(api);
    let name = "ov.health.test.";
    let up2 = set(&["127.0.0.91", "127.0.0.93"]);
    assert_eq!(ask(&s, name).addrs, up2);
    let before = member_status(api, "web", "127.0.0.92");
    assert_eq!(before["state"], "down");

    // Same checks, another TTL: the down member is still down right after
    // the reload (not unknown, which would count as up).
    dir.write(
        "meridian.toml",
        &config_text(&api_config(&a, &b, &c, 90, INTERVAL_MS)),
    );
    s.signal("HUP");
    assert!(s.wait_log("reloaded", ms(5000)));
    let r = ask(&s, name);
    assert_eq!((r.addrs, r.ttls), (up2.clone(), vec![4, 4]));
    let after = member_status(api, "web", "127.0.0.92");
    assert_eq!(after["state"], "down");
    assert_eq!(after["last_change"], before["last_change"]);
    assert!(
        after["checks"].as_u64() >= before["checks"].as_u64(),
        "counters carried over"
    );

    // The checkers run against the new table: the member comes back.
    b.restart();
    let t0 = Instant::now();
    assert!(wait_for(ms(3000), || ask(&s, name).addrs.len() == 3).is_some());
    assert!(
        t0.elapsed() <= ms(RISE * INTERVAL_MS + TIMEOUT_MS + SLACK_MS),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(ask(&s, name).ttls, vec![90; 3]);
    let after_return = member_status(api, "web", "127.0.0.92");

    // A reload that only retunes the check (interval 200 -> 300 ms) keeps
    // the state: the probe is the same.
    let reloads = || {
        s.stderr
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with("meridian: reloaded"))
            .count()
    };
    dir.write(
        "meridian.toml",
        &config_text(&api_config(&a, &b, &c, 90, 300)),
    );
    s.signal("HUP");
    assert!(wait_for(ms(5000), || reloads() >= 2).is_some());
    let st = member_status(api, "web", "127.0.0.92");
    assert_eq!(st["state"], "up");
    assert_eq!(st["last_change"], after_return["last_change"], "{st}");
    assert_eq!(ask(&s, name).addrs.len(), 3);

    // A reload that changes the probe (tcp -> http) starts the entries over:
    // unknown until their first result, then checked again.
    let http = api_config(&a, &b, &c, 90, 300).replace("type = \"tcp\"", "type = \"http\"");
    dir.write("meridian.toml", &config_text(&http));
    s.signal("HUP");
    assert!(wait_for(ms(5000), || reloads() >= 3).is_some());
    settle(api);
    let st = member_status(api, "web", "127.0.0.92");
    assert_eq!(
        (st["state"].as_str(), st["type"].as_str()),
        (Some("up"), Some("http"))
    );
    assert!(
        st["change_reason"]
            .as_str()
            .unwrap()
            .starts_with("first check: HTTP 200"),
        "{st}"
    );
    assert_eq!(ask(&s, name).addrs.len(), 3);
}

#[test]
fn metrics_and_status_reflect_every_state() {
    let up = Backend::ok("127.0.0.101");
    let down = Backend::stopped("127.0.0.102");
    let hang = Backend::http("127.0.0.103", handler(|_| Reply::Hang));
    let forced = Backend::ok("127.0.0.104");
    let body = format!(
        "{}\n[check.slow]\ntype = \"http\"\ninterval_ms = 10000\ntimeout_ms = 3000\n\n\
         [pool.a]\ncheck = \"tcp\"\nmembers = [{}, {}, {}, {{ address = \"127.0.0.105\", check = \"none\" }}]\n\n\
         [pool.b]\ncheck = \"tcp\"\nmembers = [{}, {}, {}]\n\n\
         [name.\"a.health.test\"]\npool = \"a\"\n\n[name.\"b.health.test\"]\npool = \"b\"\n",
        check_table("tcp", "tcp", ""),
        member(&up, None),
        member(&down, None),
        member(&forced, None),
        member(&up, None),
        member(&hang, Some("slow")),
        member(&forced, None),
    );
    let (_dir, cfg) = setup("observe", &body);
    let (s, api) = serve(&cfg);
    // 127.0.0.101 and .104 are shared by pools a and b: one probe each.
    assert!(wait_for(ms(3000), || {
        let st = status(api);
        let m = st["members"].as_array().unwrap();
        m.iter()
            .filter(|m| m["address"] == "127.0.0.102")
            .all(|m| m["state"] == "down")
            && m.iter()
                .filter(|m| m["address"] == "127.0.0.101")
                .all(|m| m["state"] == "up")
            && m.iter()
                .filter(|m| m["address"] == "127.0.0.104")
                .all(|m| m["state"] == "up")
    })
    .is_some());
    let (code, _) = http(api, "POST", "/override/127.0.0.104?state=drain");
    assert_eq!(code, 200);
    let _ = ask(&s, "a.health.test.");
    std::thread::sleep(ms(2 * INTERVAL_MS));

    let st = status(api);
    let get = |pool: &str, ip: &str| {
        st["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["pool"] == pool && m["address"] == ip)
            .cloned()
            .unwrap()
    };
    let m = get("a", "127.0.0.101");
    assert_eq!(
        (
            m["state"].as_str(),
            m["up"].as_bool(),
            m["last_result"].as_str()
        ),
        (Some("up"), Some(true), Some("ok"))
    );
    assert_eq!(
        (m["check"].as_str(), m["type"].as_str(), m["port"].as_u64()),
        (Some("tcp"), Some("tcp"), Some(up.port() as u64))
    );
    assert_eq!(m["reason"], "connected");
    assert_eq!(m["probed_here"], true, "a single server probes every check");
    assert!(m["latency_ms"].as_f64().unwrap() >= 0.0);
    assert!(m["last_check"].as_str().unwrap().ends_with('Z'));
    assert!(m["last_change"].as_str().unwrap().len() == 24, "{m}");
    assert_eq!(
        get("b", "127.0.0.101")["checks"],
        m["checks"],
        "pools share one probe"
    );
    let m = get("a", "127.0.0.102");
    assert_eq!(
        (
            m["state"].as_str(),
            m["up"].as_bool(),
            m["last_result"].as_str()
        ),
        (Some("down"), Some(false), Some("fail"))
    );
    assert!(m["consecutive_fail"].as_u64().unwrap() >= 1);
    let m = get("b", "127.0.0.103");
    assert_eq!(
        (m["state"].as_str(), m["up"].as_bool()),
        (Some("unknown"), Some(true))
    );
    assert_eq!(m["last_result"], serde_json::Value::Null);
    let m = get("a", "127.0.0.104");
    assert_eq!(
        (
            m["state"].as_str(),
            m["override"].as_str(),
            m["up"].as_bool()
        ),
        (Some("up"), Some("drain"), Some(false))
    );
    let m = get("a", "127.0.0.105");
    assert_eq!(
        (m["state"].as_str(), m["check"].as_str(), m["type"].as_str()),
        (Some("up"), Some("none"), Some("none"))
    );
    assert_eq!(m["port"], serde_json::Value::Null);
    assert_eq!(
        m["probed_here"], false,
        "an unchecked member is probed nowhere"
    );
    let pools = st["pools"].as_array().unwrap();
    let a = pools.iter().find(|p| p["pool"] == "a").unwrap();
    assert_eq!(
        (
            a["members"].as_u64(),
            a["up_members"].as_u64(),
            a["up"].as_bool()
        ),
        (Some(4), Some(2), Some(true))
    );

    let text = metrics(api);
    let val =
        |series: &str| metric(&text, series).unwrap_or_else(|| panic!("no {series} in\n{text}"));
    assert_eq!(
        val("meridian_member_up{pool=\"a\",address=\"127.0.0.101\"}"),
        1.0
    );
    assert_eq!(
        val("meridian_member_up{pool=\"a\",address=\"127.0.0.102\"}"),
        0.0
    );
    assert_eq!(
        val("meridian_member_up{pool=\"b\",address=\"127.0.0.103\"}"),
        1.0
    );
    assert_eq!(
        val("meridian_member_up{pool=\"a\",address=\"127.0.0.104\"}"),
        0.0
    );
    assert_eq!(
        val("meridian_member_up{pool=\"a\",address=\"127.0.0.105\"}"),
        1.0
    );
    assert_eq!(
        val("meridian_member_health_state{pool=\"b\",address=\"127.0.0.103\",state=\"unknown\"}"),
        1.0
    );
    assert_eq!(
        val("meridian_member_health_state{pool=\"a\",address=\"127.0.0.102\",state=\"down\"}"),
        1.0
    );
    assert_eq!(
        val("meridian_member_health_state{pool=\"a\",address=\"127.0.0.102\",state=\"up\"}"),
        0.0
    );
    assert_eq!(
        val("meridian_member_override{pool=\"b\",address=\"127.0.0.104\",state=\"drain\"}"),
        1.0
    );
    assert_eq!(val("meridian_pool_up{pool=\"a\",family=\"ipv4\"}"), 1.0);
    let l = |b: &Backend, check: &str| {
        format!(
            "address=\"{}\",port=\"{}\",check=\"{check}\"",
            b.ip(),
            b.port()
        )
    };
    assert_eq!(
        val(&format!(
            "meridian_health_transitions_total{{{},to=\"down\"}}",
            l(&down, "tcp")
        )),
        1.0
    );
    assert_eq!(
        val(&format!(
            "meridian_health_transitions_total{{{},to=\"up\"}}",
            l(&down, "tcp")
        )),
        0.0
    );
    assert_eq!(
        val(&format!(
            "meridian_health_transitions_total{{{},to=\"up\"}}",
            l(&up, "tcp")
        )),
        1.0
    );
    let checks = val(&format!(
        "meridian_health_checks_total{{{}}}",
        l(&down, "tcp")
    ));
    let failures = val(&format!(
        "meridian_health_check_failures_total{{{}}}",
        l(&down, "tcp")
    ));
    assert!(checks >= 3.0 && failures == checks, "{checks} {failures}");
    assert_eq!(
        val(&format!(
            "meridian_health_check_failures_total{{{}}}",
            l(&up, "tcp")
        )),
        0.0
    );
    let count = val(&format!(
        "meridian_health_check_duration_seconds_count{{{}}}",
        l(&up, "tcp")
    ));
    let inf = val(&format!(
        "meridian_health_check_duration_seconds_bucket{{{},le=\"+Inf\"}}",
        l(&up, "tcp")
    ));
    let fast = val(&format!(
        "meridian_health_check_duration_seconds_bucket{{{},le=\"0.1\"}}",
        l(&up, "tcp")
    ));
    assert!(
        count >= 3.0 && inf == count && fast >= 1.0 && fast <= count,
        "{count} {inf} {fast}"
    );
    // One series per distinct (address, port, check): 101, 102, 103 (slow), 104.
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("meridian_health_checks_total{"))
            .count(),
        4
    );
    assert_eq!(val("meridian_pool_answers_total{pool=\"a\"}"), 1.0);
}
