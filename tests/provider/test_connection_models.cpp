// libfastdapl through the public DAT API: reserved service points,
// dat_ep_modify (Table 5 of the spec), graceful disconnect and DTO EVD
// overflow, on one IA over loopback.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "connect_through_psp.hpp"

#include <dat2/udat.h>
// after udat.h, which it needs first
#include <dat2/dat_registry.h>

#include "test_ia.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <chrono>

#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <vector>

namespace {

constexpr DAT_RETURN kOk = DAT_SUCCESS;
constexpr DAT_TIMEOUT kWait = 5000000; // 5 s, in µs
DAT_RETURN type_of(DAT_RETURN rc) { return DAT_GET_TYPE(rc); }
DAT_RETURN t(DAT_RETURN type) { return type; }

class Models : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(dat_ia_open(test_ia_name(), 16, &async, &ia), kOk);
        ASSERT_EQ(dat_pz_create(ia, &pz), kOk);
        for (DAT_EVD_HANDLE* evd : {&dto_a, &dto_b})
            ASSERT_EQ(dat_evd_create(ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, evd), kOk);
        for (DAT_EVD_HANDLE* evd : {&conn_a, &conn_b})
            ASSERT_EQ(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, evd), kOk);
        ASSERT_EQ(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd), kOk);
        DAT_IA_ATTR attr{};
        ASSERT_EQ(dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &attr, 0, nullptr), kOk);
        address = attr.ia_address_ptr;
        buffer.assign(1 << 16, 0);
        DAT_REGION_DESCRIPTION region{};
        region.for_va = buffer.data();
        DAT_VLEN size;
        DAT_VADDR va;
        ASSERT_EQ(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, buffer.size(), pz, DAT_MEM_PRIV_ALL_FLAG,
                                 DAT_VA_TYPE_VA, &lmr, &lmr_context, &rmr_context, &size, &va),
                  kOk);
    }
    void TearDown() override
    {
        if (ia) {
            EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), kOk);
        }
    }
    DAT_EP_HANDLE make_ep(DAT_EVD_HANDLE dto, DAT_EVD_HANDLE conn, const DAT_EP_ATTR* attr = nullptr)
    {
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        EXPECT_EQ(dat_ep_create(ia, pz, dto, dto, conn, attr, &ep), kOk);
        return ep;
    }
    DAT_EVENT next(DAT_EVD_HANDLE evd)
    {
        DAT_EVENT e{};
        DAT_COUNT nmore;
        EXPECT_EQ(dat_evd_wait(evd, kWait, 1, &e, &nmore), kOk);
        return e;
    }
    DAT_EP_STATE state_of(DAT_EP_HANDLE ep)
    {
        DAT_EP_STATE s;
        EXPECT_EQ(dat_ep_get_status(ep, &s, nullptr, nullptr), kOk);
        return s;
    }
    DAT_LMR_TRIPLET piece(std::size_t offset, DAT_SEG_LENGTH length)
    {
        return {reinterpret_cast<DAT_VADDR>(buffer.data() + offset), length, lmr_context};
    }
    // An RSP for `ep` on a qualifier below the ephemeral port range (which
    // outgoing connections use), retrying while others hold the one tried.
    DAT_CONN_QUAL reserve(DAT_EP_HANDLE ep, DAT_RSP_HANDLE* rsp)
    {
        static unsigned seed = static_cast<unsigned>(getpid());
        for (int attempt = 0; attempt < 100; ++attempt) {
            const DAT_CONN_QUAL qual = 10000 + rand_r(&seed) % 20000;
            const DAT_RETURN rc = dat_rsp_create(ia, qual, ep, cr_evd, rsp);
            if (rc == kOk)
                return qual;
            if (type_of(rc) != t(DAT_CONN_QUAL_IN_USE)) {
                ADD_FAILURE() << "dat_rsp_create: " << std::hex << rc;
                break;
            }
        }
        return 0;
    }
    // An active EP connected to a passive one through a PSP.
    void connect_pair(DAT_EP_HANDLE& active, DAT_EP_HANDLE& passive)
    {
        active = make_ep(dto_a, conn_a);
        passive = make_ep(dto_b, conn_b);
        fastdapl_test::connect_through_psp(ia, address, cr_evd, active, conn_a, passive, conn_b);
    }

    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE dto_a, dto_b, conn_a, conn_b, cr_evd;
    DAT_IA_ADDRESS_PTR address = nullptr;
    std::vector<char> buffer;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lmr_context;
    DAT_RMR_CONTEXT rmr_context;
};

TEST_F(Models, ReservedServicePointTakesOneRequestForItsEndpoint)
{
    DAT_EP_HANDLE reserved = make_ep(dto_b, conn_b);
    DAT_RSP_HANDLE rsp;
    EXPECT_EQ(type_of(dat_rsp_create(ia, 0, reserved, cr_evd, &rsp)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_rsp_create(ia, 12345, reserved, conn_b, &rsp)), t(DAT_INVALID_HANDLE)); // not a CR EVD
    const DAT_CONN_QUAL q1 = reserve(reserved, &rsp);
    ASSERT_NE(q1, 0u);
    EXPECT_EQ(state_of(reserved), DAT_EP_STATE_RESERVED);
    EXPECT_EQ(type_of(dat_ep_free(reserved)), t(DAT_INVALID_STATE)); // free the RSP first
    DAT_EP_HANDLE other = make_ep(dto_b, conn_b);
    DAT_RSP_HANDLE second;
    EXPECT_EQ(type_of(dat_rsp_create(ia, q1 + 1, reserved, cr_evd, &second)), t(DAT_INVALID_STATE));
    EXPECT_EQ(type_of(dat_rsp_create(ia, q1, other, cr_evd, &second)), t(DAT_CONN_QUAL_IN_USE));

    DAT_HANDLE_TYPE type;
    ASSERT_EQ(dat_get_handle_type(rsp, &type), kOk);
    EXPECT_EQ(type, DAT_HANDLE_TYPE_RSP);
    DAT_RSP_PARAM param{};
    ASSERT_EQ(dat_rsp_query(rsp, DAT_RSP_FIELD_ALL, &param), kOk);
    EXPECT_EQ(param.conn_qual, q1);
    EXPECT_EQ(param.evd_handle, cr_evd);
    EXPECT_EQ(param.ep_handle, reserved);
    EXPECT_EQ(type_of(dat_rsp_query(rsp, static_cast<DAT_RSP_PARAM_MASK>(0x100), &param)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_psp_free(rsp)), t(DAT_INVALID_HANDLE)); // an RSP is not a PSP

    // The first request reaches the reserved endpoint; a second one is refused.
    DAT_EP_HANDLE first = make_ep(dto_a, conn_a);
    DAT_EP_HANDLE late = make_ep(dto_a, conn_a);
    ASSERT_EQ(dat_ep_connect(first, address, q1, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              kOk);
    DAT_EVENT e = next(cr_evd);
    ASSERT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
    EXPECT_EQ(e.event_data.cr_arrival_event_data.sp_handle.rsp_handle, rsp);
    EXPECT_EQ(state_of(reserved), DAT_EP_STATE_PASSIVE_CONNECTION_PENDING);
    DAT_CR_PARAM cr{};
    ASSERT_EQ(dat_cr_query(e.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL, &cr), kOk);
    EXPECT_EQ(cr.local_ep_handle, reserved);
    ASSERT_EQ(dat_ep_connect(late, address, q1, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              kOk);
    EXPECT_EQ(type_of(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, other, 0, nullptr)),
              t(DAT_INVALID_PARAMETER)); // only its own endpoint
    ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, DAT_HANDLE_NULL, 0, nullptr), kOk);
    // conn_a carries both active EPs' events: the refused one and the established one.
    bool established = false, refused = false;
    for (int i = 0; i < 2; ++i) {
        e = next(conn_a);
        if (e.event_data.connect_event_data.ep_handle == first)
            established = e.event_number == DAT_CONNECTION_EVENT_ESTABLISHED;
        else
            refused = e.event_number == DAT_CONNECTION_EVENT_NON_PEER_REJECTED;
    }
    EXPECT_TRUE(established);
    EXPECT_TRUE(refused);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    ASSERT_EQ(dat_rsp_free(rsp), kOk);
    EXPECT_EQ(state_of(reserved), DAT_EP_STATE_CONNECTED); // it was taken before the free
    EXPECT_EQ(type_of(dat_rsp_free(rsp)), t(DAT_INVALID_HANDLE));
}

// Provider-made endpoints (ep_creator IFASKED): a PSP with
// DAT_PSP_PROVIDER_FLAG names a new unconfigured, tentative endpoint in
// each request; the consumer configures it with dat_ep_modify and accepts
// with DAT_HANDLE_NULL, or rejects and the provider takes it back.
TEST_F(Models, ProviderMadeEndpointsForPspRequestsAndRsps)
{
    DAT_PROVIDER_ATTR pattr{};
    ASSERT_EQ(dat_ia_query(ia, nullptr, 0, nullptr, DAT_PROVIDER_FIELD_ALL, &pattr), kOk);
    EXPECT_EQ(pattr.ep_creator, DAT_PSP_CREATES_EP_IFASKED);
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_PROVIDER_FLAG, &psp), kOk);
    DAT_PSP_PARAM pp{};
    ASSERT_EQ(dat_psp_query(psp, DAT_PSP_FIELD_ALL, &pp), kOk);
    EXPECT_EQ(pp.psp_flags, DAT_PSP_PROVIDER_FLAG);

    const auto request = [&](DAT_EP_HANDLE active) {
        EXPECT_EQ(dat_ep_connect(active, address, qual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
                  kOk);
        DAT_EVENT e = next(cr_evd);
        EXPECT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
        return e.event_data.cr_arrival_event_data.cr_handle;
    };
    DAT_EP_HANDLE a = make_ep(dto_a, conn_a);
    DAT_CR_HANDLE cr = request(a);
    DAT_CR_PARAM crp{};
    ASSERT_EQ(dat_cr_query(cr, DAT_CR_FIELD_ALL, &crp), kOk);
    DAT_EP_HANDLE made = crp.local_ep_handle;
    ASSERT_NE(made, DAT_HANDLE_NULL);
    EXPECT_EQ(state_of(made), DAT_EP_STATE_UNCONFIGURED_TENTATIVE);
    DAT_EP_PARAM ep{};
    ASSERT_EQ(dat_ep_query(made, DAT_EP_FIELD_ALL, &ep), kOk);
    EXPECT_EQ(ep.pz_handle, DAT_HANDLE_NULL);
    EXPECT_EQ(ep.connect_evd_handle, DAT_HANDLE_NULL);
    // Not accepted unconfigured, not freed while the request holds it, not
    // accepted on another endpoint.
    EXPECT_EQ(type_of(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, nullptr)), t(DAT_INVALID_STATE));
    EXPECT_EQ(type_of(dat_ep_free(made)), t(DAT_INVALID_STATE));
    DAT_EP_HANDLE other = make_ep(dto_b, conn_b);
    EXPECT_EQ(type_of(dat_cr_accept(cr, other, 0, nullptr)), t(DAT_INVALID_PARAMETER));
    DAT_EP_PARAM config{};
    config.pz_handle = pz;
    config.recv_evd_handle = config.request_evd_handle = dto_b;
    config.connect_evd_handle = conn_b;
    ASSERT_EQ(dat_ep_modify(made,
                            static_cast<DAT_EP_PARAM_MASK>(DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE |
                                                           DAT_EP_FIELD_REQUEST_EVD_HANDLE |
                                                           DAT_EP_FIELD_CONNECT_EVD_HANDLE),
                            &config),
              kOk);
    EXPECT_EQ(state_of(made), DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING);
    DAT_LMR_TRIPLET landing = piece(1024, 16), sent = piece(0, 16);
    std::memcpy(buffer.data(), "provider-made ep", 16);
    ASSERT_EQ(dat_ep_post_recv(made, 1, &landing, DAT_DTO_COOKIE{.as_64 = 5}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    ASSERT_EQ(dat_cr_accept(cr, made, 0, nullptr), kOk); // its own handle is as good as NULL
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    ASSERT_EQ(dat_ep_post_send(a, 1, &sent, DAT_DTO_COOKIE{.as_64 = 6}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    EXPECT_EQ(next(dto_a).event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    DAT_EVENT e = next(dto_b);
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 5u);
    EXPECT_EQ(std::string(buffer.data() + 1024, 16), "provider-made ep");

    // A rejected request's endpoint goes back to the provider.
    DAT_EP_HANDLE b = make_ep(dto_a, conn_a);
    cr = request(b);
    ASSERT_EQ(dat_cr_query(cr, DAT_CR_FIELD_ALL, &crp), kOk);
    DAT_EP_HANDLE taken_back = crp.local_ep_handle;
    ASSERT_NE(taken_back, DAT_HANDLE_NULL);
    ASSERT_EQ(dat_cr_reject(cr, 0, nullptr), kOk);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_PEER_REJECTED);
    EXPECT_EQ(type_of(dat_ep_free(taken_back)), t(DAT_INVALID_HANDLE));
    ASSERT_EQ(dat_psp_free(psp), kOk);

    // An RSP without an endpoint: the provider makes one, unconfigured and reserved.
    DAT_RSP_HANDLE rsp;
    // A qualifier nobody holds now; another process's connection may take
    // the freed port as its own in between (tests run in parallel): another.
    DAT_RETURN created = DAT_CONN_QUAL_IN_USE;
    for (int tries = 0; tries < 20 && DAT_GET_TYPE(created) == DAT_CONN_QUAL_IN_USE; ++tries) {
        ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
        ASSERT_EQ(dat_psp_free(psp), kOk);
        created = dat_rsp_create(ia, qual, DAT_HANDLE_NULL, cr_evd, &rsp);
    }
    ASSERT_EQ(created, kOk);
    DAT_RSP_PARAM rp{};
    ASSERT_EQ(dat_rsp_query(rsp, DAT_RSP_FIELD_ALL, &rp), kOk);
    ASSERT_NE(rp.ep_handle, DAT_HANDLE_NULL);
    EXPECT_EQ(state_of(rp.ep_handle), DAT_EP_STATE_UNCONFIGURED_RESERVED);
    config.recv_evd_handle = config.request_evd_handle = dto_b;
    ASSERT_EQ(dat_ep_modify(rp.ep_handle,
                            static_cast<DAT_EP_PARAM_MASK>(DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE |
                                                           DAT_EP_FIELD_REQUEST_EVD_HANDLE |
                                                           DAT_EP_FIELD_CONNECT_EVD_HANDLE),
                            &config),
              kOk);
    EXPECT_EQ(state_of(rp.ep_handle), DAT_EP_STATE_RESERVED);
    DAT_EP_HANDLE c = make_ep(dto_a, conn_a);
    cr = request(c);
    ASSERT_EQ(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, nullptr), kOk);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    ASSERT_EQ(dat_rsp_free(rsp), kOk);
    EXPECT_EQ(state_of(rp.ep_handle), DAT_EP_STATE_CONNECTED);
}

TEST_F(Models, RejectOnAnRspAndFreeingAnUnusedRspGiveTheEndpointBack)
{
    DAT_EP_HANDLE reserved = make_ep(dto_b, conn_b);
    DAT_RSP_HANDLE rsp;
    DAT_CONN_QUAL q1 = reserve(reserved, &rsp);
    ASSERT_NE(q1, 0u);
    ASSERT_EQ(dat_rsp_free(rsp), kOk);
    EXPECT_EQ(state_of(reserved), DAT_EP_STATE_UNCONNECTED);

    q1 = reserve(reserved, &rsp);
    ASSERT_NE(q1, 0u);
    DAT_EP_HANDLE active = make_ep(dto_a, conn_a);
    ASSERT_EQ(dat_ep_connect(active, address, q1, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              kOk);
    DAT_EVENT e = next(cr_evd);
    ASSERT_EQ(dat_cr_reject(e.event_data.cr_arrival_event_data.cr_handle, 0, nullptr), kOk);
    EXPECT_EQ(state_of(reserved), DAT_EP_STATE_UNCONNECTED);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_PEER_REJECTED);
    ASSERT_EQ(dat_rsp_free(rsp), kOk);
    EXPECT_EQ(dat_ep_free(reserved), kOk);
}

TEST_F(Models, ModifyFollowsTable5)
{
    // Created without a connect EVD: unconfigured, cannot connect.
    DAT_EP_HANDLE ep;
    ASSERT_EQ(dat_ep_create(ia, pz, dto_a, dto_a, DAT_HANDLE_NULL, nullptr, &ep), kOk);
    EXPECT_EQ(state_of(ep), DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
    DAT_RETURN rc = dat_ep_connect(ep, address, 1, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
    EXPECT_EQ(type_of(rc), t(DAT_INVALID_STATE));
    EXPECT_EQ(DAT_GET_SUBTYPE(rc), DAT_INVALID_STATE_EP_UNCONFIGURED);

    DAT_EP_PARAM p{};
    p.connect_evd_handle = dto_a; // not a connection EVD
    EXPECT_EQ(type_of(dat_ep_modify(ep, DAT_EP_FIELD_CONNECT_EVD_HANDLE, &p)), t(DAT_INVALID_HANDLE));
    p.connect_evd_handle = conn_a;
    EXPECT_EQ(type_of(dat_ep_modify(ep, DAT_EP_FIELD_CONNECT_EVD_HANDLE, nullptr)), t(DAT_INVALID_PARAMETER));
    ASSERT_EQ(dat_ep_modify(ep, DAT_EP_FIELD_CONNECT_EVD_HANDLE, &p), kOk);
    EXPECT_EQ(state_of(ep), DAT_EP_STATE_UNCONNECTED);

    // Never modifiable, whatever the state.
    for (DAT_EP_PARAM_MASK never : {DAT_EP_FIELD_IA_HANDLE, DAT_EP_FIELD_EP_STATE, DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR,
                                    DAT_EP_FIELD_REMOTE_PORT_QUAL, DAT_EP_FIELD_LOCAL_PORT_QUAL, DAT_EP_FIELD_SRQ_HANDLE,
                                    DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW})
        EXPECT_EQ(type_of(dat_ep_modify(ep, never, &p)), t(DAT_INVALID_PARAMETER)) << never;

    // Attributes: checked, applied, queried back.
    ASSERT_EQ(dat_ep_query(ep, DAT_EP_FIELD_ALL, &p), kOk);
    p.ep_attr.max_recv_dtos = 7;
    p.ep_attr.max_request_iov = 3;
    ASSERT_EQ(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS | DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV, &p), kOk);
    DAT_EP_PARAM q{};
    ASSERT_EQ(dat_ep_query(ep, DAT_EP_FIELD_ALL, &q), kOk);
    EXPECT_EQ(q.ep_attr.max_recv_dtos, 7);
    EXPECT_EQ(q.ep_attr.max_request_iov, 3);
    EXPECT_EQ(q.connect_evd_handle, conn_a);
    const DAT_COUNT recv_iov_before = q.ep_attr.max_recv_iov;
    p.ep_attr.max_recv_iov = 1000;
    EXPECT_EQ(type_of(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV, &p)), t(DAT_INVALID_PARAMETER));
    const int bogus_service = 0x77; // as a C consumer might store it
    std::memcpy(&p.ep_attr.service_type, &bogus_service, sizeof bogus_service);
    EXPECT_EQ(type_of(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE, &p)), t(DAT_INVALID_PARAMETER));
    ASSERT_EQ(dat_ep_query(ep, DAT_EP_FIELD_ALL, &q), kOk);
    EXPECT_EQ(q.ep_attr.max_recv_iov, recv_iov_before); // a refused modify changes nothing
    EXPECT_EQ(q.ep_attr.service_type, DAT_SERVICE_TYPE_RC);

    // A receive posted: the queue shape is fixed now.
    DAT_LMR_TRIPLET r = piece(0, 64);
    ASSERT_EQ(dat_ep_post_recv(ep, 1, &r, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    p.ep_attr.max_recv_dtos = 9;
    EXPECT_EQ(type_of(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p)), t(DAT_INVALID_STATE));
    ASSERT_EQ(dat_ep_free(ep), kOk);

    // Connected: nothing may change.
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    ASSERT_EQ(dat_ep_query(a, DAT_EP_FIELD_ALL, &p), kOk);
    rc = dat_ep_modify(a, DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE, &p);
    EXPECT_EQ(type_of(rc), t(DAT_INVALID_STATE));
    EXPECT_EQ(DAT_GET_SUBTYPE(rc), DAT_INVALID_STATE_EP_CONNECTED);
}

TEST_F(Models, ModifiedEndpointMovesDataWithItsNewQueues)
{
    // A new recv EVD and depth before connecting: completions land there.
    DAT_EVD_HANDLE fresh;
    ASSERT_EQ(dat_evd_create(ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &fresh), kOk);
    DAT_EP_HANDLE a, b;
    a = make_ep(dto_a, conn_a);
    b = make_ep(dto_b, conn_b);
    DAT_EP_PARAM p{};
    p.recv_evd_handle = fresh;
    p.ep_attr.max_recv_dtos = 3;
    ASSERT_EQ(dat_ep_modify(b, DAT_EP_FIELD_RECV_EVD_HANDLE | DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &p), kOk);
    EXPECT_EQ(type_of(dat_evd_free(fresh)), t(DAT_INVALID_STATE)); // in use by b now
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
    ASSERT_EQ(dat_ep_connect(a, address, qual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG), kOk);
    DAT_EVENT e = next(cr_evd);
    ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, b, 0, nullptr), kOk);
    ASSERT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    ASSERT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    DAT_LMR_TRIPLET r = piece(4096, 128), s = piece(0, 100);
    ASSERT_EQ(dat_ep_post_recv(b, 1, &r, DAT_DTO_COOKIE{.as_64 = 5}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    ASSERT_EQ(dat_ep_post_send(a, 1, &s, DAT_DTO_COOKIE{.as_64 = 6}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    e = next(fresh);
    ASSERT_EQ(e.event_number, DAT_DTO_COMPLETION_EVENT);
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 5u);
    EXPECT_EQ(e.event_data.dto_completion_event_data.transfered_length, 100u);
    EXPECT_EQ(next(dto_a).event_data.dto_completion_event_data.user_cookie.as_64, 6u);
    ASSERT_EQ(dat_psp_free(psp), kOk);
}

TEST_F(Models, GracefulDisconnectCompletesRequestsThenDisconnectsBothSides)
{
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    constexpr int kSends = 8;
    for (int i = 0; i <= kSends; ++i) { // one receive more than sends: flushed at the end
        DAT_LMR_TRIPLET r = piece(32768 + static_cast<std::size_t>(i) * 1024, 1024);
        ASSERT_EQ(dat_ep_post_recv(b, 1, &r, DAT_DTO_COOKIE{.as_64 = static_cast<DAT_UINT64>(i)},
                                   DAT_COMPLETION_DEFAULT_FLAG),
                  kOk);
    }
    for (int i = 0; i < kSends; ++i) {
        DAT_LMR_TRIPLET s = piece(0, 1024);
        ASSERT_EQ(dat_ep_post_send(a, 1, &s, DAT_DTO_COOKIE{.as_64 = static_cast<DAT_UINT64>(i)},
                                   DAT_COMPLETION_DEFAULT_FLAG),
                  kOk);
    }
    ASSERT_EQ(dat_ep_disconnect(a, DAT_CLOSE_GRACEFUL_FLAG), kOk);
    const DAT_EP_STATE s = state_of(a);
    EXPECT_TRUE(s == DAT_EP_STATE_DISCONNECT_PENDING || s == DAT_EP_STATE_DISCONNECTED) << s;
    if (s == DAT_EP_STATE_DISCONNECT_PENDING) {
        DAT_LMR_TRIPLET extra = piece(0, 8);
        const DAT_RETURN rc = dat_ep_post_send(a, 1, &extra, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG);
        EXPECT_EQ(type_of(rc), t(DAT_INVALID_STATE));
        EXPECT_EQ(DAT_GET_SUBTYPE(rc), DAT_INVALID_STATE_EP_DISCPENDING);
        EXPECT_EQ(dat_ep_disconnect(a, DAT_CLOSE_GRACEFUL_FLAG), kOk); // no effect
    }
    for (int i = 0; i < kSends; ++i) {
        DAT_EVENT e = next(dto_a);
        ASSERT_EQ(e.event_number, DAT_DTO_COMPLETION_EVENT);
        EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS) << i;
        EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, static_cast<DAT_UINT64>(i));
    }
    for (int i = 0; i <= kSends; ++i) {
        DAT_EVENT e = next(dto_b);
        EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, static_cast<DAT_UINT64>(i));
        EXPECT_EQ(e.event_data.dto_completion_event_data.status, i < kSends ? DAT_DTO_SUCCESS : DAT_DTO_ERR_FLUSHED);
    }
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
    EXPECT_EQ(state_of(a), DAT_EP_STATE_DISCONNECTED);
    EXPECT_EQ(state_of(b), DAT_EP_STATE_DISCONNECTED);
    DAT_EVENT e;
    EXPECT_EQ(type_of(dat_evd_dequeue(conn_a, &e)), t(DAT_QUEUE_EMPTY)); // exactly one event per side
    EXPECT_EQ(type_of(dat_evd_dequeue(conn_b, &e)), t(DAT_QUEUE_EMPTY));
}

TEST_F(Models, DtoEvdOverflowIsReportedAndBreaksItsConnections)
{
    if (ia_is_verbs(ia))
        GTEST_SKIP() << "verbs IA: the CQ holds at least qlen completions (the device rounds up); overflow is "
                        "what the device reports (README, On verbs IAs)";
    // The receiver's DTO EVD holds 2 events; 4 receive completions arrive
    // without being reaped.
    DAT_EVD_HANDLE tiny;
    ASSERT_EQ(dat_evd_create(ia, 2, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &tiny), kOk);
    DAT_EP_HANDLE a = make_ep(dto_a, conn_a), b = make_ep(tiny, conn_b);
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
    ASSERT_EQ(dat_ep_connect(a, address, qual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG), kOk);
    DAT_EVENT e = next(cr_evd);
    ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, b, 0, nullptr), kOk);
    ASSERT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    ASSERT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    for (int i = 0; i < 4; ++i) {
        DAT_LMR_TRIPLET r = piece(4096 + static_cast<std::size_t>(i) * 64, 64);
        ASSERT_EQ(dat_ep_post_recv(b, 1, &r, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    }
    for (int i = 0; i < 4; ++i) {
        DAT_LMR_TRIPLET s = piece(0, 64);
        ASSERT_EQ(dat_ep_post_send(a, 1, &s, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    }
    e = next(async);
    EXPECT_EQ(e.event_number, DAT_ASYNC_ERROR_EVD_OVERFLOW);
    EXPECT_EQ(e.event_data.asynch_error_event_data.dat_handle, tiny);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_BROKEN);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_BROKEN);
    EXPECT_EQ(type_of(dat_evd_dequeue(async, &e)), t(DAT_QUEUE_EMPTY)); // reported once
    ASSERT_EQ(dat_psp_free(psp), kOk);
}

TEST_F(Models, UnsignalledOnlyWhereTheEndpointAllowsIt)
{
    DAT_EP_HANDLE a, b;
    connect_pair(a, b); // default completion flags
    DAT_LMR_TRIPLET s = piece(0, 8), r = piece(4096, 8);
    EXPECT_EQ(type_of(dat_ep_post_send(a, 1, &s, DAT_DTO_COOKIE{}, DAT_COMPLETION_UNSIGNALLED_FLAG)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_post_recv(b, 1, &r, DAT_DTO_COOKIE{}, DAT_COMPLETION_UNSIGNALLED_FLAG)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_post_recv(b, 1, &r, DAT_DTO_COOKIE{}, DAT_COMPLETION_SUPPRESS_FLAG)),
              t(DAT_INVALID_PARAMETER)); // suppress is for requests only

    // An EP set up for unsignalled requests takes the flag; the completion
    // is still an event (a non-notification one).
    DAT_EP_ATTR attr{};
    attr.service_type = DAT_SERVICE_TYPE_RC;
    attr.request_completion_flags = DAT_COMPLETION_UNSIGNALLED_FLAG;
    DAT_EP_HANDLE quiet = make_ep(dto_a, conn_a, &attr), peer = make_ep(dto_b, conn_b);
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
    ASSERT_EQ(dat_ep_connect(quiet, address, qual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              kOk);
    DAT_EVENT e = next(cr_evd);
    ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, peer, 0, nullptr), kOk);
    ASSERT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    ASSERT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    ASSERT_EQ(dat_ep_post_recv(peer, 1, &r, DAT_DTO_COOKIE{.as_64 = 1}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    // A threshold means nothing on an EVD fed by an unsignalled stream.
    DAT_COUNT nmore;
    EXPECT_EQ(type_of(dat_evd_wait(dto_a, 1000, 2, &e, &nmore)), t(DAT_INVALID_STATE));
    DAT_EVD_PARAM param{};
    ASSERT_EQ(dat_evd_query(dto_a, DAT_EVD_FIELD_ALL, &param), kOk);
    EXPECT_EQ(param.evd_state & DAT_EVD_STATE_CONFIG_THRESHOLD, DAT_EVD_STATE_CONFIG_NOTIFY);
    ASSERT_EQ(dat_evd_query(dto_b, DAT_EVD_FIELD_ALL, &param), kOk);
    EXPECT_EQ(param.evd_state & DAT_EVD_STATE_CONFIG_THRESHOLD, DAT_EVD_STATE_CONFIG_THRESHOLD);
    ASSERT_EQ(dat_ep_post_send(quiet, 1, &s, DAT_DTO_COOKIE{.as_64 = 2}, DAT_COMPLETION_UNSIGNALLED_FLAG), kOk);
    EXPECT_EQ(next(dto_b).event_data.dto_completion_event_data.user_cookie.as_64, 1u);
    e = next(dto_a);
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 2u);
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    ASSERT_EQ(dat_psp_free(psp), kOk);
}

// fastdapl-shm reaches only processes of this host: another host's address
// is unreachable at once (no request leaves the host), loopback and the
// IA's own address are reached.
TEST_F(Models, SharedMemoryIaReachesOnlyThisHost)
{
    if (provider_specific(ia, "FASTDAPL_DATA_PATH") != "softnic shm")
        GTEST_SKIP() << "fastdapl-shm only (FASTDAPL_TEST_IA=fastdapl-shm)";
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
    sockaddr_in elsewhere{};
    elsewhere.sin_family = AF_INET;
    inet_pton(AF_INET, "192.0.2.77", &elsewhere.sin_addr); // TEST-NET-1: never this host's
    DAT_EP_HANDLE a = make_ep(dto_a, conn_a);
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(dat_ep_connect(a, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&elsewhere), qual, kWait, 0, nullptr,
                             DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              kOk);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_UNREACHABLE);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)); // not after the refusal grace
    EXPECT_EQ(dat_ep_free(a), kOk);
    // The IA's own address reaches the PSP.
    DAT_EP_HANDLE b = make_ep(dto_b, conn_b);
    ASSERT_EQ(dat_ep_connect(b, address, qual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG), kOk);
    const DAT_EVENT request = next(cr_evd);
    ASSERT_EQ(request.event_number, DAT_CONNECTION_REQUEST_EVENT);
    ASSERT_EQ(dat_cr_reject(request.event_data.cr_arrival_event_data.cr_handle, 0, nullptr), kOk);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_PEER_REJECTED);
    EXPECT_EQ(dat_ep_free(b), kOk);
    ASSERT_EQ(dat_psp_free(psp), kOk);
}

TEST_F(Models, ConnectTimesOutThenTheLateAcceptFailsToComplete)
{
    DAT_EP_HANDLE a = make_ep(dto_a, conn_a), b = make_ep(dto_b, conn_b);
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
    DAT_LMR_TRIPLET r = piece(0, 64);
    ASSERT_EQ(dat_ep_post_recv(a, 1, &r, DAT_DTO_COOKIE{.as_64 = 3}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    ASSERT_EQ(dat_ep_connect(a, address, qual, 200000 /* 0.2 s */, 0, nullptr, DAT_QOS_BEST_EFFORT,
                             DAT_CONNECT_DEFAULT_FLAG),
              kOk);
    EXPECT_EQ(state_of(a), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    DAT_EVENT request = next(cr_evd); // arrives, but nobody answers in time
    ASSERT_EQ(request.event_number, DAT_CONNECTION_REQUEST_EVENT);
    DAT_EVENT e = next(conn_a);
    EXPECT_EQ(e.event_number, DAT_CONNECTION_EVENT_TIMED_OUT);
    EXPECT_EQ(state_of(a), DAT_EP_STATE_DISCONNECTED);
    e = next(dto_a); // the receive posted before is flushed
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_ERR_FLUSHED);
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 3u);
    // The late accept is taken, and then fails to complete (spec 6.4.5.3).
    ASSERT_EQ(dat_cr_accept(request.event_data.cr_arrival_event_data.cr_handle, b, 0, nullptr), kOk);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR);
    EXPECT_EQ(state_of(b), DAT_EP_STATE_DISCONNECTED);

    // Both EPs are reusable after a reset: connect them for real.
    ASSERT_EQ(dat_ep_reset(a), kOk);
    ASSERT_EQ(dat_ep_reset(b), kOk);
    EXPECT_EQ(state_of(a), DAT_EP_STATE_UNCONNECTED);
    ASSERT_EQ(dat_ep_connect(a, address, qual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG), kOk);
    request = next(cr_evd);
    ASSERT_EQ(dat_cr_accept(request.event_data.cr_arrival_event_data.cr_handle, b, 0, nullptr), kOk);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    DAT_LMR_TRIPLET s = piece(0, 16), into = piece(8192, 64);
    ASSERT_EQ(dat_ep_post_recv(b, 1, &into, DAT_DTO_COOKIE{.as_64 = 4}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    ASSERT_EQ(dat_ep_post_send(a, 1, &s, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    e = next(dto_b);
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(e.event_data.dto_completion_event_data.transfered_length, 16u);
    ASSERT_EQ(dat_psp_free(psp), kOk);
}

// --- the error returns of the endpoint, service point and CR calls ----------------

TEST_F(Models, EndpointCallsRefuseBadArguments)
{
    DAT_EP_HANDLE ep;
    DAT_EP_ATTR attr{};
    attr.service_type = DAT_SERVICE_TYPE_RC;
    attr.max_request_iov = 1000; // more than any EP can have
    EXPECT_EQ(type_of(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, &attr, &ep)), t(DAT_INVALID_PARAMETER));
    attr.max_request_iov = 0;
    attr.max_recv_dtos = -1;
    EXPECT_EQ(type_of(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, &attr, &ep)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_create(ia, pz, conn_a, dto_a, conn_a, nullptr, &ep)), t(DAT_INVALID_HANDLE)); // recv: no DTO stream
    EXPECT_EQ(type_of(dat_ep_create(ia, pz, dto_a, cr_evd, conn_a, nullptr, &ep)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_ep_create(ia, pz, dto_a, dto_a, dto_a, nullptr, &ep)), t(DAT_INVALID_HANDLE)); // no CONNECTION stream
    EXPECT_EQ(type_of(dat_ep_create(ia, dto_a, dto_a, dto_a, conn_a, nullptr, &ep)), t(DAT_INVALID_HANDLE)); // not a PZ
    EXPECT_EQ(type_of(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, nullptr, nullptr)), t(DAT_INVALID_PARAMETER));

    ep = make_ep(dto_a, conn_a);
    DAT_EP_PARAM param{};
    EXPECT_EQ(type_of(dat_ep_query(ep, DAT_EP_FIELD_ALL, nullptr)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_query(ep, ~DAT_EP_FIELD_ALL, &param)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_query(pz, DAT_EP_FIELD_ALL, &param)), t(DAT_INVALID_HANDLE));
    ASSERT_EQ(dat_ep_query(ep, DAT_EP_FIELD_ALL, &param), kOk);
    EXPECT_GT(param.ep_attr.max_recv_dtos, 0); // NULL attributes: the provider's defaults
    EXPECT_GT(param.ep_attr.max_message_size, 0u);
    DAT_EP_STATE state;
    DAT_BOOLEAN recv_idle = DAT_FALSE, request_idle = DAT_FALSE;
    ASSERT_EQ(dat_ep_get_status(ep, &state, &recv_idle, &request_idle), kOk);
    EXPECT_EQ(state, DAT_EP_STATE_UNCONNECTED);
    EXPECT_EQ(recv_idle, DAT_TRUE);
    EXPECT_EQ(request_idle, DAT_TRUE);
    DAT_LMR_TRIPLET r = piece(0, 64);
    ASSERT_EQ(dat_ep_post_recv(ep, 1, &r, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    ASSERT_EQ(dat_ep_get_status(ep, &state, &recv_idle, nullptr), kOk);
    EXPECT_EQ(recv_idle, DAT_FALSE);
    EXPECT_EQ(type_of(dat_ep_get_status(conn_a, &state, nullptr, nullptr)), t(DAT_INVALID_HANDLE));

    // Connect: the timeout, the private data, the address, the QoS.
    char big[1024] = {};
    EXPECT_EQ(type_of(dat_ep_connect(ep, address, 1, 0, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_connect(ep, address, 1, kWait, sizeof big, big, DAT_QOS_BEST_EFFORT,
                                     DAT_CONNECT_DEFAULT_FLAG)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_connect(ep, address, 1, kWait, 8, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_connect(ep, nullptr, 1, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG)),
              t(DAT_INVALID_ADDRESS));
    // An address of the other family than the IA's: no route between them.
    sockaddr_storage other{};
    other.ss_family = address->sa_family == AF_INET ? AF_INET6 : AF_INET;
    EXPECT_EQ(type_of(dat_ep_connect(ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&other), 1, kWait, 0, nullptr,
                                     DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG)),
              t(DAT_INVALID_ADDRESS));
    EXPECT_EQ(type_of(dat_ep_connect(ep, address, 1, kWait, 0, nullptr, static_cast<DAT_QOS>(0x40),
                                     DAT_CONNECT_DEFAULT_FLAG)),
              t(DAT_INVALID_PARAMETER)); // no such QoS
    EXPECT_EQ(type_of(dat_ep_connect(ep, address, 1, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT,
                                     DAT_CONNECT_MULTIPATH_REQUIRED_FLAG)),
              t(DAT_MODEL_NOT_SUPPORTED)); // one path only
    EXPECT_EQ(type_of(dat_ep_connect(ep, address, 1, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT,
                                     static_cast<DAT_CONNECT_FLAGS>(4))),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(state_of(ep), DAT_EP_STATE_UNCONNECTED); // none of that changed anything

    // Requests need a connection; disconnect and reset need something to end.
    DAT_LMR_TRIPLET s = piece(0, 8);
    DAT_RETURN rc = dat_ep_post_send(ep, 1, &s, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG);
    EXPECT_EQ(type_of(rc), t(DAT_INVALID_STATE));
    EXPECT_EQ(DAT_GET_SUBTYPE(rc), DAT_INVALID_STATE_EP_UNCONNECTED);
    DAT_RMR_TRIPLET remote{0x1000, 8, 1};
    EXPECT_EQ(type_of(dat_ep_post_rdma_write(ep, 1, &s, DAT_DTO_COOKIE{}, &remote, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_INVALID_STATE));
    EXPECT_EQ(type_of(dat_ep_post_rdma_read(ep, 1, &s, DAT_DTO_COOKIE{}, &remote, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_INVALID_STATE));
    EXPECT_EQ(type_of(dat_ep_disconnect(ep, DAT_CLOSE_ABRUPT_FLAG)), t(DAT_INVALID_STATE));
    DAT_CLOSE_FLAGS bogus_flags;
    const int seven = 7; // as a C consumer might pass it
    std::memcpy(&bogus_flags, &seven, sizeof seven);
    EXPECT_EQ(type_of(dat_ep_disconnect(ep, bogus_flags)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(dat_ep_reset(ep), kOk); // unconnected: nothing to do
    EXPECT_EQ(type_of(dat_ep_reset(pz)), t(DAT_INVALID_HANDLE));

    // Receives: too many segments, suppress, a NULL list.
    DAT_LMR_TRIPLET many[20];
    for (auto& m : many)
        m = piece(0, 8);
    EXPECT_EQ(type_of(dat_ep_post_recv(ep, 20, many, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_post_recv(ep, 2, nullptr, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_INVALID_PARAMETER));
    ASSERT_EQ(dat_ep_free(ep), kOk);
    EXPECT_EQ(type_of(dat_ep_free(ep)), t(DAT_INVALID_HANDLE)); // stale
    EXPECT_EQ(type_of(dat_ep_query(ep, DAT_EP_FIELD_ALL, &param)), t(DAT_INVALID_HANDLE));
}

TEST_F(Models, ConnectedEndpointPostingErrors)
{
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    DAT_EP_PARAM param{};
    ASSERT_EQ(dat_ep_query(a, DAT_EP_FIELD_ALL, &param), kOk);
    DAT_LMR_TRIPLET many[20];
    for (auto& m : many)
        m = piece(0, 8);
    const DAT_COUNT too_many = param.ep_attr.max_request_iov + 1;
    EXPECT_EQ(type_of(dat_ep_post_send(a, too_many, many, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_post_send(a, 1, many, DAT_DTO_COOKIE{}, DAT_COMPLETION_EVD_THRESHOLD_FLAG)),
              t(DAT_INVALID_PARAMETER)); // an EP attribute, not a posting flag
    EXPECT_EQ(type_of(dat_ep_post_rdma_write(a, 1, many, DAT_DTO_COOKIE{}, nullptr, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_INVALID_PARAMETER));
    // Longer than max_message_size, in segments that each fit.
    DAT_EP_PARAM small{};
    small.ep_attr.max_message_size = 100;
    EXPECT_EQ(type_of(dat_ep_modify(a, DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE, &small)), t(DAT_INVALID_STATE));
    DAT_EP_ATTR attr{};
    attr.service_type = DAT_SERVICE_TYPE_RC;
    attr.max_message_size = 100;
    DAT_EP_HANDLE limited = make_ep(dto_a, conn_a, &attr), peer = make_ep(dto_b, conn_b);
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
    ASSERT_EQ(dat_ep_connect(limited, address, qual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              kOk);
    DAT_EVENT e = next(cr_evd);
    ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, peer, 0, nullptr), kOk);
    ASSERT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    ASSERT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    DAT_LMR_TRIPLET two[2] = {piece(0, 60), piece(100, 60)};
    EXPECT_EQ(type_of(dat_ep_post_send(limited, 2, two, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_LENGTH_ERROR));
    // A bogus local key is caught by the (software) NIC: an error completion,
    // and the connection breaks. (Sends small enough to travel inline in the
    // WQE, 64 bytes here, are copied at post time with no key check, as on
    // mlx5 hardware: this one is larger.)
    DAT_LMR_TRIPLET bogus{reinterpret_cast<DAT_VADDR>(buffer.data()), 96, lmr_context ^ 0x5a5a00};
    ASSERT_EQ(dat_ep_post_send(limited, 1, &bogus, DAT_DTO_COOKIE{.as_64 = 12}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    e = next(dto_a);
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 12u);
    if (ia_is_verbs(ia)) // the device decides how it names a bad key (Soft-RoCE: a local QP operation error)
        EXPECT_TRUE(e.event_data.dto_completion_event_data.status == DAT_DTO_ERR_LOCAL_PROTECTION ||
                    e.event_data.dto_completion_event_data.status == DAT_DTO_ERR_LOCAL_EP);
    else
        EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_ERR_LOCAL_PROTECTION);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_BROKEN);
    // Posts in DISCONNECTED are taken and flushed at once.
    DAT_LMR_TRIPLET s = piece(0, 8);
    ASSERT_EQ(dat_ep_post_send(limited, 1, &s, DAT_DTO_COOKIE{.as_64 = 13}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    e = next(dto_a);
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 13u);
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_ERR_FLUSHED);
    EXPECT_EQ(dat_ep_disconnect(limited, DAT_CLOSE_ABRUPT_FLAG), kOk); // already disconnected: no event
    EXPECT_EQ(type_of(dat_evd_dequeue(conn_a, &e)), t(DAT_QUEUE_EMPTY));
    ASSERT_EQ(dat_psp_free(psp), kOk);
}

// A NULL attribute gives every segment the IA offers (the reference's
// dapltest -T T and -T P post 8 and 16), and those segments move data.
TEST_F(Models, DefaultAttributesTakeAsManySegmentsAsTheIaOffers)
{
    DAT_IA_ATTR ia_attr{};
    ASSERT_EQ(dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &ia_attr, 0, nullptr), kOk);
    const DAT_COUNT offered = std::min<DAT_COUNT>(ia_attr.max_iov_segments_per_dto, 16);
    EXPECT_GE(offered, 8);
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    DAT_EP_PARAM param{};
    ASSERT_EQ(dat_ep_query(a, DAT_EP_FIELD_ALL, &param), kOk);
    EXPECT_EQ(param.ep_attr.max_request_iov, offered);
    EXPECT_EQ(param.ep_attr.max_recv_iov, offered);
    EXPECT_EQ(param.ep_attr.max_rdma_write_iov, std::min<DAT_COUNT>(ia_attr.max_iov_segments_per_rdma_write, 16));
    EXPECT_EQ(param.ep_attr.max_rdma_read_iov, std::min<DAT_COUNT>(ia_attr.max_iov_segments_per_rdma_read, 16));
    EXPECT_GE(param.ep_attr.max_request_dtos, 64);
    EXPECT_LE(param.ep_attr.max_request_dtos, ia_attr.max_dto_per_ep);

    // `offered` receive segments of 100 bytes at 4096 + 128 i, one send
    // gathered from `offered` segments of 100 bytes at 128 i.
    std::vector<DAT_LMR_TRIPLET> recv(offered), send(offered);
    for (DAT_COUNT i = 0; i < offered; ++i) {
        recv[i] = piece(4096 + 128 * i, 100);
        send[i] = piece(128 * i, 100);
        std::memset(buffer.data() + 128 * i, 'a' + i, 100);
    }
    ASSERT_EQ(dat_ep_post_recv(b, offered, recv.data(), DAT_DTO_COOKIE{.as_64 = 1}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    ASSERT_EQ(dat_ep_post_send(a, offered, send.data(), DAT_DTO_COOKIE{.as_64 = 2}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_EVENT e = next(dto_a);
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    e = next(dto_b);
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(e.event_data.dto_completion_event_data.transfered_length, static_cast<DAT_COUNT>(100 * offered));
    for (DAT_COUNT i = 0; i < offered; ++i)
        EXPECT_EQ(std::string(buffer.data() + 4096 + 128 * i, 100), std::string(100, static_cast<char>('a' + i)))
            << "segment " << i;

    // More segments than the IA offers are refused at create.
    DAT_EP_ATTR attr{};
    attr.service_type = DAT_SERVICE_TYPE_RC;
    attr.max_request_iov = ia_attr.max_iov_segments_per_dto + 1;
    DAT_EP_HANDLE refused;
    EXPECT_EQ(type_of(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, &attr, &refused)), t(DAT_INVALID_PARAMETER));
}

// 64-bit connection qualifiers (dapltest -T L uses 0xaffab1e and up): a
// qualifier listens on its lowest non-zero 16 bits as a port. On the socket
// CM qualifiers that share a port share its socket; rdma_cm carries no
// qualifier, so there they exclude each other (CONN_QUAL_IN_USE).
TEST_F(Models, SixtyFourBitQualifiers)
{
    DAT_CONN_QUAL low = 0;
    DAT_PSP_HANDLE any, wide, wider, taken;
    ASSERT_EQ(dat_psp_create_any(ia, &low, cr_evd, DAT_PSP_CONSUMER_FLAG, &any), kOk);
    const DAT_CONN_QUAL wide_qual = low | 0xaffa0000ull, wider_qual = low | 0x1234ull << 48;
    const bool shares = !ia_is_verbs(ia);
    if (!shares) {
        EXPECT_EQ(type_of(dat_psp_create(ia, wide_qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &wide)),
                  t(DAT_CONN_QUAL_IN_USE));
        ASSERT_EQ(dat_psp_free(any), kOk);
    }
    ASSERT_EQ(dat_psp_create(ia, wide_qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &wide), kOk);
    if (shares) {
        ASSERT_EQ(dat_psp_create(ia, wider_qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &wider), kOk);
    }
    EXPECT_EQ(type_of(dat_psp_create(ia, wide_qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &taken)), t(DAT_CONN_QUAL_IN_USE));
    DAT_PSP_PARAM pp{};
    ASSERT_EQ(dat_psp_query(wide, DAT_PSP_FIELD_ALL, &pp), kOk);
    EXPECT_EQ(pp.conn_qual, wide_qual);

    const auto connect_to = [&](DAT_CONN_QUAL qual) {
        DAT_EP_HANDLE a = make_ep(dto_a, conn_a), b = make_ep(dto_b, conn_b);
        ASSERT_EQ(dat_ep_connect(a, address, qual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
                  kOk);
        DAT_EVENT e = next(cr_evd);
        ASSERT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
        EXPECT_EQ(e.event_data.cr_arrival_event_data.conn_qual, qual);
        DAT_CR_HANDLE cr = e.event_data.cr_arrival_event_data.cr_handle;
        DAT_CR_PARAM crp{};
        ASSERT_EQ(dat_cr_query(cr, DAT_CR_FIELD_ALL, &crp), kOk);
        EXPECT_EQ(e.event_data.cr_arrival_event_data.sp_handle.psp_handle, qual == wide_qual ? wide : wider);
        ASSERT_EQ(dat_cr_accept(cr, b, 0, nullptr), kOk);
        EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
        EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
        DAT_EP_PARAM ep{};
        ASSERT_EQ(dat_ep_query(a, DAT_EP_FIELD_ALL, &ep), kOk);
        EXPECT_EQ(ep.remote_port_qual, qual);
        ASSERT_EQ(dat_ep_disconnect(a, DAT_CLOSE_ABRUPT_FLAG), kOk);
        EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
        EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
        EXPECT_EQ(dat_ep_free(a), kOk);
        EXPECT_EQ(dat_ep_free(b), kOk);
    };
    connect_to(wide_qual);
    if (shares) {
        connect_to(wider_qual);
        // A qualifier nobody listens for, on that port: refused.
        DAT_EP_HANDLE a = make_ep(dto_a, conn_a);
        ASSERT_EQ(dat_ep_connect(a, address, low | 0x77ull << 32, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT,
                                 DAT_CONNECT_DEFAULT_FLAG),
                  kOk);
        EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
        EXPECT_EQ(dat_ep_free(a), kOk);
        ASSERT_EQ(dat_psp_free(wider), kOk);
        ASSERT_EQ(dat_psp_free(any), kOk);
    }
    ASSERT_EQ(dat_psp_free(wide), kOk);
    // 0 names no port.
    DAT_EP_HANDLE a = make_ep(dto_a, conn_a);
    EXPECT_EQ(type_of(dat_ep_connect(a, address, 0, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(dat_ep_free(a), kOk);
}

// Every QoS the spec defines is taken (none changes how a connection is
// carried, README), and a request for several paths connects on one.
TEST_F(Models, QosValuesAndMultipathRequestsConnect)
{
    DAT_PROVIDER_ATTR p{};
    ASSERT_EQ(dat_ia_query(ia, nullptr, 0, nullptr, DAT_PROVIDER_FIELD_ALL, &p), kOk);
    EXPECT_EQ(p.dat_qos_supported, DAT_QOS_BEST_EFFORT | DAT_QOS_HIGH_THROUGHPUT | DAT_QOS_LOW_LATENCY |
                                       DAT_QOS_ECONOMY | DAT_QOS_PREMIUM);
    DAT_EP_ATTR attr{};
    attr.service_type = DAT_SERVICE_TYPE_RC;
    attr.qos = DAT_QOS_PREMIUM;
    DAT_EP_HANDLE a = make_ep(dto_a, conn_a, &attr), b = make_ep(dto_b, conn_b);
    attr.qos = static_cast<DAT_QOS>(0x40);
    DAT_EP_HANDLE refused;
    EXPECT_EQ(type_of(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, &attr, &refused)), t(DAT_INVALID_PARAMETER));
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
    ASSERT_EQ(dat_ep_connect(a, address, qual, kWait, 0, nullptr,
                             static_cast<DAT_QOS>(DAT_QOS_HIGH_THROUGHPUT | DAT_QOS_LOW_LATENCY),
                             DAT_CONNECT_MULTIPATH_REQUESTED_FLAG),
              kOk);
    DAT_EVENT e = next(cr_evd);
    ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, b, 0, nullptr), kOk);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    DAT_EP_PARAM param{};
    ASSERT_EQ(dat_ep_query(a, DAT_EP_FIELD_ALL, &param), kOk);
    EXPECT_EQ(param.ep_attr.qos, DAT_QOS_PREMIUM);
    ASSERT_EQ(dat_psp_free(psp), kOk);
}

// dat_ep_dup_connect asks the service point a connected EP asked; a CR
// handed off reaches another service point of the IA as a new CR.
TEST_F(Models, DupConnectAndCrHandoff)
{
    DAT_CONN_QUAL qual = 0, other_qual = 0;
    DAT_PSP_HANDLE psp, other;
    DAT_EVD_HANDLE other_evd;
    ASSERT_EQ(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &other_evd), kOk);
    ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
    ASSERT_EQ(dat_psp_create_any(ia, &other_qual, other_evd, DAT_PSP_CONSUMER_FLAG, &other), kOk);
    DAT_EP_HANDLE a = make_ep(dto_a, conn_a), b = make_ep(dto_b, conn_b);
    DAT_EP_HANDLE c = make_ep(dto_a, conn_a), d = make_ep(dto_b, conn_b);
    EXPECT_EQ(type_of(dat_ep_dup_connect(c, a, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT)), t(DAT_INVALID_STATE));
    EXPECT_EQ(type_of(dat_ep_dup_connect(c, pz, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT)), t(DAT_INVALID_HANDLE));
    ASSERT_EQ(dat_ep_connect(a, address, qual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              kOk);
    DAT_EVENT e = next(cr_evd);
    DAT_CR_HANDLE cr = e.event_data.cr_arrival_event_data.cr_handle;
    // Handed off to a qualifier nobody listens on: refused, the CR stays.
    EXPECT_EQ(type_of(dat_cr_handoff(cr, other_qual + 1)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_cr_handoff(pz, other_qual)), t(DAT_INVALID_HANDLE));
    ASSERT_EQ(dat_cr_handoff(cr, other_qual), kOk);
    EXPECT_EQ(type_of(dat_cr_accept(cr, b, 0, nullptr)), t(DAT_INVALID_HANDLE)); // consumed
    e = next(other_evd);
    ASSERT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
    EXPECT_EQ(e.event_data.cr_arrival_event_data.sp_handle.psp_handle, other);
    EXPECT_EQ(e.event_data.cr_arrival_event_data.conn_qual, other_qual);
    ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, b, 0, nullptr), kOk);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);

    // The passive side's remote end is no service point; the active side's is.
    EXPECT_EQ(type_of(dat_ep_dup_connect(c, b, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT)), t(DAT_INVALID_PARAMETER));
    const char hello[] = "again";
    ASSERT_EQ(dat_ep_dup_connect(c, a, kWait, sizeof hello, const_cast<char*>(hello), DAT_QOS_BEST_EFFORT), kOk);
    e = next(cr_evd);
    ASSERT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
    EXPECT_EQ(e.event_data.cr_arrival_event_data.sp_handle.psp_handle, psp);
    DAT_CR_PARAM crp{};
    ASSERT_EQ(dat_cr_query(e.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL, &crp), kOk);
    if (ia_is_verbs(ia)) { // the whole field the transport carries
        ASSERT_GE(crp.private_data_size, static_cast<DAT_COUNT>(sizeof hello));
    } else {
        ASSERT_EQ(crp.private_data_size, static_cast<DAT_COUNT>(sizeof hello));
    }
    EXPECT_EQ(std::memcmp(crp.private_data, hello, sizeof hello), 0);
    ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, d, 0, nullptr), kOk);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    DAT_EP_PARAM param{};
    ASSERT_EQ(dat_ep_query(c, DAT_EP_FIELD_ALL, &param), kOk);
    EXPECT_EQ(param.remote_port_qual, qual);
    ASSERT_EQ(dat_psp_free(psp), kOk);
    ASSERT_EQ(dat_psp_free(other), kOk);
}

// High availability: connections never move between IAs here, so two
// different IAs are not related (and an IA is related to itself).
TEST_F(Models, DifferentIasAreNotHaRelated)
{
    DAT_IA_HANDLE second;
    DAT_EVD_HANDLE second_async = DAT_HANDLE_NULL; // NULL: the IA makes its own
    ASSERT_EQ(dat_ia_open(const_cast<char*>("fastdapl-tcp-b"), 8, &second_async, &second), kOk);
    DAT_HA_RELATIONSHIP rel = DAT_HA_UNKNOWN;
    ASSERT_EQ(dat_registry_providers_related(test_ia_name(), const_cast<char*>("fastdapl-tcp-b"), &rel), kOk);
    EXPECT_EQ(rel, DAT_HA_FALSE);
    ASSERT_EQ(dat_registry_providers_related(test_ia_name(), test_ia_name(), &rel), kOk);
    EXPECT_EQ(rel, DAT_HA_TRUE);
    EXPECT_EQ(dat_ia_close(second, DAT_CLOSE_ABRUPT_FLAG), kOk);
}

// A CSP listens on a socket address (the port is its qualifier);
// dat_ep_common_connect connects to one by address alone.
TEST_F(Models, CommonServicePointAndCommonConnect)
{
    DAT_CONN_QUAL free_port = 0;
    DAT_PSP_HANDLE probe;
    ASSERT_EQ(dat_psp_create_any(ia, &free_port, cr_evd, DAT_PSP_CONSUMER_FLAG, &probe), kOk);
    ASSERT_EQ(dat_psp_free(probe), kOk);
    sockaddr_storage where{};
    std::memcpy(&where, address, address->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    const auto set_port = [](sockaddr_storage& a, DAT_CONN_QUAL port) {
        if (a.ss_family == AF_INET6)
            reinterpret_cast<sockaddr_in6&>(a).sin6_port = htons(static_cast<std::uint16_t>(port));
        else
            reinterpret_cast<sockaddr_in&>(a).sin_port = htons(static_cast<std::uint16_t>(port));
    };
    auto* at = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&where);
    DAT_COMM comm{where.ss_family, SOCK_STREAM, 0};
    DAT_CSP_HANDLE csp;
    set_port(where, 0);
    EXPECT_EQ(type_of(dat_csp_create(ia, &comm, at, cr_evd, &csp)), t(DAT_INVALID_PARAMETER)); // no port
    set_port(where, free_port);
    DAT_COMM datagram{where.ss_family, SOCK_DGRAM, 0};
    EXPECT_EQ(type_of(dat_csp_create(ia, &datagram, at, cr_evd, &csp)), t(DAT_MODEL_NOT_SUPPORTED));
    EXPECT_EQ(type_of(dat_csp_create(ia, nullptr, at, cr_evd, &csp)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_csp_create(ia, &comm, nullptr, cr_evd, &csp)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_csp_create(ia, &comm, at, conn_a, &csp)), t(DAT_INVALID_HANDLE));
    if (where.ss_family == AF_INET) { // an address that is not the IA's
        sockaddr_in elsewhere{};
        elsewhere.sin_family = AF_INET;
        elsewhere.sin_addr.s_addr = htonl(0x0a090909);
        elsewhere.sin_port = htons(static_cast<std::uint16_t>(free_port));
        EXPECT_EQ(type_of(dat_csp_create(ia, &comm, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&elsewhere), cr_evd, &csp)),
                  t(DAT_INVALID_ADDRESS));
    }
    ASSERT_EQ(dat_csp_create(ia, &comm, at, cr_evd, &csp), kOk);
    DAT_HANDLE_TYPE type;
    ASSERT_EQ(dat_get_handle_type(csp, &type), kOk);
    EXPECT_EQ(type, DAT_HANDLE_TYPE_CSP);
    DAT_CSP_PARAM param{};
    ASSERT_EQ(dat_csp_query(csp, DAT_CSP_FIELD_ALL, &param), kOk);
    EXPECT_EQ(param.evd_handle, cr_evd);
    ASSERT_NE(param.comm, nullptr);
    EXPECT_EQ(param.comm->type, SOCK_STREAM);
    EXPECT_EQ(std::memcmp(param.address_ptr, &where, sizeof(sockaddr_in)), 0);
    EXPECT_EQ(type_of(dat_csp_query(csp, DAT_CSP_FIELD_ALL, nullptr)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_psp_free(csp)), t(DAT_INVALID_HANDLE)); // a CSP is not a PSP
    DAT_CSP_HANDLE again;
    EXPECT_EQ(type_of(dat_csp_create(ia, &comm, at, cr_evd, &again)), t(DAT_CONN_QUAL_IN_USE));

    DAT_EP_HANDLE a = make_ep(dto_a, conn_a), b = make_ep(dto_b, conn_b);
    sockaddr_storage no_port = where;
    set_port(no_port, 0);
    EXPECT_EQ(type_of(dat_ep_common_connect(a, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&no_port), kWait, 0, nullptr)),
              t(DAT_INVALID_ADDRESS));
    ASSERT_EQ(dat_ep_common_connect(a, at, kWait, 0, nullptr), kOk);
    DAT_EVENT e = next(cr_evd);
    ASSERT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
    EXPECT_EQ(e.event_data.cr_arrival_event_data.sp_handle.csp_handle, csp);
    ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, b, 0, nullptr), kOk);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    EXPECT_EQ(type_of(dat_evd_free(cr_evd)), t(DAT_INVALID_STATE)); // the CSP reports there
    ASSERT_EQ(dat_csp_free(csp), kOk);
    EXPECT_EQ(type_of(dat_csp_free(csp)), t(DAT_INVALID_HANDLE));
}

TEST_F(Models, ServicePointAndRequestErrors)
{
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp, second;
    EXPECT_EQ(type_of(dat_psp_create_any(ia, &qual, conn_a, DAT_PSP_CONSUMER_FLAG, &psp)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_psp_create_any(ia, nullptr, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_psp_create_any(ia, &qual, cr_evd, static_cast<DAT_PSP_FLAGS>(7), &psp)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_psp_create(ia, 0, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp)), t(DAT_INVALID_PARAMETER));
    ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
    EXPECT_EQ(type_of(dat_psp_create(ia, qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &second)), t(DAT_CONN_QUAL_IN_USE));
    DAT_PSP_PARAM pp{};
    ASSERT_EQ(dat_psp_query(psp, DAT_PSP_FIELD_ALL, &pp), kOk);
    EXPECT_EQ(pp.conn_qual, qual);
    EXPECT_EQ(pp.evd_handle, cr_evd);
    EXPECT_EQ(pp.psp_flags, DAT_PSP_CONSUMER_FLAG);
    EXPECT_EQ(type_of(dat_psp_query(psp, DAT_PSP_FIELD_ALL, nullptr)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_psp_query(cr_evd, DAT_PSP_FIELD_ALL, &pp)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_evd_free(cr_evd)), t(DAT_INVALID_STATE)); // the PSP reports there

    DAT_EP_HANDLE a = make_ep(dto_a, conn_a), b = make_ep(dto_b, conn_b);
    const std::vector<char> pdata(std::min<DAT_COUNT>(64, max_private_data(ia)), 'q');
    ASSERT_EQ(dat_ep_connect(a, address, qual, kWait, static_cast<DAT_COUNT>(pdata.size()),
                             const_cast<char*>(pdata.data()), DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              kOk);
    DAT_EVENT e = next(cr_evd);
    DAT_CR_HANDLE cr = e.event_data.cr_arrival_event_data.cr_handle;
    EXPECT_EQ(e.event_data.cr_arrival_event_data.conn_qual, qual);
    DAT_CR_PARAM crp{};
    ASSERT_EQ(dat_cr_query(cr, DAT_CR_FIELD_ALL, &crp), kOk);
    // A verbs IA hands over the whole field the transport carries (it
    // carries no length): at least what was sent, which comes first.
    if (ia_is_verbs(ia))
        ASSERT_GE(crp.private_data_size, static_cast<DAT_COUNT>(pdata.size()));
    else
        ASSERT_EQ(crp.private_data_size, static_cast<DAT_COUNT>(pdata.size()));
    EXPECT_EQ(std::memcmp(crp.private_data, pdata.data(), pdata.size()), 0);
    EXPECT_EQ(type_of(dat_cr_query(cr, DAT_CR_FIELD_ALL, nullptr)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_cr_accept(cr, DAT_HANDLE_NULL, 0, nullptr)), t(DAT_INVALID_PARAMETER)); // no EP of ours
    EXPECT_EQ(type_of(dat_cr_accept(cr, b, -1, nullptr)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_cr_accept(cr, pz, 0, nullptr)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_cr_reject(cr, 8, nullptr)), t(DAT_INVALID_PARAMETER));
    // After all that the request is still good: reject it with data.
    const std::vector<char> why(std::min<DAT_COUNT>(80, max_private_data(ia)), 'n');
    ASSERT_EQ(dat_cr_reject(cr, static_cast<DAT_COUNT>(why.size()), const_cast<char*>(why.data())), kOk);
    e = next(conn_a);
    EXPECT_EQ(e.event_number, DAT_CONNECTION_EVENT_PEER_REJECTED);
    EXPECT_EQ(type_of(dat_cr_accept(cr, b, 0, nullptr)), t(DAT_INVALID_HANDLE)); // consumed
    ASSERT_EQ(dat_psp_free(psp), kOk);
    EXPECT_EQ(type_of(dat_psp_free(psp)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(dat_evd_free(cr_evd), kOk);
}

TEST_F(Models, ResizedDtoEvdKeepsPendingCompletionsAndTakesMore)
{
    DAT_EVD_HANDLE small;
    ASSERT_EQ(dat_evd_create(ia, 2, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &small), kOk);
    DAT_EP_HANDLE a = make_ep(dto_a, conn_a), b = make_ep(small, conn_b);
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
    ASSERT_EQ(dat_ep_connect(a, address, qual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG), kOk);
    DAT_EVENT e = next(cr_evd);
    ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, b, 0, nullptr), kOk);
    ASSERT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    ASSERT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    auto exchange = [&](int first, int count) {
        for (int i = first; i < first + count; ++i) {
            DAT_LMR_TRIPLET r = piece(4096 + static_cast<std::size_t>(i) * 64, 64);
            ASSERT_EQ(dat_ep_post_recv(b, 1, &r, DAT_DTO_COOKIE{.as_64 = static_cast<DAT_UINT64>(i)},
                                       DAT_COMPLETION_DEFAULT_FLAG),
                      kOk);
        }
        for (int i = first; i < first + count; ++i) {
            DAT_LMR_TRIPLET s = piece(0, 64);
            ASSERT_EQ(dat_ep_post_send(a, 1, &s, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
            ASSERT_EQ(next(dto_a).event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
        }
    };
    exchange(0, 2); // the small EVD is full now, nothing reaped
    EXPECT_EQ(type_of(dat_evd_resize(small, 1)), t(DAT_INVALID_STATE)); // two are waiting
    DAT_EVD_PARAM param{};
    if (ia_is_mlx5_direct(ia)) {
        // A hand-polled CQ keeps its ring (docs/architecture.md, mlx5 direct
        // path): growing past it is refused, and nothing is lost.
        EXPECT_EQ(type_of(dat_evd_resize(small, 64)), t(DAT_INSUFFICIENT_RESOURCES));
        ASSERT_EQ(dat_evd_query(small, DAT_EVD_FIELD_ALL, &param), kOk);
        EXPECT_EQ(param.evd_qlen, 2);
        for (int i = 0; i < 2; ++i)
            EXPECT_EQ(next(small).event_data.dto_completion_event_data.user_cookie.as_64, static_cast<DAT_UINT64>(i));
        exchange(2, 2); // still taking completions
        for (int i = 2; i < 4; ++i)
            EXPECT_EQ(next(small).event_data.dto_completion_event_data.user_cookie.as_64, static_cast<DAT_UINT64>(i));
        ASSERT_EQ(dat_psp_free(psp), kOk);
        return;
    }
    ASSERT_EQ(dat_evd_resize(small, 16), kOk);
    ASSERT_EQ(dat_evd_query(small, DAT_EVD_FIELD_ALL, &param), kOk);
    EXPECT_EQ(param.evd_qlen, 16);
    exchange(2, 6); // eight in all: more than the old size, no overflow
    for (int i = 0; i < 8; ++i) {
        e = next(small);
        EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, static_cast<DAT_UINT64>(i));
        EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    }
    EXPECT_EQ(type_of(dat_evd_dequeue(async, &e)), t(DAT_QUEUE_EMPTY)); // no overflow report
    EXPECT_EQ(state_of(b), DAT_EP_STATE_CONNECTED);
    ASSERT_EQ(dat_psp_free(psp), kOk);
}

} // namespace
