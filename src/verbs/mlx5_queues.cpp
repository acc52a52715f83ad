// From rdma-core objects to the mlx5 fast path (see mlx5_queues.hpp).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "mlx5_queues.hpp"

#include <endian.h>

namespace fastdapl::verbs {

Mlx5Resources create_mlx5_resources(ibv_context* context, ibv_pd* pd)
{
    Mlx5Resources r;
    ibv_td_init_attr td_attr{};
    r.td = ibv_alloc_td(context, &td_attr);
    if (r.td) {
        ibv_parent_domain_init_attr pd_attr{};
        pd_attr.pd = pd;
        pd_attr.td = r.td;
        r.parent_pd = ibv_alloc_parent_domain(context, &pd_attr);
        if (r.parent_pd) {
            r.dedicated_doorbell = true;
            return r;
        }
        ibv_dealloc_td(r.td);
        r.td = nullptr;
    }
    // No dedicated bfreg: QPs use the PD's shared one; the caller serializes rings.
    r.parent_pd = pd;
    r.dedicated_doorbell = false;
    return r;
}

void destroy_mlx5_resources(Mlx5Resources& r)
{
    if (r.td) {
        ibv_dealloc_pd(r.parent_pd); // the parent domain, not the PD under it
        ibv_dealloc_td(r.td);
    }
    r = Mlx5Resources{};
}

ibv_cq* create_cq(ibv_context* context, int cqe, ibv_comp_channel* channel, void* cq_context)
{
    ibv_cq_init_attr_ex attr{};
    attr.cqe = static_cast<std::uint32_t>(cqe);
    attr.cq_context = cq_context;
    attr.channel = channel;
    attr.comp_vector = 0;
    attr.wc_flags = IBV_WC_STANDARD_FLAGS;
    attr.comp_mask = 0;
    attr.flags = 0; // no IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN: we publish SET_CI on every poll
    mlx5dv_cq_init_attr dv_attr{};
    dv_attr.comp_mask = 0; // no CQE compression, default CQE size
    ibv_cq_ex* cq = mlx5dv_create_cq(context, &attr, &dv_attr);
    return cq ? ibv_cq_ex_to_cq(cq) : nullptr;
}

ibv_qp* create_direct_qp(ibv_context* context, ibv_qp_type type, ibv_pd* parent_pd, ibv_cq* send_cq, ibv_cq* recv_cq,
                         ibv_srq* srq, const ibv_qp_cap& cap, ibv_qp_cap* actual)
{
    ibv_qp_init_attr_ex attr{};
    attr.qp_type = type;
    attr.send_cq = send_cq;
    attr.recv_cq = recv_cq;
    attr.srq = srq;
    attr.cap = cap;
    if (srq)
        attr.cap.max_recv_wr = attr.cap.max_recv_sge = 0;
    attr.sq_sig_all = 0;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD;
    attr.pd = parent_pd;
    mlx5dv_qp_init_attr dv_attr{};
    dv_attr.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS;
    dv_attr.create_flags = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE;
    ibv_qp* qp = mlx5dv_create_qp(context, &attr, &dv_attr);
    if (qp && actual)
        *actual = attr.cap; // rdma-core writes the granted capabilities back
    return qp;
}

namespace {

bool qp_layout(ibv_qp* qp, mlx5dv_qp& out)
{
    out = mlx5dv_qp{};
    mlx5dv_obj obj{};
    obj.qp.in = qp;
    obj.qp.out = &out;
    return mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP) == 0;
}

} // namespace

QpQueueSizes qp_queue_sizes(ibv_qp* qp)
{
    mlx5dv_qp dv;
    if (!qp_layout(qp, dv))
        return {};
    return {dv.sq.wqe_cnt, dv.rq.wqe_cnt};
}

bool init_send_queue(ibv_qp* qp, fastpath::SendQueue& sq, fastpath::SendSlot* slots, std::uint32_t max_inline)
{
    mlx5dv_qp dv;
    if (!qp_layout(qp, dv))
        return false;
    if (dv.sq.stride != fastpath::kSendWqeBB || !fastpath::is_power_of_two(dv.sq.wqe_cnt) || !dv.bf.reg)
        return false;
    fastpath::SendQueue::Config c;
    c.qp = &dv; // read by init only
    c.qpn = qp->qp_num;
    c.max_inline = max_inline;
    c.slots = slots;
    // bf.size 0: uuar 0, no BlueFlame buffer, the 8-byte doorbell only.
    c.doorbell = dv.bf.size == 0 ? fastpath::DoorbellMode::uar_8byte : fastpath::DoorbellMode::blueflame;
    sq.init(c);
    return true;
}

bool init_recv_queue(ibv_qp* qp, fastpath::RecvQueue& rq, std::uint64_t* cookies)
{
    mlx5dv_qp dv;
    if (!qp_layout(qp, dv))
        return false;
    if (!fastpath::is_power_of_two(dv.rq.wqe_cnt) || !fastpath::is_power_of_two(dv.rq.stride) ||
        dv.rq.stride < sizeof(mlx5_wqe_data_seg))
        return false;
    rq.init(dv, cookies);
    return true;
}

bool init_cq(ibv_cq* cq, fastpath::CompletionQueue& view)
{
    mlx5dv_cq dv{};
    mlx5dv_obj obj{};
    obj.cq.in = cq;
    obj.cq.out = &dv;
    if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ) != 0) // from here on the CQ is DV-owned
        return false;
    if ((dv.cqe_size != 64 && dv.cqe_size != 128) || !fastpath::is_power_of_two(dv.cqe_cnt) || !dv.cq_uar)
        return false;
    view.init(dv);
    return true;
}

bool init_srq(ibv_srq* srq, fastpath::SharedReceiveQueue& queue, std::vector<std::uint64_t>& cookies)
{
    mlx5dv_srq dv{};
    mlx5dv_obj obj{};
    obj.srq.in = srq;
    obj.srq.out = &dv;
    if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_SRQ) != 0)
        return false;
    if (dv.stride < sizeof(mlx5_wqe_srq_next_seg) + sizeof(mlx5_wqe_data_seg))
        return false;
    const auto list = fastpath::SharedReceiveQueue::inspect_free_list(dv);
    if (!list.ok || list.length < 2)
        return false;
    cookies.assign(list.index_limit, 0);
    queue.adopt(dv, list, be32toh(*dv.dbrec), cookies.data());
    return true;
}

bool clean_qp_before_destroy(ibv_qp* qp, fastpath::CompletionQueue* send_cq, fastpath::CompletionQueue* recv_cq,
                             fastpath::SharedReceiveQueue* srq)
{
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RESET;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE) != 0)
        return false;
    fastpath::clean_queue_pair(qp->qp_num, send_cq, recv_cq, srq);
    return true;
}

} // namespace fastdapl::verbs
