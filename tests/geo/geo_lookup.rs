//! Spec 6: `meridian lookup --config FILE --name NAME [--type A|AAAA]
//! --client ADDR[/LEN]` explains an answer without a server: location, rule,
//! pool, answer and scope, the same as the server's.

use std::net::IpAddr;

use crate::common::{example_config, run, Server};
use crate::geo_common::*;

fn lookup(
    config: &std::path::Path,
    name: &str,
    qtype: &str,
    client: &str,
) -> (i32, String, String) {
    run(&[
        "lookup",
        "--config",
        config.to_str().unwrap(),
        "--name",
        name,
        "--type",
        qtype,
        "--client",
        client,
    ])
}

/// The value of a "key:     value" line.
fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key}: line in\n{out}"))
        .trim()
}

/// Answer addresses printed by lookup, sorted.
fn answer_addrs(out: &str) -> Vec<String> {
    let mut v: Vec<String> = out
        .lines()
        .skip_while(|l| !l.starts_with("answer:"))
        .take_while(|l| l.starts_with("answer:") || l.starts_with("   "))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let t = f.iter().position(|x| *x == "A" || *x == "AAAA")?;
            f.get(t + 1).map(|s| s.to_string())
        })
        .collect();
    v.sort();
    v
}

fn scope_of(out: &str) -> u8 {
    field(out, "scope")
        .trim_start_matches('/')
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn explains_the_example_answers() {
    let cfg = example_config();
    // (client, type, location text, rule, pool, scope)
    let cases = [
        (
            "8.8.8.0/24",
            "A",
            "country US continent NA",
            "continent NA -> pools na, eu",
            "na",
            9,
        ),
        (
            "85.214.0.0/24",
            "A",
            "country DE continent EU subdivisions DE-BE",
            "continent EU -> pools eu, na",
            "eu",
            15,
        ),
        (
            "133.242.0.0/24",
            "A",
            "country JP continent AS",
            "continent AS -> pools as, eu",
            "as",
            8,
        ),
        (
            "200.160.0.0/24",
            "A",
            "country BR continent SA",
            "continent SA -> pools sa, na",
            "sa",
            9,
        ),
        (
            "203.0.0.1",
            "A",
            "country JP continent AS",
            "continent AS -> pools as, eu",
            "as",
            25,
        ),
        (
            "203.0.0.128/25",
            "A",
            "country AU continent OC",
            "default -> pools default, na",
            "default",
            25,
        ),
        (
            "2001:4860::/48",
            "AAAA",
            "country US continent NA",
            "continent NA -> pools na, eu",
            "na",
            32,
        ),
        (
            "2a00:1450:4001::/48",
            "aaaa",
            "country DE continent EU",
            "continent EU -> pools eu, na",
            "eu",
            37,
        ),
    ];
    for (client, t, loc, rule, pool, scope) in cases {
        let (rc, out, err) = lookup(&cfg, "geo.example.test", t, client);
        assert_eq!(rc, 0, "{client}: {out}{err}");
        assert!(
            field(&out, "name").starts_with("geo.example.test. "),
            "{out}"
        );
        assert!(field(&out, "location").starts_with(loc), "{client}:\n{out}");
        assert_eq!(field(&out, "rule"), rule, "{client}:\n{out}");
        assert_eq!(field(&out, "pool"), pool, "{client}:\n{out}");
        assert_eq!(answer_addrs(&out), {
            let mut v = example_pool(pool, t.eq_ignore_ascii_case("AAAA"));
            v.sort();
            v
        });
        assert_eq!(scope_of(&out), scope, "{client}:\n{out}");
    }
    // The database network and the decision block are shown.
    let (_, out, _) = lookup(&cfg, "geo.example.test", "A", "8.8.8.0/24");
    assert!(out.contains("(database network 8.0.0.0/9)"), "{out}");
    assert!(
        field(&out, "scope").contains("8.0.0.0/9, the largest block"),
        "{out}"
    );
    let (_, out, _) = lookup(&cfg, "geo.example.test", "A", "203.0.0.0/24");
    assert!(
        field(&out, "scope").starts_with("/25 (203.0.0.0/25"),
        "{out}"
    );
}

#[test]
fn special_source_zero_and_not_in_database() {
    let cfg = example_config();
    let (rc, out, _) = lookup(&cfg, "geo.example.test", "A", "10.1.2.3");
    assert_eq!(rc, 0);
    assert!(
        field(&out, "client").contains("special-purpose space 10.0.0.0/8"),
        "{out}"
    );
    assert_eq!(field(&out, "pool"), "default");
    assert!(
        field(&out, "scope").starts_with("/8 (10.0.0.0/8, the whole special-purpose block)"),
        "{out}"
    );

    let (rc, out, _) = lookup(&cfg, "geo.example.test", "A", "100.64.0.0/24");
    assert_eq!(rc, 0);
    assert_eq!(scope_of(&out), 10, "{out}");

    let (rc, out, _) = lookup(&cfg, "geo.example.test", "A", "8.8.8.8/0");
    assert_eq!(rc, 0);
    assert!(field(&out, "client").contains("SOURCE 0"), "{out}");
    assert_eq!(
        field(&out, "pool"),
        "na",
        "decided on the source address 8.8.8.8"
    );
    assert_eq!(scope_of(&out), 0);

    let (rc, out, _) = lookup(&cfg, "geo.example.test", "A", "7.7.7.7/32");
    assert_eq!(rc, 0);
    assert_eq!(field(&out, "location"), "not in the database");
    assert_eq!(field(&out, "rule"), "default -> pools default, na");
    assert_eq!(scope_of(&out), 7, "6.0.0.0/7 is default up to 8.0.0.0/9");
}

#[test]
fn shows_the_balancing_decision() {
    // Each member's standing and effective weight with its factors, as
    // `/status` has them (issue #16); health as at start-up.
    let cfg = example_config();
    let (rc, out, err) = lookup(&cfg, "shuffle.example.test.", "A", "8.8.8.0/24");
    assert_eq!(rc, 0, "{err}");
    assert!(
        field(&out, "balance").starts_with("4 of 4 member(s) usable, 100 % pass their checks"),
        "{out}"
    );
    for a in ["192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.13"] {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(a))
            .unwrap_or_else(|| panic!("no line for {a} in\n{out}"));
        assert!(line.contains("usable"), "{line}");
        assert!(
            line.contains("slow start 1.00 × latency 1.00 × load 1.00 × runtime 1 = 1.000"),
            "{line}"
        );
    }
}

#[test]
fn plain_pools_and_static_names() {
    let cfg = example_config();
    let (rc, out, err) = lookup(&cfg, "shuffle.example.test.", "A", "8.8.8.0/24");
    assert_eq!(rc, 0, "{err}");
    assert!(
        field(&out, "name").contains("pool shuffle, mode all"),
        "{out}"
    );
    assert_eq!(field(&out, "pool"), "shuffle");
    assert_eq!(
        answer_addrs(&out),
        vec!["192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.13"]
    );
    assert_eq!(scope_of(&out), 0);

    // A static name: exit 1, with its static answer and scope /0.
    let (rc, out, err) = lookup(&cfg, "www.example.test", "A", "8.8.8.0/24");
    assert_eq!(rc, 1, "{out}");
    assert!(
        err.contains("www.example.test. is not pool- or geo-backed"),
        "{err}"
    );
    assert!(
        err.contains("192.0.2.1") && err.contains("scope /0"),
        "{err}"
    );
    // A name that does not exist in the zone, and one outside every zone.
    let (rc, _, err) = lookup(&cfg, "nope.example.test", "A", "8.8.8.0/24");
    assert_eq!(rc, 1);
    assert!(
        err.contains("not pool- or geo-backed") && err.contains("NXDOMAIN, no records"),
        "{err}"
    );
    let (rc, _, err) = lookup(&cfg, "www.example.org", "A", "8.8.8.0/24");
    assert_eq!(rc, 1);
    assert!(err.contains("not in any zone"), "{err}");
    // Bad arguments.
    for (t, client, want) in [
        ("MX", "8.8.8.8", "A or AAAA"),
        ("A", "8.8.8.8/33", "longer than"),
        ("A", "2001:db8::/129", "longer than"),
        ("A", "not-an-address", "bad --client"),
        ("A", "8.8.8.8/x", "bad --client"),
    ] {
        let (rc, _, err) = lookup(&cfg, "geo.example.test", t, client);
        assert_eq!(rc, 1, "{t} {client}");
        assert!(err.contains(want), "{t} {client}: {err}");
    }
    let (rc, _, err) = lookup(
        std::path::Path::new("/nonexistent/meridian.toml"),
        "geo.example.test",
        "A",
        "8.8.8.8",
    );
    assert_eq!(rc, 1);
    assert!(err.contains("cannot read config"), "{err}");
}

#[test]
fn rules_precedence_and_nearest_order() {
    let cfg = rules_config();
    let cases = [
        (
            "prec.geo.test",
            "8.8.8.0/24",
            "nets 8.8.8.0/24 -> pools net24",
        ),
        (
            "prec.geo.test",
            "8.8.9.0/24",
            "nets 8.8.0.0/16 -> pools net16",
        ),
        (
            "prec.geo.test",
            "8.128.1.0/24",
            "subdivision US-CA -> pools sub",
        ),
        ("prec.geo.test", "8.9.0.0/24", "country US -> pools country"),
        ("prec.geo.test", "5.0.0.0/24", "country DE -> pools country"),
        ("prec.geo.test", "24.0.0.0/24", "continent NA -> pools cont"),
        ("prec.geo.test", "133.242.0.0/24", "default -> pools def"),
        (
            "prec.geo.test",
            "2001:4860:4860::/56",
            "nets 2001:4860:4860::/64 -> pools net24",
        ),
        // Johannesburg: Sao Paulo, Frankfurt, Sydney, Tokyo, Kansas.
        (
            "near.geo.test",
            "41.0.0.0/24",
            "nearest to -26.2041,28.0473 -> pools sa, eu, oc, as, na",
        ),
        // Delhi: Tokyo 5838 km, Frankfurt 6115 km.
        (
            "near.geo.test",
            "49.32.0.0/24",
            "nearest to 28.6139,77.2090 -> pools as, eu, oc, na, sa",
        ),
        ("near.geo.test", "7.7.7.0/24", "default -> pools def"),
    ];
    for (name, client, rule) in cases {
        let (rc, out, err) = lookup(&cfg, name, "A", client);
        assert_eq!(rc, 0, "{err}");
        assert_eq!(field(&out, "rule"), rule, "{name} {client}:\n{out}");
    }
    // Every location the same pool list: scope /0, and it says why.
    let (rc, out, _) = lookup(&cfg, "same.geo.test", "A", "8.8.8.0/24");
    assert_eq!(rc, 0);
    assert_eq!(scope_of(&out), 0);
    assert!(
        field(&out, "scope").contains("every client gets pools one"),
        "{out}"
    );
    // A CNAME to a geo name is explained through the geo name.
    let (rc, out, _) = lookup(&cfg, "alias.geo.test", "A", "85.214.0.0/24");
    assert_eq!(rc, 0);
    assert!(
        field(&out, "name").contains("answered by geo.geo.test."),
        "{out}"
    );
    assert_eq!(field(&out, "pool"), "eu");
}

/// lookup and the running server agree on pool and scope for random clients.
#[test]
fn agrees_with_the_server() {
    let s = Server::example();
    let mut c = Client::new(s.addr);
    let mut rng = Rng(0x100c_0b0b);
    let cfg = example_config();
    for i in 0..40 {
        let (addr, len, t, qt): (IpAddr, u8, &str, u16) = match i % 4 {
            0 => (IpAddr::V4(rng.public_v4()), 24, "A", A),
            1 => (IpAddr::V4(rng.public_v4()), 32, "A", A),
            2 => (IpAddr::V6(rng.public_v6()), 56, "AAAA", AAAA),
            _ => {
                let a = [
                    "8.8.8.8",
                    "85.214.1.1",
                    "133.242.1.1",
                    "200.160.1.1",
                    "203.0.0.200",
                    "5.2.200.1",
                    "2804::1",
                    "2001:8000::1",
                ][rng.below(8) as usize];
                (
                    a.parse().unwrap(),
                    [16, 24, 25, 32][rng.below(4) as usize].min(max_len(a.parse().unwrap())),
                    "A",
                    A,
                )
            }
        };
        let masked = block(addr, len).0;
        let (addrs, scope) = c.geo("geo.example.test.", qt, addr, len);
        let (rc, out, err) = lookup(&cfg, "geo.example.test", t, &format!("{masked}/{len}"));
        assert_eq!(rc, 0, "{err}");
        assert_eq!(
            (answer_addrs(&out), scope_of(&out)),
            (addrs, scope),
            "{masked}/{len}:\n{out}"
        );
    }
}

#[test]
fn the_running_server_explains_the_same_geo_decision() {
    // A serving engine has dropped the database: `--server` gives the
    // compiled decision (no location), never a false "disagrees" warning.
    let api = format!("127.0.0.1:{}", crate::common::free_port());
    let _s = Server::start(&example_config(), &["--http-listen", &api]);
    let cfg = example_config();
    for (client, t) in [
        ("8.8.8.0/24", "A"),
        ("85.214.1.0/24", "A"),
        ("203.0.0.0/24", "A"),
        ("2a00:1450:4001::/48", "AAAA"),
        ("10.1.2.3", "A"),
    ] {
        let (rc, offline, err) = lookup(&cfg, "geo.example.test", t, client);
        assert_eq!(rc, 0, "{err}");
        let (rc, live, err) = run(&[
            "lookup",
            "--server",
            &api,
            "--name",
            "geo.example.test",
            "--type",
            t,
            "--client",
            client,
        ]);
        assert_eq!(rc, 0, "{client}: {err}");
        assert!(
            field(&live, "view").starts_with("the running server"),
            "{live}"
        );
        assert!(field(&live, "location").starts_with("not shown"), "{live}");
        assert!(!live.contains("warning:"), "{live}");
        let pools = |out: &str| field(out, "rule").rsplit("->").next().unwrap().to_string();
        assert_eq!(
            pools(&live),
            pools(&offline),
            "{client}:\n{live}\n{offline}"
        );
        assert_eq!(
            (answer_addrs(&live), scope_of(&live)),
            (answer_addrs(&offline), scope_of(&offline)),
            "{client}:\n{live}\n{offline}"
        );
    }
}
