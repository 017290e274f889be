//! The HTTP/1.1 exchange of `http` and `https` checks (RFC 9112): one GET
//! with `Connection: close`, the response read up to [`MAX_RESPONSE`],
//! framed by content-length or chunked coding, judged by status and body;
//! a passing response may also carry the backend's load figure (a header
//! or a top-level JSON field, see `LoadSource`).

use std::net::IpAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{io_text, Passed};
use crate::health::signal::parse_load;
use crate::health::{Check, CheckKind, LoadSource};

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

/// Send the request, read the response, judge status and body, and read
/// the load figure of a passing response when the check asks for one.
pub async fn http_exchange<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    req: &[u8],
    check: &Check,
) -> Result<Passed, String> {
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
    let source = check.load.as_ref().map(|l| &l.source);
    let json_field = match source {
        Some(LoadSource::Json(f)) => Some(f.as_str()),
        _ => None,
    };
    let mut load = match source {
        Some(LoadSource::Header(name)) => Some(match header(&head, name) {
            Some(v) => parse_load(v).map_err(|e| format!("{name} header {e}")),
            None => Err(format!("no {name} header")),
        }),
        _ => None,
    };
    let want = check.expect_body.as_deref();
    if want.is_none() && json_field.is_none() {
        return Ok(Passed {
            what: format!("HTTP {code}"),
            load,
        });
    }
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
        // Without framing, the body is read to the end of the stream, unless
        // the expected string is all that is asked and it is there already.
        let seen = || want.is_some_and(|w| find(&body, w.as_bytes()).is_some());
        if done || (!chunked && json_field.is_none() && seen()) {
            break;
        }
        if read_some(s, &mut body).await? == 0 {
            break;
        }
    }
    let mut body = if chunked { dechunk(&body).0 } else { body };
    if let Some(n) = length.filter(|_| !chunked) {
        body.truncate(n);
    }
    if let Some(field) = json_field {
        load = Some(json_load(&body, field));
    }
    match want {
        None => Ok(Passed {
            what: format!("HTTP {code}"),
            load,
        }),
        Some(w) if find(&body, w.as_bytes()).is_some() => Ok(Passed {
            what: format!("HTTP {code}, body matched"),
            load,
        }),
        Some(w) => Err(format!("HTTP {code}, body does not contain {w:?}")),
    }
}

/// The value of header `name` (case-insensitive) in a response head.
fn header<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines().skip(1).find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The load figure in the top-level number field `field` of a JSON body.
pub fn json_load(body: &[u8], field: &str) -> Result<f64, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?;
    let Some(obj) = v.as_object() else {
        return Err("body is not a JSON object".into());
    };
    match obj.get(field) {
        None => Err(format!("no JSON field {field:?}")),
        Some(serde_json::Value::Number(n)) => parse_load(&n.to_string()),
        Some(other) => {
            let t: String = other.to_string().chars().take(40).collect();
            Err(format!("JSON field {field:?} is not a number: {t}"))
        }
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
