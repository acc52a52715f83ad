#!/usr/bin/env bash
# Debian's dtest, server and client, on the fastdapl-tcp IA over loopback:
# default run, -W ping-pong and -D (ping-pong with data validation, 64 KiB
# buffers to keep it short), with our libdat2 (LD_LIBRARY_PATH) and with
# Debian's libdat2 hosting our provider (DAT_OVERRIDE only).
# usage: dtest_pairs.sh LIBDAT2_DIR PROVIDER_CONF
# dtest prints FAILED yet exits 0: the check reads its output.
set -uo pipefail
libdir=$(cd "$1" && pwd)
conf=$2
if ! command -v dtest >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then echo "dtest_pairs: dapl2-utils missing (required under CI)"; exit 1; fi
    echo "dtest_pairs: SKIP: dapl2-utils not installed"; exit 77
fi
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
fail=0
# dtest's server first listens on TCP 15828 (0x3DD4) for its own exchange
# of parameters, then on connection qualifier 45248 (0xB0C0).
listening() { grep -qiE ":(3DD4|B0C0) .* 0A " /proc/net/tcp; }

run_pair() { # label, registry(ours|debian), dtest options...
    local label=$1 registry=$2; shift 2
    local env_lib=()
    [ "$registry" = ours ] && env_lib=(env "LD_LIBRARY_PATH=$libdir")
    "${env_lib[@]}" env DAT_OVERRIDE="$conf" timeout 120 stdbuf -oL dtest -P fastdapl-tcp -s "$@" >"$work/server.$label" 2>&1 &
    local server=$!
    for _ in $(seq 1 200); do listening && break; sleep 0.05; done # wait for the listener, not a fixed time
    "${env_lib[@]}" env DAT_OVERRIDE="$conf" timeout 120 stdbuf -oL dtest -P fastdapl-tcp -h 127.0.0.1 "$@" \
        >"$work/client.$label" 2>&1
    wait $server
    if grep -q "Test Complete. PASSED" "$work/client.$label" && grep -q "Test Complete. PASSED" "$work/server.$label"; then
        echo "ok: dtest $label ($(grep -Eo '[0-9.]+ MB/sec|[0-9.]+ us/iteration|itime=[0-9.]+ us' "$work/client.$label" | head -1))"
    else
        echo "FAIL: dtest $label"; echo "--- client"; tail -15 "$work/client.$label"; echo "--- server"; tail -15 "$work/server.$label"
        fail=1
    fi
    # The next server must find the qualifier free.
    for _ in $(seq 1 100); do listening || break; sleep 0.05; done
}

run_pair default-ours ours
run_pair pingpong-ours ours -W
run_pair validate-ours ours -D -b 65536
run_pair default-debian debian
run_pair pingpong-debian debian -W
run_pair validate-debian debian -D -b 65536
exit $fail
