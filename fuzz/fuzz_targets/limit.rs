//! Every answer fits its limit: over UDP the client's EDNS size (512 at
//! least; 512 without EDNS) capped by the server's `edns_udp_payload`, over
//! TCP 65535, and the RRL slip form too (see limit_check.rs). The first
//! input octet picks the config (the bundled example, or a copy with a long
//! NSID and another UDP size); the rest is the query, answered as it is and
//! as the variants that reach the NSID and TSIG paths.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

#[path = "limit_check.rs"]
mod limit_check;

fn cases() -> &'static [limit_check::Case] {
    static C: OnceLock<Vec<limit_check::Case>> = OnceLock::new();
    C.get_or_init(|| limit_check::engines(&limit_check::root(env!("CARGO_MANIFEST_DIR"))))
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, query)) = data.split_first() else {
        return;
    };
    let cases = cases();
    let case = &cases[pick as usize % cases.len()];
    for q in limit_check::variants(query, pick as u64 + 1) {
        limit_check::run_one(case, &q);
    }
});
