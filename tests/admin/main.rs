//! The HTTP API, metrics, logging and the query log.
//!
//! One test binary for this area (`cargo test --test admin`); each module
//! is one behaviour. Shared helpers live in the folders beside it.

#[path = "../common/mod.rs"]
mod common;
#[path = "../health_support/mod.rs"]
mod health_support;

mod admin_auth;
mod admin_http;
mod admin_limits;
mod logging;
mod metrics_format;
mod query_log;
