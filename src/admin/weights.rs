//! The runtime weights: `POST|PUT /weight/ADDRESS?weight=N[&port=N]` sets
//! one (a factor from 0 to 100 on the member's configured weight; `1` or
//! `clear` removes it), `DELETE /weight/ADDRESS[?port=N]` removes it.
//! ADDRESS takes the forms of `/override` (`v4:port`, `[v6]:port`,
//! percent-encoded).

use std::net::IpAddr;

use hyper::{Method, StatusCode};
use serde::Serialize;

use super::overrides::parse_target;
use super::{json, Admin, Reply};
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

fn error(status: StatusCode, msg: String) -> Reply {
    json(status, &serde_json::json!({ "error": msg }))
}

/// Handle `/weight/{target}?{query}`; `target` and `query` as sent.
pub(crate) fn route(shared: &Admin, method: &Method, target: &str, query: &str) -> Reply {
    let bad = |m: String| error(StatusCode::BAD_REQUEST, m);
    let who = percent_encoding::percent_decode_str(target).decode_utf8_lossy();
    let Some((addr, mut port)) = parse_target(&who) else {
        return bad(format!("bad address {who:?}"));
    };
    let mut weight = None;
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match &*k {
            "weight" => match parse_weight(&v) {
                Ok(w) => weight = Some(w),
                Err(e) => return bad(e),
            },
            "port" => match v.parse::<u16>() {
                Ok(p) if p > 0 => port = Some(p),
                _ => return bad(format!("bad port {v:?}")),
            },
            _ => return bad(format!("unknown parameter {k:?} (weight, port)")),
        }
    }
    let weight = match *method {
        Method::POST | Method::PUT => match weight {
            Some(w) => w,
            None => {
                return bad(format!(
                    "weight=N (0 to {MAX_RUNTIME_WEIGHT}) or weight=clear is required"
                ))
            }
        },
        Method::DELETE => None,
        _ => return super::method_not_allowed("POST, PUT, DELETE"),
    };
    match shared
        .weights
        .set(&shared.server.engine, addr, port, weight)
    {
        Ok(members) => json(
            StatusCode::OK,
            &WeightSet {
                address: addr,
                port,
                weight: weight.unwrap_or(1.0),
                members,
            },
        ),
        Err(e) => error(StatusCode::NOT_FOUND, e),
    }
}
