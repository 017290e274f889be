//! DNS transport: one question to one server.
//!
//! UDP first, from a fresh socket bound to an OS-chosen (random) source port for every try, with a
//! fresh random 16-bit ID. A reply is accepted only when it is a response carrying the same ID and
//! the same question (name compared case-insensitively, type, class); anything else is ignored and
//! the socket keeps listening until the try's timeout. Each question gets `tries` tries. When a UDP
//! reply has TC set, the question is asked again over TCP (RFC 7766).

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use hickory_proto::op::{Edns, Message, MessageType, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsOption};
use hickory_proto::rr::{Name, RecordType};

/// EDNS UDP payload size we advertise (the DNS Flag Day 2020 value).
pub const EDNS_PAYLOAD: u16 = 1232;

/// How to ask.
#[derive(Clone, Copy, Debug)]
pub struct QueryOptions {
    /// Time to wait for a reply, per try.
    pub timeout: Duration,
    /// Number of UDP tries before giving up.
    pub tries: u32,
}

/// A reply that matched our question.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The parsed response.
    pub message: Message,
    /// The server that sent it.
    pub server: SocketAddr,
    /// True when the reply came over TCP (after a truncated UDP reply).
    pub tcp: bool,
    /// Packets received and ignored because they did not match (ID, question, or garbage).
    pub ignored: usize,
}

/// Why no reply was obtained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueryError {
    /// Nothing matching arrived in time on any try.
    Timeout {
        server: SocketAddr,
        tries: u32,
        timeout_ms: u128,
        ignored: usize,
    },
    /// The network said no (ICMP port unreachable, no route, ...).
    Unreachable { server: SocketAddr, detail: String },
    /// The UDP reply was truncated and asking again over TCP failed.
    TcpFallback { server: SocketAddr, detail: String },
    /// We could not even build or send the query.
    Local(String),
}

impl QueryError {
    /// Short machine word for the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            QueryError::Timeout { .. } => "timeout",
            QueryError::Unreachable { .. } => "unreachable",
            QueryError::TcpFallback { .. } => "tcp-failed",
            QueryError::Local(_) => "error",
        }
    }
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryError::Timeout {
                server,
                tries,
                timeout_ms,
                ignored,
            } => {
                write!(
                    f,
                    "timeout: no reply from {server} after {tries} tr{} of {timeout_ms} ms",
                    if *tries == 1 { "y" } else { "ies" }
                )?;
                if *ignored > 0 {
                    write!(f, " ({ignored} non-matching packet(s) ignored)")?;
                }
                Ok(())
            }
            QueryError::Unreachable { server, detail } => {
                write!(f, "unreachable: {server}: {detail}")
            }
            QueryError::TcpFallback { server, detail } => write!(
                f,
                "reply from {server} was truncated (TC) and the TCP retry failed: {detail}"
            ),
            QueryError::Local(detail) => write!(f, "could not send query: {detail}"),
        }
    }
}

/// Builds a query for `name`/`qtype` (class IN) with EDNS and, if given, an ECS option.
///
/// The ECS address is truncated to the source prefix and the scope is 0, as RFC 7871 §6 requires.
pub fn build_query(
    name: &Name,
    qtype: RecordType,
    recursion_desired: bool,
    ecs: Option<ipnet::IpNet>,
) -> Message {
    let mut msg = Message::query();
    msg.add_query(Query::query(name.clone(), qtype));
    msg.metadata.recursion_desired = recursion_desired;
    let mut edns = Edns::new();
    edns.set_max_payload(EDNS_PAYLOAD);
    if let Some(net) = ecs {
        let net = net.trunc();
        edns.options_mut()
            .insert(EdnsOption::Subnet(ClientSubnet::new(
                net.addr(),
                net.prefix_len(),
                0,
            )));
    }
    msg.set_edns(edns);
    msg
}

/// Sends `request` (which must hold exactly one question) to `server` and waits for the reply.
pub fn exchange(
    server: SocketAddr,
    request: &Message,
    opts: &QueryOptions,
) -> Result<Reply, QueryError> {
    let question = request
        .queries
        .first()
        .cloned()
        .ok_or_else(|| QueryError::Local("query has no question".into()))?;
    let tries = opts.tries.max(1);
    let mut ignored = 0;
    let mut unreachable: Option<io::Error> = None;

    for _ in 0..tries {
        let mut req = request.clone();
        req.metadata.id = rand::random::<u16>();
        let wire = req
            .to_vec()
            .map_err(|e| QueryError::Local(format!("encoding query: {e}")))?;
        match udp_try(server, &wire, req.metadata.id, &question, opts.timeout) {
            Ok((Some(message), n)) => {
                ignored += n;
                if message.metadata.truncation {
                    return tcp_exchange(server, &wire, req.metadata.id, &question, opts.timeout)
                        .map(|message| Reply {
                            message,
                            server,
                            tcp: true,
                            ignored,
                        })
                        .map_err(|detail| QueryError::TcpFallback { server, detail });
                }
                return Ok(Reply {
                    message,
                    server,
                    tcp: false,
                    ignored,
                });
            }
            Ok((None, n)) => ignored += n,
            Err(e) => {
                if is_local_error(&e) {
                    return Err(QueryError::Local(format!("{server}: {e}")));
                }
                unreachable = Some(e);
                // A refused port answers at once; give the server a moment before the next try.
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    match unreachable {
        Some(e) => Err(QueryError::Unreachable {
            server,
            detail: describe_io(&e),
        }),
        None => Err(QueryError::Timeout {
            server,
            tries,
            timeout_ms: opts.timeout.as_millis(),
            ignored,
        }),
    }
}

fn is_local_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::AddrNotAvailable | io::ErrorKind::PermissionDenied
    )
}

fn describe_io(e: &io::Error) -> String {
    match e.kind() {
        // The OS's own words and number, e.g. "Connection refused (os error 111)".
        io::ErrorKind::ConnectionRefused => format!("{e} (nothing listening on that port?)"),
        _ => e.to_string(),
    }
}

/// One UDP try. Returns the matching reply (if any arrived in time) and the number of ignored packets.
fn udp_try(
    server: SocketAddr,
    wire: &[u8],
    id: u16,
    question: &Query,
    timeout: Duration,
) -> io::Result<(Option<Message>, usize)> {
    let bind: SocketAddr = if server.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(bind)?;
    socket.connect(server)?;
    socket.send(wire)?;
    let deadline = Instant::now() + timeout;
    let mut buf = vec![0u8; 65535];
    let mut ignored = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left < Duration::from_millis(1) {
            return Ok((None, ignored));
        }
        socket.set_read_timeout(Some(left))?;
        match socket.recv(&mut buf) {
            Ok(n) => match accept(&buf[..n], id, question) {
                Some(msg) => return Ok((Some(msg), ignored)),
                None => ignored += 1,
            },
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok((None, ignored))
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Asks over TCP (two-octet length prefix), reading until a matching reply or the timeout.
fn tcp_exchange(
    server: SocketAddr,
    wire: &[u8],
    id: u16,
    question: &Query,
    timeout: Duration,
) -> Result<Message, String> {
    let deadline = Instant::now() + timeout;
    let mut stream = TcpStream::connect_timeout(&server, timeout).map_err(|e| describe_io(&e))?;
    let _ = stream.set_nodelay(true);
    let mut framed = Vec::with_capacity(wire.len() + 2);
    framed.extend_from_slice(&(wire.len() as u16).to_be_bytes());
    framed.extend_from_slice(wire);
    stream
        .set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    stream.write_all(&framed).map_err(|e| e.to_string())?;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left < Duration::from_millis(1) {
            return Err(format!(
                "no reply over TCP within {} ms",
                timeout.as_millis()
            ));
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|e| e.to_string())?;
        let mut len = [0u8; 2];
        read_exact(&mut stream, &mut len, timeout)?;
        let mut body = vec![0u8; u16::from_be_bytes(len) as usize];
        read_exact(&mut stream, &mut body, timeout)?;
        if let Some(msg) = accept(&body, id, question) {
            return Ok(msg);
        }
    }
}

fn read_exact(stream: &mut TcpStream, buf: &mut [u8], timeout: Duration) -> Result<(), String> {
    stream.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            format!("no reply over TCP within {} ms", timeout.as_millis())
        }
        io::ErrorKind::UnexpectedEof => "server closed the TCP connection".into(),
        _ => e.to_string(),
    })
}

/// Parses `packet` and returns it when it is the reply to our query: a response with our ID and
/// our question. Error replies without a question section (FORMERR, NOTIMP, REFUSED...) are
/// accepted on the ID alone, since some servers drop the question when they reject a query.
pub fn accept(packet: &[u8], id: u16, question: &Query) -> Option<Message> {
    let msg = Message::from_vec(packet).ok()?;
    if msg.metadata.message_type != MessageType::Response || msg.metadata.id != id {
        return None;
    }
    match msg.queries.as_slice() {
        [q] if same_question(q, question) => Some(msg),
        [] if msg.metadata.response_code != ResponseCode::NoError => Some(msg),
        _ => None,
    }
}

fn same_question(a: &Query, b: &Query) -> bool {
    a.query_type() == b.query_type()
        && a.query_class() == b.query_class()
        && a.name().eq_ignore_root(b.name())
}

/// Text form of a response code, in the usual upper-case mnemonic.
pub fn rcode_str(code: ResponseCode) -> String {
    match code {
        ResponseCode::NoError => "NOERROR".into(),
        ResponseCode::FormErr => "FORMERR".into(),
        ResponseCode::ServFail => "SERVFAIL".into(),
        ResponseCode::NXDomain => "NXDOMAIN".into(),
        ResponseCode::NotImp => "NOTIMP".into(),
        ResponseCode::Refused => "REFUSED".into(),
        ResponseCode::YXDomain => "YXDOMAIN".into(),
        ResponseCode::YXRRSet => "YXRRSET".into(),
        ResponseCode::NXRRSet => "NXRRSET".into(),
        ResponseCode::NotAuth => "NOTAUTH".into(),
        ResponseCode::NotZone => "NOTZONE".into(),
        ResponseCode::BADVERS => "BADVERS".into(),
        other => format!("RCODE{}", u16::from(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(name: &str) -> Query {
        Query::query(Name::from_ascii(name).unwrap(), RecordType::A)
    }

    #[test]
    fn accepts_only_matching_replies() {
        let req = build_query(
            &Name::from_ascii("www.Example.test.").unwrap(),
            RecordType::A,
            false,
            None,
        );
        let id = req.metadata.id;
        let mut resp = Message::response(id, req.metadata.op_code);
        resp.add_query(q("WWW.example.TEST."));
        let wire = resp.to_vec().unwrap();
        assert!(accept(&wire, id, &req.queries[0]).is_some());
        assert!(accept(&wire, id.wrapping_add(1), &req.queries[0]).is_none());

        let mut other = Message::response(id, req.metadata.op_code);
        other.add_query(q("other.example.test."));
        assert!(accept(&other.to_vec().unwrap(), id, &req.queries[0]).is_none());

        // A query (QR=0) with the right ID is not a reply.
        let mut not_resp = req.clone();
        not_resp.metadata.message_type = MessageType::Query;
        assert!(accept(&not_resp.to_vec().unwrap(), id, &req.queries[0]).is_none());

        // Error replies may come back without the question.
        let err = Message::error_msg(id, req.metadata.op_code, ResponseCode::FormErr);
        assert!(accept(&err.to_vec().unwrap(), id, &req.queries[0]).is_some());
        assert!(accept(b"garbage", id, &req.queries[0]).is_none());
    }

    #[test]
    fn ecs_option_is_truncated_with_zero_scope() {
        let net: ipnet::IpNet = "8.8.8.77/24".parse().unwrap();
        let msg = build_query(&Name::root(), RecordType::A, false, Some(net));
        let edns = msg.edns.as_ref().unwrap();
        match edns.option(hickory_proto::rr::rdata::opt::EdnsCode::Subnet) {
            Some(EdnsOption::Subnet(cs)) => {
                assert_eq!(cs.addr().to_string(), "8.8.8.0");
                assert_eq!(cs.source_prefix(), 24);
                assert_eq!(cs.scope_prefix(), 0);
            }
            other => panic!("no ECS: {other:?}"),
        }
    }
}
