//! `/metrics` as `promtool check metrics` reads it: every family has
//! exactly one HELP and one TYPE line, both before its samples; every
//! sample line parses (names, label syntax and escapes, values); no series
//! appears twice; a family's samples are together. Checked strictly here,
//! and by `promtool` too when it is on PATH (a visible SKIP line when not).
//! The server has a pool with a checked member (so the health families and
//! the histogram have samples) and has answered queries. The series each
//! member and each checked entry costs are counted from the page, as the
//! manual gives them, and `[api] metrics_members = false` drops them while
//! the page stays valid. Loopback only.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::health_support::*;

fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
        && !s.starts_with("__")
}

/// Label (name, value) pairs, values unescaped.
type Labels = Vec<(String, String)>;

/// The `{...}` of a sample, unescaped, and the rest of the line.
fn parse_labels(s: &str) -> Result<(Labels, &str), String> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut rest = s.strip_prefix('{').ok_or("no {")?;
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((out, r));
        }
        let (name, r) = rest.split_once("=\"").ok_or("no =\"")?;
        if !is_label_name(name) {
            return Err(format!("bad label name {name:?}"));
        }
        if out.iter().any(|(n, _)| n == name) {
            return Err(format!("label {name} twice"));
        }
        let mut value = String::new();
        let mut chars = r.char_indices();
        let end = loop {
            match chars.next().ok_or("unterminated value")? {
                (_, '\\') => match chars.next().ok_or("dangling \\")?.1 {
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    'n' => value.push('\n'),
                    c => return Err(format!("bad escape \\{c}")),
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        out.push((name.to_string(), value));
        rest = &r[end + 1..];
        match rest.strip_prefix(',') {
            Some(r) => rest = r,
            None if rest.starts_with('}') => {}
            None => return Err("no , or } after a value".into()),
        }
    }
}

/// The family a sample name belongs to, given the family's type.
fn family_of<'a>(name: &'a str, types: &HashMap<String, String>) -> Option<&'a str> {
    if types.contains_key(name) {
        return Some(name);
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(f) = name.strip_suffix(suffix) {
            if matches!(
                types.get(f).map(String::as_str),
                Some("histogram" | "summary")
            ) {
                return Some(f);
            }
        }
    }
    None
}

/// Every problem promtool's parser (and linter) would report, strictly.
fn problems(text: &str) -> Vec<String> {
    let mut bad = Vec::new();
    if !text.ends_with('\n') {
        bad.push("no final newline".into());
    }
    let mut help: HashMap<String, usize> = HashMap::new();
    let mut types: HashMap<String, String> = HashMap::new();
    let mut seen_samples: HashSet<String> = HashSet::new();
    let mut series: HashSet<String> = HashSet::new();
    let mut current: Option<String> = None;
    let mut closed: HashSet<String> = HashSet::new();
    for (n, line) in text.lines().enumerate() {
        let at = |m: String| format!("line {}: {m}: {line}", n + 1);
        if let Some(c) = line.strip_prefix('#') {
            let mut w = c.trim_start().splitn(3, ' ');
            let (kw, name, rest) = (w.next(), w.next(), w.next());
            if !matches!(kw, Some("HELP" | "TYPE")) {
                continue;
            }
            let Some(name) = name.filter(|n| is_name(n)) else {
                bad.push(at("bad metric name".into()));
                continue;
            };
            if seen_samples.contains(name) {
                bad.push(at(format!("{kw:?} after samples of {name}")));
            }
            if current.as_deref() != Some(name) {
                if let Some(c) = current.take() {
                    closed.insert(c);
                }
                if closed.contains(name) {
                    bad.push(at(format!("family {name} split")));
                }
                current = Some(name.to_string());
            }
            match kw {
                Some("HELP") => {
                    *help.entry(name.to_string()).or_default() += 1;
                    if rest.is_none_or(|h| h.trim().is_empty()) {
                        bad.push(at("empty HELP".into()));
                    }
                }
                _ => {
                    let t = rest.unwrap_or("");
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&t) {
                        bad.push(at(format!("bad type {t:?}")));
                    }
                    if types.insert(name.to_string(), t.to_string()).is_some() {
                        bad.push(at(format!("second TYPE for {name}")));
                    }
                }
            }
            continue;
        }
        if line.is_empty() {
            bad.push(at("empty line".into()));
            continue;
        }
        let Some(end) = line.find(['{', ' ']) else {
            bad.push(at("no value".into()));
            continue;
        };
        let name = &line[..end];
        if !is_name(name) {
            bad.push(at("bad metric name".into()));
            continue;
        }
        let (labels, rest) = if line[end..].starts_with('{') {
            match parse_labels(&line[end..]) {
                Ok(x) => x,
                Err(e) => {
                    bad.push(at(e));
                    continue;
                }
            }
        } else {
            (Vec::new(), &line[end..])
        };
        let mut v = rest.strip_prefix(' ').unwrap_or("").split(' ');
        let value = v.next().unwrap_or("");
        if !(matches!(value, "+Inf" | "-Inf" | "NaN") || value.parse::<f64>().is_ok()) {
            bad.push(at(format!("bad value {value:?}")));
        }
        if let Some(ts) = v.next() {
            if ts.parse::<i64>().is_err() {
                bad.push(at("bad timestamp".into()));
            }
        }
        if v.next().is_some() {
            bad.push(at("trailing text".into()));
        }
        let Some(family) = family_of(name, &types) else {
            bad.push(at(format!("{name} has no TYPE before it")));
            continue;
        };
        if help.get(family).copied().unwrap_or(0) != 1 {
            bad.push(at(format!(
                "{family} has no HELP (or more than one) before it"
            )));
        }
        if current.as_deref() != Some(family) {
            bad.push(at(format!("sample of {family} outside its family's block")));
        }
        seen_samples.insert(family.to_string());
        let mut key: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
        key.sort();
        if !series.insert(format!("{name}{{{}}}", key.join(","))) {
            bad.push(at("duplicate series".into()));
        }
    }
    for (f, c) in &help {
        if *c != 1 {
            bad.push(format!("{f}: {c} HELP lines"));
        }
        if !types.contains_key(f) {
            bad.push(format!("{f}: HELP without TYPE"));
        }
    }
    for f in types.keys() {
        if !help.contains_key(f) {
            bad.push(format!("{f}: no HELP"));
        }
    }
    bad
}

#[test]
fn every_family_has_help_and_type_and_every_line_parses() {
    let b = Backend::ok("127.0.0.1");
    let body = format!(
        "{}[pool.\"c\\\"x\"]\nmembers = [{}]\n\n\
         [name.\"www.health.test\"]\npool = \"c\\\"x\"\nttl = 60\n",
        check_table("web", "tcp", ""),
        member(&b, Some("web"))
    );
    let (_dir, cfg) = setup("metrics-format", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    ask(&s, "www.health.test.");
    ask(&s, "nope.health.test.");
    let text = wait_for(Duration::from_secs(5), || {
        metric(
            &metrics(api),
            "meridian_pool_answers_total{pool=\"c\\\"x\"}",
        ) == Some(1.0)
            && metrics(api).contains("meridian_health_check_duration_seconds_bucket")
    })
    .map(|_| metrics(api))
    .unwrap_or_else(|| panic!("no pool answer or probe counted:\n{}", metrics(api)));

    let bad = problems(&text);
    assert!(bad.is_empty(), "{}\n\nin:\n{text}", bad.join("\n"));

    // The parser itself catches what it must (a family without HELP).
    let broken = "# TYPE x_total counter\nx_total 1\n";
    assert!(!problems(broken).is_empty());
    let dup = "# HELP y Y.\n# TYPE y gauge\ny{a=\"1\"} 1\ny{a=\"1\"} 2\n";
    assert!(!problems(dup).is_empty());

    match crate::common::promtool_check(&text) {
        Some((ok, out)) => assert!(ok, "promtool check metrics failed:\n{out}"),
        None => crate::common::skip(
            "every_family_has_help_and_type_and_every_line_parses (promtool part)",
            "promtool is not on PATH",
        ),
    }
}

/// Each sample's name and labels (values unescaped).
fn samples(text: &str) -> Vec<(String, Labels)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let end = l.find(['{', ' ']).unwrap();
            let labels = match parse_labels(&l[end..]) {
                Ok((labels, _)) => labels,
                Err(_) => Vec::new(),
            };
            (l[..end].to_string(), labels)
        })
        .collect()
}

fn label<'a>(labels: &'a Labels, name: &str) -> &'a str {
    labels
        .iter()
        .find(|(n, _)| n == name)
        .map_or("", |(_, v)| v.as_str())
}

/// Series per (pool, address) of the member families, and per (address,
/// port, check) of the check families.
fn per_member_and_entry(text: &str) -> (HashMap<String, usize>, HashMap<String, usize>) {
    let (mut members, mut entries) = (HashMap::new(), HashMap::new());
    for (name, l) in samples(text) {
        if name.starts_with("meridian_member_") {
            let k = format!("{}/{}", label(&l, "pool"), label(&l, "address"));
            *members.entry(k).or_default() += 1;
        } else if name.starts_with("meridian_health_") {
            let k = [label(&l, "address"), label(&l, "port"), label(&l, "check")].join("/");
            *entries.entry(k).or_default() += 1;
        }
    }
    (members, entries)
}

/// docs/src/ops/http-api.md, "How many series": a member costs 11 series,
/// one more for an override, a latency estimate, a reported load; a
/// checked entry 21 (4 counters, a histogram of 15 buckets, sum and
/// count). `metrics_members = false` leaves out exactly those, keeps the
/// pool families, and the page still passes.
#[test]
fn series_per_member_as_documented_and_the_switch_drops_them() {
    let (b1, b2) = (Backend::ok("127.0.0.1"), Backend::ok("127.0.0.2"));
    let body = format!(
        "{}[pool.a]\nmembers = [{}, {}]\n\n\
         [pool.b]\nmembers = [\"192.0.2.21\", \"192.0.2.22\", \"2001:db8::23\"]\n\n\
         [name.\"a.health.test\"]\npool = \"a\"\nttl = 60\n\n\
         [name.\"b.health.test\"]\npool = \"b\"\nttl = 60\n",
        check_table("web", "tcp", ""),
        member(&b1, Some("web")),
        member(&b2, Some("web"))
    );
    let (dir, cfg) = setup("metrics-members", &body);
    let (s, api) = serve(&cfg);
    settle(api);
    let (code, _) = http(api, "POST", "/override/192.0.2.22?state=drain");
    assert_eq!(code, 200);
    // Both checked members have passed a probe: their latency estimate.
    let text = wait_for(Duration::from_secs(5), || {
        metrics(api)
            .matches("meridian_member_rtt_estimate_seconds{")
            .count()
            == 2
    })
    .map(|_| metrics(api))
    .unwrap_or_else(|| panic!("no latency estimates:\n{}", metrics(api)));
    let (members, entries) = per_member_and_entry(&text);
    let want: HashMap<String, usize> = [
        ("a/127.0.0.1", 12),
        ("a/127.0.0.2", 12),
        ("b/192.0.2.21", 11),
        ("b/192.0.2.22", 12),
        ("b/2001:db8::23", 11),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(members, want, "series per member\n{text}");
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert!(entries.values().all(|&n| n == 21), "{entries:?}\n{text}");

    // Off: a reload applies it.
    let on = samples(&text).len();
    let off_text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("[api]\n", "[api]\nmetrics_members = false\n");
    dir.write("meridian.toml", &off_text);
    assert!(s.reload(Duration::from_secs(10)).contains("reloaded"));
    let text = metrics(api);
    let (members, entries) = per_member_and_entry(&text);
    assert!(members.is_empty() && entries.is_empty(), "{text}");
    let dropped = 2 * 12 + 11 + 12 + 11 + 2 * 21;
    assert_eq!(samples(&text).len(), on - dropped, "{text}");
    for pool in [
        "meridian_pool_up{pool=\"a\",family=\"ipv4\"} 1",
        "meridian_pool_members_up{pool=\"a\",family=\"ipv4\"} 2",
        "meridian_pool_members_up{pool=\"b\",family=\"ipv4\"} 1",
        "meridian_pool_members_up{pool=\"b\",family=\"ipv6\"} 1",
    ] {
        assert!(text.contains(pool), "no {pool}:\n{text}");
    }
    let bad = problems(&text);
    assert!(bad.is_empty(), "{}\n\nin:\n{text}", bad.join("\n"));
    match crate::common::promtool_check(&text) {
        Some((ok, out)) => assert!(ok, "promtool check metrics failed:\n{out}"),
        None => crate::common::skip(
            "series_per_member_as_documented_and_the_switch_drops_them (promtool part)",
            "promtool is not on PATH",
        ),
    }
}
