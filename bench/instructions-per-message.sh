#!/usr/bin/env bash
# instructions-per-message.sh: the software cost of a busy ping-pong, ours
# next to UCX's, in instructions (callgrind) rather than time, which on a
# shared or virtual machine moves with the host. Two processes, as
# compare-peers.sh runs them: the server natively, the client under
# callgrind. The client runs slowly then, so nearly every poll it makes
# finds the server's answer already there: its count per round trip is the
# work of one side of the exchange (post a receive, send, reap the answer and
# the send's completion), not of waiting. Each case runs with N1 and
# N2 round trips, each count the least of three runs (a poll that found
# nothing only adds); (count(N2) - count(N1)) / (N2 - N1) takes out start-up
# and tear-down. What the clients add around the library is counted too
# (dat_perf's clock reads and its sort of the samples; ucx_perftest's own
# loop), a few percent of either.
#   ours:  dat_perf -b, fastdapl-shm and fastdapl-tcp (as the dat.conf lists them)
#   peers: ucx_perftest tag_lat, UCX_TLS=posix,self and UCX_TLS=tcp
# Sizes 8 B and 4 KiB. Prints a table and the ratios ours / peer. Needs
# valgrind and ucx-utils. Not a CI test (it takes minutes), but its numbers
# do not move with machine noise: a per-message change shows in them.
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors
set -uo pipefail

usage() {
    cat <<'EOF'
usage: bench/instructions-per-message.sh [options]
  -B DIR       fastdapl build directory (default: build/ next to bench/)
  -n N1,N2     round trips of the two runs of each case (default 2000,12000)
  -s SIZES     message sizes, comma-separated (default 8,4096)
  -p PORT      first TCP port; each run takes the next one (default 21600)
  -r RUNS      runs of each count; the least is taken (default 3)
  -h           this text
environment: DAT_OVERRIDE (default DIR/dat.conf) picks the dat.conf whose
fastdapl-shm / fastdapl-tcp lines are measured.
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
. "$here/peers-common.sh"
build=$(cd "$here/.." && pwd)/build
counts=2000,12000
sizes=8,4096
runs=3
port=21600
while getopts "B:n:s:p:r:h" opt; do
    case $opt in
    B) build=$OPTARG ;;
    n) counts=$OPTARG ;;
    s) sizes=$OPTARG ;;
    p) port=$OPTARG ;;
    r) runs=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
IFS=, read -r n1 n2 <<<"$counts"
for v in "$n1" "$n2" "$port" "$runs"; do
    case $v in '' | *[!0-9]*) echo "instructions-per-message: not a number: '$v'" >&2; exit 2 ;; esac
done
if [ "$n2" -le "$n1" ]; then
    echo "instructions-per-message: -n N1,N2 needs N2 > N1" >&2
    exit 2
fi
IFS=, read -r -a size_list <<<"$sizes"
for s in "${size_list[@]}"; do
    case $s in '' | *[!0-9]* | 0) echo "instructions-per-message: -s: sizes in bytes, not '$s'" >&2; exit 2 ;; esac
done
for tool in valgrind callgrind_annotate; do
    command -v $tool >/dev/null || { echo "instructions-per-message: needs $tool (apt-get install valgrind)" >&2; exit 1; }
done
use_build instructions-per-message
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cases=()
for ia in fastdapl-shm fastdapl-tcp; do
    grep -qE "^${ia}[[:space:]]" "$DAT_OVERRIDE" 2>/dev/null && cases+=("ours:$ia")
done
if command -v ucx_perftest >/dev/null; then
    cases+=("ucx:posix,self" "ucx:tcp")
else
    echo "# ucx_perftest: missing (Debian: apt-get install ucx-utils), skipped" >&2
fi

# wait_listen PORT PID (bench/peers-common.sh)

# The client's instructions (its main thread) for CASE SIZE ROUND_TRIPS.
count() {
    local case=$1 size=$2 n=$3 out=$work/cg.$RANDOM spid server client tls
    port=$((port + 1))
    case $case in
    ours:*)
        server=("$dat_perf" -s -P "${case#ours:}" -p "$port" -b)
        client=("$dat_perf" -h 127.0.0.1 -P "${case#ours:}" -p "$port" -b -t lat -m "$size" -M "$size" -n "$n")
        tls=""
        ;;
    ucx:*)
        server=(ucx_perftest -p "$port")
        client=(ucx_perftest 127.0.0.1 -p "$port" -t tag_lat -s "$size" -n "$n" -w 10)
        tls=${case#ucx:}
        ;;
    esac
    UCX_TLS=$tls timeout 600 "${server[@]}" >"$work/server.log" 2>&1 &
    spid=$!
    if ! wait_listen "$port" "$spid"; then
        kill "$spid" 2>/dev/null
        wait "$spid" 2>/dev/null
        return 1
    fi
    UCX_TLS=$tls timeout 600 valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out" \
        "${client[@]}" >"$work/client.log" 2>&1
    local rc=$?
    wait "$spid"
    [ $rc -eq 0 ] || return 1
    # Thread 1 (the main thread) is the file ending in -01.
    awk '/^(summary|totals):/ { print $2; exit }' "$out-01"
}

# The least of `runs` counts: a poll that finds nothing (the server was
# descheduled, or the client's engine thread had its device) only adds.
least() { # CASE SIZE ROUND_TRIPS
    local best="" c
    for _ in $(seq 1 "$runs"); do
        c=$(count "$1" "$2" "$3") || return 1
        if [ -z "$best" ] || [ "$c" -lt "$best" ]; then best=$c; fi
    done
    echo "$best"
}

per_message() { # CASE SIZE
    local a b
    a=$(least "$1" "$2" "$n1") && b=$(least "$1" "$2" "$n2") || { echo "-"; return; }
    echo $(((b - a) / (n2 - n1)))
}

label() {
    case $1 in
    ours:*) echo "dat_perf -b ${1#ours:}" ;;
    ucx:posix,self) echo "ucx_perftest shm (posix)" ;;
    ucx:tcp) echo "ucx_perftest tcp" ;;
    esac
}

declare -A result
for case in "${cases[@]}"; do
    for size in "${size_list[@]}"; do
        result[$case:$size]=$(per_message "$case" "$size")
    done
done

echo "instructions-per-message on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ): client's instructions per round trip"
echo "(callgrind, the client's main thread; (count at $n2 - count at $n1) / $((n2 - n1)), each count the least of $runs runs; server native)"
echo
printf '%-44s' ""
for size in "${size_list[@]}"; do printf '%12s' "$size B"; done
echo
for case in "${cases[@]}"; do
    printf '%-44s' "$(label "$case")"
    for size in "${size_list[@]}"; do printf '%12s' "${result[$case:$size]}"; done
    echo
done
echo
echo "ratios ours / peer (above 1: we execute more per message)"
for pair in "ours:fastdapl-shm ucx:posix,self" "ours:fastdapl-tcp ucx:tcp"; do
    read -r ours peer <<<"$pair"
    [ -n "${result[$ours:${size_list[0]}]:-}" ] && [ -n "${result[$peer:${size_list[0]}]:-}" ] || continue
    printf '%-44s' "$(label "$ours") / $(label "$peer" | sed 's/ucx_perftest //')"
    for size in "${size_list[@]}"; do
        a=${result[$ours:$size]} b=${result[$peer:$size]}
        if [ "$a" = - ] || [ "$b" = - ] || [ "$b" -le 0 ]; then
            printf '%12s' "-"
        else
            printf '%12s' "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')"
        fi
    done
    echo
done
