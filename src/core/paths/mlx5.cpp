// The mlx5 device kind's control plane: the verbs kind's, except that CQs,
// QPs and SRQs come from mlx5dv (src/verbs/mlx5_queues) and their rings
// are handed to src/fastpath.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "mlx5.hpp"

#include "../lmr.hpp"
#include "../pz.hpp"
#include "../rmr.hpp"

#if FASTDAPL_HAVE_MLX5DV
#include "mlx5_queues.hpp" // src/verbs
#endif

#include <cstdlib>
#include <cstring>

namespace fastdapl::core {

Mlx5Path::Mlx5Path(std::unique_ptr<verbs::Device> device) : VerbsPath(PathKind::mlx5, std::move(device)) {}

// A hand-polled mlx5 CQ keeps its ring (rdma-core's resize would move CQEs
// behind our consumer index): up to its size.
DAT_RETURN Mlx5Path::resize_completions(Evd& evd, DAT_COUNT qlen)
{
    if (static_cast<std::uint32_t>(qlen) > static_cast<Mlx5Completions*>(evd.completions)->view.size())
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    return DAT_SUCCESS;
}

// rdma-core's mlx5 SRQs do not grow (IBV_SRQ_MAX_WR is refused): up to what was built.
DAT_RETURN Mlx5Path::grow_srq(Srq& srq, DAT_COUNT qlen)
{
    if (static_cast<std::uint32_t>(qlen) > static_cast<Mlx5SrqRing*>(srq.ring)->queue.capacity())
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    return DAT_SUCCESS;
}

#if FASTDAPL_HAVE_MLX5DV

bool Mlx5Path::usable(ibv_context* context, std::string& data_path)
{
    const char* want = std::getenv("FASTDAPL_MLX5_DIRECT");
    if (!want || std::strcmp(want, "1") != 0) {
        data_path = "generic verbs (mlx5 device; FASTDAPL_MLX5_DIRECT=1 selects the mlx5 direct path)";
        return false;
    }
    // Each EP needs a thread domain for a doorbell register of its own: try one.
    bool direct = false;
    if (ibv_pd* pd = ibv_alloc_pd(context)) {
        verbs::Mlx5Resources r = verbs::create_mlx5_resources(context, pd);
        direct = r.dedicated_doorbell;
        verbs::destroy_mlx5_resources(r);
        ibv_dealloc_pd(pd);
    }
    data_path = direct ? "mlx5 direct (src/fastpath posts and polls; a doorbell register per endpoint)"
                       : "generic verbs (mlx5 device; no thread domain, which the direct path needs)";
    return direct;
}

DAT_RETURN Mlx5Path::make_cq(Evd& evd, int cqe, ibv_comp_channel* channel, int wake_fd)
{
    ibv_cq* cq = verbs::create_cq(device_->context(), cqe, channel, &evd);
    if (!cq)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    auto* c = new Mlx5Completions();
    if (!verbs::init_cq(cq, c->view)) {
        ibv_destroy_cq(cq);
        delete c;
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    }
    c->cq = cq;
    c->channel = channel;
    c->wake_fd = wake_fd;
    c->eps = &eps_;
    evd.completions = c;
    return DAT_SUCCESS;
}

// An RC (or a UD endpoint's UD) QP on a parent domain of its own: its thread domain gives it a
// doorbell register no other QP rings, so posts on different EPs need no
// lock. Without one (an old kernel, a device without dynamic UARs) the EP
// cannot have a QP. `init.cap` receives what the device granted.
ibv_qp* Mlx5Path::make_qp(Ep& ep, ibv_qp_init_attr& init)
{
    ibv_context* context = device_->context();
    verbs::Mlx5Resources r = verbs::create_mlx5_resources(context, static_cast<ibv_pd*>(ep.pz->device_pd));
    if (!r.dedicated_doorbell) {
        if (g_debug)
            std::fprintf(stderr, "fastdapl: no thread domain for a dedicated doorbell register\n");
        verbs::destroy_mlx5_resources(r);
        return nullptr;
    }
    ibv_qp_cap granted{};
    ibv_qp* qp = verbs::create_direct_qp(context, init.qp_type, r.parent_pd, init.send_cq, init.recv_cq, init.srq,
                                         init.cap, &granted);
    if (!qp) { // some devices copy nothing inline
        init.cap.max_inline_data = 0;
        qp = verbs::create_direct_qp(context, init.qp_type, r.parent_pd, init.send_cq, init.recv_cq, init.srq, init.cap,
                                     &granted);
    }
    if (!qp) {
        verbs::destroy_mlx5_resources(r);
        return nullptr;
    }
    init.cap = granted;
    auto* q = new Mlx5EpQueues();
    q->qp = qp;
    q->td = r.td;
    q->parent_pd = r.parent_pd;
    ep.queues = q;
    return qp;
}

// The send queue (and own receive queue) of a new direct QP as the fast
// path's; false when the device's layout is not one it drives.
bool Mlx5Path::init_queues(Ep& ep, ibv_qp* qp, const ibv_qp_cap& cap)
{
    auto* q = static_cast<Mlx5EpQueues*>(ep.queues);
    const verbs::QpQueueSizes sizes = verbs::qp_queue_sizes(qp);
    if (sizes.sq_bbs == 0)
        return false;
    q->send_slots.assign(sizes.sq_bbs, {});
    q->recv_cookies.assign(ep.srq ? 0 : sizes.rq_wqes, 0);
    q->sends_invalidate = max_rmrs() > 0;
    return verbs::init_send_queue(qp, q->sq, q->send_slots.data(), cap.max_inline_data) &&
           (ep.srq || verbs::init_recv_queue(qp, q->rq, q->recv_cookies.data()));
}

// Before the QP is destroyed: it stops (RESET), and its CQEs not yet
// reaped are dropped from the EVDs, an SRQ's WQEs they name going back on
// its free list (rdma-core cleans only CQs it polls itself).
void Mlx5Path::before_destroy_qp(Ep& ep, ibv_qp* qp)
{
    with_completions_held(&ep, [&ep, qp] {
        for (Evd* evd : {ep.request_evd, ep.recv_evd}) {
            auto* c = static_cast<Mlx5Completions*>(evd->completions);
            if (c->last_ep == &ep) {
                c->last_qpn = ~0u;
                c->last_ep = nullptr;
            }
        }
        if (!verbs::clean_qp_before_destroy(qp, &static_cast<Mlx5Completions*>(ep.request_evd->completions)->view,
                                            &static_cast<Mlx5Completions*>(ep.recv_evd->completions)->view,
                                            ep.srq ? &static_cast<Mlx5SrqRing*>(ep.srq->ring)->queue : nullptr) &&
            g_debug)
            std::fprintf(stderr, "fastdapl: qp %u did not go to RESET; its completions stay on the CQs\n", qp->qp_num);
    });
}

void Mlx5Path::release_queues(Ep& ep)
{
    auto* q = static_cast<Mlx5EpQueues*>(ep.queues);
    verbs::Mlx5Resources r{q->td, q->parent_pd, q->td != nullptr};
    verbs::destroy_mlx5_resources(r);
    delete q;
    ep.queues = nullptr;
}

// A window bind as a UMR WQE on the EP's send queue (type 1 windows too,
// as libmlx5's own ibv_bind_mw posts them on the QP it is given): the
// window takes its next key (the low 8 bits advanced, as ibv_inc_rkey).
// A bound type 2 window is freed first (IB binds a type 2 window only
// while free); an unbind is a free. The UMRs are unsignalled; behind them
// a NOP with the initiator small fence (libmlx5 fences the WQE after a
// bind) waits for them and carries the bind's completion, in order with
// the EP's other requests (the softnic's NOP, rmr.cpp): what the consumer
// posts next starts only once the window is bound.
DAT_RETURN Mlx5Path::bind_window(Rmr& rmr, const Lmr* lmr, const DAT_LMR_TRIPLET& range, DAT_MEM_PRIV_FLAGS privileges,
                                 Ep& ep, bool& posted)
{
    posted = false;
    auto* q = static_cast<Mlx5EpQueues*>(ep.queues);
    const bool bind = range.segment_length != 0;
    const bool type2 = rmr.scope == DAT_RMR_SCOPE_EP; // create_window's choice
    // The IB spec forbids a zero-based type 1 window (o10-36.2.2); one KLM
    // spans at most 2 GiB.
    if (bind && rmr.va_type == DAT_VA_TYPE_ZB && !type2)
        return error(DAT_MODEL_NOT_SUPPORTED);
    if (bind && range.segment_length > (std::uint64_t{1} << 31))
        return error(DAT_LENGTH_ERROR, DAT_NO_SUBTYPE);
    // A type 2 window bound for another queue pair, which alone may free
    // it, is replaced for an unbind too (the UMR frees a window it holds).
    const std::uint32_t qpn = q->qp->qp_num;
    ibv_mw* mw = window_for(rmr, qpn, true);
    if (!mw)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    const bool free_first = type2 && bind && rmr.window_qpn != 0;
    // The UMR, the free before it, the NOP behind it.
    const std::uint32_t needed =
        fastpath::SendQueue::window_bind_bbs(bind) + (free_first ? fastpath::SendQueue::window_bind_bbs(false) : 0) + 1;
    if (q->sq.free_bbs() < needed)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    std::uint32_t key = mw->rkey;
    fastpath::SendQueue::WindowBind b;
    b.type2 = type2;
    if (free_first) {
        b.key = key;
        key = ibv_inc_rkey(key);
        b.new_variant = static_cast<std::uint8_t>(key);
        q->sq.post_window_bind(b, 0, 0);
    }
    b.key = key;
    key = ibv_inc_rkey(key);
    b.new_variant = static_cast<std::uint8_t>(key);
    if (bind) {
        b.check_free = type2;
        b.length = range.segment_length;
        b.addr = range.virtual_address;
        b.region_key = lmr->lmr_context; // the local registration: process addresses
        b.zero_based = rmr.va_type == DAT_VA_TYPE_ZB;
        b.access = static_cast<std::uint8_t>(
            ((privileges & DAT_MEM_PRIV_REMOTE_READ_FLAG) ? MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ : 0) |
            ((privileges & DAT_MEM_PRIV_REMOTE_WRITE_FLAG) ? MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE : 0));
    }
    // A bind behind the free of the same window waits for it (the small
    // fence libmlx5 puts behind its own invalidates).
    q->sq.post_window_bind(b, free_first ? MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE : 0, 0);
    q->sq.post(MLX5_OPCODE_NOP, nullptr, 0, 0, nullptr, 0,
               MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE, 0);
    q->sq.ring();
    mw->rkey = key;
    rmr.context = bind ? key : 0;
    rmr.window_qpn = type2 && bind ? qpn : 0;
    posted = true;
    return DAT_SUCCESS;
}

// An SRQ whose ring the fast path posts to.
DAT_RETURN Mlx5Path::make_srq_ring(Srq& srq, ibv_srq* s)
{
    auto* r = new Mlx5SrqRing();
    r->srq = s;
    if (!verbs::init_srq(s, r->queue, r->cookies)) {
        delete r;
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    }
    srq.ring = r;
    return DAT_SUCCESS;
}

std::uint64_t Mlx5Path::ah_destination(ibv_ah* ah)
{
    mlx5dv_ah dv{};
    mlx5dv_obj obj{};
    obj.ah.in = ah;
    obj.ah.out = &dv;
    if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH) != 0 || !dv.av)
        return 0;
    return reinterpret_cast<std::uintptr_t>(dv.av);
}

#else // built without libmlx5: the kind is never chosen

bool Mlx5Path::usable(ibv_context*, std::string& data_path)
{
    data_path = "generic verbs (mlx5 device; this build has no libmlx5, so no direct path)";
    return false;
}
DAT_RETURN Mlx5Path::make_cq(Evd&, int, ibv_comp_channel*, int)
{
    return not_supported();
}
ibv_qp* Mlx5Path::make_qp(Ep&, ibv_qp_init_attr&)
{
    return nullptr;
}
bool Mlx5Path::init_queues(Ep&, ibv_qp*, const ibv_qp_cap&)
{
    return false;
}
void Mlx5Path::before_destroy_qp(Ep&, ibv_qp*) {}
void Mlx5Path::release_queues(Ep& ep)
{
    ep.queues = nullptr;
}
DAT_RETURN Mlx5Path::make_srq_ring(Srq&, ibv_srq*)
{
    return not_supported();
}
std::uint64_t Mlx5Path::ah_destination(ibv_ah*)
{
    return 0;
}
DAT_RETURN Mlx5Path::bind_window(Rmr&, const Lmr*, const DAT_LMR_TRIPLET&, DAT_MEM_PRIV_FLAGS, Ep&, bool& posted)
{
    posted = false;
    return not_supported();
}

#endif

} // namespace fastdapl::core
