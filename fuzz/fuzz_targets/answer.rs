//! The whole answer path: query bytes in, response bytes out, with the
//! bundled example (zones/meridian.toml, its zone and geo database) loaded
//! once. Every input is answered over UDP (from a few client addresses, so
//! geo rules run) and over TCP, and every response is checked:
//!
//! - it parses back with hickory-proto and walks strictly (counts honoured,
//!   no bytes left over); its ID is the query's and QR is set;
//! - over UDP it fits the limit (512 without EDNS, else min(client, 1232));
//! - a truncated (TC) answer holds only the question and the OPT record;
//! - the question is the query's, byte for byte (case kept);
//! - an ECS echo carries the query's FAMILY, SOURCE and ADDRESS; a query
//!   whose ECS was accepted (the answer is not FORMERR) gets one back; a
//!   query without OPT gets no OPT back;
//! - the RRL slip rewrite of the response is still a valid message.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use meridian::engine::Engine;

#[path = "answer_check.rs"]
mod answer_check;

fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../zones/meridian.toml");
        meridian::answer::load(&p, None).expect("the bundled example loads")
    })
}

fuzz_target!(|data: &[u8]| {
    answer_check::run_one(engine(), data);
});
