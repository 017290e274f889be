//! The real `dig` (installed by .ci/run) against the bundled example: what
//! an operator sees.

use crate::common::*;

fn at(s: &Server) -> [String; 3] {
    [
        "@127.0.0.1".to_string(),
        "-p".to_string(),
        s.port().to_string(),
    ]
}

fn run_dig(s: &Server, args: &[&str]) -> String {
    let mut v: Vec<String> = at(s).to_vec();
    v.extend(args.iter().map(|a| a.to_string()));
    v.extend(["+time=2".to_string(), "+tries=1".to_string()]);
    let refs: Vec<&str> = v.iter().map(|a| a.as_str()).collect();
    dig(&refs)
}

/// The records of a section as dig prints them, whitespace collapsed.
fn section(out: &str, name: &str) -> Vec<String> {
    let header = format!(";; {name} SECTION:");
    out.lines()
        .skip_while(|l| !l.starts_with(&header))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

fn flags_line(out: &str) -> String {
    out.lines()
        .find(|l| l.starts_with(";; flags:"))
        .unwrap_or_else(|| panic!("no flags line in:\n{out}"))
        .to_string()
}

#[test]
fn www_a_norec() {
    if !crate::common::need("www_a_norec", &["dig"]) {
        return;
    }
    // dig @127.0.0.1 -p PORT www.example.test A +norec
    let s = Server::example();
    let out = run_dig(&s, &["www.example.test", "A", "+norec"]);
    assert!(out.contains("status: NOERROR"), "{out}");
    let flags = flags_line(&out);
    assert!(flags.starts_with(";; flags: qr aa;"), "{flags}");
    assert!(
        flags.contains("QUERY: 1, ANSWER: 1, AUTHORITY: 0, ADDITIONAL: 1"),
        "{flags}"
    );
    assert_eq!(
        section(&out, "ANSWER"),
        ["www.example.test. 300 IN A 192.0.2.1"]
    );
    assert!(
        out.contains("; EDNS: version: 0, flags:; udp: 1232"),
        "{out}"
    );
}

#[test]
fn rd_copied_and_no_ra() {
    if !crate::common::need("rd_copied_and_no_ra", &["dig"]) {
        return;
    }
    // dig's default sets RD: "qr aa rd", and dig warns that RA is missing.
    let s = Server::example();
    let out = run_dig(&s, &["www.example.test", "A"]);
    assert!(flags_line(&out).starts_with(";; flags: qr aa rd;"), "{out}");
    assert!(
        out.contains("WARNING: recursion requested but not available"),
        "{out}"
    );
}

#[test]
fn over_tcp() {
    if !crate::common::need("over_tcp", &["dig"]) {
        return;
    }
    let s = Server::example();
    let out = run_dig(&s, &["www.example.test", "A", "+norec", "+tcp"]);
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(flags_line(&out).starts_with(";; flags: qr aa;"), "{out}");
    assert_eq!(
        section(&out, "ANSWER"),
        ["www.example.test. 300 IN A 192.0.2.1"]
    );
    assert!(out.contains("(TCP)"), "{out}");
}

#[test]
fn client_subnet_is_echoed() {
    if !crate::common::need("client_subnet_is_echoed", &["dig"]) {
        return;
    }
    // dig +subnet=8.8.8.0/24 www.example.test: scope 0 for a static name.
    let s = Server::example();
    let out = run_dig(
        &s,
        &["www.example.test", "A", "+norec", "+subnet=8.8.8.0/24"],
    );
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(out.contains("; CLIENT-SUBNET: 8.8.8.0/24/0"), "{out}");
    assert_eq!(
        section(&out, "ANSWER"),
        ["www.example.test. 300 IN A 192.0.2.1"]
    );
}

#[test]
fn nxdomain() {
    if !crate::common::need("nxdomain", &["dig"]) {
        return;
    }
    let s = Server::example();
    let out = run_dig(&s, &["nope.example.test", "A", "+norec"]);
    assert!(out.contains("status: NXDOMAIN"), "{out}");
    assert!(flags_line(&out).starts_with(";; flags: qr aa;"), "{out}");
    assert!(section(&out, "ANSWER").is_empty());
    assert_eq!(
        section(&out, "AUTHORITY"),
        ["example.test. 300 IN SOA ns1.example.test. hostmaster.example.test. 2026112901 7200 1800 1209600 300"]
    );
}

#[test]
fn refused_outside_our_zones() {
    if !crate::common::need("refused_outside_our_zones", &["dig"]) {
        return;
    }
    let s = Server::example();
    let out = run_dig(&s, &["www.example.org", "A", "+norec"]);
    assert!(out.contains("status: REFUSED"), "{out}");
}

#[test]
fn cname_followed() {
    if !crate::common::need("cname_followed", &["dig"]) {
        return;
    }
    let s = Server::example();
    let out = run_dig(&s, &["alias.example.test", "A", "+norec"]);
    assert_eq!(
        section(&out, "ANSWER"),
        [
            "alias.example.test. 3600 IN CNAME www.example.test.",
            "www.example.test. 300 IN A 192.0.2.1",
        ]
    );
}
