#!/usr/bin/env bash
# compare-peers.sh: fastdapl's software IAs next to other software transports
# on this host. Interleaved rounds (each round runs every case once), medians
# over the rounds; every case is two processes over loopback:
#   ours:  dat_perf (-s / -h 127.0.0.1) on fastdapl-tcp, and fastdapl-shm when
#          the dat.conf lists it, each waiting in dat_evd_wait and busy (-b);
#          fastdapl-tcp busy also with one connection per queue pair
#          (FASTDAPL_TCP_LANES=0: no lane for large writes);
#   peers: ucx_perftest (ucx-utils) UCP tag matching over tcp (as it comes,
#          and with one connection per peer: UCX_MAX_RNDV_LANES=1) and over
#          shared memory; fi_pingpong (libfabric-bin) on the tcp provider, msg EP.
# Measures one-way latency at 8 B and 4 KiB (µs) and bandwidth at 1 MiB
# (MB/s = 10^6 bytes/s: dat_perf's RDMA writes with a window in flight,
# ucx's tag_bw stream; fi_pingpong has ping-pong only, one message in
# flight). Prints the medians, the ratios ours / peer of the medians, and
# paired ratios (the median of each round's ours / peer). Not a CI test:
# on a shared or loaded machine the numbers are noise.
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors
set -uo pipefail

usage() {
    cat <<'EOF'
usage: bench/compare-peers.sh [options]
  -n ROUNDS    interleaved rounds; the tables show medians (default 3)
  -B DIR       fastdapl build directory (default: build/ next to bench/)
  -p PORT      first TCP port; each run takes the next free one (default 21300,
               below Linux's ephemeral range, 32768 up)
  -q           quick: a tenth of the iterations (a smoke run)
  -k DIR       keep every run's output in DIR
  -h           this text
environment: DAT_OVERRIDE (default DIR/dat.conf) picks the dat.conf whose
fastdapl-tcp / fastdapl-shm lines are measured.
latency: one-way, µs (dat_perf and ucx: median; fi_pingpong: mean of a
ping-pong); bandwidth: MB/s = 10^6 bytes per second (ucx's MiB/s converted).
ratios: ours / peer; latency above 1 or bandwidth below 1: we are slower;
paired: the median over the rounds of each round's ratio (cases of one metric
run back to back, seconds apart, so a host that changes speed between rounds
moves both sides of a round's ratio alike).
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
. "$here/peers-common.sh"
build=$(cd "$here/.." && pwd)/build
rounds=3
port=21300
quick=0
keep=""
while getopts "n:B:p:qk:h" opt; do
    case $opt in
    n) rounds=$OPTARG ;;
    B) build=$OPTARG ;;
    p) port=$OPTARG ;;
    q) quick=1 ;;
    k) keep=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
case $rounds in '' | *[!0-9]* | 0) echo "compare-peers: -n: a positive number, not '$rounds'" >&2; exit 2 ;; esac
case $port in '' | *[!0-9]*) echo "compare-peers: -p: a port number, not '$port'" >&2; exit 2 ;; esac

if [ "$port" -lt 1024 ] || [ "$port" -gt 65000 ]; then
    echo "compare-peers: -p: from 1024 to 65000, not $port" >&2
    exit 2
fi
use_build compare-peers

# Bandwidth: 2,000 MiB a run, so that fastdapl-shm's and UCX's fastest runs
# last 0.1 s, not the 25 ms of 500 messages, where one hiccup of the host's
# scheduler moved a run by a third.
lat_iters=5000 bw_iters=2000
if [ $quick -eq 1 ]; then lat_iters=500 bw_iters=50; fi
limit=120 # seconds, per process

work=$(mktemp -d)
cleanup() {
    local pids
    pids=$(jobs -p)
    # shellcheck disable=SC2086 # one word per pid
    [ -n "$pids" ] && kill $pids 2>/dev/null
    if [ -n "$keep" ]; then
        mkdir -p "$keep" && cp -r "$work"/. "$keep"/
    fi
    rm -rf "$work"
}
trap cleanup EXIT

notes=()
note() { notes+=("$*"); }

# --- which cases run --------------------------------------------------------------
# A case: name, then how to measure "lat8", "lat4k" and "bw1m" (functions below).
ours_ias=()
for ia in fastdapl-tcp fastdapl-shm; do
    if grep -qE "^${ia}[[:space:]]" "$DAT_OVERRIDE" 2>/dev/null; then
        ours_ias+=("$ia")
    else
        note "$ia: not in $DAT_OVERRIDE, skipped"
    fi
done
if [ ${#ours_ias[@]} -eq 0 ]; then
    echo "compare-peers: none of our IAs is in $DAT_OVERRIDE" >&2
    exit 1
fi
cases=()
for ia in "${ours_ias[@]}"; do
    cases+=("ours:$ia:evd_wait" "ours:$ia:busy")
    [ "$ia" = fastdapl-tcp ] && cases+=("ours:$ia:busy:1")
done
if command -v ucx_perftest >/dev/null; then
    cases+=("ucx:tcp" "ucx:tcp1" "ucx:shm")
else
    note "ucx_perftest: missing (Debian: apt-get install ucx-utils), skipped"
fi
if command -v fi_pingpong >/dev/null; then
    cases+=("fi:tcp")
else
    note "fi_pingpong: missing (Debian: apt-get install libfabric-bin), skipped"
fi
metrics=(lat8 lat4k bw1m)

# --- running a pair of processes ----------------------------------------------------

# wait_listen PORT PID (bench/peers-common.sh)

# run_pair LOG: the server command in array S, then the client in array C,
# both with the environment in array E; the client's output in LOG.
run_pair() {
    local log=$1 spid rc src
    env "${E[@]}" timeout $limit "${S[@]}" >"$log.server" 2>&1 &
    spid=$!
    if ! wait_listen "$listen_port" "$spid"; then
        kill "$spid" 2>/dev/null
        wait "$spid" 2>/dev/null
        echo "server did not listen on $listen_port" >>"$log"
        return 1
    fi
    env "${E[@]}" timeout $limit "${C[@]}" >"$log" 2>&1
    rc=$?
    wait "$spid"
    src=$?
    [ $rc -eq 0 ] && [ $src -eq 0 ]
}

# The next port from $port on that no socket on this host uses (in any state),
# leaving out two that other jobs here are known to use.
next_port() {
    local hex
    for _ in $(seq 1 1000); do
        listen_port=$port
        port=$((port + 1))
        case $listen_port in 15828 | 45248) continue ;; esac
        hex=$(printf '%04X' "$listen_port")
        grep -qiE "^ *[0-9]+: [0-9A-F]+:$hex " /proc/net/tcp /proc/net/tcp6 2>/dev/null || return 0
    done
    echo "compare-peers: no free TCP port from $port" >&2
    exit 1
}

# measure CASE METRIC LOG: prints the value (µs or MB/s), or fails; on $listen_port.
measure() {
    local case=$1 metric=$2 log=$3 size test iters
    case $metric in
    lat8) size=8 test=lat iters=$lat_iters ;;
    lat4k) size=4096 test=lat iters=$lat_iters ;;
    bw1m) size=1048576 test=bw iters=$bw_iters ;;
    esac
    case $case in
    ours:*)
        local ia wait lanes busy=()
        IFS=: read -r _ ia wait lanes <<<"$case"
        [ "$wait" = busy ] && busy=(-b)
        E=(DAT_OVERRIDE="$DAT_OVERRIDE")
        [ "$lanes" = 1 ] && E+=(FASTDAPL_TCP_LANES=0)
        S=("$dat_perf" -s -P "$ia" -p "$listen_port" "${busy[@]}")
        C=("$dat_perf" -h 127.0.0.1 -P "$ia" -p "$listen_port" "${busy[@]}" -t "$test" -m "$size" -M "$size"
            -n "$iters" --format csv)
        run_pair "$log" || return 1
        # test,bytes,iterations,lat_med_us,lat_p99_us,mb_per_s,msg_per_s
        awk -F, -v t=$test 'NR == 2 { print (t == "lat" ? $4 : $6) }' "$log"
        ;;
    ucx:*)
        local tls=tcp ucx_test=tag_lat warm=$((iters / 10 + 1))
        if [ "$case" = ucx:shm ]; then
            tls=posix,self
            [ $test = bw ] && tls=posix,cma,self
        fi
        [ $test = bw ] && ucx_test=tag_bw
        E=("UCX_TLS=$tls")
        # One TCP connection for a large message, as fastdapl-tcp's queue
        # pair has (by default UCX splits it over two).
        [ "$case" = ucx:tcp1 ] && E+=(UCX_MAX_RNDV_LANES=1)
        S=(ucx_perftest -p "$listen_port")
        C=(ucx_perftest 127.0.0.1 -p "$listen_port" -t "$ucx_test" -s "$size" -n "$iters" -w "$warm" -f -v)
        run_pair "$log" || return 1
        # iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw(MiB/s),avg_mr,overall_mr
        awk -F, -v t=$test '$1 ~ /^ *[0-9]+$/ { v = (t == "lat" ? $2 : $6 * 1.048576) } END { if (v != "") print v }' "$log"
        ;;
    fi:tcp)
        E=(FI_PROVIDER=tcp)
        S=(fi_pingpong -p tcp -e msg -S "$size" -I "$iters" -B "$listen_port")
        C=(fi_pingpong -p tcp -e msg -S "$size" -I "$iters" -P "$listen_port" 127.0.0.1)
        run_pair "$log" || return 1
        # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
        awk -v t=$test '$1 ~ /^[0-9]+[kmg]?$/ && NF >= 7 { v = (t == "lat" ? $7 : $6) } END { if (v != "") print v }' "$log"
        ;;
    esac
}

label() {
    case $1 in
    ours:*)
        local ia wait lanes
        IFS=: read -r _ ia wait lanes <<<"$1"
        echo "dat_perf $ia $wait${lanes:+ (1 lane)}"
        ;;
    ucx:tcp) echo "ucx_perftest tcp (tag)" ;;
    ucx:tcp1) echo "ucx_perftest tcp (tag, 1 lane)" ;;
    ucx:shm) echo "ucx_perftest shm (tag)" ;;
    fi:tcp) echo "fi_pingpong tcp msg" ;;
    esac
}

median() { # values on stdin, one per line
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
                                       else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# --- the rounds -----------------------------------------------------------------------

echo "compare-peers: $rounds round(s) of ${#cases[@]} cases x ${#metrics[@]} measurements;" \
    "latency $lat_iters iterations, bandwidth $bw_iters messages" >&2
for ((r = 1; r <= rounds; r++)); do
    for m in "${metrics[@]}"; do
        for c in "${cases[@]}"; do
            id=$(echo "$c" | tr ':' '_')
            log="$work/r${r}_${id}_$m.log"
            printf '\r\033[Kround %d: %s %s' "$r" "$(label "$c")" "$m" >&2
            next_port # here, not in measure's subshell
            if v=$(measure "$c" "$m" "$log") && [ -n "$v" ]; then
                echo "$r $v" >>"$work/$id.$m" # the round, for the paired ratios
            else
                echo "round $r: $(label "$c") $m failed (see ${log##*/}; -k DIR keeps it)" >>"$work/failures"
            fi
        done
    done
done
printf '\r\033[K' >&2

# --- the tables -----------------------------------------------------------------------

values_file() { echo "$work/$(echo "$1" | tr ':' '_').$2"; } # CASE METRIC: its "ROUND VALUE" lines
value() { # CASE METRIC: the median, or "-"
    local f
    f=$(values_file "$1" "$2")
    if [ -s "$f" ]; then awk '{ print $2 }' "$f" | median; else echo "-"; fi
}
rounds_of() {
    local f
    f=$(values_file "$1" "$2")
    if [ -s "$f" ]; then awk '{ printf "%s%.4g", (NR > 1 ? " " : ""), $2 }' "$f"; fi
}
paired_ratio() { # OURS PEER METRIC: the median over the rounds of ours / peer in each round, or "-"
    local a b
    a=$(values_file "$1" "$3") b=$(values_file "$2" "$3")
    [ -s "$a" ] && [ -s "$b" ] || { echo "-"; return; }
    awk 'NR == FNR { v[$1] = $2; next } ($1 in v) && $2 > 0 { print v[$1] / $2 }' "$a" "$b" | median
}

echo "compare-peers on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ): median of $rounds interleaved round(s)," \
    "two processes over loopback"
echo "latency: one-way µs (lower is better); bandwidth: MB/s = 10^6 B/s (higher is better)"
echo
printf '%-36s %12s %12s %12s\n' "" "lat 8 B" "lat 4 KiB" "bw 1 MiB"
for c in "${cases[@]}"; do
    printf '%-36s' "$(label "$c")"
    for m in "${metrics[@]}"; do
        v=$(value "$c" "$m")
        if [ "$v" = - ]; then
            printf ' %12s' -
        elif [ "$m" = bw1m ]; then
            printf ' %12.1f' "$v"
        else
            printf ' %12.2f' "$v"
        fi
    done
    echo
done
echo
ratio_of_medians() { # OURS PEER METRIC
    local a b
    a=$(value "$1" "$3") b=$(value "$2" "$3")
    if [ "$a" = - ] || [ "$b" = - ]; then echo "-"; else awk -v a="$a" -v b="$b" 'BEGIN { print (b > 0 ? a / b : "-") }'; fi
}
ratio_table() { # FUNCTION: a row per (ours, peer), FUNCTION OURS PEER METRIC in each column
    printf '%-36s %-30s %9s %9s %9s\n' "ours" "peer" "lat 8 B" "lat 4 KiB" "bw 1 MiB"
    local o p m v
    for o in "${cases[@]}"; do
        case $o in ours:*) ;; *) continue ;; esac
        for p in "${cases[@]}"; do
            case $p in ours:*) continue ;; esac
            printf '%-36s %-30s' "$(label "$o")" "$(label "$p")"
            for m in "${metrics[@]}"; do
                v=$("$1" "$o" "$p" "$m")
                if [ "$v" = - ]; then printf ' %9s' -; else printf ' %9.2f' "$v"; fi
            done
            echo
        done
    done
}
echo "ratios ours / peer (latency above 1, bandwidth below 1: fastdapl is slower)"
ratio_table ratio_of_medians
echo
echo "paired ratios: the median over the rounds of each round's ours / peer (the two ran seconds"
echo "apart, so a change of the host's speed between rounds cancels out; read these where the"
echo "rounds' values move together)"
ratio_table paired_ratio
echo
echo "each round's values (the medians come from these):"
for c in "${cases[@]}"; do
    for m in "${metrics[@]}"; do
        printf '  %-36s %-6s %s\n' "$(label "$c")" "$m" "$(rounds_of "$c" "$m")"
    done
done
echo
echo "notes:"
echo "  dat_perf bw: RDMA writes, 32 in flight; ucx tag_bw: a stream of tagged sends;"
echo "  fi_pingpong bw: ping-pong, one message in flight (not a streaming bandwidth)."
echo "  ucx_perftest and fi_pingpong poll: compare them with our busy rows."
for n in "${notes[@]}"; do echo "  $n"; done
if [ -s "$work/failures" ]; then
    echo "failures:"
    sed 's/^/  /' "$work/failures"
    exit 1
fi
exit 0
