//! UDP and TCP serving, limits, reloads, restarts and privileges.
//!
//! One test binary for this area (`cargo test --test transport`); each module
//! is one behaviour. Shared helpers live in the folders beside it.

#[path = "../common/mod.rs"]
mod common;
#[path = "../health_support/mod.rs"]
mod health_support;

mod broken_pipe;
mod identity;
mod incremental_reload;
mod listen;
mod privileges;
mod reload_memory;
mod reload_shutdown;
mod rrl;
mod server_settings;
mod takeover;
mod tcp;
mod tcp_flood;
mod tcp_limits;
mod udp_dont_fragment;
mod udp_oversize;
mod udp_source_address;
mod udp_source_port_0;
