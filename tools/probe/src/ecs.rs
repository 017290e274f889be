//! The ECS check: ask the same question once per client subnet and judge whether the answers are
//! tailored by EDNS Client Subnet (RFC 7871), uniform, or ECS is ignored.

use std::collections::BTreeSet;

use hickory_proto::rr::{Name, RecordType};
use ipnet::IpNet;
use serde::Serialize;

use crate::lookup::{self, Outcome, Target};
use crate::query::QueryOptions;

/// Default IPv4 client subnets: real /24s in four countries on four continents that geo
/// configurations name, one in a country they rarely name (ZA, Africa), and one that no
/// geolocation database holds (TEST-NET-1, RFC 5737). The last two fall to a server's default
/// answer, which is where a wrong `/0` scope shows (RFC 7871 §7.3.1).
pub const DEFAULT_V4: [(&str, &str); 6] = [
    ("8.8.8.0/24", "US"),
    ("85.214.0.0/24", "DE"),
    ("133.242.0.0/24", "JP"),
    ("200.160.0.0/24", "BR"),
    ("41.0.0.0/24", "ZA"),
    ("192.0.2.0/24", NOT_IN_DATABASE),
];

/// Default IPv6 client subnets (used with `--type AAAA`): real /48s in the same countries, and
/// the documentation prefix (RFC 3849).
pub const DEFAULT_V6: [(&str, &str); 6] = [
    ("2001:4860::/48", "US"),
    ("2a00:1450:4001::/48", "DE"),
    ("2001:200::/48", "JP"),
    ("2804:14c::/48", "BR"),
    ("2c0f:f000::/48", "ZA"),
    ("2001:db8::/48", NOT_IN_DATABASE),
];

/// The country shown for a default subnet that no geolocation database holds.
pub const NOT_IN_DATABASE: &str = "none";

/// A client subnet to send, and the country it stands for ("custom" for `--subnet`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subnet {
    pub net: IpNet,
    pub country: String,
}

/// The subnets to use: the given ones, or the defaults for the query type.
pub fn subnets(custom: &[IpNet], qtype: RecordType) -> Vec<Subnet> {
    if !custom.is_empty() {
        return custom
            .iter()
            .map(|n| Subnet {
                net: n.trunc(),
                country: "custom".into(),
            })
            .collect();
    }
    let table = if qtype == RecordType::AAAA {
        &DEFAULT_V6
    } else {
        &DEFAULT_V4
    };
    table
        .iter()
        .map(|(net, cc)| Subnet {
            net: net.parse().expect("default subnet"),
            country: (*cc).into(),
        })
        .collect()
}

/// What one subnet got back.
#[derive(Clone, Debug, Serialize)]
pub struct SubnetResult {
    pub subnet: String,
    pub country: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The (sorted) answers of a second ask, made only when a scope-/0 answer differs from
    /// another subnet's: a server that picks per query (rotation) changes them, a server that
    /// maps the subnet does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat: Option<Vec<String>>,
}

/// The stable machine verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Different answers for different subnets, with non-zero scopes.
    Tailored,
    /// The same answers everywhere, scope /0.
    Uniform,
    /// ECS never echoed, same answers everywhere.
    NoEcs,
    /// Anything in between; the text says what.
    Mixed,
    /// A scope-/0 answer that differs from another subnet's answer: the answer depends on the
    /// client but claims to be good for every client (RFC 7871 §7.3.1), so a resolver caches it
    /// once and serves it everywhere.
    BrokenScope,
    /// No subnet got an answer at all.
    Failed,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Tailored => "tailored",
            Verdict::Uniform => "uniform",
            Verdict::NoEcs => "no-ecs",
            Verdict::Mixed => "mixed",
            Verdict::BrokenScope => "broken-scope",
            Verdict::Failed => "failed",
        }
    }
}

/// Asks once per subnet. The answers of each result are sorted (order is rotation's business).
pub fn run(
    target: &mut Target,
    name: &Name,
    qtype: RecordType,
    subnets: &[Subnet],
    opts: &QueryOptions,
) -> Vec<SubnetResult> {
    let mut results: Vec<SubnetResult> = subnets
        .iter()
        .map(|s| {
            let mut outcome = lookup::lookup(target, name, qtype, Some(s.net), opts);
            sort_answers(&mut outcome.answers);
            SubnetResult {
                subnet: s.net.to_string(),
                country: s.country.clone(),
                outcome,
                repeat: None,
            }
        })
        .collect();
    // A /0 answer that differs from another is either a wrong scope or per-query picking:
    // asking every subnet once more tells them apart.
    if !zero_scope_differing(&results).is_empty() {
        for (r, s) in results.iter_mut().zip(subnets) {
            if !r.outcome.ok() {
                continue;
            }
            let mut again = lookup::lookup(target, name, qtype, Some(s.net), opts);
            if again.ok() {
                sort_answers(&mut again.answers);
                r.repeat = Some(again.answers);
            }
        }
    }
    results
}

/// The answered subnets that got scope /0 with an answer that differs from another answered
/// subnet's answer.
pub fn zero_scope_differing(results: &[SubnetResult]) -> Vec<&SubnetResult> {
    let ok: Vec<&SubnetResult> = results.iter().filter(|r| r.outcome.ok()).collect();
    ok.iter()
        .copied()
        .filter(|r| r.outcome.ecs_echoed && r.outcome.scope == Some(0))
        .filter(|r| {
            let key = answer_key(&r.outcome);
            ok.iter().any(|o| answer_key(&o.outcome) != key)
        })
        .collect()
}

/// The subnets whose second ask got other answers than the first.
fn changed_on_repeat(results: &[SubnetResult]) -> Vec<&str> {
    results
        .iter()
        .filter(|r| {
            r.repeat.as_ref().is_some_and(|again| {
                let mut first = r.outcome.answers.clone();
                sort_answers(&mut first);
                *again != first
            })
        })
        .map(|r| r.subnet.as_str())
        .collect()
}

/// The answers as a comparable set: sorted records, or the kind of empty answer.
pub fn answer_key(o: &Outcome) -> String {
    if o.answers.is_empty() {
        return match o.rcode.as_deref() {
            Some("NXDOMAIN") => "<NXDOMAIN>".into(),
            _ => "<no data>".into(),
        };
    }
    let mut a = o.answers.clone();
    sort_answers(&mut a);
    a.join(" ")
}

/// Sorts address strings numerically when they parse as addresses, as text otherwise.
pub fn sort_answers(a: &mut [String]) {
    a.sort_by(
        |x, y| match (x.parse::<std::net::IpAddr>(), y.parse::<std::net::IpAddr>()) {
            (Ok(p), Ok(q)) => p.cmp(&q),
            _ => x.cmp(y),
        },
    );
}

fn scopes_text(scopes: &BTreeSet<u8>) -> String {
    scopes
        .iter()
        .map(|s| format!("/{s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Judges the results. Pure: depends only on the results.
pub fn verdict(results: &[SubnetResult]) -> (Verdict, String) {
    let ok: Vec<&SubnetResult> = results.iter().filter(|r| r.outcome.ok()).collect();
    let failed: Vec<&SubnetResult> = results.iter().filter(|r| !r.outcome.ok()).collect();
    if ok.is_empty() {
        return (
            Verdict::Failed,
            format!(
                "no subnet got an answer: {}",
                failures_text(&failed, results.len())
            ),
        );
    }

    let (inner, text) = judge_answered(&ok);
    let mut text = text;
    let mut verdict = inner;
    if !failed.is_empty() {
        verdict = Verdict::Mixed;
        text = format!(
            "mixed: {} of {} subnets failed ({}); among the {} that answered: {}",
            failed.len(),
            results.len(),
            failures_text(&failed, results.len()),
            ok.len(),
            text.strip_prefix("mixed: ").unwrap_or(&text)
        );
    }
    let broken = zero_scope_differing(results);
    if !broken.is_empty() {
        let changed = changed_on_repeat(results);
        if changed.is_empty() {
            let names: Vec<&str> = broken.iter().map(|r| r.subnet.as_str()).collect();
            verdict = Verdict::BrokenScope;
            text = format!(
                "broken scope: scope /0 for {} on an answer that differs from another subnet's (and stays the same when asked again): the answer depends on the client subnet but claims to be good for every client, so a resolver caches it once and serves it to all regions (RFC 7871 §7.3.1). {}",
                names.join(", "),
                text
            );
        } else {
            text.push_str(&format!(
                ". The answers changed when {} {} asked again: the server picks per query (rotation), so the /0 scope is not a geo mistake",
                changed.join(", "),
                if changed.len() == 1 { "was" } else { "were" }
            ));
        }
    }
    let bad_echo: Vec<&str> = ok
        .iter()
        .filter(|r| r.outcome.ecs_echo_valid == Some(false))
        .map(|r| r.subnet.as_str())
        .collect();
    if !bad_echo.is_empty() {
        text.push_str(&format!(
            ". Warning: the echoed ECS option did not match the query for {} (resolvers drop such replies, RFC 7871 §7.3)",
            bad_echo.join(", ")
        ));
    }
    (verdict, text)
}

/// The failures, grouped by message: "msg (for a, b)" or "msg (all N subnets)".
fn failures_text(failed: &[&SubnetResult], total: usize) -> String {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for r in failed {
        let msg = r.outcome.error.as_deref().unwrap_or("no answer");
        match groups.iter_mut().find(|(m, _)| *m == msg) {
            Some((_, subnets)) => subnets.push(&r.subnet),
            None => groups.push((msg, vec![&r.subnet])),
        }
    }
    groups
        .iter()
        .map(|(msg, subnets)| {
            if subnets.len() == total && total > 1 {
                format!("{msg} (all {total} subnets)")
            } else {
                format!("{msg} (for {})", subnets.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn judge_answered(ok: &[&SubnetResult]) -> (Verdict, String) {
    let n = ok.len();
    let sets: BTreeSet<String> = ok.iter().map(|r| answer_key(&r.outcome)).collect();
    let echoed: Vec<&&SubnetResult> = ok.iter().filter(|r| r.outcome.ecs_echoed).collect();
    let scopes: BTreeSet<u8> = echoed.iter().filter_map(|r| r.outcome.scope).collect();

    if echoed.is_empty() {
        return if sets.len() == 1 {
            (
                Verdict::NoEcs,
                format!(
                    "no ECS echoed (server ignores or strips it): the same answers for all {n} subnets"
                ),
            )
        } else {
            (
                Verdict::Mixed,
                format!(
                    "mixed: {} distinct answer sets across {n} subnets but no ECS echoed: probably rotation or load balancing rather than ECS (a server that tailors by ECS must echo it, RFC 7871 §7.2.1)",
                    sets.len()
                ),
            )
        };
    }
    if echoed.len() < n {
        let missing: Vec<&str> = ok
            .iter()
            .filter(|r| !r.outcome.ecs_echoed)
            .map(|r| r.subnet.as_str())
            .collect();
        return (
            Verdict::Mixed,
            format!(
                "mixed: ECS echoed for only {} of {n} subnets (not for {}); {} distinct answer set(s), scopes {}",
                echoed.len(),
                missing.join(", "),
                sets.len(),
                scopes_text(&scopes)
            ),
        );
    }
    let zero: Vec<&str> = ok
        .iter()
        .filter(|r| r.outcome.scope == Some(0))
        .map(|r| r.subnet.as_str())
        .collect();
    match (sets.len(), zero.len()) {
        (1, z) if z == n => (
            Verdict::Uniform,
            format!("same answers for every subnet with scope /0 ({n} subnets)"),
        ),
        (1, _) => (
            Verdict::Mixed,
            format!(
                "mixed: the same answers for all {n} subnets, but scope {} (not /0): the server says the answer depends on the client subnet, so resolvers cache it per subnet for nothing (or it is tailored more finely than these subnets show)",
                scopes_text(&scopes)
            ),
        ),
        (k, 0) => (
            Verdict::Tailored,
            format!(
                "tailored by ECS: {k} distinct answer sets across {n} subnets, scope {}",
                scopes_text(&scopes)
            ),
        ),
        (k, _) => {
            let others: BTreeSet<u8> = scopes.iter().copied().filter(|s| *s != 0).collect();
            let others = if others.is_empty() {
                String::new()
            } else {
                format!("; other scopes {}", scopes_text(&others))
            };
            (
                Verdict::Mixed,
                format!(
                    "mixed: {k} distinct answer sets across {n} subnets, but scope /0 for {}: a resolver caches a /0 answer for every client and would serve it to other regions (or the answers rotate){others}",
                    zero.join(", "),
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lookup::Status;

    fn res(subnet: &str, answers: &[&str], scope: Option<u8>) -> SubnetResult {
        SubnetResult {
            subnet: subnet.into(),
            country: "custom".into(),
            outcome: Outcome {
                status: Status::Ok,
                server: Some("127.0.0.1:53".into()),
                rcode: Some("NOERROR".into()),
                answers: answers.iter().map(|s| s.to_string()).collect(),
                ttl: Some(60),
                scope,
                ecs_echoed: scope.is_some(),
                ecs_echo_valid: scope.map(|_| true),
                tcp: false,
                chain: Vec::new(),
                error: None,
                notes: Vec::new(),
            },
            repeat: None,
        }
    }

    fn fail(subnet: &str, status: Status, msg: &str) -> SubnetResult {
        let mut r = res(subnet, &[], None);
        r.outcome.status = status;
        r.outcome.rcode = None;
        r.outcome.error = Some(msg.into());
        r
    }

    #[test]
    fn defaults_follow_the_query_type() {
        let v4 = subnets(&[], RecordType::A);
        assert_eq!(v4.len(), 6);
        assert_eq!(v4[5].net.to_string(), "192.0.2.0/24");
        assert_eq!(v4[5].country, NOT_IN_DATABASE);
        assert_eq!(v4[1].net.to_string(), "85.214.0.0/24");
        assert_eq!(v4[1].country, "DE");
        let v6 = subnets(&[], RecordType::AAAA);
        assert_eq!(v6[2].net.to_string(), "2001:200::/48");
        assert_eq!(v6[2].country, "JP");
        let custom = subnets(&["10.1.2.3/16".parse().unwrap()], RecordType::A);
        assert_eq!(custom[0].net.to_string(), "10.1.0.0/16");
        assert_eq!(custom[0].country, "custom");
    }

    #[test]
    fn tailored_when_sets_differ_with_nonzero_scopes() {
        let r = vec![
            res("a", &["192.0.2.1"], Some(24)),
            res("b", &["192.0.2.2"], Some(16)),
            res("c", &["192.0.2.3", "192.0.2.4"], Some(24)),
            res("d", &["192.0.2.1"], Some(24)),
        ];
        let (v, t) = verdict(&r);
        assert_eq!(v, Verdict::Tailored);
        assert!(t.contains("3 distinct answer sets"), "{t}");
        assert!(t.contains("/16, /24"), "{t}");
    }

    #[test]
    fn uniform_when_same_answers_scope_zero() {
        let r = vec![
            res("a", &["192.0.2.2", "192.0.2.1"], Some(0)),
            res("b", &["192.0.2.1", "192.0.2.2"], Some(0)),
        ];
        let (v, t) = verdict(&r);
        assert_eq!(v, Verdict::Uniform);
        assert!(t.contains("scope /0"), "{t}");
    }

    #[test]
    fn no_ecs_when_never_echoed() {
        let r = vec![
            res("a", &["192.0.2.1"], None),
            res("b", &["192.0.2.1"], None),
        ];
        assert_eq!(verdict(&r).0, Verdict::NoEcs);
    }

    #[test]
    fn mixed_cases_are_explained() {
        // Different answers, no ECS: rotation.
        let r = vec![
            res("a", &["192.0.2.1"], None),
            res("b", &["192.0.2.2"], None),
        ];
        let (v, t) = verdict(&r);
        assert_eq!(v, Verdict::Mixed);
        assert!(t.contains("rotation"), "{t}");

        // Same answers, non-zero scope.
        let r = vec![
            res("a", &["192.0.2.1"], Some(24)),
            res("b", &["192.0.2.1"], Some(24)),
        ];
        let (v, t) = verdict(&r);
        assert_eq!(v, Verdict::Mixed);
        assert!(t.contains("not /0"), "{t}");

        // Different answers, one scoped /0, but the answers change when asked again: rotation.
        let mut r = vec![
            res("a", &["192.0.2.1"], Some(0)),
            res("b", &["192.0.2.2"], Some(0)),
        ];
        r[0].repeat = Some(vec!["192.0.2.2".into()]);
        r[1].repeat = Some(vec!["192.0.2.2".into()]);
        let (v, t) = verdict(&r);
        assert_eq!(v, Verdict::Mixed);
        assert!(t.contains("changed when a was asked again"), "{t}");

        // Echo on some only.
        let r = vec![
            res("a", &["192.0.2.1"], Some(0)),
            res("b", &["192.0.2.1"], None),
        ];
        let (v, t) = verdict(&r);
        assert_eq!(v, Verdict::Mixed);
        assert!(t.contains("only 1 of 2"), "{t}");

        // Some failed.
        let r = vec![
            res("a", &["192.0.2.1"], Some(0)),
            fail("b", Status::Timeout, "timeout: no reply"),
        ];
        let (v, t) = verdict(&r);
        assert_eq!(v, Verdict::Mixed);
        assert!(t.contains("1 of 2 subnets failed"), "{t}");
        assert!(t.contains("scope /0"), "{t}");
    }

    #[test]
    fn broken_scope_when_a_zero_scope_answer_differs() {
        // Knot's geoip module: tailored answers scoped /24, the default answer scoped /0.
        let mut r = vec![
            res("a", &["192.0.2.1"], Some(24)),
            res("b", &["192.0.2.2"], Some(24)),
            res("c", &["192.0.2.9"], Some(0)),
        ];
        for x in &mut r {
            x.repeat = Some(x.outcome.answers.clone());
        }
        let (v, t) = verdict(&r);
        assert_eq!(v, Verdict::BrokenScope);
        assert_eq!(v.as_str(), "broken-scope");
        assert!(t.contains("scope /0 for c"), "{t}");
        // Every subnet /0, different answers: all of them.
        let r = vec![
            res("a", &["192.0.2.1"], Some(0)),
            res("b", &["192.0.2.2"], Some(0)),
        ];
        let (v, t) = verdict(&r);
        assert_eq!(v, Verdict::BrokenScope);
        assert!(t.contains("scope /0 for a, b"), "{t}");
        // The default answer with its own non-zero scope (gdnsd, meridian): tailored.
        let r = vec![
            res("a", &["192.0.2.1"], Some(24)),
            res("c", &["192.0.2.9"], Some(8)),
        ];
        assert_eq!(verdict(&r).0, Verdict::Tailored);
        // A failure elsewhere does not hide it.
        let r = vec![
            res("a", &["192.0.2.1"], Some(24)),
            res("c", &["192.0.2.9"], Some(0)),
            fail("d", Status::Timeout, "timeout"),
        ];
        assert_eq!(verdict(&r).0, Verdict::BrokenScope);
    }

    #[test]
    fn failed_when_nothing_answered() {
        let r = vec![
            fail("a", Status::Refused, "REFUSED by x"),
            fail("b", Status::Timeout, "timeout"),
        ];
        let (v, t) = verdict(&r);
        assert_eq!(v, Verdict::Failed);
        assert!(t.contains("REFUSED by x"), "{t}");
    }

    #[test]
    fn nxdomain_everywhere_is_one_set() {
        let mut a = res("a", &[], Some(0));
        a.outcome.rcode = Some("NXDOMAIN".into());
        let mut b = a.clone();
        b.subnet = "b".into();
        assert_eq!(verdict(&[a, b]).0, Verdict::Uniform);
    }

    #[test]
    fn bad_echo_is_warned() {
        let mut a = res("a", &["192.0.2.1"], Some(0));
        a.outcome.ecs_echo_valid = Some(false);
        let (v, t) = verdict(&[a]);
        assert_eq!(v, Verdict::Uniform);
        assert!(t.contains("did not match"), "{t}");
    }
}
