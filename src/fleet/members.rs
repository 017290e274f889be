//! Pool members from a registry (#31): the `{prefix}members/POOL/ID` keys a
//! backend, or an agent beside it, keeps under a lease, handed to the
//! engine's [`Registry`](crate::engine::registry::Registry); the daemon
//! rebuilds the engine when it changes.

use std::collections::HashSet;

use super::*;

impl Fleet {
    /// `rest` (the key after `{prefix}members/`) was put (`value`) or
    /// deleted. A key without a pool and an ID is ignored with a warning.
    pub(super) fn observe_member(&self, key: &str, rest: &str, value: Option<&[u8]>) {
        let registry = self.server.engine.load().registry.clone();
        let Some((pool, id)) = rest
            .split_once('/')
            .filter(|(p, i)| !p.is_empty() && !i.is_empty())
        else {
            if value.is_some() {
                tracing::warn!(
                    "registry: ignoring {key}: want {}members/POOL/ID",
                    self.settings.prefix
                );
            }
            return;
        };
        let _ = id;
        match value {
            Some(v) => registry.put(key, pool, v),
            None => registry.remove(key, pool),
        }
    }

    /// After a full read of the prefix: registrations not in `kvs`
    /// vanished while this node did not watch.
    pub(super) fn members_read(&self, kvs: &[etcd_client::KeyValue]) {
        let dir = format!("{}members/", self.settings.prefix);
        let seen: HashSet<String> = kvs
            .iter()
            .filter_map(|kv| kv.key_str().ok())
            .filter(|k| k.starts_with(&dir))
            .map(str::to_string)
            .collect();
        self.server.engine.load().registry.keep_only(&seen);
    }
}
