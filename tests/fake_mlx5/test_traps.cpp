// The software mlx5 device's traps fire (the point of the model): each
// misuse that real mlx5/rdma-core would not report aborts with a message.
// Linked to the model directly, so verbs calls here reach it.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "queues.hpp"

#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <cstring>
#include <vector>

namespace {

struct Traps : ::testing::Test {
    void SetUp() override
    {
        GTEST_FLAG_SET(death_test_style, "threadsafe"); // the model runs threads
        ibv_device** list = ibv_get_device_list(nullptr);
        ctx = ibv_open_device(list[0]);
        ibv_free_device_list(list);
        pd = ibv_alloc_pd(ctx);
        ibv_td_init_attr ta{};
        td = ibv_alloc_td(ctx, &ta);
        ibv_parent_domain_init_attr pa{};
        pa.pd = pd;
        pa.td = td;
        parent = ibv_alloc_parent_domain(ctx, &pa);
        ibv_cq_init_attr_ex ca{};
        ca.cqe = 16;
        mlx5dv_cq_init_attr dv{};
        cq = ibv_cq_ex_to_cq(mlx5dv_create_cq(ctx, &ca, &dv));
        ASSERT_TRUE(ctx && parent && cq);
    }
    // Everything goes back, in the order verbs requires (a leak is a failure
    // under LeakSanitizer, and a refused destroy here would show one).
    void TearDown() override
    {
        for (ibv_qp* q : qps)
            EXPECT_EQ(ibv_destroy_qp(q), 0);
        EXPECT_EQ(ibv_destroy_cq(cq), 0);
        EXPECT_EQ(ibv_dealloc_pd(parent), 0);
        EXPECT_EQ(ibv_dealloc_td(td), 0);
        EXPECT_EQ(ibv_dealloc_pd(pd), 0);
        EXPECT_EQ(ibv_close_device(ctx), 0);
    }
    ibv_qp* qp(ibv_pd* on, bool no_scatter = true)
    {
        ibv_qp_init_attr_ex a{};
        a.qp_type = IBV_QPT_RC;
        a.send_cq = a.recv_cq = cq;
        a.cap = {8, 8, 1, 1, 0};
        a.comp_mask = IBV_QP_INIT_ATTR_PD;
        a.pd = on;
        mlx5dv_qp_init_attr dv{};
        dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS;
        dv.create_flags = no_scatter ? MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE : 0;
        ibv_qp* q = mlx5dv_create_qp(ctx, &a, &dv);
        if (q)
            qps.push_back(q);
        return q;
    }
    void take_cq(mlx5dv_cq& out)
    {
        mlx5dv_obj obj{};
        obj.cq.in = cq;
        obj.cq.out = &out;
        ASSERT_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ), 0);
    }
    void to_state(ibv_qp* q, ibv_qp_state s)
    {
        ibv_qp_attr a{};
        a.qp_state = s;
        ASSERT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), 0);
    }
    ibv_context* ctx = nullptr;
    ibv_pd *pd = nullptr, *parent = nullptr;
    ibv_td* td = nullptr;
    ibv_cq* cq = nullptr;
    std::vector<ibv_qp*> qps; // still to destroy
};

TEST_F(Traps, PollOrArmOfADvOwnedCq)
{
    mlx5dv_cq dv;
    take_cq(dv);
    ibv_wc wc;
    EXPECT_DEATH(ibv_poll_cq(cq, 1, &wc), "ibv_poll_cq on CQ .* mlx5dv_init_obj");
    EXPECT_DEATH(ibv_req_notify_cq(cq, 0), "ibv_req_notify_cq on CQ");
}

TEST_F(Traps, QpCreationRules)
{
    EXPECT_DEATH(qp(parent, false), "DISABLE_SCATTER_TO_CQE");
    EXPECT_DEATH(qp(pd), "not on a parent domain with a thread domain");
    ASSERT_NE(qp(parent), nullptr);
    EXPECT_DEATH(qp(parent), "a second QP on thread domain");
}

TEST_F(Traps, DestroyWithoutResetOrWithCqesLeft)
{
    mlx5dv_cq dv;
    take_cq(dv);
    ibv_qp* q = qp(parent);
    ASSERT_NE(q, nullptr);
    to_state(q, IBV_QPS_INIT);
    EXPECT_DEATH(ibv_destroy_qp(q), "not moved to RESET first");
    // A receive posted in INIT flushes at ERROR: one CQE of this QP.
    mlx5dv_qp dq{};
    mlx5dv_obj obj{};
    obj.qp.in = q;
    obj.qp.out = &dq;
    ASSERT_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP), 0);
    std::vector<std::uint64_t> cookies(dq.rq.wqe_cnt);
    fastdapl::fastpath::RecvQueue rq;
    rq.init(dq, cookies.data());
    static char buf[64];
    const fastdapl::fastpath::Sge sge{reinterpret_cast<std::uintptr_t>(buf), sizeof buf, 0};
    ASSERT_TRUE(rq.post(&sge, 1, 7));
    to_state(q, IBV_QPS_ERR);
    to_state(q, IBV_QPS_RESET);
    fastdapl::fastpath::CompletionQueue view;
    view.init(dv);
    for (int i = 0; i < 1000 && !view.peek(); ++i)
        usleep(1000);
    ASSERT_NE(view.peek(), nullptr);
    EXPECT_DEATH(ibv_destroy_qp(q), "CQEs of it still in DV-owned CQ");
    fastdapl::fastpath::clean_queue_pair(q->qp_num, &view, &view, nullptr);
    EXPECT_EQ(ibv_destroy_qp(q), 0); // cleaned: fine
    qps.clear();
}

// Address handles: the RoCE v2 AV a UD send copies, what is refused, and
// the traps for a handle that is not live.
TEST_F(Traps, AddressHandlesAndTheirAddressVectors)
{
    ibv_ah_attr a{};
    a.is_global = 1;
    a.port_num = 1;
    a.grh.hop_limit = 64;
    a.grh.traffic_class = 0x20;
    a.grh.flow_label = 0x12345;
    a.grh.dgid.raw[10] = a.grh.dgid.raw[11] = 0xff;
    a.grh.dgid.raw[12] = 127;
    a.grh.dgid.raw[15] = 1;
    ibv_pd* own = ibv_alloc_pd(ctx);
    ASSERT_NE(own, nullptr);
    ibv_ah* ah = ibv_create_ah(own, &a);
    ASSERT_NE(ah, nullptr);
    mlx5dv_ah dv{};
    mlx5dv_obj obj{};
    obj.ah.in = ah;
    obj.ah.out = &dv;
    ASSERT_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH), 0);
    ASSERT_NE(dv.av, nullptr);
    EXPECT_EQ(std::memcmp(dv.av->rgid, a.grh.dgid.raw, 16), 0);
    EXPECT_EQ(dv.av->hop_limit, 64);
    EXPECT_EQ(dv.av->tclass, 0x20);
    EXPECT_EQ(be32toh(dv.av->grh_gid_fl), 1u << 30 | 0x12345u); // GRH, source GID 0, the flow label
    EXPECT_GE(be16toh(dv.av->rlid), 0xc000u);                   // RoCE v2's UDP source port
    EXPECT_EQ(ibv_dealloc_pd(own), EBUSY);                      // the handle holds its PD
    // Refused: no GRH (RoCE needs one), another port, a GID that is not IPv4-mapped.
    ibv_ah_attr bad = a;
    bad.is_global = 0;
    EXPECT_EQ(ibv_create_ah(pd, &bad), nullptr);
    bad = a;
    bad.port_num = 2;
    EXPECT_EQ(ibv_create_ah(pd, &bad), nullptr);
    bad = a;
    bad.grh.dgid.raw[10] = 0;
    EXPECT_EQ(ibv_create_ah(pd, &bad), nullptr);
    EXPECT_EQ(ibv_destroy_ah(ah), 0);
    EXPECT_EQ(ibv_dealloc_pd(own), 0);
    EXPECT_DEATH(ibv_destroy_ah(ah), "no live address handle");
    EXPECT_DEATH(mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH), "no live address handle");
}

// A UD queue pair's INIT names its qkey, port and pkey index, as verbs requires.
TEST_F(Traps, UdQueuePairInitNeedsItsQkey)
{
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_UD;
    a.send_cq = a.recv_cq = cq;
    a.cap = {8, 8, 1, 1, 0};
    a.comp_mask = IBV_QP_INIT_ATTR_PD;
    a.pd = parent;
    mlx5dv_qp_init_attr dv{};
    dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS;
    dv.create_flags = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE;
    ibv_qp* q = mlx5dv_create_qp(ctx, &a, &dv);
    ASSERT_NE(q, nullptr);
    qps.push_back(q);
    EXPECT_EQ(q->qp_type, IBV_QPT_UD);
    ibv_qp_attr m{};
    m.qp_state = IBV_QPS_INIT;
    m.port_num = 1;
    EXPECT_EQ(ibv_modify_qp(q, &m, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX), EINVAL); // no qkey
    m.qkey = 0x01234567;
    EXPECT_EQ(ibv_modify_qp(q, &m, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_QKEY), 0);
    to_state(q, IBV_QPS_RTR);
    to_state(q, IBV_QPS_RTS);
    to_state(q, IBV_QPS_RESET);
}

} // namespace
