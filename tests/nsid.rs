//! NSID (RFC 5001): `[server] nsid = "text"` (or `nsid_hex`) is returned in
//! the OPT of a response to a query that carries an empty NSID option, and
//! only then; without the key, never.

mod common;

use common::*;
use meridian_wire::build::option;

const A: u16 = 1;
const NSID: u16 = 3;

fn server(extra: &str) -> (TempDir, Server) {
    let dir = TempDir::new("nsid");
    dir.write(
        "n.test.zone",
        "$ORIGIN n.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 7200 1800 1209600 300\n\
         @ IN NS ns1\nns1 IN A 192.0.2.53\n",
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
