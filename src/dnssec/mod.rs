//! DNSSEC: so far the key files (`keys`). Signing zones and answers, the
//! `dnssec` config section and denial of existence (issue #17) build on it.

pub mod keys;
pub mod sign;
