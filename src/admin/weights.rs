//! The runtime weights: `POST|PUT /weight/ADDRESS?weight=N[&port=N]` sets
//! one (a factor from 0 to 100 on the member's configured weight; `1` or
//! `clear` removes it), `DELETE /weight/ADDRESS[?port=N]` removes it.
//! ADDRESS takes the forms of `/override` (`v4:port`, `[v6]:port`,
//! percent-encoded).

use std::net::IpAddr;

use hyper::{Method, StatusCode};
use serde::Serialize;

use super::overrides::parse_target;
use super::{error, json, Admin, Reply};
use crate::engine::{parse_weight, MAX_RUNTIME_WEIGHT};

/// The answer to a successful set or clear.
#[derive(Serialize)]
struct WeightSet {
    address: IpAddr,
    port: Option<u16>,
    /// The factor now in force (1 when cleared).
    weight: f64,
    /// Pool members it covers now.
    members: usize,
}

/// The reply to a set or clear that took effect.
fn done(address: IpAddr, port: Option<u16>, weight: Option<f64>, members: usize) -> Reply {
    json(
        StatusCode::OK,
        &WeightSet {
            address,
            port,
            weight: weight.unwrap_or(1.0),
            members,
        },
    )
}

/// Handle `/weight/{target}?{query}`; `target` and `query` as sent.
pub(crate) fn route(shared: &Admin, method: &Method, target: &str, query: &str) -> Reply {
    match parse(method, target, query) {
        Ok((addr, port, weight)) => set(shared, addr, port, weight),
        Err(r) => r,
    }
}

/// Fleet mode: the weight goes to etcd for every node (then applies here);
/// if etcd does not take it, nothing changes and the reply is 503.
#[cfg(feature = "fleet")]
pub(crate) async fn route_fleet(
    shared: &Admin,
    fleet: &crate::fleet::Fleet,
    method: &Method,
    target: &str,
    query: &str,
    by: &str,
) -> Reply {
    let (addr, port, weight) = match parse(method, target, query) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let engine = shared.server.engine.load();
    super::fleet_write(
        fleet,
        crate::engine::weights::covered(&engine, addr, port, weight),
        fleet.put_weight(addr, port, weight, by),
        |n| done(addr, port, weight, n),
    )
    .await
}

/// The target, port and weight (None: cleared) of a write, or the error
/// reply (a whole response: large, on an error path of the API only).
#[allow(clippy::type_complexity, clippy::result_large_err)]
fn parse(
    method: &Method,
    target: &str,
    query: &str,
) -> Result<(IpAddr, Option<u16>, Option<f64>), Reply> {
    let bad = |m: String| error(StatusCode::BAD_REQUEST, m);
    let who = percent_encoding::percent_decode_str(target).decode_utf8_lossy();
    let Some((addr, mut port)) = parse_target(&who) else {
        return Err(bad(format!("bad address {who:?}")));
    };
    let mut weight = None;
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match &*k {
            "weight" => match parse_weight(&v) {
                Ok(w) => weight = Some(w),
                Err(e) => return Err(bad(e)),
            },
            "port" => match v.parse::<u16>() {
                Ok(p) if p > 0 => port = Some(p),
                _ => return Err(bad(format!("bad port {v:?}"))),
            },
            _ => return Err(bad(format!("unknown parameter {k:?} (weight, port)"))),
        }
    }
    let weight = match *method {
        Method::POST | Method::PUT => match weight {
            Some(w) => w,
            None => {
                return Err(bad(format!(
                    "weight=N (0 to {MAX_RUNTIME_WEIGHT}) or weight=clear is required"
                )))
            }
        },
        Method::DELETE => None,
        _ => return Err(super::method_not_allowed("POST, PUT, DELETE")),
    };
    Ok((addr, port, weight))
}

/// Set (or clear) a runtime weight on this node and reply.
fn set(shared: &Admin, addr: IpAddr, port: Option<u16>, weight: Option<f64>) -> Reply {
    match shared
        .weights
        .set(&shared.server.engine, addr, port, weight)
    {
        Ok(members) => done(addr, port, weight, members),
        Err(e) => error(StatusCode::NOT_FOUND, e),
    }
}
