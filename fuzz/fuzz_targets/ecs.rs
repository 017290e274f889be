//! ECS option parsing (RFC 7871 §6): any body either fails, or gives a
//! subnet whose echo, re-parsed with scope 0, is the same subnet, and which
//! `ClientSubnet::new` rebuilds from its address and SOURCE.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "ecs_check.rs"]
mod ecs_check;

fuzz_target!(|data: &[u8]| ecs_check::run_one(data));
