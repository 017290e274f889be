//! Zone files: arbitrary text through the master-file parser and, when it
//! parses, through the zone builder (apex checks, CNAME rules, cuts, wildcards).
//! `$INCLUDE` is skipped: it reads arbitrary paths, which is the operator's
//! business, not the parser's.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "zone_check.rs"]
mod zone_check;

fuzz_target!(|data: &[u8]| zone_check::run_one(data));
