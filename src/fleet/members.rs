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
        let pool = rest
            .split_once('/')
            .filter(|(p, id)| !p.is_empty() && !id.is_empty())
            .map(|(p, _)| p);
        match (pool, value) {
            (Some(pool), Some(v)) => registry.put(key, pool, v),
            (Some(pool), None) => registry.remove(key, pool),
            (None, Some(v)) => registry.ignore(
                key,
                &String::from_utf8_lossy(v),
                &format!("want {}members/POOL/ID", self.settings.prefix),
            ),
            (None, None) => {}
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
