//! meridian-probe: checks how a DNS name is answered across client subnets (EDNS Client Subnet,
//! RFC 7871) and across repeated queries (answer rotation).
//!
//! Modules, one job each: [`query`] moves one question to one server, [`servers`] decides where
//! questions go, [`lookup`] turns replies into an outcome (lame servers, CNAME chains), [`ecs`] and
//! [`rotation`] run the two checks and judge them, and [`report`] renders text and JSON.

pub mod ecs;
pub mod lookup;
pub mod query;
pub mod report;
pub mod rotation;
pub mod servers;
