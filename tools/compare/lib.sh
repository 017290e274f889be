# Shared by compare.sh and scale.sh (sourced, after each defines `note`):
# process bookkeeping that stops only what the script started, clocks, and
# the wait for a quiet machine before a measured run.

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# Every PID the script starts goes into STARTED; they are stopped on exit.
STARTED=()
cleanup() {
    local p
    for p in "${STARTED[@]}"; do
        kill -0 "$p" 2>/dev/null || continue
        kill "$p" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Stop one process: TERM, up to 20 s, then KILL.
stop_pid() {
    kill "$1" 2>/dev/null || true
    for _ in $(seq 200); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

CLK_TCK=$(getconf CLK_TCK)
# Busy ticks of the machine: user + nice + system + irq (softirq left out: our own
# loopback traffic is accounted there; steal is the hypervisor's).
machine_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7; exit}' /proc/stat; }
# Time the hypervisor gave to other guests (a VM's noisy neighbours).
steal_ticks() { awk '/^cpu / {print $9; exit}' /proc/stat; }
# Busy time of the machine plus hypervisor steal over 1 s, in % of one CPU.
busy_pct() {
    local a s; a=$(machine_ticks); s=$(steal_ticks); sleep 1
    echo $(( ($(machine_ticks) - a + $(steal_ticks) - s) * 100 / CLK_TCK ))
}
# Wait (up to QUIET_MAX s) until others use at most QUIET_PCT % of a CPU.
# QUIET_LAST is the last reading, with "!" when the wait gave up.
wait_quiet() {
    local i
    QUIET_LAST=0
    for i in $(seq "$QUIET_MAX"); do
        QUIET_LAST=$(busy_pct)
        [ "$QUIET_LAST" -le "$QUIET_PCT" ] && return 0
        [ $((i % 30)) -eq 0 ] && note "waiting for a quiet machine (others and steal use $QUIET_LAST % of a CPU)"
    done
    note "warning: machine still busy ($QUIET_LAST % of a CPU) after ${QUIET_MAX} s; running anyway"
    QUIET_LAST="$QUIET_LAST!"
}
