//! Fleet mode (#18, cargo feature `fleet`): the operator state that every
//! node of a fleet must agree on lives in etcd, not in one process.
//!
//! Overrides (up, down, drain) and runtime weights are keys under the
//! fleet's prefix, one per target:
//!
//! - `{prefix}overrides/{address}` or `{prefix}overrides/{address}#{port}`
//! - `{prefix}weights/{address}` or `{prefix}weights/{address}#{port}`
//!
//! each holding a JSON [`Entry`]: the value, who set it (the API token's
//! name), on which node, and when. A write through any node's API goes to
//! etcd first (nothing changes if etcd refuses it), then applies locally.
//! Every node reads the whole prefix at start and then watches it, so a
//! change made on one node is served by all of them within the watch's
//! latency (milliseconds on a LAN), and survives restarts. When etcd is
//! unreachable the node keeps what it has and retries with back-off; on
//! reconnecting it reads the prefix again and drops what was cleared
//! meanwhile.
//!
//! Each node also keeps `{prefix}nodes/{node}` under a lease of `lease`
//! seconds (default 5), rewritten every [`CONTACT`] with its last
//! contact, the config generation it serves and its view of member
//! health: `meridian fleet status` lists them, and a node that dies
//! leaves the list when its lease runs out.
//!
//! Invariants: the query path never waits for etcd; overrides and weights
//! are applied through the same `Overrides` and `RuntimeWeights` the
//! single-node API uses, so a fleet node answers exactly as a single node
//! with the same state would.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{
    Client, ConnectOptions, EventType, GetOptions, Identity, PutOptions, TlsOptions, WatchOptions,
};
use serde::{Deserialize, Serialize};

use crate::config::fleet::FleetSettings;
use crate::engine::RuntimeWeights;
use crate::health::{Overrides, OVR_NONE};
use crate::transport::ServerState;

mod checks;
mod follow;
mod link;
mod members;
mod push;
mod results;
mod revision;
mod shared;
mod state_dir;
mod status;
mod store;

pub use link::{connect, read_secrets};
use push::{absolutize, b64, sha256_hex};
pub use push::{await_nodes, push, Pushed, Stored};
pub use results::checkers_of;
use results::*;
pub use revision::{last_accepted, recompose};
pub use status::{settings_of, status_table};
pub use store::Pruned;

/// A request to serve the config at a path (a pushed revision), and where
/// the daemon says whether it serves.
pub type Switch = (std::path::PathBuf, tokio::sync::oneshot::Sender<bool>);

/// How often a node renews its lease and rewrites its registration.
pub const CONTACT: Duration = Duration::from_secs(1);

/// A node's registration, as stored in etcd and listed by `fleet status`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The node's name.
    pub node: String,
    /// When it last wrote this, in Unix milliseconds.
    pub contact_ms: u64,
    /// The engine generation it serves (changes with every reload).
    pub generation: u64,
    /// The config file it serves.
    pub config: String,
    /// Health entries (distinct address, port, check) it knows.
    pub entries: usize,
    /// Of those, how many it sees down (checks or overrides).
    pub down: usize,
    /// The etcd revision of the pushed config it serves (0: its local one).
    #[serde(default)]
    pub revision: i64,
    /// The last pushed revision it refused, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
    /// Where its config came from: `etcd`, `state_dir` or `local`.
    #[serde(default)]
    pub source: String,
}

/// A pushed revision a node refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    /// The revision.
    pub revision: i64,
    /// Why, in a sentence.
    pub why: String,
}

/// One shared override or weight, as stored in etcd.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// `up`, `down` or `drain` for an override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The factor for a runtime weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// The API token's name that set it.
    pub by: String,
    /// The node whose API took the write.
    pub node: String,
    /// When, in Unix milliseconds.
    pub at_ms: u64,
}

/// What a key is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Override,
    Weight,
}

impl Kind {
    fn dir(self) -> &'static str {
        match self {
            Kind::Override => "overrides/",
            Kind::Weight => "weights/",
        }
    }
}

type Target = (Kind, IpAddr, Option<u16>);

/// A fleet node's link to etcd.
pub struct Fleet {
    settings: FleetSettings,
    client: tokio::sync::Mutex<Option<Client>>,
    /// The entries in force, as last read from etcd (for `/status`).
    entries: Mutex<BTreeMap<Target, Entry>>,
    connected: AtomicBool,
    overrides: Arc<Overrides>,
    weights: Arc<RuntimeWeights>,
    server: Arc<ServerState>,
    switch: tokio::sync::mpsc::Sender<Switch>,
    /// The last pushed revision refused here, and why (for `/status`).
    refused: Mutex<Option<Refusal>>,
    /// Divided health checks: the nodes holding a lease, and each entry's
    /// shared results by node (`up`, Unix ms).
    checks: Mutex<SharedChecks>,
    /// When etcd was lost (None: following it).
    lost_since: Mutex<Option<std::time::Instant>>,
    /// The newest `{prefix}config` value seen and its etcd revision, for
    /// the revision task (the newest wins; the watch never waits for it).
    offered: tokio::sync::watch::Sender<Option<(i64, Arc<[u8]>)>>,
    /// Rewrite the registration now (a revision was served or refused).
    contact_now: tokio::sync::Notify,
    /// Where the served config came from (a [`Source`] as u8).
    source: std::sync::atomic::AtomicU8,
    /// Why etcd was last lost or out of reach (for `/status`).
    failure: Mutex<Option<link::Failure>>,
}

/// Where the config a node serves came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Source {
    /// Its own config file: no pushed revision was ever accepted here.
    Local = 0,
    /// The last revision it accepted, read back from its state dir (at
    /// start, before or instead of etcd's newest).
    StateDir = 1,
    /// The newest revision in etcd.
    Etcd = 2,
}

impl Source {
    fn name(v: u8) -> &'static str {
        match v {
            1 => "state_dir",
            2 => "etcd",
            _ => "local",
        }
    }
}

/// What a node knows of the fleet's divided health checks.
#[derive(Default)]
struct SharedChecks {
    live: std::collections::BTreeSet<String>,
    results: std::collections::HashMap<String, std::collections::HashMap<String, Received>>,
    /// Per entry: the newest own result published (ms).
    published: std::collections::HashMap<String, u64>,
    /// Per entry: the newest shared result already counted (ms).
    counted: std::collections::HashMap<String, u64>,
    /// Entries probed here because their checkers stopped reporting.
    orphaned: std::collections::HashSet<String>,
}

/// What a key of the prefix was.
enum Taken {
    NodeGone,
    Entry(Target),
    Other,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Fleet {
    /// A node of the fleet `settings` describes, applying shared state to
    /// `overrides` and `weights`. Nothing connects until [`Fleet::spawn`]
    /// or the first write.
    pub fn new(
        settings: FleetSettings,
        overrides: Arc<Overrides>,
        weights: Arc<RuntimeWeights>,
        server: Arc<ServerState>,
        switch: tokio::sync::mpsc::Sender<Switch>,
    ) -> Arc<Fleet> {
        Arc::new(Fleet {
            settings,
            client: tokio::sync::Mutex::new(None),
            entries: Mutex::new(BTreeMap::new()),
            connected: AtomicBool::new(false),
            overrides,
            weights,
            server,
            switch,
            refused: Mutex::new(None),
            checks: Mutex::new(SharedChecks::default()),
            lost_since: Mutex::new(None),
            offered: tokio::sync::watch::channel(None).0,
            contact_now: tokio::sync::Notify::new(),
            source: std::sync::atomic::AtomicU8::new(Source::Local as u8),
            failure: Mutex::new(None),
        })
    }

    /// The fleet part of `/status`: this node, whether it follows etcd, and
    /// every shared override and weight with who set it, where and when.
    pub fn status(&self) -> serde_json::Value {
        let m = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let list = |k: Kind| -> Vec<serde_json::Value> {
            m.iter()
                .filter(|((kind, _, _), _)| *kind == k)
                .map(|((_, addr, port), e)| {
                    serde_json::json!({
                        "address": addr,
                        "port": port,
                        "state": e.state,
                        "weight": e.weight,
                        "set_by": e.by,
                        "set_on": e.node,
                        "set_at_ms": e.at_ms,
                    })
                })
                .collect()
        };
        let refused = self
            .refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let connected = self.connected.load(Ordering::Relaxed);
        let failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        let error = failure.as_ref().filter(|_| !connected).map(|f| &f.text);
        serde_json::json!({
            "node": self.settings.node,
            "revision": self.server.fleet_revision.load(Ordering::Relaxed),
            "source": Source::name(self.source.load(Ordering::Relaxed)),
            "refused": refused,
            "etcd": self.settings.endpoints,
            "prefix": self.settings.prefix,
            "connected": connected,
            "error": error,
            "overrides": list(Kind::Override),
            "weights": list(Kind::Weight),
        })
    }
}

#[cfg(test)]
mod tests;
