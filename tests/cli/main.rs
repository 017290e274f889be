//! The command line, the manual, packaging and the repository's own rules.
//!
//! One test binary for this area (`cargo test --test cli`); each module
//! is one behaviour. Shared helpers live in the folders beside it.

#[path = "../common/mod.rs"]
mod common;
#[path = "../health_support/mod.rs"]
mod health_support;

mod config_errors;
mod ctl;
mod docs_examples;
mod layers;
mod man_pages;
mod packaging;
mod skips_visible;
mod systemd_unit;
mod version;
