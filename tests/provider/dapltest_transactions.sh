#!/usr/bin/env bash
# Debian's dapltest on fastdapl-tcp over loopback, on our libdat2: a server
# (-T S), transaction tests (-T T) with send/recv, RDMA read and RDMA write
# over several threads and endpoints, then -T Q, which must stop the server.
# usage: dapltest_transactions.sh LIBDAT2_DIR PROVIDER_CONF
set -uo pipefail
libdir=$(cd "$1" && pwd)
conf=$2
if ! command -v dapltest >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then echo "dapltest_transactions: dapl2-utils missing (required under CI)"; exit 1; fi
    echo "dapltest_transactions: SKIP: dapl2-utils not installed"; exit 77
fi
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
export LD_LIBRARY_PATH="$libdir" DAT_OVERRIDE="$conf"
timeout 300 stdbuf -oL dapltest -T S -D fastdapl-tcp >"$work/server" 2>&1 &
server=$!
for _ in $(seq 1 200); do grep -q "Service Point Ready" "$work/server" && break; sleep 0.05; done
fail=0
run() { # label, dapltest transaction arguments...
    local label=$1; shift
    timeout 120 stdbuf -oL dapltest -T T -s 127.0.0.1 -D fastdapl-tcp "$@" >"$work/$label" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] || ! grep -q "Total WQE" "$work/$label" || grep -qiE "error|fail|mismatch" "$work/$label"; then
        echo "FAIL: dapltest $label (exit $rc)"; tail -20 "$work/$label"; fail=1
    else
        echo "ok: dapltest $label: $(grep 'Total WQE' "$work/$label" | tr -s ' ')"
    fi
}
run send-recv -i 100 client SR 4096 2 server SR 4096 2
run threads-eps-read-write -i 100 -t 2 -w 2 client SR 4096 2 server SR 4096 2 client RR 4096 1 server RW 4096 1
run validated -V -i 50 -t 2 -w 2 client SR 1024 1 server RW 1024 1 client RR 1024 1
# Endpoints with the provider's default attributes: 8 and 16 segments per DTO.
run eight-segments -V -i 100 client SR 4096 8 server SR 4096 8 client RW 4096 8
timeout 120 stdbuf -oL dapltest -T P -s 127.0.0.1 -D fastdapl-tcp -i 100 RW 4096 16 >"$work/perf16" 2>&1
if [ $? -ne 0 ] || ! grep -q "^raw: RW" "$work/perf16" || grep -qiE "error|fail" "$work/perf16"; then
    echo "FAIL: dapltest -T P RW 4096 16"; tail -20 "$work/perf16"; fail=1
else
    echo "ok: dapltest -T P RW 4096 16 segments: $(grep '^raw:' "$work/perf16")"
fi
timeout 30 dapltest -T Q -s 127.0.0.1 -D fastdapl-tcp >"$work/quit" 2>&1
if ! timeout 30 tail --pid=$server -f /dev/null; then
    echo "FAIL: dapltest -T Q did not stop the server"; fail=1
else
    echo "ok: dapltest -T Q stopped the server"
fi
exit $fail
