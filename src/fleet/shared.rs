//! The shared operator state: overrides and runtime weights as keys under
//! the prefix, written through etcd first and applied locally, and the
//! full read (`sync`) and the per-key step (`take`) that every node makes
//! to match the prefix.

use super::*;

impl Fleet {
    pub(super) fn key(&self, (kind, addr, port): Target) -> String {
        match port {
            Some(p) => format!("{}{}{addr}#{p}", self.settings.prefix, kind.dir()),
            None => format!("{}{}{addr}", self.settings.prefix, kind.dir()),
        }
    }

    /// The override or weight a key (after the prefix) is about.
    pub(super) fn parse_key(rest: &str) -> Option<Target> {
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

    pub(super) async fn client(&self) -> Result<Client, String> {
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

    pub(super) async fn put(&self, t: Target, entry: Option<Entry>) -> Result<(), String> {
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
    pub(super) fn apply(&self, t: Target, entry: Option<&Entry>) {
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
    pub(super) async fn sync(&self, c: &mut Client) -> Result<i64, String> {
        // The prefix but the pushed files' chunks (tens of MB: more than
        // one response carries), at one revision.
        let [(k0, e0), (k1, e1)] = super::store::node_ranges(&self.settings.prefix);
        let mut r = c
            .get(k0, Some(GetOptions::new().with_range(e0)))
            .await
            .map_err(|e| format!("etcd: {e}"))?;
        let rev = r.header().map_or(0, |h| h.revision());
        let rest = c
            .get(
                k1,
                Some(GetOptions::new().with_range(e1).with_revision(rev)),
            )
            .await
            .map_err(|e| format!("etcd: {e}"))?;
        let mut kvs = r.take_kvs();
        kvs.extend(rest.kvs().iter().cloned());
        let mut seen = Vec::new();
        {
            let mut sc = self.checks.lock().unwrap_or_else(|e| e.into_inner());
            sc.live.clear();
            sc.results.clear();
        }
        for kv in &kvs {
            if let Taken::Entry(t) = self.take(kv, true).await {
                seen.push(t);
            }
        }
        self.members_read(&kvs);
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
    pub(super) async fn take(&self, kv: &etcd_client::KeyValue, put: bool) -> Taken {
        let Ok(k) = kv.key_str() else {
            return Taken::Other;
        };
        let value = put.then(|| kv.value());
        let Some(rest) = k.strip_prefix(&self.settings.prefix) else {
            return Taken::Other;
        };
        if rest == "config" {
            if let Some(v) = value {
                self.offer(kv.mod_revision(), v);
            }
            return Taken::Other;
        }
        if let Some(node) = rest.strip_prefix("nodes/") {
            self.observe_node(node, put);
            return if put { Taken::Other } else { Taken::NodeGone };
        }
        if let Some(r) = rest.strip_prefix("members/") {
            self.observe_member(k, r, value);
            return Taken::Other;
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
}
