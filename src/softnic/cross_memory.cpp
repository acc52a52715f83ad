// Cross-memory attach for the fastdapl-shm IA (cross_memory.hpp).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "cross_memory.hpp"

#include "fault_guard.hpp"

#include <endian.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace fastdapl::softnic {

CmaMode cma_mode()
{
    static const CmaMode mode = [] {
        // Off unless asked for: where both processes have a core the rings'
        // two copies (one by each side, at once) outrun process_vm_readv's
        // one (README: "Cross-memory attach").
        const char* v = std::getenv("FASTDAPL_SHM_CMA");
        if (v && std::strcmp(v, "auto") == 0)
            return CmaMode::automatic;
        if (v && std::strcmp(v, "1") == 0) {
            // Asked for: Yama (ptrace_scope 1) lets only ancestors read a
            // process; this lets any process of this user (where there is
            // no Yama, prctl says EINVAL and nothing changes).
            [[maybe_unused]] int r = prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
            return CmaMode::on;
        }
        return CmaMode::off;
    }();
    return mode;
}

bool PeerProcess::open(pid_t of)
{
    close();
    const long fd = ::syscall(SYS_pidfd_open, of, 0);
    if (fd < 0)
        return false;
    pid = of;
    pidfd = static_cast<int>(fd);
    return true;
}

void PeerProcess::close()
{
    if (pidfd >= 0)
        ::close(pidfd);
    pidfd = -1;
    pid = 0;
}

bool PeerProcess::alive() const
{
    // A pidfd polls readable once its process has exited (a zombie keeps
    // its pid until reaped, so while this says alive the pid is the peer's).
    pollfd p{pidfd, POLLIN, 0};
    return pidfd >= 0 && ::poll(&p, 1, 0) == 0;
}

void encode_pull_segments(const PullSegment* segments, std::size_t count, std::uint8_t* out)
{
    for (std::size_t i = 0; i < count; ++i) {
        const std::uint64_t addr = htobe64(segments[i].addr), length = htobe64(segments[i].length);
        std::memcpy(out + i * kPullSegmentBytes, &addr, 8);
        std::memcpy(out + i * kPullSegmentBytes + 8, &length, 8);
    }
}

bool decode_pull_segments(const std::uint8_t* bytes, std::size_t n, std::size_t max_count, std::uint64_t max_total,
                          PullSegment* out, std::size_t& count, std::uint64_t& total)
{
    if (n == 0 || n % kPullSegmentBytes != 0 || n / kPullSegmentBytes > max_count)
        return false;
    count = n / kPullSegmentBytes;
    total = 0;
    for (std::size_t i = 0; i < count; ++i) {
        std::uint64_t addr, length;
        std::memcpy(&addr, bytes + i * kPullSegmentBytes, 8);
        std::memcpy(&length, bytes + i * kPullSegmentBytes + 8, 8);
        addr = be64toh(addr);
        length = be64toh(length);
        // Each length is checked before it is added: the sum cannot wrap.
        if (length == 0 || length > max_total - total || addr + length < addr)
            return false;
        total += length;
        out[i] = {addr, length};
    }
    return true;
}

namespace {

constexpr std::size_t kMaxLists = 64;

// Copies `list` without its last byte into `into`; `last` is where that
// byte is. False when the list holds no byte.
bool split_last_byte(const iovec* list, std::size_t n, iovec* into, void*& last)
{
    std::memcpy(into, list, n * sizeof *list);
    for (std::size_t i = n; i-- > 0;) {
        if (into[i].iov_len == 0)
            continue;
        --into[i].iov_len;
        // An integer sum: the other process's addresses are not ours to point into.
        last = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(into[i].iov_base) + into[i].iov_len);
        return true;
    }
    return false;
}

std::size_t bytes_of(const iovec* list, std::size_t n)
{
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i)
        total += list[i].iov_len;
    return total;
}

} // namespace

bool pull_last_byte_last(const PeerProcess& peer, const iovec* local, std::size_t nlocal, const iovec* remote, std::size_t nremote)
{
    if (nlocal > kMaxLists || nremote > kMaxLists) {
        errno = EINVAL;
        return false;
    }
    iovec to[kMaxLists], from[kMaxLists];
    void* to_last = nullptr;
    void* from_last = nullptr;
    if (!split_last_byte(local, nlocal, to, to_last) || !split_last_byte(remote, nremote, from, from_last) ||
        bytes_of(to, nlocal) != bytes_of(from, nremote)) {
        errno = EINVAL;
        return false;
    }
    // The kernel copies list element by element and stops at the first
    // page it cannot reach: a short count is a fault (there is no other).
    const std::size_t body = bytes_of(to, nlocal);
    if (body > 0) {
        const ssize_t n = process_vm_readv(peer.pid, to, nlocal, from, nremote, 0);
        if (n < 0)
            return false;
        if (static_cast<std::size_t>(n) != body) {
            errno = EFAULT;
            return false;
        }
    }
    // The last byte: read here, then stored with release semantics under
    // the fault guard, as a guarded copy stores its last byte: whoever polls
    // on it with an acquire load sees the body the kernel stored first.
    std::uint8_t last = 0;
    const iovec into_last{&last, 1}, from_tail{from_last, 1};
    const ssize_t n = process_vm_readv(peer.pid, &into_last, 1, &from_tail, 1, 0);
    if (n != 1) {
        if (n >= 0)
            errno = EFAULT;
        return false;
    }
    if (!peer.alive()) {
        errno = ESRCH; // what was read may be another process's
        return false;
    }
    const Piece tail{to_last, &last, 1};
    if (!guarded_place(&tail, 1)) {
        errno = EFAULT; // the target's last page unmapped since the body went in
        return false;
    }
    return true;
}

} // namespace fastdapl::softnic
