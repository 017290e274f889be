//! The connection to etcd: endpoints that answer, TLS and user
//! authentication as `[fleet]` says.

use super::*;

/// A client of the etcd cluster `s` names, authenticated as it says.
pub async fn connect(s: &FleetSettings) -> Result<Client, String> {
    let mut opts = ConnectOptions::new()
        .with_connect_timeout(s.timeout)
        .with_timeout(s.timeout)
        .with_keep_alive(Duration::from_secs(5), s.timeout);
    if let Some((user, file)) = &s.user {
        let pw = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        opts = opts.with_user(user.clone(), pw.trim().to_string());
    }
    if let Some(t) = &s.tls {
        let mut tls = TlsOptions::new();
        if let Some(ca) = &t.ca {
            let pem = std::fs::read(ca).map_err(|e| format!("{}: {e}", ca.display()))?;
            tls = tls.ca_certificate(etcd_client::Certificate::from_pem(pem));
        }
        if let Some((cert, key)) = &t.identity {
            let c = std::fs::read(cert).map_err(|e| format!("{}: {e}", cert.display()))?;
            let k = std::fs::read(key).map_err(|e| format!("{}: {e}", key.display()))?;
            tls = tls.identity(Identity::from_pem(c, k));
        }
        opts = opts.with_tls(tls);
    }
    // Members that accept a connection now: a dead one (a killed leader)
    // would otherwise take a share of the requests until the channel
    // notices, each of them waiting out the timeout.
    let mut live = Vec::new();
    for ep in &s.endpoints {
        let host = ep
            .trim_start_matches("http://")
            .trim_start_matches("https://");
        let up = tokio::time::timeout(
            Duration::from_millis(300),
            tokio::net::TcpStream::connect(host),
        )
        .await
        .is_ok_and(|r| r.is_ok());
        if up {
            live.push(ep.clone());
        }
    }
    if live.is_empty() {
        return Err(format!("etcd {}: no member answers", s.endpoints.join(",")));
    }
    Client::connect(&live, Some(opts))
        .await
        .map_err(|e| format!("etcd {}: {e}", live.join(",")))
}
