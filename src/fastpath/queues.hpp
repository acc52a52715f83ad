// The mlx5 queue engine: send queue (WQE build, doorbell), receive queue,
// completion queue (CQE64 poll). Header-only; the post and poll paths
// allocate nothing, lock nothing and make no indirect calls.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "mlx5_format.hpp"

#include <unistd.h>

#include <atomic>
#include <cassert>
#include <cstring>

namespace fastdapl::fastpath {

// What the completion side needs to know about a posted WQE, kept in a ring
// indexed by the WQE's first basic block (what a CQE's wqe_counter names).
struct SendSlot {
    std::uint64_t cookie;
    std::uint32_t length; // bytes the operation moves
    std::uint8_t opcode;  // MLX5_OPCODE_*
    std::uint8_t bbs;     // basic blocks the WQE occupies
    std::uint8_t signaled;
    std::uint8_t reserved;
};

// How a queue tells the device about new WQEs; chosen once per queue.
enum class DoorbellMode : std::uint8_t {
    software,  // softnic: doorbell record, and a wake-up only if its engine sleeps
    uar_8byte, // silicon: doorbell record, then the first 8 bytes of the WQE to the UAR
    blueflame, // silicon: doorbell record, then the whole WQE to the BlueFlame buffer
};

// A software NIC's doorbell: it polls the doorbell record, and sleeps on
// `wake_fd` (an eventfd) only after setting `*sleeping`.
struct SoftwareDoorbell {
    std::atomic<std::uint32_t>* sleeping = nullptr;
    int wake_fd = -1;
};

struct RemoteAddress {
    std::uint64_t addr;
    std::uint32_t rkey;
};

// Fixed-size copies the compiler turns into plain moves.
namespace detail {

template <std::size_t N>
inline void copy_fixed(std::uint8_t* dst, const std::uint8_t* src)
{
    std::memcpy(dst, src, N);
}

// Copies exactly n (at most 64) bytes with a few fixed-size moves, the last
// one ending at byte n (overlapping the ones before it): nothing outside
// [src, src+n) is read and nothing outside [dst, dst+n) is written.
inline void copy_small(std::uint8_t* dst, const std::uint8_t* src, std::uint32_t n)
{
    if (n >= 16) {
        copy_fixed<16>(dst, src);
        if (n > 32)
            copy_fixed<16>(dst + 16, src + 16);
        if (n > 48)
            copy_fixed<16>(dst + 32, src + 32);
        copy_fixed<16>(dst + n - 16, src + n - 16);
    } else if (n >= 8) {
        copy_fixed<8>(dst, src);
        copy_fixed<8>(dst + n - 8, src + n - 8);
    } else if (n >= 4) {
        copy_fixed<4>(dst, src);
        copy_fixed<4>(dst + n - 4, src + n - 4);
    } else if (n != 0) { // 1..3 bytes: first, middle, last
        dst[0] = src[0];
        dst[n / 2] = src[n / 2];
        dst[n - 1] = src[n - 1];
    }
}

// One 64-byte basic block to a BlueFlame register, in ascending order and
// in as few stores as the build's instruction set allows (16-byte SSE2
// stores on x86-64; 8-byte ones elsewhere). The stores are volatile: the
// compiler neither drops, merges nor reorders them. The caller fences.
// ThreadSanitizer builds make 8-byte atomic stores (mmio_store64): the
// test suite's software device reads the register from another thread.
inline void copy_bb_to_blueflame(std::uint8_t* dst, const std::uint8_t* src)
{
#if defined(__SSE2__) && !defined(__SANITIZE_THREAD__)
    using Chunk = long long __attribute__((vector_size(16), aligned(1)));
    const Chunk a = *reinterpret_cast<const Chunk*>(src);
    const Chunk b = *reinterpret_cast<const Chunk*>(src + 16);
    const Chunk c = *reinterpret_cast<const Chunk*>(src + 32);
    const Chunk d = *reinterpret_cast<const Chunk*>(src + 48);
    auto* out = reinterpret_cast<volatile Chunk*>(dst);
    out[0] = a;
    out[1] = b;
    out[2] = c;
    out[3] = d;
#else
    for (std::size_t i = 0; i < kSendWqeBB / 8; ++i) {
        std::uint64_t v;
        std::memcpy(&v, src + 8 * i, 8);
        mmio_store64(dst + 8 * i, v);
    }
#endif
}

} // namespace detail

// The width of each store the BlueFlame copy makes.
#if defined(__SSE2__) && !defined(__SANITIZE_THREAD__)
inline constexpr std::size_t kBlueFlameStoreBytes = 16;
#else
inline constexpr std::size_t kBlueFlameStoreBytes = 8;
#endif

class SendQueue {
public:
    struct Config {
        const mlx5dv_qp* qp = nullptr;
        std::uint32_t qpn = 0;
        std::uint32_t max_inline = 0; // bytes that may be copied into the WQE
        SendSlot* slots = nullptr;    // qp->sq.wqe_cnt entries
        DoorbellMode doorbell = DoorbellMode::software;
        SoftwareDoorbell software{};
    };

    // Inline data that fits the first basic block behind the control
    // segment, its inline header and (RDMA) the remote address segment.
    static constexpr std::uint32_t kSmallInlineSend = kSendWqeBB - kSegmentSize - 4;
    static constexpr std::uint32_t kSmallInlineRdma = kSmallInlineSend - kSegmentSize;

    void init(const Config& c)
    {
        buf_ = static_cast<std::uint8_t*>(c.qp->sq.buf);
        wqe_cnt_ = c.qp->sq.wqe_cnt;
        mask_ = wqe_cnt_ - 1;
        qend_ = buf_ + static_cast<std::size_t>(wqe_cnt_) * kSendWqeBB;
        dbrec_ = &c.qp->dbrec[MLX5_SND_DBR];
        auto* const bf_reg = static_cast<std::uint8_t*>(c.qp->bf.reg);
        const std::uint32_t bf_size = c.qp->bf.size;
        qpn_ds_ = htobe32(c.qpn << 8);
        max_inline_ = c.max_inline;
        small_limit_[0] = c.max_inline < kSmallInlineSend ? c.max_inline : kSmallInlineSend;
        small_limit_[1] = c.max_inline < kSmallInlineRdma ? c.max_inline : kSmallInlineRdma;
        slots_ = c.slots;
        doorbell_ = c.doorbell;
        if (doorbell_ == DoorbellMode::blueflame && bf_size == 0)
            doorbell_ = DoorbellMode::uar_8byte; // uuar 0 has no BlueFlame buffer
        // The register has two halves of bf_size bytes; rings alternate
        // between them (XOR with the distance flips one into the other).
        bf_next_ = bf_reg;
        bf_flip_ = reinterpret_cast<std::uintptr_t>(bf_reg) ^ reinterpret_cast<std::uintptr_t>(bf_reg + bf_size);
        bf_max_bbs_ = doorbell_ == DoorbellMode::blueflame ? bf_size / kSendWqeBB : 0;
        software_ = c.software;
        pi_ = ci_ = 0;
        last_wqe_ = nullptr;
        last_bbs_ = 0;
        pending_ = 0;
    }

    std::uint32_t free_bbs() const { return wqe_cnt_ - (pi_ - ci_); }
    std::uint32_t outstanding_bbs() const { return pi_ - ci_; }
    std::uint32_t max_inline() const { return max_inline_; }
    std::uint32_t producer_index() const { return pi_; }

    // Basic blocks a WQE of this shape occupies.
    static std::uint32_t wqe_bbs(bool rdma, bool inline_data, std::uint32_t nsge, std::uint32_t total_len)
    {
        std::uint32_t bytes = kSegmentSize + (rdma ? kSegmentSize : 0);
        bytes += inline_data ? round_up16(4 + total_len) : nsge * kSegmentSize;
        return (bytes + kSendWqeBB - 1) / kSendWqeBB;
    }

    // Builds one WQE at the producer index. Returns false when the queue
    // lacks room; nothing is written then. `total_len` is the sum of the
    // segments' lengths. `imm` is already big-endian for *_IMM opcodes.
    // Data of at most max_inline bytes for SEND and RDMA WRITE is copied
    // into the WQE (the buffers may be reused at once).
    [[gnu::always_inline]] bool post(std::uint8_t opcode, const Sge* sge, std::uint32_t nsge, std::uint32_t total_len,
              const RemoteAddress* remote, std::uint32_t imm, std::uint8_t fm_ce_se, std::uint64_t cookie)
    {
        // One segment of inline data that fits the first basic block: a
        // WQE of one basic block, written without loops.
        if (nsge == 1 && total_len <= small_limit_[remote != nullptr] && opcode != MLX5_OPCODE_RDMA_READ) [[likely]]
            return post_small_inline(opcode, sge, total_len, remote, imm, fm_ce_se, cookie);
        return post_general(opcode, sge, nsge, total_len, remote, imm, fm_ce_se, cookie);
    }

    // An 8-byte atomic (MLX5_OPCODE_ATOMIC_CS or _FA) on `remote`, its
    // original value returned into `local`: control, remote address, atomic
    // and data segments, one basic block. `swap_add` is the value stored
    // (compare and swap) or added (fetch and add); `compare` is unused for
    // fetch and add. False when the queue is full.
    bool post_atomic(std::uint8_t opcode, const Sge& local, const RemoteAddress& remote, std::uint64_t swap_add,
                     std::uint64_t compare, std::uint8_t fm_ce_se, std::uint64_t cookie)
    {
        if (free_bbs() == 0) [[unlikely]]
            return false;
        const std::uint32_t index = pi_ & mask_;
        std::uint8_t* const wqe = bb(index);
        write_remote(wqe + kSegmentSize, &remote);
        auto* atomic = reinterpret_cast<mlx5_wqe_atomic_seg*>(wqe + 2 * kSegmentSize);
        atomic->swap_add = htobe64(swap_add);
        atomic->compare = htobe64(compare);
        mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(wqe + 3 * kSegmentSize), local.length, local.lkey,
                            local.addr);
        write_ctrl(wqe, opcode, 4, fm_ce_se, 0);
        finish(index, wqe, 1, 1, opcode, local.length, fm_ce_se, cookie);
        return true;
    }

    // A datagram on a UD queue pair (SEND or SEND_IMM): the control segment,
    // the datagram segment, then inline data or data segments. The datagram
    // segment is the address handle's address vector `av` (mlx5dv_ah) with
    // the destination queue pair and qkey put in, as the device reads it:
    // dqp_dct carries the extended-AV bit (the 48-byte form, with the GRH
    // fields, which RoCE needs). `slot_opcode` is what the completion side
    // finds in the slot (the WQE carries `opcode`). Not the RC path: a UD
    // queue pair posts nothing else. False when the queue lacks room.
    bool post_datagram(std::uint8_t opcode, const Sge* sge, std::uint32_t nsge, std::uint32_t total_len,
                       const mlx5_wqe_av& av, std::uint32_t remote_qpn, std::uint32_t qkey, std::uint32_t imm,
                       std::uint8_t fm_ce_se, std::uint64_t cookie, std::uint8_t slot_opcode)
    {
        static_assert(sizeof(mlx5_wqe_datagram_seg) == 3 * kSegmentSize && offsetof(mlx5_wqe_av, key) == 0 &&
                      offsetof(mlx5_wqe_av, dqp_dct) == 8 && offsetof(mlx5_wqe_av, rgid) == 32);
        const bool inline_data = total_len <= max_inline_ && nsge > 0;
        const std::uint32_t bytes = kSegmentSize + static_cast<std::uint32_t>(sizeof(mlx5_wqe_datagram_seg)) +
                                    (inline_data ? round_up16(4 + total_len) : nsge * kSegmentSize);
        const std::uint32_t bbs = (bytes + kSendWqeBB - 1) / kSendWqeBB;
        if (bbs > free_bbs()) [[unlikely]]
            return false;
        const std::uint32_t index = pi_ & mask_;
        std::uint8_t* const wqe = bb(index);
        mlx5_wqe_datagram_seg dgram;
        std::memcpy(&dgram.av, &av, sizeof av);
        dgram.av.dqp_dct = htobe32((remote_qpn & 0xffffff) | MLX5_EXTENDED_UD_AV);
        dgram.av.key.qkey.qkey = htobe32(qkey);
        dgram.av.key.qkey.reserved = 0;
        std::uint8_t* seg = advance(wqe);
        for (std::uint32_t i = 0; i < sizeof dgram / kSegmentSize; ++i) { // may wrap at the queue's end
            std::memcpy(seg, reinterpret_cast<const std::uint8_t*>(&dgram) + i * kSegmentSize, kSegmentSize);
            seg = advance(seg);
        }
        std::uint32_t ds = 1 + static_cast<std::uint32_t>(sizeof dgram) / kSegmentSize;
        ds += write_payload(seg, sge, nsge, total_len, inline_data);
        write_ctrl(wqe, opcode, ds, fm_ce_se, imm);
        finish(index, wqe, bbs, wraps(wqe, bbs) ? kNoBlueFlame : bbs, slot_opcode, total_len, fm_ce_se, cookie);
        return true;
    }

    // A memory-window bind as mlx5 states one: a UMR WQE (control segment,
    // UMR control segment, mkey context segment, and for a bind one KLM
    // naming the region's bytes, padded to 64 bytes). Length 0 frees the
    // window. Off the fast path: binds are rare.
    struct WindowBind {
        std::uint32_t key = 0;        // the window's key now (the control segment's immediate)
        std::uint8_t new_variant = 0; // the low 8 bits of its key once bound
        bool type2 = false;           // a type 2 window: bound for this queue pair only
        bool check_free = false;      // a type 2 bind: the window must be free
        std::uint64_t length = 0;     // 0: the window is freed
        std::uint64_t addr = 0;       // the bytes' address in the region's space
        std::uint32_t region_key = 0; // the region's lkey
        bool zero_based = false;      // the window is addressed from 0
        std::uint8_t access = 0;      // MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_*
    };
    static constexpr std::uint32_t kWindowBindDs = 12; // 192 bytes: three basic blocks
    static constexpr std::uint32_t kWindowFreeDs = 8;  // 128 bytes: two
    static constexpr std::uint32_t window_bind_bbs(bool bind)
    {
        return ((bind ? kWindowBindDs : kWindowFreeDs) * kSegmentSize + kSendWqeBB - 1) / kSendWqeBB;
    }

    // Posts `b` as a UMR WQE. False when the queue lacks room (nothing written).
    bool post_window_bind(const WindowBind& b, std::uint8_t fm_ce_se, std::uint64_t cookie)
    {
        static_assert(sizeof(mlx5_wqe_umr_ctrl_seg) == 48 && sizeof(mlx5_wqe_mkey_context_seg) == 64 &&
                      sizeof(mlx5_wqe_umr_klm_seg) == 16);
        const bool bind = b.length != 0;
        const std::uint32_t ds = bind ? kWindowBindDs : kWindowFreeDs;
        const std::uint32_t bbs = window_bind_bbs(bind);
        if (bbs > free_bbs())
            return false;
        // Built here, then copied a segment at a time (it may wrap at the
        // queue's end); the first 16 bytes are the control segment's.
        alignas(16) std::uint8_t body[kWindowBindDs * kSegmentSize] = {};
        auto* umr = reinterpret_cast<mlx5_wqe_umr_ctrl_seg*>(body + kSegmentSize);
        auto* mkey = reinterpret_cast<mlx5_wqe_mkey_context_seg*>(body + kSegmentSize + sizeof *umr);
        std::uint64_t mask = MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE | MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY;
        umr->flags = MLX5_WQE_UMR_CTRL_FLAG_INLINE | MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET;
        if (b.type2)
            mask |= MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN;
        const std::uint32_t qpn = be32toh(qpn_ds_) >> 8;
        // The new key's variant, and the queue pair a bound type 2 window serves (all ones: any).
        mkey->qpn_mkey = htobe32(b.new_variant | ((b.type2 && bind) ? qpn << 8 : 0xffffff00u));
        if (bind) {
            umr->klm_octowords = htobe16(4); // one KLM, padded to 64 bytes
            if (b.type2 && b.check_free)
                umr->flags |= MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE;
            mask |= MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN | MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR |
                    MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE | MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ |
                    MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE | MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC;
            mkey->access_flags = b.access;
            mkey->start_addr = htobe64(b.zero_based ? 0 : b.addr);
            mkey->len = htobe64(b.length);
            auto* klm = reinterpret_cast<mlx5_wqe_umr_klm_seg*>(body + kSegmentSize + sizeof *umr + sizeof *mkey);
            klm->byte_count = htobe32(static_cast<std::uint32_t>(b.length));
            klm->mkey = htobe32(b.region_key);
            klm->address = htobe64(b.addr);
        } else {
            if (b.type2)
                umr->flags |= MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN;
            mkey->free = MLX5_WQE_MKEY_CONTEXT_FREE;
        }
        umr->mkey_mask = htobe64(mask);
        const std::uint32_t index = pi_ & mask_;
        std::uint8_t* const wqe = bb(index);
        std::uint8_t* seg = advance(wqe);
        for (std::uint32_t i = 1; i < ds; ++i) {
            std::memcpy(seg, body + i * kSegmentSize, kSegmentSize);
            seg = advance(seg);
        }
        write_ctrl(wqe, MLX5_OPCODE_UMR, ds, fm_ce_se, htobe32(b.key));
        finish(index, wqe, bbs, wraps(wqe, bbs) ? kNoBlueFlame : bbs, MLX5_OPCODE_UMR, 0, fm_ce_se, cookie);
        return true;
    }

    // Publishes every WQE posted since the last call.
    [[gnu::always_inline]] void ring()
    {
        if (pending_ == 0)
            return;
        store_fence(); // WQE contents before the doorbell record
        store_release(dbrec_, htobe32(pi_ & 0xffff));
        if (doorbell_ == DoorbellMode::software) {
            wake_software_engine();
            pending_ = 0;
            return;
        }
        // uar_8byte has bf_max_bbs_ 0: always the 8-byte doorbell. A WQE
        // that wraps the queue's end is not contiguous: post counted it as
        // too large (kNoBlueFlame).
        wc_fence();
        if (pending_ == 1 && last_bbs_ <= bf_max_bbs_) {
            detail::copy_bb_to_blueflame(bf_next_, last_wqe_);
            for (std::uint32_t i = 1; i < last_bbs_; ++i)
                detail::copy_bb_to_blueflame(bf_next_ + i * kSendWqeBB, last_wqe_ + i * kSendWqeBB);
        } else {
            std::uint64_t first;
            std::memcpy(&first, last_wqe_, sizeof first);
            mmio_store64(bf_next_, first);
        }
        wc_fence();
        bf_next_ = reinterpret_cast<std::uint8_t*>(reinterpret_cast<std::uintptr_t>(bf_next_) ^ bf_flip_);
        pending_ = 0;
    }

    // Software doorbell in two steps, for a caller that can execute the
    // queue itself: the doorbell record only; then, if it could not, the wake.
    void publish_only()
    {
        if (pending_ == 0)
            return;
        store_fence();
        store_release(dbrec_, htobe32(pi_ & 0xffff));
        pending_ = 0;
    }
    // The engine reads the doorbell record; wake it only if it sleeps. The
    // engine stores *sleeping, then loads the doorbell records (both
    // seq_cst); here a seq_cst fence orders the record's store before the
    // flag's load: one side sees the other's store. ThreadSanitizer builds
    // (no fences there) make a seq_cst read-modify-write of the record
    // instead, writing it unchanged: the same order, but one more
    // instruction (the record's address) on this path.
    void wake_software_engine()
    {
#if defined(__SANITIZE_THREAD__)
        __atomic_fetch_or(dbrec_, 0u, __ATOMIC_SEQ_CST);
#else
        std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
        if (software_.sleeping && software_.sleeping->load(std::memory_order_seq_cst) != 0) {
            const std::uint64_t one = 1;
            [[maybe_unused]] ssize_t n = ::write(software_.wake_fd, &one, sizeof one);
        }
    }

    // The slot of the WQE a requester CQE names.
    const SendSlot& slot(std::uint16_t wqe_counter) const { return slots_[wqe_counter & mask_]; }

    // Retires every WQE up to and including the one starting at wqe_counter
    // (earlier unsignalled WQEs complete implicitly).
    void retire_through(std::uint16_t wqe_counter)
    {
        const std::uint32_t distance = static_cast<std::uint16_t>(wqe_counter - static_cast<std::uint16_t>(ci_));
        ci_ += distance + slots_[wqe_counter & mask_].bbs;
    }

    // First WQE not yet retired, for flushing in order.
    std::uint32_t consumer_index() const { return ci_; }
    const SendSlot& slot_at(std::uint32_t index) const { return slots_[index & mask_]; }
    void retire_one() { ci_ += slots_[ci_ & mask_].bbs; }

private:
    static constexpr std::uint32_t round_up16(std::uint32_t v) { return (v + 15) & ~15u; }

    std::uint8_t* bb(std::uint32_t index) const { return buf_ + static_cast<std::size_t>(index) * kSendWqeBB; }
    std::uint8_t* advance(std::uint8_t* seg) const
    {
        seg += kSegmentSize;
        return seg == qend_ ? buf_ : seg;
    }
    bool wraps(const std::uint8_t* wqe, std::uint32_t bbs) const { return wqe + bbs * kSendWqeBB > qend_; }

    // last_bbs_ of a WQE that must not be BlueFlamed (it wraps).
    static constexpr std::uint32_t kNoBlueFlame = ~0u;

    static void write_remote(std::uint8_t* seg, const RemoteAddress* remote)
    {
        auto* r = reinterpret_cast<mlx5_wqe_raddr_seg*>(seg);
        r->raddr = htobe64(remote->addr);
        r->rkey = htobe32(remote->rkey);
        r->reserved = 0;
    }

    // The control segment; its third word holds the signature and the
    // stream channel (both zero on RC) and fm_ce_se in its last byte.
    void write_ctrl(std::uint8_t* wqe, std::uint8_t opcode, std::uint32_t ds, std::uint8_t fm_ce_se,
                    std::uint32_t imm) const
    {
        static_assert(offsetof(mlx5_wqe_ctrl_seg, signature) == 8 && offsetof(mlx5_wqe_ctrl_seg, fm_ce_se) == 11);
        auto* ctrl = reinterpret_cast<mlx5_wqe_ctrl_seg*>(wqe);
        ctrl->opmod_idx_opcode = htobe32((pi_ & 0xffff) << 8 | opcode);
        ctrl->qpn_ds = qpn_ds_ | htobe32(ds);
        const __be32 word = htobe32(fm_ce_se);
        std::memcpy(wqe + 8, &word, sizeof word);
        ctrl->imm = imm;
    }

    // What every post ends with: the slot, the doorbell's view, the index.
    // `bf_bbs` is bbs, or kNoBlueFlame for a WQE that wraps.
    void finish(std::uint32_t index, std::uint8_t* wqe, std::uint32_t bbs, std::uint32_t bf_bbs, std::uint8_t opcode,
                std::uint32_t total_len, std::uint8_t fm_ce_se, std::uint64_t cookie)
    {
        const auto signaled = static_cast<std::uint8_t>((fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) ? 1 : 0);
        slots_[index] = SendSlot{cookie, total_len, opcode, static_cast<std::uint8_t>(bbs), signaled, 0};
        last_wqe_ = wqe;
        last_bbs_ = bf_bbs;
        ++pending_;
        pi_ += bbs;
    }

    [[gnu::always_inline]] bool post_small_inline(std::uint8_t opcode, const Sge* sge, std::uint32_t total_len, const RemoteAddress* remote,
                           std::uint32_t imm, std::uint8_t fm_ce_se, std::uint64_t cookie)
    {
        if (pi_ - ci_ == wqe_cnt_) [[unlikely]]
            return false;
        const std::uint32_t index = pi_ & mask_;
        std::uint8_t* const wqe = bb(index);
        std::uint8_t* data = wqe + kSegmentSize + sizeof(mlx5_wqe_inl_data_seg);
        std::uint32_t ds = 1 + round_up16(4 + total_len) / kSegmentSize;
        if (remote) {
            write_remote(wqe + kSegmentSize, remote);
            data += kSegmentSize;
            ++ds;
        }
        const __be32 byte_count = htobe32(total_len | MLX5_INLINE_SEG);
        std::memcpy(data - sizeof byte_count, &byte_count, sizeof byte_count);
        detail::copy_small(data, reinterpret_cast<const std::uint8_t*>(sge->addr), total_len);
        write_ctrl(wqe, opcode, ds, fm_ce_se, imm);
        finish(index, wqe, 1, 1, opcode, total_len, fm_ce_se, cookie);
        return true;
    }

    // Any shape: data segments or inline data over several basic blocks,
    // wrapping at the end of the queue.
    [[gnu::noinline]] bool post_general(std::uint8_t opcode, const Sge* sge, std::uint32_t nsge,
                                        std::uint32_t total_len, const RemoteAddress* remote, std::uint32_t imm,
                                        std::uint8_t fm_ce_se, std::uint64_t cookie)
    {
        const bool rdma = remote != nullptr;
        const bool inline_data = total_len <= max_inline_ && opcode != MLX5_OPCODE_RDMA_READ && nsge > 0;
        const std::uint32_t bbs = wqe_bbs(rdma, inline_data, nsge, total_len);
        if (bbs > free_bbs()) [[unlikely]]
            return false;

        const std::uint32_t index = pi_ & mask_;
        std::uint8_t* const wqe = bb(index);
        std::uint8_t* seg = wqe + kSegmentSize;
        if (rdma) {
            write_remote(seg, remote);
            seg = advance(seg);
        }
        std::uint32_t ds = 1 + (rdma ? 1 : 0);
        ds += write_payload(seg, sge, nsge, total_len, inline_data);
        write_ctrl(wqe, opcode, ds, fm_ce_se, imm);
        finish(index, wqe, bbs, wraps(wqe, bbs) ? kNoBlueFlame : bbs, opcode, total_len, fm_ce_se, cookie);
        return true;
    }

    // The WQE's data from `seg` on: inline (a header, then the bytes) or one
    // data segment per gather entry, wrapping at the end of the queue
    // buffer. Returns how many 16-byte segments it took.
    std::uint32_t write_payload(std::uint8_t* seg, const Sge* sge, std::uint32_t nsge, std::uint32_t total_len,
                                bool inline_data) const
    {
        if (inline_data) {
            auto* hdr = reinterpret_cast<mlx5_wqe_inl_data_seg*>(seg);
            hdr->byte_count = htobe32(total_len | MLX5_INLINE_SEG);
            copy_inline(seg + sizeof *hdr, sge, nsge);
            return round_up16(4 + total_len) / kSegmentSize;
        }
        for (std::uint32_t i = 0; i < nsge; ++i) {
            mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(seg), sge[i].length, sge[i].lkey, sge[i].addr);
            seg = advance(seg);
        }
        return nsge;
    }

    // Copies the gather list behind the inline header, wrapping at the end
    // of the queue buffer.
    void copy_inline(std::uint8_t* dst, const Sge* sge, std::uint32_t nsge) const
    {
        for (std::uint32_t i = 0; i < nsge; ++i) {
            const auto* src = reinterpret_cast<const std::uint8_t*>(sge[i].addr);
            std::uint32_t left = sge[i].length;
            while (left) {
                if (dst == qend_)
                    dst = buf_;
                const std::uint32_t room = static_cast<std::uint32_t>(qend_ - dst);
                const std::uint32_t n = left < room ? left : room;
                std::memcpy(dst, src, n);
                dst += n;
                src += n;
                left -= n;
            }
        }
    }

    // Fields the post reads first share a cache line.
    std::uint32_t pi_ = 0; // producer index in basic blocks (free-running)
    std::uint32_t ci_ = 0; // first basic block not yet retired
    std::uint32_t wqe_cnt_ = 0;
    std::uint32_t mask_ = 0;
    std::uint32_t small_limit_[2] = {0, 0}; // post_small_inline's bound for SEND, RDMA
    __be32 qpn_ds_ = 0;                     // the QPN in the control segment's qpn_ds word
    std::uint32_t pending_ = 0;
    std::uint8_t* buf_ = nullptr;
    SendSlot* slots_ = nullptr;
    std::uint8_t* last_wqe_ = nullptr;
    std::uint32_t last_bbs_ = 0;   // of the last WQE posted (kNoBlueFlame: it wraps)
    std::uint32_t bf_max_bbs_ = 0; // WQEs up to this size are BlueFlamed (0: never)
    volatile __be32* dbrec_ = nullptr;
    std::uint8_t* bf_next_ = nullptr; // the half of the BlueFlame register the next ring writes
    std::uintptr_t bf_flip_ = 0;
    std::uint8_t* qend_ = nullptr;
    std::uint32_t max_inline_ = 0;
    DoorbellMode doorbell_ = DoorbellMode::software;
    SoftwareDoorbell software_{};
};

// The data segments of a receive WQE (own or shared queue): a list shorter
// than the WQE's room ends with the invalid key.
inline void write_receive_segments(mlx5_wqe_data_seg* seg, std::uint32_t max_sge, const Sge* sge, std::uint32_t nsge)
{
    for (std::uint32_t i = 0; i < nsge; ++i)
        mlx5dv_set_data_seg(&seg[i], sge[i].length, sge[i].lkey, sge[i].addr);
    if (nsge < max_sge)
        mlx5dv_set_data_seg(&seg[nsge], 0, MLX5_INVALID_LKEY, 0);
}

// Receive queue: WQEs of `stride` bytes holding data segments, completed in
// order.
class RecvQueue {
public:
    void init(const mlx5dv_qp& qp, std::uint64_t* cookies)
    {
        buf_ = static_cast<std::uint8_t*>(qp.rq.buf);
        wqe_cnt_ = qp.rq.wqe_cnt;
        stride_ = qp.rq.stride;
        max_sge_ = stride_ / sizeof(mlx5_wqe_data_seg);
        dbrec_ = &qp.dbrec[MLX5_RCV_DBR];
        cookies_ = cookies;
        head_ = tail_ = 0;
    }

    std::uint32_t max_sge() const { return max_sge_; }
    std::uint32_t outstanding() const { return head_ - tail_; }
    std::uint32_t posted() const { return head_; } // since init (free-running)
    std::uint32_t free_slots() const { return wqe_cnt_ - (head_ - tail_); }

    [[gnu::always_inline]] bool post(const Sge* sge, std::uint32_t nsge, std::uint64_t cookie)
    {
        if (nsge > max_sge_ || free_slots() == 0) [[unlikely]]
            return false;
        const std::uint32_t index = head_ & (wqe_cnt_ - 1);
        write_receive_segments(reinterpret_cast<mlx5_wqe_data_seg*>(buf_ + static_cast<std::size_t>(index) * stride_),
                               max_sge_, sge, nsge);
        cookies_[index] = cookie;
        ++head_;
        store_fence();
        store_release(dbrec_, htobe32(head_ & 0xffff));
        return true;
    }

    // The cookie of the oldest posted receive, retired.
    std::uint64_t complete_oldest() { return cookies_[tail_++ & (wqe_cnt_ - 1)]; }

    // The data segments of the oldest posted receive (before
    // complete_oldest), for CompletionQueue::scatter_inline.
    const mlx5_wqe_data_seg* segments_of_oldest() const
    {
        return reinterpret_cast<const mlx5_wqe_data_seg*>(buf_ +
                                                          static_cast<std::size_t>(tail_ & (wqe_cnt_ - 1)) * stride_);
    }

private:
    std::uint8_t* buf_ = nullptr;
    std::uint32_t wqe_cnt_ = 0;
    std::uint32_t stride_ = 0;
    std::uint32_t max_sge_ = 0;
    volatile __be32* dbrec_ = nullptr;
    std::uint64_t* cookies_ = nullptr;
    std::uint32_t head_ = 0;
    std::uint32_t tail_ = 0;
};

// Shared receive queue in the mlx5 layout: each WQE is a next-segment
// (whose next_wqe_index links the free WQEs into a list) followed by data
// segments. A post takes the WQE at the head of the free list; a completion
// names the WQE it consumed (CQE wqe_counter), which goes back at the tail,
// so receives may complete in any order across connections. The list always
// keeps one WQE (the tail) unused: wqe_cnt - 1 can be posted at once. The
// doorbell record holds a 16-bit count of posts.
//
// One thread posts while others complete: the tail and the completion count
// are atomic (each with one writer, so no locked instruction), and a post
// never waits for a completion. Completions must not run concurrently with
// each other (the caller serializes them).
class SharedReceiveQueue {
public:
    // `srq` as mlx5dv_init_obj (or the softnic) fills it, for a queue of
    // `wqe_cnt` WQEs (a power of two) that nothing has been posted to yet;
    // the free list is (re)linked here in the order a fresh device SRQ has.
    void init(const mlx5dv_srq& srq, std::uint32_t wqe_cnt, std::uint64_t* cookies)
    {
        buf_ = static_cast<std::uint8_t*>(srq.buf);
        stride_ = srq.stride;
        wqe_cnt_ = wqe_cnt;
        mask_ = wqe_cnt - 1;
        capacity_ = wqe_cnt - 1;
        max_sge_ = (stride_ - sizeof(mlx5_wqe_srq_next_seg)) / sizeof(mlx5_wqe_data_seg);
        dbrec_ = srq.dbrec;
        cookies_ = cookies;
        for (std::uint32_t i = 0; i < wqe_cnt_; ++i)
            next_seg(i)->next_wqe_index = htobe16(static_cast<std::uint16_t>((i + 1) & (wqe_cnt_ - 1)));
        head_ = 0;
        tail_.store(wqe_cnt_ - 1, std::memory_order_relaxed);
        posted_ = 0;
        completed_.store(0, std::memory_order_relaxed);
    }

    // The free list of an SRQ as its creator (rdma-core) linked it: its
    // length from head to tail, and a power of two above every index on it
    // (the size the cookie array needs). rdma-core may allocate more WQEs
    // than were asked for and keep some off the list (its ODP wait queue):
    // only what the list holds is used. ok is false when the walk does not
    // reach the tail within max_wqes steps.
    struct FreeList {
        std::uint32_t length = 0;
        std::uint32_t index_limit = 0;
        bool ok = false;
    };
    static FreeList inspect_free_list(const mlx5dv_srq& srq, std::uint32_t max_wqes = 1u << 16)
    {
        FreeList f;
        std::uint32_t index = srq.head;
        std::uint32_t top = index;
        for (std::uint32_t n = 1; n <= max_wqes; ++n) {
            top = index > top ? index : top;
            if (index == srq.tail) {
                f.length = n;
                f.index_limit = 1;
                while (f.index_limit <= top)
                    f.index_limit <<= 1;
                f.ok = true;
                return f;
            }
            index = be16toh(next_seg(srq.buf, srq.stride, index)->next_wqe_index);
        }
        return f;
    }

    // Takes over an SRQ whose free list its creator built (head and tail as
    // mlx5dv_srq reports them; `list` from inspect_free_list) and whose
    // doorbell record holds `counter` (be32toh(*srq.dbrec)) with nothing
    // outstanding. The list is used as it is: nothing is relinked. `cookies`
    // has list.index_limit entries. grow() is not for adopted queues.
    void adopt(const mlx5dv_srq& srq, const FreeList& list, std::uint32_t counter, std::uint64_t* cookies)
    {
        buf_ = static_cast<std::uint8_t*>(srq.buf);
        stride_ = srq.stride;
        wqe_cnt_ = list.index_limit;
        mask_ = list.index_limit - 1;
        capacity_ = list.length - 1; // the tail stays unused, as in rdma-core
        max_sge_ = (stride_ - sizeof(mlx5_wqe_srq_next_seg)) / sizeof(mlx5_wqe_data_seg);
        dbrec_ = srq.dbrec;
        cookies_ = cookies;
        head_ = srq.head;
        tail_.store(srq.tail, std::memory_order_relaxed);
        posted_ = counter;
        completed_.store(counter, std::memory_order_relaxed);
    }

    // The device moved the ring to `srq.buf` with `wqe_cnt` WQEs, the old
    // ones at their indices: the new ones join the free list behind the
    // tail. No post or completion may run meanwhile.
    void grow(const mlx5dv_srq& srq, std::uint32_t wqe_cnt, std::uint64_t* cookies)
    {
        buf_ = static_cast<std::uint8_t*>(srq.buf);
        cookies_ = cookies;
        const std::uint32_t old_cnt = wqe_cnt_;
        if (wqe_cnt <= old_cnt)
            return;
        std::uint32_t tail = tail_.load(std::memory_order_relaxed);
        for (std::uint32_t i = old_cnt; i < wqe_cnt; ++i) {
            next_seg(tail)->next_wqe_index = htobe16(static_cast<std::uint16_t>(i));
            tail = i;
        }
        wqe_cnt_ = wqe_cnt;
        mask_ = wqe_cnt - 1;
        capacity_ += wqe_cnt - old_cnt;
        tail_.store(tail, std::memory_order_relaxed);
    }

    std::uint32_t max_sge() const { return max_sge_; }
    std::uint32_t capacity() const { return capacity_; }
    // WQEs that can still be posted, and receives posted but not yet
    // consumed by a completion.
    std::uint32_t outstanding() const { return posted_ - completed_.load(std::memory_order_acquire); }
    std::uint32_t free_wqes() const { return capacity() - outstanding(); }
    // Receives posted since init (free-running; the doorbell record holds
    // its low 16 bits).
    std::uint32_t posted() const { return posted_; }

    [[gnu::always_inline]] bool post(const Sge* sge, std::uint32_t nsge, std::uint64_t cookie)
    {
        if (nsge != 1 || max_sge_ == 0) [[unlikely]]
            return post_any(sge, nsge, cookie);
        // One segment, the common case: no loop. The tail is read before
        // the head so the acquire does not make the compiler read it twice.
        const std::uint32_t tail = tail_.load(std::memory_order_acquire);
        const std::uint32_t index = head_;
        if (index == tail) [[unlikely]]
            return false; // only the sentinel is left
        mlx5_wqe_srq_next_seg* next = next_seg(index);
        head_ = be16toh(next->next_wqe_index);
        auto* seg = reinterpret_cast<mlx5_wqe_data_seg*>(next + 1);
        mlx5dv_set_data_seg(seg, sge->length, sge->lkey, sge->addr);
        if (max_sge_ > 1)
            mlx5dv_set_data_seg(seg + 1, 0, MLX5_INVALID_LKEY, 0);
        publish(index, cookie);
        return true;
    }

    // The cookie of the WQE a receive completion consumed; the WQE goes back
    // on the free list (behind the current tail).
    std::uint64_t complete(std::uint16_t wqe_index)
    {
        const std::uint32_t index = wqe_index & mask_;
        const std::uint64_t cookie = cookies_[index];
        next_seg(tail_.load(std::memory_order_relaxed))->next_wqe_index = htobe16(static_cast<std::uint16_t>(index));
        tail_.store(index, std::memory_order_release); // the link above before a post may follow it
        completed_.store(completed_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        return cookie;
    }

    // The data segments of the WQE a receive completion names (before
    // complete), for CompletionQueue::scatter_inline.
    const mlx5_wqe_data_seg* segments(std::uint16_t wqe_index) const
    {
        return reinterpret_cast<const mlx5_wqe_data_seg*>(next_seg(buf_, stride_, wqe_index & mask_) + 1);
    }

private:
    // Any number of segments (none, several, or more than fit: refused).
    [[gnu::noinline]] bool post_any(const Sge* sge, std::uint32_t nsge, std::uint64_t cookie)
    {
        if (nsge > max_sge_ || head_ == tail_.load(std::memory_order_acquire)) [[unlikely]]
            return false; // too many segments, or only the sentinel is left
        const std::uint32_t index = head_;
        mlx5_wqe_srq_next_seg* next = next_seg(index);
        head_ = be16toh(next->next_wqe_index);
        write_receive_segments(reinterpret_cast<mlx5_wqe_data_seg*>(next + 1), max_sge_, sge, nsge);
        publish(index, cookie);
        return true;
    }

    // The cookie, then the count that hands the WQE to the device.
    void publish(std::uint32_t index, std::uint64_t cookie)
    {
        cookies_[index] = cookie;
        ++posted_;
        store_fence(); // the WQE before the count that publishes it
        store_release(dbrec_, htobe32(posted_ & 0xffff));
    }

    static mlx5_wqe_srq_next_seg* next_seg(void* buf, std::uint32_t stride, std::uint32_t index)
    {
        return reinterpret_cast<mlx5_wqe_srq_next_seg*>(static_cast<std::uint8_t*>(buf) +
                                                        static_cast<std::size_t>(index) * stride);
    }
    mlx5_wqe_srq_next_seg* next_seg(std::uint32_t index) { return next_seg(buf_, stride_, index); }

    std::uint8_t* buf_ = nullptr;
    std::uint32_t stride_ = 0;
    std::uint32_t wqe_cnt_ = 0;
    std::uint32_t mask_ = 0;     // of a WQE index (wqe_cnt_ - 1)
    std::uint32_t capacity_ = 0; // WQEs that can be posted at once
    std::uint32_t max_sge_ = 0;
    volatile __be32* dbrec_ = nullptr;
    std::uint64_t* cookies_ = nullptr;
    std::uint32_t head_ = 0;
    std::atomic<std::uint32_t> tail_{0};
    std::uint32_t posted_ = 0;                // what the doorbell record counts
    std::atomic<std::uint32_t> completed_{0}; // WQEs given back by completions
};

// Completion queue of CQE64s (in 64- or 128-byte entries).
//
// A CQ handed over by mlx5dv_init_obj is "DV owned": rdma-core no longer
// tracks its consumer index, so ibv_req_notify_cq would arm it with a stale
// one. This class keeps the consumer index and the arm sequence number
// itself and arms by hand (arm(), note_event()). A softnic CQ has no UAR
// (cq_uar null): it is never armed this way.
class CompletionQueue {
public:
    void init(const mlx5dv_cq& cq)
    {
        buf_ = static_cast<std::uint8_t*>(cq.buf);
        cqe_cnt_ = cq.cqe_cnt;
        cqe_size_ = cq.cqe_size;
        log_cnt_ = log2_of(cqe_cnt_);
        index_mask_ = cqe_cnt_ - 1;
        size_shift_ = log2_of(cqe_size_);
        cqe64_base_ = buf_ + cqe_size_ - sizeof(mlx5_cqe64);
        dbrec_ = cq.dbrec;
        uar_ = static_cast<std::uint8_t*>(cq.cq_uar);
        cqn_ = cq.cqn;
        arm_sn_ = 0;
        ci_ = 0;
    }

    // The next CQE the device has handed to software, or nullptr. A CQE for
    // which needs_attention() holds (error, data inline in the CQE,
    // compressed) must not be read as a plain completion: see status() and
    // scatter_inline().
    const mlx5_cqe64* peek() const
    {
        const auto* cqe = entry(ci_);
        if (!cqe_owned_by_software(load_acquire(&cqe->op_own), ci_, log_cnt_))
            return nullptr;
        load_fence(); // the rest of the CQE after its owner byte
        // What a plain read of the owner byte told the compiler and an
        // atomic one does not: the entry is not null (no test in callers).
        if (cqe == nullptr)
            __builtin_unreachable();
        return cqe;
    }

    void consume() { ++ci_; }

    // Whether the k-th CQE after the next one is already software's (for
    // wait thresholds), without consuming anything.
    bool ready_at(std::uint32_t k) const
    {
        const std::uint32_t index = ci_ + k;
        return cqe_owned_by_software(load_acquire(&entry(index)->op_own), index, log_cnt_);
    }

    // Calls fn on each CQE software owns and has not consumed, oldest first.
    template <class Fn>
    void for_each_ready(Fn fn) const
    {
        for (std::uint32_t k = 0; ready_at(k); ++k) {
            load_fence(); // the CQE after its owner byte
            fn(entry(ci_ + k));
        }
    }

    // Tells the device how far software has read (frees CQ space): a
    // release store, after the reads of the CQEs it frees. Callers
    // publish on every poll, which is why the verbs layer creates CQs
    // without IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN.
    void publish_consumer_index() { store_release(&dbrec_[0], htobe32(ci_ & 0xffffff)); }

    std::uint32_t consumer_index() const { return ci_; }
    std::uint32_t size() const { return cqe_cnt_; }

    // --- arming (completion channel events) ---------------------------------

    // Whether the CQ has a UAR to arm through (a device CQ; not the softnic).
    bool armable() const { return uar_ != nullptr; }
    std::uint32_t arm_sequence() const { return arm_sn_; }

    // The arm doorbell word: 2-bit sequence number, request command
    // (solicited only or any completion), 24-bit consumer index.
    static constexpr std::uint32_t arm_word(std::uint32_t arm_sn, bool solicited_only, std::uint32_t ci)
    {
        return (arm_sn & 3u) << 28 | (solicited_only ? MLX5_CQ_DB_REQ_NOT_SOL : MLX5_CQ_DB_REQ_NOT) |
               (ci & 0xffffffu);
    }

    // Requests one event on the completion channel for the next CQE after
    // the current consumer index (only a solicited one if asked). The
    // doorbell record's arm word first, then (ordered by a write-combining
    // fence) one 64-bit big-endian store of arm word and CQ number to the
    // UAR's CQ doorbell, as rdma-core's mlx5_arm_cq does. Precondition:
    // armable() (asserted; a no-op without a UAR when asserts are off).
    void arm(bool solicited_only)
    {
        assert(uar_ != nullptr && "arm() on a CQ without a UAR (softnic CQs are not armed this way)");
        if (!uar_) [[unlikely]]
            return;
        const std::uint32_t word = arm_word(arm_sn_, solicited_only, ci_);
        store_release(&dbrec_[kArmDbrec], htobe32(word));
        wc_fence(); // the doorbell record before the UAR write
        mmio_store64(uar_ + MLX5_CQ_DOORBELL, htobe64(static_cast<std::uint64_t>(word) << 32 | cqn_));
        wc_fence();
    }

    // A CQ event for this CQ was read from the completion channel: the
    // next arm carries the next sequence number.
    void note_event() { ++arm_sn_; }

    // --- cleaning ---------------------------------------------------------

    // Before a queue pair is destroyed: each of its CQEs software has not
    // consumed yet goes to `fn` (SRQ receives give their WQE back there)
    // and then names no queue pair (QPN 0xffffff), so polling skips it.
    template <class Fn>
    void clean(std::uint32_t qpn, Fn&& fn)
    {
        for (std::uint32_t k = 0; ready_at(k); ++k) {
            auto* cqe = const_cast<mlx5_cqe64*>(entry(ci_ + k));
            load_fence();
            if ((be32toh(cqe->sop_drop_qpn) & 0xffffff) != qpn)
                continue;
            fn(static_cast<const mlx5_cqe64*>(cqe));
            cqe->sop_drop_qpn = htobe32(kNoQpn);
        }
    }
    static constexpr std::uint32_t kNoQpn = 0xffffff;

    // --- reading a CQE ------------------------------------------------------

    static std::uint8_t opcode(const mlx5_cqe64* cqe) { return cqe->op_own >> 4; }
    static std::uint8_t syndrome(const mlx5_cqe64* cqe)
    {
        return reinterpret_cast<const std::uint8_t*>(cqe)[kErrCqeSyndromeOffset];
    }
    static CqeFormat format(const mlx5_cqe64* cqe) { return cqe_format(cqe->op_own); }
    // Received data is in the CQE (format 1) or in the 64 bytes before it
    // (format 2, 128-byte CQEs), not in the receive buffers: scatter_inline().
    static bool is_inline_scattered(const mlx5_cqe64* cqe)
    {
        const CqeFormat f = format(cqe);
        return f == CqeFormat::inline_32 || f == CqeFormat::inline_64;
    }
    // A compressed (mini-CQE array) entry. We never enable CQE compression;
    // such an entry is reported as an error by status().
    static bool is_compressed(const mlx5_cqe64* cqe) { return format(cqe) == CqeFormat::compressed; }
    // One test for every CQE that is not a plain successful completion: an
    // opcode of 8 or more (errors, invalid) or a nonzero format (inline
    // data, compressed).
    static bool needs_attention(const mlx5_cqe64* cqe) { return (cqe->op_own & 0x8c) != 0; }

    // The DAT status a CQE reports: success for requester and responder
    // completions, the syndrome's status for error CQEs, and a local EP
    // error for anything we never enable or expect (compressed CQEs,
    // resize, unknown opcodes), so it is not misread as a completion.
    static DAT_DTO_COMPLETION_STATUS status(const mlx5_cqe64* cqe)
    {
        if (is_compressed(cqe)) [[unlikely]]
            return DAT_DTO_ERR_LOCAL_EP;
        switch (opcode(cqe)) {
        case MLX5_CQE_REQ:
        case MLX5_CQE_RESP_WR_IMM:
        case MLX5_CQE_RESP_SEND:
        case MLX5_CQE_RESP_SEND_IMM:
        case MLX5_CQE_RESP_SEND_INV:
            return DAT_DTO_SUCCESS;
        case MLX5_CQE_REQ_ERR:
        case MLX5_CQE_RESP_ERR:
            return status_of_syndrome(syndrome(cqe));
        default:
            return DAT_DTO_ERR_LOCAL_EP;
        }
    }

    // For a receive CQE that is_inline_scattered(): copies its byte_cnt
    // bytes of data into the receive WQE's scatter list, in order. Nothing
    // is written and DAT_DTO_ERR_LOCAL_LENGTH returned when they do not fit
    // the list (or exceed what the format can hold). A plain CQE copies
    // nothing (success); a compressed one, or format 2 in 64-byte CQEs, is
    // DAT_DTO_ERR_LOCAL_EP.
    DAT_DTO_COMPLETION_STATUS scatter_inline(const mlx5_cqe64* cqe, const Sge* sge, std::uint32_t nsge) const
    {
        return scatter_inline_to(cqe, nsge, [sge](std::uint32_t i, std::uint64_t& addr, std::uint32_t& len) {
            addr = sge[i].addr;
            len = sge[i].length;
            return true;
        });
    }
    // The same, reading the scatter list from the receive WQE's data
    // segments (RecvQueue::segments_of_oldest, SharedReceiveQueue::segments):
    // at most max_sge, ending at the invalid key.
    DAT_DTO_COMPLETION_STATUS scatter_inline(const mlx5_cqe64* cqe, const mlx5_wqe_data_seg* seg,
                                             std::uint32_t max_sge) const
    {
        return scatter_inline_to(cqe, max_sge, [seg](std::uint32_t i, std::uint64_t& addr, std::uint32_t& len) {
            if (be32toh(seg[i].lkey) == MLX5_INVALID_LKEY)
                return false;
            addr = be64toh(seg[i].addr);
            len = be32toh(seg[i].byte_count);
            return true;
        });
    }

private:
    static constexpr std::size_t kArmDbrec = 1; // dbrec[0] is SET_CI, dbrec[1] the arm word

    const mlx5_cqe64* entry(std::uint32_t index) const
    {
        // In 128-byte entries the CQE64 is the second half (cqe64_base_).
        return reinterpret_cast<const mlx5_cqe64*>(cqe64_base_ +
                                                   (static_cast<std::size_t>(index & index_mask_) << size_shift_));
    }

    // `element(i, addr, len)` yields the i-th scatter element (false: the list ended).
    template <class Element>
    DAT_DTO_COMPLETION_STATUS scatter_inline_to(const mlx5_cqe64* cqe, std::uint32_t nsge, Element element) const
    {
        const std::uint8_t* src = nullptr;
        std::uint32_t room = 0;
        switch (format(cqe)) {
        case CqeFormat::plain:
            return DAT_DTO_SUCCESS;
        case CqeFormat::inline_32:
            src = reinterpret_cast<const std::uint8_t*>(cqe);
            room = 32;
            break;
        case CqeFormat::inline_64:
            if (cqe_size_ != 128)
                return DAT_DTO_ERR_LOCAL_EP; // no 64 bytes before a CQE64 here
            src = reinterpret_cast<const std::uint8_t*>(cqe) - 64;
            room = 64;
            break;
        case CqeFormat::compressed:
            return DAT_DTO_ERR_LOCAL_EP;
        }
        const std::uint32_t len = be32toh(cqe->byte_cnt);
        if (len > room)
            return DAT_DTO_ERR_LOCAL_LENGTH;
        std::uint64_t fits = 0;
        std::uint32_t n = 0;
        for (; n < nsge && fits < len; ++n) {
            std::uint64_t addr = 0;
            std::uint32_t l = 0;
            if (!element(n, addr, l))
                break;
            fits += l;
        }
        if (fits < len)
            return DAT_DTO_ERR_LOCAL_LENGTH;
        std::uint32_t left = len;
        for (std::uint32_t i = 0; i < n && left; ++i) {
            std::uint64_t addr = 0;
            std::uint32_t l = 0;
            element(i, addr, l);
            const std::uint32_t c = l < left ? l : left;
            std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(addr)), src, c);
            src += c;
            left -= c;
        }
        return DAT_DTO_SUCCESS;
    }

    std::uint8_t* buf_ = nullptr;
    std::uint32_t cqe_cnt_ = 0;
    std::uint32_t cqe_size_ = 64;
    // entry()'s arithmetic, computed once at init.
    std::uint32_t index_mask_ = 0;
    std::uint32_t size_shift_ = 6;
    const std::uint8_t* cqe64_base_ = nullptr;
    std::uint32_t log_cnt_ = 0;
    volatile __be32* dbrec_ = nullptr;
    std::uint32_t ci_ = 0;
    std::uint8_t* uar_ = nullptr; // cq_uar; the arm doorbell is at +MLX5_CQ_DOORBELL
    std::uint32_t cqn_ = 0;
    std::uint32_t arm_sn_ = 0; // events seen; its low 2 bits go into each arm
};

// Before a queue pair is destroyed, once its device writes no more CQEs for
// it: its CQEs not yet consumed are dropped from its CQs (`send_cq` and
// `recv_cq` may be the same), and the SRQ WQEs its receive CQEs name go
// back on `srq`'s free list (`srq` null: it has its own receive queue).
// The caller serializes this with every poller of those CQs and every
// completion of that SRQ.
inline void clean_queue_pair(std::uint32_t qpn, CompletionQueue* send_cq, CompletionQueue* recv_cq,
                             SharedReceiveQueue* srq)
{
    auto give_back = [srq](const mlx5_cqe64* cqe) {
        const std::uint8_t op = CompletionQueue::opcode(cqe);
        if (srq && op != MLX5_CQE_REQ && op != MLX5_CQE_REQ_ERR && !CompletionQueue::is_compressed(cqe))
            srq->complete(be16toh(cqe->wqe_counter)); // a receive: its SRQ WQE is free again
    };
    if (recv_cq)
        recv_cq->clean(qpn, give_back);
    if (send_cq && send_cq != recv_cq)
        send_cq->clean(qpn, give_back);
}

} // namespace fastdapl::fastpath
