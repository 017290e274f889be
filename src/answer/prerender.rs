//! Pre-rendered answers. For every static name, each type it holds, ANY and
//! "any other type" (NODATA, or a CNAME chain) give the same bytes after the
//! question on every query: the question has the same length whatever its
//! case, so compression pointers into it stay valid. They are rendered once
//! at load, by the answer function itself, and copied per query.

use std::sync::Arc;

use super::{Scratch, Transport};
use crate::engine::Engine;
use crate::metrics::Outcome;
use crate::zone::{PreSet, Prerendered};
use meridian_wire::{QueryBuilder, TYPE_ANY, TYPE_CNAME};

/// A type used to render the OTHER answer (private use, RFC 6895 §3.1).
const PROBE_TYPE: u16 = 65534;

/// Render every static name of every zone not rendered yet (a zone kept by
/// a reload keeps its answers) and attach the results.
pub fn prerender(engine: &mut Engine) {
    let mut done = Vec::new();
    let mut scratch = Scratch::default();
    let mut out = vec![0u8; 65535];
    let mut outcome = Outcome::default();
    let t = Transport {
        src: std::net::IpAddr::from([127, 0, 0, 1]),
        tcp: true,
    };
    let todo: Vec<usize> = (0..engine.zones.len())
        .filter(|&zi| !engine.zones[zi].prerendered)
        .collect();
    for &zi in &todo {
        let z = &engine.zones[zi];
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
                let q = QueryBuilder::wire(node.name.to_vec(), qt).build();
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
                    qtype: if qt == PROBE_TYPE {
                        Prerendered::OTHER
                    } else {
                        qt
                    },
                    rcode: (out[3] & 0x0F) as u16,
                    an: c(6),
                    ns: c(8),
                    ar: c(10),
                    bytes: out[q.len()..n].into(),
                });
            }
            // Packed now, so the per-answer pieces are freed (and reused)
            // at once rather than fragmenting the heap of a large zone.
            done.push((zi, ni, PreSet::new(&pres)));
        }
    }
    for (zi, ni, pres) in done {
        Arc::make_mut(&mut engine.zones[zi]).nodes[ni].pre = pres;
    }
    for zi in todo {
        Arc::make_mut(&mut engine.zones[zi]).prerendered = true;
    }
}
