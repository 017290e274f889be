//! Test-only MaxMind DB writer for shapes the example file lacks: the flat
//! schema, IPv4-only databases, MaxMind-style IPv4 alias ranges.

/// A MaxMind DB data value: string, double, float, map or array.
#[derive(Clone)]
pub(crate) enum V {
    S(&'static str),
    D(f64),
    F(f32),
    M(Vec<(&'static str, V)>),
    A(Vec<V>),
}

#[derive(Clone, Copy)]
enum R {
    Empty,
    Node(usize),
    Data(usize),
}

/// Builds a database: a binary search tree over the address bits, then the data section and metadata.
pub(crate) struct Builder {
    ip_version: u16,
    nodes: Vec<[R; 2]>,
    data: Vec<u8>,
}

impl Builder {
    /// An empty database for `ip_version` 4 or 6.
    pub(crate) fn new(ip_version: u16) -> Builder {
        Builder {
            ip_version,
            nodes: vec![[R::Empty; 2]],
            data: Vec::new(),
        }
    }

    fn bits(&self) -> u32 {
        if self.ip_version == 4 {
            32
        } else {
            128
        }
    }

    /// Walk `len` bits of `key`, creating nodes; returns (node, last bit).
    fn walk(&mut self, key: u128, len: u8) -> (usize, usize) {
        let bits = self.bits();
        let mut node = 0;
        for d in 0..len as u32 - 1 {
            let bit = ((key >> (bits - 1 - d)) & 1) as usize;
            node = match self.nodes[node][bit] {
                R::Node(n) => n,
                _ => {
                    self.nodes.push([R::Empty; 2]);
                    let n = self.nodes.len() - 1;
                    self.nodes[node][bit] = R::Node(n);
                    n
                }
            };
        }
        let bit = ((key >> (bits - len as u32)) & 1) as usize;
        (node, bit)
    }

    /// Insert "a.b.c.d/len" or "v6/len" (IPv4 goes to ::/96 in IPv6 DBs).
    pub(crate) fn insert(&mut self, net: &str, v: &V) {
        let net: ipnet::IpNet = net.parse().unwrap();
        let (key, len) = match net {
            ipnet::IpNet::V4(n) if self.ip_version == 6 => {
                (u32::from(n.network()) as u128, n.prefix_len() + 96)
            }
            ipnet::IpNet::V4(n) => (u32::from(n.network()) as u128, n.prefix_len()),
            ipnet::IpNet::V6(n) => (u128::from(n.network()), n.prefix_len()),
        };
        let off = self.data.len();
        enc(v, &mut self.data);
        let (node, bit) = self.walk(key, len);
        self.nodes[node][bit] = R::Data(off);
    }

    /// Point IPv6 range `root` at the IPv4 subtree (node reached by ::/96).
    pub(crate) fn alias(&mut self, root: &str) {
        let mut v4 = 0;
        for _ in 0..96 {
            v4 = match self.nodes[v4][0] {
                R::Node(n) => n,
                _ => panic!("no IPv4 subtree"),
            };
        }
        let net: ipnet::Ipv6Net = root.parse().unwrap();
        let (node, bit) = self.walk(u128::from(net.network()), net.prefix_len());
        self.nodes[node][bit] = R::Node(v4);
    }

    /// The file's bytes, with `database_type` in the metadata.
    pub(crate) fn finish(&self, database_type: &'static str) -> Vec<u8> {
        let n = self.nodes.len();
        let val = |r: R| match r {
            R::Empty => n,
            R::Node(x) => x,
            R::Data(o) => n + 16 + o,
        };
        let mut out = Vec::new();
        for node in &self.nodes {
            for r in node {
                out.extend_from_slice(&(val(*r) as u32).to_be_bytes()[1..]);
            }
        }
        out.extend_from_slice(&[0; 16]);
        out.extend_from_slice(&self.data);
        out.extend_from_slice(b"\xAB\xCD\xEFMaxMind.com");
        enc_meta(&mut out, self.ip_version, n as u32, database_type);
        out
    }
}

fn ctrl(t: u8, size: usize, out: &mut Vec<u8>) {
    assert!(size < 29);
    if t <= 7 {
        out.push(t << 5 | size as u8);
    } else {
        out.push(size as u8);
        out.push(t - 7);
    }
}

fn enc_str(s: &str, out: &mut Vec<u8>) {
    ctrl(2, s.len(), out);
    out.extend_from_slice(s.as_bytes());
}

fn enc_uint(t: u8, n: u64, out: &mut Vec<u8>) {
    let b = n.to_be_bytes();
    let skip = (n.leading_zeros() / 8) as usize;
    ctrl(t, 8 - skip, out);
    out.extend_from_slice(&b[skip..]);
}

fn enc(v: &V, out: &mut Vec<u8>) {
    match v {
        V::S(s) => enc_str(s, out),
        V::D(d) => {
            ctrl(3, 8, out);
            out.extend_from_slice(&d.to_be_bytes());
        }
        V::F(f) => {
            ctrl(15, 4, out);
            out.extend_from_slice(&f.to_be_bytes());
        }
        V::M(m) => {
            ctrl(7, m.len(), out);
            for (k, v) in m {
                enc_str(k, out);
                enc(v, out);
            }
        }
        V::A(a) => {
            ctrl(11, a.len(), out);
            for v in a {
                enc(v, out);
            }
        }
    }
}

fn enc_meta(out: &mut Vec<u8>, ip_version: u16, node_count: u32, database_type: &str) {
    ctrl(7, 9, out);
    enc_str("binary_format_major_version", out);
    enc_uint(5, 2, out);
    enc_str("binary_format_minor_version", out);
    enc_uint(5, 0, out);
    enc_str("build_epoch", out);
    enc_uint(9, 1, out);
    enc_str("database_type", out);
    enc_str(database_type, out);
    enc_str("description", out);
    ctrl(7, 1, out);
    enc_str("en", out);
    enc_str("test", out);
    enc_str("ip_version", out);
    enc_uint(5, ip_version as u64, out);
    enc_str("languages", out);
    ctrl(11, 1, out);
    enc_str("en", out);
    enc_str("node_count", out);
    enc_uint(6, node_count as u64, out);
    enc_str("record_size", out);
    enc_uint(5, 24, out);
}
