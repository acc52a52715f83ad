// Instruction count of the fast path's posts alone, on queues in ordinary
// memory (no device, no provider): SendQueue::post + ring() of one 8-byte
// inline SEND as the provider's direct path makes it (DAT flags converted,
// BlueFlame or 8-byte doorbell), and SharedReceiveQueue::post of one
// segment. Run under
//   valgrind --tool=callgrind --collect-atstart=no
// Only the posts are collected; retiring and completing (so the queues
// never fill) happens outside. bench/callgrind_fastpath_post.sh prints the
// count per call.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "queues.hpp"

#include <valgrind/callgrind.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace fastdapl::fastpath;

namespace {

// What the provider's post_request does for a send once its checks pass.
// noipa: the arguments stay unknown to the compiler, as they are in the
// library.
[[gnu::noipa]] bool post_send(SendQueue& sq, const DAT_LMR_TRIPLET* iov, std::uint32_t n, std::uint32_t total,
                              DAT_COMPLETION_FLAGS flags, std::uint64_t cookie)
{
    if (!sq.post(MLX5_OPCODE_SEND, reinterpret_cast<const Sge*>(iov), n, total, nullptr, 0, control_flags(flags),
                 cookie))
        return false;
    sq.ring();
    return true;
}

[[gnu::noipa]] bool post_srq(SharedReceiveQueue& srq, const DAT_LMR_TRIPLET* iov, std::uint32_t n,
                             std::uint64_t cookie)
{
    return srq.post(reinterpret_cast<const Sge*>(iov), n, cookie);
}

// The measuring overhead alone: the toggles and a call of the same shape.
[[gnu::noipa]] bool post_nothing(SendQueue&, const DAT_LMR_TRIPLET*, std::uint32_t, std::uint32_t, DAT_COMPLETION_FLAGS,
                                 std::uint64_t)
{
    return true;
}

int empty(int iterations)
{
    SendQueue sq;
    DAT_LMR_TRIPLET iov{0, 8, 1};
    for (int i = 0; i < iterations; ++i) {
        CALLGRIND_TOGGLE_COLLECT;
        const bool ok = post_nothing(sq, &iov, 1, 8, DAT_COMPLETION_DEFAULT_FLAG, static_cast<std::uint64_t>(i));
        CALLGRIND_TOGGLE_COLLECT;
        if (!ok)
            return 1;
    }
    return 0;
}

int send(DoorbellMode mode, int iterations)
{
    constexpr std::uint32_t kBbs = 64;
    alignas(4096) static std::uint8_t sq_buf[kBbs * 64];
    alignas(4096) static std::uint8_t uar[4096];
    static SendSlot slots[kBbs];
    __be32 dbrec[2] = {0, 0};
    mlx5dv_qp dv{};
    dv.dbrec = dbrec;
    dv.sq.buf = sq_buf;
    dv.sq.wqe_cnt = kBbs;
    dv.sq.stride = 64;
    dv.bf.reg = uar + 0x800;
    dv.bf.size = 256;
    SendQueue sq;
    sq.init({&dv, 0x1234, 64, slots, mode, {}});

    alignas(8) char payload[8] = {'p', 'a', 'y', 'l', 'o', 'a', 'd', '!'};
    DAT_LMR_TRIPLET iov{reinterpret_cast<DAT_VADDR>(payload), 8, 1};
    for (int i = 0; i < iterations; ++i) {
        CALLGRIND_TOGGLE_COLLECT;
        const bool ok = post_send(sq, &iov, 1, 8, DAT_COMPLETION_DEFAULT_FLAG, static_cast<std::uint64_t>(i));
        CALLGRIND_TOGGLE_COLLECT;
        if (!ok) {
            std::fprintf(stderr, "fastpath_post: send %d refused\n", i);
            return 1;
        }
        sq.retire_through(static_cast<std::uint16_t>(sq.producer_index() - 1));
    }
    // The last WQE is what was asked for: 8 bytes inline behind the ctrl segment.
    const std::uint8_t* last = sq_buf + ((sq.producer_index() - 1) % kBbs) * 64;
    if (std::memcmp(last + 16 + 4, payload, 8) != 0 || be32toh(dbrec[MLX5_SND_DBR]) != (sq.producer_index() & 0xffff)) {
        std::fprintf(stderr, "fastpath_post: the send WQE is not what was posted\n");
        return 1;
    }
    return 0;
}

int srq(int iterations)
{
    constexpr std::uint32_t kWqes = 64, kStride = 64;
    alignas(4096) static std::uint8_t buf[kWqes * kStride];
    static std::uint64_t cookies[kWqes];
    __be32 dbrec[2] = {0, 0};
    mlx5dv_srq dv{};
    dv.buf = buf;
    dv.dbrec = dbrec;
    dv.stride = kStride;
    SharedReceiveQueue q;
    q.init(dv, kWqes, cookies);
    static char buffer[256];
    DAT_LMR_TRIPLET iov{reinterpret_cast<DAT_VADDR>(buffer), sizeof buffer, 1};
    std::uint32_t next_done = 0;
    for (int i = 0; i < iterations; ++i) {
        CALLGRIND_TOGGLE_COLLECT;
        const bool ok = post_srq(q, &iov, 1, static_cast<std::uint64_t>(i));
        CALLGRIND_TOGGLE_COLLECT;
        if (!ok) {
            std::fprintf(stderr, "fastpath_post: SRQ post %d refused\n", i);
            return 1;
        }
        q.complete(static_cast<std::uint16_t>(next_done)); // in posting order
        next_done = (next_done + 1) % kWqes;
    }
    return be32toh(dbrec[0]) == (static_cast<std::uint32_t>(iterations) & 0xffff) ? 0 : 1;
}

} // namespace

int main(int argc, char** argv)
{
    const std::string mode = argc > 1 ? argv[1] : "";
    const int iterations = argc > 2 ? std::atoi(argv[2]) : 1000;
    if (iterations <= 0) {
        std::fprintf(stderr, "usage: fastpath_post send-bf|send-8b|srq|empty [iterations]\n");
        return 2;
    }
    if (mode == "send-bf")
        return send(DoorbellMode::blueflame, iterations);
    if (mode == "send-8b")
        return send(DoorbellMode::uar_8byte, iterations);
    if (mode == "srq")
        return srq(iterations);
    if (mode == "empty")
        return empty(iterations);
    std::fprintf(stderr, "usage: fastpath_post send-bf|send-8b|srq|empty [iterations]\n");
    return 2;
}
