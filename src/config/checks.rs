//! `[check.NAME]`: health checks as configured, checked into
//! [`crate::health::Check`] (kinds, timings, HTTP expectations).

use std::collections::BTreeMap;
use std::sync::Arc;

use toml::Spanned;

use super::{CheckCfg, Source};
use crate::error::LocatedError;
use crate::health::{Check, CheckKind};

/// Check the `[check.NAME]` tables into [`Check`]s, by name.
pub fn checks(
    src: &Source,
    cfg: &BTreeMap<String, Spanned<CheckCfg>>,
) -> Result<BTreeMap<String, Arc<Check>>, LocatedError> {
    let mut out = BTreeMap::new();
    for (name, c) in cfg {
        let span = c.span();
        let c = c.get_ref();
        let kind = match c.kind.as_str() {
            "none" => CheckKind::None,
            "tcp" => CheckKind::Tcp,
            "http" => CheckKind::Http,
            "https" => CheckKind::Https,
            other => {
                return Err(src.err(
                    span,
                    format!("check {name:?}: unknown type {other:?} (tcp, http, https or none)"),
                ))
            }
        };
        let ms = |ms: Option<u64>,
                  s: Option<f64>,
                  what: &str|
         -> Result<Option<u64>, LocatedError> {
            match (ms, s) {
                (Some(_), Some(_)) => Err(src.err(
                    span.clone(),
                    format!("check {name:?}: give {what}_ms or {what}, not both"),
                )),
                (Some(v), None) => Ok(Some(v)),
                (None, Some(v)) if v.is_finite() && v > 0.0 => {
                    Ok(Some((v * 1000.0).round() as u64))
                }
                (None, Some(v)) => Err(src.err(
                    span.clone(),
                    format!("check {name:?}: {what} must be a positive number of seconds, not {v}"),
                )),
                (None, None) => Ok(None),
            }
        };
        let interval_ms = ms(c.interval_ms, c.interval, "interval")?.unwrap_or(10_000);
        if !(10..=86_400_000).contains(&interval_ms) {
            return Err(src.err(
                span,
                format!("check {name:?}: interval must be 10 ms to 1 day, not {interval_ms} ms"),
            ));
        }
        let timeout_ms =
            ms(c.timeout_ms, c.timeout, "timeout")?.unwrap_or(3_000.min(interval_ms / 2).max(1));
        if timeout_ms == 0 || timeout_ms >= interval_ms {
            return Err(src.err(
                span,
                format!(
                    "check {name:?}: timeout ({timeout_ms} ms) must be at least 1 ms and less than the interval ({interval_ms} ms)"
                ),
            ));
        }
        let rise = c.rise.unwrap_or(2);
        let fall = c.fall.unwrap_or(3);
        if rise == 0 || fall == 0 || rise > 1000 || fall > 1000 {
            return Err(src.err(
                span,
                format!("check {name:?}: rise and fall must be 1..=1000"),
            ));
        }
        let web = matches!(kind, CheckKind::Http | CheckKind::Https);
        if !web {
            let http_only = [
                ("path", c.path.is_some()),
                ("host", c.host.is_some()),
                ("expect_status", c.expect_status.is_some()),
                ("expect_body", c.expect_body.is_some()),
                ("tls_verify", c.tls_verify.is_some()),
            ];
            if let Some((key, _)) = http_only.iter().find(|(_, set)| *set) {
                return Err(src.err(
                    span,
                    format!("check {name:?}: {key} applies only to http and https checks"),
                ));
            }
        }
        if c.tls_verify.is_some() && kind != CheckKind::Https {
            return Err(src.err(
                span,
                format!("check {name:?}: tls_verify applies only to https checks"),
            ));
        }
        let path = c.path.clone().unwrap_or_else(|| "/".into());
        if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(src.err(
                span,
                format!("check {name:?}: path must start with / and hold no spaces or control characters"),
            ));
        }
        if let Some(h) = &c.host {
            if h.is_empty() || h.bytes().any(|b| b <= b' ' || b == 0x7f || b == b'/') {
                return Err(src.err(span, format!("check {name:?}: bad host {h:?}")));
            }
        }
        if c.expect_body.as_deref() == Some("") {
            return Err(src.err(span, format!("check {name:?}: expect_body is empty")));
        }
        let mut expect_status = Vec::new();
        for s in c
            .expect_status
            .clone()
            .unwrap_or_else(|| vec!["200-399".into()])
        {
            let r = match s.split_once('-') {
                Some((a, b)) => (a.trim().parse::<u16>(), b.trim().parse::<u16>()),
                None => (s.trim().parse::<u16>(), s.trim().parse::<u16>()),
            };
            match r {
                (Ok(a), Ok(b)) if a <= b && (100..=599).contains(&a) && b <= 599 => {
                    expect_status.push((a, b))
                }
                _ => {
                    return Err(src.err(
                        span,
                        format!("check {name:?}: bad expect_status {s:?} (a code like \"200\" or a range like \"200-299\")"),
                    ))
                }
            }
        }
        if expect_status.is_empty() {
            return Err(src.err(span, format!("check {name:?}: expect_status is empty")));
        }
        if c.port == Some(0) {
            return Err(src.err(span, format!("check {name:?}: port 0")));
        }
        out.insert(
            name.clone(),
            Arc::new(Check {
                name: name.clone(),
                kind,
                port: c.port,
                interval_ms,
                timeout_ms,
                rise,
                fall,
                path,
                host: c.host.clone(),
                expect_status,
                expect_body: c.expect_body.clone(),
                tls_verify: c.tls_verify.unwrap_or(true),
                unknown_is_up: c.unknown_is_up.unwrap_or(true),
            }),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<BTreeMap<String, Arc<Check>>, String> {
        let src = Source {
            path: "t.toml".into(),
            text: toml_text.to_string(),
        };
        let cfg = src.parse().map_err(|e| e.to_string())?;
        checks(&src, &cfg.check).map_err(|e| e.to_string())
    }

    #[test]
    fn parse_check_tables() {
        let c = parse(
            r#"
    [check.web]
    type = "http"
    interval_ms = 200
    timeout_ms = 100
    path = "/healthz"
    host = "svc.example"
    expect_status = ["200", "204-299"]
    expect_body = "ok"
    
    [check.secs]
    type = "https"
    interval = 2
    timeout = 0.5
    tls_verify = false
    unknown_is_up = false
    
    [check.t]
    type = "tcp"
    "#,
        )
        .unwrap();
        let web = &c["web"];
        assert_eq!(
            (web.interval_ms, web.timeout_ms, web.rise, web.fall),
            (200, 100, 2, 3)
        );
        assert_eq!(web.expect_status, vec![(200, 200), (204, 299)]);
        let s = &c["secs"];
        assert_eq!((s.interval_ms, s.timeout_ms), (2000, 500));
        assert!(!s.tls_verify && !s.unknown_is_up);
        let t = &c["t"];
        assert_eq!((t.interval_ms, t.timeout_ms), (10_000, 3_000));
    }

    #[test]
    fn parse_check_errors() {
        for (text, want) in [
            ("[check.a]\ntype = \"icmp\"", "unknown type"),
            (
                "[check.a]\ntype = \"tcp\"\ninterval_ms = 100\ntimeout_ms = 100",
                "less than the interval",
            ),
            ("[check.a]\ntype = \"tcp\"\nrise = 0", "rise and fall"),
            ("[check.a]\ntype = \"tcp\"\npath = \"/x\"", "only to http"),
            (
                "[check.a]\ntype = \"http\"\ntls_verify = false",
                "only to https",
            ),
            (
                "[check.a]\ntype = \"http\"\nexpect_status = [\"2xx\"]",
                "bad expect_status",
            ),
            (
                "[check.a]\ntype = \"http\"\npath = \"x\"",
                "path must start",
            ),
            (
                "[check.a]\ntype = \"http\"\ninterval = 1\ninterval_ms = 1000",
                "not both",
            ),
            ("[check.a]\ntype = \"http\"\nbogus = 1", "unknown field"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
            assert!(e.contains("t.toml:"), "{e}");
        }
    }
}
