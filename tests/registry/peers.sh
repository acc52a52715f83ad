#!/usr/bin/env bash
# Debian's reference programs (dapl2-utils) and provider (libdaplofa) against
# our libdat2.so.2. usage: peers.sh BUILD_DIR_OF_LIBDAT2
#  (a) dtest, dtestx, dtestsrq, dtestcm and dapltest -T L, run with our library
#      first on LD_LIBRARY_PATH, load without symbol-version warnings, bind
#      dat_ia_openv to our library, and report DAT_PROVIDER_NOT_FOUND for an
#      unknown IA name, without crashing or hanging;
#  (b) Debian's libdaplofa.so.2 loaded by our registry on a machine without
#      RDMA devices returns its own error cleanly, twice in a row.
# The reference tools print errors yet exit 0: the checks read their output.
set -uo pipefail
libdir=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
pass=0

if ! command -v dtest >/dev/null 2>&1 || [ ! -e /usr/lib/x86_64-linux-gnu/libdaplofa.so.2 ]; then
    if [ "${CI:-}" = "true" ]; then echo "peers: dapl2-utils/libdapl2 missing (required under CI)"; exit 1; fi
    echo "peers: SKIP: Debian's dapl2-utils and libdapl2 are not installed"; exit 77
fi

cat > "$work/dat.conf" <<CONF
ofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "ib0 0" ""
CONF

check() { # name, condition result (0 ok), message
    if [ "$2" -eq 0 ]; then pass=$((pass + 1)); else echo "FAIL: $1: $3"; fail=1; fi
}

run_tool() { # output file, command...
    local out=$1; shift
    DAT_OVERRIDE="$work/dat.conf" LD_LIBRARY_PATH="$libdir" timeout 30 "$@" >"$out" 2>&1
    echo $?
}

for tool in "dtest -P no-such-ia" "dtestx -P no-such-ia" "dtestsrq -P no-such-ia" "dtestcm -P no-such-ia" \
            "dapltest -T L -D no-such-ia"; do
    name=${tool%% *}
    out="$work/$name.out"
    rc=$(run_tool "$out" $tool)
    check "$name" $([ "$rc" -lt 124 ] && echo 0 || echo 1) "exit status $rc (timeout or signal)"
    check "$name" $(grep -q "DAT_PROVIDER_NOT_FOUND" "$out"; echo $?) "no DAT_PROVIDER_NOT_FOUND in: $(head -c 400 "$out")"
    check "$name" $(grep -qi "no version information\|version .* not found" "$out"; [ $? -ne 0 ]; echo $?) \
        "loader warning: $(grep -i version "$out")"
    # The loader must bind the tool's dat_ia_openv to our library.
    DAT_OVERRIDE="$work/dat.conf" LD_LIBRARY_PATH="$libdir" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/bind.$name" \
        timeout 30 $tool >/dev/null 2>&1
    bound=$(cat "$work"/bind."$name".* 2>/dev/null | grep "symbol \`dat_ia_openv'" | head -1)
    check "$name" $(grep -q "to $libdir/libdat2.so.2" <<<"$bound"; echo $?) "dat_ia_openv bound elsewhere: $bound"
    check "$name" $(grep -q "\[DAT_2.0\]" <<<"$bound"; echo $?) "not bound by version DAT_2.0: $bound"
done

# (b) the reference provider hosted by our registry.
for attempt in 1 2; do
    out="$work/ofa.$attempt.out"
    rc=$(run_tool "$out" dtest -P ofa-v2-ib0)
    check "libdaplofa#$attempt" $([ "$rc" -lt 124 ] && echo 0 || echo 1) "exit status $rc (timeout or signal)"
    check "libdaplofa#$attempt" $(grep -q "Error Adaptor open: DAT_" "$out"; echo $?) "no clean open error in: $(head -c 400 "$out")"
    check "libdaplofa#$attempt" $(grep -q "DAT_PROVIDER_NOT_FOUND" "$out"; [ $? -ne 0 ]; echo $?) \
        "the registry did not load it: $(head -c 400 "$out")"
done
# The same through dat_info: the provider is loaded, its error reported, no crash.
rc=$(run_tool "$work/info.out" "$libdir/../../tools/dat_info/dat_info" -q)
check "dat_info" $([ "$rc" -lt 124 ] && echo 0 || echo 1) "exit status $rc"
check "dat_info" $(grep -q "cannot open: DAT_INVALID_ADDRESS\|cannot open: DAT_INTERNAL_ERROR" "$work/info.out"; echo $?) \
    "$(cat "$work/info.out")"

echo "peers: $pass checks passed"
exit $fail
