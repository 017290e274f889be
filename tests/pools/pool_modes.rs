//! The four pool modes against the running server, measured over many
//! queries: `one` by weight, `all` as a uniform shuffle of the whole set
//! (a weighted one when weights differ: first by weight, then by weight
//! among the rest),
//! `rotate` as an exact (smooth weighted) round robin, `some` as weighted
//! sampling without replacement.
//!
//! Tolerances: with N queries a share p has standard deviation
//! sqrt(p(1-p)/N). The bounds below (±1.5 points over 20,000 queries,
//! ±2 points over 10,000) are all beyond 4 standard deviations, so a
//! correct server fails them with probability well under 1e-4 per check,
//! while a wrong weighting (e.g. with replacement, or ignoring weights)
//! misses them by several points.
//!
//! The harness starts the server with `--workers 1`: rotation cursors are
//! per worker thread, so the exact orders hold for one worker.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use crate::common::Server;
use crate::pool_common::*;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

/// Every pool answer: NOERROR, AA, only `rtype` records, all with `ttl`.
fn check_pool_answer(a: &Answer, rtype: RecordType, ttl: u32) {
    assert_eq!(a.rcode(), ResponseCode::NoError, "{:?}", a.msg);
    assert!(a.aa(), "AA must be set on a pool answer: {:?}", a.msg);
    assert!(!a.addrs.is_empty(), "empty pool answer: {:?}", a.msg);
    assert!(a.types().iter().all(|t| *t == rtype), "{:?}", a.msg);
    assert!(
        a.ttls().iter().all(|t| *t == ttl),
        "TTL must be {ttl}: {:?}",
        a.msg
    );
}

fn assert_near(what: &str, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: measured {got:.2}%, expected {want:.2}% ± {tol}"
    );
}

#[test]
fn one_picks_by_weight_5_1_1() {
    let s = Server::example();
    let mut c = Client::new(&s);
    let members = ips(&["192.0.2.30", "192.0.2.31", "192.0.2.32"]);
    let n = 20_000;
    let mut counts: HashMap<IpAddr, usize> = HashMap::new();
    c.run("one.example.test.", RecordType::A, n, |a| {
        check_pool_answer(a, RecordType::A, 30);
        assert_eq!(
            a.addrs.len(),
            1,
            "mode one answers one member: {:?}",
            a.addrs
        );
        assert!(members.contains(&a.addrs[0]), "{:?}", a.addrs);
        *counts.entry(a.addrs[0]).or_default() += 1;
    });
    let sh = shares(&counts, n);
    eprintln!(
        "one 5/1/1 over {n}: {:.2}% / {:.2}% / {:.2}%",
        sh[&members[0]], sh[&members[1]], sh[&members[2]]
    );
    for (m, w) in members.iter().zip([5.0, 1.0, 1.0]) {
        assert_near(&format!("share of {m}"), sh[m], 100.0 * w / 7.0, 1.5);
    }
}

#[test]
fn all_is_the_whole_set_in_uniform_random_order() {
    let s = Server::example();
    let mut c = Client::new(&s);
    let set = ips(&["192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.13"]);
    let n = 10_000;
    // (member, position) counts, and whole orders.
    let mut at: HashMap<(IpAddr, usize), usize> = HashMap::new();
    let mut orders: HashMap<Vec<IpAddr>, usize> = HashMap::new();
    c.run("shuffle.example.test.", RecordType::A, n, |a| {
        check_pool_answer(a, RecordType::A, 30);
        let mut sorted = a.addrs.clone();
        sorted.sort();
        assert_eq!(sorted, set, "every member exactly once: {:?}", a.addrs);
        for (pos, m) in a.addrs.iter().enumerate() {
            *at.entry((*m, pos)).or_default() += 1;
        }
        *orders.entry(a.addrs.clone()).or_default() += 1;
    });
    let sh = shares(&at, n);
    let firsts: Vec<String> = set
        .iter()
        .map(|m| format!("{:.2}%", sh[&(*m, 0)]))
        .collect();
    eprintln!("all, first member over {n}: {}", firsts.join(" / "));
    for m in &set {
        for pos in 0..set.len() {
            assert_near(&format!("{m} at position {pos}"), sh[&(*m, pos)], 25.0, 2.0);
        }
    }
    // All 24 orders occur, equally often: Pearson's chi-square with 23
    // degrees of freedom has mean 23 and exceeds 60 with probability < 1e-4
    // (a naive swap-with-any-position shuffle scores about 300 here).
    assert_eq!(orders.len(), 24, "every order of 4 members should occur");
    let expect = n as f64 / 24.0;
    let chi2: f64 = orders
        .values()
        .map(|&k| (k as f64 - expect).powi(2) / expect)
        .sum();
    eprintln!("all, chi-square of the 24 orders: {chi2:.1} (23 dof)");
    assert!(
        chi2 < 60.0,
        "orders not uniform: chi-square {chi2:.1}: {orders:?}"
    );
}

/// `v` rotated left by `k`.
fn rotated(v: &[IpAddr], k: usize) -> Vec<IpAddr> {
    let mut r = v.to_vec();
    r.rotate_left(k % v.len());
    r
}

#[test]
fn rotate_equal_weights_is_an_exact_cycle_per_family() {
    let s = Server::start(&fixture("modes.toml"), &[]);
    let mut c = Client::new(&s);
    let v4 = ips(&["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"]);
    let v6 = ips(&["2001:db8::1", "2001:db8::2", "2001:db8::3"]);
    let name = "rotate-equal.pools.test.";
    // A and AAAA interleaved: each family has its own cursor.
    for i in 0..1200 {
        let a = c.ask(name, RecordType::A);
        check_pool_answer(&a, RecordType::A, 30);
        assert_eq!(a.addrs, rotated(&v4, i), "A response {i}");
        if i % 2 == 0 {
            let j = i / 2;
            let a = c.ask(name, RecordType::AAAA);
            check_pool_answer(&a, RecordType::AAAA, 30);
            assert_eq!(a.addrs, rotated(&v6, j), "AAAA response {j}");
        }
    }
}

#[test]
fn rotate_weighted_5_1_1_is_smooth_a_a_b_a_c_a_a() {
    let s = Server::example();
    let mut c = Client::new(&s);
    let set = ips(&["192.0.2.20", "192.0.2.21", "192.0.2.22"]);
    let pattern = [0, 0, 1, 0, 2, 0, 0];
    let mut firsts = Vec::new();
    for i in 0..7 * 300 {
        let a = c.ask("rotate.example.test.", RecordType::A);
        check_pool_answer(&a, RecordType::A, 30);
        let want = pattern[i % 7];
        // The whole set, in cyclic order from the chosen first member.
        assert_eq!(
            a.addrs,
            rotated(&set, want),
            "response {i} (pattern a a b a c a a)"
        );
        firsts.push(want);
    }
    let seq: Vec<&str> = firsts[..7].iter().map(|&i| ["a", "b", "c"][i]).collect();
    eprintln!("rotate 5/1/1 firsts: {}", seq.join(" "));
}

#[test]
fn rotate_weighted_follows_reference_smooth_round_robin() {
    let s = Server::start(&fixture("modes.toml"), &[]);
    let mut c = Client::new(&s);
    let set = ips(&["192.0.2.11", "192.0.2.12", "192.0.2.13", "192.0.2.14"]);
    let weights = [4, 3, 2, 1];
    let want = swrr(&weights, 1000);
    // One period: a b c a b d a c b a (ties to the earlier member).
    assert_eq!(&want[..10], &[0, 1, 2, 0, 1, 3, 0, 2, 1, 0]);
    let mut count = [0usize; 4];
    for (i, &w) in want.iter().enumerate() {
        let a = c.ask("rotate-4321.pools.test.", RecordType::A);
        check_pool_answer(&a, RecordType::A, 30);
        assert_eq!(a.addrs, rotated(&set, w), "response {i}");
        count[w] += 1;
    }
    // Exactly proportional to weight over whole periods.
    assert_eq!(count, [400, 300, 200, 100]);
}

/// Run `some` and compare subset frequencies with the exact probabilities.
fn some_matches_sampling(
    s: &Server,
    name: &str,
    set: &[IpAddr],
    weights: &[f64],
    k: usize,
    n: usize,
    tol: f64,
) {
    let mut c = Client::new(s);
    let mut subsets: HashMap<Vec<usize>, usize> = HashMap::new();
    let mut firsts: HashMap<usize, usize> = HashMap::new();
    c.run(name, RecordType::A, n, |a| {
        check_pool_answer(a, RecordType::A, 30);
        assert_eq!(a.addrs.len(), k, "some returns {k}: {:?}", a.addrs);
        let idx: Vec<usize> = a
            .addrs
            .iter()
            .map(|m| {
                set.iter()
                    .position(|x| x == m)
                    .unwrap_or_else(|| panic!("{m} not in pool"))
            })
            .collect();
        let distinct: HashSet<usize> = idx.iter().copied().collect();
        assert_eq!(distinct.len(), k, "members must be distinct: {:?}", a.addrs);
        let mut sorted = idx.clone();
        sorted.sort();
        *subsets.entry(sorted).or_default() += 1;
        *firsts.entry(idx[0]).or_default() += 1;
    });
    let exact = subset_probs(weights, k);
    let mut report = Vec::new();
    for (sub, p) in &exact {
        let got = 100.0 * *subsets.get(sub).unwrap_or(&0) as f64 / n as f64;
        report.push(format!("{sub:?} {got:.2}% (exact {:.2}%)", 100.0 * p));
        assert_near(&format!("{name} subset {sub:?}"), got, 100.0 * p, tol);
    }
    report.sort();
    eprintln!("{name} K={k} over {n}: {}", report.join(", "));
    // Random order: a member is first in half (K=2), a third (K=3)... of
    // the responses that include it.
    for i in 0..set.len() {
        let incl: f64 = exact
            .iter()
            .filter(|(s, _)| s.contains(&i))
            .map(|(_, p)| p)
            .sum();
        let got = 100.0 * *firsts.get(&i).unwrap_or(&0) as f64 / n as f64;
        assert_near(
            &format!("{name} member {i} first"),
            got,
            100.0 * incl / k as f64,
            tol,
        );
    }
}

#[test]
fn some_weighted_1_2_3_4_pairs_match_sampling_without_replacement() {
    let s = Server::start(&fixture("modes.toml"), &[]);
    let set = ips(&["192.0.2.21", "192.0.2.22", "192.0.2.23", "192.0.2.24"]);
    // Exact pairs: {1,2} 4.72%, {1,3} 7.62%, {1,4} 11.11%, {2,3} 16.07%,
    // {2,4} 23.33%, {3,4} 37.14%. (With replacement, or ignoring the
    // weights, several of these move by more than 3 points.)
    some_matches_sampling(
        &s,
        "some-1234.pools.test.",
        &set,
        &[1.0, 2.0, 3.0, 4.0],
        2,
        20_000,
        1.5,
    );
}

#[test]
fn some_weighted_three_of_four() {
    let s = Server::start(&fixture("modes.toml"), &[]);
    let set = ips(&["192.0.2.21", "192.0.2.22", "192.0.2.23", "192.0.2.24"]);
    // Exact: {1,2,3} 7.78%, {1,2,4} 12.98%, {1,3,4} 24.13%, {2,3,4} 55.12%.
    some_matches_sampling(
        &s,
        "some3-1234.pools.test.",
        &set,
        &[1.0, 2.0, 3.0, 4.0],
        3,
        20_000,
        1.5,
    );
}

#[test]
fn some_example_two_of_four_equal_weights() {
    let s = Server::example();
    let set = ips(&["192.0.2.40", "192.0.2.41", "192.0.2.42", "192.0.2.43"]);
    // Each of the 6 pairs 16.67%.
    some_matches_sampling(&s, "some.example.test.", &set, &[1.0; 4], 2, 10_000, 2.0);
}

#[test]
fn some_with_count_above_the_pool_size_returns_every_member() {
    let s = Server::start(&fixture("modes.toml"), &[]);
    let set = ips(&["192.0.2.31", "192.0.2.32", "192.0.2.33"]);
    // count = 8 of 3 members: all three, each first a third of the time.
    some_matches_sampling(
        &s,
        "some8-three.pools.test.",
        &set,
        &[1.0; 3],
        3,
        3_000,
        4.0,
    );
}

#[test]
fn all_weighted_4_3_2_1_is_a_weighted_shuffle() {
    let s = Server::start(&fixture("modes.toml"), &[]);
    let mut c = Client::new(&s);
    let set = ips(&["192.0.2.11", "192.0.2.12", "192.0.2.13", "192.0.2.14"]);
    let w = [4.0, 3.0, 2.0, 1.0];
    let n = 20_000;
    let mut pairs: HashMap<(IpAddr, IpAddr), usize> = HashMap::new();
    c.run("all-4321.pools.test.", RecordType::A, n, |a| {
        check_pool_answer(a, RecordType::A, 30);
        let mut sorted = a.addrs.clone();
        sorted.sort();
        assert_eq!(sorted, set, "every member exactly once: {:?}", a.addrs);
        *pairs.entry((a.addrs[0], a.addrs[1])).or_default() += 1;
    });
    let sh = shares(&pairs, n);
    let total: f64 = w.iter().sum();
    for (i, a) in set.iter().enumerate() {
        // The first address follows the weights: most clients use it.
        let first: f64 = sh.iter().filter(|((f, _), _)| f == a).map(|(_, p)| p).sum();
        assert_near(&format!("{a} first"), first, 100.0 * w[i] / total, 1.5);
        // The second: by weight among those left.
        for (j, b) in set.iter().enumerate().filter(|&(j, _)| j != i) {
            let want = 100.0 * w[i] / total * w[j] / (total - w[i]);
            let got = sh.get(&(*a, *b)).copied().unwrap_or(0.0);
            assert_near(&format!("{a} then {b}"), got, want, 1.5);
        }
    }
}

#[test]
fn one_weighted_1_2_3_4() {
    let s = Server::start(&fixture("modes.toml"), &[]);
    let set = ips(&["192.0.2.21", "192.0.2.22", "192.0.2.23", "192.0.2.24"]);
    some_matches_sampling(
        &s,
        "one-1234.pools.test.",
        &set,
        &[1.0, 2.0, 3.0, 4.0],
        1,
        20_000,
        1.5,
    );
}

#[test]
fn rotate_keeps_one_cursor_per_pool_behind_a_geo_name() {
    // Clients alternate between two pools of different sizes behind one
    // name: each pool's rotation must go on as if it were alone.
    let s = Server::start(&fixture("modes.toml"), &[]);
    let mut c = Client::new(&s);
    let left = ips(&["192.0.2.81", "192.0.2.82", "192.0.2.83"]);
    let right = ips(&["192.0.2.91", "192.0.2.92"]);
    for (i, w) in swrr(&[2, 1], 300).into_iter().enumerate() {
        let a = c.ask_q(
            &crate::common::Q::new("geo-rotate.pools.test.", RecordType::A).ecs("81.1.2.0/24"),
        );
        check_pool_answer(&a, RecordType::A, 30);
        assert_eq!(a.addrs, rotated(&left, i), "left response {i}");
        let a = c.ask_q(
            &crate::common::Q::new("geo-rotate.pools.test.", RecordType::A).ecs("82.1.2.0/24"),
        );
        check_pool_answer(&a, RecordType::A, 30);
        assert_eq!(a.addrs, rotated(&right, w), "right response {i}");
    }
}
