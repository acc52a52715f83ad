#!/usr/bin/env bash
# Debian's dtestx (the IB extensions' test: RDMA write with immediate data,
# compare and swap, fetch and add), server and client, on the fastdapl-tcp
# IA over loopback: the default run and -p (counters queried and printed),
# each with our libdat2 (LD_LIBRARY_PATH) and with Debian's libdat2
# hosting our provider (DAT_OVERRIDE only); the UD modes (-u: four
# exchanges on one UD endpoint each side, -U 4: four endpoints, -u -m: the
# server's endpoint 0 to all of the client's), where the client is -c and
# both sides ask and answer; then -q (dat_ib_open_query and
# dat_ib_close_query) alone with each registry.
# usage: dtestx_pairs.sh LIBDAT2_DIR PROVIDER_CONF
set -uo pipefail
libdir=$(cd "$1" && pwd)
conf=$2
ia=${FASTDAPL_PEERS_IA:-fastdapl-tcp} # another IA of PROVIDER_CONF: fastdapl-shm
if ! command -v dtestx >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then echo "dtestx_pairs: dapl2-utils missing (required under CI)"; exit 1; fi
    echo "dtestx_pairs: SKIP: dapl2-utils not installed"; exit 77
fi
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
fail=0
passed="IB extension test - immed/atomic test PASSED"
# dtestx's server listens on TCP 15828 (0x3DD4) for its exchange of
# addresses, then on connection qualifier 31112 (0x7988).
. "$(dirname "$0")/listening.sh"
listening() { listening_on 15828 31112; }

run_pair() { # label, registry(ours|debian), options...
    local label=$1 registry=$2; shift 2
    local env_lib=() client_mode=() expected=$passed
    case " $* " in # a UD run: the client says so (-h alone leaves it a server)
    *" -u "* | *" -U "*) client_mode=(-c); expected="IB extension test - UD test PASSED" ;;
    esac
    [ "$registry" = ours ] && env_lib=(env "LD_LIBRARY_PATH=$libdir")
    "${env_lib[@]}" env DAT_OVERRIDE="$conf" timeout 120 stdbuf -oL dtestx -P "$ia" "$@" >"$work/server.$label" 2>&1 &
    local server=$!
    for _ in $(seq 1 200); do listening && break; sleep 0.05; done # wait for the listener, not a fixed time
    "${env_lib[@]}" env DAT_OVERRIDE="$conf" timeout 120 stdbuf -oL dtestx -P "$ia" "${client_mode[@]}" \
        -h 127.0.0.1 "$@" >"$work/client.$label" 2>&1
    local client_rc=$?
    wait $server
    local server_rc=$?
    if [ $client_rc -eq 0 ] && [ $server_rc -eq 0 ] && grep -q "$expected" "$work/client.$label" &&
        grep -q "$expected" "$work/server.$label"; then
        echo "ok: dtestx $label"
    else
        echo "FAIL: dtestx $label (client $client_rc, server $server_rc)"; echo "--- client"; tail -15 "$work/client.$label"
        echo "--- server"; tail -15 "$work/server.$label"
        fail=1
    fi
    # The next server must find the ports free.
    for _ in $(seq 1 100); do listening || break; sleep 0.05; done
}

run_query() { # label, registry
    local label=$1 registry=$2
    local env_lib=()
    [ "$registry" = ours ] && env_lib=(env "LD_LIBRARY_PATH=$libdir")
    "${env_lib[@]}" env DAT_OVERRIDE="$conf" timeout 60 dtestx -P "$ia" -q >"$work/query.$label" 2>&1
    local rc=$?
    if [ $rc -eq 0 ] && grep -q "Open_Query: Provider Specific Attribute.*DAT_IB_IMMED_DATA=TRUE" "$work/query.$label"; then
        echo "ok: dtestx $label"
    else
        echo "FAIL: dtestx $label ($rc)"; tail -15 "$work/query.$label"
        fail=1
    fi
}

for registry in ours debian; do
    run_pair default-$registry $registry
    run_pair counters-$registry $registry -p
    run_pair ud-$registry $registry -u
    run_pair ud-4-endpoints-$registry $registry -U 4
    run_pair ud-multi-server-$registry $registry -u -m
    run_query query-$registry $registry
done
exit $fail
