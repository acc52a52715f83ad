// The mlx5 device kind (the direct path): the control objects are the
// verbs kind's (PD, MR, rdma_cm, async events, channels), but CQs, QPs and
// SRQs are created through mlx5dv and their queues handed to src/fastpath,
// which posts and polls them as the softnic's. Control plane: Mlx5Path
// (mlx5.cpp). Data path: the inline functions below, through data_path.hpp.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "mlx5_reader.hpp"
#include "queues.hpp"  // fastpath
#include "rdma_cm.hpp" // kDatagramQkey
#include "verbs.hpp"

#include <string>
#include <vector>

namespace fastdapl::core {

// The QP sits on a parent domain with a thread domain of its own (a
// doorbell register no other EP rings), so posts on different EPs need no lock.
struct Mlx5EpQueues : VerbsQp {
    ibv_td* td = nullptr;
    ibv_pd* parent_pd = nullptr;
    fastpath::SendQueue sq;
    fastpath::RecvQueue rq;
    std::vector<fastpath::SendSlot> send_slots;
    std::vector<std::uint64_t> recv_cookies;
    // Sends that invalidate the peer's key are posted (the IA offers
    // windows: max_rmrs > 0; verbs_path::post_send_invalidate says why).
    bool sends_invalidate = false;
};

// The CQ is DV-owned and read through `view`; armed by hand (view.arm),
// never by ibv_req_notify_cq.
struct Mlx5Completions : VerbsCq {
    fastpath::CompletionQueue view;
    // The EP of the last CQE: most CQEs in a row are one queue pair's. Read
    // and written by the reaper (the EVD's lock held), cleared when that
    // EP's queue pair goes (before_destroy_qp, the lock held too).
    std::uint32_t last_qpn = ~0u;
    Ep* last_ep = nullptr;
};

struct Mlx5SrqRing : VerbsSrqBase {
    fastpath::SharedReceiveQueue queue;
    std::vector<std::uint64_t> cookies;
};

class Mlx5Path : public VerbsPath {
public:
    explicit Mlx5Path(std::unique_ptr<verbs::Device> device);

    DAT_RETURN resize_completions(Evd& evd, DAT_COUNT qlen) override;
    DAT_RETURN grow_srq(Srq& srq, DAT_COUNT qlen) override;
    // Windows are allocated through libibverbs (create_window,
    // destroy_window: the verbs kind's), but bound by a UMR WQE the direct
    // path writes on the EP's send queue itself (a bind through libibverbs
    // would post behind its back). max_rmrs: the device's max_mw.
    DAT_RETURN bind_window(Rmr& rmr, const Lmr* lmr, const DAT_LMR_TRIPLET& range, DAT_MEM_PRIV_FLAGS privileges,
                           Ep& ep, bool& posted) override;
    // Whether this build and `context`'s device can take the direct path
    // (FASTDAPL_MLX5_DIRECT=1, libmlx5, thread domains), and the data path
    // attribute that says which path the IA takes.
    static bool usable(ibv_context* context, std::string& data_path);

protected:
    DAT_RETURN make_cq(Evd& evd, int cqe, ibv_comp_channel* channel, int wake_fd) override;
    ibv_qp* make_qp(Ep& ep, ibv_qp_init_attr& init) override;
    bool init_queues(Ep& ep, ibv_qp* qp, const ibv_qp_cap& cap) override;
    void before_destroy_qp(Ep& ep, ibv_qp* qp) override;
    void release_queues(Ep& ep) override;
    void after_destroy_qp(Ep&, std::uint32_t) override {}
    DAT_RETURN make_srq_ring(Srq& srq, ibv_srq* s) override;
    // A UD post copies the address handle's address vector (mlx5dv_ah) into
    // its WQE: the entry holds a pointer to it, valid while the ibv_ah lives.
    std::uint64_t ah_destination(ibv_ah* ah) override;
};

// --- data path (mlx5 direct) ---------------------------------------------------------------

namespace mlx5_path {

[[gnu::always_inline]] inline DAT_RETURN post_request(Ep* ep, std::uint8_t opcode, DAT_COUNT n,
                                                      const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                                                      std::uint64_t cookie, const DAT_RMR_TRIPLET* remote,
                                                      std::uint8_t ctrl_flags)
{
    auto* q = static_cast<Mlx5EpQueues*>(ep->queues);
    if (!write_request(q->sq, opcode, n, iov, total, cookie, remote, ctrl_flags)) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    q->sq.ring(); // doorbell record, then BlueFlame or the 8-byte doorbell
    return DAT_SUCCESS;
}

// The IB extensions' requests (not the fast path), rung as post_request's
// are. Write with immediate data: `imm` goes into the control segment as
// given (data_path.hpp says why).
inline DAT_RETURN post_with_immediate(Ep* ep, std::uint8_t opcode, DAT_COUNT n, const DAT_LMR_TRIPLET* iov,
                                      std::uint32_t total, std::uint64_t cookie, const DAT_RMR_TRIPLET* remote,
                                      std::uint32_t imm, std::uint8_t ctrl_flags)
{
    auto* q = static_cast<Mlx5EpQueues*>(ep->queues);
    if (!write_request(q->sq, opcode, n, iov, total, cookie, remote, ctrl_flags, imm))
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    q->sq.ring();
    return DAT_SUCCESS;
}

// An 8-byte compare and swap or fetch and add (the device's atomic WQE).
inline DAT_RETURN post_atomic(Ep* ep, std::uint8_t opcode, const DAT_LMR_TRIPLET& local, const DAT_RMR_TRIPLET& remote,
                              std::uint64_t swap_add, std::uint64_t compare, std::uint64_t cookie,
                              std::uint8_t ctrl_flags)
{
    auto* q = static_cast<Mlx5EpQueues*>(ep->queues);
    if (!write_atomic(q->sq, opcode, local, remote, swap_add, compare, cookie, ctrl_flags))
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    q->sq.ring();
    return DAT_SUCCESS;
}

// One datagram of a UD endpoint to what live address handle `ah` names
// (its address vector), queue pair `qpn`, with the qkey every UD queue pair
// has. The completion reports the slot's kDatagramSendOpcode (the reader's
// DAT_IB_DTO_SEND_UD); the WQE is mlx5's SEND.
inline DAT_RETURN post_datagram(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                                std::uint64_t cookie, const void* ah, std::uint32_t qpn, std::uint8_t ctrl_flags)
{
    auto* q = static_cast<Mlx5EpQueues*>(ep->queues);
    std::uint64_t av = 0;
    if (!q->address_handles || !q->address_handles->destination_of(ah, av))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4); // not a live handle of this IA: not read
    if (!q->sq.post_datagram(MLX5_OPCODE_SEND, reinterpret_cast<const fastpath::Sge*>(iov),
                             static_cast<std::uint32_t>(n), total,
                             *reinterpret_cast<const mlx5_wqe_av*>(static_cast<std::uintptr_t>(av)), qpn,
                             cm::kDatagramQkey, 0, ctrl_flags, cookie, kDatagramSendOpcode))
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    q->sq.ring();
    return DAT_SUCCESS;
}

inline DAT_RETURN post_recv(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint64_t cookie)
{
    auto* q = static_cast<Mlx5EpQueues*>(ep->queues);
    if (!q->rq.post(reinterpret_cast<const fastpath::Sge*>(iov), static_cast<std::uint32_t>(n), cookie)) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    return DAT_SUCCESS; // the device reads the doorbell record
}

[[gnu::always_inline]] inline DAT_RETURN srq_post(Srq* srq, DAT_COUNT n, const DAT_LMR_TRIPLET* iov,
                                                  std::uint64_t cookie)
{
    auto* r = static_cast<Mlx5SrqRing*>(srq->ring);
    if (static_cast<DAT_COUNT>(r->queue.outstanding()) >= srq->max_recv_dtos ||
        !r->queue.post(reinterpret_cast<const fastpath::Sge*>(iov), static_cast<std::uint32_t>(n), cookie)) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    return DAT_SUCCESS;
}

// A send that invalidates the peer's key `rkey` (mlx5's SEND_INVAL, the
// key in the control segment's immediate field); refused where the IA
// offers no windows (verbs_path::post_send_invalidate says why).
inline DAT_RETURN post_send_invalidate(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                                       std::uint64_t cookie, std::uint32_t rkey, std::uint8_t ctrl_flags)
{
    if (!static_cast<Mlx5EpQueues*>(ep->queues)->sends_invalidate)
        return error(DAT_MODEL_NOT_SUPPORTED);
    return post_with_immediate(ep, MLX5_OPCODE_SEND_INVAL, n, iov, total, cookie, nullptr, htobe32(rkey), ctrl_flags);
}

inline bool requests_done(const Ep* ep)
{
    return static_cast<const Mlx5EpQueues*>(ep->queues)->sq.outstanding_bbs() == 0;
}

// How the CQE reader finds things on an mlx5 device.
struct Kind {
    using Queues = Mlx5EpQueues;
    static constexpr bool kDirect = true;
    static constexpr bool kDatagrams = true;
    // A UD endpoint's receive: the sender's queue pair from flags_rqpn; its
    // address stays unset (where the softnic puts it, mlx5 puts a
    // timestamp; the GRH is in the consumer's buffer).
    static void mark_datagram(DAT_EVENT& e, Ep* ep, const mlx5_cqe64& cqe)
    {
        mark_datagram_receive(e, ep, be32toh(cqe.flags_rqpn) & 0xffffff, 0);
    }
    static Ep* find(Mlx5Completions& c, std::uint32_t qpn)
    {
        if (c.last_qpn == qpn) [[likely]]
            return c.last_ep;
        Ep* ep = c.eps->find(qpn);
        if (ep) {
            c.last_qpn = qpn;
            c.last_ep = ep;
        }
        return ep;
    }
    static fastpath::SharedReceiveQueue& srq_queue(Srq* srq) { return static_cast<Mlx5SrqRing*>(srq->ring)->queue; }
    static void receive_reaped(Mlx5EpQueues&) {}
    static void reaped(Ep* ep, Mlx5EpQueues& q, Evd* evd, DAT_DTO_COMPLETION_STATUS status, bool request)
    {
        // verbs_completion_reaped, the drained test made only when it matters.
        if (status != DAT_DTO_SUCCESS && status != DAT_DTO_ERR_FLUSHED) [[unlikely]]
            ep_completion_broke(ep, evd);
        else if (request && ep->state.load(std::memory_order_relaxed) == DAT_EP_STATE_DISCONNECT_PENDING) [[unlikely]]
            verbs_completion_reaped(ep, evd, status, request, q.sq.outstanding_bbs() == 0);
    }
};

[[gnu::always_inline]] inline bool take_completion(Evd* evd, DAT_EVENT& e)
{
    return take_mlx5_completion<Kind>(evd, *static_cast<Mlx5Completions*>(evd->completions), e);
}

inline DAT_COUNT ready_completions(Evd* evd, DAT_COUNT have, DAT_COUNT limit)
{
    return count_ready(static_cast<Mlx5Completions*>(evd->completions)->view, have, limit);
}

inline std::uint32_t receives_outstanding(const Ep* ep)
{
    return static_cast<const Mlx5EpQueues*>(ep->queues)->rq.outstanding();
}

inline DAT_COUNT srq_outstanding(const Srq* srq)
{
    return static_cast<DAT_COUNT>(static_cast<const Mlx5SrqRing*>(srq->ring)->queue.outstanding());
}

// Receives of `srq` completed in `evd`'s CQ and not yet reaped (its lock held).
inline DAT_COUNT srq_arrived(Evd* evd, const Srq* srq)
{
    const auto& c = *static_cast<const Mlx5Completions*>(evd->completions);
    DAT_COUNT n = 0;
    c.view.for_each_ready([&](const mlx5_cqe64* cqe) {
        if (!is_receive_cqe(fastpath::CompletionQueue::opcode(cqe)))
            return;
        const Ep* ep = c.eps->find(be32toh(cqe->sop_drop_qpn) & 0xffffff);
        if (ep && ep->srq == srq)
            ++n;
    });
    return n;
}

} // namespace mlx5_path

} // namespace fastdapl::core
