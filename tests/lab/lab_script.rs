//! tools/lab/lab.sh, the lab as users run it against their own config:
//! `--check NAME` compares the resolvers with meridian and exits 0; the
//! waiting mode writes lab.env with the ports, serves through both
//! resolvers, and on SIGTERM stops every process it started; `-- COMMAND`
//! runs the command with the LAB_* variables and returns its status. A
//! signed zone is validated by both resolvers with the zone's DS from
//! `meridian dnssec ds` as trust anchor: `--check` shows AD for each answer,
//! and fails when meridian serves keys other than the anchored ones.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hickory_proto::rr::RecordType;

use crate::common::dnssec_keygen;
use crate::lab_common::dnssec::have;
use crate::lab_common::{ask, lab_dir};

fn script() -> Command {
    script_with(
        &crate::common::example_config(),
        Path::new(crate::common::BIN),
    )
}

fn script_with(config: &Path, meridian: &Path) -> Command {
    let mut c = Command::new("bash");
    c.arg(lab_dir().join("lab.sh"))
        .arg("--config")
        .arg(config)
        .arg("--meridian")
        .arg(meridian)
        .stdin(Stdio::null());
    // If this test dies without its Drop guards, the script still gets
    // SIGTERM and stops what it started.
    crate::lab_common::die_with_parent(&mut c, libc::SIGTERM);
    c
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.split(") ").nth(1).is_some_and(|r| r.starts_with('Z')))
            .unwrap_or(true)
}

/// The script in waiting mode; on drop (also on a panic) it gets SIGTERM
/// and the processes it listed are checked and, if need be, killed.
struct Running {
    child: Child,
    pids: Vec<u32>,
}

impl Running {
    fn term(&mut self) -> Option<i32> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.term();
        }
        for &p in &self.pids {
            if alive(p) {
                let _ = Command::new("kill")
                    .arg("-KILL")
                    .arg(p.to_string())
                    .status();
            }
        }
    }
}

fn read_env(path: &Path) -> HashMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

#[test]
fn check_mode_compares_resolvers_with_meridian() {
    if !crate::common::need(
        "check_mode_compares_resolvers_with_meridian",
        &["unbound", "pdns_recursor", "dig"],
    ) {
        return;
    }
    let out = script()
        .args([
            "--check",
            "geo.example.test",
            "--subnet",
            "8.8.8.0/24",
            "--subnet",
            "5.2.200.0/24",
        ])
        .args([
            "--subnet",
            "203.0.0.128/25",
            "--subnet",
            "2a00:1450:4001::/56",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stderr}{stdout}");
    assert_eq!(out.status.code(), Some(0), "{stderr}{stdout}");
    assert!(stderr.contains("meridian lab is up"), "{stderr}");
    assert!(
        stderr.contains("every answer through the resolvers equals meridian's"),
        "{stderr}"
    );
    // 4 subnets × 2 types × 2 resolvers.
    assert_eq!(
        stdout.lines().filter(|l| l.ends_with("  ok")).count(),
        16,
        "{stdout}"
    );
    assert!(!stdout.contains("WRONG"), "{stdout}");
    assert!(
        stdout.contains("198.51.100.100"),
        "5.2.200.0/24 is DE: {stdout}"
    );
}

#[test]
fn waiting_mode_prints_ports_and_stops_everything_on_sigterm() {
    if !crate::common::need(
        "waiting_mode_prints_ports_and_stops_everything_on_sigterm",
        &["unbound", "pdns_recursor", "dig"],
    ) {
        return;
    }
    let dir = crate::common::TempDir::new("lab-script");
    let env_file = dir.0.join("lab.env");
    let child = script()
        .arg("--dir")
        .arg(&dir.0)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut run = Running {
        child,
        pids: Vec::new(),
    };
    let t0 = Instant::now();
    let env = loop {
        let env = read_env(&env_file);
        if env.contains_key("LAB_PIDS") {
            break env;
        }
        if let Ok(Some(st)) = run.child.try_wait() {
            let mut err = String::new();
            use std::io::Read;
            let _ = run.child.stderr.take().unwrap().read_to_string(&mut err);
            panic!("lab.sh exited with {st} before it was up:\n{err}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "lab.sh did not come up"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    run.pids = env["LAB_PIDS"]
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(run.pids.len(), 3, "{env:?}");
    for p in &run.pids {
        assert!(alive(*p), "pid {p} of {env:?}");
    }
    let meridian = env["LAB_MERIDIAN"].parse().unwrap();
    for key in ["LAB_UNBOUND", "LAB_PDNS"] {
        let server = env[key].parse().unwrap();
        assert!(env[key].starts_with("127.0.0.1:"), "{env:?}");
        for subnet in ["85.214.0.0/24", "200.160.0.0/24"] {
            let want = ask(
                meridian,
                "geo.example.test.",
                RecordType::A,
                Some(subnet),
                false,
            );
            let got = ask(
                server,
                "geo.example.test.",
                RecordType::A,
                Some(subnet),
                true,
            );
            assert_eq!(got.addrs, want.addrs, "{key} {subnet}");
        }
    }
    assert!(crate::lab_common::http_get(
        env["LAB_METRICS"]
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap(),
        "/metrics"
    )
    .is_some());

    let code = run.term();
    assert_eq!(code, Some(143), "lab.sh exit status after SIGTERM");
    let t1 = Instant::now();
    for &p in &run.pids {
        while alive(p) && t1.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!alive(p), "pid {p} still running after lab.sh stopped");
    }
    // --dir is kept, with the rendered configs and logs.
    assert!(dir.0.join("unbound/unbound.conf").exists());
    assert!(dir.0.join("pdns/recursor.conf").exists());
}

#[test]
fn command_mode_runs_with_the_lab_variables() {
    if !crate::common::need(
        "command_mode_runs_with_the_lab_variables",
        &["unbound", "pdns_recursor", "dig"],
    ) {
        return;
    }
    let out = script()
        .args([
            "--",
            "sh",
            "-c",
            "dig @127.0.0.1 -p \"$LAB_UNBOUND_PORT\" geo.example.test +subnet=133.0.0.0/24 +short | sort; \
             dig @127.0.0.1 -p \"$LAB_PDNS_PORT\" geo.example.test +subnet=133.0.0.0/24 +short | sort; exit 7",
        ])
        .output()
        .expect("dig is required (bind9-dnsutils)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(7),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "203.0.113.100",
            "203.0.113.101",
            "203.0.113.100",
            "203.0.113.101"
        ],
        "133.0.0.0/24 is JP (AS)"
    );
}

/// zones/meridian.toml copied into `dir` (its paths made absolute) with
/// `dnssec = { keys = [...] }` on the zone: a new KSK and ZSK from
/// `meridian dnssec keygen` under `dir/keys_dir`, named relative to the
/// config.
fn signed_config(dir: &Path, name: &str, keys_dir: &str) -> PathBuf {
    let keys = dir.join(keys_dir);
    std::fs::create_dir_all(&keys).unwrap();
    let ksk = dnssec_keygen(&keys, "example.test", "ecdsap256", true);
    let zsk = dnssec_keygen(&keys, "example.test", "ecdsap256", false);
    let zones = crate::common::root().join("zones");
    let text = std::fs::read_to_string(crate::common::example_config()).unwrap();
    let geo = "database = \"../geo/example.mmdb\"";
    let file = "file = \"example.test.zone\"";
    assert!(
        text.contains(geo) && text.contains(file),
        "zones/meridian.toml changed: update signed_config"
    );
    let text = text
        .replace(
            geo,
            &format!(
                "database = \"{}\"",
                crate::common::root().join("geo/example.mmdb").display()
            ),
        )
        .replace(
            file,
            &format!(
                "file = \"{}\"\ndnssec = {{ keys = [\"{keys_dir}/{ksk}\", \"{keys_dir}/{zsk}\"] }}",
                zones.join("example.test.zone").display()
            ),
        );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The lab needs the two resolvers and dig; without them, a visible skip.
fn lab_tools(test: &str) -> bool {
    for tool in ["unbound", "pdns_recursor", "dig"] {
        if !have(tool) {
            crate::common::skip(
                test,
                &format!("{tool} is not installed (.ci/run installs it)"),
            );
            return false;
        }
    }
    true
}

/// Resolver rows of a `--check` table: (server, ad, rest of the line).
fn resolver_rows(stdout: &str) -> Vec<(String, String, String)> {
    stdout
        .lines()
        .filter(|l| l.starts_with(' '))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let server = w.next()?.to_string();
            let ad = w.next()?.to_string();
            Some((server, ad, w.collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

#[test]
fn check_mode_validates_a_signed_zone() {
    const T: &str = "check_mode_validates_a_signed_zone";
    if !lab_tools(T) {
        return;
    }
    let dir = crate::common::TempDir::new("lab-signed");
    let config = signed_config(&dir.0, "meridian.toml", "keys");
    let out = script_with(&config, Path::new(crate::common::BIN))
        .args(["--check", "geo.example.test"])
        .args(["--subnet", "8.8.8.0/24", "--subnet", "2a00:1450:4001::/56"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stderr}{stdout}");
    assert_eq!(out.status.code(), Some(0), "{stderr}{stdout}");
    assert!(
        stderr.contains("validated (trust anchor: the zone's DS from meridian dnssec ds)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("and every one was validated (AD)"),
        "{stderr}"
    );
    let header: Vec<&str> = stdout.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["subnet", "type", "server", "ad", "answer"],
        "{stdout}"
    );
    let rows = resolver_rows(&stdout);
    // 2 subnets × 2 types × 2 resolvers, each validated and equal.
    assert_eq!(rows.len(), 8, "{stdout}");
    for r in ["unbound", "pdns"] {
        assert_eq!(rows.iter().filter(|x| x.0 == r).count(), 4, "{stdout}");
    }
    for (server, ad, rest) in &rows {
        assert_eq!(ad, "yes", "{server} without AD: {stdout}");
        assert!(rest.ends_with(" ok"), "{server}: {rest}\n{stdout}");
    }
    assert!(stdout.contains("198.51.100.100"), "{stdout}");
}

#[test]
fn check_mode_fails_when_the_served_keys_are_not_the_anchored_ones() {
    const T: &str = "check_mode_fails_when_the_served_keys_are_not_the_anchored_ones";
    if !lab_tools(T) {
        return;
    }
    let dir = crate::common::TempDir::new("lab-wrong-keys");
    let anchored = signed_config(&dir.0, "meridian.toml", "keys");
    let served = signed_config(&dir.0, "served.toml", "other-keys");
    // The lab takes its anchors from `meridian dnssec ds --config
    // meridian.toml`; this meridian serves served.toml instead.
    let wrapper = dir.write(
        "meridian",
        &format!(
            "#!/bin/sh\nif [ \"$1\" = serve ]; then\n  shift 3\n  exec '{bin}' serve --config '{served}' \"$@\"\nfi\nexec '{bin}' \"$@\"\n",
            bin = crate::common::BIN,
            served = served.display()
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = script_with(&anchored, &wrapper)
        .args(["--check", "www.example.test", "--type", "A"])
        .args(["--subnet", "8.8.8.0/24"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stderr}{stdout}");
    assert_eq!(out.status.code(), Some(1), "{stderr}{stdout}");
    assert!(stderr.contains("lack AD: not validated"), "{stderr}");
    let rows = resolver_rows(&stdout);
    assert_eq!(rows.len(), 2, "{stdout}");
    for (server, ad, rest) in &rows {
        assert_eq!(ad, "no", "{server}: {stdout}");
        assert!(rest.contains("SERVFAIL"), "{server}: {rest}");
        assert!(rest.ends_with("NOT VALIDATED"), "{server}: {rest}");
    }
}
