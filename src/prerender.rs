//! Pre-rendered answers. For every static name, each type it holds, ANY and
//! "any other type" (NODATA, or a CNAME chain) give the same bytes after the
//! question on every query: the question has the same length whatever its
//! case, so compression pointers into it stay valid. They are rendered once
//! at load, by the answer function itself, and copied per query.

use crate::answer::{Outcome, Scratch, Transport};
use crate::engine::Engine;
use crate::wire::{CLASS_IN, TYPE_ANY, TYPE_CNAME, TYPE_DS};

/// The sections of one answer, ready to copy after the question.
#[derive(Debug, Clone)]
pub struct Prerendered {
    /// The query type this answers; `OTHER` for every type the node lacks.
    pub qtype: u16,
    pub rcode: u16,
    pub an: u16,
    pub ns: u16,
    pub ar: u16,
    pub bytes: Box<[u8]>,
}

/// Stands for "a type the node has no RRset of".
pub const OTHER: u16 = 0;
/// A type used to render the OTHER answer (private use, RFC 6895 §3.1).
const PROBE_TYPE: u16 = 65534;

/// Types whose answers differ from the OTHER answer at a name without them.
pub fn is_special(qtype: u16) -> bool {
    qtype == TYPE_CNAME || qtype == TYPE_ANY || qtype == TYPE_DS
}

/// Render every static name of every zone and attach the results.
pub fn prerender(engine: &mut Engine) {
    let mut done = Vec::new();
    let mut scratch = Scratch::default();
    let mut out = vec![0u8; 65535];
    let mut outcome = Outcome::default();
    let t = Transport {
        src: std::net::IpAddr::from([127, 0, 0, 1]),
        tcp: true,
    };
    for (zi, z) in engine.zones.iter().enumerate() {
        for (ni, node) in z.nodes.iter().enumerate() {
            if node.dynamic.is_some() || node.cut || node.name.len() > 255 {
                continue;
            }
            let mut types: Vec<u16> = node.rrsets.iter().map(|r| r.rtype).collect();
            types.push(TYPE_ANY);
            // Behind a CNAME the answer depends on the type at the target.
            let chained = node.rrset(TYPE_CNAME).is_some();
            if !chained && !types.contains(&PROBE_TYPE) {
                types.push(PROBE_TYPE);
            }
            let mut pres = Vec::new();
            for qt in types {
                let mut q = Vec::with_capacity(node.name.len() + 16);
                q.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
                q.extend_from_slice(&node.name);
                q.extend_from_slice(&qt.to_be_bytes());
                q.extend_from_slice(&CLASS_IN.to_be_bytes());
                let Some(n) = engine.answer(&q, t, &mut scratch, &mut out, &mut outcome) else {
                    continue;
                };
                // Answers that touched a pool or a referral are rendered per query.
                let aa = out[2] & 0x04 != 0;
                if outcome.pool.is_some() || !aa || n > 16384 {
                    continue;
                }
                let c = |i: usize| u16::from_be_bytes([out[i], out[i + 1]]);
                pres.push(Prerendered {
                    qtype: if qt == PROBE_TYPE { OTHER } else { qt },
                    rcode: (out[3] & 0x0F) as u16,
                    an: c(6),
                    ns: c(8),
                    ar: c(10),
                    bytes: out[q.len()..n].into(),
                });
            }
            done.push((zi, ni, pres));
        }
    }
    for (zi, ni, pres) in done {
        engine.zones[zi].nodes[ni].pre = pres;
    }
}
