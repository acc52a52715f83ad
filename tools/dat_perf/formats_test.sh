#!/usr/bin/env bash
# dat_perf's result formats and --compare: a short sweep written as JSON and
# CSV (checked with Python's json and csv modules), --input reproducing it,
# --compare against itself (exit 0), against doctored baselines (exit 3,
# naming the size) and against broken ones (exit 4), usage errors (exit 2).
# usage: formats_test.sh DAT_PERF
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}
# expect RC DESCRIPTION -- COMMAND...: runs COMMAND, output to $work/out.
expect() {
    local want=$1 what=$2
    shift 3
    "$@" >"$work/out" 2>&1
    local rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$what: exit $rc, $want expected"
        sed 's/^/    /' "$work/out"
    else
        echo "ok: $what (exit $rc)"
    fi
}
py=python3

# One sweep, 8 B to 4 KiB, written as JSON; the table still on stdout.
expect 0 "sweep with --output r.json" -- "$bin" -q -m 8 -M 4096 --output "$work/r.json"
grep -qE '^lat +8 ' "$work/out" || fail "--output: stdout lost the table"
# The same result in every format, from --input (no second measurement).
expect 0 "--input --format csv" -- "$bin" --input "$work/r.json" --format csv --output "$work/r.csv"
expect 0 "--input --format json to stdout" -- "$bin" --input "$work/r.json" --format json
cp "$work/out" "$work/stdout.json"
cmp -s "$work/stdout.json" "$work/r.json" || fail "--input --format json does not reproduce the file"
expect 0 "--format csv to stdout (a sweep)" -- "$bin" -q -t lat -m 64 -M 64 --format csv
cp "$work/out" "$work/lat.csv"

"$py" - "$work/r.json" "$work/r.csv" "$work/lat.csv" <<'EOF' || fail "the JSON or CSV does not hold what dat_perf promises"
import csv, json, sys
columns = ["test", "bytes", "iterations", "lat_med_us", "lat_p99_us", "mb_per_s", "msg_per_s"]
d = json.load(open(sys.argv[1]))
for key in ["tool", "format_version", "ia", "mode", "server", "wait", "iterations", "quick", "window",
            "min_size", "max_size", "host", "date", "units", "results"]:
    assert key in d, f"JSON: no {key}"
assert d["tool"] == "dat_perf" and d["format_version"] == 1
assert d["ia"] == "fastdapl-tcp" and d["mode"] == "one-process" and d["wait"] == "evd_wait", d
assert d["quick"] is True and d["iterations"] is None and d["min_size"] == 8 and d["max_size"] == 4096
sizes = [8 << i for i in range(10)]
assert [(r["test"], r["bytes"]) for r in d["results"]] == \
    [("lat", s) for s in sizes] + [("bw", s) for s in sizes], d["results"]
for r in d["results"]:
    assert sorted(r) == sorted(columns), r
    lat = r["test"] == "lat"
    assert (r["lat_med_us"] is not None) == lat and (r["mb_per_s"] is not None) != lat, r
    assert r["iterations"] > 0
rows = list(csv.DictReader(open(sys.argv[2])))
assert list(rows[0].keys()) == columns, rows[0].keys()
assert len(rows) == len(d["results"])
for row, r in zip(rows, d["results"]):
    for c in columns:
        assert row[c] == ("" if r[c] is None else str(r[c])) or float(row[c]) == r[c], (c, row, r)
lat = list(csv.reader(open(sys.argv[3])))
assert lat[0] == columns and len(lat) == 2 and lat[1][0] == "lat" and lat[1][1] == "64", lat
print("ok: JSON and CSV parse and hold every column")
EOF

# --compare: a result against itself passes.
expect 0 "--compare with itself" -- "$bin" --input "$work/r.json" --compare "$work/r.json"
grep -q "no regression" "$work/out" || fail "--compare: no summary line"
# A measured run compared at once (the tolerance so wide that noise passes).
expect 0 "sweep with --compare --tolerance 100000" -- "$bin" -q -m 8 -M 4096 --compare "$work/r.json" --tolerance 100000

# A baseline whose latency at 64 B was half: a regression there.
"$py" - "$work/r.json" "$work/lat_halved.json" "$work/bw_doubled.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    if r["test"] == "lat" and r["bytes"] == 64:
        r["lat_med_us"] /= 2
json.dump(d, open(sys.argv[2], "w"))
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    if r["test"] == "bw" and r["bytes"] == 1024:
        r["mb_per_s"] *= 2
json.dump(d, open(sys.argv[3], "w"))
EOF
expect 3 "--compare, baseline latency halved at 64 B" -- "$bin" --input "$work/r.json" --compare "$work/lat_halved.json"
grep -qE '^lat +64 lat_med_us .*REGRESSED' "$work/out" || fail "--compare: the 64 B latency row is not marked"
grep -q 'REGRESSION: 1 of .*lat 64 B lat_med_us' "$work/out" || fail "--compare: the summary does not name 64 B"
expect 3 "--compare, baseline bandwidth doubled at 1 KiB" -- "$bin" --input "$work/r.json" --compare "$work/bw_doubled.json"
grep -q 'REGRESSION: 1 of .*bw 1024 B mb_per_s' "$work/out" || fail "--compare: the summary does not name 1024 B"
# Within a tolerance wider than the change, and on metrics it did not touch: no regression.
expect 0 "--compare --tolerance 150" -- "$bin" --input "$work/r.json" --compare "$work/lat_halved.json" --tolerance 150
expect 0 "--compare --metrics lat_p99_us" -- "$bin" --input "$work/r.json" --compare "$work/lat_halved.json" --metrics lat_p99_us
# With --format json on stdout the comparison goes to stderr; stdout stays JSON.
"$bin" --input "$work/r.json" --compare "$work/lat_halved.json" --format json >"$work/j.json" 2>"$work/err"
rc=$?
[ $rc -eq 3 ] || fail "--format json --compare: exit $rc, 3 expected"
"$py" -c 'import json, sys; json.load(open(sys.argv[1]))' "$work/j.json" || fail "--format json --compare: stdout is not JSON"
grep -q REGRESSION "$work/err" || fail "--format json --compare: no comparison on stderr"

# Broken or mismatched baselines: exit 4 with a message.
head -c 200 "$work/r.json" >"$work/truncated.json"
echo '{"tool": "something else"}' >"$work/other.json"
echo '[1, 2,]' >"$work/syntax.json"
"$py" - "$work/r.json" "$work/sizes.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    r["bytes"] += 1
json.dump(d, open(sys.argv[2], "w"))
EOF
for b in truncated other syntax sizes; do
    expect 4 "--compare with a $b baseline" -- "$bin" --input "$work/r.json" --compare "$work/$b.json"
    grep -q "dat_perf: --compare $work/$b.json: " "$work/out" || fail "--compare $b: no message naming the file"
done
expect 4 "--compare with a missing baseline" -- "$bin" --input "$work/r.json" --compare "$work/missing.json"
expect 4 "--input of a broken result" -- "$bin" --input "$work/truncated.json"

# Usage errors: exit 2.
expect 2 "--format xml" -- "$bin" --format xml
expect 2 "--tolerance -5" -- "$bin" --tolerance -5
expect 2 "--metrics bogus" -- "$bin" --metrics bogus
expect 2 "-s --format json" -- "$bin" -s --format json
expect 0 "--help" -- "$bin" --help
for word in --format --output --input --compare --tolerance --metrics lat_med_us lat_p99_us mb_per_s msg_per_s \
    microseconds "exit status"; do
    grep -q -- "$word" "$work/out" || fail "--help does not mention $word"
done

if [ $failures -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "ok: formats and --compare"
