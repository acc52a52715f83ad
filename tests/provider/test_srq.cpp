// libfastdapl's shared receive queues through the public DAT API: every
// SRQ call and its errors, the counts of the man pages, watermarks, resize,
// and 100 connections sharing one SRQ, on one IA over loopback.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "connect_through_psp.hpp"

#include <dat2/udat.h>

#include "test_ia.hpp"
#include <dat2/fastdapl.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <vector>

namespace {

constexpr DAT_RETURN kOk = DAT_SUCCESS;
constexpr DAT_TIMEOUT kWait = 5000000; // 5 s, in µs
DAT_RETURN type_of(DAT_RETURN rc) { return DAT_GET_TYPE(rc); }
DAT_RETURN t(DAT_RETURN type) { return type; }
DAT_RETURN_SUBTYPE subtype_of(DAT_RETURN rc) { return static_cast<DAT_RETURN_SUBTYPE>(DAT_GET_SUBTYPE(rc)); }

// A message: which connection sent it, and its number on that connection.
struct Message {
    std::uint32_t connection;
    std::uint32_t sequence;
};

class Srq : public ::testing::Test {
protected:
    static constexpr std::size_t kRecvSlot = 64;          // bytes per receive buffer
    static constexpr std::size_t kSendArea = 1 << 20;     // sends come from the upper half
    void SetUp() override
    {
        ASSERT_EQ(dat_ia_open(test_ia_name(), 16, &async, &ia), kOk);
        ASSERT_EQ(dat_pz_create(ia, &pz), kOk);
        ASSERT_EQ(dat_evd_create(ia, 4096, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto_a), kOk);
        ASSERT_EQ(dat_evd_create(ia, 1024, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto_b), kOk);
        for (DAT_EVD_HANDLE* evd : {&conn_a, &conn_b})
            ASSERT_EQ(dat_evd_create(ia, 512, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, evd), kOk);
        ASSERT_EQ(dat_evd_create(ia, 512, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd), kOk);
        DAT_IA_ATTR attr{};
        ASSERT_EQ(dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &attr, 0, nullptr), kOk);
        address = attr.ia_address_ptr;
        buffer.assign(2 * kSendArea, 0);
        lmr_context = register_buffer(pz, &lmr);
    }
    void TearDown() override
    {
        if (ia) {
            EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), kOk); // SRQs and their EPs with it
        }
    }
    DAT_LMR_CONTEXT register_buffer(DAT_PZ_HANDLE in, DAT_LMR_HANDLE* out)
    {
        DAT_REGION_DESCRIPTION region{};
        region.for_va = buffer.data();
        DAT_LMR_CONTEXT context = 0;
        DAT_RMR_CONTEXT rmr;
        DAT_VLEN size;
        DAT_VADDR va;
        EXPECT_EQ(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, buffer.size(), in, DAT_MEM_PRIV_ALL_FLAG,
                                 DAT_VA_TYPE_VA, out, &context, &rmr, &size, &va),
                  kOk);
        return context;
    }
    DAT_SRQ_HANDLE make_srq(DAT_COUNT max_recv, DAT_COUNT max_iov = 1)
    {
        DAT_SRQ_ATTR attr{max_recv, max_iov, DAT_SRQ_LW_DEFAULT};
        DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
        EXPECT_EQ(dat_srq_create(ia, pz, &attr, &srq), kOk);
        return srq;
    }
    DAT_EP_ATTR srq_attr(DAT_COUNT hard = 0, DAT_COUNT soft = 0)
    {
        DAT_EP_ATTR a{};
        a.service_type = DAT_SERVICE_TYPE_RC;
        a.max_recv_dtos = hard;
        a.max_request_dtos = 16;
        a.max_request_iov = 1;
        a.srq_soft_hw = soft;
        return a;
    }
    // Receive buffer `slot` of the lower half, its number as the cookie.
    DAT_RETURN post(DAT_SRQ_HANDLE srq, std::uint64_t slot, DAT_LMR_CONTEXT context = 0)
    {
        DAT_LMR_TRIPLET iov{reinterpret_cast<DAT_VADDR>(buffer.data() + slot * kRecvSlot), kRecvSlot,
                            context ? context : lmr_context};
        DAT_DTO_COOKIE cookie;
        cookie.as_64 = slot;
        return dat_srq_post_recv(srq, 1, &iov, cookie);
    }
    // Sends `m` from its own slot of the upper half (intact until completion).
    void send(DAT_EP_HANDLE ep, Message m, std::size_t send_slot)
    {
        char* at = buffer.data() + kSendArea + send_slot * sizeof(Message);
        std::memcpy(at, &m, sizeof m);
        DAT_LMR_TRIPLET iov{reinterpret_cast<DAT_VADDR>(at), sizeof m, lmr_context};
        DAT_DTO_COOKIE cookie;
        cookie.as_64 = send_slot;
        ASSERT_EQ(dat_ep_post_send(ep, 1, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    }
    Message received(std::uint64_t slot) const
    {
        Message m;
        std::memcpy(&m, buffer.data() + slot * kRecvSlot, sizeof m);
        return m;
    }
    DAT_EVENT next(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout = kWait)
    {
        DAT_EVENT e{};
        DAT_COUNT nmore;
        EXPECT_EQ(dat_evd_wait(evd, timeout, 1, &e, &nmore), kOk);
        return e;
    }
    DAT_DTO_COMPLETION_EVENT_DATA completion(DAT_EVD_HANDLE evd)
    {
        DAT_EVENT e = next(evd);
        EXPECT_EQ(e.event_number, DAT_DTO_COMPLETION_EVENT);
        return e.event_data.dto_completion_event_data;
    }
    bool async_empty()
    {
        DAT_EVENT e;
        return type_of(dat_evd_dequeue(async, &e)) == t(DAT_QUEUE_EMPTY);
    }
    void expect_watermark_event(DAT_HANDLE about, DAT_COUNT reason)
    {
        DAT_EVENT e = next(async);
        EXPECT_EQ(e.event_number, static_cast<DAT_EVENT_NUMBER>(FASTDAPL_ASYNC_WATERMARK_EVENT));
        EXPECT_EQ(e.event_data.asynch_error_event_data.dat_handle, about);
        EXPECT_EQ(e.event_data.asynch_error_event_data.reason, reason);
    }
    DAT_SRQ_PARAM query(DAT_SRQ_HANDLE srq)
    {
        DAT_SRQ_PARAM p{};
        EXPECT_EQ(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &p), kOk);
        return p;
    }
    // Waits until `done` holds (the software NIC works on its own thread).
    static bool eventually(const std::function<bool()>& done)
    {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!done()) {
            if (std::chrono::steady_clock::now() > deadline)
                return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return true;
    }
    // `active` (own receive queue, events on dto_a/conn_a) connected to an
    // endpoint on `srq` (dto_b/conn_b).
    void connect_pair(DAT_SRQ_HANDLE srq, DAT_EP_HANDLE& active, DAT_EP_HANDLE& passive,
                      const DAT_EP_ATTR& passive_attr)
    {
        ASSERT_EQ(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, nullptr, &active), kOk);
        ASSERT_EQ(dat_ep_create_with_srq(ia, pz, dto_b, dto_b, conn_b, srq, &passive_attr, &passive), kOk);
        accept_into(active, passive);
    }
    void accept_into(DAT_EP_HANDLE active, DAT_EP_HANDLE passive)
    {
        fastdapl_test::connect_through_psp(ia, address, cr_evd, active, conn_a, passive, conn_b);
    }

    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE dto_a, dto_b, conn_a, conn_b, cr_evd;
    DAT_IA_ADDRESS_PTR address = nullptr;
    std::vector<char> buffer;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lmr_context = 0;
};

TEST_F(Srq, CreateQueryAndFreeWithTheirErrors)
{
    DAT_SRQ_ATTR attr{10, 2, DAT_SRQ_LW_DEFAULT};
    DAT_SRQ_HANDLE srq;
    EXPECT_EQ(type_of(dat_srq_create(ia, DAT_HANDLE_NULL, &attr, &srq)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_srq_create(ia, pz, nullptr, &srq)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_srq_create(ia, pz, &attr, nullptr)), t(DAT_INVALID_PARAMETER));
    for (DAT_SRQ_ATTR bad : {DAT_SRQ_ATTR{0, 1, 0}, DAT_SRQ_ATTR{-1, 1, 0}, DAT_SRQ_ATTR{10, 0, 0},
                             DAT_SRQ_ATTR{10, 1, 3}}) // a low watermark at creation is refused
        EXPECT_EQ(type_of(dat_srq_create(ia, pz, &bad, &srq)), t(DAT_INVALID_PARAMETER));
    DAT_SRQ_ATTR huge{1 << 20, 1, 0};
    EXPECT_EQ(type_of(dat_srq_create(ia, pz, &huge, &srq)), t(DAT_INSUFFICIENT_RESOURCES));
    DAT_SRQ_ATTR many_iov{10, 64, 0};
    EXPECT_EQ(type_of(dat_srq_create(ia, pz, &many_iov, &srq)), t(DAT_INSUFFICIENT_RESOURCES));

    ASSERT_EQ(dat_srq_create(ia, pz, &attr, &srq), kOk);
    DAT_HANDLE_TYPE type;
    ASSERT_EQ(dat_get_handle_type(srq, &type), kOk);
    EXPECT_EQ(type, DAT_HANDLE_TYPE_SRQ);
    const DAT_SRQ_PARAM p = query(srq);
    EXPECT_EQ(dat_ia_query(p.ia_handle, nullptr, 0, nullptr, 0, nullptr), kOk); // an IA handle the registry takes
    EXPECT_EQ(p.srq_state, DAT_SRQ_STATE_OPERATIONAL);
    EXPECT_EQ(p.pz_handle, pz);
    EXPECT_EQ(p.max_recv_dtos, 10);
    EXPECT_EQ(p.max_recv_iov, 2);
    EXPECT_EQ(p.low_watermark, DAT_SRQ_LW_DEFAULT);
    EXPECT_EQ(p.available_dto_count, 0);
    EXPECT_EQ(p.outstanding_dto_count, 0);
    DAT_SRQ_PARAM out{};
    EXPECT_EQ(type_of(dat_srq_query(srq, static_cast<DAT_SRQ_PARAM_MASK>(0x100), &out)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, nullptr)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_srq_query(pz, DAT_SRQ_FIELD_ALL, &out)), t(DAT_INVALID_HANDLE)); // not an SRQ
    EXPECT_EQ(type_of(dat_pz_free(pz)), t(DAT_INVALID_STATE)); // the SRQ uses it
    EXPECT_EQ(dat_srq_free(srq), kOk);
    EXPECT_EQ(type_of(dat_srq_free(srq)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_srq_free(DAT_HANDLE_NULL)), t(DAT_INVALID_HANDLE));
}

TEST_F(Srq, PostRecvChecksItsArgumentsAndCapacity)
{
    DAT_SRQ_HANDLE srq = make_srq(4, 2);
    DAT_DTO_COOKIE cookie{};
    DAT_LMR_TRIPLET iov[3] = {};
    for (auto& s : iov)
        s = {reinterpret_cast<DAT_VADDR>(buffer.data()), 8, lmr_context};
    EXPECT_EQ(type_of(dat_srq_post_recv(srq, -1, iov, cookie)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_srq_post_recv(srq, 3, iov, cookie)), t(DAT_INVALID_PARAMETER)); // above max_recv_iov
    EXPECT_EQ(type_of(dat_srq_post_recv(srq, 1, nullptr, cookie)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_srq_post_recv(DAT_HANDLE_NULL, 1, iov, cookie)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(dat_srq_post_recv(srq, 0, nullptr, cookie), kOk); // a zero-length message may land here
    EXPECT_EQ(dat_srq_post_recv(srq, 2, iov, cookie), kOk);
    EXPECT_EQ(post(srq, 1), kOk);
    EXPECT_EQ(post(srq, 2), kOk);
    const DAT_RETURN full = post(srq, 3);
    EXPECT_EQ(type_of(full), t(DAT_INSUFFICIENT_RESOURCES));
    EXPECT_EQ(query(srq).available_dto_count, 4);
    EXPECT_EQ(query(srq).outstanding_dto_count, 4);
}

TEST_F(Srq, CountsFollowTheManPageExample)
{
    // dat_srq_query(3): an SRQ of 10 with 3 posted reads 3/3; a message
    // arrives: 2/3; its completion is reaped: 2/2. (On a verbs IA a buffer
    // counts as taken once its completion is in the CQ.)
    DAT_SRQ_HANDLE srq = make_srq(10);
    for (std::uint64_t slot = 0; slot < 3; ++slot)
        ASSERT_EQ(post(srq, slot), kOk);
    EXPECT_EQ(query(srq).available_dto_count, 3);
    EXPECT_EQ(query(srq).outstanding_dto_count, 3);
    DAT_EP_HANDLE active, passive;
    connect_pair(srq, active, passive, srq_attr());
    send(active, {7, 1}, 0);
    EXPECT_EQ(completion(dto_a).status, DAT_DTO_SUCCESS);
    ASSERT_TRUE(eventually([&] { return query(srq).available_dto_count == 2; }));
    EXPECT_EQ(query(srq).outstanding_dto_count, 3);
    DAT_COUNT nbufs = -1, span = -1;
    ASSERT_EQ(dat_ep_recv_query(passive, &nbufs, &span), kOk);
    EXPECT_EQ(nbufs, 0); // its completion is generated: no longer allocated
    EXPECT_EQ(span, 0);
    const DAT_DTO_COMPLETION_EVENT_DATA d = completion(dto_b);
    EXPECT_EQ(d.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(d.operation, DAT_DTO_RECEIVE);
    EXPECT_EQ(d.ep_handle, passive);
    EXPECT_EQ(d.user_cookie.as_64, 0u); // the first buffer posted
    EXPECT_EQ(d.transfered_length, sizeof(Message));
    EXPECT_EQ(received(0).connection, 7u);
    EXPECT_EQ(query(srq).available_dto_count, 2);
    EXPECT_EQ(query(srq).outstanding_dto_count, 2);
}

TEST_F(Srq, EndpointWithSrqRulesAndQuery)
{
    if (ia_is_verbs(ia))
        GTEST_SKIP() << "verbs IA: no high watermarks (srq_watermarks_supported is low only; README, On verbs IAs)";
    DAT_SRQ_HANDLE srq = make_srq(8);
    DAT_EP_ATTR attr = srq_attr(5, 3);
    attr.max_recv_iov = 4; // ignored for an SRQ endpoint
    DAT_EP_HANDLE ep;
    EXPECT_EQ(type_of(dat_ep_create_with_srq(ia, pz, dto_b, dto_b, conn_b, srq, nullptr, &ep)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_create_with_srq(ia, pz, dto_b, dto_b, conn_b, pz, &attr, &ep)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_ep_create_with_srq(ia, pz, dto_b, dto_b, conn_b, srq, &attr, nullptr)),
              t(DAT_INVALID_PARAMETER));
    DAT_EP_ATTR bad = srq_attr(-7, 0);
    EXPECT_EQ(type_of(dat_ep_create_with_srq(ia, pz, dto_b, dto_b, conn_b, srq, &bad, &ep)), t(DAT_INVALID_PARAMETER));
    ASSERT_EQ(dat_ep_create_with_srq(ia, pz, dto_b, dto_b, conn_b, srq, &attr, &ep), kOk);
    DAT_EP_PARAM p{};
    ASSERT_EQ(dat_ep_query(ep, DAT_EP_FIELD_ALL, &p), kOk);
    EXPECT_EQ(p.srq_handle, srq);
    EXPECT_EQ(p.ep_attr.max_recv_dtos, 5); // the hard high watermark
    EXPECT_EQ(p.ep_attr.srq_soft_hw, 3);
    EXPECT_EQ(p.ep_attr.max_recv_iov, 0);
    // Its receives come from the SRQ only.
    DAT_DTO_COOKIE cookie{};
    DAT_LMR_TRIPLET iov{reinterpret_cast<DAT_VADDR>(buffer.data()), 8, lmr_context};
    EXPECT_EQ(type_of(dat_ep_post_recv(ep, 1, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG)), t(DAT_INVALID_STATE));
    // The marks change through dat_ep_set_watermark, not dat_ep_modify.
    DAT_EP_PARAM change{};
    change.ep_attr.max_recv_dtos = 9;
    EXPECT_EQ(type_of(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &change)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW, &change)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_modify(ep, DAT_EP_FIELD_SRQ_HANDLE, &change)), t(DAT_INVALID_PARAMETER));
    change.ep_attr.max_request_dtos = 32;
    EXPECT_EQ(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS, &change), kOk);
    ASSERT_EQ(dat_ep_set_watermark(ep, 4, DAT_WATERMARK_INFINITE), kOk);
    ASSERT_EQ(dat_ep_query(ep, DAT_EP_FIELD_ALL, &p), kOk);
    EXPECT_EQ(p.ep_attr.srq_soft_hw, 4);
    EXPECT_EQ(p.ep_attr.max_recv_dtos, DAT_HW_DEFAULT);
    EXPECT_EQ(p.ep_attr.max_request_dtos, 32);
    EXPECT_EQ(type_of(dat_ep_set_watermark(ep, -5, 1)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_set_watermark(ep, 1, -5)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_set_watermark(srq, 1, 1)), t(DAT_INVALID_HANDLE));
    // Zeroed marks (a cleared attribute struct) mean none.
    DAT_EP_HANDLE zeroed;
    DAT_EP_ATTR none = srq_attr(0, 0);
    ASSERT_EQ(dat_ep_create_with_srq(ia, pz, dto_b, dto_b, conn_b, srq, &none, &zeroed), kOk);
    ASSERT_EQ(dat_ep_query(zeroed, DAT_EP_FIELD_ALL, &p), kOk);
    EXPECT_EQ(p.ep_attr.max_recv_dtos, DAT_HW_DEFAULT);
    EXPECT_EQ(p.ep_attr.srq_soft_hw, DAT_HW_DEFAULT);
    // An endpoint without one.
    DAT_EP_HANDLE plain;
    ASSERT_EQ(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, nullptr, &plain), kOk);
    ASSERT_EQ(dat_ep_query(plain, DAT_EP_FIELD_ALL, &p), kOk);
    EXPECT_EQ(p.srq_handle, DAT_HANDLE_NULL);
    EXPECT_EQ(p.ep_attr.srq_soft_hw, DAT_HW_DEFAULT);

    // Not while endpoints use it; nothing changes then.
    const DAT_RETURN in_use = dat_srq_free(srq);
    EXPECT_EQ(type_of(in_use), t(DAT_INVALID_STATE));
    EXPECT_EQ(subtype_of(in_use), DAT_INVALID_STATE_SRQ_IN_USE);
    EXPECT_EQ(post(srq, 0), kOk);
    EXPECT_EQ(query(srq).available_dto_count, 1);
    EXPECT_EQ(dat_ep_free(ep), kOk);
    EXPECT_EQ(type_of(dat_srq_free(srq)), t(DAT_INVALID_STATE));
    EXPECT_EQ(dat_ep_free(zeroed), kOk);
    EXPECT_EQ(dat_srq_free(srq), kOk); // posted buffers are the consumer's again
}

TEST_F(Srq, SplitProtectionZones)
{
    // Receive buffers belong to the SRQ's PZ, the endpoint may have its own.
    DAT_SRQ_HANDLE srq = make_srq(4);
    DAT_PZ_HANDLE other;
    ASSERT_EQ(dat_pz_create(ia, &other), kOk);
    DAT_LMR_HANDLE other_lmr;
    const DAT_LMR_CONTEXT other_context = register_buffer(other, &other_lmr);
    DAT_EP_HANDLE active, passive;
    ASSERT_EQ(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, nullptr, &active), kOk);
    const DAT_EP_ATTR attr = srq_attr();
    DAT_PROVIDER_ATTR pattr{};
    ASSERT_EQ(dat_ia_query(ia, nullptr, 0, nullptr, DAT_PROVIDER_FIELD_ALL, &pattr), kOk);
    if (pattr.srq_ep_pz_difference_supported != DAT_TRUE) { // verbs IAs: spec 6.6.5
        EXPECT_EQ(type_of(dat_ep_create_with_srq(ia, other, dto_b, dto_b, conn_b, srq, &attr, &passive)),
                  t(DAT_INVALID_PARAMETER));
        return;
    }
    ASSERT_EQ(dat_ep_create_with_srq(ia, other, dto_b, dto_b, conn_b, srq, &attr, &passive), kOk);
    accept_into(active, passive);
    ASSERT_EQ(post(srq, 0), kOk); // the SRQ's PZ: fine
    send(active, {1, 1}, 0);
    EXPECT_EQ(completion(dto_b).status, DAT_DTO_SUCCESS);
    EXPECT_EQ(completion(dto_a).status, DAT_DTO_SUCCESS);
    ASSERT_EQ(post(srq, 1, other_context), kOk); // the endpoint's PZ, not the SRQ's
    send(active, {1, 2}, 1);
    const DAT_DTO_COMPLETION_EVENT_DATA d = completion(dto_b);
    EXPECT_EQ(d.status, DAT_DTO_ERR_LOCAL_PROTECTION);
    EXPECT_EQ(d.user_cookie.as_64, 1u);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_BROKEN);
}

TEST_F(Srq, LowWatermarkFiresOncePerArming)
{
    DAT_SRQ_HANDLE srq = make_srq(8);
    EXPECT_EQ(type_of(dat_srq_set_lw(srq, 9)), t(DAT_INVALID_PARAMETER)); // above max_recv_dtos
    EXPECT_EQ(type_of(dat_srq_set_lw(srq, -1)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_srq_set_lw(DAT_HANDLE_NULL, 1)), t(DAT_INVALID_HANDLE));
    for (std::uint64_t slot = 0; slot < 5; ++slot)
        ASSERT_EQ(post(srq, slot), kOk);
    ASSERT_EQ(dat_srq_set_lw(srq, 3), kOk);
    EXPECT_EQ(query(srq).low_watermark, 3);
    EXPECT_TRUE(async_empty()); // 5 available: not below 3
    DAT_EP_HANDLE active, passive;
    connect_pair(srq, active, passive, srq_attr());
    for (std::uint32_t i = 0; i < 4; ++i) { // available 4, 3, 2 (the event), 1
        send(active, {0, i}, i);
        EXPECT_EQ(completion(dto_a).status, DAT_DTO_SUCCESS);
        EXPECT_EQ(completion(dto_b).status, DAT_DTO_SUCCESS);
        if (i == 1) {
            EXPECT_TRUE(async_empty()) << "3 available is not below 3";
        }
        if (i == 2)
            expect_watermark_event(srq, DAT_SRQ_LOW_WATERMARK_EVENT);
    }
    EXPECT_TRUE(async_empty()); // once per arming
    ASSERT_EQ(dat_srq_set_lw(srq, 3), kOk); // re-armed while 1 is available: at once
    expect_watermark_event(srq, DAT_SRQ_LOW_WATERMARK_EVENT);
    EXPECT_TRUE(async_empty());
    ASSERT_EQ(dat_srq_set_lw(srq, 0), kOk); // zero never fires
    send(active, {0, 4}, 4);
    EXPECT_EQ(completion(dto_b).status, DAT_DTO_SUCCESS);
    EXPECT_TRUE(async_empty());
}

TEST_F(Srq, SoftHighWatermarkFiresOncePerArming)
{
    if (ia_is_verbs(ia))
        GTEST_SKIP() << "verbs IA: no high watermarks (srq_watermarks_supported is low only; README, On verbs IAs)";
    DAT_SRQ_HANDLE srq = make_srq(16);
    for (std::uint64_t slot = 0; slot < 16; ++slot)
        ASSERT_EQ(post(srq, slot), kOk);
    DAT_EP_HANDLE active, passive;
    connect_pair(srq, active, passive, srq_attr());
    // No buffer allocated yet: a mark of 0 is not exceeded at the call.
    ASSERT_EQ(dat_ep_set_watermark(passive, 0, DAT_WATERMARK_INFINITE), kOk);
    EXPECT_TRUE(async_empty());
    for (std::uint32_t i = 0; i < 3; ++i) {
        send(active, {0, i}, i);
        EXPECT_EQ(completion(dto_b).status, DAT_DTO_SUCCESS);
    }
    expect_watermark_event(passive, DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT); // the first buffer taken
    EXPECT_TRUE(async_empty());                                        // not again
    ASSERT_EQ(dat_ep_set_watermark(passive, 0, DAT_WATERMARK_INFINITE), kOk); // re-armed
    send(active, {0, 3}, 3);
    EXPECT_EQ(completion(dto_b).status, DAT_DTO_SUCCESS);
    expect_watermark_event(passive, DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT);
    EXPECT_TRUE(async_empty());
    // An endpoint with its own receive queue: buffers count from posting,
    // so a mark below them fires in the call.
    DAT_LMR_TRIPLET iov{reinterpret_cast<DAT_VADDR>(buffer.data() + 60 * kRecvSlot), kRecvSlot, lmr_context};
    DAT_DTO_COOKIE cookie{};
    for (int i = 0; i < 3; ++i)
        ASSERT_EQ(dat_ep_post_recv(active, 1, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_COUNT nbufs = -1, span = -1;
    ASSERT_EQ(dat_ep_recv_query(active, &nbufs, &span), kOk);
    EXPECT_EQ(nbufs, 3);
    EXPECT_EQ(span, 3);
    ASSERT_EQ(dat_ep_recv_query(active, nullptr, nullptr), kOk);
    EXPECT_EQ(type_of(dat_ep_recv_query(srq, &nbufs, &span)), t(DAT_INVALID_HANDLE));
    ASSERT_EQ(dat_ep_set_watermark(active, 2, DAT_WATERMARK_INFINITE), kOk);
    expect_watermark_event(active, DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT);
    ASSERT_EQ(dat_ep_set_watermark(active, 3, DAT_WATERMARK_INFINITE), kOk); // 3 is not above 3
    EXPECT_TRUE(async_empty());
}

TEST_F(Srq, HardHighWatermarkBreaksTheConnectionAndKeepsTheBuffer)
{
    if (ia_is_verbs(ia))
        GTEST_SKIP() << "verbs IA: no high watermarks (srq_watermarks_supported is low only; README, On verbs IAs)";
    DAT_SRQ_HANDLE srq = make_srq(8);
    for (std::uint64_t slot = 0; slot < 8; ++slot)
        ASSERT_EQ(post(srq, slot), kOk);
    DAT_EP_HANDLE active, passive;
    connect_pair(srq, active, passive, srq_attr(2)); // at most 2 taken and not reaped
    // Reaped buffers stop counting: 6 messages, 2 at a time, are fine.
    for (std::uint32_t i = 0; i < 6; ++i) {
        send(active, {0, i}, i);
        if (i % 2 == 1) {
            for (int k = 0; k < 2; ++k) {
                const DAT_DTO_COMPLETION_EVENT_DATA d = completion(dto_b);
                EXPECT_EQ(d.status, DAT_DTO_SUCCESS);
                ASSERT_EQ(post(srq, d.user_cookie.as_64), kOk);
            }
        }
    }
    send(active, {0, 0}, 0);
    send(active, {0, 1}, 1);
    ASSERT_TRUE(eventually([&] { return query(srq).available_dto_count == 6; }));
    send(active, {0, 2}, 2); // the third would exceed it
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_BROKEN);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_BROKEN);
    // The two it held complete; the third buffer stays on the SRQ.
    for (int k = 0; k < 2; ++k)
        EXPECT_EQ(completion(dto_b).status, DAT_DTO_SUCCESS);
    DAT_EVENT e;
    EXPECT_EQ(type_of(dat_evd_dequeue(dto_b, &e)), t(DAT_QUEUE_EMPTY));
    EXPECT_EQ(query(srq).available_dto_count, 6);
    EXPECT_EQ(query(srq).outstanding_dto_count, 6);
    // The async EVD says the endpoint takes no more.
    e = next(async);
    EXPECT_EQ(e.event_number, DAT_ASYNC_ERROR_EP_BROKEN);
    EXPECT_EQ(e.event_data.asynch_error_event_data.dat_handle, passive);

    // Lowering the hard mark below what an endpoint holds breaks it at once.
    DAT_EP_HANDLE active2, passive2;
    ASSERT_EQ(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, nullptr, &active2), kOk);
    const DAT_EP_ATTR attr = srq_attr();
    ASSERT_EQ(dat_ep_create_with_srq(ia, pz, dto_b, dto_b, conn_b, srq, &attr, &passive2), kOk);
    accept_into(active2, passive2);
    send(active2, {1, 0}, 3);
    ASSERT_TRUE(eventually([&] { return query(srq).available_dto_count == 5; }));
    ASSERT_EQ(dat_ep_set_watermark(passive2, DAT_WATERMARK_INFINITE, 0), kOk);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_BROKEN);
}

TEST_F(Srq, DisconnectFlushesOnlyWhatTheEndpointTookAndResetKeepsTheSrq)
{
    DAT_SRQ_HANDLE srq = make_srq(8);
    for (std::uint64_t slot = 0; slot < 4; ++slot)
        ASSERT_EQ(post(srq, slot), kOk);
    DAT_EP_HANDLE active, passive;
    connect_pair(srq, active, passive, srq_attr());
    send(active, {0, 0}, 0);
    EXPECT_EQ(completion(dto_b).user_cookie.as_64, 0u);
    ASSERT_EQ(dat_ep_disconnect(passive, DAT_CLOSE_ABRUPT_FLAG), kOk);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
    DAT_EVENT e = next(async);
    EXPECT_EQ(e.event_number, DAT_ASYNC_ERROR_EP_BROKEN);
    EXPECT_EQ(e.event_data.asynch_error_event_data.dat_handle, passive);
    EXPECT_EQ(type_of(dat_evd_dequeue(dto_b, &e)), t(DAT_QUEUE_EMPTY)); // it held none: nothing flushed
    EXPECT_EQ(query(srq).available_dto_count, 3);                      // the rest stay for others
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_DISCONNECTED);

    ASSERT_EQ(dat_ep_reset(passive), kOk);
    DAT_EP_PARAM p{};
    ASSERT_EQ(dat_ep_query(passive, DAT_EP_FIELD_SRQ_HANDLE, &p), kOk);
    EXPECT_EQ(p.srq_handle, srq);
    ASSERT_EQ(dat_ep_free(active), kOk);
    DAT_EP_HANDLE again;
    ASSERT_EQ(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, nullptr, &again), kOk);
    accept_into(again, passive);
    send(again, {0, 1}, 1);
    const DAT_DTO_COMPLETION_EVENT_DATA d = completion(dto_b);
    EXPECT_EQ(d.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(d.user_cookie.as_64, 1u);
    EXPECT_EQ(received(1).sequence, 1u);
}

TEST_F(Srq, ResizeNeverLosesABuffer)
{
    if (ia_is_verbs(ia))
        GTEST_SKIP() << "verbs IA: an SRQ buffer's take is not visible before its completion is polled, so "
                        "available_dto_count is posted minus reaped (README, On verbs IAs)";
    DAT_SRQ_HANDLE srq = make_srq(4);
    for (std::uint64_t slot = 0; slot < 4; ++slot)
        ASSERT_EQ(post(srq, slot), kOk);
    EXPECT_EQ(type_of(dat_srq_resize(srq, 0)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_srq_resize(srq, 3)), t(DAT_INVALID_STATE)); // below outstanding
    EXPECT_EQ(type_of(dat_srq_resize(DAT_HANDLE_NULL, 8)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_srq_resize(srq, 1 << 20)), t(DAT_INSUFFICIENT_RESOURCES));
    DAT_EP_HANDLE active, passive;
    connect_pair(srq, active, passive, srq_attr());
    send(active, {0, 0}, 0);
    ASSERT_TRUE(eventually([&] { return query(srq).available_dto_count == 3; })); // one completion unreaped
    ASSERT_EQ(dat_srq_resize(srq, 40), kOk); // a larger ring, same WQEs
    EXPECT_EQ(query(srq).max_recv_dtos, 40);
    for (std::uint64_t slot = 4; slot < 40; ++slot)
        ASSERT_EQ(post(srq, slot), kOk);
    EXPECT_EQ(type_of(post(srq, 40)), t(DAT_INSUFFICIENT_RESOURCES));
    std::set<std::uint64_t> seen;
    for (std::uint32_t i = 1; i < 40; ++i)
        send(active, {0, i}, i);
    for (std::uint32_t i = 0; i < 40; ++i) {
        const DAT_DTO_COMPLETION_EVENT_DATA d = completion(dto_b);
        ASSERT_EQ(d.status, DAT_DTO_SUCCESS);
        EXPECT_TRUE(seen.insert(d.user_cookie.as_64).second) << "buffer delivered twice";
        EXPECT_EQ(received(d.user_cookie.as_64).sequence, i); // one connection: in order
        EXPECT_EQ(completion(dto_a).status, DAT_DTO_SUCCESS);
    }
    EXPECT_EQ(seen.size(), 40u);
    EXPECT_EQ(query(srq).outstanding_dto_count, 0);
    // Shrinking: not below the low watermark; otherwise fewer may be outstanding.
    ASSERT_EQ(dat_srq_set_lw(srq, 10), kOk);
    EXPECT_EQ(type_of(dat_srq_resize(srq, 9)), t(DAT_INVALID_STATE));
    ASSERT_EQ(dat_srq_set_lw(srq, 0), kOk);
    ASSERT_EQ(dat_srq_resize(srq, 2), kOk);
    EXPECT_EQ(query(srq).max_recv_dtos, 2);
    EXPECT_EQ(post(srq, 0), kOk);
    EXPECT_EQ(post(srq, 1), kOk);
    EXPECT_EQ(type_of(post(srq, 2)), t(DAT_INSUFFICIENT_RESOURCES));
}

// On a device: the argument and state errors are the softnic's; growing is
// the device's to grant (refused on the mlx5 direct path, whose SRQ ring is
// fixed); shrinking lowers what may be outstanding, and posts still land.
TEST_F(Srq, ResizeOnADevice)
{
    if (!ia_is_verbs(ia))
        GTEST_SKIP() << "softnic IA: ResizeNeverLosesABuffer covers it";
    DAT_SRQ_HANDLE srq = make_srq(4);
    for (std::uint64_t slot = 0; slot < 4; ++slot)
        ASSERT_EQ(post(srq, slot), kOk);
    EXPECT_EQ(type_of(dat_srq_resize(srq, 0)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_srq_resize(srq, 3)), t(DAT_INVALID_STATE)); // below outstanding
    EXPECT_EQ(type_of(dat_srq_resize(DAT_HANDLE_NULL, 8)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_srq_resize(srq, 1 << 20)), t(DAT_INSUFFICIENT_RESOURCES));
    const DAT_RETURN grow = dat_srq_resize(srq, 64);
    if (ia_is_mlx5_direct(ia))
        EXPECT_EQ(type_of(grow), t(DAT_INSUFFICIENT_RESOURCES));
    else
        EXPECT_TRUE(grow == kOk || type_of(grow) == t(DAT_INSUFFICIENT_RESOURCES)) << std::hex << grow;
    EXPECT_EQ(query(srq).max_recv_dtos, grow == kOk ? 64 : 4);
    EXPECT_EQ(query(srq).outstanding_dto_count, 4); // nothing lost either way
    if (grow == kOk)
        EXPECT_EQ(post(srq, 4), kOk);
    else
        EXPECT_EQ(type_of(post(srq, 4)), t(DAT_INSUFFICIENT_RESOURCES));
    // Delivered from whatever was posted, in order on one connection.
    DAT_EP_HANDLE active, passive;
    connect_pair(srq, active, passive, srq_attr());
    for (std::uint32_t i = 0; i < 4; ++i)
        send(active, {0, i}, i);
    for (std::uint32_t i = 0; i < 4; ++i) {
        const DAT_DTO_COMPLETION_EVENT_DATA d = completion(dto_b);
        ASSERT_EQ(d.status, DAT_DTO_SUCCESS);
        EXPECT_EQ(received(d.user_cookie.as_64).sequence, i);
        EXPECT_EQ(completion(dto_a).status, DAT_DTO_SUCCESS);
    }
}

TEST_F(Srq, ReceiveCompletionsFollowTheEndpointsRecvCompletionFlags)
{
    // A solicited-wait SRQ endpoint feeds its recv EVD without a threshold
    // (spec 6.3.2.2): a wait for more than one event is refused, as for any
    // endpoint so configured.
    DAT_SRQ_HANDLE srq = make_srq(4);
    ASSERT_EQ(post(srq, 0), kOk);
    DAT_EP_ATTR attr = srq_attr();
    attr.recv_completion_flags = DAT_COMPLETION_SOLICITED_WAIT_FLAG;
    DAT_EP_HANDLE active, passive;
    connect_pair(srq, active, passive, attr);
    DAT_EVENT e;
    DAT_COUNT nmore;
    EXPECT_EQ(type_of(dat_evd_wait(dto_b, 0, 2, &e, &nmore)), t(DAT_INVALID_STATE));
    DAT_LMR_TRIPLET iov{reinterpret_cast<DAT_VADDR>(buffer.data() + kSendArea), 8, lmr_context};
    DAT_DTO_COOKIE cookie{};
    ASSERT_EQ(dat_ep_post_send(active, 1, &iov, cookie, DAT_COMPLETION_SOLICITED_WAIT_FLAG), kOk);
    const DAT_DTO_COMPLETION_EVENT_DATA d = completion(dto_b);
    EXPECT_EQ(d.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(d.ep_handle, passive);
}

TEST_F(Srq, HundredConnectionsShareOneSrq)
{
    // 100 connections, 10 messages each in flight at once, into an SRQ of
    // 128 buffers: messages wait for buffers (receiver not ready) while the
    // consumer reaps and reposts. Nothing lost or delivered twice; each
    // connection's messages arrive in its order.
    constexpr std::uint32_t kConnections = 100, kPerConnection = 10, kBuffers = 128;
    DAT_SRQ_HANDLE srq = make_srq(kBuffers);
    for (std::uint64_t slot = 0; slot < kBuffers; ++slot)
        ASSERT_EQ(post(srq, slot), kOk);
    std::vector<DAT_EP_HANDLE> senders(kConnections), receivers(kConnections);
    const DAT_EP_ATTR attr = srq_attr();
    for (std::uint32_t c = 0; c < kConnections; ++c) {
        connect_pair(srq, senders[c], receivers[c], attr);
        if (HasFatalFailure())
            return;
    }
    std::map<DAT_EP_HANDLE, std::uint32_t> connection_of;
    for (std::uint32_t c = 0; c < kConnections; ++c)
        connection_of[receivers[c]] = c;
    for (std::uint32_t seq = 0; seq < kPerConnection; ++seq)
        for (std::uint32_t c = 0; c < kConnections; ++c)
            send(senders[c], {c, seq}, c * kPerConnection + seq);
    std::vector<std::uint32_t> expected(kConnections, 0);
    std::set<std::uint64_t> held; // buffers delivered and not yet reposted
    for (std::uint32_t n = 0; n < kConnections * kPerConnection; ++n) {
        const DAT_DTO_COMPLETION_EVENT_DATA d = completion(dto_b);
        ASSERT_EQ(d.status, DAT_DTO_SUCCESS) << "message " << n;
        const std::uint64_t slot = d.user_cookie.as_64;
        ASSERT_LT(slot, kBuffers);
        ASSERT_TRUE(held.insert(slot).second) << "buffer " << slot << " delivered twice";
        const Message m = received(slot);
        ASSERT_LT(m.connection, kConnections);
        EXPECT_EQ(connection_of[d.ep_handle], m.connection) << "completion names the wrong endpoint";
        EXPECT_EQ(m.sequence, expected[m.connection]++) << "connection " << m.connection << " out of order";
        held.erase(slot);
        ASSERT_EQ(post(srq, slot), kOk);
    }
    for (std::uint32_t c = 0; c < kConnections; ++c)
        EXPECT_EQ(expected[c], kPerConnection);
    for (std::uint32_t n = 0; n < kConnections * kPerConnection; ++n)
        ASSERT_EQ(completion(dto_a).status, DAT_DTO_SUCCESS);
    EXPECT_EQ(query(srq).available_dto_count, static_cast<DAT_COUNT>(kBuffers));
    EXPECT_EQ(query(srq).outstanding_dto_count, static_cast<DAT_COUNT>(kBuffers));
    DAT_EVENT e;
    EXPECT_EQ(type_of(dat_evd_dequeue(dto_b, &e)), t(DAT_QUEUE_EMPTY));
    // Every endpoint goes; every buffer is still on the SRQ, then it goes too.
    for (std::uint32_t c = 0; c < kConnections; ++c) {
        ASSERT_EQ(dat_ep_free(senders[c]), kOk);
        ASSERT_EQ(dat_ep_free(receivers[c]), kOk);
    }
    EXPECT_EQ(query(srq).available_dto_count, static_cast<DAT_COUNT>(kBuffers));
    EXPECT_EQ(dat_srq_free(srq), kOk);
}

TEST_F(Srq, FreeingAnEndpointGivesBackTheBuffersOfItsUnreapedCompletions)
{
    DAT_SRQ_HANDLE srq = make_srq(4);
    for (std::uint64_t slot = 0; slot < 4; ++slot)
        ASSERT_EQ(post(srq, slot), kOk);
    DAT_EP_HANDLE active, passive;
    connect_pair(srq, active, passive, srq_attr());
    send(active, {0, 0}, 0);
    send(active, {0, 1}, 1);
    if (ia_is_verbs(ia)) {
        // A device's take is not visible (available is posted minus reaped):
        // the sends' completions say the receives were consumed.
        EXPECT_EQ(completion(dto_a).status, DAT_DTO_SUCCESS);
        EXPECT_EQ(completion(dto_a).status, DAT_DTO_SUCCESS);
    } else {
        ASSERT_TRUE(eventually([&] { return query(srq).available_dto_count == 2; }));
    }
    EXPECT_EQ(query(srq).outstanding_dto_count, 4);
    ASSERT_EQ(dat_ep_free(passive), kOk); // two completions never reaped
    EXPECT_EQ(query(srq).outstanding_dto_count, 2);
    DAT_EVENT e;
    EXPECT_EQ(type_of(dat_evd_dequeue(dto_b, &e)), t(DAT_QUEUE_EMPTY));
    // The SRQ goes on serving: four posts fit again.
    EXPECT_EQ(post(srq, 0), kOk);
    EXPECT_EQ(post(srq, 1), kOk);
    EXPECT_EQ(type_of(post(srq, 2)), t(DAT_INSUFFICIENT_RESOURCES));
}

} // namespace
