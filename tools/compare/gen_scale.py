#!/usr/bin/env python3
"""Writes the inputs of the `scale` step (tools/compare/scale.sh).

For each case, the zone and config files for meridian, gdnsd and Knot, ready
to run, under OUT/CASE/{meridian,gdnsd,knot}/. Standard library only; seeded
(--seed, default 7871), so the same arguments give the same bytes.

Cases (--cases, default all):
  zone-10k zone-100k zone-1m   one zone scale.test. with N names: 85 % A+AAAA,
                               8 % A+TXT, 5 % A+MX, the rest (at least 10
                               each) wildcards (*.wI A) and delegations (dI NS
                               ns1.dI / ns2.dI + glue A)
  geo-1 geo-10 geo-100 geo-1000
                               N geo names on ONE map: every name has the same
                               200 country rules over 5 pools
  geo-10maps                   10 geo names, each with its own map (same 200
                               countries, different pool per country)
  pool-1k pool-10k pool-50k    N names answered from pools of 4 addresses

Every case's zone also holds `probe.scale.test. A 192.0.2.1`: the servers load
the zone (and their plugin or module configs) before they answer it.

What each server gets:
  meridian  [[zone]] + [name.*.geo] (country = {...}, default) + [pool.*]
  gdnsd     geo: plugin geoip, maps => {m0 [, m1 ...]} (continent => country
            hierarchy: gdnsd maps are nested by continent), one resource per
            name (map + dcmap), zone `gI 60 DYNA geoip!gI`;
            pools: plugin multifo, one resource per name, `pI DYNA multifo!pI`
  Knot      geo: mod-geoip in geodb mode (key country/iso_code), one geo.conf
            with the name's 200 rules + "*" for every name (Knot has no
            shared map), and a fallback A in the zone;
            pools: plain A RRsets (4 per name) in the zone
"""
import argparse
import os
import random

ALL_CASES = ["zone-10k", "zone-100k", "zone-1m", "geo-1", "geo-10", "geo-100", "geo-1000",
             "geo-10maps", "pool-1k", "pool-10k", "pool-50k"]
SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000, "1k": 1_000, "50k": 50_000}

# ISO 3166 country -> continent (MaxMind continent codes). 200 of them get rules.
COUNTRIES = """
AD:EU AE:AS AF:AS AG:NA AL:EU AM:AS AO:AF AR:SA AT:EU AU:OC AZ:AS BA:EU BB:NA BD:AS BE:EU
BF:AF BG:EU BH:AS BI:AF BJ:AF BN:AS BO:SA BR:SA BS:NA BT:AS BW:AF BY:EU BZ:NA CA:NA CD:AF
CF:AF CG:AF CH:EU CI:AF CL:SA CM:AF CN:AS CO:SA CR:NA CU:NA CV:AF CY:EU CZ:EU DE:EU DJ:AF
DK:EU DM:NA DO:NA DZ:AF EC:SA EE:EU EG:AF ER:AF ES:EU ET:AF FI:EU FJ:OC FM:OC FR:EU GA:AF
GB:EU GD:NA GE:AS GH:AF GM:AF GN:AF GQ:AF GR:EU GT:NA GW:AF GY:SA HN:NA HR:EU HT:NA HU:EU
ID:AS IE:EU IL:AS IN:AS IQ:AS IR:AS IS:EU IT:EU JM:NA JO:AS JP:AS KE:AF KG:AS KH:AS KI:OC
KM:AF KN:NA KP:AS KR:AS KW:AS KZ:AS LA:AS LB:AS LC:NA LI:EU LK:AS LR:AF LS:AF LT:EU LU:EU
LV:EU LY:AF MA:AF MC:EU MD:EU ME:EU MG:AF MH:OC MK:EU ML:AF MM:AS MN:AS MR:AF MT:EU MU:AF
MV:AS MW:AF MX:NA MY:AS MZ:AF NA:AF NE:AF NG:AF NI:NA NL:EU NO:EU NP:AS NR:OC NZ:OC OM:AS
PA:NA PE:SA PG:OC PH:AS PK:AS PL:EU PT:EU PW:OC PY:SA QA:AS RO:EU RS:EU RU:EU RW:AF SA:AS
SB:OC SC:AF SD:AF SE:EU SG:AS SI:EU SK:EU SL:AF SM:EU SN:AF SO:AF SR:SA SS:AF ST:AF SV:NA
SY:AS SZ:AF TD:AF TG:AF TH:AS TJ:AS TL:AS TM:AS TN:AF TO:OC TR:AS TT:NA TV:OC TW:AS TZ:AF
UA:EU UG:AF US:NA UY:SA UZ:AS VA:EU VC:NA VE:SA VN:AS VU:OC WS:OC YE:AS ZA:AF ZM:AF ZW:AF
HK:AS MO:AS PR:NA GL:NA PS:AS RE:AF
""".split()
RULE_COUNTRIES = [c.split(":") for c in COUNTRIES][:200]
POOLS = ["p0", "p1", "p2", "p3", "p4"]
POOL_ADDRS = {p: ["198.18.%d.1" % i, "198.18.%d.2" % i] for i, p in enumerate(POOLS)}

HEAD = """$ORIGIN scale.test.
$TTL 300
@       SOA ns1 hostmaster 1 7200 1800 259200 900
@       NS  ns1
@       NS  ns2
ns1     A   192.0.2.53
ns2     A   192.0.2.54
probe   A   192.0.2.1
"""


def ip4(i):
    return "10.%d.%d.%d" % ((i >> 16) & 255, (i >> 8) & 255, i & 255)


def zone_body(n, rng, f):
    """n names: mostly A+AAAA, some TXT and MX, a few wildcards and delegations."""
    few = max(10, n // 1000)
    rest = n - 2 * few
    f.write("mail    A   192.0.2.25\n")
    for i in range(rest):
        r = rng.random()
        a = ip4(i)
        if r < 0.85 / 0.98:
            f.write("h%d A %s\nh%d AAAA 2001:db8:%x::%x\n" % (i, a, i, i >> 16, i & 0xffff))
        elif r < 0.93 / 0.98:
            f.write('h%d A %s\nh%d TXT "v=scale%d k=%08x"\n' % (i, a, i, i, rng.getrandbits(32)))
        else:
            f.write("h%d A %s\nh%d MX 10 mail\n" % (i, a, i))
    for i in range(few):
        f.write("*.w%d A 192.0.2.%d\n" % (i, 1 + i % 250))
        f.write("d%d NS ns1.d%d\nd%d NS ns2.d%d\nns1.d%d A 192.0.2.%d\nns2.d%d A 192.0.2.%d\n"
                % (i, i, i, i, i, 1 + i % 250, i, 1 + (i + 1) % 250))


def geo_maps(count, seed):
    """count maps; map k assigns each of the 200 countries one of the 5 pools."""
    maps = []
    for k in range(count):
        rng = random.Random(seed * 1000 + k)
        maps.append([(cc, cont, rng.choice(POOLS)) for cc, cont in RULE_COUNTRIES])
    return maps


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def meridian_conf(d, geo, extra):
    s = ("# generated by gen_scale.py\n[server]\nedns_udp_payload = 1232\nlog = \"info\"\n\n"
         "[[zone]]\norigin = \"scale.test.\"\nfile = \"scale.test.zone\"\n")
    if geo:
        s += "\n[geo]\ndatabase = \"%s\"\n" % geo
    write(os.path.join(d, "meridian", "meridian.toml"), s + extra)


def gdnsd_conf(d, port, plugins):
    rd = os.path.join(d, "gdnsd")
    write(os.path.join(rd, "etc", "config"),
          "# generated by gen_scale.py\noptions => {\n  listen => [ 127.0.0.1:%d ]\n"
          "  udp_threads => 1\n  tcp_threads => 1\n  run_dir => %s/run\n  state_dir => %s/state\n"
          "  zones_default_ttl => 300\n}\n%s" % (port, rd, rd, plugins))


def knot_conf(d, port, geo_mmdb):
    rd = os.path.join(d, "knot")
    mod = ""
    zmod = ""
    if geo_mmdb:
        mod = ("mod-geoip:\n  - id: geo\n    config-file: \"%s/geo.conf\"\n    ttl: 60\n"
               "    mode: geodb\n    geodb-file: \"%s\"\n    geodb-key: [ country/iso_code ]\n\n"
               % (rd, geo_mmdb))
        zmod = "    module: mod-geoip/geo\n"
    write(os.path.join(rd, "knot.conf"),
          "# generated by gen_scale.py\nserver:\n    rundir: \"%s\"\n    pidfile: \"%s/knot.pid\"\n"
          "    listen: 127.0.0.1@%d\n    udp-workers: 1\n    tcp-workers: 1\n    background-workers: 1\n\n"
          "control:\n    listen: \"%s/knot.sock\"\n\ndatabase:\n    storage: \"%s/db\"\n\n"
          "log:\n  - target: stderr\n    any: notice\n\n%s"
          "template:\n  - id: default\n    storage: \"%s\"\n    zonefile-sync: -1\n"
          "    zonefile-load: whole\n    journal-content: none\n\n"
          "zone:\n  - domain: scale.test\n    file: \"scale.test.zone\"\n%s"
          % (rd, rd, port, rd, rd, mod, rd, zmod))
    os.makedirs(os.path.join(rd, "db"), exist_ok=True)


def case_zone(d, n, seed, ports):
    main = os.path.join(d, "meridian", "scale.test.zone")
    os.makedirs(os.path.dirname(main), exist_ok=True)
    with open(main, "w") as f:
        f.write(HEAD)
        zone_body(n, random.Random(seed), f)
    for srv, sub in (("gdnsd", "etc/zones/scale.test"), ("knot", "scale.test.zone")):
        p = os.path.join(d, srv, sub)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if os.path.exists(p):
            os.unlink(p)
        os.link(main, p)  # same bytes for all three
    meridian_conf(d, None, "")
    gdnsd_conf(d, ports["gdnsd"], "")
    knot_conf(d, ports["knot"], None)


def case_geo(d, names, nmaps, seed, mmdb, ports):
    maps = geo_maps(nmaps, seed)
    pools = "".join("\n[pool.%s]\nmembers = [%s]\n" % (p, ", ".join('"%s"' % a for a in POOL_ADDRS[p]))
                    for p in POOLS)
    # meridian: one [name] per geo name; names on the same map have identical rules.
    m = [pools]
    for i in range(names):
        rules = ", ".join('%s = ["%s"]' % (cc, p) for cc, _, p in maps[i % nmaps])
        m.append('\n[name."g%d.scale.test"]\nmode = "all"\nttl = 60\n\n[name."g%d.scale.test".geo]\n'
                 'country = { %s }\ndefault = ["p0"]\n' % (i, i, rules))
    meridian_conf(d, mmdb, "".join(m))
    zone = HEAD
    write(os.path.join(d, "meridian", "scale.test.zone"), zone)
    # gdnsd: maps (continent => country => [dc]) and one resource per name.
    g = ["plugins => {\n  geoip => {\n    maps => {\n"]
    for k, mp in enumerate(maps):
        by_cont = {}
        for cc, cont, p in mp:
            by_cont.setdefault(cont, []).append("%s => [ %s ]" % (cc, p))
        g.append("      m%d => {\n        geoip2_db => %s\n        datacenters => [ %s ]\n"
                 "        map => {\n          default => [ p0 ]\n" % (k, mmdb, ", ".join(POOLS)))
        for cont in sorted(by_cont):
            g.append("          %s => { %s }\n" % (cont, ", ".join(by_cont[cont])))
        g.append("        }\n      }\n")
    g.append("    }\n    resources => {\n")
    dcmap = ", ".join("%s => [ %s ]" % (p, ", ".join(POOL_ADDRS[p])) for p in POOLS)
    for i in range(names):
        g.append("      g%d => { map => m%d, service_types => up, dcmap => { %s } }\n" % (i, i % nmaps, dcmap))
    g.append("    }\n  }\n}\n")
    gdnsd_conf(d, ports["gdnsd"], "".join(g))
    write(os.path.join(d, "gdnsd", "etc", "zones", "scale.test"),
          zone + "".join("g%d 60 DYNA geoip!g%d\n" % (i, i) for i in range(names)))
    # Knot: per name, its rules and "*"; the zone's A is the fallback for unknown addresses.
    k = ["# generated by gen_scale.py\n"]
    for i in range(names):
        k.append("g%d.scale.test:\n" % i)
        for cc, _, p in maps[i % nmaps]:
            k.append('  - geo: "%s"\n    A: [ %s ]\n' % (cc, ", ".join(POOL_ADDRS[p])))
        k.append('  - geo: "*"\n    A: [ %s ]\n' % ", ".join(POOL_ADDRS["p0"]))
    write(os.path.join(d, "knot", "geo.conf"), "".join(k))
    write(os.path.join(d, "knot", "scale.test.zone"),
          zone + "".join("g%d 60 A %s\n" % (i, POOL_ADDRS["p0"][0]) for i in range(names)))
    knot_conf(d, ports["knot"], mmdb)


def case_pool(d, n, ports):
    def addrs(i):
        return ["10.%d.%d.%d" % ((i >> 8) & 255, i & 255, j) for j in (1, 2, 3, 4)]
    m = []
    for i in range(n):
        m.append('\n[pool.p%d]\nmembers = [%s]\n[name."p%d.scale.test"]\npool = "p%d"\nmode = "all"\nttl = 60\n'
                 % (i, ", ".join('"%s"' % a for a in addrs(i)), i, i))
    meridian_conf(d, None, "".join(m))
    write(os.path.join(d, "meridian", "scale.test.zone"), HEAD)
    g = ["plugins => {\n  multifo => {\n    service_types => up\n"]
    for i in range(n):
        g.append("    p%d => { %s }\n" % (i, ", ".join("a%d => %s" % (j, a) for j, a in enumerate(addrs(i)))))
    g.append("  }\n}\n")
    gdnsd_conf(d, ports["gdnsd"], "".join(g))
    write(os.path.join(d, "gdnsd", "etc", "zones", "scale.test"),
          HEAD + "".join("p%d 60 DYNA multifo!p%d\n" % (i, i) for i in range(n)))
    write(os.path.join(d, "knot", "scale.test.zone"),
          HEAD + "".join("".join("p%d 60 A %s\n" % (i, a) for a in addrs(i)) for i in range(n)))
    knot_conf(d, ports["knot"], None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mmdb", required=True, help="absolute path of the GeoIP2 City/Country database")
    ap.add_argument("--cases", default=" ".join(ALL_CASES))
    ap.add_argument("--seed", type=int, default=7871)
    ap.add_argument("--gdnsd-port", type=int, default=5331)
    ap.add_argument("--knot-port", type=int, default=5332)
    a = ap.parse_args()
    ports = {"gdnsd": a.gdnsd_port, "knot": a.knot_port}
    for case in a.cases.split():
        if case not in ALL_CASES:
            ap.error("unknown case %s (known: %s)" % (case, " ".join(ALL_CASES)))
        d = os.path.join(os.path.abspath(a.out), case)
        kind, size = case.split("-", 1)
        if kind == "zone":
            case_zone(d, SIZES[size], a.seed, ports)
        elif size == "10maps":
            case_geo(d, 10, 10, a.seed, a.mmdb, ports)
        elif kind == "geo":
            case_geo(d, int(size), 1, a.seed, a.mmdb, ports)
        else:
            case_pool(d, SIZES[size], ports)
        print("gen_scale.py: %s -> %s" % (case, d))


if __name__ == "__main__":
    main()
