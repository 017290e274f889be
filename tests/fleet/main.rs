//! Fleet mode against a real etcd.
//!
//! One test binary for this area (`cargo test --test fleet`); each module
//! is one behaviour. Shared helpers live in the folders beside it.

#[path = "../common/mod.rs"]
mod common;
#[path = "../fleet_support/mod.rs"]
mod fleet_support;
#[path = "../health_support/mod.rs"]
mod health_support;

mod fleet_auth;
mod fleet_checks;
mod fleet_config;
mod fleet_control;
mod fleet_errors;
mod fleet_members;
mod fleet_orphaned;
mod fleet_push_size;
mod fleet_push_wait;
mod fleet_restart;
mod fleet_script;
mod fleet_secrets;
mod fleet_settings;
mod fleet_slow_reload;
mod fleet_status;
mod fleet_tls;
