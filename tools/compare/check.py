#!/usr/bin/env python3
"""Correctness check before the benchmark: the geo answers and ECS scopes of
each server for the subnets of geo-ecs.tsv, against the database and against
a reference server (gdnsd).

    check.py --tsv geo-ecs.tsv --server meridian=5320 --server gdnsd=5321 \
             [--server knot=5322] [--reference gdnsd] [--limit 10000]

Sends `geo.lb.test A` with the subnet as ECS to 127.0.0.1:PORT of every
server, one query at a time, and prints per server: answers whose address
set is the pool the database says (expected), answers equal to the
reference's, and how the ECS scope compares with the database prefix and with
the reference's scope (equal / wider / narrower / 0). Exits 1 when a server
other than Knot (whose answer for addresses missing from the database is the
zone default, which is the same pool) disagrees with the database on a pool.
Standard library only.
"""

import argparse
import ipaddress
import os
import random
import socket
import struct
import sys

POOLS = {
    "na": {"192.0.2.10", "192.0.2.11"},
    "eu": {"198.51.100.10", "198.51.100.11"},
    "as": {"203.0.113.10", "203.0.113.11"},
    "sa": {"203.0.113.20"},
    "def": {"192.0.2.99"},
}
POOL_OF = {frozenset(v): k for k, v in POOLS.items()}


def query(qid, name, net):
    q = struct.pack(">HHHHHH", qid, 0, 1, 0, 0, 1)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\x00" + struct.pack(">HH", 1, 1)
    fam = 1 if net.version == 4 else 2
    addr = net.network_address.packed[:(net.prefixlen + 7) // 8]
    opt = struct.pack(">HHHBB", 8, 4 + len(addr), fam, net.prefixlen, 0) + addr
    q += b"\x00" + struct.pack(">HHIH", 41, 1232, 0, len(opt)) + opt
    return q


def skip_name(m, p):
    while True:
        n = m[p]
        if n == 0:
            return p + 1
        if n & 0xC0 == 0xC0:
            return p + 2
        p += 1 + n


def parse(m):
    """(rcode, set of A addresses, ECS scope or None)."""
    _, flags, qd, an, ns, ar = struct.unpack_from(">HHHHHH", m, 0)
    p = 12
    for _ in range(qd):
        p = skip_name(m, p) + 4
    addrs, scope = set(), None
    for i in range(an + ns + ar):
        p = skip_name(m, p)
        t, _, _, rdlen = struct.unpack_from(">HHIH", m, p)
        p += 10
        rd = m[p:p + rdlen]
        p += rdlen
        if i < an and t == 1 and rdlen == 4:
            addrs.add(socket.inet_ntoa(rd))
        if t == 41:
            o = 0
            while o + 4 <= len(rd):
                code, ln = struct.unpack_from(">HH", rd, o)
                if code == 8 and ln >= 4:
                    scope = rd[o + 7]
                o += 4 + ln
    return flags & 0xF, addrs, scope


def ask(sock, port, qid, name, net):
    q = query(qid, name, net)
    for _ in range(3):
        sock.sendto(q, ("127.0.0.1", port))
        try:
            while True:
                m, _ = sock.recvfrom(4096)
                if struct.unpack_from(">H", m)[0] == qid:
                    return parse(m)
        except socket.timeout:
            continue
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tsv", required=True)
    ap.add_argument("--server", action="append", required=True, help="NAME=PORT")
    ap.add_argument("--reference", default="gdnsd")
    ap.add_argument("--limit", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=5, help="disagreements to print per server")
    a = ap.parse_args()
    servers = [(s.split("=")[0], int(s.split("=")[1])) for s in a.server]
    rows = []
    with open(a.tsv) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            sub, cont, ctry, pool, plen = line.rstrip("\n").split("\t")
            rows.append((ipaddress.ip_network(sub), cont, ctry, pool, int(plen)))
    if a.limit < len(rows):
        rows = random.Random(a.seed).sample(rows, a.limit)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(1.0)
    sock.bind(("127.0.0.1", 0))
    res = {name: [] for name, _ in servers}
    for i, r in enumerate(rows):
        for name, port in servers:
            res[name].append(ask(sock, port, (i * 7 + port) & 0xFFFF, "geo.lb.test", r[0]))
    ref = res.get(a.reference)
    n = len(rows)
    print("%d subnets of %s (%d IPv6); pool = address set of the answer; scope vs the "
          "database prefix (db) and vs %s" % (
              n, os.path.basename(a.tsv), sum(1 for r in rows if r[0].version == 6), a.reference))
    hdr = "%-9s %8s %9s %9s %7s %7s %7s %7s %9s %9s %9s %9s %10s"
    print(hdr % ("server", "answered", "pool=db", "pool=ref", "sc=db", "sc<db", "sc>db", "sc=0",
                 "sc=ref", "sc<ref", "sc>ref", "sc>src", "mean v4/v6"))
    bad = False
    for name, _ in servers:
        out = res[name]
        ok = [o for o in out if o is not None and o[0] == 0]
        pool_db = sum(1 for r, o in zip(rows, out) if o and POOL_OF.get(frozenset(o[1])) == r[3])
        pool_ref = sc_ref = sc_wider_ref = sc_narrow_ref = 0
        if ref is not None:
            for o, x in zip(out, ref):
                if o and x:
                    pool_ref += o[1] == x[1]
                    if o[2] is not None and x[2] is not None:
                        sc_ref += o[2] == x[2]
                        sc_wider_ref += o[2] < x[2]
                        sc_narrow_ref += o[2] > x[2]
        sc = [(r, o[2]) for r, o in zip(rows, out) if o and o[2] is not None]
        eq = sum(1 for r, s in sc if s == r[4])
        wider = sum(1 for r, s in sc if 0 < s < r[4])
        narrow = sum(1 for r, s in sc if s > r[4])
        zero = sum(1 for r, s in sc if s == 0)
        over_src = sum(1 for r, s in sc if s > r[0].prefixlen)
        m4 = [s for r, s in sc if r[0].version == 4]
        m6 = [s for r, s in sc if r[0].version == 6]
        mean = "/%.1f /%.1f" % (sum(m4) / max(1, len(m4)), sum(m6) / max(1, len(m6)))
        print(hdr % (name, len(ok), pool_db, pool_ref if ref else "-", eq, wider, narrow, zero,
                     sc_ref if ref else "-", sc_wider_ref if ref else "-",
                     sc_narrow_ref if ref else "-", over_src, mean))
        shown = 0
        for r, o in zip(rows, out):
            got = POOL_OF.get(frozenset(o[1]), sorted(o[1])) if o else "no answer"
            if got != r[3] and shown < a.show:
                shown += 1
                print("    %s: %s (%s %s, db /%d) -> %s%s" % (
                    name, r[0], r[1], r[2], r[4], got,
                    "" if not o else " scope /%s" % o[2]))
        if name != "knot" and pool_db != n:
            bad = True
    print("columns: pool=db answers with the pool the database implies; pool=ref the same "
          "address set as %s; sc=db scope equal to the database prefix, sc<db wider (merged "
          "blocks), sc>db narrower; sc=ref/sc<ref/sc>ref scope equal/wider/narrower than %s's; "
          "sc>src scope longer than the query's source prefix." % (a.reference, a.reference))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
