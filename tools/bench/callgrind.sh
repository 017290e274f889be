#!/bin/sh
# Instructions per answer for rows of `cargo bench --bench answer`, counted
# by callgrind, so that the VM's speed does not matter (see
# docs/src/dev/performance.md). The cost of one answer plus divan's loop is
# the PROGRAM TOTALS of --sample-count 30 minus that of --sample-count 10
# (both --sample-size 1000), divided by 20,000: load and setup cancel out.
#
#   tools/bench/callgrind.sh target/release/deps/answer-<hash> static_a nxdomain ...
set -eu
bin=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
total() {
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$bin" --bench --exact "answer::$1" \
        --sample-count "$2" --sample-size 1000 >/dev/null 2>&1
    callgrind_annotate "$tmp/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}
for row in "$@"; do
    a=$(total "$row" 10)
    b=$(total "$row" 30)
    echo "$row $(( (b - a) / 20000 ))"
done
