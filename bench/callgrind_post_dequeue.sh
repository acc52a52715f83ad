#!/usr/bin/env bash
# Instructions per dat_ep_post_send (8 bytes), per dat_evd_dequeue of its
# completion and per dat_srq_post_recv, counted by callgrind on the calling
# thread only (the softnic engine thread's work is reported apart). With
# budgets, a perf gate.
# usage: callgrind_post_dequeue.sh POST_DEQUEUE_BINARY [ITERATIONS [POST_BUDGET DEQUEUE_BUDGET [SRQ_POST_BUDGET]]]
set -euo pipefail
bin=$1
n=${2:-1000}
post_budget=${3:-}
dequeue_budget=${4:-}
srq_post_budget=${5:-}
if ! command -v valgrind >/dev/null 2>&1; then
    echo "callgrind_post_dequeue: SKIP: valgrind not installed"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Instructions of the thread that made the collected calls (the one with a
# nonzero total: collection is only on around those calls).
count() { # mode [label]
    local label=${2:-$1}
    valgrind --tool=callgrind --collect-atstart=no --separate-threads=yes \
        --callgrind-out-file="$work/$label.%p" "$bin" "$1" "$n" >"$work/$label.log" 2>&1 ||
        { cat "$work/$label.log"; exit 1; }
    local best=0
    for f in "$work/$label".*-*; do
        local ir
        ir=$(awk '/^summary:/ {print $2}' "$f")
        [ -n "$ir" ] && [ "$ir" -gt "$best" ] && best=$ir
    done
    local engine=0
    for f in "$work/$label".*-*; do
        local ir
        ir=$(awk '/^summary:/ {print $2}' "$f")
        [ -n "$ir" ] && [ "$ir" -ne "$best" ] && engine=$((engine + ir))
    done
    echo "$best $engine"
}
# The fast path alone: the softnic's engine thread executes the WQE. Then
# the default, where an 8-byte send on an idle QP is executed (and written
# to the socket) by the posting thread: the softnic's work, stated apart.
read -r post post_other < <(FASTDAPL_SOFTNIC_INLINE=0 count post post-fastpath)
read -r post_inline _ < <(count post post-inline)
read -r dequeue dequeue_other < <(count dequeue)
read -r srq_post _ < <(count srq-post)
per_post=$((post / n))
per_dequeue=$((dequeue / n))
echo "instructions per dat_ep_post_send (8 B): $per_post  (other threads while collecting: $((post_other / n)) per call)"
echo "  with the softnic sending it from the posting thread: $((post_inline / n)) (softnic work: $(((post_inline - post) / n)))"
echo "instructions per dat_evd_dequeue:        $per_dequeue  (other threads while collecting: $((dequeue_other / n)) per call)"
per_srq_post=$((srq_post / n))
echo "instructions per dat_srq_post_recv:      $per_srq_post"
fail=0
if [ -n "$post_budget" ] && [ "$per_post" -gt "$post_budget" ]; then
    echo "FAIL: dat_ep_post_send over its budget of $post_budget"; fail=1
fi
if [ -n "$dequeue_budget" ] && [ "$per_dequeue" -gt "$dequeue_budget" ]; then
    echo "FAIL: dat_evd_dequeue over its budget of $dequeue_budget"; fail=1
fi
if [ -n "$srq_post_budget" ] && [ "$per_srq_post" -gt "$srq_post_budget" ]; then
    echo "FAIL: dat_srq_post_recv over its budget of $srq_post_budget"; fail=1
fi
exit $fail
