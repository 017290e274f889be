//! TSIG in a query (RFC 8945). meridian holds no TSIG keys, so a signed
//! query can never verify: it is answered NOTAUTH with an unsigned TSIG
//! whose error is BADKEY (§5.2.1), as Knot answers an unknown key. The
//! TSIG must be the last record of the additional section (§5.1); one
//! anywhere else, or with malformed RDATA, makes the query FORMERR.
//!
//! Only read when a query carries a TSIG; nothing here runs otherwise.

use crate::name::{skip_name, u16_at};
use crate::writer::Writer;
use crate::{CLASS_ANY, MAX_NAME, TYPE_TSIG};

/// TSIG error BADKEY (RFC 8945 §5.2.1).
pub const BADKEY: u16 = 17;

/// Copy the (possibly compressed) name at `start` of `p` into `out`,
/// uncompressed. Returns its length; None if it is malformed.
fn copy_name(p: &[u8], start: usize, out: &mut [u8; MAX_NAME]) -> Option<usize> {
    // skip_name checks pointers (strictly backwards) and the 255-octet limit.
    skip_name(p, start)?;
    let (mut i, mut n) = (start, 0);
    loop {
        let l = *p.get(i)? as usize;
        if l & 0xC0 == 0xC0 {
            i = (u16_at(p, i)? & 0x3FFF) as usize;
            continue;
        }
        out.get_mut(n..n + 1 + l)?
            .copy_from_slice(p.get(i..i + 1 + l)?);
        n += 1 + l;
        if l == 0 {
            return Some(n);
        }
        i += 1 + l;
    }
}

/// The fields of a query's TSIG record that a BADKEY answer copies.
struct Fields {
    time_fudge: [u8; 8],
    original_id: u16,
    /// Offset of the algorithm name in the packet.
    alg_at: usize,
}

/// Check the TSIG record whose owner starts at `at` and ends the packet:
/// class ANY, TTL 0 and well-formed RDATA (RFC 8945 §4.2).
fn fields(p: &[u8], at: usize) -> Option<Fields> {
    let i = skip_name(p, at)?;
    if u16_at(p, i)? != TYPE_TSIG || u16_at(p, i + 2)? != CLASS_ANY {
        return None;
    }
    if u16_at(p, i + 4)? != 0 || u16_at(p, i + 6)? != 0 {
        return None;
    }
    let rd = i + 10;
    let end = rd + u16_at(p, i + 8)? as usize;
    let j = skip_name(p, rd)?;
    let time_fudge: [u8; 8] = p.get(j..j + 8)?.try_into().ok()?;
    let mac_len = u16_at(p, j + 8)? as usize;
    let k = j + 10 + mac_len;
    let original_id = u16_at(p, k)?;
    let other_len = u16_at(p, k + 4)? as usize;
    (k + 6 + other_len == end && end == p.len()).then_some(Fields {
        time_fudge,
        original_id,
        alg_at: rd,
    })
}

/// Whether the TSIG record at `at` (the last of the query) is well formed.
pub fn valid(p: &[u8], at: usize) -> bool {
    fields(p, at).is_some()
}

/// Write the TSIG of a BADKEY answer for the query's TSIG at `at`: the key
/// name, class ANY, TTL 0, the algorithm, time signed and fudge copied, an
/// empty MAC, the original ID, error BADKEY, no other data (§5.2.1). The
/// key name (the owner) is compressed against the names already written,
/// the question's among them; the algorithm name is not (§4.2: it MUST NOT
/// be, and BIND refuses a compressed one). The caller counts it in ARCOUNT,
/// and truncates when it did not fit (`overflow`). False (nothing written)
/// if it is malformed.
pub fn put_badkey(w: &mut Writer, p: &[u8], at: usize) -> bool {
    let Some(f) = fields(p, at) else { return false };
    let mut key = [0u8; MAX_NAME];
    let mut alg = [0u8; MAX_NAME];
    let (Some(kn), Some(an)) = (copy_name(p, at, &mut key), copy_name(p, f.alg_at, &mut alg))
    else {
        return false;
    };
    w.put_name(&key[..kn]);
    w.put_u16(TYPE_TSIG);
    w.put_u16(CLASS_ANY);
    w.put_u32(0);
    w.put_u16((an + 8 + 2 + 2 + 2 + 2) as u16);
    w.put(&alg[..an]);
    w.put(&f.time_fudge);
    w.put_u16(0);
    w.put_u16(f.original_id);
    w.put_u16(BADKEY);
    w.put_u16(0);
    true
}
