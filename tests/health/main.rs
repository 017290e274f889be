//! Health checks, failover and the signals they feed.
//!
//! One test binary for this area (`cargo test --test health`); each module
//! is one behaviour. Shared helpers live in the folders beside it.

#[path = "../common/mod.rs"]
mod common;
#[path = "../health_support/mod.rs"]
mod health_support;

mod health_api;
mod health_checks;
mod health_failover;
mod health_signals;
