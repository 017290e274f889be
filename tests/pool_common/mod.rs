//! Shared by tests/pool_*.rs: the pool fixtures and a fast sequential UDP
//! client (one socket, one query in flight) for statistical runs.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::{IpAddr, UdpSocket};
use std::path::PathBuf;
use std::time::Duration;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};

use crate::common::{root, Server, Q};

/// A fixture under tests/data/pools/.
pub(crate) fn fixture(name: &str) -> PathBuf {
    root().join("tests/data/pools").join(name)
}

/// One socket to one server, queries sent one after another.
pub(crate) struct Client {
    sock: UdpSocket,
    id: u16,
    buf: Vec<u8>,
}

/// What a pool test needs from a response.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) msg: Message,
    /// Answer-section addresses, in order.
    pub(crate) addrs: Vec<IpAddr>,
}

impl Answer {
    pub(crate) fn rcode(&self) -> ResponseCode {
        self.msg.metadata.response_code
    }

    pub(crate) fn aa(&self) -> bool {
        self.msg.metadata.authoritative
    }

    /// TTLs of the answer records.
    pub(crate) fn ttls(&self) -> Vec<u32> {
        self.msg.answers.iter().map(|r| r.ttl).collect()
    }

    /// The answer records' types, in order.
    pub(crate) fn types(&self) -> Vec<RecordType> {
        self.msg.answers.iter().map(|r| r.record_type()).collect()
    }

    /// NOERROR, no answer, the zone's SOA in authority: NODATA (RFC 2308).
    pub(crate) fn is_nodata(&self) -> bool {
        self.rcode() == ResponseCode::NoError
            && self.msg.answers.is_empty()
            && self.msg.authorities.len() == 1
            && self.msg.authorities[0].record_type() == RecordType::SOA
    }
}

impl Client {
    pub(crate) fn new(server: &Server) -> Client {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.connect(server.addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        Client {
            sock,
            id: 1,
            buf: vec![0; 65535],
        }
    }

    /// One query and its response (with a fresh ID, checked on return).
    pub(crate) fn ask(&mut self, name: &str, qtype: RecordType) -> Answer {
        self.ask_q(&Q::new(name, qtype))
    }

    pub(crate) fn ask_q(&mut self, q: &Q) -> Answer {
        let mut req = q.to_bytes();
        self.id = self.id.wrapping_add(1);
        req[0..2].copy_from_slice(&self.id.to_be_bytes());
        self.sock.send(&req).unwrap();
        loop {
            let n = self
                .sock
                .recv(&mut self.buf)
                .unwrap_or_else(|e| panic!("no answer to {q:?}: {e}"));
            // A late answer to an earlier query (never expected) is skipped.
            if n >= 2 && u16::from_be_bytes([self.buf[0], self.buf[1]]) == self.id {
                let msg = Message::from_vec(&self.buf[..n]).expect("response parses");
                return Answer {
                    addrs: addrs(&msg),
                    msg,
                };
            }
        }
    }

    /// `n` queries; each response goes to `each`.
    pub(crate) fn run(
        &mut self,
        name: &str,
        qtype: RecordType,
        n: usize,
        mut each: impl FnMut(&Answer),
    ) {
        let q = Q::new(name, qtype);
        for _ in 0..n {
            let a = self.ask_q(&q);
            each(&a);
        }
    }
}

pub(crate) fn addrs(m: &Message) -> Vec<IpAddr> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect()
}

pub(crate) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

pub(crate) fn ips(v: &[&str]) -> Vec<IpAddr> {
    v.iter().map(|s| ip(s)).collect()
}

/// Count of each key, as percentages of `total`.
pub(crate) fn shares<K: std::hash::Hash + Eq + Clone>(
    counts: &HashMap<K, usize>,
    total: usize,
) -> HashMap<K, f64> {
    counts
        .iter()
        .map(|(k, &c)| (k.clone(), 100.0 * c as f64 / total as f64))
        .collect()
}

/// Reference smooth weighted round robin (nginx): the index chosen first in
/// each of `n` successive responses. Ties go to the earlier member.
pub(crate) fn swrr(weights: &[i64], n: usize) -> Vec<usize> {
    let total: i64 = weights.iter().sum();
    let mut cur = vec![0i64; weights.len()];
    (0..n)
        .map(|_| {
            let mut best = 0;
            for i in 0..weights.len() {
                cur[i] += weights[i];
                if cur[i] > cur[best] {
                    best = i;
                }
            }
            cur[best] -= total;
            best
        })
        .collect()
}

/// Exact probability of each k-subset (sorted indices) under weighted
/// sampling without replacement: draw i with probability w_i / (weight left).
pub(crate) fn subset_probs(weights: &[f64], k: usize) -> HashMap<Vec<usize>, f64> {
    fn go(w: &[f64], k: usize, taken: &mut Vec<usize>, p: f64, out: &mut HashMap<Vec<usize>, f64>) {
        if taken.len() == k {
            let mut s = taken.clone();
            s.sort();
            *out.entry(s).or_insert(0.0) += p;
            return;
        }
        let left: f64 = (0..w.len())
            .filter(|i| !taken.contains(i))
            .map(|i| w[i])
            .sum();
        for i in 0..w.len() {
            if !taken.contains(&i) {
                taken.push(i);
                go(w, k, taken, p * w[i] / left, out);
                taken.pop();
            }
        }
    }
    let mut out = HashMap::new();
    go(weights, k, &mut Vec::new(), 1.0, &mut out);
    out
}
