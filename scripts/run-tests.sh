#!/usr/bin/env bash
# The whole test suite: every meson suite in a normal build, then the unit,
# registry and provider suites again under AddressSanitizer and UBSan, and
# once more under ThreadSanitizer (tests/tsan.supp).
# Dependencies come from scripts/install-deps.sh. CI runs exactly this.
# Extra arguments go to the first (normal) `meson test`.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build-tests}
asan=${ASAN_BUILD_DIR:-$top/build-tests-asan}
tsan=${TSAN_BUILD_DIR:-$top/build-tests-tsan}
rc=0

configure() { # dir, options...
    local dir=$1; shift
    [ -f "$dir/build.ninja" ] || meson setup "$dir" "$top" "$@" || return 1
}

configure "$build" -Dverbs=auto && ninja -C "$build" || exit 1
meson test -C "$build" --print-errorlogs --num-processes 2 "$@" || rc=1

if [ "${FASTDAPL_SKIP_SANITIZERS:-}" != "1" ]; then
    configure "$asan" -Dverbs=auto -Db_sanitize=address,undefined -Db_lundef=false && ninja -C "$asan" || exit 1
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson test -C "$asan" --print-errorlogs --num-processes 2 --suite unit --suite registry --suite provider || rc=1

    configure "$tsan" -Dverbs=auto -Db_sanitize=thread -Db_lundef=false && ninja -C "$tsan" || exit 1
    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$top/tests/tsan.supp" \
        meson test -C "$tsan" --print-errorlogs --num-processes 2 --suite unit --suite registry --suite provider || rc=1
fi

# One closing line in the plain form CI reads: N passed, N failed, N skipped.
python3 - "$build/meson-logs/testlog.json" "$asan/meson-logs/testlog.json" "$tsan/meson-logs/testlog.json" <<'PY'
import json, os, sys
counts = {}
for path in sys.argv[1:]:
    if not os.path.exists(path):
        continue
    with open(path) as log:
        for line in log:
            try:  # a log another meson run in the same build wrote over can be cut short
                result = json.loads(line).get("result", "ERROR")
            except ValueError:
                continue
            counts[result] = counts.get(result, 0) + 1
passed = counts.get("OK", 0) + counts.get("EXPECTEDFAIL", 0)
failed = sum(counts.get(k, 0) for k in ("FAIL", "UNEXPECTEDPASS", "TIMEOUT", "ERROR"))
print(f"tests: {passed} passed, {failed} failed, {counts.get('SKIP', 0)} skipped")
PY
exit $rc
