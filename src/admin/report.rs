//! Health for people and scrapers: the `/status` JSON document and the
//! health part of `/metrics` (Prometheus text format 0.0.4).

use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::engine::Engine;
use crate::health::{override_for, override_name, state_name, CheckKind, CheckSpec, OverrideMap};
use crate::pool::Member;

/// A JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_opt_str(s: Option<String>) -> String {
    s.map(|s| json_str(&s)).unwrap_or_else(|| "null".into())
}

fn json_f64(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

/// RFC 3339 UTC time with milliseconds, e.g. `2026-05-01T12:00:00.123Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + if month <= 2 { 1 } else { 0 };
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

fn kind_name(spec: &CheckSpec) -> &'static str {
    match spec.check.as_ref().map(|c| &c.kind) {
        Some(CheckKind::Tcp) => "tcp",
        Some(CheckKind::Http) => "http",
        Some(CheckKind::Https) => "https",
        _ => "none",
    }
}

fn family_name(v6: bool) -> &'static str {
    if v6 {
        "ipv6"
    } else {
        "ipv4"
    }
}

/// Every pool member with its pool, in config order (IPv4 before IPv6).
fn members(e: &Engine) -> impl Iterator<Item = (&str, &Member)> {
    e.pools.iter().flat_map(|p| {
        p.v4.iter()
            .chain(p.v6.iter())
            .map(move |m| (p.name.as_str(), m))
    })
}

/// The `/status` document.
pub fn status_json(e: &Engine, ovr: &OverrideMap) -> String {
    // Take the overrides before any entry lock (lock order: runner, entry).
    let t = &e.health;
    let mut s = String::new();
    let _ = write!(
        s,
        "{{\n  \"generation\": {},\n  \"members\": [",
        e.generation
    );
    for (k, (pool, m)) in members(e).enumerate() {
        let i = m.health;
        let spec = &e.checks[i as usize];
        let stats = t.stats(i);
        let d = stats.detail().clone();
        let port = spec
            .effective_port()
            .map(|p| p.to_string())
            .unwrap_or_else(|| "null".into());
        let last_result = match d.last_ok {
            Some(true) => "\"ok\"",
            Some(false) => "\"fail\"",
            None => "null",
        };
        let _ = write!(
            s,
            "{}\n    {{\"pool\": {}, \"address\": {}, \"port\": {port}, \"check\": {}, \"type\": \"{}\", \
             \"up\": {}, \"state\": \"{}\", \"override\": \"{}\", \"last_result\": {last_result}, \
             \"reason\": {}, \"last_check\": {}, \"latency_ms\": {}, \"consecutive_ok\": {}, \
             \"consecutive_fail\": {}, \"last_change\": {}, \"change_reason\": {}, \
             \"checks\": {}, \"failures\": {}}}",
            if k == 0 { "" } else { "," },
            json_str(pool),
            json_str(&m.addr.to_string()),
            json_str(spec.check_name()),
            kind_name(spec),
            t.is_up(i),
            state_name(t.state(i)),
            override_name(t.override_of(i)),
            json_opt_str(d.last_ok.map(|_| d.reason.clone())),
            json_opt_str(d.last_check.map(rfc3339)),
            if d.last_ok.is_some() { format!("{:.3}", d.latency_s * 1000.0) } else { "null".into() },
            d.ok_run,
            d.fail_run,
            json_opt_str(d.last_change.map(rfc3339)),
            json_opt_str(d.last_change.map(|_| d.change_reason.clone())),
            stats.checks.load(Ordering::Relaxed),
            stats.failures.load(Ordering::Relaxed),
        );
    }
    s.push_str("\n  ],\n  \"pools\": [");
    let mut first = true;
    for p in &e.pools {
        for v6 in [false, true] {
            let fam = p.family(v6);
            if fam.is_empty() {
                continue;
            }
            let (up, n) = p.is_up(v6, &|m: &Member| t.is_up(m.health));
            let _ = write!(
                s,
                "{}\n    {{\"pool\": {}, \"family\": \"{}\", \"members\": {}, \"up_members\": {n}, \"min_up\": {}, \"up\": {up}}}",
                if first { "" } else { "," },
                json_str(&p.name),
                family_name(v6),
                fam.len(),
                json_f64(p.min_up),
            );
            first = false;
        }
    }
    s.push_str("\n  ],\n  \"overrides\": [");
    for (k, ((addr, port), state)) in ovr.iter().enumerate() {
        let covered = e
            .checks
            .iter()
            .filter(|sp| sp.addr == *addr && override_for(ovr, sp) == *state)
            .count();
        let _ = write!(
            s,
            "{}\n    {{\"address\": {}, \"port\": {}, \"state\": \"{}\", \"entries\": {covered}}}",
            if k == 0 { "" } else { "," },
            json_str(&addr.to_string()),
            port.map(|p| p.to_string()).unwrap_or_else(|| "null".into()),
            override_name(*state),
        );
    }
    s.push_str("\n  ]\n}\n");
    s
}

/// A Prometheus label value.
pub fn label(v: &str) -> String {
    let mut o = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

fn entry_labels(spec: &CheckSpec) -> String {
    format!(
        "address=\"{}\",port=\"{}\",check=\"{}\"",
        spec.addr,
        spec.effective_port()
            .map(|p| p.to_string())
            .unwrap_or_default(),
        label(spec.check_name())
    )
}

/// The health lines of `/metrics`.
pub fn metrics(e: &Engine, s: &mut String) {
    let t = &e.health;
    let _ = writeln!(s, "# HELP meridian_member_up Whether a pool member is used in answers (health check and override), 1 or 0.");
    let _ = writeln!(s, "# TYPE meridian_member_up gauge");
    for (pool, m) in members(e) {
        let _ = writeln!(
            s,
            "meridian_member_up{{pool=\"{}\",address=\"{}\"}} {}",
            label(pool),
            m.addr,
            t.is_up(m.health) as u8
        );
    }
    let _ = writeln!(s, "# HELP meridian_member_health_state A member's check state (unknown, up or down), one series set to 1.");
    let _ = writeln!(s, "# TYPE meridian_member_health_state gauge");
    for (pool, m) in members(e) {
        let st = t.state(m.health);
        for name in ["unknown", "up", "down"] {
            let _ = writeln!(
                s,
                "meridian_member_health_state{{pool=\"{}\",address=\"{}\",state=\"{name}\"}} {}",
                label(pool),
                m.addr,
                (state_name(st) == name) as u8
            );
        }
    }
    let _ = writeln!(s, "# HELP meridian_member_override An operator override in force on a member (up, down or drain).");
    let _ = writeln!(s, "# TYPE meridian_member_override gauge");
    for (pool, m) in members(e) {
        let o = t.override_of(m.health);
        if o != crate::health::OVR_NONE {
            let _ = writeln!(
                s,
                "meridian_member_override{{pool=\"{}\",address=\"{}\",state=\"{}\"}} 1",
                label(pool),
                m.addr,
                override_name(o)
            );
        }
    }
    let _ = writeln!(s, "# HELP meridian_pool_up Whether a pool (per address family) has at least min_up members up.");
    let _ = writeln!(s, "# TYPE meridian_pool_up gauge");
    for p in &e.pools {
        for v6 in [false, true] {
            if p.family(v6).is_empty() {
                continue;
            }
            let (up, _) = p.is_up(v6, &|m: &Member| t.is_up(m.health));
            let _ = writeln!(
                s,
                "meridian_pool_up{{pool=\"{}\",family=\"{}\"}} {}",
                label(&p.name),
                family_name(v6),
                up as u8
            );
        }
    }
    let checked: Vec<(u32, &CheckSpec)> = e
        .checks
        .iter()
        .enumerate()
        .filter(|(_, sp)| sp.check.is_some())
        .map(|(i, sp)| (i as u32, sp))
        .collect();
    let _ = writeln!(
        s,
        "# HELP meridian_health_checks_total Health probes run, per (address, port, check)."
    );
    let _ = writeln!(s, "# TYPE meridian_health_checks_total counter");
    for (i, sp) in &checked {
        let _ = writeln!(
            s,
            "meridian_health_checks_total{{{}}} {}",
            entry_labels(sp),
            t.stats(*i).checks.load(Ordering::Relaxed)
        );
    }
    let _ = writeln!(
        s,
        "# HELP meridian_health_check_failures_total Health probes that failed."
    );
    let _ = writeln!(s, "# TYPE meridian_health_check_failures_total counter");
    for (i, sp) in &checked {
        let _ = writeln!(
            s,
            "meridian_health_check_failures_total{{{}}} {}",
            entry_labels(sp),
            t.stats(*i).failures.load(Ordering::Relaxed)
        );
    }
    let _ = writeln!(
        s,
        "# HELP meridian_health_transitions_total Health state changes, by the state entered."
    );
    let _ = writeln!(s, "# TYPE meridian_health_transitions_total counter");
    for (i, sp) in &checked {
        let st = t.stats(*i);
        for (to, v) in [("up", &st.to_up), ("down", &st.to_down)] {
            let _ = writeln!(
                s,
                "meridian_health_transitions_total{{{},to=\"{to}\"}} {}",
                entry_labels(sp),
                v.load(Ordering::Relaxed)
            );
        }
    }
    let _ = writeln!(
        s,
        "# HELP meridian_health_check_duration_seconds Health probe latency (failures included)."
    );
    let _ = writeln!(s, "# TYPE meridian_health_check_duration_seconds histogram");
    for (i, sp) in &checked {
        t.stats(*i).latency.render(
            s,
            "meridian_health_check_duration_seconds",
            &entry_labels(sp),
        );
    }
}

/// Percent-decode a path segment (`%3A` and friends).
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parse an override target: an address, `[v6]`, `v4:port` or `[v6]:port`.
pub fn parse_target(s: &str) -> Option<(IpAddr, Option<u16>)> {
    if let Ok(a) = s.parse::<IpAddr>() {
        return Some((a, None));
    }
    if let Ok(sa) = s.parse::<std::net::SocketAddr>() {
        return Some((sa.ip(), Some(sa.port())));
    }
    s.strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .and_then(|x| x.parse::<IpAddr>().ok())
        .map(|a| (a, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn report_helpers() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(1_709_251_199_250)),
            "2024-02-29T23:59:59.250Z"
        );
        assert_eq!(json_str("a\"b\\\n\u{1}"), "\"a\\\"b\\\\\\n\\u0001\"");
        assert_eq!(percent_decode("2001%3Adb8%3a%3A1"), "2001:db8::1");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        let ip: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(parse_target("2001:db8::1"), Some((ip, None)));
        assert_eq!(parse_target("[2001:db8::1]:80"), Some((ip, Some(80))));
        assert_eq!(parse_target("[2001:db8::1]"), Some((ip, None)));
        assert_eq!(
            parse_target("127.0.0.1:8080"),
            Some(("127.0.0.1".parse().unwrap(), Some(8080)))
        );
        assert_eq!(parse_target("nope"), None);
    }
}
