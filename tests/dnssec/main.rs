//! DNSSEC: keys, signing, dynamic answers, rollovers, and validation by real validators.
//!
//! One test binary for this area (`cargo test --test dnssec`); each module
//! is one behaviour. Shared helpers live in the folders beside it.

#[path = "../common/mod.rs"]
mod common;
#[path = "../health_support/mod.rs"]
mod health_support;
#[path = "../lab_common/mod.rs"]
mod lab_common;
#[path = "../signed_common/mod.rs"]
mod signed_common;

mod dnssec_answers;
mod dnssec_config;
mod dnssec_dynamic;
mod dnssec_keys;
mod dnssec_metrics;
mod dnssec_rollover;
mod dnssec_validate;
mod dnssec_validate_knot;
