//! meridian-probe against tiny in-test DNS servers on loopback, for the cases meridian itself
//! cannot show: ECS ignored, truncation, refusal, silence, stray packets, lame servers, and
//! authoritative discovery with a CNAME that leaves the zone.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn server_arg(s: &FakeServer) -> String {
    s.addr.to_string()
}

/// A static A answer, never echoing ECS.
fn no_ecs_server() -> FakeServer {
    FakeServer::start(
        LO,
        Arc::new(|q, _| {
            let mut r = response(q);
            r.add_answer(a("www.example.test.", "192.0.2.1", 300));
            Action::Reply(r)
        }),
    )
}

#[test]
fn server_that_ignores_ecs_gives_no_ecs() {
    let srv = no_ecs_server();
    let out = probe(&[
        "ecs",
        "www.example.test",
        "--server",
        &server_arg(&srv),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["verdict"], "no-ecs");
    assert_eq!(v["name"], "www.example.test.");
    assert_eq!(v["qtype"], "A");
    assert_eq!(v["recursion_desired"], true);
    assert_eq!(v["servers"][0], server_arg(&srv));
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 6);
    let subnets: Vec<&str> = results
        .iter()
        .map(|r| r["subnet"].as_str().unwrap())
        .collect();
    assert_eq!(
        subnets,
        [
            "8.8.8.0/24",
            "85.214.0.0/24",
            "133.242.0.0/24",
            "200.160.0.0/24",
            "41.0.0.0/24",
            "192.0.2.0/24"
        ]
    );
    let countries: Vec<&str> = results
        .iter()
        .map(|r| r["country"].as_str().unwrap())
        .collect();
    assert_eq!(countries, ["US", "DE", "JP", "BR", "ZA", "none"]);
    for r in results {
        assert_eq!(r["rcode"], "NOERROR");
        assert_eq!(r["answers"], serde_json::json!(["192.0.2.1"]));
        assert_eq!(r["ttl"], 300);
        assert!(r["scope"].is_null());
        assert_eq!(r["ecs_echoed"], false);
    }
    // Every query carried ECS with RD=1, from the subnets above.
    let queries = srv.queries.lock().unwrap();
    assert_eq!(queries.len(), 6);
    for (q, want) in queries.iter().zip(subnets) {
        let cs = query_ecs(&q.1).expect("query carries ECS");
        assert_eq!(format!("{}/{}", cs.addr(), cs.source_prefix()), want);
        assert_eq!(cs.scope_prefix(), 0);
        assert!(q.1.metadata.recursion_desired);
    }
    drop(queries);

    let out = probe(&["ecs", "www.example.test", "--server", &server_arg(&srv)]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.contains("no ECS in response"), "{text}");
    assert!(
        text.contains("no ECS echoed (server ignores or strips it)"),
        "{text}"
    );
    assert!(text.contains("8.8.8.0/24") && text.contains("US"), "{text}");
}

#[test]
fn aaaa_uses_ipv6_default_subnets() {
    let srv = FakeServer::start(
        LO,
        Arc::new(|q, _| {
            let mut r = response(q);
            r.add_answer(aaaa("www.example.test.", "2001:db8::1", 60));
            echo_ecs(q, &mut r, 0);
            Action::Reply(r)
        }),
    );
    let out = probe(&[
        "ecs",
        "www.example.test",
        "--type",
        "AAAA",
        "--server",
        &server_arg(&srv),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["qtype"], "AAAA");
    assert_eq!(v["verdict"], "uniform");
    let subnets: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["subnet"].as_str().unwrap())
        .collect();
    assert_eq!(
        subnets,
        [
            "2001:4860::/48",
            "2a00:1450:4001::/48",
            "2001:200::/48",
            "2804:14c::/48",
            "2c0f:f000::/48",
            "2001:db8::/48"
        ]
    );
    assert_eq!(v["results"][0]["answers"][0], "2001:db8::1");
    assert_eq!(v["results"][0]["scope"], 0);
}

/// Answers by the ECS address's first octet, scope /24, and a deliberately bad echo for one.
#[test]
fn tailored_custom_subnets_and_bad_echo_warning() {
    let srv = FakeServer::start(
        LO,
        Arc::new(|q, _| {
            let mut r = response(q);
            let cs = query_ecs(q).unwrap();
            let IpAddr::V4(v4) = cs.addr() else { panic!() };
            let first = v4.octets()[0];
            r.add_answer(a("geo.example.test.", &format!("198.51.100.{first}"), 30));
            echo_ecs(q, &mut r, 24);
            if first == 30 {
                // Echo a different source prefix: a resolver would drop this.
                let mut cs = cs;
                cs.set_source_prefix(16);
                cs.set_scope_prefix(24);
                let mut e = r.edns.clone().unwrap();
                e.options_mut()
                    .remove(hickory_proto::rr::rdata::opt::EdnsCode::Subnet);
                e.options_mut()
                    .insert(hickory_proto::rr::rdata::opt::EdnsOption::Subnet(cs));
                r.set_edns(e);
            }
            Action::Reply(r)
        }),
    );
    let out = probe(&[
        "ecs",
        "geo.example.test",
        "--server",
        &server_arg(&srv),
        "--subnet",
        "10.9.9.9/24",
        "--subnet",
        "20.1.2.0/24",
        "--subnet",
        "30.0.0.0/24",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["verdict"], "tailored", "{}", v["verdict_text"]);
    assert_eq!(v["distinct_answer_sets"], 3);
    let r = v["results"].as_array().unwrap();
    assert_eq!(r[0]["subnet"], "10.9.9.0/24");
    assert_eq!(r[0]["country"], "custom");
    assert_eq!(r[0]["answers"][0], "198.51.100.10");
    assert_eq!(r[0]["scope"], 24);
    assert_eq!(r[0]["ecs_echo_valid"], true);
    assert_eq!(r[2]["ecs_echo_valid"], false);
    let text = v["verdict_text"].as_str().unwrap();
    assert!(
        text.contains("tailored by ECS: 3 distinct answer sets"),
        "{text}"
    );
    assert!(text.contains("did not match"), "{text}");
}

#[test]
fn truncated_udp_falls_back_to_tcp() {
    let srv = FakeServer::start(
        LO,
        Arc::new(|q, proto| {
            let mut r = response(q);
            echo_ecs(q, &mut r, 0);
            if proto == Proto::Udp {
                r.metadata.truncation = true;
            } else {
                for i in 1..=4 {
                    r.add_answer(a("big.example.test.", &format!("192.0.2.{i}"), 60));
                }
            }
            Action::Reply(r)
        }),
    );
    let out = probe(&[
        "ecs",
        "big.example.test",
        "--server",
        &server_arg(&srv),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["verdict"], "uniform");
    for r in v["results"].as_array().unwrap() {
        assert_eq!(r["tcp"], true);
        assert_eq!(r["answers"].as_array().unwrap().len(), 4);
    }
    assert_eq!(srv.query_count(Proto::Tcp), 6);
    // The TCP query still carries ECS.
    let queries = srv.queries.lock().unwrap();
    let tcp_q = queries.iter().find(|(p, _)| *p == Proto::Tcp).unwrap();
    assert!(query_ecs(&tcp_q.1).is_some());
}

#[test]
fn refusing_server_gives_clear_message_and_exit_1() {
    let srv = FakeServer::start(
        LO,
        Arc::new(|q, _| Action::Reply(with_rcode(response(q), ResponseCode::Refused))),
    );
    let out = probe(&[
        "ecs",
        "www.example.test",
        "--server",
        &server_arg(&srv),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["verdict"], "failed");
    let r = &v["results"][0];
    assert_eq!(r["rcode"], "REFUSED");
    assert_eq!(r["status"], "refused");
    assert!(r["error"].as_str().unwrap().contains("REFUSED by"), "{r}");
    assert!(
        stderr(&out).contains("no server answered"),
        "{}",
        stderr(&out)
    );

    let out = probe(&["ecs", "www.example.test", "--server", &server_arg(&srv)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("REFUSED by 127.0.0.1"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn servfail_is_explained() {
    let srv = FakeServer::start(
        LO,
        Arc::new(|q, _| Action::Reply(with_rcode(response(q), ResponseCode::ServFail))),
    );
    let out = probe(&[
        "rotation",
        "www.example.test",
        "--count",
        "2",
        "--interval",
        "0",
        "--server",
        &server_arg(&srv),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("SERVFAIL from"), "{text}");
    assert!(text.contains("[failed]"), "{text}");
}

#[test]
fn silent_server_times_out_with_exit_1() {
    // Bound but never read: queries vanish.
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = sock.local_addr().unwrap().to_string();
    let start = Instant::now();
    let out = probe(&[
        "ecs",
        "www.example.test",
        "--server",
        &addr,
        "--timeout",
        "100",
        "--tries",
        "2",
        "--subnet",
        "8.8.8.0/24",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(start.elapsed() < Duration::from_secs(10));
    let v = json(&out);
    assert_eq!(v["verdict"], "failed");
    let r = &v["results"][0];
    assert_eq!(r["status"], "timeout");
    assert!(r["rcode"].is_null());
    let err = r["error"].as_str().unwrap();
    assert!(
        err.contains("no reply from") && err.contains("2 tries of 100 ms"),
        "{err}"
    );
    drop(sock);

    // Text form and rotation too.
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = sock.local_addr().unwrap().to_string();
    let out = probe(&[
        "rotation",
        "www.example.test",
        "--server",
        &addr,
        "--timeout",
        "50",
        "--tries",
        "1",
        "--count",
        "2",
        "--interval",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("timeout: no reply"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("no server answered"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn mismatched_packets_are_ignored() {
    let srv = FakeServer::start(
        LO,
        Arc::new(|q, _| {
            // First a reply with the wrong ID, then one for another name, then garbage, then
            // the real one.
            let mut wrong_id = response(q);
            wrong_id.metadata.id = q.metadata.id.wrapping_add(1);
            wrong_id.add_answer(a("www.example.test.", "203.0.113.66", 60));
            let mut wrong_q = response(q);
            wrong_q.queries[0].set_name(name("evil.example.test."));
            wrong_q.add_answer(a("evil.example.test.", "203.0.113.67", 60));
            let mut wrong_type = response(q);
            wrong_type.queries[0].set_query_type(RecordType::AAAA);
            let mut good = response(q);
            // Question echoed in different case: still ours.
            good.queries[0].set_name(name("WWW.Example.TEST."));
            good.add_answer(a("www.example.test.", "192.0.2.1", 60));
            echo_ecs(q, &mut good, 0);
            Action::Packets(vec![
                wrong_id.to_vec().unwrap(),
                wrong_q.to_vec().unwrap(),
                wrong_type.to_vec().unwrap(),
                b"\x12\x34garbage".to_vec(),
                good.to_vec().unwrap(),
            ])
        }),
    );
    let out = probe(&[
        "ecs",
        "www.example.test",
        "--server",
        &server_arg(&srv),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["verdict"], "uniform");
    for r in v["results"].as_array().unwrap() {
        assert_eq!(r["answers"], serde_json::json!(["192.0.2.1"]));
    }
}

#[test]
fn retries_after_a_lost_packet_with_new_id() {
    let seen = Arc::new(AtomicUsize::new(0));
    let s2 = seen.clone();
    let srv = FakeServer::start(
        LO,
        Arc::new(move |q, _| {
            if s2.fetch_add(1, Ordering::SeqCst) == 0 {
                return Action::Drop;
            }
            let mut r = response(q);
            r.add_answer(a("www.example.test.", "192.0.2.1", 60));
            Action::Reply(r)
        }),
    );
    let out = probe(&[
        "rotation",
        "www.example.test",
        "--server",
        &server_arg(&srv),
        "--count",
        "1",
        "--timeout",
        "200",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["verdict"], "static");
    let queries = srv.queries.lock().unwrap();
    assert_eq!(queries.len(), 2);
    assert_ne!(queries[0].1.metadata.id, queries[1].1.metadata.id);
    assert!(queries[0].1.edns.is_some());
    assert!(query_ecs(&queries[0].1).is_none(), "rotation sends no ECS");
}

#[test]
fn rotation_verdicts_on_fake_servers() {
    // Whole set, rotated by one each time.
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let shuffle = FakeServer::start(
        LO,
        Arc::new(move |q, _| {
            let k = n2.fetch_add(1, Ordering::SeqCst);
            let mut r = response(q);
            for i in 0..4 {
                let ip = format!("192.0.2.{}", 1 + (i + k) % 4);
                r.add_answer(a("shuffle.example.test.", &ip, 60));
            }
            Action::Reply(r)
        }),
    );
    let out = probe(&[
        "rotation",
        "shuffle.example.test",
        "--server",
        &server_arg(&shuffle),
        "--count",
        "8",
        "--interval",
        "0",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["verdict"], "client-chooses", "{}", v["verdict_text"]);
    assert_eq!(v["count"], 8);
    assert_eq!(v["first_changed"], 7);
    assert_eq!(v["set_sizes"], serde_json::json!({"4": 8}));
    assert_eq!(
        v["distinct"],
        serde_json::json!(["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"])
    );
    assert_eq!(v["responses"].as_array().unwrap().len(), 8);

    // One address, alternating.
    let m = Arc::new(AtomicUsize::new(0));
    let m2 = m.clone();
    let one = FakeServer::start(
        LO,
        Arc::new(move |q, _| {
            let k = m2.fetch_add(1, Ordering::SeqCst);
            let mut r = response(q);
            r.add_answer(a(
                "one.example.test.",
                &format!("192.0.2.{}", 1 + k % 2),
                60,
            ));
            Action::Reply(r)
        }),
    );
    let out = probe(&[
        "rotation",
        "one.example.test",
        "--server",
        &server_arg(&one),
        "--count",
        "6",
        "--interval",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.contains("[server-chooses]"), "{text}");
    assert!(
        text.contains("distinct addresses (2): 192.0.2.1, 192.0.2.2"),
        "{text}"
    );
    assert!(text.contains("first address changed: 5 time(s)"), "{text}");

    // Same every time.
    let stat = no_ecs_server();
    let out = probe(&[
        "rotation",
        "www.example.test",
        "--server",
        &server_arg(&stat),
        "--count",
        "3",
        "--interval",
        "0",
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(v["verdict"], "static");
    assert_eq!(v["first_changed"], 0);
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["ecs"],
        vec!["ecs", "www.example.test", "--type", "MX"],
        vec!["ecs", "www.example.test", "--subnet", "not-a-net"],
        vec!["ecs", "www.example.test", "--server", "[::1"],
        vec!["ecs", "www.example.test", "--server", "127.0.0.1:0"],
        vec!["rotation", "www.example.test", "--count", "0"],
        vec!["frobnicate"],
    ] {
        let out = probe(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    let out = probe(&["ecs", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = stdout(&out);
    for s in [
        "8.8.8.0/24",
        "85.214.0.0/24",
        "133.242.0.0/24",
        "200.160.0.0/24",
        "41.0.0.0/24",
        "192.0.2.0/24",
        "2001:4860::/48",
        "2804:14c::/48",
        "2c0f:f000::/48",
        "2001:db8::/48",
        "broken-scope",
    ] {
        assert!(help.contains(s), "help lacks {s}:\n{help}");
    }
}

/// Authoritative discovery through a (fake) recursive resolver, a lame first name server, and a
/// CNAME out of the zone to a tailored CDN zone.
#[test]
fn discovery_follows_cname_to_other_zone_and_skips_lame_server() {
    // Good authoritative server on 127.0.0.3, lame one on 127.0.0.2, same port.
    let good_handler: Handler = Arc::new(|q, _| {
        let qname = q.queries[0].name().to_ascii().to_lowercase();
        let mut r = response(q);
        assert!(
            !q.metadata.recursion_desired,
            "authoritative queries go with RD=0"
        );
        match qname.as_str() {
            "www.example.test." => {
                r.add_answer(cname("www.example.test.", "edge.cdn.test.", 300));
                echo_ecs(q, &mut r, 0);
            }
            "edge.cdn.test." => {
                let cs = query_ecs(q).expect("ECS kept across the chain");
                let IpAddr::V4(v4) = cs.addr() else { panic!() };
                let ip = format!("198.51.100.{}", v4.octets()[0] % 250);
                r.add_answer(a("edge.cdn.test.", &ip, 20));
                echo_ecs(q, &mut r, 24);
            }
            _ => r = with_rcode(r, ResponseCode::Refused),
        }
        Action::Reply(r)
    });
    let lame_handler: Handler = Arc::new(|q, _| {
        let mut r = response(q);
        r.metadata.authoritative = false;
        Action::Reply(r)
    });
    let (good, lame) = (0..20)
        .find_map(|_| {
            let good = FakeServer::start("127.0.0.3".parse().unwrap(), good_handler.clone());
            let lame_addr = SocketAddr::new("127.0.0.2".parse().unwrap(), good.addr.port());
            FakeServer::start_on(lame_addr, lame_handler.clone())
                .ok()
                .map(|lame| (good, lame))
        })
        .expect("ports on 127.0.0.2 and 127.0.0.3");
    let port = good.addr.port().to_string();

    let resolver = FakeServer::start(
        LO,
        Arc::new(|q, _| {
            let qq = &q.queries[0];
            let qname = qq.name().to_ascii().to_lowercase();
            let mut r = response(q);
            r.metadata.authoritative = false;
            r.metadata.recursion_available = true;
            match (qq.query_type(), qname.as_str()) {
                (RecordType::NS, "example.test.") => {
                    r.add_answer(ns("example.test.", "ns1.example.test."));
                    r.add_answer(ns("example.test.", "ns2.example.test."));
                }
                (RecordType::NS, "cdn.test.") => {
                    r.add_answer(ns("cdn.test.", "ns.cdn.test."));
                }
                (RecordType::A, "ns1.example.test.") => {
                    r.add_answer(a("ns1.example.test.", "127.0.0.2", 300));
                }
                (RecordType::A, "ns2.example.test.") | (RecordType::A, "ns.cdn.test.") => {
                    r.add_answer(a(&qname, "127.0.0.3", 300));
                }
                (RecordType::NS, "test.") => r = with_rcode(r, ResponseCode::NXDomain),
                _ => {} // NODATA
            }
            Action::Reply(r)
        }),
    );
    let resolver_arg = resolver.addr.to_string();

    let out = probe(&[
        "ecs",
        "www.example.test",
        "--resolver",
        &resolver_arg,
        "--ns-port",
        &port,
        "--timeout",
        "500",
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let v = json(&out);
    assert_eq!(v["mode"], "authoritative");
    assert_eq!(v["recursion_desired"], false);
    assert_eq!(v["verdict"], "tailored", "{}", v["verdict_text"]);
    let r = v["results"].as_array().unwrap();
    assert_eq!(r[0]["answers"], serde_json::json!(["198.51.100.8"]));
    assert_eq!(r[1]["answers"], serde_json::json!(["198.51.100.85"]));
    assert_eq!(r[0]["scope"], 24);
    assert_eq!(r[0]["ttl"], 20);
    let chain = r[0]["chain"].as_array().unwrap();
    assert_eq!(chain.len(), 2, "{chain:?}");
    assert_eq!(
        chain[0]["cnames"][0],
        "www.example.test. CNAME edge.cdn.test."
    );
    assert_eq!(chain[0]["zone"], "example.test.");
    assert_eq!(chain[0]["scope"], 0);
    assert_eq!(chain[1]["zone"], "cdn.test.");
    assert_eq!(chain[1]["scope"], 24);
    let notes = r[0]["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().unwrap().contains("lame for zone example.test.")),
        "{notes:?}"
    );
    // Once the good server is known, the lame one is not asked again for this zone.
    assert_eq!(lame.query_count(Proto::Udp), 1);
    // The resolver only did discovery; the answers came from the authoritative server.
    assert!(resolver
        .queries
        .lock()
        .unwrap()
        .iter()
        .all(|(_, q)| query_ecs(q).is_none()));

    let out = probe(&[
        "ecs",
        "www.example.test",
        "--resolver",
        &resolver_arg,
        "--ns-port",
        &port,
        "--timeout",
        "500",
    ]);
    let text = stdout(&out);
    assert!(
        text.contains("chain: www.example.test. CNAME edge.cdn.test."),
        "{text}"
    );
    assert!(text.contains("tailored by ECS"), "{text}");

    // Names that do not exist anywhere: a clear error, exit 1.
    let out = probe(&[
        "rotation",
        "nothing.invalid-zone",
        "--resolver",
        &resolver_arg,
        "--ns-port",
        &port,
        "--timeout",
        "300",
        "--count",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("no NS records found"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn lame_only_zone_is_reported() {
    let lame = FakeServer::start(
        "127.0.0.4".parse().unwrap(),
        Arc::new(|q, _| Action::Reply(with_rcode(response(q), ResponseCode::Refused))),
    );
    let resolver = FakeServer::start(
        LO,
        Arc::new(|q, _| {
            let qq = &q.queries[0];
            let qname = qq.name().to_ascii().to_lowercase();
            let mut r = response(q);
            r.metadata.authoritative = false;
            match (qq.query_type(), qname.as_str()) {
                (RecordType::NS, "lame.test.") => r.add_answer(ns("lame.test.", "ns.lame.test.")),
                (RecordType::A, "ns.lame.test.") => {
                    r.add_answer(a("ns.lame.test.", "127.0.0.4", 60))
                }
                _ => &mut r,
            };
            Action::Reply(r)
        }),
    );
    let out = probe(&[
        "ecs",
        "lame.test",
        "--resolver",
        &resolver.addr.to_string(),
        "--ns-port",
        &lame.addr.port().to_string(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["verdict"], "failed");
    assert_eq!(v["results"][0]["status"], "refused");
    let err = v["results"][0]["error"].as_str().unwrap();
    assert!(err.contains("lame for zone lame.test."), "{err}");
}
