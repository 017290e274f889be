//! `[name."NAME"]`: names answered from pools, checked into
//! [`NameRules`]: the mode (and whether `one`/`some` is sticky, with its
//! client block prefixes), TTLs, what to do when every pool is down, and
//! the pool or the geo rules (pool lists as indices into the pool list).

use std::collections::HashMap;

use hickory_proto::rr::Name;
use toml::Spanned;

use super::{NameCfg, Source};
use crate::error::LocatedError;
use crate::geo::RuleSet;
use crate::pool::{AllDown, Mode, Pool, Sticky, MAX_SOME};
use crate::zone::wire_name;

/// A checked `[name."NAME"]` table.
#[derive(Debug)]
pub struct NameRules {
    /// How members are picked.
    pub mode: Mode,
    /// `sticky = true` (`one` and `some` only): the client block's prefixes.
    pub sticky: Option<Sticky>,
    /// TTL of the answers, in seconds.
    pub ttl: u32,
    /// TTL while the answer is degraded (failover, members down), seconds.
    pub degraded_ttl: u32,
    /// What to answer when every candidate pool is down.
    pub when_all_down: AllDown,
    /// Spillover factor for the failover list (None: hard failover).
    pub spillover: Option<f64>,
    /// Where the answers come from.
    pub target: NameTarget,
}

/// Where a name's answers come from.
#[derive(Debug)]
pub enum NameTarget {
    /// One pool (an index into the pool list).
    Pool(usize),
    /// Geo rules, to compile against the database.
    Geo(Box<RuleSet>),
}

/// The lower-cased wire form of a `[name."NAME"]` key (a trailing dot is optional).
pub fn owner(
    src: &Source,
    name: &str,
    span: std::ops::Range<usize>,
) -> Result<Box<[u8]>, LocatedError> {
    let parsed = Name::from_ascii(name)
        .map(|mut x| {
            x.set_fqdn(true);
            x
        })
        .map_err(|e| src.err(span, format!("bad name {name:?}: {e}")))?;
    Ok(wire_name(&parsed))
}

/// Check one name's table. `pool_index` maps pool names to their place in
/// `pools`; `has_db` says whether the config has a `[geo]` database.
pub fn rules(
    src: &Source,
    name: &str,
    nc: &Spanned<NameCfg>,
    pool_index: &HashMap<String, usize>,
    pools: &[Pool],
    has_db: bool,
) -> Result<NameRules, LocatedError> {
    let span = nc.span();
    let n = nc.get_ref();
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
    let mode = match n.pick.as_ref().map(|p| (p.get_ref().as_str(), p.span())) {
        None | Some(("weighted", _)) => mode,
        Some(("p2c", s)) => {
            if mode != Mode::One {
                return Err(src.err(
                    s,
                    format!("pick = \"p2c\" applies only to mode \"one\", not \"{mode}\""),
                ));
            }
            if matches!(&n.sticky, Some(st) if *st.get_ref()) {
                return Err(src.err(s, "pick = \"p2c\" and sticky = true exclude each other"));
            }
            Mode::P2c
        }
        Some((other, s)) => {
            return Err(src.err(s, format!("unknown pick {other:?} (weighted or p2c)")));
        }
    };
    let sticky = sticky(src, n, mode)?;
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
        (Some(p), None) => NameTarget::Pool(lookup_pool(p)?),
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
                let parsed: ipnet::IpNet = net
                    .parse()
                    .map_err(|_| src.err(span.clone(), format!("bad network {net:?} in nets")))?;
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
            // ISO 3166-1 alpha-2 only: `UK` or `XX` can never match.
            let cc = |c: &str| crate::geo::countries::is_country(&c.to_ascii_uppercase());
            let not_a_country = |kind: &str, k: &str, c: &str| {
                let c = c.trim().to_ascii_uppercase();
                let hint = match crate::geo::countries::hint(&c) {
                    Some(h) => format!(" (did you mean {h:?}?)"),
                    None => String::new(),
                };
                src.err(
                    span.clone(),
                    format!("{kind} key {k:?}: {c:?} is not an ISO 3166-1 country code{hint}"),
                )
            };
            for (k, v) in &g.subdivision {
                let ok = matches!(k.trim().split_once('-'), Some((c, s)) if c.len() == 2
                    && (1..=8).contains(&s.len())
                    && s.bytes().all(|b| b.is_ascii_alphanumeric()));
                if let Some((c, _)) = k.trim().split_once('-').filter(|_| ok) {
                    if !cc(c) {
                        return Err(not_a_country("subdivision", k, c));
                    }
                }
                let up = key("subdivision", k, ok, "an ISO 3166-2 code like \"US-CA\"")?;
                if rules.subdivision.insert(up, list(v)?).is_some() {
                    return Err(twice("subdivision", k));
                }
            }
            for (k, v) in &g.country {
                let two = k.trim().len() == 2 && k.trim().bytes().all(|b| b.is_ascii_alphabetic());
                if two && !cc(k.trim()) {
                    return Err(not_a_country("country", k, k));
                }
                let up = key("country", k, two, "an ISO 3166-1 code like \"DE\"")?;
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
            if needs_db && !has_db {
                return Err(src.err(
                    span.clone(),
                    format!("geo name {name} uses locations but the config has no [geo] database"),
                ));
            }
            NameTarget::Geo(Box::new(rules))
        }
        (Some(_), Some(_)) => {
            return Err(src.err(span.clone(), "a name has either pool or geo, not both"))
        }
        (None, None) => return Err(src.err(span.clone(), "a name needs a pool or geo rules")),
    };
    let spillover = match &n.spillover {
        None => None,
        Some(v) => {
            let f = *v.get_ref();
            if !matches!(target, NameTarget::Geo(_)) {
                return Err(src.err(
                    v.span(),
                    format!("name {name}: spillover needs geo rules (a failover list of pools)"),
                ));
            }
            if !(f.is_finite() && (1.0..=10.0).contains(&f)) {
                return Err(src.err(
                    v.span(),
                    format!(
                        "name {name}: spillover must be a factor from 1 to 10 (e.g. 1.4), not {f}"
                    ),
                ));
            }
            Some(f)
        }
    };
    Ok(NameRules {
        mode,
        sticky,
        ttl,
        degraded_ttl,
        when_all_down,
        spillover,
        target,
    })
}

/// `sticky` and `sticky_prefix`: only on `one` and `some` (a sticky `all`
/// or `rotate` would mean nothing), the prefix only with `sticky = true`.
fn sticky(src: &Source, n: &NameCfg, mode: Mode) -> Result<Option<Sticky>, LocatedError> {
    let on = n.sticky.as_ref().map(|s| (*s.get_ref(), s.span()));
    if let Some((true, s)) = &on {
        if !matches!(mode, Mode::One | Mode::Some(_)) {
            return Err(src.err(
                s.clone(),
                format!("sticky applies only to modes \"one\" and \"some\", not \"{mode}\""),
            ));
        }
    }
    let on = matches!(on, Some((true, _)));
    let Some(p) = &n.sticky_prefix else {
        return Ok(on.then(Sticky::default));
    };
    if !on {
        return Err(src.err(p.span(), "sticky_prefix applies only with sticky = true"));
    }
    let [v4, v6] = &p.get_ref()[..] else {
        return Err(src.err(
            p.span(),
            "sticky_prefix must be [IPv4 length, IPv6 length], like [24, 56]",
        ));
    };
    let len = |v: &Spanned<i64>, max: i64, fam: &str| {
        let x = *v.get_ref();
        if (1..=max).contains(&x) {
            Ok(x as u8)
        } else {
            Err(src.err(
                v.span(),
                format!("sticky_prefix: the {fam} length must be 1..={max}, not {x}"),
            ))
        }
    };
    Ok(Some(Sticky {
        v4: len(v4, 32, "IPv4")?,
        v6: len(v6, 128, "IPv6")?,
    }))
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
