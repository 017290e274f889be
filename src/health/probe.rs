//! One probe of one entry: a TCP connect, an HTTP GET or an HTTPS GET.
//! A probe returns `Ok(what it saw)` or `Err(why it failed)`; the caller
//! bounds it with the check's timeout.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::{Check, CheckKind, CheckSpec};

/// Most bytes of an HTTP response read (status line, headers and body).
pub const MAX_RESPONSE: usize = 64 * 1024;

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

fn io_text(e: &std::io::Error) -> String {
    // rustls errors come wrapped in io::Error; show the inner one.
    match e.get_ref() {
        Some(inner) => inner.to_string(),
        None => e.to_string(),
    }
}

/// The request: GET path with Host, and `Connection: close`.
pub fn request(addr: IpAddr, port: u16, check: &Check) -> Vec<u8> {
    let default_port = if check.kind == CheckKind::Https {
        443
    } else {
        80
    };
    let host = match check.host.as_deref() {
        Some(h) => match h.parse::<std::net::Ipv6Addr>() {
            Ok(a) => format!("[{a}]"),
            Err(_) => h.to_string(),
        },
        None => match addr {
            IpAddr::V6(a) => format!("[{a}]"),
            IpAddr::V4(a) => a.to_string(),
        },
    };
    let host = if port == default_port {
        host
    } else {
        format!("{host}:{port}")
    };
    format!(
        "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: meridian-health/{}\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        check.path,
        env!("CARGO_PKG_VERSION")
    )
    .into_bytes()
}

fn server_name(addr: IpAddr, check: &Check) -> Result<ServerName<'static>, String> {
    let name = check.host.clone().unwrap_or_else(|| addr.to_string());
    ServerName::try_from(name.clone()).map_err(|_| format!("tls: bad server name {name:?}"))
}

/// Read into `buf`; 0 at the end of the stream. A TLS peer that closes
/// without close_notify is an end of stream too (the framing decides).
async fn read_some<S: AsyncRead + Unpin>(s: &mut S, buf: &mut Vec<u8>) -> Result<usize, String> {
    let mut chunk = [0u8; 4096];
    let room = (MAX_RESPONSE - buf.len().min(MAX_RESPONSE)).min(chunk.len());
    if room == 0 {
        return Ok(0);
    }
    match s.read(&mut chunk[..room]).await {
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(n)
        }
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(0),
        Err(e) => Err(format!("read: {}", io_text(&e))),
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    if n.is_empty() {
        return Some(0);
    }
    h.windows(n.len()).position(|w| w == n)
}

/// Send the request, read the response, judge status and body.
pub async fn http_exchange<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    req: &[u8],
    check: &Check,
) -> Result<String, String> {
    s.write_all(req)
        .await
        .map_err(|e| format!("send: {}", io_text(&e)))?;
    s.flush()
        .await
        .map_err(|e| format!("send: {}", io_text(&e)))?;
    let mut buf = Vec::with_capacity(4096);
    let head_end = loop {
        if let Some(p) = find(&buf, b"\r\n\r\n") {
            break p + 4;
        }
        if buf.len() >= MAX_RESPONSE {
            return Err("response headers too large".into());
        }
        if read_some(s, &mut buf).await? == 0 {
            if buf.is_empty() {
                return Err("connection closed without a response".into());
            }
            break buf.len();
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let code = parse_status(&head).ok_or_else(|| {
        let first = head
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(60)
            .collect::<String>();
        format!("not an HTTP response: {first:?}")
    })?;
    if !check
        .expect_status
        .iter()
        .any(|&(a, b)| (a..=b).contains(&code))
    {
        return Err(format!(
            "HTTP {code}, expected {}",
            status_text(&check.expect_status)
        ));
    }
    let Some(want) = &check.expect_body else {
        return Ok(format!("HTTP {code}"));
    };
    let (chunked, length) = framing(&head);
    let mut body = buf[head_end..].to_vec();
    loop {
        let done = if chunked {
            dechunk(&body).1
        } else if let Some(n) = length {
            body.len() >= n
        } else {
            false
        };
        if done || (!chunked && find(&body, want.as_bytes()).is_some()) {
            break;
        }
        if read_some(s, &mut body).await? == 0 {
            break;
        }
    }
    let body = if chunked { dechunk(&body).0 } else { body };
    if find(&body, want.as_bytes()).is_some() {
        Ok(format!("HTTP {code}, body matched"))
    } else {
        Err(format!("HTTP {code}, body does not contain {want:?}"))
    }
}

/// The status code of `HTTP/1.x NNN ...`.
pub fn parse_status(head: &str) -> Option<u16> {
    let line = head.lines().next()?;
    let mut it = line.split_whitespace();
    if !it.next()?.starts_with("HTTP/") {
        return None;
    }
    let code = it.next()?;
    if code.len() != 3 {
        return None;
    }
    code.parse().ok().filter(|c| (100..=599).contains(c))
}

fn status_text(r: &[(u16, u16)]) -> String {
    r.iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// (chunked, content-length) from the response headers.
fn framing(head: &str) -> (bool, Option<usize>) {
    let mut chunked = false;
    let mut length = None;
    for line in head.lines().skip(1) {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let k = k.trim().to_ascii_lowercase();
        let v = v.trim();
        if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
            chunked = true;
        } else if k == "content-length" {
            length = v.parse().ok();
        }
    }
    (chunked, length)
}

/// Decode a chunked body as far as it goes: (data, complete).
pub fn dechunk(mut b: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    loop {
        let Some(eol) = find(b, b"\r\n") else {
            return (out, false);
        };
        let line = String::from_utf8_lossy(&b[..eol]);
        let size = line.split(';').next().unwrap_or("").trim();
        let Ok(n) = usize::from_str_radix(size, 16) else {
            return (out, true);
        };
        b = &b[eol + 2..];
        if n == 0 {
            return (out, true);
        }
        if b.len() < n {
            out.extend_from_slice(b);
            return (out, false);
        }
        out.extend_from_slice(&b[..n]);
        b = &b[n..];
        if b.len() < 2 {
            return (out, false);
        }
        b = &b[2..];
    }
}

/// The rustls client configs (ring provider), built once: one verifying
/// against the Mozilla roots (webpki-roots), one that accepts any certificate.
pub fn tls_config(verify: bool) -> Arc<rustls::ClientConfig> {
    static VERIFY: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    static INSECURE: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    let cell = if verify { &VERIFY } else { &INSECURE };
    cell.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions");
        let mut cfg = if verify {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            builder.with_root_certificates(roots).with_no_client_auth()
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
                .with_no_client_auth()
        };
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(cfg)
    })
    .clone()
}

/// `tls_verify = false`: any certificate, any name. The handshake signature
/// is still checked (the peer holds the key of the certificate it sent).
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
