#!/usr/bin/env bash
# Debian's dtestcm, server and client, on the fastdapl-tcp IA over loopback
# with our libdat2: -c 1000 then -c 2000 connections (connect all, then
# the client disconnects all and both sides free each EP as its
# DISCONNECTED arrives), FASTDAPL_DTESTCM_RUNS times in a row (default 20).
#
# dtestcm's server does not check what it dequeues (Debian's dapl2-utils
# 2.1.10; read from its machine code): after accepting N requests it takes
# N events from its connection EVD as "established" but compares their
# number with DAT_CONNECTION_EVENT_ESTABLISHED only with -u (UD), and its
# disconnect loop takes N events as disconnections without looking at their
# number, freeing the EP each one names. Its client disconnects as soon as
# it has its own N ESTABLISHED events, so a DISCONNECTED can reach the
# server's EVD before the last ESTABLISHED (events of different EPs have no
# order; ours come from two threads, the CM's and the NIC's). The server
# then counts that DISCONNECTED as an ESTABLISHED, later frees an EP on its
# left-over ESTABLISHED and either dies on that EP's DISCONNECTED ("invalid
# EP via DISC event", DAT_INVALID_HANDLE) or, if the EP was freed before the
# event was posted, waits forever for an Nth disconnection.
# libdtestcm_events.so (LD_PRELOADed into both) therefore holds the client's
# first dat_ep_disconnect until the server has printed "ALL N CONNECTED on
# Server", which is what the server assumes, and records every connection
# event each side takes; this script checks those records itself: N
# ESTABLISHED first on the server, and on both sides exactly one
# ESTABLISHED and then one DISCONNECTED for each of N distinct EPs.
# usage: dtestcm_loop.sh LIBDAT2_DIR PROVIDER_CONF LIBDTESTCM_EVENTS_SO
set -uo pipefail
libdir=$(cd "$1" && pwd)
conf=$2
shim=$3
runs=${FASTDAPL_DTESTCM_RUNS:-20}
if ! command -v dtestcm >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then echo "dtestcm_loop: dapl2-utils missing (required under CI)"; exit 1; fi
    echo "dtestcm_loop: SKIP: dapl2-utils not installed"; exit 77
fi
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
# dtestcm's server listens on TCP 15828 (0x3DD4) to hand its address over,
# after its PSP (45248, 0xB0C0) is up.
. "$(dirname "$0")/listening.sh"
listening() { listening_on 15828 45248; }

# check_events FILE N SIDE: one ESTABLISHED then one DISCONNECTED per EP,
# N EPs; on the server the N ESTABLISHED come first.
check_events() {
    awk -v n="$2" -v side="$3" '
        { k++ }
        $1 == "0x4001" { if ($2 in est) { print side ": a second ESTABLISHED for EP " $2; bad = 1 }
                         est[$2] = 1; ne++
                         if (side == "server" && k > n && !late++) { print side ": ESTABLISHED number " ne " came after " n " events"; bad = 1 } }
        $1 == "0x4005" { if (!($2 in est)) { print side ": DISCONNECTED before ESTABLISHED for EP " $2; bad = 1 }
                         if ($2 in disc) { print side ": a second DISCONNECTED for EP " $2; bad = 1 }
                         disc[$2] = 1; nd++ }
        $1 != "0x4001" && $1 != "0x4005" { print side ": unexpected event " $1 " for EP " $2; bad = 1 }
        END { if (ne != n || nd != n) { print side ": " ne + 0 " ESTABLISHED, " nd + 0 " DISCONNECTED, expected " n " each"; bad = 1 }
              exit bad }' "$1"
}

run_pair() { # connections, label: 0 when both sides passed and their events check
    local n=$1 label=$2
    local s=$work/server.$label c=$work/client.$label
    local env_common=(env "LD_LIBRARY_PATH=$libdir" "DAT_OVERRIDE=$conf" "LD_PRELOAD=$shim")
    "${env_common[@]}" FASTDAPL_DTESTCM_EVENTS="$s.events" \
        timeout 120 stdbuf -oL dtestcm -P fastdapl-tcp -s -c "$n" >"$s" 2>&1 &
    local server=$!
    for _ in $(seq 1 200); do listening_on 15828 && break; sleep 0.05; done
    "${env_common[@]}" FASTDAPL_DTESTCM_EVENTS="$c.events" FASTDAPL_DTESTCM_SERVER_LOG="$s" \
        timeout 120 stdbuf -oL dtestcm -P fastdapl-tcp -h 127.0.0.1 -c "$n" >"$c" 2>&1
    local crc=$?
    wait $server
    local src=$?
    local ok=1
    [ $crc = 0 ] && [ $src = 0 ] || ok=0
    grep -q "DAPL Connection Test Complete" "$c" && grep -q "DAPL Connection Test Complete" "$s" || ok=0
    grep -q "ALL $n CONNECTED on Server" "$s" && grep -q "ALL $n CONNECTED on Client" "$c" || ok=0
    grep -qE "Error|ERR" "$s" "$c" && ok=0
    check_events "$s.events" "$n" server >"$work/check.$label" 2>&1 || ok=0
    check_events "$c.events" "$n" client >>"$work/check.$label" 2>&1 || ok=0
    if [ $ok = 1 ]; then
        rm -f "$s" "$c" "$s.events" "$c.events"
    else
        echo "FAIL: dtestcm -c $n ($label): client rc=$crc server rc=$src$([ $crc = 124 ] || [ $src = 124 ] && echo ' (124: hung, stopped after 120 s)')"
        cat "$work/check.$label"
        echo "--- client"; tail -8 "$c"; echo "--- server"; tail -8 "$s"
    fi
    for _ in $(seq 1 100); do listening || break; sleep 0.05; done # the next server needs the ports
    [ $ok = 1 ]
}

start=$SECONDS
for i in $(seq 1 "$runs"); do
    t=$SECONDS
    run_pair 1000 "c1000-run$i" || { echo "dtestcm_loop: failed in run $i of $runs"; exit 1; }
    run_pair 2000 "c2000-run$i" || { echo "dtestcm_loop: failed in run $i of $runs"; exit 1; }
    echo "ok: run $i: dtestcm -c 1000 and -c 2000 ($((SECONDS - t)) s)"
done
echo "ok: $runs runs of dtestcm -c 1000 and -c 2000 in $((SECONDS - start)) s"
