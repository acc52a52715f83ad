// Cross-memory attach (process_vm_readv) for the fastdapl-shm IA: a large
// RDMA WRITE or READ is one copy from the other process's memory, pulled by
// the side whose memory receives it (each process writes only into its own
// memory, into a range its own key table checked).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

namespace fastdapl::softnic {

// FASTDAPL_SHM_CMA, read once per process: auto ("auto": used where the
// probe at setup works), on ("1": that, and it also lets any process of
// this user read this one where Yama would refuse it, prctl
// PR_SET_PTRACER_ANY, before the first link), off (unset, "0" or anything
// else).
enum class CmaMode : std::uint8_t { off, on, automatic };
CmaMode cma_mode();

// A source segment of a pulled WRITE: where it is in the initiator's
// address space. On the wire, 16 bytes each (address, then length, both
// big-endian).
struct PullSegment {
    std::uint64_t addr;
    std::uint64_t length;
};
inline constexpr std::size_t kPullSegmentBytes = 16;

void encode_pull_segments(const PullSegment* segments, std::size_t count, std::uint8_t* out);
// A peer's segment list (hostile input): true when `bytes` holds 1 to
// `max_count` whole segments, each at least one byte long, none wrapping
// past the end of the address space, `total` (their sum) at most
// `max_total`. False leaves `out`, `count` and `total` unspecified.
bool decode_pull_segments(const std::uint8_t* bytes, std::size_t n, std::size_t max_count, std::uint64_t max_total,
                          PullSegment* out, std::size_t& count, std::uint64_t& total);

// The other process of a link: its pid (for process_vm_readv) and a pidfd
// opened on it while it was known to be the peer. A pid alone could name
// another process once the peer exits and the pid is reused; the pidfd
// still names the peer, and tells whether it has exited.
struct PeerProcess {
    pid_t pid = 0;
    int pidfd = -1;
    // Opens the pidfd on `pid` (false with errno where the kernel has no
    // pidfd_open: no cross-memory attach then).
    bool open(pid_t of);
    void close();
    // False once the process the pidfd names has exited: a read through
    // its pid since may have reached another process.
    bool alive() const;
};

// Copies the bytes of `remote` (segments in `peer`'s memory) into `local`
// (segments here; the same number of bytes in all, at least one), the last
// byte stored last (consumers poll on it): everything else in one
// process_vm_readv, then the last byte read in a second and stored with
// release semantics (under the fault guard). False with errno when
// a copy fell short: EFAULT (a page on either side is not mapped as
// needed), EPERM or ESRCH (the peer may not be read, or is gone), EINVAL
// (lists longer than 64). ESRCH also when the peer exited by the end of
// the reads: they may have reached another process that took its pid, so
// the last byte is not stored (the body may be: the request fails).
bool pull_last_byte_last(const PeerProcess& peer, const iovec* local, std::size_t nlocal, const iovec* remote,
                         std::size_t nremote);

} // namespace fastdapl::softnic
