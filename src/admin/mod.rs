//! The HTTP API server and its routes: `GET /metrics` (`prometheus`),
//! `GET /status` (`status`), `GET /lookup` (one answer explained on the
//! live engine, as `meridian lookup` does offline), the operator overrides (`overrides`), the
//! runtime weights (`weights`), and
//! `POST /reload` and `POST /stop` (handed to the daemon as [`Command`]s).
//! HTTP/1.1 by hyper, keep-alive allowed, at most [`MAX_CONNECTIONS`] at
//! once.
//!
//! Who may do what (`auth`): every request must name this API in `Host`
//! (its listen address, `localhost` or an `[api] host_names` entry), so a
//! web page cannot reach it through a DNS name of its own; writes carry no
//! `Origin` (browsers send one on cross-site requests) and need a bearer
//! token of write scope from the `[api] tokens` file; without that file,
//! writes are off. Every write is logged at info with its token's name.
//!
//! The API runs on the daemon's control runtime, never on the one serving
//! DNS over TCP, and what takes CPU (rendering `/metrics` and `/status`,
//! recomputing decisions after a write) runs on a blocking thread, so the
//! runtime keeps its health probes and fleet link on time; renders go one
//! at a time, so scrapers cannot take every core.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Semaphore;

mod auth;
pub mod members;
mod overrides;
mod prometheus;
mod status;
mod weights;

use crate::engine::RuntimeWeights;
use crate::health::Overrides;
use crate::transport::ServerState;

/// Connections served at once; one more is closed as soon as it is accepted,
/// so idle or slow clients cannot take every file descriptor.
pub const MAX_CONNECTIONS: usize = 64;
/// Time a client has to send a request's headers, the first one or the next
/// on a kept-alive connection; an idle connection is closed after it.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a connection lives (then it closes after the request in
/// flight), so a client dripping a body cannot hold a slot for ever.
const MAX_CONNECTION_AGE: Duration = Duration::from_secs(300);
/// Pause after a failed accept (EMFILE and the like), instead of spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What the HTTP API reads and changes: the server's state and the
/// operator overrides (owned by the daemon).
pub struct Admin {
    /// The engine, counters and shutdown flags.
    pub server: Arc<ServerState>,
    /// The operator overrides.
    pub overrides: Arc<Overrides>,
    /// The runtime weights.
    pub weights: Arc<RuntimeWeights>,
    /// Where `POST /reload` and `POST /stop` go: the daemon's loop.
    pub commands: tokio::sync::mpsc::Sender<Command>,
    /// In fleet mode, where overrides and weights are written (etcd).
    #[cfg(feature = "fleet")]
    pub fleet: Option<Arc<crate::fleet::Fleet>>,
}

/// A request the daemon carries out for the API.
pub enum Command {
    /// Reload the config; the daemon answers with the outcome.
    Reload(tokio::sync::oneshot::Sender<Result<String, String>>),
    /// Shut down (the daemon acknowledges, then stops).
    Stop(tokio::sync::oneshot::Sender<()>),
}

/// One response, its body in full.
type Reply = Response<Full<Bytes>>;

/// The API as one server sees it: the daemon's part, the metrics registry,
/// and the gate renders pass one at a time.
struct Api {
    admin: Arc<Admin>,
    metrics: prometheus::Exposition,
    renders: Arc<Semaphore>,
}

/// Serve the HTTP API on `listener` until the process ends.
pub async fn serve(shared: Arc<Admin>, listener: tokio::net::TcpListener) {
    let Ok(local) = listener.local_addr() else {
        tracing::error!("http: the listener has no address");
        return;
    };
    auth::warn_at_start(local, &shared.server.engine.load().api);
    let api = Arc::new(Api {
        metrics: prometheus::Exposition::new(shared.server.clone()),
        admin: shared,
        renders: Arc::new(Semaphore::new(1)),
    });
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(READ_TIMEOUT)
        // Requests are a line and a few headers; hyper's floor is 8 KiB.
        .max_buf_size(16 * 1024);
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!("http: accept: {e}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let api = api.clone();
        let service = service_fn(move |req: Request<Incoming>| {
            let api = api.clone();
            async move { Ok::<_, Infallible>(handle(api, local, req).await) }
        });
        let conn = http.serve_connection(TokioIo::new(stream), service);
        tokio::spawn(async move {
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = tokio::time::sleep(MAX_CONNECTION_AGE) => {
                    // Finish the request in flight, if any, then close.
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(READ_TIMEOUT, conn).await;
                }
            }
            drop(slot);
        });
    }
}

/// What a request asks for, before it is allowed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
    /// 404 or 405: answered without looking at tokens.
    None,
}

fn access(method: &Method, path: &str) -> Access {
    let write = matches!(*method, Method::POST | Method::PUT | Method::DELETE);
    match path {
        "/metrics" | "/status" | "/lookup" if method == Method::GET => Access::Read,
        p if p.starts_with("/members/") && method == Method::GET => Access::Read,
        "/reload" | "/stop" if method == Method::POST => Access::Write,
        p if (p.starts_with("/override/") || p.starts_with("/weight/")) && write => Access::Write,
        _ => Access::None,
    }
}

async fn handle(api: Arc<Api>, local: std::net::SocketAddr, req: Request<Incoming>) -> Reply {
    let engine = api.admin.server.engine.load_full();
    let settings = &engine.api;
    if let Err(why) = auth::host_ok(&req, local, settings) {
        return forbidden(why);
    }
    let kind = access(req.method(), req.uri().path());
    let who = match kind {
        Access::None => None,
        Access::Read => match auth::reader(&req, settings) {
            Ok(t) => t,
            Err(why) => return forbidden(why),
        },
        Access::Write => match auth::writer(&req, settings) {
            Ok(t) => Some(t),
            Err(why) => {
                let r = forbidden(why);
                audit(&req, auth::sent(&req, settings), &r);
                return r;
            }
        },
    };
    let r = route(api, &req, who).await;
    if kind == Access::Write {
        audit(&req, who, &r);
    }
    r
}

/// The audit line of a write: who (the token's name), what, and the result.
fn audit(req: &Request<Incoming>, token: Option<&crate::config::Token>, r: &Reply) {
    let uri = req.uri();
    tracing::info!(
        "api write: token {} {} {} -> {}",
        token.map_or("(none)", |t| t.name.as_str()),
        req.method(),
        uri.path_and_query().map_or(uri.path(), |p| p.as_str()),
        r.status().as_u16()
    );
}

/// An error reply: `{"error": msg}`.
fn error(status: StatusCode, msg: String) -> Reply {
    json(status, &serde_json::json!({ "error": msg }))
}

fn forbidden(why: String) -> Reply {
    error(StatusCode::FORBIDDEN, why)
}

/// Fleet mode: a write that `covered` accepts goes to etcd through `put`
/// (then applies here) and replies `done(covered)`; 404 for a write that
/// covers nothing; 503 and no change if etcd does not take it, with a
/// sentence that names the cause (`Fleet::refusal`).
#[cfg(feature = "fleet")]
async fn fleet_write(
    fleet: &crate::fleet::Fleet,
    covered: Result<usize, String>,
    put: impl std::future::Future<Output = Result<(), String>>,
    done: impl FnOnce(usize) -> Reply,
) -> Reply {
    let n = match covered {
        Ok(n) => n,
        Err(e) => return error(StatusCode::NOT_FOUND, e),
    };
    match put.await {
        Ok(()) => done(n),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, fleet.refusal(&e)),
    }
}

/// Run `f` on a blocking thread: a write recomputes the decisions of every
/// pool it touches, which takes milliseconds for a large config.
async fn blocking(f: impl FnOnce() -> Reply + Send + 'static) -> Reply {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// Render a large body on a blocking thread, one render at a time: a
/// `/metrics` of 20,000 pools takes a core for a quarter of a second. The
/// render keeps its turn until it ends, even if its client goes away.
async fn render(api: &Arc<Api>, f: impl FnOnce(&Api) -> Reply + Send + 'static) -> Reply {
    let Ok(turn) = api.renders.clone().acquire_owned().await else {
        return unavailable();
    };
    let api = api.clone();
    blocking(move || {
        let r = f(&api);
        drop(turn);
        r
    })
    .await
}

async fn route(
    api: Arc<Api>,
    req: &Request<Incoming>,
    who: Option<&crate::config::Token>,
) -> Reply {
    let shared = &*api.admin;
    let path = req.uri().path();
    let query = req.uri().query().unwrap_or("");
    let method = req.method();
    // Fleet mode: overrides and weights are written to etcd for every node.
    #[cfg(feature = "fleet")]
    if let Some(f) = &shared.fleet {
        let by = who.map_or("(none)", |t| t.name.as_str());
        if let Some(target) = path.strip_prefix("/override/") {
            return overrides::route_fleet(shared, f, method, target, query, by).await;
        }
        if let Some(target) = path.strip_prefix("/weight/") {
            return weights::route_fleet(shared, f, method, target, query, by).await;
        }
    }
    #[cfg(not(feature = "fleet"))]
    let _ = who;
    match path {
        "/reload" if method == Method::POST => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            if shared.commands.send(Command::Reload(tx)).await.is_err() {
                return unavailable();
            }
            match rx.await {
                Ok(Ok(msg)) => json(StatusCode::OK, &serde_json::json!({ "reloaded": msg })),
                Ok(Err(e)) => json(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &serde_json::json!({ "error": e }),
                ),
                Err(_) => unavailable(),
            }
        }
        "/stop" if method == Method::POST => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            if shared.commands.send(Command::Stop(tx)).await.is_err() || rx.await.is_err() {
                return unavailable();
            }
            json(StatusCode::OK, &serde_json::json!({ "stopping": true }))
        }
        "/reload" | "/stop" => method_not_allowed("POST"),
        "/metrics" if method == Method::GET => {
            render(&api, |api| {
                let shared = &api.admin;
                shared.weights.catch_up(&shared.server.engine.load());
                reply(
                    StatusCode::OK,
                    prometheus::CONTENT_TYPE,
                    api.metrics.render(),
                )
            })
            .await
        }
        "/status" if method == Method::GET => render(&api, |api| status(&api.admin)).await,
        "/lookup" if method == Method::GET => {
            let (admin, query) = (api.admin.clone(), query.to_string());
            blocking(move || {
                admin.weights.catch_up(&admin.server.engine.load());
                lookup(&admin.server.engine.load(), &query)
            })
            .await
        }
        "/metrics" | "/status" | "/lookup" => method_not_allowed("GET"),
        p if p.starts_with("/members/") => {
            if method != Method::GET {
                return method_not_allowed("GET");
            }
            let raw = p.trim_start_matches("/members/");
            let pool = percent_encoding::percent_decode_str(raw)
                .decode_utf8_lossy()
                .into_owned();
            let admin = api.admin.clone();
            blocking(move || members::members(&admin, &pool)).await
        }
        p if p.starts_with("/override/") || p.starts_with("/weight/") => {
            let (method, path, query) = (method.clone(), p.to_string(), query.to_string());
            let admin = api.admin.clone();
            blocking(move || match path.strip_prefix("/override/") {
                Some(target) => overrides::route(&admin, &method, target, &query),
                None => {
                    let target = path.strip_prefix("/weight/").unwrap_or_default();
                    weights::route(&admin, &method, target, &query)
                }
            })
            .await
        }
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    }
}

/// The `/status` document.
fn status(shared: &Admin) -> Reply {
    shared.weights.catch_up(&shared.server.engine.load());
    // The overrides before any entry lock (lock order: runner, entry).
    let ovr = shared.overrides.snapshot();
    let wts = shared.weights.snapshot();
    #[cfg(feature = "fleet")]
    let fleet = shared.fleet.as_ref().map(|f| f.status());
    #[cfg(not(feature = "fleet"))]
    let fleet = None;
    let body = status::status_json(&shared.server.engine.load(), &ovr, &wts, fleet);
    reply(StatusCode::OK, "application/json", body)
}

/// `GET /lookup?name=NAME&client=ADDR[/LEN][&type=A|AAAA]`: what
/// `meridian lookup` prints, from the engine serving now (live health,
/// overrides and runtime weights); 400 with the reason when it cannot say.
fn lookup(e: &crate::engine::Engine, query: &str) -> Reply {
    let (mut name, mut client, mut qtype) = (None, None, "A".to_string());
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match &*k {
            "name" => name = Some(v.into_owned()),
            "client" => client = Some(v.into_owned()),
            "type" => qtype = v.into_owned(),
            other => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("unknown parameter {other:?}"),
                )
            }
        }
    }
    let (Some(name), Some(client)) = (name, client) else {
        return error(
            StatusCode::BAD_REQUEST,
            "give name=NAME and client=ADDR[/LEN] (and type=A or AAAA)".into(),
        );
    };
    let view = format!(
        "view:     the running server (engine generation {}): live health, overrides and runtime weights",
        e.generation
    );
    match crate::cli::lookup::explain(e, &name, &qtype, &client, "this server", &view) {
        Ok(text) => reply(StatusCode::OK, "text/plain; charset=utf-8", text),
        Err(msg) => error(StatusCode::BAD_REQUEST, msg),
    }
}

fn unavailable() -> Reply {
    json(
        StatusCode::SERVICE_UNAVAILABLE,
        &serde_json::json!({ "error": "the server is shutting down" }),
    )
}

fn reply(status: StatusCode, ctype: &'static str, body: String) -> Reply {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    r
}

/// A JSON body (one line).
fn json(status: StatusCode, v: &impl serde::Serialize) -> Reply {
    let mut body = serde_json::to_string(v).unwrap_or_default();
    body.push('\n');
    reply(status, "application/json", body)
}

fn method_not_allowed(allow: &'static str) -> Reply {
    let mut r = reply(
        StatusCode::METHOD_NOT_ALLOWED,
        "text/plain",
        format!("use {allow}\n"),
    );
    r.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    r
}
