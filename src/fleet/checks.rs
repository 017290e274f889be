//! Divided health checks as a node runs them: the live nodes and the
//! shared results it watches, its share of the probing, the majority of
//! the others' results through rise/fall, and the fallback to probing
//! everything when etcd is gone past `fleet_grace`.

use super::*;

impl Fleet {
    /// A node's registration (`nodes/{node}`) appeared or went.
    pub(super) fn observe_node(&self, node: &str, present: bool) {
        let mut sc = self.checks.lock().unwrap_or_else(|e| e.into_inner());
        if present {
            sc.live.insert(node.to_string());
        } else {
            sc.live.remove(node);
        }
    }

    /// A shared result (`health/{entry}/{node}`, after `health/`) was
    /// written or went.
    pub(super) fn observe_result(&self, key: &str, value: Option<&[u8]>) {
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
    pub(super) async fn divide_checks(&self, c: &mut Client, lease: i64) -> Result<(), String> {
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
    pub(super) fn fall_back_if_lost(&self) {
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
}
