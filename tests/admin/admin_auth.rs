//! Who may use the HTTP API: a cross-site request (foreign Origin and Host,
//! `text/plain`) drains nothing; writes need a write-scope token from the
//! `[api] tokens` file and are logged with its name; a wrong `Host` is
//! refused; without a token file writes are off and reads stay open;
//! `read_needs_token` closes reads; `meridian check` names the token file's
//! bad line. Loopback only.

use std::net::SocketAddr;
use std::time::Duration;

use crate::health_support::*;

const BODY: &str = "[pool.p]\nmembers = [\"192.0.2.7\"]\n\n\
                    [name.\"www.health.test\"]\npool = \"p\"\nttl = 60\n";
const DRAIN: &str = "/override/192.0.2.7?state=drain";

fn overrides(api: SocketAddr) -> usize {
    status(api)["overrides"].as_array().map_or(0, |a| a.len())
}

#[test]
fn a_cross_site_request_drains_nothing() {
    let (_dir, cfg) = setup("auth-xsite", BODY);
    let (s, api) = serve(&cfg);
    // What a web page's form or fetch() sends, after a DNS rebinding too.
    let (code, body) = http_with(
        api,
        "POST",
        DRAIN,
        &[
            ("Host", "evil.example:8080"),
            ("Origin", "http://evil.example:8080"),
            ("Content-Type", "text/plain"),
        ],
    );
    assert_eq!(code, 403, "{body}");
    // The right Host, a foreign Origin, even a valid token: refused.
    let auth = format!("Bearer {WRITE_TOKEN}");
    let (code, body) = http_with(
        api,
        "POST",
        DRAIN,
        &[
            ("Host", &api.to_string()),
            ("Origin", "http://evil.example"),
            ("Content-Type", "text/plain"),
            ("Authorization", &auth),
        ],
    );
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("Origin"), "{body}");
    // The refusal's audit line names the valid token that was sent.
    assert!(
        s.wait_log(
            &format!("api write: token tester POST {DRAIN} -> 403"),
            Duration::from_secs(5)
        ),
        "the refused Origin write is not logged with its token: {:?}",
        s.stderr.lock().unwrap()
    );
    assert_eq!(overrides(api), 0, "{}", status(api));
    assert_eq!(ask(&s, "www.health.test.").addrs, set(&["192.0.2.7"]));
}

#[test]
fn writes_need_a_write_token_and_are_audited() {
    let (_dir, cfg) = setup("auth-tokens", BODY);
    let (s, api) = serve(&cfg);
    let host = api.to_string();
    // No token.
    let (code, body) = http_with(api, "POST", DRAIN, &[("Host", &host)]);
    assert_eq!(code, 403, "{body}");
    // A wrong one.
    let (code, _) = http_with(
        api,
        "POST",
        DRAIN,
        &[
            ("Host", &host),
            ("Authorization", "Bearer not-a-token-0123456789"),
        ],
    );
    assert_eq!(code, 403);
    // A read token.
    let read = format!("Bearer {READ_TOKEN}");
    let (code, body) = http_with(
        api,
        "POST",
        DRAIN,
        &[("Host", &host), ("Authorization", &read)],
    );
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("read scope"), "{body}");
    assert_eq!(overrides(api), 0);
    // Reads are open (no read_needs_token), with or without a token.
    assert_eq!(http_with(api, "GET", "/status", &[("Host", &host)]).0, 200);
    assert_eq!(
        http_with(
            api,
            "GET",
            "/metrics",
            &[("Host", &host), ("Authorization", &read)]
        )
        .0,
        200
    );
    // The write token.
    let write = format!("Bearer {WRITE_TOKEN}");
    let (code, body) = http_with(
        api,
        "POST",
        DRAIN,
        &[("Host", &host), ("Authorization", &write)],
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(overrides(api), 1);
    assert!(
        s.wait_log(
            &format!("api write: token tester POST {DRAIN} -> 200"),
            Duration::from_secs(5)
        ),
        "no audit line naming the token: {:?}",
        s.stderr.lock().unwrap()
    );
    // The refused attempts are in the log as well, without a name.
    assert!(s.wait_log(
        &format!("api write: token (none) POST {DRAIN} -> 403"),
        Duration::from_secs(1)
    ));
    // And the secrets never are.
    let log = s.stderr.lock().unwrap().join("\n");
    assert!(
        !log.contains(WRITE_TOKEN) && !log.contains(READ_TOKEN),
        "{log}"
    );
}

#[test]
fn a_foreign_host_is_refused_and_localhost_is_not() {
    let (_dir, cfg) = setup("auth-host", BODY);
    let (_s, api) = serve(&cfg);
    let (code, body) = http_with(api, "GET", "/status", &[("Host", "rebound.example.com")]);
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("host_names"), "{body}");
    assert_eq!(
        http_with(api, "GET", "/metrics", &[]).0,
        403,
        "no Host at all"
    );
    let local = format!("localhost:{}", api.port());
    assert_eq!(http_with(api, "GET", "/status", &[("Host", &local)]).0, 200);
}

#[test]
fn configured_host_names_are_accepted() {
    let body = BODY.to_string();
    let (dir, _) = setup("auth-hostnames", &body);
    let text = config_text(&body).replace(
        "tokens = \"api.tokens\"\n",
        "tokens = \"api.tokens\"\nhost_names = [\"dns-admin.example.net\"]\n",
    );
    let cfg = dir.write("meridian.toml", &text);
    let (_s, api) = serve(&cfg);
    let h = format!("DNS-Admin.example.net:{}", api.port());
    assert_eq!(http_with(api, "GET", "/status", &[("Host", &h)]).0, 200);
    assert_eq!(
        http_with(api, "GET", "/status", &[("Host", "other.example.net")]).0,
        403
    );
}

#[test]
fn without_a_token_file_writes_are_off_and_reads_open() {
    let (dir, _) = setup("auth-off", BODY);
    let text = config_text(BODY).replace("[api]\ntokens = \"api.tokens\"\n", "");
    assert!(!text.contains("[api]"));
    let cfg = dir.write("open.toml", &text);
    let (_s, api) = serve(&cfg);
    let (code, body) = http(api, "POST", DRAIN);
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains("[api] tokens"),
        "the refusal says how to turn writes on: {body}"
    );
    assert_eq!(overrides(api), 0);
    assert_eq!(
        http_with(api, "GET", "/metrics", &[("Host", &api.to_string())]).0,
        200
    );
}

#[test]
fn read_needs_token_closes_reads() {
    let (dir, _) = setup("auth-reads", BODY);
    let text = config_text(BODY).replace(
        "tokens = \"api.tokens\"\n",
        "tokens = \"api.tokens\"\nread_needs_token = true\n",
    );
    let cfg = dir.write("meridian.toml", &text);
    let (_s, api) = serve(&cfg);
    let host = api.to_string();
    assert_eq!(http_with(api, "GET", "/metrics", &[("Host", &host)]).0, 403);
    assert_eq!(http_with(api, "GET", "/status", &[("Host", &host)]).0, 403);
    let read = format!("Bearer {READ_TOKEN}");
    for path in ["/metrics", "/status"] {
        assert_eq!(
            http_with(
                api,
                "GET",
                path,
                &[("Host", &host), ("Authorization", &read)]
            )
            .0,
            200
        );
    }
}

#[test]
fn check_names_the_bad_line_of_the_token_file() {
    let (dir, cfg) = setup("auth-check", BODY);
    let (code, out, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains("warning"), "{err}");

    let tokens = dir.write(
        "api.tokens",
        "# ops\nalice write 0123456789abcdef0123\nbob admin 0123456789abcdef0124\n",
    );
    let (code, _, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("{}:3:", tokens.display())) && err.contains("admin"),
        "{err}"
    );

    // Too short a secret, at its line.
    dir.write("api.tokens", "alice write short\n");
    let (code, _, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains(&format!("{}:1:", tokens.display())), "{err}");

    // A missing file: the config line that names it (line 5: `tokens = `).
    std::fs::remove_file(&tokens).unwrap();
    let (code, _, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains(&format!("{}:5:", cfg.display())), "{err}");
    assert!(err.contains("api.tokens"), "{err}");

    // A file every user can read: valid, with a warning.
    let tokens = dir.write("api.tokens", "alice write 0123456789abcdef0123\n");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, _, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning") && err.contains("readable"), "{err}");

    // An unknown [api] key, at its line.
    let text = config_text(BODY).replace("[api]\n", "[api]\ntoken = \"x\"\n");
    let cfg = dir.write("meridian.toml", &text);
    let (code, _, err) = crate::common::run(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains(&format!("{}:5:", cfg.display())), "{err}");
}
