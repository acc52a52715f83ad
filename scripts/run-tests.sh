#!/usr/bin/env bash
# The whole test suite: configure (once), build, run every meson test suite.
# Dependencies come from scripts/install-deps.sh. CI runs exactly this.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build-tests}
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$top" -Dverbs=auto
fi
ninja -C "$build"
rc=0
meson test -C "$build" --print-errorlogs --num-processes 2 "$@" || rc=$?
# One closing line in the plain form CI reads: N passed, N failed, N skipped.
python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
counts = {"OK": 0, "EXPECTEDFAIL": 0, "FAIL": 0, "UNEXPECTEDPASS": 0, "TIMEOUT": 0, "ERROR": 0, "SKIP": 0}
with open(sys.argv[1]) as log:
    for line in log:
        result = json.loads(line).get("result", "ERROR")
        counts[result] = counts.get(result, 0) + 1
passed = counts["OK"] + counts["EXPECTEDFAIL"]
failed = counts["FAIL"] + counts["UNEXPECTEDPASS"] + counts["TIMEOUT"] + counts["ERROR"]
print(f"tests: {passed} passed, {failed} failed, {counts['SKIP']} skipped")
PY
exit $rc
