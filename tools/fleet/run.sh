#!/usr/bin/env bash
# A meridian fleet on one machine: a 3-member etcd cluster and three
# meridian nodes (a, b, c) on 127.0.0.1 with free ports, sharing overrides,
# runtime weights and pushed configs through etcd. See docs/src/fleet.md.
#
# Everything listens on loopback. Nothing is installed or left running:
# every process is stopped when the script exits (Ctrl-C).
#
#   tools/fleet/run.sh              start, print the ports and commands, wait
#   tools/fleet/run.sh --check      start, drain a member through node a,
#                                   check that b and c follow, exit 0 or 1
#   tools/fleet/run.sh -- CMD ...   start, run CMD with FLEET_* variables, stop
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
meridian="${MERIDIAN:-}"
if [ -z "$meridian" ]; then
  for b in "$repo/target/release/meridian" "$repo/target/debug/meridian"; do
    if [ -x "$b" ] && "$b" fleet --help >/dev/null 2>&1; then meridian="$b"; break; fi
  done
fi
if [ -z "$meridian" ] || ! "$meridian" fleet --help >/dev/null 2>&1; then
  echo "run.sh: no meridian built with fleet support; build one with" >&2
  echo "  cargo build --release --features fleet" >&2
  exit 2
fi
for t in etcd etcdctl dig curl; do
  command -v "$t" >/dev/null || { echo "run.sh: $t is missing (Debian: etcd-server etcd-client bind9-dnsutils curl)" >&2; exit 2; }
done

mode=wait cmd=()
case "${1:-}" in
  --check) mode=check ;;
  --) shift; mode=cmd; cmd=("$@") ;;
  "") ;;
  *) echo "usage: tools/fleet/run.sh [--check | -- COMMAND ...]" >&2; exit 2 ;;
esac

dir="$(mktemp -d "${TMPDIR:-/tmp}/meridian-fleet.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

# A free TCP port on 127.0.0.1 (bind to 0, read it back).
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# etcd: three members.
cluster="" eps=()
declare -a cps pps
for i in 0 1 2; do cps[$i]=$(port); pps[$i]=$(port); done
for i in 0 1 2; do cluster+="${cluster:+,}e$i=http://127.0.0.1:${pps[$i]}"; done
for i in 0 1 2; do
  etcd --name "e$i" --data-dir "$dir/etcd-$i" \
    --listen-client-urls "http://127.0.0.1:${cps[$i]}" --advertise-client-urls "http://127.0.0.1:${cps[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${pps[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${pps[$i]}" \
    --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token meridian-fleet \
    >"$dir/etcd-$i.log" 2>&1 &
  pids+=($!)
  eps+=("http://127.0.0.1:${cps[$i]}")
done
endpoints=$(IFS=,; echo "${eps[*]}")
healthy=no
for _ in $(seq 300); do
  if ETCDCTL_API=3 etcdctl --endpoints="$endpoints" endpoint health >/dev/null 2>&1; then
    healthy=yes
    break
  fi
  sleep 0.2
done
if [ "$healthy" = no ]; then
  echo "etcd did not become healthy in 60 s; its logs end with:" >&2
  for i in 0 1 2; do echo "--- e$i" >&2; tail -n 8 "$dir/etcd-$i.log" >&2; done
  exit 1
fi

# The shared zone and a write token.
cat >"$dir/fleet.test.zone" <<'ZONE'
$ORIGIN fleet.test.
$TTL 300
@ IN SOA ns1 hostmaster 1 7200 1800 1209600 300
@ IN NS ns1
ns1 IN A 192.0.2.53
ZONE
token="operator-$(date +%s%N)"
printf 'operator write %s\n' "$token" >"$dir/api.tokens"
chmod 600 "$dir/api.tokens"

etcd_list=$(printf '"%s", ' "${eps[@]}"); etcd_list="[${etcd_list%, }]"
declare -A dns http
for n in a b c; do
  dns[$n]=$(port); http[$n]=$(port)
  mkdir -p "$dir/$n"
  cp "$dir/fleet.test.zone" "$dir/$n/"
  cp "$dir/api.tokens" "$dir/$n/"
  cat >"$dir/$n/meridian.toml" <<CFG
[server]
listen = ["127.0.0.1:${dns[$n]}"]
http_listen = "127.0.0.1:${http[$n]}"
log = "info"
allow_root = true

[api]
tokens = "api.tokens"

[fleet]
etcd = $etcd_list
node = "$n"

[[zone]]
origin = "fleet.test."
file = "fleet.test.zone"

[pool.web]
members = ["192.0.2.81", "192.0.2.82"]

[name."web.fleet.test"]
pool = "web"
mode = "all"
ttl = 5
CFG
  "$meridian" serve --config "$dir/$n/meridian.toml" >"$dir/$n.log" 2>&1 &
  pids+=($!)
done
for n in a b c; do
  for _ in $(seq 100); do
    dig +short @127.0.0.1 -p "${dns[$n]}" web.fleet.test A >/dev/null 2>&1 && break
    sleep 0.1
  done
done

answers() { dig +short @127.0.0.1 -p "${dns[$1]}" web.fleet.test A | sort | tr '\n' ' '; }

cat >"$dir/fleet.env" <<ENV
FLEET_ETCD=$endpoints
FLEET_TOKEN=$token
FLEET_A_DNS=${dns[a]}
FLEET_B_DNS=${dns[b]}
FLEET_C_DNS=${dns[c]}
FLEET_A_HTTP=${http[a]}
FLEET_B_HTTP=${http[b]}
FLEET_C_HTTP=${http[c]}
FLEET_CONFIG=$dir/a/meridian.toml
ENV

case "$mode" in
  check)
    echo "nodes a b c answer: $(answers a)| $(answers b)| $(answers c)"
    curl -s -X POST -H "Authorization: Bearer $token" \
      "http://127.0.0.1:${http[a]}/override/192.0.2.81?state=drain" >/dev/null
    ok=0
    for _ in $(seq 50); do
      if [ "$(answers b)" = "192.0.2.82 " ] && [ "$(answers c)" = "192.0.2.82 " ]; then ok=1; break; fi
      sleep 0.02
    done
    echo "after draining 192.0.2.81 on node a: $(answers a)| $(answers b)| $(answers c)"
    "$meridian" fleet status --config "$dir/a/meridian.toml"
    if [ $ok = 1 ]; then echo "fleet check: ok (b and c followed within 1 s)"; exit 0; fi
    echo "fleet check: FAILED" >&2; exit 1
    ;;
  cmd)
    set -a; . "$dir/fleet.env"; set +a
    "${cmd[@]}"
    exit $?
    ;;
  wait)
    cat <<MSG
meridian fleet running (files and logs in $dir, removed on exit):
  etcd      $endpoints
  node a    dns 127.0.0.1:${dns[a]}  api http://127.0.0.1:${http[a]}
  node b    dns 127.0.0.1:${dns[b]}  api http://127.0.0.1:${http[b]}
  node c    dns 127.0.0.1:${dns[c]}  api http://127.0.0.1:${http[c]}
Try:
  dig @127.0.0.1 -p ${dns[b]} web.fleet.test A
  curl -X POST -H 'Authorization: Bearer $token' 'http://127.0.0.1:${http[a]}/override/192.0.2.81?state=drain'
  dig @127.0.0.1 -p ${dns[c]} web.fleet.test A        # c follows a
  $meridian fleet status --config $dir/a/meridian.toml
Ctrl-C stops everything.
MSG
    while true; do sleep 3600; done
    ;;
esac
