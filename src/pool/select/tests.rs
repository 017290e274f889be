//! Unit tests of member selection: shuffles, rotation, rendezvous, p2c
//! and its noise floor.

use super::*;
use std::net::IpAddr;

fn members(weights: &[u32]) -> Vec<Member> {
    weights
        .iter()
        .enumerate()
        .map(|(i, &w)| Member::new(IpAddr::from([192, 0, 2, i as u8 + 1]), w, i as u32))
        .collect()
}

#[test]
fn smooth_weighted_round_robin_order() {
    let m = members(&[5, 1, 1]);
    let rot = Rotation::new(&m);
    assert_eq!(rot.order()[..], [0, 0, 1, 0, 2, 0, 0]);
    let mut out = [0u16; MAX_MEMBERS];
    let mut sel = Selector::with_rng(fastrand::Rng::with_seed(7));
    let firsts: Vec<u16> = (0..14)
        .map(|_| {
            select(&mut sel, &m, &rot, Mode::Rotate, &|_| true, None, &mut out);
            out[0]
        })
        .collect();
    assert_eq!(firsts, [0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0]);
}

#[test]
fn selectors_share_the_pool_order() {
    // Two threads' selectors, one pool: one sequence between them.
    let m = members(&[5, 1, 1]);
    let rot = Rotation::new(&m);
    let mut out = [0u16; MAX_MEMBERS];
    let mut sels = [
        Selector::with_rng(fastrand::Rng::with_seed(1)),
        Selector::with_rng(fastrand::Rng::with_seed(2)),
    ];
    let firsts: Vec<u16> = (0..7)
        .map(|i| {
            select(
                &mut sels[i % 2],
                &m,
                &rot,
                Mode::Rotate,
                &|_| true,
                None,
                &mut out,
            );
            out[0]
        })
        .collect();
    assert_eq!(firsts, [0, 0, 1, 0, 2, 0, 0]);
}

#[test]
fn large_weights_are_reduced_and_scaled() {
    let rot = Rotation::new(&members(&[4000, 2000, 2000]));
    assert_eq!(rot.order()[..], [0, 1, 2, 0]);
    let rot = Rotation::new(&members(&[65535, 65534, 3]));
    assert!(rot.order().len() as u64 <= crate::pool::MAX_PERIOD + 3);
    assert!(rot.order().contains(&2));
}

#[test]
fn rotate_skips_members_that_are_down() {
    let m = members(&[1, 1, 1]);
    let rot = Rotation::new(&m);
    let mut out = [0u16; MAX_MEMBERS];
    let mut sel = Selector::with_rng(fastrand::Rng::with_seed(7));
    let up = |x: &Member| x.health != 1;
    let firsts: Vec<u16> = (0..6)
        .map(|_| {
            assert_eq!(
                select(&mut sel, &m, &rot, Mode::Rotate, &up, None, &mut out),
                2
            );
            assert_ne!(out[1], 1);
            out[0]
        })
        .collect();
    // Order 0 1 2: the turn of member 1 goes to the next one up.
    assert_eq!(firsts, [0, 2, 2, 0, 2, 2]);
}

fn pool(weights: &[u32]) -> crate::pool::Pool {
    let mut p = crate::pool::Pool {
        name: "p".into(),
        v4: members(weights),
        v6: Vec::new(),
        location: None,
        min_up: 1.0,
        rotation: Default::default(),
        policy: Default::default(),
        gate: Default::default(),
        report: Default::default(),
    };
    p.seal();
    p
}

/// Publish weights `f(member)` × configured, every member usable.
fn reweigh(p: &crate::pool::Pool, f: impl Fn(&Member) -> f64) -> bool {
    let w: Vec<crate::pool::Published> =
        p.v4.iter()
            .map(|m| {
                let e = (f64::from(m.weight) * f(m) * crate::pool::WEIGHT_UNIT as f64) as u64;
                crate::pool::Published {
                    eff: if f(m) > 0.0 { e.max(1) } else { 0 },
                    usable: true,
                    rtt_us: 0,
                }
            })
            .collect();
    p.publish(false, &w, p.gate(false))
}

#[test]
fn reweigh_publishes_weights_and_order() {
    let p = pool(&[1, 1]);
    assert_eq!(p.rotation(false).order()[..], [0, 1]);
    // Runtime factor 3 on member 0: 3:1, smooth.
    assert!(reweigh(&p, |m| if m.health == 0 { 3.0 } else { 1.0 }));
    assert_eq!(p.v4[0].effective(), 3 * crate::pool::WEIGHT_UNIT);
    assert_eq!(p.rotation(false).order()[..], [0, 0, 1, 0]);
    assert!(!reweigh(&p, |m| if m.health == 0 { 3.0 } else { 1.0 }));
    // Factor 0: never leads, never picked while another is usable.
    reweigh(&p, |m| if m.health == 0 { 0.0 } else { 1.0 });
    assert_eq!(p.rotation(false).order()[..], [1]);
    let mut out = [0u16; MAX_MEMBERS];
    let mut sel = Selector::with_rng(fastrand::Rng::with_seed(3));
    for mode in [Mode::One, Mode::Rotate] {
        for _ in 0..200 {
            let rot = p.rotation(false);
            select(&mut sel, &p.v4, rot, mode, &|_| true, None, &mut out);
            assert_eq!(out[0], 1, "{mode}");
        }
    }
    // Only weight-0 members usable: picked as if equal, never nothing.
    let only0 = |m: &Member| m.health == 0;
    for mode in [Mode::One, Mode::Rotate, Mode::Some(2)] {
        let rot = p.rotation(false);
        assert_eq!(
            select(&mut sel, &p.v4, rot, mode, &only0, None, &mut out),
            1
        );
        assert_eq!(out[0], 0);
    }
    // Every member at 0: equal shares.
    reweigh(&p, |_| 0.0);
    assert_eq!(p.rotation(false).order()[..], [0, 1]);
    let mut seen = [0; 2];
    for _ in 0..1000 {
        select(
            &mut sel,
            &p.v4,
            p.rotation(false),
            Mode::One,
            &|_| true,
            None,
            &mut out,
        );
        seen[out[0] as usize] += 1;
    }
    assert!(seen[0] > 400 && seen[1] > 400, "{seen:?}");
    // Back to the configured weights: the configured period again.
    let p = pool(&[2, 1]);
    reweigh(&p, |m| if m.health == 1 { 2.0 } else { 1.0 });
    assert_eq!(p.rotation(false).order()[..], [0, 1]);
    reweigh(&p, |_| 1.0);
    assert_eq!(p.rotation(false).order()[..], [0, 1, 0]);
}

#[test]
fn some_is_distinct() {
    let m = members(&[1, 2, 3, 4]);
    let mut out = [0u16; MAX_MEMBERS];
    let mut sel = Selector::with_rng(fastrand::Rng::with_seed(7));
    for _ in 0..1000 {
        let n = select(
            &mut sel,
            &m,
            &Rotation::default(),
            Mode::Some(2),
            &|_| true,
            None,
            &mut out,
        );
        assert_eq!(n, 2);
        assert_ne!(out[0], out[1]);
    }
}

/// Is `k` of `n` within 4.5 binomial sigmas of share `p`?
fn near(k: usize, n: usize, p: f64) -> bool {
    let mean = n as f64 * p;
    let sigma = (n as f64 * p * (1.0 - p)).sqrt();
    (k as f64 - mean).abs() <= 4.5 * sigma.max(1.0)
}

fn sealed(weights: &[u32]) -> (Vec<Member>, Rotation) {
    let m = members(weights);
    let r = Rotation::new(&m);
    (m, r)
}

#[test]
fn weighted_all_first_and_second_follow_the_weights() {
    let w = [5.0, 3.0, 1.0, 1.0];
    let (m, rot) = sealed(&[5, 3, 1, 1]);
    assert!(!rot.even());
    let mut out = [0u16; MAX_MEMBERS];
    let mut sel = Selector::with_rng(fastrand::Rng::with_seed(11));
    let n = 40_000;
    let (mut first, mut second) = ([0usize; 4], [0usize; 4]);
    for _ in 0..n {
        assert_eq!(
            select(&mut sel, &m, &rot, Mode::All, &|_| true, None, &mut out),
            4
        );
        let mut seen = out[..4].to_vec();
        seen.sort();
        assert_eq!(seen, [0, 1, 2, 3]);
        first[out[0] as usize] += 1;
        second[out[1] as usize] += 1;
    }
    let total: f64 = w.iter().sum();
    for i in 0..4 {
        assert!(near(first[i], n, w[i] / total), "first {i}: {first:?}");
        // Second: drawn by weight among those left after the first.
        let p2: f64 = (0..4)
            .filter(|&j| j != i)
            .map(|j| w[j] / total * w[i] / (total - w[j]))
            .sum();
        assert!(near(second[i], n, p2), "second {i}: {second:?}");
    }
}

#[test]
fn all_with_equal_weights_is_a_uniform_shuffle() {
    let (m, rot) = sealed(&[2, 2, 2]);
    assert!(rot.even());
    // And the weighted path gives the same distribution when the flag
    // is not set (a default rotation).
    for rot in [rot, Rotation::default()] {
        let mut out = [0u16; MAX_MEMBERS];
        let mut sel = Selector::with_rng(fastrand::Rng::with_seed(5));
        let n = 30_000;
        let mut at = [[0usize; 3]; 3];
        for _ in 0..n {
            select(&mut sel, &m, &rot, Mode::All, &|_| true, None, &mut out);
            for pos in 0..3 {
                at[pos][out[pos] as usize] += 1;
            }
        }
        for row in at {
            for k in row {
                assert!(near(k, n, 1.0 / 3.0), "{at:?}");
            }
        }
    }
}

#[test]
fn all_puts_weight_zero_last_and_never_drops_it() {
    let p = pool(&[1, 1, 1]);
    reweigh(&p, |m| if m.health == 1 { 1.0 } else { 0.0 });
    assert!(!p.rotation(false).even());
    let mut out = [0u16; MAX_MEMBERS];
    let mut sel = Selector::with_rng(fastrand::Rng::with_seed(9));
    let mut first0 = 0;
    for _ in 0..2000 {
        let rot = p.rotation(false);
        assert_eq!(
            select(&mut sel, &p.v4, rot, Mode::All, &|_| true, None, &mut out),
            3
        );
        assert_eq!(out[0], 1);
        first0 += usize::from(out[1] == 0);
    }
    // The two weight-0 members follow in uniform order.
    assert!(near(first0, 2000, 0.5), "{first0}");
    // Every member at 0: uniform again.
    reweigh(&p, |_| 0.0);
    assert!(p.rotation(false).even());
    reweigh(&p, |m| if m.health == 1 { 1.0 } else { 0.0 });
    let only0 = |m: &Member| m.health != 1;
    let rot = p.rotation(false);
    assert_eq!(
        select(&mut sel, &p.v4, rot, Mode::All, &only0, None, &mut out),
        2
    );
}

fn block(i: u32) -> NonZeroU64 {
    let a = IpAddr::from((0x0A00_0000u32.wrapping_add(i << 8)).to_be_bytes());
    super::super::sticky::block_key(a, 24, 32)
}

/// Which member each of `blocks` gets from sticky `one`.
fn sticky_ones(m: &[Member], up: &impl Fn(&Member) -> bool, blocks: u32) -> Vec<u16> {
    let rot = Rotation::default();
    let mut out = [0u16; MAX_MEMBERS];
    let mut sel = Selector::with_rng(fastrand::Rng::with_seed(1));
    (0..blocks)
        .map(|b| {
            assert_eq!(
                select(&mut sel, m, &rot, Mode::One, up, Some(block(b)), &mut out),
                1
            );
            out[0]
        })
        .collect()
}

#[test]
fn sticky_one_is_stable_and_follows_the_weights() {
    let w: Vec<u32> = (1..=8).collect();
    let m = members(&w);
    let n = 40_000;
    let got = sticky_ones(&m, &|_| true, n);
    // Another selector (another thread, another server): same answers.
    assert_eq!(got, sticky_ones(&m, &|_| true, n));
    let total: u32 = w.iter().sum();
    for (i, &wi) in w.iter().enumerate() {
        let k = got.iter().filter(|&&g| g as usize == i).count();
        let p = f64::from(wi) / f64::from(total);
        assert!(near(k, n as usize, p), "member {i}: {k} of {n}, want {p}");
    }
}

#[test]
fn sticky_removal_moves_only_that_members_blocks() {
    let m = members(&[1; 10]);
    let n = 20_000u32;
    let before = sticky_ones(&m, &|_| true, n);
    let without3 = |x: &Member| x.health != 3;
    let after = sticky_ones(&m, &without3, n);
    let mut moved = 0;
    for (b, a) in before.iter().zip(&after) {
        if b == a {
            continue;
        }
        moved += 1;
        assert_eq!(*b, 3, "a block of another member moved");
        assert_ne!(*a, 3);
    }
    assert!(near(moved, n as usize, 0.1), "{moved} of {n} moved");
    // Its return gives back exactly its blocks.
    assert_eq!(sticky_ones(&m, &|_| true, n), before);
    // Modulo hashing, for contrast: about 90 % move from 10 to 9.
    let modulo = (0..n)
        .filter(|&b| block(b).get() % 10 != block(b).get() % 9)
        .count();
    assert!(modulo as f64 > 0.85 * f64::from(n), "{modulo}");
}

#[test]
fn sticky_some_keeps_its_other_members_when_one_leaves() {
    let m = members(&[1, 2, 3, 4, 1, 2, 3, 4]);
    let rot = Rotation::default();
    let mut out = [0u16; MAX_MEMBERS];
    let mut sel = Selector::with_rng(fastrand::Rng::with_seed(1));
    let mut pick = |up: &dyn Fn(&Member) -> bool, b: u32| {
        let up = |x: &Member| up(x);
        let n = select(
            &mut sel,
            &m,
            &rot,
            Mode::Some(3),
            &up,
            Some(block(b)),
            &mut out,
        );
        out[..n].to_vec()
    };
    let mut firsts = [0usize; 8];
    for b in 0..5000 {
        let all = pick(&|_| true, b);
        assert_eq!(all.len(), 3);
        assert!(all[0] != all[1] && all[1] != all[2] && all[0] != all[2]);
        assert_eq!(pick(&|_| true, b), all, "not stable");
        firsts[all[0] as usize] += 1;
        let less = pick(&|x| x.health != 7, b);
        if all.contains(&7) {
            // The others stay, in order; the next in rank joins last.
            let kept: Vec<u16> = all.iter().copied().filter(|&x| x != 7).collect();
            assert_eq!(less[..2], kept[..]);
            assert_ne!(less[2], 7);
        } else {
            assert_eq!(less, all);
        }
    }
    // The first address follows the weights (sum 20).
    for (i, &k) in firsts.iter().enumerate() {
        let w = [1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0][i];
        assert!(near(k, 5000, w / 20.0), "{firsts:?}");
    }
}

#[test]
fn sticky_never_picks_weight_zero_while_another_is_usable() {
    let p = pool(&[1, 1, 1]);
    reweigh(&p, |m| if m.health == 0 { 0.0 } else { 1.0 });
    let got = sticky_ones(&p.v4, &|_| true, 3000);
    assert!(!got.contains(&0));
    // Only weight-0 members left: they still answer, spread evenly.
    reweigh(&p, |_| 0.0);
    let got = sticky_ones(&p.v4, &|_| true, 3000);
    for i in 0..3 {
        let k = got.iter().filter(|&&g| g == i).count();
        assert!(near(k, 3000, 1.0 / 3.0), "{i}: {k}");
    }
}

/// Publish equal weights and these round-trip estimates (µs).
fn with_rtts(rtts: &[u32]) -> crate::pool::Pool {
    let p = pool(&vec![1; rtts.len()]);
    let w: Vec<crate::pool::Published> = rtts
        .iter()
        .map(|&r| crate::pool::Published {
            eff: crate::pool::WEIGHT_UNIT,
            usable: true,
            rtt_us: r,
        })
        .collect();
    p.publish(false, &w, p.gate(false));
    p
}

fn p2c_counts(p: &crate::pool::Pool, n: usize) -> Vec<usize> {
    let mut out = [0u16; MAX_MEMBERS];
    let mut sel = Selector::with_rng(fastrand::Rng::with_seed(31));
    let mut c = vec![0; p.v4.len()];
    for _ in 0..n {
        let rot = p.rotation(false);
        select(&mut sel, &p.v4, rot, Mode::P2c, &|_| true, None, &mut out);
        c[out[0] as usize] += 1;
    }
    c
}

#[test]
fn same_rtt_is_the_floor_or_the_band() {
    let f = NOISE_FLOOR_US;
    assert!(same_rtt(60, 60 + f) && same_rtt(60 + f, 60));
    assert!(!same_rtt(60, 61 + f));
    assert!(same_rtt(30_000, 36_000) && !same_rtt(30_000, 36_001));
    assert!(same_rtt(0, 0) && same_rtt(u64::from(RTT_MAX), u64::from(RTT_MAX)));
}

const RTT_MAX: u32 = crate::pool::RTT_MAX_US;

#[test]
fn p2c_splits_noisy_identical_members_evenly() {
    // Four loopback members whose estimates differ by noise only: the
    // old strict comparison gave 50/33/17/0 %.
    let p = with_rtts(&[80, 140, 420, 950]);
    let n = 40_000;
    let c = p2c_counts(&p, n);
    for &k in &c {
        assert!(near(k, n, 0.25), "{c:?}");
    }
    // Within the band of a WAN estimate, too.
    let c = p2c_counts(&with_rtts(&[30_000, 33_000, 35_500]), n);
    for &k in &c {
        assert!(near(k, n, 1.0 / 3.0), "{c:?}");
    }
}

#[test]
fn p2c_still_avoids_a_really_slower_member() {
    // 60 ms against loopback: it loses every draw it is in; the other
    // three tie among themselves, so each wins 1/3.
    let p = with_rtts(&[80, 140, 60_000, 420]);
    let n = 30_000;
    let c = p2c_counts(&p, n);
    assert_eq!(c[2], 0, "{c:?}");
    for i in [0, 1, 3] {
        assert!(near(c[i], n, 1.0 / 3.0), "{c:?}");
    }
}
