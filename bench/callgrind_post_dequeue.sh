#!/usr/bin/env bash
# Instructions per dat_ep_post_send (8 bytes) and per dat_evd_dequeue of its
# completion, counted by callgrind on the calling thread only (the softnic
# engine thread's work is reported apart). With budgets, a perf gate.
# usage: callgrind_post_dequeue.sh POST_DEQUEUE_BINARY [ITERATIONS [POST_BUDGET DEQUEUE_BUDGET]]
set -euo pipefail
bin=$1
n=${2:-1000}
post_budget=${3:-}
dequeue_budget=${4:-}
if ! command -v valgrind >/dev/null 2>&1; then
    echo "callgrind_post_dequeue: SKIP: valgrind not installed"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Instructions of the thread that made the collected calls (the one with a
# nonzero total: collection is only on around those calls).
count() { # mode
    valgrind --tool=callgrind --collect-atstart=no --separate-threads=yes \
        --callgrind-out-file="$work/$1.%p" "$bin" "$1" "$n" >"$work/$1.log" 2>&1 ||
        { cat "$work/$1.log"; exit 1; }
    local best=0
    for f in "$work/$1".*-*; do
        local ir
        ir=$(awk '/^summary:/ {print $2}' "$f")
        [ -n "$ir" ] && [ "$ir" -gt "$best" ] && best=$ir
    done
    local engine=0
    for f in "$work/$1".*-*; do
        local ir
        ir=$(awk '/^summary:/ {print $2}' "$f")
        [ -n "$ir" ] && [ "$ir" -ne "$best" ] && engine=$((engine + ir))
    done
    echo "$best $engine"
}
read -r post post_other < <(count post)
read -r dequeue dequeue_other < <(count dequeue)
per_post=$((post / n))
per_dequeue=$((dequeue / n))
echo "instructions per dat_ep_post_send (8 B): $per_post  (other threads while collecting: $((post_other / n)) per call)"
echo "instructions per dat_evd_dequeue:        $per_dequeue  (other threads while collecting: $((dequeue_other / n)) per call)"
fail=0
if [ -n "$post_budget" ] && [ "$per_post" -gt "$post_budget" ]; then
    echo "FAIL: dat_ep_post_send over its budget of $post_budget"; fail=1
fi
if [ -n "$dequeue_budget" ] && [ "$per_dequeue" -gt "$dequeue_budget" ]; then
    echo "FAIL: dat_evd_dequeue over its budget of $dequeue_budget"; fail=1
fi
exit $fail
