//! `meridian lookup`: how a name is answered for a client, and why: from
//! the config alone (the configured view), or from a running server
//! (`--server`, through its API's `GET /lookup`: the live view).

use std::net::IpAddr;
use std::path::Path;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::Name;

use crate::answer::{geo_client, sticky_block, Outcome, Scratch, Transport};
use crate::engine::{Engine, Target};
use crate::pool::Mode;
use crate::zone::{name_text, wire_name};
use meridian_wire::{ClientSubnet, QueryBuilder, TYPE_A, TYPE_AAAA};

/// What the offline form cannot know, said on its first line.
pub const OFFLINE_VIEW: &str =
    "view:     offline, the config alone: no health check run, no operator \
overrides, no runtime weights (--server ADDR shows the live decision)";

/// `meridian lookup`: how `name` is answered for `client` ("ADDR" or
/// "ADDR/LEN"), without a server: [`explain`] on the engine the config
/// builds. That engine has no live state: every member is as at start-up,
/// before any health check, and the operator's overrides and runtime
/// weights (kept by the running server) are not applied.
pub fn lookup(config: &Path, name: &str, qtype: &str, client: &str) -> Result<String, String> {
    let e = Engine::load(config).map_err(|e| e.to_string())?;
    let served_by = config.display().to_string();
    explain(&e, name, qtype, client, &served_by, OFFLINE_VIEW)
}

/// How `name` is answered for `client` by `e`, and why. The query goes
/// through the same answer path the server runs ([`Engine::answer`]), with
/// the client as both the ECS subnet (ADDR/LEN; no LEN = a /32 or /128)
/// and the transport source, and [`crate::geo::GeoMap::explain`] says why.
/// `view` is the first line (where the engine's state comes from);
/// `served_by` names the config in errors. A name that is not pool- or
/// geo-backed is an error whose message shows the zone's static answer
/// (scope 0). The running server calls this on its live engine (`GET
/// /lookup`), so overrides, runtime weights and health are applied there.
pub fn explain(
    e: &Engine,
    name: &str,
    qtype: &str,
    client: &str,
    served_by: &str,
    view: &str,
) -> Result<String, String> {
    let qtype = qtype.to_ascii_uppercase();
    let (v6, rtype) = match qtype.as_str() {
        "A" => (false, TYPE_A),
        "AAAA" => (true, TYPE_AAAA),
        other => return Err(format!("lookup: --type must be A or AAAA, not {other:?}")),
    };
    let (addr, len) = parse_client(client)?;
    let mut qname =
        Name::from_ascii(name).map_err(|err| format!("lookup: bad name {name:?}: {err}"))?;
    qname.set_fqdn(true);
    let wire = wire_name(&qname);
    let qtext = name_text(&wire);
    if e.zone_for(&wire).is_none() {
        return Err(format!(
            "lookup: {qtext} is not in any zone served by {served_by}"
        ));
    }

    // One query through the server's own answer path (TCP: never truncated).
    let ecs = ClientSubnet::new(addr, len).expect("length checked");
    let req = QueryBuilder::wire(wire.to_vec(), rtype)
        .id(0x4d52)
        .ecs(addr, len)
        .build();
    let mut scratch = Scratch::default();
    let mut out = vec![0u8; 65535];
    let mut outcome = Outcome::default();
    let t = Transport {
        src: addr,
        tcp: true,
    };
    let rlen = e
        .answer(&req, t, &mut scratch, &mut out, &mut outcome)
        .ok_or("lookup: the query was not answered")?;
    let resp =
        Message::from_vec(&out[..rlen]).map_err(|err| format!("lookup: bad response: {err}"))?;
    let mut records: Vec<String> = resp.answers.iter().map(|r| r.to_string()).collect();
    let rcode = resp.metadata.response_code;
    let scope = outcome.scope.unwrap_or(0);

    // The binding that answered: the name itself, a wildcard or a CNAME target.
    let exact = e
        .zone_for(&wire)
        .and_then(|z| z.get(&wire))
        .and_then(|n| n.dynamic());
    let Some(b) = outcome.pool.map(|p| p.0).or(exact) else {
        let answer = if records.is_empty() {
            format!("{}, no records", rcode_name(rcode))
        } else {
            records.join("\n  ")
        };
        return Err(format!(
            "lookup: {qtext} is not pool- or geo-backed; the zone answers it statically, \
             the same for every client (scope /0):\n  {answer}"
        ));
    };
    let binding = &e.bindings[b as usize];
    let names = |list: &[usize]| {
        list.iter()
            .map(|&p| e.pools[p].name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut s = format!("{view}\n");
    let via = if binding.name != qtext {
        format!(" (answered by {})", binding.name)
    } else {
        String::new()
    };
    let mode = match binding.sticky {
        Some(st) => format!(
            "{} (sticky, blocks /{} and /{})",
            binding.mode, st.v4, st.v6
        ),
        None => binding.mode.to_string(),
    };
    let client_text = format!("{addr}/{len}");
    // Why the response has the scope it has.
    let mut why_scope = String::new();
    match &binding.target {
        Target::Pool(p) => {
            s += &format!(
                "name:     {qtext} {qtype}{via}: pool {}, mode {mode}\n",
                e.pools[*p].name
            );
            s += &format!("client:   {client_text}\n");
            s += if binding.sticky.is_some() {
                "location: not used (a sticky pool picks by the client's block, not its location)\n"
            } else {
                "location: not used (a plain pool answers every client alike)\n"
            };
            s += "rule:     none\n";
            why_scope = "the answer does not depend on the client".into();
        }
        Target::Geo(map) => {
            s += &format!("name:     {qtext} {qtype}{via}: geo, mode {mode}\n");
            let (at, _) = geo_client(Some(ecs), addr);
            let d = map.explain(e.geo.as_deref(), at);
            let special = crate::geo::special_block(ecs.addr());
            match (len, special) {
                (0, _) => {
                    s += &format!(
                        "client:   {client_text} (SOURCE 0: decided on the source address {at})\n"
                    )
                }
                (_, Some(blk)) => {
                    s += &format!(
                        "client:   {client_text} is special-purpose space {blk}: ECS ignored, \
                         decided on the resolver's address (here the client's own, {at})\n"
                    );
                    why_scope = format!("{blk}, the whole special-purpose block");
                }
                _ => s += &format!("client:   {client_text}, decided on {at}\n"),
            }
            if e.geo.is_none() && e.geo_path.is_some() {
                // A serving engine dropped the database after compiling it.
                s += "location: not shown: a running server keeps the compiled decision \
                      blocks, not the database (the offline form shows the location and rule)\n";
                s += &format!("rule:     (compiled) -> pools {}\n", names(&d.pools));
            } else {
                match (&d.location, &d.db_network) {
                    (Some(l), Some(n)) => s += &format!("location: {l} (database network {n})\n"),
                    _ => s += "location: not in the database\n",
                }
                s += &format!("rule:     {} -> pools {}\n", d.rule, names(&d.pools));
                if !d.consistent {
                    s += "warning:  the compiled map disagrees with direct evaluation (a bug)\n";
                }
            }
            if map.is_uniform() {
                why_scope = format!("every client gets pools {}", names(&d.pools));
            } else if len == 0 {
                why_scope = "SOURCE 0: the client asked that its address not be used".into();
            } else if why_scope.is_empty() {
                why_scope = format!(
                    "{}, the largest block around the client in which every address gets pools {}",
                    d.block,
                    names(&d.pools)
                );
            }
        }
    }
    // A sticky answer holds only inside its client block (or special block).
    if let Some(st) = binding.sticky {
        let (_, blen) = sticky_block(Some(ecs), addr, st);
        let prefix = st.prefix_for(ecs.addr());
        let blk = ipnet::IpNet::new(ecs.addr(), blen).map(|n| n.trunc());
        match (crate::geo::special_block(ecs.addr()), blk) {
            (Some(special), _) if len > 0 && blen == scope => {
                why_scope = format!(
                    "{special}, the whole special-purpose block: ECS ignored, the member \
                     is picked by the resolver's block (here the client's own, {addr})"
                );
            }
            (None, Ok(blk)) if blen > 0 && blen == scope && blen == prefix => {
                why_scope =
                    format!("{blk}, the sticky client block: its members are chosen per block");
            }
            (None, Ok(blk)) if blen > 0 && blen == scope => {
                why_scope = format!(
                    "{blk}, the largest block of the client's sticky /{prefix} block that \
                     holds no special-purpose space (its members are chosen per /{prefix})"
                );
            }
            _ => {}
        }
    }
    match outcome.pool {
        Some((_, p)) => {
            let pool = &e.pools[p as usize];
            s += &format!("pool:     {}\n", pool.name);
            s += &balancing(pool, v6, binding.spillover);
        }
        None => s += "pool:     none\n",
    }
    if binding.mode == Mode::All {
        // The server shuffles the order per answer; sorted here.
        records.sort();
    }
    if records.is_empty() {
        let why = if rcode == ResponseCode::NoError {
            format!(
                "NODATA (no {} member is available)",
                if v6 { "IPv6" } else { "IPv4" }
            )
        } else {
            rcode_name(rcode)
        };
        s += &format!("answer:   {why}\n");
        why_scope = "a negative answer never depends on the client".into();
    } else {
        s += &format!("answer:   {}\n", records.join("\n          "));
    }
    s += &format!("scope:    /{scope} ({why_scope})\n");
    Ok(s)
}

/// The pool's balancing decision for the family, as `/status` shows it:
/// each member's standing and effective weight with its factors (offline:
/// as at start-up, no check has run; on a running server: live).
fn balancing(pool: &crate::pool::Pool, v6: bool, spillover: Option<f64>) -> String {
    let g = pool.gate(v6);
    let share = f64::from(g.share) / f64::from(crate::pool::SHARE_ONE);
    let mut s = format!(
        "balance:  {} of {} member(s) usable, {:.0} % pass their checks{}{}\n",
        g.usable,
        pool.family(v6).len(),
        share * 100.0,
        if g.panic { ", PANIC (all answer)" } else { "" },
        match spillover {
            Some(f) => format!(
                ", spillover {f}: keeps {:.0} % of its clients",
                (share * f).min(1.0) * 100.0
            ),
            None => String::new(),
        }
    );
    let width = pool
        .family(v6)
        .iter()
        .map(|m| m.addr.to_string().len())
        .max()
        .unwrap_or(0);
    for (m, r) in pool
        .family(v6)
        .iter()
        .zip(pool.report[v6 as usize].snapshot())
    {
        // The error penalty only when it acts, so healthy lines keep their form.
        let errors = if r.errors < 1.0 {
            format!(" × errors {:.2}", r.errors)
        } else {
            String::new()
        };
        s += &format!(
            "  {:<width$} {:<19} weight {} × slow start {:.2} × latency {:.2} × load {:.2} × runtime {}{errors} = {:.3}\n",
            m.addr.to_string(),
            r.standing.name(),
            m.weight,
            r.slow_start,
            r.latency,
            r.load,
            r.runtime,
            r.effective
        );
    }
    s
}

/// The RCODE as dig prints it (a NOERROR here has no records: NODATA).
fn rcode_name(rc: ResponseCode) -> String {
    match meridian_wire::rcode_name(u16::from(rc)) {
        Some("NOERROR") => "NOERROR (NODATA)".into(),
        Some(name) => name.into(),
        None => u16::from(rc).to_string(),
    }
}

/// "ADDR" (a /32 or /128) or "ADDR/LEN".
fn parse_client(client: &str) -> Result<(IpAddr, u8), String> {
    let bad = || format!("lookup: bad --client {client:?} (want ADDR or ADDR/LEN)");
    let (a, l) = match client.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (client, None),
    };
    let addr: IpAddr = a.trim().parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match l {
        None => max,
        Some(l) => l.trim().parse::<u8>().map_err(|_| bad())?,
    };
    if len > max {
        return Err(format!(
            "lookup: prefix /{len} is longer than the address family allows (/{max})"
        ));
    }
    Ok((addr, len))
}
