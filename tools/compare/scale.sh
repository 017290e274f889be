#!/usr/bin/env bash
# Scale step: how load time, memory and reload cost grow with the size of the
# data, for meridian, gdnsd and Knot (mod-geoip). gen_scale.py writes each case
# (zone / geo / pool sizes, see its header); this script starts each server on
# each case, one at a time, on 127.0.0.1, and measures:
#
#   load_ms    launch -> the server answers probe.scale.test A 192.0.2.1
#              (dig every ~10 ms; all three read the whole zone and their
#              plugin/module configs before they answer it)
#   rss_MiB    VmRSS 1 s after that
#   reload_ms  trigger -> the server answers the new SOA serial (the zone
#              file's serial is bumped and the configs touched before; in the
#              geo cases meridian's config also gets one rule changed in every
#              map, see below):
#                meridian  SIGHUP (its own "reloaded ... in N ms" is kept too)
#                gdnsd     zone cases: gdnsdctl reload-zones; geo and pool
#                          cases: gdnsdctl replace (reload-zones does not re-read
#                          plugin config; replace starts a new daemon that takes
#                          over the sockets)
#                knot      knotc -f zone-reload scale.test (forced: the zone
#                          and its modules, so mod-geoip re-reads geo.conf)
#   peak_MiB   highest memory across the reload: VmHWM after the reload (reset
#              with `echo 5 > /proc/PID/clear_refs` before it) and VmRSS sampled
#              every 20 ms, the larger. gdnsd replace: the old daemon's peak
#              plus the new daemon's VmHWM (both are alive during the takeover).
#   rss2_MiB   VmRSS 1 s after the reload
#
# Run:   GEOIP_MMDB=/tmp/geodb/GeoLite2-City.mmdb tools/compare/scale.sh
#        CASES="zone-10k geo-1000" SERVERS=meridian tools/compare/scale.sh
#        CASES=zone-1m tools/compare/scale.sh     (1M names: opt-in, slow)
#
# Settings (environment):
#   CASES="zone-10k zone-100k geo-1 geo-10 geo-100 geo-1000 geo-10maps pool-1k pool-10k pool-50k"
#                     (also: zone-1m, not in the default)
#   SERVERS="meridian gdnsd knot"
#   RUNS=1            start+reload cycles per case and server (tables show medians)
#   GEOIP_MMDB=       database for the geo cases (as compare.sh; default its CACHE copy)
#   SERVER_CPU=1      every server runs pinned here; the sampler and dig run on the others
#   PORT_BASE=5330    meridian +0, gdnsd +1, knot +2
#   WAIT_MAX=900      seconds to wait for a start or a reload before giving up on it
#   QUIET_PCT=25 QUIET_MAX=60   before each start, wait (up to QUIET_MAX s) until
#                     other processes use at most QUIET_PCT % of one CPU
#   SEED=7871         gen_scale.py seed
#   OUT=              output (cases, logs, scale.tsv, table.txt); default
#                     ${TMPDIR:-/tmp}/meridian-scale.<date>
#   MERIDIAN=target/release/meridian  REV= (commit shown; default: the tree now)
#   KEEP_CASES=1      keep the generated cases (default: deleted after measuring)
#   TABLE_ONLY="DIR/scale.tsv ..."   only print the tables of earlier runs
#
# Build first: cargo build --release -p meridian. Installs nothing, uses
# 127.0.0.1 only, runs one server at a time, and stops only the processes it
# started (by PID; for gdnsd replace, the new daemon it found by its config path).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CASES=${CASES:-zone-10k zone-100k geo-1 geo-10 geo-100 geo-1000 geo-10maps pool-1k pool-10k pool-50k}
SERVERS=${SERVERS:-meridian gdnsd knot}
RUNS=${RUNS:-1}
SERVER_CPU=${SERVER_CPU:-1}
PORT_BASE=${PORT_BASE:-5330}
WAIT_MAX=${WAIT_MAX:-900}
QUIET_PCT=${QUIET_PCT:-25}
QUIET_MAX=${QUIET_MAX:-60}
SEED=${SEED:-7871}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/meridian-compare}
GEOIP_MMDB=${GEOIP_MMDB:-$CACHE/GeoLite2-City.mmdb}
MERIDIAN=${MERIDIAN:-$ROOT/target/release/meridian}
OUT=${OUT:-${TMPDIR:-/tmp}/meridian-scale.$(date +%Y%m%d-%H%M%S)}

die() { echo "scale.sh: $*" >&2; exit 1; }
note() { echo "scale.sh: $*" >&2; }
# shellcheck source=tools/compare/lib.sh
. "$HERE/lib.sh"

# --- prerequisites ---------------------------------------------------------------
[ -x "$MERIDIAN" ] || die "$MERIDIAN not found; build with: cargo build --release -p meridian"
for t in taskset dig python3; do command -v $t >/dev/null || die "$t not found"; done
for s in $SERVERS; do
    case $s in
        meridian) ;;
        gdnsd) command -v gdnsdctl >/dev/null || die "gdnsd not found: apt-get install gdnsd" ;;
        knot) command -v knotc >/dev/null || die "knotd not found: apt-get install knot knot-module-geoip" ;;
        *) die "unknown server $s" ;;
    esac
done
if [ -z "${TABLE_ONLY:-}" ] && [[ " $CASES " == *" geo-"* ]]; then
    [ -s "$GEOIP_MMDB" ] || die "GEOIP_MMDB=$GEOIP_MMDB not found (compare.sh fetches it, or set GEOIP_MMDB)"
    GEOIP_MMDB=$(cd "$(dirname "$GEOIP_MMDB")" && pwd)/$(basename "$GEOIP_MMDB")
fi
port_of() { case $1 in meridian) echo "$PORT_BASE" ;; gdnsd) echo $((PORT_BASE + 1)) ;; knot) echo $((PORT_BASE + 2)) ;; esac; }
for s in meridian gdnsd knot; do
    p=$(port_of $s)
    if awk -v p=":$(printf %04X "$p")" 'FNR > 1 && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
        /proc/net/udp /proc/net/udp6 2>/dev/null; then
        die "UDP port $p is in use; pick another PORT_BASE"
    fi
done
mkdir -p "$OUT/bin"
OUT=$(cd "$OUT" && pwd)
note "output in $OUT"
REV=${REV:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD -- src crates Cargo.toml Cargo.lock 2>/dev/null || echo '+dirty')}
cp -p "$MERIDIAN" "$OUT/bin/meridian" && MERIDIAN=$OUT/bin/meridian
OTHER_CPUS=$(awk -v s="$SERVER_CPU" 'BEGIN { n = '"$(nproc)"'; for (i = 0; i < n; i++) if (i != s) o = o (o == "" ? "" : ",") i; print o }')

kib() { awk -v k="$1:" '$1 == k { print $2; exit }' "/proc/$2/status" 2>/dev/null || echo 0; }
ask() { dig +short +time=1 +tries=1 -p "$1" @127.0.0.1 "$2" "$3" 2>/dev/null | head -1; }
serial_of() { ask "$1" scale.test SOA | awk '{print $3}'; }

# sampler PID FILE: max VmRSS (KiB) every 20 ms into FILE until FILE.stop exists.
sampler() {
    local pid=$1 f=$2 max=0 k v _
    while [ ! -e "$f.stop" ]; do
        while read -r k v _; do
            [ "$k" = VmRSS: ] && { [ "$v" -gt "$max" ] && max=$v; break; }
        done <"/proc/$pid/status" 2>/dev/null || true
        sleep 0.02
    done
    echo "$max" >"$f"
}

# bump_serial FILE: serial in the SOA line (line 3 of every generated zone) +1.
bump_serial() { python3 - "$1" <<'EOF'
import re, sys
p = sys.argv[1]
with open(p) as f: lines = f.readlines()
lines[2] = re.sub(r"hostmaster (\d+)\S*", lambda m: "hostmaster %d" % (int(m.group(1)) + 1), lines[2])
with open(p + ".tmp", "w") as f: f.writelines(lines)
EOF
    mv "$1.tmp" "$1"; awk 'NR == 3 { print $5 }' "$1"; }

# --- one case, one server, one run -----------------------------------------------
# Prints: case server run load_ms rss_kib reload_ms peak_kib rss2_kib own_load own_reload how quiet
run_one() {
    local case=$1 s=$2 r=$3 cd=$OUT/cases/$1/$2 port pid t0 load rss how serial t1 rel peak hwm smp pid2 own_l own_r n0 quiet zf logf rss2 ctl
    port=$(port_of "$s")
    logf=$OUT/logs/$case.$s.$r.log
    mkdir -p "$OUT/logs"
    wait_quiet
    quiet=$QUIET_LAST
    case $s in
        meridian) zf=$cd/scale.test.zone ;;
        gdnsd) zf=$cd/etc/zones/scale.test; rm -rf "$cd/run" "$cd/state" ;;
        knot) zf=$cd/scale.test.zone; rm -rf "$cd/db" "$cd/knot.sock" "$cd/knot.pid"; mkdir -p "$cd/db" ;;
    esac
    t0=$(now_ms)
    case $s in
        meridian) taskset -c "$SERVER_CPU" "$MERIDIAN" serve --config "$cd/meridian.toml" --listen "127.0.0.1:$port" \
                      --http-listen none --allow-root --workers 1 2>"$logf" & ;;
        gdnsd) taskset -c "$SERVER_CPU" gdnsd -c "$cd/etc" start >"$logf" 2>&1 & ;;
        knot) taskset -c "$SERVER_CPU" knotd -c "$cd/knot.conf" >"$logf" 2>&1 & ;;
    esac
    pid=$!
    STARTED+=("$pid")
    load=
    while [ $(( $(now_ms) - t0 )) -lt $((WAIT_MAX * 1000)) ]; do
        kill -0 "$pid" 2>/dev/null || break
        if [ "$(taskset -c "$OTHER_CPUS" dig +short +time=1 +tries=1 -p "$port" @127.0.0.1 probe.scale.test A 2>/dev/null)" = 192.0.2.1 ]; then
            load=$(( $(now_ms) - t0 )); break
        fi
        sleep 0.01
    done
    if [ -z "$load" ]; then
        note "$case $s: no answer (exited or > ${WAIT_MAX} s); log: $(tail -3 "$logf" | tr '\n' ' ')"
        stop_pid "$pid"
        printf '%s\t%s\t%s\tFAIL\t\t\t\t\t\t\t\t%s\n' "$case" "$s" "$r" "$quiet"
        return
    fi
    # one answer from the case's own names (h1, g0 or p0), into the log
    echo "check: $(ask "$port" "$CHECK_NAME" A)" >>"$logf.ctl"
    [ -n "$(ask "$port" "$CHECK_NAME" A)" ] || note "$case $s: no A answer for $CHECK_NAME"
    sleep 1
    rss=$(kib VmRSS "$pid")
    own_l=$(sed 's/\x1b\[[0-9;]*m//g' "$logf" | sed -n 's/^meridian: ready.* in \([0-9]*\) ms.*/\1/p; s/^meridian: ready.*loaded in \([0-9]*\) ms.*/\1/p' | head -1)

    # reload: new serial, configs touched, HWM reset, sampler on the other CPUs
    serial=$(bump_serial "$zf")
    touch "$cd"/*.toml "$cd"/*.conf "$cd"/etc/config 2>/dev/null || true
    # geo cases: a rule change in every map, so that meridian (which keeps geo
    # tables whose rules and database did not change) rebuilds them all, as gdnsd
    # replace and Knot's module reload do anyway. AD's pool moves to the next one.
    if [ "$s" = meridian ] && [[ $case == geo-* ]]; then
        sed -i -e 's/AD = \["p0"\]/AD = ["P1"]/; s/AD = \["p1"\]/AD = ["P2"]/; s/AD = \["p2"\]/AD = ["P3"]/' \
            -e 's/AD = \["p3"\]/AD = ["P4"]/; s/AD = \["p4"\]/AD = ["P0"]/; s/AD = \["P\([0-9]\)"\]/AD = ["p\1"]/' "$cd/meridian.toml"
    fi
    echo 5 >"/proc/$pid/clear_refs" 2>/dev/null || true
    smp=$OUT/logs/$case.$s.$r.sample
    rm -f "$smp" "$smp.stop"
    sampler "$pid" "$smp" &
    local spid=$!
    taskset -p -c "$OTHER_CPUS" "$spid" >/dev/null
    n0=$(grep -c '^meridian: reloaded' "$logf" || true)
    pid2= ctl=
    t1=$(now_ms)
    case $s in
        meridian) kill -HUP "$pid"; how=SIGHUP ;;
        gdnsd)
            if [[ $case == zone-* ]]; then how=reload-zones; gdnsdctl -c "$cd/etc" reload-zones >>"$logf.ctl" 2>&1 & ctl=$!
            else how=replace; gdnsdctl -c "$cd/etc" -t "$(( WAIT_MAX < 300 ? WAIT_MAX : 300 ))" replace >>"$logf.ctl" 2>&1 & ctl=$!; fi ;;
        knot) how="zone-reload -f"; knotc -s "$cd/knot.sock" -f zone-reload scale.test >>"$logf.ctl" 2>&1 & ctl=$! ;;
    esac
    rel=
    while [ $(( $(now_ms) - t1 )) -lt $((WAIT_MAX * 1000)) ]; do
        if [ "$s" = meridian ]; then
            [ "$(grep -c '^meridian: reloaded' "$logf" || true)" -gt "$n0" ] && { rel=$(( $(now_ms) - t1 )); break; }
            grep -q 'reload failed' "$logf" && break
        elif [ "$(taskset -c "$OTHER_CPUS" dig +short +time=1 +tries=1 -p "$port" @127.0.0.1 scale.test SOA 2>/dev/null | awk '{print $3}')" = "$serial" ]; then
            rel=$(( $(now_ms) - t1 )); break
        fi
        sleep 0.01
    done
    # the new serial must be served (meridian too)
    [ -n "$rel" ] && [ "$(serial_of "$port")" != "$serial" ] && { note "$case $s: reload done but serial is not $serial"; rel=; }
    [ -n "$ctl" ] && { wait "$ctl" 2>/dev/null || note "$case $s: $how exited non-zero: $(tail -2 "$logf.ctl" | tr '\n' ' ')"; }
    touch "$smp.stop"; wait "$spid" 2>/dev/null || true
    peak=$(cat "$smp" 2>/dev/null || echo 0)
    hwm=$(kib VmHWM "$pid")
    [ "${hwm:-0}" -gt "$peak" ] && peak=$hwm
    own_r=$(sed 's/\x1b\[[0-9;]*m//g' "$logf" | sed -n 's/^meridian: reloaded ([A-Z]*) in //p' | tail -1)
    if [ "$how" = replace ]; then
        # the replacement daemon: same config path, not the old PID
        for _ in $(seq 100); do
            pid2=$(for p in /proc/[0-9]*; do
                [ "${p#/proc/}" = "$pid" ] && continue
                tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q "^gdnsd -c $cd/etc " && echo "${p#/proc/}"
            done | head -1)
            [ -n "$pid2" ] && break; sleep 0.1
        done
        if [ -n "$pid2" ]; then
            STARTED+=("$pid2")
            peak=$(( peak + $(kib VmHWM "$pid2") ))
            for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi
    fi
    sleep 1
    rss2=$(kib VmRSS "${pid2:-$pid}")
    stop_pid "$pid"
    [ -n "$pid2" ] && stop_pid "$pid2"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$case" "$s" "$r" "$load" "$rss" "${rel:-FAIL}" "$peak" "$rss2" \
        "$own_l" "$own_r" "$how" "$quiet"
}

# --- main ---------------------------------------------------------------------------
ROWS=$OUT/scale.tsv
if [ -n "${TABLE_ONLY:-}" ]; then
    # TABLE_ONLY="a/scale.tsv b/scale.tsv": only print the tables of earlier runs.
    awk 'NR == 1 || FNR > 1' $TABLE_ONLY >"$ROWS"
    CASES=
fi
[ -n "${TABLE_ONLY:-}" ] || printf 'case\tserver\trun\tload_ms\trss_kib\treload_ms\tpeak_kib\trss2_kib\tmeridian_load_ms\tmeridian_reload_ms\treload_by\tbusy_pct_before\n' >"$ROWS"
for case in $CASES; do
    t=$(now_ms)
    python3 "$HERE/gen_scale.py" --out "$OUT/cases" --mmdb "${GEOIP_MMDB:-none}" --cases "$case" --seed "$SEED" \
        --gdnsd-port "$(port_of gdnsd)" --knot-port "$(port_of knot)" >&2
    bytes=$(du -sb --apparent-size "$OUT/cases/$case/meridian" | cut -f1)
    note "$case: generated in $(( $(now_ms) - t )) ms ($((bytes / 1024)) KiB of meridian input)"
    case $case in zone-*) CHECK_NAME=h1.scale.test ;; geo-*) CHECK_NAME=g0.scale.test ;; *) CHECK_NAME=p0.scale.test ;; esac
    for r in $(seq "$RUNS"); do
        for s in $SERVERS; do
            row=$(run_one "$case" "$s" "$r")
            echo "$row" >>"$ROWS"
            echo "$row" | awk -F'\t' '{ printf "scale.sh: %s %s run %s: load %s ms, rss %.1f MiB, reload %s ms (%s), peak %.1f MiB\n", $1, $2, $3, $4, $5 / 1024, $6, $11, $7 / 1024 }' >&2
        done
    done
    [ -n "${KEEP_CASES:-}" ] || rm -rf "$OUT/cases/$case"
done

# --- tables: one per case group, medians over runs ---------------------------------
{
echo "# meridian $REV, $(gdnsd -V 2>&1 | sed -n 's/.*\(gdnsd version [0-9.]*\).*/\1/p' | head -1), $(knotd -V 2>&1 | sed -n 's/.*version /knot /p')"
echo "# $(uname -r), $(nproc) CPUs, server on CPU $SERVER_CPU, $(date -u +%Y-%m-%dT%H:%MZ), RUNS=$RUNS, db $(basename "${GEOIP_MMDB:-none}")"
awk -F'\t' '
function med(s,   a, n, i, j, t) {
    n = split(s, a, " "); if (n == 0) return ""
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
NR > 1 {
    k = $1 SUBSEP $2
    if (!(k in seen)) { seen[k] = 1; order[++n] = k; c[n] = $1; s[n] = $2 }
    if ($4 != "FAIL") { L[k] = L[k] " " $4; R[k] = R[k] " " $5; R2[k] = R2[k] " " $8 }
    if ($6 != "FAIL" && $6 != "") { RL[k] = RL[k] " " $6; P[k] = P[k] " " $7 }
    if ($9 != "") OL[k] = OL[k] " " $9
    if ($10 != "") OR[k] = $10
    how[k] = $11; runs[k]++; if ($12 ~ /!/) busy[k] = "*"
}
END {
    for (i = 1; i <= n; i++) {
        k = order[i]; g = c[i]; sub(/-.*/, "", g)
        if (g != last) {
            printf "\n## %s cases\n%-11s %-9s %9s %8s %10s %9s %9s  %s\n", g, "case", "server", "load_ms", "rss_MiB", "reload_ms", "peak_MiB", "rss2_MiB", "reload by"
            last = g
        }
        l = med(L[k]); rl = med(RL[k])
        printf "%-11s %-9s %9s %8s %10s %9s %9s  %s%s\n", c[i], s[i] busy[k], l == "" ? "FAIL" : l,
            R[k] == "" ? "-" : sprintf("%.1f", med(R[k]) / 1024), rl == "" ? "FAIL" : rl,
            P[k] == "" ? "-" : sprintf("%.1f", med(P[k]) / 1024), R2[k] == "" ? "-" : sprintf("%.1f", med(R2[k]) / 1024),
            how[k], OL[k] == "" ? "" : sprintf("; meridian: loaded in %s ms, reloaded in %s", med(OL[k]), OR[k])
    }
}' "$ROWS"
echo
echo "# * = the machine was still busy (other processes > QUIET_PCT % of a CPU) when that server started"
} | tee "$OUT/table.txt"
note "table in $OUT/table.txt, every run in $ROWS"
