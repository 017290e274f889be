//! `[pool.NAME]`: address pools, checked into [`Pool`]s. Each member's
//! (address, port, check) becomes a health-table entry, shared by every
//! pool that names the same one.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use toml::Spanned;

use super::{PoolCfg, Source};
use crate::error::LocatedError;
use crate::health::{Check, CheckSpec};
use crate::pool::{Member, Pool, MAX_MEMBERS};

/// Check one pool. `specs` collects the distinct health-table entries and
/// `spec_index` finds them again; members point into it.
pub fn pool(
    src: &Source,
    name: &str,
    p: &Spanned<PoolCfg>,
    checks: &BTreeMap<String, Arc<Check>>,
    specs: &mut Vec<CheckSpec>,
    spec_index: &mut HashMap<CheckSpec, u32>,
) -> Result<Pool, LocatedError> {
    let pc = p.get_ref();
    if pc.members.is_empty() {
        return Err(src.err(p.span(), format!("pool {name:?} is empty")));
    }
    // A check by name; "none" (unless a table of that name exists) means no check.
    let find_check =
        |c: &str, span: std::ops::Range<usize>| -> Result<Option<Arc<Check>>, LocatedError> {
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
        rotation: Default::default(),
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
            super::MemberCfg::Addr(a) => (a.as_str(), None, None, None),
            super::MemberCfg::Full {
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
    pool.seal();
    Ok(pool)
}
