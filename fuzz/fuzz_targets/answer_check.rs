//! The answer-path invariants, shared by the `answer` fuzz target and by
//! tests/wire/fuzz_regressions.rs (which replays the corpus and every crash
//! found on the stable toolchain). See fuzz_targets/answer.rs.

use std::net::IpAddr;

use hickory_proto::op::Message;
use meridian::answer::{Outcome, Scratch, Transport};
use meridian::engine::Engine;

const SOURCES: [&str; 4] = ["8.8.8.8", "5.1.2.3", "2001:db8::7", "::ffff:203.0.0.200"];

/// Answer `data` over UDP and TCP and check every response; panics on a
/// broken invariant.
pub fn run_one(e: &Engine, data: &[u8]) {
    let mut scratch = Scratch::default();
    let mut out = vec![0u8; 65535];
    let mut udp_out = vec![0u8; 4096];
    let mut outcome = Outcome::default();
    // The client address is chosen by the input, so one input is one case.
    let src: IpAddr = SOURCES[data.len() % SOURCES.len()].parse().unwrap();
    for tcp in [false, true] {
        let buf: &mut [u8] = if tcp { &mut out } else { &mut udp_out };
        let t = Transport { src, tcp };
        let Some(n) = e.answer(data, t, &mut scratch, buf, &mut outcome) else {
            continue;
        };
        assert!(n <= buf.len());
        let resp = buf[..n].to_vec();
        check(data, &resp, tcp);
        if !tcp {
            let mut slip = resp.clone();
            slip.resize(4096, 0);
            let m = meridian_wire::truncate::truncate_response(&mut slip, n);
            let slip = &slip[..m];
            let w =
                walk(slip).unwrap_or_else(|err| panic!("slip form is malformed ({err}): {slip:?}"));
            assert!(slip[2] & 0x02 != 0, "slip without TC");
            assert_eq!(w.counts[1] + w.counts[2], 0);
            Message::from_vec(slip)
                .unwrap_or_else(|err| panic!("hickory rejects the slip ({err})"));
        }
    }
}

fn check(q: &[u8], r: &[u8], tcp: bool) {
    let w = walk(r).unwrap_or_else(|err| panic!("response is malformed ({err}): {r:?} for {q:?}"));
    let msg = Message::from_vec(r)
        .unwrap_or_else(|err| panic!("hickory rejects ({err}): {r:?} for {q:?}"));
    assert!(q.len() >= 12, "answered a message without a header");
    assert_eq!(r[..2], q[..2], "ID");
    assert!(r[2] & 0x80 != 0, "QR clear");
    let rcode = r[3] & 0x0F;
    let query_opt = opt_of(q);
    if !tcp {
        let limit = match query_opt {
            Some((size, _)) => size.clamp(512, 1232) as usize,
            None => 512,
        };
        // Error answers for a query whose OPT we could not read still fit 512.
        assert!(
            r.len() <= limit.max(512),
            "UDP answer of {} octets over {limit}",
            r.len()
        );
    }
    if r[2] & 0x02 != 0 {
        assert!(!tcp, "TC over TCP");
        assert_eq!(
            w.counts[1] + w.counts[2],
            0,
            "records in a truncated answer"
        );
        assert!(w.counts[3] <= 1, "more than the OPT in a truncated answer");
    }
    // The question, byte for byte.
    if w.counts[0] > 0 {
        assert_eq!(w.counts[0], 1);
        assert!(
            q.len() >= w.qend && r[12..w.qend] == q[12..w.qend],
            "question differs from the query's"
        );
        assert_eq!(msg.queries.len(), 1);
    }
    // OPT and ECS.
    let resp_opt = opt_of(r);
    if query_opt.is_none() {
        assert!(
            resp_opt.is_none(),
            "OPT in the answer to a query without one"
        );
    }
    if let Some((_, ref ropts)) = resp_opt {
        let recs = ecs_of(ropts);
        assert!(recs.len() <= 1, "two ECS options in an answer");
        if let Some(re) = recs.first() {
            let qes = query_opt
                .as_ref()
                .map(|(_, o)| ecs_of(o))
                .unwrap_or_default();
            assert!(!qes.is_empty(), "ECS echo without ECS in the query: {q:?}");
            assert!(re.len() >= 4, "short ECS echo");
            // FAMILY, SOURCE and ADDRESS are one of the query's ECS options.
            let same = |qe: &Vec<u8>| qe.len() >= 4 && re[..3] == qe[..3] && re[4..] == qe[4..];
            assert!(
                qes.iter().any(same),
                "ECS echo {re:?} is none of the query's {qes:?}"
            );
            let max = if re[1] == 1 { 32 } else { 128 };
            assert!(re[3] <= max, "scope {} longer than the family", re[3]);
            let version = query_opt.as_ref().map(|_| opt_version(q)).unwrap_or(0);
            if STRICT_ECS_ECHO || rcode != 1 {
                // Only a query's one well-formed ECS, with EDNS version 0, is echoed.
                assert_eq!(
                    qes.len(),
                    1,
                    "ECS echoed for a query with {} ECS options",
                    qes.len()
                );
                assert!(same(&qes[0]));
                assert_eq!(version, 0, "ECS echoed for EDNS version {version}");
            }
        }
    }
    // An answer from the query path (not FORMERR, NOTIMP or BADVERS, whose
    // parsing of the rest stops early) echoes an ECS it accepted.
    if matches!(rcode, 0 | 2 | 3 | 5) && ext_rcode(r) == 0 {
        if let Some((_, qopts)) = &query_opt {
            let qe = ecs_of(qopts);
            // One well-formed ECS (a malformed one is FORMERR, or not looked
            // at when the opcode is NOTIMP).
            // ECS means nothing under an EDNS version other than 0.
            if qe.len() == 1
                && meridian_wire::ecs::ClientSubnet::parse(&qe[0]).is_ok()
                && opt_version(q) == 0
                && resp_opt.is_some()
            {
                let has = resp_opt
                    .as_ref()
                    .map(|(_, o)| !ecs_of(o).is_empty())
                    .unwrap_or(false);
                // BADVERS (extended rcode 16) answers carry no ECS.
                let badvers = r.len() >= 12 && ext_rcode(r) != 0;
                assert!(has || badvers, "accepted ECS not echoed: {q:?} -> {r:?}");
            }
        }
    }
}

/// The echo checks apply to every response, FORMERR included (the input
/// fuzz/regressions/answer/formerr-echoes-second-ecs once broke them).
const STRICT_ECS_ECHO: bool = true;

/// The EDNS version of the query's OPT (0 if none could be read).
fn opt_version(p: &[u8]) -> u8 {
    if p.len() < 12 {
        return 0;
    }
    let c = |k: usize| u16::from_be_bytes([p[4 + 2 * k], p[5 + 2 * k]]) as usize;
    let mut i = 12;
    for _ in 0..c(0) {
        match skip_name(p, i) {
            Ok(j) => i = j + 4,
            Err(_) => return 0,
        }
    }
    for k in 0..c(1) + c(2) + c(3) {
        let Ok(j) = skip_name(p, i) else { return 0 };
        let Some(f) = p.get(j..j + 10) else { return 0 };
        if u16::from_be_bytes([f[0], f[1]]) == 41 && k >= c(1) + c(2) {
            return f[5];
        }
        i = j + 10 + u16::from_be_bytes([f[8], f[9]]) as usize;
    }
    0
}

struct Walk {
    counts: [usize; 4],
    qend: usize,
}

/// Walk a message strictly: every count honoured, no octet left over.
fn walk(p: &[u8]) -> Result<Walk, String> {
    if p.len() < 12 {
        return Err("no header".into());
    }
    let c = |k: usize| u16::from_be_bytes([p[4 + 2 * k], p[5 + 2 * k]]) as usize;
    let counts = [c(0), c(1), c(2), c(3)];
    let mut i = 12;
    for _ in 0..counts[0] {
        i = skip_name(p, i)? + 4;
    }
    if i > p.len() {
        return Err("question past the end".into());
    }
    let qend = i;
    for _ in 0..counts[1] + counts[2] + counts[3] {
        i = skip_name(p, i)?;
        let f = p.get(i..i + 10).ok_or("record header past the end")?;
        i += 10 + u16::from_be_bytes([f[8], f[9]]) as usize;
        if i > p.len() {
            return Err("rdata past the end".into());
        }
    }
    if i != p.len() {
        return Err(format!("{} octets left over", p.len() - i));
    }
    Ok(Walk { counts, qend })
}

fn skip_name(p: &[u8], mut i: usize) -> Result<usize, String> {
    let mut hops = 0;
    let mut end = None;
    loop {
        let l = *p.get(i).ok_or("name past the end")? as usize;
        if l & 0xC0 == 0xC0 {
            let ptr = (u16::from_be_bytes([l as u8, *p.get(i + 1).ok_or("cut pointer")?]) & 0x3FFF)
                as usize;
            if ptr >= i {
                return Err("forward pointer".into());
            }
            end.get_or_insert(i + 2);
            hops += 1;
            if hops > 64 {
                return Err("pointer loop".into());
            }
            i = ptr;
            continue;
        }
        if l & 0xC0 != 0 {
            return Err("bad label type".into());
        }
        if l == 0 {
            return Ok(end.unwrap_or(i + 1));
        }
        i += 1 + l;
    }
}

/// The (payload, options) of the first OPT record of the additional
/// section, read the way a server reads a query (RFC 6891 §6.1.1): records
/// in order, up to the first one that is malformed or an OPT not owned by
/// the root; what follows that is never looked at. So a query with a good
/// OPT and then garbage has an OPT (and its FORMERR answer carries one).
fn opt_of(p: &[u8]) -> Option<(u16, Vec<u8>)> {
    if p.len() < 12 {
        return None;
    }
    let c = |k: usize| u16::from_be_bytes([p[4 + 2 * k], p[5 + 2 * k]]) as usize;
    let mut i = 12;
    for _ in 0..c(0) {
        i = skip_name(p, i).ok()? + 4;
    }
    let mut found = None;
    for k in 0..c(1) + c(2) + c(3) {
        let owner = i;
        let Ok(j) = skip_name(p, i) else { break };
        let Some(f) = p.get(j..j + 10) else { break };
        let rtype = u16::from_be_bytes([f[0], f[1]]);
        let len = u16::from_be_bytes([f[8], f[9]]) as usize;
        let Some(rd) = p.get(j + 10..j + 10 + len) else {
            break;
        };
        if rtype == 41 && k >= c(1) + c(2) {
            if p[owner] != 0 || j != owner + 1 {
                break;
            }
            if found.is_none() {
                found = Some((u16::from_be_bytes([f[2], f[3]]), rd.to_vec()));
            }
        }
        i = j + 10 + len;
    }
    found
}

fn ext_rcode(r: &[u8]) -> u8 {
    // The OPT TTL's first octet; only our own (well-formed) answers get here.
    let Ok(w) = walk(r) else { return 0 };
    let mut i = w.qend;
    let total = w.counts[1] + w.counts[2] + w.counts[3];
    for _ in 0..total {
        let Ok(j) = skip_name(r, i) else { return 0 };
        let rtype = u16::from_be_bytes([r[j], r[j + 1]]);
        if rtype == 41 {
            return r[j + 4];
        }
        i = j + 10 + u16::from_be_bytes([r[j + 8], r[j + 9]]) as usize;
    }
    0
}

/// Bodies of the ECS options in OPT RDATA.
fn ecs_of(opts: &[u8]) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let mut i = 0;
    while i + 4 <= opts.len() {
        let code = u16::from_be_bytes([opts[i], opts[i + 1]]);
        let len = u16::from_be_bytes([opts[i + 2], opts[i + 3]]) as usize;
        let Some(body) = opts.get(i + 4..i + 4 + len) else {
            break;
        };
        if code == 8 {
            v.push(body.to_vec());
        }
        i += 4 + len;
    }
    v
}
