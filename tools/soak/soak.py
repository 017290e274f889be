#!/usr/bin/env python3
"""Soak driver for meridian (Python 3 standard library only).

Started by tools/soak/soak.sh, which builds meridian, lays out the work
folder and starts the server. This driver then, all at once and for
--duration seconds:

  * sends mixed load: static names, pool names (all/rotate/one/some), geo
    with ECS (fixed subnets with known answers, and random ones), random
    names (NXDOMAIN), over UDP (clients that wait for each answer, with a
    1 s timeout and no retry: a timeout is a lost query) and TCP
    (persistent connections with pipelined pairs, and new connections);
  * sends malformed packets (random bytes, cut queries, bad OPT/ECS);
  * reloads the config with SIGHUP every --reload-every seconds,
    alternating a good config and a bad one (syntax error, unknown pool);
  * replaces the geo database (atomic rename of another build) every
    --geo-every seconds, which the server picks up by itself;
  * flaps a health-checked backend (a loopback TCP listener closed and
    reopened every --flap-every seconds).

Every answer is checked (rcode, addresses, question, ID, ECS echo).
Before and after, it floods --flood queries of random names and random
ECS subnets and samples the server's RSS (/proc/PID/status VmRSS), to show
that memory stays flat. It prints a report and exits 1 if the pass bar is
missed: zero wrong answers, zero lost queries, no crash, no memory growth.

Traffic goes only to the loopback server that soak.sh started.
"""
import argparse
import ipaddress
import json
import multiprocessing
import os
import random
import shutil
import signal
import socket
import struct
import sys
import threading
import time

# Children are spawned, not forked: a forked child would inherit the
# backends' listening sockets and keep a "closed" backend open.
mp = multiprocessing.get_context("spawn")

# ---------------------------------------------------------------------------
# DNS wire helpers
# ---------------------------------------------------------------------------

A, NS, CNAME, SOA, MX, TXT, AAAA, OPT = 1, 2, 5, 6, 15, 16, 28, 41


def wire_name(name):
    out = b""
    for label in name.strip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\x00"


def ecs_option(net):
    net = ipaddress.ip_network(net, strict=False)
    fam = 1 if net.version == 4 else 2
    src = net.prefixlen
    addr = net.network_address.packed[: (src + 7) // 8]
    body = struct.pack(">HBB", fam, src, 0) + addr
    return struct.pack(">HH", 8, len(body)) + body


def query(qid, name, qtype=A, ecs=None, edns=False):
    hdr = struct.pack(">HHHHHH", qid, 0, 1, 0, 0, 1 if (ecs or edns) else 0)
    q = hdr + wire_name(name) + struct.pack(">HH", qtype, 1)
    if ecs or edns:
        opts = ecs_option(ecs) if ecs else b""
        q += b"\x00" + struct.pack(">HHBBHH", OPT, 1232, 0, 0, 0, len(opts)) + opts
    return q


def skip_name(p, i):
    hops = 0
    while True:
        l = p[i]
        if l & 0xC0 == 0xC0:
            return i + 2
        if l == 0:
            return i + 1
        i += 1 + l
        hops += 1
        if hops > 128:
            raise ValueError("name too long")


class Resp:
    """A parsed response: header fields, answer records, the OPT's ECS."""

    def __init__(self, p):
        if len(p) < 12:
            raise ValueError("short")
        self.id, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", p[:12])
        self.qr = bool(flags & 0x8000)
        self.tc = bool(flags & 0x0200)
        self.rcode = flags & 0xF
        i = 12
        for _ in range(qd):
            i = skip_name(p, i) + 4
        self.question = p[12:i]
        self.addrs = []
        self.types = []
        self.ecs = None
        for k in range(an + ns + ar):
            i = skip_name(p, i)
            rtype, _cls, _ttl, rdlen = struct.unpack(">HHIH", p[i:i + 10])
            rd = p[i + 10:i + 10 + rdlen]
            if len(rd) != rdlen:
                raise ValueError("rdata cut")
            if k < an:
                self.types.append(rtype)
                if rtype == A:
                    self.addrs.append(str(ipaddress.IPv4Address(rd)))
                elif rtype == AAAA:
                    self.addrs.append(str(ipaddress.IPv6Address(rd)))
            if rtype == OPT:
                j = 0
                while j + 4 <= len(rd):
                    code, olen = struct.unpack(">HH", rd[j:j + 4])
                    if code == 8:
                        self.ecs = rd[j + 4:j + 4 + olen]
                    j += 4 + olen
            i += 10 + rdlen
        if i != len(p):
            raise ValueError("%d octets left over" % (len(p) - i))


# ---------------------------------------------------------------------------
# Expected answers (zones/meridian.toml, geo/example.csv)
# ---------------------------------------------------------------------------

POOLS = {
    "na": {"192.0.2.100", "192.0.2.101"},
    "eu": {"198.51.100.100", "198.51.100.101"},
    "as": {"203.0.113.100", "203.0.113.101"},
    "sa": {"203.0.113.200"},
    "default": {"192.0.2.200"},
}
GEO_FIXED = [("8.8.8.0/24", "na"), ("5.0.0.0/24", "eu"), ("133.1.0.0/16", "as"),
             ("200.130.0.0/24", "sa"), ("41.0.0.0/24", "default"), ("81.2.0.0/24", "eu"),
             ("24.1.2.0/24", "na")]
SHUFFLE = {"192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.13"}
ROTATE = {"192.0.2.20", "192.0.2.21", "192.0.2.22"}
ONE = {"192.0.2.30", "192.0.2.31", "192.0.2.32"}
SOME = {"192.0.2.40", "192.0.2.41", "192.0.2.42", "192.0.2.43"}
FLAP_UP, FLAP_FLAPPY = "127.0.0.41", "127.0.0.42"


def rand_label(rng, n=None):
    n = n or rng.randint(1, 20)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789-") for _ in range(n)).strip("-") or "x"


def rand_net(rng):
    if rng.random() < 0.8:
        return "%s/%d" % (ipaddress.IPv4Address(rng.getrandbits(32)), rng.choice([16, 20, 24, 24, 24, 32]))
    return "%s/%d" % (ipaddress.IPv6Address(rng.getrandbits(128)), rng.choice([32, 48, 56, 56, 64]))


def make_case(rng):
    """(name, qtype, ecs, check) where check(resp) -> None or an error kind."""
    r = rng.random()

    def rc(want):
        return lambda m: None if m.rcode == want else "rcode %d, want %d" % (m.rcode, want)

    def exact(addrs):
        def f(m):
            if m.rcode != 0:
                return "rcode %d" % m.rcode
            return None if sorted(m.addrs) == sorted(addrs) else "answer %s" % m.addrs
        return f

    if r < 0.15:
        return ("www.example.test", A, None, exact(["192.0.2.1"]))
    if r < 0.20:
        return ("www.example.test", AAAA, None, exact(["2001:db8::1"]))
    if r < 0.25:
        return ("alias.example.test", A, None,
                lambda m: None if m.rcode == 0 and m.types == [CNAME, A] and m.addrs == ["192.0.2.1"] else "cname %s %s" % (m.types, m.addrs))
    if r < 0.30:
        return ("example.test", MX, None, lambda m: None if m.rcode == 0 and m.types == [MX] else "mx %s" % m.types)
    if r < 0.37:
        return ("shuffle.example.test", A, None,
                lambda m: None if m.rcode == 0 and set(m.addrs) == SHUFFLE and len(m.addrs) == 4 else "shuffle %s" % m.addrs)
    if r < 0.42:
        return ("rotate.example.test", A, None,
                lambda m: None if m.rcode == 0 and set(m.addrs) == ROTATE and len(m.addrs) == 3 else "rotate %s" % m.addrs)
    if r < 0.47:
        return ("one.example.test", A, None,
                lambda m: None if m.rcode == 0 and len(m.addrs) == 1 and m.addrs[0] in ONE else "one %s" % m.addrs)
    if r < 0.52:
        return ("some.example.test", A, None,
                lambda m: None if m.rcode == 0 and len(set(m.addrs)) == 2 and set(m.addrs) <= SOME else "some %s" % m.addrs)
    if r < 0.57:
        return ("flap.example.test", A, None,
                lambda m: None if m.rcode == 0 and FLAP_UP in m.addrs and set(m.addrs) <= {FLAP_UP, FLAP_FLAPPY} else "flap %s" % m.addrs)
    if r < 0.72:
        net, pool = rng.choice(GEO_FIXED)
        return ("geo.example.test", A, net, exact(sorted(POOLS[pool])))
    if r < 0.75:
        return ("geo.example.test", AAAA, "2001:4860:1::/48", exact(["2001:db8:100::1"]))
    if r < 0.87:
        net = rand_net(rng)

        def geo_any(m):
            if m.rcode != 0:
                return "rcode %d" % m.rcode
            if m.addrs and any(set(m.addrs) == p for p in POOLS.values()):
                return None
            return "geo %s for %s" % (m.addrs, net)
        return ("geo.example.test", A, net, geo_any)
    name = "%s.%s.example.test" % (rand_label(rng), rand_label(rng))
    return (name, A, None, rc(3))


def check_ecs(q_ecs, m):
    if q_ecs is None:
        return None if m.ecs is None else "unexpected ECS echo"
    if m.ecs is None:
        return "ECS not echoed"
    want = ecs_option(q_ecs)[4:]
    if m.ecs[:3] != want[:3] or m.ecs[4:] != want[4:]:
        return "ECS echo differs"
    return None


# ---------------------------------------------------------------------------
# Load processes
# ---------------------------------------------------------------------------

def new_stats():
    return {"sent": 0, "answered": 0, "lost": 0, "wrong": 0, "errors": {}, "lat": [], "lost_at": []}


def err(st, kind, detail=None):
    st["errors"][kind] = st["errors"].get(kind, 0) + 1
    if detail and len(st.setdefault("samples", [])) < 5:
        st["samples"].append("%s: %s: %s" % (time.strftime("%H:%M:%S"), kind, detail))


def udp_client(server, end, seed, out):
    rng = random.Random(seed)
    st = new_stats()
    fam = socket.AF_INET6 if ":" in server[0] else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    qid = rng.randrange(65536)
    while time.time() < end:
        name, qtype, ecs, check = make_case(rng)
        qid = (qid + 1) & 0xFFFF
        pkt = query(qid, name, qtype, ecs, edns=rng.random() < 0.3)
        t0 = time.perf_counter()
        s.sendto(pkt, server)
        st["sent"] += 1
        try:
            while True:
                data, _ = s.recvfrom(65535)
                if data[:2] == pkt[:2]:
                    break  # anything else is a late answer to an earlier query
        except socket.timeout:
            st["lost"] += 1
            st["lost_at"].append(time.time())
            err(st, "lost (udp timeout)", name)
            continue
        st["lat"].append(time.perf_counter() - t0)
        st["answered"] += 1
        try:
            m = Resp(data)
        except Exception as e:  # noqa: BLE001
            st["wrong"] += 1
            err(st, "unparsable", str(e))
            continue
        problem = None
        if not m.qr or m.id != qid:
            problem = "header"
        elif m.question != pkt[12:12 + len(m.question)]:
            problem = "question differs"
        elif m.tc:
            problem = "unexpected TC"  # every soak answer fits in 512 octets
        else:
            problem = check(m) or check_ecs(ecs, m)
        if problem:
            st["wrong"] += 1
            err(st, "wrong answer", "%s %s %s: %s" % (name, qtype, ecs, problem))
    # Keep the latency sample small for the pipe.
    lat = st["lat"]
    st["lat"] = sorted(lat)[:: max(1, len(lat) // 20000)]
    st["n_lat"] = len(lat)
    out.put(("udp", st))


def tcp_recv_msg(s):
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf
    (n,) = struct.unpack(">H", exact(2))
    return exact(n)


def tcp_client(server, end, seed, out):
    rng = random.Random(seed)
    st = new_stats()
    fam = socket.AF_INET6 if ":" in server[0] else socket.AF_INET
    conn = None
    used = 0
    qid = 0
    while time.time() < end:
        try:
            if conn is None or used >= rng.randint(1, 50):
                if conn:
                    conn.close()
                conn = socket.socket(fam, socket.SOCK_STREAM)
                conn.settimeout(3.0)
                conn.connect(server)
                used = 0
            # Two pipelined queries per round trip.
            cases = [make_case(rng) for _ in range(2)]
            pkts = []
            for (name, qtype, ecs, _c) in cases:
                qid = (qid + 1) & 0xFFFF
                p = query(qid, name, qtype, ecs)
                pkts.append(p)
            t0 = time.perf_counter()
            conn.sendall(b"".join(struct.pack(">H", len(p)) + p for p in pkts))
            st["sent"] += 2
            for p, (name, qtype, ecs, check) in zip(pkts, cases):
                data = tcp_recv_msg(conn)
                st["answered"] += 1
                m = Resp(data)
                problem = None
                if m.id != struct.unpack(">H", p[:2])[0] or m.tc:
                    problem = "header"
                else:
                    problem = check(m) or check_ecs(ecs, m)
                if problem:
                    st["wrong"] += 1
                    err(st, "wrong answer (tcp)", "%s: %s" % (name, problem))
            st["lat"].append(time.perf_counter() - t0)
            used += 1
        except (OSError, ConnectionError, ValueError) as e:
            # Queries sent on a connection that broke before their answers
            # came are lost.
            missing = st["sent"] - st["answered"] - st["lost"]
            if missing > 0:
                st["lost"] += missing
                st["lost_at"].append(time.time())
            err(st, "tcp " + type(e).__name__, str(e))
            conn = None
    if conn:
        conn.close()
    lat = st["lat"]
    st["lat"] = sorted(lat)[:: max(1, len(lat) // 20000)]
    st["n_lat"] = len(lat)
    out.put(("tcp", st))


def malformed_client(server, end, seed, out):
    """Garbage at a modest rate: no answer is required, nothing may crash."""
    rng = random.Random(seed)
    st = {"sent": 0, "answers": 0}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    base = query(1, "www.example.test", A, "8.8.8.0/24")
    while time.time() < end:
        k = rng.random()
        if k < 0.3:
            pkt = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 80)))
        elif k < 0.6:
            pkt = base[: rng.randint(0, len(base) - 1)]
        elif k < 0.8:
            b = bytearray(base)
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.getrandbits(8)
            pkt = bytes(b)
        else:
            pkt = base + bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 8)))
        try:
            s.sendto(pkt, server)
            st["sent"] += 1
        except OSError:
            pass
        try:
            while True:
                s.recvfrom(65535)
                st["answers"] += 1
        except (BlockingIOError, OSError):
            pass
        time.sleep(0.002)
    out.put(("malformed", st))


def flood(server, count, seed, procs=2):
    """Fire `count` queries of random names and random ECS subnets as fast as
    possible (answers are read but not waited for). Returns (sent, answered)."""
    q = mp.Queue()
    per = count // procs
    ps = [mp.Process(target=_flood_proc, args=(server, per, seed + i, q)) for i in range(procs)]
    for p in ps:
        p.start()
    res = [q.get() for _ in ps]
    for p in ps:
        p.join()
    return sum(r[0] for r in res), sum(r[1] for r in res)


def _flood_proc(server, count, seed, out):
    rng = random.Random(seed)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.setblocking(False)
    sent = answered = 0
    window = 256  # at most this many outstanding, so the kernel drops nothing
    while sent < count:
        while sent - answered < window and sent < count:
            if rng.random() < 0.5:
                name, ecs = "geo.example.test", rand_net(rng)
            else:
                name, ecs = "%s.%s.example.test" % (rand_label(rng), rand_label(rng, 8)), (rand_net(rng) if rng.random() < 0.5 else None)
            try:
                s.sendto(query(sent & 0xFFFF, name, A, ecs), server)
                sent += 1
            except BlockingIOError:
                break
        t0 = time.time()
        got = False
        while time.time() - t0 < 0.5:
            try:
                s.recvfrom(65535)
                answered += 1
                got = True
            except BlockingIOError:
                if got:
                    break
                time.sleep(0.0005)
        if not got:
            # Give up on what is outstanding rather than stall.
            answered = sent - min(sent - answered, window // 2)
    out.put((sent, answered))


# ---------------------------------------------------------------------------
# Faults
# ---------------------------------------------------------------------------

def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("State:"):
                    return "Z" not in line
    except OSError:
        return False
    return True


class Faults:
    def __init__(self, args):
        self.a = args
        self.log = []
        self.reloads = {"good": 0, "bad": 0}
        self.geo_swaps = 0
        self.flaps = 0
        self.rss = []
        self.stop = threading.Event()

    def note(self, what):
        self.log.append((time.time(), what))

    def reloader(self):
        wd = self.a.workdir
        k = 0
        while not self.stop.wait(self.a.reload_every):
            good = k % 2 == 0
            src = "good.toml" if good else ("bad-syntax.toml" if k % 4 == 1 else "bad-pool.toml")
            tmp = os.path.join(wd, "meridian.toml.tmp")
            shutil.copyfile(os.path.join(wd, src), tmp)
            os.chmod(tmp, 0o644)
            os.replace(tmp, os.path.join(wd, "meridian.toml"))
            os.kill(self.a.pid, signal.SIGHUP)
            self.reloads["good" if good else "bad"] += 1
            self.note("SIGHUP with " + src)
            k += 1
        # Leave the good config in place.
        shutil.copyfile(os.path.join(wd, "good.toml"), os.path.join(wd, "meridian.toml"))

    def geo_swapper(self):
        wd = self.a.workdir
        k = 0
        while not self.stop.wait(self.a.geo_every):
            src = "alt.mmdb" if k % 2 == 0 else "example.mmdb.orig"
            tmp = os.path.join(wd, "geo.mmdb.tmp")
            shutil.copyfile(os.path.join(wd, src), tmp)
            os.chmod(tmp, 0o644)
            os.replace(tmp, os.path.join(wd, "geo.mmdb"))
            self.geo_swaps += 1
            self.note("geo database replaced by " + src)
            k += 1

    def backend(self, addr, flap):
        """A TCP health-check target; when `flap`, closed and reopened."""
        port = self.a.backend_port
        up = True
        ls = None
        last = time.time()
        while not self.stop.is_set():
            if up and ls is None:
                ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                ls.bind((addr, port))
                ls.listen(64)
                ls.settimeout(0.1)
            if ls is not None:
                try:
                    c, _ = ls.accept()
                    c.close()
                except (socket.timeout, OSError):
                    pass
            else:
                time.sleep(0.1)
            if flap and time.time() - last >= self.a.flap_every:
                last = time.time()
                up = not up
                self.flaps += 1
                self.note("backend %s %s" % (addr, "up" if up else "down"))
                if not up and ls is not None:
                    ls.close()
                    ls = None
        if ls is not None:
            ls.close()

    def sampler(self):
        while not self.stop.wait(self.a.rss_every):
            self.rss.append((time.time(), rss_kb(self.a.pid)))


def http_get(addr, path):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=3)
    # The API refuses a Host that is not its address.
    s.sendall(("GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (path, addr)).encode())
    data = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        data += c
    s.close()
    return data.decode(errors="replace").split("\r\n\r\n", 1)[-1]


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


# ---------------------------------------------------------------------------

def pct(sorted_vals, p):
    if not sorted_vals:
        return float("nan")
    return sorted_vals[min(len(sorted_vals) - 1, int(len(sorted_vals) * p))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--http", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--reload-every", type=float, default=3)
    ap.add_argument("--geo-every", type=float, default=7)
    ap.add_argument("--flap-every", type=float, default=4)
    ap.add_argument("--rss-every", type=float, default=5)
    ap.add_argument("--backend-port", type=int, required=True)
    ap.add_argument("--udp-clients", type=int, default=2)
    ap.add_argument("--tcp-clients", type=int, default=1)
    ap.add_argument("--flood", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the report here too")
    a = ap.parse_args()
    host, port = a.server.rsplit(":", 1)
    server = (host.strip("[]"), int(port))
    assert ipaddress.ip_address(server[0]).is_loopback, "soak traffic goes to loopback only"
    report = {"duration_s": a.duration}

    # The health-checked backends come up first, so that the flapping one is
    # the only member that ever changes state.
    f = Faults(a)
    backends = [threading.Thread(target=f.backend, args=(FLAP_UP, False)),
                threading.Thread(target=f.backend, args=(FLAP_FLAPPY, True))]
    for t in backends:
        t.start()
    time.sleep(2)

    # 1. Memory under a flood of random names and ECS subnets.
    rss0 = rss_kb(a.pid)
    t0 = time.time()
    sent, answered = flood(server, a.flood, a.seed + 100)
    report["flood1"] = {"queries": sent, "answered": answered, "seconds": round(time.time() - t0, 1),
                        "rss_before_kb": rss0, "rss_after_kb": rss_kb(a.pid)}
    print("flood 1: %s" % report["flood1"], flush=True)

    # 2. The soak: load and faults together.
    threads = [threading.Thread(target=f.reloader), threading.Thread(target=f.geo_swapper),
               threading.Thread(target=f.sampler)]
    end = time.time() + a.duration
    q = mp.Queue()
    procs = [mp.Process(target=udp_client, args=(server, end, a.seed + i, q)) for i in range(a.udp_clients)]
    procs += [mp.Process(target=tcp_client, args=(server, end, a.seed + 50 + i, q)) for i in range(a.tcp_clients)]
    procs.append(mp.Process(target=malformed_client, args=(server, end, a.seed + 99, q)))
    t_start = time.time()
    for p in procs:
        p.start()
    for t in threads:
        t.start()
    crashed_at = None
    while time.time() < end:
        time.sleep(0.5)
        if not alive(a.pid):
            crashed_at = time.time() - t_start
            break
    results = [q.get(timeout=a.duration + 60) for _ in procs]
    for p in procs:
        p.join()
    f.stop.set()
    for t in threads + backends:
        t.join()
    elapsed = time.time() - t_start

    agg = {"udp": new_stats(), "tcp": new_stats()}
    mal = {}
    lat = {"udp": [], "tcp": []}
    for kind, st in results:
        if kind == "malformed":
            mal = st
            continue
        g = agg[kind]
        for k in ("sent", "answered", "lost", "wrong"):
            g[k] += st[k]
        for k, v in st["errors"].items():
            g["errors"][k] = g["errors"].get(k, 0) + v
        g.setdefault("samples", []).extend(st.get("samples", []))
        g["lost_at"].extend(st["lost_at"])
        lat[kind].extend(st["lat"])
    reload_times = [t for t, w in f.log if w.startswith("SIGHUP") or w.startswith("geo")]
    lost_near_reload = sum(1 for g in agg.values() for t in g["lost_at"]
                           if any(abs(t - r) < 1.5 for r in reload_times))
    for kind in ("udp", "tcp"):
        g = agg[kind]
        l = sorted(lat[kind])
        report[kind] = {"sent": g["sent"], "answered": g["answered"], "lost": g["lost"],
                        "wrong": g["wrong"], "qps": round(g["answered"] / max(elapsed, 1e-9)),
                        "p50_ms": round(pct(l, 0.50) * 1000, 3), "p99_ms": round(pct(l, 0.99) * 1000, 3),
                        "errors": g["errors"], "samples": g.get("samples", [])[:5]}
    report["malformed"] = mal
    report["faults"] = {"reloads_good": f.reloads["good"], "reloads_bad": f.reloads["bad"],
                        "geo_replacements": f.geo_swaps, "backend_flaps": f.flaps,
                        "lost_within_1.5s_of_a_reload": lost_near_reload}
    try:
        m = http_get(a.http, "/metrics")
        report["server_metrics"] = {
            "reloads_ok": metric(m, 'meridian_reloads_total{result="ok"}'),
            "reloads_failed": metric(m, 'meridian_reloads_total{result="failed"}'),
            "queries": metric(m, "meridian_queries_total"),
            "dropped": metric(m, "meridian_dropped_total"),
            "tcp_timeouts": metric(m, "meridian_tcp_timeouts_total"),
        }
    except OSError as e:
        report["server_metrics"] = {"error": str(e)}
    report["rss_kb"] = [r for _, r in f.rss]
    report["fault_log"] = ["%s %s" % (time.strftime("%H:%M:%S", time.localtime(t)), w) for t, w in f.log][:40]
    report["crashed_at_s"] = crashed_at

    # 3. Memory again, after another flood.
    if crashed_at is None:
        rss1 = rss_kb(a.pid)
        sent, answered = flood(server, a.flood, a.seed + 200)
        report["flood2"] = {"queries": sent, "answered": answered,
                            "rss_before_kb": rss1, "rss_after_kb": rss_kb(a.pid)}
        print("flood 2: %s" % report["flood2"], flush=True)

    # Pass bar.
    fails = []
    if crashed_at is not None or not alive(a.pid):
        fails.append("server died")
    for kind in ("udp", "tcp"):
        if report[kind]["wrong"]:
            fails.append("%d wrong %s answers" % (report[kind]["wrong"], kind))
        if report[kind]["lost"]:
            fails.append("%d lost %s queries" % (report[kind]["lost"], kind))
    series = [r for r in report["rss_kb"] if r]
    if "flood2" in report and report["flood1"]["rss_after_kb"]:
        base = report["flood1"]["rss_after_kb"]
        last = report["flood2"]["rss_after_kb"] or 0
        growth = last - base
        report["rss_growth_kb"] = growth
        # Flat: within 10% (and 8 MiB) of the level after the first flood.
        if growth > max(8192, base // 10):
            fails.append("RSS grew %d kB (%d -> %d)" % (growth, base, last))
    if series:
        report["rss_min_max_kb"] = [min(series), max(series)]
    report["pass"] = not fails
    report["failures"] = fails
    text = json.dumps(report, indent=2)
    print(text)
    if a.json:
        with open(a.json, "w") as fh:
            fh.write(text + "\n")
    sys.exit(0 if not fails else 1)


if __name__ == "__main__":
    main()
