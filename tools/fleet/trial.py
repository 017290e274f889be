#!/usr/bin/python3
"""The fleet fault trial (#26): a 3-member etcd cluster and three meridian
nodes on loopback under a bounded query load, taken through the faults an
operator meets, with the lost and wrong answers counted per step.

Steps: a node killed and restarted; one etcd member killed (the leader),
then a second (quorum gone; an API write must get a 503 sentence); a push
every node refuses; a node restarted after that refused push; a push whose
reload takes longer than the lease (the daemon's test hook
MERIDIAN_TEST_RELOAD_DELAY_MS), with the registrations sampled meanwhile.

Every node must answer `new.fleet.test A` with 192.0.2.99 (a name only the
pushed revisions have: a node on its own file answers NXDOMAIN, which counts
as wrong) and `web.fleet.test A` with both pool members.

    tools/fleet/trial.py [--rate 100] [--step 10] [--meridian PATH]

Needs etcd and etcdctl (Debian etcd-server, etcd-client) and python3. Everything listens on
127.0.0.1 and is stopped at exit. Exit status 0 when no answer was wrong
and no registration was lost.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import random
import struct

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NEW = ["192.0.2.99"]
WEB = ["192.0.2.81", "192.0.2.82"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Etcd:
    def __init__(self, d):
        self.ports = [(free_port(), free_port()) for _ in range(3)]
        cluster = ",".join(f"e{i}=http://127.0.0.1:{pp}" for i, (_, pp) in enumerate(self.ports))
        self.args = []
        for i, (cp, pp) in enumerate(self.ports):
            self.args.append([
                "etcd", "--name", f"e{i}", "--data-dir", f"{d}/etcd-{i}",
                "--listen-client-urls", f"http://127.0.0.1:{cp}",
                "--advertise-client-urls", f"http://127.0.0.1:{cp}",
                "--listen-peer-urls", f"http://127.0.0.1:{pp}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{pp}",
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--initial-cluster-token", "meridian-trial"])
        self.d = d
        self.procs = [None] * 3
        for i in range(3):
            self.start(i)
        self.wait_healthy()

    def endpoints(self):
        return [f"http://127.0.0.1:{cp}" for cp, _ in self.ports]

    def start(self, i):
        log = open(f"{self.d}/etcd-{i}.log", "a")
        self.procs[i] = subprocess.Popen(self.args[i], stdout=log, stderr=log)

    def kill(self, i):
        self.procs[i].kill()
        self.procs[i].wait()
        self.procs[i] = None

    def ctl(self, *args):
        live = [e for i, e in enumerate(self.endpoints()) if self.procs[i]]
        return subprocess.run(
            ["etcdctl", f"--endpoints={','.join(live)}", "--dial-timeout=1s",
             "--command-timeout=2s", *args],
            env={**os.environ, "ETCDCTL_API": "3"}, capture_output=True, text=True)

    def wait_healthy(self):
        for _ in range(300):
            if self.ctl("endpoint", "health").returncode == 0:
                return
            time.sleep(0.2)
        sys.exit("etcd did not become healthy")

    def leader(self):
        out = self.ctl("endpoint", "status", "-w", "json").stdout
        for st in json.loads(out or "[]"):
            s = st["Status"]
            if s["header"]["member_id"] == s["leader"]:
                return self.endpoints().index(st["Endpoint"])
        return 0

    def registered(self):
        out = self.ctl("get", "--prefix", "--keys-only", "/meridian/nodes/").stdout
        return sorted(k.rsplit("/", 1)[1] for k in out.split() if k)

    def stop(self):
        for p in self.procs:
            if p:
                p.kill()


class Node:
    def __init__(self, meridian, d, name, etcd, env=None):
        self.meridian, self.name = meridian, name
        self.dir = f"{d}/{name}"
        os.makedirs(self.dir, exist_ok=True)
        self.dns, self.http = free_port(), free_port()
        write_config(self.dir, name, etcd, self.dns, self.http)
        shutil.copy(f"{REPO}/geo/example.mmdb", f"{self.dir}/geo.mmdb")
        self.proc = None
        self.start(env)

    def start(self, env=None):
        log = open(f"{self.dir}/log", "a")
        self.proc = subprocess.Popen(
            [self.meridian, "serve", "--config", f"{self.dir}/meridian.toml"],
            stdout=log, stderr=log, env={**os.environ, **(env or {})})
        for _ in range(100):
            if ask(self.dns, "web.fleet.test", 0.1) is not None:
                return
            time.sleep(0.05)
        sys.exit(f"node {self.name} did not start: see {self.dir}/log")

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def status(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/status", timeout=2) as r:
            return json.load(r)["fleet"]


def write_config(d, name, etcd, dns_port, http_port):
    with open(f"{d}/fleet.test.zone", "w") as f:
        f.write("$ORIGIN fleet.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 7200 1800 1209600 300\n"
                "@ IN NS ns1\nns1 IN A 192.0.2.53\n")
    with open(f"{d}/api.tokens", "w") as f:
        f.write("operator write trial-token-0123456789\n")
    os.chmod(f"{d}/api.tokens", 0o600)
    eps = ", ".join(f'"{e}"' for e in etcd)
    with open(f"{d}/meridian.toml", "w") as f:
        f.write(f"""[server]
listen = ["127.0.0.1:{dns_port}"]
http_listen = "127.0.0.1:{http_port}"
log = "info"
allow_root = true
workers = 1

[api]
tokens = "api.tokens"

[fleet]
etcd = [{eps}]
node = "{name}"
timeout = "1s"

[geo]
database = "geo.mmdb"

[[zone]]
origin = "fleet.test."
file = "fleet.test.zone"

[pool.web]
members = ["192.0.2.81", "192.0.2.82"]

[name."web.fleet.test"]
pool = "web"
mode = "all"
ttl = 5
""")


RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED"}


def ask(port, name, timeout):
    """The sorted A addresses, the rcode's name, or None (lost)."""
    qid = random.randrange(65536)
    q = struct.pack(">HHHHHH", qid, 0, 1, 0, 0, 0)
    q += b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\0"
    q += struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    try:
        s.sendto(q, ("127.0.0.1", port))
        while True:
            r = s.recv(4096)
            if len(r) >= 12 and struct.unpack(">H", r[:2])[0] == qid:
                break
    except OSError:
        return None
    finally:
        s.close()
    flags, qd, an = struct.unpack(">HHH", r[2:8])
    if flags & 0xF:
        return RCODES.get(flags & 0xF, str(flags & 0xF))
    i = 12
    for _ in range(qd):
        i = skip_name(r, i) + 4
    out = []
    for _ in range(an):
        i = skip_name(r, i)
        rtype, _, _, rdlen = struct.unpack(">HHIH", r[i:i + 10])
        i += 10
        if rtype == 1 and rdlen == 4:
            out.append(socket.inet_ntoa(r[i:i + 4]))
        i += rdlen
    return sorted(out)


def skip_name(r, i):
    while r[i] != 0:
        if r[i] & 0xC0 == 0xC0:
            return i + 2
        i += r[i] + 1
    return i + 1


class Load:
    """`rate` queries/s to each node, alternating the two names; counts per
    node since the last `take`."""

    def __init__(self, nodes, rate):
        self.nodes, self.rate = nodes, rate
        self.lock = threading.Lock()
        self.counts = {n.name: [0, 0, 0] for n in nodes}  # sent, lost, wrong
        self.wrong_examples = {}
        self.running = True
        self.threads = [threading.Thread(target=self.run, args=(n,), daemon=True) for n in nodes]
        for t in self.threads:
            t.start()

    def run(self, node):
        i, t0 = 0, time.monotonic()
        while self.running:
            name, want = ("new.fleet.test", NEW) if i % 2 == 0 else ("web.fleet.test", WEB)
            got = ask(node.dns, name, 1.0)
            with self.lock:
                c = self.counts[node.name]
                c[0] += 1
                if got is None:
                    c[1] += 1
                elif got != want:
                    c[2] += 1
                    self.wrong_examples.setdefault(node.name, f"{name} -> {got}")
            i += 1
            pause = t0 + i / self.rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)

    def take(self):
        with self.lock:
            out = {k: tuple(v) for k, v in self.counts.items()}
            ex = dict(self.wrong_examples)
            for v in self.counts.values():
                v[:] = [0, 0, 0]
            self.wrong_examples.clear()
        return out, ex

    def stop(self):
        self.running = False


def push(meridian, cfg, *extra):
    r = subprocess.run([meridian, "fleet", "push", "--config", cfg, *extra],
                       capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=100, help="queries/s to each node")
    ap.add_argument("--step", type=float, default=10, help="seconds per step")
    ap.add_argument("--meridian", default=None)
    a = ap.parse_args()
    meridian = a.meridian or next(
        (p for p in (f"{REPO}/target/release/meridian", f"{REPO}/target/debug/meridian")
         if os.access(p, os.X_OK)), None)
    if not meridian:
        sys.exit("no meridian binary: cargo build --release --features fleet")
    d = tempfile.mkdtemp(prefix="meridian-trial.", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    etcd = Etcd(d)
    nodes = [Node(meridian, d, n, etcd.endpoints()) for n in "abc"]
    pusher = f"{d}/pusher"
    os.makedirs(pusher)
    write_config(pusher, "pusher", etcd.endpoints(), free_port(), free_port())
    shutil.copy(f"{REPO}/geo/example.mmdb", f"{pusher}/geo.mmdb")
    with open(f"{pusher}/fleet.test.zone", "a") as f:
        f.write("new IN A 192.0.2.99\n")
    cfg = f"{pusher}/meridian.toml"
    code, out = push(meridian, cfg)
    print(f"push of the first revision: exit {code}\n{out}\n")
    load = Load(nodes, a.rate)
    rows, bad = [], 0

    def measure(step, secs=a.step, note=""):
        nonlocal bad
        time.sleep(secs)
        counts, ex = load.take()
        for n, (sent, lost, wrong) in counts.items():
            rows.append((step, n, sent, lost, wrong, ex.get(n, "")))
            bad += wrong
        if note:
            rows.append((step, "", "", "", "", note))

    try:
        measure("steady state")
        nodes[2].kill()
        measure("node c killed", note="c's queries are lost while it is down (a resolver asks another NS)")
        nodes[2].start()
        measure("node c restarted")
        leader = etcd.leader()
        etcd.kill(leader)
        measure(f"etcd leader e{leader} killed")
        second = next(i for i in range(3) if etcd.procs[i])
        etcd.kill(second)
        req = urllib.request.Request(
            f"http://127.0.0.1:{nodes[0].http}/override/192.0.2.81?state=drain", method="POST",
            headers={"Authorization": "Bearer trial-token-0123456789"})
        try:
            urllib.request.urlopen(req, timeout=10)
            write = "200 (not refused!)"
            bad += 1
        except urllib.error.HTTPError as e:
            write = f"{e.code} {e.read().decode().strip()}"
        measure(f"etcd e{second} killed too (no quorum)", note=f"API write: {write}")
        for i in range(3):
            if not etcd.procs[i]:
                etcd.start(i)
        etcd.wait_healthy()
        measure("etcd members restarted")
        with open(f"{pusher}/geo.mmdb", "ab") as f:
            f.write(b"not the nodes' database")
        code, out = push(meridian, cfg, "--timeout", "10s")
        rows.append(("refused push", "", "", "", "", f"fleet push exit {code}: " + out.replace("\n", " / ")))
        if code == 0:
            bad += 1
        measure("after the refused push")
        nodes[0].kill()
        nodes[0].start()
        measure("node a restarted after the refused push",
                note=f"a's /status: source {nodes[0].status()['source']}, revision {nodes[0].status()['revision']}")
        shutil.copy(f"{REPO}/geo/example.mmdb", f"{pusher}/geo.mmdb")
        for n in nodes:
            n.kill()
            n.start({"MERIDIAN_TEST_RELOAD_DELAY_MS": "8000"})
        # The queries in flight at each restart time out: not this step's.
        time.sleep(2)
        load.take()
        with open(f"{pusher}/fleet.test.zone", "a") as f:
            f.write("newer IN A 192.0.2.98\n")
        code, out = push(meridian, cfg, "--no-wait")
        t0, lowest = time.monotonic(), 3
        while time.monotonic() - t0 < max(a.step, 12):
            lowest = min(lowest, len(etcd.registered()))
            time.sleep(0.25)
        counts, ex = load.take()
        for n, (sent, lost, wrong) in counts.items():
            rows.append(("push, 8 s reload vs 5 s lease", n, sent, lost, wrong, ex.get(n, "")))
            bad += wrong
        rows.append(("push, 8 s reload vs 5 s lease", "", "", "", "",
                     f"fewest nodes registered while reloading: {lowest} of 3"))
        if lowest < 3:
            bad += 1
    finally:
        load.stop()
        for n in nodes:
            n.kill()
        etcd.stop()
    print(f"| step | node | sent | lost | wrong | note |\n| --- | --- | ---: | ---: | ---: | --- |")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    print(f"\nfiles and logs: {d}")
    sys.exit(0 if bad == 0 else 1)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    main()
