//! The DNS message as meridian writes it: EDNS, cookies, TSIG, errors, flags, truncation, malformed input.
//!
//! One test binary for this area (`cargo test --test wire`); each module
//! is one behaviour. Shared helpers live in the folders beside it.

#[path = "../common/mod.rs"]
mod common;

mod cookies;
mod dig;
mod ede;
mod edns;
mod errors;
mod flags;
mod fuzz_regressions;
mod malformed;
mod nsid;
mod opt_placement;
mod truncation;
mod tsig;
