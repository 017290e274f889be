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

mod push;
mod results;
mod status;

use push::materialize;
pub use push::{push, Pushed};
pub use results::checkers_of;
use results::*;
pub use status::{settings_of, status_table};

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
    refused: Mutex<Option<(i64, String)>>,
    /// Divided health checks: the nodes holding a lease, and each entry's
    /// shared results by node (`up`, Unix ms).
    checks: Mutex<SharedChecks>,
    /// When etcd was lost (None: following it).
    lost_since: Mutex<Option<std::time::Instant>>,
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
    Config,
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
        })
    }

    /// A node's registration (`nodes/{node}`) appeared or went.
    fn observe_node(&self, node: &str, present: bool) {
        let mut sc = self.checks.lock().unwrap_or_else(|e| e.into_inner());
        if present {
            sc.live.insert(node.to_string());
        } else {
            sc.live.remove(node);
        }
    }

    /// A shared result (`health/{entry}/{node}`, after `health/`) was
    /// written or went.
    fn observe_result(&self, key: &str, value: Option<&[u8]>) {
        let mut sc = self.checks.lock().unwrap_or_else(|e| e.into_inner());
        match value.and_then(|v| shared_result(key, v)) {
            Some((entry, node, s)) => {
                let m = sc.results.entry(entry.to_string()).or_default();
                let r = receive(m.get(node), s, now_ms());
                m.insert(node.to_string(), r);
            }
            None => {
                if let Some((entry, node)) = key.rsplit_once('/') {
                    if let Some(m) = sc.results.get_mut(entry) {
                        m.remove(node);
                    }
                }
            }
        }
    }

    /// Divided health checks, once a second while following etcd: which
    /// entries this node probes (the `checkers` live nodes ranking highest
    /// by rendezvous hashing of entry and node; every entry whose checkers
    /// have no fresh result), its new results shared under its lease, and
    /// for the others the majority of the fresh shared results, through
    /// the check's rise/fall, as their state.
    async fn divide_checks(&self, c: &mut Client, lease: i64) -> Result<(), String> {
        let e = self.server.engine.load();
        let me = self.settings.node.as_str();
        let now = now_ms();
        let mut puts = Vec::new();
        {
            let mut sc = self.checks.lock().unwrap_or_else(|e| e.into_inner());
            let mut live: Vec<String> = sc.live.iter().cloned().collect();
            if !sc.live.contains(me) {
                live.push(me.to_string());
            }
            for (i, spec) in e.checks.iter().enumerate() {
                let Some(check) = &spec.check else { continue };
                let i = i as u32;
                let key = entry_key(spec);
                let assigned = checkers_of(
                    &key,
                    live.iter().map(String::as_str),
                    self.settings.checkers,
                );
                let window = fresh_window(check.interval_ms);
                let fresh = fresh_results(sc.results.get(&key), &assigned, now, window);
                let stats = e.health.stats(i);
                // Probed here: assigned, or nobody assigned has a fresh
                // result (its checkers vanished: probe rather than trust).
                let local = assigned.contains(&me) || fresh.is_empty();
                stats.remote.store(!local, Ordering::Relaxed);
                // Said once per change, and only for an entry whose shared
                // results were counted before: not at start-up, while the
                // checkers have yet to report.
                let orphan = !assigned.contains(&me) && fresh.is_empty();
                if orphan && sc.counted.contains_key(&key) && sc.orphaned.insert(key.clone()) {
                    tracing::warn!(
                        "health {key}: none of its checkers ({}) has a result received in the last {window} ms: probing it here",
                        assigned.join(", ")
                    );
                } else if !orphan && sc.orphaned.remove(&key) {
                    tracing::info!("health {key}: its checkers report again");
                }
                if local {
                    let d = stats.detail();
                    if let (Some(up), Some(at)) = (d.last_ok, d.last_check) {
                        let at_ms = at
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_millis() as u64);
                        if sc.published.get(&key).is_none_or(|&p| at_ms > p) {
                            sc.published.insert(key.clone(), at_ms);
                            let interval_ms = check.interval_ms;
                            puts.push((
                                key,
                                Shared {
                                    up,
                                    at_ms,
                                    interval_ms,
                                },
                            ));
                        }
                    }
                    continue;
                }
                let newest = fresh.iter().map(|r| r.1).max().unwrap_or(0);
                if sc.counted.get(&key).is_some_and(|&c| c >= newest) {
                    continue;
                }
                sc.counted.insert(key.clone(), newest);
                let ups = fresh.iter().filter(|r| r.0).count();
                let up = ups * 2 > fresh.len();
                let mut d = stats.detail();
                let from = e.health.state(i);
                if let Some(to) =
                    crate::health::checker::step(from, &mut d, up, check.rise, check.fall)
                {
                    e.health.set_state(i, to);
                    tracing::info!(
                        "health {} is {} ({ups} of {} checkers' fresh results up)",
                        key,
                        crate::health::state_name(to),
                        fresh.len()
                    );
                }
            }
        }
        for (key, s) in puts {
            let k = format!("{}health/{key}/{me}", self.settings.prefix);
            let v = serde_json::to_vec(&s).map_err(|e| e.to_string())?;
            c.put(k, v, Some(PutOptions::new().with_lease(lease)))
                .await
                .map_err(|e| format!("etcd: {e}"))?;
        }
        self.weights.catch_up(&e);
        Ok(())
    }

    /// Cut off from etcd past `fleet_grace`: probe every member here.
    fn fall_back_if_lost(&self) {
        let lost = *self.lost_since.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = lost else { return };
        if t.elapsed() < self.settings.grace
            || self.server.fleet_local_probes.swap(true, Ordering::Relaxed)
        {
            return;
        }
        let e = self.server.engine.load();
        for i in 0..e.checks.len() as u32 {
            e.health.stats(i).remote.store(false, Ordering::Relaxed);
        }
        tracing::warn!(
            "fleet: no etcd for {}: probing every member here until it is back",
            humantime::format_duration(self.settings.grace)
        );
    }

    fn key(&self, (kind, addr, port): Target) -> String {
        match port {
            Some(p) => format!("{}{}{addr}#{p}", self.settings.prefix, kind.dir()),
            None => format!("{}{}{addr}", self.settings.prefix, kind.dir()),
        }
    }

    /// The override or weight a key (after the prefix) is about.
    fn parse_key(rest: &str) -> Option<Target> {
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
        let r = match kind {
            Kind::Override => {
                let state = entry
                    .and_then(|e| e.state.as_deref())
                    .and_then(crate::health::parse_override)
                    .unwrap_or(OVR_NONE);
                self.overrides
                    .set(&self.server.engine, addr, port, state)
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
        self.weights.catch_up(&self.server.engine.load());
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
        {
            let mut sc = self.checks.lock().unwrap_or_else(|e| e.into_inner());
            sc.live.clear();
            sc.results.clear();
        }
        for kv in r.kvs() {
            if let Taken::Entry(t) = self.take(kv, true).await {
                seen.push(t);
            }
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

    /// One key of the prefix, read or changed (`put`; else deleted): the
    /// pushed config, a node or shared result, or an override or weight.
    async fn take(&self, kv: &etcd_client::KeyValue, put: bool) -> Taken {
        let Ok(k) = kv.key_str() else {
            return Taken::Other;
        };
        let value = put.then(|| kv.value());
        let Some(rest) = k.strip_prefix(&self.settings.prefix) else {
            return Taken::Other;
        };
        if rest == "config" {
            if let Some(v) = value {
                self.serve_pushed(kv.mod_revision(), v).await;
            }
            return Taken::Config;
        }
        if let Some(node) = rest.strip_prefix("nodes/") {
            self.observe_node(node, put);
            return if put { Taken::Other } else { Taken::NodeGone };
        }
        if let Some(r) = rest.strip_prefix("health/") {
            self.observe_result(r, value);
            return Taken::Other;
        }
        let Some(t) = Fleet::parse_key(rest) else {
            return Taken::Other;
        };
        match value.map(serde_json::from_slice::<Entry>) {
            Some(Ok(e)) => self.apply(t, Some(&e)),
            Some(Err(_)) => return Taken::Other,
            None => self.apply(t, None),
        }
        Taken::Entry(t)
    }

    /// Serve pushed revision `rev` (its stored value `v`): write its files
    /// under the state dir with this node's own `[server]`, `[api]` and
    /// `[fleet]` tables and key files, check the geo database's checksum,
    /// and have the daemon reload from it. A refusal or a failed load keeps
    /// the running config, and says why in the log and `/status`.
    async fn serve_pushed(&self, rev: i64, v: &[u8]) {
        if rev <= self.server.fleet_revision.load(Ordering::Relaxed) {
            return;
        }
        let refuse = |why: String| {
            tracing::error!("fleet: config revision {rev} refused, the running one is kept: {why}");
            *self.refused.lock().unwrap_or_else(|e| e.into_inner()) = Some((rev, why));
        };
        // Decoding, writing the files and hashing the geo database take a
        // while for a large config: not on a runtime thread.
        let (settings, v) = (self.settings.clone(), v.to_vec());
        let written = tokio::task::spawn_blocking(move || {
            serde_json::from_slice::<Pushed>(&v)
                .map_err(|e| format!("not a pushed config: {e}"))
                .and_then(|p| materialize(&settings, rev, &p))
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        let path = match written {
            Ok(p) => p,
            Err(why) => return refuse(why),
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.switch.send((path, tx)).await.is_err() {
            return;
        }
        match rx.await {
            Ok(true) => {
                self.server.fleet_revision.store(rev, Ordering::Relaxed);
                tracing::info!("fleet: serving config revision {rev}");
            }
            _ => refuse("it did not load: see the reload line above".into()),
        }
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
                        me.lost_since
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert_with(std::time::Instant::now);
                        me.fall_back_if_lost();
                        if me.connected.swap(false, Ordering::Relaxed) {
                            tracing::warn!("fleet: lost etcd, keeping the last state: {e}");
                        } else {
                            tracing::debug!("fleet: etcd not reachable: {e}");
                        }
                        *me.client.lock().await = None;
                    }
                }
                // Short sleeps, so the fallback comes on time.
                let until = tokio::time::Instant::now() + backoff;
                while tokio::time::Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    me.fall_back_if_lost();
                }
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
            revision: self.server.fleet_revision.load(Ordering::Relaxed),
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
            .lease_grant(self.settings.lease_secs, None)
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
        *self.lost_since.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if self
            .server
            .fleet_local_probes
            .swap(false, Ordering::Relaxed)
        {
            tracing::info!("fleet: etcd is back: probing this node's share again");
        }
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
                    self.divide_checks(&mut c, lease).await?;
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
                match self.take(kv, ev.event_type() == EventType::Put).await {
                    // `fleet status` shows a new revision at once.
                    Taken::Config => self.register(&mut c, lease).await?,
                    // A node left (its lease ran out): its share moves now,
                    // not at the next tick.
                    Taken::NodeGone => self.divide_checks(&mut c, lease).await?,
                    Taken::Entry(_) | Taken::Other => {}
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
        let refused = self
            .refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        serde_json::json!({
            "node": self.settings.node,
            "revision": self.server.fleet_revision.load(Ordering::Relaxed),
            "refused": refused.map(|(r, why)| serde_json::json!({ "revision": r, "why": why })),
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
    // Members that accept a connection now: a dead one (a killed leader)
    // would otherwise take a share of the requests until the channel
    // notices, each of them waiting out the timeout.
    let mut live = Vec::new();
    for ep in &s.endpoints {
        let host = ep
            .trim_start_matches("http://")
            .trim_start_matches("https://");
        let up = tokio::time::timeout(
            Duration::from_millis(300),
            tokio::net::TcpStream::connect(host),
        )
        .await
        .is_ok_and(|r| r.is_ok());
        if up {
            live.push(ep.clone());
        }
    }
    if live.is_empty() {
        return Err(format!("etcd {}: no member answers", s.endpoints.join(",")));
    }
    Client::connect(&live, Some(opts))
        .await
        .map_err(|e| format!("etcd {}: {e}", live.join(",")))
}

#[cfg(test)]
mod tests;
