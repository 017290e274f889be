//! Geo rules against the running server (tests/data/geo/rules.toml over the
//! bundled database): the precedence CIDR (`nets`, longest prefix), then
//! subdivision, country, continent and default; nearest mode; and the scope
//! of each answer, by raw packets (UDP and TCP) and by dig.

use std::net::IpAddr;

use crate::common::Server;
use crate::geo_common::*;

/// (subnet, pool, scope, why) for prec.geo.test. Scopes follow from the
/// database (geo/example.csv) and the rules; worked out by hand.
const PRECEDENCE: &[(&str, &str, u8, &str)] = &[
    (
        "8.8.8.0/24",
        "net24",
        24,
        "nets 8.8.8.0/24 beats nets 8.8.0.0/16, country US, continent NA",
    ),
    ("8.8.8.8/32", "net24", 24, "inside nets 8.8.8.0/24"),
    ("8.8.9.0/24", "net16", 24, "nets 8.8.0.0/16 around the /24"),
    (
        "8.8.0.0/24",
        "net16",
        21,
        "8.8.0.0/21 is the largest block before 8.8.8.0/24",
    ),
    ("8.8.128.0/24", "net16", 17, "upper half of the /16"),
    ("8.9.0.0/24", "country", 16, "country US beats continent NA"),
    (
        "8.64.0.0/24",
        "country",
        10,
        "8.64.0.0/10 lies in US 8.0.0.0/9",
    ),
    (
        "8.0.0.0/24",
        "country",
        13,
        "8.0.0.0/13 ends before nets 8.8.0.0/16",
    ),
    (
        "8.128.0.0/24",
        "net24",
        24,
        "nets 8.128.0.0/24 beats subdivision US-CA",
    ),
    (
        "8.128.1.0/24",
        "sub",
        24,
        "subdivision US-CA beats country US",
    ),
    ("8.160.0.0/24", "sub", 11, "inside US-CA 8.128.0.0/10"),
    (
        "24.0.0.0/24",
        "cont",
        12,
        "CA-ON: no subdivision or country rule, continent NA",
    ),
    ("187.128.0.0/24", "cont", 10, "MX: continent NA"),
    (
        "85.214.0.0/24",
        "net16",
        16,
        "nets 85.214.0.0/16 beats subdivision DE-BE",
    ),
    ("85.215.0.0/24", "sub", 16, "subdivision DE-BE"),
    (
        "5.0.0.0/24",
        "country",
        16,
        "country DE (key written \"de\")",
    ),
    ("5.1.0.0/24", "cont", 16, "FR: continent EU"),
    (
        "5.2.0.0/24",
        "country",
        16,
        "US 5.2.0.0/17 and DE 5.2.128.0/17 are both country rules",
    ),
    ("81.0.0.0/24", "cont", 11, "GB: continent EU"),
    (
        "133.242.0.0/24",
        "def",
        3,
        "JP: no rule; default, and so is all of 128.0.0.0/3",
    ),
    (
        "41.0.0.0/24",
        "def",
        3,
        "ZA: default, like CN 36.0.0.0/10 and IN 49.32.0.0/11 in 32.0.0.0/3",
    ),
    (
        "200.160.0.0/24",
        "def",
        7,
        "BR: default, merged with the default space around it",
    ),
    (
        "7.7.7.0/24",
        "def",
        7,
        "not in the database: 6.0.0.0/7 up to US 8.0.0.0/9",
    ),
    (
        "203.0.0.0/24",
        "def",
        18,
        "JP and AU halves are both default; 203.0.113.0/24 is special",
    ),
    (
        "2001:4860:4860::/56",
        "net24",
        64,
        "nets 2001:4860:4860::/64: scope longer than SOURCE",
    ),
    ("2001:4860:4860:100::/56", "country", 56, "beside the /64"),
    (
        "2001:4860::/48",
        "country",
        34,
        "US 2001:4860::/32 up to the /64",
    ),
    ("2600:1::/56", "country", 12, "US 2600::/12"),
    ("2a00:1450:4001::/56", "country", 37, "DE"),
    ("2a01:e00::/56", "cont", 26, "FR: continent EU"),
    (
        "2804::/56",
        "def",
        15,
        "BR: default, merged up to MX 2806:2f0::/32",
    ),
];

/// (subnet, pool) for near.geo.test: the nearest site's pool answers.
const NEAREST: &[(&str, &str, u8)] = &[
    ("8.8.8.0/24", "na", 9), // Kansas; 8.128.0.0/10 (California) orders the rest differently
    ("8.128.0.0/24", "na", 10), // California
    ("24.0.0.0/24", "na", 12), // Toronto
    ("187.128.0.0/24", "na", 10), // Mexico City
    ("85.214.0.0/24", "eu", 15), // Berlin
    ("81.0.0.0/24", "eu", 11), // London
    ("133.242.0.0/24", "as", 8), // Tokyo
    ("36.0.0.0/24", "as", 10), // Beijing
    ("49.32.0.0/24", "as", 11), // Delhi: Tokyo 5838 km, Frankfurt 6115 km
    ("200.160.0.0/24", "sa", 9), // Sao Paulo
    ("41.0.0.0/24", "sa", 11), // Johannesburg: Sao Paulo 7428 km, Frankfurt 8697 km
    ("1.128.0.0/24", "oc", 11), // Sydney
    ("203.0.0.0/24", "as", 25), // the JP half of a split /24
    ("203.0.0.128/25", "oc", 25), // the AU half
    ("2804::/56", "sa", 16), // Sao Paulo
    ("2001:8000::/56", "oc", 20), // Sydney
    ("2c0f:f000::/56", "sa", 20), // Johannesburg
    ("2a01:e00::/56", "eu", 26), // Paris
];

fn split(subnet: &str) -> (IpAddr, u8) {
    let (a, l) = subnet.split_once('/').unwrap();
    (a.parse().unwrap(), l.parse().unwrap())
}

fn check(s: &Server, name: &str, cases: &[(&str, &str, u8)]) {
    let mut c = Client::new(s.addr);
    for &(subnet, pool, scope) in cases {
        let (addr, len) = split(subnet);
        for (t, dt, addrs) in [(A, "A", pool4(pool)), (AAAA, "AAAA", pool6(pool))] {
            let req = ecs_query(name, t, addr, len);
            for r in [c.ask(&req), tcp(s, &req)] {
                assert_eq!(r.rcode(), NOERROR);
                assert_eq!(
                    (r.addrs(), r.scope()),
                    (addrs.clone(), scope),
                    "{name} {subnet} {dt}"
                );
            }
            let d = dig(s.addr, name, dt, &[&format!("+subnet={subnet}")]);
            assert_eq!(d.addrs, addrs, "{name} {subnet} {dt}:\n{}", d.text);
            assert_eq!(
                d.subnet,
                Some(format!("{subnet}/{scope}")),
                "{name} {subnet} {dt}:\n{}",
                d.text
            );
        }
    }
}

#[test]
fn precedence_cidr_subdivision_country_continent_default() {
    if !crate::common::need(
        "precedence_cidr_subdivision_country_continent_default",
        &["dig"],
    ) {
        return;
    }
    let s = Server::start(&rules_config(), &[]);
    let cases: Vec<(&str, &str, u8)> = PRECEDENCE.iter().map(|&(a, p, sc, _)| (a, p, sc)).collect();
    check(&s, "prec.geo.test.", &cases);
}

#[test]
fn nearest_mode() {
    if !crate::common::need("nearest_mode", &["dig"]) {
        return;
    }
    let s = Server::start(&rules_config(), &[]);
    check(&s, "near.geo.test.", NEAREST);
    // Outside the database: the default list; special space: decided on the
    // source (127.0.0.1 -> nets 127.0.0.0/8 -> src4), scope = the block.
    check(
        &s,
        "near.geo.test.",
        &[
            ("7.7.7.0/24", "def", 7),
            ("10.1.0.0/16", "src4", 8),
            ("2001:db8::/48", "src4", 32),
        ],
    );
    let mut c = Client::new(s.addr);
    let r = c.ask(&QueryBuilder::new("near.geo.test.", A).id(1).build());
    assert_eq!(r.addrs(), pool4("src4"));
}

/// The continent rules of the bundled example, in the fixture (with nets
/// for the test client's address), agree with the example server.
#[test]
fn continent_rules_match_the_example() {
    if !crate::common::need("continent_rules_match_the_example", &["dig"]) {
        return;
    }
    let s = Server::start(&rules_config(), &[]);
    check(
        &s,
        "geo.geo.test.",
        &[
            ("8.8.8.0/24", "na", 9),
            ("85.214.0.0/24", "eu", 15),
            ("133.242.0.0/24", "as", 8),
            ("200.160.0.0/24", "sa", 9),
            ("203.0.0.0/24", "as", 25),
            ("203.0.0.128/25", "def", 25),
            ("1.128.0.0/24", "def", 8),
            ("41.0.0.0/24", "def", 5),
            ("2001:4860::/48", "na", 32),
            ("2a00:1450:4001::/48", "eu", 37),
        ],
    );
}

/// Config errors in geo rules name the line.
#[test]
fn bad_geo_rules_are_config_errors() {
    let dir = crate::common::TempDir::new("geo-bad-rules");
    let zone = fixture("geo.test.zone");
    let base = format!(
        "[geo]\ndatabase = \"{}\"\n[[zone]]\norigin = \"geo.test.\"\nfile = \"{}\"\n\
         [pool.a]\nmembers = [\"192.0.2.1\"]\n[pool.b]\nmembers = [\"192.0.2.2\"]\nlocation = [1.0, 2.0]\n",
        crate::common::root().join("geo/example.mmdb").display(),
        zone.display()
    );
    let cases = [
        (
            "[name.\"x.geo.test\".geo]\ncontinent = { EU = [\"a\"] }\n",
            "default",
        ),
        (
            "[name.\"x.geo.test\".geo]\ndefault = [\"nope\"]\n",
            "unknown pool",
        ),
        (
            "[name.\"x.geo.test\".geo]\ndefault = []\n",
            "empty pool list",
        ),
        (
            "[name.\"x.geo.test\".geo]\ndefault = [\"a\"]\nnets = { \"10.0.0.1/8\" = [\"a\"] }\n",
            "host bits",
        ),
        (
            "[name.\"x.geo.test\".geo]\ndefault = [\"a\"]\nnets = { \"10.0.0.0/33\" = [\"a\"] }\n",
            "bad network",
        ),
        (
            "[name.\"x.geo.test\".geo]\ndefault = [\"a\"]\nnearest = [\"a\"]\n",
            "no location",
        ),
        (
            "[name.\"x.geo.test\".geo]\ndefault = [\"a\"]\nregion = { EU = [\"a\"] }\n",
            "region",
        ),
        // Keys that could never match a database record.
        ("[name.\"x.geo.test\".geo]\ndefault = [\"a\"]\ncontinent = { EUR = [\"a\"] }\n", "continent key \"EUR\""),
        ("[name.\"x.geo.test\".geo]\ndefault = [\"a\"]\ncountry = { DEU = [\"a\"] }\n", "country key \"DEU\""),
        ("[name.\"x.geo.test\".geo]\ndefault = [\"a\"]\nsubdivision = { CA = [\"a\"] }\n", "subdivision key \"CA\""),
        // The same key twice in other spellings.
        ("[name.\"x.geo.test\".geo]\ndefault = [\"a\"]\ncountry = { de = [\"a\"], DE = [\"b\"] }\n", "listed twice"),
        (
            "[name.\"x.geo.test\".geo]\ndefault = [\"a\"]\nnets = { \"2001:db8::/32\" = [\"a\"], \"2001:0db8::/32\" = [\"b\"] }\n",
            "network 2001:db8::/32 is listed twice",
        ),
    ];
    for (extra, want) in cases {
        let cfg = dir.write("bad.toml", &format!("{base}{extra}"));
        let (rc, out, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
        assert_eq!(rc, 1, "{extra}: {out}{err}");
        assert!(err.contains(want), "{extra}: want {want:?} in {err}");
        assert!(err.contains("bad.toml:"), "names the file and line: {err}");
    }
    // AAAA must not exist for some locations only: a NODATA has scope 0.
    let v6 = "[pool.c]\nmembers = [\"192.0.2.3\", \"2001:db8::3\"]\n";
    let cfg = dir.write(
        "fam.toml",
        &format!("{base}{v6}[name.\"x.geo.test\".geo]\ndefault = [\"a\"]\ncountry = {{ DE = [\"c\"] }}\n"),
    );
    let (rc, _, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(rc, 1);
    assert!(
        err.contains("AAAA records would exist for some clients only"),
        "{err}"
    );
    assert!(
        err.contains("pools [c] have IPv6 members, pools [a] have none"),
        "{err}"
    );
    // A failover list that reaches an IPv6 pool everywhere is fine, and so
    // is IPv6 nowhere.
    for rules in [
        "default = [\"a\", \"c\"]\ncountry = { DE = [\"c\"] }",
        "default = [\"a\"]\ncountry = { DE = [\"b\"] }",
    ] {
        let cfg = dir.write(
            "fam-ok.toml",
            &format!("{base}{v6}[name.\"x.geo.test\".geo]\n{rules}\n"),
        );
        let (rc, out, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
        assert_eq!(rc, 0, "{rules}: {out}{err}");
    }
    // Location rules need a database.
    let nodb = base.replacen("[geo]\ndatabase", "#[geo]\n#database", 1);
    let cfg = dir.write(
        "nodb.toml",
        &format!(
            "{nodb}[name.\"x.geo.test\".geo]\ndefault = [\"a\"]\ncountry = {{ DE = [\"b\"] }}\n"
        ),
    );
    let (rc, _, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(rc, 1);
    assert!(err.contains("no [geo] database"), "{err}");
    // nets and default alone need none.
    let cfg = dir.write("nets.toml", &format!("{nodb}[name.\"x.geo.test\".geo]\ndefault = [\"a\"]\nnets = {{ \"8.8.8.0/24\" = [\"b\"] }}\n"));
    let (rc, out, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(rc, 0, "{out}{err}");
}
