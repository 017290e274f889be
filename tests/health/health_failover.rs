//! Pools under health: failover to the next pool of a geo rule with the
//! degraded TTL and the same ECS scope block; `min_up` counts and
//! fractions; each `when_all_down` policy; drained members stay out even
//! when every pool is down.

use std::net::Ipv4Addr;

use crate::common::Q;
use crate::health_support::*;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

/// Addresses spread over the block `base/len`: first, last, middle and a few more.
fn block_samples(base: Ipv4Addr, len: u8) -> Vec<Ipv4Addr> {
    let b = u32::from(base);
    let size: u64 = 1u64 << (32 - len as u32);
    [
        0,
        size - 1,
        size / 2,
        size / 3,
        size / 7 * 5,
        12345 % size,
        size - 256.min(size),
    ]
    .iter()
    .map(|&off| Ipv4Addr::from(b + off as u32))
    .collect()
}

fn block_of(a: Ipv4Addr, len: u8) -> Ipv4Addr {
    let mask = if len == 0 {
        0
    } else {
        u32::MAX << (32 - len as u32)
    };
    Ipv4Addr::from(u32::from(a) & mask)
}

#[test]
fn geo_failover_keeps_the_scope_block() {
    let mut p1 = Backend::ok("127.0.0.51");
    let mut p2 = Backend::ok("127.0.0.52");
    let b1 = Backend::ok("127.0.0.53");
    let body = format!(
        "{}\n[pool.primary]\ncheck = \"tcp\"\nmembers = [{}, {}]\n\n[pool.backup]\ncheck = \"tcp\"\nmembers = [{}]\n\n\
         [name.\"geo.health.test\"]\nmode = \"all\"\nttl = 60\ndegraded_ttl = 7\n\n\
         [name.\"geo.health.test\".geo]\nnets = {{ \"20.0.0.0/8\" = [\"primary\", \"backup\"] }}\ndefault = [\"backup\", \"primary\"]\n",
        check_table("tcp", "tcp", ""),
        member(&p1, None),
        member(&p2, None),
        member(&b1, None),
    );
    let (_dir, cfg) = setup("failover", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    let name = "geo.health.test.";
    let client = "20.1.2.3/32";
    let before = ask_ecs(&s, name, client);
    assert_eq!(before.addrs, set(&["127.0.0.51", "127.0.0.52"]));
    assert_eq!(before.ttls, vec![60, 60]);
    // The decision block of 20.1.2.3 is the rule's 20.0.0.0/8. (Clients in
    // special ranges such as 10/8 are decided on the resolver, RFC 7871 §10,
    // so the test uses public-looking subnets; no traffic goes there.)
    let scope = before.scope.expect("ECS scope");
    assert_eq!(scope, 8);
    let block = block_of("20.1.2.3".parse().unwrap(), scope);
    let samples = block_samples(block, scope);
    // Every address of the block gets the same answer and scope.
    let check_block = |want: &Ans| {
        for a in &samples {
            let r = ask_ecs(&s, name, &format!("{a}/32"));
            assert_eq!(
                (&r.addrs, &r.ttls, r.scope),
                (&want.addrs, &want.ttls, want.scope),
                "client {a}"
            );
        }
    };
    check_block(&before);
    // Outside the block: the default list, whose first pool is backup.
    let other = ask_ecs(&s, name, "30.1.2.3/32");
    assert_eq!(
        (other.addrs.clone(), other.ttls.clone()),
        (set(&["127.0.0.53"]), vec![60])
    );

    // One primary member down: still primary, degraded TTL, same scope.
    p2.stop();
    assert!(wait_for(ms(3000), || ask_ecs(&s, name, client).addrs
        == set(&["127.0.0.51"]))
    .is_some());
    let partial = ask_ecs(&s, name, client);
    assert_eq!(
        (partial.ttls.clone(), partial.scope),
        (vec![7], Some(scope))
    );
    check_block(&partial);

    // Both down: failover to backup, degraded TTL, the same block and scope.
    p1.stop();
    assert!(wait_for(ms(3000), || ask_ecs(&s, name, client).addrs
        == set(&["127.0.0.53"]))
    .is_some());
    let failed_over = ask_ecs(&s, name, client);
    assert_eq!(
        (failed_over.ttls.clone(), failed_over.scope),
        (vec![7], Some(scope))
    );
    check_block(&failed_over);
    // The clients whose first choice is backup are not degraded.
    assert_eq!(ask_ecs(&s, name, "30.1.2.3/32"), other);
    let st = status(api);
    let primary_v4 = st["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pool"] == "primary")
        .unwrap()
        .clone();
    assert_eq!(
        (
            primary_v4["up"].as_bool(),
            primary_v4["up_members"].as_u64()
        ),
        (Some(false), Some(0))
    );

    // Back: primary answers again with the full TTL, same scope.
    p1.restart();
    p2.restart();
    assert!(wait_for(ms(3000), || ask_ecs(&s, name, client) == before).is_some());
    check_block(&before);
}

#[test]
fn min_up_fraction_and_count() {
    let mut m: Vec<Backend> = (71..=74)
        .map(|i| Backend::ok(&format!("127.0.0.{i}")))
        .collect();
    let spare = Backend::ok("127.0.0.75");
    let members: Vec<String> = m.iter().map(|b| member(b, None)).collect();
    let body = format!(
        "{}\n[pool.half]\ncheck = \"tcp\"\nmin_up = 0.5\nmembers = [{}]\n\n[pool.three]\ncheck = \"tcp\"\nmin_up = 3\nmembers = [{}]\n\n\
         [pool.spare]\nmembers = [{}]\n\n\
         [name.\"half.health.test\"]\nttl = 60\ndegraded_ttl = 3\n[name.\"half.health.test\".geo]\ndefault = [\"half\", \"spare\"]\n\n\
         [name.\"three.health.test\"]\nttl = 60\ndegraded_ttl = 3\n[name.\"three.health.test\".geo]\ndefault = [\"three\", \"spare\"]\n",
        check_table("tcp", "tcp", ""),
        members.join(", "),
        members.join(", "),
        member(&spare, None),
    );
    let (_dir, cfg) = setup("minup", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    m[0].stop();
    let three_left = set(&["127.0.0.72", "127.0.0.73", "127.0.0.74"]);
    assert!(wait_for(ms(3000), || ask(&s, "half.health.test.").addrs
        == three_left)
    .is_some());
    // 3 of 4 up: both pools still answer, with the degraded TTL.
    assert_eq!(ask(&s, "three.health.test.").addrs, three_left);
    assert_eq!(ask(&s, "three.health.test.").ttls, vec![3; 3]);
    m[1].stop();
    let two_left = set(&["127.0.0.73", "127.0.0.74"]);
    assert!(wait_for(ms(3000), || ask(&s, "half.health.test.").addrs == two_left).is_some());
    // 2 of 4: half (needs 2) still up; three (needs 3) fails over.
    assert_eq!(ask(&s, "three.health.test.").addrs, set(&["127.0.0.75"]));
    assert_eq!(ask(&s, "three.health.test.").ttls, vec![3]);
    m[2].stop();
    assert!(wait_for(ms(3000), || ask(&s, "half.health.test.").addrs
        == set(&["127.0.0.75"]))
    .is_some());
    assert_eq!(ask(&s, "half.health.test.").ttls, vec![3]);
}

#[test]
fn when_all_down_policies() {
    let mut a = Backend::ok("127.0.0.61");
    let mut b = Backend::ok("127.0.0.62");
    let mut names = String::new();
    for (n, policy) in [
        ("fallback", "all"),
        ("empty", "empty"),
        ("fail", "servfail"),
        ("default", ""),
    ] {
        names +=
            &format!("[name.\"{n}.health.test\"]\npool = \"only\"\nttl = 60\ndegraded_ttl = 9\n");
        if !policy.is_empty() {
            names += &format!("when_all_down = \"{policy}\"\n");
        }
        names += "\n";
    }
    let body = format!(
        "{}\n[pool.only]\ncheck = \"tcp\"\nmembers = [{}, {}]\n\n{names}",
        check_table("tcp", "tcp", ""),
        member(&a, None),
        member(&b, None),
    );
    let (_dir, cfg) = setup("alldown", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    let both = set(&["127.0.0.61", "127.0.0.62"]);
    for n in ["fallback", "empty", "fail", "default"] {
        let r = ask(&s, &format!("{n}.health.test."));
        assert_eq!(
            (r.rcode, r.addrs, r.ttls),
            (ResponseCode::NoError, both.clone(), vec![60, 60]),
            "{n}"
        );
    }
    a.stop();
    b.stop();
    assert!(
        wait_for(ms(3000), || ask(&s, "fail.health.test.").rcode
            == ResponseCode::ServFail)
        .is_some(),
        "{}",
        status(api)
    );
    // all (and the default): every member regardless of health, degraded TTL.
    for n in ["fallback", "default"] {
        let r = ask(&s, &format!("{n}.health.test."));
        assert_eq!(
            (r.rcode, r.addrs, r.ttls),
            (ResponseCode::NoError, both.clone(), vec![9, 9]),
            "{n}"
        );
    }
    // empty: NODATA with the SOA, whose TTL is capped at degraded_ttl (9),
    // since resolvers cache a negative answer for every client.
    let r = ask(&s, "empty.health.test.");
    assert_eq!(
        (r.rcode, r.addrs.len(), r.authority),
        (ResponseCode::NoError, 0, 1)
    );
    let m = s.query(&Q::new("empty.health.test.", RecordType::A));
    assert_eq!(m.authorities[0].ttl, 9, "{:?}", m.authorities);
    // servfail: SERVFAIL with nothing.
    let r = ask(&s, "fail.health.test.");
    assert_eq!((r.rcode, r.addrs.len()), (ResponseCode::ServFail, 0));

    // A drained member stays out of the all-down fallback...
    let (code, body) = http(api, "POST", "/override/127.0.0.62?state=drain");
    assert_eq!(code, 200, "{body}");
    assert_eq!(ask(&s, "fallback.health.test.").addrs, set(&["127.0.0.61"]));
    // ... unless every member is drained (fail open).
    let (code, _) = http(api, "POST", "/override/127.0.0.61?state=drain");
    assert_eq!(code, 200);
    assert_eq!(ask(&s, "fallback.health.test.").addrs, both);
    // A member forced down is still in the fallback.
    let (code, _) = http(api, "POST", "/override/127.0.0.61?state=down");
    assert_eq!(code, 200);
    assert_eq!(ask(&s, "fallback.health.test.").addrs, set(&["127.0.0.61"]));
    // Forced up: the pool is up again, partly failed, so degraded.
    let (code, _) = http(api, "POST", "/override/127.0.0.61?state=up");
    assert_eq!(code, 200);
    let r = ask(&s, "fail.health.test.");
    assert_eq!(
        (r.rcode, r.addrs, r.ttls),
        (ResponseCode::NoError, set(&["127.0.0.61"]), vec![9])
    );
}

#[test]
fn nearest_mode_fails_over_to_the_next_nearest() {
    // Pools at the sites of tests/data/geo/rules.toml; for a client in
    // 41.0.0.0/24 (Johannesburg in geo/example.mmdb) the order is
    // sa, eu, oc, as, na.
    let sites = [
        ("na", "127.0.0.111", "[39.0, -98.0]"),
        ("eu", "127.0.0.112", "[50.1, 8.7]"),
        ("as", "127.0.0.113", "[35.7, 139.7]"),
        ("sa", "127.0.0.114", "[-23.5, -46.6]"),
        ("oc", "127.0.0.115", "[-33.9, 151.2]"),
    ];
    let mut backends: Vec<Backend> = sites.iter().map(|(_, ip, _)| Backend::ok(ip)).collect();
    let mut body = format!(
        "[geo]\ndatabase = {:?}\n\n{}\n",
        crate::common::root()
            .join("geo/example.mmdb")
            .to_str()
            .unwrap(),
        check_table("tcp", "tcp", "")
    );
    for ((name, _, loc), b) in sites.iter().zip(&backends) {
        body += &format!(
            "[pool.{name}]\ncheck = \"tcp\"\nlocation = {loc}\nmembers = [{}]\n\n",
            member(b, None)
        );
    }
    body += "[name.\"near.health.test\"]\nttl = 60\ndegraded_ttl = 6\n\
             [name.\"near.health.test\".geo]\nnearest = [\"na\", \"eu\", \"as\", \"sa\", \"oc\"]\ndefault = [\"na\"]\n";
    let (_dir, cfg) = setup("nearest", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    let q = || ask_ecs(&s, "near.health.test.", "41.0.0.0/24");
    let first = q();
    assert_eq!(
        (first.addrs.clone(), first.ttls.clone()),
        (set(&["127.0.0.114"]), vec![60])
    );
    let scope = first.scope;
    backends[3].stop(); // sa
    assert!(
        wait_for(ms(3000), || q().addrs == set(&["127.0.0.112"])).is_some(),
        "{:?}",
        q()
    );
    assert_eq!((q().ttls, q().scope), (vec![6], scope));
    backends[1].stop(); // eu
    assert!(
        wait_for(ms(3000), || q().addrs == set(&["127.0.0.115"])).is_some(),
        "{:?}",
        q()
    );
    assert_eq!((q().ttls, q().scope), (vec![6], scope));
}
