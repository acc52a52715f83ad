#!/usr/bin/env bash
# A man page renders without a groff warning and names every option the
# program's --help lists (and the extra words given, e.g. output columns).
# usage: check_man.sh PAGE [PROGRAM [WORD...]]
set -euo pipefail
page=$1; shift
warnings=$(LC_ALL=C.UTF-8 groff -man -ww -z "$page" 2>&1 || true)
[ -z "$warnings" ] || { echo "FAIL: groff warns on $page:"; echo "$warnings"; exit 1; }
# The page's text with roff's escaped hyphens plain.
text=$(sed -e 's/\\-/-/g' -e 's/\\(dq/"/g' "$page")
missing=0
if [ $# -gt 0 ]; then
    program=$1; shift
    help=$("$program" --help)
    options=$(printf '%s\n' "$help" | grep -oE '(^|[ ,])--?[A-Za-z][A-Za-z0-9-]*' | sed 's/^[ ,]*//' | sort -u)
    [ -n "$options" ] || { echo "FAIL: no options found in $program --help"; exit 1; }
    for word in $options "$@"; do
        if ! grep -qF -- "$word" <<<"$text"; then
            echo "FAIL: $page does not mention $word"
            missing=1
        fi
    done
fi
[ "$missing" = 0 ] || exit 1
echo "$page: renders cleanly${program:+, names every option of $(basename "$program")}"
