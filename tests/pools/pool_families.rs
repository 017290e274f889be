//! Address families at pool names (A from IPv4 members, AAAA from IPv6, NODATA
//! when the family is empty), other types at pool names (answered from the
//! zone file as for a static name), ANY, CNAMEs into pool names, and TTLs.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::common::{Server, Q};
use crate::pool_common::*;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{RData, RecordType};

fn sorted(mut v: Vec<IpAddr>) -> Vec<IpAddr> {
    v.sort();
    v
}

/// NODATA: NOERROR, AA, no answer, the SOA with the negative TTL (min of the
/// SOA's TTL 3600 and MINIMUM 300).
fn assert_nodata(a: &Answer, what: &str) {
    assert!(
        a.is_nodata(),
        "{what}: expected NODATA with SOA, got {:?}",
        a.msg
    );
    assert!(a.aa(), "{what}: AA on NODATA");
    assert_eq!(a.msg.authorities[0].ttl, 300, "{what}: negative TTL");
}

#[test]
fn aaaa_from_the_shuffle_pool_is_both_v6_members() {
    let s = Server::example();
    let mut c = Client::new(&s);
    let v6 = ips(&["2001:db8::10", "2001:db8::11"]);
    let mut firsts: HashMap<IpAddr, usize> = HashMap::new();
    let n = 2000;
    c.run("shuffle.example.test.", RecordType::AAAA, n, |a| {
        assert_eq!(a.rcode(), ResponseCode::NoError);
        assert!(a.aa());
        assert!(
            a.types().iter().all(|t| *t == RecordType::AAAA),
            "{:?}",
            a.msg
        );
        assert!(a.ttls().iter().all(|t| *t == 30));
        assert_eq!(sorted(a.addrs.clone()), v6, "both IPv6 members, once each");
        *firsts.entry(a.addrs[0]).or_default() += 1;
    });
    // Shuffled: each first about half the time (sd 1.1 points).
    for m in &v6 {
        let share = 100.0 * firsts[m] as f64 / n as f64;
        assert!((share - 50.0).abs() < 6.0, "{m} first in {share:.1}%");
    }
    // And A is the four IPv4 members only.
    let a = c.ask("shuffle.example.test.", RecordType::A);
    assert_eq!(
        sorted(a.addrs.clone()),
        ips(&["192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.13"])
    );
}

#[test]
fn aaaa_on_a_v4_only_pool_is_nodata_with_soa() {
    let s = Server::example();
    let mut c = Client::new(&s);
    for name in [
        "one.example.test.",
        "rotate.example.test.",
        "some.example.test.",
    ] {
        assert_nodata(&c.ask(name, RecordType::AAAA), name);
    }
    // The v4-only pool still answers A.
    assert_eq!(c.ask("one.example.test.", RecordType::A).addrs.len(), 1);
}

#[test]
fn families_of_a_dual_pool_and_single_family_pools() {
    let s = Server::start(&fixture("families.toml"), &[]);
    let mut c = Client::new(&s);
    // Dual pool, mode all (the default): each family's whole set.
    let a = c.ask("mixed.pools.test.", RecordType::A);
    assert_eq!(sorted(a.addrs.clone()), ips(&["192.0.2.41", "192.0.2.42"]));
    assert_eq!(a.types(), vec![RecordType::A; 2]);
    let a = c.ask("mixed.pools.test.", RecordType::AAAA);
    assert_eq!(
        sorted(a.addrs.clone()),
        ips(&["2001:db8::41", "2001:db8::42", "2001:db8::43"])
    );
    assert_eq!(a.types(), vec![RecordType::AAAA; 3]);
    // IPv6-only pool: A is NODATA; v4-only pool: AAAA is NODATA.
    assert_nodata(&c.ask("v6only.pools.test.", RecordType::A), "A at v6only");
    assert_nodata(
        &c.ask("v4only.pools.test.", RecordType::AAAA),
        "AAAA at v4only",
    );
}

#[test]
fn pool_answers_carry_the_configured_ttl() {
    let s = Server::start(&fixture("families.toml"), &[]);
    let mut c = Client::new(&s);
    for (name, qtype, ttl) in [
        ("mixed.pools.test.", RecordType::A, 30), // default
        ("mixed.pools.test.", RecordType::AAAA, 30),
        ("v6only.pools.test.", RecordType::AAAA, 86400), // the maximum
        ("v4only.pools.test.", RecordType::A, 1),        // the minimum
        ("some.pools.test.", RecordType::AAAA, 120),
    ] {
        let a = c.ask(name, qtype);
        assert!(a.aa(), "{name}");
        assert!(!a.addrs.is_empty(), "{name} {qtype}");
        assert!(
            a.ttls().iter().all(|t| *t == ttl),
            "{name} {qtype}: {:?}",
            a.ttls()
        );
    }
}

#[test]
fn some_defaults_to_two_per_family() {
    let s = Server::start(&fixture("families.toml"), &[]);
    let mut c = Client::new(&s);
    let v6 = ips(&["2001:db8::41", "2001:db8::42", "2001:db8::43"]);
    for _ in 0..300 {
        let a = c.ask("some.pools.test.", RecordType::AAAA);
        assert_eq!(a.addrs.len(), 2, "{:?}", a.addrs);
        assert_ne!(a.addrs[0], a.addrs[1]);
        assert!(a.addrs.iter().all(|m| v6.contains(m)));
        // Two v4 members: both, in either order.
        let a = c.ask("some.pools.test.", RecordType::A);
        assert_eq!(sorted(a.addrs.clone()), ips(&["192.0.2.41", "192.0.2.42"]));
    }
}

#[test]
fn rotate_on_a_v6_only_pool_with_weights() {
    let s = Server::start(&fixture("families.toml"), &[]);
    let mut c = Client::new(&s);
    let set = ips(&["2001:db8::51", "2001:db8::52"]);
    // Weights 1 and 3: firsts b a b b, repeating.
    for (i, w) in swrr(&[1, 3], 400).into_iter().enumerate() {
        let a = c.ask("v6only.pools.test.", RecordType::AAAA);
        let mut want = set.clone();
        want.rotate_left(w);
        assert_eq!(a.addrs, want, "response {i}");
    }
}

fn txts(a: &Answer) -> Vec<String> {
    a.msg
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::TXT(t) => Some(t.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn other_types_at_a_pool_name_come_from_the_zone_file() {
    let s = Server::example();
    let mut c = Client::new(&s);
    // The bundled example: geo.example.test has a TXT.
    let a = c.ask("geo.example.test.", RecordType::TXT);
    assert_eq!(a.rcode(), ResponseCode::NoError);
    assert!(a.aa());
    assert_eq!(
        txts(&a),
        vec!["answered from the geo pools in meridian.toml"]
    );
    assert_eq!(a.ttls(), vec![3600]);
    // A pool name with no TXT: NODATA, as for a static name.
    assert_nodata(&c.ask("one.example.test.", RecordType::TXT), "TXT at one");
    assert_nodata(
        &c.ask("shuffle.example.test.", RecordType::MX),
        "MX at shuffle",
    );
    drop(c);

    let s = Server::start(&fixture("families.toml"), &[]);
    let mut c = Client::new(&s);
    let a = c.ask("mixed.pools.test.", RecordType::TXT);
    assert!(a.aa());
    assert_eq!(txts(&a), vec!["pool name with other data"]);
    let a = c.ask("mixed.pools.test.", RecordType::MX);
    assert_eq!(a.types(), vec![RecordType::MX]);
    assert_eq!(a.ttls(), vec![3600]);
    let a = c.ask("v6only.pools.test.", RecordType::TXT);
    assert_eq!(txts(&a), vec!["only IPv6 members"]);
    for t in [
        RecordType::CNAME,
        RecordType::NS,
        RecordType::SRV,
        RecordType::SOA,
    ] {
        assert_nodata(&c.ask("mixed.pools.test.", t), &format!("{t} at mixed"));
    }
    // Below a pool name: nothing there.
    let a = c.ask("x.mixed.pools.test.", RecordType::A);
    assert_eq!(a.rcode(), ResponseCode::NXDomain);
    assert!(a.msg.answers.is_empty());
}

#[test]
fn any_at_a_pool_name_is_one_address_rrset() {
    let s = Server::start(&fixture("families.toml"), &[]);
    let mut c = Client::new(&s);
    // RFC 8482: one RRset. A dual pool answers its IPv4 set...
    let a = c.ask("mixed.pools.test.", RecordType::ANY);
    assert!(a.aa());
    assert_eq!(sorted(a.addrs.clone()), ips(&["192.0.2.41", "192.0.2.42"]));
    assert_eq!(a.types(), vec![RecordType::A; 2]);
    assert!(a.ttls().iter().all(|t| *t == 30));
    // ...and a pool with only IPv6 members its IPv6 set, not NODATA.
    let a = c.ask("v6only.pools.test.", RecordType::ANY);
    assert_eq!(a.rcode(), ResponseCode::NoError);
    assert_eq!(a.addrs.len(), 2, "{:?}", a.msg);
    assert_eq!(a.types(), vec![RecordType::AAAA; 2]);
    drop(c);

    let s = Server::example();
    let mut c = Client::new(&s);
    let a = c.ask("one.example.test.", RecordType::ANY);
    assert_eq!(a.types(), vec![RecordType::A]);
}

#[test]
fn cname_into_a_pool_name_and_case_insensitive_names() {
    let s = Server::start(&fixture("families.toml"), &[]);
    let mut c = Client::new(&s);
    let a = c.ask("alias.pools.test.", RecordType::AAAA);
    assert_eq!(a.rcode(), ResponseCode::NoError);
    assert!(a.aa());
    assert_eq!(a.types()[0], RecordType::CNAME);
    assert_eq!(a.ttls()[0], 3600);
    assert_eq!(
        sorted(a.addrs.clone()),
        ips(&["2001:db8::41", "2001:db8::42", "2001:db8::43"])
    );
    assert!(a.ttls()[1..].iter().all(|t| *t == 30));
    let a = c.ask("MiXeD.PoOlS.TeSt.", RecordType::A);
    assert_eq!(sorted(a.addrs.clone()), ips(&["192.0.2.41", "192.0.2.42"]));
}

#[test]
fn pool_answers_over_tcp_and_with_edns() {
    let s = Server::example();
    let m = s.query_tcp(&Q::new("shuffle.example.test.", RecordType::AAAA));
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(m.metadata.authoritative);
    assert_eq!(crate::pool_common::addrs(&m).len(), 2);
    let mut c = Client::new(&s);
    let a = c.ask_q(&Q::new("some.example.test.", RecordType::A).edns(1232));
    assert_eq!(a.addrs.len(), 2);
    assert!(a.msg.edns.is_some());
    let a = c.ask_q(&Q::new("one.example.test.", RecordType::AAAA).edns(1232));
    assert!(a.is_nodata());
}
