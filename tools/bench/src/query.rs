//! Query files and wire-format queries.
//!
//! A query file has one query per line: `NAME TYPE [ECS-SUBNET]`, for example
//! `www.example.test A` or `geo.example.test A 85.214.0.0/24`. Blank lines and
//! lines starting with `#` or `;` are skipped. The first two columns are the dnsperf
//! text format, so files without the ECS column work with dnsperf too.
//!
//! Every query is built once, at start-up, into DNS wire format with an EDNS(0)
//! OPT record (UDP payload 1232) and, when a subnet is given, an EDNS Client
//! Subnet option (RFC 7871) with SCOPE 0, and the DO bit (RFC 3225) when asked
//! for ([`Query::to_wire_do`], `meridian-loadgen --dnssec-ok`). The ID is left 0:
//! the load generator writes it into the first two bytes when it sends.

use std::fmt;
use std::net::IpAddr;

/// EDNS UDP payload size we advertise (the DNS Flag Day 2020 value).
pub const EDNS_PAYLOAD: u16 = 1232;

/// One parsed line of a query file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// Domain name, without the trailing dot.
    pub name: String,
    /// Numeric RR type.
    pub qtype: u16,
    /// Client subnet for the ECS option: address (host bits are cleared when
    /// building) and source prefix length.
    pub ecs: Option<(IpAddr, u8)>,
}

/// A query-file error, with its 1-based line number.
#[derive(Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub msg: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.msg)
    }
}

impl std::error::Error for ParseError {}

/// Parses a whole query file. Fails on the first bad line, so typos are not
/// silently benchmarked as something else.
pub fn parse_file(text: &str) -> Result<Vec<Query>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let q = parse_line(line).map_err(|msg| ParseError { line: i + 1, msg })?;
        out.push(q);
    }
    Ok(out)
}

/// Parses one non-empty line `NAME TYPE [SUBNET]`.
pub fn parse_line(line: &str) -> Result<Query, String> {
    let mut cols = line.split_whitespace();
    let name = cols.next().ok_or("empty line")?;
    let qtype = cols.next().ok_or("missing query type")?;
    let ecs = cols.next().map(parse_subnet).transpose()?;
    if let Some(extra) = cols.next() {
        return Err(format!("unexpected column {extra:?}"));
    }
    let name = name.trim_end_matches('.').to_string();
    check_name(&name)?;
    Ok(Query {
        name,
        qtype: parse_type(qtype)?,
        ecs,
    })
}

/// Parses a query type mnemonic (case-insensitive) or `TYPEnnn` (RFC 3597).
pub fn parse_type(s: &str) -> Result<u16, String> {
    let up = s.to_ascii_uppercase();
    let t = match up.as_str() {
        "A" => 1,
        "NS" => 2,
        "CNAME" => 5,
        "SOA" => 6,
        "PTR" => 12,
        "MX" => 15,
        "TXT" => 16,
        "AAAA" => 28,
        "SRV" => 33,
        "NAPTR" => 35,
        "DS" => 43,
        "DNSKEY" => 48,
        "HTTPS" => 65,
        "SVCB" => 64,
        "ANY" => 255,
        "CAA" => 257,
        _ => match up.strip_prefix("TYPE").and_then(|n| n.parse().ok()) {
            Some(n) => n,
            None => return Err(format!("unknown query type {s:?}")),
        },
    };
    Ok(t)
}

/// Parses `ADDRESS/PREFIX` (IPv4 or IPv6). A bare address means a full-length prefix.
pub fn parse_subnet(s: &str) -> Result<(IpAddr, u8), String> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr: IpAddr = addr
        .parse()
        .map_err(|_| format!("bad ECS address in {s:?}"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match len {
        Some(l) => l
            .parse::<u8>()
            .ok()
            .filter(|&l| l <= max)
            .ok_or_else(|| format!("bad ECS prefix length in {s:?}"))?,
        None => max,
    };
    Ok((addr, len))
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Ok(()); // "." is the root
    }
    let mut total = 1;
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(format!("bad label in name {name:?}"));
        }
        total += label.len() + 1;
    }
    if total > 255 {
        return Err(format!("name too long: {name:?}"));
    }
    Ok(())
}

impl Query {
    /// Builds the wire-format query (ID 0, RD clear: the server is
    /// authoritative), with an OPT record and the ECS option if any, by
    /// meridian-wire's one query builder.
    pub fn to_wire(&self) -> Vec<u8> {
        self.to_wire_do(false)
    }

    /// [`Query::to_wire`], with the OPT record's DO bit set when `dnssec_ok`
    /// (the server then adds RRSIGs and denial records to signed answers).
    pub fn to_wire_do(&self, dnssec_ok: bool) -> Vec<u8> {
        let mut q = meridian_wire::QueryBuilder::new(&self.name, self.qtype).opt(
            meridian_wire::build::Opt {
                udp_size: EDNS_PAYLOAD,
                flags: if dnssec_ok { 0x8000 } else { 0 },
                ..Default::default()
            },
        );
        if let Some((a, l)) = self.ecs {
            q = q.ecs(a, l);
        }
        q.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Message;
    use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
    use hickory_proto::rr::RecordType;

    #[test]
    fn parses_lines_and_skips_comments() {
        let text = "# comment\n\nwww.example.test A\ngeo.example.test. aaaa 85.214.0.0/24\n  one.example.test TYPE65  \n";
        let qs = parse_file(text).unwrap();
        assert_eq!(qs.len(), 3);
        assert_eq!(
            qs[0],
            Query {
                name: "www.example.test".into(),
                qtype: 1,
                ecs: None
            }
        );
        assert_eq!(qs[1].name, "geo.example.test");
        assert_eq!(qs[1].qtype, 28);
        assert_eq!(qs[1].ecs, Some(("85.214.0.0".parse().unwrap(), 24)));
        assert_eq!(qs[2].qtype, 65);
    }

    #[test]
    fn reports_bad_lines_with_numbers() {
        let e = parse_file("www.example.test A\nwww.example.test BOGUS\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(parse_line("www.example.test").is_err());
        assert!(parse_line("x A 1.2.3.0/33").is_err());
        assert!(parse_line("x A 2001:db8::/129").is_err());
        assert!(parse_line("x A nonsense/24").is_err());
        assert!(parse_line("x A 1.2.3.0/24 extra").is_err());
        assert!(parse_line("a..b A").is_err());
        assert!(parse_line(&format!("{} A", "a".repeat(64))).is_err());
        assert_eq!(parse_line("x A 2001:db8::1").unwrap().ecs.unwrap().1, 128);
    }

    #[test]
    fn wire_without_ecs_is_exact() {
        let w = parse_line("www.example.test A").unwrap().to_wire();
        let mut want = vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
        want.extend_from_slice(b"\x03www\x07example\x04test\x00\x00\x01\x00\x01");
        want.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(w, want);
    }

    #[test]
    fn dnssec_ok_sets_only_the_do_bit() {
        let q = parse_line("geo.example.test A 85.214.0.0/24").unwrap();
        let (plain, signed) = (q.to_wire(), q.to_wire_do(true));
        assert_eq!(plain.len(), signed.len());
        let diff: Vec<usize> = (0..plain.len())
            .filter(|&i| plain[i] != signed[i])
            .collect();
        assert_eq!(diff.len(), 1);
        let m = Message::from_vec(&signed).unwrap();
        let edns = m.edns.as_ref().expect("OPT present");
        assert!(edns.flags().dnssec_ok);
        assert_eq!(edns.max_payload(), EDNS_PAYLOAD);
        assert!(edns.option(EdnsCode::Subnet).is_some());
        let m = Message::from_vec(&plain).unwrap();
        assert!(!m.edns.as_ref().unwrap().flags().dnssec_ok);
    }

    #[test]
    fn wire_parses_with_hickory() {
        for (line, family_v4) in [
            ("geo.example.test A 85.214.0.0/24", true),
            ("geo.example.test AAAA 2a00:1450:4001:800::/56", false),
        ] {
            let q = parse_line(line).unwrap();
            let m = Message::from_vec(&q.to_wire()).unwrap();
            assert_eq!(m.queries.len(), 1);
            assert_eq!(m.queries[0].name().to_ascii(), "geo.example.test.");
            let want = if family_v4 {
                RecordType::A
            } else {
                RecordType::AAAA
            };
            assert_eq!(m.queries[0].query_type(), want);
            let edns = m.edns.as_ref().expect("OPT present");
            assert_eq!(edns.max_payload(), EDNS_PAYLOAD);
            let opt = edns.option(EdnsCode::Subnet).expect("ECS present");
            let (addr, len) = q.ecs.unwrap();
            assert_eq!(opt, &EdnsOption::Subnet(ClientSubnet::new(addr, len, 0)));
        }
    }
}
