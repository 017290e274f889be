//! Address pools and their balancing rules: modes, families, caps, panic, slow start, p2c, sticky, weights.
//!
//! One test binary for this area (`cargo test --test pools`); each module
//! is one behaviour. Shared helpers live in the folders beside it.

#[path = "../common/mod.rs"]
mod common;
#[path = "../health_support/mod.rs"]
mod health_support;
#[path = "../pool_common/mod.rs"]
mod pool_common;

mod ejection_cap;
mod error_penalty;
mod latency_noise;
mod outlier;
mod p2c;
mod panic_threshold;
mod pool_config;
mod pool_families;
mod pool_metrics;
mod pool_modes;
mod pool_rotate_order;
mod runtime_weight;
mod slow_start;
mod spillover;
mod sticky;
mod weighted_signals;
