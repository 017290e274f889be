#!/usr/bin/env python3
"""Query files for tools/compare, drawn from a MaxMind-format database.

    gen_queries.py --mmdb GeoLite2-City.mmdb --out DIR [--subnets 10000] [--seed 7871]

Writes, in the `NAME TYPE [ECS-SUBNET]` format of meridian-loadgen:

  www.txt      www.lb.test A                      (static answer)
  rr.txt       rr.lb.test A                       (8 addresses, a pool)
  geo-ecs.txt  geo.lb.test A SUBNET, one line per distinct client subnet
  geo-ecs.tsv  the same subnets with what the database says about them:
               subnet, continent, country, expected pool, database prefix length

The subnets are real networks of the database: IPv4 /24s of random public
addresses and IPv6 /56s inside networks found by a random walk down the
database's search tree under 2000::/3. A quota per continent (the mix below)
makes every pool appear, and about 3 % are public addresses the database does
not know (default pool). Special-purpose space is never drawn (meridian
ignores an ECS address there; the peers do not). The same seed and database
give the same files on every machine. Standard library only.
"""

import argparse
import ipaddress
import os
import random
import struct
import sys

POOL_OF = {"NA": "na", "EU": "eu", "AS": "as", "SA": "sa"}  # anything else: def

# Share of the subnets per continent of the database record; None = not in it.
MIX = [("NA", 0.30), ("EU", 0.30), ("AS", 0.25), ("SA", 0.05),
       ("AF", 0.03), ("OC", 0.04), (None, 0.03)]

SPECIAL_V4 = [ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
    "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24",
    "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
    "224.0.0.0/3")]
SPECIAL_V6 = [ipaddress.ip_network(n) for n in (
    "2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20")]


class Mmdb:
    """The smallest MaxMind DB reader that does the job: search tree walk with
    the prefix length of the network found, and the data section decoder."""

    MARKER = b"\xab\xcd\xefMaxMind.com"

    def __init__(self, path):
        with open(path, "rb") as f:
            self.buf = f.read()
        i = self.buf.rfind(self.MARKER)
        if i < 0:
            raise ValueError("%s: not a MaxMind DB (no metadata marker)" % path)
        self.data_base = 0
        meta, _ = self._decode(i + len(self.MARKER))
        self.meta = meta
        self.nodes = meta["node_count"]
        self.rec = meta["record_size"]
        if self.rec not in (24, 28, 32):
            raise ValueError("record size %d" % self.rec)
        self.node_bytes = self.rec // 4
        self.tree_size = self.nodes * self.node_bytes
        self.data_base = self.tree_size + 16
        self.v6 = meta["ip_version"] == 6
        self.v4_start, self.v4_depth = 0, 0
        if self.v6:
            n = 0
            while self.v4_depth < 96 and n < self.nodes:
                n = self.child(n, 0)
                self.v4_depth += 1
            self.v4_start = n
        self.cache = {}

    def child(self, node, bit):
        b = self.buf
        o = node * self.node_bytes
        if self.rec == 24:
            o += 3 * bit
            return (b[o] << 16) | (b[o + 1] << 8) | b[o + 2]
        if self.rec == 32:
            return struct.unpack_from(">I", b, o + 4 * bit)[0]
        if bit == 0:
            return ((b[o + 3] >> 4) << 24) | (b[o] << 16) | (b[o + 1] << 8) | b[o + 2]
        return ((b[o + 3] & 0x0F) << 24) | (b[o + 4] << 16) | (b[o + 5] << 8) | b[o + 6]

    def record(self, node):
        """The decoded data record a terminal node points at (None: empty)."""
        if node == self.nodes:
            return None
        off = node - self.nodes - 16
        if off not in self.cache:
            self.cache[off] = self._decode(self.data_base + off)[0]
        return self.cache[off]

    def lookup(self, addr):
        """(record or None, prefix length of the database network)."""
        a = int(addr)
        if addr.version == 4:
            node, bits = self.v4_start, 32
        else:
            node, bits = 0, 128
        depth = 0
        while depth < bits and node < self.nodes:
            node = self.child(node, (a >> (bits - 1 - depth)) & 1)
            depth += 1
        return self.record(node), depth

    def _size(self, p, size):
        if size < 29:
            return p, size
        n = size - 28
        v = int.from_bytes(self.buf[p:p + n], "big")
        return p + n, (29, 285, 65821)[n - 1] + v

    def _decode(self, p):
        b = self.buf
        ctrl = b[p]
        p += 1
        t = ctrl >> 5
        if t == 1:  # pointer
            ss, v = (ctrl >> 3) & 3, ctrl & 7
            if ss == 0:
                ptr, p = (v << 8) | b[p], p + 1
            elif ss == 1:
                ptr, p = ((v << 16) | (b[p] << 8) | b[p + 1]) + 2048, p + 2
            elif ss == 2:
                ptr, p = ((v << 24) | int.from_bytes(b[p:p + 3], "big")) + 526336, p + 3
            else:
                ptr, p = int.from_bytes(b[p:p + 4], "big"), p + 4
            return self._decode(self.data_base + ptr)[0], p
        if t == 0:
            t, p = 7 + b[p], p + 1
        p, size = self._size(p, ctrl & 0x1F)
        if t == 2:
            return b[p:p + size].decode("utf-8", "replace"), p + size
        if t == 3:
            return struct.unpack_from(">d", b, p)[0], p + 8
        if t == 4:
            return bytes(b[p:p + size]), p + size
        if t in (5, 6, 9, 10):
            return int.from_bytes(b[p:p + size], "big"), p + size
        if t == 8:
            return int.from_bytes(b[p:p + size], "big", signed=size == 4), p + size
        if t == 7:
            m = {}
            for _ in range(size):
                k, p = self._decode(p)
                m[k], p = self._decode(p)
            return m, p
        if t == 11:
            arr = []
            for _ in range(size):
                v, p = self._decode(p)
                arr.append(v)
            return arr, p
        if t == 14:
            return bool(size), p
        if t == 15:
            return struct.unpack_from(">f", b, p)[0], p + 4
        raise ValueError("mmdb: data type %d at %d" % (t, p))

    def random_v6(self, rng):
        """A random network of the tree under 2000::/3: (network, record)."""
        node, depth, a = 0, 0, 0
        for bit in (0, 0, 1):
            node = self.child(node, bit)
            a = (a << 1) | bit
            depth += 1
        while node < self.nodes:
            kids = [(bit, self.child(node, bit)) for bit in (0, 1)]
            kids = [k for k in kids if k[1] != self.nodes]
            if not kids:
                return None
            bit, node = rng.choice(kids)
            a = (a << 1) | bit
            depth += 1
        if node == self.nodes or depth > 128:
            return None
        net = ipaddress.IPv6Network((a << (128 - depth), depth))
        return net, self.record(node)


def continent(rec):
    if not isinstance(rec, dict):
        return None
    return (rec.get("continent") or {}).get("code") or rec.get("continent_code") or "??"


def country(rec):
    if not isinstance(rec, dict):
        return "-"
    for k in ("country", "registered_country"):
        c = (rec.get(k) or {}).get("iso_code")
        if c:
            return c
    return rec.get("country_code") or "-"


def draw(db, count, seed, v6_share):
    rng = random.Random(seed)
    quota = {c: int(round(s * count)) for c, s in MIX}
    quota["NA"] += count - sum(quota.values())
    want6 = {c: (0 if c is None else int(round(q * v6_share))) for c, q in quota.items()}
    got = {c: [] for c in quota}
    have6 = {c: 0 for c in quota}
    seen = set()

    def take(cont, net, rec, plen):
        if str(net) in seen:
            return
        seen.add(str(net))
        got[cont].append((net, cont, rec, plen))

    tries = 0
    while any(have6[c] < want6[c] for c in quota) and tries < 500000:
        tries += 1
        r = db.random_v6(rng)
        if r is None:
            continue
        net, rec = r
        cont = continent(rec)
        if cont not in quota or have6[cont] >= want6[cont]:
            continue
        host = 128 - net.prefixlen
        a = int(net.network_address) | (rng.getrandbits(host) if host else 0)
        sub = ipaddress.IPv6Network((a >> 72 << 72, 56))
        if any(sub.subnet_of(s) for s in SPECIAL_V6):
            continue
        rec2, plen = db.lookup(sub.network_address)
        if continent(rec2) != cont:
            continue
        n0 = len(seen)
        take(cont, sub, rec2, plen)
        have6[cont] += len(seen) - n0

    tries = 0
    while any(len(got[c]) < quota[c] for c in quota) and tries < 5000000:
        tries += 1
        a = ipaddress.IPv4Address(rng.getrandbits(24) << 8)
        if any(a in s for s in SPECIAL_V4):
            continue
        rec, plen = db.lookup(a)
        cont = continent(rec)
        if cont not in quota or len(got[cont]) >= quota[cont]:
            continue
        take(cont, ipaddress.IPv4Network((a, 24)), rec, plen)

    short = {str(c): quota[c] - len(got[c]) for c in quota if len(got[c]) < quota[c]}
    if short:
        print("gen_queries.py: warning: quotas not filled: %s" % short, file=sys.stderr)
    rows = [r for c in quota for r in got[c]]
    rng.shuffle(rows)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mmdb", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--subnets", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=7871)
    ap.add_argument("--v6-share", type=float, default=0.10)
    a = ap.parse_args()
    db = Mmdb(a.mmdb)
    rows = draw(db, a.subnets, a.seed, a.v6_share)
    os.makedirs(a.out, exist_ok=True)

    def write(name, text):
        with open(os.path.join(a.out, name), "w") as f:
            f.write(text)

    write("www.txt", "www.lb.test A\n")
    write("rr.txt", "rr.lb.test A\n")
    write("geo-ecs.txt", "".join("geo.lb.test A %s\n" % r[0] for r in rows))
    write("geo-ecs.tsv", "#subnet\tcontinent\tcountry\tpool\tdb_prefix\n" + "".join(
        "%s\t%s\t%s\t%s\t%d\n" % (net, cont or "-", country(rec), POOL_OF.get(cont, "def"), plen)
        for net, cont, rec, plen in rows))
    v6 = sum(1 for r in rows if r[0].version == 6)
    print("gen_queries.py: %d subnets (%d IPv6) from %s (%s, build %s) -> %s" % (
        len(rows), v6, os.path.basename(a.mmdb), db.meta.get("database_type"),
        db.meta.get("build_epoch"), a.out), file=sys.stderr)


if __name__ == "__main__":
    main()
