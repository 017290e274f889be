//! One probe of one entry: a TCP connect, an HTTP GET or an HTTPS GET.
//! A probe returns `Ok(what it saw)` (with a load figure when the check
//! reads one) or `Err(why it failed)`; the caller bounds it with the
//! check's timeout.

pub mod http;
pub mod tls;

use std::net::SocketAddr;

use tokio::net::TcpStream;

use super::{CheckKind, CheckSpec};
pub use http::{dechunk, http_exchange, json_load, parse_status, request, MAX_RESPONSE};
use tls::{server_name, tls_config};

/// What a passing probe saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Passed {
    /// For `/status` and the logs: "HTTP 200", "connected".
    pub what: String,
    /// The load figure (clamped into 0..1) when the check reads one, or
    /// why it could not be read (the probe passes all the same).
    pub load: Option<Result<f64, String>>,
}

impl Passed {
    fn plain(what: &str) -> Passed {
        Passed {
            what: what.into(),
            load: None,
        }
    }
}

/// Run one probe for `spec` (which has a check).
pub async fn probe(spec: &CheckSpec) -> Result<Passed, String> {
    let Some(check) = &spec.check else {
        return Ok(Passed::plain("no check"));
    };
    let Some(port) = spec.effective_port() else {
        return Err("no port to check".into());
    };
    let sa = SocketAddr::new(spec.addr, port);
    let tcp = TcpStream::connect(sa)
        .await
        .map_err(|e| format!("connect: {}", io_text(&e)))?;
    match check.kind {
        CheckKind::None => Ok(Passed::plain("no check")),
        CheckKind::Tcp => Ok(Passed::plain("connected")),
        CheckKind::Http => {
            let _ = tcp.set_nodelay(true);
            let mut tcp = tcp;
            http_exchange(&mut tcp, &request(spec.addr, port, check), check).await
        }
        CheckKind::Https => {
            let _ = tcp.set_nodelay(true);
            let name = server_name(spec.addr, check)?;
            let connector = tokio_rustls::TlsConnector::from(tls_config(check.tls_verify));
            let mut tls = connector
                .connect(name, tcp)
                .await
                .map_err(|e| format!("tls: {}", io_text(&e)))?;
            // Dropped without close_notify: the request said Connection: close.
            http_exchange(&mut tls, &request(spec.addr, port, check), check).await
        }
    }
}

pub(crate) fn io_text(e: &std::io::Error) -> String {
    // rustls errors come wrapped in io::Error; show the inner one.
    match e.get_ref() {
        Some(inner) => inner.to_string(),
        None => e.to_string(),
    }
}
