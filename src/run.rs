//! Process life cycle for `meridian serve`: load, bind, drop privileges,
//! start workers, print the ready line, then handle SIGHUP (reload), geo
//! database changes (reload) and SIGINT/SIGTERM (stop).
//!
//! Privileges: started as root, meridian binds every socket and then
//! switches to `[server] user` (its uid, its primary group, no
//! supplementary groups) before it serves a query. As root with no `user`
//! it refuses to start. `allow_root = true` or `--allow-root` (tests,
//! containers) lets it run as root and then `user` is not applied. Started
//! as another user (systemd `DynamicUser`, or a user with
//! CAP_NET_BIND_SERVICE for port 53) it keeps that user.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::engine::Engine;
use crate::server::{bind_tcp, bind_udp, tcp_listener, udp_worker, Shared};

pub fn serve(
    config: &Path,
    listen: Vec<SocketAddr>,
    workers: Option<usize>,
    http_listen: Option<String>,
    allow_root: bool,
) -> Result<(), String> {
    tune_malloc();
    let engine = for_serving(Engine::load(config).map_err(|e| e.to_string())?);
    init_logging(&engine.log);
    // Logging starts after the first load, so report that load here.
    tracing::info!(
        "loaded {} in {} ms: {} zone(s), {} name(s) on pools",
        config.display(),
        engine.load_ms,
        engine.zones.len(),
        engine.bindings.len()
    );
    // Decide about root before binding anything.
    let switch_to = privileges(&engine, allow_root)?;
    let listen: Vec<SocketAddr> = if listen.is_empty() {
        engine
            .listen
            .iter()
            .filter_map(|l| crate::config::parse_listen(l))
            .collect()
    } else {
        listen
    };
    let nworkers = workers
        .or(if engine.workers > 0 {
            Some(engine.workers)
        } else {
            None
        })
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .max(1);
    let http = match http_listen.as_deref() {
        Some("none") => None,
        Some(h) => Some(h.to_string()),
        None => engine.http_listen.clone(),
    };
    let shared = Shared::new(engine);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("meridian-rt")
        .build()
        .map_err(|e| format!("meridian: cannot start runtime: {e}"))?;

    // Bind everything before saying we are ready.
    let mut udp = Vec::new();
    let mut tcp = Vec::new();
    for a in &listen {
        for _ in 0..nworkers {
            udp.push(bind_udp(*a).map_err(|e| bind_error("udp", a, e))?);
        }
        tcp.push(bind_tcp(*a).map_err(|e| bind_error("tcp", a, e))?);
    }
    let http_listener = match http {
        Some(h) => {
            let addr = crate::config::parse_listen(&h)
                .ok_or(format!("meridian: bad http_listen {h:?}"))?;
            Some(
                rt.block_on(tokio::net::TcpListener::bind(addr))
                    .map_err(|e| bind_error("http", &addr, e))?,
            )
        }
        None => None,
    };
    // Every socket is bound: give up root before serving anything.
    if let Some(u) = &switch_to {
        drop_privileges(u)?;
        // Serving works without them; only reloads would fail. Say so loudly.
        if let Err(warning) = check_readable(&shared.engine.load(), u) {
            tracing::warn!("{warning}");
            eprintln!("{warning}");
        }
    }
    let mut bound = Vec::new();
    for s in &udp {
        if let Ok(a) = s.local_addr() {
            if !bound.contains(&a) {
                bound.push(a);
            }
        }
    }
    let mut threads = Vec::new();
    for (i, sock) in udp.into_iter().enumerate() {
        let sh = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("meridian-udp-{i}"))
                .spawn(move || udp_worker(sh, sock, nworkers))
                .map_err(|e| format!("meridian: cannot start worker: {e}"))?,
        );
    }
    for l in tcp {
        shared.tcp_listeners.fetch_add(1, Ordering::Relaxed);
        rt.spawn(tcp_listener(shared.clone(), l));
    }
    crate::health::start(&rt, &shared);
    if let Some(l) = http_listener {
        rt.spawn(crate::http::serve(shared.clone(), l));
    }

    // Signal handlers before the ready line: a SIGTERM or SIGHUP sent as
    // soon as we say ready must not find the default action (death).
    let (mut hup, mut term, mut int) = {
        use tokio::signal::unix::{signal, SignalKind};
        let _rt = rt.enter();
        let sig = |k: SignalKind| signal(k).map_err(|e| format!("meridian: signal handler: {e}"));
        (
            sig(SignalKind::hangup())?,
            sig(SignalKind::terminate())?,
            sig(SignalKind::interrupt())?,
        )
    };
    let e = shared.engine.load();
    let list: Vec<String> = bound.iter().map(|a| a.to_string()).collect();
    eprintln!(
        "meridian: ready, {} zone(s), {} name(s) on pools, loaded in {} ms, udp+tcp on {} ({} udp worker(s) each)",
        e.zones.len(),
        e.bindings.len(),
        e.load_ms,
        list.join(" "),
        nworkers
    );
    drop(e);

    rt.block_on(async {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut geo_stamp = geo_mtime(&shared);
        loop {
            tokio::select! {
                _ = hup.recv() => reload(&shared, "SIGHUP"),
                _ = term.recv() => break,
                _ = int.recv() => break,
                _ = tick.tick() => {
                    let now = geo_mtime(&shared);
                    if now != geo_stamp {
                        geo_stamp = now;
                        reload(&shared, "geo database changed");
                        geo_stamp = geo_mtime(&shared).or(geo_stamp);
                    }
                }
            }
        }
        Ok::<(), String>(())
    })?;
    tracing::info!("shutting down");
    // Listeners close at once (a new instance on the same port takes the new
    // connections); UDP workers answer what is queued on their sockets.
    shared.begin_shutdown();
    // Let TCP answers in flight finish: every query already received is
    // answered, then idle connections close.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let busy = || {
        shared.tcp_listeners.load(Ordering::Relaxed) > 0
            || shared.tcp_conns.load(Ordering::Relaxed) > 0
    };
    while busy() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for t in threads {
        let _ = t.join();
    }
    rt.shutdown_timeout(Duration::from_millis(200));
    eprintln!("meridian: stopped");
    Ok(())
}

/// Keep of a freshly built engine what serving needs: the decision blocks,
/// not the database they were compiled from (its mapping would stay in the
/// RSS).
fn for_serving(mut e: Engine) -> Engine {
    e.geo = None;
    trim_heap();
    e
}

/// Fixed malloc thresholds. By default glibc raises both as large blocks
/// are freed, so a reload, which builds on a thread of its own (with an
/// arena of its own, whose top `malloc_trim` never releases), kept some
/// 12 MiB more RSS per reload with GeoLite2-City. Fixed, large build
/// temporaries come from mmap and go back when freed, and any free top of
/// a heap over 1 MiB is returned. The query path allocates nothing.
fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 20);
    }
}

/// Hand the heap a build used back to the system: glibc keeps freed memory
/// otherwise, ~150 MiB after compiling GeoLite2-City. (An old engine needs
/// no trim: its tables are over the mmap threshold, so freeing them, on
/// whichever thread drops the last reference, unmaps them.)
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn geo_mtime(shared: &Shared) -> Option<SystemTime> {
    let e = shared.engine.load();
    let p = e.geo_path.as_ref()?;
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Build a new engine and swap it in; on failure keep serving the old one.
pub fn reload(shared: &Arc<Shared>, why: &str) {
    let old = shared.engine.load_full();
    // Build on a thread of lower priority: on a busy core the UDP workers
    // keep answering at once instead of waiting out the build's time slice.
    let build = || Engine::load_with(&old.config_path, Some(&old));
    let built = std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name("meridian-reload".into())
            .spawn_scoped(s, || {
                // SAFETY: setpriority on the calling thread (tid) only.
                unsafe {
                    libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
                }
                build()
            });
        match spawned {
            Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            // No thread to be had: build here, at normal priority.
            Err(_) => build(),
        }
    });
    match built {
        Ok(new) => {
            let new = for_serving(new);
            if new.listen != old.listen {
                tracing::warn!("reload: listen addresses changed; restart to apply");
            }
            let names = new.bindings.len();
            shared.engine.store(Arc::new(new));
            crate::health::restart(shared);
            shared.metrics.reloads_ok.fetch_add(1, Ordering::Relaxed);
            tracing::info!("reloaded ({why}): {names} name(s) on pools");
            eprintln!(
                "meridian: reloaded ({why}) in {} ms",
                shared.engine.load().load_ms
            );
        }
        Err(e) => {
            shared
                .metrics
                .reloads_failed
                .fetch_add(1, Ordering::Relaxed);
            tracing::error!("reload failed ({why}), keeping the running config: {e}");
            eprintln!("meridian: reload failed, keeping the running config: {e}");
        }
    }
}

fn init_logging(filter: &str) {
    use tracing_subscriber::EnvFilter;
    let f = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(filter))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(f)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The user to switch to after binding, as resolved from the passwd database.
#[derive(Debug, Clone)]
pub struct SwitchUser {
    pub name: String,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
}

/// `[server] user`: a non-empty name (looked up when `serve` starts as root).
pub fn user_from_cfg(
    src: &crate::config::Source,
    user: &Option<toml::Spanned<String>>,
) -> Result<Option<String>, crate::error::LocatedError> {
    match user {
        None => Ok(None),
        Some(u) if u.get_ref().trim().is_empty() => {
            Err(src.err(u.span(), "user must name a user (or leave it out)"))
        }
        Some(u) => Ok(Some(u.get_ref().clone())),
    }
}

/// The message when root is neither dropped nor allowed.
pub const ROOT_REFUSED: &str = "meridian: refusing to run as root. Set `user = \"nobody\"` (or another unprivileged user) in [server] to bind as root and then switch to that user, or set `allow_root = true` in [server] (or pass --allow-root) to keep running as root.";

/// Decide what to do about the user we run as. Returns the user to switch
/// to after binding (None: stay as we are).
pub fn privileges(engine: &Engine, cli_allow_root: bool) -> Result<Option<SwitchUser>, String> {
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        if let Some(name) = &engine.user {
            // Already unprivileged (e.g. systemd DynamicUser): nothing to switch.
            tracing::info!(
                "not started as root: keeping uid {euid}, `user = {name:?}` not applied"
            );
        }
        return Ok(None);
    }
    // Root is explicitly allowed: stay root (`user` is not applied). The
    // command-line flag overrides the config, as the other flags do.
    if engine.allow_root || cli_allow_root {
        match &engine.user {
            Some(name) => tracing::warn!(
                "running as root: allowed by allow_root / --allow-root, so `user = {name:?}` is not applied"
            ),
            None => tracing::warn!("running as root (allowed by allow_root / --allow-root)"),
        }
        return Ok(None);
    }
    match &engine.user {
        Some(name) => {
            let u = lookup_user(name)?;
            if u.uid == 0 {
                return Err(format!(
                    "meridian: user {name:?} is root; name an unprivileged user, or use allow_root = true"
                ));
            }
            Ok(Some(u))
        }
        None => Err(ROOT_REFUSED.to_string()),
    }
}

/// Look a user up in the passwd database (getpwnam_r).
pub fn lookup_user(name: &str) -> Result<SwitchUser, String> {
    let cname =
        std::ffi::CString::new(name).map_err(|_| format!("meridian: bad user name {name:?}"))?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut res: *mut libc::passwd = std::ptr::null_mut();
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut res,
        )
    };
    if rc != 0 || res.is_null() {
        return Err(format!(
            "meridian: unknown user {name:?} in [server] user (create it, or name another)"
        ));
    }
    Ok(SwitchUser {
        name: name.to_string(),
        uid: pw.pw_uid,
        gid: pw.pw_gid,
    })
}

/// setgroups, setgid, setuid, in that order, then check that root cannot be
/// regained. glibc applies each call to every thread of the process.
pub fn drop_privileges(u: &SwitchUser) -> Result<(), String> {
    let fail = |what: &str| {
        format!(
            "meridian: cannot switch to user {:?} ({what}): {}",
            u.name,
            std::io::Error::last_os_error()
        )
    };
    unsafe {
        if libc::setgroups(1, &u.gid) != 0 {
            return Err(fail("setgroups"));
        }
        if libc::setgid(u.gid) != 0 {
            return Err(fail("setgid"));
        }
        if libc::setuid(u.uid) != 0 {
            return Err(fail("setuid"));
        }
        if libc::setuid(0) == 0 || libc::geteuid() == 0 || libc::getegid() == 0 && u.gid != 0 {
            return Err(format!(
                "meridian: still privileged after switching to {:?}",
                u.name
            ));
        }
    }
    tracing::info!("switched to user {} (uid {}, gid {})", u.name, u.uid, u.gid);
    Ok(())
}

/// After switching users, the files a reload reads should still be readable.
fn check_readable(engine: &Engine, u: &SwitchUser) -> Result<(), String> {
    let mut files: Vec<&Path> = vec![&engine.config_path];
    if let Some(g) = &engine.geo_path {
        files.push(g);
    }
    for z in &engine.zones {
        for n in &z.nodes {
            for (_, f, _) in &n.origins {
                if !files.contains(&f.as_path()) {
                    files.push(f);
                }
            }
        }
    }
    for f in files {
        if let Err(e) = std::fs::File::open(f) {
            return Err(format!(
                "meridian: after switching to user {:?}, {} cannot be read ({e}); reloads would fail. Make it (and its folders) readable by that user.",
                u.name,
                f.display()
            ));
        }
    }
    Ok(())
}

fn bind_error(what: &str, a: &SocketAddr, e: std::io::Error) -> String {
    let hint = if e.kind() == std::io::ErrorKind::PermissionDenied && a.port() < 1024 {
        " (ports below 1024 need root or CAP_NET_BIND_SERVICE: see contrib/meridian.service)"
    } else {
        ""
    };
    format!("meridian: cannot bind {what} {a}: {e}{hint}")
}
