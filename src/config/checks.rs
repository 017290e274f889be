//! `[check.NAME]`: health checks as configured, checked into
//! [`crate::health::Check`] (kinds, timings, HTTP expectations, and the
//! signals: the round-trip estimate's decay and where a load is read).

use std::collections::BTreeMap;
use std::sync::Arc;

use toml::Spanned;

use super::{CheckCfg, DurationCfg, Source};
use crate::error::LocatedError;
use crate::health::spec::{
    DEFAULT_LATENCY_DECAY_MS, DEFAULT_LOAD_MAX_STEP, DEFAULT_LOAD_SMOOTHING,
};
use crate::health::{Check, CheckKind, LoadRead, LoadSource};

/// The longest `latency_decay`: a day, like the longest interval.
const MAX_DECAY_MS: u64 = 86_400_000;

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
        let latency_decay_ms = match &c.latency_decay {
            None => DEFAULT_LATENCY_DECAY_MS,
            Some(d) => decay_ms(d.get_ref())
                .map_err(|why| src.err(d.span(), format!("check {name:?}: latency_decay {why}")))?,
        };
        let load = load_read(src, name, c, web)?;
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
                latency_decay_ms,
                load,
            }),
        );
    }
    Ok(out)
}

/// `latency_decay` in ms: 1 ms to a day.
fn decay_ms(d: &DurationCfg) -> Result<u64, String> {
    let ms = match d {
        DurationCfg::Seconds(v) if v.is_finite() && *v > 0.0 => (v * 1000.0).round(),
        DurationCfg::Seconds(v) => return Err(format!("must be a positive duration, not {v}")),
        DurationCfg::Text(t) => match humantime::parse_duration(t.trim()) {
            Ok(d) => d.as_millis() as f64,
            Err(e) => {
                return Err(format!(
                    "{t:?} is not a duration ({e}; write \"10s\" or \"500ms\")"
                ))
            }
        },
    };
    if !(1.0..=MAX_DECAY_MS as f64).contains(&ms) {
        return Err(format!("must be 1 ms to 1 day, not {ms} ms"));
    }
    Ok(ms as u64)
}

/// Where the check reads a load figure, and its damping; each key's error
/// names the key's own line.
fn load_read(
    src: &Source,
    name: &str,
    c: &CheckCfg,
    web: bool,
) -> Result<Option<LoadRead>, LocatedError> {
    let source = match (&c.load_header, &c.load_json) {
        (Some(_), Some(j)) => {
            return Err(src.err(
                j.span(),
                format!("check {name:?}: give load_header or load_json, not both"),
            ))
        }
        (Some(h), None) => {
            let v = h.get_ref();
            // An HTTP field name is a token (RFC 9110 §5.1).
            let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            if v.is_empty() || !v.bytes().all(token) {
                return Err(src.err(
                    h.span(),
                    format!("check {name:?}: load_header {v:?} is not a header name"),
                ));
            }
            Some((h.span(), "load_header", LoadSource::Header(v.clone())))
        }
        (None, Some(j)) => {
            let v = j.get_ref();
            if v.is_empty() {
                return Err(src.err(j.span(), format!("check {name:?}: load_json is empty")));
            }
            Some((j.span(), "load_json", LoadSource::Json(v.clone())))
        }
        (None, None) => None,
    };
    let fraction = |v: &Option<Spanned<f64>>, key: &str, default: f64| match v {
        None => Ok(default),
        Some(x) if x.get_ref().is_finite() && *x.get_ref() > 0.0 && *x.get_ref() <= 1.0 => {
            Ok(*x.get_ref())
        }
        Some(x) => Err(src.err(
            x.span(),
            format!(
                "check {name:?}: {key} must be in (0, 1], not {}",
                x.get_ref()
            ),
        )),
    };
    let smoothing = fraction(&c.load_smoothing, "load_smoothing", DEFAULT_LOAD_SMOOTHING)?;
    let max_step = fraction(&c.load_max_step, "load_max_step", DEFAULT_LOAD_MAX_STEP)?;
    let Some((span, key, source)) = source else {
        let stray = [
            (
                "load_smoothing",
                c.load_smoothing.as_ref().map(|x| x.span()),
            ),
            ("load_max_step", c.load_max_step.as_ref().map(|x| x.span())),
        ];
        if let Some((key, Some(span))) = stray.into_iter().find(|(_, s)| s.is_some()) {
            return Err(src.err(
                span,
                format!("check {name:?}: {key} needs load_header or load_json"),
            ));
        }
        return Ok(None);
    };
    if !web {
        return Err(src.err(
            span,
            format!("check {name:?}: {key} applies only to http and https checks"),
        ));
    }
    Ok(Some(LoadRead {
        source,
        smoothing,
        max_step,
    }))
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
        assert_eq!(t.latency_decay_ms, 10_000);
        assert!(t.load.is_none() && web.load.is_none());
    }

    #[test]
    fn parse_signal_keys() {
        let c = parse(
            r#"
    [check.h]
    type = "http"
    latency_decay = "1.5s"
    load_header = "X-Load"

    [check.j]
    type = "https"
    latency_decay = 2
    load_json = "load"
    load_smoothing = 0.25
    load_max_step = 0.05

    [check.t]
    type = "tcp"
    port = 22
    latency_decay = "500ms"
    "#,
        )
        .unwrap();
        let h = &c["h"];
        assert_eq!(h.latency_decay_ms, 1500);
        let l = h.load.as_ref().unwrap();
        assert_eq!(l.source, LoadSource::Header("X-Load".into()));
        assert_eq!((l.smoothing, l.max_step), (0.5, 0.1));
        let j = &c["j"];
        assert_eq!(j.latency_decay_ms, 2000);
        let l = j.load.as_ref().unwrap();
        assert_eq!(l.source, LoadSource::Json("load".into()));
        assert_eq!((l.smoothing, l.max_step), (0.25, 0.05));
        assert_eq!(c["t"].latency_decay_ms, 500);
    }

    #[test]
    fn signal_key_errors_name_the_key_line() {
        let text = "[check.a]\ntype = \"http\"\nload_header = \"X-Load\"\nload_max_step = 2\n";
        let e = parse(text).unwrap_err();
        assert!(e.contains("t.toml:4"), "{e}");
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
            (
                "[check.a]\ntype = \"tcp\"\nport = 1\nload_header = \"X-Load\"",
                "load_header applies only to http",
            ),
            (
                "[check.a]\ntype = \"http\"\nload_header = \"X-Load\"\nload_json = \"load\"",
                "not both",
            ),
            (
                "[check.a]\ntype = \"http\"\nload_header = \"X Load\"",
                "not a header name",
            ),
            (
                "[check.a]\ntype = \"http\"\nload_max_step = 0.1",
                "needs load_header or load_json",
            ),
            (
                "[check.a]\ntype = \"http\"\nload_json = \"l\"\nload_smoothing = 1.5",
                "load_smoothing must be in (0, 1]",
            ),
            (
                "[check.a]\ntype = \"http\"\nlatency_decay = \"soon\"",
                "latency_decay \"soon\" is not a duration",
            ),
            (
                "[check.a]\ntype = \"http\"\nlatency_decay = 0",
                "latency_decay must be a positive",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
            assert!(e.contains("t.toml:"), "{e}");
        }
    }
}
