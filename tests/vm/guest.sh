#!/usr/bin/env bash
# Runs INSIDE the Soft-RoCE guest booted by tests/vm/run.sh (rxe-vm.sh), as
# root, with rxe0 on the dummy netdev $RXE_NETDEV at $RXE_IP. Side by side on
# that one device:
#   perftest   ib_send_lat, ib_write_lat (8 B, 4 KiB), ib_write_bw (4, 64 KiB)
#   reference  Debian's libdat2 + libdaplofa (rdma_cm): dtest, dtestsrq;
#              scm/ucm dtest runs as extra information
#   ours       our libdat2 + libfastdapl on IA fastdapl-rxe0-1: dat_info,
#              dtest, dtestsrq, dapltest -T T, dat_perf; the gtest provider
#              programs (report only: they open "fastdapl-tcp", see below),
#              but for test_ib_extensions and test_rmr's zero-based window
#              and send-with-invalidate tests (FASTDAPL_RXE_WINDOWS=1)
# then prints a latency/bandwidth table and one line per test.
# Exit status: 0 when every test of ours passed, 1 otherwise. Reference and
# perftest failures are reported, never counted.
# usage: guest.sh BUILD_DIR OUT_DIR [BUDGET_S]  (steps past BUDGET_S, default 900,
#        are skipped and reported as failures)
#
# Under TCG emulation every fork/exec costs ~0.1-0.3 s: waits poll with bash
# builtins (read of /proc/net/tcp, read -t on a fifo) instead of grep+sleep.
set -uo pipefail
BUILD=$(cd "${1:?usage: guest.sh BUILD_DIR OUT_DIR}" && pwd)
OUT=${2:?usage: guest.sh BUILD_DIR OUT_DIR}
mkdir -p "$OUT/logs"
LOG=$OUT/logs
DEV=${RXE_DEV:-rxe0}
NETDEV=${RXE_NETDEV:-dummy0}
IP=${RXE_IP:?RXE_IP unset: run me through tests/vm/run.sh}
OUR_IA=fastdapl-${DEV}-1
REF_IA=ofa-v2-cma-roe-$NETDEV   # the stock /etc/dat.conf name when NETDEV=eth2
T_START=$SECONDS
BUDGET=${3:-900} # s: later steps are skipped (and fail, for ours) past this

# ------------------------------------------------------------------ helpers
# nap: sleep without a fork (read -t on a fifo that never gets data)
tick=$(mktemp -u /tmp/vm-tick.XXXXXX)
if mkfifo "$tick" && exec 8<>"$tick"; then
    rm -f "$tick"
    nap() { read -r -t "${1:-0.1}" -u 8 _ || :; }
else
    nap() { sleep "${1:-0.1}"; }
fi

# port_listening PORT: a TCP listener on PORT (/proc/net/tcp{,6}, builtins only)
port_listening() {
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
# cm_listening PORT: an rdma_cm listener on PORT (not visible in /proc/net/tcp)
cm_listening() { [[ $(rdma res show cm_id 2>/dev/null) == *"state LISTEN"*":$1 "* ]]; }

# wait_ready SPEC PID SECONDS: SPEC is tcp:PORT, cm:PORT, any:PORT (either)
# or log:FILE:TEXT (TEXT appears in FILE). Fails early when PID exits.
wait_ready() {
    local spec=$1 pid=$2 limit=$3 kind arg file text
    kind=${spec%%:*} arg=${spec#*:}
    local end=$((SECONDS + limit))
    while [ $SECONDS -lt $end ]; do
        case $kind in
        tcp) port_listening "$arg" && return 0 ;;
        cm) cm_listening "$arg" && return 0 ;;
        any) { port_listening "$arg" || cm_listening "$arg"; } && return 0 ;;
        log) file=${arg%%:*} text=${arg#*:}
             [ -f "$file" ] && [[ $(<"$file") == *"$text"* ]] && return 0 ;;
        esac
        kill -0 "$pid" 2>/dev/null || return 1
        nap 0.1
    done
    return 1
}

# wait_pid PID SECONDS: wait for PID; TERM (then KILL) it after SECONDS.
# Sets WAIT_RC to its exit status (124: we had to stop it).
wait_pid() {
    local pid=$1 end=$((SECONDS + $2))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do nap 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null; nap 2; kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null; WAIT_RC=124; return
    fi
    wait "$pid"; WAIT_RC=$?
}

POLL= GRACE=10 DTEST_LIMIT=60 SRQ_LIMIT=30 # per-group settings of run_dtest/run_dtestsrq

# Results: one line per test in $OUT/results.tsv, metrics in $OUT/metrics.tsv.
declare -A M         # M[key] = value (see table at the end)
OURS_FAILED=0
: >"$OUT/results.tsv"; : >"$OUT/metrics.tsv"
over_budget() { # group name: true (and reports the skip) once past BUDGET
    [ $((SECONDS - T_START)) -lt "$BUDGET" ] && return 1
    result "$1" "$2" FAIL "skipped: guest time budget of ${BUDGET}s spent"
}
result() { # group name status detail
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$OUT/results.tsv"
    printf '[%4ds] %-9s %-34s %-5s %s\n' $((SECONDS - T_START)) "$1" "$2" "$3" "$4"
    [ "$1" = ours ] && [ "$3" != ok ] && OURS_FAILED=1
    return 0
}
metric() { M[$1]=$2; printf '%s\t%s\n' "$1" "$2" >>"$OUT/metrics.tsv"; }
tail_logs() { local f; for f in "$@"; do [ -f "$f" ] || continue; echo "    --- ${f#"$OUT"/}"; tail -n 8 "$f" | sed 's/^/    | /'; done; }

# pair NAME READY_SPEC SECONDS [GRACE]: runs the server command in array SRV,
# waits until it is ready, then the client command in array CLI (both with
# the environment in array ENVV, under timeout, output line-buffered); the
# server gets GRACE s (default 10) after the client to exit, then is stopped.
# Sets SRC/CRC (exit codes; 124 = timed out or stopped) and READY (0/1).
pair() {
    local name=$1 spec=$2 limit=$3 grace=${4:-10} spid
    local s=$LOG/$name.server c=$LOG/$name.client
    : >"$s"; : >"$c"
    env "${ENVV[@]}" timeout -k 5 $((limit + 30)) stdbuf -oL -eL "${SRV[@]}" >"$s" 2>&1 &
    spid=$!
    if wait_ready "$spec" $spid 60; then
        READY=1
        env "${ENVV[@]}" timeout -k 5 "$limit" stdbuf -oL -eL "${CLI[@]}" >"$c" 2>&1
        CRC=$?
        wait_pid $spid "$grace"; SRC=$WAIT_RC
    else
        READY=0; CRC=-1
        echo "(harness: server not ready within 60 s or exited; client not started)" >"$c"
        wait_pid $spid 1; SRC=$WAIT_RC
    fi
}
rcs() { [ "$READY" = 1 ] && echo "client rc=$CRC server rc=$SRC" || echo "server never listened (rc=$SRC)"; }
# has FILE TEXT / has_re FILE ERE (grep once per call: forks are dear here)
has() { grep -qF -- "$2" "$1" 2>/dev/null; }
bad_words() { grep -qE -- 'FAILED|[Ee]rror|Segmentation|Aborted|core dumped' "$@" 2>/dev/null; }

# dtest result lines
dtest_parse() { # file prefix: sets metrics prefix.{send_lat,write_lat,bw}
    local f=$1 p=$2 v
    v=$(sed -nE 's/.*Message PingPong: .* latency +([0-9.]+) us.*/\1/p' "$f" | tail -1); [ -n "$v" ] && metric "$p.send_lat" "$v"
    v=$(sed -nE 's/.*RDMA write PingPong: .* latency +([0-9.]+) us.*/\1/p' "$f" | tail -1); [ -n "$v" ] && metric "$p.write_lat" "$v"
    v=$(sed -nE 's/.*RDMA write \(bi-direction\).* ([0-9.]+) MB\/sec.*/\1/p' "$f" | tail -1); [ -n "$v" ] && metric "$p.bw" "$v"
    return 0
}

# dtest_pair GROUP LABEL CONF PROVIDER SIZE [options]: Debian's dtest
run_dtest() {
    local group=$1 label=$2 ia=$3 size=$4; shift 4
    over_budget "$group" "dtest $label" && return
    SRV=(dtest -P "$ia" -s "$@") CLI=(dtest -P "$ia" -h "$IP" "$@")
    # dtest's server opens a TCP socket of its own on 15828 (0x3DD4) to hand
    # its address to the client, after its PSP is up: that is the ready signal.
    pair "$group.dtest.$label" tcp:15828 "$DTEST_LIMIT" "$GRACE"
    local c=$LOG/$group.dtest.$label.client s=$LOG/$group.dtest.$label.server
    # numbers are kept even when the run fails afterwards (at disconnect, say)
    dtest_parse "$c" "$group.dtest.$size$POLL"
    if [ "$READY" = 1 ] && [ "$CRC" = 0 ] && has "$c" "Test Complete. PASSED" && has "$s" "Test Complete. PASSED" &&
        ! bad_words "$c" "$s"; then
        result "$group" "dtest $label" ok "$(grep -hoE 'latency +[0-9.]+ us|[0-9.]+ MB/sec' "$c" | tr '\n' ' ')"
    else
        result "$group" "dtest $label" FAIL "$(rcs)"
        tail_logs "$c" "$s"
    fi
}

# run_dtestsrq GROUP LABEL IA [options]
run_dtestsrq() {
    local group=$1 label=$2 ia=$3; shift 3
    over_budget "$group" "dtestsrq $label" && return
    SRV=(dtestsrq -P "$ia" -s "$@") CLI=(dtestsrq -P "$ia" -h "$IP" "$@")
    # dtestsrq listens on connection qualifier 45248 only: an rdma_cm listener
    # for libdaplofa, perhaps a TCP one for ours: accept either.
    pair "$group.dtestsrq.$label" any:45248 "$SRQ_LIMIT" "$GRACE"
    local c=$LOG/$group.dtestsrq.$label.client s=$LOG/$group.dtestsrq.$label.server
    local done="DAPL RC SRQ Test Complete."
    case " $* " in *" -u "*) done="DAPL UD SRQ Test Complete." ;; esac
    if [ "$READY" = 1 ] && [ "$CRC" = 0 ] && has "$c" "$done" && has "$s" "$done" &&
        ! bad_words "$c" "$s"; then
        result "$group" "dtestsrq $label" ok "$(grep -hoE 'ALL [0-9]+ CONNECTED' "$c" | head -1)"
    elif [ "$READY" = 1 ] && [ "$CRC" = 124 ] && has "$c" "CONNECTED"; then
        result "$group" "dtestsrq $label" FAIL "client hung after '$(grep -hoE 'ALL [0-9]+ CONNECTED' "$c" | head -1)' (timeout ${SRQ_LIMIT}s; server rc=$SRC)"
    else
        result "$group" "dtestsrq $label" FAIL "$(rcs)"
        tail_logs "$c" "$s"
    fi
}

# run_dtestx GROUP LABEL IA [options]: Debian's dtestx (the IB extensions:
# RDMA write with immediate data, compare and swap, fetch and add; -p adds
# the counters; -u, -U N: UD endpoints, whose client must say -c). Like
# dtest, its server hands its address to the client on TCP 15828 once its
# PSP is up.
run_dtestx() {
    local group=$1 label=$2 ia=$3; shift 3
    over_budget "$group" "dtestx $label" && return
    local passed="IB extension test - immed/atomic test PASSED" client_mode=()
    case " $* " in *" -u "* | *" -U "*) client_mode=(-c) passed="IB extension test - UD test PASSED" ;; esac
    SRV=(dtestx -P "$ia" "$@") CLI=(dtestx -P "$ia" "${client_mode[@]}" -h "$IP" "$@")
    pair "$group.dtestx.$label" tcp:15828 "$DTEST_LIMIT" "$GRACE"
    local c=$LOG/$group.dtestx.$label.client s=$LOG/$group.dtestx.$label.server
    if [ "$READY" = 1 ] && [ "$CRC" = 0 ] && has "$c" "$passed" && has "$s" "$passed" && ! bad_words "$c" "$s"; then
        result "$group" "dtestx $label" ok ""
    else
        result "$group" "dtestx $label" FAIL "$(rcs)"
        tail_logs "$c" "$s"
    fi
}

echo "== vm-rxe guest: $(uname -r), $(nproc) vCPUs, $DEV on $NETDEV $IP, build $BUILD"

# ------------------------------------------------------------------ a. perftest
PT_LIMIT=120
ENVV=(-u LD_LIBRARY_PATH -u DAT_OVERRIDE)
perftest_value() { # size kind file: t_typical (lat) or BW average (bw), when a number
    awk -v s="$1" -v k="$2" '$1==s && $2 ~ /^[0-9]+$/ && NF>=5 { v = (k=="lat") ? $5 : $4; if (v ~ /^[0-9.]+$/) print v }' "$3" | tail -1
}
perftest() { # program size iterations kind(lat|bw)
    local prog=$1 size=$2 n=$3 kind=$4 name="perftest.$1.$2" v
    over_budget perftest "$prog -s $size -n $n" && return
    SRV=("$prog" -d "$DEV" -s "$size" -n "$n") CLI=("$prog" -d "$DEV" -s "$size" -n "$n" "$IP")
    pair "$name" tcp:18515 $PT_LIMIT # perftest's own TCP exchange port
    local c=$LOG/$name.client s=$LOG/$name.server
    # lat: "#bytes #iterations t_min t_max t_typical t_avg ..."
    # bw:  "#bytes #iterations BW_peak BW_average MsgRate"
    # Under emulation perftest's CPU-MHz estimate can fail on one side ("inf"
    # in every column): then the other side's line is used.
    local side=client
    v=$(perftest_value "$size" "$kind" "$c")
    [ -z "$v" ] && [ "$kind" = lat ] && v=$(perftest_value "$size" "$kind" "$s") && side=server
    if [ "$READY" = 1 ] && [ "$CRC" = 0 ] && [ -n "$v" ] && ! bad_words "$c" "$s"; then
        metric "perftest.$prog.$size" "$v"
        result perftest "$prog -s $size -n $n" ok "$v $([ "$kind" = lat ] && echo "us (t_typical, $side)" || echo 'MB/s (BW average)')"
    else
        result perftest "$prog -s $size -n $n" FAIL "$(rcs)$([ -z "$v" ] && echo '; no number in its output')"
        tail_logs "$c" "$s"
    fi
}
if command -v ib_send_lat >/dev/null; then
    for sz in 8 4096; do
        perftest ib_send_lat $sz 1000 lat
        perftest ib_write_lat $sz 1000 lat
    done
    perftest ib_write_bw 4096 1000 bw
    perftest ib_write_bw 65536 200 bw
else
    result perftest "perftest" FAIL "ib_send_lat not installed"
fi

# ------------------------------------------------------------------ b. reference dapl
REF_CONF=/tmp/vm-ref-dat.conf
{
    echo "$REF_IA u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"$NETDEV 0\" \"\""
    echo "ofa-v2-scm-$DEV-1 u2.0 nonthreadsafe default libdaploscm.so.2 dapl.2.0 \"$DEV 1\" \"\""
    echo "ofa-v2-ucm-$DEV-1 u2.0 nonthreadsafe default libdaploucm.so.2 dapl.2.0 \"$DEV 1\" \"\""
} >"$REF_CONF"
cp "$REF_CONF" "$OUT/reference-dat.conf"
ENVV=(-u LD_LIBRARY_PATH DAT_OVERRIDE="$REF_CONF")
# dtest_suite GROUP IA: the dtest runs shared by the reference and ours.
# default: RDMA write (bi-directional bandwidth line), then, only where the
# provider reports provider_specific_attr DAT_IB_RDMA_READ=TRUE, RDMA read
# and a send/recv ping-pong ("Message PingPong" latency line).
# -W: RDMA write ping-pong; -p: poll (dat_evd_dequeue) instead of dat_evd_wait.
dtest_suite() {
    local g=$1 ia=$2
    POLL=
    run_dtest "$g" default-4k "$ia" 4096 -b 4096 -B 10
    run_dtest "$g" default-8 "$ia" 8 -b 8 -B 10
    run_dtest "$g" default-64k "$ia" 65536 -b 65536 -B 10
    run_dtest "$g" pingpong-8 "$ia" 8 -W -b 8 -B 100
    run_dtest "$g" pingpong-4k "$ia" 4096 -W -b 4096 -B 100
    POLL=.poll
    run_dtest "$g" pingpong-8-poll "$ia" 8 -W -p -b 8 -B 200
    run_dtest "$g" pingpong-4k-poll "$ia" 4096 -W -p -b 4096 -B 200
    POLL=
    run_dtest "$g" validate-64k "$ia" 65536 -D -b 65536
}
if command -v dtest >/dev/null; then
    DTEST_LIMIT=60 GRACE=10
    dtest_suite ref "$REF_IA"
    # dtestsrq over rxe connects and moves data, then hangs at disconnect:
    # a short limit, and the server is stopped 3 s after the client.
    SRQ_LIMIT=30 GRACE=3
    run_dtestsrq ref c10-bursts "$REF_IA" -c 10 -B 10 -t 10
    run_dtestsrq ref default "$REF_IA"
    DTEST_LIMIT=60 GRACE=10
    run_dtestx ref default "$REF_IA"
    run_dtestx ref counters "$REF_IA" -p
    run_dtestx ref-info ud "$REF_IA" -u # the reference's UD, beside ours (not counted)
    # the socket-CM (scm) and UD-CM (ucm) providers on the same device
    DTEST_LIMIT=40 GRACE=3
    run_dtest ref-info scm-default-4k "ofa-v2-scm-$DEV-1" scm -b 4096 -B 10
    run_dtest ref-info ucm-default-4k "ofa-v2-ucm-$DEV-1" ucm -b 4096 -B 10
else
    result ref dtest FAIL "dapl2-utils not installed"
fi

# ------------------------------------------------------------------ c. ours
# An IPv6 address too (after the reference ran, so its runs see the port as
# it was): dat_info --conf then lists $OUR_IA-ipv6 as well. rxe adds the
# address's GID when the address appears.
IP6=2001:db8::1
ip -6 addr add "$IP6/64" dev "$NETDEV" nodad >"$LOG/ours.ipv6-setup" 2>&1 || IP6=
OUR_CONF=/tmp/vm-ours-dat.conf
PROV=$BUILD/src/provider/libfastdapl.so.2
LIBDAT=$BUILD/src/registry
DAT_INFO=$BUILD/tools/dat_info/dat_info
conf_src=fallback
if [ -x "$DAT_INFO" ] && LD_LIBRARY_PATH=$LIBDAT timeout 30 "$DAT_INFO" --conf >/tmp/vm-dat-info-conf 2>"$LOG/ours.dat_info-conf.err" &&
    grep -q "^$OUR_IA " /tmp/vm-dat-info-conf; then
    grep -E '^[A-Za-z0-9]' /tmp/vm-dat-info-conf >"$OUR_CONF"
    conf_src="dat_info --conf"
else
    echo "$OUR_IA u2.0 nonthreadsafe default $PROV fastdapl.0.1 \"verbs:$DEV:1\" \"\"" >"$OUR_CONF"
fi
# The gtest provider programs open the IA FASTDAPL_TEST_IA names (default
# fastdapl-tcp); test_provider_api also opens "fastdapl-badif", and
# test_connection_models "fastdapl-tcp-b" (a second IA, to be told apart).
GT_CONF=/tmp/vm-ours-gtest.conf
{
    cat "$OUR_CONF"
    echo "fastdapl-badif u2.0 nonthreadsafe default $PROV fastdapl.0.1 \"no-such-interface0\" \"\""
    echo "fastdapl-tcp-b u2.0 nonthreadsafe default $PROV fastdapl.0.1 \"127.0.0.1\" \"\""
} >"$GT_CONF"
cp "$OUR_CONF" "$OUT/ours-dat.conf"
echo "== ours: dat.conf from $conf_src:"; sed 's/^/   /' "$OUR_CONF"
ENVV=(LD_LIBRARY_PATH="$LIBDAT" DAT_OVERRIDE="$OUR_CONF")

# c.0 the IA opens at all (dat_info opens every IA it lists and prints its attributes)
if [ -x "$DAT_INFO" ]; then
    env "${ENVV[@]}" FASTDAPL_DEBUG=1 timeout 30 "$DAT_INFO" "$OUR_IA" >"$LOG/ours.dat_info" 2>&1
    rc=$?
    if [ $rc = 0 ] && ! bad_words "$LOG/ours.dat_info" && ! has "$LOG/ours.dat_info" "cannot open"; then
        result ours "dat_info $OUR_IA (IA opens)" ok ""
    else
        result ours "dat_info $OUR_IA (IA opens)" FAIL "rc=$rc: $(grep -hE 'cannot open|returned|[Ee]rror' "$LOG/ours.dat_info" | head -2 | tr -s ' ' | tr '\n' ' ')"
    fi
fi

# c.1 Debian's dtest, dtestsrq on our libdat2 and provider
if command -v dtest >/dev/null; then
    DTEST_LIMIT=60 GRACE=10
    dtest_suite ours "$OUR_IA"
    SRQ_LIMIT=90 GRACE=10
    run_dtestsrq ours c10-bursts "$OUR_IA" -c 10 -B 10 -t 10
    run_dtestsrq ours default "$OUR_IA"
    DTEST_LIMIT=60 GRACE=10
    run_dtestx ours default "$OUR_IA"
    run_dtestx ours counters "$OUR_IA" -p
    # UD endpoints (the generic verbs path): four exchanges on one EP each
    # side, four EPs, the multi-server mode, UD into an SRQ.
    run_dtestx ours ud "$OUR_IA" -u
    run_dtestx ours ud-4-eps "$OUR_IA" -U 4
    run_dtestx ours ud-multi-server "$OUR_IA" -u -m
    run_dtestsrq ours ud "$OUR_IA" -u
fi

# c.2 dapltest transactions (as tests/provider/dapltest_transactions.sh)
if command -v dapltest >/dev/null && ! over_budget ours "dapltest"; then
    s=$LOG/ours.dapltest.server
    env "${ENVV[@]}" timeout -k 5 600 stdbuf -oL dapltest -T S -D "$OUR_IA" >"$s" 2>&1 &
    dsrv=$!
    if wait_ready "log:$s:Service Point Ready" $dsrv 60; then
        dapl_t() { # label, transaction arguments
            local label=$1 f=$LOG/ours.dapltest.$1; shift
            over_budget ours "dapltest -T T $label" && return
            env "${ENVV[@]}" timeout -k 5 120 stdbuf -oL dapltest -T T -s "$IP" -D "$OUR_IA" "$@" >"$f" 2>&1
            local rc=$?
            if [ $rc -ne 0 ] || ! has "$f" "Total WQE" || grep -qiE "error|fail|mismatch" "$f"; then
                result ours "dapltest -T T $label" FAIL "rc=$rc$([ $rc = 124 ] && echo ' (timed out after 120 s)')"; tail_logs "$f"
            else
                result ours "dapltest -T T $label" ok "$(grep 'Total WQE' "$f" | tr -s ' ' | head -1)"
            fi
        }
        dapl_t send-recv -i 100 client SR 4096 2 server SR 4096 2
        dapl_t threads-eps-read-write -i 100 -t 2 -w 2 client SR 4096 2 server SR 4096 2 client RR 4096 1 server RW 4096 1
        dapl_t validated -V -i 50 -t 2 -w 2 client SR 1024 1 server RW 1024 1 client RR 1024 1
        env "${ENVV[@]}" timeout 30 dapltest -T Q -s "$IP" -D "$OUR_IA" >"$LOG/ours.dapltest.quit" 2>&1
        wait_pid $dsrv 15
        if [ "$WAIT_RC" = 124 ]; then result ours "dapltest -T Q stops the server" FAIL "server still up 15 s later"
        else result ours "dapltest -T Q stops the server" ok "server rc=$WAIT_RC"; fi
    else
        wait_pid $dsrv 1
        result ours "dapltest -T S (server)" FAIL "no 'Service Point Ready' (rc=$WAIT_RC)"
        tail_logs "$s"
    fi
fi

# c.3 dat_perf, server and client processes: busy polling (-b, the one to
# compare with perftest), then waiting in dat_evd_wait (latency only)
DAT_PERF=$BUILD/tools/dat_perf/dat_perf
dat_perf_pair() { # label suffix client-options...   (env PERF_IA, PERF_IP: another IA)
    local label=$1 sfx=$2 sz v ia=${PERF_IA:-$OUR_IA} host=${PERF_IP:-$IP}; shift 2
    over_budget ours "dat_perf $label" && return
    SRV=("$DAT_PERF" -s -P "$ia" -p 47000 "$@") CLI=("$DAT_PERF" -h "$host" -P "$ia" -p 47000 "$@")
    pair "ours.dat_perf.$label" any:47000 300
    local c=$LOG/ours.dat_perf.$label.client
    for sz in 8 4096 65536; do # numbers are kept even when the run fails afterwards
        v=$(awk -v s=$sz '$1=="lat" && $2==s {print $4}' "$c"); [ -n "$v" ] && metric "ours.dat_perf$sfx.$sz.lat" "$v"
        v=$(awk -v s=$sz '$1=="bw" && $2==s {print $6}' "$c"); [ -n "$v" ] && metric "ours.dat_perf$sfx.$sz.bw" "$v"
    done
    if [ "$READY" = 1 ] && [ "$CRC" = 0 ] && [ "$SRC" = 0 ] && grep -qE '^lat +4096 ' "$c" && ! bad_words "$c"; then
        result ours "dat_perf $label" ok "lat 8 B ${M[ours.dat_perf$sfx.8.lat]:-?} us, 4 KiB ${M[ours.dat_perf$sfx.4096.lat]:-?} us; bw 64 KiB ${M[ours.dat_perf$sfx.65536.bw]:--} MB/s"
    else
        result ours "dat_perf $label" FAIL "$(rcs)"
        tail_logs "$c" "$LOG/ours.dat_perf.$label.server"
    fi
}
if [ -x "$DAT_PERF" ]; then
    dat_perf_pair busy-poll .poll -b -m 8 -M 65536 -n 500
    dat_perf_pair evd-wait "" -t lat -m 8 -M 4096 -n 200
    # the same device through its IPv6 address (rdma_cm over IPv6, RoCE v2 GID)
    if [ -n "$IP6" ] && grep -q "^$OUR_IA-ipv6 " "$OUR_CONF"; then
        PERF_IA=$OUR_IA-ipv6 PERF_IP=$IP6 dat_perf_pair ipv6-busy-poll .ipv6 -b -m 8 -M 4096 -n 200
    else
        result ours "dat_perf ipv6-busy-poll" FAIL "no IA $OUR_IA-ipv6 (address ${IP6:-not added}; see $LOG/ours.ipv6-setup)"
    fi
fi

# c.3b uDAPL against plain verbs in one process (bench/gbench_verbs_vs_dat):
# the same ping-pong and RDMA-write post+poll through our IA and through
# libibverbs on $DEV, every message checked where it lands; prints the
# ratio table (kept for the end). ~10 s of guest time.
GBENCH=$BUILD/bench/gbench_verbs_vs_dat
if [ ! -x "$GBENCH" ]; then
    result ours-info "gbench_verbs_vs_dat" FAIL "not built (libbenchmark-dev missing?)"
elif ! over_budget ours "gbench_verbs_vs_dat"; then
    f=$LOG/ours.gbench
    env "${ENVV[@]}" timeout -k 5 90 "$GBENCH" --device="$DEV:1" --ia="$OUR_IA" --benchmark_min_time=0.2 \
        --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
        --benchmark_out="$OUT/gbench.json" --benchmark_out_format=json >"$f" 2>&1
    rc=$?
    # the table: "pair dat verbs ratio" after its header line
    GBENCH_TABLE=$(sed -n '/^pair (time\/iteration)/,/^gbench_verbs_vs_dat:/p' "$f" | grep -v '^gbench_verbs_vs_dat:')
    while read -r pair dat verbs ratio; do
        case $pair in pingpong/* | post_poll) metric "ours.gbench.$pair.ratio" "$ratio" ;; esac
    done <<<"$GBENCH_TABLE"
    if [ $rc = 0 ] && has "$f" "moved and checked its bytes" && [ "$(grep -cE '^(pingpong|post_poll).* [0-9.]+$' <<<"$GBENCH_TABLE")" = 3 ]; then
        result ours "gbench_verbs_vs_dat (dat vs verbs)" ok "ratio dat/verbs: pingpong/8 ${M[ours.gbench.pingpong/8.ratio]:-?}, pingpong/4096 ${M[ours.gbench.pingpong/4096.ratio]:-?}, post_poll ${M[ours.gbench.post_poll.ratio]:-?}"
    else
        result ours "gbench_verbs_vs_dat (dat vs verbs)" FAIL "rc=$rc$([ $rc = 124 ] && echo ' (timed out after 90 s)')"
        tail_logs "$f"
    fi
fi

# c.4 the gtest provider programs on the verbs IA (FASTDAPL_TEST_IA).
# test_ib_extensions counts (group ours); the others report only (group
# ours-info): some of their tests still assume the software NIC (private
# data above 56 bytes, high watermarks, SRQ takes visible before completions
# are polled).
run_gtest() { # group program
    local group=$1 t=$2 bin=$BUILD/tests/provider/$2 rc sum
    [ -x "$bin" ] || { [ "$group" = ours ] && result "$group" "gtest $t on $OUR_IA" FAIL "not built"; return; }
    over_budget "$group" "gtest $t" && return
    LD_LIBRARY_PATH=$LIBDAT DAT_OVERRIDE=$GT_CONF FASTDAPL_TEST_IA=$OUR_IA timeout -k 5 120 "$bin" >"$LOG/$group.$t" 2>&1
    rc=$?
    sum=$(grep -hE '^\[  (PASSED|FAILED|SKIPPED)  \] [0-9]+ test' "$LOG/$group.$t" | tr -s ' ' | tr '\n' ' ')
    if [ $rc = 0 ]; then result "$group" "gtest $t on $OUR_IA" ok "$sum"
    else result "$group" "gtest $t on $OUR_IA" FAIL "rc=$rc$([ $rc = 124 ] && echo ' (timed out)') $sum"; fi
}
run_gtest ours test_ib_extensions
for t in test_provider_api test_notification test_connection_models test_two_process test_srq test_rmr; do
    run_gtest ours-info $t
done
# test_rmr's zero-based windows, sends that invalidate, a flushed rebind and an
# EP-scoped window moved between EPs, with rxe's
# windows offered (FASTDAPL_RXE_WINDOWS=1; README says why they are off by
# default): these count. The other window tests check confinement, which
# rxe does not give. ~100 s, most of it the kernel tearing down QPs that
# had type 2 windows bound.
if [ ! -x "$BUILD/tests/provider/test_rmr" ]; then
    result ours "gtest test_rmr (rxe windows) on $OUR_IA" FAIL "not built"
elif ! over_budget ours "gtest test_rmr (rxe windows)"; then
    LD_LIBRARY_PATH=$LIBDAT DAT_OVERRIDE=$GT_CONF FASTDAPL_TEST_IA=$OUR_IA FASTDAPL_RXE_WINDOWS=1 timeout -k 5 240 \
        "$BUILD/tests/provider/test_rmr" \
        --gtest_filter='*ZeroBasedWindowIsAddressedFromZero*:*SendWithInvalidate*:*SendInvalidatingAnUnknownKey*:*FlushedRebindEndsTheOldBinding*:*EndpointScopedWindowRebindsOnItsEndpointAndOnAnother*' \
        >"$LOG/ours.test_rmr-windows" 2>&1
    rc=$?
    sum=$(grep -hE '^\[  (PASSED|FAILED|SKIPPED)  \] [0-9]+ test' "$LOG/ours.test_rmr-windows" | tr -s ' ' | tr '\n' ' ')
    if [ $rc = 0 ]; then result ours "gtest test_rmr (rxe windows) on $OUR_IA" ok "$sum"
    else result ours "gtest test_rmr (rxe windows) on $OUR_IA" FAIL "rc=$rc$([ $rc = 124 ] && echo ' (timed out)') $sum"; fi
fi

# ------------------------------------------------------------------ d. table
g() { printf '%s' "${M[$1]:--}"; }
sizes() { [ "$1" = 8 ] && echo '8 B' || { [ "$1" = 4096 ] && echo '4 KiB' || echo '64 KiB'; }; }
echo
echo "== Latency, one way (us: round trip / 2; median for dat_perf, t_typical for perftest, mean for dtest)"
echo "   poll = busy polling of the completion queue; wait = dat_evd_wait (sleeps on an event)"
f='%-6s | %8s %8s %8s %8s %8s | %11s %12s | %8s %8s %8s\n'
printf "$f" "" ours ours ours ours ours perftest perftest "ref" "ref" "ref"
printf "$f" "" dat_perf dat_perf dtest-W dtest-W dtest perftest perftest dtest-W dtest-W dtest
printf "$f" size poll wait poll wait send ib_send_lat ib_write_lat poll wait send
for sz in 8 4096; do
    printf "$f" "$(sizes $sz)" \
        "$(g ours.dat_perf.poll.$sz.lat)" "$(g ours.dat_perf.$sz.lat)" \
        "$(g ours.dtest.$sz.poll.write_lat)" "$(g ours.dtest.$sz.write_lat)" "$(g ours.dtest.$sz.send_lat)" \
        "$(g perftest.ib_send_lat.$sz)" "$(g perftest.ib_write_lat.$sz)" \
        "$(g ref.dtest.$sz.poll.write_lat)" "$(g ref.dtest.$sz.write_lat)" "$(g ref.dtest.$sz.send_lat)"
done
echo "   (dtest 'send' is its Message PingPong, run only where the provider reports DAT_IB_RDMA_READ=TRUE)"
echo
echo "== Bandwidth (MB/s)"
f='%-6s | %10s %11s | %11s | %11s\n'
printf "$f" "" "ours" "ours" "perftest" "ref"
printf "$f" "" "dat_perf" "dtest" "ib_write_bw" "dtest"
printf "$f" size "poll,win32" "bidir,wait" "BW average" "bidir,wait"
for sz in 4096 65536; do
    printf "$f" "$(sizes $sz)" "$(g ours.dat_perf.poll.$sz.bw)" "$(g ours.dtest.$sz.bw)" \
        "$(g perftest.ib_write_bw.$sz)" "$(g ref.dtest.$sz.bw)"
done
echo "   (dtest: 20 RDMA writes of that size, both ways at once; dat_perf: 10^6 B/s of RDMA writes, 32 in flight)"
echo
if [ -n "${GBENCH_TABLE:-}" ]; then
    echo "== uDAPL against plain verbs, one process (gbench_verbs_vs_dat: median of 3, busy polling; pingpong = round trip)"
    sed 's/^/   /' <<<"$GBENCH_TABLE"
    echo
fi
echo "== Tests (only 'ours' decides the exit status; perftest, ref, ref-info, ours-info are reported)"
awk -F'\t' '{ printf "  %-5s %-9s %s\n", $3, $1, $2 }' "$OUT/results.tsv"
n_ok=$(awk -F'\t' '$1=="ours" && $3=="ok"' "$OUT/results.tsv" | wc -l)
n_all=$(awk -F'\t' '$1=="ours"' "$OUT/results.tsv" | wc -l)
echo "== ours: $n_ok/$n_all passed; guest time $((SECONDS - T_START)) s; logs in $OUT/logs"
[ "$n_all" -gt 0 ] || OURS_FAILED=1
exit $OURS_FAILED
