#!/usr/bin/env bash
# Runs INSIDE each of the two Soft-RoCE guests booted by tests/vm/pair.sh
# (rxe-vm-pair.sh: A = server 192.0.2.1, B = client 192.0.2.2, rxe0 on
# $RXE_NETDEV, a virtual wire between two kernels). Both guests walk the
# same list of steps; in each, A runs the server and B the client:
#   dtest, dtestsrq, dapltest -T T and dat_perf, on our libdat2 + libfastdapl
#   (IA fastdapl-rxe0-1) and on Debian's libdat2 + libdaplofa (rdma_cm on
#   the same port), first on a clean link, then with netem dropping 5% of
#   the packets each guest sends (5% each way; rxe's RC retransmission must
#   recover them).
# Steps are kept in line through files in the shared OUT_DIR (9p without a
# cache, so each guest sees the other's files at once): A writes
# sync/STEP.ready when its server listens (or sync/STEP.server-done when
# it ended without), B runs its client then and writes sync/STEP.client-done;
# A waits for that before its next server. B writes one line per step to
# OUT_DIR/results.tsv: provider, loss, test, ok|FAIL|race, detail; pair.sh
# judges them.
# usage: pair_guest.sh A|B BUILD_DIR OUT_DIR
# Env (for chasing one failure; pair.sh passes them on): PAIR_ONLY, a glob
# over step ids PROVIDER.LOSS.TEST (e.g. 'ours.loss5.dtestsrq'), runs only
# the steps it matches; PAIR_ROUNDS=N runs the lossy group N times (ids of
# rounds after the first end in .rN); PAIR_OURS_ENV, more VAR=VALUE words
# for our runs (e.g. FASTDAPL_DEBUG=1). Both guests must be given the same.
set -uo pipefail
PAIR_ONLY=${PAIR_ONLY:-*} PAIR_ROUNDS=${PAIR_ROUNDS:-1} ROUND=""
ROLE=${1:?usage: pair_guest.sh A|B BUILD_DIR OUT_DIR}
BUILD=$(cd "${2:?}" && pwd)
OUT=${3:?}
SYNC=$OUT/sync LOG=$OUT/logs
mkdir -p "$SYNC" "$LOG"
DEV=${RXE_DEV:-rxe0} NETDEV=${RXE_NETDEV:?run me through tests/vm/pair.sh}
PEER=${RXE_PEER_IP:?} MYIP=${RXE_IP:?}
SERVER_IP=$([ "$ROLE" = A ] && echo "$MYIP" || echo "$PEER")

OUR_IA=fastdapl-$DEV-1
OUR_CONF=/tmp/pair-ours.conf
echo "$OUR_IA u2.0 nonthreadsafe default $BUILD/src/provider/libfastdapl.so.2 fastdapl.0.1 \"verbs:$DEV:1\" \"\"" >"$OUR_CONF"
REF_IA=ofa-v2-cma-roe-$NETDEV
REF_CONF=/tmp/pair-ref.conf
echo "$REF_IA u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"$NETDEV 0\" \"\"" >"$REF_CONF"
DAT_PERF=$BUILD/tools/dat_perf/dat_perf

# nap without a fork (forks are dear under TCG)
tick=$(mktemp -u /tmp/pair-tick.XXXXXX)
mkfifo "$tick" && exec 8<>"$tick" && rm -f "$tick"
nap() { read -r -t "${1:-0.1}" -u 8 _ || :; }
port_listening() { # TCP listener on PORT (/proc/net/tcp, builtins only)
    local want f sl la ra st _
    printf -v want '%04X' "$1"
    for f in /proc/net/tcp /proc/net/tcp6; do
        [ -r "$f" ] || continue
        while read -r sl la ra st _; do
            [ "$st" = 0A ] && [ "${la##*:}" = "$want" ] && return 0
        done <"$f"
    done
    return 1
}
cm_listening() { [[ $(rdma res show cm_id 2>/dev/null) == *"state LISTEN"*":$1 "* ]]; }
ready() { # SPEC: tcp:PORT, cm:PORT or log:FILE:TEXT
    local kind=${1%%:*} arg=${1#*:}
    case $kind in
    tcp) port_listening "$arg" ;;
    cm) cm_listening "$arg" ;;
    log) [ -f "${arg%%:*}" ] && [[ $(<"${arg%%:*}") == *"${arg#*:}"* ]] ;;
    esac
}
wait_file() { # FILE SECONDS
    local end=$((SECONDS + $2))
    while [ ! -e "$1" ] && [ $SECONDS -lt "$end" ]; do nap 0.2; done
    [ -e "$1" ]
}

# step NAME PROVIDER(ours|ref) LOSS READY_SPEC LIMIT -- server args -- client args
# (each args list is a command; "{IA}" is replaced by the provider's IA name)
step() {
    local name=$1 prov=$2 loss=$3 spec=$4 limit=$5; shift 5
    local srv=() cli=() a
    [ "$1" = -- ] && shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    cli=("$@")
    local ia envv
    if [ "$prov" = ours ]; then ia=$OUR_IA envv=(LD_LIBRARY_PATH="$BUILD/src/registry" DAT_OVERRIDE="$OUR_CONF" ${PAIR_OURS_ENV:-})
    else ia=$REF_IA envv=(LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu DAT_OVERRIDE="$REF_CONF"); fi
    for a in "${!srv[@]}"; do [ "${srv[$a]}" = "{IA}" ] && srv[$a]=$ia; done
    for a in "${!cli[@]}"; do [ "${cli[$a]}" = "{IA}" ] && cli[$a]=$ia; done
    local id="$prov.$loss.$name" t0=$SECONDS
    # shellcheck disable=SC2053 # PAIR_ONLY is a glob
    [[ $id == $PAIR_ONLY ]] || return 0
    id+=$ROUND
    if [ "$ROLE" = A ]; then
        env "${envv[@]}" timeout -k 5 $((limit + 60)) stdbuf -oL -eL "${srv[@]}" >"$LOG/$id.server" 2>&1 &
        local pid=$! end=$((SECONDS + 90))
        while ! ready "$spec" && kill -0 $pid 2>/dev/null && [ $SECONDS -lt $end ]; do nap 0.1; done
        ready "$spec" && : >"$SYNC/$id.ready"
        wait_file "$SYNC/$id.client-done" $((limit + 120))
        # the client is done: the server gets 30 s to finish by itself (a
        # lost disconnect request is sent again after several seconds)
        end=$((SECONDS + 30))
        while kill -0 $pid 2>/dev/null && [ $SECONDS -lt $end ]; do nap 0.2; done
        # still running: what the kernel's CM knows of its connections (the
        # judge tells a disconnect request that never arrived from one lost
        # on the way up)
        kill -0 $pid 2>/dev/null && rdma res show cm_id >"$LOG/$id.server-cm" 2>&1
        kill -TERM $pid 2>/dev/null
        wait $pid
        echo $? >"$SYNC/$id.server-done"
    else
        local crc=-1 src
        if wait_file "$SYNC/$id.ready" 150; then
            env "${envv[@]}" timeout -k 5 "$limit" stdbuf -oL -eL "${cli[@]}" >"$LOG/$id.client" 2>&1
            crc=$?
        else
            echo "(pair: A's server never became ready)" >"$LOG/$id.client"
        fi
        : >"$SYNC/$id.client-done"
        wait_file "$SYNC/$id.server-done" 60 && src=$(<"$SYNC/$id.server-done") || src=none
        judge "$prov" "$loss" "$name" "$crc" "$src" "$LOG/$id.client" "$LOG/$id.server" $((SECONDS - t0))
    fi
}

# judge PROVIDER LOSS NAME CLIENT_RC SERVER_RC CLIENT_LOG SERVER_LOG SECONDS
judge() {
    local prov=$1 loss=$2 name=$3 crc=$4 src=$5 c=$6 s=$7 took=$8 ok=0 detail=""
    case $name in
    dtestsrq)
        grep -q "DAPL RC SRQ Test Complete." "$c" && grep -q "DAPL RC SRQ Test Complete." "$s" && ok=1 ;;
    dtest)
        grep -q "Test Complete. PASSED" "$c" && grep -q "Test Complete. PASSED" "$s" && ok=1
        detail=$(grep -hoE 'latency +[0-9.]+ us|[0-9.]+ MB/sec' "$c" | tr '\n' ' ') ;;
    dapltest)
        grep -q "Total WQE" "$c" && ! grep -qiE "error|fail|mismatch" "$c" && ok=1
        detail=$(grep -h "Total WQE" "$c" | tr -s ' ' | head -1) ;;
    dat_perf)
        local last
        last=$(dat_perf_max "$loss")
        grep -qE '^lat +4096 ' "$c" && grep -qE "^bw +$last " "$c" && ok=1
        detail=$(awk -v last=$last '$1=="lat" && ($2==8 || $2==4096) { printf "lat %s B %s us; ", $2, $4 }
                      $1=="bw" && $2==last { printf "bw %d KiB %s MB/s, %s msg/s", last / 1024, $6, $7 }' "$c") ;;
    esac
    [ "$crc" = 0 ] || ok=0
    { [ "$src" = 0 ] || [ "$src" = 143 ]; } || ok=0 # 143: stopped after its client ended well
    grep -qE 'Segmentation|Aborted|core dumped' "$c" "$s" 2>/dev/null && ok=0
    local verdict=ok
    [ $ok = 1 ] || verdict=FAIL detail="client rc=$crc server rc=$src; $detail"
    # dtestsrq's own race under loss: the client checks every reply, then
    # disconnects at once (abruptly); when the ACK of a server's last reply
    # was lost, the server's retransmission finds the client's queue pair
    # gone and that send completes as flushed (status 1), the server's only
    # error. No provider can complete it; pair.sh reports it, not counts it.
    if [ $ok = 0 ] && [ "$name" = dtestsrq ] && [ "$loss" != clean ] && [ "$crc" = 0 ] && [ "$src" = 0 ] &&
        grep -q "DAPL RC SRQ Test Complete." "$c" &&
        [ "$(grep -vE '^( ERR: Checking ASYNC EVD| ASYNC EVD ENTRY|fastdapl: |libdat2: )' "$s" | grep -iE 'err')" = " ERROR: DTO REQ size 0, status 1" ]; then
        verdict=race detail="the client saw every reply; the server's last send was flushed by its disconnect (an ACK lost)"
    fi
    # The other one, of dtestsrq and dtest alike: the client saw every
    # reply and disconnected, then exited; its disconnect request was lost
    # twice within the 8 s our dat_ia_close waits for its answer, and a
    # request is not sent again once its id is gone, so the server waits for
    # DISCONNECTED until it is stopped. Counted as a race only when the
    # server printed no error and the kernel still had its connections
    # established (state CONNECT, none DISCONNECT) when it was stopped: a
    # disconnect the kernel had seen and the provider not reported is a
    # failure.
    local cmf=${s%.server}.server-cm done_c="" up_s=""
    case $name in
    dtestsrq) done_c="DAPL RC SRQ Test Complete." up_s="CONNECTED on server" ;;
    dtest) done_c="Test Complete. PASSED" up_s="CONNECTED!" ;;
    esac
    if [ $ok = 0 ] && [ -n "$done_c" ] && [ "$loss" != clean ] && [ "$crc" = 0 ] && [ "$src" = 143 ] &&
        grep -q "$done_c" "$c" && grep -q "$up_s" "$s" && ! grep -qiE 'err' "$s" &&
        [ -f "$cmf" ] && grep -qE "state CONNECT .*comm $name( |$)" "$cmf" && ! grep -q "state DISCONNECT" "$cmf"; then
        verdict=race detail="the client saw every reply; its disconnect request never reached the server's kernel (lost, not resent after the client exited)"
    fi
    printf '%s\t%s\t%s\t%s\t%s (%ss)\n' "$prov" "$loss" "$name" "$verdict" "$detail" "$took" >>"$OUT/results.tsv"
    printf '[%4ds] %-4s %-6s %-22s %-4s %s\n' $SECONDS "$prov" "$loss" "$name" "$verdict" "$detail"
}

dat_perf_max() { [ "$1" = clean ] && echo 65536 || echo 8192; } # LOSS: dat_perf's largest size (run_group)

run_group() { # LOSS
    local loss=$1 prov
    # Under loss each lost packet waits for rxe's retransmission timer (about
    # a second here: dat_perf's p99 was 1.2 s), and a message of 16 KiB and
    # up (16 packets or more) rarely gets through whole before the next
    # loss sends rxe back to its start (one 64 KiB message took 5.8 s one
    # way). So a lossy run does a tenth of the clean one's iterations
    # (dapltest), and dat_perf 10 per size up to 8 KiB: the clean counts
    # could not finish within any limit CI can give (dat_perf's 8 and 16 B
    # alone took 100 s each).
    local dapltest_iters=100 dat_perf_iters=200 max
    [ "$loss" = clean ] || dapltest_iters=10 dat_perf_iters=10
    max=$(dat_perf_max "$loss")
    for prov in ours ref; do
        step dtest "$prov" "$loss" tcp:15828 120 -- dtest -P {IA} -s -b 4096 -B 10 -- dtest -P {IA} -h "$SERVER_IP" -b 4096 -B 10
        # dtestsrq listens on qualifier 45248 only (an rdma_cm listener)
        step dtestsrq "$prov" "$loss" cm:45248 60 -- dtestsrq -P {IA} -s -c 4 -B 5 -t 5 -- dtestsrq -P {IA} -h "$SERVER_IP" -c 4 -B 5 -t 5
        step dapltest "$prov" "$loss" "log:$LOG/$prov.$loss.dapltest.server:Service Point Ready" 150 \
            -- dapltest -T S -D {IA} \
            -- bash -c 'dapltest -T T -s "$0" -D "$1" -i "$2" -t 2 -w 2 client SR 4096 2 server SR 4096 2 client RR 4096 1 server RW 4096 1; rc=$?; dapltest -T Q -s "$0" -D "$1" >/dev/null 2>&1; exit $rc' "$SERVER_IP" {IA} "$dapltest_iters"
        # dat_evd_wait, not busy polling (-b): each guest has one vCPU, which
        # a polling process takes from rxe's packet processing (4 ms ticks)
        step dat_perf "$prov" "$loss" cm:47000 200 -- "$DAT_PERF" -s -P {IA} -p 47000 -m 8 -M "$max" -n "$dat_perf_iters" \
            -- "$DAT_PERF" -h "$SERVER_IP" -P {IA} -p 47000 -m 8 -M "$max" -n "$dat_perf_iters"
    done
}

[ "$ROLE" = B ] && : >"$OUT/results.tsv"
echo "== pair guest $ROLE: $(uname -r), $DEV on $NETDEV $MYIP, peer $PEER, build $BUILD"
run_group clean
# 5% of what each guest sends, so 5% each way
tc qdisc add dev "$NETDEV" root netem loss 5% || echo "pair guest $ROLE: cannot add netem loss"
for ((r = 1; r <= PAIR_ROUNDS; r++)); do
    [ "$r" = 1 ] && ROUND="" || ROUND=".r$r"
    run_group loss5
done
tc -s qdisc show dev "$NETDEV" | sed "s/^/[$ROLE netem] /" | head -4
exit 0 # pair.sh judges results.tsv
