#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install dependencies, build, and
# run the main job: a dat_perf sweep on the fastdapl-tcp IA over loopback,
# then on the fastdapl-shm IA (shared memory).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
"$top/scripts/install-deps.sh"
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$top"
fi
ninja -C "$build"
# Run uninstalled: our libdat2 first on the library path, and the build
# tree's dat.conf (fastdapl-tcp and fastdapl-shm, with absolute paths) as
# the registry.
# The main job: a dat_perf sweep (1 B to 4 MiB, ping-pong latency and
# RDMA-write bandwidth) with both ends in this process over loopback.
export LD_LIBRARY_PATH="$build/src/registry${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DAT_OVERRIDE="$build/dat.conf"
if [ $# -gt 0 ]; then
    exec "$build/tools/dat_perf/dat_perf" "$@"
fi
# Without arguments: the sweep on both software IAs, TCP then shared memory.
for ia in fastdapl-tcp fastdapl-shm; do
    echo "== $ia"
    "$build/tools/dat_perf/dat_perf" -P "$ia"
done
