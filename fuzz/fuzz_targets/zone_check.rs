//! Zone files: arbitrary text through the master-file parser and, when it
//! parses, through the zone builder (apex checks, CNAME rules, cuts, wildcards).
//! `$INCLUDE` is skipped: it reads arbitrary paths, which is the operator's
//! business, not the parser's.

use std::path::Path;
use std::sync::OnceLock;

use hickory_proto::rr::Name;
use meridian::zone::Zone;

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
    if let Ok(z) = Zone::from_text(origin(), path, text) {
        // Every name in the table is inside the zone, and every record
        // reads back whole from the flat storage.
        for n in z.nodes() {
            assert!(meridian_wire::name::is_subdomain(n.name(), &z.origin));
            for set in n.rrsets() {
                for rd in set.records() {
                    assert!(
                        rd.pieces()
                            .map(|p| match p {
                                meridian_wire::Piece::Bytes(b) | meridian_wire::Piece::Name(b) =>
                                    2 + b.len(),
                            })
                            .sum::<usize>()
                            == rd.0.len()
                    );
                }
            }
        }
    }
}
