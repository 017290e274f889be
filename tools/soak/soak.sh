#!/usr/bin/env bash
# Soak meridian under faults, on loopback only. See tools/soak/README.md.
#
#   tools/soak/soak.sh                 # 600 s (the issue's closing figure)
#   DURATION=120 tools/soak/soak.sh    # shorter
#
# Environment: DURATION (s, default 600), FLOOD (queries per memory flood,
# default 1000000), UDP_CLIENTS (2), TCP_CLIENTS (1), RELOAD_EVERY (3 s),
# GEO_EVERY (7 s), FLAP_EVERY (4 s), MERIDIAN (binary; default: build
# target/release/meridian), KEEP=1 keeps the work folder, REPORT=FILE
# writes the JSON report there too.
# Exit status 0 only if the pass bar is met: no wrong answer, no lost query,
# no crash, no memory growth, and a clean exit on SIGTERM.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DURATION="${DURATION:-600}"
FLOOD="${FLOOD:-1000000}"

if [ -z "${MERIDIAN:-}" ]; then
    (cd "$ROOT" && cargo build --release -q -p meridian -p mkgeo)
    MERIDIAN="$ROOT/target/release/meridian"
fi
MKGEO="${MKGEO:-$(dirname "$MERIDIAN")/mkgeo}"
[ -x "$MKGEO" ] || (cd "$ROOT" && cargo build --release -q -p mkgeo)
[ -x "$MKGEO" ] || MKGEO="$ROOT/target/release/mkgeo"

WD="$(mktemp -d /tmp/meridian-soak.XXXXXX)"
# Readable by the server after it switches to `user` (the example's nobody).
chmod 755 "$WD"
SPID=""
cleanup() {
    if [ -n "$SPID" ] && kill -0 "$SPID" 2>/dev/null; then kill -KILL "$SPID" 2>/dev/null || true; fi
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$WD"; else echo "soak: work folder kept: $WD" >&2; fi
}
trap cleanup EXIT

free_port() {
    python3 - "$@" <<'PY'
import socket, sys
addrs = sys.argv[1:] or ["127.0.0.1"]
while True:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind((addrs[0], 0))
    port = u.getsockname()[1]
    try:
        for a in addrs:
            t = socket.socket(); t.bind((a, port)); t.close()
        print(port); break
    except OSError:
        continue
PY
}
PORT="$(free_port)"
HTTP_PORT="$(free_port)"
BACKEND_PORT="$(free_port 127.0.0.41 127.0.0.42)"

# --- files: zone, two geo databases, good and bad configs --------------------
cp "$ROOT/zones/example.test.zone" "$WD/"
cp "$ROOT/geo/example.mmdb" "$WD/geo.mmdb"
cp "$ROOT/geo/example.mmdb" "$WD/example.mmdb.orig"
# A second database: the same data plus one more network and another epoch,
# so every answer the driver checks is the same with either.
sed -e 's/^# build_epoch: .*/# build_epoch: 1767225600/' "$ROOT/geo/example.csv" > "$WD/alt.csv"
echo "77.0.0.0/8,EU,RU,,55.7558,37.6173" >> "$WD/alt.csv"
"$MKGEO" "$WD/alt.csv" "$WD/alt.mmdb" 2>/dev/null
chmod 644 "$WD"/*

sed -e "s|^listen = .*|listen = [\"127.0.0.1:$PORT\"]|" \
    -e "s|^http_listen = .*|http_listen = \"127.0.0.1:$HTTP_PORT\"|" \
    -e "s|^database = .*|database = \"geo.mmdb\"|" \
    -e "s|^log = .*|log = \"${SOAK_LOG:-warn}\"|" \
    "$ROOT/zones/meridian.toml" > "$WD/good.toml"
cat >> "$WD/good.toml" <<EOT

# --- soak: a health-checked pool whose second backend flaps ----------------
[check.flap]
type = "tcp"
interval_ms = 300
timeout_ms = 200
rise = 2
fall = 2

[pool.flap]
check = "flap"
members = [{ address = "127.0.0.41", port = $BACKEND_PORT }, { address = "127.0.0.42", port = $BACKEND_PORT }]

[name."flap.example.test"]
pool = "flap"
ttl = 5
EOT
{ cat "$WD/good.toml"; printf '\n[server\n'; } > "$WD/bad-syntax.toml"
{ cat "$WD/good.toml"; printf '\n[name."bad.example.test"]\npool = "no-such-pool"\n'; } > "$WD/bad-pool.toml"
cp "$WD/good.toml" "$WD/meridian.toml"
chmod 644 "$WD"/*.toml
"$MERIDIAN" check --config "$WD/meridian.toml" >/dev/null

# --- server -----------------------------------------------------------------
"$MERIDIAN" serve --config "$WD/meridian.toml" 2> "$WD/server.log" &
SPID=$!
for _ in $(seq 200); do
    grep -q "meridian: ready" "$WD/server.log" && break
    kill -0 "$SPID" 2>/dev/null || { cat "$WD/server.log" >&2; exit 1; }
    sleep 0.05
done
grep -q "meridian: ready" "$WD/server.log" || { echo "soak: server not ready" >&2; exit 1; }
echo "soak: meridian pid $SPID on 127.0.0.1:$PORT (uid $(awk '/^Uid:/{print $2}' /proc/$SPID/status)), ${DURATION}s" >&2

set +e
python3 "$ROOT/tools/soak/soak.py" --server "127.0.0.1:$PORT" --pid "$SPID" \
    --http "127.0.0.1:$HTTP_PORT" --workdir "$WD" --duration "$DURATION" \
    --backend-port "$BACKEND_PORT" --flood "$FLOOD" \
    --udp-clients "${UDP_CLIENTS:-2}" --tcp-clients "${TCP_CLIENTS:-1}" \
    --reload-every "${RELOAD_EVERY:-3}" --geo-every "${GEO_EVERY:-7}" \
    --flap-every "${FLAP_EVERY:-4}" ${REPORT:+--json "$REPORT"}
RC=$?
set -e

# --- clean stop ---------------------------------------------------------------
kill -TERM "$SPID"
STOP_RC=0
wait "$SPID" || STOP_RC=$?
SPID=""
if [ "$STOP_RC" != 0 ] || ! grep -q "meridian: stopped" "$WD/server.log"; then
    echo "soak: FAIL: server exit status $STOP_RC after SIGTERM" >&2
    RC=1
fi
echo "soak: server log: $(grep -c 'reloaded' "$WD/server.log") reloads, $(grep -c 'reload failed' "$WD/server.log") rejected configs, $(grep -ci 'panic' "$WD/server.log") panics" >&2
if [ "$RC" = 0 ]; then echo "soak: PASS" >&2; else echo "soak: FAIL" >&2; fi
exit "$RC"
