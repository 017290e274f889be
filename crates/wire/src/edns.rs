//! The OPT pseudo-record of a response (RFC 6891 §6.1.2), with the ECS echo
//! (RFC 7871 §7.2.2) when the query carried a valid ECS option.

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
