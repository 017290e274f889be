//! DNS Cookies in answers (RFC 7873 §5.2, RFC 9018): a query with a COOKIE
//! option is answered with its client cookie and a fresh server cookie
//! (`meridian_wire::cookie`), made with the `[server.rrl] cookie_secret`, or
//! a secret drawn at random when the process starts. A query whose server
//! cookie we issued within the last hour is marked valid, so that the UDP
//! rate limiter lets it through (RFC 7873 §5.2.3, as BIND and Knot do). No
//! allocation; one clock read per query with a cookie.

use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::OnceLock;

use meridian_wire::cookie::{self, Cookie};
use meridian_wire::Writer;

use crate::engine::Engine;

/// Octets the COOKIE option adds to a response to a query with `c`
/// (`Edns::cookie`).
pub(super) fn octets(c: Option<(u16, u8)>) -> usize {
    if c.is_some() {
        cookie::RESPONSE_LEN
    } else {
        0
    }
}

/// The secret used without `cookie_secret`: 128 random bits, drawn once per
/// process (from the OS-seeded keys of `RandomState`), so reloads keep it.
fn process_secret() -> [u8; 16] {
    static SECRET: OnceLock<[u8; 16]> = OnceLock::new();
    *SECRET.get_or_init(|| {
        let mut k = [0u8; 16];
        let a = std::collections::hash_map::RandomState::new().hash_one(0x636f_6f6bu64);
        let b = std::collections::hash_map::RandomState::new().hash_one(0x6965_7321u64);
        k[..8].copy_from_slice(&a.to_ne_bytes());
        k[8..].copy_from_slice(&b.to_ne_bytes());
        k
    })
}

/// Seconds since the epoch, as RFC 9018's 32-bit timestamp.
fn now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0)
}

impl Engine {
    /// After the OPT at `opt_at`: answer the client cookie at `at` in `req`
    /// (`Edns::cookie`, if any) with a server cookie for `src`. True when it
    /// held a valid server cookie of ours.
    pub(super) fn put_cookie(
        &self,
        w: &mut Writer,
        opt_at: usize,
        req: &[u8],
        at: Option<(u16, u8)>,
        src: IpAddr,
    ) -> bool {
        let Some((at, len)) = at else { return false };
        let Some(c) = req
            .get(at as usize..at as usize + len as usize)
            .and_then(Cookie::parse)
        else {
            return false;
        };
        let secret = self
            .settings
            .rrl
            .and_then(|r| r.cookie_secret)
            .unwrap_or_else(process_secret);
        let now = now();
        let valid = cookie::is_valid(&secret, &c, src, now);
        let server = cookie::server_cookie(&secret, &c.client, src, now);
        cookie::put_cookie(w, opt_at, &c.client, &server);
        valid
    }
}
