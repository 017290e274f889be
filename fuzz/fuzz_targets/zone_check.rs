//! Zone files: arbitrary text through the master-file parser and, when it
//! parses, through `Zone::build` (apex checks, CNAME rules, cuts, wildcards).
//! `$INCLUDE` is skipped: it reads arbitrary paths, which is the operator's
//! business, not the parser's.

use std::path::Path;
use std::sync::OnceLock;

use hickory_proto::rr::Name;
use meridian::zone::{parse::parse_zone_str, Zone};

fn origin() -> &'static Name {
    static O: OnceLock<Name> = OnceLock::new();
    O.get_or_init(|| Name::from_ascii("example.test.").unwrap())
}

pub fn run_one(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.to_ascii_lowercase().contains("include") {
        return;
    }
    let path = Path::new("/nonexistent/fuzz.zone");
    if let Ok(records) = parse_zone_str(text, path, origin()) {
        if let Ok(z) = Zone::build(origin(), path, records) {
            // Every name in the table is inside the zone.
            for n in &z.nodes {
                assert!(meridian_wire::name::is_subdomain(&n.name, &z.origin));
            }
        }
    }
}
