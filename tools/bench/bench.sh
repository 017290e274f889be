#!/usr/bin/env bash
# meridian benchmark on loopback: one server worker pinned to one CPU, the load
# generator pinned to another, one table line per workload and run.
#
# Build first:  cargo build --release -p meridian -p meridian-bench
# Run:          tools/bench/bench.sh            (see tools/bench/README.md)
#
# Settings (environment):
#   DURATION=10  seconds per run        PORT=5390       UDP port on 127.0.0.1
#   RUNS=1       runs per workload      RATE=           fixed offered qps (default: max)
#   INFLIGHT=200 BATCH=32 SOCKETS=1     load generator window, batch, sockets
#   WORKLOADS="static pool geo-ecs"     also: geo-noecs
#   DNSPERF=auto                        also run dnsperf on static if installed (0 = never)
#   SERVER_CPU=1 CLIENT_CPU=0           CPUs to pin to
#   SUBNETS=10000 SEED=1                geo-ecs query file
#   QUIET_PCT=15                        wait (up to 30 s) until other load is below this
#                                       (% of one CPU) before each run
#   DIRTY_PCT=10 RETRIES=2              redo a run when other processes used more than
#                                       DIRTY_PCT % of a CPU during it (column oth%)
#   CONFIG=zones/meridian.toml  MERIDIAN=target/release/meridian
#   LOADGEN=target/release/meridian-loadgen   OUT=  directory to keep raw outputs
#
# It installs nothing, sends only to 127.0.0.1, and stops only the server it started.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DURATION=${DURATION:-10}
PORT=${PORT:-5390}
RUNS=${RUNS:-1}
RATE=${RATE:-}
INFLIGHT=${INFLIGHT:-200}
BATCH=${BATCH:-32}
SOCKETS=${SOCKETS:-1}
WORKLOADS=${WORKLOADS:-static pool geo-ecs}
DNSPERF=${DNSPERF:-auto}
SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
SUBNETS=${SUBNETS:-10000}
SEED=${SEED:-1}
QUIET_PCT=${QUIET_PCT:-15}
DIRTY_PCT=${DIRTY_PCT:-10}
RETRIES=${RETRIES:-2}
CONFIG=${CONFIG:-$ROOT/zones/meridian.toml}
MERIDIAN=${MERIDIAN:-$ROOT/target/release/meridian}
LOADGEN=${LOADGEN:-$ROOT/target/release/meridian-loadgen}
OUT=${OUT:-}

die() { echo "bench.sh: $*" >&2; exit 1; }

for b in "$MERIDIAN" "$LOADGEN"; do
    [ -x "$b" ] || die "$b not found; build with: cargo build --release -p meridian -p meridian-bench"
done
command -v taskset >/dev/null || die "taskset not found (package util-linux)"
if [ "$(nproc)" -lt 2 ]; then
    echo "bench.sh: warning: fewer than 2 CPUs, server and generator share CPU 0" >&2
    SERVER_CPU=0 CLIENT_CPU=0
fi
case "$DNSPERF" in
    auto) command -v dnsperf >/dev/null && DNSPERF=1 || DNSPERF=0 ;;
    1) command -v dnsperf >/dev/null || die "DNSPERF=1 but dnsperf is not installed" ;;
esac

# The server binds with SO_REUSEPORT, so on a taken port it would silently share
# the traffic with whatever is there. Refuse instead.
if awk -v p=":$(printf %04X "$PORT")" 'FNR > 1 && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
    /proc/net/udp /proc/net/udp6 2>/dev/null; then
    die "UDP port $PORT is in use; pick another with PORT=..."
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/meridian-bench.XXXXXX")
SPID=
cleanup() {
    if [ -n "$SPID" ] && kill -0 "$SPID" 2>/dev/null; then
        kill "$SPID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$SPID" 2>/dev/null || true
        wait "$SPID" 2>/dev/null || true
    fi
    if [ -n "$OUT" ]; then mkdir -p "$OUT" && cp -r "$TMP"/. "$OUT"/; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

CLK_TCK=$(getconf CLK_TCK)

# Server CPU time (user + system, all threads) in clock ticks. Fields after
# "pid (comm) " start at field 3, so utime (14) and stime (15) are the 12th and 13th.
server_ticks() {
    local line rest
    read -r line <"/proc/$SPID/stat"
    rest=${line##*) }
    # shellcheck disable=SC2086
    set -- $rest
    echo $(( ${12} + ${13} ))
}

# Busy ticks of the whole machine: user + nice + system + irq. Softirq is left
# out because our own loopback traffic is accounted there, steal because it is
# the hypervisor's.
machine_ticks() { awk '/^cpu /{print $2+$3+$4+$7; exit}' /proc/stat; }

# Busy time of the whole machine over 1 s, in % of one CPU.
busy_pct() {
    local a
    a=$(machine_ticks)
    sleep 1
    echo $(( ($(machine_ticks) - a) * 100 / CLK_TCK ))
}

wait_quiet() {
    local p i
    for i in $(seq 30); do
        p=$(busy_pct)
        [ "$p" -le "$QUIET_PCT" ] && return 0
    done
    echo "bench.sh: warning: other processes use ${p}% of a CPU; results may be low" >&2
}

# Value of a top-level key in the loadgen's one-line JSON.
jget() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" "$2"; }

# --- query files and server -------------------------------------------------
"$LOADGEN" gen --out "$TMP/q" --seed "$SEED" --subnets "$SUBNETS" 2>/dev/null

taskset -c "$SERVER_CPU" "$MERIDIAN" serve --config "$CONFIG" --listen "127.0.0.1:$PORT" \
    --workers 1 --http-listen none --allow-root 2>"$TMP/server.log" &
SPID=$!
for _ in $(seq 300); do
    grep -q ready "$TMP/server.log" && break
    kill -0 "$SPID" 2>/dev/null || { cat "$TMP/server.log" >&2; die "server exited"; }
    sleep 0.1
done
grep -q ready "$TMP/server.log" || { cat "$TMP/server.log" >&2; die "server not ready after 30 s"; }
# Threads started later inherit the mask; re-pin anyway in case one set its own.
taskset -a -p -c "$SERVER_CPU" "$SPID" >/dev/null

if command -v dig >/dev/null; then
    ans=$(dig +short +time=1 +tries=1 -p "$PORT" @127.0.0.1 www.example.test A || true)
    [ "$ans" = 192.0.2.1 ] || die "www.example.test A answered ${ans:-nothing}, want 192.0.2.1"
fi
# Warm-up (1 s), which also checks that answers come back.
taskset -c "$CLIENT_CPU" "$LOADGEN" --server "127.0.0.1:$PORT" --queries "$TMP/q/static.txt" \
    --duration 1 --json >"$TMP/warmup.json"
[ "$(jget received "$TMP/warmup.json")" -gt 0 ] || die "no answers in the warm-up run"

# --- runs ----------------------------------------------------------------------
ROWS="$TMP/rows.tsv"
: >"$ROWS"
rate_args=()
[ -n "$RATE" ] && rate_args=(--rate "$RATE")
dnsperf_args=()
[ -n "$RATE" ] && dnsperf_args=(-Q "$RATE")

TIMEFORMAT='%3R %3U %3S'

# measure OUT CMD...: runs CMD (stdout to OUT) and prints
# "server_cpu_s client_cpu_s other_pct": other = machine busy - server - generator,
# in % of one CPU over the run. High other% means the run was disturbed.
measure() {
    local out=$1 c0 c1 m0 m1 t
    shift
    c0=$(server_ticks)
    m0=$(machine_ticks)
    t=$( { time "$@" >"$out" 2>>"$TMP/client.err"; } 2>&1 ) ||
        { tail -5 "$TMP/client.err" >&2; die "load generator failed: $*"; }
    m1=$(machine_ticks)
    c1=$(server_ticks)
    # shellcheck disable=SC2086
    set -- $t
    awk -v c=$((c1 - c0)) -v m=$((m1 - m0)) -v hz="$CLK_TCK" -v real="$1" -v u="$2" -v s="$3" \
        'BEGIN { srv = c / hz; cli = u + s; oth = (m / hz - srv - cli) / real * 100
                 printf "%.3f %.3f %.0f\n", srv, cli, oth < 0 ? 0 : oth }'
}

# Prints "qps received run_s lat_avg_ms lat_p99_ms lost inflight" from a generator's output.
loadgen_stats() {
    local k
    for k in qps received run_s lat_avg_ms lat_p99_ms lost inflight_avg; do
        printf '%s ' "$(jget "$k" "$1")"
    done
    echo
}
dnsperf_stats() {
    awk '/Queries completed:/ { rcv = $3 }
         /Queries lost:/ { lost = $3 }
         /Run time \(s\):/ { rs = $4 }
         /Queries per second:/ { qps = $4 }
         /Average Latency \(s\):/ { avg = $4 * 1000 }
         END { printf "%s %s %s %.3f - %s %.0f\n", qps, rcv, rs, avg, lost, qps * avg / 1000 }' "$1"
}

# run_one WORKLOAD RUN: measures once, redoing up to RETRIES times while other
# processes used more than DIRTY_PCT % of a CPU; appends a table row.
run_one() {
    local w=$1 r=$2 out m stats try
    for try in $(seq 0 "$RETRIES"); do
        wait_quiet
        if [ "$w" = dnsperf-static ]; then
            out="$TMP/$w.$r.txt"
            m=$(measure "$out" taskset -c "$CLIENT_CPU" dnsperf -s 127.0.0.1 -p "$PORT" \
                -d "$TMP/q/static.txt" -l "$DURATION" -c 1 -q 100 "${dnsperf_args[@]}")
            stats=$(dnsperf_stats "$out")
        else
            out="$TMP/$w.$r.json"
            m=$(measure "$out" taskset -c "$CLIENT_CPU" "$LOADGEN" --server "127.0.0.1:$PORT" \
                --queries "$TMP/q/$w.txt" --duration "$DURATION" --inflight "$INFLIGHT" \
                --batch "$BATCH" --sockets "$SOCKETS" "${rate_args[@]}" --json)
            stats=$(loadgen_stats "$out")
        fi
        # shellcheck disable=SC2086
        set -- $m
        [ "$3" -le "$DIRTY_PCT" ] && break
        echo "bench.sh: $w run $r: other processes used $3% of a CPU" \
            "$([ "$try" -lt "$RETRIES" ] && echo "- redoing" || echo "- keeping it (marked !)")" >&2
    done
    # shellcheck disable=SC2086
    awk -v w="$w" -v r="$r" -v m="$m" -v st="$stats" -v dirty="$DIRTY_PCT" 'BEGIN {
        split(m, a, " "); split(st, b, " ")   # a: srv cli oth; b: qps rcv run_s avg p99 lost inflt
        srv = a[1]; cli = a[2]; oth = a[3]; rs = b[3]
        printf "%s\t%d\t%.0f\t%.2f\t%.0f\t%.0f\t%s\t%.0f\t%.3f\t%s\t%d\n", w, r, b[1],
            b[2] ? srv * 1e6 / b[2] : 0, 100 * srv / rs, 100 * cli / rs,
            oth (oth > dirty ? "!" : ""), b[7], b[4], b[5] == "-" ? "-" : sprintf("%.3f", b[5]), b[6] }' \
        >>"$ROWS"
}

for w in $WORKLOADS; do
    [ -f "$TMP/q/$w.txt" ] || die "unknown workload $w (static, pool, geo-ecs, geo-noecs)"
done
[ "$DNSPERF" = 1 ] && WORKLOADS="$WORKLOADS dnsperf-static"
for r in $(seq "$RUNS"); do
    for w in $WORKLOADS; do
        run_one "$w" "$r"
    done
done

# --- table ----------------------------------------------------------------------
echo
echo "# meridian $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), $(uname -r)," \
    "server CPU $SERVER_CPU, generator CPU $CLIENT_CPU, ${DURATION}s x $RUNS," \
    "inflight $INFLIGHT, batch $BATCH, rate ${RATE:-max}"
fmt="%-15s %3s %9s %9s %5s %5s %5s %7s %9s %9s %7s\n"
# shellcheck disable=SC2059
printf "$fmt" workload run qps 'us/q' 'srv%' 'cli%' 'oth%' inflt lat_avg lat_p99 lost
# shellcheck disable=SC2059
while IFS=$'\t' read -r w r qps us srv cli oth inf avg p99 lost; do
    printf "$fmt" "$w" "$r" "$qps" "$us" "$srv" "$cli" "$oth" "$inf" "$avg" "$p99" "$lost"
done <"$ROWS"
if [ "$RUNS" -gt 1 ]; then
    echo "median run by qps (of the undisturbed runs, if any):"
    for w in $WORKLOADS; do
        rows=$(awk -F'\t' -v w="$w" '$1 == w && $7 !~ /!/' "$ROWS")
        [ -n "$rows" ] || rows=$(awk -F'\t' -v w="$w" '$1 == w' "$ROWS")
        n=$(printf '%s\n' "$rows" | wc -l)
        # shellcheck disable=SC2059
        printf '%s\n' "$rows" | sort -t$'\t' -k3,3n | sed -n "$(( (n + 1) / 2 ))p" |
            while IFS=$'\t' read -r w r qps us srv cli oth inf avg p99 lost; do
                printf "$fmt" "$w" "$r" "$qps" "$us" "$srv" "$cli" "$oth" "$inf" "$avg" "$p99" "$lost"
            done
    done
fi
