#!/usr/bin/env bash
# Instructions per dat_ep_post_send (8 bytes), per dat_evd_dequeue of its
# completion and per dat_srq_post_recv, counted by callgrind on the calling
# thread only (the engine thread's work is reported apart): on the softnic
# (fastdapl-tcp), and with --direct on the mlx5 direct path over the
# software mlx5 device (fastdapl-mlx5_0-1). With --bare, the same post and
# poll by a bare direct-verbs consumer (bare_direct_verbs.cpp), the floor,
# and the ratio (direct post + dequeue) / (bare post + poll).
# With budgets and --max-ratio, a perf gate. See bench/README.md.
#
# usage: callgrind_post_dequeue.sh [options] POST_DEQUEUE_BINARY [ITERATIONS [POST DEQUEUE [SRQ_POST]]]
#   --budgets P,D,S          softnic budgets (same as the trailing arguments)
#   --direct BUILD_ROOT SHIM  also the direct path, on libfake_mlx5_device.so
#   --direct-budgets P,D,S   direct-path budgets
#   --bare BINARY            the bare consumer
#   --max-ratio R            fail when (direct post+dequeue)/(bare post+poll) > R
# Exits 1 when over a budget or the ratio, 77 (skip) without valgrind, or
# when --max-ratio cannot be checked (no software mlx5 device, sanitizers)
# and every other check passed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
budgets='' direct_budgets='' direct_build='' shim='' bare='' max_ratio=''
while [ $# -gt 0 ]; do
    case $1 in
    --budgets) budgets=$2; shift 2 ;;
    --direct-budgets) direct_budgets=$2; shift 2 ;;
    --direct) direct_build=$2 shim=$3; shift 3 ;;
    --bare) bare=$2; shift 2 ;;
    --max-ratio) max_ratio=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "callgrind_post_dequeue: unknown option $1" >&2; exit 2 ;;
    *) break ;;
    esac
done
bin=$1
n=${2:-1000}
if [ $# -ge 4 ]; then budgets="$3,$4,${5:-}"; fi
IFS=, read -r post_budget dequeue_budget srq_post_budget <<<"${budgets:-,,}"
IFS=, read -r direct_post_budget direct_dequeue_budget direct_srq_post_budget <<<"${direct_budgets:-,,}"
if ! command -v valgrind >/dev/null 2>&1; then
    echo "callgrind_post_dequeue: SKIP: valgrind not installed"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# count LABEL COMMAND...: runs COMMAND (whose valgrind is the word
# "valgrind") and prints the instructions of the thread that made the
# collected calls (the one with the largest total: collection is only on
# around those calls), then those of every other thread. Exit 77 of the
# command (a skipped wrapper) is passed on.
count() {
    local label=$1 rc=0
    shift
    local cmd=()
    for word in "$@"; do
        if [ "$word" = valgrind ]; then
            cmd+=(valgrind --tool=callgrind --collect-atstart=no --separate-threads=yes
                  "--callgrind-out-file=$work/$label.%p")
        else
            cmd+=("$word")
        fi
    done
    "${cmd[@]}" >"$work/$label.log" 2>&1 || rc=$?
    if [ $rc -eq 77 ]; then cat "$work/$label.log" >&2; return 77; fi
    if [ $rc -ne 0 ]; then cat "$work/$label.log" >&2; exit 1; fi
    local best=0 all=0 ir
    for f in "$work/$label".*-*; do
        ir=$(awk '/^summary:/ {print $2}' "$f")
        [ -n "$ir" ] || continue
        all=$((all + ir))
        [ "$ir" -gt "$best" ] && best=$ir
    done
    echo "$best $((all - best))"
}

fail=0
# over NAME VALUE BUDGET: a budget check (none when BUDGET is empty).
over() {
    if [ -n "$3" ] && [ "$2" -gt "$3" ]; then
        echo "FAIL: $1: $2 instructions per call, over its budget of $3"; fail=1
    fi
}

# The softnic. The fast path alone first: the softnic's engine thread
# executes the WQE. Then the default, where an 8-byte send on an idle QP is
# executed (and written to the socket) by the posting thread: the softnic's
# work, stated apart.
read -r post post_other < <(FASTDAPL_SOFTNIC_INLINE=0 count post-fastpath valgrind "$bin" post "$n" fastdapl-tcp)
read -r post_inline _ < <(count post-inline valgrind "$bin" post "$n" fastdapl-tcp)
read -r dequeue dequeue_other < <(count dequeue valgrind "$bin" dequeue "$n" fastdapl-tcp)
read -r srq_post _ < <(count srq-post valgrind "$bin" srq-post "$n" fastdapl-tcp)
echo "softnic (fastdapl-tcp), instructions per call of the calling thread:"
echo "  dat_ep_post_send (8 B):  $((post / n))  (other threads while collecting: $((post_other / n)) per call)"
echo "    with the softnic sending it from the posting thread: $((post_inline / n)) (softnic work: $(((post_inline - post) / n)))"
echo "  dat_evd_dequeue:         $((dequeue / n))  (other threads while collecting: $((dequeue_other / n)) per call)"
echo "  dat_srq_post_recv:       $((srq_post / n))"
over "softnic dat_ep_post_send" $((post / n)) "$post_budget"
over "softnic dat_evd_dequeue" $((dequeue / n)) "$dequeue_budget"
over "softnic dat_srq_post_recv" $((srq_post / n)) "$srq_post_budget"

# The mlx5 direct path on the software mlx5 device.
direct='' ratio=''
if [ -n "$direct_build" ]; then
    # shellcheck disable=SC2317 # called through count's "${cmd[@]}"
    fake() { "$here/with_fake_mlx5.sh" "$direct_build" "$shim" "$@"; }
    out=$(count direct-post fake valgrind "$bin" post "$n" fastdapl-mlx5_0-1) && rc=0 || rc=$?
    if [ "$rc" -eq 0 ]; then
        if ! grep -q 'FASTDAPL_DATA_PATH mlx5 direct' "$work/direct-post.log"; then
            cat "$work/direct-post.log"
            echo "FAIL: fastdapl-mlx5_0-1 did not take the mlx5 direct path"; exit 1
        fi
        read -r d_post d_post_other <<<"$out"
        read -r d_dequeue d_dequeue_other < <(count direct-dequeue fake valgrind "$bin" dequeue "$n" fastdapl-mlx5_0-1)
        read -r d_srq_post _ < <(count direct-srq-post fake valgrind "$bin" srq-post "$n" fastdapl-mlx5_0-1)
        direct=yes
        echo "mlx5 direct path (fastdapl-mlx5_0-1 on the software mlx5 device), calling thread:"
        echo "  dat_ep_post_send (8 B):  $((d_post / n))  (device thread while collecting: $((d_post_other / n)) per call)"
        echo "  dat_evd_dequeue:         $((d_dequeue / n))  (device thread while collecting: $((d_dequeue_other / n)) per call)"
        echo "  dat_srq_post_recv:       $((d_srq_post / n))"
        over "direct dat_ep_post_send" $((d_post / n)) "$direct_post_budget"
        over "direct dat_evd_dequeue" $((d_dequeue / n)) "$direct_dequeue_budget"
        over "direct dat_srq_post_recv" $((d_srq_post / n)) "$direct_srq_post_budget"
    else
        [ "$rc" -eq 77 ] || exit 1
        echo "mlx5 direct path: skipped (no software mlx5 device here)"
    fi
fi

# The bare direct-verbs consumer: the floor.
if [ -n "$bare" ]; then
    read -r b_post _ < <(count bare-post valgrind "$bare" post "$n")
    read -r b_poll _ < <(count bare-poll valgrind "$bare" poll "$n")
    echo "bare direct-verbs consumer (bare_direct_verbs, no uDAPL):"
    echo "  post (8 B inline send):  $((b_post / n))"
    echo "  poll (one CQE64):        $((b_poll / n))"
    if [ -n "$direct" ]; then
        ratio=$(awk -v d=$((d_post + d_dequeue)) -v b=$((b_post + b_poll)) 'BEGIN { printf "%.2f", d / b }')
        echo "ratio (direct post + dequeue) / (bare post + poll): $ratio  ($(((d_post + d_dequeue) / n)) / $(((b_post + b_poll) / n)))"
        if [ -n "$max_ratio" ] && awk -v r="$ratio" -v m="$max_ratio" 'BEGIN { exit !(r > m) }'; then
            echo "FAIL: ratio $ratio over its threshold of $max_ratio"; fail=1
        fi
    fi
fi
if [ $fail -eq 0 ] && [ -n "$max_ratio" ] && [ -z "$ratio" ]; then
    echo "callgrind_post_dequeue: SKIP: the ratio gate needs the direct path and the bare consumer (the rest passed)"
    exit 77
fi
exit $fail
