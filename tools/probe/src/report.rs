//! Reports: the JSON documents (serde) and their plain-text rendering.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::Serialize;

use crate::ecs::{self, SubnetResult};
use crate::lookup::Outcome;
use crate::rotation::Summary;

/// How the servers were chosen, for the report header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// `--server` given: that server was asked, with RD=1.
    Server,
    /// The zone's authoritative servers, found through the resolver, asked with RD=0.
    Authoritative,
}

/// The `ecs` command's result.
#[derive(Clone, Debug, Serialize)]
pub struct EcsReport {
    pub name: String,
    pub qtype: String,
    pub mode: Mode,
    pub recursion_desired: bool,
    /// Every server that was asked, in order.
    pub servers: Vec<String>,
    pub results: Vec<SubnetResult>,
    pub distinct_answer_sets: usize,
    pub verdict: ecs::Verdict,
    pub verdict_text: String,
}

impl EcsReport {
    pub fn new(name: String, qtype: String, mode: Mode, results: Vec<SubnetResult>) -> Self {
        let (verdict, verdict_text) = ecs::verdict(&results);
        let distinct_answer_sets = results
            .iter()
            .filter(|r| r.outcome.ok())
            .map(|r| ecs::answer_key(&r.outcome))
            .collect::<BTreeSet<_>>()
            .len();
        let servers = servers_asked(results.iter().map(|r| &r.outcome));
        EcsReport {
            name,
            qtype,
            mode,
            recursion_desired: mode == Mode::Server,
            servers,
            results,
            distinct_answer_sets,
            verdict,
            verdict_text,
        }
    }

    /// True when at least one subnet got a real answer.
    pub fn answered(&self) -> bool {
        self.results.iter().any(|r| r.outcome.ok())
    }

    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "ECS probe: {} {} {}",
            self.name,
            self.qtype,
            header_via(self.mode, &self.servers)
        );
        let _ = writeln!(
            s,
            "  {:<20} {:<7} {:<9} {:<9} {:<20} answers",
            "subnet", "country", "rcode", "ttl", "scope"
        );
        for r in &self.results {
            let o = &r.outcome;
            let mut answers = o.answers.clone();
            ecs::sort_answers(&mut answers);
            let rcode = o
                .rcode
                .clone()
                .unwrap_or_else(|| format!("{:?}", o.status).to_uppercase());
            let ttl = o
                .ttl
                .map(|t| format!("ttl {t}"))
                .unwrap_or_else(|| "-".into());
            let scope = match o.scope {
                Some(p) if o.ecs_echoed => format!("scope /{p}"),
                _ if o.rcode.is_some() => "no ECS in response".into(),
                _ => "-".into(),
            };
            let shown = if answers.is_empty() {
                match (o.ok(), o.rcode.as_deref()) {
                    (true, Some("NXDOMAIN")) => "(no such name)".to_string(),
                    (true, _) => "(no records of this type)".to_string(),
                    _ => String::new(),
                }
            } else {
                answers.join(", ")
            };
            let _ = writeln!(
                s,
                "  {:<20} {:<7} {:<9} {:<9} {:<20} {}",
                r.subnet, r.country, rcode, ttl, scope, shown
            );
            write_details(&mut s, o);
        }
        let _ = writeln!(
            s,
            "verdict: {}  [{}]",
            self.verdict_text,
            self.verdict.as_str()
        );
        s
    }
}

/// One query of the rotation run, as reported.
#[derive(Clone, Debug, Serialize)]
pub struct RotationResponse {
    pub server: Option<String>,
    pub rcode: Option<String>,
    pub answers: Vec<String>,
    pub ttl: Option<u32>,
    pub error: Option<String>,
}

/// The `rotation` command's result.
#[derive(Clone, Debug, Serialize)]
pub struct RotationReport {
    pub name: String,
    pub qtype: String,
    pub mode: Mode,
    pub recursion_desired: bool,
    pub servers: Vec<String>,
    pub count: u32,
    pub interval_ms: u64,
    pub responses: Vec<RotationResponse>,
    #[serde(flatten)]
    pub summary: Summary,
    #[serde(skip)]
    notes: Vec<String>,
}

impl RotationReport {
    pub fn new(
        name: String,
        qtype: String,
        mode: Mode,
        count: u32,
        interval_ms: u64,
        outcomes: &[Outcome],
    ) -> Self {
        let summary = crate::rotation::summarize(&crate::rotation::answer_lists(outcomes));
        let mut notes: Vec<String> = Vec::new();
        for o in outcomes {
            for n in &o.notes {
                if !notes.contains(n) {
                    notes.push(n.clone());
                }
            }
        }
        RotationReport {
            name,
            qtype,
            mode,
            recursion_desired: mode == Mode::Server,
            servers: servers_asked(outcomes.iter()),
            count,
            interval_ms,
            responses: outcomes
                .iter()
                .map(|o| RotationResponse {
                    server: o.server.clone(),
                    rcode: o.rcode.clone(),
                    answers: o.answers.clone(),
                    ttl: o.ttl,
                    error: o.error.clone(),
                })
                .collect(),
            summary,
            notes,
        }
    }

    pub fn answered(&self) -> bool {
        self.summary.answered > 0
    }

    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "rotation probe: {} {}, {} queries {}",
            self.name,
            self.qtype,
            self.count,
            header_via(self.mode, &self.servers)
        );
        for (i, r) in self.responses.iter().enumerate() {
            let body = match (&r.error, r.answers.is_empty()) {
                (Some(e), _) => e.clone(),
                (None, true) => "(no records of this type)".into(),
                (None, false) => r.answers.join(", "),
            };
            let _ = writeln!(
                s,
                "  {:>3}  {:<9} {}",
                i + 1,
                r.rcode.as_deref().unwrap_or("-"),
                body
            );
        }
        for n in &self.notes {
            let _ = writeln!(s, "  note: {n}");
        }
        let sum = &self.summary;
        let _ = writeln!(
            s,
            "distinct addresses ({}): {}",
            sum.distinct.len(),
            sum.distinct.join(", ")
        );
        let sizes: Vec<String> = sum
            .set_sizes
            .iter()
            .map(|(size, n)| format!("{size} address(es) × {n}"))
            .collect();
        let _ = writeln!(s, "answer-set sizes: {}", sizes.join(", "));
        let _ = writeln!(
            s,
            "first address changed: {} time(s) in {} answer(s)",
            sum.first_changed, sum.answered
        );
        let _ = writeln!(
            s,
            "verdict: {}  [{}]",
            sum.verdict_text,
            sum.verdict.as_str()
        );
        s
    }
}

fn header_via(mode: Mode, servers: &[String]) -> String {
    let list = if servers.is_empty() {
        "(none)".to_string()
    } else {
        servers.join(", ")
    };
    match mode {
        Mode::Server => format!("via {list} (--server, RD=1)"),
        Mode::Authoritative => format!("via authoritative {list} (RD=0)"),
    }
}

fn write_details(s: &mut String, o: &Outcome) {
    if o.chain.len() > 1 || o.chain.iter().any(|h| !h.cnames.is_empty()) {
        let hops: Vec<String> = o
            .chain
            .iter()
            .map(|h| {
                let what = if h.cnames.is_empty() {
                    format!("{} {}", h.name, h.rcode)
                } else {
                    h.cnames.join(" → ")
                };
                let scope = match h.scope {
                    Some(p) => format!("scope /{p}"),
                    None => "no ECS".into(),
                };
                format!("{what} [{}, {scope}]", h.server)
            })
            .collect();
        let _ = writeln!(s, "      chain: {}", hops.join("  ⇒  "));
    }
    if let Some(e) = &o.error {
        let _ = writeln!(s, "      error: {e}");
    }
    for n in &o.notes {
        let _ = writeln!(s, "      note: {n}");
    }
}

fn servers_asked<'a>(outcomes: impl Iterator<Item = &'a Outcome>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |s: &String| {
        if !out.contains(s) {
            out.push(s.clone());
        }
    };
    for o in outcomes {
        for h in &o.chain {
            add(&h.server);
        }
        if let Some(s) = &o.server {
            add(s);
        }
    }
    out
}
