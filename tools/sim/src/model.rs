//! The world around one real `Engine`: resolvers with TTL caches, backends
//! with a capacity, and health checks run in simulated time. Everything
//! the engine decides, it decides with its own code; this module only
//! feeds it inputs and turns its answers into traffic.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
use hickory_proto::rr::{Name, RData, RecordType};
use meridian::answer::{Outcome, Scratch, Transport};
use meridian::engine::{Engine, WeightMap};
use meridian::health::signal::{success_tau, SuccessEwma};
use meridian::health::{DampedLoad, PeakEwma, DOWN, UP};
use meridian::pool::{Selector, Standing};

/// The one name every scenario balances.
pub(crate) const QNAME: &str = "www.sim.test.";

/// Latency of a backend whose queue grows without bound (utilisation at
/// or above 1): every check times out.
pub(crate) const SATURATED_MS: f64 = 5_000.0;

/// A request served slower than this counts as slow, ms.
pub(crate) const SLOW_MS: f64 = 200.0;

/// Time constant of the checks' peak-EWMA (the server's default, `latency_decay`).
pub(crate) const EWMA_TAU_S: f64 = 10.0;

/// How long a resolver keeps a SERVFAIL (or an answer without an address
/// and without an SOA to take a TTL from), seconds.
pub(crate) const SERVFAIL_CACHE_S: u64 = 5;

/// The synthetic wall clock's epoch (2026-01-01): `last_change` times are
/// this plus simulated time, so the ejection cap's "down longest" order is
/// the simulated order.
fn wall(t_ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600) + Duration::from_millis(t_ms)
}

/// A temporary folder for one scenario's config and zone, removed on drop.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    /// A new, empty folder under the system's temporary folder.
    pub(crate) fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("meridian-sim-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create a temporary folder");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The member addresses: 10.0.0.1, 10.0.0.2, ...
pub(crate) fn member_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, (i / 250) as u8, (i % 250 + 1) as u8)
}

/// Write a config with one pool of `members` members (checked by TCP on
/// port 80, every 2 s, timeout 1 s, rise 2, fall 3) bound to [`QNAME`],
/// with extra `[pool.web]` and `[name]` keys. Returns its path.
pub(crate) fn write_config(
    dir: &Path,
    members: &[Ipv4Addr],
    pool_keys: &str,
    name_keys: &str,
) -> PathBuf {
    write_config_with(dir, members, &[], pool_keys, name_keys)
}

/// As [`write_config`]; with `backup` members, a second pool `backup` (the
/// same check) and [`QNAME`] a geo name whose default failover list is
/// `["web", "backup"]` (no database needed: every client gets `default`).
pub(crate) fn write_config_with(
    dir: &Path,
    members: &[Ipv4Addr],
    backup: &[Ipv4Addr],
    pool_keys: &str,
    name_keys: &str,
) -> PathBuf {
    std::fs::write(
        dir.join("sim.test.zone"),
        "$ORIGIN sim.test.\n$TTL 3600\n\
         @ IN SOA ns1.sim.test. hostmaster.sim.test. 1 7200 1800 1209600 5\n\
         @ IN NS ns1\nns1 IN A 192.0.2.53\n",
    )
    .expect("write the zone");
    let list = |a: &[Ipv4Addr]| -> String {
        a.iter()
            .map(|a| format!("\"{a}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let name = QNAME.trim_end_matches('.');
    let (binding, extra) = if backup.is_empty() {
        ("pool = \"web\"\n".to_string(), String::new())
    } else {
        (
            String::new(),
            format!(
                "\n[name.\"{name}\".geo]\ndefault = [\"web\", \"backup\"]\n\n\
                 [pool.backup]\ncheck = \"tcp\"\nmembers = [{}]\n{pool_keys}\n",
                list(backup)
            ),
        )
    };
    let text = format!(
        "# Written by meridian-sim.\n\
         [server]\nlog = \"warn\"\n\n\
         [[zone]]\norigin = \"sim.test.\"\nfile = \"sim.test.zone\"\n\n\
         [check.tcp]\ntype = \"tcp\"\nport = 80\ninterval = 2\ntimeout = 1\nrise = 2\nfall = 3\n\n\
         [pool.web]\ncheck = \"tcp\"\nmembers = [{}]\n{pool_keys}\n\n\
         [name.\"{name}\"]\n{binding}mode = \"one\"\nttl = 30\n{name_keys}\n{extra}",
        list(members),
    );
    let p = dir.join("meridian.toml");
    std::fs::write(&p, text).expect("write the config");
    p
}

/// A query for `name` A with an ECS option for `block`/`len` (real bytes,
/// built by hickory-proto as benches/answer.rs does).
pub(crate) fn query(name: &str, block: Ipv4Addr, len: u8) -> Vec<u8> {
    let mut m = Message::new(0x5151, MessageType::Query, OpCode::Query);
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    let mut e = Edns::new();
    e.set_max_payload(1232);
    e.options_mut().insert(EdnsOption::Subnet(ClientSubnet::new(
        IpAddr::V4(block),
        len,
        0,
    )));
    m.set_edns(e);
    m.to_vec().expect("encode a query")
}

/// What a resolver takes from one response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Parsed {
    /// The first address (None: no address: SERVFAIL, NODATA).
    pub(crate) addr: Option<Ipv4Addr>,
    /// How long to cache it, seconds.
    pub(crate) ttl: u32,
    /// The ECS scope prefix length.
    pub(crate) scope: u8,
}

/// Parse a response the way a resolver caches it: first A record and its
/// TTL, else the SOA's TTL for a negative answer, else a short SERVFAIL
/// hold; and the ECS scope.
pub(crate) fn parse(resp: &[u8]) -> Parsed {
    let m = Message::from_vec(resp).expect("meridian's response parses");
    let scope = m
        .edns
        .as_ref()
        .and_then(|e| match e.option(EdnsCode::Subnet) {
            Some(EdnsOption::Subnet(s)) => Some(s.scope_prefix()),
            _ => None,
        })
        .unwrap_or(0);
    if m.metadata.response_code == ResponseCode::NoError {
        for r in &m.answers {
            if let RData::A(a) = &r.data {
                return Parsed {
                    addr: Some(a.0),
                    ttl: r.ttl,
                    scope,
                };
            }
        }
        if let Some(soa) = m
            .authorities
            .iter()
            .find(|r| matches!(r.data, RData::SOA(_)))
        {
            return Parsed {
                addr: None,
                ttl: soa.ttl,
                scope,
            };
        }
    }
    Parsed {
        addr: None,
        ttl: SERVFAIL_CACHE_S as u32,
        scope,
    }
}

/// One cached answer of a resolver.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The client block the answer covers, masked to `scope`.
    block: u32,
    scope: u8,
    /// The backend it points to (None: no usable address).
    backend: Option<usize>,
    expires_ms: u64,
}

/// A resolver: its clients' steady request rate, their ECS block, and its
/// cache, keyed by (name, scope block) (one name here).
struct Resolver {
    rate: f64,
    client: u32,
    query: Vec<u8>,
    cache: Vec<Entry>,
}

impl Resolver {
    fn lookup(&self, now_ms: u64) -> Option<&Entry> {
        self.cache.iter().find(|e| {
            let mask = if e.scope == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(e.scope.min(32)))
            };
            e.expires_ms > now_ms && self.client & mask == e.block
        })
    }
}

/// A backend: what it can serve and how fast.
#[derive(Debug, Clone)]
pub(crate) struct Backend {
    /// Requests per second it serves when warm.
    pub(crate) capacity: f64,
    /// Its latency when idle, ms.
    pub(crate) base_ms: f64,
    /// A failed deploy: every request and every check fails (fast).
    pub(crate) broken: bool,
    /// Cold caches: capacity starts at `.2` × capacity at time `.0` (ms)
    /// and warms linearly to full over `.1` ms.
    pub(crate) warm: Option<(u64, u64, f64)>,
    /// Requests per second sent to it in the last step.
    pub(crate) load: f64,
    /// The fraction of its requests it fails, fast (a sick member); 0: none.
    pub(crate) errors: f64,
    /// How its checks see `errors` (issue #31).
    pub(crate) check_errors: CheckErrors,
}

/// How a member's checks see the requests it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum CheckErrors {
    /// Not at all: a shallow check (a TCP connect) passes.
    #[default]
    Shallow,
    /// Each check fails with the probability a request does (a deep check).
    Deep,
    /// Every other check fails, never two in a row (the flapping case).
    Alternate,
}

impl Backend {
    /// A warm backend.
    pub(crate) fn new(capacity: f64, base_ms: f64) -> Backend {
        Backend {
            capacity,
            base_ms,
            broken: false,
            warm: None,
            load: 0.0,
            errors: 0.0,
            check_errors: CheckErrors::Shallow,
        }
    }

    /// Capacity at `t_ms`.
    pub(crate) fn capacity_at(&self, t_ms: u64) -> f64 {
        match self.warm {
            Some((from, over, min)) if t_ms < from + over => {
                let f = t_ms.saturating_sub(from) as f64 / over as f64;
                self.capacity * (min + (1.0 - min) * f)
            }
            _ => self.capacity,
        }
    }

    /// Latency at `t_ms` under its last load: base ÷ (1 − utilisation),
    /// saturated at and above full utilisation (the queue grows).
    pub(crate) fn latency_ms(&self, t_ms: u64) -> f64 {
        let u = self.load / self.capacity_at(t_ms).max(1e-9);
        if u >= 1.0 {
            SATURATED_MS
        } else {
            (self.base_ms / (1.0 - u)).min(SATURATED_MS)
        }
    }
}

/// One member's health check, run in simulated time with the interval,
/// timeout, rise and fall of the engine's own parsed check.
struct Check {
    health: u32,
    interval_ms: u64,
    timeout_ms: f64,
    rise: u32,
    fall: u32,
    next_ms: u64,
    ok_run: u32,
    fail_run: u32,
    /// The server's own round-trip estimate (`health::PeakEwma`, the type
    /// the checker keeps), fed with the simulated probes' durations on the
    /// synthetic clock (`epoch` + simulated ms), and handed to
    /// `Engine::rebalance_with` as `rtt`.
    ewma: PeakEwma,
    epoch: Instant,
    /// The server's own damped load figure (`health::DampedLoad`, default
    /// damping), fed with the backend's utilisation at each passing check
    /// when the setup reports load, and handed to `rebalance_with` as `load`.
    load: DampedLoad,
    /// The server's own success ratio (`health::signal::SuccessEwma`, the
    /// checker's τ for this interval), fed by every check and published in
    /// the engine's table as the checker does.
    success: SuccessEwma,
    /// Checks run (the alternate pattern's phase).
    runs: u64,
}

impl Check {
    fn sample(&mut self, s: f64, now_ms: u64) {
        self.ewma
            .update(s, self.epoch + Duration::from_millis(now_ms));
    }

    fn rtt_est_s(&self) -> Option<f64> {
        self.ewma.estimate()
    }
}

/// One simulated second.
#[derive(Debug, Clone, Default)]
pub(crate) struct Row {
    /// Seconds since the start.
    pub(crate) t: u64,
    /// Each member's share of all requests.
    pub(crate) share: Vec<f64>,
    /// Each member's utilisation (requests ÷ capacity).
    pub(crate) util: Vec<f64>,
    /// Share of requests sent to a failed member or to an overloaded one
    /// (at or above its capacity), or left without an address.
    pub(crate) bad: f64,
    /// Mean latency of the requests served, ms.
    pub(crate) latency_ms: f64,
    /// Share of all requests served slower than [`SLOW_MS`].
    pub(crate) slow: f64,
    /// Members the engine's last decision lets answers use (pool `web`).
    pub(crate) usable: usize,
    /// The pool is in panic.
    pub(crate) panic: bool,
    /// Members kept by the ejection cap.
    pub(crate) kept_by_cap: usize,
}

/// The engine and everything around it.
pub(crate) struct World {
    /// The engine under test (built from a real config file).
    pub(crate) engine: Engine,
    /// Every backend, in member order.
    pub(crate) backends: Vec<Backend>,
    /// Per member: its checks fail whatever its backend does (a broken
    /// health endpoint).
    pub(crate) checks_broken: Vec<bool>,
    /// Draws the deep checks' failures.
    rng: fastrand::Rng,
    resolvers: Vec<Resolver>,
    checks: Vec<Check>,
    addrs: Vec<Ipv4Addr>,
    /// Backends report their utilisation as load.
    report_load: bool,
    /// Index of pool `web` in the engine.
    pub(crate) web: usize,
    scratch: Scratch,
    buf: Vec<u8>,
    outcome: Outcome,
    t_ms: u64,
    /// Per-second rows so far.
    pub(crate) rows: Vec<Row>,
    /// Queries the engine answered.
    pub(crate) queries: u64,
    _dir: TempDir,
}

/// How to build a [`World`].
pub(crate) struct Setup {
    /// Capacity (req/s) and idle latency (ms) of each member.
    pub(crate) backends: Vec<Backend>,
    /// Extra `[pool.web]` keys.
    pub(crate) pool_keys: String,
    /// Extra `[name]` keys.
    pub(crate) name_keys: String,
    /// Total client request rate, req/s.
    pub(crate) load: f64,
    /// Resolvers the clients sit behind.
    pub(crate) resolvers: usize,
    /// Seed of every random choice (the engine's selector included).
    pub(crate) seed: u64,
    /// Members that start failed (a broken deploy, checks down).
    pub(crate) down: Vec<usize>,
    /// The last this many backends form a second pool, `backup`, after
    /// `web` in a geo name's failover list (0: one pool, a pool name).
    pub(crate) backup: usize,
    /// Backends report their utilisation as load (through `DampedLoad`).
    pub(crate) report_load: bool,
}

impl World {
    /// Build the engine from a config written for `s`, mark every member
    /// up (a warm start), and give each resolver an answer that expires at
    /// a random point of its TTL (as if resolved earlier).
    pub(crate) fn new(tag: &str, s: Setup) -> World {
        let dir = TempDir::new(tag);
        let addrs: Vec<Ipv4Addr> = (0..s.backends.len()).map(member_addr).collect();
        let split = addrs.len() - s.backup;
        let cfg = write_config_with(
            &dir.0,
            &addrs[..split],
            &addrs[split..],
            &s.pool_keys,
            &s.name_keys,
        );
        let engine = match Engine::load(&cfg) {
            Ok(e) => e,
            Err(e) => panic!("the simulator's config does not load: {e}"),
        };
        let web = engine
            .pools
            .iter()
            .position(|p| p.name == "web")
            .expect("pool web");
        // Every member of every pool, in backend (address) order.
        let members: Vec<&meridian::pool::Member> = addrs
            .iter()
            .map(|a| {
                engine
                    .pools
                    .iter()
                    .flat_map(|p| p.v4.iter())
                    .find(|m| m.addr == IpAddr::V4(*a))
                    .expect("every backend is a member")
            })
            .collect();
        let mut rng = fastrand::Rng::with_seed(s.seed);
        let epoch = Instant::now();
        let checks = members
            .iter()
            .map(|m| {
                let c = engine.checks[m.health as usize]
                    .check
                    .clone()
                    .expect("every member is checked");
                Check {
                    health: m.health,
                    interval_ms: c.interval_ms,
                    timeout_ms: c.timeout_ms as f64,
                    rise: c.rise,
                    fall: c.fall,
                    next_ms: rng.u64(..c.interval_ms),
                    ok_run: c.rise,
                    fail_run: 0,
                    ewma: PeakEwma::new(Duration::from_secs_f64(EWMA_TAU_S)),
                    epoch,
                    load: DampedLoad::default(),
                    success: SuccessEwma::new(success_tau(c.interval_ms)),
                    runs: 0,
                }
            })
            .collect::<Vec<_>>();
        for (i, c) in checks.iter().enumerate() {
            let st = if s.down.contains(&i) { DOWN } else { UP };
            engine.health.set_state(c.health, st);
            engine.health.stats(c.health).detail().last_change = Some(wall(0));
        }
        let rate = s.load / s.resolvers as f64;
        let resolvers = (0..s.resolvers)
            .map(|r| {
                // A /24 of its own per resolver: 20.0.0.0/24, 20.0.1.0/24, ...
                let client = (20u32 << 24) | ((r as u32) << 8);
                Resolver {
                    rate,
                    client,
                    query: query(QNAME, Ipv4Addr::from(client), 24),
                    cache: Vec::new(),
                }
            })
            .collect();
        let scratch = Scratch {
            selector: Selector::with_rng(fastrand::Rng::with_seed(s.seed ^ 0x5eed)),
            ..Scratch::default()
        };
        let n = s.backends.len();
        let mut backends = s.backends;
        for &i in &s.down {
            backends[i].broken = true;
        }
        let mut checks = checks;
        for &i in &s.down {
            checks[i].ok_run = 0;
            checks[i].fail_run = checks[i].fall;
        }
        let mut w = World {
            engine,
            backends,
            checks_broken: vec![false; n],
            rng: fastrand::Rng::with_seed(s.seed ^ 0xe77),
            resolvers,
            checks,
            addrs,
            report_load: s.report_load,
            web,
            scratch,
            buf: vec![0u8; 4096],
            outcome: Outcome::default(),
            t_ms: 0,
            rows: Vec::new(),
            queries: 0,
            _dir: dir,
        };
        w.rebalance();
        for r in 0..w.resolvers.len() {
            w.resolve(r);
            let ttl_ms = w.resolvers[r].cache[0].expires_ms;
            w.resolvers[r].cache[0].expires_ms = 1 + rng.u64(..ttl_ms.max(1));
        }
        w
    }

    fn set_state(&self, h: u32, s: u8) {
        let health = &self.engine.health;
        if health.state(h) != s {
            // As the checker does: the detail lock, then the state.
            let mut d = health.stats(h).detail();
            d.last_change = Some(wall(self.t_ms));
            health.set_state(h, s);
        }
    }

    /// The engine's decision, with the input model's latency estimates:
    /// the same call the daemon's refresher makes, at simulated time.
    fn rebalance(&self) {
        let est: Vec<(u32, Option<f64>)> = self
            .checks
            .iter()
            .map(|c| (c.health, c.rtt_est_s()))
            .collect();
        let rtt = |h: u32| est.iter().find(|e| e.0 == h).and_then(|e| e.1);
        let loads: Vec<(u32, Option<f64>)> = self
            .checks
            .iter()
            .map(|c| (c.health, c.load.value()))
            .collect();
        let load = |h: u32| loads.iter().find(|e| e.0 == h).and_then(|e| e.1);
        self.engine
            .rebalance_with(&WeightMap::default(), self.t_ms + 1, &rtt, &load, |_| true);
    }

    /// Ask the engine for resolver `r` (real query bytes through
    /// `Engine::answer`) and cache the answer by its TTL and scope.
    fn resolve(&mut self, r: usize) {
        let t = Transport {
            src: IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1)),
            tcp: false,
        };
        let res = &mut self.resolvers[r];
        let n = self
            .engine
            .answer(
                &res.query,
                t,
                &mut self.scratch,
                &mut self.buf,
                &mut self.outcome,
            )
            .expect("meridian answers");
        self.queries += 1;
        let p = parse(&self.buf[..n]);
        let backend = p.addr.and_then(|a| self.addrs.iter().position(|x| *x == a));
        let mask = if p.scope == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(p.scope.min(32)))
        };
        let e = Entry {
            block: res.client & mask,
            scope: p.scope,
            backend,
            expires_ms: self.t_ms + u64::from(p.ttl) * 1000,
        };
        res.cache.retain(|c| c.expires_ms > self.t_ms);
        res.cache.push(e);
    }

    /// Advance one second: checks due run against the backends' state,
    /// the engine decides, expired caches resolve again, and the clients'
    /// requests land on the backends.
    pub(crate) fn step(&mut self) {
        self.t_ms += 1000;
        let now = self.t_ms;
        // Checks, with the latency of the load of the last second.
        for i in 0..self.checks.len() {
            while self.checks[i].next_ms <= now {
                let at = self.checks[i].next_ms;
                let b = &self.backends[i];
                let lat = b.latency_ms(now);
                let c = &mut self.checks[i];
                c.runs += 1;
                let sick = match b.check_errors {
                    _ if b.errors <= 0.0 => false,
                    CheckErrors::Shallow => false,
                    CheckErrors::Deep => self.rng.f64() < b.errors,
                    CheckErrors::Alternate => c.runs.is_multiple_of(2),
                };
                let pass = !self.checks_broken[i] && !b.broken && !sick && lat < c.timeout_ms;
                // As the checker: a timeout does not count in the ratio.
                let fast = !self.checks_broken[i] && !b.broken && !sick;
                if pass || !(fast && lat >= c.timeout_ms) {
                    let ratio = c.success.update(pass, c.epoch + Duration::from_millis(at));
                    self.engine.health.set_success(c.health, Some(ratio));
                }
                let stats = self.engine.health.stats(c.health);
                stats
                    .checks
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // A failed deploy fails fast (and looks fast); an
                // overloaded one answers at its latency or times out.
                let rtt = if b.broken {
                    b.base_ms
                } else {
                    lat.min(c.timeout_ms)
                };
                c.sample(rtt / 1000.0, at);
                // A passing check reads the backend's reported load (as
                // the checker does: one figure per passing probe).
                if pass && self.report_load {
                    c.load.update(b.load / b.capacity_at(now).max(1e-9));
                }
                c.next_ms += c.interval_ms;
                let h = c.health;
                let state = if pass {
                    c.ok_run += 1;
                    c.fail_run = 0;
                    (c.ok_run >= c.rise).then_some(UP)
                } else {
                    c.fail_run += 1;
                    c.ok_run = 0;
                    (c.fail_run >= c.fall).then_some(DOWN)
                };
                if let Some(s) = state {
                    // As the checker does on a change of state.
                    match self.engine.health.state(h) {
                        x if x == s => {}
                        _ if s == UP => {
                            let r = c.success.came_up();
                            self.engine.health.set_success(h, Some(r));
                        }
                        _ => c.success.went_down(),
                    }
                    self.set_state(h, s);
                }
            }
        }
        self.rebalance();
        // Requests of this second.
        let mut load = vec![0.0; self.backends.len()];
        let mut unanswered = 0.0;
        for r in 0..self.resolvers.len() {
            if self.resolvers[r].lookup(now).is_none() {
                self.resolve(r);
            }
            let res = &self.resolvers[r];
            let e = res.lookup(now).expect("just cached");
            match e.backend {
                Some(b) => load[b] += res.rate,
                None => unanswered += res.rate,
            }
        }
        let total: f64 = load.iter().sum::<f64>() + unanswered;
        let mut bad = unanswered;
        let (mut lat_sum, mut served, mut slow) = (0.0, 0.0, 0.0);
        for (b, &l) in self.backends.iter_mut().zip(&load) {
            b.load = l;
            if b.broken {
                bad += l;
                continue;
            }
            let cap = b.capacity_at(now);
            let u = l / cap.max(1e-9);
            if u >= 1.0 {
                // Overloaded: its queue grows, so every request sent to it
                // waits behind it; count them all.
                bad += l;
                continue;
            }
            // A sick member fails part of its requests, fast.
            bad += l * b.errors;
            let ok = l * (1.0 - b.errors);
            let lat = (b.base_ms / (1.0 - u)).min(SATURATED_MS);
            lat_sum += ok * lat;
            served += ok;
            if lat > SLOW_MS {
                slow += ok;
            }
        }
        let web = &self.engine.pools[self.web];
        let report = web.report[0].snapshot();
        self.rows.push(Row {
            t: now / 1000,
            share: load.iter().map(|l| l / total.max(1e-9)).collect(),
            util: self
                .backends
                .iter()
                .map(|b| b.load / b.capacity_at(now).max(1e-9))
                .collect(),
            bad: bad / total.max(1e-9),
            latency_ms: if served > 0.0 { lat_sum / served } else { 0.0 },
            slow: slow / total.max(1e-9),
            usable: web.gate(false).usable as usize,
            panic: web.gate(false).panic,
            kept_by_cap: report
                .iter()
                .filter(|m| m.standing == Standing::KeptByCap)
                .count(),
        });
    }
}

/// Mean of `f` over the rows with `from <= t < to`.
/// One metric of a run's summary, named as its table shows it.
pub(crate) fn m(name: &str, v: f64) -> (String, f64) {
    (name.to_string(), v)
}

/// The fewest members answers could use in seconds `from..to`.
pub(crate) fn usable_min(rows: &[Row], from: u64, to: u64) -> f64 {
    rows.iter()
        .filter(|r| r.t >= from && r.t < to)
        .map(|r| r.usable as f64)
        .fold(f64::INFINITY, f64::min)
}

/// The pool named `name` of `engine` (the scenarios' configs have it).
pub(crate) fn pool<'a>(engine: &'a Engine, name: &str) -> &'a meridian::pool::Pool {
    engine
        .pools
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("pool {name}"))
}

pub(crate) fn mean(rows: &[Row], from: u64, to: u64, f: impl Fn(&Row) -> f64) -> f64 {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| r.t >= from && r.t < to)
        .map(f)
        .collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Largest `f` over the rows with `from <= t < to`.
pub(crate) fn peak(rows: &[Row], from: u64, to: u64, f: impl Fn(&Row) -> f64) -> f64 {
    rows.iter()
        .filter(|r| r.t >= from && r.t < to)
        .map(f)
        .fold(0.0, f64::max)
}
