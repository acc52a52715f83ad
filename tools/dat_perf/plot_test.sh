#!/usr/bin/env bash
# dat_perf_plot.py draws two dat_perf JSON results into a valid SVG, and
# refuses a file that is not one. Skipped (77) without matplotlib.
# usage: plot_test.sh DAT_PERF DAT_PERF_PLOT
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors
set -uo pipefail
bin=$1 plot=$2
# The first python3 with matplotlib: the one on PATH, else Debian's.
py=""
for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c 'import matplotlib' >/dev/null 2>&1; then
        py=$candidate
        break
    fi
done
if [ -z "$py" ]; then
    echo "skip: no python3 with matplotlib (Debian: python3-matplotlib)"
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" -q -m 8 -M 1024 --format json --output "$work/wait.json" >/dev/null || { echo "FAIL: dat_perf"; exit 1; }
"$bin" -q -b -t lat -m 8 -M 1024 --format json --output "$work/busy.json" >/dev/null || { echo "FAIL: dat_perf -b"; exit 1; }
"$py" "$plot" --p99 --title "plot test" -o "$work/out.svg" "$work/wait.json" "$work/busy.json" ||
    { echo "FAIL: dat_perf_plot.py"; exit 1; }
"$py" - "$work/out.svg" <<'PY' || { echo "FAIL: not the SVG expected"; exit 1; }
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
text = open(sys.argv[1], encoding="utf-8").read()
for label in ["fastdapl-tcp one-process evd_wait", "fastdapl-tcp one-process busy", "RDMA write", "plot test"]:
    assert label in text, f"no {label!r} in the SVG"
print("ok: SVG with both runs")
PY
echo '{"tool": "other"}' >"$work/bad.json"
if "$py" "$plot" -o "$work/bad.svg" "$work/bad.json" 2>"$work/err"; then
    echo "FAIL: dat_perf_plot.py accepted a file that is not a dat_perf result"
    exit 1
fi
grep -q "bad.json" "$work/err" || { echo "FAIL: the error does not name the file"; cat "$work/err"; exit 1; }
echo "ok: dat_perf_plot"
