//! Geo names whose rules have one shape share one decision table (gdnsd's
//! map/resource split): `meridian check` says which table each name uses,
//! and a served name answers from its own pools with the scope it would
//! have alone.

use crate::common::{Server, TempDir, Q};
use hickory_proto::rr::RecordType;

const ZONE: &str = "$ORIGIN cdn.test.
@ 300 IN SOA ns1 hostmaster 1 7200 1800 1209600 300
@ 300 IN NS ns1
ns1 300 IN A 192.0.2.53
";

/// `n` names on the region map over pools na/eu/as, `m` more on the same
/// map over na2/eu2/as2 (the same shape), and `other`, whose map has no
/// JP rule (another shape). Swapping pools would not make another shape:
/// the shape is the rules with pools as labels.
fn config(dir: &TempDir, n: usize, m: usize) -> std::path::PathBuf {
    let geo = crate::common::root().join("geo/example.mmdb");
    let mut t = format!(
        "[geo]\ndatabase = {:?}\n\n[[zone]]\norigin = \"cdn.test.\"\nfile = \"cdn.zone\"\n\n",
        geo.display().to_string()
    );
    for (p, a) in [
        ("na", 10),
        ("eu", 20),
        ("as", 30),
        ("na2", 110),
        ("eu2", 120),
        ("as2", 130),
    ] {
        t += &format!("[pool.{p}]\nmembers = [\"198.18.0.{a}\"]\n");
    }
    let map = |name: &str, [na, eu, asia]: [&str; 3], jp: bool| {
        let country = if jp {
            format!("country = {{ JP = [\"{asia}\"] }}\n")
        } else {
            String::new()
        };
        format!(
            "\n[name.\"{name}.cdn.test\"]\n[name.\"{name}.cdn.test\".geo]\n\
             continent = {{ NA = [\"{na}\", \"{eu}\"], EU = [\"{eu}\", \"{na}\"], AS = [\"{asia}\", \"{eu}\"] }}\n\
             {country}default = [\"{na}\"]\n"
        )
    };
    for i in 0..n {
        t += &map(&format!("a{i}"), ["na", "eu", "as"], true);
    }
    for i in 0..m {
        t += &map(&format!("b{i}"), ["na2", "eu2", "as2"], true);
    }
    t += &map("other", ["na", "eu", "as"], false);
    dir.write("cdn.zone", ZONE);
    dir.write("cdn.toml", &t)
}

fn check(cfg: &std::path::Path) -> String {
    let (rc, out, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(rc, 0, "{err}");
    out
}

#[test]
fn one_shape_one_table_in_check() {
    let dir = TempDir::new("geo-sharing");
    let cfg = config(&dir, 40, 10);
    let out = check(&cfg);
    assert!(
        out.contains("geo tables: 2 for 51 geo name(s)"),
        "40 + 10 names of one shape share a table, `other` has its own:\n{out}"
    );
    let table_of = |name: &str| {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("name {name}.cdn.test.:")))
            .unwrap_or_else(|| panic!("{name} in\n{out}"));
        line.split("geo table ")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .to_string()
    };
    let shared = table_of("a0");
    for name in ["a1", "a39", "b0", "b9"] {
        assert_eq!(table_of(name), shared, "{name}");
    }
    assert_ne!(table_of("other"), shared);
}

#[test]
fn shared_names_answer_from_their_own_pools_with_the_same_scopes() {
    let dir = TempDir::new("geo-sharing-serve");
    let cfg = config(&dir, 3, 1);
    let s = Server::start(&cfg, &[]);
    // DE (EU), US (NA), JP (country rule), an address the database lacks.
    for (subnet, a, b) in [
        ("85.214.0.0/24", "198.18.0.20", "198.18.0.120"),
        ("8.8.8.0/24", "198.18.0.10", "198.18.0.110"),
        ("203.0.0.0/24", "198.18.0.30", "198.18.0.130"),
        ("1.0.0.0/24", "198.18.0.10", "198.18.0.110"),
    ] {
        let ra = s.query(&Q::new("a2.cdn.test", RecordType::A).ecs(subnet));
        let rb = s.query(&Q::new("b0.cdn.test", RecordType::A).ecs(subnet));
        assert_eq!(crate::common::addrs(&ra), vec![a.to_string()], "{subnet}");
        assert_eq!(crate::common::addrs(&rb), vec![b.to_string()], "{subnet}");
        assert_eq!(
            crate::common::scope(&ra),
            crate::common::scope(&rb),
            "{subnet}"
        );
        assert!(crate::common::scope(&ra).is_some_and(|l| l > 0), "{subnet}");
    }
}
