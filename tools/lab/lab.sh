#!/usr/bin/env bash
# meridian's local resolver lab: meridian, Unbound and PowerDNS Recursor on
# 127.0.0.1 with ephemeral ports, the resolvers forwarding your zones to
# meridian with EDNS Client Subnet, so you can see what clients behind real
# caching resolvers get. See docs/src/tools/lab.md.
#
# Everything listens on and talks to loopback only: the resolvers forward
# the config's zones to meridian and refuse (Unbound) or may not send
# (Recursor, dont-query=0.0.0.0/0) anything else. Nothing is installed or
# left running: every process is stopped by its PID when the script exits.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: tools/lab/lab.sh --config FILE [options] [-- COMMAND ...]

Starts meridian on FILE, Unbound and PowerDNS Recursor on 127.0.0.1 with
free ports, prints the ports, and waits until Ctrl-C; then stops them all.

  --config FILE     meridian config to serve (required)
  --meridian BIN    meridian binary (default: target/debug/meridian or
                    target/release/meridian under the repository, else
                    `meridian` on PATH)
  --zone ORIGIN     zone to forward to meridian (repeatable; default: every
                    [[zone]] origin in FILE)
  --dir DIR         write configs, logs and lab.env to DIR (default: a new
                    temporary directory, removed at exit unless --keep)
  --keep            keep the directory
  --no-unbound      do not start Unbound
  --no-pdns         do not start PowerDNS Recursor
  --no-dnssec       do not validate: by default both resolvers validate
                    every signed zone (a [[zone]] with a `dnssec` table),
                    with the zone's own DS (`meridian dnssec ds`) as the
                    trust anchor
  --check NAME      instead of waiting: ask NAME for each --subnet through
                    meridian and each resolver, print a table, exit 1 if a
                    resolver's answer differs from meridian's
  --subnet CIDR     client subnet for --check (repeatable; default: one
                    subnet on each continent, IPv4 and IPv6). In a
                    signed zone the table has an `ad` column (the AD flag
                    of each answer, asked with DO=1) and the check also
                    exits 1 if a resolver's answer lacks AD
  --type T          A, AAAA or both (default both) for --check
  -- COMMAND ...    instead of waiting: run COMMAND with the LAB_* variables
                    of lab.env in its environment, then stop; exits with
                    COMMAND's status

lab.env (in the directory) holds LAB_MERIDIAN, LAB_MERIDIAN_PORT,
LAB_METRICS, LAB_UNBOUND, LAB_UNBOUND_PORT, LAB_PDNS, LAB_PDNS_PORT, LAB_PIDS,
and LAB_SIGNED (the validated zones, space-separated; empty if none).
EOF
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

config="" meridian="" dir="" keep=0 unbound=1 pdns=1 check="" qtypes="A AAAA" dnssec=1
zones=() subnets=() cmd=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config="$2"; shift 2 ;;
    --meridian) meridian="$2"; shift 2 ;;
    --zone) zones+=("$2"); shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --no-unbound) unbound=0; shift ;;
    --no-pdns) pdns=0; shift ;;
    --no-dnssec) dnssec=0; shift ;;
    --check) check="$2"; shift 2 ;;
    --subnet) subnets+=("$2"); shift 2 ;;
    --type)
      case "$2" in
        A|a) qtypes="A" ;; AAAA|aaaa) qtypes="AAAA" ;; both) qtypes="A AAAA" ;;
        *) echo "lab: --type is A, AAAA or both" >&2; exit 2 ;;
      esac
      shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; cmd=("$@"); break ;;
    *) echo "lab: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "lab: $*" >&2; exit 1; }
[ -n "$config" ] || { usage >&2; exit 2; }
[ -f "$config" ] || die "no such config: $config"
config="$(cd "$(dirname "$config")" && pwd)/$(basename "$config")"

if [ -z "$meridian" ]; then
  for m in "$repo/target/debug/meridian" "$repo/target/release/meridian"; do
    if [ -x "$m" ]; then meridian="$m"; break; fi
  done
  [ -n "$meridian" ] || meridian="$(command -v meridian || true)"
  [ -n "$meridian" ] || die "no meridian binary: run 'cargo build' or pass --meridian BIN"
fi
[ -x "$meridian" ] || die "not executable: $meridian"
command -v dig >/dev/null || die "dig is required (apt-get install bind9-dnsutils)"
if [ "$unbound" = 1 ]; then
  command -v unbound >/dev/null || die "unbound is required (apt-get install unbound), or pass --no-unbound"
  unbound -V 2>&1 | grep -q '^Linked modules:.*subnetcache' \
    || die "this unbound has no subnetcache module (unbound -V): no ECS support"
fi
if [ "$pdns" = 1 ]; then
  command -v pdns_recursor >/dev/null \
    || die "pdns_recursor is required (apt-get install pdns-recursor), or pass --no-pdns"
fi

# Zones: every `origin = "..."` of the config unless given.
if [ ${#zones[@]} -eq 0 ]; then
  while IFS= read -r z; do zones+=("$z"); done < <(
    sed -n 's/^[[:space:]]*origin[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$config")
fi
[ ${#zones[@]} -gt 0 ] || die "no [[zone]] origin in $config; pass --zone ORIGIN"
for i in "${!zones[@]}"; do zones[$i]="${zones[$i]%.}."; done

if [ -z "$dir" ]; then
  dir="$(mktemp -d "${TMPDIR:-/tmp}/meridian-lab.XXXXXX")"
else
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  keep=1
fi

pids=()
names=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP PIPE
  local i
  for i in "${!pids[@]}"; do
    kill -TERM "${pids[$i]}" 2>/dev/null || true
  done
  for i in "${!pids[@]}"; do
    for _ in $(seq 50); do
      kill -0 "${pids[$i]}" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "${pids[$i]}" 2>/dev/null; then
      kill -KILL "${pids[$i]}" 2>/dev/null || true
    fi
    wait "${pids[$i]}" 2>/dev/null || true
  done
  if [ "$keep" = 0 ]; then rm -rf "$dir"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
trap 'exit 141' PIPE  # output closed (| head): still clean up

# If this script is killed outright (SIGKILL), the kernel sends its children
# SIGTERM (setpriv --pdeathsig, util-linux), so nothing is left running.
pdeath=()
if setpriv --pdeathsig TERM true 2>/dev/null; then
  pdeath=(setpriv --pdeathsig TERM)
fi

# A port free for UDP and TCP on 127.0.0.1.
free_port() {
  if command -v python3 >/dev/null; then
    python3 - <<'EOF'
import socket
while True:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", 0))
    p = u.getsockname()[1]
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        t.bind(("127.0.0.1", p))
    except OSError:
        continue
    print(p)
    break
EOF
  else
    local p
    while :; do
      p=$((20000 + RANDOM % 40000))
      ss -Hlntu "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return; }
    done
  fi
}

# Wait until `dig` gets NOERROR for SOA of the first zone (RD as given);
# fail with the log if the process exits first.
wait_ready() { # name pid port rd log
  local name="$1" pid="$2" port="$3" rd="$4" log="$5" t0=$SECONDS
  while [ $((SECONDS - t0)) -lt 30 ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "lab: $name exited; its log ($log):" >&2
      tail -n 30 "$log" >&2 || true
      return 1
    fi
    if dig @127.0.0.1 -p "$port" "${zones[0]}" SOA "$rd" "$cd_flag" +time=1 +tries=1 2>/dev/null \
        | grep -q 'status: NOERROR'; then
      return 0
    fi
    sleep 0.1
  done
  echo "lab: $name did not answer on 127.0.0.1:$port within 30 s; log ($log):" >&2
  tail -n 30 "$log" >&2 || true
  return 1
}

# Replace @KEY@ placeholders: render TEMPLATE OUT KEY=VALUE...
render() {
  local tpl="$1" out="$2" text kv
  shift 2
  shopt -u patsub_replacement 2>/dev/null || true  # bash 5.2: no '&' in replacements
  text="$(cat "$tpl")"
  for kv in "$@"; do
    text="${text//@${kv%%=*}@/${kv#*=}}"
  done
  printf '%s\n' "$text" >"$out"
}

# Stop the process started last (a failed start) and forget it.
forget_last() {
  kill -TERM "${pids[-1]}" 2>/dev/null || true
  wait "${pids[-1]}" 2>/dev/null || true
  unset 'pids[-1]' 'names[-1]'
}

start() { # name log command...
  local name="$1" log="$2"
  shift 2
  ${pdeath[@]+"${pdeath[@]}"} "$@" </dev/null >"$log" 2>&1 &
  pids+=("$!")
  names+=("$name")
}

# --- meridian ---------------------------------------------------------------
"$meridian" check --config "$config" >"$dir/check.txt" 2>&1 \
  || { cat "$dir/check.txt" >&2; die "meridian check --config $config failed"; }

# Signed zones: those for which `meridian dnssec ds` prints DS records (the
# zone's KSKs, or its keys if none is a KSK). Each resolver validates them
# with that DS as its trust anchor, set at the zone itself, so no DS is
# ever asked of a parent. Unsigned zones stay unvalidated: Unbound has no
# anchor above them; the Recursor, which has the root's built in and could
# not prove them insecure without querying the root, gets an addNTA().
signed=() unsigned=() anchors=()  # anchors: "zone DS-rdata" lines
if [ "$dnssec" = 1 ]; then
  for z in "${zones[@]}"; do
    if out="$("$meridian" dnssec ds --config "$config" --zone "$z" 2>&1)"; then
      ds="$(sed -n 's/^[^[:space:]]*[[:space:]]\{1,\}IN[[:space:]]\{1,\}DS[[:space:]]\{1,\}//p' <<<"$out")"
      [ -n "$ds" ] || die "meridian dnssec ds --zone $z printed no DS: $out"
      signed+=("$z")
      while IFS= read -r d; do anchors+=("$z $d"); done <<<"$ds"
    elif grep -q -e 'has no dnssec keys' -e 'no \[\[zone\]\] has origin' <<<"$out"; then
      unsigned+=("$z")
    else
      echo "$out" >&2
      die "meridian dnssec ds --config $config --zone $z failed"
    fi
  done
else
  unsigned=("${zones[@]}")
fi
# A resolver is ready when it answers the first zone's SOA; with CD=1 while
# validating, so that a broken chain still lets the lab start (and show it).
cd_flag=+nocdflag
[ ${#signed[@]} -eq 0 ] || cd_flag=+cdflag

# As root (a container, CI), let meridian keep running as root if the config
# names no `user`: the lab's meridian listens on loopback only.
root_args=()
if [ "$(id -u)" = 0 ] && "$meridian" serve --help 2>/dev/null | grep -q -- --allow-root; then
  root_args=(--allow-root)
fi
for attempt in 1 2 3 4 5; do
  mport="$(free_port)"; hport="$(free_port)"
  start meridian "$dir/meridian.log" "$meridian" serve --config "$config" \
    --listen "127.0.0.1:$mport" --http-listen "127.0.0.1:$hport" ${root_args[@]+"${root_args[@]}"}
  if wait_ready meridian "${pids[-1]}" "$mport" +norec "$dir/meridian.log"; then break; fi
  forget_last
  [ "$attempt" -lt 5 ] || die "meridian did not start"
done

# --- Unbound ----------------------------------------------------------------
uport=""
if [ "$unbound" = 1 ]; then
  mkdir -p "$dir/unbound"
  local_zones="" forward_zones=""
  for z in "${zones[@]}"; do
    local_zones+="    local-zone: \"$z\" transparent"$'\n'
    forward_zones+="forward-zone:"$'\n'"    name: \"$z\""$'\n'"    forward-addr: 127.0.0.1@$mport"$'\n'
  done
  trust_anchors=""
  if [ ${#anchors[@]} -gt 0 ]; then
    for a in "${anchors[@]}"; do
      trust_anchors+="    trust-anchor: \"${a%% *} DS ${a#* }\""$'\n'
    done
    # Extended DNS Errors on SERVFAIL (why validation failed), and the
    # reason in the log.
    trust_anchors+="    ede: yes"$'\n'"    val-log-level: 2"
  fi
  for attempt in 1 2 3 4 5; do
    uport="$(free_port)"
    render "$here/unbound.conf.in" "$dir/unbound/unbound.conf" \
      "PORT=$uport" "DIR=$dir/unbound" "MERIDIAN_ADDR=127.0.0.1" \
      "UNBOUND_LOCAL_ZONES=$local_zones" "UNBOUND_FORWARD_ZONES=$forward_zones" \
      "UNBOUND_TRUST_ANCHORS=$trust_anchors"
    unbound-checkconf "$dir/unbound/unbound.conf" >/dev/null \
      || die "unbound-checkconf rejects $dir/unbound/unbound.conf"
    start unbound "$dir/unbound/unbound.log" unbound -d -c "$dir/unbound/unbound.conf"
    if wait_ready unbound "${pids[-1]}" "$uport" +rec "$dir/unbound/unbound.log"; then break; fi
    forget_last
    [ "$attempt" -lt 5 ] || die "unbound did not start"
  done
fi

# --- PowerDNS Recursor --------------------------------------------------------
pport=""
if [ "$pdns" = 1 ]; then
  mkdir -p "$dir/pdns"
  ver="$(pdns_recursor --version 2>&1 | sed -n 's/.*Recursor \([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2/p' | head -n1)"
  read -r vmaj vmin <<<"${ver:-0 0}"
  if [ "$vmaj" -gt 4 ] || { [ "$vmaj" -eq 4 ] && [ "$vmin" -ge 5 ]; }; then
    allow=edns-subnet-allow-list
  else
    allow=edns-subnet-whitelist
  fi
  fwd=""
  for z in "${zones[@]}"; do fwd+="${fwd:+, }${z%.}=127.0.0.1:$mport"; done
  pdns_dnssec="dnssec=off"
  if [ ${#anchors[@]} -gt 0 ]; then
    {
      echo "-- Trust anchors for the lab's signed zones (meridian dnssec ds)."
      for a in "${anchors[@]}"; do echo "addTA('${a%%. *}', '${a#* }')"; done
      for z in ${unsigned[@]+"${unsigned[@]}"}; do echo "addNTA('${z%.}', 'unsigned in the lab')"; done
    } >"$dir/pdns/recursor.lua"
    pdns_dnssec="dnssec=validate"$'\n'"lua-config-file=$dir/pdns/recursor.lua"$'\n'"extended-resolution-errors=yes"
  fi
  for attempt in 1 2 3 4 5; do
    pport="$(free_port)"
    render "$here/recursor.conf.in" "$dir/pdns/recursor.conf" \
      "PORT=$pport" "DIR=$dir/pdns" "MERIDIAN_ADDR=127.0.0.1" \
      "PDNS_FORWARD_ZONES=$fwd" "ECS_ALLOW_SETTING=$allow" "PDNS_DNSSEC=$pdns_dnssec"
    start pdns-recursor "$dir/pdns/recursor.log" pdns_recursor "--config-dir=$dir/pdns"
    if wait_ready pdns-recursor "${pids[-1]}" "$pport" +rec "$dir/pdns/recursor.log"; then break; fi
    forget_last
    [ "$attempt" -lt 5 ] || die "pdns_recursor did not start"
  done
fi

cat >"$dir/lab.env" <<EOF
LAB_DIR=$dir
LAB_MERIDIAN=127.0.0.1:$mport
LAB_MERIDIAN_PORT=$mport
LAB_METRICS=http://127.0.0.1:$hport/metrics
LAB_UNBOUND=${uport:+127.0.0.1:$uport}
LAB_UNBOUND_PORT=$uport
LAB_PDNS=${pport:+127.0.0.1:$pport}
LAB_PDNS_PORT=$pport
LAB_PIDS="${pids[*]}"
LAB_SIGNED="${signed[*]}"
EOF

{
  echo "meridian lab is up (configs and logs in $dir)"
  printf '  %-14s 127.0.0.1:%-6s pid %-8s metrics http://127.0.0.1:%s/metrics\n' meridian "$mport" "${pids[0]}" "$hport"
  i=1
  if [ -n "$uport" ]; then printf '  %-14s 127.0.0.1:%-6s pid %s\n' unbound "$uport" "${pids[$i]}"; i=$((i + 1)); fi
  if [ -n "$pport" ]; then printf '  %-14s 127.0.0.1:%-6s pid %s\n' pdns-recursor "$pport" "${pids[$i]}"; fi
  echo "  zones forwarded to meridian: ${zones[*]}"
  if [ ${#anchors[@]} -gt 0 ]; then
    echo "  validated (trust anchor: the zone's DS from meridian dnssec ds):"
    for a in "${anchors[@]}"; do echo "    ${a%% *} DS ${a#* }"; done
  elif [ "$dnssec" = 0 ]; then
    echo "  not validating (--no-dnssec)"
  fi
} >&2

# --- --check NAME ---------------------------------------------------------------
# The answer to NAME for one client subnet from one server, in $got as one
# line: sorted records (RRSIGs left out), then the ECS scope if the response
# has one; and in $ad whether the header has the AD flag (yes/no). With
# DO=1 (dig +dnssec) when the name is in a validated zone.
answer() { # port rd name type subnet
  local out scope st flags do_flag=+nodnssec
  [ "$check_signed" = 0 ] || do_flag=+dnssec
  out="$(dig @127.0.0.1 -p "$1" "$3" "$4" "$2" "$do_flag" "+subnet=$5" +time=3 +tries=2 2>&1)" || true
  flags="$(sed -n 's/^;; flags: \([^;]*\);.*/\1/p' <<<"$out" | head -n1)"
  ad=no
  case " $flags " in *" ad "*) ad=yes ;; esac
  if ! grep -q 'status: NOERROR' <<<"$out"; then
    st="$(sed -n 's/.*status: \([A-Z]*\),.*/\1/p' <<<"$out" | head -n1)"
    got="${st:-no answer}"
    return
  fi
  scope="$(sed -n 's/.*CLIENT-SUBNET: [^ ]*\/[0-9]*\/\([0-9]*\).*/\1/p' <<<"$out" | head -n1)"
  got="$(awk '/^;; ANSWER SECTION:/{a=1;next} /^$/{a=0} a && $4 != "RRSIG" {print $4" "$5}' <<<"$out" | sort | paste -sd, -)"
  got+="${scope:+ scope /$scope}"
}

# The subnet a resolver sends upstream: the client's truncated to /24 (/56).
upstream_subnet() {
  if command -v python3 >/dev/null; then
    python3 -c 'import ipaddress,sys; n=ipaddress.ip_network(sys.argv[1], strict=False); print(n.supernet(new_prefix=min(n.prefixlen, 24 if n.version == 4 else 56)))' "$1"
  else
    echo "$1"
  fi
}

if [ -n "$check" ]; then
  if [ ${#subnets[@]} -eq 0 ]; then
    subnets=(8.8.8.0/24 85.214.0.0/24 133.242.0.0/24 200.160.0.0/24 1.128.0.0/24 41.0.0.0/24
             2001:4860::/56 2a00:1450:4001::/56 2001:200::/56 2804:14c::/56)
  fi
  # Is NAME in a validated zone? (The longest forwarded zone it is in.)
  check_signed=0 best=""
  c="$(tr '[:upper:]' '[:lower:]' <<<"${check%.}.")"
  for z in "${zones[@]}"; do
    zl="$(tr '[:upper:]' '[:lower:]' <<<"$z")"
    if [ "$c" = "$zl" ] || [[ "$c" == *."$zl" ]]; then
      [ ${#zl} -le ${#best} ] || best="$zl"
    fi
  done
  for z in ${signed[@]+"${signed[@]}"}; do
    [ "$(tr '[:upper:]' '[:lower:]' <<<"$z")" != "$best" ] || check_signed=1
  done
  # One row: subnet type server [ad] answer; the ad column only when signed.
  row() { # subnet type server ad rest
    if [ "$check_signed" = 1 ]; then
      printf '%-22s %-5s %-10s %-3s %s\n' "$1" "$2" "$3" "$4" "$5"
    else
      printf '%-22s %-5s %-10s %s\n' "$1" "$2" "$3" "$5"
    fi
  }
  wrong=0 insecure=0
  row subnet type server ad answer
  for s in "${subnets[@]}"; do
    up="$(upstream_subnet "$s")"
    for t in $qtypes; do
      answer "$mport" +norec "$check" "$t" "$up"
      want="$got"
      note=""
      [ "$up" = "$s" ] || note="  (asked for $up, as the resolvers send it)"
      # meridian, authoritative, never sets AD: the column is for resolvers.
      row "$s" "$t" meridian - "$want$note"
      want="${want% scope /*}"
      for r in unbound pdns; do
        if [ "$r" = unbound ]; then port="$uport"; else port="$pport"; fi
        [ -n "$port" ] || continue
        answer "$port" +rec "$check" "$t" "$s"
        verdict=ok
        if [ "${got% scope /*}" != "$want" ]; then verdict=WRONG; wrong=$((wrong + 1)); fi
        if [ "$check_signed" = 1 ] && [ "$ad" != yes ]; then
          if [ "$verdict" = ok ]; then verdict="NOT VALIDATED"; else verdict+=", NOT VALIDATED"; fi
          insecure=$((insecure + 1))
        fi
        row "" "" "$r" "$ad" "$got  $verdict"
      done
    done
  done
  if [ "$wrong" -gt 0 ]; then
    echo "lab: $wrong answer(s) through the resolvers differ from meridian's" >&2
  fi
  if [ "$insecure" -gt 0 ]; then
    echo "lab: $insecure answer(s) through the resolvers lack AD: not validated (logs in $dir; --keep keeps them)" >&2
  fi
  [ "$wrong" -eq 0 ] && [ "$insecure" -eq 0 ] || exit 1
  echo "lab: every answer through the resolvers equals meridian's" >&2
  if [ "$check_signed" = 1 ]; then
    echo "lab: and every one was validated (AD)" >&2
  fi
  exit 0
fi

# --- -- COMMAND -------------------------------------------------------------------
if [ ${#cmd[@]} -gt 0 ]; then
  set +e
  (
    set -a
    # shellcheck disable=SC1091
    . "$dir/lab.env"
    set +a
    exec "${cmd[@]}"
  )
  rc=$?
  set -e
  exit "$rc"
fi

# --- wait -------------------------------------------------------------------------
# A name to suggest: the first [name."..."] of the config, else the zone's SOA.
q="$(sed -n 's/^[[:space:]]*\[name\."\([^"]*\)"\][[:space:]]*$/\1/p' "$config" | head -n1)"
if [ -n "$q" ]; then q="${q%.} A"; else q="${zones[0]%.} SOA"; fi
{
  echo "Try:"
  if [ -n "$uport" ]; then echo "  dig @127.0.0.1 -p $uport $q +subnet=8.8.8.0/24        # through Unbound"; fi
  if [ -n "$pport" ]; then echo "  dig @127.0.0.1 -p $pport $q +subnet=8.8.8.0/24        # through PowerDNS Recursor"; fi
  echo "  dig @127.0.0.1 -p $mport $q +norec +subnet=8.8.8.0/24 # meridian itself"
  if [ ${#signed[@]} -gt 0 ]; then echo "  (add +dnssec for the RRSIGs; the resolvers' answers in ${signed[*]} have the ad flag)"; fi
  echo "  curl -s http://127.0.0.1:$hport/metrics | grep queries_total"
  echo "Ctrl-C stops everything."
} >&2
set +e
wait -n "${pids[@]}"
for i in "${!pids[@]}"; do
  if ! kill -0 "${pids[$i]}" 2>/dev/null; then
    echo "lab: ${names[$i]} (pid ${pids[$i]}) exited; stopping the lab" >&2
  fi
done
exit 1
