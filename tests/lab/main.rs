//! Real resolvers (Unbound, PowerDNS Recursor) and the probe in front of meridian.
//!
//! One test binary for this area (`cargo test --test lab`); each module
//! is one behaviour. Shared helpers live in the folders beside it.

#[path = "../common/mod.rs"]
mod common;
#[path = "../lab_common/mod.rs"]
mod lab_common;

mod lab_balancing;
mod lab_cache;
mod lab_failover;
mod lab_probe;
mod lab_script;
mod probe_verdicts;
