//! DNS Cookies (RFC 7873) with interoperable server cookies (RFC 9018).
//!
//! The COOKIE option (code 10) holds an 8-octet client cookie, optionally
//! followed by a server cookie of 8 to 32 octets; any other length is
//! malformed and the query gets FORMERR (RFC 7873 §5.2.2). meridian's
//! server cookies are RFC 9018's 16 octets: version 1, three reserved
//! octets, a 32-bit timestamp (seconds since the epoch, serial arithmetic)
//! and SipHash-2-4, keyed with a 128-bit secret, of client cookie | version
//! | reserved | timestamp | client IP (4 or 16 octets). Servers sharing the
//! secret accept each other's cookies. A server cookie is valid for one hour
//! (RFC 9018 §4.3) and at most five minutes ahead of our clock.
//!
//! No allocation: cookies are fixed arrays.

use std::hash::Hasher;
use std::net::IpAddr;

use siphasher::sip::SipHasher24;

use crate::writer::Writer;

/// The COOKIE EDNS option code (RFC 7873 §4).
pub const OPT_COOKIE: u16 = 10;
/// Octets the COOKIE option takes in our responses (code, length, client
/// cookie, 16-octet server cookie).
pub const RESPONSE_LEN: usize = 4 + 8 + 16;
/// How long a server cookie stays valid, in seconds (RFC 9018 §4.3).
pub const LIFETIME: u32 = 3600;
/// How far a server cookie's timestamp may be ahead of our clock.
pub const AHEAD: u32 = 300;

/// A COOKIE option as a query carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cookie {
    /// The client cookie.
    pub client: [u8; 8],
    server: [u8; 32],
    server_len: u8,
}

impl Cookie {
    /// Parse the option's data: None when malformed (length not 8 and not
    /// 16..=40), which is FORMERR.
    pub fn parse(data: &[u8]) -> Option<Cookie> {
        if data.len() != 8 && !(16..=40).contains(&data.len()) {
            return None;
        }
        let mut c = Cookie {
            client: [0; 8],
            server: [0; 32],
            server_len: (data.len() - 8) as u8,
        };
        c.client.copy_from_slice(&data[..8]);
        c.server[..data.len() - 8].copy_from_slice(&data[8..]);
        Some(c)
    }

    /// The server cookie the client sent back (empty if none).
    pub fn server(&self) -> &[u8] {
        &self.server[..self.server_len as usize]
    }
}

/// The RFC 9018 server cookie for `client` at `ip`, stamped `timestamp`.
pub fn server_cookie(secret: &[u8; 16], client: &[u8; 8], ip: IpAddr, timestamp: u32) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[0] = 1;
    out[4..8].copy_from_slice(&timestamp.to_be_bytes());
    let mut h = SipHasher24::new_with_key(secret);
    h.write(client);
    h.write(&out[..8]);
    match ip.to_canonical() {
        IpAddr::V4(a) => h.write(&a.octets()),
        IpAddr::V6(a) => h.write(&a.octets()),
    }
    out[8..].copy_from_slice(&h.finish().to_be_bytes());
    out
}

/// Is the server cookie in `c` one we issued to `ip` (with `secret`) and
/// still valid at `now` (seconds since the epoch)?
pub fn is_valid(secret: &[u8; 16], c: &Cookie, ip: IpAddr, now: u32) -> bool {
    let s = c.server();
    if s.len() != 16 || s[0] != 1 {
        return false;
    }
    let ts = u32::from_be_bytes([s[4], s[5], s[6], s[7]]);
    // Serial number arithmetic (RFC 1982): age in the past, or just ahead.
    let age = now.wrapping_sub(ts);
    if age > LIFETIME && ts.wrapping_sub(now) > AHEAD {
        return false;
    }
    let want = server_cookie(secret, &c.client, ip, ts);
    // Compare without an early exit (no timing hint about the hash).
    want[8..]
        .iter()
        .zip(&s[8..])
        .fold(0u8, |d, (a, b)| d | (a ^ b))
        == 0
}

/// Append a COOKIE option (the client cookie and `server`) to the OPT record
/// that starts at `opt_at` in `w` (as `edns::put_opt` wrote it, last in the
/// message), and grow its RDLENGTH. Past the writer's limit: nothing is
/// written and `overflow` is set.
pub fn put_cookie(w: &mut Writer, opt_at: usize, client: &[u8; 8], server: &[u8; 16]) {
    let rdlen_at = opt_at + 9;
    let Some(old) = w
        .buf
        .get(rdlen_at..rdlen_at + 2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
    else {
        return;
    };
    if !w.fits(RESPONSE_LEN) {
        w.overflow = true;
        return;
    }
    w.put_u16(OPT_COOKIE);
    w.put_u16(24);
    w.put(client);
    w.put(server);
    let new = (old as usize + RESPONSE_LEN) as u16;
    w.buf[rdlen_at..rdlen_at + 2].copy_from_slice(&new.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths() {
        assert!(Cookie::parse(&[1; 8]).is_some());
        assert!(Cookie::parse(&[1; 16]).is_some());
        assert!(Cookie::parse(&[1; 40]).is_some());
        for n in [0, 7, 9, 15, 41] {
            assert!(Cookie::parse(&vec![1; n]).is_none(), "{n}");
        }
    }

    #[test]
    fn round_trip_and_expiry() {
        let secret = [7u8; 16];
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let client = [1, 2, 3, 4, 5, 6, 7, 8];
        let s = server_cookie(&secret, &client, ip, 1_000_000);
        let mut data = client.to_vec();
        data.extend_from_slice(&s);
        let c = Cookie::parse(&data).unwrap();
        assert!(is_valid(&secret, &c, ip, 1_000_000));
        assert!(is_valid(&secret, &c, ip, 1_000_000 + LIFETIME));
        assert!(!is_valid(&secret, &c, ip, 1_000_000 + LIFETIME + 1));
        assert!(is_valid(&secret, &c, ip, 1_000_000 - AHEAD));
        assert!(!is_valid(&secret, &c, ip, 1_000_000 - AHEAD - 1));
        assert!(!is_valid(&[8; 16], &c, ip, 1_000_000));
        assert!(!is_valid(
            &secret,
            &c,
            "192.0.2.2".parse().unwrap(),
            1_000_000
        ));
    }
}
