#!/usr/bin/env bash
# Instructions per SendQueue::post + ring() of one 8-byte inline SEND
# (BlueFlame and 8-byte doorbell) and per SharedReceiveQueue::post of one
# segment, counted by callgrind on queues in ordinary memory. With budgets,
# a perf gate. The counts include the measuring overhead (toggles, the
# call), printed as "empty".
# usage: callgrind_fastpath_post.sh FASTPATH_POST_BINARY [ITERATIONS [SEND_BF_BUDGET SEND_8B_BUDGET SRQ_BUDGET]]
set -euo pipefail
bin=$1
n=${2:-1000}
budgets=("${3:-}" "${4:-}" "${5:-}")
if ! command -v valgrind >/dev/null 2>&1; then
    echo "callgrind_fastpath_post: SKIP: valgrind not installed"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
i=0
for mode in send-bf send-8b srq empty; do
    valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$work/$mode.out" "$bin" "$mode" "$n" \
        >"$work/$mode.log" 2>&1 || { cat "$work/$mode.log"; exit 1; }
    ir=$(awk '/^summary:/ {print $2}' "$work/$mode.out")
    per=$((ir / n))
    echo "instructions per $mode: $per"
    budget=${budgets[$i]:-}
    if [ -n "$budget" ] && [ "$per" -gt "$budget" ]; then
        echo "FAIL: $mode over its budget of $budget"; fail=1
    fi
    i=$((i + 1))
done
exit $fail
