# Sourced by the peer tests (dtest_pairs.sh, dtestx_pairs.sh,
# dtestcm_loop.sh): whether a server listens yet.
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors

# listening_on PORT...: true when something listens on one of the ports:
# a TCP listener (Debian's test programs exchange their parameters over
# TCP; a fastdapl-tcp service point is one), or the abstract Unix name a
# fastdapl-shm service point listens on, fastdapl-shm/<uid>/<port>, which
# /proc/net/tcp does not show (looking only there, a script that waits for
# a fastdapl-shm listener waits out its whole limit).
listening_on() {
    local port hex uid
    uid=$(id -u)
    for port in "$@"; do
        printf -v hex '%04X' "$port"
        grep -qiE "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:[0-9A-F]{4} 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null &&
            return 0
        # Flags 00010000 (accepting), type 0001 (stream), state 01: the listener, not a connection.
        grep -qE " 00010000 0001 01 +[0-9]+ @fastdapl-shm/$uid/$port\$" /proc/net/unix 2>/dev/null && return 0
    done
    return 1
}
