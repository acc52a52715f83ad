#!/usr/bin/env bash
# Debian's dtest and dtestsrq, server and client, on the fastdapl-tcp IA over
# loopback: dtest's default run, -W ping-pong and -D (ping-pong with data
# validation, 64 KiB buffers to keep it short); dtestsrq with 100
# connections sharing one SRQ per side, in bursts, and with UD endpoints
# (-u: datagrams into the SRQ). Each with our libdat2
# (LD_LIBRARY_PATH) and with Debian's libdat2 hosting our provider
# (DAT_OVERRIDE only).
# usage: dtest_pairs.sh LIBDAT2_DIR PROVIDER_CONF [validate-4m-x20]
# FASTDAPL_PEERS_IA names another IA of PROVIDER_CONF (fastdapl-shm).
# With validate-4m-x20, only dtest -W -D at 4 MiB (each side polls on the
# last byte of the other's RDMA write, then checks every byte), 100
# ping-pongs a pair (-B; dtest's default of 1000 takes a minute), 20 pairs
# in a row through our libdat2: the softnic places a write's last byte last.
# dtest prints FAILED yet exits 0: the check reads its output (dtestsrq
# prints its last line only when every step passed).
set -uo pipefail
libdir=$(cd "$1" && pwd)
conf=$2
mode=${3:-all}
ia=${FASTDAPL_PEERS_IA:-fastdapl-tcp}
if ! command -v dtest >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then echo "dtest_pairs: dapl2-utils missing (required under CI)"; exit 1; fi
    echo "dtest_pairs: SKIP: dapl2-utils not installed"; exit 77
fi
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
fail=0
# dtest's server first listens on TCP 15828 (0x3DD4) for its own exchange
# of parameters, then on connection qualifier 45248 (0xB0C0); dtestsrq's
# on 45248 only.
. "$(dirname "$0")/listening.sh"
listening() { listening_on 15828 45248; }

run_pair() { # program, label, registry(ours|debian), options...
    local program=$1 label=$2 registry=$3; shift 3
    local passed="Test Complete. PASSED"
    [ "$program" = dtestsrq ] && passed="DAPL RC SRQ Test Complete."
    case " $* " in *" -u "*) passed="DAPL UD SRQ Test Complete." ;; esac
    local env_lib=()
    [ "$registry" = ours ] && env_lib=(env "LD_LIBRARY_PATH=$libdir")
    "${env_lib[@]}" env DAT_OVERRIDE="$conf" timeout 120 stdbuf -oL $program -P "$ia" -s "$@" >"$work/server.$label" 2>&1 &
    local server=$!
    for _ in $(seq 1 200); do listening && break; sleep 0.05; done # wait for the listener, not a fixed time
    "${env_lib[@]}" env DAT_OVERRIDE="$conf" timeout 120 stdbuf -oL $program -P "$ia" -h 127.0.0.1 "$@" \
        >"$work/client.$label" 2>&1
    wait $server
    if grep -q "$passed" "$work/client.$label" && grep -q "$passed" "$work/server.$label"; then
        echo "ok: $program $label on $ia ($(grep -Eo '[0-9.]+ MB/sec|BW [0-9.]+ MB/s|[0-9.]+ us/iteration|itime=[0-9.]+ us|ALL [0-9]+ CONNECTED' "$work/client.$label" | head -1))"
    else
        echo "FAIL: $program $label"; echo "--- client"; tail -15 "$work/client.$label"; echo "--- server"; tail -15 "$work/server.$label"
        fail=1
    fi
    # The next server must find the qualifier free.
    for _ in $(seq 1 100); do listening || break; sleep 0.05; done
}

if [ "$mode" = validate-4m-x20 ]; then
    for i in $(seq 1 20); do
        run_pair dtest "validate-4m-$i-ours" ours -W -D -b 4194304 -B 100
        [ $fail = 0 ] || break # the first failure says it; no need for 19 more
    done
    exit $fail
fi

for registry in ours debian; do
    run_pair dtest default-$registry $registry
    run_pair dtest pingpong-$registry $registry -W
    run_pair dtest polling-$registry $registry -W -p # polls while dequeue answers DAT_QUEUE_EMPTY
    run_pair dtest validate-$registry $registry -D -b 65536
    # 100 connections per side on one SRQ each; 10 bursts of 10 messages per
    # connection; then the default (one message, MTU-sized buffers).
    run_pair dtestsrq c100-bursts-$registry $registry -c 100 -B 10 -t 10
    run_pair dtestsrq default-$registry $registry
    run_pair dtestsrq ud-$registry $registry -u
    run_pair dtestsrq ud-c20-bursts-$registry $registry -u -c 20 -B 10 -t 10
done
exit $fail
