//! Where queries go: a server given on the command line (`HOST[:PORT]`), or the authoritative
//! servers of a name's zone, found through a recursive resolver (the system's, or `--resolver`).
//!
//! Discovery walks up from the name until an NS RRset owned by the candidate name is found, then
//! resolves every NS name to its A and AAAA addresses. Results are cached per name and per zone.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::str::FromStr;
use std::time::Duration;

use hickory_proto::rr::{Name, RData, RecordType};
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolveHosts, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::TokioResolver;

use crate::query;

/// `HOST[:PORT]` as typed: an IPv4 address, an IPv6 address (bare, or in brackets when a port
/// follows), or a host name. The port defaults to 53.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    pub host: String,
    pub port: u16,
}

impl FromStr for ServerSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("empty server".into());
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(ServerSpec {
                host: ip.to_string(),
                port: 53,
            });
        }
        if let Ok(sa) = s.parse::<SocketAddr>() {
            parse_port(&sa.port().to_string())?;
            return Ok(ServerSpec {
                host: sa.ip().to_string(),
                port: sa.port(),
            });
        }
        if let Some(rest) = s.strip_prefix('[') {
            let (ip, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("missing ']' in {s:?}"))?;
            let ip: IpAddr = ip
                .parse()
                .map_err(|_| format!("{ip:?} is not an IP address"))?;
            let port = match after {
                "" => 53,
                p => parse_port(
                    p.strip_prefix(':')
                        .ok_or_else(|| format!("expected ':PORT' after ']' in {s:?}"))?,
                )?,
            };
            return Ok(ServerSpec {
                host: ip.to_string(),
                port,
            });
        }
        let (host, port) = match s.rsplit_once(':') {
            Some((h, p)) => (h, parse_port(p)?),
            None => (s, 53),
        };
        if host.contains(':') {
            return Err(format!(
                "{s:?}: put an IPv6 address in brackets when giving a port, e.g. [::1]:53"
            ));
        }
        if host.is_empty()
            || !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_')
        {
            return Err(format!("{host:?} is not an IP address or host name"));
        }
        Ok(ServerSpec {
            host: host.to_string(),
            port,
        })
    }
}

fn parse_port(p: &str) -> Result<u16, String> {
    match p.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("{p:?} is not a port number (1-65535)")),
        Ok(n) => Ok(n),
    }
}

impl fmt::Display for ServerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl ServerSpec {
    /// The socket addresses this spec stands for (a host name is resolved by the system).
    pub fn resolve(&self) -> Result<Vec<SocketAddr>, String> {
        if let Ok(ip) = self.host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, self.port)]);
        }
        let mut addrs: Vec<SocketAddr> = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve server {}: {e}", self.host))?
            .collect();
        addrs.sort_by_key(|a| a.is_ipv6());
        addrs.dedup();
        if addrs.is_empty() {
            return Err(format!("server {} has no addresses", self.host));
        }
        Ok(addrs)
    }
}

/// One authoritative server of a zone.
#[derive(Clone, Debug)]
pub struct NameServer {
    pub name: Name,
    pub addr: SocketAddr,
}

impl fmt::Display for NameServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.addr)
    }
}

/// A zone and its authoritative servers (IPv4 addresses first).
#[derive(Clone, Debug)]
pub struct Zone {
    pub name: Name,
    pub servers: Vec<NameServer>,
}

/// Finds zones' authoritative servers through a recursive resolver.
pub struct Discovery {
    runtime: tokio::runtime::Runtime,
    resolver: TokioResolver,
    /// The recursive resolvers' addresses (from `--resolver` or the system configuration).
    resolvers: Vec<SocketAddr>,
    timeout: Duration,
    ns_port: u16,
    by_name: HashMap<Name, Result<Name, String>>,
    zones: HashMap<Name, Zone>,
}

impl Discovery {
    /// Uses the system resolver configuration (`/etc/resolv.conf`) unless `resolver` is given.
    /// `ns_port` is the port the authoritative servers are asked on (53 except in tests).
    pub fn new(
        resolver: Option<&[SocketAddr]>,
        ns_port: u16,
        timeout: Duration,
    ) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start async runtime: {e}"))?;
        let provider = TokioRuntimeProvider::default();
        let (mut builder, resolvers) = match resolver {
            None => {
                let (config, options) = hickory_resolver::system_conf::read_system_conf()
                    .map_err(|e| format!("cannot read the system resolver configuration: {e}"))?;
                // The addresses asked, so that a failure can name them (UDP port, else 53).
                let resolvers = config
                    .name_servers()
                    .iter()
                    .map(|ns| {
                        let port = ns.connections.first().map_or(53, |c| c.port);
                        SocketAddr::new(ns.ip, port)
                    })
                    .collect();
                let mut b = TokioResolver::builder_with_config(config, provider);
                *b.options_mut() = options;
                (b, resolvers)
            }
            Some(addrs) => {
                let servers = addrs
                    .iter()
                    .map(|a| {
                        let mut udp = ConnectionConfig::udp();
                        udp.port = a.port();
                        let mut tcp = ConnectionConfig::tcp();
                        tcp.port = a.port();
                        NameServerConfig::new(a.ip(), true, vec![udp, tcp])
                    })
                    .collect();
                let mut b = TokioResolver::builder_with_config(
                    ResolverConfig::from_name_servers(servers),
                    provider,
                );
                b.options_mut().use_hosts_file = ResolveHosts::Never;
                (b, addrs.to_vec())
            }
        };
        builder.options_mut().timeout = timeout;
        builder.options_mut().attempts = 2;
        let resolver = {
            let _guard = runtime.enter();
            builder
                .build()
                .map_err(|e| format!("cannot build resolver: {e}"))?
        };
        Ok(Discovery {
            runtime,
            resolver,
            resolvers,
            timeout,
            ns_port,
            by_name: HashMap::new(),
            zones: HashMap::new(),
        })
    }

    /// The zone that holds `name` and its authoritative servers.
    pub fn zone_for(&mut self, name: &Name) -> Result<Zone, String> {
        let zone = match self.by_name.get(name) {
            Some(r) => r.clone()?,
            None => {
                let r = self.find_zone(name);
                self.by_name.insert(name.clone(), r.clone());
                r?
            }
        };
        Ok(self.zones[&zone].clone())
    }

    fn find_zone(&mut self, name: &Name) -> Result<Name, String> {
        let mut candidate = name.clone();
        while !candidate.is_root() {
            if self.zones.contains_key(&candidate) {
                return Ok(candidate);
            }
            let ns_names = self.ns_names(&candidate)?;
            if !ns_names.is_empty() {
                let servers = self.addresses(&candidate, &ns_names)?;
                self.zones.insert(
                    candidate.clone(),
                    Zone {
                        name: candidate.clone(),
                        servers,
                    },
                );
                return Ok(candidate);
            }
            candidate = candidate.base_name();
        }
        Err(format!("no NS records found for {name} or any parent zone"))
    }

    /// NS names owned by exactly `candidate` (an empty list when it is not a zone apex).
    fn ns_names(&self, candidate: &Name) -> Result<Vec<Name>, String> {
        match self
            .runtime
            .block_on(self.resolver.lookup(candidate.clone(), RecordType::NS))
        {
            Ok(lookup) => {
                let mut names: Vec<Name> = lookup
                    .answers()
                    .iter()
                    .filter(|r| r.name.eq_ignore_root(candidate))
                    .filter_map(|r| match &r.data {
                        RData::NS(ns) => Some(ns.0.clone()),
                        _ => None,
                    })
                    .collect();
                names.sort();
                names.dedup();
                Ok(names)
            }
            Err(e) if e.is_no_records_found() => Ok(Vec::new()),
            Err(e) => Err(format!(
                "{} failed while looking up NS {candidate}: {e}{}",
                self.resolvers_text(),
                self.diagnose(candidate)
            )),
        }
    }

    /// "resolver 192.0.2.53:53" or "resolvers a, b" (or a note that there is none).
    fn resolvers_text(&self) -> String {
        match self.resolvers.as_slice() {
            [] => "no resolver (the system configuration lists none)".into(),
            [one] => format!("resolver {one}"),
            many => format!(
                "resolvers {}",
                many.iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// After the resolver library failed (it says only "request timed out" when, say, nothing
    /// listens or there is no route), asks each resolver once directly, so the error can carry
    /// what the operating system said (connection refused, network unreachable, ...).
    fn diagnose(&self, candidate: &Name) -> String {
        let request = query::build_query(candidate, RecordType::NS, true, None);
        let opts = query::QueryOptions {
            timeout: self.timeout,
            tries: 1,
        };
        let found: Vec<String> = self
            .resolvers
            .iter()
            .filter_map(|&addr| query::exchange(addr, &request, &opts).err())
            .map(|e| e.to_string())
            .collect();
        if found.is_empty() {
            String::new()
        } else {
            format!(" (asked directly: {})", found.join("; "))
        }
    }

    fn addresses(&self, zone: &Name, ns_names: &[Name]) -> Result<Vec<NameServer>, String> {
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        let mut problems = Vec::new();
        for ns in ns_names {
            for qtype in [RecordType::A, RecordType::AAAA] {
                match self
                    .runtime
                    .block_on(self.resolver.lookup(ns.clone(), qtype))
                {
                    Ok(lookup) => {
                        for r in lookup.answers() {
                            let ip: IpAddr = match &r.data {
                                RData::A(a) => a.0.into(),
                                RData::AAAA(a) => a.0.into(),
                                _ => continue,
                            };
                            let server = NameServer {
                                name: ns.clone(),
                                addr: SocketAddr::new(ip, self.ns_port),
                            };
                            if ip.is_ipv4() {
                                v4.push(server)
                            } else {
                                v6.push(server)
                            }
                        }
                    }
                    Err(e) if e.is_no_records_found() => {}
                    Err(e) => problems.push(format!(
                        "{ns} {qtype}: {e} (from {})",
                        self.resolvers_text()
                    )),
                }
            }
        }
        v4.extend(v6);
        if v4.is_empty() {
            let names: Vec<String> = ns_names.iter().map(|n| n.to_string()).collect();
            let mut msg = format!(
                "zone {zone}: could not resolve any address of its name servers ({})",
                names.join(", ")
            );
            if !problems.is_empty() {
                msg.push_str(&format!(": {}", problems.join("; ")));
            }
            return Err(msg);
        }
        Ok(v4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_server_specs() {
        let p = |s: &str| s.parse::<ServerSpec>();
        assert_eq!(p("127.0.0.1").unwrap().to_string(), "127.0.0.1:53");
        assert_eq!(p("127.0.0.1:5353").unwrap().to_string(), "127.0.0.1:5353");
        assert_eq!(p("::1").unwrap().to_string(), "[::1]:53");
        assert_eq!(p("[::1]").unwrap().to_string(), "[::1]:53");
        assert_eq!(p("[::1]:5300").unwrap().to_string(), "[::1]:5300");
        assert_eq!(
            p("ns1.example.test").unwrap().to_string(),
            "ns1.example.test:53"
        );
        assert_eq!(p("ns1.example.test:54").unwrap().port, 54);
        assert!(p("").is_err());
        assert!(p("127.0.0.1:0").is_err());
        assert!(p("127.0.0.1:99999").is_err());
        assert!(p("[::1").is_err());
        assert!(p("[nope]:53").is_err());
        assert!(p("bad host").is_err());
    }

    #[test]
    fn literal_addresses_resolve_without_dns() {
        let spec: ServerSpec = "[::1]:5300".parse().unwrap();
        assert_eq!(spec.resolve().unwrap(), vec!["[::1]:5300".parse().unwrap()]);
    }
}
