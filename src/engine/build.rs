//! Validated config → [`Engine`]: zones, pools, names bound to pools or geo
//! rules, health specs and the geo decision blocks. Every error names the
//! config file's line (and the zone file's, where the clash is there).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{Binding, BuildCost, Engine, Target};
use crate::config::names::NameTarget;
use crate::config::{self, ConfigFile, ServerSettings, Source};
use crate::error::LocatedError;
use crate::geo::{GeoMap, RuleSet, TableCache};
use crate::health::{CheckSpec, HealthTable};
use crate::pool::Pool;
use crate::zone::name_text;
use crate::zone::FileStamp;
use meridian_wire::{TYPE_A, TYPE_AAAA, TYPE_CNAME};

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// A bound name's owner: lower-cased wire form and text.
type Owner = (Box<[u8]>, String);

pub(super) fn build(
    src: &Source,
    cfg: ConfigFile,
    prev: Option<&Engine>,
) -> Result<Engine, LocatedError> {
    let settings = ServerSettings::from_cfg(src, &cfg.server)?;
    let api = crate::config::ApiSettings::from_cfg(src, &cfg.api)?;
    let fleet =
        match &cfg.fleet {
            None => None,
            Some(f) if !cfg!(feature = "fleet") => return Err(src.err(
                f.span(),
                "[fleet] needs a meridian built with fleet support (cargo build --features fleet)",
            )),
            Some(f) => Some(crate::config::fleet::check(src, f.get_ref())?),
        };
    let mut cost = CostMeter::start();

    // Each bound name's owner (wire and text), parsed once. Zones whose
    // files did not change are kept from `prev`, as long as the names bound
    // in them are the same (nodes hold binding indices).
    let owners: Vec<Result<Owner, LocatedError>> = cfg
        .name
        .iter()
        .map(|(n, nc)| {
            config::names::owner(src, n, nc.span()).map(|w| {
                let t = name_text(&w);
                (w, t)
            })
        })
        .collect();
    let keep = prev
        .filter(|p| {
            owners.iter().all(Result::is_ok)
                && p.bindings
                    .iter()
                    .map(|b| b.name.as_str())
                    .eq(owners.iter().flatten().map(|(_, t)| t.as_str()))
        })
        .map(|p| &p.zones[..]);
    let config::zones::Zones {
        list: mut zones,
        index: zone_index,
        loaded: zones_loaded,
        dnssec,
        warnings: key_warnings,
    } = config::zones::zones(src, &cfg.zone, keep)?;
    cost.part("zones");

    // Health checks named in the config.
    let mut health_specs: Vec<CheckSpec> = Vec::new();
    let mut spec_index: HashMap<CheckSpec, u32> = HashMap::new();
    let checks = config::checks::checks(src, &cfg.check)?;

    // Pools.
    let mut pools = Vec::new();
    let mut pool_index = HashMap::new();
    let registry = prev.map_or_else(Default::default, |p| p.registry.clone());
    let mut registered = HashMap::new();
    for (name, p) in &cfg.pool {
        let mut pool =
            config::pools::pool(src, name, p, &checks, &mut health_specs, &mut spec_index)?;
        if let Some(from) = config::pools::members_from(src, name, p, &checks, fleet.is_some())? {
            let old = prev.and_then(|e| {
                let pool = e.pools.iter().find(|p| &p.name == name)?;
                Some(super::registry::Prev {
                    pool,
                    health: &e.health,
                })
            });
            let added = super::registry::extend(
                &mut pool,
                &from,
                &registry,
                old,
                &mut health_specs,
                &mut spec_index,
            );
            registered.extend(added.into_iter().map(|(a, k)| ((name.clone(), a), k)));
        }
        pool_index.insert(name.clone(), pools.len());
        pools.push(pool);
    }

    cost.part("pools and checks");

    // Geo database.
    let geo_src = config::geo::source(src, cfg.geo.as_ref())?;
    // Stamped before it is read, as zone files are.
    let geo_stamp = geo_src
        .as_ref()
        .and_then(|g| FileStamp::of(&g.path).map(|s| (s, g.schema)));

    // Names bound to pools.
    let mut bindings = Vec::new();
    let mut name_spans = Vec::new();
    let mut bound_at = HashMap::new();
    // Geo names wait for their tables: (binding, rules, span, name).
    let mut geo_names = Vec::new();
    for ((name, nc), owner) in cfg.name.iter().zip(owners) {
        let span = nc.span();
        let (w, text) = owner?;
        let zi = crate::zone::zone_of(&zone_index, &w)
            .ok_or_else(|| src.err(span.clone(), format!("{} is not in any served zone", text)))?;
        let zone = &zones[zi];
        if let Some(node) = zone.get(&w) {
            for o in node.origins() {
                let (t, f, l) = (&o.rtype, zone.files[o.file as usize].as_path(), o.line);
                if *t == TYPE_A || *t == TYPE_AAAA || *t == TYPE_CNAME {
                    return Err(src.err(
                        span.clone(),
                        format!(
                            "{} is bound to a pool but {}:{} has {} data at the same name",
                            text,
                            f.display(),
                            l,
                            if *t == TYPE_CNAME { "CNAME" } else { "address" }
                        ),
                    ));
                }
            }
        }
        // A bound name at or below a zone cut would never be answered.
        let mut cur: &[u8] = &w;
        while cur != &*zone.origin {
            if zone.get(cur).map(|x| x.cut()).unwrap_or(false) {
                return Err(src.err(
                    span.clone(),
                    format!("{} is at or below a delegation", text),
                ));
            }
            cur = crate::zone::parent(cur).unwrap_or(&zone.origin);
        }
        let r = config::names::rules(src, name, nc, &pool_index, &pools, geo_src.is_some())?;
        let target = match r.target {
            NameTarget::Pool(p) => Target::Pool(p),
            NameTarget::Geo(rules) => {
                geo_names.push((bindings.len(), rules, span.clone(), name));
                // Replaced below, once the tables are compiled.
                Target::Pool(usize::MAX)
            }
        };
        // Keys differing only in case or a trailing dot name the same owner.
        if let Some(other) = bound_at.insert(w.clone(), span.start) {
            return Err(src.err(
                span.clone(),
                format!(
                    "{} is bound twice (also at line {})",
                    text,
                    crate::error::line_of(&src.text, other)
                ),
            ));
        }
        // A kept zone has this binding already; a fresh one is not shared,
        // so make_mut does not copy it.
        let b = bindings.len() as u32;
        if zone.get(&w).and_then(|n| n.dynamic()) != Some(b) {
            let zone = Arc::make_mut(&mut zones[zi]);
            let node = zone.node_id(&w);
            zone.set_dynamic(node, b);
        }
        name_spans.push(span.clone());
        bindings.push(Binding {
            name: text,
            mode: r.mode,
            sticky: r.sticky,
            ttl: r.ttl,
            degraded_ttl: r.degraded_ttl,
            when_all_down: r.when_all_down,
            spillover: r.spillover,
            target,
        });
    }

    cost.part("names");

    // Geo tables: one per distinct rule shape, the distinct ones built in
    // parallel; names with rules of one shape share a table.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rules: Vec<&RuleSet> = geo_names.iter().map(|(_, r, _, _)| &**r).collect();
    // Over an unchanged database the running tables are kept, and the file
    // is not even opened unless a new shape needs a table.
    let same_db = prev.is_some_and(|p| p.geo_stamp.is_some() && p.geo_stamp == geo_stamp);
    let mut cache = match prev {
        Some(p) if same_db => TableCache::with(p.geo_tables().into_iter().cloned()),
        _ => TableCache::new(),
    };
    let plan = cache.plan(&rules);
    let geo_tables_built = plan.tables_to_build();
    let geo = match &geo_src {
        Some(g) if !same_db || geo_tables_built > 0 => Some(g.open(src)?),
        _ => None,
    };
    // Subdivision keys the database never reports can never match: warn
    // (a database may lack a region today and have it after an update, so
    // it is not an error). Only when the database is read anyway.
    let mut warnings = key_warnings;
    if let Some(db) = geo.as_deref() {
        let wanted: Vec<_> = geo_names
            .iter()
            .flat_map(|(_, r, span, name)| r.subdivision.keys().map(move |k| (k, span, name)))
            .collect();
        if !wanted.is_empty() {
            let mut seen = std::collections::HashSet::new();
            db.for_each_network(|_, loc| {
                for s in &loc.subdivisions {
                    if !seen.contains(s) {
                        seen.insert(s.clone());
                    }
                }
            });
            for (k, span, name) in wanted {
                if !seen.contains(k) {
                    warnings.push(
                        src.err(
                            span.clone(),
                            format!(
                                "warning: geo name {name}: subdivision {k:?} is in no record of the geo database; the rule never applies"
                            ),
                        )
                        .to_string(),
                    );
                }
            }
        }
    }
    let maps = cache.build(plan, geo.as_deref(), threads);
    for ((b, _, span, name), map) in geo_names.iter().zip(maps) {
        families_everywhere(&map, &pools)
            .map_err(|m| src.err(span.clone(), format!("geo name {name}: {m}")))?;
        bindings[*b].target = Target::Geo(Box::new(map));
    }

    cost.part("geo tables");
    let signers = super::signed::build_signers(
        src,
        &mut zones,
        &dnssec,
        &bindings,
        &pools,
        &name_spans,
        prev,
    )?;
    cost.part("signing");

    let health = Arc::new(HealthTable::new(
        &health_specs,
        prev.map(|p| (&*p.health, &p.checks[..])),
    ));
    // Answer counts stay with their pool's name across a reload.
    let pool_answers = crate::metrics::PoolCounters::carry(
        pools.iter().map(|p| p.name.as_str()),
        prev.map(|e| {
            let names = e.pools.iter().map(|p| p.name.as_str()).collect();
            (&e.pool_answers, names)
        }),
    );
    if let Some(prev) = prev {
        carry_ramps(&pools, &prev.pools);
    }
    let e = Engine {
        config_path: src.path.clone(),
        zones,
        zone_index,
        dnssec,
        signers,
        pool_answers,
        pools,
        bindings,
        geo,
        geo_path: geo_src.map(|g| g.path),
        geo_stamp,
        geo_tables_built,
        warnings,
        health,
        checks: health_specs.into(),
        generation: GENERATION.fetch_add(1, Ordering::Relaxed),
        load_ms: 0,
        zones_loaded,
        build_cost: cost.parts,
        settings,
        api,
        fleet,
        refresh: std::sync::Mutex::new(()),
        decided: std::sync::atomic::AtomicU64::new(u64::MAX),
        registry,
        registered,
    };
    // The first decisions (overrides and runtime weights, which the daemon
    // holds, are applied again before the engine serves).
    for (pool, c) in e.rebalance(&Default::default(), crate::balance::now_ms()) {
        super::weights::log_panic(pool, c);
    }
    Ok(e)
}

/// A member that stays in a pool across a reload keeps its slow-start
/// ramp; one the reload adds starts a new one (issue #16). A pool keeps its
/// published decision until the new engine's first refresh, so a panic is
/// not announced again by a reload.
fn carry_ramps(pools: &[Pool], prev: &[Pool]) {
    use std::sync::atomic::Ordering::Relaxed;
    let by_name: std::collections::HashMap<&str, &Pool> =
        prev.iter().map(|p| (p.name.as_str(), p)).collect();
    for p in pools {
        let Some(old) = by_name.get(p.name.as_str()) else {
            continue;
        };
        for v6 in [false, true] {
            if p.family(v6).len() == old.family(v6).len() {
                p.gate[v6 as usize].store(old.gate(v6));
            }
            for m in p.family(v6) {
                if let Some(o) = old.family(v6).iter().find(|o| o.addr == m.addr) {
                    m.since.store(o.since.load(Relaxed), Relaxed);
                }
            }
        }
    }
}

/// RFC 7871 §7.4: whether a name has addresses of a family must not depend
/// on where the client is: a NODATA carries scope 0 and resolvers may cache
/// it for every client. So either every pool list the map hands out has a
/// member of the family (the failover walk finds it), or none has.
fn families_everywhere(map: &GeoMap, pools: &[Pool]) -> Result<(), String> {
    let names = |id: u32| {
        map.decision(id)
            .iter()
            .map(|&p| pools[p].name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (v6, fam, t) in [(false, "IPv4", "A"), (true, "IPv6", "AAAA")] {
        let has = |id: u32| {
            map.decision(id)
                .iter()
                .any(|&p| !pools[p].family(v6).is_empty())
        };
        let ids = map.used_decisions().iter().copied();
        let with = ids.clone().find(|&i| has(i));
        let without = ids.clone().find(|&i| !has(i));
        if let (Some(w), Some(wo)) = (with, without) {
            return Err(format!(
                "{t} records would exist for some clients only: pools [{}] have {fam} members, \
                 pools [{}] have none, and a NODATA is cached for every client (RFC 7871 §7.4); \
                 give every pool list an {fam} member, or none",
                names(w),
                names(wo)
            ));
        }
    }
    Ok(())
}

/// Time and memory (the change in resident set size) per part of a build,
/// for `meridian check`.
struct CostMeter {
    at: std::time::Instant,
    rss: i64,
    parts: Vec<BuildCost>,
}

impl CostMeter {
    fn start() -> CostMeter {
        CostMeter {
            at: std::time::Instant::now(),
            rss: rss_kib(),
            parts: Vec::new(),
        }
    }

    fn part(&mut self, name: &'static str) {
        let (now, rss) = (std::time::Instant::now(), rss_kib());
        self.parts.push(BuildCost {
            part: name,
            ms: now.duration_since(self.at).as_secs_f64() * 1000.0,
            rss_kib: rss - self.rss,
        });
        (self.at, self.rss) = (now, rss);
    }
}

/// This process's resident set size in KiB (0 where /proc is missing).
fn rss_kib() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))?
                .trim()
                .trim_end_matches(" kB")
                .parse()
                .ok()
        })
        .unwrap_or(0)
}
