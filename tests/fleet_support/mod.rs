//! Shared by tests/fleet_*.rs: a real etcd cluster (Debian's etcd-server)
//! of N members on 127.0.0.1 with ephemeral ports and data in a temp dir,
//! and meridian nodes in fleet mode pointing at it. Every process is
//! killed when its guard drops.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{skip, Server, TempDir};
use crate::health_support::{serve, write_tokens};

/// Is etcd here and meridian built with fleet support? A visible SKIP
/// line when not.
pub(crate) fn fleet_ready(test: &str) -> bool {
    if !cfg!(feature = "fleet") {
        skip(
            test,
            "meridian built without the `fleet` feature (cargo test --all-features)",
        );
        return false;
    }
    if Command::new("etcd").arg("--version").output().is_err() {
        skip(test, "etcd (Debian etcd-server) is not installed");
        return false;
    }
    true
}

/// One etcd member.
pub(crate) struct Member {
    pub(crate) name: String,
    pub(crate) client: String,
    child: Option<Child>,
    args: Vec<String>,
    log: std::path::PathBuf,
}

/// An etcd cluster on loopback.
pub(crate) struct Etcd {
    pub(crate) members: Vec<Member>,
    _dir: TempDir,
}

impl Etcd {
    /// Start `n` members and wait until the cluster is healthy. A member
    /// that exits while the cluster forms (a port taken between choosing
    /// and binding it, say) makes a new attempt on new ports; a cluster
    /// that never forms fails with each member's last log lines.
    pub(crate) fn start(n: usize) -> Etcd {
        let mut report = String::new();
        for attempt in 1..=3 {
            match Etcd::try_start(n) {
                Ok(e) => return e,
                Err(why) => {
                    eprintln!("etcd attempt {attempt} of 3 failed: {why}");
                    report = why;
                }
            }
        }
        panic!("etcd never became healthy: {report}");
    }

    fn try_start(n: usize) -> Result<Etcd, String> {
        // In memory when the machine has /dev/shm: each member preallocates
        // a 64 MB WAL and fsyncs every append, which a nearly full or slow
        // shared disk turns into a cluster that never forms.
        let dir = match roomy_shm() {
            Some(shm) => TempDir::new_in(shm, "etcd"),
            None => TempDir::new("etcd"),
        };
        let ports = distinct_ports(2 * n);
        let ports: Vec<(u16, u16)> = ports.chunks(2).map(|c| (c[0], c[1])).collect();
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, p))| format!("e{i}=http://127.0.0.1:{p}"))
            .collect();
        let mut members = Vec::new();
        for (i, (c, p)) in ports.iter().enumerate() {
            let name = format!("e{i}");
            let client = format!("http://127.0.0.1:{c}");
            let peer = format!("http://127.0.0.1:{p}");
            let args: Vec<String> = [
                "--name",
                &name,
                "--data-dir",
                &dir.0.join(&name).display().to_string(),
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
                "--initial-cluster",
                &initial.join(","),
                "--initial-cluster-state",
                "new",
                "--initial-cluster-token",
                "meridian-test",
                // Slow shared CI disks stall fsync for hundreds of ms; a
                // tighter election timeout makes the cluster churn leaders
                // instead of forming.
                "--heartbeat-interval",
                "100",
                "--election-timeout",
                "1000",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let log = dir.0.join(format!("{name}.log"));
            let child = spawn_etcd(&args, &log);
            members.push(Member {
                name,
                client,
                child: Some(child),
                args,
                log,
            });
        }
        let mut e = Etcd { members, _dir: dir };
        let t0 = Instant::now();
        while !e.healthy() {
            let exited = e.members.iter_mut().find_map(|m| {
                let st = m.child.as_mut()?.try_wait().ok()??;
                Some(format!("{} exited ({st})", m.name))
            });
            if let Some(why) = exited {
                return Err(format!("{why}\n{}", e.logs()));
            }
            if t0.elapsed() > Duration::from_secs(45) {
                return Err(format!("not healthy after 45 s\n{}", e.logs()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(e)
    }

    /// The last lines each member logged, and the free space where they
    /// keep their data: what a failure report needs.
    fn logs(&self) -> String {
        let mut out = String::new();
        for m in &self.members {
            let text = std::fs::read_to_string(&m.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(12)..];
            out.push_str(&format!(
                "--- {} ({})\n{}\n",
                m.name,
                m.client,
                tail.join("\n")
            ));
        }
        if let Ok(df) = Command::new("df").arg("-h").arg(&self._dir.0).output() {
            out.push_str(&String::from_utf8_lossy(&df.stdout));
        }
        out
    }

    /// The client URLs of the members still running.
    pub(crate) fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client.clone()).collect()
    }

    fn etcdctl(&self, args: &[&str]) -> (bool, String) {
        let live: Vec<String> = self
            .members
            .iter()
            .filter(|m| m.child.is_some())
            .map(|m| m.client.clone())
            .collect();
        let out = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", live.join(",")))
            .args(["--dial-timeout=1s", "--command-timeout=2s"])
            .args(args)
            .output()
            .expect("run etcdctl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    }

    /// Every running member answers.
    pub(crate) fn healthy(&self) -> bool {
        self.etcdctl(&["endpoint", "health"]).0
    }

    /// Keys and values under `prefix`.
    pub(crate) fn get_prefix(&self, prefix: &str) -> String {
        self.etcdctl(&["get", "--prefix", prefix]).1
    }

    /// The index of the current leader.
    pub(crate) fn leader(&self) -> Option<usize> {
        let (_, out) = self.etcdctl(&["endpoint", "status", "-w", "json"]);
        let v: serde_json::Value = serde_json::from_str(&out).ok()?;
        for st in v.as_array()? {
            let s = &st["Status"];
            if s["header"]["member_id"] == s["leader"] {
                let ep = st["Endpoint"].as_str()?;
                return self.members.iter().position(|m| m.client == ep);
            }
        }
        None
    }

    /// Kill member `i` (SIGKILL).
    pub(crate) fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start every killed member again on its data (the cluster comes
    /// back with its state) and wait until it is healthy.
    pub(crate) fn restart_all(&mut self) {
        for m in &mut self.members {
            if m.child.is_none() {
                m.child = Some(spawn_etcd(&m.args, &m.log));
            }
        }
        let t0 = Instant::now();
        while !self.healthy() {
            assert!(
                t0.elapsed() < Duration::from_secs(45),
                "etcd did not come back\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kill every member.
    pub(crate) fn kill_all(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// `/dev/shm` when this process can write there and it has room for a
/// few etcd members (each preallocates a 64 MB WAL): 1 GiB free. A
/// container's default /dev/shm is 64 MB, which would fail them.
pub(crate) fn roomy_shm() -> Option<&'static Path> {
    let shm = Path::new("/dev/shm");
    let probe = shm.join(format!("meridian-probe-{}", std::process::id()));
    let writable = std::fs::create_dir(&probe).is_ok();
    let _ = std::fs::remove_dir(&probe);
    if !writable {
        return None;
    }
    let path = std::ffi::CString::new("/dev/shm").ok()?;
    // SAFETY: statvfs is plain old data; all zeroes is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `st` is a valid statvfs to fill.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let free = st.f_bavail as u64 * st.f_frsize as u64;
    (free >= 1 << 30).then_some(shm)
}

/// `n` loopback ports, all different: each is held open until every one
/// is chosen, so two members never get the same port.
fn distinct_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port"))
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// Start one member, appending its log to `log`.
fn spawn_etcd(args: &[String], log: &Path) -> Child {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("open the etcd log");
    Command::new("etcd")
        .args(args)
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("start etcd")
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// A meridian node in fleet mode, with its HTTP API.
pub(crate) struct Node {
    pub(crate) server: Server,
    pub(crate) api: SocketAddr,
    pub(crate) config: std::path::PathBuf,
    pub(crate) _dir_keep: Option<TempDir>,
}

/// The fleet test zone.
const ZONE: &str = "$ORIGIN fleet.test.\n$TTL 300\n\
    @ IN SOA ns1 hostmaster 1 7200 1800 1209600 300\n\
    @ IN NS ns1\nns1 IN A 192.0.2.53\n";

/// A meridian.toml for node `node` of the fleet on `etcd`: pool `web`
/// (127.0.0.81, 127.0.0.82, unchecked) behind `web.fleet.test`, `all`.
pub(crate) fn node_config(dir: &Path, node: &str, etcd: &[String]) -> std::path::PathBuf {
    node_config_with(dir, node, etcd, "", "")
}

/// [`node_config`] with more `[fleet]` keys and more tables.
pub(crate) fn node_config_with(
    dir: &Path,
    node: &str,
    etcd: &[String],
    fleet_extra: &str,
    extra: &str,
) -> std::path::PathBuf {
    std::fs::write(dir.join("fleet.test.zone"), ZONE).unwrap();
    let eps: Vec<String> = etcd.iter().map(|e| format!("\"{e}\"")).collect();
    let text = format!(
        "[server]\nlisten = [\"127.0.0.1:5380\"]\nlog = \"info\"\n\n[api]\ntokens = \"api.tokens\"\n\n\
         [fleet]\netcd = [{}]\nnode = \"{node}\"\nprefix = \"/meridian-test/\"\ntimeout = \"1s\"\n{fleet_extra}\n\
         [[zone]]\norigin = \"fleet.test.\"\nfile = \"fleet.test.zone\"\n\n\
         [pool.web]\nmembers = [\"127.0.0.81\", \"127.0.0.82\"]\n\n\
         [name.\"web.fleet.test\"]\npool = \"web\"\nmode = \"all\"\nttl = 5\n\n{extra}\n",
        eps.join(", ")
    );
    let p = dir.join("meridian.toml");
    std::fs::write(&p, text).unwrap();
    p
}

impl Node {
    /// Start node `node` on `etcd`.
    pub(crate) fn start(node: &str, etcd: &[String]) -> Node {
        Node::start_with(node, etcd, "", "")
    }

    /// Start node `node` on `etcd` with more `[fleet]` keys and tables.
    pub(crate) fn start_with(node: &str, etcd: &[String], fleet_extra: &str, extra: &str) -> Node {
        Node::start_env(node, etcd, fleet_extra, extra, &[])
    }

    /// [`Node::start_with`] with more environment variables (test hooks).
    pub(crate) fn start_env(
        node: &str,
        etcd: &[String],
        fleet_extra: &str,
        extra: &str,
        env: &[(&str, &str)],
    ) -> Node {
        let dir = TempDir::new(&format!("fleet-{node}"));
        write_tokens(&dir);
        let config = node_config_with(&dir.0, node, etcd, fleet_extra, extra);
        let (server, api) = crate::health_support::serve_env(&config, env);
        Node {
            server,
            api,
            config,
            _dir_keep: Some(dir),
        }
    }

    /// Stop this node (SIGKILL) and start it again on the same config and
    /// state dir.
    pub(crate) fn restart(self) -> Node {
        self.restart_after(|| {})
    }

    /// [`Node::restart`], running `between` while the node is down.
    pub(crate) fn restart_after(self, between: impl FnOnce()) -> Node {
        let Node {
            server,
            config,
            _dir_keep,
            ..
        } = self;
        drop(server);
        between();
        let (server, api) = serve(&config);
        Node {
            server,
            api,
            config,
            _dir_keep,
        }
    }

    /// The addresses `web.fleet.test` answers, sorted.
    pub(crate) fn web(&self) -> Vec<String> {
        let m = self.server.query(&crate::common::Q::new(
            "web.fleet.test.",
            hickory_proto::rr::RecordType::A,
        ));
        let mut a = crate::common::addrs(&m);
        a.sort();
        a
    }
}

/// Wait until `f` holds, up to `limit`; how long it took.
pub(crate) fn within(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let t0 = Instant::now();
    loop {
        if f() {
            return Some(t0.elapsed());
        }
        if t0.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether node `n` says (in `/status`) that it follows etcd.
pub(crate) fn connected(n: &Node) -> Option<bool> {
    let (_, body) = crate::health_support::http(n.api, "GET", "/status");
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["fleet"]["connected"].as_bool()
}

/// An override posted on `a` is served by `b` within 1 s, while `x`, kept
/// out of etcd (bad credentials), stays out and answers from its own
/// config.
pub(crate) fn shared_but_not_with(a: &Node, b: &Node, x: &Node) {
    let (code, body) =
        crate::health_support::http(a.api, "POST", "/override/127.0.0.81?state=down");
    assert_eq!(code, 200, "{body}");
    assert!(within(Duration::from_secs(1), || b.web() == ["127.0.0.82"]).is_some());
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(connected(x), Some(false));
    assert_eq!(x.web(), ["127.0.0.81", "127.0.0.82"]);
}

/// A TCP backend on 127.0.0.91 that counts the connections (probes) it
/// accepts; port 0 picks one.
pub(crate) struct Backend {
    pub(crate) port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Backend {
    pub(crate) fn start(port: u16, probes: Arc<AtomicU64>) -> Backend {
        let l = TcpListener::bind(("127.0.0.91", port)).expect("bind the backend");
        let port = l.local_addr().unwrap().port();
        l.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, p2) = (stop.clone(), probes.clone());
        let thread = std::thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok(_) => {
                        p2.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Backend {
            port,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The tables of the checked pool `chk` behind `chk.fleet.test` (`all`):
/// 127.0.0.91 on `port` with TCP check `c` every 200 ms (rise and fall 1),
/// and the unchecked 127.0.0.92.
pub(crate) fn chk_tables(port: u16) -> String {
    format!(
        "[check.c]\ntype = \"tcp\"\ninterval_ms = 200\ntimeout_ms = 150\nrise = 1\nfall = 1\n\n\
         [pool.chk]\nmembers = [{{ address = \"127.0.0.91\", port = {port}, check = \"c\" }}, \"127.0.0.92\"]\n\n\
         [name.\"chk.fleet.test\"]\npool = \"chk\"\nmode = \"all\"\nttl = 5\n"
    )
}

/// The sorted addresses `n` answers for `chk.fleet.test` (the checked
/// pool of tests/fleet/fleet_checks.rs and tests/fleet/fleet_orphaned.rs).
pub(crate) fn chk(n: &Node) -> Vec<String> {
    let m = n.server.query(&crate::common::Q::new(
        "chk.fleet.test.",
        hickory_proto::rr::RecordType::A,
    ));
    let mut a = crate::common::addrs(&m);
    a.sort();
    a
}
