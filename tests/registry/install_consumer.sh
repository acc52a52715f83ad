#!/usr/bin/env bash
# `meson install` into a scratch DESTDIR, then build a C consumer the way a
# user would (pkg-config dat2, -ldat2) and run it against the installed
# library: it must get DAT_PROVIDER_NOT_FOUND for an unknown IA name.
# usage: install_consumer.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
# A here-string, not ldd | grep -q: grep leaves at its first match, and
# under pipefail ldd's SIGPIPE then failed the test (seen under ASan).
if grep -q libasan <<<"$(ldd "$build/src/registry/libdat2.so.2")"; then
    echo "install_consumer: SKIP: a sanitizer build cannot host an uninstrumented consumer"; exit 77
fi
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --destdir "$dest" --no-rebuild --skip-subprojects >/dev/null
pc=$(find "$dest" -name dat2.pc | head -1)
[ -n "$pc" ] || { echo "dat2.pc not installed"; exit 1; }
conf=$(find "$dest" -path '*share/fastdapl/dat.conf' | head -1)
[ -n "$conf" ] || { echo "dat.conf fragment not installed"; exit 1; }
# The sysroot makes pkg-config's -I/-L point into DESTDIR.
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$dest
cflags=$(pkg-config --cflags dat2)
libs=$(pkg-config --libs dat2)
cat > "$dest/consumer.c" <<'C'
#include <dat2/udat.h>
#include <stdio.h>
int main(void)
{
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    const char *major = "", *minor = "";
    DAT_RETURN rc = dat_ia_open("no-such-ia", 8, &evd, &ia);
    dat_strerror(rc, &major, &minor);
    printf("%s %s\n", major, minor);
    return DAT_GET_TYPE(rc) == DAT_PROVIDER_NOT_FOUND ? 0 : 1;
}
C
# shellcheck disable=SC2086
cc -std=c99 -Wall -Wextra -pedantic -Werror $cflags "$dest/consumer.c" -o "$dest/consumer" $libs
libdir=$(dirname "$(dirname "$pc")") # dat2.pc lives in <libdir>/pkgconfig
DAT_OVERRIDE="$conf" LD_LIBRARY_PATH="$libdir" "$dest/consumer"
ldd_out=$(LD_LIBRARY_PATH="$libdir" ldd "$dest/consumer" | grep libdat2)
grep -q "$dest" <<<"$ldd_out" || { echo "consumer did not link the installed libdat2: $ldd_out"; exit 1; }
echo "installed headers, library, dat2.pc and dat.conf fragment work"
