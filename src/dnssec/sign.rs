//! Signing one RRset (RFC 4034 §3.1.8.1: the RRSIG RDATA, then each record
//! in canonical form and order, §6.2–6.3) and the RDATA of the NSEC records
//! of compact denial (RFC 9824 §3, the type bitmap of RFC 4034 §4.1.2).
//!
//! Invariants: the signed octets are exactly the served ones (names in the
//! zone's RDATA are already lower-cased, so the served form is canonical);
//! the labels field never counts a leading `*` (RFC 4034 §3.1.3), so one
//! wildcard signature serves every expansion; records are sorted and
//! de-duplicated here, so callers may pass them in any order.

use super::keys::KeyPair;

/// RRSIG validity, in the 32-bit serial-number time of RFC 4034 §3.1.5.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// Signature inception (Unix seconds, mod 2^32).
    pub inception: u32,
    /// Signature expiration (Unix seconds, mod 2^32).
    pub expiration: u32,
}

impl Validity {
    /// From `now` (Unix seconds): valid from an hour ago (clock skew) for
    /// `secs`.
    pub fn starting(now: u64, secs: u64) -> Validity {
        Validity {
            inception: now.saturating_sub(3600) as u32,
            expiration: (now + secs) as u32,
        }
    }
}

/// Labels of a lower-cased wire name, a leading `*` not counted (RFC 4034
/// §3.1.3).
pub fn rrsig_labels(owner: &[u8]) -> u8 {
    let n = meridian_wire::name::label_count(owner);
    let wild = owner.len() > 2 && owner[0] == 1 && owner[1] == b'*';
    (n - usize::from(wild)) as u8
}

/// The RRSIG RDATA of `key` over the RRset (`owner`, `rtype`, `ttl`, the
/// records' RDATA in wire form): the fixed fields, the signer (the zone's
/// apex, lower-cased wire) and the signature.
pub fn rrsig(
    key: &KeyPair,
    signer: &[u8],
    owner: &[u8],
    rtype: u16,
    ttl: u32,
    records: &[&[u8]],
    v: Validity,
) -> Result<Vec<u8>, String> {
    let mut rd = Vec::with_capacity(18 + signer.len() + 64);
    rd.extend_from_slice(&rtype.to_be_bytes());
    rd.push(key.dnskey.algorithm);
    rd.push(rrsig_labels(owner));
    rd.extend_from_slice(&ttl.to_be_bytes());
    rd.extend_from_slice(&v.expiration.to_be_bytes());
    rd.extend_from_slice(&v.inception.to_be_bytes());
    rd.extend_from_slice(&key.tag.to_be_bytes());
    rd.extend_from_slice(signer);
    let tbs = to_be_signed(&rd, owner, rtype, ttl, records);
    let sig = key.sign(&tbs)?;
    rd.extend_from_slice(&sig);
    Ok(rd)
}

/// RFC 4034 §3.1.8.1: RRSIG RDATA (no signature) | RR(1) | RR(2) | ...,
/// each RR `owner | type | class | original TTL | RDLENGTH | RDATA`, in
/// canonical order (§6.3: by RDATA as unsigned octet strings), duplicates
/// once.
pub fn to_be_signed(
    rrsig_head: &[u8],
    owner: &[u8],
    rtype: u16,
    ttl: u32,
    records: &[&[u8]],
) -> Vec<u8> {
    let mut sorted: Vec<&[u8]> = records.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut tbs = Vec::with_capacity(
        rrsig_head.len()
            + sorted
                .iter()
                .map(|r| owner.len() + 10 + r.len())
                .sum::<usize>(),
    );
    tbs.extend_from_slice(rrsig_head);
    for rd in sorted {
        tbs.extend_from_slice(owner);
        tbs.extend_from_slice(&rtype.to_be_bytes());
        tbs.extend_from_slice(&meridian_wire::CLASS_IN.to_be_bytes());
        tbs.extend_from_slice(&ttl.to_be_bytes());
        tbs.extend_from_slice(&(rd.len() as u16).to_be_bytes());
        tbs.extend_from_slice(rd);
    }
    tbs
}

/// NXNAME (RFC 9824 §5): the pseudo-type that marks a compact NSEC as
/// proving a name does not exist.
pub const TYPE_NXNAME: u16 = 128;

/// The type bitmap of RFC 4034 §4.1.2 for `types` (any order; duplicates
/// once; at most 64), appended to `out`. Allocates nothing: the types are
/// sorted in a local array and each window written once.
pub fn put_type_bitmap(types: &[u16], out: &mut impl Extend<u8>) {
    let mut t = [0u16; 64];
    let n = types.len().min(64);
    t[..n].copy_from_slice(&types[..n]);
    let t = &mut t[..n];
    t.sort_unstable();
    let mut i = 0;
    while i < t.len() {
        let win = (t[i] >> 8) as u8;
        let mut window = [0u8; 32];
        let mut used = 0usize;
        while i < t.len() && (t[i] >> 8) as u8 == win {
            let lo = (t[i] & 0xFF) as usize;
            window[lo / 8] |= 0x80 >> (lo % 8);
            used = lo / 8 + 1;
            i += 1;
        }
        out.extend([win, used as u8]);
        out.extend(window[..used].iter().copied());
    }
}

/// The RDATA of the compact NSEC at `owner` (lower-cased wire): next name
/// `\000.<owner>` (RFC 9824 §3.1), then the bitmap of `types` (the caller
/// adds RRSIG and NSEC, and NXNAME for a name that does not exist).
pub fn compact_nsec(owner: &[u8], types: &[u16], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(owner);
    put_type_bitmap(types, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_skip_the_wildcard() {
        assert_eq!(rrsig_labels(b"\x03www\x07example\x04test\x00"), 3);
        assert_eq!(rrsig_labels(b"\x01*\x07example\x04test\x00"), 2);
        assert_eq!(rrsig_labels(b"\x00"), 0);
    }

    #[test]
    fn bitmap_matches_rfc_4034_example() {
        // RFC 4034 §4.3: A MX RRSIG NSEC TYPE1234.
        let mut v = Vec::new();
        put_type_bitmap(&[1, 15, 46, 47, 1234], &mut v);
        let want = [
            0x00, 0x06, 0x40, 0x01, 0x00, 0x00, 0x00, 0x03, 0x04, 0x1b, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20,
        ];
        assert_eq!(v, want);
    }

    #[test]
    fn compact_nsec_next_name() {
        let mut v = Vec::new();
        compact_nsec(b"\x01a\x04test\x00", &[46, 47, TYPE_NXNAME], &mut v);
        assert_eq!(&v[..10], b"\x01\x00\x01a\x04test\x00");
        // Window 0: RRSIG(46), NSEC(47), NXNAME(128): 17 octets.
        assert_eq!(&v[10..12], &[0, 17]);
        assert_eq!(v[12 + 5], 0x03);
        assert_eq!(v[12 + 16], 0x80);
    }
}
