//! Privileges: `meridian serve` started as root binds its sockets and then
//! runs as `[server] user`; as root with neither `user` nor `allow_root`
//! (nor `--allow-root`) it refuses to start, naming both options; with
//! either it stays root and `user` is not applied. After the switch it
//! still reloads its files and runs its health checks. Started as another
//! user it keeps that user; with only CAP_NET_BIND_SERVICE it serves port 53.
//!
//! The root cases need root (CI runs as root); run as another user they are
//! skipped with a `SKIP:` line (a failure under CI=true), and the
//! unprivileged case runs instead.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use hickory_proto::rr::RecordType;

/// uid and gid of a user from the passwd database.
fn ids(user: &str) -> (u32, u32) {
    let out = Command::new("getent")
        .args(["passwd", user])
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&out.stdout).to_string();
    let f: Vec<&str> = line.trim().split(':').collect();
    assert!(f.len() >= 4, "no passwd entry for {user}: {line:?}");
    (f[2].parse().unwrap(), f[3].parse().unwrap())
}

/// (real, effective, saved, fs) uids and gids of every thread of `pid`.
fn thread_ids(pid: u32) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let st = std::fs::read_to_string(t.unwrap().path().join("status")).unwrap();
        let get = |k: &str| {
            st.lines()
                .find(|l| l.starts_with(k))
                .map(|l| {
                    l[k.len()..]
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap()
        };
        v.push((get("Uid:"), get("Gid:")));
    }
    v
}

fn groups(pid: u32) -> String {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    st.lines()
        .find(|l| l.starts_with("Groups:"))
        .map(|l| l["Groups:".len()..].trim().to_string())
        .unwrap()
}

/// The binary, copied where `nobody` can run it: the checkout may sit in a
/// folder only root can enter (e.g. under /root).
fn bin_for_nobody(dir: &TempDir) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.0.join("meridian");
    std::fs::copy(BIN, &p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// A config in `dir` serving a copy of the example zone, plus `server` keys
/// and `extra` tables.
fn config(dir: &TempDir, server: &str, extra: &str) -> std::path::PathBuf {
    let zone = std::fs::read_to_string(root().join("zones/example.test.zone")).unwrap();
    dir.write("example.test.zone", &zone);
    dir.write(
        "meridian.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:5380\"]\n{server}\n\n[[zone]]\norigin = \"example.test.\"\nfile = \"example.test.zone\"\n\n{extra}\n"
        ),
    )
}

/// Run `meridian serve` without the harness's --allow-root; wait for it to
/// exit (it must) and return (code, stderr).
fn serve_expecting_exit(cfg: &std::path::Path, extra: &[&str]) -> (i32, String) {
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--http-listen",
            "none",
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("meridian serve kept running");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status.code().unwrap_or(-1), err)
}

#[test]
fn root_without_user_or_allow_root_is_refused() {
    if !is_root() {
        skip(
            "root_without_user_or_allow_root_is_refused",
            "not root; the refusal only applies to root",
        );
        return;
    }
    let dir = TempDir::new("priv-refuse");
    let cfg = config(&dir, "", "");
    let (code, err) = serve_expecting_exit(&cfg, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("refusing to run as root"), "{err}");
    assert!(
        err.contains("user = \"nobody\""),
        "names the user option: {err}"
    );
    assert!(err.contains("allow_root = true"), "names allow_root: {err}");
    assert!(err.contains("--allow-root"), "names the flag: {err}");
    assert!(!err.contains("ready"), "{err}");
}

#[test]
fn root_switches_to_user_and_still_reloads_and_checks_health() {
    if !is_root() {
        skip(
            "root_switches_to_user_and_still_reloads_and_checks_health",
            "not root; `user` is only applied when started as root",
        );
        return;
    }
    let (uid, gid) = ids("nobody");
    // A health-checked pool: one member with a listening backend, one without.
    let up = TcpListener::bind("127.0.0.21:0").unwrap();
    let port = up.local_addr().unwrap().port();
    let dir = TempDir::new("priv-user");
    let pool = format!(
        "[check.tcp]\ntype = \"tcp\"\ninterval_ms = 200\ntimeout_ms = 150\nrise = 1\nfall = 1\n\n\
         [pool.web]\ncheck = \"tcp\"\nmembers = [{{ address = \"127.0.0.21\", port = {port} }}, {{ address = \"127.0.0.22\", port = {port} }}]\n\n\
         [name.\"web.example.test\"]\npool = \"web\"\nttl = 30\n"
    );
    let cfg = config(&dir, "user = \"nobody\"", &pool);
    // Without --allow-root: `user` alone is enough.
    let s = start_without_allow_root(&cfg);
    let pid = s.child.id();
    for (u, g) in thread_ids(pid) {
        assert_eq!(u, format!("{uid} {uid} {uid} {uid}"), "every thread's uids");
        assert_eq!(g, format!("{gid} {gid} {gid} {gid}"), "every thread's gids");
    }
    assert_eq!(groups(pid), gid.to_string(), "no supplementary groups");
    assert!(s.wait_log("switched to user nobody", Duration::from_secs(1)));
    assert!(s.alive());

    // Health checks run as nobody: the member without a backend leaves.
    let t0 = Instant::now();
    loop {
        let m = s.query(&Q::new("web.example.test.", RecordType::A));
        if addrs(&m) == ["127.0.0.21"] {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "health never settled: {:?}",
            addrs(&m)
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // A reload reads the (world-readable) files again as nobody.
    let zone = std::fs::read_to_string(dir.0.join("example.test.zone")).unwrap();
    dir.write(
        "example.test.zone",
        &format!("{zone}new     IN A    192.0.2.77\n"),
    );
    s.signal("HUP");
    assert!(
        s.wait_log("meridian: reloaded", Duration::from_secs(5)),
        "{:?}",
        s.stderr.lock().unwrap()
    );
    let m = s.query(&Q::new("new.example.test.", RecordType::A));
    assert_eq!(addrs(&m), ["192.0.2.77"]);
    drop(up);
}

fn free_addr() -> std::net::SocketAddr {
    format!("127.0.0.1:{}", free_port()).parse().unwrap()
}

#[test]
fn allow_root_keeps_root() {
    if !is_root() {
        skip("allow_root_keeps_root", "not root");
        return;
    }
    let dir = TempDir::new("priv-allow");
    // In the config (and then `user` is not applied)...
    let cfg = config(&dir, "allow_root = true\nuser = \"nobody\"", "");
    let s = start_without_allow_root(&cfg);
    assert!(s.wait_log("is not applied", Duration::from_secs(1)));
    assert!(thread_ids(s.child.id()).iter().all(|(u, _)| u == "0 0 0 0"));
    assert!(s.alive());
    drop(s);
    // ...or on the command line (what the test harness passes), which
    // overrides `user` in the config like the other flags.
    let cfg = config(&dir, "user = \"nobody\"", "");
    let s = Server::try_start(&cfg, &[free_addr()], &["--allow-root"]).expect("starts");
    assert!(thread_ids(s.child.id()).iter().all(|(u, _)| u == "0 0 0 0"));
    assert!(s.alive());
}

#[test]
fn unknown_user_is_an_error_and_unreadable_files_a_warning() {
    if !is_root() {
        skip(
            "unknown_user_is_an_error_and_unreadable_files_a_warning",
            "not root",
        );
        return;
    }
    let dir = TempDir::new("priv-bad");
    let cfg = config(&dir, "user = \"no-such-user-meridian\"", "");
    let (code, err) = serve_expecting_exit(&cfg, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("unknown user \"no-such-user-meridian\""),
        "{err}"
    );

    // Files that the user could not read on reload: serve, but warn at start.
    let locked = TempDir::new("priv-locked");
    let cfg = config(&locked, "user = \"nobody\"", "");
    std::fs::set_permissions(
        &locked.0,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--http-listen",
            "none",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(child.try_wait().unwrap().is_none(), "meridian exited");
    let q = Q::new("www.example.test.", RecordType::A).to_bytes();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert!(udp_exchange(addr, &q, Duration::from_secs(2)).is_some());
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("meridian: ready")
            && err.contains("cannot be read")
            && err.contains("reloads would fail"),
        "{err}"
    );
}

#[test]
fn an_unprivileged_user_keeps_its_user() {
    // Not root: `user` is not applied and neither option is needed. As root,
    // start meridian as nobody to check the same path.
    let dir = TempDir::new("priv-plain");
    let cfg = config(&dir, "user = \"nobody\"", "");
    let dir2 = TempDir::new("priv-plain2");
    let plain = config(&dir2, "", "");
    let bin = bin_for_nobody(&dir);
    for c in [&cfg, &plain] {
        let port = free_port();
        let mut cmd = Command::new(&bin);
        cmd.args(["serve", "--config", c.to_str().unwrap()])
            .args([
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--http-listen",
                "none",
                "--workers",
                "1",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let expect_uid = if is_root() {
            let (uid, gid) = ids("nobody");
            cmd.uid(uid).gid(gid);
            uid
        } else {
            // SAFETY: geteuid has no preconditions and cannot fail.
            unsafe { libc::geteuid() }
        };
        let mut child = cmd.spawn().unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut lines = Vec::new();
        let t0 = Instant::now();
        while !lines.iter().any(|l: &String| l.contains("ready")) {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(l) => lines.push(l),
                Err(_) if t0.elapsed() > Duration::from_secs(15) => break,
                Err(_) => {
                    if child.try_wait().unwrap().is_some() {
                        break;
                    }
                }
            }
        }
        let ready = lines.iter().any(|l| l.contains("ready"));
        let pid = child.id();
        let uids = if ready { thread_ids(pid) } else { Vec::new() };
        let _ = child.kill();
        let _ = child.wait();
        assert!(ready, "did not start as uid {expect_uid}: {lines:?}");
        let want = format!("{expect_uid} {expect_uid} {expect_uid} {expect_uid}");
        assert!(uids.iter().all(|(u, _)| *u == want), "{uids:?}");
    }
}

#[test]
fn port_53_without_root_through_cap_net_bind_service() {
    // What the systemd unit does (contrib/meridian.service): an unprivileged
    // user whose only capability is CAP_NET_BIND_SERVICE binds port 53.
    // Emulated with setpriv(1) from util-linux.
    if !is_root() || Command::new("setpriv").arg("--version").output().is_err() {
        skip(
            "port_53_without_root_through_cap_net_bind_service",
            "needs root and setpriv(1) to set up the user",
        );
        return;
    }
    let dir = TempDir::new("priv-cap");
    let cfg = config(&dir, "", "");
    // An address of our own in 127/8, so port 53 is free whatever else runs.
    let listen = "127.83.53.1:53";
    let (nuid, ngid) = ids("nobody");
    let bin = bin_for_nobody(&dir);
    let run_as_nobody = |caps: bool| {
        let mut cmd = Command::new("setpriv");
        cmd.arg(format!("--reuid={nuid}"))
            .arg(format!("--regid={ngid}"))
            .arg("--clear-groups");
        if caps {
            cmd.args([
                "--inh-caps=+net_bind_service",
                "--ambient-caps=+net_bind_service",
            ]);
        }
        cmd.arg(&bin)
            .args([
                "serve",
                "--config",
                cfg.to_str().unwrap(),
                "--listen",
                listen,
            ])
            .args(["--http-listen", "none", "--workers", "1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd.spawn().unwrap()
    };
    // Without the capability: a clear error.
    let child = run_as_nobody(false);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot bind") && err.contains("CAP_NET_BIND_SERVICE"),
        "{err}"
    );
    // With it: serves on port 53 as nobody.
    let mut child = run_as_nobody(true);
    let err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let t0 = Instant::now();
    while !lines.iter().any(|l: &String| l.contains("ready"))
        && t0.elapsed() < Duration::from_secs(15)
    {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
            lines.push(l);
        } else if child.try_wait().unwrap().is_some() {
            break;
        }
    }
    let ready = lines.iter().any(|l| l.contains("ready"));
    let answer = if ready {
        udp_exchange(
            listen.parse().unwrap(),
            &Q::new("www.example.test.", RecordType::A).to_bytes(),
            Duration::from_secs(2),
        )
    } else {
        None
    };
    let uids = if ready {
        thread_ids(child.id())
    } else {
        Vec::new()
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(ready, "{lines:?}");
    let (uid, _) = ids("nobody");
    assert!(
        uids.iter()
            .all(|(u, _)| *u == format!("{uid} {uid} {uid} {uid}")),
        "{uids:?}"
    );
    let r = Resp::new(answer.expect("answer on port 53"));
    assert_eq!(addrs(&r.msg), ["192.0.2.1"]);
}
