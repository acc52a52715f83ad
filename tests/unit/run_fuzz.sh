#!/usr/bin/env bash
# Builds one libFuzzer target with clang++ into a temporary directory and runs it for a bounded time.
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors
#
# usage: run_fuzz.sh [SECONDS] [TARGET]     SECONDS defaults to 60; TARGET: conf (default) | cm | api | wire
#   conf: the dat.conf parser (tests/unit/fuzz_conf_parser.cpp, seeds in tests/unit/fuzz_corpus)
#   cm:   the socket CM decoder (tests/cm/fuzz_cm_wire.cpp, seeds in tests/cm/fuzz_corpus)
#   api:  sequences of DAT calls through libdat2 and libfastdapl on the
#         softnic IA (tests/provider/fuzz_dat_api.cpp, seeds in tests/provider/fuzz_api_corpus)
#   wire: a hostile peer's handshake and frames on a live IA's sockets
#         (tests/provider/fuzz_wire_peer.cpp, seeds in tests/provider/fuzz_wire_corpus)
# api and wire need both libraries instrumented too: they are built with
# clang++ (ninja, incrementally) in $FASTDAPL_FUZZ_LIBDIR (default: a
# temporary directory), under a lock, so that both targets can share it.
# Exit status: 0 when the run ends with no crash, leak, timeout or broken
# invariant; 1 otherwise (the crashing input is copied to the current
# directory, or to $FASTDAPL_FUZZ_ARTIFACTS); 77 (skip) when clang++ is
# missing, unless CI=true, where that is a failure.
# FASTDAPL_FUZZER=path runs an already built conf fuzzer (meson builds one
# when the compiler is clang) instead of compiling.
set -euo pipefail

seconds=${1:-60}
target=${2:-conf}
case "$seconds" in '' | *[!0-9]*) echo "run_fuzz: SECONDS must be a number, got '$seconds'" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
root=${FASTDAPL_SOURCE_ROOT:-$(cd "$here/../.." && pwd)}
clangxx=${CLANGXX:-clang++}
unit_timeout=10

case "$target" in
    conf)
        sources=("$root/src/registry/conf_parser.cpp" "$here/fuzz_conf_parser.cpp")
        includes=(-I"$root/src/registry" -I"$root/include")
        corpus="$here/fuzz_corpus"
        dict="$here/fuzz_conf_parser.dict"
        max_len=4096 ;; # lines near the 16 KiB limit come from the target's 0x01/0x02 expansion
    cm)
        sources=("$root/src/cm/cm_wire.cpp" "$root/tests/cm/fuzz_cm_wire.cpp")
        includes=(-I"$root/src/cm" -I"$root/include")
        corpus="$root/tests/cm/fuzz_corpus"
        dict=""
        max_len=4096 ;;
    api)
        sources=("$root/tests/provider/fuzz_dat_api.cpp")
        includes=(-I"$root/include")
        corpus="$root/tests/provider/fuzz_api_corpus"
        dict=""
        unit_timeout=30
        max_len=2048 ;;
    wire)
        sources=("$root/tests/provider/fuzz_wire_peer.cpp" "$root/src/cm/cm_wire.cpp")
        includes=(-I"$root/include" -I"$root/src/cm")
        corpus="$root/tests/provider/fuzz_wire_corpus"
        dict=""
        unit_timeout=30 # the target's own bounds on the IA's answers are 10 s
        max_len=4096 ;;
    *) echo "run_fuzz: unknown target '$target' (conf, cm, api or wire)" >&2; exit 2 ;;
esac

# libdat2.so.2 and libfastdapl.so.2 (softnic, socket CM and the verbs
# kinds, as meson builds them) with ASan, UBSan and libFuzzer's coverage,
# through a generated ninja file: only what changed is compiled again.
build_libraries() { # dir
    local dir=$1 mlx5_args="" libs
    mkdir -p "$dir"
    pkg-config --exists libmlx5 2>/dev/null && mlx5_args=-DFASTDAPL_HAVE_MLX5DV=1
    libs=$(pkg-config --libs libibverbs librdmacm libmlx5 2>/dev/null || echo "-libverbs -lrdmacm")
    local flags="-std=c++20 -O1 -g -fPIC -fvisibility=hidden -Wall -Wextra -Werror -fno-omit-frame-pointer"
    flags+=" -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined $mlx5_args"
    flags+=" -I$root/include -I$root/src/core -I$root/src/softnic -I$root/src/fastpath -I$root/src/cm -I$root/src/verbs"
    local registry=(registry/registry registry/forward registry/strerror registry/conf_parser)
    # Every source of the provider's libraries (src/provider, src/core, the
    # softnic, both CMs, the verbs layer), so that new files need no edit here.
    local provider=() f
    for f in "$root"/src/{provider,core,core/paths,softnic,cm,verbs}/*.cpp; do
        f=${f#"$root/src/"}
        provider+=("${f%.cpp}")
    done
    {
        echo "rule cxx"
        echo "  command = $clangxx $flags -MD -MF \$out.d -c \$in -o \$out"
        echo "  depfile = \$out.d"
        echo "  deps = gcc"
        echo "rule link"
        echo "  command = $clangxx -shared -fsanitize=address,undefined \$in -o \$out \$extra"
        local o objs=()
        for o in "${registry[@]}"; do
            echo "build obj/$o.o: cxx $root/src/$o.cpp"
            objs+=("obj/$o.o")
        done
        echo "build libdat2.so.2: link ${objs[*]}"
        echo "  extra = -Wl,-soname,libdat2.so.2 -Wl,--version-script=$root/src/registry/libdat2.map -ldl -pthread"
        objs=()
        for o in "${provider[@]}"; do
            echo "build obj/$o.o: cxx $root/src/$o.cpp"
            objs+=("obj/$o.o")
        done
        echo "build libfastdapl.so.2: link ${objs[*]}"
        echo "  extra = -Wl,-soname,libfastdapl.so.2 -Wl,--version-script=$root/src/provider/libfastdapl.map $libs -pthread"
    } >"$dir/build.ninja.new"
    cmp -s "$dir/build.ninja.new" "$dir/build.ninja" 2>/dev/null || mv "$dir/build.ninja.new" "$dir/build.ninja"
    rm -f "$dir/build.ninja.new"
    ln -sfn libdat2.so.2 "$dir/libdat2.so"
    # One build at a time: the api and wire tests may start together.
    flock "$dir/.lock" ninja -C "$dir" -j "${FASTDAPL_FUZZ_JOBS:-2}" libdat2.so.2 libfastdapl.so.2
}

work=$(mktemp -d "${TMPDIR:-/tmp}/fastdapl-fuzz-$target.XXXXXX")
trap 'rm -rf "$work"' EXIT

fuzzer=${FASTDAPL_FUZZER:-}
if [ -n "$fuzzer" ] && [ "$target" = conf ]; then
    [ -x "$fuzzer" ] || { echo "run_fuzz: FASTDAPL_FUZZER=$fuzzer is not executable" >&2; exit 1; }
else
    if ! command -v "$clangxx" >/dev/null 2>&1; then
        if [ "${CI:-}" = "true" ]; then
            echo "run_fuzz: $clangxx not found, and CI=true requires the fuzz suite" >&2
            exit 1
        fi
        echo "run_fuzz: SKIP: $clangxx not found"
        exit 77
    fi
    fuzzer="$work/fuzz-$target"
    echo "run_fuzz: building $target fuzzer with $("$clangxx" --version | head -n 1)"
    link=()
    case "$target" in api | wire)
        libdir=${FASTDAPL_FUZZ_LIBDIR:-$work/lib}
        build_libraries "$libdir" || { echo "run_fuzz: building the instrumented libraries failed" >&2; exit 1; }
        link=(-L"$libdir" -ldat2 -Wl,-rpath,"$libdir")
        printf '%s\n' "fastdapl-tcp u2.0 nonthreadsafe default $libdir/libfastdapl.so.2 fastdapl.0.1 \"lo\" \"\"" \
            >"$work/dat.conf"
        export DAT_OVERRIDE="$work/dat.conf" ;;
    esac
    "$clangxx" -std=c++20 -O1 -g -Wall -Wextra -Werror \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
        "${includes[@]}" "${sources[@]}" "${link[@]}" -o "$fuzzer"
fi

mkdir -p "$work/corpus" "$work/artifacts"
cp "$corpus"/* "$work/corpus/"

args=(-max_total_time="$seconds" -max_len="$max_len" -timeout="$unit_timeout" -rss_limit_mb=2048
      -print_final_stats=1 -artifact_prefix="$work/artifacts/")
[ -n "$dict" ] && args+=(-dict="$dict")

echo "run_fuzz: running $target for ${seconds}s"
rc=0
(cd "$work" && ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$fuzzer" "${args[@]}" corpus) >"$work/log" 2>&1 || rc=$?

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
if [ "$rc" -ne 0 ] || ls "$work/artifacts"/* >/dev/null 2>&1; then
    # The finding: the sanitizer report or the broken invariant, with the input.
    grep -v -e '^#[0-9]' -e '^INFO: ' "$work/log" | tail -n 80
    dest=${FASTDAPL_FUZZ_ARTIFACTS:-$PWD}
    for a in "$work/artifacts"/*; do
        [ -e "$a" ] || continue
        cp "$a" "$dest/" 2>/dev/null && echo "run_fuzz: input kept as $dest/$(basename "$a")"
    done
    echo "run_fuzz: FAIL: $target fuzzer exited with status $rc after ${execs:-?} executions"
    exit 1
fi
tail -n 12 "$work/log"
echo "run_fuzz: OK: $target: ${execs:-?} executions in ${seconds}s, no crash"
