#!/usr/bin/env bash
# dat-conf against scratch dat.conf files: update adds exactly one block
# (the original bytes stay a prefix of the file), a second update changes
# nothing, remove gives back the original byte for byte, whatever the file
# looked like (no last newline, CRLF, tabs, a block in the middle, none).
# usage: dat_conf.sh DAT_CONF_SCRIPT  (run with sh: the build tree's copy is not executable;
# the packages install it 0755 and debian_packages.sh runs it from postinst)
set -euo pipefail
dat_conf=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf '# fastdapl IAs\nfastdapl-tcp u2.0 nonthreadsafe default /usr/lib/x/libfastdapl.so.2 fastdapl.0.1 "lo" ""\n\n' >"$tmp/fragment"
# A stand-in dat_info: the two kinds of --conf output (a line, a comment on stderr).
printf '#!/bin/sh\n[ "$1" = --conf ] || exit 2\necho "fastdapl-rxe0-1 u2.0 nonthreadsafe default /usr/lib/x/libfastdapl.so.2 fastdapl.0.1 \\"verbs:rxe0:1\\" \\"\\""\necho "# fastdapl-rxe1-1: skipped" >&2\n' >"$tmp/dat_info"
chmod +x "$tmp/dat_info"
run() { sh "$dat_conf" --conf "$tmp/dat.conf" --fragment "$tmp/fragment" --dat-info "$tmp/dat_info" "$@"; }

check_case() { # name, then the original file's bytes as printf arguments
    local name=$1; shift
    # shellcheck disable=SC2059
    printf "$@" >"$tmp/orig"
    cp "$tmp/orig" "$tmp/dat.conf"
    chmod 0640 "$tmp/dat.conf"
    run update || fail "$name: update exited $?"
    local size
    size=$(stat -c %s "$tmp/orig")
    head -c "$size" "$tmp/dat.conf" | cmp -s - "$tmp/orig" || fail "$name: update changed the original bytes"
    [ "$(grep -c '^# BEGIN fastdapl IAs' "$tmp/dat.conf")" = 1 ] || fail "$name: not one BEGIN line"
    [ "$(grep -c '^# END fastdapl IAs$' "$tmp/dat.conf")" = 1 ] || fail "$name: not one END line"
    grep -q '^fastdapl-tcp u2.0 .* "lo" ""$' "$tmp/dat.conf" || fail "$name: the fragment's IA is missing"
    grep -q '^fastdapl-rxe0-1 u2.0 .*"verbs:rxe0:1" ""$' "$tmp/dat.conf" || fail "$name: dat_info's port IA is missing"
    ! grep -q 'skipped' "$tmp/dat.conf" || fail "$name: dat_info's stderr got into dat.conf"
    [ "$(stat -c %a "$tmp/dat.conf")" = 640 ] || fail "$name: the file's mode changed"
    cp "$tmp/dat.conf" "$tmp/once"
    run update || fail "$name: second update exited $?"
    cmp -s "$tmp/dat.conf" "$tmp/once" || fail "$name: a second update changed the file"
    run remove || fail "$name: remove exited $?"
    cmp -s "$tmp/dat.conf" "$tmp/orig" || { diff <(od -c "$tmp/orig") <(od -c "$tmp/dat.conf") || true; fail "$name: remove did not give back the original"; }
    run remove || fail "$name: a second remove exited $?"
    cmp -s "$tmp/dat.conf" "$tmp/orig" || fail "$name: a second remove changed the file"
    echo "ok: $name"
}

check_case "ordinary file" '# DAT v2.0\nofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "ib0 0" ""\n'
check_case "no last newline" 'ofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "ib0 0" ""'
check_case "empty file" ''
check_case "CRLF, tabs, backslashes, blank lines" 'a\tb  \r\n\n\n# c \\\\ "q"\r\nx\\\\y\n\n'
check_case "a lookalike comment" '# BEGIN fastdapl is mentioned here\n#END fastdapl IAs\n'

# A block that lines were added after: an update moves it to the end, a
# remove leaves the lines before and after it.
printf 'before\n' >"$tmp/dat.conf"
run update
printf 'after\n' >>"$tmp/dat.conf"
run remove
[ "$(cat "$tmp/dat.conf")" = "$(printf 'before\nafter')" ] || fail "block in the middle: got $(od -c "$tmp/dat.conf")"
printf 'before' >"$tmp/dat.conf" # no last newline: dat-conf adds one, which the later lines need
run update
printf 'after\n' >>"$tmp/dat.conf"
run remove
[ "$(od -c <"$tmp/dat.conf")" = "$(printf 'before\nafter\n' | od -c)" ] || fail "added newline before a middle block: got $(od -c "$tmp/dat.conf")"
echo "ok: a block with lines after it"

# No dat.conf: update makes one (mode 0644), remove takes it away again;
# with lines added meanwhile it stays.
rm -f "$tmp/dat.conf"
run update
[ "$(stat -c %a "$tmp/dat.conf")" = 644 ] || fail "a new dat.conf is not 0644"
run remove
[ ! -e "$tmp/dat.conf" ] || fail "remove left the dat.conf it had created"
run update
echo 'mine u2.0 nonthreadsafe default libx.so.2 x.2.0 "" ""' >>"$tmp/dat.conf"
run remove
[ "$(cat "$tmp/dat.conf")" = 'mine u2.0 nonthreadsafe default libx.so.2 x.2.0 "" ""' ] || fail "remove lost a line added to a file it had created"
echo "ok: no dat.conf"

# Without a dat_info the block has the fragment's lines only; show prints it.
sh "$dat_conf" --conf "$tmp/dat.conf" --fragment "$tmp/fragment" --dat-info "$tmp/none" show >"$tmp/shown"
[ "$(grep -vc '^#' "$tmp/shown")" = 1 ] || fail "show without dat_info: $(cat "$tmp/shown")"
if sh "$dat_conf" --conf "$tmp/dat.conf" bogus 2>/dev/null; then fail "an unknown action was taken"; fi
echo "dat-conf keeps every other byte of dat.conf"
