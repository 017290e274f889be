//! One logical lookup of NAME/TYPE (optionally with an ECS subnet) against a [`Target`]: picks a
//! server, skips lame, refusing and silent ones, and follows a CNAME that leaves the zone to the
//! target's own authoritative servers. The result is an [`Outcome`] that the ECS and rotation
//! checks compare.

use std::collections::HashMap;
use std::net::SocketAddr;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
use hickory_proto::rr::{Name, RData, RecordType};
use serde::Serialize;

use crate::query::{self, rcode_str, QueryError, QueryOptions};
use crate::servers::{Discovery, Zone};

/// Longest CNAME chain followed across servers.
const MAX_HOPS: usize = 8;

/// Where to send the questions.
pub enum Target {
    /// A server named with `--server` (resolver or authoritative): RD=1, AA not required.
    Fixed { addrs: Vec<SocketAddr> },
    /// The zone's own authoritative servers: RD=0, AA required.
    Authoritative {
        discovery: Box<Discovery>,
        /// The server that last answered well, per zone: asked first next time.
        preferred: HashMap<Name, SocketAddr>,
    },
}

/// Machine word for how a lookup ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// NOERROR or NXDOMAIN: a real answer.
    Ok,
    Timeout,
    Unreachable,
    Refused,
    Servfail,
    /// An authoritative server answered without AA.
    Lame,
    /// Anything else: other rcodes, TCP fallback failure, discovery failure.
    Error,
}

/// One server's reply on the way to the answer.
#[derive(Clone, Debug, Serialize)]
pub struct Hop {
    pub name: String,
    pub server: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    pub rcode: String,
    /// CNAME records in the reply, as "owner CNAME target".
    pub cnames: Vec<String>,
    pub scope: Option<u8>,
    pub ecs_echoed: bool,
    pub tcp: bool,
}

/// The end result of one lookup.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub status: Status,
    /// The server whose reply gave the final answer (or the last one tried).
    pub server: Option<String>,
    /// Response code of the final reply; null when no usable reply arrived.
    pub rcode: Option<String>,
    /// Records of the asked type, as text, in the order received.
    pub answers: Vec<String>,
    /// Smallest TTL among `answers`.
    pub ttl: Option<u32>,
    /// ECS scope prefix of the final reply; null when it carried no ECS option.
    pub scope: Option<u8>,
    pub ecs_echoed: bool,
    /// False when the echoed FAMILY/SOURCE/ADDRESS differ from the query's (RFC 7871 §7.3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ecs_echo_valid: Option<bool>,
    pub tcp: bool,
    /// Every reply that led here, in order (more than one when a CNAME was followed).
    pub chain: Vec<Hop>,
    pub error: Option<String>,
    pub notes: Vec<String>,
}

impl Outcome {
    fn failed(status: Status, error: String) -> Self {
        Outcome {
            status,
            server: None,
            rcode: None,
            answers: Vec::new(),
            ttl: None,
            scope: None,
            ecs_echoed: false,
            ecs_echo_valid: None,
            tcp: false,
            chain: Vec::new(),
            error: Some(error),
            notes: Vec::new(),
        }
    }

    /// True when a server gave a real answer (NOERROR or NXDOMAIN).
    pub fn ok(&self) -> bool {
        self.status == Status::Ok
    }
}

impl Target {
    fn recursion_desired(&self) -> bool {
        matches!(self, Target::Fixed { .. })
    }

    /// The servers to ask about `name`, best first, and the zone (when discovered).
    fn servers_for(&mut self, name: &Name) -> Result<(Vec<SocketAddr>, Option<Zone>), String> {
        match self {
            Target::Fixed { addrs } => Ok((addrs.clone(), None)),
            Target::Authoritative {
                discovery,
                preferred,
            } => {
                let zone = discovery.zone_for(name)?;
                let mut addrs: Vec<SocketAddr> = zone.servers.iter().map(|s| s.addr).collect();
                if let Some(best) = preferred.get(&zone.name) {
                    if let Some(i) = addrs.iter().position(|a| a == best) {
                        let best = addrs.remove(i);
                        addrs.insert(0, best);
                    }
                }
                Ok((addrs, Some(zone)))
            }
        }
    }

    fn remember(&mut self, zone: &Option<Zone>, server: SocketAddr) {
        if let (Target::Authoritative { preferred, .. }, Some(z)) = (self, zone) {
            preferred.insert(z.name.clone(), server);
        }
    }
}

/// Looks up `name`/`qtype` through `target`, with `ecs` as the client subnet if given.
pub fn lookup(
    target: &mut Target,
    name: &Name,
    qtype: RecordType,
    ecs: Option<ipnet::IpNet>,
    opts: &QueryOptions,
) -> Outcome {
    let mut current = name.clone();
    let mut chain: Vec<Hop> = Vec::new();
    let mut notes: Vec<String> = Vec::new();

    for _ in 0..MAX_HOPS {
        let (addrs, zone) = match target.servers_for(&current) {
            Ok(x) => x,
            Err(e) => {
                let mut out = Outcome::failed(Status::Error, e);
                out.chain = chain;
                out.notes = notes;
                return out;
            }
        };
        let rd = target.recursion_desired();
        let require_aa = !rd;
        let (reply, status, error) = ask_servers(
            &addrs,
            &current,
            qtype,
            ecs,
            rd,
            require_aa,
            zone.as_ref(),
            opts,
            &mut notes,
        );
        let Some(reply) = reply else {
            let mut out = Outcome::failed(status, error.unwrap_or_default());
            out.server = addrs.last().map(|a| a.to_string());
            out.chain = chain;
            out.notes = notes;
            return out;
        };
        target.remember(&zone, reply.server);

        let msg = &reply.message;
        let code = msg.metadata.response_code;
        let (scope, ecs_echoed, ecs_echo_valid) = ecs_echo(msg, ecs);
        if ecs_echo_valid == Some(false) {
            notes.push(format!(
                "{}: the ECS option in the reply does not repeat the query's FAMILY/SOURCE/ADDRESS; resolvers drop such replies (RFC 7871 §7.3)",
                reply.server
            ));
        }
        if reply.tcp {
            notes.push(format!(
                "{}: UDP reply truncated, answered over TCP",
                reply.server
            ));
        }
        let (cnames, terminal) = cname_chain(msg, &current);
        let answers: Vec<(String, u32)> = msg
            .answers
            .iter()
            .filter(|r| r.record_type() == qtype)
            .map(|r| (rdata_text(&r.data), r.ttl))
            .collect();
        chain.push(Hop {
            name: current.to_string(),
            server: reply.server.to_string(),
            zone: zone.as_ref().map(|z| z.name.to_string()),
            rcode: rcode_str(code),
            cnames: cnames.clone(),
            scope,
            ecs_echoed,
            tcp: reply.tcp,
        });

        let dangling = answers.is_empty() && code == ResponseCode::NoError && terminal != current;
        if dangling && !rd {
            let same_zone = zone.as_ref().is_some_and(|z| z.name.zone_of(&terminal));
            if !same_zone {
                notes.push(format!(
                    "{current} is a CNAME to {terminal}, outside zone {}: following it to that zone's servers",
                    zone.as_ref().map(|z| z.name.to_string()).unwrap_or_default()
                ));
            }
            current = terminal;
            continue;
        }
        if dangling {
            notes.push(format!(
                "the reply ends at CNAME target {terminal} with no {qtype} records (not followed: the server given with --server is expected to resolve it)"
            ));
        }

        let status = if matches!(code, ResponseCode::NoError | ResponseCode::NXDomain) {
            Status::Ok
        } else {
            status_for_rcode(code)
        };
        let error = (status != Status::Ok).then(|| rcode_message(code, &reply.server, rd));
        return Outcome {
            status,
            server: Some(reply.server.to_string()),
            rcode: Some(rcode_str(code)),
            ttl: answers.iter().map(|a| a.1).min(),
            answers: answers.into_iter().map(|a| a.0).collect(),
            scope,
            ecs_echoed,
            ecs_echo_valid,
            tcp: reply.tcp,
            chain,
            error,
            notes,
        };
    }
    let mut out = Outcome::failed(
        Status::Error,
        format!("CNAME chain from {name} is longer than {MAX_HOPS} hops (loop?)"),
    );
    out.chain = chain;
    out.notes = notes;
    out
}

/// Asks each server in turn until one gives a usable reply. Returns the reply (None when every
/// server failed), and otherwise the status and message of the last failure.
#[allow(clippy::too_many_arguments)]
fn ask_servers(
    addrs: &[SocketAddr],
    name: &Name,
    qtype: RecordType,
    ecs: Option<ipnet::IpNet>,
    rd: bool,
    require_aa: bool,
    zone: Option<&Zone>,
    opts: &QueryOptions,
    notes: &mut Vec<String>,
) -> (Option<query::Reply>, Status, Option<String>) {
    let mut last: (Status, String) = (Status::Error, "no server to ask".into());
    let mut fallback: Option<(query::Reply, Status, String)> = None;
    for (i, &addr) in addrs.iter().enumerate() {
        let request = query::build_query(name, qtype, rd, ecs);
        let more = i + 1 < addrs.len();
        match query::exchange(addr, &request, opts) {
            Ok(reply) => {
                let code = reply.message.metadata.response_code;
                let lame_note = |what: &str| match zone {
                    Some(z) => format!("{addr}: lame for zone {}: {what}", z.name),
                    None => format!("{addr}: {what}"),
                };
                if require_aa && code == ResponseCode::Refused {
                    let msg = lame_note("REFUSED (listed as authoritative but refuses the zone)");
                    notes.push(msg.clone());
                    last = (Status::Refused, msg);
                    if more {
                        continue;
                    }
                    return (None, last.0, Some(last.1));
                }
                if require_aa
                    && !reply.message.metadata.authoritative
                    && matches!(code, ResponseCode::NoError | ResponseCode::NXDomain)
                {
                    let msg = lame_note("answered without the AA flag (not authoritative)");
                    notes.push(msg.clone());
                    last = (Status::Lame, msg);
                    if more {
                        continue;
                    }
                    return (None, last.0, Some(last.1));
                }
                if require_aa && code == ResponseCode::ServFail && more {
                    // Another authoritative server may do better; keep this reply in case none does.
                    let msg = format!("{addr}: SERVFAIL, trying the next server");
                    notes.push(msg.clone());
                    fallback = Some((reply, Status::Servfail, msg));
                    continue;
                }
                return (Some(reply), Status::Ok, None);
            }
            Err(e) => {
                let status = match e {
                    QueryError::Timeout { .. } => Status::Timeout,
                    QueryError::Unreachable { .. } => Status::Unreachable,
                    _ => Status::Error,
                };
                if more {
                    notes.push(format!("{e}; trying the next server"));
                }
                last = (status, e.to_string());
            }
        }
    }
    if let Some((reply, _, _)) = fallback {
        return (Some(reply), Status::Servfail, None);
    }
    let (status, mut msg) = last;
    if addrs.len() > 1 {
        msg = format!("all {} servers failed; last: {msg}", addrs.len());
    }
    (None, status, Some(msg))
}

fn status_for_rcode(code: ResponseCode) -> Status {
    match code {
        ResponseCode::NoError | ResponseCode::NXDomain => Status::Ok,
        ResponseCode::Refused => Status::Refused,
        ResponseCode::ServFail => Status::Servfail,
        _ => Status::Error,
    }
}

fn rcode_message(code: ResponseCode, server: &SocketAddr, rd: bool) -> String {
    match code {
        ResponseCode::Refused if rd => format!(
            "REFUSED by {server}: it will not answer this question for us (not authoritative for the name, or recursion not offered to this client)"
        ),
        ResponseCode::Refused => format!("REFUSED by {server}: lame delegation (listed as authoritative but refuses the zone)"),
        ResponseCode::ServFail => format!(
            "SERVFAIL from {server}: the server failed to produce an answer (upstream or DNSSEC failure, or a broken zone)"
        ),
        ResponseCode::FormErr => format!("FORMERR from {server}: the server rejected the query as malformed (it may not accept EDNS or this ECS option)"),
        ResponseCode::NotImp => format!("NOTIMP from {server}: the server does not implement this kind of query"),
        other => format!("{} from {server}", rcode_str(other)),
    }
}

/// Scope, whether ECS was echoed, and whether the echo matches what we sent.
fn ecs_echo(msg: &Message, sent: Option<ipnet::IpNet>) -> (Option<u8>, bool, Option<bool>) {
    let all: Vec<ClientSubnet> = msg
        .edns
        .as_ref()
        .map(|e| e.options().get_all(EdnsCode::Subnet))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|o| match o {
            EdnsOption::Subnet(cs) => Some(*cs),
            _ => None,
        })
        .collect();
    match (all.first().copied(), sent) {
        (Some(cs), Some(net)) => {
            let net = net.trunc();
            // Exactly one option, repeating FAMILY, SOURCE PREFIX-LENGTH and ADDRESS.
            let valid =
                all.len() == 1 && cs.addr() == net.addr() && cs.source_prefix() == net.prefix_len();
            (Some(cs.scope_prefix()), true, Some(valid))
        }
        (Some(cs), None) => (Some(cs.scope_prefix()), true, None),
        (None, _) => (None, false, None),
    }
}

/// The CNAME records in the answer, starting at `start`, and the name the chain ends at.
fn cname_chain(msg: &Message, start: &Name) -> (Vec<String>, Name) {
    let mut out = Vec::new();
    let mut at = start.clone();
    for _ in 0..=msg.answers.len() {
        let next = msg.answers.iter().find_map(|r| match &r.data {
            RData::CNAME(c) if r.name.eq_ignore_root(&at) => Some(c.0.clone()),
            _ => None,
        });
        match next {
            Some(target) => {
                out.push(format!("{at} CNAME {target}"));
                at = target;
            }
            None => break,
        }
    }
    (out, at)
}

fn rdata_text(data: &RData) -> String {
    match data {
        RData::A(a) => a.0.to_string(),
        RData::AAAA(a) => a.0.to_string(),
        other => other.to_string(),
    }
}
