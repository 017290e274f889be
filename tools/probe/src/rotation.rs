//! The rotation check: ask the same question N times (no ECS) and judge who picks the address:
//! the client (the whole set every time, reordered), the server (a few addresses per answer that
//! change), or nobody (the same answer every time).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use hickory_proto::rr::{Name, RecordType};
use serde::Serialize;

use crate::ecs::sort_answers;
use crate::lookup::{self, Outcome, Target};
use crate::query::QueryOptions;

/// The stable machine verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The whole set returned every time, in changing order.
    ClientChooses,
    /// One or a few addresses per answer, changing from answer to answer.
    ServerChooses,
    /// The same answer, in the same order, every time.
    Static,
    /// No query got an answer.
    Failed,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::ClientChooses => "client-chooses",
            Verdict::ServerChooses => "server-chooses",
            Verdict::Static => "static",
            Verdict::Failed => "failed",
        }
    }
}

/// Sends `count` queries, `interval` apart.
pub fn run(
    target: &mut Target,
    name: &Name,
    qtype: RecordType,
    count: u32,
    interval: Duration,
    opts: &QueryOptions,
) -> Vec<Outcome> {
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        if i > 0 && !interval.is_zero() {
            std::thread::sleep(interval);
        }
        out.push(lookup::lookup(target, name, qtype, None, opts));
    }
    out
}

/// What the answers add up to.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Queries that got an answer.
    pub answered: usize,
    /// Every address seen, sorted.
    pub distinct: Vec<String>,
    /// Answer-set size → how many answers had that size.
    pub set_sizes: BTreeMap<usize, usize>,
    /// How many times the first address differed from the previous answer's.
    pub first_changed: usize,
    /// How many different sets (ignoring order) were seen.
    pub distinct_sets: usize,
    /// How many different orderings were seen.
    pub distinct_orders: usize,
    pub verdict: Verdict,
    pub verdict_text: String,
}

/// Judges a sequence of answers (in the order received; `None` for a query that failed). Pure.
pub fn summarize(answers: &[Option<Vec<String>>]) -> Summary {
    let ok: Vec<&Vec<String>> = answers.iter().flatten().collect();
    let failed = answers.len() - ok.len();
    let mut distinct: Vec<String> = ok
        .iter()
        .flat_map(|a| a.iter().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    sort_answers(&mut distinct);
    let mut set_sizes = BTreeMap::new();
    for a in &ok {
        *set_sizes.entry(a.len()).or_insert(0) += 1;
    }
    let first_changed = ok
        .windows(2)
        .filter(|w| w[0].first() != w[1].first())
        .count();
    let sets: BTreeSet<Vec<String>> = ok
        .iter()
        .map(|a| {
            let mut s = (*a).clone();
            s.sort();
            s
        })
        .collect();
    let orders: BTreeSet<&Vec<String>> = ok.iter().copied().collect();

    let (verdict, mut text) = if ok.is_empty() {
        (
            Verdict::Failed,
            format!("none of the {} queries got an answer", answers.len()),
        )
    } else if sets.len() == 1 {
        let size = ok[0].len();
        if orders.len() > 1 {
            (
                Verdict::ClientChooses,
                format!(
                    "client-chooses: the whole set of {size} address(es) came back every time, reordered ({} orderings; first address changed {first_changed} times in {} answers)",
                    orders.len(),
                    ok.len()
                ),
            )
        } else {
            (
                Verdict::Static,
                format!(
                    "static: the same answer every time ({size} address(es), same order, {} answer(s))",
                    ok.len()
                ),
            )
        }
    } else {
        let sizes: Vec<String> = set_sizes.keys().map(|k| k.to_string()).collect();
        (
            Verdict::ServerChooses,
            format!(
                "server-chooses: each answer carried {} of {} addresses seen, and the set changed ({} distinct sets; first address changed {first_changed} times in {} answers)",
                sizes.join(" or "),
                distinct.len(),
                sets.len(),
                ok.len()
            ),
        )
    };
    if failed > 0 && !ok.is_empty() {
        text.push_str(&format!(
            "; {failed} of {} queries failed and are not counted",
            answers.len()
        ));
    }
    Summary {
        answered: ok.len(),
        distinct,
        set_sizes,
        first_changed,
        distinct_sets: sets.len(),
        distinct_orders: orders.len(),
        verdict,
        verdict_text: text,
    }
}

/// The answers of the outcomes that succeeded, `None` for failures.
pub fn answer_lists(outcomes: &[Outcome]) -> Vec<Option<Vec<String>>> {
    outcomes
        .iter()
        .map(|o| o.ok().then(|| o.answers.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(list: &[&str]) -> Option<Vec<String>> {
        Some(list.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn reordered_whole_set_is_client_chooses() {
        let s = summarize(&[
            a(&["10.0.0.1", "10.0.0.2", "10.0.0.3"]),
            a(&["10.0.0.2", "10.0.0.3", "10.0.0.1"]),
            a(&["10.0.0.3", "10.0.0.1", "10.0.0.2"]),
            a(&["10.0.0.3", "10.0.0.2", "10.0.0.1"]),
        ]);
        assert_eq!(s.verdict, Verdict::ClientChooses);
        assert_eq!(s.first_changed, 2);
        assert_eq!(s.distinct.len(), 3);
        assert_eq!(s.set_sizes, BTreeMap::from([(3, 4)]));
        assert_eq!(s.distinct_orders, 4);
    }

    #[test]
    fn changing_single_address_is_server_chooses() {
        let s = summarize(&[
            a(&["10.0.0.1"]),
            a(&["10.0.0.1"]),
            a(&["10.0.0.2"]),
            a(&["10.0.0.1"]),
            None,
        ]);
        assert_eq!(s.verdict, Verdict::ServerChooses);
        assert_eq!(s.first_changed, 2);
        assert_eq!(s.answered, 4);
        assert_eq!(s.distinct, vec!["10.0.0.1", "10.0.0.2"]);
        assert!(
            s.verdict_text.contains("1 of 2 addresses"),
            "{}",
            s.verdict_text
        );
        assert!(
            s.verdict_text.contains("1 of 5 queries failed"),
            "{}",
            s.verdict_text
        );
    }

    #[test]
    fn same_answer_is_static() {
        let s = summarize(&[a(&["10.0.0.1", "10.0.0.2"]), a(&["10.0.0.1", "10.0.0.2"])]);
        assert_eq!(s.verdict, Verdict::Static);
        assert_eq!(s.first_changed, 0);
        let s = summarize(&[a(&["10.0.0.9"])]);
        assert_eq!(s.verdict, Verdict::Static);
    }

    #[test]
    fn nothing_answered_is_failed() {
        let s = summarize(&[None, None]);
        assert_eq!(s.verdict, Verdict::Failed);
        assert_eq!(s.answered, 0);
    }

    #[test]
    fn distinct_sorts_numerically() {
        let s = summarize(&[a(&["10.0.0.10"]), a(&["10.0.0.9"])]);
        assert_eq!(s.distinct, vec!["10.0.0.9", "10.0.0.10"]);
    }
}
