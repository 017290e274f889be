//! The size limit of every answer, shared by the `limit` fuzz target and by
//! tests/wire/fuzz_regressions.rs: over UDP at most the client's EDNS size (512
//! at least, RFC 6891 §6.2.5; 512 without EDNS, RFC 1035 §4.2.1) capped by
//! the server's `edns_udp_payload`; over TCP 65535. The RRL slip form of a
//! UDP answer too. Run against the bundled example and variants of it with
//! a long NSID and other UDP sizes, because an NSID once pushed answers to
//! 512-octet clients past 512, and a TSIG whose names pointed to a long
//! QNAME drew a 660-octet BADKEY answer without EDNS.
//!
//! `variants` turns one input into the queries that reach those paths: an
//! OPT of 512 asking for the NSID, a TSIG with pointer names, a long QNAME,
//! and a few byte flips, deterministic per input.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use meridian::answer::{Outcome, Scratch, Transport};
use meridian::engine::Engine;
use meridian_wire::{parse_query, Query, Reject};

/// One engine and the `edns_udp_payload` it was configured with.
pub struct Case {
    /// The loaded config.
    pub engine: Engine,
    /// Its `edns_udp_payload`.
    pub payload: u16,
}

/// The bundled example, and copies of it with an NSID of 100, 400 and 512
/// octets and `edns_udp_payload` 512, 1232 and 4096.
pub fn engines(root: &Path) -> Vec<Case> {
    let cfg = root.join("zones/meridian.toml");
    let text = std::fs::read_to_string(&cfg).expect("the bundled example");
    let zones = root.join("zones");
    let mut v = vec![Case {
        engine: meridian::answer::load(&cfg, None).expect("the bundled example loads"),
        payload: 1232,
    }];
    let nsid_hex = "a5".repeat(512);
    let variants = [
        (format!("nsid_hex = \"{nsid_hex}\""), 1232u16),
        (format!("nsid = \"{}\"", "n".repeat(400)), 512),
        (format!("nsid = \"{}\"", "m".repeat(100)), 4096),
    ];
    for (k, (nsid, payload)) in variants.iter().enumerate() {
        // Paths in the example are relative to its directory.
        let t = text
            .replace(
                "edns_udp_payload = 1232",
                &format!("edns_udp_payload = {payload}\n{nsid}"),
            )
            .replace("\"../geo/", &format!("\"{}/../geo/", zones.display()))
            .replace("file = \"", &format!("file = \"{}/", zones.display()));
        let p =
            std::env::temp_dir().join(format!("meridian-limit-{}-{k}.toml", std::process::id()));
        std::fs::write(&p, t).unwrap();
        let engine = meridian::answer::load(&p, None);
        let _ = std::fs::remove_file(&p);
        v.push(Case {
            engine: engine.unwrap_or_else(|e| panic!("variant {k} does not load: {e}")),
            payload: *payload,
        });
    }
    v
}

/// The UDP limit for `data` as the server reads its OPT: None if the
/// server sends nothing.
fn udp_limit(data: &[u8], payload: u16) -> Option<usize> {
    let mut q = Query::default();
    let edns = match parse_query(data, &mut q) {
        Ok(()) => q.edns,
        Err(Reject::Drop) => return None,
        Err(Reject::FormErr { edns, .. } | Reject::NotImp { edns }) => edns,
        Err(Reject::BadVers { edns, .. }) => Some(edns),
    };
    let client = edns.map_or(512, |e| e.udp_size.max(512));
    Some(client.min(payload) as usize)
}

/// Answer `data` over UDP and TCP with `c`; panics on an answer past its
/// limit.
pub fn run_one(c: &Case, data: &[u8]) {
    let mut scratch = Scratch::default();
    let mut out = vec![0u8; 65535];
    let mut outcome = Outcome::default();
    let src: IpAddr = "192.0.2.1".parse().unwrap();
    for tcp in [false, true] {
        // The UDP buffer is the server's (4096), larger than any limit.
        let buf = if tcp { &mut out[..] } else { &mut out[..4096] };
        let t = Transport { src, tcp };
        let Some(n) = c.engine.answer(data, t, &mut scratch, buf, &mut outcome) else {
            continue;
        };
        if tcp {
            assert!(n <= 65535, "TCP answer of {n} octets");
            continue;
        }
        let limit = udp_limit(data, c.payload).unwrap_or(512);
        assert!(
            n <= limit,
            "UDP answer of {n} octets over the limit {limit} (payload {}): {data:?}",
            c.payload
        );
        let m = meridian_wire::truncate::truncate_response(buf, n);
        assert!(m <= limit, "slip form of {m} octets over {limit}: {data:?}");
    }
}

/// Where the question of `q` ends, if it has one that is well formed.
fn question_end(q: &[u8]) -> Option<usize> {
    if q.len() < 12 || q[4..6] != [0, 1] {
        return None;
    }
    let mut i = 12;
    loop {
        let l = *q.get(i)? as usize;
        if l == 0 {
            break;
        }
        if l > 63 {
            return None;
        }
        i += 1 + l;
    }
    (i + 5 <= q.len() && i - 12 < 255).then_some(i + 5)
}

/// An OPT of `size` with an empty NSID option (and a client cookie).
fn opt(size: u16, cookie: bool) -> Vec<u8> {
    let mut o = vec![0, 0, 41];
    o.extend_from_slice(&size.to_be_bytes());
    o.extend_from_slice(&[0, 0, 0, 0]);
    let mut rd = vec![0, 3, 0, 0]; // NSID, empty
    if cookie {
        rd.extend_from_slice(&[0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]);
    }
    o.extend_from_slice(&(rd.len() as u16).to_be_bytes());
    o.extend_from_slice(&rd);
    o
}

/// A TSIG whose key and algorithm names point to the QNAME.
fn pointer_tsig() -> Vec<u8> {
    let mut t = vec![0xC0, 12, 0, 250, 0, 255, 0, 0, 0, 0, 0, 18, 0xC0, 12];
    t.extend_from_slice(&[0, 0, 0x65, 0x43, 0x21, 0, 1, 44, 0, 0, 0, 7, 0, 0, 0, 0]);
    t
}

/// A query: `header` with QDCOUNT 1, no answer or authority records, the
/// question `question` and `additional` records.
fn query(header: &[u8], question: &[u8], additional: &[Vec<u8>]) -> Vec<u8> {
    let mut q = header[..4].to_vec();
    q.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, additional.len() as u8]);
    q.extend_from_slice(question);
    for a in additional {
        q.extend_from_slice(a);
    }
    q
}

/// `data` and queries built from it for the limit's hard paths (see the
/// module doc); `seed` picks the byte flips.
pub fn variants(data: &[u8], seed: u64) -> Vec<Vec<u8>> {
    let mut v = vec![data.to_vec()];
    let Some(qe) = question_end(data) else {
        return v;
    };
    let (header, question) = (&data[..12], &data[12..qe]);
    // The same question under a QNAME grown to about 250 octets.
    let mut long = Vec::new();
    let room = 255 - (question.len() - 4);
    for k in 0..room / 64 {
        long.push(63);
        long.extend_from_slice(&[b'a' + k as u8; 63]);
    }
    long.extend_from_slice(question);
    for question in [question, &long[..]] {
        for size in [0, 512, 1232, 4096] {
            v.push(query(header, question, &[opt(size, size == 512)]));
        }
        v.push(query(header, question, &[pointer_tsig()]));
        v.push(query(header, question, &[opt(512, false), pointer_tsig()]));
    }
    // Byte flips of the 512-octet NSID query (xorshift, fixed per input).
    let base = query(header, question, &[opt(512, true)]);
    let mut x = seed | 1;
    for _ in 0..4 {
        let mut m = base.clone();
        for _ in 0..3 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = (x % m.len() as u64) as usize;
            m[at] ^= (x >> 32) as u8 | 1;
        }
        v.push(m);
    }
    v
}

/// The repository root, from the fuzz crate or from the tests.
pub fn root(manifest_dir: &str) -> PathBuf {
    let p = PathBuf::from(manifest_dir);
    if p.join("zones/meridian.toml").exists() {
        p
    } else {
        p.join("..")
    }
}
