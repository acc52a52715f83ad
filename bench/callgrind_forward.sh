#!/usr/bin/env bash
# Instructions of libdat2's forward per dat_evd_dequeue (bench/forward_cost):
# the registry's call minus a direct call of the provider's function, with
# 1 and with 8 registered providers (the one called registered last). With a
# budget, a perf gate on the worst of the two.
# usage: callgrind_forward.sh FORWARD_COST_BINARY [ITERATIONS [BUDGET]]
set -euo pipefail
bin=$1
n=${2:-1000}
budget=${3:-}
if ! command -v valgrind >/dev/null 2>&1; then
    echo "callgrind_forward: SKIP: valgrind not installed"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
count() { # providers [direct]
    local label="$1${2:+-$2}"
    valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$work/$label.out" \
        "$bin" "$n" "$@" >"$work/$label.log" 2>&1 || { cat "$work/$label.log"; exit 1; }
    awk '/^summary:/ {print $2}' "$work/$label.out"
}
worst=0
for providers in 1 8; do
    total=$(count "$providers")
    direct=$(count "$providers" direct)
    per=$(((total - direct) / n))
    echo "forward instructions per dat_evd_dequeue, $providers registered provider(s): $per" \
        "(registry call $((total / n)), direct call $((direct / n)))"
    [ "$per" -gt "$worst" ] && worst=$per
done
if [ -n "$budget" ] && [ "$worst" -gt "$budget" ]; then
    echo "FAIL: the forward is over its budget of $budget instructions"; exit 1
fi
exit 0
