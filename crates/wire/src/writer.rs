//! Writes response messages into a caller-owned buffer with name compression
//! (RFC 1035 §4.1.4), without allocating. The question is copied as received,
//! so every name in it can be a compression target.
//!
//! The writer holds the message's hard size limit (RFC 1035 §4.2.1, RFC 6891
//! §6.2.5: the client's UDP size capped by ours, or 65535 over TCP) as the
//! length of its buffer ([`Writer::new`], [`Writer::resume`]), so the one bounds
//! check of each append is the limit's. No append goes past it: one that
//! would writes nothing and sets `overflow`, and the caller sends the
//! truncated form.

use crate::rdata::{Packed, Piece, RRset};
use crate::CLASS_IN;

const MAX_TARGETS: usize = 48;

/// A response under construction. Offsets are from the start of the message.
pub struct Writer<'b> {
    /// The buffer the message is written into, as long as the limit.
    pub buf: &'b mut [u8],
    /// Octets written so far.
    pub len: usize,
    /// Set when a write did not fit; the caller then truncates.
    pub overflow: bool,
    targets: [u16; MAX_TARGETS],
    ntargets: usize,
    /// Records written to the answer section.
    pub an: u16,
    /// Records written to the authority section.
    pub ns: u16,
    /// Records written to the additional section.
    pub ar: u16,
}

/// A point in a message to roll back to: its length, section counts and
/// overflow flag ([`Writer::mark`], [`Writer::rewind`]).
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    len: usize,
    overflow: bool,
    an: u16,
    ns: u16,
    ar: u16,
}

/// A section of a response, to count records in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Section {
    /// The answer section.
    Answer,
    /// The authority section.
    Authority,
    /// The additional section.
    Additional,
}

impl<'b> Writer<'b> {
    /// An empty writer over `buf` (the header is written last, by the
    /// caller): `buf.len()` is the message's limit, so pass the buffer cut
    /// to it.
    pub fn new(buf: &'b mut [u8]) -> Writer<'b> {
        Writer {
            buf,
            len: 0,
            overflow: false,
            targets: [0; MAX_TARGETS],
            ntargets: 0,
            an: 0,
            ns: 0,
            ar: 0,
        }
    }

    /// A writer over `buf` (the same message, with a higher limit) that goes
    /// on from `m`: its length, counts and overflow flag. It has no
    /// compression targets: it is for what follows the records (the OPT).
    pub fn resume(buf: &'b mut [u8], m: Mark) -> Writer<'b> {
        let mut w = Writer::new(buf);
        w.len = m.len.min(w.buf.len());
        w.overflow = m.overflow;
        w.an = m.an;
        w.ns = m.ns;
        w.ar = m.ar;
        w
    }

    /// The message's size limit.
    #[inline]
    pub fn limit(&self) -> usize {
        self.buf.len()
    }

    /// Whether `n` more octets fit under the limit.
    #[inline]
    pub fn fits(&self, n: usize) -> bool {
        self.len + n <= self.buf.len()
    }

    /// Start the message over at `len` (past the header): everything
    /// written after it, the section counts, the compression targets past
    /// it and the overflow flag are dropped.
    pub fn restart(&mut self, len: usize) {
        self.truncate(len.min(self.buf.len()));
        self.an = 0;
        self.ns = 0;
        self.ar = 0;
    }

    /// Append octets; past the limit set `overflow` and write nothing.
    #[inline]
    pub fn put(&mut self, b: &[u8]) {
        let end = self.len + b.len();
        if end > self.buf.len() {
            self.overflow = true;
            return;
        }
        self.buf[self.len..end].copy_from_slice(b);
        self.len = end;
    }

    /// Append a 16-bit value, network order.
    #[inline]
    pub fn put_u16(&mut self, v: u16) {
        self.put(&v.to_be_bytes());
    }

    /// Append a 32-bit value, network order.
    #[inline]
    pub fn put_u32(&mut self, v: u32) {
        self.put(&v.to_be_bytes());
    }

    /// Remember a name written at `off` (and its suffixes) as a target.
    pub fn add_target(&mut self, off: usize) {
        if off < 0x3FFF && self.ntargets < MAX_TARGETS {
            self.targets[self.ntargets] = off as u16;
            self.ntargets += 1;
        }
    }

    /// Register every label of an uncompressed name at `off` as a target.
    pub fn add_name_targets(&mut self, off: usize) {
        let mut i = off;
        while i < self.len && self.buf[i] != 0 && self.buf[i] & 0xC0 == 0 {
            self.add_target(i);
            i += 1 + self.buf[i] as usize;
        }
    }

    /// Does the name at `off` in the buffer equal `name` (wire, any case)?
    fn matches_at(&self, mut off: usize, name: &[u8]) -> bool {
        let mut j = 0;
        let mut hops = 0;
        loop {
            let Some(&l) = self.buf.get(off) else {
                return false;
            };
            if l & 0xC0 == 0xC0 {
                hops += 1;
                if hops > 16 || off + 1 >= self.len {
                    return false;
                }
                off = (u16::from_be_bytes([l, self.buf[off + 1]]) & 0x3FFF) as usize;
                continue;
            }
            let Some(&nl) = name.get(j) else {
                return false;
            };
            if l != nl {
                return false;
            }
            if l == 0 {
                return true;
            }
            let l = l as usize;
            if off + 1 + l > self.len || j + 1 + l > name.len() {
                return false;
            }
            if !self.buf[off + 1..off + 1 + l].eq_ignore_ascii_case(&name[j + 1..j + 1 + l]) {
                return false;
            }
            off += 1 + l;
            j += 1 + l;
        }
    }

    /// Write a wire name, compressing against names already written.
    pub fn put_name(&mut self, name: &[u8]) {
        let mut i = 0;
        while i < name.len() && name[i] != 0 {
            let suffix = &name[i..];
            if let Some(t) = (0..self.ntargets)
                .map(|k| self.targets[k])
                .find(|&t| self.matches_at(t as usize, suffix))
            {
                self.put_u16(0xC000 | t);
                return;
            }
            let here = self.len;
            let l = name[i] as usize;
            self.put(&name[i..i + 1 + l]);
            self.add_target(here);
            i += 1 + l;
        }
        self.put(&[0]);
    }

    fn bump(&mut self, s: Section) {
        match s {
            Section::Answer => self.an += 1,
            Section::Authority => self.ns += 1,
            Section::Additional => self.ar += 1,
        }
    }

    /// Write an RRset with the given owner name and TTL.
    pub fn put_rrset(&mut self, s: Section, owner: &[u8], set: RRset<'_>, ttl: u32) {
        for rd in set.records() {
            self.put_name(owner);
            self.put_rr_body(set.rtype, ttl, rd);
            if self.overflow {
                return;
            }
            self.bump(s);
        }
    }

    /// Write a record owned by the question's name (a pointer to offset
    /// 12), when its RDATA holds no name: one bounds check and one copy, the
    /// path of most answers. False (nothing written) if `rd` has a name.
    #[inline]
    pub fn put_plain_at_question(&mut self, rtype: u16, ttl: u32, rd: Packed<'_>) -> bool {
        let Some(body) = rd.plain() else {
            return false;
        };
        let end = self.len + 12 + body.len();
        if end > self.buf.len() {
            self.overflow = true;
            return true;
        }
        let b = &mut self.buf[self.len..end];
        b[0..2].copy_from_slice(&0xC00Cu16.to_be_bytes());
        b[2..4].copy_from_slice(&rtype.to_be_bytes());
        b[4..6].copy_from_slice(&CLASS_IN.to_be_bytes());
        b[6..10].copy_from_slice(&ttl.to_be_bytes());
        b[10..12].copy_from_slice(&(body.len() as u16).to_be_bytes());
        b[12..].copy_from_slice(body);
        self.len = end;
        true
    }

    /// Write a record's TYPE, CLASS IN, TTL, RDLENGTH and `rdata` (wire
    /// form, copied as it is) after an owner the caller has written, and
    /// count it in section `s`.
    pub fn put_raw_rr_body(&mut self, s: Section, rtype: u16, ttl: u32, rdata: &[u8]) {
        self.put_u16(rtype);
        self.put_u16(CLASS_IN);
        self.put_u32(ttl);
        self.put_u16(rdata.len() as u16);
        self.put(rdata);
        if !self.overflow {
            self.bump(s);
        }
    }

    /// Write a record's TYPE, CLASS IN, TTL, RDLENGTH and RDATA after an
    /// owner the caller has written (a name or a pointer).
    pub fn put_rr_body(&mut self, rtype: u16, ttl: u32, rd: Packed<'_>) {
        self.put_u16(rtype);
        self.put_u16(CLASS_IN);
        self.put_u32(ttl);
        let at = self.len;
        self.put_u16(0);
        for p in rd.pieces() {
            match p {
                Piece::Bytes(b) => self.put(b),
                Piece::Name(n) => self.put_name(n),
            }
        }
        if !self.overflow {
            let l = (self.len - at - 2) as u16;
            self.buf[at..at + 2].copy_from_slice(&l.to_be_bytes());
        }
    }

    /// Where the message is now, to [`rewind`](Writer::rewind) to.
    #[inline]
    pub fn mark(&self) -> Mark {
        Mark {
            len: self.len,
            overflow: self.overflow,
            an: self.an,
            ns: self.ns,
            ar: self.ar,
        }
    }

    /// Take back everything written since `m`: the octets, the records
    /// counted, compression targets past it, and any overflow since.
    pub fn rewind(&mut self, m: Mark) {
        self.truncate(m.len);
        self.overflow = m.overflow;
        self.an = m.an;
        self.ns = m.ns;
        self.ar = m.ar;
    }

    /// Forget compression targets past `len` (after a rollback).
    fn truncate(&mut self, len: usize) {
        self.len = len;
        self.overflow = false;
        let mut k = 0;
        for i in 0..self.ntargets {
            if (self.targets[i] as usize) < len {
                self.targets[k] = self.targets[i];
                k += 1;
            }
        }
        self.ntargets = k;
    }
}

/// The header fields of a response (RFC 1035 §4.1.1).
#[derive(Clone, Copy, Debug, Default)]
pub struct Header {
    /// The query's ID.
    pub id: u16,
    /// The query's flag word: its opcode and RD are copied.
    pub query_flags: u16,
    /// Authoritative answer.
    pub aa: bool,
    /// Truncated.
    pub tc: bool,
    /// The low 4 bits of the rcode (the rest goes in the OPT record).
    pub rcode: u16,
    /// Section counts: question, answer, authority, additional.
    pub counts: [u16; 4],
}

impl Header {
    /// Write the 12-octet header at the start of `buf`. QR is set and RA
    /// never is: meridian does not recurse.
    pub fn write(&self, buf: &mut [u8]) {
        let q = self.query_flags;
        let mut flags = 0x8000 | (q & 0x7800) | (q & 0x0100);
        if self.aa {
            flags |= 0x0400;
        }
        if self.tc {
            flags |= 0x0200;
        }
        flags |= self.rcode & 0xF;
        buf[0..2].copy_from_slice(&self.id.to_be_bytes());
        buf[2..4].copy_from_slice(&flags.to_be_bytes());
        for (k, c) in self.counts.iter().enumerate() {
            buf[4 + 2 * k..6 + 2 * k].copy_from_slice(&c.to_be_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_append_passes_the_limit() {
        let mut buf = [0u8; 64];
        let mut w = Writer::new(&mut buf[..20]);
        assert_eq!(w.limit(), 20);
        w.len = 12;
        w.put(&[1; 8]);
        assert!(!w.overflow && w.len == 20 && !w.fits(1));
        w.put(&[2]);
        assert!(w.overflow && w.len == 20, "nothing written past the limit");
        let m = w.mark();
        w.put_name(b"\x03www\x00");
        assert_eq!(w.len, 20);
        w.rewind(m);
        w.overflow = false;
        let m = w.mark();
        let mut w = Writer::resume(&mut buf[..40], m);
        assert_eq!(w.limit(), 40);
        w.put_name(b"\x03www\x00");
        assert!(!w.overflow && w.len == 25);
        w.restart(12);
        assert!(w.len == 12 && !w.overflow && w.an == 0);
    }
}
