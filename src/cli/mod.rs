//! The one-shot commands: `meridian check`, `meridian lookup`, `meridian dnssec` (key files) and
//! `meridian ctl` (a client of a running server's API; `status` its `ctl status` table).

pub mod check;
pub mod ctl;
pub mod dnssec;
pub mod lookup;
pub mod status;
