//! `meridian ctl` against a real server: `status` prints /status, `override`
//! drains and restores a member, `reload` reloads (and fails, exit 1, on a
//! broken config, the server going on), `stop` stops the process. The API
//! address and the token come from the config (`http_listen`, `[api]
//! tokens`), or from `--api` and `--token-file`; a read token cannot write.
//! Loopback only.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::common::{free_port, run, Server};
use crate::health_support::*;

const BODY: &str = "[pool.p]\nmembers = [\"192.0.2.7\", \"192.0.2.8\"]\n\n\
                    [name.\"www.health.test\"]\npool = \"p\"\nttl = 60\n";

/// A config whose `[server]` names the API address, and the server on it.
fn start(
    tag: &str,
    body: &str,
) -> (
    crate::common::TempDir,
    std::path::PathBuf,
    Server,
    SocketAddr,
) {
    let (dir, _) = setup(tag, body);
    for _ in 0..5 {
        let api: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let text = config_text(body).replace(
            "[server]\n",
            &format!("[server]\nhttp_listen = \"{api}\"\n"),
        );
        let cfg = dir.write("meridian.toml", &text);
        let s = Server::start(&cfg, &["--http-listen", &api.to_string()]);
        if wait_for(Duration::from_secs(3), || {
            std::net::TcpStream::connect(api).is_ok()
        })
        .is_some()
        {
            return (dir, cfg, s, api);
        }
    }
    panic!("no server");
}

fn ctl(cfg: &Path, args: &[&str]) -> (i32, String, String) {
    let mut a = vec!["ctl", "--config", cfg.to_str().unwrap()];
    a.extend_from_slice(args);
    run(&a)
}

#[test]
fn status_and_override_from_the_config() {
    let (dir, cfg, s, api) = start("ctl-override", BODY);
    let (code, out, err) = ctl(&cfg, &["status", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("status --json is JSON");
    assert_eq!(v["members"].as_array().unwrap().len(), 2, "{out}");
    // The default is a table: a row per member, half the pool's share each.
    let (code, out, err) = ctl(&cfg, &["status"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        serde_json::from_str::<serde_json::Value>(&out).is_err(),
        "{out}"
    );
    assert_eq!(
        row(&out, "192.0.2.7"),
        [
            "p",
            "192.0.2.7",
            "none",
            "up",
            "-",
            "usable",
            "1",
            "1",
            "1.000",
            "50.0",
            "%"
        ],
        "{out}"
    );
    assert_eq!(row(&out, "192.0.2.8")[9], "50.0", "{out}");
    assert!(out.lines().count() < 12, "{out}");

    let (code, out, err) = ctl(&cfg, &["override", "192.0.2.7", "drain"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("drain"), "{out}");
    assert_eq!(ask(&s, "www.health.test.").addrs, set(&["192.0.2.8"]));
    assert_eq!(status(api)["overrides"].as_array().unwrap().len(), 1);
    // The table shows the drain, and the other member's whole share.
    let (_, out, _) = ctl(&cfg, &["status"]);
    let r = row(&out, "192.0.2.7");
    assert_eq!(
        (r[4].as_str(), r[5].as_str(), r[9].as_str()),
        ("drain", "drained", "-"),
        "{out}"
    );
    assert_eq!(row(&out, "192.0.2.8")[9], "100.0", "{out}");
    assert!(out.contains("override: 192.0.2.7 drain"), "{out}");
    // The audit line names the token ctl took from the config's file.
    assert!(s.wait_log(
        "api write: token tester POST /override/192%2E0%2E2%2E7?state=drain -> 200",
        Duration::from_secs(5)
    ));

    // --api and --token-file instead of the config; a read token is refused.
    let tokens = dir.0.join("api.tokens");
    let base = [
        "ctl",
        "--api",
        &format!("http://{api}"),
        "--token-file",
        tokens.to_str().unwrap(),
    ];
    let mut a = base.to_vec();
    a.extend(["--token", "scraper", "override", "192.0.2.7", "none"]);
    let (code, _, err) = run(&a);
    assert_eq!(code, 1);
    assert!(err.contains("403") && err.contains("read scope"), "{err}");
    let mut a = base.to_vec();
    a.extend(["override", "192.0.2.7", "none"]);
    let (code, _, err) = run(&a);
    assert_eq!(code, 0, "{err}");
    assert_eq!(status(api)["overrides"].as_array().unwrap().len(), 0);
    assert_eq!(
        ask(&s, "www.health.test.").addrs,
        set(&["192.0.2.7", "192.0.2.8"])
    );
    // A bad state never leaves the client.
    let (code, _, _) = ctl(&cfg, &["override", "192.0.2.7", "sideways"]);
    assert_eq!(code, 2);
}

/// The `ctl status` table row of `member`, split on blanks.
fn row(table: &str, member: &str) -> Vec<String> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .find(|r| r.get(1).map(String::as_str) == Some(member))
        .unwrap_or_else(|| panic!("no row for {member} in:\n{table}"))
}

#[test]
fn lookup_server_shows_the_live_decision() {
    let (dir, cfg, _s, api) = start("ctl-lookup", BODY);
    let (code, _, err) = ctl(&cfg, &["override", "192.0.2.7", "drain"]);
    assert_eq!(code, 0, "{err}");
    let q = ["--name", "www.health.test", "--client", "198.51.100.0/24"];

    // Asked of the running server: the drained member is out of the answer.
    let tokens = dir.0.join("api.tokens");
    let api_text = api.to_string();
    let mut a = vec!["lookup", "--server", &api_text];
    a.extend(["--token-file", tokens.to_str().unwrap()]);
    a.extend(q);
    let (code, live, err) = run(&a);
    assert_eq!(code, 0, "{err}");
    assert!(live.starts_with("view:     the running server"), "{live}");
    assert!(
        live.contains("192.0.2.8") && line(&live, "answer:").contains("192.0.2.8"),
        "{live}"
    );
    assert!(!line(&live, "answer:").contains("192.0.2.7"), "{live}");
    assert!(line(&live, "  192.0.2.7").contains("drained"), "{live}");
    assert!(line(&live, "balance:").contains("1 of 2"), "{live}");

    // Offline: the configured view, saying what it leaves out.
    let mut a = vec!["lookup", "--config", cfg.to_str().unwrap()];
    a.extend(q);
    let (code, offline, err) = run(&a);
    assert_eq!(code, 0, "{err}");
    assert!(offline.starts_with("view:     offline"), "{offline}");
    for w in [
        "overrides",
        "runtime weights",
        "no health check",
        "--server",
    ] {
        assert!(line(&offline, "view:").contains(w), "{offline}");
    }
    assert!(line(&offline, "answer:").contains("192.0.2.7"), "{offline}");
    assert!(
        line(&offline, "  192.0.2.7").contains("usable"),
        "{offline}"
    );

    // Errors come back as the offline form gives them, exit 1.
    let (code, _, err) = run(&[
        "lookup",
        "--server",
        &api_text,
        "--name",
        "nowhere.example",
        "--client",
        "192.0.2.1",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("not in any zone"), "{err}");
}

/// The first line of `text` starting with `prefix`.
fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{text}"))
}

#[test]
fn reload_and_stop() {
    let (dir, cfg, s, api) = start("ctl-reload", BODY);
    let text = std::fs::read_to_string(&cfg).unwrap();
    dir.write("meridian.toml", &text.replace("ttl = 60", "ttl = 61"));
    let (code, out, err) = ctl(&cfg, &["reload"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("reloaded"), "{out}");
    assert!(s.wait_log("reloaded (API request)", Duration::from_secs(5)));
    assert_eq!(ask(&s, "www.health.test.").ttls, vec![61, 61]);

    // A broken config: exit 1, the server keeps serving the old one.
    dir.write("meridian.toml", &text.replace("ttl = 60", "ttl = \"x\""));
    let (code, _, err) = ctl(&cfg, &["--api", &api.to_string(), "reload"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("reload failed"), "{err}");
    assert!(ask(&s, "www.health.test.").addrs.len() == 2);

    dir.write("meridian.toml", &text);
    let mut s = s;
    let (code, out, err) = ctl(&cfg, &["stop"]);
    assert_eq!(code, 0, "{out}{err}");
    let gone = wait_for(Duration::from_secs(10), || {
        matches!(s.child.try_wait(), Ok(Some(_)))
    });
    assert!(gone.is_some(), "the server did not stop");
    assert!(s.wait_log("stop asked through the API", Duration::from_secs(1)));
}

#[test]
fn no_api_address_is_a_clear_error() {
    let (dir, cfg) = setup("ctl-noapi", BODY);
    let (code, _, err) = ctl(&cfg, &["status"]);
    assert_eq!(code, 1);
    assert!(err.contains("--api"), "{err}");
    // `http_listen = "none"` is the API off, said as such (not dialled).
    let text = std::fs::read_to_string(&cfg).unwrap();
    dir.write(
        "meridian.toml",
        &text.replace("[server]\n", "[server]\nhttp_listen = \"none\"\n"),
    );
    let (code, _, err) = ctl(&cfg, &["status"]);
    assert_eq!(code, 1);
    assert!(err.contains("turns the API off"), "{err}");
}
