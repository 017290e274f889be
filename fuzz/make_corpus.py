#!/usr/bin/env python3
"""Write the seed corpus under fuzz/corpus/<target>/ (Python stdlib only).

answer: real queries for every kind of name in the bundled example (static,
pool, geo with IPv4/IPv6/zero-length ECS, CNAME, NXDOMAIN, other zones),
EDNS variants, and the malformed cases of tests/malformed.rs and
tests/errors.rs: truncated header, label overrun, compression loop and
forward pointer, pointer in the question, trailing garbage, QDCOUNT 0 and 2,
bad OPT (owner, option length, two OPTs, version 1), bad ECS.
ecs: option bodies, valid and each kind of invalid.
zone, config: the repository's zone and config fixtures (paths rewritten to
the files the config target provides) and a few broken ones.
Run from anywhere: python3 fuzz/make_corpus.py
"""
import hashlib
import os
import re
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def name(n):
    out = b""
    for label in n.strip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\x00"


def header(id_=0x4D52, flags=0x0000, qd=1, an=0, ns=0, ar=0):
    return struct.pack(">HHHHHH", id_, flags, qd, an, ns, ar)


def question(n, qtype=1, qclass=1):
    return name(n) + struct.pack(">HH", qtype, qclass)


def opt(payload=1232, ext=0, version=0, flags=0, options=b"", owner=b"\x00"):
    return owner + struct.pack(">HHBBHH", 41, payload, ext, version, flags, len(options)) + options


def option(code, body):
    return struct.pack(">HH", code, len(body)) + body


def ecs_body(family, source, scope, addr):
    return struct.pack(">HBB", family, source, scope) + addr


def ecs4(a, source):
    octets = bytes(int(x) for x in a.split("."))[: (source + 7) // 8]
    return ecs_body(1, source, 0, octets)


def ecs6(hexaddr, source):
    octets = bytes.fromhex(hexaddr)[: (source + 7) // 8]
    return ecs_body(2, source, 0, octets)


def query(n, qtype=1, qclass=1, flags=0x0100, edns=None, id_=0x4D52):
    if edns is None:
        return header(id_, flags) + question(n, qtype, qclass)
    return header(id_, flags, ar=1) + question(n, qtype, qclass) + edns


def answer_seeds():
    s = []
    names = ["www.example.test", "WwW.ExAmPlE.tEsT", "example.test", "alias.example.test",
             "mail.example.test", "ns1.example.test", "nope.example.test", "a.b.c.example.test",
             "shuffle.example.test", "rotate.example.test", "one.example.test",
             "some.example.test", "geo.example.test", "www.example.org", "."]
    for n in names:
        for t in (1, 28, 5, 15, 16, 2, 6, 255, 43, 33, 257, 65280):
            s.append(query(n, t))
        s.append(query(n, 1, edns=opt()))
        s.append(query(n, 28, edns=opt(4096, flags=0x8000)))
    for sub, src in (("8.8.8.0", 24), ("5.1.2.0", 24), ("203.0.0.128", 25), ("10.1.2.0", 24),
                     ("1.128.0.0", 11), ("0.0.0.0", 0), ("192.0.2.1", 32), ("24.1.0.0", 16)):
        s.append(query("geo.example.test", 1, edns=opt(options=option(8, ecs4(sub, src)))))
        s.append(query("geo.example.test", 28, edns=opt(512, options=option(8, ecs4(sub, src)))))
    for h, src in (("20010db8000000000000000000000000", 56), ("2a000000000000000000000000000000", 32),
                   ("00000000000000000000ffff08080808", 128), ("", 0)):
        s.append(query("geo.example.test", 1, edns=opt(options=option(8, ecs6(h.ljust(32, "0"), src)))))
    s.append(query("www.example.test", 1, edns=opt(options=option(8, ecs4("8.8.8.0", 24)))))
    # EDNS odds and ends.
    s.append(query("www.example.test", 1, edns=opt(100)))
    s.append(query("www.example.test", 1, edns=opt(version=1)))
    s.append(query("www.example.test", 1, edns=opt(options=option(10, b"12345678") + option(65001, b""))))
    s.append(query("www.example.test", 1, edns=opt(options=option(8, ecs_body(1, 24, 8, b"\x08\x08\x08")))))
    s.append(query("www.example.test", 1, edns=opt(options=option(8, ecs_body(1, 23, 0, b"\x08\x08\x09")))))
    s.append(query("www.example.test", 1, edns=opt(options=option(8, ecs_body(3, 0, 0, b"")))))
    s.append(query("www.example.test", 1, edns=opt(options=option(8, b"\x00\x01"))))
    s.append(query("www.example.test", 1, edns=opt(options=option(8, ecs4("8.8.8.0", 24)) * 2)))
    s.append(query("www.example.test", 1, edns=opt(options=b"\x00\x08\x00\x20\x00\x01")))  # option overruns
    s.append(query("www.example.test", 1, edns=opt(owner=b"\x01a\x00")))  # OPT owner not root
    two = header(ar=2) + question("www.example.test") + opt() + opt()
    s.append(two)
    # Classes, opcodes, transfers.
    s.append(query("www.example.test", 1, qclass=3))
    s.append(query("www.example.test", 1, qclass=255))
    s.append(query("example.test", 252))
    s.append(query("example.test", 251))
    s.append(query("www.example.test", 1, flags=0x1000))  # opcode 2
    s.append(query("www.example.test", 1, flags=0x2800 | 0x0100))  # opcode 5 (UPDATE)
    s.append(query("www.example.test", 1, flags=0x8100))  # a response: dropped
    s.append(query("www.example.test", 1, flags=0x0170))  # Z, AD, CD
    # Malformed.
    www = query("www.example.test")
    s.append(www[:11])  # truncated header
    s.append(www[:12])
    s.append(www[:20])  # question cut
    s.append(header() + b"\x3fabc" + b"\x00\x01\x00\x01")  # label overrun
    s.append(header() + b"\x40" + b"a" * 64 + b"\x00\x00\x01\x00\x01")  # label > 63
    s.append(header() + (b"\x3f" + b"a" * 63) * 4 + b"\x00\x00\x01\x00\x01")  # name > 255
    s.append(header() + b"\xc0\x0c\x00\x01\x00\x01")  # pointer in the question
    s.append(header() + b"\x80abc\x00\x00\x01\x00\x01")  # reserved label type
    loop = header(ar=1) + question("www.example.test") + b"\xc0\x1e" + struct.pack(">HHIH", 1, 1, 0, 0)
    s.append(loop)  # compression loop in an additional owner
    fwd = header(ar=1) + question("www.example.test") + b"\xc0\xff" + struct.pack(">HHIH", 1, 1, 0, 0)
    s.append(fwd)  # forward pointer
    s.append(www + b"\x00\x00garbage")  # trailing garbage
    s.append(query("www.example.test", edns=opt()) + b"\x01")
    s.append(header(qd=0))
    s.append(header(qd=0, ar=1) + opt(options=option(8, ecs4("8.8.8.0", 24))))
    s.append(header(qd=2) + question("www.example.test") + question("mail.example.test"))
    s.append(header(qd=2, ar=1) + question("www.example.test") + question("mail.example.test") + opt())
    s.append(header(an=1) + question("www.example.test") + b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 300, 4) + b"\xc0\x00\x02\x01")
    s.append(header(ar=1) + question("www.example.test") + b"\x00" + struct.pack(">HHIH", 41, 1232, 0, 200))  # rdlen overrun
    s.append(header(ns=0xFFFF) + question("www.example.test"))
    return s


def ecs_seeds():
    return [ecs4("8.8.8.0", 24), ecs4("0.0.0.0", 0), ecs4("192.0.2.1", 32), ecs4("10.0.0.0", 9),
            ecs6("20010db8" + "0" * 24, 56), ecs6("20010db8" + "0" * 24, 128), ecs6("", 0),
            ecs_body(1, 24, 8, b"\x08\x08\x08"), ecs_body(1, 23, 0, b"\x08\x08\x09"),
            ecs_body(1, 33, 0, b"\x01\x02\x03\x04\x05"), ecs_body(1, 24, 0, b"\x08\x08\x08\x08"),
            ecs_body(3, 0, 0, b""), b"\x00\x01\x18", b"", ecs_body(2, 129, 0, b"\x00" * 17)]


def rewrite_paths(text):
    # Zone and geo paths become the files the config target provides.
    text = re.sub(r'(?m)^(\s*file\s*=\s*)"[^"]*"', r'\1"example.test.zone"', text)
    text = re.sub(r'(?m)^(\s*database\s*=\s*)"[^"]*"', r'\1"example.mmdb"', text)
    return text


def files_under(sub, ext):
    out = []
    for dirpath, _, files in os.walk(os.path.join(ROOT, sub)):
        for f in sorted(files):
            if f.endswith(ext):
                with open(os.path.join(dirpath, f), "rb") as fh:
                    out.append(fh.read())
    return out


def zone_seeds():
    s = [z for z in files_under("zones", ".zone") + files_under("tests/data", ".zone")
         if b"include" not in z.lower()]
    s += [b"$ORIGIN example.test.\n@ 3600 IN SOA ns1 host 1 2 3 4 5\n@ NS ns1\nns1 A 192.0.2.1\n",
          b"@ IN SOA ns1 host ( 1 2\n 3 4 5 )\n@ NS ns1\n* TXT \"wild\"\nsub NS ns.sub\nns.sub A 192.0.2.9\n",
          b"@ SOA ns1 host 1 2 3 4 5\n@ NS ns1\nx CNAME y\nx A 192.0.2.1\n",
          b"@ SOA ns1 host 1 2 3 4 5\n@ NS ns1\nx TYPE65280 \\# 4 0a000001\n",
          b"@ SOA ns1 host 1 2 3 4 5\n@ NS ns1\nx TXT \"unterminated\n",
          b"$TTL 1h\n@ SOA ns1 host 1 2 3 4 5\n@ NS ns1\nout.of.zone. A 192.0.2.1\n"]
    return s


def config_seeds():
    s = []
    for t in files_under("zones", ".toml") + files_under("tests/data", ".toml"):
        s.append(rewrite_paths(t.decode("utf-8", "replace")).encode())
    base = '[[zone]]\norigin = "example.test."\nfile = "example.test.zone"\n'
    s.append(('[server]\nuser = "nobody"\ntcp_read_timeout_ms = 500\ntcp_max_queries = 100\n'
              '[server.rrl]\nresponses_per_second = 20\nslip = 2\nipv4_prefix = 24\nipv6_prefix = 56\n' + base).encode())
    s.append(('[server]\nallow_root = true\n[server.rrl]\nresponses_per_second = 0\n' + base).encode())
    s.append(('[server.rrl]\nresponses_per_second = 5\nipv4_prefix = 33\n' + base).encode())
    s.append(('[server.rrl]\nresponses_per_second = 5\ntable_size = 3\nbogus = 1\n' + base).encode())
    s.append(('[server]\nuser = ""\n' + base).encode())
    return s


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for blob in seeds:
        h = hashlib.sha1(blob).hexdigest()[:16]
        with open(os.path.join(d, "seed-" + h), "wb") as f:
            f.write(blob)
    print(f"{target}: {len(seeds)} seeds")


if __name__ == "__main__":
    write("answer", answer_seeds())
    write("ecs", ecs_seeds())
    write("zone", zone_seeds())
    write("config", config_seeds())
