//! Additional-section addresses (RFC 1035 §3.3.9, RFC 2782, RFC 9471): the
//! A and AAAA of in-zone MX, SRV and NS targets go in the additional
//! section where they fit (optional: left out, never TC); a referral
//! carries the glue below its cut (required: TC if it does not fit) and
//! then sibling glue and other in-zone name server addresses where they fit.

use crate::common::*;
use hickory_proto::rr::RecordType;

fn server() -> (TempDir, Server) {
    let dir = TempDir::new("additional");
    let mut many = String::new();
    for i in 0..12 {
        many.push_str(&format!("many IN MX {i} m{i}\n"));
        for j in 1..=4 {
            many.push_str(&format!("m{i} IN A 192.0.2.{j}\n"));
        }
    }
    dir.write(
        "x.test.zone",
        &format!(
            "$ORIGIN x.test.\n$TTL 300\n\
             @ IN SOA ns1 hostmaster 1 7200 1800 1209600 300\n\
             @ IN NS ns1\nns1 IN A 192.0.2.53\n\
             @ IN MX 10 mail\n@ IN MX 20 mx.example.net.\n\
             mail IN A 192.0.2.25\nmail IN AAAA 2001:db8::25\n\
             _sip._tcp IN SRV 0 5 5060 sip\nsip IN A 192.0.2.60\n\
             child IN NS ns1.child\nchild IN NS ns.other\nchild IN NS ns1\n\
             ns1.child IN A 192.0.2.10\n\
             other IN NS ns.other\nns.other IN A 192.0.2.20\n\
             {many}"
        ),
    );
    let cfg = dir.write(
        "x.toml",
        "[server]\nlisten = [\"127.0.0.1:5380\"]\n\n[[zone]]\norigin = \"x.test.\"\nfile = \"x.test.zone\"\n",
    );
    let s = Server::start(&cfg, &[]);
    (dir, s)
}

#[test]
fn mx_targets_in_zone_get_addresses() {
    let (_d, s) = server();
    let r = s.dig(&Q::new("x.test.", RecordType::MX).edns(1232));
    assert_eq!(r.answer().len(), 2);
    assert_eq!(
        r.additional(),
        [
            "mail.x.test. 300 IN A 192.0.2.25",
            "mail.x.test. 300 IN AAAA 2001:db8::25",
        ]
    );
}

#[test]
fn srv_and_ns_targets_in_zone_get_addresses() {
    let (_d, s) = server();
    let r = s.dig(&Q::new("_sip._tcp.x.test.", RecordType::SRV));
    assert_eq!(r.additional(), ["sip.x.test. 300 IN A 192.0.2.60"]);
    let r = s.dig(&Q::new("x.test.", RecordType::NS));
    assert_eq!(r.additional(), ["ns1.x.test. 300 IN A 192.0.2.53"]);
}

#[test]
fn referral_carries_sibling_glue_after_required_glue() {
    let (_d, s) = server();
    let r = s.dig(&Q::new("www.child.x.test.", RecordType::A));
    assert_eq!((r.rcode(), r.flags().as_str()), (NOERROR, "qr"));
    assert_eq!(r.authority().len(), 3);
    assert_eq!(
        r.additional(),
        [
            "ns1.child.x.test. 300 IN A 192.0.2.10",
            "ns.other.x.test. 300 IN A 192.0.2.20",
            "ns1.x.test. 300 IN A 192.0.2.53",
        ]
    );
}

#[test]
fn optional_addresses_that_do_not_fit_are_left_out_without_tc() {
    // 12 MX (fits in 512) whose targets have 4 A records each (do not).
    let (_d, s) = server();
    let r = s.dig(&Q::new("many.x.test.", RecordType::MX));
    assert_eq!(r.flags(), "qr aa", "no TC");
    assert_eq!(r.answer().len(), 12);
    assert!(r.raw.len() <= 512, "{} octets", r.raw.len());
    let n = r.additional().len();
    assert!(
        n > 0 && n < 48 && n % 4 == 0,
        "{n} additional records, whole RRsets"
    );
}
