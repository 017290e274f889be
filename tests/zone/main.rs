//! Answers from zone data: CNAME and DNAME, delegations, wildcards, negative answers, ANY, record types.
//!
//! One test binary for this area (`cargo test --test zone`); each module
//! is one behaviour. Shared helpers live in the folders beside it.

#[path = "../common/mod.rs"]
mod common;

mod additional;
mod any;
mod cname;
mod cname_dnssec_types;
mod delegation;
mod dname;
mod negative;
mod qclass_any;
mod wildcard;
mod zone_types;
