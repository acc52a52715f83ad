#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install dependencies, build, and
# run the main job (dat_info over the registry; dat_perf once it exists).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
"$top/scripts/install-deps.sh"
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$top"
fi
ninja -C "$build"
# Run uninstalled: our libdat2 first on the library path, and the build
# tree's dat.conf (fastdapl-tcp, with absolute paths) as the registry.
# dat_perf comes with issue 3's last part; until then the main job is
# dat_info opening fastdapl-tcp and printing every attribute.
export LD_LIBRARY_PATH="$build/src/registry${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DAT_OVERRIDE="$build/dat.conf"
"$build/tools/dat_info/dat_info"
