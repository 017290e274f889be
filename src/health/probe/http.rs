//! The HTTP/1.1 exchange of `http` and `https` checks (RFC 9112): one GET
//! with `Connection: close`, the response read up to [`MAX_RESPONSE`],
//! framed by content-length or chunked coding, judged by status and body.

use std::net::IpAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::io_text;
use crate::health::{Check, CheckKind};

/// Most bytes of an HTTP response read (status line, headers and body).
pub const MAX_RESPONSE: usize = 64 * 1024;

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
