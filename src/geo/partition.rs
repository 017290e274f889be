//! The exact decision partition: the address space of one family cut into
//! the largest aligned CIDR blocks inside which every address gets the same
//! decision and the same special-purpose class (RFC 7871 §7.2.1: scopes must
//! not overlap; §7.4 / gdnsd practice: the widest block that is never wrong).
//!
//! Built once per map by sweeping sorted interval layers; looked up per query
//! with a 64K-entry index on the top 16 bits and a short binary search.

/// A closed interval `[start, end]` of one family's addresses with a value
/// (a decision id, or a special class). Both ends are inclusive so the top
/// of the space needs no overflow handling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segment {
    pub start: u128,
    pub end: u128,
    pub value: u32,
}

impl Segment {
    /// The interval covered by the CIDR `start/len` in a `bits`-wide space.
    pub(crate) fn cidr(start: u128, len: u8, bits: u32, value: u32) -> Segment {
        Segment {
            start,
            end: start | host_mask(len, bits),
            value,
        }
    }
}

/// Highest address of a `bits`-wide family.
pub(crate) fn max_addr(bits: u32) -> u128 {
    if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// Mask of the host bits of a `/len` in a `bits`-wide family.
pub(crate) fn host_mask(len: u8, bits: u32) -> u128 {
    let host = bits - len as u32;
    if host >= 128 {
        u128::MAX
    } else {
        (1u128 << host) - 1
    }
}

/// Prefix length of the largest aligned block that contains `addr` and lies
/// inside `[lo, hi]` (which must contain `addr`).
pub(crate) fn largest_aligned(addr: u128, lo: u128, hi: u128, bits: u32) -> u8 {
    (0..=bits as u8)
        .find(|&len| {
            let m = host_mask(len, bits);
            let s = addr & !m;
            s >= lo && (s | m) <= hi
        })
        .unwrap_or(bits as u8)
}

/// Cut `[lo, hi]` into the fewest aligned CIDR blocks, in order. These are
/// exactly the maximal aligned blocks inside the interval.
pub(crate) fn for_each_cidr(lo: u128, hi: u128, bits: u32, mut f: impl FnMut(u128, u8)) {
    let mut s = lo;
    loop {
        // Largest block aligned at `s` that does not pass `hi`.
        let align = s.trailing_zeros().min(bits);
        let mut host = align;
        while host > 0 && hi - s < host_mask((bits - host) as u8, bits) {
            host -= 1;
        }
        let m = host_mask((bits - host) as u8, bits);
        f(s, (bits - host) as u8);
        if s | m >= hi {
            return;
        }
        s = (s | m) + 1;
    }
}

/// Walks one sorted, disjoint layer of segments.
struct Cursor<'a> {
    segs: &'a [Segment],
    i: usize,
}

impl Cursor<'_> {
    /// The value at `p` (if covered) and the last address with the same state.
    fn at(&mut self, p: u128, max: u128) -> (Option<u32>, u128) {
        while self.i < self.segs.len() && self.segs[self.i].end < p {
            self.i += 1;
        }
        match self.segs.get(self.i) {
            Some(s) if s.start <= p => (Some(s.value), s.end),
            Some(s) => (None, s.start - 1),
            None => (None, max),
        }
    }
}

/// Sweep the whole space of a `bits`-wide family. `layers` are decision
/// layers, highest priority first (each sorted and disjoint); uncovered
/// addresses get `default`. `classes` keeps special-purpose blocks apart
/// (class 0 is public space). Returns the aligned blocks as (start, id).
pub(crate) fn partition(
    bits: u32,
    layers: &[&[Segment]],
    default: u32,
    classes: &[Segment],
) -> Vec<(u128, u32)> {
    let max = max_addr(bits);
    let mut cursors: Vec<Cursor> = layers.iter().map(|s| Cursor { segs: s, i: 0 }).collect();
    let mut class_cursor = Cursor {
        segs: classes,
        i: 0,
    };

    // Maximal runs of equal (decision, class).
    let mut runs: Vec<(u128, u128, u32, u32)> = Vec::new();
    let mut p = 0u128;
    loop {
        let mut end = max;
        let mut id = None;
        for c in cursors.iter_mut() {
            let (v, e) = c.at(p, max);
            end = end.min(e);
            id = id.or(v);
        }
        let (class, e) = class_cursor.at(p, max);
        end = end.min(e);
        let key = (id.unwrap_or(default), class.unwrap_or(0));
        match runs.last_mut() {
            Some(r) if (r.2, r.3) == key => r.1 = end,
            _ => runs.push((p, end, key.0, key.1)),
        }
        if end == max {
            break;
        }
        p = end + 1;
    }

    let mut blocks = Vec::with_capacity(runs.len() * 2);
    for (lo, hi, id, _) in runs {
        for_each_cidr(lo, hi, bits, |s, _| blocks.push((s, id)));
    }
    blocks
}

/// An address family's key type in the lookup table.
pub(crate) trait Key: Copy + Ord {
    const BITS: u32;
    /// Buckets with more blocks than this get a second index level.
    const SPLIT: usize;
    fn from_u128(v: u128) -> Self;
    fn top16(self) -> usize;
    /// The 8 bits after the top 16.
    fn next8(self) -> usize;
    /// Block size from this start to the next (wrapping at the top), whose
    /// trailing zeros give the prefix length.
    fn size_tz(self, next: Option<Self>) -> u32;
}

impl Key for u32 {
    const BITS: u32 = 32;
    // 16 starts are one cache line.
    const SPLIT: usize = 16;
    fn from_u128(v: u128) -> Self {
        v as u32
    }
    #[inline]
    fn top16(self) -> usize {
        (self >> 16) as usize
    }
    #[inline]
    fn next8(self) -> usize {
        ((self >> 8) & 0xFF) as usize
    }
    #[inline]
    fn size_tz(self, next: Option<Self>) -> u32 {
        next.unwrap_or(0).wrapping_sub(self).trailing_zeros()
    }
}

impl Key for u128 {
    const BITS: u32 = 128;
    const SPLIT: usize = 8;
    fn from_u128(v: u128) -> Self {
        v
    }
    #[inline]
    fn top16(self) -> usize {
        (self >> 112) as usize
    }
    #[inline]
    fn next8(self) -> usize {
        ((self >> 104) & 0xFF) as usize
    }
    #[inline]
    fn size_tz(self, next: Option<Self>) -> u32 {
        next.unwrap_or(0).wrapping_sub(self).trailing_zeros()
    }
}

/// No second level for this bucket.
const NO_SUB: u32 = u32::MAX;

/// Sorted block starts with their decision ids. A block ends where the next
/// begins, so its prefix length is implied and not stored.
///
/// Lookup narrows the search with an index on the top 16 bits and, for
/// buckets holding many blocks (IPv6 RIR space, busy IPv4 /16s), a second
/// level on the next 8 bits, so the final binary search stays within a
/// cache line or two: three or four dependent loads per query.
#[derive(Clone)]
pub(crate) struct Table<K> {
    starts: Box<[K]>,
    ids: Box<[u32]>,
    /// `index[h]` = (block holding the first address whose top 16 bits are
    /// `h`, start of its second level in `sub` or `NO_SUB`);
    /// `index[65536].0` = last block.
    index: Box<[(u32, u32)]>,
    /// Second levels: 257 entries each, entry `j` = block holding the first
    /// address of sub-bucket `j`, entry 256 = the bucket's last block.
    sub: Box<[u32]>,
}

impl<K: Key> Table<K> {
    /// `blocks` from [`partition`]: sorted, contiguous, first start 0.
    pub(crate) fn new(blocks: &[(u128, u32)]) -> Table<K> {
        assert!(
            blocks.first().map(|b| b.0) == Some(0),
            "partition must cover the space"
        );
        let starts: Box<[K]> = blocks.iter().map(|b| K::from_u128(b.0)).collect();
        let ids: Box<[u32]> = blocks.iter().map(|b| b.1).collect();
        let holding = |a: u128| (starts.partition_point(|&s| s <= K::from_u128(a)) - 1) as u32;
        let shift = K::BITS - 16;
        let mut first: Vec<u32> = (0..65536u128).map(|h| holding(h << shift)).collect();
        first.push((starts.len() - 1) as u32);
        let mut index = Vec::with_capacity(65537);
        let mut sub = Vec::new();
        for h in 0..65536usize {
            let (lo, hi) = (first[h], first[h + 1]);
            let mut at = NO_SUB;
            if (hi - lo) as usize > K::SPLIT {
                at = sub.len() as u32;
                for j in 0..256u128 {
                    sub.push(holding(((h as u128) << shift) | (j << (shift - 8))));
                }
                sub.push(hi);
            }
            index.push((lo, at));
        }
        index.push((first[65536], NO_SUB));
        Table {
            starts,
            ids,
            index: index.into_boxed_slice(),
            sub: sub.into_boxed_slice(),
        }
    }

    /// (decision id, prefix length) of the block holding `k`.
    #[inline]
    pub(crate) fn lookup(&self, k: K) -> (u32, u8) {
        let h = k.top16();
        let (lo, at) = self.index[h];
        let (lo, hi) = if at == NO_SUB {
            (lo as usize, self.index[h + 1].0 as usize)
        } else {
            let j = at as usize + k.next8();
            (self.sub[j] as usize, self.sub[j + 1] as usize)
        };
        let i = lo + self.starts[lo..=hi].partition_point(|&s| s <= k) - 1;
        let tz = self.starts[i].size_tz(self.starts.get(i + 1).copied());
        (self.ids[i], (K::BITS - tz) as u8)
    }

    pub(crate) fn len(&self) -> usize {
        self.starts.len()
    }

    /// Every block as (start, prefix length, decision id), in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (K, u8, u32)> + '_ {
        (0..self.starts.len()).map(move |i| {
            let tz = self.starts[i].size_tz(self.starts.get(i + 1).copied());
            (self.starts[i], (K::BITS - tz) as u8, self.ids[i])
        })
    }

    /// True if at least one block uses a decision other than `id`.
    pub(crate) fn any_other(&self, id: u32) -> bool {
        self.ids.iter().any(|&x| x != id)
    }

    /// Bytes held by the table.
    pub(crate) fn heap_bytes(&self) -> usize {
        use std::mem::size_of_val;
        size_of_val(&*self.starts)
            + size_of_val(&*self.ids)
            + size_of_val(&*self.index)
            + size_of_val(&*self.sub)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidrs(lo: u128, hi: u128, bits: u32) -> Vec<(u128, u8)> {
        let mut v = Vec::new();
        for_each_cidr(lo, hi, bits, |s, l| v.push((s, l)));
        v
    }

    #[test]
    fn range_to_cidr() {
        assert_eq!(cidrs(0, u32::MAX as u128, 32), vec![(0, 0)]);
        assert_eq!(cidrs(0, u128::MAX, 128), vec![(0, 0)]);
        assert_eq!(cidrs(1, 6, 32), vec![(1, 32), (2, 31), (4, 31), (6, 32)]);
        assert_eq!(cidrs(5, 5, 128), vec![(5, 128)]);
        let top = u128::MAX;
        assert_eq!(cidrs(top - 1, top, 128), vec![(top - 1, 127)]);
    }

    #[test]
    fn largest_aligned_block() {
        assert_eq!(largest_aligned(5, 0, 7, 32), 29);
        assert_eq!(largest_aligned(5, 4, 7, 32), 30);
        assert_eq!(largest_aligned(5, 5, 5, 32), 32);
        assert_eq!(largest_aligned(9, 0, u128::MAX, 128), 0);
    }

    #[test]
    fn sweep_and_lookup() {
        // Default 0; a /24 with decision 1 holding a /25 override (2).
        let base = [Segment::cidr(0x0A00_0000, 24, 32, 1)];
        let over = [Segment::cidr(0x0A00_0080, 25, 32, 2)];
        let blocks = partition(32, &[&over, &base], 0, &[]);
        let t: Table<u32> = Table::new(&blocks);
        assert_eq!(t.lookup(0x0A00_0001), (1, 25));
        assert_eq!(t.lookup(0x0A00_00FF), (2, 25));
        assert_eq!(t.lookup(0x0B00_0000), (0, 8));
        assert_eq!(t.lookup(0), (0, 5));
        assert_eq!(t.lookup(u32::MAX), (0, 1));
        // Special class splits equal decisions.
        let cls = [Segment::cidr(0x0A00_0000, 8, 32, 1)];
        let t: Table<u32> = Table::new(&partition(32, &[], 0, &cls));
        assert_eq!(t.lookup(0x0A01_0000), (0, 8));
        assert_eq!(t.lookup(0x0B00_0000), (0, 8));
        // Uniform space is one block of length 0.
        let t: Table<u128> = Table::new(&partition(128, &[], 3, &[]));
        assert_eq!(t.lookup(12345), (3, 0));
        assert_eq!(t.len(), 1);
    }

    /// A bucket split finer than `SPLIT` gets a second level; lookups through
    /// it agree with a plain search over every block.
    #[test]
    fn second_level_agrees_with_plain_search() {
        // 300 /32 islands inside 10.0.0.0/16 and 40 inside 2001:db8::/32.
        let v4: Vec<Segment> = (0..300u128)
            .map(|i| Segment::cidr(0x0A00_0000 + i * 211, 32, 32, 1 + (i % 3) as u32))
            .collect();
        let t: Table<u32> = Table::new(&partition(32, &[&v4], 0, &[]));
        assert!(!t.sub.is_empty());
        let all: Vec<(u32, u8, u32)> = t.iter().collect();
        let plain = |k: u32| {
            let i = all.partition_point(|b| b.0 <= k) - 1;
            (all[i].2, all[i].1)
        };
        for k in (0x09FF_FF00u32..0x0A01_0100).step_by(7) {
            assert_eq!(t.lookup(k), plain(k), "{k:#x}");
        }
        let base = 0x2001_0db8u128 << 96;
        let v6: Vec<Segment> = (0..40u128)
            .map(|i| Segment::cidr(base + (i << 100), 48, 128, 1 + (i % 2) as u32))
            .collect();
        let t: Table<u128> = Table::new(&partition(128, &[&v6], 0, &[]));
        assert!(!t.sub.is_empty());
        let all: Vec<(u128, u8, u32)> = t.iter().collect();
        for n in 0..5000u128 {
            let k = base + n * (1u128 << 95) / 7;
            let i = all.partition_point(|b| b.0 <= k) - 1;
            assert_eq!(t.lookup(k), (all[i].2, all[i].1), "{k:#x}");
        }
    }
}
