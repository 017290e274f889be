//! The one-shot commands: `meridian check` and `meridian lookup`.

pub mod check;
pub mod lookup;
