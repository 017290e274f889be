//! Identity queries in class CH, as gdnsd and Knot answer them: `id.server`
//! and `hostname.bind` TXT give `[server] identity` (default: the host
//! name; "" turns them off); `version.bind` is off unless `[server] version`
//! is set. Any other CH query is REFUSED.

use crate::common::*;

const TXT: u16 = 16;
const A: u16 = 1;
const CH: u16 = 3;

fn server(extra: &str) -> (TempDir, Server) {
    let dir = TempDir::new("identity");
    dir.write(
        "i.test.zone",
        "$ORIGIN i.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 7200 1800 1209600 300\n\
         @ IN NS ns1\nns1 IN A 192.0.2.53\n",
    );
    let cfg = dir.write(
        "i.toml",
        &format!("[server]\n{extra}\n\n[[zone]]\norigin = \"i.test.\"\nfile = \"i.test.zone\"\n"),
    );
    let s = Server::start(&cfg, &[]);
    (dir, s)
}

/// The one TXT string of the answer, checked class CH.
fn txt(r: &Resp) -> String {
    assert_eq!(r.wire.answer.len(), 1, "{:?}", r.answer());
    let rr = &r.wire.answer[0];
    assert_eq!((rr.rtype, rr.class, rr.ttl), (TXT, CH, 0));
    assert_eq!(rr.rdata[0] as usize, rr.rdata.len() - 1);
    String::from_utf8(rr.rdata[1..].to_vec()).unwrap()
}

fn ch(s: &Server, name: &str, t: u16) -> Resp {
    s.ask(&QueryBuilder::new(name, t).class(CH).build())
}

#[test]
fn id_server_and_hostname_bind_give_the_identity() {
    let (_d, s) = server("identity = \"dns1.example\"\nversion = \"meridian 1\"");
    for name in ["id.server", "hostname.bind", "ID.Server"] {
        let r = ch(&s, name, TXT);
        assert_eq!(
            (r.rcode(), r.flags().as_str()),
            (NOERROR, "qr aa"),
            "{name}"
        );
        assert_eq!(txt(&r), "dns1.example", "{name}");
    }
    let r = ch(&s, "version.bind", TXT);
    assert_eq!(txt(&r), "meridian 1");
}

#[test]
fn defaults_hostname_and_no_version() {
    let (_d, s) = server("");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let r = ch(&s, "id.server", TXT);
    assert_eq!(r.rcode(), NOERROR);
    assert_eq!(txt(&r), host.trim());
    assert_eq!(ch(&s, "version.bind", TXT).rcode(), REFUSED);
}

#[test]
fn empty_identity_turns_them_off_and_other_ch_is_refused() {
    let (_d, s) = server("identity = \"\"");
    assert_eq!(ch(&s, "id.server", TXT).rcode(), REFUSED);
    assert_eq!(ch(&s, "hostname.bind", TXT).rcode(), REFUSED);
    assert_eq!(ch(&s, "ns1.i.test", A).rcode(), REFUSED);
    assert_eq!(ch(&s, "authors.bind", TXT).rcode(), REFUSED);
}
