//! The takeover guard: one `meridian serve` per listen address. Every
//! socket is bound with SO_REUSEPORT (so that a restart loses no query),
//! which also lets a second instance started by mistake take part of the
//! traffic without a word. So each instance holds a lock per listen
//! address: the abstract Unix socket `@meridian:ADDR` (Linux; per network
//! namespace like the address itself, released by the kernel when the
//! process dies, however it dies). A second instance finds it taken, asks
//! it for the holder's PID (SO_PEERCRED) and refuses to start, unless
//! started with `--replace`: then it binds alongside, and once it is ready
//! it sends the old instance SIGTERM and takes the locks over as they are
//! released.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// The lock of one listen address, held while the process lives.
pub(super) struct Lock {
    _listener: UnixListener,
}

/// What a lock attempt found.
pub(super) enum Taken {
    /// Ours now.
    Held(Lock),
    /// Held by another process (its PID; 0 when it could not be told).
    By(u32),
}

fn name(addr: &SocketAddr) -> String {
    format!("meridian:{addr}")
}

/// Try to take the lock of `addr` (a port-0 address needs none).
pub(super) fn lock(addr: &SocketAddr) -> std::io::Result<Option<Taken>> {
    if addr.port() == 0 {
        return Ok(None);
    }
    let ua = UnixAddr::from_abstract_name(name(addr).as_bytes())?;
    for _ in 0..5 {
        match UnixListener::bind_addr(&ua) {
            Ok(l) => {
                // Answer (and drop) the holders' PID questions, so the
                // backlog never fills.
                let probe = l.try_clone()?;
                std::thread::Builder::new()
                    .name("meridian-lock".into())
                    .spawn(move || {
                        for c in probe.incoming() {
                            drop(c);
                        }
                    })?;
                return Ok(Some(Taken::Held(Lock { _listener: l })));
            }
            Err(e) if e.kind() == ErrorKind::AddrInUse => match UnixStream::connect_addr(&ua) {
                Ok(s) => return Ok(Some(Taken::By(peer_pid(&s).unwrap_or(0)))),
                // The holder went away between the two calls: try again.
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            },
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        ErrorKind::AddrInUse,
        format!("lock @{} neither free nor answering", name(addr)),
    ))
}

/// The PID of the process at the other end of `s`.
fn peer_pid(s: &UnixStream) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of a ucred and its size;
    // the descriptor is open for the duration of the call.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0 && cred.pid > 0).then_some(cred.pid as u32)
}

/// The refusal when `addr` is held by `pid`.
pub(super) fn refusal(addr: &SocketAddr, pid: u32) -> String {
    let who = if pid > 0 {
        format!("pid {pid}")
    } else {
        "another process".into()
    };
    format!(
        "meridian: {addr} is already served by meridian ({who}); stop it first, or start with `serve --replace` to take over from it"
    )
}

/// `--replace`, once this instance is ready: SIGTERM the old instances,
/// then take their locks as they let go (in the background).
pub(super) fn replace(
    old: Vec<(SocketAddr, u32)>,
    keep: std::sync::Arc<std::sync::Mutex<Vec<Lock>>>,
) {
    let mut pids: Vec<u32> = old.iter().map(|(_, p)| *p).filter(|p| *p > 0).collect();
    pids.sort_unstable();
    pids.dedup();
    for pid in &pids {
        // SAFETY: kill has no memory preconditions; the PID came from the
        // lock's holder, which is a meridian serving our addresses.
        if unsafe { libc::kill(*pid as libc::pid_t, libc::SIGTERM) } == 0 {
            eprintln!("meridian: replacing pid {pid}: sent SIGTERM");
        } else {
            eprintln!(
                "meridian: cannot signal pid {pid}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    let _ = std::thread::Builder::new()
        .name("meridian-takeover".into())
        .spawn(move || {
            let t0 = Instant::now();
            let mut left: Vec<SocketAddr> = old.into_iter().map(|(a, _)| a).collect();
            while !left.is_empty() && t0.elapsed() < Duration::from_secs(60) {
                left.retain(|a| match lock(a) {
                    Ok(Some(Taken::Held(l))) => {
                        keep.lock().unwrap_or_else(|e| e.into_inner()).push(l);
                        false
                    }
                    _ => true,
                });
                std::thread::sleep(Duration::from_millis(50));
            }
            if left.is_empty() {
                eprintln!("meridian: took over from the old instance");
            } else {
                eprintln!("meridian: the old instance still holds {left:?} after 60 s");
            }
        });
}
