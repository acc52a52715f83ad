# Sourced by the peer scripts (compare-peers.sh, instructions-per-message.sh):
# what both do to find the build and to start a pair of processes.
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors

# Waits until something listens on TCP port $1 (or, for fastdapl-shm, on
# its abstract Unix name for that port), or process $2 has gone.
wait_listen() {
    local hex
    hex=$(printf '%04X' "$1")
    for _ in $(seq 1 400); do
        grep -qiE ":$hex [0-9A-F]+:[0-9A-F]{4} 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
        grep -q " @fastdapl-shm/$(id -u)/$1\$" /proc/net/unix 2>/dev/null && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

# use_build NAME: takes fastdapl's build directory in $build (made absolute)
# and its dat_perf in $dat_perf, and points the registry and DAT_OVERRIDE
# (unless set) there; exits naming NAME when dat_perf is not built.
use_build() {
    [ -d "$build" ] && build=$(cd "$build" && pwd)
    dat_perf=$build/tools/dat_perf/dat_perf
    if [ ! -x "$dat_perf" ]; then
        echo "$1: no $dat_perf: build fastdapl first (meson setup build && ninja -C build), or -B DIR" >&2
        exit 1
    fi
    export DAT_OVERRIDE=${DAT_OVERRIDE:-$build/dat.conf}
    export LD_LIBRARY_PATH="$build/src/registry${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
