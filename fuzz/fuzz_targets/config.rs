//! The config file: arbitrary TOML through the strict parser and, when it
//! names only the bundled zone and geo files, through the whole engine
//! build (zones, pools, checks, geo rules, rate limiting, limits). Errors
//! must carry a line inside the text.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "config_check.rs"]
mod config_check;

fuzz_target!(|data: &[u8]| config_check::run_one(data));
