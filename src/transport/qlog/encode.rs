//! The bytes of the query log: Frame Streams control frames and the
//! dnstap protobuf of one exchange (dnstap.proto: `Dnstap`, `Message` of
//! type AUTH_RESPONSE), written by hand, field by field, into a reused
//! buffer so the writer thread allocates nothing per entry.

use super::*;

/// Frame Streams control frame types.
pub(super) const CONTROL_ACCEPT: u32 = 0x01;
pub(super) const CONTROL_START: u32 = 0x02;
pub(super) const CONTROL_STOP: u32 = 0x03;
pub(super) const CONTROL_READY: u32 = 0x04;
/// Frame Streams control field: content type.
pub(super) const FIELD_CONTENT_TYPE: u32 = 0x01;

/// A control frame: the escape (a zero length), the control frame's
/// length, its type and an optional content type field.
pub fn control_frame(kind: u32, content_type: Option<&[u8]>) -> Vec<u8> {
    let mut body = kind.to_be_bytes().to_vec();
    if let Some(ct) = content_type {
        body.extend_from_slice(&FIELD_CONTENT_TYPE.to_be_bytes());
        body.extend_from_slice(&(ct.len() as u32).to_be_bytes());
        body.extend_from_slice(ct);
    }
    let mut f = 0u32.to_be_bytes().to_vec();
    f.extend_from_slice(&(body.len() as u32).to_be_bytes());
    f.extend_from_slice(&body);
    f
}

// The protobuf fields of dnstap.proto (github.com/dnstap/dnstap.pb).
pub(super) const DNSTAP_IDENTITY: u32 = 1;
pub(super) const DNSTAP_VERSION: u32 = 2;
pub(super) const DNSTAP_MESSAGE: u32 = 14;
pub(super) const DNSTAP_TYPE: u32 = 15;
pub(super) const DNSTAP_TYPE_MESSAGE: u64 = 1;
pub(super) const MSG_TYPE: u32 = 1;
pub(super) const MSG_SOCKET_FAMILY: u32 = 2;
pub(super) const MSG_SOCKET_PROTOCOL: u32 = 3;
pub(super) const MSG_QUERY_ADDRESS: u32 = 4;
pub(super) const MSG_RESPONSE_ADDRESS: u32 = 5;
pub(super) const MSG_QUERY_PORT: u32 = 6;
pub(super) const MSG_RESPONSE_PORT: u32 = 7;
pub(super) const MSG_QUERY_TIME_SEC: u32 = 8;
pub(super) const MSG_QUERY_TIME_NSEC: u32 = 9;
pub(super) const MSG_QUERY_MESSAGE: u32 = 10;
pub(super) const MSG_RESPONSE_TIME_SEC: u32 = 12;
pub(super) const MSG_RESPONSE_TIME_NSEC: u32 = 13;
pub(super) const MSG_RESPONSE_MESSAGE: u32 = 14;
pub(super) const AUTH_RESPONSE: u64 = 2;
pub(super) const INET: u64 = 1;
pub(super) const INET6: u64 = 2;
pub(super) const UDP: u64 = 1;
pub(super) const TCP: u64 = 2;

pub(super) fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(super) fn field_varint(out: &mut Vec<u8>, field: u32, v: u64) {
    varint(out, u64::from(field) << 3);
    varint(out, v);
}

pub(super) fn field_fixed32(out: &mut Vec<u8>, field: u32, v: u32) {
    varint(out, (u64::from(field) << 3) | 5);
    out.extend_from_slice(&v.to_le_bytes());
}

pub(super) fn field_bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    varint(out, (u64::from(field) << 3) | 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

pub(super) fn ip_octets(ip: IpAddr) -> ([u8; 16], usize) {
    let mut a = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => {
            a[..4].copy_from_slice(&v4.octets());
            (a, 4)
        }
        IpAddr::V6(v6) => {
            a.copy_from_slice(&v6.octets());
            (a, 16)
        }
    }
}

/// One `Dnstap { identity, version, message: AUTH_RESPONSE, type: MESSAGE }`.
pub(super) fn encode(ident: &Ident, e: &Entry, out: &mut Vec<u8>) {
    let mut m = Vec::with_capacity(e.qlen + e.rlen + 96);
    field_varint(&mut m, MSG_TYPE, AUTH_RESPONSE);
    // A v4-mapped client on a v6 socket is logged as the IPv4 it is.
    let client_ip = e.client.ip().to_canonical();
    field_varint(
        &mut m,
        MSG_SOCKET_FAMILY,
        if client_ip.is_ipv4() { INET } else { INET6 },
    );
    field_varint(&mut m, MSG_SOCKET_PROTOCOL, if e.tcp { TCP } else { UDP });
    let (a, n) = ip_octets(client_ip);
    field_bytes(&mut m, MSG_QUERY_ADDRESS, &a[..n]);
    if let Some(s) = e.server {
        let ip = s.ip().to_canonical();
        // Same family as the client, and a real address (not the wildcard).
        if !ip.is_unspecified() && ip.is_ipv4() == client_ip.is_ipv4() {
            let (a, n) = ip_octets(ip);
            field_bytes(&mut m, MSG_RESPONSE_ADDRESS, &a[..n]);
        }
    }
    field_varint(&mut m, MSG_QUERY_PORT, u64::from(e.client.port()));
    if let Some(s) = e.server {
        field_varint(&mut m, MSG_RESPONSE_PORT, u64::from(s.port()));
    }
    field_varint(&mut m, MSG_QUERY_TIME_SEC, e.query_time.0);
    field_fixed32(&mut m, MSG_QUERY_TIME_NSEC, e.query_time.1);
    field_bytes(&mut m, MSG_QUERY_MESSAGE, &e.buf[..e.qlen]);
    field_varint(&mut m, MSG_RESPONSE_TIME_SEC, e.response_time.0);
    field_fixed32(&mut m, MSG_RESPONSE_TIME_NSEC, e.response_time.1);
    field_bytes(
        &mut m,
        MSG_RESPONSE_MESSAGE,
        &e.buf[e.qlen..e.qlen + e.rlen],
    );
    field_bytes(out, DNSTAP_IDENTITY, &ident.identity);
    field_bytes(out, DNSTAP_VERSION, &ident.version);
    field_bytes(out, DNSTAP_MESSAGE, &m);
    field_varint(out, DNSTAP_TYPE, DNSTAP_TYPE_MESSAGE);
}
