//! meridian: an authoritative DNS server that balances load through DNS.
//!
//! The crate is split by job: `wire` parses queries (RFC 1035 §4, RFC 6891),
//! `ecs` validates EDNS Client Subnet (RFC 7871), `zone` loads master files,
//! `pool` picks addresses, `geo` maps clients to pools with exact scopes,
//! `health` tracks members, `engine` builds the serving state from the
//! config, `answer` renders responses, and `server` moves packets.

pub mod answer;
pub mod config;
pub mod ecs;
pub mod engine;
pub mod error;
pub mod geo;
pub mod health;
pub mod http;
pub mod metrics;
pub mod pool;
pub mod prerender;
pub mod render;
pub mod rrl;
pub mod run;
pub mod server;
pub mod summary;
pub mod wire;
pub mod zone;
