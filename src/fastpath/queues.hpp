// The mlx5 queue engine: send queue (WQE build, doorbell), receive queue,
// completion queue (CQE64 poll). Header-only; the post and poll paths
// allocate nothing, lock nothing and make no indirect calls.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "mlx5_format.hpp"

#include <unistd.h>

#include <atomic>
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

    void init(const Config& c)
    {
        buf_ = static_cast<std::uint8_t*>(c.qp->sq.buf);
        wqe_cnt_ = c.qp->sq.wqe_cnt;
        mask_ = wqe_cnt_ - 1;
        dbrec_ = &c.qp->dbrec[MLX5_SND_DBR];
        bf_reg_ = static_cast<std::uint8_t*>(c.qp->bf.reg);
        bf_size_ = c.qp->bf.size;
        bf_offset_ = 0;
        qpn_ = c.qpn;
        max_inline_ = c.max_inline;
        slots_ = c.slots;
        doorbell_ = c.doorbell;
        if (doorbell_ == DoorbellMode::blueflame && bf_size_ == 0)
            doorbell_ = DoorbellMode::uar_8byte; // uuar 0 has no BlueFlame buffer
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
    // lacks room; nothing is written then. `imm` is already big-endian for
    // *_IMM opcodes. Data of at most max_inline bytes for SEND and RDMA
    // WRITE is copied into the WQE (the buffers may be reused at once).
    bool post(std::uint8_t opcode, const Sge* sge, std::uint32_t nsge, std::uint32_t total_len,
              const RemoteAddress* remote, std::uint32_t imm, std::uint8_t fm_ce_se, std::uint64_t cookie)
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
            auto* r = reinterpret_cast<mlx5_wqe_raddr_seg*>(seg);
            r->raddr = htobe64(remote->addr);
            r->rkey = htobe32(remote->rkey);
            r->reserved = 0;
            seg = advance(seg);
        }
        std::uint32_t ds = 1 + (rdma ? 1 : 0);
        if (inline_data) {
            auto* hdr = reinterpret_cast<mlx5_wqe_inl_data_seg*>(seg);
            hdr->byte_count = htobe32(total_len | MLX5_INLINE_SEG);
            copy_inline(seg + sizeof *hdr, sge, nsge);
            ds += round_up16(4 + total_len) / kSegmentSize;
        } else {
            for (std::uint32_t i = 0; i < nsge; ++i) {
                mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(seg), sge[i].length, sge[i].lkey, sge[i].addr);
                seg = advance(seg);
            }
            ds += nsge;
        }
        auto* ctrl = reinterpret_cast<mlx5_wqe_ctrl_seg*>(wqe);
        mlx5dv_set_ctrl_seg(ctrl, static_cast<std::uint16_t>(pi_), opcode, 0, qpn_, fm_ce_se,
                            static_cast<std::uint8_t>(ds), 0, imm);
        ctrl->dci_stream_channel_id = 0; // reserved on RC; the helper leaves it as it was

        SendSlot& s = slots_[index];
        s.cookie = cookie;
        s.length = total_len;
        s.opcode = opcode;
        s.bbs = static_cast<std::uint8_t>(bbs);
        s.signaled = (fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) ? 1 : 0;
        last_wqe_ = wqe;
        last_bbs_ = bbs;
        ++pending_;
        pi_ += bbs;
        return true;
    }

    // Publishes every WQE posted since the last call.
    void ring()
    {
        if (pending_ == 0)
            return;
        store_fence(); // WQE contents before the doorbell record
        *dbrec_ = htobe32(pi_ & 0xffff);
        switch (doorbell_) {
        case DoorbellMode::software:
            wake_software_engine();
            break;
        case DoorbellMode::uar_8byte:
            wc_fence();
            *reinterpret_cast<volatile std::uint64_t*>(bf_reg_ + bf_offset_) =
                *reinterpret_cast<const std::uint64_t*>(last_wqe_);
            wc_fence();
            bf_offset_ ^= bf_size_;
            break;
        case DoorbellMode::blueflame:
            wc_fence();
            if (pending_ == 1 && last_bbs_ * kSendWqeBB <= bf_size_ && !wraps(last_wqe_, last_bbs_)) {
                copy_to_blueflame(last_wqe_, last_bbs_);
            } else {
                *reinterpret_cast<volatile std::uint64_t*>(bf_reg_ + bf_offset_) =
                    *reinterpret_cast<const std::uint64_t*>(last_wqe_);
            }
            wc_fence();
            bf_offset_ ^= bf_size_;
            break;
        }
        pending_ = 0;
    }

    // Software doorbell in two steps, for a caller that can execute the
    // queue itself: the doorbell record only; then, if it could not, the wake.
    void publish_only()
    {
        if (pending_ == 0)
            return;
        store_fence();
        *dbrec_ = htobe32(pi_ & 0xffff);
        pending_ = 0;
    }
    // The engine reads the doorbell record; wake it only if it sleeps.
    void wake_software_engine()
    {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (software_.sleeping && software_.sleeping->load(std::memory_order_relaxed) != 0) {
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
    std::uint8_t* qend() const { return buf_ + static_cast<std::size_t>(wqe_cnt_) * kSendWqeBB; }
    std::uint8_t* advance(std::uint8_t* seg) const
    {
        seg += kSegmentSize;
        return seg == qend() ? buf_ : seg;
    }
    bool wraps(const std::uint8_t* wqe, std::uint32_t bbs) const { return wqe + bbs * kSendWqeBB > qend(); }

    // Copies the gather list behind the inline header, wrapping at the end
    // of the queue buffer.
    void copy_inline(std::uint8_t* dst, const Sge* sge, std::uint32_t nsge) const
    {
        for (std::uint32_t i = 0; i < nsge; ++i) {
            const auto* src = reinterpret_cast<const std::uint8_t*>(sge[i].addr);
            std::uint32_t left = sge[i].length;
            while (left) {
                if (dst == qend())
                    dst = buf_;
                const std::uint32_t room = static_cast<std::uint32_t>(qend() - dst);
                const std::uint32_t n = left < room ? left : room;
                std::memcpy(dst, src, n);
                dst += n;
                src += n;
                left -= n;
            }
        }
    }

    void copy_to_blueflame(const std::uint8_t* wqe, std::uint32_t bbs)
    {
        auto* dst = reinterpret_cast<volatile std::uint64_t*>(bf_reg_ + bf_offset_);
        const auto* src = reinterpret_cast<const std::uint64_t*>(wqe);
        for (std::uint32_t i = 0; i < bbs * kSendWqeBB / 8; ++i)
            dst[i] = src[i];
    }

    std::uint8_t* buf_ = nullptr;
    std::uint32_t wqe_cnt_ = 0;
    std::uint32_t mask_ = 0;
    std::uint32_t pi_ = 0; // producer index in basic blocks (free-running)
    std::uint32_t ci_ = 0; // first basic block not yet retired
    volatile __be32* dbrec_ = nullptr;
    std::uint8_t* bf_reg_ = nullptr;
    std::uint32_t bf_size_ = 0;
    std::uint32_t bf_offset_ = 0;
    std::uint32_t qpn_ = 0;
    std::uint32_t max_inline_ = 0;
    SendSlot* slots_ = nullptr;
    DoorbellMode doorbell_ = DoorbellMode::software;
    SoftwareDoorbell software_{};
    std::uint8_t* last_wqe_ = nullptr;
    std::uint32_t last_bbs_ = 0;
    std::uint32_t pending_ = 0;
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

    bool post(const Sge* sge, std::uint32_t nsge, std::uint64_t cookie)
    {
        if (nsge > max_sge_ || free_slots() == 0) [[unlikely]]
            return false;
        const std::uint32_t index = head_ & (wqe_cnt_ - 1);
        write_receive_segments(reinterpret_cast<mlx5_wqe_data_seg*>(buf_ + static_cast<std::size_t>(index) * stride_),
                               max_sge_, sge, nsge);
        cookies_[index] = cookie;
        ++head_;
        store_fence();
        *dbrec_ = htobe32(head_ & 0xffff);
        return true;
    }

    // The cookie of the oldest posted receive, retired.
    std::uint64_t complete_oldest() { return cookies_[tail_++ & (wqe_cnt_ - 1)]; }

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
        tail_.store(tail, std::memory_order_relaxed);
    }

    std::uint32_t max_sge() const { return max_sge_; }
    std::uint32_t capacity() const { return wqe_cnt_ - 1; }
    // WQEs that can still be posted, and receives posted but not yet
    // consumed by a completion.
    std::uint32_t outstanding() const { return posted_ - completed_.load(std::memory_order_acquire); }
    std::uint32_t free_wqes() const { return capacity() - outstanding(); }
    // Receives posted since init (free-running; the doorbell record holds
    // its low 16 bits).
    std::uint32_t posted() const { return posted_; }

    bool post(const Sge* sge, std::uint32_t nsge, std::uint64_t cookie)
    {
        if (nsge > max_sge_ || head_ == tail_.load(std::memory_order_acquire)) [[unlikely]]
            return false; // too many segments, or only the sentinel is left
        const std::uint32_t index = head_;
        mlx5_wqe_srq_next_seg* next = next_seg(index);
        head_ = be16toh(next->next_wqe_index);
        write_receive_segments(reinterpret_cast<mlx5_wqe_data_seg*>(next + 1), max_sge_, sge, nsge);
        cookies_[index] = cookie;
        ++posted_;
        store_fence(); // the WQE before the count that publishes it
        *dbrec_ = htobe32(posted_ & 0xffff);
        return true;
    }

    // The cookie of the WQE a receive completion consumed; the WQE goes back
    // on the free list (behind the current tail).
    std::uint64_t complete(std::uint16_t wqe_index)
    {
        const std::uint32_t index = wqe_index & (wqe_cnt_ - 1);
        const std::uint64_t cookie = cookies_[index];
        next_seg(tail_.load(std::memory_order_relaxed))->next_wqe_index = htobe16(static_cast<std::uint16_t>(index));
        tail_.store(index, std::memory_order_release); // the link above before a post may follow it
        completed_.store(completed_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        return cookie;
    }

private:
    mlx5_wqe_srq_next_seg* next_seg(std::uint32_t index)
    {
        return reinterpret_cast<mlx5_wqe_srq_next_seg*>(buf_ + static_cast<std::size_t>(index) * stride_);
    }

    std::uint8_t* buf_ = nullptr;
    std::uint32_t stride_ = 0;
    std::uint32_t wqe_cnt_ = 0;
    std::uint32_t max_sge_ = 0;
    volatile __be32* dbrec_ = nullptr;
    std::uint64_t* cookies_ = nullptr;
    std::uint32_t head_ = 0;
    std::atomic<std::uint32_t> tail_{0};
    std::uint32_t posted_ = 0;                // what the doorbell record counts
    std::atomic<std::uint32_t> completed_{0}; // WQEs given back by completions
};

// Completion queue of CQE64s (in 64- or 128-byte entries).
class CompletionQueue {
public:
    void init(const mlx5dv_cq& cq)
    {
        buf_ = static_cast<std::uint8_t*>(cq.buf);
        cqe_cnt_ = cq.cqe_cnt;
        cqe_size_ = cq.cqe_size;
        log_cnt_ = log2_of(cqe_cnt_);
        dbrec_ = cq.dbrec;
        ci_ = 0;
    }

    // The next CQE the device has handed to software, or nullptr.
    const mlx5_cqe64* peek() const
    {
        const auto* cqe = entry(ci_);
        if (!cqe_owned_by_software(cqe->op_own, ci_, log_cnt_))
            return nullptr;
        load_fence(); // the rest of the CQE after its owner byte
        return cqe;
    }

    void consume() { ++ci_; }

    // Whether the k-th CQE after the next one is already software's (for
    // wait thresholds), without consuming anything.
    bool ready_at(std::uint32_t k) const
    {
        const std::uint32_t index = ci_ + k;
        return cqe_owned_by_software(entry(index)->op_own, index, log_cnt_);
    }

    // Tells the device how far software has read (frees CQ space).
    void publish_consumer_index() { dbrec_[0] = htobe32(ci_ & 0xffffff); }

    std::uint32_t consumer_index() const { return ci_; }
    std::uint32_t size() const { return cqe_cnt_; }

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

    static std::uint8_t opcode(const mlx5_cqe64* cqe) { return cqe->op_own >> 4; }
    static std::uint8_t syndrome(const mlx5_cqe64* cqe)
    {
        return reinterpret_cast<const std::uint8_t*>(cqe)[kErrCqeSyndromeOffset];
    }

private:
    const mlx5_cqe64* entry(std::uint32_t index) const
    {
        // In 128-byte entries the CQE64 is the second half.
        const std::uint8_t* e = buf_ + static_cast<std::size_t>(index & (cqe_cnt_ - 1)) * cqe_size_;
        return reinterpret_cast<const mlx5_cqe64*>(e + cqe_size_ - sizeof(mlx5_cqe64));
    }

    std::uint8_t* buf_ = nullptr;
    std::uint32_t cqe_cnt_ = 0;
    std::uint32_t cqe_size_ = 64;
    std::uint32_t log_cnt_ = 0;
    volatile __be32* dbrec_ = nullptr;
    std::uint32_t ci_ = 0;
};

} // namespace fastdapl::fastpath
