//! Process life cycle for `meridian serve`: load, bind, start workers, print
//! the ready line, then handle SIGHUP (reload), geo database changes
//! (reload) and SIGINT/SIGTERM (stop).

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
) -> Result<(), String> {
    let engine = Engine::load(config).map_err(|e| e.to_string())?;
    init_logging(&engine.log);
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
            udp.push(bind_udp(*a).map_err(|e| format!("meridian: cannot bind udp {a}: {e}"))?);
        }
        tcp.push(bind_tcp(*a).map_err(|e| format!("meridian: cannot bind tcp {a}: {e}"))?);
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
                .spawn(move || udp_worker(sh, sock))
                .map_err(|e| format!("meridian: cannot start worker: {e}"))?,
        );
    }
    for l in tcp {
        rt.spawn(tcp_listener(shared.clone(), l));
    }
    crate::health::start(&rt, &shared);
    if let Some(h) = http {
        let addr = crate::config::parse_listen(&h).ok_or(format!("meridian: bad http_listen {h:?}"))?;
        let l = rt
            .block_on(tokio::net::TcpListener::bind(addr))
            .map_err(|e| format!("meridian: cannot bind http {addr}: {e}"))?;
        rt.spawn(crate::http::serve(shared.clone(), l));
    }

    let e = shared.engine.load();
    let list: Vec<String> = bound.iter().map(|a| a.to_string()).collect();
    eprintln!(
        "meridian: ready, {} zone(s), {} name(s) on pools, udp+tcp on {} ({} udp worker(s) each)",
        e.zones.len(),
        e.bindings.len(),
        list.join(" "),
        nworkers
    );
    drop(e);

    rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hup = signal(SignalKind::hangup()).map_err(|e| e.to_string())?;
        let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
        let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
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
    shared.shutdown.store(true, Ordering::Relaxed);
    // Let TCP answers in flight finish.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while shared.tcp_conns.load(Ordering::Relaxed) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for t in threads {
        let _ = t.join();
    }
    rt.shutdown_timeout(Duration::from_millis(200));
    eprintln!("meridian: stopped");
    Ok(())
}

fn geo_mtime(shared: &Shared) -> Option<SystemTime> {
    let e = shared.engine.load();
    let p = e.geo_path.as_ref()?;
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Build a new engine and swap it in; on failure keep serving the old one.
pub fn reload(shared: &Arc<Shared>, why: &str) {
    let old = shared.engine.load_full();
    match Engine::load_with(&old.config_path, Some(&old)) {
        Ok(new) => {
            if new.listen != old.listen {
                tracing::warn!("reload: listen addresses changed; restart to apply");
            }
            let names = new.bindings.len();
            shared.engine.store(Arc::new(new));
            crate::health::restart(shared);
            shared.metrics.reloads_ok.fetch_add(1, Ordering::Relaxed);
            tracing::info!("reloaded ({why}): {names} name(s) on pools");
            eprintln!("meridian: reloaded ({why})");
        }
        Err(e) => {
            shared.metrics.reloads_failed.fetch_add(1, Ordering::Relaxed);
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
