//! meridian: an authoritative DNS server that balances load through DNS.
//!
//! The modules form layers, each using only those below it (ARCHITECTURE.md
//! lists the order; `tests/cli/layers.rs` enforces it). From the bottom:
//! `error` and `metrics`; `zone`, `geo`, `pool`, `health` and `dnssec` (key
//! files); `config` (the file checked into those modules' types) and
//! `balance` (the balancing decisions); `engine` (config → immutable
//! serving state); `answer` (query → response); `transport` (UDP and TCP)
//! and `cli`; `fleet` (etcd, cargo feature `fleet`); `admin` (the HTTP
//! API); `daemon` (the process). The message format itself is the
//! `meridian-wire` crate, below all of them.

#![warn(missing_docs)]

pub mod admin;
pub mod answer;
pub mod balance;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod dnssec;
pub mod engine;
pub mod error;
#[cfg(feature = "fleet")]
pub mod fleet;
pub mod geo;
pub mod health;
pub mod metrics;
pub mod pool;
pub mod transport;
pub mod zone;
