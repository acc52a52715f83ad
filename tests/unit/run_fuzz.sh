#!/usr/bin/env bash
# Builds one libFuzzer target with clang++ and runs it for a bounded time.
# usage: run_fuzz.sh SECONDS TARGET   (TARGET: conf | cm)
# Fails on any crash or broken invariant. Skips (exit 77) without clang++,
# except under CI=true.
set -euo pipefail
seconds=${1:-60}
target=${2:-conf}
here=$(cd "$(dirname "$0")" && pwd)
root=${FASTDAPL_SOURCE_ROOT:-$(cd "$here/../.." && pwd)}
if ! command -v clang++ >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then echo "run_fuzz: clang++ missing (required under CI)"; exit 1; fi
    echo "run_fuzz: SKIP: clang++ not found"; exit 77
fi
case "$target" in
    conf) sources=("$root/src/registry/conf_parser.cpp" "$here/fuzz_conf_parser.cpp"); include="$root/src/registry"
          corpus="$here/fuzz_corpus" ;;
    cm)   sources=("$root/src/cm/cm_wire.cpp" "$root/tests/cm/fuzz_cm_wire.cpp"); include="$root/src/cm"
          corpus="$root/tests/cm/fuzz_corpus" ;;
    *) echo "run_fuzz: unknown target '$target'"; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$include" -I"$root/include" "${sources[@]}" -o "$work/fuzzer"
mkdir -p "$work/corpus"
cp "$corpus"/* "$work/corpus/"
cd "$work"
./fuzzer -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 corpus 2>&1 | tail -n 25
