//! DNS over UDP (RFC 1035 §4.2.1): SO_REUSEPORT sockets with DF set, and
//! one blocking worker thread per socket that answers batches of datagrams
//! read with recvmmsg and written with sendmmsg.
//!
//! Invariant: per datagram the worker allocates nothing, takes no lock and
//! logs nothing; counters go to a thread-local `Local` flushed every batch.
//! The raw syscalls and their `unsafe` live in `mmsg`; this file is safe code.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use socket2::{Protocol, Socket, Type};

use super::mmsg::{set_int_option, Batch};
use super::rrl::{Limiter, Verdict};
use super::state::ServerState;
use crate::answer::{Outcome, Scratch, Transport};
use meridian_wire::truncate::truncate_response;

/// Bind a UDP socket with SO_REUSEPORT so that several workers share the port.
pub fn bind_udp(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    let s = super::reusable_socket(addr, Type::DGRAM, Protocol::UDP)?;
    // A bounded buffer: bursts queue in the kernel, floods are dropped there.
    let _ = s.set_recv_buffer_size(4 << 20);
    dont_fragment(&s, addr.is_ipv6());
    if addr.ip().is_unspecified() {
        reply_from_destination(&s, addr.is_ipv6())?;
    }
    s.bind(&addr.into())?;
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    Ok(s.into())
}

/// Send UDP responses with DF set (RFC 9715 §3.2: avoid IP fragmentation),
/// at the interface MTU rather than a path MTU that spoofed ICMP could
/// lower. A response that does not fit fails with EMSGSIZE and is sent
/// truncated instead (`udp_worker`). It also spares the kernel an IP ID
/// per datagram, which it needs only for packets that may be fragmented.
fn dont_fragment(s: &Socket, v6: bool) {
    use std::os::fd::AsFd;
    let (level, opt, val) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_DONTFRAG, 1)
    } else {
        (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_PROBE,
        )
    };
    // socket2 has no method for these options.
    if let Err(e) = set_int_option(s.as_fd(), level, opt, val) {
        tracing::debug!("udp: cannot set DF: {}", e);
    }
}

/// On a wildcard socket, have the kernel report each datagram's destination
/// (`mmsg` sends the reply from it). Without it a query to a secondary
/// address is answered from the route's source and clients drop the reply,
/// so a socket that cannot have it is refused, as gdnsd does.
fn reply_from_destination(s: &Socket, v6: bool) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    let (level, opt) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO)
    } else {
        (libc::IPPROTO_IP, libc::IP_PKTINFO)
    };
    set_int_option(s.as_fd(), level, opt, 1)
}

const BATCH: usize = 32;
const FLUSH_EVERY: Duration = Duration::from_millis(10);
const BUF: usize = 4096;

/// One UDP worker: receive a batch, answer each into its slot, send the batch.
/// `share` is the number of workers on this worker's listen address (the
/// rate limiter's share of the rate). On shutdown it answers what is already
/// queued on its socket, then returns.
pub fn udp_worker(shared: Arc<ServerState>, sock: std::net::UdpSocket, share: usize) {
    use std::os::fd::AsFd;
    let fd = sock.as_fd();
    let mut scratch = Scratch::default();
    // All buffers for a batch, allocated once (see `mmsg`).
    let mut batch = Batch::new(BATCH, BUF);
    let mut outcome = Outcome::default();
    let mut local = crate::metrics::Local::default();
    let mut last_flush = std::time::Instant::now();
    let mut rrl: Option<Limiter> = None;
    // The query log, if on: read once; off, it costs one test per datagram
    // of a local that never changes (no atomic, no clock, no copy).
    let qlog = shared.query_log.clone();
    let server = sock.local_addr().ok();
    // Each worker starts its countdown at a random phase (see `phase`).
    let mut qcount: u32 = qlog.as_deref().map_or(0, |q| q.phase());
    loop {
        let stopping = shared.shutdown.load(Ordering::Relaxed);
        // Block for the first datagram, then take whatever else is queued;
        // when stopping, only take what is queued.
        let n = match batch.recv(fd, !stopping) {
            Ok(n) if n > 0 => n,
            _ => {
                local.flush(&shared.metrics);
                flush_rrl(&shared, &mut rrl);
                if stopping {
                    break;
                }
                continue;
            }
        };
        let engine = shared.engine.load();
        local.use_pools(&engine.pool_answers);
        // Rate limiting follows the config (a reload may turn it on or off).
        if rrl.as_ref().map(|l| l.cfg) != engine.settings.rrl {
            flush_rrl(&shared, &mut rrl);
            rrl = engine.settings.rrl.map(|c| Limiter::new(c, share));
        }
        let now = rrl.as_ref().map(|l| l.now_ms()).unwrap_or(0);
        // The query time and the sample (a reload may change it), per batch.
        let (qtime, qsample) = match qlog.as_deref() {
            Some(q) => (super::qlog::now(), q.sample()),
            None => ((0, 0), 0),
        };
        for i in 0..n {
            let Some(peer) = batch.peer(i) else {
                continue;
            };
            // No reply can reach port 0 (and a spoofed one would aim it
            // at a service): drop, as gdnsd and hickory do.
            if peer.port() == 0 {
                local.unread_port_0();
                continue;
            }
            // Longer than BUF (more than any EDNS client may send us):
            // the kernel cut it, and its first BUF octets are not the query.
            if batch.truncated(i) {
                local.unread_truncated();
                continue;
            }
            let src = peer.ip();
            let t = Transport { src, tcp: false };
            let (req, resp) = batch.slot(i);
            let r = engine.answer(req, t, &mut scratch, resp, &mut outcome);
            local.record(&outcome, r.is_some());
            let r = match (r, rrl.as_mut()) {
                // A valid server cookie proves the source address (RFC 7873
                // §5.2.3): not limited.
                (Some(rlen), Some(_)) if scratch.cookie_valid => Some(rlen),
                (Some(rlen), Some(l)) => match l.check_response(src, &resp[..rlen], now) {
                    Verdict::Send => Some(rlen),
                    Verdict::Drop => None,
                    Verdict::Slip => Some(truncate_response(resp, rlen)),
                },
                (r, _) => r,
            };
            if let Some(rlen) = r {
                if let Some(q) = qlog.as_deref() {
                    qcount += 1;
                    if qcount >= qsample {
                        qcount = 0;
                        q.push(
                            &shared.metrics,
                            false,
                            peer,
                            server,
                            qtime,
                            req,
                            &resp[..rlen],
                        );
                    }
                }
                batch.queue_response(i, rlen);
            }
        }
        let nout = batch.queued();
        let mut sent = 0;
        let mut shrunk = usize::MAX;
        while sent < nout {
            let err = match batch.send(fd, sent) {
                Ok(k) if k > 0 => {
                    sent += k;
                    continue;
                }
                Ok(_) => None,
                Err(e) => e.raw_os_error(),
            };
            let i = batch.queued_slot(sent);
            if err == Some(libc::EMSGSIZE) && shrunk != sent {
                // Larger than the interface MTU, and DF is set: send the
                // truncated form so that the client retries over TCP.
                let len = batch.response_len(i);
                let len = truncate_response(batch.response_mut(i), len);
                batch.set_response_len(i, len);
                shrunk = sent;
                local.truncated_on_send();
            } else {
                // Skip the datagram that failed (e.g. an unreachable client).
                sent += 1;
            }
        }
        // Flush often enough that /metrics is current within ~10 ms.
        if local.pending() >= 1024 || last_flush.elapsed() >= FLUSH_EVERY {
            last_flush = std::time::Instant::now();
            local.flush(&shared.metrics);
            flush_rrl(&shared, &mut rrl);
        }
    }
}

fn flush_rrl(shared: &ServerState, rrl: &mut Option<Limiter>) {
    if let Some(l) = rrl.as_mut() {
        let m = &shared.metrics;
        for (n, total) in [
            (&mut l.dropped, &m.rrl_dropped),
            (&mut l.slipped, &m.rrl_slipped),
        ] {
            if *n > 0 {
                total.fetch_add(std::mem::take(n), Ordering::Relaxed);
            }
        }
    }
}
