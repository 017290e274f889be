//! Zero-allocation query parsing: the header, the one question and the OPT
//! pseudo-record (RFC 1035 §4.1, RFC 6891 §6.1). Everything else in a query is
//! skipped after bounds checks. The hot path never builds a full `Message`.

use crate::ecs::{ClientSubnet, EcsError};
use crate::name::{skip_name, u16_at, WireName};
use crate::{OPT_ECS, OPT_NSID, TYPE_OPT, TYPE_TSIG};

/// EDNS data from the query's OPT record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edns {
    /// The requestor's UDP payload size (the OPT CLASS field).
    pub udp_size: u16,
    /// The EDNS version (0 is the only one).
    pub version: u8,
    /// The DO bit (RFC 3225).
    pub dnssec_ok: bool,
    /// The Compact Answers OK bit (RFC 9824 §4): the rcode of a compact
    /// denial may say NXDOMAIN.
    pub compact_ok: bool,
    /// A valid ECS option, if the query had one.
    pub ecs: Option<ClientSubnet>,
    /// Where the COOKIE option's data (RFC 7873) is in the query: offset and
    /// length, if the query had a well-formed one (a malformed one is
    /// FORMERR). Kept as a position so that `Edns` stays small to copy;
    /// `cookie::Cookie::parse` reads it.
    pub cookie: Option<(u16, u8)>,
    /// An empty NSID option asks for the server's identifier (RFC 5001 §2.3).
    pub nsid: bool,
}

/// A parsed query (`Default` is an empty one to parse into). The question
/// is `12..question_end` of the packet, so it can be echoed byte for byte
/// (case preserved).
#[derive(Clone, Default)]
pub struct Query {
    /// The message ID.
    pub id: u16,
    /// Raw flag word: we copy RD and the opcode from it.
    pub flags: u16,
    /// QNAME, lower-cased.
    pub qname: WireName,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
    /// Offset just past the question in the packet.
    pub question_end: usize,
    /// The OPT record, if any.
    pub edns: Option<Edns>,
    /// Offset of a TSIG record (RFC 8945), checked well formed and last.
    pub tsig: Option<usize>,
}

impl Query {
    /// The OPCODE field (0 = QUERY).
    pub fn opcode(&self) -> u8 {
        ((self.flags >> 11) & 0xF) as u8
    }
}

/// Why a query cannot be answered normally.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Reject {
    /// Too short for a header, or a response: send nothing.
    Drop,
    /// FORMERR. `question_end` is set when the question parsed, `edns`
    /// when an OPT parsed, so the error can echo them.
    FormErr {
        /// Offset past the question, if it parsed.
        question_end: Option<usize>,
        /// The OPT to echo (its ECS only if every ECS option was valid).
        edns: Option<Edns>,
    },
    /// EDNS version we do not speak (RFC 6891 §6.1.3).
    BadVers {
        /// Offset past the question.
        question_end: usize,
        /// The OPT, echoed without ECS.
        edns: Edns,
    },
    /// An opcode we do not implement, in a message whose QDCOUNT is not 1
    /// (with QDCOUNT 1 the question parses and the caller says NOTIMP).
    NotImp {
        /// The OPT to echo, if one parsed.
        edns: Option<Edns>,
    },
}

/// Parse a query packet. Returns the query, or what to do instead.
pub fn parse_query(p: &[u8], out: &mut Query) -> Result<(), Reject> {
    if p.len() < 12 {
        return Err(Reject::Drop);
    }
    let flags = u16::from_be_bytes([p[2], p[3]]);
    if flags & 0x8000 != 0 {
        // A response: answering it could start a loop between servers.
        return Err(Reject::Drop);
    }
    out.id = u16::from_be_bytes([p[0], p[1]]);
    out.flags = flags;
    out.edns = None;
    out.tsig = None;
    let qd = u16::from_be_bytes([p[4], p[5]]);
    let an = u16::from_be_bytes([p[6], p[7]]);
    let ns = u16::from_be_bytes([p[8], p[9]]);
    let ar = u16::from_be_bytes([p[10], p[11]]);
    let counts = (an, ns, ar);
    if qd != 1 {
        // Still look for an OPT, so the error carries one iff the query did
        // (RFC 6891 §7). An opcode we do not know is NOTIMP whatever its
        // sections hold (RFC 8490 §5.1: DSO messages have no question).
        let mut i = 12;
        let mut edns = None;
        let mut questions_ok = true;
        for _ in 0..qd {
            match skip_name(p, i) {
                Some(j) if j + 4 <= p.len() => i = j + 4,
                _ => {
                    questions_ok = false;
                    break;
                }
            }
        }
        if questions_ok {
            let mut tsig = None;
            let (Ok(ecs_err) | Err(ecs_err)) = parse_records(p, i, counts, &mut edns, &mut tsig);
            // Only a clean ECS is echoed, and only with version 0.
            edns = scrub(edns, ecs_err);
        }
        if (flags >> 11) & 0xF != 0 {
            return Err(Reject::NotImp { edns });
        }
        return Err(Reject::FormErr {
            question_end: None,
            edns,
        });
    }
    let formerr = Reject::FormErr {
        question_end: None,
        edns: None,
    };
    // Question: a name without compression (nothing precedes it to point at).
    if !out.qname.set(&p[12..]) {
        return Err(formerr);
    }
    let mut i = 12 + out.qname.len;
    let (Some(qtype), Some(qclass)) = (u16_at(p, i), u16_at(p, i + 2)) else {
        return Err(formerr);
    };
    out.qtype = qtype;
    out.qclass = qclass;
    i += 4;
    out.question_end = i;
    let ecs_err = match parse_records(p, i, counts, &mut out.edns, &mut out.tsig) {
        Ok(e) => e,
        Err(ecs_err) => {
            let edns = scrub(out.edns.take(), ecs_err);
            out.tsig = None;
            return Err(Reject::FormErr {
                question_end: Some(out.question_end),
                edns,
            });
        }
    };
    if let Some(e) = out.edns {
        if e.version != 0 {
            let mut e = e;
            e.ecs = None;
            out.edns = None;
            out.tsig = None;
            return Err(Reject::BadVers {
                question_end: out.question_end,
                edns: e,
            });
        }
        if ecs_err.is_some() {
            let mut e = e;
            e.ecs = None;
            out.edns = None;
            out.tsig = None;
            return Err(Reject::FormErr {
                question_end: Some(out.question_end),
                edns: Some(e),
            });
        }
    }
    Ok(())
}

/// Walk the answer, authority and additional sections from `i` to the end
/// of the packet and pick out the OPT record (into `edns`) and a TSIG (its
/// offset, into `tsig`); returns the first ECS error. On a malformed record
/// (or bytes after the last one, or a TSIG that is not the last record, RFC
/// 8945 §5.1) the error holds the ECS error so far, and `edns` the OPT
/// parsed so far, to echo it once scrubbed. Results go through `&mut` so
/// the hot path copies no large value back.
fn parse_records(
    p: &[u8],
    mut i: usize,
    (an, ns, ar): (u16, u16, u16),
    edns: &mut Option<Edns>,
    tsig: &mut Option<usize>,
) -> Result<Option<EcsError>, Option<EcsError>> {
    // Answer and authority records are not expected in a query; skip them.
    // An OPT there is malformed (RFC 6891 §6.1.1: additional section only).
    for _ in 0..(an as usize + ns as usize) {
        i = skip_name(p, i).ok_or(None)?;
        if matches!(u16_at(p, i), Some(TYPE_OPT | TYPE_TSIG)) {
            return Err(None);
        }
        let rdlen = u16_at(p, i + 8).ok_or(None)? as usize;
        i += 10 + rdlen;
        if i > p.len() {
            return Err(None);
        }
    }
    let mut ecs_err: Option<EcsError> = None;
    for n in 0..ar {
        let name_start = i;
        i = skip_name(p, i).ok_or(ecs_err)?;
        // The fixed part: type, class, TTL, RDLENGTH.
        let Some(fixed) = p.get(i..i + 10) else {
            return Err(ecs_err);
        };
        let rtype = u16::from_be_bytes([fixed[0], fixed[1]]);
        let class = u16::from_be_bytes([fixed[2], fixed[3]]);
        let ttl_hi = u16::from_be_bytes([fixed[4], fixed[5]]);
        let ttl_lo = u16::from_be_bytes([fixed[6], fixed[7]]);
        let rdlen = u16::from_be_bytes([fixed[8], fixed[9]]) as usize;
        let rd_start = i + 10;
        let rd_end = rd_start + rdlen;
        if rd_end > p.len() {
            return Err(ecs_err);
        }
        i = rd_end;
        if rtype == TYPE_TSIG {
            if n + 1 != ar || !crate::tsig::valid(p, name_start) {
                return Err(ecs_err);
            }
            *tsig = Some(name_start);
            continue;
        }
        if rtype != TYPE_OPT {
            continue;
        }
        // RFC 6891 §6.1.1: one OPT, owned by the root.
        if edns.is_some() || p[name_start] != 0 || i - rdlen - 10 != name_start + 1 {
            return Err(ecs_err);
        }
        let e = edns.insert(Edns {
            udp_size: class,
            version: (ttl_hi & 0xFF) as u8,
            dnssec_ok: ttl_lo & 0x8000 != 0,
            compact_ok: ttl_lo & 0x4000 != 0,
            ecs: None,
            cookie: None,
            nsid: false,
        });
        let mut bad_cookie = false;
        let mut j = rd_start;
        while j < rd_end {
            let (Some(code), Some(len)) = (u16_at(p, j), u16_at(p, j + 2)) else {
                // Echo the OPT without options: we cannot trust any of them.
                e.ecs = None;
                return Err(None);
            };
            let body = j + 4;
            let end = body + len as usize;
            if end > rd_end {
                e.ecs = None;
                return Err(None);
            }
            match code {
                OPT_NSID => e.nsid |= len == 0,
                OPT_ECS => {
                    if e.ecs.is_some() {
                        ecs_err.get_or_insert(EcsError::Duplicate);
                    } else {
                        match ClientSubnet::parse(&p[body..end]) {
                            Ok(c) => e.ecs = Some(c),
                            Err(err) => {
                                ecs_err.get_or_insert(err);
                            }
                        }
                    }
                }
                crate::cookie::OPT_COOKIE => {
                    // RFC 7873 §5.2.2: a malformed COOKIE (or two) is FORMERR.
                    match crate::cookie::Cookie::parse(&p[body..end]) {
                        Some(_) if e.cookie.is_none() => e.cookie = Some((body as u16, len as u8)),
                        _ => bad_cookie = true,
                    }
                }
                _ => {}
            }
            j = end;
        }
        if bad_cookie {
            e.cookie = None;
            return Err(ecs_err);
        }
    }
    if i != p.len() {
        // Trailing garbage after the last record.
        return Err(ecs_err);
    }
    Ok(ecs_err)
}

/// The OPT to echo in an error: its ECS only if every ECS option was valid
/// and the EDNS version is ours (RFC 7871 §7.2.1, RFC 6891 §6.1.3).
fn scrub(edns: Option<Edns>, ecs_err: Option<EcsError>) -> Option<Edns> {
    edns.map(|mut e| {
        if ecs_err.is_some() || e.version != 0 {
            e.ecs = None;
        }
        e
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(name: &[u8], extra: &[u8], ar: u16) -> Vec<u8> {
        let mut v = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0];
        v.extend_from_slice(&ar.to_be_bytes());
        v.extend_from_slice(name);
        v.extend_from_slice(&[0, 1, 0, 1]);
        v.extend_from_slice(extra);
        v
    }

    #[test]
    fn parses_simple_query() {
        let p = q(b"\x03WwW\x07example\x04test\x00", &[], 0);
        let mut out = Query::default();
        parse_query(&p, &mut out).unwrap();
        assert_eq!(out.qname.as_bytes(), b"\x03www\x07example\x04test\x00");
        assert_eq!(out.qname.nlabels, 3);
        assert_eq!(out.qname.suffix(1), b"\x07example\x04test\x00");
        assert_eq!(out.question_end, p.len());
    }

    #[test]
    fn rejects_bad_inputs() {
        let mut out = Query::default();
        assert_eq!(parse_query(&[0; 5], &mut out), Err(Reject::Drop));
        let p = q(b"\x40abc\x00", &[], 0);
        assert!(matches!(
            parse_query(&p, &mut out),
            Err(Reject::FormErr { .. })
        ));
        let p = q(b"\xc0\x0c", &[], 0);
        assert!(matches!(
            parse_query(&p, &mut out),
            Err(Reject::FormErr { .. })
        ));
        let p = q(b"\x01a\x00", b"junk", 0);
        assert!(matches!(
            parse_query(&p, &mut out),
            Err(Reject::FormErr {
                question_end: Some(_),
                ..
            })
        ));
    }

    #[test]
    fn skip_name_follows_pointers_backwards_only() {
        // "x" at 2, then a pointer back to it: a loop, though it points back.
        let p = b"\x00\x00\x01x\xc0\x02";
        assert_eq!(skip_name(p, 2), None);
        // A pointer to itself, and one forward.
        assert_eq!(skip_name(b"\xc0\x00", 0), None);
        assert_eq!(skip_name(b"\xc0\x02\x00", 0), None);
        // A proper suffix: "a" + pointer to "b." at 0.
        let p = b"\x01b\x00\x01a\xc0\x00";
        assert_eq!(skip_name(p, 3), Some(7));
        // Through two pointers, each further back.
        let p = b"\x01c\x00\x01b\xc0\x00\x01a\xc0\x03";
        assert_eq!(skip_name(p, 7), Some(11));
        // 255 octets in all is the limit, pointers included.
        let mut p = vec![63u8; 1];
        p.extend([b'a'; 63]);
        p.extend([63u8]);
        p.extend([b'a'; 63]);
        p.extend([63u8]);
        p.extend([b'a'; 63]);
        p.extend([61u8]);
        p.extend([b'a'; 61]);
        p.push(0);
        assert_eq!(p.len(), 255);
        assert_eq!(skip_name(&p, 0), Some(255));
        let at = p.len();
        p.extend([1, b'b', 0xc0, 0]);
        assert_eq!(skip_name(&p, at), None, "257 octets through a pointer");
    }

    fn header(flags: u16, qd: u16, ar: u16) -> Vec<u8> {
        let mut v = vec![0x12, 0x34];
        v.extend_from_slice(&flags.to_be_bytes());
        v.extend_from_slice(&qd.to_be_bytes());
        v.extend_from_slice(&[0, 0, 0, 0]);
        v.extend_from_slice(&ar.to_be_bytes());
        v
    }

    const OPT: &[u8] = b"\x00\x00\x29\x04\xd0\x00\x00\x80\x00\x00\x00";

    #[test]
    fn qdcount_other_than_one_keeps_the_opt() {
        let mut out = Query::default();
        let mut p = header(0, 0, 1);
        p.extend_from_slice(OPT);
        let Err(Reject::FormErr {
            question_end: None,
            edns: Some(e),
        }) = parse_query(&p, &mut out)
        else {
            panic!("QDCOUNT 0 with an OPT")
        };
        assert_eq!((e.udp_size, e.dnssec_ok), (1232, true));
        // Two questions, then the OPT.
        let mut p = header(0, 2, 1);
        p.extend_from_slice(b"\x01a\x00\x00\x01\x00\x01\xc0\x0c\x00\x01\x00\x01");
        p.extend_from_slice(OPT);
        assert!(matches!(
            parse_query(&p, &mut out),
            Err(Reject::FormErr {
                question_end: None,
                edns: Some(_)
            })
        ));
        // An unknown opcode: NOTIMP whatever QDCOUNT says.
        let mut p = header(6 << 11, 0, 1);
        p.extend_from_slice(OPT);
        assert!(matches!(
            parse_query(&p, &mut out),
            Err(Reject::NotImp { edns: Some(_) })
        ));
        assert_eq!(
            parse_query(&header(2 << 11, 0, 0), &mut out),
            Err(Reject::NotImp { edns: None })
        );
    }
}
