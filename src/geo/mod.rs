//! Geo selection: map a client address to an ordered list of pools, and to
//! the ECS scope that answer is valid for.
//!
//! The scope is the length of the largest aligned CIDR block around the
//! client in which every address gets the same pools (RFC 7871 §7.2.1:
//! scopes must partition the space, never overlap; §7.4: the scope must not
//! claim addresses that would be answered differently). Special-purpose
//! space (private, loopback, documentation...) never shares a block with
//! public space, because an ECS address there is ignored (§10).
//!
//! Flow: [`GeoDb`] reads a MaxMind DB, [`RuleSet`] says which pools serve
//! which place, [`GeoMap::compile`] turns both into the exact partition, and
//! [`GeoMap::decide`] answers per query with one table lookup.

pub mod continents;
pub mod countries;
pub mod db;
pub mod partition;
pub mod rules;
pub mod special;

#[cfg(test)]
mod testdb;
#[cfg(test)]
mod tests;

pub use db::{GeoDb, Location, Schema};
pub use rules::{decide_direct, Decision, GeoMap, GeoTable, Plan, RuleSet, TableCache};
pub use special::{public_len, special_block, special_blocks};
