//! Geo names and EDNS Client Subnet: rules, scopes, lookups, database reloads.
//!
//! One test binary for this area (`cargo test --test geo`); each module
//! is one behaviour. Shared helpers live in the folders beside it.

#[path = "../common/mod.rs"]
mod common;
#[path = "../geo_common/mod.rs"]
mod geo_common;

mod ecs_client_address;
mod ecs_protocol;
mod geo_example;
mod geo_lookup;
mod geo_reload;
mod geo_rewrite;
mod geo_rules;
mod geo_scope;
mod geo_sharing;
