# Sourced by the peer scripts (compare-peers.sh, instructions-per-message.sh).
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
