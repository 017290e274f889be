//! Who may use the API: the `Host` check (against DNS rebinding), the
//! `Origin` refusal on writes (against cross-site requests) and bearer
//! tokens from the `[api] tokens` file (see `config::api`).

use std::net::{IpAddr, SocketAddr};

use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, HOST, ORIGIN};
use hyper::Request;

use crate::config::{ApiSettings, Scope, Token};

/// The host part of a `Host` header value (no port, no brackets), lower case.
fn host_part(h: &str) -> String {
    let h = h.trim();
    let host = if let Some(rest) = h.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else if h.matches(':').count() == 1 {
        h.split(':').next().unwrap_or("")
    } else {
        h
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether `Host` names this API: its listen address (any address when it
/// listens on all of them), `localhost`, or an `[api] host_names` entry.
pub(super) fn host_ok(
    req: &Request<Incoming>,
    local: SocketAddr,
    api: &ApiSettings,
) -> Result<(), String> {
    let Some(raw) = req.headers().get(HOST).and_then(|v| v.to_str().ok()) else {
        return Err("a Host header is required".into());
    };
    let host = host_part(raw);
    let ok = host == "localhost"
        || api.host_names.contains(&host)
        || host
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip == local.ip() || local.ip().is_unspecified());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "Host {raw:?} is not this API's address: use {local}, localhost, or add the name to [api] host_names"
        ))
    }
}

/// The bearer token sent, if any.
fn bearer(req: &Request<Incoming>) -> Option<&str> {
    let v = req.headers().get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, secret) = v.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(secret.trim())
}

/// The valid token the request carries, if any, whether or not it is
/// allowed what the request asks: the audit line names it even when the
/// write is refused for another reason (an `Origin`).
pub(super) fn sent<'a>(req: &Request<Incoming>, api: &'a ApiSettings) -> Option<&'a Token> {
    bearer(req).and_then(|s| api.token(s))
}

/// A read: open, unless `read_needs_token`; then any valid token.
pub(super) fn reader<'a>(
    req: &Request<Incoming>,
    api: &'a ApiSettings,
) -> Result<Option<&'a Token>, String> {
    let token = sent(req, api);
    if api.read_needs_token && token.is_none() {
        return Err("this API needs a token for reads too (Authorization: Bearer SECRET)".into());
    }
    Ok(token)
}

/// A write: no `Origin`, and a token of write scope.
pub(super) fn writer<'a>(
    req: &Request<Incoming>,
    api: &'a ApiSettings,
) -> Result<&'a Token, String> {
    if req.headers().contains_key(ORIGIN) {
        return Err("writes from a web page (with an Origin header) are refused".into());
    }
    if api.token_file.is_none() {
        return Err(
            "writes are off: set [api] tokens = \"PATH\" to a token file (lines of NAME write SECRET) and send Authorization: Bearer SECRET".into(),
        );
    }
    let Some(secret) = bearer(req) else {
        return Err("a write needs a token: Authorization: Bearer SECRET".into());
    };
    match api.token(secret) {
        None => Err("unknown token".into()),
        Some(t) if t.scope != Scope::Write => Err(format!(
            "token {} has read scope; writes need write scope",
            t.name
        )),
        Some(t) => Ok(t),
    }
}

/// Say at start what an operator must know about the API's exposure.
pub(super) fn warn_at_start(local: SocketAddr, api: &ApiSettings) {
    for w in start_warnings(local, api) {
        tracing::warn!("{w}");
        eprintln!("meridian: warning: {w}");
    }
}

/// The warnings of [`warn_at_start`]: the token file's, then the exposure's.
fn start_warnings(local: SocketAddr, api: &ApiSettings) -> Vec<String> {
    let mut warnings = api.warnings.clone();
    if !local.ip().is_loopback() {
        if api.token_file.is_none() {
            warnings.push(format!(
                "the HTTP API on {local} is reachable from the network and has no token file: anyone who reaches it reads /metrics and /status (writes are off); bind it to loopback, or set [api] tokens and read_needs_token"
            ));
        } else {
            warnings.push(format!(
                "the HTTP API on {local} is reachable from the network without TLS: tokens travel in clear; keep it on a management network or behind a TLS proxy"
            ));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::{host_part, start_warnings};
    use crate::config::ApiSettings;

    #[test]
    fn exposure_warnings() {
        let open = ApiSettings::default();
        let tokens = ApiSettings {
            token_file: Some("t".into()),
            ..ApiSettings::default()
        };
        let at = |s: &str| s.parse().unwrap();
        assert!(start_warnings(at("127.0.0.1:9153"), &open).is_empty());
        assert!(start_warnings(at("[::1]:9153"), &tokens).is_empty());
        let w = start_warnings(at("0.0.0.0:9153"), &open);
        assert!(w.len() == 1 && w[0].contains("no token file"), "{w:?}");
        let w = start_warnings(at("192.0.2.1:9153"), &tokens);
        assert!(w.len() == 1 && w[0].contains("in clear"), "{w:?}");
    }

    #[test]
    fn hosts() {
        assert_eq!(host_part("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_part("[::1]:8080"), "::1");
        assert_eq!(host_part("LocalHost"), "localhost");
        assert_eq!(host_part("::1"), "::1");
        assert_eq!(host_part("evil.example.:80"), "evil.example");
    }
}
