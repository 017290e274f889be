//! Extended DNS Errors (RFC 8914), as Knot sends them: REFUSED for a name
//! not served gets INFO-CODE 20 (Not Authoritative), a refused zone
//! transfer 18 (Prohibited), FORMERR 0 (Other) with a text; only when the
//! query had an OPT to attach it to.

use crate::common::*;

const A: u16 = 1;
const AXFR: u16 = 252;
const EDE: u16 = 15;

fn ede(r: &Resp) -> Option<(u16, String)> {
    let (_, _, rd) = r.opt()?;
    let mut i = 0;
    while i + 4 <= rd.len() {
        let code = u16::from_be_bytes([rd[i], rd[i + 1]]);
        let len = u16::from_be_bytes([rd[i + 2], rd[i + 3]]) as usize;
        if code == EDE {
            let b = &rd[i + 4..i + 4 + len];
            return Some((
                u16::from_be_bytes([b[0], b[1]]),
                String::from_utf8(b[2..].to_vec()).unwrap(),
            ));
        }
        i += 4 + len;
    }
    None
}

#[test]
fn refused_not_authoritative() {
    let s = Server::example();
    let r = s.ask(&QueryBuilder::new("example.org", A).edns(1232).build());
    assert_eq!(r.rcode(), REFUSED);
    assert_eq!(ede(&r).map(|e| e.0), Some(20));
    // Without EDNS there is no OPT, so no EDE.
    let r = s.ask(&QueryBuilder::new("example.org", A).build());
    assert_eq!(r.rcode(), REFUSED);
    assert!(r.opt().is_none());
}

#[test]
fn refused_transfer_is_prohibited() {
    let s = Server::example();
    let r = s.ask(&QueryBuilder::new("example.test", AXFR).edns(1232).build());
    assert_eq!(r.rcode(), REFUSED);
    assert_eq!(ede(&r).map(|e| e.0), Some(18));
}

#[test]
fn formerr_with_an_opt_carries_an_ede() {
    let s = Server::example();
    // QDCOUNT 2 with an OPT: FORMERR, the OPT echoed with an EDE.
    let mut q = QueryBuilder::new("www.example.test", A).edns(1232).build();
    let opt = q.split_off(q.len() - 11);
    q.extend_from_slice(b"\x01a\x00\x00\x01\x00\x01");
    q.extend_from_slice(&opt);
    q[4..6].copy_from_slice(&2u16.to_be_bytes());
    let r = s.ask(&q);
    assert_eq!(r.rcode(), FORMERR);
    assert_eq!(ede(&r), Some((0, "malformed query".into())));
    // Answers that are not errors carry none.
    let r = s.ask(&QueryBuilder::new("www.example.test", A).edns(1232).build());
    assert_eq!(ede(&r), None);
}

#[test]
fn servfail_when_every_member_is_down_says_why() {
    // One member on a closed port, checked every 100 ms: down after the
    // first failure, and `when_all_down = "servfail"`.
    let dir = TempDir::new("ede-servfail");
    dir.write(
        "s.test.zone",
        "$ORIGIN s.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 7200 1800 1209600 300\n\
         @ IN NS ns1\nns1 IN A 192.0.2.53\n",
    );
    let port = free_port();
    let cfg = dir.write(
        "s.toml",
        &format!(
            "[server]\n\n[[zone]]\norigin = \"s.test.\"\nfile = \"s.test.zone\"\n\n\
             [check.tcp]\ntype = \"tcp\"\ninterval_ms = 100\ntimeout_ms = 50\nrise = 1\nfall = 1\n\n\
             [pool.p]\ncheck = \"tcp\"\nmembers = [{{ address = \"127.0.0.1\", port = {port} }}]\n\n\
             [name.\"www.s.test\"]\npool = \"p\"\nwhen_all_down = \"servfail\"\n"
        ),
    );
    let s = Server::start(&cfg, &[]);
    let q = QueryBuilder::new("www.s.test", A).edns(1232).build();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let r = loop {
        let r = s.ask(&q);
        if r.rcode() == SERVFAIL || std::time::Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(r.rcode(), SERVFAIL);
    assert_eq!(ede(&r), Some((0, "no pool member is up".into())));
}
