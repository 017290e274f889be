//! A reload rebuilds only what changed: a zone whose files did not change
//! is kept (not read again), a change to pools alone rebuilds neither zones
//! nor geo tables, and a new geo database rebuilds the tables only. Seen
//! through `meridian_zone_loads_total`, `meridian_geo_table_builds_total`
//! and the answers.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::common::{Server, TempDir, Q};
use hickory_proto::rr::RecordType;

fn metric(api: SocketAddr, name: &str) -> u64 {
    let text = crate::health_support::metrics(api);
    crate::health_support::metric(&text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"))
        as u64
}

fn reload(s: &Server) -> String {
    s.reload(Duration::from_secs(30))
}

/// Bump a file's mtime past the filesystem's resolution.
fn touch_later(p: &std::path::Path) {
    let f = std::fs::File::options().append(true).open(p).unwrap();
    let t = std::time::SystemTime::now() + Duration::from_secs(5);
    f.set_modified(t).unwrap();
}

#[test]
fn only_what_changed_is_rebuilt() {
    let dir = TempDir::new("incremental");
    let root = crate::common::root();
    std::fs::create_dir_all(dir.0.join("zones")).unwrap();
    std::fs::create_dir_all(dir.0.join("geo")).unwrap();
    let zone = dir.0.join("zones/example.test.zone");
    std::fs::copy(root.join("zones/example.test.zone"), &zone).unwrap();
    let db = dir.0.join("geo/example.mmdb");
    std::fs::copy(root.join("geo/example.mmdb"), &db).unwrap();
    let base = std::fs::read_to_string(root.join("zones/meridian.toml")).unwrap();
    let cfg = dir.0.join("zones/meridian.toml");
    std::fs::write(&cfg, &base).unwrap();

    let api_port = crate::common::free_port();
    let api: SocketAddr = format!("127.0.0.1:{api_port}").parse().unwrap();
    let s = Server::start(&cfg, &["--http-listen", &api.to_string()]);
    let zones = "meridian_zone_loads_total";
    let tables = "meridian_geo_table_builds_total";
    assert_eq!((metric(api, zones), metric(api, tables)), (1, 1));

    // A pool member changes: nothing else is rebuilt.
    std::fs::write(&cfg, base.replace("192.0.2.30", "192.0.2.39")).unwrap();
    let line = reload(&s);
    assert!(
        line.contains("0 of 1 zone(s) read, 0 geo table(s) built"),
        "{line}"
    );
    assert_eq!((metric(api, zones), metric(api, tables)), (1, 1));
    let one = s.query(&Q::new("one.example.test", RecordType::A));
    assert!(!crate::common::addrs(&one).contains(&"192.0.2.30".to_string()));
    let txt = s.query(&Q::new("www.example.test", RecordType::TXT));
    assert_eq!(txt.answers.len(), 1, "the kept zone still answers");

    // The zone file changes: it is read again; the geo tables stay.
    let mut z = std::fs::read_to_string(&zone).unwrap();
    z.push_str("fresh IN TXT \"added\"\n");
    std::fs::write(&zone, z).unwrap();
    touch_later(&zone);
    let line = reload(&s);
    assert!(
        line.contains("1 of 1 zone(s) read, 0 geo table(s) built"),
        "{line}"
    );
    assert_eq!((metric(api, zones), metric(api, tables)), (2, 1));
    let fresh = s.query(&Q::new("fresh.example.test", RecordType::TXT));
    assert_eq!(fresh.answers.len(), 1);

    // A new database (replaced by rename): the tables only. The database
    // watcher may reload before the SIGHUP does; either way one table.
    let tmp = dir.0.join("geo/example.mmdb.new");
    std::fs::copy(root.join("geo/example.mmdb"), &tmp).unwrap();
    std::fs::rename(&tmp, &db).unwrap();
    reload(&s);
    let t = Instant::now();
    while metric(api, tables) < 2 {
        assert!(t.elapsed() < Duration::from_secs(10), "tables not rebuilt");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!((metric(api, zones), metric(api, tables)), (2, 2));
    let geo = s.query(&Q::new("geo.example.test", RecordType::A).ecs("85.214.0.0/24"));
    assert_eq!(
        crate::common::scope(&geo),
        Some(15),
        "the rebuilt table gives the same scope"
    );

    // Nothing changed at all: nothing is rebuilt.
    let line = reload(&s);
    assert!(
        line.contains("0 of 1 zone(s) read, 0 geo table(s) built"),
        "{line}"
    );
}
