//! Puts the git commit into `meridian-probe --version`: the root build.rs,
//! shared rather than copied.
include!("../../build.rs");
