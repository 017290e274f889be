//! `meridian ctl`: drive a running server through its HTTP API, as
//! `gdnsdctl` and `knotc` do: `status` (tables, or `--json`), `override`,
//! `weight`, `reload` and `stop`; and `meridian lookup --server` (`GET
//! /lookup`).
//! The API address and the token come from the server's config file
//! (`[server] http_listen`, `[api] tokens`) or from `--api` and
//! `--token-file`. A plain HTTP/1.1 client over one connection: the API
//! has no TLS, so keep it on loopback or a management network.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{api, ApiSettings, Scope, Source, Token};

/// What to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// `GET /status`: a table of members and pools, or with `json` the
    /// document as the server sent it (indented).
    Status {
        /// Print the JSON document instead of the table.
        json: bool,
    },
    /// `GET /lookup?name=NAME&type=TYPE&client=CLIENT`: the running
    /// server's answer for one client, explained (`meridian lookup --server`).
    Lookup {
        /// The name, e.g. geo.example.test.
        name: String,
        /// A or AAAA.
        qtype: String,
        /// The client address or subnet (ADDR or ADDR/LEN).
        client: String,
    },
    /// `POST /override/ADDRESS?state=STATE[&port=PORT]`.
    Override {
        /// The member address (`192.0.2.1`, `2001:db8::1`, `[v6]:port`).
        address: String,
        /// up, down, drain or none.
        state: String,
        /// Only the entries checked on this port.
        port: Option<u16>,
    },
    /// `POST /weight/ADDRESS?weight=N[&port=PORT]`.
    Weight {
        /// The member address (`192.0.2.1`, `2001:db8::1`, `[v6]:port`).
        address: String,
        /// A factor from 0 to 100, or `clear`.
        weight: String,
        /// Only the members checked on this port.
        port: Option<u16>,
    },
    /// `GET /members/POOL`: each member of a pool and where it came from.
    Members {
        /// The pool's name.
        pool: String,
        /// Print the JSON document instead of the table.
        json: bool,
    },
    /// `POST /reload`.
    Reload,
    /// `POST /stop`.
    Stop,
}

/// Where the API is and which token file to use.
#[derive(Clone, Debug, Default)]
pub struct Target {
    /// The server's config file: defaults for the other two.
    pub config: Option<PathBuf>,
    /// The API address, `http://HOST:PORT` or `HOST:PORT`.
    pub api: Option<String>,
    /// A token file (`NAME SCOPE SECRET` lines).
    pub token_file: Option<PathBuf>,
    /// The token to use, by name (default: the first that allows the action).
    pub token: Option<String>,
}

/// Run `action`; Ok(text to print) or Err(message), both ending without a newline.
pub fn run(t: &Target, action: &Action) -> Result<String, String> {
    let (authority, tokens) = resolve(t)?;
    let write = !matches!(
        action,
        Action::Status { .. } | Action::Lookup { .. } | Action::Members { .. }
    );
    let token = pick(&tokens, t.token.as_deref(), write)?;
    let (method, path) = match action {
        Action::Status { .. } => ("GET", "/status".to_string()),
        Action::Lookup {
            name,
            qtype,
            client,
        } => (
            "GET",
            format!(
                "/lookup?name={}&type={}&client={}",
                enc(name),
                enc(qtype),
                enc(client)
            ),
        ),
        Action::Override {
            address,
            state,
            port,
        } => (
            "POST",
            write_path("override", address, "state", state, *port),
        ),
        Action::Weight {
            address,
            weight,
            port,
        } => (
            "POST",
            write_path("weight", address, "weight", weight, *port),
        ),
        Action::Members { pool, .. } => ("GET", format!("/members/{}", enc(pool))),
        Action::Reload => ("POST", "/reload".to_string()),
        Action::Stop => ("POST", "/stop".to_string()),
    };
    let (code, body) = request(&authority, method, &path, token.map(|t| t.secret.as_str()))?;
    let json = serde_json::from_str::<serde_json::Value>(&body);
    let shown = match &json {
        Ok(v) => serde_json::to_string_pretty(v).unwrap_or(body.clone()),
        Err(_) => body.trim_end().to_string(),
    };
    if (200..300).contains(&code) {
        match (action, json) {
            (Action::Status { json: false }, Ok(v)) => Ok(super::status::status_table(&v)),
            (Action::Members { json: false, .. }, Ok(v)) => Ok(members_table(&v)),
            _ => Ok(shown),
        }
    } else {
        let msg = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or(shown);
        Err(format!("meridian ctl: {method} {path}: HTTP {code}: {msg}"))
    }
}

/// `ctl members`: the reply as a table.
fn members_table(v: &serde_json::Value) -> String {
    let mut out = format!(
        "{:<40} {:>5} {:>6} {:<9} {:<8} {:<20} SOURCE\n",
        "ADDRESS", "PORT", "WEIGHT", "HOLD", "HEALTH", "STANDING"
    );
    let s = |x: &serde_json::Value| x.as_str().unwrap_or("-").to_string();
    for m in v["members"].as_array().into_iter().flatten() {
        let port = m["port"].as_u64().map_or("-".into(), |p| p.to_string());
        let source = match m["key"].as_str() {
            Some(k) => format!("etcd {k}"),
            None => "config".into(),
        };
        out.push_str(&format!(
            "{:<40} {:>5} {:>6} {:<9} {:<8} {:<20} {source}\n",
            s(&m["address"]),
            port,
            m["weight"],
            s(&m["hold"]),
            s(&m["health"]),
            s(&m["standing"]),
        ));
    }
    out.trim_end().to_string()
}

/// A path segment or query value, percent-encoded.
fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// `/{route}/{address}?{key}={value}[&port={port}]`, the address and value
/// percent-encoded.
fn write_path(route: &str, address: &str, key: &str, value: &str, port: Option<u16>) -> String {
    let mut p = format!("/{route}/{}?{key}={}", enc(address), enc(value));
    if let Some(port) = port {
        p += &format!("&port={port}");
    }
    p
}

/// The API's authority (`host:port`) and the tokens to choose from.
fn resolve(t: &Target) -> Result<(String, Vec<Token>), String> {
    let mut authority = t.api.as_deref().map(strip_scheme);
    let mut tokens = Vec::new();
    if let Some(path) = &t.token_file {
        tokens = read_tokens(path)?;
    }
    if let Some(cfg) = &t.config {
        let src = Source::read(cfg).map_err(|e| e.to_string())?;
        // Only the two tables ctl needs: a config broken elsewhere (the
        // one a failed reload is about) must not stop ctl.
        let file: CtlView = toml::from_str(&src.text).map_err(|e| {
            let line = e
                .span()
                .map(|s| crate::error::line_of(&src.text, s.start))
                .unwrap_or(0);
            crate::error::LocatedError::new(cfg, line, e.message().trim()).to_string()
        })?;
        if authority.is_none() {
            authority = file.server.http_listen;
            if authority
                .as_deref()
                .is_some_and(|h| h.trim().eq_ignore_ascii_case("none"))
            {
                return Err(format!(
                    "meridian ctl: {} turns the API off (http_listen = \"none\"): give --api HOST:PORT",
                    cfg.display()
                ));
            }
        }
        if t.token_file.is_none() {
            tokens = ApiSettings::from_cfg(&src, &file.api)
                .map_err(|e| e.to_string())?
                .tokens;
        }
    }
    let authority = authority.ok_or(
        "meridian ctl: where is the API? give --api HOST:PORT, or --config with [server] http_listen",
    )?;
    Ok((authority, tokens))
}

/// What `ctl` reads of the server's config: `[server] http_listen` and `[api]`.
#[derive(serde::Deserialize)]
struct CtlView {
    #[serde(default)]
    server: CtlServer,
    #[serde(default)]
    api: api::ApiCfg,
}

#[derive(Default, serde::Deserialize)]
struct CtlServer {
    #[serde(default)]
    http_listen: Option<String>,
}

fn strip_scheme(s: &str) -> String {
    let s = s.strip_prefix("http://").unwrap_or(s);
    s.trim_end_matches('/').to_string()
}

fn read_tokens(path: &Path) -> Result<Vec<Token>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "meridian ctl: cannot read token file {}: {e}",
            path.display()
        )
    })?;
    api::parse_tokens(path, &text).map_err(|e| e.to_string())
}

/// The token named `name`, or the first that allows the action (a read
/// token first for reads).
fn pick<'a>(
    tokens: &'a [Token],
    name: Option<&str>,
    write: bool,
) -> Result<Option<&'a Token>, String> {
    if let Some(n) = name {
        return tokens.iter().find(|t| t.name == n).map(Some).ok_or(format!(
            "meridian ctl: no token named {n:?} in the token file"
        ));
    }
    let want = if write { Scope::Write } else { Scope::Read };
    let t = tokens
        .iter()
        .find(|t| t.scope == want)
        .or_else(|| tokens.iter().find(|t| t.scope == Scope::Write));
    if write && t.is_none() {
        return Err(
            "meridian ctl: no write token: give --token-file, or --config with [api] tokens holding a write token".into(),
        );
    }
    Ok(t)
}

/// One request over one connection; (status, body).
fn request(
    authority: &str,
    method: &str,
    path: &str,
    secret: Option<&str>,
) -> Result<(u16, String), String> {
    let err = |e: std::io::Error| format!("meridian ctl: {authority}: {e}");
    let addr = authority
        .to_socket_addrs()
        .map_err(err)?
        .next()
        .ok_or(format!("meridian ctl: {authority}: no address"))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(err)?;
    // A reload may take a while on a large config.
    s.set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(err)?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(secret) = secret {
        req += &format!("Authorization: Bearer {secret}\r\n");
    }
    req += "Content-Length: 0\r\nConnection: close\r\n\r\n";
    s.write_all(req.as_bytes()).map_err(err)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).map_err(err)?;
    let out = String::from_utf8_lossy(&out);
    let (head, body) = out
        .split_once("\r\n\r\n")
        .ok_or(format!("meridian ctl: {authority}: not an HTTP answer"))?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or(format!("meridian ctl: {authority}: not an HTTP answer"))?;
    Ok((code, body.to_string()))
}
