//! The operator overrides: `POST|PUT /override/ADDRESS?state=up|down|drain|none[&port=N]`
//! sets one (`none` clears it), `DELETE /override/ADDRESS[?port=N]` clears
//! it. ADDRESS is an address, `[v6]`, `v4:port` or `[v6]:port`, and may be
//! percent-encoded (`2001%3Adb8%3A%3A1`).

use std::net::{IpAddr, SocketAddr};

use hyper::{Method, StatusCode};
use serde::Serialize;

use super::{error, json, Admin, Reply};

/// The answer to a successful set or clear.
#[derive(Serialize)]
struct OverrideSet {
    address: IpAddr,
    port: Option<u16>,
    #[serde(rename = "override")]
    state: &'static str,
    /// Entries (distinct address, port, check) the override covers now.
    entries: usize,
}

/// The reply to a set or clear that took effect.
fn done(address: IpAddr, port: Option<u16>, state: u8, entries: usize) -> Reply {
    json(
        StatusCode::OK,
        &OverrideSet {
            address,
            port,
            state: crate::health::override_name(state),
            entries,
        },
    )
}

fn bad(msg: String) -> Reply {
    error(StatusCode::BAD_REQUEST, msg)
}

/// Handle `/override/{target}?{query}`; `target` and `query` as sent.
pub(crate) fn route(shared: &Admin, method: &Method, target: &str, query: &str) -> Reply {
    match parse(method, target, query) {
        Ok((addr, port, state)) => set(shared, addr, port, state),
        Err(r) => r,
    }
}

/// Fleet mode: the override goes to etcd for every node (then applies
/// here); if etcd does not take it, nothing changes and the reply is 503.
#[cfg(feature = "fleet")]
pub(crate) async fn route_fleet(
    shared: &Admin,
    fleet: &crate::fleet::Fleet,
    method: &Method,
    target: &str,
    query: &str,
    by: &str,
) -> Reply {
    let (addr, port, state) = match parse(method, target, query) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let engine = shared.server.engine.load();
    super::fleet_write(
        fleet,
        crate::health::overrides::covered(&engine.checks, addr, port, state),
        fleet.put_override(addr, port, state, by),
        |n| done(addr, port, state, n),
    )
    .await
}

/// The target, port and state of a write, or the error reply (a whole
/// response: large, on an error path of the API only).
#[allow(clippy::result_large_err)]
fn parse(method: &Method, target: &str, query: &str) -> Result<(IpAddr, Option<u16>, u8), Reply> {
    let who = percent_encoding::percent_decode_str(target).decode_utf8_lossy();
    let Some((addr, mut port)) = parse_target(&who) else {
        return Err(bad(format!("bad address {who:?}")));
    };
    let mut state = None;
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match &*k {
            "state" => match crate::health::parse_override(&v) {
                Some(o) => state = Some(o),
                None => return Err(bad(format!("bad state {v:?} (up, down, drain or none)"))),
            },
            "port" => match v.parse::<u16>() {
                Ok(p) if p > 0 => port = Some(p),
                _ => return Err(bad(format!("bad port {v:?}"))),
            },
            _ => return Err(bad(format!("unknown parameter {k:?} (state, port)"))),
        }
    }
    let state = match *method {
        Method::POST | Method::PUT => match state {
            Some(s) => s,
            None => return Err(bad("state=up|down|drain|none is required".into())),
        },
        Method::DELETE => crate::health::OVR_NONE,
        _ => return Err(super::method_not_allowed("POST, PUT, DELETE")),
    };
    Ok((addr, port, state))
}

/// Set (or clear) an override on this node and reply.
fn set(shared: &Admin, addr: IpAddr, port: Option<u16>, state: u8) -> Reply {
    match shared
        .overrides
        .set(&shared.server.engine, addr, port, state)
    {
        Ok(entries) => {
            // Answers follow before the reply: the decisions are recomputed
            // now rather than by the refresher a moment later (on the engine
            // serving now, which has the override whatever reloaded).
            shared.weights.catch_up(&shared.server.engine.load());
            done(addr, port, state, entries)
        }
        Err(e) => error(StatusCode::NOT_FOUND, e),
    }
}

/// Parse an override target: an address, `[v6]`, `v4:port` or `[v6]:port`.
pub(crate) fn parse_target(s: &str) -> Option<(IpAddr, Option<u16>)> {
    if let Ok(a) = s.parse::<IpAddr>() {
        return Some((a, None));
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Some((sa.ip(), Some(sa.port())));
    }
    s.strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .and_then(|x| x.parse::<IpAddr>().ok())
        .map(|a| (a, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let ip: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(parse_target("2001:db8::1"), Some((ip, None)));
        assert_eq!(parse_target("[2001:db8::1]:80"), Some((ip, Some(80))));
        assert_eq!(parse_target("[2001:db8::1]"), Some((ip, None)));
        assert_eq!(
            parse_target("127.0.0.1:8080"),
            Some(("127.0.0.1".parse().unwrap(), Some(8080)))
        );
        assert_eq!(parse_target("nope"), None);
    }

    #[test]
    fn percent_decoding() {
        let d = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        assert_eq!(d("2001%3Adb8%3a%3A1"), "2001:db8::1");
        // Broken escapes stay as they are.
        assert_eq!(d("%zz%4"), "%zz%4");
        assert_eq!(
            parse_target(&d("%5B2001%3Adb8%3A%3A1%5D%3A53")),
            Some(("2001:db8::1".parse().unwrap(), Some(53)))
        );
    }
}
