//! The connection to etcd: endpoints that answer, TLS and user
//! authentication as `[fleet]` says, the secrets they need (read before
//! the privilege drop and kept), and why a connection or a request failed,
//! in a sentence an operator can act on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;

/// The secret files `[fleet]` names: (its key, the file).
fn secret_files(s: &FleetSettings) -> Vec<(&'static str, &Path)> {
    let mut v = Vec::new();
    if let Some((_, pw)) = &s.user {
        v.push(("password_file", pw.as_path()));
    }
    if let Some(t) = &s.tls {
        if let Some(ca) = &t.ca {
            v.push(("ca", ca.as_path()));
        }
        if let Some((cert, key)) = &t.identity {
            v.push(("cert", cert.as_path()));
            v.push(("key", key.as_path()));
        }
    }
    v
}

/// A secret file as this process last read it, and whether it said that
/// the file can no longer be read.
struct Kept {
    bytes: Vec<u8>,
    warned: bool,
}

/// Secret files read by this process, by path. The daemon reads them as
/// root before it drops privileges ([`read_secrets`]); a file that the
/// service user cannot read later keeps that copy (as `dnssec::keys` keeps
/// key pairs).
static SECRETS: Mutex<BTreeMap<PathBuf, Kept>> = Mutex::new(BTreeMap::new());

/// Read every secret file `[fleet]` names into memory: before the
/// privilege drop, so that a root-only key or password file still serves
/// after it. The first file that cannot be read is the error.
pub fn read_secrets(s: &FleetSettings) -> Result<(), String> {
    for (what, file) in secret_files(s) {
        secret(what, file)?;
    }
    Ok(())
}

/// The secret in `file` (`[fleet]` key `what`): read again when this
/// process can, else the copy read before (saying so once), else an error
/// naming the file.
fn secret(what: &str, file: &Path) -> Result<Vec<u8>, String> {
    let mut kept = SECRETS.lock().unwrap_or_else(|e| e.into_inner());
    match std::fs::read(file) {
        Ok(bytes) => {
            let k = Kept {
                bytes: bytes.clone(),
                warned: false,
            };
            kept.insert(file.to_path_buf(), k);
            Ok(bytes)
        }
        Err(e) => match kept.get_mut(file) {
            Some(k) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                if !k.warned {
                    k.warned = true;
                    tracing::warn!(
                        "fleet: {what} {} cannot be read now ({e}): keeping the copy read at start",
                        file.display()
                    );
                }
                Ok(k.bytes.clone())
            }
            _ => Err(format!("cannot read {what} {}: {e}", file.display())),
        },
    }
}

/// The options of a client of the etcd cluster `s` names, with its secrets.
fn options(s: &FleetSettings) -> Result<ConnectOptions, String> {
    let mut opts = ConnectOptions::new()
        .with_connect_timeout(s.timeout)
        .with_timeout(s.timeout)
        .with_keep_alive(Duration::from_secs(5), s.timeout);
    if let Some((user, file)) = &s.user {
        let pw = secret("password_file", file)?;
        let pw = String::from_utf8_lossy(&pw).trim().to_string();
        opts = opts.with_user(user.clone(), pw);
    }
    if let Some(t) = &s.tls {
        let mut tls = TlsOptions::new();
        if let Some(ca) = &t.ca {
            tls = tls.ca_certificate(etcd_client::Certificate::from_pem(secret("ca", ca)?));
        }
        if let Some((cert, key)) = &t.identity {
            tls = tls.identity(Identity::from_pem(
                secret("cert", cert)?,
                secret("key", key)?,
            ));
        }
        opts = opts.with_tls(tls);
    }
    Ok(opts)
}

/// A client of the etcd cluster `s` names, authenticated as it says, that
/// has read the prefix once (so a refused certificate, password or
/// permission, or a lost quorum, is found here). Errors say why first.
pub async fn connect(s: &FleetSettings) -> Result<Client, String> {
    let opts = options(s)?;
    let live = live_members(s).await?;
    let eps = live.join(",");
    let fail = |e: etcd_client::Error| {
        let raw = format!("etcd {eps}: {}", raw(&e));
        match cause(&raw, s, true) {
            Some(c) => format!("{c} ({raw})"),
            None => raw,
        }
    };
    let mut c = Client::connect(&live, Some(opts)).await.map_err(fail)?;
    let probe = GetOptions::new()
        .with_prefix()
        .with_keys_only()
        .with_limit(1);
    c.get(s.prefix.as_str(), Some(probe)).await.map_err(fail)?;
    Ok(c)
}

/// Members that accept a connection now: a dead one (a killed leader)
/// would otherwise take a share of the requests until the channel
/// notices, each of them waiting out the timeout.
async fn live_members(s: &FleetSettings) -> Result<Vec<String>, String> {
    let mut live = Vec::new();
    let mut why = Vec::new();
    for ep in &s.endpoints {
        let host = ep
            .trim_start_matches("http://")
            .trim_start_matches("https://");
        let tcp = tokio::net::TcpStream::connect(host);
        match tokio::time::timeout(Duration::from_millis(300), tcp).await {
            Ok(Ok(_)) => live.push(ep.clone()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                why.push(format!("{ep}: connection refused"))
            }
            Ok(Err(e)) => why.push(format!("{ep}: {e}")),
            Err(_) => why.push(format!("{ep}: no answer within 300 ms")),
        }
    }
    if live.is_empty() {
        if why.iter().all(|w| w.ends_with("connection refused")) {
            return Err(format!("{REFUSED} at {}", s.endpoints.join(", ")));
        }
        return Err(format!("{UNREACHABLE} ({})", why.join("; ")));
    }
    Ok(live)
}

/// An etcd client error as text: the status message and what caused it,
/// down the `source()` chain (the Display of a transport error is only
/// "transport error").
fn raw(e: &etcd_client::Error) -> String {
    use std::error::Error as _;
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = match e {
        etcd_client::Error::GRpcStatus(st) => {
            parts.push(st.message().to_string());
            st.source()
        }
        etcd_client::Error::TransportError(t) => Some(t),
        other => return other.to_string(),
    };
    while let Some(err) = next {
        let text = err.to_string();
        if !parts.contains(&text) && text != "transport error" && text != "connection error" {
            parts.push(text);
        }
        next = err.source();
    }
    parts.retain(|p| !p.is_empty());
    parts.join(": ")
}

const REFUSED: &str = "etcd cannot be reached: connection refused";
const UNREACHABLE: &str = "etcd has no quorum or cannot be reached";
const AUTH: &str = "etcd authentication failed";
const NO_USER: &str = "etcd wants a user name and password";
const DENIED: &str = "etcd permission denied";
const NEEDS_CERT: &str = "etcd requires a client certificate";
const CERT_REFUSED: &str = "etcd refused this node's client certificate";
const UNKNOWN_CA: &str = "etcd's certificate is from an unknown CA";
const BAD_CERT: &str = "etcd's certificate is not valid here";
const NOT_TLS: &str = "etcd does not speak TLS on this port";
const CLOSED: &str = "etcd closed the connection";
const BAD_KEY: &str = "no private key meridian can use in key";
/// How every explained error starts (so it is not explained twice).
const HEADS: [&str; 13] = [
    REFUSED,
    UNREACHABLE,
    AUTH,
    NO_USER,
    DENIED,
    NEEDS_CERT,
    CERT_REFUSED,
    UNKNOWN_CA,
    BAD_CERT,
    NOT_TLS,
    CLOSED,
    BAD_KEY,
    "cannot read ",
];

/// `raw`, an etcd error's text, with its cause first: "CAUSE: what to
/// do (RAW)". Text that already starts with a cause is kept as it is.
pub(super) fn explain(raw: &str, s: &FleetSettings) -> String {
    if HEADS.iter().any(|h| raw.starts_with(h)) {
        return raw.to_string();
    }
    match cause(raw, s, false) {
        Some(c) => format!("{c} ({raw})"),
        None => raw.to_string(),
    }
}

/// The cause of an etcd error, from its text and the settings: a head of
/// [`HEADS`] and what to check. A connection closed while `connecting` is
/// most likely TLS set up differently on the two sides; later, a member
/// that went away.
fn cause(raw: &str, s: &FleetSettings, connecting: bool) -> Option<String> {
    let t = raw.to_ascii_lowercase();
    let has = |k: &str| t.contains(k);
    let user = s.user.as_ref();
    let identity = s.tls.as_ref().and_then(|t| t.identity.as_ref());
    Some(
        if has("authentication failed") || has("invalid user id or password") {
            match user {
                Some((u, f)) => format!(
                    "{AUTH}: etcd refused user {u:?}; check the password in password_file {}",
                    f.display()
                ),
                None => AUTH.to_string(),
            }
        } else if has("user name is empty") {
            format!("{NO_USER}: set user and password_file in [fleet]")
        } else if has("etcdserver: permission denied") {
            let u = user.map_or("(none)", |(u, _)| u.as_str());
            format!(
            "{DENIED}: user {u:?} may not read and write {}; grant its role readwrite on that prefix",
            s.prefix
        )
        } else if has("unknownissuer") {
            match s.tls.as_ref().and_then(|t| t.ca.as_ref()) {
                Some(ca) => format!(
                    "{UNKNOWN_CA}: it is not signed by the CA in ca = {}",
                    ca.display()
                ),
                None => format!("{UNKNOWN_CA}: set ca in [fleet] to the CA that signed it"),
            }
        } else if has("invalid peer certificate") {
            format!("{BAD_CERT}: check its names (subjectAltName) and dates")
        } else if has("fatal alert") && (has("certificate") || has("unknownca")) {
            match identity {
                None => format!("{NEEDS_CERT}: set cert and key in [fleet]"),
                Some((cert, _)) => format!(
                    "{CERT_REFUSED} {}: is it signed by a CA etcd trusts (--trusted-ca-file)?",
                    cert.display()
                ),
            }
        } else if has("tls handshake eof") {
            format!("{NOT_TLS}: use an http:// endpoint, or turn TLS on in etcd")
        } else if connecting && (has("broken pipe") || has("connection reset") || has("closed")) {
            let https = s.endpoints.iter().any(|e| e.starts_with("https://"));
            match (https, identity) {
            (true, None) => format!(
                "{NEEDS_CERT} (it closed the TLS connection, as it does without one): set cert and key in [fleet]"
            ),
            (false, _) => format!("{CLOSED}: does it want TLS? (https:// endpoints and ca)"),
            (true, Some((cert, _))) => format!(
                "{CLOSED} in TLS: does it trust this node's client certificate {}? (signed by a CA in its --trusted-ca-file)",
                cert.display()
            ),
        }
        } else if has("privatekeyparseerror") || has("private key") {
            let key = identity.map_or(String::new(), |(_, k)| format!(" {}", k.display()));
            format!("{BAD_KEY}{key}: it must be a PEM private key (PKCS#8, RSA or EC)")
        } else if [
            "timeout expired",
            "timed out",
            "deadline",
            "no leader",
            "connect error",
            "connection refused",
            "broken pipe",
            "connection reset",
            "closed",
        ]
        .iter()
        .any(|k| has(k))
        {
            UNREACHABLE.to_string()
        } else {
            return None;
        },
    )
}

/// Why etcd was lost or could not be reached, as `/status` shows it.
pub(super) struct Failure {
    /// The cause alone, one of [`HEADS`] (a change of it is logged).
    cause: String,
    /// The cause and the error.
    pub(super) text: String,
}

impl Fleet {
    /// Following etcd failed with `e`: record why (for `/status`) and log
    /// it once per change of cause, and when a followed etcd is lost.
    pub(super) fn lost(&self, e: &str) {
        let text = explain(e, &self.settings);
        let cause = HEADS
            .iter()
            .find(|h| text.starts_with(**h))
            .map_or_else(|| text.clone(), |h| h.to_string());
        let mut last = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        let changed = last.as_ref().is_none_or(|f| f.cause != cause);
        if self.connected.swap(false, Ordering::Relaxed) {
            tracing::warn!("fleet: lost etcd, keeping the last state: {text}");
        } else if changed {
            tracing::warn!("fleet: cannot follow etcd: {text}");
        } else {
            tracing::debug!("fleet: etcd not reachable: {text}");
        }
        *last = Some(Failure { cause, text });
    }

    /// The API's answer to a write that etcd did not take (`e`): the
    /// cause, and that nothing changed.
    pub fn refusal(&self, e: &str) -> String {
        format!("{}: nothing was changed", explain(e, &self.settings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::fleet::FleetTls;

    fn settings(tls: Option<FleetTls>) -> FleetSettings {
        FleetSettings {
            endpoints: vec!["https://127.0.0.1:2379".into()],
            node: "n".into(),
            prefix: "/m/".into(),
            tls,
            user: Some(("meridian".into(), "/etc/pw".into())),
            timeout: Duration::from_secs(1),
            state_dir: "/tmp".into(),
            local_config: "/tmp/m.toml".into(),
            checkers: 3,
            grace: Duration::from_secs(10),
            lease_secs: 5,
            keep_revisions: 5,
            compact_history: true,
        }
    }

    #[test]
    fn causes_come_first_and_once() {
        let s = settings(None);
        // Texts as etcd-client and tonic print them (seen against etcd 3.4).
        let timeout = "etcd: grpc request error: code: 'The operation was cancelled', message: \"Timeout expired\", source: tonic::transport::Error(Transport, TimeoutExpired(()))";
        let e = explain(timeout, &s);
        assert!(
            e.starts_with("etcd has no quorum or cannot be reached (etcd: grpc"),
            "{e}"
        );
        assert_eq!(explain(&e, &s), e, "explained twice");
        let denied = "etcd: grpc request error: code: 'Permission denied', message: \"etcdserver: permission denied\"";
        let e = explain(denied, &s);
        assert!(
            e.starts_with("etcd permission denied: user \"meridian\" may not read and write /m/"),
            "{e}"
        );
        let bad = "etcd x: etcdserver: authentication failed, invalid user ID or password";
        assert!(explain(bad, &s).contains("check the password in password_file /etc/pw"));
        // A closed connection means a missing client certificate only
        // while connecting over TLS without one.
        let closed = "etcd x: operation was canceled: connection closed";
        assert!(cause(closed, &s, true).unwrap().starts_with(NEEDS_CERT));
        assert_eq!(cause(closed, &s, false).unwrap(), UNREACHABLE);
        let with_cert = settings(Some(FleetTls {
            ca: Some("/ca.pem".into()),
            identity: Some(("/n.pem".into(), "/n.key".into())),
        }));
        let alert = "etcd x: transport error: received fatal alert: BadCertificate";
        assert!(cause(alert, &with_cert, true)
            .unwrap()
            .starts_with(CERT_REFUSED));
        assert!(cause(alert, &s, true).unwrap().starts_with(NEEDS_CERT));
        assert!(explain("etcd watch canceled", &s) == "etcd watch canceled");
    }
}
