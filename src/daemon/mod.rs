//! Process life cycle for `meridian serve`: load, bind, drop privileges,
//! start workers, print the ready line, then handle SIGHUP (reload), geo
//! database changes (reload) and SIGINT/SIGTERM (stop).
//! The daemon is the only module that sees every other one: it owns the
//! serving state, the operator overrides, the runtime weights and the
//! health checkers.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

mod memory;
mod privileges;
mod reload;
mod takeover;

use std::sync::Mutex;

use crate::admin::Command;
use crate::health::{Checker, Overrides};
use crate::transport::{bind_tcp, bind_udp, tcp_listener, udp_worker, ServerState};
use memory::{for_serving, tune_malloc};
use privileges::check_readable;
pub use privileges::{drop_privileges, lookup_user, privileges, SwitchUser, ROOT_REFUSED};
use reload::{geo_mtime, Daemon, Reloader, GEO_CHANGED, REGISTRY_CHANGED};

/// `meridian serve`: run until SIGTERM or SIGINT. `listen`, `workers`,
/// `http_listen` and `allow_root` come from the command line and win over
/// the config. An address another `meridian serve` holds is refused,
/// unless `replace`: then that instance is stopped once this one is ready.
pub fn serve(
    config: &Path,
    listen: Vec<SocketAddr>,
    workers: Option<usize>,
    http_listen: Option<String>,
    allow_root: bool,
    replace: bool,
) -> Result<(), String> {
    tune_malloc();
    let engine = for_serving(crate::answer::load(config, None).map_err(|e| e.to_string())?);
    init_logging(&engine.settings.log);
    // A fleet node starts on the last revision it accepted, if it still
    // loads; etcd's newest follows once etcd is reached.
    #[cfg(feature = "fleet")]
    let (fleet_settings, engine, started_rev) = fleet_start(engine);
    // Logging starts after the first load, so report that load here.
    tracing::info!(
        "loaded {} in {} ms: {} zone(s), {} name(s) on pools",
        config.display(),
        engine.load_ms,
        engine.zones.len(),
        engine.bindings.len()
    );
    for w in &engine.warnings {
        tracing::warn!("{w}");
    }
    // Decide about root before binding anything.
    let switch_to = privileges(&engine, allow_root)?;
    let listen: Vec<SocketAddr> = if listen.is_empty() {
        engine.settings.listen.clone()
    } else {
        listen
    };
    let nworkers = workers
        .or(if engine.settings.workers > 0 {
            Some(engine.settings.workers)
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
        None => engine.settings.http_listen.clone(),
    };
    // One instance per address: take the locks before binding.
    let locks = Arc::new(Mutex::new(Vec::new()));
    let mut replaced = Vec::new();
    for a in &listen {
        match takeover::lock(a) {
            Ok(None) => {}
            Ok(Some(takeover::Taken::Held(l))) => {
                locks.lock().unwrap_or_else(|e| e.into_inner()).push(l)
            }
            Ok(Some(takeover::Taken::By(pid))) if replace => replaced.push((*a, pid)),
            Ok(Some(takeover::Taken::By(pid))) => return Err(takeover::refusal(a, pid)),
            Err(e) => return Err(format!("meridian: cannot lock {a}: {e}")),
        }
    }
    let shared = ServerState::new(engine);
    // A query log file is opened now, before privileges are dropped.
    let qlog_writer = match (&shared.query_log, &shared.engine.load().settings.query_log) {
        (Some(log), Some(cfg)) => {
            let ident = shared.engine.load().settings.identity.clone();
            let h = crate::transport::qlog::start_writer(
                shared.clone(),
                log.clone(),
                cfg,
                ident.as_deref(),
            )
            .map_err(|e| format!("meridian: cannot open query_log {}: {e}", cfg.sink))?;
            Some(h)
        }
        _ => None,
    };
    reload::count_build(&shared.metrics, &shared.engine.load());

    // DNS over TCP has a runtime of its own: whatever the API, the fleet
    // link and the health checks do (a /metrics of many pools takes a core
    // for a while), TCP answers never wait for a thread.
    let tcp_rt = runtime("meridian-tcp")?;
    let rt = runtime("meridian-rt")?;

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
    // The fleet's secrets are read now, as root: the user may not read them.
    #[cfg(feature = "fleet")]
    if let Some(f) = &shared.engine.load().fleet {
        if let Err(e) = crate::fleet::read_secrets(f) {
            tracing::warn!("fleet: {e}");
        }
    }
    // Every socket is bound: give up root before serving anything.
    if let Some(u) = &switch_to {
        drop_privileges(u)?;
        // Serving works without them; reloads would fail or keep old
        // secrets. Say so loudly.
        for warning in check_readable(&shared.engine.load(), u) {
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
        tcp_rt.spawn(tcp_listener(shared.clone(), l));
    }
    let daemon = Arc::new(Daemon {
        server: shared.clone(),
        overrides: Arc::new(Overrides::new()),
        weights: Arc::new(crate::engine::RuntimeWeights::new()),
        checker: Mutex::new(Checker::new(rt.handle().clone())),
        next_config: Mutex::new(None),
        #[cfg(feature = "fleet")]
        fleet: fleet_settings.clone(),
    });
    daemon.restart_checks();
    rt.spawn(refresher(shared.clone(), daemon.weights.clone()));
    // `POST /reload` and `POST /stop` reach the loop below through this.
    let (commands, mut api_commands) = tokio::sync::mpsc::channel(4);
    // Fleet mode: follow the shared overrides, weights and config in etcd;
    // a pushed config comes back here to be reloaded.
    #[cfg(feature = "fleet")]
    let (switch_tx, mut switch_rx) = tokio::sync::mpsc::channel::<crate::fleet::Switch>(2);
    #[cfg(not(feature = "fleet"))]
    let (_switch_tx, mut switch_rx) = tokio::sync::mpsc::channel::<()>(1);
    #[cfg(feature = "fleet")]
    let fleet = fleet_settings.map(|settings| {
        let f = crate::fleet::Fleet::new(
            settings,
            daemon.overrides.clone(),
            daemon.weights.clone(),
            shared.clone(),
            switch_tx.clone(),
        );
        if let Some(rev) = started_rev {
            f.started_from_state_dir(rev);
        }
        f.spawn(rt.handle());
        f
    });
    if let Some(l) = http_listener {
        let admin = crate::admin::Admin {
            server: shared.clone(),
            overrides: daemon.overrides.clone(),
            weights: daemon.weights.clone(),
            commands,
            #[cfg(feature = "fleet")]
            fleet: fleet.clone(),
        };
        rt.spawn(crate::admin::serve(Arc::new(admin), l));
    } else {
        drop(commands);
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
    if replace && !replaced.is_empty() {
        takeover::replace(replaced, locks.clone());
    }

    // Reloads run on a thread of their own, so SIGTERM never waits for a
    // build (a large zone takes seconds).
    let reloader = Reloader::start(daemon.clone())?;
    rt.block_on(async {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut geo_stamp = geo_mtime(&shared);
        loop {
            tokio::select! {
                _ = hup.recv() => reloader.request("SIGHUP"),
                Some(sw) = switch_rx.recv() => {
                    #[cfg(feature = "fleet")]
                    {
                        let (path, done) = sw;
                        *daemon.next_config.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
                        let result = reloader.request_then("fleet config");
                        tokio::spawn(async move {
                            let _ = done.send(matches!(result.await, Ok(true)));
                        });
                    }
                    #[cfg(not(feature = "fleet"))]
                    let () = sw;
                }
                _ = term.recv() => break,
                _ = int.recv() => break,
                Some(cmd) = api_commands.recv() => match cmd {
                    Command::Reload(done) => {
                        // Answered when the reload thread is done, so the
                        // loop keeps serving signals meanwhile.
                        let result = reloader.request_then("API request");
                        tokio::spawn(async move {
                            let _ = done.send(match result.await {
                                Ok(true) => Ok("reloaded".to_string()),
                                _ => Err("reload failed, the running config is kept: see the server log".to_string()),
                            });
                        });
                    }
                    Command::Stop(done) => {
                        tracing::info!("stop asked through the API");
                        let _ = done.send(());
                        // Let the answer leave before the listeners close.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        break;
                    }
                },
                _ = tick.tick() => {
                    if let Some(after) = reloader.geo_done() {
                        // The database as that reload read it (its path may
                        // have changed with the config).
                        geo_stamp = after.or(geo_stamp);
                    }
                    if reloader.busy() {
                        continue;
                    }
                    // Registry members (#31): at most one rebuild a second.
                    if shared.engine.load().registry.due(std::time::Instant::now()) {
                        reloader.request(REGISTRY_CHANGED);
                        continue;
                    }
                    let now = geo_mtime(&shared);
                    if now != geo_stamp {
                        geo_stamp = now;
                        reloader.request(GEO_CHANGED);
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
    tcp_rt.shutdown_timeout(Duration::from_millis(200));
    rt.shutdown_timeout(Duration::from_millis(200));
    // Every transport has stopped: the writer drains the ring, writes the
    // Frame Streams STOP frame and exits.
    if let (Some(log), Some(h)) = (&shared.query_log, qlog_writer) {
        log.stop();
        let _ = h.join();
    }
    eprintln!("meridian: stopped");
    Ok(())
}

/// A runtime of two threads named `name`.
fn runtime(name: &str) -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name(name)
        .build()
        .map_err(|e| format!("meridian: cannot start the {name} runtime: {e}"))
}

fn init_logging(filter: &str) {
    use tracing_subscriber::EnvFilter;
    let f = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(filter))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(f)
        .with_ansi(colour())
        .with_writer(std::io::stderr)
        .try_init();
}

/// Colour the log only on a terminal, and never with NO_COLOR set
/// (<https://no-color.org>: any non-empty value): a log file or the journal
/// gets plain text.
fn colour() -> bool {
    use std::io::IsTerminal;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stderr().is_terminal()
}

fn bind_error(what: &str, a: &SocketAddr, e: std::io::Error) -> String {
    let hint = if e.kind() == std::io::ErrorKind::PermissionDenied && a.port() < 1024 {
        " (ports below 1024 need root or CAP_NET_BIND_SERVICE: see contrib/meridian.service)"
    } else {
        ""
    };
    format!("meridian: cannot bind {what} {a}: {e}{hint}")
}

/// Recompute the balancing decisions (`balance`) off the query path: every
/// pool after a health state, override or signal changes (the table's
/// generation moved), and each second the pools whose decisions move with
/// time alone (slow start). Changes that come in a burst are taken
/// together (one refresh at most every 20 ms). The work runs on a
/// blocking thread: a large config takes milliseconds.
async fn refresher(shared: Arc<ServerState>, weights: Arc<crate::engine::RuntimeWeights>) {
    let mut last = tokio::time::Instant::now();
    loop {
        // Only the health table is held while waiting: an engine a reload
        // replaced must be freed (and its memory returned) at once.
        let health = shared.engine.load().health.clone();
        let decided = shared.engine.load().decided.load(Ordering::Acquire);
        let changed = {
            let notified = health.changed().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if decided != health.generation() {
                true
            } else {
                tokio::select! {
                    _ = notified => true,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => false,
                }
            }
        };
        drop(health);
        if changed {
            // A burst of changes is taken together.
            tokio::time::sleep_until(last + Duration::from_millis(20)).await;
        }
        last = tokio::time::Instant::now();
        let (shared2, weights2) = (shared.clone(), weights.clone());
        let done = tokio::task::spawn_blocking(move || {
            let e = shared2.engine.load_full();
            weights2.catch_up(&e);
            weights2.rebalance(&e, crate::balance::ramping);
        })
        .await;
        if done.is_err() {
            tracing::error!("balancing refresh failed; retrying in a second");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// Fleet mode at start: the node's own `[fleet]` settings, and the engine
/// to serve first: the last revision this node accepted (read back from
/// its state dir) if it loads, else the node's own config.
#[cfg(feature = "fleet")]
fn fleet_start(
    own: crate::engine::Engine,
) -> (
    Option<crate::config::fleet::FleetSettings>,
    crate::engine::Engine,
    Option<i64>,
) {
    let Some(settings) = own.fleet.clone() else {
        return (None, own, None);
    };
    let Some((rev, path)) = crate::fleet::last_accepted(&settings) else {
        tracing::info!(
            "fleet: no accepted revision in {}: serving this node's own config until etcd has one",
            settings.state_dir.display()
        );
        return (Some(settings), own, None);
    };
    match crate::answer::load(&path, None) {
        Ok(e) => {
            tracing::info!(
                "fleet: serving revision {rev}, the last this node accepted ({}), until etcd's newest is checked",
                path.display()
            );
            for w in &e.warnings {
                tracing::warn!("{w}");
            }
            (Some(settings), for_serving(e), Some(rev))
        }
        Err(e) => {
            tracing::warn!("fleet: the last accepted revision {rev} does not load: {e}: serving this node's own config");
            (Some(settings), own, None)
        }
    }
}
