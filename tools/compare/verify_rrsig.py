#!/usr/bin/env python3
"""Checks the ECDSAP256SHA256 RRSIGs over A RRsets in a dig/kdig answer.

    kdig +dnssec +noall +answer +subnet=81.2.69.0/24 ... geo.lb.test A | verify_rrsig.py --dnskey '257 3 13 BASE64'

delv validates an answer from the zone's trust anchor, but it cannot send an
ECS option, so it only ever sees the answer for its own address. The geo
answers for other clients are signed separately (Knot signs every geo variant
in advance, PowerDNS and meridian sign online), so this script checks those:
for each RRSIG (algorithm 13) covering an A RRset in the answer section, it
builds the signed data of RFC 4034 §3.1.8.1 (RRSIG RDATA without the
signature, then the RRset in canonical form and order) and has
`openssl dgst -sha256 -verify` check the signature with the DNSKEY given. It
also checks the key tag and the validity period.

Prints one line per RRSIG and exits 0 when at least one RRSIG was found and
every one verified, 1 otherwise. Standard library and the openssl command only.
"""

import argparse
import base64
import calendar
import ipaddress
import os
import struct
import subprocess
import sys
import tempfile
import time

TYPE_A = 1


def name_wire(name):
    name = name.rstrip(".").lower()
    out = b""
    if name:
        for label in name.split("."):
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def key_tag(rdata):
    acc = 0
    for i, b in enumerate(rdata):
        acc += b if i & 1 else b << 8
    acc += (acc >> 16) & 0xFFFF
    return acc & 0xFFFF


def sig_time(s):
    if s.isdigit() and len(s) == 14:
        return calendar.timegm(time.strptime(s, "%Y%m%d%H%M%S"))
    return int(s)


def der_int(b):
    b = b.lstrip(b"\0") or b"\0"
    if b[0] & 0x80:
        b = b"\0" + b
    return b"\x02" + bytes([len(b)]) + b


def parse(text):
    """(A rrsets by owner, RRSIGs) of answer lines: run dig/kdig with
    `+noall +answer` so that nothing else is in the text."""
    rrsets, sigs = {}, []
    for line in text.splitlines():
        f = line.split()
        if not f or f[0].startswith(";"):
            continue
        # owner [ttl] [class] type rdata...
        i = 1
        if i < len(f) and f[i].isdigit():
            i += 1
        if i < len(f) and f[i].upper() == "IN":
            i += 1
        if i >= len(f):
            continue
        rtype, rdata, owner = f[i].upper(), f[i + 1:], f[0].lower()
        if rtype == "A" and rdata:
            rrsets.setdefault(owner, set()).add(ipaddress.IPv4Address(rdata[0]).packed)
        elif rtype == "RRSIG" and len(rdata) >= 9:
            sigs.append((owner, rdata))
    return rrsets, sigs


def verify(owner, rdata, rrset, key, openssl="openssl"):
    covered, alg, labels, orig_ttl, exp, inc, tag, signer = rdata[:8]
    sig = base64.b64decode("".join(rdata[8:]))
    if covered.upper() != "A":
        return None
    flags, proto, kalg, kb64 = key
    pub = base64.b64decode(kb64)
    krdata = struct.pack("!HBB", flags, proto, kalg) + pub
    if int(alg) != 13 or kalg != 13:
        return "algorithm %s not checked here (only 13)" % alg
    if int(tag) != key_tag(krdata):
        return "key tag %s is not the DNSKEY's %d" % (tag, key_tag(krdata))
    now = time.time()
    if not sig_time(inc) <= now <= sig_time(exp):
        return "outside its validity %s..%s" % (inc, exp)
    if len(owner.rstrip(".").split(".")) != int(labels):
        return "labels %s: wildcard answers not checked here" % labels
    data = struct.pack("!HBBIIIH", TYPE_A, 13, int(labels), int(orig_ttl), sig_time(exp),
                       sig_time(inc), int(tag)) + name_wire(signer)
    owner_w = name_wire(owner)
    for rd in sorted(rrset):
        data += owner_w + struct.pack("!HHIH", TYPE_A, 1, int(orig_ttl), len(rd)) + rd
    spki = bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d03010703420004") + pub
    pem = "-----BEGIN PUBLIC KEY-----\n%s\n-----END PUBLIC KEY-----\n" % base64.b64encode(spki).decode()
    body = der_int(sig[:32]) + der_int(sig[32:])
    der = b"\x30" + bytes([len(body)]) + body
    with tempfile.TemporaryDirectory() as d:
        for n, v in (("k.pem", pem.encode()), ("s.der", der), ("d.bin", data)):
            with open(os.path.join(d, n), "wb") as f:
                f.write(v)
        r = subprocess.run([openssl, "dgst", "-sha256", "-verify", os.path.join(d, "k.pem"),
                            "-signature", os.path.join(d, "s.der"), os.path.join(d, "d.bin")],
                           capture_output=True, text=True)
    return None if r.returncode == 0 and "Verified OK" in r.stdout else \
        "signature does not verify (%s)" % (r.stdout + r.stderr).strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dnskey", required=True, help='"FLAGS PROTOCOL ALGORITHM BASE64" of the signing key')
    a = ap.parse_args()
    f = a.dnskey.replace('"', "").split()
    key = (int(f[0]), int(f[1]), int(f[2]), "".join(f[3:]))
    rrsets, sigs = parse(sys.stdin.read())
    n_ok = n_bad = 0
    for owner, rdata in sigs:
        if rdata[0].upper() != "A":
            continue
        rrset = rrsets.get(owner)
        if not rrset:
            print("RRSIG A at %s: no A RRset beside it" % owner)
            n_bad += 1
            continue
        err = verify(owner, rdata, rrset, key)
        addrs = " ".join(str(ipaddress.IPv4Address(x)) for x in sorted(rrset))
        if err:
            print("RRSIG A at %s (%s): %s" % (owner, addrs, err))
            n_bad += 1
        else:
            print("RRSIG A at %s (%s) tag %s: verified" % (owner, addrs, rdata[6]))
            n_ok += 1
    if n_ok + n_bad == 0:
        print("no RRSIG over an A RRset in the answer")
    sys.exit(0 if n_ok > 0 and n_bad == 0 else 1)


if __name__ == "__main__":
    main()
