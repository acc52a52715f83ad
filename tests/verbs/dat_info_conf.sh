#!/usr/bin/env bash
# `dat_info --conf` exits 0 and prints, on stdout, only comments and
# well-formed dat.conf lines for fastdapl's verbs IAs, which dat.conf's
# parser (through `dat_info -n` on them) reads back without a diagnostic.
# usage: dat_info_conf.sh DAT_INFO
set -euo pipefail
dat_info=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

rc=0
"$dat_info" --conf >"$tmp/out" 2>"$tmp/err" || rc=$?
echo "--- stdout"; cat "$tmp/out"
echo "--- stderr"; cat "$tmp/err"
[ "$rc" = 0 ] || { echo "FAIL: dat_info --conf exited $rc"; exit 1; }

line_re='^fastdapl-[^[:space:]]+-[0-9]+ u2\.0 nonthreadsafe default /[^[:space:]]*libfastdapl\.so\.2 fastdapl\.[0-9]+\.[0-9]+ "verbs:[^[:space:]":]+:[0-9]+" ""$'
entries=0
while IFS= read -r line; do
    case $line in
    '' | '#'*) continue ;;
    esac
    [[ $line =~ $line_re ]] || { echo "FAIL: not a dat.conf line: $line"; exit 1; }
    entries=$((entries + 1))
done <"$tmp/out"

# The registry's parser agrees: as many entries, no diagnostics.
DAT_OVERRIDE=$tmp/out "$dat_info" -n >"$tmp/parsed" 2>&1 || true
grep -q "^dat.conf: $tmp/out ($entries entries)\$" "$tmp/parsed" ||
    { echo "FAIL: the parser does not read $entries entries:"; cat "$tmp/parsed"; exit 1; }
if grep -q "^  $tmp/out:[0-9]*:" "$tmp/parsed"; then
    echo "FAIL: parser diagnostics:"; cat "$tmp/parsed"; exit 1
fi

# Nothing but --conf's own output: unknown arguments are refused.
if "$dat_info" --conf some-ia >/dev/null 2>&1; then
    echo "FAIL: --conf accepted an IA name"; exit 1
fi
echo "ok: $entries dat.conf line(s)"
