#!/usr/bin/env bash
# Builds one libFuzzer target with clang++ into a temporary directory and runs it for a bounded time.
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors
#
# usage: run_fuzz.sh [SECONDS] [TARGET]     SECONDS defaults to 60; TARGET: conf (default) | cm
#   conf: the dat.conf parser (tests/unit/fuzz_conf_parser.cpp, seeds in tests/unit/fuzz_corpus)
#   cm:   the socket CM decoder (tests/cm/fuzz_cm_wire.cpp, seeds in tests/cm/fuzz_corpus)
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
    *) echo "run_fuzz: unknown target '$target' (conf or cm)" >&2; exit 2 ;;
esac

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
    "$clangxx" -std=c++20 -O1 -g -Wall -Wextra -Werror \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
        "${includes[@]}" "${sources[@]}" -o "$fuzzer"
fi

mkdir -p "$work/corpus" "$work/artifacts"
cp "$corpus"/* "$work/corpus/"

args=(-max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048
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
