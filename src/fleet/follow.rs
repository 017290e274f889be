//! Following etcd: the lease and the node's registration under it, the
//! first full read and the watch, and reconnecting with back-off.

use super::*;

impl Fleet {
    /// Start following etcd: read the prefix, then watch it, reconnecting
    /// with back-off (up to 5 s) for as long as the runtime runs.
    pub fn spawn(self: &Arc<Self>, rt: &tokio::runtime::Handle) {
        rt.spawn(self.clone().serve_offers());
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
                        me.lost(&e);
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
            refused: self
                .refused
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            source: Source::name(self.source.load(Ordering::Relaxed)).to_string(),
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
        let mut stream = self.sync_and_watch(&mut c).await?;
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
        // Two loops, polled side by side: the lease and registration never
        // wait for the watch's work, and neither waits for a reload (a
        // pushed revision goes to the revision task).
        let mut kc = c.clone();
        let keep = async {
            let mut tick = tokio::time::interval(CONTACT);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = self.contact_now.notified() => {}
                }
                keeper
                    .keep_alive()
                    .await
                    .map_err(|e| format!("etcd lease: {e}"))?;
                match alive.message().await {
                    Ok(Some(r)) if r.ttl() > 0 => {}
                    Ok(_) => return Err("etcd lease expired".to_string()),
                    Err(e) => return Err(format!("etcd lease: {e}")),
                }
                self.register(&mut kc, lease).await?;
                self.divide_checks(&mut kc, lease).await?;
            }
        };
        let watch = async {
            loop {
                let msg = stream
                    .message()
                    .await
                    .map_err(|e| format!("etcd watch: {e}"))?;
                let Some(resp) = msg else {
                    return Err("etcd watch ended".to_string());
                };
                if resp.canceled() {
                    if resp.compact_revision() > 0 {
                        // Behind a compaction (a push prunes old revisions):
                        // read the prefix again, without alarm, on the same
                        // connection and lease.
                        tracing::info!(
                            "fleet: the watch fell behind etcd's compaction at revision {}: reading the prefix again",
                            resp.compact_revision()
                        );
                        stream = self.sync_and_watch(&mut c).await?;
                        continue;
                    }
                    return Err("etcd watch canceled".to_string());
                }
                for ev in resp.events() {
                    let Some(kv) = ev.kv() else { continue };
                    // A node left (its lease ran out): its share moves now,
                    // not at the next tick.
                    if let Taken::NodeGone = self.take(kv, ev.event_type() == EventType::Put).await
                    {
                        self.divide_checks(&mut c, lease).await?;
                    }
                }
            }
        };
        tokio::select! {
            r = keep => r,
            r = watch => r,
        }
    }

    /// Read the prefix (`sync`), then watch it from the next revision: two
    /// ranges, as `sync` reads, the prefix but the pushed files' chunks,
    /// which a node reads only for the revision it serves.
    async fn sync_and_watch(&self, c: &mut Client) -> Result<etcd_client::WatchStream, String> {
        let rev = self.sync(c).await?;
        let [(k0, e0), (k1, e1)] = super::store::node_ranges(&self.settings.prefix);
        let from = |end: Vec<u8>| {
            WatchOptions::new()
                .with_range(end)
                .with_start_revision(rev + 1)
        };
        let mut stream = c
            .watch(k0, Some(from(e0)))
            .await
            .map_err(|e| format!("etcd watch: {e}"))?;
        stream
            .watch(k1, Some(from(e1)))
            .await
            .map_err(|e| format!("etcd watch: {e}"))?;
        Ok(stream)
    }
}
