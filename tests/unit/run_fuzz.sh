#!/usr/bin/env bash
# Builds the dat.conf parser's libFuzzer target with clang++ and runs it for a
# bounded time (seconds, default 60). Fails on any crash or invariant break.
# Skips (exit 77) without clang++, except under CI=true.
set -euo pipefail
seconds=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)
root=${FASTDAPL_SOURCE_ROOT:-$(cd "$here/../.." && pwd)}
if ! command -v clang++ >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then echo "run_fuzz: clang++ missing (required under CI)"; exit 1; fi
    echo "run_fuzz: SKIP: clang++ not found"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root/src/registry" -I"$root/include" \
    "$root/src/registry/conf_parser.cpp" "$here/fuzz_conf_parser.cpp" -o "$work/fuzz_conf_parser"
mkdir -p "$work/corpus"
cp "$here"/fuzz_corpus/* "$work/corpus/"
cd "$work"
./fuzz_conf_parser -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 corpus 2>&1 | tail -n 25
