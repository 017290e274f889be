//! Domain names in wire form (RFC 1035 §3.1, §4.1.4): a fixed-size,
//! lower-cased copy for lookups, the one bounds-checked name skipper, and
//! the helpers that walk uncompressed names.
//!
//! Invariant: every function here reads within the slice it is given and
//! never follows a compression pointer forward, so hostile input cannot loop.

use crate::{MAX_LABELS, MAX_NAME};

/// A domain name in wire form, lower-cased, with the offset of each label.
#[derive(Clone)]
pub struct WireName {
    /// The name, lower-cased, in `bytes[..len]`.
    pub bytes: [u8; MAX_NAME],
    /// Octets used in `bytes`, the root label included.
    pub len: usize,
    /// Offset of each label in `bytes`, first label first.
    pub labels: [u8; MAX_LABELS],
    /// Labels in the name, not counting the root.
    pub nlabels: usize,
}

impl Default for WireName {
    fn default() -> Self {
        WireName {
            bytes: [0; MAX_NAME],
            len: 0,
            labels: [0; MAX_LABELS],
            nlabels: 0,
        }
    }
}

impl WireName {
    /// Fill from the uncompressed name at the start of `wire` (lower-cased).
    /// False if it is not one: a pointer, a label over 63 octets, a name
    /// over 255, or the end of the input before the root label.
    #[inline]
    pub fn set(&mut self, wire: &[u8]) -> bool {
        self.len = 0;
        self.nlabels = 0;
        let mut i = 0;
        loop {
            let Some(&l) = wire.get(i) else { return false };
            if l == 0 {
                if i + 1 > MAX_NAME {
                    return false;
                }
                self.bytes[i] = 0;
                self.len = i + 1;
                return true;
            }
            if l > 63 || i + 1 + l as usize >= MAX_NAME || self.nlabels >= MAX_LABELS {
                return false;
            }
            if wire.len() < i + 1 + l as usize {
                return false;
            }
            self.labels[self.nlabels] = i as u8;
            self.nlabels += 1;
            self.bytes[i] = l;
            for k in 0..l as usize {
                self.bytes[i + 1 + k] = wire[i + 1 + k].to_ascii_lowercase();
            }
            i += 1 + l as usize;
        }
    }

    /// The name in wire form.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// The suffix starting at label `i` (0 = whole name; `nlabels` = root).
    pub fn suffix(&self, i: usize) -> &[u8] {
        if i >= self.nlabels {
            &self.bytes[self.len - 1..self.len]
        } else {
            &self.bytes[self.labels[i] as usize..self.len]
        }
    }
}

#[inline]
pub(crate) fn u16_at(p: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*p.get(i)?, *p.get(i + 1)?]))
}

/// Skip a possibly compressed name; returns the offset just past it in place.
///
/// Pointers are followed (reading, not copying) so that the whole name is
/// checked: every pointer must point before the start of the run of labels
/// it ends, which rules out loops (the runs move strictly backwards), and the
/// name must fit in 255 octets (RFC 1035 §3.1, §4.1.4).
pub fn skip_name(p: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    // Start of the current run of labels, and where the name ends in place.
    let mut run = start;
    let mut end = None;
    let mut total = 0usize;
    loop {
        let l = *p.get(i)?;
        match l & 0xC0 {
            0x00 => {
                total += l as usize + 1;
                if total > MAX_NAME {
                    return None;
                }
                if l == 0 {
                    return Some(end.unwrap_or(i + 1));
                }
                i += 1 + l as usize;
            }
            0xC0 => {
                let ptr = (u16_at(p, i)? & 0x3FFF) as usize;
                if ptr >= run {
                    return None;
                }
                end.get_or_insert(i + 2);
                run = ptr;
                i = ptr;
            }
            _ => return None,
        }
    }
}

/// Number of labels in a wire name.
pub fn label_count(mut w: &[u8]) -> usize {
    let mut n = 0;
    while let Some(&l) = w.first() {
        if l == 0 {
            break;
        }
        n += 1;
        w = &w[1 + l as usize..];
    }
    n
}

/// Parent of a wire name (None for the root).
pub fn parent(w: &[u8]) -> Option<&[u8]> {
    let l = *w.first()? as usize;
    if l == 0 {
        None
    } else {
        Some(&w[1 + l..])
    }
}

/// Is `name` equal to or below `origin` (both lower-cased wire)?
pub fn is_subdomain(name: &[u8], origin: &[u8]) -> bool {
    let mut w = name;
    loop {
        if w == origin {
            return true;
        }
        match parent(w) {
            Some(p) => w = p,
            None => return false,
        }
    }
}

/// Text form of a lower-cased wire name, for messages and tools.
pub fn name_text(w: &[u8]) -> String {
    let mut s = String::new();
    let mut i = 0;
    while i < w.len() && w[i] != 0 {
        let l = w[i] as usize;
        for &b in &w[i + 1..i + 1 + l] {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'*' {
                s.push(b as char);
            } else {
                s.push_str(&format!("\\{:03}", b));
            }
        }
        s.push('.');
        i += 1 + l;
    }
    if s.is_empty() {
        s.push('.');
    }
    s
}

/// Wire form of a text name, case kept ("WwW.Example.TEST." or without the
/// final dot; "." or "" is the root). None if a label is empty or longer than
/// 63 octets, or the name longer than 255. No escapes: for tools and tests.
pub fn from_text(name: &str) -> Option<Vec<u8>> {
    let mut v = Vec::with_capacity(name.len() + 2);
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    if !trimmed.is_empty() {
        for label in trimmed.split('.') {
            if label.is_empty() || label.len() > 63 {
                return None;
            }
            v.push(label.len() as u8);
            v.extend_from_slice(label.as_bytes());
        }
    }
    v.push(0);
    (v.len() <= MAX_NAME).then_some(v)
}
