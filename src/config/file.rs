//! The config file as written: serde structs, strict (`deny_unknown_fields`),
//! with spans kept on the values that errors point at. Nothing here is
//! checked beyond TOML types; the sibling modules check each section.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// The parsed file, before it is checked against zones and the geo database.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `[server]`: listeners, workers, TCP limits, HTTP API, user, RRL.
    #[serde(default)]
    pub server: ServerCfg,
    /// `[api]`: who may use the HTTP API (tokens, host names).
    #[serde(default)]
    pub api: super::api::ApiCfg,
    /// `[fleet]`: share operator state with other nodes through etcd.
    #[serde(default)]
    pub fleet: Option<Spanned<super::fleet::FleetCfg>>,
    /// `[geo]`: the geo database; absent when no name uses locations.
    #[serde(default)]
    pub geo: Option<GeoCfg>,
    /// `[[zone]]`: the served zones, in file order.
    #[serde(default)]
    pub zone: Vec<Spanned<ZoneCfg>>,
    /// `[pool.NAME]`: address pools by name.
    #[serde(default)]
    pub pool: BTreeMap<String, Spanned<PoolCfg>>,
    /// `[name."NAME"]`: names answered from a pool or by geo rules, by name.
    #[serde(default)]
    pub name: BTreeMap<String, Spanned<NameCfg>>,
    /// `[check.NAME]`: health checks by name, for pools and members to use.
    #[serde(default)]
    pub check: BTreeMap<String, Spanned<CheckCfg>>,
}

/// `[server]`, as written; checked into [`ServerSettings`](super::ServerSettings).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerCfg {
    /// `[server] listen`: addresses to serve UDP and TCP on (`v4:port`,
    /// `[v6]:port`, or a bare address for port 53); default `127.0.0.1:5380`.
    #[serde(default = "default_listen")]
    pub listen: Vec<Spanned<String>>,
    /// `[server] workers`: UDP worker threads per listen address; 0 means one
    /// per core.
    #[serde(default = "default_workers")]
    pub workers: Spanned<usize>,
    /// `[server] edns_udp_payload`: largest UDP response we send and the size
    /// we advertise in OPT, in octets (RFC 6891 §6.2.5); 512..=4096, default 1232.
    #[serde(default = "default_payload")]
    pub edns_udp_payload: Spanned<u16>,
    /// `[server] log`: tracing filter, e.g. "info" (default) or "meridian=debug".
    #[serde(default = "default_log")]
    pub log: Spanned<String>,
    /// `[server] tcp_idle_timeout_ms`: close a TCP connection on which no
    /// query has started for this long, in ms (default 10 000).
    #[serde(default = "default_tcp_idle")]
    pub tcp_idle_timeout_ms: Spanned<u64>,
    /// `[server] tcp_max_connections`: most TCP connections open at once;
    /// more are accepted and closed at once (default 512).
    #[serde(default = "default_tcp_max")]
    pub tcp_max_connections: Spanned<usize>,
    /// `[server] http_listen`: address of the HTTP API (/metrics, /status and
    /// overrides); off when absent or `"none"`.
    #[serde(default)]
    pub http_listen: Option<Spanned<String>>,
    /// `[server] tcp_read_timeout_ms`: time allowed to receive the rest of a
    /// TCP query once its first octet arrived, and to send one response, in ms
    /// (never more than the idle timeout; default 2000).
    #[serde(default = "default_tcp_read")]
    pub tcp_read_timeout_ms: Spanned<u64>,
    /// `[server] tcp_max_queries`: most queries answered on one TCP connection
    /// before it is closed (0: no cap; default 10 000).
    #[serde(default = "default_tcp_queries")]
    pub tcp_max_queries: Spanned<usize>,
    /// `[server] user`: started as root, bind the sockets, then switch to this
    /// user and its group.
    #[serde(default)]
    pub user: Option<Spanned<String>>,
    /// `[server] allow_root`: started as root, keep running as root (`user` is
    /// then not applied) instead of refusing when there is no `user`.
    #[serde(default)]
    pub allow_root: bool,
    /// `[server.rrl]`: response rate limiting; off when absent.
    #[serde(default)]
    pub rrl: Option<Spanned<RrlCfg>>,
    /// `[server] nsid`: the server identifier returned to an NSID request
    /// (RFC 5001), as text; off when absent.
    #[serde(default)]
    pub nsid: Option<Spanned<String>>,
    /// `[server] nsid_hex`: the NSID as hex octets, instead of `nsid`.
    #[serde(default)]
    pub nsid_hex: Option<Spanned<String>>,
    /// `[server] identity`: the CH TXT answer to `id.server` and
    /// `hostname.bind` (default: the host name; "" turns them off).
    #[serde(default)]
    pub identity: Option<Spanned<String>>,
    /// `[server] query_log`: the dnstap query log's sink, `file:PATH` or
    /// `unix:PATH` (off when absent; see docs/src/ops/query-log.md).
    #[serde(default)]
    pub query_log: Option<Spanned<String>>,
    /// `[server] query_log_sample`: log one query in N (default 1: all).
    #[serde(default)]
    pub query_log_sample: Option<Spanned<i64>>,
    /// `[server] version`: the CH TXT answer to `version.bind` (off when absent).
    #[serde(default)]
    pub version: Option<Spanned<String>>,
}

/// `[server.rrl]`: responses per second per client prefix, over UDP only.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RrlCfg {
    /// `[server.rrl] responses_per_second`: responses per second allowed to
    /// one client prefix (at least 1); one second's worth may come at once.
    pub responses_per_second: Spanned<u32>,
    /// `[server.rrl] slip`: every N-th limited response is sent truncated
    /// (TC=1); 0 drops them all (default 2).
    #[serde(default)]
    pub slip: Option<Spanned<u32>>,
    /// `[server.rrl] ipv4_prefix`: IPv4 clients in one prefix of this length share a limit (0..=32; default 24).
    #[serde(default)]
    pub ipv4_prefix: Option<Spanned<u8>>,
    /// `[server.rrl] ipv6_prefix`: IPv6 clients in one prefix of this length share a limit (0..=128; default 56).
    #[serde(default)]
    pub ipv6_prefix: Option<Spanned<u8>>,
    /// `[server.rrl] table_size`: buckets per UDP worker, 2..=4194304 (rounded
    /// up to a power of two; default 65 536).
    #[serde(default)]
    pub table_size: Option<Spanned<usize>>,
    /// `[server.rrl] cookie_secret`: the DNS Cookie secret (RFC 9018), 32 hex
    /// digits; random at start when absent. Change it and reload to rotate.
    #[serde(default)]
    pub cookie_secret: Option<Spanned<String>>,
}

impl Default for ServerCfg {
    fn default() -> Self {
        ServerCfg {
            listen: default_listen(),
            workers: default_workers(),
            edns_udp_payload: default_payload(),
            log: default_log(),
            tcp_idle_timeout_ms: default_tcp_idle(),
            tcp_max_connections: default_tcp_max(),
            http_listen: None,
            tcp_read_timeout_ms: default_tcp_read(),
            tcp_max_queries: default_tcp_queries(),
            user: None,
            allow_root: false,
            rrl: None,
            nsid: None,
            nsid_hex: None,
            identity: None,
            version: None,
            query_log: None,
            query_log_sample: None,
        }
    }
}

fn default_listen() -> Vec<Spanned<String>> {
    vec![Spanned::new(0..0, "127.0.0.1:5380".to_string())]
}
fn default_payload() -> Spanned<u16> {
    Spanned::new(0..0, 1232)
}
fn default_workers() -> Spanned<usize> {
    Spanned::new(0..0, 0)
}
fn default_log() -> Spanned<String> {
    Spanned::new(0..0, "info".into())
}
fn default_tcp_idle() -> Spanned<u64> {
    Spanned::new(0..0, 10_000)
}
fn default_tcp_max() -> Spanned<usize> {
    Spanned::new(0..0, 512)
}
fn default_tcp_read() -> Spanned<u64> {
    Spanned::new(0..0, 2_000)
}
fn default_tcp_queries() -> Spanned<usize> {
    Spanned::new(0..0, 10_000)
}

/// `[geo]`: the MaxMind-format database that geo rules look clients up in.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeoCfg {
    /// `[geo] database`: path of the `.mmdb` file, relative to the config file's folder.
    pub database: Spanned<String>,
    /// `[geo] schema`: the record layout, `auto` (default: told apart by the
    /// database type and records), `maxmind` or `flat`.
    #[serde(default = "default_schema")]
    pub schema: Spanned<String>,
}

fn default_schema() -> Spanned<String> {
    Spanned::new(0..0, "auto".into())
}

/// `[[zone]]`: one served zone.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneCfg {
    /// `origin`: the zone's apex name (the trailing dot is optional).
    pub origin: String,
    /// `file`: the zone's master file, relative to the config file's folder.
    pub file: Spanned<String>,
    /// `dnssec`: the zone's keys and signing settings; unsigned when absent.
    #[serde(default)]
    pub dnssec: Option<Spanned<DnssecCfg>>,
}

/// `[[zone]] dnssec = { ... }`: checked into
/// [`ZoneDnssec`](super::dnssec::ZoneDnssec).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnssecCfg {
    /// `keys`: the zone's key pairs, as paths of their `.key` files or base
    /// names (`Kexample.test.+013+12345`), relative to the config file's
    /// folder (at least one).
    pub keys: Spanned<Vec<Spanned<String>>>,
    /// `signature_validity`: how long an RRSIG is valid, 1h..=90d
    /// (default "14d").
    #[serde(default)]
    pub signature_validity: Option<Spanned<String>>,
    /// `refresh`: re-sign this long before a signature expires; less than
    /// `signature_validity` (default "7d").
    #[serde(default)]
    pub refresh: Option<Spanned<String>>,
    /// `denial`: how non-existence is proven: `compact` (RFC 9824, the
    /// default and for now the only one).
    #[serde(default)]
    pub denial: Option<Spanned<String>>,
    /// `publish`: key pairs whose DNSKEY is published but that do not sign
    /// (a ZSK before or after its turn in a pre-publish rollover).
    #[serde(default)]
    pub publish: Option<Spanned<Vec<Spanned<String>>>>,
    /// `max_subsets`: most RRsets a `some K` pool may need signed, C(n, K)
    /// per family (default 4096).
    #[serde(default)]
    pub max_subsets: Option<Spanned<u64>>,
}

/// `[pool.NAME]`: a set of addresses answered together.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolCfg {
    /// `members`: the pool's addresses, IPv4 and IPv6 (at least one,
    /// unless `members_from` brings them).
    #[serde(default)]
    pub members: Option<Vec<Spanned<MemberCfg>>>,
    /// `members_from`: `"etcd"` takes members from the fleet's registry too.
    #[serde(default)]
    pub members_from: Option<Spanned<String>>,
    /// `members_grace`: how long a vanished registration stays ejected
    /// before it leaves (default 30 s).
    #[serde(default)]
    pub members_grace: Option<Spanned<toml::Value>>,
    /// `location`: coordinates `[latitude, longitude]` in degrees, for
    /// `nearest` geo rules.
    #[serde(default)]
    pub location: Option<[f64; 2]>,
    /// `check`: default health check of the members (a key of `[check]`, or
    /// `none`).
    #[serde(default)]
    pub check: Option<Spanned<String>>,
    /// `min_up`: members that must be up for the pool to count as up: a whole
    /// count (>= 1) or a fraction in (0, 1) of the family's members (default 1).
    #[serde(default)]
    pub min_up: Option<f64>,
    /// `max_ejected`: most members the checks may take out of a family: a
    /// whole count (>= 1) or a fraction in (0, 1] (default: no cap).
    #[serde(default)]
    pub max_ejected: Option<Spanned<toml::Value>>,
    /// `panic_below`: answer with every member the operator did not take
    /// out when the share passing their checks is below this (0, 1].
    #[serde(default)]
    pub panic_below: Option<Spanned<f64>>,
    /// `slow_start`: ramp a member that comes up over this long (seconds,
    /// or a string such as "30s", "2m").
    #[serde(default)]
    pub slow_start: Option<Spanned<toml::Value>>,
    /// `slow_start_min`: where the ramp starts, a fraction of the weight
    /// in [0, 1) (default 0.1).
    #[serde(default)]
    pub slow_start_min: Option<Spanned<f64>>,
    /// `latency_aware`: scale weights by check round-trip time.
    #[serde(default)]
    pub latency_aware: Option<bool>,
    /// `latency_floor`: the lowest latency factor, in (0, 1] (default 0.1).
    #[serde(default)]
    pub latency_floor: Option<Spanned<f64>>,
    /// `error_penalty`: scale checked members' weights by their probes'
    /// success ratio (default true).
    #[serde(default)]
    pub error_penalty: Option<bool>,
    /// `outlier_detection`: eject members whose success ratio is an outlier.
    #[serde(default)]
    pub outlier_detection: Option<Spanned<bool>>,
    /// `outlier_k`: standard deviations below the mean (default 1.9).
    #[serde(default)]
    pub outlier_k: Option<Spanned<f64>>,
    /// `outlier_min_members`: members with enough samples to judge (default 5).
    #[serde(default)]
    pub outlier_min_members: Option<Spanned<i64>>,
    /// `outlier_min_samples`: probes a member needs to be judged (default 10).
    #[serde(default)]
    pub outlier_min_samples: Option<Spanned<i64>>,
    /// `outlier_ejection`: the first ejection's length (default "30s").
    #[serde(default)]
    pub outlier_ejection: Option<Spanned<toml::Value>>,
}

/// A pool member: `"192.0.2.1"` or `{ address = "192.0.2.1", weight = 5 }`.
#[derive(Debug)]
pub enum MemberCfg {
    /// A plain address string: weight 1, the pool's check.
    Addr(String),
    /// The table form `{ address, weight, check, port }`.
    Full {
        /// `address`: the member's IPv4 or IPv6 address.
        address: String,
        /// `weight`: relative weight, 1..=65535 (default 1).
        weight: Option<i64>,
        /// `check`: the member's own check (a key of `[check]`, or `none`), instead of the pool's.
        check: Option<String>,
        /// `port`: port the health check connects to, instead of the check's.
        port: Option<u16>,
    },
}

/// The table form of a member; strict, so a misspelt key is an error.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemberTable {
    address: String,
    #[serde(default)]
    weight: Option<i64>,
    #[serde(default)]
    check: Option<String>,
    #[serde(default)]
    port: Option<u16>,
}

// Hand-written rather than `untagged`, so errors name the bad key or value
// (and its line) instead of "did not match any variant".
impl<'de> Deserialize<'de> for MemberCfg {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = MemberCfg;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an address string or a table { address, weight, check, port }")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<MemberCfg, E> {
                Ok(MemberCfg::Addr(s.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<MemberCfg, A::Error> {
                let t = MemberTable::deserialize(serde::de::value::MapAccessDeserializer::new(m))?;
                Ok(MemberCfg::Full {
                    address: t.address,
                    weight: t.weight,
                    check: t.check,
                    port: t.port,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// `[name."NAME"]`: a name in a served zone answered from pools; it has either `pool` or `geo`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NameCfg {
    /// `pool`: the pool answering the name (a plain pool-backed name).
    #[serde(default)]
    pub pool: Option<Spanned<String>>,
    /// `[name."NAME".geo]`: geo rules choosing the pools (a geo-balanced name).
    #[serde(default)]
    pub geo: Option<GeoRulesCfg>,
    /// `mode`: how members are picked: `all` (default), `rotate`, `one` or `some`.
    #[serde(default = "default_mode")]
    pub mode: Spanned<String>,
    /// `count`: how many members `some` returns, 1..=8 (default 2).
    #[serde(default)]
    pub count: Option<Spanned<i64>>,
    /// `ttl`: TTL of the answers in seconds, 1..=86400 (default 30).
    #[serde(default)]
    pub ttl: Option<Spanned<i64>>,
    /// `degraded_ttl`: TTL in seconds while members or pools are down,
    /// 1..=86400 (default the smaller of 10 and `ttl`).
    #[serde(default)]
    pub degraded_ttl: Option<Spanned<i64>>,
    /// `when_all_down`: the answer when every pool is down: `all` (default:
    /// fail open), `empty` (NODATA) or `servfail`.
    #[serde(default)]
    pub when_all_down: Option<Spanned<String>>,
    /// `spillover`: overprovisioning factor (1..=10, e.g. 1.4) for geo
    /// failover lists: pool i keeps min(1, healthy share × factor) of its
    /// clients and the rest spills to the next (default: hard failover).
    #[serde(default)]
    pub spillover: Option<Spanned<f64>>,
    /// `sticky`: `one` and `some` only: the same client block gets the same
    /// members (weighted rendezvous hashing). Default false.
    #[serde(default)]
    pub sticky: Option<Spanned<bool>>,
    /// `sticky_prefix`: `[IPv4, IPv6]` prefix lengths of a client block,
    /// 1..=32 and 1..=128 (default `[24, 56]`); only with `sticky = true`.
    #[serde(default)]
    pub sticky_prefix: Option<Spanned<Vec<Spanned<i64>>>>,
    /// `pick`: how `one` picks: `weighted` (default) or `p2c` (two drawn
    /// by weight, the lower check round-trip ÷ weight kept).
    #[serde(default)]
    pub pick: Option<Spanned<String>>,
}

fn default_mode() -> Spanned<String> {
    Spanned::new(0..0, "all".into())
}

/// `[name."NAME".geo]`: geo rules. Each value is a failover list of pool
/// names. Precedence: `nets` (longest prefix), then `subdivision`,
/// `country`, `continent` (or `nearest` instead of those three), then
/// `default`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeoRulesCfg {
    /// `default`: pools for clients no other rule matches (required).
    pub default: Option<Vec<Spanned<String>>>,
    /// `nets`: CIDR networks to pools; the longest prefix wins.
    #[serde(default)]
    pub nets: BTreeMap<String, Vec<Spanned<String>>>,
    /// `subdivision`: ISO 3166-2 codes ("US-CA") to pools; keys are case-insensitive.
    #[serde(default)]
    pub subdivision: BTreeMap<String, Vec<Spanned<String>>>,
    /// `country`: ISO 3166-1 alpha-2 codes ("DE") to pools; keys are case-insensitive.
    #[serde(default)]
    pub country: BTreeMap<String, Vec<Spanned<String>>>,
    /// `continent`: continent codes (AF, AN, AS, EU, NA, OC, SA) to pools.
    #[serde(default)]
    pub continent: BTreeMap<String, Vec<Spanned<String>>>,
    /// `nearest`: pools with a `location`, given to each client ordered by
    /// distance from it; replaces the subdivision, country and continent rules.
    #[serde(default)]
    pub nearest: Option<Vec<Spanned<String>>>,
}

/// `[check.NAME]`: a health check, as written; checked into `health::Check`.
#[derive(Debug, Deserialize, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CheckCfg {
    /// `type`: `tcp`, `http`, `https` or `none`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `port`: port to probe; a member's own `port` wins (default: http 80, https 443; tcp needs one).
    #[serde(default)]
    pub port: Option<u16>,
    /// `interval_ms`: time between probe starts, in ms (10 ms to 1 day; default 10 000).
    #[serde(default)]
    pub interval_ms: Option<u64>,
    /// `timeout_ms`: a slower probe fails, in ms; less than the interval (default min(3 s, interval / 2)).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// `interval`: `interval_ms` in seconds (`interval = 10`, `interval = 0.5`).
    #[serde(default)]
    pub interval: Option<f64>,
    /// `timeout`: `timeout_ms` in seconds.
    #[serde(default)]
    pub timeout: Option<f64>,
    /// `rise`: passed probes in a row that bring a member up (1..=1000; default 2).
    #[serde(default)]
    pub rise: Option<u32>,
    /// `fall`: failed probes in a row that take a member down (1..=1000; default 3).
    #[serde(default)]
    pub fall: Option<u32>,
    /// `path`: HTTP request path, starting with `/` (http and https; default `/`).
    #[serde(default)]
    pub path: Option<String>,
    /// `host`: HTTP Host header and TLS server name (default the member's address).
    #[serde(default)]
    pub host: Option<String>,
    /// `expect_status`: accepted status codes or ranges (`"200"`, `"204-299"`; default `["200-399"]`).
    #[serde(default)]
    pub expect_status: Option<Vec<String>>,
    /// `expect_body`: a string the response body must contain.
    #[serde(default)]
    pub expect_body: Option<String>,
    /// `tls_verify`: verify the certificate and name, https only (default true).
    #[serde(default)]
    pub tls_verify: Option<bool>,
    /// `unknown_is_up`: count a member as up before its first result (default true).
    #[serde(default)]
    pub unknown_is_up: Option<bool>,
    /// `latency_decay`: time constant of the round-trip estimate's decay,
    /// `"10s"`, `"500ms"` or a number of seconds (default 10 s).
    #[serde(default)]
    pub latency_decay: Option<Spanned<DurationCfg>>,
    /// `load_header`: read the backend's load (0..1) from this response header (http, https).
    #[serde(default)]
    pub load_header: Option<Spanned<String>>,
    /// `load_json`: read the backend's load from this top-level number field of a JSON body.
    #[serde(default)]
    pub load_json: Option<Spanned<String>>,
    /// `load_smoothing`: the new figure's weight in the load EWMA, in (0, 1] (default 0.5).
    #[serde(default)]
    pub load_smoothing: Option<Spanned<f64>>,
    /// `load_max_step`: most change of the load per check, in (0, 1] (default 0.1).
    #[serde(default)]
    pub load_max_step: Option<Spanned<f64>>,
}

/// A duration as written: a number of seconds or a text like `"10s"`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum DurationCfg {
    /// Seconds, fractions allowed.
    Seconds(f64),
    /// humantime text: `"10s"`, `"500ms"`, `"1m 30s"`.
    Text(String),
}
