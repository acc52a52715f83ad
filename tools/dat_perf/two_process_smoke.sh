#!/usr/bin/env bash
# dat_perf as two processes over loopback: a server, then a client once the
# server listens (its qualifier is a TCP port; read /proc, not a fixed sleep).
# usage: two_process_smoke.sh DAT_PERF
set -uo pipefail
bin=$1
port=${DAT_PERF_PORT:-47123}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
timeout 100 "$bin" -s -p "$port" >"$work/server" 2>&1 &
server=$!
hex=$(printf '%04X' "$port")
for _ in $(seq 1 200); do
    grep -qiE ":$hex .* 0A " /proc/net/tcp && break
    sleep 0.05
done
timeout 100 "$bin" -h 127.0.0.1 -p "$port" -q >"$work/client" 2>&1
client_rc=$?
wait $server
server_rc=$?
cat "$work/client"
rows=$(grep -cE '^(lat|bw) ' "$work/client")
if [ $client_rc -ne 0 ] || [ $server_rc -ne 0 ] || [ "$rows" -ne 46 ]; then
    echo "FAIL: client rc=$client_rc server rc=$server_rc rows=$rows (46 expected)"
    echo "--- server"; cat "$work/server"
    exit 1
fi
echo "ok: two processes, $rows rows"
