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
# Run uninstalled: our libdat2 first on the library path. Until the provider
# lands, the registry shown is the system's /etc/dat.conf (Debian's libdapl2
# installs one), which proves the registry loads and reports providers.
export LD_LIBRARY_PATH="$build/src/registry${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$build/tools/dat_info/dat_info" || true
