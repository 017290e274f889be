//! One probe of one entry: a TCP connect, an HTTP GET or an HTTPS GET.
//! A probe returns `Ok(what it saw)` or `Err(why it failed)`; the caller
//! bounds it with the check's timeout.

pub mod http;
pub mod tls;

use std::net::SocketAddr;

use tokio::net::TcpStream;

use super::{CheckKind, CheckSpec};
pub use http::{dechunk, http_exchange, parse_status, request, MAX_RESPONSE};
use tls::{server_name, tls_config};

/// Run one probe for `spec` (which has a check).
pub async fn probe(spec: &CheckSpec) -> Result<String, String> {
    let Some(check) = &spec.check else {
        return Ok("no check".into());
    };
    let Some(port) = spec.effective_port() else {
        return Err("no port to check".into());
    };
    let sa = SocketAddr::new(spec.addr, port);
    let tcp = TcpStream::connect(sa)
        .await
        .map_err(|e| format!("connect: {}", io_text(&e)))?;
    match check.kind {
        CheckKind::None => Ok("no check".into()),
        CheckKind::Tcp => Ok("connected".into()),
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
