//! meridian-bench: load-testing tools for meridian.
//!
//! [`query`] parses query files and builds wire queries, [`load`] runs the
//! batched UDP load loop, [`hist`] keeps latencies, and [`gen`] writes the
//! reproducible query files for the standard workloads.

pub mod gen;
pub mod hist;
pub mod load;
pub mod query;
