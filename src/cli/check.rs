//! `meridian check`: the summary printed for a config that loads.

use std::sync::Arc;

use crate::engine::{Engine, Target};

/// What a valid config serves: zones, pools, bound names and the geo
/// tables they use (names whose rules have one shape share a table).
pub fn summary(e: &Engine) -> String {
    let tables = e.geo_tables();
    let mut s = String::new();
    s.push_str(&format!("config {} is valid\n", e.config_path.display()));
    for (i, z) in e.zones.iter().enumerate() {
        s.push_str(&format!(
            "zone {}: {} records, {} names, {} KiB of tables\n",
            z.origin_text,
            z.record_count,
            z.node_count(),
            z.heap_bytes() / 1024
        ));
        if let Some(d) = e.dnssec.get(i).and_then(|d| d.as_deref()) {
            let keys: Vec<String> = d
                .keys
                .iter()
                .map(|k| {
                    let role = if k.is_ksk() { "KSK" } else { "ZSK" };
                    format!("{role} {} alg {}", k.tag, k.dnskey.algorithm)
                })
                .chain(
                    d.publish
                        .iter()
                        .map(|k| format!("published {} alg {}", k.tag, k.dnskey.algorithm)),
                )
                .collect();
            let (st, dy) = e.signer(i).map_or((0, 0), |s| {
                (s.statics.load().count, s.dynamic.load().count())
            });
            s.push_str(&format!(
                "zone {}: dnssec keys [{}], signature validity {}, refresh {}, compact denial; signed {st} static and {dy} pool RRsets\n",
                z.origin_text,
                keys.join(", "),
                humantime::format_duration(d.validity),
                humantime::format_duration(d.refresh),
            ));
        }
    }
    s.push_str(&format!("pools: {}\n", e.pools.len()));
    for b in &e.bindings {
        let kind = match &b.target {
            Target::Pool(p) => format!("pool {}", e.pools[*p].name),
            Target::Geo(m) => {
                let k = tables.iter().position(|t| Arc::ptr_eq(t, m.table()));
                format!("geo table {}", k.map_or(0, |k| k + 1))
            }
        };
        s.push_str(&format!(
            "name {}: {kind}, mode {}, ttl {}\n",
            b.name, b.mode, b.ttl
        ));
    }
    if !tables.is_empty() {
        let geo_names = e
            .bindings
            .iter()
            .filter(|b| matches!(b.target, Target::Geo(_)))
            .count();
        let (blocks, bytes) = e.geo_blocks();
        s.push_str(&format!(
            "geo tables: {} for {geo_names} geo name(s), {blocks} decision block(s) in {} KiB\n",
            tables.len(),
            bytes / 1024
        ));
    }
    for c in &e.build_cost {
        s.push_str(&format!(
            "build {}: {:.0} ms, {:+} KiB resident\n",
            c.part, c.ms, c.rss_kib
        ));
    }
    s.trim_end().to_string()
}
