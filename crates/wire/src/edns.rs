//! The OPT pseudo-record of a response (RFC 6891 §6.1.2), with the ECS echo
//! (RFC 7871 §7.2.2) when the query carried a valid ECS option, and options
//! appended after it: NSID (RFC 5001 §2.3), Extended DNS Errors (RFC 8914
//! §2).

use crate::ecs::{ClientSubnet, Scope};
use crate::writer::Writer;
use crate::TYPE_OPT;

/// Write the OPT record: our UDP payload size, the upper rcode bits, the DO
/// bit copied from the query (RFC 3225 §3), and the ECS echo if any. The
/// caller counts it in ARCOUNT.
pub fn put_opt(
    w: &mut Writer,
    payload: u16,
    dnssec_ok: bool,
    ext_rcode: u8,
    ecs: Option<(ClientSubnet, Scope)>,
) {
    w.put(&[0]);
    w.put_u16(TYPE_OPT);
    w.put_u16(payload);
    w.put(&[ext_rcode, 0]);
    w.put_u16(if dnssec_ok { 0x8000 } else { 0 });
    match ecs {
        Some((c, scope)) => {
            w.put_u16(c.wire_len() as u16);
            let mut tmp = [0u8; 24];
            let n = c.write_echo(scope, &mut tmp);
            w.put(&tmp[..n]);
        }
        None => w.put_u16(0),
    }
}

/// Octets the OPT record takes, with the ECS echo for `ecs`.
pub fn opt_len(ecs: Option<&ClientSubnet>) -> usize {
    11 + ecs.map(|c| c.wire_len()).unwrap_or(0)
}

/// Append one option, `code` with the concatenation of `body`, to the OPT
/// record that starts at `opt_at` and ends the message, fixing its RDLEN.
/// Returns the octets added: 0 when it does not fit under the writer's
/// limit, and then nothing is written and `overflow` is set (an optional
/// option such as NSID is checked with [`Writer::fits`] first).
pub fn put_option(w: &mut Writer, opt_at: usize, code: u16, body: &[&[u8]]) -> usize {
    let n: usize = body.iter().map(|b| b.len()).sum();
    if opt_at + 11 > w.len || n > u16::MAX as usize {
        return 0;
    }
    if !w.fits(4 + n) {
        w.overflow = true;
        return 0;
    }
    w.put_u16(code);
    w.put_u16(n as u16);
    for b in body {
        w.put(b);
    }
    let rdlen_at = opt_at + 9;
    let rdlen = u16::from_be_bytes([w.buf[rdlen_at], w.buf[rdlen_at + 1]]) as usize + 4 + n;
    w.buf[rdlen_at..rdlen_at + 2].copy_from_slice(&(rdlen as u16).to_be_bytes());
    4 + n
}

/// Octets an Extended DNS Error option takes with `text`.
pub fn ede_len(text: &str) -> usize {
    6 + text.len()
}

/// Append an Extended DNS Error option (RFC 8914 §2): INFO-CODE and EXTRA-TEXT.
pub fn put_ede(w: &mut Writer, opt_at: usize, info: u16, text: &str) -> usize {
    put_option(
        w,
        opt_at,
        crate::OPT_EDE,
        &[&info.to_be_bytes(), text.as_bytes()],
    )
}
