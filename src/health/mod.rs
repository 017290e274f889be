//! Member health: the check definitions from the config, the lock-free
//! state table that the answer path reads, and the checkers that write it.
//! One entry (and one probe) per distinct (address, port, check), however
//! many pools share it.
//!
//! - `spec`: the check kinds and settings, and one entry per distinct target;
//! - `state`: the lock-free table the answer path reads;
//! - `probe`: one TCP connect, HTTP GET or HTTPS GET, with its verdict;
//! - `checker`: one task per entry, the rise/fall state machine, restarts on
//!   reload;
//! - `overrides`: the operator overrides, a value the daemon owns;
//! - `signal`: the measured signals as pure types: the round-trip
//!   peak-EWMA and the damped reported load, which the checker feeds and
//!   the table publishes (`HealthTable::rtt_estimate_us`, `HealthTable::load`)
//!   for the weight computation to read, with `HealthTable::generation` to
//!   say that something changed.
//!
//! The answer path reads only `HealthTable::is_up` (two relaxed atomic loads
//! and a bool); everything else here runs on the tokio runtime.

pub mod checker;
pub mod overrides;
pub mod probe;
pub mod signal;
pub mod spec;
pub mod state;

pub use checker::Checker;
pub use overrides::{override_for, OverrideMap, Overrides};
pub use signal::{DampedLoad, PeakEwma};
pub use spec::{carry_map, Check, CheckKind, CheckSpec, LoadRead, LoadSource, ProbeKey};
pub use state::*;

#[cfg(test)]
mod tests;
