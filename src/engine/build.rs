//! Validated config → [`Engine`]: zones, pools, names bound to pools or geo
//! rules, health specs and the geo decision blocks. Every error names the
//! config file's line (and the zone file's, where the clash is there).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hickory_proto::rr::Name;
use toml::Spanned;

use super::{AllDown, Binding, Engine, Target};
use crate::config::{ConfigFile, PoolCfg, ServerSettings, Source};
use crate::error::LocatedError;
use crate::geo::{GeoDb, GeoMap, RuleSet, Schema};
use crate::health::{CheckSpec, HealthTable};
use crate::pool::{Member, Mode, Pool, MAX_MEMBERS, MAX_SOME};
use crate::zone::{name_text, wire_name, Zone};
use meridian_wire::{TYPE_A, TYPE_AAAA, TYPE_CNAME};

static GENERATION: AtomicU64 = AtomicU64::new(1);

pub(super) fn build(
    src: &Source,
    cfg: ConfigFile,
    prev: Option<&Engine>,
) -> Result<Engine, LocatedError> {
    let settings = ServerSettings::from_cfg(src, &cfg.server)?;

    // Zones. A config that serves nothing is almost always a file caught
    // mid-write, so it is refused rather than answered with REFUSED.
    if cfg.zone.is_empty() {
        return Err(LocatedError::new(&src.path, 0, "no [[zone]] is configured"));
    }
    let mut zones = Vec::new();
    let mut zone_index = crate::zone::NameMap::default();
    for z in &cfg.zone {
        let zc = z.get_ref();
        let origin = Name::from_ascii(&zc.origin)
            .map(|mut n| {
                n.set_fqdn(true);
                n
            })
            .map_err(|e| src.err(z.span(), format!("bad zone origin {:?}: {e}", zc.origin)))?;
        let file = src.resolve(&zc.file);
        let zone = Zone::load(&origin, &file)?;
        if zone_index
            .insert(zone.origin.clone(), zones.len())
            .is_some()
        {
            return Err(src.err(
                z.span(),
                format!("zone {} is listed twice", zone.origin_text),
            ));
        }
        zones.push(zone);
    }

    // Health checks named in the config.
    let mut health_specs: Vec<CheckSpec> = Vec::new();
    let mut spec_index: HashMap<CheckSpec, u32> = HashMap::new();
    let checks = crate::health::parse_checks(src, &cfg.check)?;

    // Pools.
    let mut pools = Vec::new();
    let mut pool_index = HashMap::new();
    for (name, p) in &cfg.pool {
        let pool = build_pool(src, name, p, &checks, &mut health_specs, &mut spec_index)?;
        pool_index.insert(name.clone(), pools.len());
        pools.push(pool);
    }

    // Geo database.
    let (geo, geo_path) = match &cfg.geo {
        None => (None, None),
        Some(g) => {
            let schema = match g.schema.get_ref().as_str() {
                "auto" => Schema::Auto,
                "maxmind" => Schema::MaxMind,
                "flat" => Schema::Flat,
                other => {
                    return Err(src.err(
                        g.schema.span(),
                        format!("unknown geo schema {other:?} (auto, maxmind or flat)"),
                    ))
                }
            };
            let p = src.resolve(g.database.get_ref());
            // The error already names the file.
            let db = GeoDb::open(&p, schema).map_err(|e| src.err(g.database.span(), e))?;
            (Some(Arc::new(db)), Some(p))
        }
    };

    // Names bound to pools.
    let mut bindings = Vec::new();
    let mut bound_at = HashMap::new();
    for (name, nc) in &cfg.name {
        let span = nc.span();
        let n = nc.get_ref();
        let parsed = Name::from_ascii(name)
            .map(|mut x| {
                x.set_fqdn(true);
                x
            })
            .map_err(|e| src.err(span.clone(), format!("bad name {name:?}: {e}")))?;
        let w = wire_name(&parsed);
        let zi = {
            let mut found = None;
            let mut cur: &[u8] = &w;
            loop {
                if let Some(&i) = zone_index.get(cur) {
                    found = Some(i);
                    break;
                }
                match crate::zone::parent(cur) {
                    Some(p) => cur = p,
                    None => break,
                }
            }
            found.ok_or_else(|| {
                src.err(
                    span.clone(),
                    format!("{} is not in any served zone", name_text(&w)),
                )
            })?
        };
        let zone = &mut zones[zi];
        if let Some(node) = zone.get(&w) {
            for (t, f, l) in &node.origins {
                if *t == TYPE_A || *t == TYPE_AAAA || *t == TYPE_CNAME {
                    return Err(src.err(
                        span.clone(),
                        format!(
                            "{} is bound to a pool but {}:{} has {} data at the same name",
                            name_text(&w),
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
            if zone.get(cur).map(|x| x.cut).unwrap_or(false) {
                return Err(src.err(
                    span.clone(),
                    format!("{} is at or below a delegation", name_text(&w)),
                ));
            }
            cur = crate::zone::parent(cur).unwrap_or(&zone.origin);
        }
        let mode = match n.mode.get_ref().as_str() {
            "all" => Mode::All,
            "rotate" => Mode::Rotate,
            "one" => Mode::One,
            "some" => {
                let k = n.count.as_ref().map(|c| (*c.get_ref(), c.span()));
                let k = match k {
                    None => 2,
                    Some((k, s)) => {
                        if !(1..=MAX_SOME as i64).contains(&k) {
                            return Err(src.err(s, format!("count must be 1..={MAX_SOME}")));
                        }
                        k
                    }
                };
                Mode::Some(k as u8)
            }
            other => {
                return Err(src.err(
                    n.mode.span(),
                    format!("unknown mode {other:?} (all, rotate, one or some)"),
                ))
            }
        };
        if let (Some(c), false) = (&n.count, matches!(mode, Mode::Some(_))) {
            return Err(src.err(c.span(), "count applies only to mode \"some\""));
        }
        let ttl = ranged(src, &n.ttl, 30, 1, 86400, "ttl")?;
        let degraded_ttl = ranged(
            src,
            &n.degraded_ttl,
            10.min(ttl as i64),
            1,
            86400,
            "degraded_ttl",
        )?;
        let when_all_down = match n
            .when_all_down
            .as_ref()
            .map(|s| (s.get_ref().as_str(), s.span()))
        {
            None | Some(("all", _)) => AllDown::All,
            Some(("empty", _)) => AllDown::Empty,
            Some(("servfail", _)) => AllDown::Servfail,
            Some((other, s)) => {
                return Err(src.err(
                    s,
                    format!("unknown when_all_down {other:?} (all, empty or servfail)"),
                ))
            }
        };
        let lookup_pool = |p: &Spanned<String>| -> Result<usize, LocatedError> {
            pool_index
                .get(p.get_ref())
                .copied()
                .ok_or_else(|| src.err(p.span(), format!("unknown pool {:?}", p.get_ref())))
        };
        let target = match (&n.pool, &n.geo) {
            (Some(p), None) => Target::Pool(lookup_pool(p)?),
            (None, Some(g)) => {
                let list = |v: &Vec<Spanned<String>>| -> Result<Vec<usize>, LocatedError> {
                    if v.is_empty() {
                        return Err(src.err(span.clone(), "an empty pool list"));
                    }
                    v.iter().map(lookup_pool).collect()
                };
                let mut rules = RuleSet {
                    default: match &g.default {
                        Some(d) => list(d)?,
                        None => {
                            return Err(src.err(
                                span.clone(),
                                format!("geo name {name} needs a default pool list"),
                            ))
                        }
                    },
                    ..RuleSet::default()
                };
                for (net, v) in &g.nets {
                    let parsed: ipnet::IpNet = net.parse().map_err(|_| {
                        src.err(span.clone(), format!("bad network {net:?} in nets"))
                    })?;
                    if parsed.trunc() != parsed {
                        return Err(src.err(
                            span.clone(),
                            format!(
                                "network {net} has host bits set (did you mean {})?",
                                parsed.trunc()
                            ),
                        ));
                    }
                    if rules.nets.iter().any(|(n, _)| *n == parsed) {
                        return Err(src.err(
                            span.clone(),
                            format!("network {parsed} is listed twice in nets"),
                        ));
                    }
                    rules.nets.push((parsed, list(v)?));
                }
                // Keys are case-insensitive; a key that can never match a
                // database record is an error, not a rule that silently
                // never applies.
                let key = |kind: &str, k: &str, ok: bool, want: &str| {
                    if ok {
                        Ok(k.trim().to_ascii_uppercase())
                    } else {
                        Err(src.err(span.clone(), format!("{kind} key {k:?} is not {want}")))
                    }
                };
                let twice = |kind: &str, k: &str| {
                    src.err(
                        span.clone(),
                        format!("{kind} {k:?} is listed twice (keys are case-insensitive)"),
                    )
                };
                let cc = |c: &str| c.len() == 2 && c.bytes().all(|b| b.is_ascii_alphabetic());
                for (k, v) in &g.subdivision {
                    let ok = matches!(k.trim().split_once('-'), Some((c, s)) if cc(c)
                        && (1..=8).contains(&s.len())
                        && s.bytes().all(|b| b.is_ascii_alphanumeric()));
                    let up = key("subdivision", k, ok, "an ISO 3166-2 code like \"US-CA\"")?;
                    if rules.subdivision.insert(up, list(v)?).is_some() {
                        return Err(twice("subdivision", k));
                    }
                }
                for (k, v) in &g.country {
                    let up = key("country", k, cc(k.trim()), "an ISO 3166-1 code like \"DE\"")?;
                    if rules.country.insert(up, list(v)?).is_some() {
                        return Err(twice("country", k));
                    }
                }
                for (k, v) in &g.continent {
                    let ok = ["AF", "AN", "AS", "EU", "NA", "OC", "SA"]
                        .iter()
                        .any(|c| c.eq_ignore_ascii_case(k.trim()));
                    let up = key("continent", k, ok, "one of AF, AN, AS, EU, NA, OC, SA")?;
                    if rules.continent.insert(up, list(v)?).is_some() {
                        return Err(twice("continent", k));
                    }
                }
                if let Some(near) = &g.nearest {
                    let mut out = Vec::new();
                    for p in near {
                        let i = lookup_pool(p)?;
                        let Some((lat, lon)) = pools[i].location else {
                            return Err(src.err(
                                p.span(),
                                format!("pool {:?} has no location for nearest mode", p.get_ref()),
                            ));
                        };
                        out.push((i, lat, lon));
                    }
                    rules.nearest = Some(out);
                }
                let needs_db = !rules.subdivision.is_empty()
                    || !rules.country.is_empty()
                    || !rules.continent.is_empty()
                    || rules.nearest.is_some();
                if needs_db && geo.is_none() {
                    return Err(src.err(
                        span.clone(),
                        format!(
                            "geo name {name} uses locations but the config has no [geo] database"
                        ),
                    ));
                }
                let map = GeoMap::compile(geo.as_deref(), &rules);
                families_everywhere(&map, &pools)
                    .map_err(|m| src.err(span.clone(), format!("geo name {name}: {m}")))?;
                Target::Geo(Box::new(map))
            }
            (Some(_), Some(_)) => {
                return Err(src.err(span.clone(), "a name has either pool or geo, not both"))
            }
            (None, None) => return Err(src.err(span.clone(), "a name needs a pool or geo rules")),
        };
        let node = zone.node_id(&w);
        // Keys differing only in case or a trailing dot name the same owner.
        if let Some(other) = bound_at.insert(w.clone(), span.start) {
            return Err(src.err(
                span.clone(),
                format!(
                    "{} is bound twice (also at line {})",
                    name_text(&w),
                    crate::error::line_of(&src.text, other)
                ),
            ));
        }
        zone.nodes[node as usize].dynamic = Some(bindings.len() as u32);
        bindings.push(Binding {
            name: name_text(&w),
            mode,
            ttl,
            degraded_ttl,
            when_all_down,
            target,
            slot: bindings.len() * 2,
        });
    }

    let health = Arc::new(HealthTable::new(
        &health_specs,
        prev.map(|p| (&*p.health, &p.checks[..])),
    ));
    Ok(Engine {
        config_path: src.path.clone(),
        zones,
        zone_index,
        pools,
        bindings,
        geo,
        geo_path,
        health,
        checks: health_specs,
        payload: settings.edns_udp_payload,
        generation: GENERATION.fetch_add(1, Ordering::Relaxed),
        load_ms: 0,
        settings,
    })
}

/// RFC 7871 §7.4: whether a name has addresses of a family must not depend
/// on where the client is: a NODATA carries scope 0 and resolvers may cache
/// it for every client. So either every pool list the map hands out has a
/// member of the family (the failover walk finds it), or none has.
fn families_everywhere(map: &GeoMap, pools: &[Pool]) -> Result<(), String> {
    let mut used = vec![false; map.decision_count()];
    for (_, id) in map.blocks() {
        used[id as usize] = true;
    }
    let names = |id: usize| {
        map.decision(id as u32)
            .iter()
            .map(|&p| pools[p].name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (v6, fam, t) in [(false, "IPv4", "A"), (true, "IPv6", "AAAA")] {
        let has = |id: usize| {
            map.decision(id as u32)
                .iter()
                .any(|&p| !pools[p].family(v6).is_empty())
        };
        let ids = (0..used.len()).filter(|&i| used[i]);
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

fn ranged(
    src: &Source,
    v: &Option<Spanned<i64>>,
    default: i64,
    lo: i64,
    hi: i64,
    what: &str,
) -> Result<u32, LocatedError> {
    match v {
        None => Ok(default as u32),
        Some(s) => {
            let x = *s.get_ref();
            if x < lo || x > hi {
                Err(src.err(s.span(), format!("{what} must be {lo}..={hi}, not {x}")))
            } else {
                Ok(x as u32)
            }
        }
    }
}

fn build_pool(
    src: &Source,
    name: &str,
    p: &Spanned<PoolCfg>,
    checks: &BTreeMap<String, crate::health::Check>,
    specs: &mut Vec<CheckSpec>,
    spec_index: &mut HashMap<CheckSpec, u32>,
) -> Result<Pool, LocatedError> {
    let pc = p.get_ref();
    if pc.members.is_empty() {
        return Err(src.err(p.span(), format!("pool {name:?} is empty")));
    }
    // A check by name; "none" (unless a table of that name exists) means no check.
    let find_check = |c: &str,
                      span: std::ops::Range<usize>|
     -> Result<Option<crate::health::Check>, LocatedError> {
        match checks.get(c) {
            Some(x) => Ok(Some(x.clone())),
            None if c == "none" => Ok(None),
            None => Err(src.err(span, format!("pool {name:?}: unknown check {c:?}"))),
        }
    };
    let default_check = match &pc.check {
        None => None,
        Some(c) => find_check(c.get_ref(), c.span())?,
    };
    let mut pool = Pool {
        name: name.to_string(),
        v4: Vec::new(),
        v6: Vec::new(),
        location: pc.location.map(|[a, b]| (a, b)),
        min_up: pc.min_up.unwrap_or(1.0),
    };
    if !(pool.min_up > 0.0 && (pool.min_up < 1.0 || pool.min_up.fract() == 0.0))
        || pool.min_up > MAX_MEMBERS as f64
    {
        return Err(src.err(
            p.span(),
            format!(
                "pool {name:?}: min_up must be a whole count >= 1 or a fraction in (0, 1), not {}",
                pool.min_up
            ),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for m in &pc.members {
        let (addr, weight, check, port) = match m.get_ref() {
            crate::config::MemberCfg::Addr(a) => (a.as_str(), None, None, None),
            crate::config::MemberCfg::Full {
                address,
                weight,
                check,
                port,
            } => (address.as_str(), *weight, check.as_deref(), *port),
        };
        let ip: IpAddr = addr
            .parse()
            .map_err(|_| src.err(m.span(), format!("bad member address {addr:?}")))?;
        let weight = weight.unwrap_or(1);
        if !(1..=65535).contains(&weight) {
            return Err(src.err(m.span(), format!("weight must be 1..=65535, not {weight}")));
        }
        if !seen.insert(ip) {
            return Err(src.err(
                m.span(),
                format!("member {ip} is listed twice in pool {name:?}"),
            ));
        }
        let check = match check {
            Some(c) => find_check(c, m.span())?,
            None => default_check.clone(),
        };
        if port == Some(0) {
            return Err(src.err(m.span(), format!("member {ip}: port 0")));
        }
        let spec = CheckSpec::new(ip, port, check);
        if let Some(c) = &spec.check {
            if spec.effective_port().is_none() {
                return Err(src.err(
                    m.span(),
                    format!(
                        "member {ip} of pool {name:?}: check {:?} is tcp and has no port (give the check or the member a port)",
                        c.name
                    ),
                ));
            }
        }
        let h = *spec_index.entry(spec.clone()).or_insert_with(|| {
            specs.push(spec);
            (specs.len() - 1) as u32
        });
        let member = Member::new(ip, weight as u32, h);
        match ip {
            IpAddr::V4(_) => pool.v4.push(member),
            IpAddr::V6(_) => pool.v6.push(member),
        }
        if pool.v4.len() > MAX_MEMBERS || pool.v6.len() > MAX_MEMBERS {
            return Err(src.err(
                m.span(),
                format!("a pool holds at most {MAX_MEMBERS} members per family"),
            ));
        }
    }
    Ok(pool)
}
