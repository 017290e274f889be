//! The truncated form of a response (RFC 1035 §4.1.1 TC, RFC 2181 §9): the
//! header with TC set, the question, and of the additional section only the
//! OPT record (with the ECS echo, RFC 7871 §7.2.2). The UDP path sends it
//! when an answer does not fit, and RRL sends it as its "slip".

use crate::name::skip_name;
use crate::TYPE_OPT;

/// Rewrite the response in `buf[..len]` into its truncated form, in place.
/// Returns the new length. A response whose question does not parse keeps
/// only its header (QDCOUNT 0).
pub fn truncate_response(buf: &mut [u8], len: usize) -> usize {
    if len < 12 || len > buf.len() {
        return len.min(buf.len());
    }
    let p = &buf[..len];
    let count = |k: usize| u16::from_be_bytes([p[4 + 2 * k], p[5 + 2 * k]]) as usize;
    let (qd, an, ns, ar) = (count(0), count(1), count(2), count(3));
    let mut i = 12;
    let mut question_ok = true;
    for _ in 0..qd {
        match skip_name(p, i) {
            Some(j) if j + 4 <= len => i = j + 4,
            _ => {
                question_ok = false;
                break;
            }
        }
    }
    let (qd, qend) = if question_ok { (qd, i) } else { (0, 12) };
    // Find the OPT record in the additional section.
    let mut opt = None;
    if question_ok {
        let mut i = qend;
        for k in 0..an + ns + ar {
            let start = i;
            let Some(j) = skip_name(p, i) else { break };
            if j + 10 > len {
                break;
            }
            let rtype = u16::from_be_bytes([p[j], p[j + 1]]);
            let rdlen = u16::from_be_bytes([p[j + 8], p[j + 9]]) as usize;
            let end = j + 10 + rdlen;
            if end > len {
                break;
            }
            if rtype == TYPE_OPT && k >= an + ns {
                opt = Some((start, end));
            }
            i = end;
        }
    }
    let mut out = qend;
    let mut arc = 0u16;
    if let Some((a, b)) = opt {
        buf.copy_within(a..b, qend);
        out = qend + (b - a);
        arc = 1;
    }
    buf[2] |= 0x02; // TC
    buf[4..6].copy_from_slice(&(qd as u16).to_be_bytes());
    buf[6..8].copy_from_slice(&0u16.to_be_bytes());
    buf[8..10].copy_from_slice(&0u16.to_be_bytes());
    buf[10..12].copy_from_slice(&arc.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slip_keeps_question_and_opt() {
        // Header, question www.example.test A IN, one answer, OPT with ECS.
        let mut m = vec![0x12, 0x34, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 1];
        m.extend_from_slice(b"\x03www\x07example\x04test\x00\x00\x01\x00\x01");
        let qend = m.len();
        m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 1]);
        let opt = [
            0, 0, 41, 4, 208, 0, 0, 0, 0, 0, 11, 0, 8, 0, 7, 0, 1, 24, 0, 192, 0, 2,
        ];
        m.extend_from_slice(&opt);
        let len = m.len();
        m.resize(4096, 0);
        let n = truncate_response(&mut m, len);
        assert_eq!(n, qend + opt.len());
        assert_eq!(&m[qend..n], &opt);
        assert_eq!(m[2] & 0x02, 0x02, "TC");
        assert_eq!(&m[4..12], &[0, 1, 0, 0, 0, 0, 0, 1]);
        // Without an OPT: header and question only.
        let mut m2 = m[..qend].to_vec();
        m2[11] = 0;
        m2.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 1]);
        m2[7] = 1;
        let l2 = m2.len();
        assert_eq!(truncate_response(&mut m2, l2), qend);
        assert_eq!(&m2[4..12], &[0, 1, 0, 0, 0, 0, 0, 0]);
    }
}
