//! The configuration: the TOML file as written (`file`), its text for
//! error lines (`source`), and one module per section that checks it into
//! the types the server uses: `server`, `api`, `zones` (with `dnssec`), `checks`, `pools`, `geo`
//! and `names`. Parsing is strict: unknown keys are errors, and every error
//! names the file and line.

pub mod api;
pub mod checks;
pub mod dnssec;
pub mod file;
pub mod fleet;
pub mod geo;
pub mod names;
pub mod pools;
pub mod server;
pub mod source;
pub mod zones;

pub use api::{ApiSettings, Scope, Token};
pub use file::*;
pub use server::{QueryLogConfig, QueryLogSink, RrlConfig, ServerSettings};
pub use source::{parse_listen, Source};
