#!/usr/bin/env bash
# The Debian packages (debian/), end to end:
#  1. dpkg-buildpackage -us -uc -b in a clean copy of the source tree (its
#     tracked and unignored files), DEB_BUILD_OPTIONS="nocheck parallel=2";
#  2. lintian on the result: no error or warning;
#  3. the file lists: what each package must hold, and no file that Debian's
#     libdapl2 or libdapl-dev ships;
#  4. the packages extracted (dpkg-deb -x) into a scratch root: a consumer
#     built with `pkg-config dat2` against it runs on the extracted registry
#     and provider, and so does the extracted dat_info;
#  5. dpkg --root installs, reinstalls (an upgrade), removes and purges the
#     packages in scratch roots with chrootless maintainer scripts: the
#     registry alternative comes and goes, and /etc/dat.conf gets fastdapl's
#     block and is byte-identical to before after removal (also when there
#     was none).
# usage: debian_packages.sh SOURCE_ROOT
set -euo pipefail
src=$(cd "$1" && pwd)
for tool in dpkg-buildpackage dh lintian dpkg-deb pkg-config; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool is missing (scripts/packages.txt)"; exit 77; }
done
export PATH=$PATH:/usr/sbin:/sbin # dpkg wants ldconfig and start-stop-daemon on the PATH
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
arch=$(dpkg --print-architecture)

echo "== 1. build in a clean copy"
if [ -n "${FASTDAPL_DEB_DIR:-}" ]; then # packages built before (by hand, to rerun the checks)
    cp "$FASTDAPL_DEB_DIR"/*.deb "$FASTDAPL_DEB_DIR"/*.changes "$FASTDAPL_DEB_DIR"/*.buildinfo "$work"/
    : >"$work/build.log"
else
    mkdir "$work/src"
    if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (cd "$src" && git ls-files -z --cached --others --exclude-standard |
            while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
            tar --null -T - -cf -) | tar -xf - -C "$work/src"
    else
        (cd "$src" && tar --exclude='./build*' --exclude=./.git -cf - .) | tar -xf - -C "$work/src"
    fi
    start=$(date +%s)
    (cd "$work/src" && DEB_BUILD_OPTIONS="nocheck parallel=2" dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1 ||
        { tail -n 60 "$work/build.log"; fail "dpkg-buildpackage failed"; }
    echo "built in $(($(date +%s) - start)) s"
fi
changes=$work/fastdapl_${version}_${arch}.changes
lib=$work/libfastdapl2_${version}_${arch}.deb
dev=$work/libfastdapl-dev_${version}_${arch}.deb
tools=$work/fastdapl-tools_${version}_${arch}.deb
for deb in "$lib" "$dev" "$tools"; do [ -f "$deb" ] || fail "not built: $deb"; done
if grep -E '^dpkg-shlibdeps: warning' "$work/build.log"; then fail "dpkg-shlibdeps warned"; fi

echo "== 2. lintian"
lintian_out=$(lintian --fail-on none "$changes" 2>&1)
printf '%s\n' "${lintian_out:-(nothing)}"
if printf '%s\n' "$lintian_out" | grep -E '^[EW]: '; then fail "lintian reports errors or warnings"; fi

echo "== 3. file lists"
for deb in "$lib" "$dev" "$tools"; do
    echo "-- $(basename "$deb")"
    dpkg-deb -c "$deb" | awk '{ $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print }'
done
list() { dpkg-deb -c "$1" | awk '{ print $6 }' | sed 's|^\./|/|'; }
expect() { # deb, path...
    local deb=$1; shift
    for path in "$@"; do
        grep -qxF "$path" <<<"$(list "$deb")" || fail "$(basename "$deb") lacks $path"
    done
}
expect "$lib" "/usr/lib/$ma/libfastdapl.so.2" "/usr/lib/$ma/libfastdapl.so.2.0.0" \
    "/usr/lib/$ma/fastdapl/libdat2.so.2" "/usr/lib/$ma/fastdapl/libdat2.so.2.0.0" \
    "/usr/lib/$ma/fastdapl/ld.so.conf" "/usr/lib/$ma/fastdapl/reference-ld.so.conf" \
    /usr/libexec/fastdapl/dat-conf /usr/share/fastdapl/dat.conf /usr/share/man/man7/fastdapl.7.gz
expect "$dev" /usr/include/fastdapl/dat2/udat.h /usr/include/fastdapl/dat2/fastdapl.h \
    "/usr/lib/$ma/fastdapl/libdat2.so" "/usr/lib/$ma/pkgconfig/dat2.pc"
expect "$tools" /usr/bin/dat_info /usr/bin/dat_perf /usr/bin/dat_perf_plot \
    /usr/share/man/man1/dat_info.1.gz /usr/share/man/man1/dat_perf.1.gz /usr/share/man/man1/dat_perf_plot.1.gz
# Never a file of Debian's libdapl2/libdapl-dev: from dpkg where they are
# installed, else the paths they are known to ship.
if dpkg -L libdapl2 libdapl-dev >"$work/debian-files" 2>/dev/null; then :; else
    printf '%s\n' /etc/dat.conf "/usr/lib/$ma/libdat2.so.2" "/usr/lib/$ma/libdat2.so" "/usr/lib/$ma/libdat2.a" \
        /usr/include/dat2/udat.h /usr/include/dat2/dat.h >"$work/debian-files"
fi
for deb in "$lib" "$dev" "$tools"; do
    list "$deb" | grep -v '/$' >"$work/ours"
    clash=$(grep -vxF -e /. -e /usr -e /usr/lib -e /usr/share -e /usr/share/doc "$work/debian-files" | grep -xF -f - "$work/ours" || true)
    [ -z "$clash" ] || fail "$(basename "$deb") ships files of Debian's libdapl: $clash"
done

echo "== 4. the extracted files: pkg-config dat2, a consumer, dat_info"
root=$work/root
for deb in "$lib" "$dev" "$tools"; do dpkg-deb -x "$deb" "$root"; done
export PKG_CONFIG_PATH=$root/usr/lib/$ma/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=
cflags=$(pkg-config --cflags dat2)
libs=$(pkg-config --libs dat2)
echo "pkg-config dat2: $cflags $libs"
[[ $cflags == *"-I$root/usr/include/fastdapl"* ]] || fail "dat2.pc's Cflags do not name /usr/include/fastdapl"
[[ $libs == *"-L$root/usr/lib/$ma/fastdapl"* ]] || fail "dat2.pc's Libs do not name the registry's directory"
# The installed fragment names the installed provider; in the scratch root it is under $root.
sed "s|/usr/lib/$ma/libfastdapl.so.2|$root/usr/lib/$ma/libfastdapl.so.2|" "$root/usr/share/fastdapl/dat.conf" >"$work/dat.conf"
grep -q "^fastdapl-tcp u2.0 .*$root/usr/lib/$ma/libfastdapl.so.2 " "$work/dat.conf" || fail "the fragment has no fastdapl-tcp line for /usr/lib/$ma/libfastdapl.so.2"
grep -q "^fastdapl-shm u2.0 .*$root/usr/lib/$ma/libfastdapl.so.2 .*\"shm\"" "$work/dat.conf" || fail "the fragment has no fastdapl-shm line"
cat >"$work/consumer.c" <<'C'
#include <dat2/udat.h>
#include <dat2/fastdapl.h> /* only fastdapl's headers have it */
#include <stdio.h>
#include <string.h>
int main(void)
{
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_PROVIDER_ATTR attr;
    DAT_RETURN rc = dat_ia_open("no-such-ia", 8, &evd, &ia);
    if (DAT_GET_TYPE(rc) != DAT_PROVIDER_NOT_FOUND)
        return 1;
    evd = DAT_HANDLE_NULL;
    if (dat_ia_open("fastdapl-tcp", 8, &evd, &ia) != DAT_SUCCESS)
        return 2;
    memset(&attr, 0, sizeof attr);
    if (dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &attr) != DAT_SUCCESS)
        return 3;
    for (DAT_COUNT i = 0; i < attr.num_provider_specific_attr; ++i)
        if (strcmp(attr.provider_specific_attr[i].name, "FASTDAPL_LIBRARY") == 0)
            printf("provider %s watermark event 0x%x\n", attr.provider_specific_attr[i].value,
                   FASTDAPL_ASYNC_WATERMARK_EVENT);
    return dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG) == DAT_SUCCESS ? 0 : 4;
}
C
# shellcheck disable=SC2086
cc -std=c99 -Wall -Wextra -Werror $cflags "$work/consumer.c" -o "$work/consumer" $libs
export LD_LIBRARY_PATH=$root/usr/lib/$ma/fastdapl:$root/usr/lib/$ma
ldd_out=$(ldd "$work/consumer")
grep -qF "libdat2.so.2 => $root/usr/lib/$ma/fastdapl/libdat2.so.2 " <<<"$ldd_out" ||
    fail "the consumer does not load the extracted registry: $(grep libdat2 <<<"$ldd_out")"
out=$(DAT_OVERRIDE=$work/dat.conf "$work/consumer") || fail "the consumer exited $?"
echo "consumer: $out"
[ "$out" = "provider $root/usr/lib/$ma/libfastdapl.so.2 watermark event 0x8100" ] || fail "the consumer says: $out"
DAT_OVERRIDE=$work/dat.conf "$root/usr/bin/dat_info" -q fastdapl-tcp >"$work/info" 2>&1 || { cat "$work/info"; fail "dat_info failed"; }
grep -E "^Registry: 2 providers \(registry library $root/usr/lib/$ma/fastdapl/libdat2.so.2\)" "$work/info" ||
    fail "dat_info does not run on the extracted registry: $(grep ^Registry "$work/info")"
grep -E "^    library +$root/usr/lib/$ma/libfastdapl.so.2\$" "$work/info" || fail "dat_info does not name the extracted provider"
grep -E '^    data path +softnic tcp$' "$work/info" || fail "dat_info does not say the data path"
"$root/usr/bin/dat_perf" --help >/dev/null || fail "the extracted dat_perf does not run"
unset LD_LIBRARY_PATH PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_LIBDIR

echo "== 5. dpkg --root: install, upgrade, remove, purge against a scratch dat.conf"
new_root() { # dir: an empty dpkg database
    mkdir -p "$1/var/lib/dpkg/info" "$1/var/lib/dpkg/updates" "$1/var/lib/dpkg/alternatives" "$1/etc/alternatives" \
        "$1/etc/ld.so.conf.d" "$1/var/log"
    touch "$1/var/lib/dpkg/status" "$1/var/lib/dpkg/available"
}
dpkg_root() { # dir, dpkg arguments...
    local dir=$1; shift
    dpkg --root="$dir" --log="$dir/var/log/dpkg.log" --force-script-chrootless --force-depends --force-not-root \
        --force-confold "$@" >>"$work/dpkg.log" 2>&1 || { tail -n 40 "$work/dpkg.log"; fail "dpkg $*"; }
}
alt_link=etc/ld.so.conf.d/dat2-registry-$ma.conf
check_installed() { # dir, what
    local dir=$1 what=$2 size
    size=$(stat -c %s "$dir/orig.conf")
    head -c "$size" "$dir/etc/dat.conf" >"$dir/prefix.conf"
    cmp -s "$dir/prefix.conf" "$dir/orig.conf" || fail "$what: the lines before ours changed"
    [ "$(grep -c '^# BEGIN fastdapl IAs' "$dir/etc/dat.conf")" = 1 ] || fail "$what: not one block of ours"
    grep -q "^fastdapl-tcp u2.0 nonthreadsafe default /usr/lib/$ma/libfastdapl.so.2 " "$dir/etc/dat.conf" ||
        fail "$what: no fastdapl-tcp line"
    # Absolute links inside the root: follow them by hand.
    local first second
    first=$(readlink "$dir/$alt_link" || echo missing)
    second=$(readlink "$dir$first" || echo missing)
    [ "$first" = "/etc/alternatives/dat2-registry-$ma" ] && [ "$second" = "/usr/lib/$ma/fastdapl/ld.so.conf" ] ||
        fail "$what: the registry alternative is $alt_link -> $first -> $second"
}

# A dat.conf of Debian's libdapl2 with an admin's line, no last newline.
r=$work/root-with-conf
new_root "$r"
{
    printf '# DAT v2.0\nofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "ib0 0" ""\n\n'
    printf '\tmy-ia u2.0 threadsafe default /opt/x/libmine.so.2 mine.2.0 "eth0 0" ""   \r\n'
    printf 'ofa-v2-ib1 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "ib1 0" ""'
} >"$r/etc/dat.conf"
chmod 0640 "$r/etc/dat.conf"
cp -p "$r/etc/dat.conf" "$r/orig.conf"
dpkg_root "$r" -i "$lib"
check_installed "$r" "libfastdapl2 installed"
[ "$(stat -c %a "$r/etc/dat.conf")" = 640 ] || fail "dat.conf's mode changed"
dpkg_root "$r" -i "$tools" "$dev"
check_installed "$r" "tools installed"
echo "-- /etc/dat.conf after installing (others' lines first)"
cat -A "$r/etc/dat.conf"
cp "$r/etc/dat.conf" "$r/installed.conf"
dpkg_root "$r" -i "$lib" "$dev" "$tools" # the same version again: prerm upgrade, postinst configure
check_installed "$r" "upgraded"
cmp -s "$r/etc/dat.conf" "$r/installed.conf" || fail "an upgrade changed dat.conf: $(diff "$r/installed.conf" "$r/etc/dat.conf")"
dpkg_root "$r" -r fastdapl-tools libfastdapl-dev libfastdapl2
cmp -s "$r/etc/dat.conf" "$r/orig.conf" || fail "removal did not give back dat.conf: $(diff <(od -c "$r/orig.conf") <(od -c "$r/etc/dat.conf"))"
[ ! -e "$r/$alt_link" ] && [ ! -L "$r/$alt_link" ] || fail "removal left the registry alternative"
[ ! -e "$r/usr/lib/$ma/libfastdapl.so.2" ] || fail "removal left the provider"
dpkg_root "$r" -P fastdapl-tools libfastdapl-dev libfastdapl2
cmp -s "$r/etc/dat.conf" "$r/orig.conf" || fail "purge changed dat.conf"
echo "ok: a dat.conf with others' lines is byte-identical after install, upgrade, remove and purge"

# No dat.conf: the block makes one, and removal takes it away.
r=$work/root-without-conf
new_root "$r"
: >"$r/orig.conf"
dpkg_root "$r" -i "$lib" "$tools"
check_installed "$r" "installed without a dat.conf"
dpkg_root "$r" -P fastdapl-tools libfastdapl2
[ ! -e "$r/etc/dat.conf" ] || fail "purge left the dat.conf the packages made: $(cat "$r/etc/dat.conf")"
echo "ok: without a dat.conf, installation makes one and purge removes it"
echo "the Debian packages build, are lintian clean, install beside libdapl2 and keep dat.conf"
