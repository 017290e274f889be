//! Runtime weights (#16) end to end: a real server, real queries over UDP.
//! `meridian ctl weight` and `POST /weight/ADDRESS?weight=N` change a
//! member's share without a reload (`weight=0`: no answers while another
//! member is usable; 3 on one of two equal members: 75 %, checked against a
//! binomial tolerance of 4.5 sigma); a `rotate` pool follows the new
//! weights exactly; the weights survive SIGHUP and `/reload`, show in
//! `/status` and `/metrics`; bad values and unknown members are refused
//! with a message, and writes need a write token as `/override` does.
//! Loopback only; the members are documentation addresses never contacted.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use crate::common::{run, Server};
use crate::health_support::*;
use crate::pool_common::{ip, Client};
use hickory_proto::rr::RecordType;

const BODY: &str = "\
[pool.trio]\nmembers = [\"192.0.2.1\", \"192.0.2.2\", \"192.0.2.3\"]\n\n\
[pool.duo]\nmembers = [\"192.0.2.11\", { address = \"192.0.2.12\", port = 8080 }]\n\n\
[pool.rot]\nmembers = [\"192.0.2.21\", \"192.0.2.22\"]\n\n\
[name.\"trio.health.test\"]\npool = \"trio\"\nmode = \"one\"\nttl = 60\n\n\
[name.\"duo.health.test\"]\npool = \"duo\"\nmode = \"one\"\nttl = 60\n\n\
[name.\"some.health.test\"]\npool = \"trio\"\nmode = \"some\"\ncount = 2\nttl = 60\n\n\
[name.\"rot.health.test\"]\npool = \"rot\"\nmode = \"rotate\"\nttl = 60\n";

/// Queries per share measurement.
const N: usize = 2000;

/// How many of `n` answers to `name` each address got (first address of each).
fn tally(s: &Server, name: &str, n: usize) -> HashMap<IpAddr, usize> {
    let mut c = Client::new(s);
    let mut t = HashMap::new();
    c.run(name, RecordType::A, n, |a| {
        assert!(!a.addrs.is_empty(), "an empty answer for {name}");
        for &x in &a.addrs {
            *t.entry(x).or_insert(0) += 1;
        }
    });
    t
}

/// Is `k` of `n` within 4.5 binomial sigmas of share `p`?
fn near(k: usize, n: usize, p: f64) -> bool {
    let mean = n as f64 * p;
    let sigma = (n as f64 * p * (1.0 - p)).sqrt();
    (k as f64 - mean).abs() <= 4.5 * sigma
}

/// `meridian ctl` with the API address and the test token file.
fn ctl(dir: &Path, api: SocketAddr, args: &[&str]) -> (i32, String, String) {
    let tokens = dir.join("api.tokens");
    let api = format!("http://{api}");
    let mut a = vec![
        "ctl",
        "--api",
        &api,
        "--token-file",
        tokens.to_str().unwrap(),
    ];
    a.extend_from_slice(args);
    run(&a)
}

fn weights_in_status(api: SocketAddr) -> Vec<serde_json::Value> {
    status(api)["weights"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn weight_zero_takes_a_member_out_and_weight_three_triples_its_share() {
    let (dir, cfg) = setup("rw-share", BODY);
    let (s, api) = serve(&cfg);
    let a1 = ip("192.0.2.1");

    // Before: all three members of `trio` answer.
    let t = tally(&s, "trio.health.test.", 600);
    assert!(t.get(&a1).copied().unwrap_or(0) > 100, "{t:?}");

    let (code, out, err) = ctl(&dir.0, api, &["weight", "192.0.2.1", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON answer");
    assert_eq!(
        (v["weight"].as_f64(), v["members"].as_u64()),
        (Some(0.0), Some(1))
    );
    let t = tally(&s, "trio.health.test.", N);
    assert_eq!(t.get(&a1), None, "a weight-0 member was answered: {t:?}");
    for other in ["192.0.2.2", "192.0.2.3"] {
        assert!(near(t[&ip(other)], N, 0.5), "{other}: {t:?}");
    }
    // `some` (2 of 3) leaves it out too while two others are usable.
    let t = tally(&s, "some.health.test.", 500);
    assert_eq!(t.get(&a1), None, "{t:?}");

    // 3 on one of two equal members: 3 / (3 + 1) of the answers.
    let (code, _, err) = ctl(&dir.0, api, &["weight", "192.0.2.11", "3"]);
    assert_eq!(code, 0, "{err}");
    let t = tally(&s, "duo.health.test.", N);
    let k = t.get(&ip("192.0.2.11")).copied().unwrap_or(0);
    assert!(
        near(k, N, 0.75),
        "192.0.2.11 got {k} of {N}, want about 75 %"
    );

    // Every member at 0: answered as if the weights were equal, never empty.
    let (code, _, err) = ctl(&dir.0, api, &["weight", "192.0.2.11", "0"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = ctl(&dir.0, api, &["weight", "192.0.2.12:8080", "0"]);
    assert_eq!(code, 0, "{err}");
    let t = tally(&s, "duo.health.test.", 400);
    for m in ["192.0.2.11", "192.0.2.12"] {
        assert!(near(t[&ip(m)], 400, 0.5), "{m}: {t:?}");
    }

    // Clearing gives the share back.
    for (who, how) in [("192.0.2.1", "clear"), ("192.0.2.11", "1")] {
        let (code, _, err) = ctl(&dir.0, api, &["weight", who, how]);
        assert_eq!(code, 0, "{err}");
    }
    let t = tally(&s, "trio.health.test.", 600);
    assert!(near(t[&a1], 600, 1.0 / 3.0), "{t:?}");
    assert_eq!(weights_in_status(api).len(), 1, "{}", status(api));
}

#[test]
fn rotate_follows_the_new_weights_exactly() {
    let (dir, cfg) = setup("rw-rotate", BODY);
    let (s, api) = serve(&cfg);
    let (a, b) = (ip("192.0.2.21"), ip("192.0.2.22"));
    let mut c = Client::new(&s);
    let firsts = |c: &mut Client, n: usize| -> Vec<IpAddr> {
        (0..n)
            .map(|_| c.ask("rot.health.test.", RecordType::A).addrs[0])
            .collect()
    };
    // Equal weights: a b a b.
    let f = firsts(&mut c, 8);
    assert!(f.windows(2).all(|w| w[0] != w[1]), "{f:?}");

    let (code, _, err) = ctl(&dir.0, api, &["weight", "192.0.2.21", "3"]);
    assert_eq!(code, 0, "{err}");
    // Smooth weighted round robin of 3:1: a a b a, from wherever the
    // shared counter is. Every window of one period leads with a three
    // times and b once, and b never twice in a row.
    let f = firsts(&mut c, 40);
    for w in f.windows(4) {
        let nb = w.iter().filter(|&&x| x == b).count();
        assert_eq!((w.len() - nb, nb), (3, 1), "{f:?}");
    }
    assert!(f.iter().all(|&x| x == a || x == b));

    // Weight 0 on b: a leads every answer, b still follows (rotate answers
    // every usable member).
    let (code, _, err) = ctl(&dir.0, api, &["weight", "192.0.2.22", "0"]);
    assert_eq!(code, 0, "{err}");
    let r = c.ask("rot.health.test.", RecordType::A);
    assert_eq!(r.addrs, vec![a, b]);
    assert!(firsts(&mut c, 20).iter().all(|&x| x == a));
}

#[test]
fn weights_survive_reloads_and_show_in_status_and_metrics() {
    let (dir, cfg) = setup("rw-reload", BODY);
    let (s, api) = serve(&cfg);
    let (code, body) = http(api, "POST", "/weight/192.0.2.1?weight=0");
    assert_eq!(code, 200, "{body}");
    // By address and port, percent-encoded, like /override.
    let (code, body) = http(api, "POST", "/weight/192.0.2.12%3A8080?weight=2.5");
    assert_eq!(code, 200, "{body}");
    assert!(s.wait_log(
        "api write: token tester POST /weight/192.0.2.1?weight=0 -> 200",
        Duration::from_secs(5)
    ));

    let check = |when: &str| {
        let m = member_status(api, "trio", "192.0.2.1");
        assert_eq!(
            (
                m["weight"].as_u64(),
                m["runtime_weight"].as_f64(),
                m["effective_weight"].as_f64()
            ),
            (Some(1), Some(0.0), Some(0.0)),
            "{when}: {m}"
        );
        let m = member_status(api, "duo", "192.0.2.12");
        assert_eq!(
            (m["runtime_weight"].as_f64(), m["effective_weight"].as_f64()),
            (Some(2.5), Some(2.5)),
            "{when}: {m}"
        );
        let m = member_status(api, "trio", "192.0.2.2");
        assert_eq!(
            (m["runtime_weight"].as_f64(), m["effective_weight"].as_f64()),
            (Some(1.0), Some(1.0)),
            "{when}: {m}"
        );
        let w = weights_in_status(api);
        assert_eq!(w.len(), 2, "{when}: {w:?}");
        assert!(w
            .iter()
            .any(|x| x["address"] == "192.0.2.12" && x["port"] == 8080 && x["weight"] == 2.5));
        let t = tally(&s, "trio.health.test.", 600);
        assert_eq!(t.get(&ip("192.0.2.1")), None, "{when}: {t:?}");
        let text = metrics(api);
        assert_eq!(
            metric(
                &text,
                "meridian_member_weight{pool=\"trio\",address=\"192.0.2.1\"}"
            ),
            Some(0.0),
            "{when}"
        );
        assert_eq!(
            metric(
                &text,
                "meridian_member_weight{pool=\"duo\",address=\"192.0.2.12\"}"
            ),
            Some(2.5),
            "{when}"
        );
    };
    check("before any reload");

    // SIGHUP with a changed TTL (a new engine is built and swapped in).
    let text = std::fs::read_to_string(&cfg).unwrap();
    dir.write("meridian.toml", &text.replace("ttl = 60", "ttl = 61"));
    let line = s.reload(Duration::from_secs(10));
    assert!(line.contains("reloaded"), "{line}");
    assert_eq!(ask(&s, "trio.health.test.").ttls, vec![61]);
    check("after SIGHUP");

    // And through the API.
    dir.write("meridian.toml", &text.replace("ttl = 60", "ttl = 62"));
    let (code, body) = http(api, "POST", "/reload");
    assert_eq!(code, 200, "{body}");
    assert_eq!(ask(&s, "trio.health.test.").ttls, vec![62]);
    check("after /reload");

    // DELETE clears.
    let (code, body) = http(api, "DELETE", "/weight/192.0.2.1");
    assert_eq!(code, 200, "{body}");
    let m = member_status(api, "trio", "192.0.2.1");
    assert_eq!(m["effective_weight"].as_f64(), Some(1.0), "{m}");
}

#[test]
fn bad_values_unknown_members_and_missing_tokens_are_refused() {
    let (dir, cfg) = setup("rw-bad", BODY);
    let (s, api) = serve(&cfg);
    for (target, code, msg) in [
        ("/weight/192.0.2.1?weight=-1", 400, "bad weight"),
        ("/weight/192.0.2.1?weight=abc", 400, "bad weight"),
        ("/weight/192.0.2.1?weight=NaN", 400, "bad weight"),
        ("/weight/192.0.2.1?weight=1000", 400, "bad weight"),
        ("/weight/192.0.2.1", 400, "weight=N"),
        (
            "/weight/192.0.2.1?weight=2&color=red",
            400,
            "unknown parameter",
        ),
        ("/weight/not-an-address?weight=2", 400, "bad address"),
        (
            "/weight/192.0.2.99?weight=2",
            404,
            "no pool has a member 192.0.2.99",
        ),
        (
            "/weight/192.0.2.1:9?weight=2",
            404,
            "no pool has a member 192.0.2.1 on port 9",
        ),
    ] {
        let (got, body) = http(api, "POST", target);
        assert_eq!(got, code, "{target}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON error");
        let e = v["error"].as_str().unwrap_or("");
        assert!(e.contains(msg), "{target}: {body}");
    }

    // Without a token, and with a read token: refused as /override is.
    let host = api.to_string();
    let (ovr, _) = http_with(
        api,
        "POST",
        "/override/192.0.2.1?state=down",
        &[("Host", &host)],
    );
    assert!(ovr == 401 || ovr == 403, "{ovr}");
    let (code, body) = http_with(
        api,
        "POST",
        "/weight/192.0.2.1?weight=0",
        &[("Host", &host)],
    );
    assert_eq!(code, ovr, "{body}");
    let read = format!("Bearer {READ_TOKEN}");
    let (code, body) = http_with(
        api,
        "POST",
        "/weight/192.0.2.1?weight=0",
        &[("Host", &host), ("Authorization", &read)],
    );
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("read scope"), "{body}");
    assert!(weights_in_status(api).is_empty());
    let t = tally(&s, "trio.health.test.", 300);
    assert!(t.get(&ip("192.0.2.1")).copied().unwrap_or(0) > 30, "{t:?}");

    // ctl checks the value before sending it; a refusal exits 1 with the reason.
    let (code, _, err) = ctl(&dir.0, api, &["weight", "192.0.2.1", "-1"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = ctl(&dir.0, api, &["weight", "192.0.2.99", "2"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("404") && err.contains("no pool has a member"),
        "{err}"
    );
}
