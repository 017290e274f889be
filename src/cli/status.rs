//! The table `meridian ctl status` prints from a server's `/status`
//! document: one row per pool member (its health, the operator's override,
//! the balancing standing, the weights and its share of the pool), one per
//! pool family, then the overrides and runtime weights in force. The
//! document itself is `ctl status --json`.

use serde_json::Value;

/// The whole table, ending without a newline.
pub fn status_table(v: &Value) -> String {
    let empty = Vec::new();
    let members = v["members"].as_array().unwrap_or(&empty);
    let pools = v["pools"].as_array().unwrap_or(&empty);
    let mut out = member_rows(members);
    out.push('\n');
    out += &pool_rows(pools);
    for o in v["overrides"].as_array().unwrap_or(&empty) {
        out += &format!(
            "\noverride: {} {} ({} check entr{})",
            addr_port(o),
            text(&o["state"]),
            o["entries"],
            if o["entries"] == 1 { "y" } else { "ies" }
        );
    }
    for w in v["weights"].as_array().unwrap_or(&empty) {
        out += &format!("\nruntime weight: {} × {}", addr_port(w), num(&w["weight"]));
    }
    if !v["fleet"].is_null() {
        out += "\nfleet: who set each override and weight, and where: ctl status --json";
    }
    out.trim_end().to_string()
}

/// Members: POOL MEMBER CHECK HEALTH OVERRIDE STANDING WEIGHT RUNTIME EFFECTIVE SHARE.
/// SHARE is the member's part of its pool family's effective weight among
/// the members answers may hold (`up`): what `one` and `some` answers
/// follow; `-` for a member that is out.
fn member_rows(members: &[Value]) -> String {
    let mut rows = vec![[
        "POOL",
        "MEMBER",
        "CHECK",
        "HEALTH",
        "OVERRIDE",
        "STANDING",
        "WEIGHT",
        "RUNTIME",
        "EFFECTIVE",
        "SHARE",
    ]
    .map(String::from)];
    let fam = |x: &Value| (x["pool"].as_str().unwrap_or("").to_string(), is_v6(x));
    let mut totals = std::collections::HashMap::new();
    for m in members.iter().filter(|m| m["up"] == true) {
        *totals.entry(fam(m)).or_insert(0.0) += m["effective_weight"].as_f64().unwrap_or(0.0);
    }
    for m in members {
        let total: f64 = totals.get(&fam(m)).copied().unwrap_or(0.0);
        let eff = m["effective_weight"].as_f64().unwrap_or(0.0);
        let share = if m["up"] == true && total > 0.0 {
            format!("{:.1} %", eff / total * 100.0)
        } else {
            "-".into()
        };
        let mut standing = text(&m["standing"]);
        if m["factors"]["slow_start"].as_f64().is_some_and(|f| f < 1.0) {
            standing += ", slow start";
        }
        if let Some(f) = m["factors"]["errors"].as_f64().filter(|f| *f < 1.0) {
            standing += &format!(", errors × {f:.2}");
        }
        let ovr = match text(&m["override"]).as_str() {
            "none" => "-".to_string(),
            o => o.to_string(),
        };
        rows.push([
            text(&m["pool"]),
            addr_port(m),
            text(&m["check"]),
            text(&m["state"]),
            ovr,
            standing,
            num(&m["weight"]),
            num(&m["runtime_weight"]),
            format!("{eff:.3}"),
            share,
        ]);
    }
    align(&rows, &[6, 7, 8, 9])
}

/// Pool families: POOL FAMILY USABLE MIN_UP PASSING STATE.
fn pool_rows(pools: &[Value]) -> String {
    let mut rows =
        vec![["POOL", "FAMILY", "USABLE", "MIN_UP", "PASSING", "STATE"].map(String::from)];
    for p in pools {
        let state = match (p["up"] == true, p["panic"] == true) {
            (_, true) => "panic (every member not taken out answers)",
            (true, false) => "up",
            (false, false) => "down (below min_up: the next pool or when_all_down)",
        };
        rows.push([
            text(&p["pool"]),
            text(&p["family"]),
            format!("{}/{}", p["up_members"], p["members"]),
            num(&p["min_up"]),
            format!(
                "{:.0} %",
                p["passing_share"].as_f64().unwrap_or(0.0) * 100.0
            ),
            state.to_string(),
        ]);
    }
    align(&rows, &[2, 3, 4])
}

/// Columns padded to their widest cell, two spaces apart; the columns in
/// `right` aligned right (numbers). No trailing blanks.
fn align<const N: usize>(rows: &[[String; N]], right: &[usize]) -> String {
    let mut width = [0usize; N];
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            let pad = width[i] - c.chars().count();
            if i > 0 {
                line += "  ";
            }
            if right.contains(&i) {
                line += &" ".repeat(pad);
                line += c;
            } else {
                line += c;
                line += &" ".repeat(pad);
            }
        }
        out += line.trim_end();
        out.push('\n');
    }
    out
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// A number as written in the config (`1`, `0.5`, not `1.0`), `-` when absent.
fn num(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{}", x as i64),
        Some(x) => x.to_string(),
        None => "-".into(),
    }
}

fn is_v6(m: &Value) -> bool {
    m["address"].as_str().is_some_and(|a| a.contains(':'))
}

/// `192.0.2.1`, `192.0.2.1:8080`, `[2001:db8::1]:8080`.
fn addr_port(m: &Value) -> String {
    let a = text(&m["address"]);
    match m["port"].as_u64() {
        None => a,
        Some(p) if a.contains(':') => format!("[{a}]:{p}"),
        Some(p) => format!("{a}:{p}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_per_pool_family_among_usable_members() {
        let v: Value = serde_json::from_str(
            r#"{"members": [
              {"pool": "p", "address": "192.0.2.1", "port": null, "check": "none", "state": "up",
               "override": "none", "up": true, "weight": 3, "runtime_weight": 1.0,
               "effective_weight": 3.0, "standing": "usable", "factors": {"slow_start": 1.0}},
              {"pool": "p", "address": "192.0.2.2", "port": 80, "check": "web", "state": "up",
               "override": "drain", "up": false, "weight": 1, "runtime_weight": 1.0,
               "effective_weight": 1.0, "standing": "drained", "factors": {"slow_start": 1.0}},
              {"pool": "p", "address": "192.0.2.3", "port": null, "check": "none", "state": "up",
               "override": "none", "up": true, "weight": 1, "runtime_weight": 1.0,
               "effective_weight": 1.0, "standing": "usable", "factors": {"slow_start": 0.5}},
              {"pool": "p", "address": "2001:db8::1", "port": 80, "check": "web", "state": "down",
               "override": "none", "up": true, "weight": 1, "runtime_weight": 1.0,
               "effective_weight": 1.0, "standing": "kept: panic", "factors": {"slow_start": 1.0}}],
             "pools": [], "overrides": [], "weights": []}"#,
        )
        .unwrap();
        let t = status_table(&v);
        let line = |a: &str| t.lines().find(|l| l.contains(a)).unwrap().to_string();
        assert!(line("192.0.2.1 ").ends_with("75.0 %"), "{t}");
        assert!(line("192.0.2.2:80").ends_with(" -"), "{t}");
        let words: Vec<String> = line("192.0.2.2:80")
            .split_whitespace()
            .map(String::from)
            .collect();
        assert_eq!(words[4..6], ["drain", "drained"], "{t}");
        assert!(line("192.0.2.3").contains("usable, slow start"), "{t}");
        assert!(line("[2001:db8::1]:80").ends_with("100.0 %"), "{t}");
    }
}
