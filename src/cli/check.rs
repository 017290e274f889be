//! `meridian check`: the summary printed for a config that loads.

use crate::engine::{Engine, Target};

/// What a valid config serves: zones, pools and bound names.
pub fn summary(e: &Engine) -> String {
    let mut s = String::new();
    s.push_str(&format!("config {} is valid\n", e.config_path.display()));
    for z in &e.zones {
        s.push_str(&format!(
            "zone {}: {} records, {} names\n",
            z.origin_text,
            z.record_count,
            z.nodes.len()
        ));
    }
    s.push_str(&format!("pools: {}\n", e.pools.len()));
    for b in &e.bindings {
        let kind = match &b.target {
            Target::Pool(p) => format!("pool {}", e.pools[*p].name),
            Target::Geo(_) => "geo".to_string(),
        };
        s.push_str(&format!(
            "name {}: {kind}, mode {}, ttl {}\n",
            b.name, b.mode, b.ttl
        ));
    }
    s.trim_end().to_string()
}
