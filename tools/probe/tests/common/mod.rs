//! Test helpers: a tiny scriptable DNS server on loopback (UDP and TCP on the same port), and a
//! runner for the meridian-probe binary. All traffic stays on 127.0.0.0/8.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS};
use hickory_proto::rr::{Name, RData, Record};

/// Which transport a query came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Udp,
    Tcp,
}

/// What the fake server does with a query.
pub enum Action {
    /// Send this message.
    Reply(Message),
    /// Send these raw packets, in order (UDP only).
    Packets(Vec<Vec<u8>>),
    /// Say nothing.
    Drop,
}

pub type Handler = Arc<dyn Fn(&Message, Proto) -> Action + Send + Sync>;

/// A scriptable DNS server bound to loopback. Stops when dropped.
pub struct FakeServer {
    pub addr: SocketAddr,
    pub queries: Arc<Mutex<Vec<(Proto, Message)>>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl FakeServer {
    /// Binds UDP and TCP on `ip` with a free port shared by both.
    pub fn start(ip: IpAddr, handler: Handler) -> FakeServer {
        for _ in 0..50 {
            let udp = UdpSocket::bind((ip, 0)).expect("bind udp");
            let port = udp.local_addr().unwrap().port();
            if let Ok(tcp) = TcpListener::bind((ip, port)) {
                return Self::with_sockets(udp, tcp, handler);
            }
        }
        panic!("no free port with both UDP and TCP on {ip}");
    }

    /// Binds UDP and TCP on exactly `addr`.
    pub fn start_on(addr: SocketAddr, handler: Handler) -> std::io::Result<FakeServer> {
        let udp = UdpSocket::bind(addr)?;
        let tcp = TcpListener::bind(addr)?;
        Ok(Self::with_sockets(udp, tcp, handler))
    }

    fn with_sockets(udp: UdpSocket, tcp: TcpListener, handler: Handler) -> FakeServer {
        let addr = udp.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let queries = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        {
            let (stop, queries, handler) = (stop.clone(), queries.clone(), handler.clone());
            udp.set_read_timeout(Some(Duration::from_millis(20)))
                .unwrap();
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65535];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, peer)) = udp.recv_from(&mut buf) else {
                        continue;
                    };
                    let Ok(q) = Message::from_vec(&buf[..n]) else {
                        continue;
                    };
                    queries.lock().unwrap().push((Proto::Udp, q.clone()));
                    match handler(&q, Proto::Udp) {
                        Action::Reply(m) => {
                            let _ = udp.send_to(&m.to_vec().unwrap(), peer);
                        }
                        Action::Packets(ps) => {
                            for p in ps {
                                let _ = udp.send_to(&p, peer);
                            }
                        }
                        Action::Drop => {}
                    }
                }
            }));
        }
        {
            let (stop, queries, handler) = (stop.clone(), queries.clone(), handler.clone());
            tcp.set_nonblocking(true).unwrap();
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match tcp.accept() {
                        Ok((conn, _)) => serve_tcp(conn, &queries, &handler),
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            }));
        }
        FakeServer {
            addr,
            queries,
            stop,
            threads,
        }
    }

    pub fn query_count(&self, proto: Proto) -> usize {
        self.queries
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| *p == proto)
            .count()
    }
}

fn serve_tcp(mut conn: TcpStream, queries: &Mutex<Vec<(Proto, Message)>>, handler: &Handler) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    loop {
        let mut len = [0u8; 2];
        if conn.read_exact(&mut len).is_err() {
            return;
        }
        let mut body = vec![0u8; u16::from_be_bytes(len) as usize];
        if conn.read_exact(&mut body).is_err() {
            return;
        }
        let Ok(q) = Message::from_vec(&body) else {
            return;
        };
        queries.lock().unwrap().push((Proto::Tcp, q.clone()));
        if let Action::Reply(m) = handler(&q, Proto::Tcp) {
            let wire = m.to_vec().unwrap();
            let mut framed = (wire.len() as u16).to_be_bytes().to_vec();
            framed.extend(wire);
            if conn.write_all(&framed).is_err() {
                return;
            }
        }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A response skeleton for `q`: same ID, question and RD, AA set, EDNS if the query had it.
pub fn response(q: &Message) -> Message {
    let mut r = Message::response(q.metadata.id, q.metadata.op_code);
    r.add_queries(q.queries.clone());
    r.metadata.recursion_desired = q.metadata.recursion_desired;
    r.metadata.authoritative = true;
    if q.edns.is_some() {
        let mut e = Edns::new();
        e.set_max_payload(1232);
        r.set_edns(e);
    }
    r
}

/// The ECS option of a query, if any.
pub fn query_ecs(q: &Message) -> Option<ClientSubnet> {
    match q.edns.as_ref()?.option(EdnsCode::Subnet)? {
        EdnsOption::Subnet(cs) => Some(*cs),
        _ => None,
    }
}

/// Echoes the query's ECS option into `r` with `scope` (RFC 7871 §7.2.1).
pub fn echo_ecs(q: &Message, r: &mut Message, scope: u8) {
    if let Some(mut cs) = query_ecs(q) {
        cs.set_scope_prefix(scope);
        let mut e = r.edns.clone().unwrap_or_default();
        e.options_mut().insert(EdnsOption::Subnet(cs));
        r.set_edns(e);
    }
}

pub fn name(s: &str) -> Name {
    Name::from_ascii(s).unwrap()
}

pub fn a(owner: &str, ip: &str, ttl: u32) -> Record {
    Record::from_rdata(name(owner), ttl, RData::A(A(ip.parse().unwrap())))
}

pub fn aaaa(owner: &str, ip: &str, ttl: u32) -> Record {
    Record::from_rdata(name(owner), ttl, RData::AAAA(AAAA(ip.parse().unwrap())))
}

pub fn cname(owner: &str, target: &str, ttl: u32) -> Record {
    Record::from_rdata(name(owner), ttl, RData::CNAME(CNAME(name(target))))
}

pub fn ns(owner: &str, target: &str) -> Record {
    Record::from_rdata(name(owner), 300, RData::NS(NS(name(target))))
}

pub fn with_rcode(mut r: Message, code: ResponseCode) -> Message {
    r.metadata.response_code = code;
    r
}

/// Runs meridian-probe with `args` and returns its output.
pub fn probe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_meridian-probe"))
        .args(args)
        .output()
        .expect("run meridian-probe")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Parses the probe's JSON output, failing the test with both streams shown if it does not parse.
pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "output is not JSON ({e}):\nstdout:\n{}\nstderr:\n{}",
            stdout(o),
            stderr(o)
        )
    })
}
