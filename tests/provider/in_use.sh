#!/usr/bin/env bash
# Which provider a program runs on: FASTDAPL_DEBUG=1 names, at the first
# dat_ia_open of each IA, the library file, the IA and the data path on
# stderr, and dat_info prints the same under "In use" for every IA.
# usage: in_use.sh DAT_INFO  (DAT_OVERRIDE: the provider tests' dat.conf)
set -euo pipefail
dat_info=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/  stdout: /' "$tmp/out"; sed 's/^/  stderr: /' "$tmp/err"; exit 1; }

FASTDAPL_DEBUG=1 "$dat_info" -q fastdapl-tcp fastdapl-tcp-b >"$tmp/out" 2>"$tmp/err" || fail "dat_info exited $?"
for ia in fastdapl-tcp fastdapl-tcp-b; do
    line=$(grep "^fastdapl: IA $ia: " "$tmp/err" || true)
    [ "$(printf '%s\n' "$line" | grep -c .)" = 1 ] || fail "expected one FASTDAPL_DEBUG line for $ia, got: '$line'"
    library=$(printf '%s\n' "$line" | sed -n "s/^fastdapl: IA $ia: library \(.*\), data path softnic tcp$/\1/p")
    [ -n "$library" ] || fail "line for $ia does not name a library and the softnic tcp data path: $line"
    [ -r "$library" ] || fail "the library named for $ia is not there: $library"
    case "$library" in */libfastdapl.so.2*) ;; *) fail "not libfastdapl: $library" ;; esac
    # dat_info's "In use" section of that IA says the same.
    section=$(sed -n "/^IA $ia /,/^IA /p" "$tmp/out")
    # a here-string, not printf | grep -q: grep -q leaves at its first
    # match, and under pipefail printf's SIGPIPE would fail the check
    grep -Eq "^    library +$library\$" <<<"$section" || fail "dat_info does not name $library for $ia"
    grep -Eq '^    data path +softnic tcp$' <<<"$section" || fail "dat_info does not say the data path of $ia"
done
grep -q "^Registry: .* (registry library .*/libdat2\.so\.2" "$tmp/out" || fail "dat_info does not name its registry library"

# Without FASTDAPL_DEBUG (or with it 0) nothing is said on stderr, and
# dat_info still says it.
for debug in unset 0; do
    if [ "$debug" = unset ]; then
        env -u FASTDAPL_DEBUG -u DAT_DBG_TYPE "$dat_info" -q fastdapl-tcp >"$tmp/out" 2>"$tmp/err" || fail "dat_info exited $?"
    else
        env -u DAT_DBG_TYPE FASTDAPL_DEBUG=0 "$dat_info" -q fastdapl-tcp >"$tmp/out" 2>"$tmp/err" || fail "dat_info exited $?"
    fi
    ! grep -q '^fastdapl: IA' "$tmp/err" || fail "the provider spoke with FASTDAPL_DEBUG $debug"
    grep -Eq '^    data path +softnic tcp$' "$tmp/out" || fail "dat_info (FASTDAPL_DEBUG $debug) lost the data path"
done
echo "FASTDAPL_DEBUG and dat_info name library, IA and data path"
