//! Issue #31 item 5: registry churn. Ten members registered in etcd
//! (`members_from = "etcd"`) serve 60 % load; at 60 s a broken agent's
//! lease expires and 7 (or all 10) registrations vanish while the backends
//! are fine; the agent is fixed at 240 s and registers them again.
//!
//! The registry's effect on the pool is applied to the real engine the way
//! a rebuild would leave it: with the rule, a vanished member is
//! [`Hold::Gone`] (ejected under `max_ejected` and `panic_below`) and,
//! every `members_grace` after, those the filter really ejects leave the
//! pool while a registered member remains; without it a vanished member
//! leaves at once. A member that left is modelled as drained (out even
//! when every member is down), so the cap's fraction stays one of the ten
//! members, where the server's rebuilt pool counts only those left: the
//! server drains a cap-only pool a little slower than shown. A member that
//! registers again after leaving is new: out until its next passing check.

use meridian::health::{OVR_DRAIN, OVR_NONE, UNKNOWN};
use meridian::pool::{Hold, Standing};

use crate::model::{m, mean, peak, usable_min, Backend, Setup, World};
use crate::out::{Report, Run};
use crate::scenarios::Opts;

/// `members_grace`: the server's default (`config::pools::DEFAULT_MEMBERS_GRACE`).
const GRACE_S: u64 = 30;
/// When the agent's lease expires, and when it registers again.
const EXPIRE_AT: u64 = 60;
const BACK_AT: u64 = 240;
const END: u64 = 330;

/// What the registry did to member `i`.
#[derive(Clone, Copy, PartialEq)]
enum Reg {
    Live,
    Gone,
    Left,
}

fn set_hold(w: &mut World, i: usize, hold: Hold) {
    let web = w.web;
    w.engine.pools[web].v4[i].hold = hold;
}

fn health(w: &World, i: usize) -> u32 {
    w.engine.pools[w.web].v4[i].health
}

fn standing(w: &World, i: usize) -> Option<Standing> {
    w.engine.pools[w.web].report[0]
        .snapshot()
        .get(i)
        .map(|r| r.standing)
}

/// The registry's events for `vanish` members, with the rule or without.
fn churn(vanish: usize, rule: bool) -> impl FnMut(u64, &mut World) {
    let mut reg = [Reg::Live; 10];
    move |t, w| {
        if t == EXPIRE_AT {
            for (i, r) in reg.iter_mut().enumerate().take(vanish) {
                if rule {
                    *r = Reg::Gone;
                    set_hold(w, i, Hold::Gone);
                } else {
                    *r = Reg::Left;
                    w.engine.health.set_override(health(w, i), OVR_DRAIN);
                }
            }
        }
        let graces = t > EXPIRE_AT && t < BACK_AT && (t - EXPIRE_AT).is_multiple_of(GRACE_S);
        let live = reg.contains(&Reg::Live);
        if rule && graces && live {
            for (i, r) in reg.iter_mut().enumerate() {
                if *r == Reg::Gone && standing(w, i) == Some(Standing::Gone) {
                    *r = Reg::Left;
                    w.engine.health.set_override(health(w, i), OVR_DRAIN);
                }
            }
        }
        if t == BACK_AT {
            for (i, r) in reg.iter_mut().enumerate() {
                let h = health(w, i);
                match *r {
                    Reg::Live => {}
                    Reg::Gone => set_hold(w, i, Hold::None),
                    // New again: out until its next passing check.
                    Reg::Left if rule => {
                        set_hold(w, i, Hold::Unproven);
                        w.engine.health.set_state(h, UNKNOWN);
                        w.engine.health.set_override(h, OVR_NONE);
                    }
                    Reg::Left => w.engine.health.set_override(h, OVR_NONE),
                }
                *r = Reg::Live;
            }
        }
    }
}

/// Registry churn: 7 and then all 10 registrations vanish at once, with
/// the rule (`max_ejected = 0.2`, `panic_below = 0.5`) and without.
pub(crate) fn registry_churn(o: Opts) -> Report {
    // A pool every member left is empty: NODATA (`when_all_down = "all"`
    // would answer with the drained members that model them).
    let empty = "when_all_down = \"empty\"";
    let variants = [
        ("7 of 10 vanish: no rule", 7, false, "", ""),
        (
            "7 of 10: max_ejected = 0.2",
            7,
            true,
            "max_ejected = 0.2",
            "",
        ),
        (
            "7 of 10: panic_below = 0.5",
            7,
            true,
            "panic_below = 0.5",
            "",
        ),
        ("10 of 10 vanish: no rule", 10, false, "", empty),
        (
            "10 of 10: max_ejected = 0.2",
            10,
            true,
            "max_ejected = 0.2",
            "",
        ),
        (
            "10 of 10: panic_below = 0.5",
            10,
            true,
            "panic_below = 0.5",
            "",
        ),
    ];
    let runs = variants
        .iter()
        .map(|&(v, vanish, rule, keys, name_keys)| {
            let s = Setup {
                backends: (0..10).map(|_| Backend::new(100.0, 20.0)).collect(),
                pool_keys: keys.to_string(),
                name_keys: name_keys.to_string(),
                load: 600.0,
                resolvers: o.resolvers,
                seed: o.seed,
                down: Vec::new(),
                backup: 0,
                report_load: false,
            };
            let mut w = World::new("registry-churn", s);
            let mut events = churn(vanish, rule);
            for t in 1..=END {
                events(t, &mut w);
                w.step();
            }
            let rows = w.rows;
            let metrics = vec![
                m(
                    "bad while vanished %",
                    mean(&rows, EXPIRE_AT, BACK_AT, |r| r.bad),
                ),
                m("bad peak %", peak(&rows, EXPIRE_AT, END, |r| r.bad)),
                m("min usable members", usable_min(&rows, EXPIRE_AT, BACK_AT)),
                m("bad after return %", mean(&rows, BACK_AT, END, |r| r.bad)),
            ];
            Run {
                variant: v.to_string(),
                rows,
                metrics,
            }
        })
        .collect();
    Report {
        name: "registry-churn",
        title: "registrations vanish at once while the backends are fine (60 % load)".into(),
        runs,
        events: vec![(EXPIRE_AT, "leases expire"), (BACK_AT, "re-registered")],
        highlight: vec![7, 8, 9],
    }
}
