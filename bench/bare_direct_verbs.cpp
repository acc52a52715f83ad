// The floor for post_dequeue's direct-path numbers: a bare direct-verbs
// consumer doing the work of one dat_ep_post_send of 8 bytes (one inline
// data segment) and one dat_evd_dequeue of its completion, with no uDAPL,
// no provider and no device: the queues are ordinary memory laid out as
// <infiniband/mlx5dv.h> defines them. Written directly with mlx5dv.h's
// structs, not with the fast path's WQE writer, so it stays an independent
// floor.
//
// post: build a send WQE (control segment + inline data segment), note its
// wr_id, bump the SQ producer index, store fence, doorbell record
// (big-endian), then the WQE's first 8 bytes to the "UAR" (a 64-bit store
// between write-combining fences), alternating between its two halves as
// mlx5 BlueFlame registers do.
// poll: the CQE64 at the consumer index, owned by software when its owner
// bit equals the index's wrap parity; read opcode, wqe_counter and QPN,
// look up the wr_id, free the send queue up to the WQE it names, advance
// the consumer index and write the CQ doorbell record.
//
// Between iterations, outside the collected region, the harness plays the
// device: it checks the WQE, the doorbell record and the UAR word, and
// writes the requester CQE (owner byte last). Any mismatch exits 1.
//
// usage: bare_direct_verbs post|poll [iterations]
// Under valgrind --tool=callgrind --collect-atstart=no, only the post call
// (post) or the poll call (poll) is collected, as post_dequeue collects
// dat_ep_post_send and dat_evd_dequeue.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include <infiniband/mlx5dv.h>
#include <valgrind/callgrind.h>

#include <endian.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// x86 keeps stores in order: a compiler barrier is the store (and load)
// fence there; elsewhere a real one.
inline void store_fence()
{
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("" ::: "memory");
#else
    __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
}

inline void load_fence()
{
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("" ::: "memory");
#else
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
}

// Around the write-combining UAR store.
inline void wc_fence()
{
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("sfence" ::: "memory");
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

constexpr std::uint32_t kWqeBB = 64;
constexpr std::uint32_t kLogSqSize = 6; // 64 basic blocks
constexpr std::uint32_t kLogCqSize = 7; // 128 CQE64s
constexpr std::uint32_t kBfSize = 256;  // each half of the BlueFlame register
// Inline data that fits one basic block with the control segment and the
// inline segment's 4-byte header: this consumer's WQEs never wrap.
constexpr std::uint32_t kMaxInline = kWqeBB - sizeof(mlx5_wqe_ctrl_seg) - sizeof(mlx5_wqe_inl_data_seg);

struct SendQueue {
    std::uint8_t* buf;
    std::uint32_t wqe_cnt;
    std::uint32_t pi; // producer index, in basic blocks
    std::uint32_t ci; // first basic block not yet completed
    std::uint32_t qpn;
    volatile __be32* dbrec; // the QP's doorbell record pair
    std::uint8_t* uar;      // the BlueFlame register (ordinary memory here)
    std::uint32_t bf_offset;
    std::uint64_t* wr_id; // per basic block
};

struct CompletionQueue {
    std::uint8_t* buf;
    std::uint32_t log_cnt;
    std::uint32_t ci;
    volatile __be32* dbrec; // [0]: consumer index
};

struct Completion {
    std::uint64_t wr_id;
    std::uint32_t qpn;
    std::uint8_t opcode;
    std::uint8_t syndrome; // 0 unless an error CQE
};

// Both calls are what a consumer's own post and poll routines would be: not
// inlined into the loop and not specialized for its constants (noipa), so
// the length and queues are run-time values as they are for the provider.

// One signaled SEND of `len` <= kMaxInline bytes, copied into the WQE.
// False when the send queue is full.
__attribute__((noipa)) bool post_send_inline(SendQueue& sq, const void* data, std::uint32_t len, std::uint64_t wr_id)
{
    if (sq.pi - sq.ci >= sq.wqe_cnt) [[unlikely]]
        return false;
    const std::uint32_t index = sq.pi & (sq.wqe_cnt - 1);
    std::uint8_t* const wqe = sq.buf + index * kWqeBB;
    auto* ctrl = reinterpret_cast<mlx5_wqe_ctrl_seg*>(wqe);
    auto* inl = reinterpret_cast<mlx5_wqe_inl_data_seg*>(wqe + sizeof *ctrl);
    inl->byte_count = htobe32(len | MLX5_INLINE_SEG);
    std::memcpy(inl + 1, data, len);
    const std::uint32_t ds = (sizeof *ctrl + sizeof *inl + len + 15) / 16;
    ctrl->opmod_idx_opcode = htobe32((sq.pi & 0xffff) << 8 | MLX5_OPCODE_SEND);
    ctrl->qpn_ds = htobe32(sq.qpn << 8 | ds);
    ctrl->signature = 0;
    ctrl->dci_stream_channel_id = 0;
    ctrl->fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE;
    ctrl->imm = 0;
    sq.wr_id[index] = wr_id;
    ++sq.pi;

    store_fence(); // the WQE before the doorbell record
    sq.dbrec[MLX5_SND_DBR] = htobe32(sq.pi & 0xffff);
    wc_fence(); // the doorbell record before the UAR
    *reinterpret_cast<volatile std::uint64_t*>(sq.uar + sq.bf_offset) = *reinterpret_cast<const std::uint64_t*>(wqe);
    wc_fence();
    sq.bf_offset ^= kBfSize;
    return true;
}

// At most one completion of the (single) send queue's CQ: 1 with `out`
// filled, 0 when the next CQE is still the device's.
__attribute__((noipa)) int poll_one(CompletionQueue& cq, SendQueue& sq, Completion& out)
{
    const auto* cqe = reinterpret_cast<const mlx5_cqe64*>(cq.buf + ((cq.ci & ((1u << cq.log_cnt) - 1)) << 6));
    const std::uint8_t op_own = *reinterpret_cast<const volatile std::uint8_t*>(&cqe->op_own);
    const std::uint8_t opcode = op_own >> 4;
    if ((op_own & MLX5_CQE_OWNER_MASK) != ((cq.ci >> cq.log_cnt) & 1) || opcode == MLX5_CQE_INVALID)
        return 0;
    load_fence(); // the rest of the CQE after its owner byte
    const std::uint16_t counter = be16toh(cqe->wqe_counter);
    out.opcode = opcode;
    out.qpn = be32toh(cqe->sop_drop_qpn) & 0xffffff;
    out.syndrome = opcode == MLX5_CQE_REQ_ERR ? reinterpret_cast<const mlx5_err_cqe*>(cqe)->syndrome : 0;
    const std::uint32_t index = counter & (sq.wqe_cnt - 1);
    out.wr_id = sq.wr_id[index];
    sq.ci = counter + 1u; // every WQE up to this one is done (one basic block each)
    ++cq.ci;
    store_fence(); // done reading the CQE before giving its slot back
    cq.dbrec[0] = htobe32(cq.ci & 0xffffff);
    return 1;
}

void* zeroed(std::size_t bytes)
{
    void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!p) {
        std::fprintf(stderr, "bare_direct_verbs: out of memory\n");
        std::exit(1);
    }
    std::memset(p, 0, bytes);
    return p;
}

[[noreturn]] void fail(int iteration, const char* what)
{
    std::fprintf(stderr, "bare_direct_verbs: iteration %d: %s\n", iteration, what);
    std::exit(1);
}

} // namespace

int main(int argc, char** argv)
{
    const std::string collect = argc > 1 ? argv[1] : "post";
    const int iterations = argc > 2 ? std::atoi(argv[2]) : 1000;
    const bool collect_post = collect == "post", collect_poll = collect == "poll";
    if ((!collect_post && !collect_poll) || iterations <= 0) {
        std::fprintf(stderr, "usage: bare_direct_verbs post|poll [iterations]\n");
        return 2;
    }
    static_assert(sizeof(mlx5_wqe_ctrl_seg) == 16 && sizeof(mlx5_cqe64) == 64);
    static_assert(sizeof(std::uint64_t) <= kMaxInline);

    SendQueue sq{};
    sq.wqe_cnt = 1u << kLogSqSize;
    sq.buf = static_cast<std::uint8_t*>(zeroed(sq.wqe_cnt * kWqeBB));
    sq.qpn = 0x1234;
    auto* qp_dbrec = static_cast<__be32*>(zeroed(64));
    sq.dbrec = qp_dbrec;
    sq.uar = static_cast<std::uint8_t*>(zeroed(2 * kBfSize));
    sq.wr_id = static_cast<std::uint64_t*>(zeroed(sq.wqe_cnt * sizeof(std::uint64_t)));

    CompletionQueue cq{};
    cq.log_cnt = kLogCqSize;
    const std::uint32_t cqe_cnt = 1u << kLogCqSize;
    cq.buf = static_cast<std::uint8_t*>(zeroed(cqe_cnt * sizeof(mlx5_cqe64)));
    for (std::uint32_t i = 0; i < cqe_cnt; ++i) // all the device's at first
        reinterpret_cast<mlx5_cqe64*>(cq.buf)[i].op_own = MLX5_CQE_INVALID << 4 | MLX5_CQE_OWNER_MASK;
    auto* cq_dbrec = static_cast<__be32*>(zeroed(64));
    cq.dbrec = cq_dbrec;

    std::uint32_t device_cqe = 0; // the device's CQ producer index
    std::uint32_t uar_offset = 0;
    for (int i = 0; i < iterations; ++i) {
        std::uint64_t payload = 0x0102030405060708ull * static_cast<std::uint64_t>(i + 1);
        const std::uint64_t cookie = 0xc0de0000u + static_cast<std::uint64_t>(i);
        const std::uint32_t pi = sq.pi;

        if (collect_post)
            CALLGRIND_TOGGLE_COLLECT;
        const bool posted = post_send_inline(sq, &payload, sizeof payload, cookie);
        if (collect_post)
            CALLGRIND_TOGGLE_COLLECT;
        if (!posted)
            fail(i, "send queue full");

        // The device: doorbell record, UAR word, WQE.
        const std::uint8_t* wqe = sq.buf + (pi & (sq.wqe_cnt - 1)) * kWqeBB;
        const auto* ctrl = reinterpret_cast<const mlx5_wqe_ctrl_seg*>(wqe);
        const auto* inl = reinterpret_cast<const mlx5_wqe_inl_data_seg*>(wqe + sizeof *ctrl);
        if (be32toh(qp_dbrec[MLX5_SND_DBR]) != ((pi + 1) & 0xffff))
            fail(i, "doorbell record is not the new producer index");
        if (std::memcmp(sq.uar + uar_offset, wqe, 8) != 0)
            fail(i, "the UAR does not hold the WQE's first 8 bytes");
        uar_offset ^= kBfSize;
        if (be32toh(ctrl->opmod_idx_opcode) != ((pi & 0xffff) << 8 | MLX5_OPCODE_SEND))
            fail(i, "control segment: wrong index or opcode");
        if (be32toh(ctrl->qpn_ds) != (sq.qpn << 8 | 2) || !(ctrl->fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE))
            fail(i, "control segment: wrong QPN, size or completion request");
        if (be32toh(inl->byte_count) != (sizeof payload | MLX5_INLINE_SEG))
            fail(i, "inline segment: wrong byte count");
        if (std::memcmp(inl + 1, &payload, sizeof payload) != 0)
            fail(i, "inline segment: wrong data");
        payload = 0; // the WQE holds a copy: the buffer is free at once

        // The device's requester CQE, owner byte last.
        auto* cqe = reinterpret_cast<mlx5_cqe64*>(cq.buf) + (device_cqe & (cqe_cnt - 1));
        std::memset(cqe, 0, sizeof *cqe - 1);
        cqe->byte_cnt = htobe32(8);
        cqe->sop_drop_qpn = htobe32(sq.qpn);
        cqe->wqe_counter = htobe16(static_cast<std::uint16_t>(pi));
        store_fence();
        cqe->op_own = MLX5_CQE_REQ << 4 | ((device_cqe >> kLogCqSize) & 1);
        ++device_cqe;

        Completion c{};
        if (collect_poll)
            CALLGRIND_TOGGLE_COLLECT;
        const int got = poll_one(cq, sq, c);
        if (collect_poll)
            CALLGRIND_TOGGLE_COLLECT;
        if (got != 1)
            fail(i, "no completion");
        if (c.wr_id != cookie || c.qpn != sq.qpn || c.opcode != MLX5_CQE_REQ || c.syndrome != 0)
            fail(i, "completion: wrong wr_id, QPN or opcode");
        if (be32toh(cq_dbrec[0]) != (device_cqe & 0xffffff))
            fail(i, "CQ doorbell record is not the new consumer index");
        if (poll_one(cq, sq, c) != 0)
            fail(i, "a completion the device did not write");
        if (sq.pi != sq.ci)
            fail(i, "the send queue is not empty after its completion");
    }
    std::printf("bare_direct_verbs: %d sends posted, %d completions polled\n", iterations, iterations);
    return 0;
}
