//! The local resolver lab, cache correctness: Unbound (subnetcache) and
//! PowerDNS Recursor in front of meridian, each fed ECS client subnets from
//! every block of the example config, in adversarial orders, must hand every
//! client exactly the answer meridian gives for that client's subnet. And
//! clients inside one returned block must share one cached answer.
//!
//! Ground truth is meridian itself, asked directly with the ECS the
//! resolver sends upstream (the client's subnet truncated to /24 or /56,
//! `max-client-subnet-ipv4/6` and `ecs-ipv4/6-bits`). Answers are compared
//! as sorted address sets: geo.example.test uses mode `all`, shuffled.
//!
//! Every phase starts a fresh resolver (a cold cache), so the order of the
//! phase is the order the cache is filled in:
//!   small-first  clients in the smallest returned blocks first (203.0.0.0/25
//!                inside ordinary space, 5.2.0.0/17 US inside the DE/FR
//!                fragmented region), then the big blocks around them
//!   large-first  the reverse
//!   pairs        hand-picked small/large neighbours, both ways round
//!   seed N       seeded random orders
//!
//! Run with `cargo test --test lab lab_cache:: -- --nocapture` to see the numbers.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use hickory_proto::rr::RecordType;

use crate::lab_common::{ask, example_geo_networks, Answer, Kind, Meridian, Net, Resolver, Rng};

const NAME: &str = "geo.example.test.";
/// What the lab's resolvers send upstream at most (`max-client-subnet-*`, `ecs-ipv*-bits`).
const V4_BITS: u8 = 24;
const V6_BITS: u8 = 56;

/// One client query: the ECS subnet the client sends, and the type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Case {
    client: Net,
    qtype: u16,
}

impl Case {
    fn rtype(&self) -> RecordType {
        RecordType::from(self.qtype)
    }

    /// The ECS the resolver sends meridian for this client.
    fn upstream(&self) -> Net {
        self.client
            .truncate(if self.client.v6 { V6_BITS } else { V4_BITS })
    }
}

/// meridian's direct answer for an upstream subnet and type.
#[derive(Clone, Debug)]
struct Truth {
    addrs: Vec<String>,
    scope: u8,
}

impl Truth {
    /// The block meridian says the answer is good for.
    fn block(&self, upstream: Net) -> Net {
        Net::new(upstream.v6, upstream.addr, self.scope.min(upstream.bits()))
    }
}

struct GroundTruth {
    map: HashMap<(Net, u16), Truth>,
}

impl GroundTruth {
    fn get(&self, c: &Case) -> &Truth {
        &self.map[&(c.upstream(), c.qtype)]
    }
}

fn unit(v6: bool) -> u8 {
    if v6 {
        V6_BITS
    } else {
        V4_BITS
    }
}

/// The /24 (/56) that holds `a`, if `a` is a valid address of the family.
fn unit_at(v6: bool, a: Option<u128>) -> Option<Net> {
    let a = a?;
    if !v6 && a > 0xFFFF_FFFF {
        return None;
    }
    Some(Net::new(v6, a, unit(v6)))
}

/// The units at both ends of `n` and just outside it.
fn edges(n: Net) -> Vec<Net> {
    let v6 = n.v6;
    [
        unit_at(v6, Some(n.first())),
        unit_at(v6, Some(n.last())),
        unit_at(v6, n.first().checked_sub(1)),
        unit_at(v6, n.last().checked_add(1)),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Client subnets: every CSV network's edges and neighbours, a random unit
/// inside each, the split /24's halves and single addresses, private space,
/// seeded random units over the whole space, and longer client prefixes
/// that the resolvers truncate.
fn seed_clients() -> BTreeSet<Net> {
    let mut rng = Rng(0x6d65_7269_6469_616e);
    let mut out = BTreeSet::new();
    for (n, _) in example_geo_networks() {
        let u = unit(n.v6);
        if n.len <= u {
            out.extend(edges(n));
            let span = n.last() - n.first();
            let off = if span == u128::MAX {
                rng.next() as u128
            } else {
                (rng.next() as u128) % (span + 1)
            };
            out.insert(Net::new(n.v6, n.first() + off, u));
        } else {
            // Inside one unit (203.0.0.0/25, 203.0.0.128/25): the client sends
            // its /25 or /32; the resolver sends the whole /24.
            out.insert(n);
            out.insert(Net::new(n.v6, n.first(), n.bits()));
            out.insert(Net::new(n.v6, n.last(), n.bits()));
            out.insert(n.truncate(u));
        }
    }
    for s in [
        "10.1.2.0/24",
        "192.168.1.0/24",
        "172.16.5.0/24",
        "100.64.1.0/24",
        "fd00:1:2::/56",
    ] {
        out.insert(Net::parse(s));
    }
    for _ in 0..40 {
        let a = 0x0100_0000 + rng.below(0xE000_0000 - 0x0100_0000) as u128;
        out.insert(Net::new(false, a, 24));
    }
    for _ in 0..20 {
        let a = (0x2000u128 << 112) | ((rng.next() as u128) << 64 | rng.next() as u128) >> 3;
        out.insert(Net::new(true, a, 56));
    }
    // Longer client prefixes (the resolver truncates them to /24 and /56).
    for s in [
        "8.8.8.8/32",
        "5.2.200.7/32",
        "90.1.2.128/25",
        "200.160.3.3/28",
    ] {
        out.insert(Net::parse(s));
    }
    for s in [
        "2001:4860:1:2::/64",
        "2a00:1450:4001:1::1/128",
        "2804:14c:1:2::/64",
    ] {
        out.insert(Net::parse(s));
    }
    out
}

fn direct(m: &Meridian, upstream: Net, qtype: u16) -> Truth {
    let a = ask(
        m.addr(),
        NAME,
        RecordType::from(qtype),
        Some(&upstream.to_string()),
        false,
    );
    assert_eq!(
        a.rcode, 0,
        "meridian direct: {upstream} {qtype} rcode {}",
        a.rcode
    );
    let scope = a
        .scope
        .unwrap_or_else(|| panic!("meridian direct: no ECS echo for {upstream}"));
    Truth {
        addrs: a.addrs,
        scope,
    }
}

/// Ask meridian for every client's upstream subnet, then add the edges of
/// every block it returned (two rounds), so every block boundary the
/// clients touch is probed from both sides.
fn build_cases(m: &Meridian) -> (Vec<Case>, GroundTruth) {
    let mut clients = seed_clients();
    let mut map: HashMap<(Net, u16), Truth> = HashMap::new();
    for round in 0..3 {
        let mut added = BTreeSet::new();
        for c in &clients {
            for qtype in [1u16, 28] {
                let up = Case { client: *c, qtype }.upstream();
                if let std::collections::hash_map::Entry::Vacant(slot) = map.entry((up, qtype)) {
                    let t = slot.insert(direct(m, up, qtype));
                    if round < 2 && t.scope <= unit(up.v6) {
                        for e in edges(t.block(up)) {
                            if !clients.contains(&e) {
                                added.insert(e);
                            }
                        }
                    }
                }
            }
        }
        if added.is_empty() {
            break;
        }
        clients.extend(added);
    }
    let cases = clients
        .iter()
        .flat_map(|c| [1u16, 28].map(|qtype| Case { client: *c, qtype }))
        .collect();
    (cases, GroundTruth { map })
}

/// Leading bits two networks' addresses share.
fn common_prefix(a: Net, b: Net) -> u32 {
    let shift = if a.v6 { 0 } else { 96 };
    ((a.addr << shift) ^ (b.addr << shift))
        .leading_zeros()
        .min(a.bits() as u32)
}

/// One wrong answer, for the failure message.
struct Wrong {
    line: String,
}

struct PhaseResult {
    name: String,
    queries: usize,
    wrong: Vec<Wrong>,
    upstream: u64,
}

fn run_phase(
    kind: Kind,
    m: &Meridian,
    truth: &GroundTruth,
    name: &str,
    order: &[Case],
) -> PhaseResult {
    let r = Resolver::start(kind, m.addr(), &["example.test."]);
    let before = m.settled_queries();
    let mut wrong = Vec::new();
    for (i, c) in order.iter().enumerate() {
        let t = truth.get(c);
        let got: Answer = ask(r.addr, NAME, c.rtype(), Some(&c.client.to_string()), true);
        if got.rcode != 0 || got.addrs != t.addrs {
            // Which earlier answer in this phase would explain it? The
            // earlier client that got this answer from meridian and is
            // nearest to this one (longest common prefix): most likely the
            // cache entry the resolver reused.
            let culprit = order[..i]
                .iter()
                .enumerate()
                .rev()
                .filter(|(_, p)| {
                    p.qtype == c.qtype && p.client.v6 == c.client.v6 && truth.get(p).addrs == got.addrs
                })
                .max_by_key(|(j, p)| (common_prefix(p.client, c.client), *j))
                .map(|(_, p)| {
                    format!(
                        "; likely the cached answer of client {} (meridian scope /{}, {} bits in common)",
                        p.client,
                        truth.get(p).scope,
                        common_prefix(p.client, c.client)
                    )
                })
                .unwrap_or_default();
            wrong.push(Wrong {
                line: format!(
                    "WRONG via {} [phase {name}, query #{}]: client {} {} got {:?} (rcode {}), meridian says {:?} for {} (scope /{}){culprit}",
                    kind.name(),
                    i + 1,
                    c.client,
                    c.rtype(),
                    got.addrs,
                    got.rcode,
                    t.addrs,
                    c.upstream(),
                    t.scope,
                ),
            });
        }
    }
    let after = m.settled_queries();
    drop(r);
    PhaseResult {
        name: name.to_string(),
        queries: order.len(),
        wrong,
        upstream: after - before,
    }
}

/// Hand-picked neighbours: a small block and the larger blocks around it,
/// small first and then large first.
fn pairs() -> Vec<Case> {
    let groups: &[&[&str]] = &[
        // The split /24: JP /25 inside ordinary (default) space, AU /25 beside it.
        &[
            "203.0.0.0/25",
            "203.0.0.128/25",
            "203.0.1.0/24",
            "202.255.255.0/24",
            "203.1.0.0/24",
        ],
        // US /17 inside the DE/FR fragmented region.
        &[
            "5.2.0.0/24",
            "5.2.127.0/24",
            "5.2.128.0/24",
            "5.0.0.0/24",
            "5.1.255.0/24",
            "5.3.0.0/24",
        ],
        // US /9 and CA-subdivision /10, then the default space after them.
        &[
            "8.128.0.0/24",
            "8.0.0.0/24",
            "8.127.255.0/24",
            "8.192.0.0/24",
            "9.0.0.0/24",
            "7.255.255.0/24",
        ],
        // DE-Berlin /15 inside nothing, then its neighbours.
        &[
            "85.214.0.0/24",
            "85.215.255.0/24",
            "85.213.255.0/24",
            "85.216.0.0/24",
        ],
        // IPv6: DE /37 and its surroundings.
        &[
            "2a00:1450:4000::/56",
            "2a00:1450:47ff:ff00::/56",
            "2a00:1450:3fff:ff00::/56",
            "2a00:1450:4800::/56",
        ],
    ];
    let mut out = Vec::new();
    for g in groups {
        for reverse in [false, true] {
            let mut v: Vec<&str> = g.to_vec();
            if reverse {
                v.reverse();
            }
            for s in v {
                for qtype in [1u16, 28] {
                    out.push(Case {
                        client: Net::parse(s),
                        qtype,
                    });
                }
            }
        }
    }
    out
}

fn check_resolver(kind: Kind) {
    let m = Meridian::start(&crate::common::example_config());
    let (cases, mut truth) = build_cases(&m);
    let pair_cases = pairs();
    for c in &pair_cases {
        let up = c.upstream();
        truth
            .map
            .entry((up, c.qtype))
            .or_insert_with(|| direct(&m, up, c.qtype));
    }

    // Coverage: every rule of the example config is among the answers.
    let clients: BTreeSet<Net> = cases.iter().map(|c| c.client).collect();
    let a_sets: BTreeSet<Vec<String>> = cases
        .iter()
        .filter(|c| c.qtype == 1)
        .map(|c| truth.get(c).addrs.clone())
        .collect();
    for (rule, addr) in [
        ("NA", "192.0.2.100"),
        ("EU", "198.51.100.100"),
        ("AS", "203.0.113.100"),
        ("SA", "203.0.113.200"),
        ("default", "192.0.2.200"),
    ] {
        assert!(
            a_sets.iter().any(|s| s.iter().any(|a| a == addr)),
            "no client subnet reached the {rule} rule ({addr})"
        );
    }
    let scopes: BTreeMap<u8, usize> = truth.map.values().fold(BTreeMap::new(), |mut acc, t| {
        *acc.entry(t.scope).or_default() += 1;
        acc
    });
    assert!(
        clients.len() >= 200,
        "only {} client subnets",
        clients.len()
    );
    println!(
        "{}: {} client subnets ({} IPv4, {} IPv6), {} queries per phase (A and AAAA), {} distinct A answer sets; meridian scopes seen: {:?}",
        kind.name(),
        clients.len(),
        clients.iter().filter(|c| !c.v6).count(),
        clients.iter().filter(|c| c.v6).count(),
        cases.len(),
        a_sets.len(),
        scopes
    );

    let mut phases: Vec<(String, Vec<Case>)> = Vec::new();
    let mut small_first = cases.clone();
    small_first.sort_by_key(|c| (std::cmp::Reverse(truth.get(c).scope), *c));
    let mut large_first = cases.clone();
    large_first.sort_by_key(|c| (truth.get(c).scope, *c));
    phases.push(("small-first".into(), small_first));
    phases.push(("large-first".into(), large_first));
    phases.push(("pairs".into(), pair_cases));
    for seed in [1u64, 2, 3] {
        let mut v = cases.clone();
        Rng(seed).shuffle(&mut v);
        phases.push((format!("seed {seed}"), v));
    }

    let mut report = String::new();
    let mut total = 0;
    let mut wrong = Vec::new();
    for (name, order) in &phases {
        let r = run_phase(kind, &m, &truth, name, order);
        let _ = writeln!(
            report,
            "  {:<12} {:>5} client queries, {:>3} wrong, {:>4} reached meridian",
            r.name,
            r.queries,
            r.wrong.len(),
            r.upstream
        );
        total += r.queries;
        wrong.extend(r.wrong);
    }
    println!(
        "{}: {total} answers checked, {} wrong\n{report}",
        kind.name(),
        wrong.len()
    );
    if !wrong.is_empty() {
        let mut msg = String::new();
        for w in wrong.iter().take(25) {
            let _ = writeln!(msg, "{}", w.line);
        }
        panic!(
            "{} of {total} answers through {} differ from meridian's direct answer:\n{msg}{report}",
            wrong.len(),
            kind.name()
        );
    }
}

#[test]
fn unbound_never_serves_a_wrong_cached_answer() {
    if !crate::common::need(
        "unbound_never_serves_a_wrong_cached_answer",
        &["unbound", "pdns_recursor", "dig"],
    ) {
        return;
    }
    check_resolver(Kind::Unbound);
}

#[test]
fn recursor_never_serves_a_wrong_cached_answer() {
    if !crate::common::need(
        "recursor_never_serves_a_wrong_cached_answer",
        &["unbound", "pdns_recursor", "dig"],
    ) {
        return;
    }
    check_resolver(Kind::Recursor);
}

/// 20 clients in different /24s (/56s) inside one block meridian returned
/// share one cached answer: meridian sees about one query, not 20. Clients
/// in 20 different blocks each reach meridian.
#[test]
fn clients_inside_one_returned_block_share_the_cache() {
    if !crate::common::need(
        "clients_inside_one_returned_block_share_the_cache",
        &["unbound", "pdns_recursor", "dig"],
    ) {
        return;
    }
    let m = Meridian::start(&crate::common::example_config());
    let mut report = String::new();
    for kind in Kind::ALL {
        for (seed, qtype) in [
            ("8.8.8.0/24", RecordType::A),
            ("2600:1:2::/56", RecordType::AAAA),
        ] {
            let seed = Net::parse(seed);
            let t = direct(&m, seed, u16::from(qtype));
            let block = t.block(seed);
            let u = unit(seed.v6);
            assert!(block.len + 5 <= u, "block {block} too small for 20 units");
            // 20 units spread over the block.
            let step = ((block.last() - block.first()) >> (seed.bits() - u)) / 20;
            let inside: Vec<Net> = (0..20u128)
                .map(|i| {
                    Net::new(
                        seed.v6,
                        block.first() + ((i * step) << (seed.bits() - u)),
                        u,
                    )
                })
                .collect();
            let r = Resolver::start(kind, m.addr(), &["example.test."]);
            let before = m.settled_queries();
            for n in &inside {
                let a = ask(r.addr, NAME, qtype, Some(&n.to_string()), true);
                assert_eq!(
                    a.addrs,
                    t.addrs,
                    "{} gave {n} a different answer",
                    kind.name()
                );
            }
            let same = m.settled_queries() - before;
            let _ = writeln!(
                report,
                "  {:<13} {qtype:<4} 20 clients inside {block} (scope /{}): meridian saw {same} quer{}",
                kind.name(),
                t.scope,
                if same == 1 { "y" } else { "ies" }
            );
            assert!(
                same <= 2,
                "{}: 20 clients inside {block} made meridian answer {same} queries; the resolver did not cache at the returned scope /{}",
                kind.name(),
                t.scope
            );
        }

        // Control: 20 clients in 20 different returned blocks.
        let (cases, truth) = {
            let mut v = Vec::new();
            let mut blocks: Vec<Net> = Vec::new();
            let mut map = HashMap::new();
            let mut rng = Rng(99);
            while v.len() < 20 {
                let c = Net::new(false, 0x0100_0000 + rng.below(0xDF00_0000) as u128, 24);
                let t = direct(&m, c, 1);
                let b = t.block(c);
                if blocks
                    .iter()
                    .any(|x| x.contains(c.addr) || b.contains(x.addr))
                {
                    continue;
                }
                blocks.push(b);
                map.insert(c, t);
                v.push(c);
            }
            (v, map)
        };
        let r = Resolver::start(kind, m.addr(), &["example.test."]);
        let before = m.settled_queries();
        for c in &cases {
            let a = ask(r.addr, NAME, RecordType::A, Some(&c.to_string()), true);
            assert_eq!(
                a.addrs,
                truth[c].addrs,
                "{} gave {c} a different answer",
                kind.name()
            );
        }
        let diff = m.settled_queries() - before;
        let _ = writeln!(
            report,
            "  {:<13} A    20 clients in 20 different blocks: meridian saw {diff} queries",
            kind.name()
        );
        assert!(
            diff >= 18,
            "{}: 20 clients in 20 blocks made only {diff} queries",
            kind.name()
        );
    }
    println!("cache sharing (meridian_queries_total deltas):\n{report}");
}
