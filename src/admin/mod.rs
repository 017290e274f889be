//! The HTTP API: `GET /metrics` (Prometheus text format 0.0.4), `GET /status`
//! (JSON: every member's health) and the operator overrides
//! (`POST /override/ADDRESS?state=up|down|drain|none[&port=N]`,
//! `DELETE /override/ADDRESS[?port=N]`). Plain HTTP/1.1, one request per
//! connection. There is no authentication: bind it to loopback or a
//! management network.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub mod report;

use crate::health::Overrides;
use crate::metrics::QTYPES;
use crate::transport::ServerState;

/// What the HTTP API reads and changes: the server's state and the
/// operator overrides (owned by the daemon).
pub struct Admin {
    /// The engine, counters and shutdown flags.
    pub server: Arc<ServerState>,
    /// The operator overrides.
    pub overrides: Arc<Overrides>,
}

/// Serve the HTTP API on `listener` until the process ends.
pub async fn serve(shared: Arc<Admin>, listener: tokio::net::TcpListener) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            let mut n = 0;
            loop {
                let Ok(Ok(k)) =
                    tokio::time::timeout(std::time::Duration::from_secs(5), s.read(&mut buf[n..]))
                        .await
                else {
                    return;
                };
                if k == 0 {
                    return;
                }
                n += k;
                if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") || n == buf.len() {
                    break;
                }
            }
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            let mut parts = req.split_whitespace();
            let method = parts.next().unwrap_or("");
            let path = parts.next().unwrap_or("");
            let (status, ctype, body) = route(&shared, method, path);
            let resp = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = s.write_all(resp.as_bytes()).await;
        });
    }
}

fn route(shared: &Admin, method: &str, target: &str) -> (&'static str, &'static str, String) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4",
            metrics_text(&shared.server),
        ),
        ("GET", "/status") => (
            "200 OK",
            "application/json",
            report::status_json(&shared.server.engine.load(), &shared.overrides.snapshot()),
        ),
        (_, "/metrics" | "/status") => ("405 Method Not Allowed", "text/plain", "use GET\n".into()),
        (_, p) if p.starts_with("/override/") => {
            override_route(shared, method, &p["/override/".len()..], query)
        }
        _ => ("404 Not Found", "text/plain", "not found\n".into()),
    }
}

fn bad(msg: String) -> (&'static str, &'static str, String) {
    (
        "400 Bad Request",
        "application/json",
        format!("{{\"error\": {}}}\n", report::json_str(&msg)),
    )
}

/// `POST|PUT /override/ADDRESS?state=up|down|drain|none[&port=N]` sets an
/// override (`none` clears it); `DELETE /override/ADDRESS[?port=N]` clears it.
/// ADDRESS may also be `v4:port` or `[v6]:port`.
fn override_route(
    shared: &Admin,
    method: &str,
    who: &str,
    query: &str,
) -> (&'static str, &'static str, String) {
    use report::{json_str, parse_target, percent_decode};
    let who = percent_decode(who);
    let Some((addr, mut port)) = parse_target(&who) else {
        return bad(format!("bad address {who:?}"));
    };
    let mut state = None;
    for kv in query.split('&').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let v = percent_decode(v);
        match k {
            "state" => match crate::health::parse_override(&v) {
                Some(o) => state = Some(o),
                None => return bad(format!("bad state {v:?} (up, down, drain or none)")),
            },
            "port" => match v.parse::<u16>() {
                Ok(p) if p > 0 => port = Some(p),
                _ => return bad(format!("bad port {v:?}")),
            },
            _ => return bad(format!("unknown parameter {k:?} (state, port)")),
        }
    }
    let state = match method {
        "POST" | "PUT" => match state {
            Some(s) => s,
            None => return bad("state=up|down|drain|none is required".into()),
        },
        "DELETE" => crate::health::OVR_NONE,
        _ => {
            return (
                "405 Method Not Allowed",
                "text/plain",
                "use POST or DELETE\n".into(),
            )
        }
    };
    let engine = shared.server.engine.load();
    match shared
        .overrides
        .set(&engine.health, &engine.checks, addr, port, state)
    {
        Ok(n) => (
            "200 OK",
            "application/json",
            format!(
                "{{\"address\": {}, \"port\": {}, \"override\": \"{}\", \"entries\": {n}}}\n",
                json_str(&addr.to_string()),
                port.map(|p| p.to_string()).unwrap_or_else(|| "null".into()),
                crate::health::override_name(state)
            ),
        ),
        Err(e) => (
            "404 Not Found",
            "application/json",
            format!("{{\"error\": {}}}\n", json_str(&e)),
        ),
    }
}

/// The whole `/metrics` page.
pub fn metrics_text(shared: &ServerState) -> String {
    let m = &shared.metrics;
    let mut s = String::new();
    let c = |v: &std::sync::atomic::AtomicU64| v.load(Ordering::Relaxed);
    let _ = writeln!(s, "# HELP meridian_queries_total DNS queries received.");
    let _ = writeln!(s, "# TYPE meridian_queries_total counter");
    let _ = writeln!(s, "meridian_queries_total {}", c(&m.queries));
    let _ = writeln!(s, "# TYPE meridian_dropped_total counter");
    let _ = writeln!(s, "meridian_dropped_total {}", c(&m.dropped));
    let _ = writeln!(s, "# TYPE meridian_truncated_total counter");
    let _ = writeln!(s, "meridian_truncated_total {}", c(&m.truncated));
    let _ = writeln!(s, "# TYPE meridian_ecs_queries_total counter");
    let _ = writeln!(s, "meridian_ecs_queries_total {}", c(&m.ecs));
    let _ = writeln!(s, "# HELP meridian_responses_total Responses by rcode.");
    let _ = writeln!(s, "# TYPE meridian_responses_total counter");
    for (i, v) in m.rcode.iter().enumerate() {
        let v = c(v);
        if v > 0 {
            let _ = writeln!(
                s,
                "meridian_responses_total{{rcode=\"{}\"}} {v}",
                rcode_name(i)
            );
        }
    }
    let _ = writeln!(s, "# TYPE meridian_queries_by_type_total counter");
    for (i, v) in m.qtype.iter().enumerate() {
        let v = c(v);
        if v > 0 {
            let name = QTYPES.get(i).map(|x| x.1).unwrap_or("other");
            let _ = writeln!(s, "meridian_queries_by_type_total{{qtype=\"{name}\"}} {v}");
        }
    }
    let _ = writeln!(
        s,
        "# HELP meridian_ecs_scope_total ECS responses by returned scope prefix length."
    );
    let _ = writeln!(s, "# TYPE meridian_ecs_scope_total counter");
    for (i, v) in m.scope.iter().enumerate() {
        let v = c(v);
        if v > 0 {
            let _ = writeln!(s, "meridian_ecs_scope_total{{scope=\"{i}\"}} {v}");
        }
    }
    let e = shared.engine.load();
    let _ = writeln!(s, "# TYPE meridian_pool_answers_total counter");
    for (i, p) in e.pools.iter().enumerate() {
        if let Some(v) = m.pool_answers.get(i) {
            let _ = writeln!(
                s,
                "meridian_pool_answers_total{{pool=\"{}\"}} {}",
                p.name,
                c(v)
            );
        }
    }
    let _ = writeln!(s, "# TYPE meridian_reloads_total counter");
    let _ = writeln!(
        s,
        "meridian_reloads_total{{result=\"ok\"}} {}",
        c(&m.reloads_ok)
    );
    let _ = writeln!(
        s,
        "meridian_reloads_total{{result=\"failed\"}} {}",
        c(&m.reloads_failed)
    );
    let _ = writeln!(s, "# TYPE meridian_tcp_rejected_total counter");
    let _ = writeln!(s, "meridian_tcp_rejected_total {}", c(&m.tcp_rejected));
    let _ = writeln!(
        s,
        "# HELP meridian_tcp_timeouts_total TCP connections closed by the idle or read timeout."
    );
    let _ = writeln!(s, "# TYPE meridian_tcp_timeouts_total counter");
    let _ = writeln!(s, "meridian_tcp_timeouts_total {}", c(&m.tcp_timeouts));
    let _ = writeln!(s, "# HELP meridian_rrl_responses_total UDP responses over the rate limit: dropped, or sent truncated (slipped).");
    let _ = writeln!(s, "# TYPE meridian_rrl_responses_total counter");
    let _ = writeln!(
        s,
        "meridian_rrl_responses_total{{action=\"dropped\"}} {}",
        c(&m.rrl_dropped)
    );
    let _ = writeln!(
        s,
        "meridian_rrl_responses_total{{action=\"slipped\"}} {}",
        c(&m.rrl_slipped)
    );
    report::metrics(&e, &mut s);
    s
}

fn rcode_name(i: usize) -> String {
    match i {
        0 => "NOERROR".into(),
        1 => "FORMERR".into(),
        2 => "SERVFAIL".into(),
        3 => "NXDOMAIN".into(),
        4 => "NOTIMP".into(),
        5 => "REFUSED".into(),
        16 => "BADVERS".into(),
        n => n.to_string(),
    }
}
