//! Wildcards (RFC 4592), on the example zone of §2.2.1
//! (tests/data/wildcard.example.zone):
//!
//! ```text
//! example.                 SOA, NS ns.example.com., NS ns.example.net.
//! *.example.               TXT "this is a wildcard", MX 10 host1.example.
//! sub.*.example.           TXT "this is not a wildcard"
//! host1.example.           A 192.0.2.1
//! _ssh._tcp.host1.example. SRV
//! _ssh._tcp.host2.example. SRV
//! subdel.example.          NS ns.example.com., NS ns.example.net.
//! *.cn.example.            CNAME host1.example.   (ours)
//! ```

use crate::common::*;
use hickory_proto::rr::RecordType;

fn server() -> Server {
    Server::start(&data("wildcard.toml"), &[])
}

const SOA: &str =
    "example. 300 IN SOA ns.example.com. hostmaster.example.com. 1 7200 1800 1209600 300";

// --- §2.2.1 "The following responses would be synthesized from the wildcard"

#[test]
fn host3_mx_is_synthesized() {
    // QNAME=host3.example. QTYPE=MX: the owner is the query name, not "*".
    let s = server();
    let r = s.dig(&Q::new("host3.example.", RecordType::MX));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(r.answer(), ["host3.example. 3600 IN MX 10 host1.example."]);
    assert_eq!(r.wire.answer[0].owner, "host3.example.");
    assert!(r.authority().is_empty());
}

#[test]
fn host3_a_is_wildcard_nodata() {
    // QNAME=host3.example. QTYPE=A: the wildcard matches but has no A: NODATA.
    let s = server();
    let r = s.dig(&Q::new("host3.example.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert!(r.answer().is_empty());
    assert_eq!(r.authority(), [SOA]);
}

#[test]
fn foo_bar_txt_is_synthesized() {
    // QNAME=foo.bar.example. QTYPE=TXT: several labels below the encloser.
    let s = server();
    let r = s.dig(&Q::new("foo.bar.example.", RecordType::TXT));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(
        r.answer(),
        ["foo.bar.example. 3600 IN TXT this is a wildcard"]
    );
}

#[test]
fn owner_keeps_the_query_case() {
    let s = server();
    let r = s.dig(&Q::new("HoSt3.EXAMPLE.", RecordType::MX));
    assert_eq!(r.wire.answer[0].owner, "HoSt3.EXAMPLE.");
    assert_eq!(r.wire.answer[0].ttl, 3600);
}

#[test]
fn below_a_missing_name_under_the_apex_is_synthesized() {
    // _foo._udp.host3.example: host3 does not exist, so the closest encloser
    // is example. and *.example matches (RFC 4592 §3.3.1).
    let s = server();
    let r = s.dig(&Q::new("_foo._udp.host3.example.", RecordType::TXT));
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(
        r.answer(),
        ["_foo._udp.host3.example. 3600 IN TXT this is a wildcard"]
    );
}

// --- §2.2.1 "The following responses would not be synthesized"

#[test]
fn host1_mx_is_nodata() {
    // host1.example exists: no wildcard, NODATA.
    let s = server();
    let r = s.dig(&Q::new("host1.example.", RecordType::MX));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert!(r.answer().is_empty());
    assert_eq!(r.authority(), [SOA]);
}

#[test]
fn sub_star_mx_is_nodata() {
    // sub.*.example exists: the "*" in it is an ordinary label here.
    let s = server();
    let r = s.dig(&Q::new("sub.*.example.", RecordType::MX));
    assert_eq!(r.rcode(), NOERROR);
    assert!(r.answer().is_empty());
    assert_eq!(r.authority(), [SOA]);
    let r = s.dig(&Q::new("sub.*.example.", RecordType::TXT));
    assert_eq!(
        r.answer(),
        ["sub.*.example. 3600 IN TXT this is not a wildcard"]
    );
}

#[test]
fn telnet_tcp_host1_srv_is_nxdomain() {
    // _tcp.host1.example is an empty non-terminal and the closest encloser;
    // there is no *._tcp.host1.example: NXDOMAIN.
    let s = server();
    let r = s.dig(&Q::new("_telnet._tcp.host1.example.", RecordType::SRV));
    assert_eq!((r.rcode(), r.flags().as_str()), (NXDOMAIN, "qr aa"));
    assert!(r.answer().is_empty());
    assert_eq!(r.authority(), [SOA]);
}

#[test]
fn below_an_empty_non_terminal_is_nxdomain() {
    // host2.example exists only as an empty non-terminal (above _ssh._tcp.host2):
    // names below it are not covered by *.example.
    let s = server();
    for name in [
        "_foo._udp.host2.example.",
        "x.host2.example.",
        "_udp._tcp.host2.example.",
    ] {
        let r = s.dig(&Q::new(name, RecordType::TXT));
        assert_eq!(r.rcode(), NXDOMAIN, "{name}: {:?}", r.answer());
        assert!(r.answer().is_empty());
        assert_eq!(r.authority(), [SOA]);
    }
}

#[test]
fn host_subdel_is_a_referral() {
    // Below a zone cut: a referral, never the wildcard.
    let s = server();
    let r = s.dig(&Q::new("host.subdel.example.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr"));
    assert!(r.answer().is_empty());
    assert_eq!(
        r.authority(),
        [
            "subdel.example. 3600 IN NS ns.example.com.",
            "subdel.example. 3600 IN NS ns.example.net.",
        ]
    );
    assert!(r.additional().is_empty());
}

#[test]
fn ghost_star_mx_is_nxdomain() {
    // ghost.*.example: the closest encloser is *.example and there is no
    // *.*.example.
    let s = server();
    let r = s.dig(&Q::new("ghost.*.example.", RecordType::MX));
    assert_eq!(r.rcode(), NXDOMAIN);
    assert!(r.answer().is_empty());
    assert_eq!(r.authority(), [SOA]);
}

// --- Empty non-terminals (RFC 4592 §2.2.2)

#[test]
fn empty_non_terminal_is_nodata() {
    // host2.example and _tcp.host1.example exist (with no data): NODATA, not
    // NXDOMAIN and not the wildcard's MX/TXT.
    let s = server();
    for (name, t) in [
        ("host2.example.", RecordType::A),
        ("host2.example.", RecordType::MX),
        ("_tcp.host2.example.", RecordType::TXT),
        ("_tcp.host1.example.", RecordType::SRV),
    ] {
        let r = s.dig(&Q::new(name, t));
        assert_eq!(
            (r.rcode(), r.flags().as_str()),
            (NOERROR, "qr aa"),
            "{name} {t}"
        );
        assert!(r.answer().is_empty(), "{name} {t}: {:?}", r.answer());
        assert_eq!(r.authority(), [SOA]);
    }
}

#[test]
fn existing_names_answer_normally() {
    let s = server();
    let r = s.dig(&Q::new("_ssh._tcp.host1.example.", RecordType::SRV));
    assert_eq!(
        r.answer(),
        ["_ssh._tcp.host1.example. 3600 IN SRV 0 0 22 host1.example."]
    );
    let r = s.dig(&Q::new("host1.example.", RecordType::A));
    assert_eq!(r.answer(), ["host1.example. 3600 IN A 192.0.2.1"]);
}

#[test]
fn the_wildcard_itself_answers_its_own_name() {
    // A query for "*.example" is an exact match (§2.2.1's "*" owner).
    let s = server();
    let r = s.dig(&Q::new("*.example.", RecordType::TXT));
    assert_eq!(r.answer(), ["*.example. 3600 IN TXT this is a wildcard"]);
}

#[test]
fn wildcard_nodata_for_other_types() {
    // The wildcard has TXT and MX only.
    let s = server();
    for t in [
        RecordType::A,
        RecordType::AAAA,
        RecordType::SRV,
        RecordType::NS,
    ] {
        let r = s.dig(&Q::new("nothere.example.", t));
        assert_eq!(r.rcode(), NOERROR, "{t}");
        assert!(r.answer().is_empty(), "{t}: {:?}", r.answer());
        assert_eq!(r.authority(), [SOA], "{t}");
    }
}

// --- Wildcard CNAME

#[test]
fn wildcard_cname_is_synthesized_and_followed() {
    let s = server();
    let r = s.dig(&Q::new("www.cn.example.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr aa"));
    assert_eq!(
        r.answer(),
        [
            "www.cn.example. 600 IN CNAME host1.example.",
            "host1.example. 3600 IN A 192.0.2.1",
        ]
    );
    assert_eq!(r.wire.answer[0].owner, "www.cn.example.");
    // Deeper names too, and qtype CNAME is not followed.
    let r = s.dig(&Q::new("a.b.cn.example.", RecordType::CNAME));
    assert_eq!(r.answer(), ["a.b.cn.example. 600 IN CNAME host1.example."]);
    // A type the target lacks: the CNAME, then NODATA from host1.
    let r = s.dig(&Q::new("x.cn.example.", RecordType::MX));
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(r.answer(), ["x.cn.example. 600 IN CNAME host1.example."]);
    assert_eq!(r.authority(), [SOA]);
}

#[test]
fn wildcard_answers_over_tcp_too() {
    let s = server();
    let r = s.dig_tcp(&Q::new("host3.example.", RecordType::MX));
    assert_eq!(r.answer(), ["host3.example. 3600 IN MX 10 host1.example."]);
}
