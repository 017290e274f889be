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
//! Each node also keeps `{prefix}nodes/{node}` under a lease of
//! [`LEASE_TTL`] seconds, rewritten every [`CONTACT`] with its last
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

/// Seconds a node's registration outlives its last keep-alive.
pub const LEASE_TTL: i64 = 5;

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
    ) -> Arc<Fleet> {
        Arc::new(Fleet {
            settings,
            client: tokio::sync::Mutex::new(None),
            entries: Mutex::new(BTreeMap::new()),
            connected: AtomicBool::new(false),
            overrides,
            weights,
            server,
        })
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.settings.node
    }

    fn key(&self, (kind, addr, port): Target) -> String {
        match port {
            Some(p) => format!("{}{}{addr}#{p}", self.settings.prefix, kind.dir()),
            None => format!("{}{}{addr}", self.settings.prefix, kind.dir()),
        }
    }

    fn parse_key(&self, key: &str) -> Option<Target> {
        let rest = key.strip_prefix(&self.settings.prefix)?;
        let (kind, t) = if let Some(t) = rest.strip_prefix(Kind::Override.dir()) {
            (Kind::Override, t)
        } else {
            (Kind::Weight, rest.strip_prefix(Kind::Weight.dir())?)
        };
        let (a, p) = match t.split_once('#') {
            Some((a, p)) => (a, Some(p.parse().ok()?)),
            None => (t, None),
        };
        Some((kind, a.parse().ok()?, p))
    }

    async fn client(&self) -> Result<Client, String> {
        let mut c = self.client.lock().await;
        if let Some(c) = &*c {
            return Ok(c.clone());
        }
        let client = connect(&self.settings).await?;
        *c = Some(client.clone());
        Ok(client)
    }

    /// Store an override for every node (`OVR_NONE` deletes it), set by
    /// the token `by`. Nothing is applied if etcd does not take it.
    pub async fn put_override(
        &self,
        addr: IpAddr,
        port: Option<u16>,
        state: u8,
        by: &str,
    ) -> Result<(), String> {
        let t = (Kind::Override, addr, port);
        let entry = (state != OVR_NONE).then(|| Entry {
            state: Some(crate::health::override_name(state).to_string()),
            weight: None,
            by: by.to_string(),
            node: self.settings.node.clone(),
            at_ms: now_ms(),
        });
        self.put(t, entry).await
    }

    /// Store a runtime weight for every node (None deletes it).
    pub async fn put_weight(
        &self,
        addr: IpAddr,
        port: Option<u16>,
        weight: Option<f64>,
        by: &str,
    ) -> Result<(), String> {
        let t = (Kind::Weight, addr, port);
        let entry = weight.map(|w| Entry {
            state: None,
            weight: Some(w),
            by: by.to_string(),
            node: self.settings.node.clone(),
            at_ms: now_ms(),
        });
        self.put(t, entry).await
    }

    async fn put(&self, t: Target, entry: Option<Entry>) -> Result<(), String> {
        let mut c = self.client().await?;
        let key = self.key(t);
        let r = match &entry {
            Some(e) => {
                let v = serde_json::to_vec(e).map_err(|e| e.to_string())?;
                c.put(key, v, None).await.map(|_| ())
            }
            None => c.delete(key, None).await.map(|_| ()),
        };
        r.map_err(|e| format!("etcd: {e}"))?;
        self.apply(t, entry.as_ref());
        Ok(())
    }

    /// Apply one entry (None: cleared) to this node.
    fn apply(&self, t: Target, entry: Option<&Entry>) {
        let (kind, addr, port) = t;
        let engine = self.server.engine.load();
        let r = match kind {
            Kind::Override => {
                let state = entry
                    .and_then(|e| e.state.as_deref())
                    .and_then(crate::health::parse_override)
                    .unwrap_or(OVR_NONE);
                self.overrides
                    .set(&engine.health, &engine.checks, addr, port, state)
                    .map(|_| ())
            }
            Kind::Weight => self
                .weights
                .set(
                    &self.server.engine,
                    addr,
                    port,
                    entry.and_then(|e| e.weight),
                )
                .map(|_| ()),
        };
        if let Err(e) = r {
            // Another node's config may have members this one lacks.
            tracing::debug!("fleet: {kind:?} for {addr} not applied here: {e}");
        }
        self.weights.catch_up(&engine);
        let mut m = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entry {
            Some(e) => {
                m.insert(t, e.clone());
            }
            None => {
                m.remove(&t);
            }
        }
    }

    /// Read the whole prefix and make this node match it; the revision to
    /// watch from.
    async fn sync(&self, c: &mut Client) -> Result<i64, String> {
        let r = c
            .get(
                self.settings.prefix.as_bytes(),
                Some(GetOptions::new().with_prefix()),
            )
            .await
            .map_err(|e| format!("etcd: {e}"))?;
        let rev = r.header().map_or(0, |h| h.revision());
        let mut seen = Vec::new();
        for kv in r.kvs() {
            let Some(t) = kv.key_str().ok().and_then(|k| self.parse_key(k)) else {
                continue;
            };
            let Ok(e) = serde_json::from_slice::<Entry>(kv.value()) else {
                continue;
            };
            self.apply(t, Some(&e));
            seen.push(t);
        }
        // What was cleared while this node did not watch.
        let stale: Vec<Target> = {
            let m = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            m.keys().filter(|t| !seen.contains(t)).copied().collect()
        };
        for t in stale {
            self.apply(t, None);
        }
        Ok(rev)
    }

    /// Start following etcd: read the prefix, then watch it, reconnecting
    /// with back-off (up to 5 s) for as long as the runtime runs.
    pub fn spawn(self: &Arc<Self>, rt: &tokio::runtime::Handle) {
        let me = self.clone();
        rt.spawn(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                match me.follow().await {
                    Ok(()) => backoff = Duration::from_millis(100),
                    Err(e) => {
                        if me.connected.swap(false, Ordering::Relaxed) {
                            tracing::warn!("fleet: lost etcd, keeping the last state: {e}");
                        } else {
                            tracing::debug!("fleet: etcd not reachable: {e}");
                        }
                        *me.client.lock().await = None;
                    }
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        });
    }

    /// This node's registration now.
    fn info(&self) -> NodeInfo {
        let e = self.server.engine.load();
        let entries = e.checks.len();
        let down = (0..entries as u32).filter(|&i| !e.health.is_up(i)).count();
        NodeInfo {
            node: self.settings.node.clone(),
            contact_ms: now_ms(),
            generation: e.generation,
            config: e.config_path.display().to_string(),
            entries,
            down,
        }
    }

    async fn register(&self, c: &mut Client, lease: i64) -> Result<(), String> {
        let key = format!("{}nodes/{}", self.settings.prefix, self.settings.node);
        let v = serde_json::to_vec(&self.info()).map_err(|e| e.to_string())?;
        c.put(key, v, Some(PutOptions::new().with_lease(lease)))
            .await
            .map_err(|e| format!("etcd: {e}"))?;
        Ok(())
    }

    async fn follow(&self) -> Result<(), String> {
        let mut c = self.client().await?;
        let lease = c
            .lease_grant(LEASE_TTL, None)
            .await
            .map_err(|e| format!("etcd lease: {e}"))?
            .id();
        let (mut keeper, mut alive) = c
            .lease_keep_alive(lease)
            .await
            .map_err(|e| format!("etcd lease: {e}"))?;
        self.register(&mut c, lease).await?;
        let rev = self.sync(&mut c).await?;
        let mut stream = c
            .watch(
                self.settings.prefix.as_bytes(),
                Some(
                    WatchOptions::new()
                        .with_prefix()
                        .with_start_revision(rev + 1),
                ),
            )
            .await
            .map_err(|e| format!("etcd watch: {e}"))?;
        if !self.connected.swap(true, Ordering::Relaxed) {
            tracing::info!(
                "fleet: node {} following etcd {} (prefix {})",
                self.settings.node,
                self.settings.endpoints.join(","),
                self.settings.prefix
            );
        }
        let mut tick = tokio::time::interval(CONTACT);
        loop {
            let msg = tokio::select! {
                m = stream.message() => m.map_err(|e| format!("etcd watch: {e}"))?,
                _ = tick.tick() => {
                    keeper.keep_alive().await.map_err(|e| format!("etcd lease: {e}"))?;
                    match alive.message().await {
                        Ok(Some(r)) if r.ttl() > 0 => {}
                        Ok(_) => return Err("etcd lease expired".into()),
                        Err(e) => return Err(format!("etcd lease: {e}")),
                    }
                    self.register(&mut c, lease).await?;
                    continue;
                }
            };
            let Some(resp) = msg else {
                return Err("etcd watch ended".into());
            };
            if resp.canceled() {
                return Err("etcd watch canceled".into());
            }
            for ev in resp.events() {
                let Some(kv) = ev.kv() else { continue };
                let Some(t) = kv.key_str().ok().and_then(|k| self.parse_key(k)) else {
                    continue;
                };
                match ev.event_type() {
                    EventType::Put => {
                        if let Ok(e) = serde_json::from_slice::<Entry>(kv.value()) {
                            self.apply(t, Some(&e));
                        }
                    }
                    EventType::Delete => self.apply(t, None),
                }
            }
        }
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
        serde_json::json!({
            "node": self.settings.node,
            "etcd": self.settings.endpoints,
            "prefix": self.settings.prefix,
            "connected": self.connected.load(Ordering::Relaxed),
            "overrides": list(Kind::Override),
            "weights": list(Kind::Weight),
        })
    }
}

/// A client of the etcd cluster `s` names, authenticated as it says.
pub async fn connect(s: &FleetSettings) -> Result<Client, String> {
    let mut opts = ConnectOptions::new()
        .with_connect_timeout(s.timeout)
        .with_timeout(s.timeout)
        .with_keep_alive(Duration::from_secs(5), s.timeout);
    if let Some((user, file)) = &s.user {
        let pw = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        opts = opts.with_user(user.clone(), pw.trim().to_string());
    }
    if let Some(t) = &s.tls {
        let mut tls = TlsOptions::new();
        if let Some(ca) = &t.ca {
            let pem = std::fs::read(ca).map_err(|e| format!("{}: {e}", ca.display()))?;
            tls = tls.ca_certificate(etcd_client::Certificate::from_pem(pem));
        }
        if let Some((cert, key)) = &t.identity {
            let c = std::fs::read(cert).map_err(|e| format!("{}: {e}", cert.display()))?;
            let k = std::fs::read(key).map_err(|e| format!("{}: {e}", key.display()))?;
            tls = tls.identity(Identity::from_pem(c, k));
        }
        opts = opts.with_tls(tls);
    }
    Client::connect(&s.endpoints, Some(opts))
        .await
        .map_err(|e| format!("etcd {}: {e}", s.endpoints.join(",")))
}

/// The registered nodes of the fleet `settings` names (for `meridian fleet
/// status`), by name.
pub async fn nodes(settings: &FleetSettings) -> Result<Vec<NodeInfo>, String> {
    let mut c = connect(settings).await?;
    let r = c
        .get(
            format!("{}nodes/", settings.prefix),
            Some(GetOptions::new().with_prefix()),
        )
        .await
        .map_err(|e| format!("etcd: {e}"))?;
    let mut v: Vec<NodeInfo> = r
        .kvs()
        .iter()
        .filter_map(|kv| serde_json::from_slice(kv.value()).ok())
        .collect();
    v.sort_by(|a, b| a.node.cmp(&b.node));
    Ok(v)
}

/// The `[fleet]` table of the config file `path`, checked (for the
/// `meridian fleet` commands); an error when it has none.
pub fn settings_of(path: &std::path::Path) -> Result<FleetSettings, String> {
    let src = crate::config::Source::read(path).map_err(|e| e.to_string())?;
    let cfg = src.parse().map_err(|e| e.to_string())?;
    let f = cfg
        .fleet
        .ok_or_else(|| format!("{}: no [fleet] table", path.display()))?;
    crate::config::fleet::check(&src, f.get_ref()).map_err(|e| e.to_string())
}

/// `meridian fleet status`: every registered node, its last contact, the
/// engine generation and config it serves, and its view of member health,
/// as a table.
pub async fn status_table(settings: &FleetSettings) -> Result<String, String> {
    let nodes = nodes(settings).await?;
    let now = now_ms();
    let mut out = format!(
        "{:<16} {:>10} {:>12} {:>8} {:>6}  {}\n",
        "NODE", "CONTACT", "GENERATION", "ENTRIES", "DOWN", "CONFIG"
    );
    for n in &nodes {
        let age = now.saturating_sub(n.contact_ms) as f64 / 1000.0;
        out += &format!(
            "{:<16} {:>9.1}s {:>12} {:>8} {:>6}  {}\n",
            n.node, age, n.generation, n.entries, n.down, n.config
        );
    }
    out += &format!(
        "{} node(s) registered in etcd {} under {}\n",
        nodes.len(),
        settings.endpoints.join(","),
        settings.prefix
    );
    Ok(out)
}
