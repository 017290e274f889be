//! NSID (RFC 5001): `[server] nsid = "text"` (or `nsid_hex`) is returned in
//! the OPT of a response to a query that carries an empty NSID option, and
//! only then; without the key, never. It is left out when it does not
//! fit under the client's UDP size (RFC 5001 §2.3): it never makes an
//! answer truncated or larger than the client allows.

use crate::common::*;
use meridian_wire::build::option;

const A: u16 = 1;
const NSID: u16 = 3;
const TXT: u16 = 16;

fn server(extra: &str) -> (TempDir, Server) {
    let dir = TempDir::new("nsid");
    let t = "t".repeat(200);
    dir.write(
        "n.test.zone",
        &format!(
            "$ORIGIN n.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 7200 1800 1209600 300\n\
         @ IN NS ns1\nns1 IN A 192.0.2.53\n\
         ; any other name: a TXT RRset over 512 octets\n\
         * IN TXT \"{t}\" \"{t}\" \"{t}\"\n"
        ),
    );
    let cfg = dir.write(
        "n.toml",
        &format!("[server]\n{extra}\n\n[[zone]]\norigin = \"n.test.\"\nfile = \"n.test.zone\"\n"),
    );
    let s = Server::start(&cfg, &[]);
    (dir, s)
}

/// The options of the response's OPT: (code, body).
fn options(r: &Resp) -> Vec<(u16, Vec<u8>)> {
    let (_, _, rd) = r.opt().expect("an OPT");
    let mut out = Vec::new();
    let mut i = 0;
    while i + 4 <= rd.len() {
        let code = u16::from_be_bytes([rd[i], rd[i + 1]]);
        let len = u16::from_be_bytes([rd[i + 2], rd[i + 3]]) as usize;
        out.push((code, rd[i + 4..i + 4 + len].to_vec()));
        i += 4 + len;
    }
    out
}

fn ask_nsid(s: &Server, name: &str) -> Resp {
    s.ask(
        &QueryBuilder::new(name, A)
            .edns(1232)
            .option(&option(NSID, &[]))
            .build(),
    )
}

#[test]
fn nsid_is_returned_when_asked() {
    let (_d, s) = server("nsid = \"dns1.example\"");
    let r = ask_nsid(&s, "ns1.n.test");
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(options(&r), [(NSID, b"dns1.example".to_vec())]);
    // On errors too: REFUSED for a name not served (with its EDE after).
    let r = ask_nsid(&s, "example.org");
    assert_eq!(options(&r)[0], (NSID, b"dns1.example".to_vec()));
    // Not asked: not sent.
    let r = s.ask(&QueryBuilder::new("ns1.n.test", A).edns(1232).build());
    assert!(options(&r).is_empty());
}

#[test]
fn nsid_hex_and_off_by_default() {
    let (_d, s) = server("nsid_hex = \"00ff10\"");
    assert_eq!(
        options(&ask_nsid(&s, "ns1.n.test")),
        [(NSID, vec![0, 0xff, 0x10])]
    );
    let (_d, s) = server("");
    assert!(options(&ask_nsid(&s, "ns1.n.test")).is_empty());
}

#[test]
fn bad_nsid_settings_fail_check() {
    for (extra, words) in [
        ("nsid = \"a\"\nnsid_hex = \"00\"", "not both"),
        ("nsid_hex = \"0g\"", "hex"),
        ("nsid = \"\"", "1 to 512"),
    ] {
        let dir = TempDir::new("nsid-bad");
        let cfg = dir.write("n.toml", &format!("[server]\n{extra}\n"));
        let (code, _, err) = run(&["check", "--config", cfg.to_str().unwrap()]);
        assert_eq!(code, 1, "{extra}");
        assert!(
            err.contains("n.toml:") && err.contains(words),
            "{extra}: {err}"
        );
    }
}

/// A 512-octet EDNS client asking for the NSID.
fn ask_nsid_512(s: &Server, name: &str, qtype: u16) -> Resp {
    s.ask(
        &QueryBuilder::new(name, qtype)
            .edns(512)
            .option(&option(NSID, &[]))
            .build(),
    )
}

#[test]
fn long_nsid_never_exceeds_a_512_octet_client() {
    let id = "i".repeat(400);
    let (_d, s) = server(&format!("nsid = \"{id}\""));
    // Fits: sent.
    let r = ask_nsid_512(&s, "ns1.n.test", A);
    assert!(r.raw.len() <= 512 && !r.hdr().truncation);
    assert_eq!(options(&r), [(NSID, id.as_bytes().to_vec())]);
    // A 136-octet QNAME: the NODATA answer fits, with the NSID it would
    // not. It is sent without the NSID, and not truncated.
    let long = format!("{}.{}.n.test", "a".repeat(63), "b".repeat(63));
    let r = ask_nsid_512(&s, &long, A);
    assert!(r.raw.len() <= 512, "{} octets", r.raw.len());
    assert!(!r.hdr().truncation, "truncated for the NSID's sake");
    assert_eq!(r.hdr().counts.authorities, 1, "the SOA");
    assert!(options(&r).is_empty());
    // The TXT answer does not fit: the truncated form does, without NSID.
    let r = ask_nsid_512(&s, &long, TXT);
    assert!(r.raw.len() <= 512, "{} octets", r.raw.len());
    assert!(r.hdr().truncation);
    assert!(options(&r).is_empty());
    // Over TCP the answer and the NSID.
    let q = QueryBuilder::new(&long, TXT)
        .edns(512)
        .option(&option(NSID, &[]))
        .build();
    let r = Resp::new(s.tcp_raw(&q).expect("a TCP answer"));
    assert!(!r.hdr().truncation && r.hdr().counts.answers == 1);
    assert_eq!(options(&r), [(NSID, id.as_bytes().to_vec())]);
}
