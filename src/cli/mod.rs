//! The one-shot commands: `meridian check`, `meridian lookup` and
//! `meridian ctl` (a client of a running server's API).

pub mod check;
pub mod ctl;
pub mod lookup;
