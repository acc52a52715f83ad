// The IB extensions (dat_ib_extensions.h) through the public API and
// dat_extension_op: attributes, dat_ib_open_query/close_query, RDMA write
// with immediate data and its receive, compare and swap, fetch and add
// (concurrent, from two endpoints), counters, and the errors each call
// documents; UD endpoints on softnic IAs (elsewhere, like collectives,
// MODEL_NOT_SUPPORTED): the exchange of address handles, datagrams behind
// a GRH, oversized ones dropped, over an SRQ, the frees. Every IA kind
// offers the extensions (softnic, generic verbs, mlx5 direct); where the
// device has no atomics the IA says so and they answer MODEL_NOT_SUPPORTED.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#define DAT_EXTENSIONS 1
#include "connect_through_psp.hpp"

#include <dat2/udat.h>

#include <dat2/dat_ib_extensions.h>

#include "test_ia.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include <cstring>
#include <netinet/in.h>

#include <set>
#include <tuple>
#include <thread>
#include <vector>

namespace {

constexpr DAT_RETURN kOk = DAT_SUCCESS;
constexpr DAT_TIMEOUT kWait = 5000000; // 5 s, in µs
DAT_RETURN type_of(DAT_RETURN rc)
{
    return DAT_GET_TYPE(rc);
}
DAT_RETURN t(DAT_RETURN type)
{
    return type;
}
DAT_RETURN err(DAT_RETURN type, DAT_RETURN_SUBTYPE subtype)
{
    return static_cast<DAT_RETURN>(DAT_CLASS_ERROR | static_cast<unsigned>(type) | static_cast<unsigned>(subtype));
}
constexpr auto kIbDtoEvent = static_cast<DAT_EVENT_NUMBER>(DAT_IB_DTO_EVENT);

// Whether `ia` should have UD endpoints: softnic IAs, and verbs IAs on an
// Ethernet (RoCE) port, either path; not InfiniBand.
bool ud_expected(DAT_IA_HANDLE ia)
{
    return !ia_is_verbs(ia) || provider_specific(ia, "FASTDAPL_LINK_LAYER").value_or("") == "Ethernet";
}

const DAT_IB_EXTENSION_EVENT_DATA& ext_of(const DAT_EVENT& e)
{
    return *reinterpret_cast<const DAT_IB_EXTENSION_EVENT_DATA*>(e.event_extension_data);
}

DAT_DTO_COOKIE cookie(std::uint64_t v)
{
    return DAT_DTO_COOKIE{.as_64 = v};
}

class IbExtensions : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(dat_ia_open(test_ia_name(), 16, &async, &ia), kOk);
        ASSERT_EQ(dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &attr, 0, nullptr), kOk);
        ASSERT_EQ(dat_pz_create(ia, &pz), kOk);
        for (DAT_EVD_HANDLE* evd : {&dto_a, &dto_b, &dto_c})
            ASSERT_EQ(dat_evd_create(ia, 256, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, evd), kOk);
        for (DAT_EVD_HANDLE* evd : {&conn_a, &conn_b})
            ASSERT_EQ(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, evd), kOk);
        ASSERT_EQ(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd), kOk);
        buffer.assign(1 << 16, 0);
        DAT_REGION_DESCRIPTION region{};
        region.for_va = buffer.data();
        const auto rights =
            static_cast<DAT_MEM_PRIV_FLAGS>(static_cast<int>(DAT_MEM_PRIV_ALL_FLAG) |
                                            (supported() ? static_cast<int>(DAT_IB_MEM_PRIV_REMOTE_ATOMIC) : 0));
        ASSERT_EQ(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, buffer.size(), pz, rights, DAT_VA_TYPE_VA, &lmr,
                                 &lmr_context, &rmr_context, nullptr, nullptr),
                  kOk);
    }
    void TearDown() override
    {
        if (ia) {
            EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), kOk);
        }
    }
    bool supported() const { return attr.extension_supported == DAT_EXTENSION_IB; }
    bool atomics() const { return supported() && provider_specific(ia, DAT_IB_ATTR_CMP_AND_SWAP) == "TRUE"; }
    DAT_EVENT next(DAT_EVD_HANDLE evd)
    {
        DAT_EVENT e{};
        DAT_COUNT nmore;
        EXPECT_EQ(dat_evd_wait(evd, kWait, 1, &e, &nmore), kOk);
        return e;
    }
    DAT_EP_HANDLE make_ep(DAT_EVD_HANDLE dto, DAT_EVD_HANDLE conn)
    {
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        EXPECT_EQ(dat_ep_create(ia, pz, dto, dto, conn, nullptr, &ep), kOk);
        return ep;
    }
    void connect_pair(DAT_EP_HANDLE& active, DAT_EVD_HANDLE active_dto, DAT_EP_HANDLE& passive)
    {
        active = make_ep(active_dto, conn_a);
        passive = make_ep(dto_b, conn_b);
        fastdapl_test::connect_through_psp(ia, attr.ia_address_ptr, cr_evd, active, conn_a, passive, conn_b);
    }
    DAT_LMR_TRIPLET local(std::size_t offset, DAT_SEG_LENGTH length)
    {
        return {reinterpret_cast<DAT_VADDR>(buffer.data() + offset), length, lmr_context};
    }
    DAT_RMR_TRIPLET remote(std::size_t offset, DAT_SEG_LENGTH length)
    {
        return {reinterpret_cast<DAT_VADDR>(buffer.data() + offset), length, rmr_context};
    }
    std::uint64_t& word(std::size_t offset) { return *reinterpret_cast<std::uint64_t*>(buffer.data() + offset); }

    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_IA_ATTR attr{};
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE dto_a, dto_b, dto_c, conn_a, conn_b, cr_evd;
    alignas(64) std::vector<char> buffer;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lmr_context;
    DAT_RMR_CONTEXT rmr_context;
};

#define SKIP_UNLESS_SUPPORTED()                                                                                        \
    if (!supported())                                                                                                  \
    GTEST_SKIP() << "this IA (" << test_ia_name() << ") does not offer the IB extensions"

#define SKIP_UNLESS_ATOMICS()                                                                                          \
    if (!atomics())                                                                                                    \
    GTEST_SKIP() << "this IA (" << test_ia_name() << ") has no atomics (its device's atomic_cap is NONE)"

TEST_F(IbExtensions, AttributesNameTheExtension)
{
    if (!supported()) {
        EXPECT_EQ(attr.extension_supported, DAT_EXTENSION_NONE);
        DAT_EP_HANDLE ep = make_ep(dto_a, conn_a);
        DAT_LMR_TRIPLET l = local(0, 8);
        DAT_RMR_TRIPLET r = remote(64, 8);
        EXPECT_EQ(type_of(dat_ib_post_fetch_and_add(ep, 1, &l, cookie(1), &r, DAT_COMPLETION_DEFAULT_FLAG)),
                  t(DAT_MODEL_NOT_SUPPORTED));
        SKIP_UNLESS_SUPPORTED();
    }
    EXPECT_EQ(attr.extension_version, DAT_IB_EXTENSION_VERSION);
    for (const char* name : {DAT_IB_ATTR_IMMED_DATA, DAT_IB_ATTR_COUNTERS})
        EXPECT_EQ(provider_specific(ia, name).value_or(""), "TRUE") << name;
    // Atomics: both or neither, as the device has them.
    const std::string cas = provider_specific(ia, DAT_IB_ATTR_CMP_AND_SWAP).value_or("");
    EXPECT_TRUE(cas == "TRUE" || cas == "FALSE") << cas;
    EXPECT_EQ(provider_specific(ia, DAT_IB_ATTR_FETCH_AND_ADD).value_or(""), cas);
    // UD endpoints on softnic IAs and verbs IAs over RoCE (either path).
    EXPECT_EQ(provider_specific(ia, DAT_IB_ATTR_UD).value_or(""), ud_expected(ia) ? "TRUE" : "FALSE");
    if (!atomics()) { // a device without atomics (the fake mlx5 device's FAKE_MLX5_NO_ATOMICS)
        DAT_EP_HANDLE a, b;
        connect_pair(a, dto_a, b);
        DAT_LMR_TRIPLET l = local(0, 8);
        DAT_RMR_TRIPLET r = remote(64, 8);
        EXPECT_EQ(type_of(dat_ib_post_fetch_and_add(a, 1, &l, cookie(1), &r, DAT_COMPLETION_DEFAULT_FLAG)),
                  t(DAT_MODEL_NOT_SUPPORTED));
        EXPECT_EQ(type_of(dat_ib_post_cmp_and_swap(a, 1, 2, &l, cookie(1), &r, DAT_COMPLETION_DEFAULT_FLAG)),
                  t(DAT_MODEL_NOT_SUPPORTED));
        // Write with immediate data still runs.
        DAT_LMR_TRIPLET recv = local(8192, 64);
        ASSERT_EQ(dat_ep_post_recv(b, 1, &recv, cookie(2), DAT_COMPLETION_DEFAULT_FLAG), kOk);
        ASSERT_EQ(dat_ib_post_rdma_write_immed(a, 1, &l, cookie(3), &r, 7, DAT_COMPLETION_DEFAULT_FLAG), kOk);
        EXPECT_EQ(ext_of(next(dto_b)).val.immed.data, 7u);
        EXPECT_EQ(next(dto_a).event_number, kIbDtoEvent);
    }
}

TEST_F(IbExtensions, OpenQueryAndCloseQuery)
{
    DAT_HANDLE q = DAT_HANDLE_NULL;
    DAT_IA_ATTR ia_attr{};
    DAT_PROVIDER_ATTR p{};
    ASSERT_EQ(dat_ib_open_query(test_ia_name(), &q, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_ALL, &p), kOk);
    EXPECT_NE(q, DAT_HANDLE_NULL);
    EXPECT_EQ(ia_attr.extension_supported, attr.extension_supported);
    EXPECT_GT(p.num_provider_specific_attr, 0);
    ASSERT_NE(ia_attr.ia_address_ptr, nullptr);
    EXPECT_EQ(ia_attr.ia_address_ptr->sa_family, attr.ia_address_ptr->sa_family);
    ASSERT_EQ(dat_ib_close_query(q), kOk);
    EXPECT_EQ(type_of(dat_ib_close_query(q)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_ib_open_query("no-such-ia", &q, DAT_IA_FIELD_ALL, &ia_attr, 0, nullptr)),
              t(DAT_PROVIDER_NOT_FOUND));
    EXPECT_EQ(type_of(dat_ib_open_query(test_ia_name(), nullptr, DAT_IA_FIELD_ALL, &ia_attr, 0, nullptr)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ib_open_query(test_ia_name(), &q, DAT_IA_FIELD_ALL, nullptr, 0, nullptr)),
              t(DAT_INVALID_PARAMETER));
}

// Half the buffer into the other half, with immediate data: on
// fastdapl-shm a WRITE this large (32 KiB and up) is pulled by the target
// (cross-memory attach), which then consumes the receive.
TEST_F(IbExtensions, LargeWriteWithImmediateDataLandsAndConsumesAReceive)
{
    SKIP_UNLESS_SUPPORTED();
    DAT_EP_HANDLE a, b;
    connect_pair(a, dto_a, b);
    constexpr std::size_t kHalf = 1 << 15;
    ASSERT_EQ(buffer.size(), 2 * kHalf);
    for (std::size_t i = 0; i < kHalf; ++i)
        buffer[i] = static_cast<char>(i * 29 + 3);
    DAT_LMR_TRIPLET recv = local(0, 64); // takes no bytes: the write's immediate data says it came
    ASSERT_EQ(dat_ep_post_recv(b, 1, &recv, cookie(81), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_LMR_TRIPLET from = local(0, kHalf);
    DAT_RMR_TRIPLET to = remote(kHalf, kHalf);
    ASSERT_EQ(dat_ib_post_rdma_write_immed(a, 1, &from, cookie(8), &to, 0x5151u, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_EVENT e = next(dto_a);
    ASSERT_EQ(e.event_number, kIbDtoEvent);
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 8u);
    DAT_EVENT r = next(dto_b);
    ASSERT_EQ(r.event_number, kIbDtoEvent);
    const auto& rd = r.event_data.dto_completion_event_data;
    EXPECT_EQ(rd.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(rd.user_cookie.as_64, 81u);
    EXPECT_EQ(rd.transfered_length, kHalf);
    EXPECT_EQ(ext_of(r).val.immed.data, 0x5151u);
    EXPECT_EQ(std::memcmp(buffer.data() + kHalf, buffer.data(), kHalf), 0);
}

TEST_F(IbExtensions, WriteWithImmediateDataConsumesAReceive)
{
    SKIP_UNLESS_SUPPORTED();
    DAT_EP_HANDLE a, b;
    connect_pair(a, dto_a, b);
    DAT_LMR_TRIPLET recv = local(8192, 64);
    ASSERT_EQ(dat_ep_post_recv(b, 1, &recv, cookie(77), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    std::memset(buffer.data(), 'w', 100);
    DAT_LMR_TRIPLET from = local(0, 100);
    DAT_RMR_TRIPLET to = remote(4096, 100);
    ASSERT_EQ(dat_ib_post_rdma_write_immed(a, 1, &from, cookie(5), &to, 0xabcd1234u, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_EVENT e = next(dto_a);
    ASSERT_EQ(e.event_number, kIbDtoEvent);
    const auto& d = e.event_data.dto_completion_event_data;
    EXPECT_EQ(d.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(d.user_cookie.as_64, 5u);
    EXPECT_EQ(d.transfered_length, 100u);
    EXPECT_EQ(static_cast<int>(d.operation), static_cast<int>(DAT_IB_DTO_RDMA_WRITE_IMMED));
    EXPECT_EQ(ext_of(e).type, DAT_IB_RDMA_WRITE_IMMED);
    EXPECT_EQ(ext_of(e).status, DAT_OP_SUCCESS);
    DAT_EVENT r = next(dto_b);
    ASSERT_EQ(r.event_number, kIbDtoEvent);
    const auto& rd = r.event_data.dto_completion_event_data;
    EXPECT_EQ(rd.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(rd.user_cookie.as_64, 77u);
    EXPECT_EQ(rd.transfered_length, 100u);
    EXPECT_EQ(rd.ep_handle, b);
    EXPECT_EQ(static_cast<int>(rd.operation), static_cast<int>(DAT_IB_DTO_RECV_IMMED));
    EXPECT_EQ(ext_of(r).type, DAT_IB_RDMA_WRITE_IMMED_DATA);
    EXPECT_EQ(ext_of(r).val.immed.data, 0xabcd1234u);
    EXPECT_EQ(std::memcmp(buffer.data() + 4096, buffer.data(), 100), 0);
    // An ordinary send still completes as a plain DTO event.
    ASSERT_EQ(dat_ep_post_recv(b, 1, &recv, cookie(78), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_LMR_TRIPLET msg = local(0, 10);
    ASSERT_EQ(dat_ep_post_send(a, 1, &msg, cookie(6), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    EXPECT_EQ(next(dto_a).event_number, DAT_DTO_COMPLETION_EVENT);
    EXPECT_EQ(next(dto_b).event_number, DAT_DTO_COMPLETION_EVENT);
    // Counters of the two endpoints.
    DAT_UINT64 c[DCNT_EP_ALL_COUNTERS] = {};
    ASSERT_EQ(dat_ib_query_counters(a, DCNT_EP_ALL_COUNTERS, c, 0), kOk);
    EXPECT_EQ(c[DCNT_EP_POST_WRITE_IMM], 1u);
    EXPECT_EQ(c[DCNT_EP_POST_WRITE_IMM_DATA], 100u);
    DAT_UINT64 one = 0;
    ASSERT_EQ(dat_ib_query_counters(b, DCNT_EP_RECV_RDMA_IMM, &one, 0), kOk);
    EXPECT_EQ(one, 1u);
    ASSERT_EQ(dat_ib_query_counters(b, DCNT_EP_RECV_RDMA_IMM_DATA, &one, 1), kOk); // then reset
    EXPECT_EQ(one, 100u);
    ASSERT_EQ(dat_ib_query_counters(b, DCNT_EP_RECV_RDMA_IMM_DATA, &one, 0), kOk);
    EXPECT_EQ(one, 0u);
}

TEST_F(IbExtensions, WriteWithImmediateDataErrors)
{
    SKIP_UNLESS_SUPPORTED();
    DAT_LMR_TRIPLET from = local(0, 8);
    DAT_RMR_TRIPLET to = remote(4096, 8);
    DAT_EP_HANDLE unconnected = make_ep(dto_c, conn_a);
    EXPECT_EQ(
        type_of(dat_ib_post_rdma_write_immed(unconnected, 1, &from, cookie(1), &to, 1, DAT_COMPLETION_DEFAULT_FLAG)),
        t(DAT_INVALID_STATE));
    EXPECT_EQ(type_of(dat_ib_post_rdma_write_immed(pz, 1, &from, cookie(1), &to, 1, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_INVALID_HANDLE));
    DAT_EP_HANDLE a, b;
    connect_pair(a, dto_a, b);
    EXPECT_EQ(type_of(dat_ib_post_rdma_write_immed(a, 1, &from, cookie(1), nullptr, 1, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ib_post_rdma_write_immed(a, -1, &from, cookie(1), &to, 1, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ib_post_rdma_write_immed(a, 1, &from, cookie(1), &to, 1,
                                                   static_cast<DAT_COMPLETION_FLAGS>(0x1000))),
              t(DAT_INVALID_PARAMETER));
    // No receive posted at the target: the write waits for one (RC
    // receiver-not-ready), then completes on both sides.
    ASSERT_EQ(dat_ib_post_rdma_write_immed(a, 1, &from, cookie(2), &to, 9, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_EVENT e{};
    DAT_COUNT nmore;
    EXPECT_EQ(type_of(dat_evd_wait(dto_b, 100000, 1, &e, &nmore)), t(DAT_TIMEOUT_EXPIRED));
    DAT_LMR_TRIPLET recv = local(8192, 64);
    ASSERT_EQ(dat_ep_post_recv(b, 1, &recv, cookie(3), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_EVENT r = next(dto_b);
    EXPECT_EQ(r.event_number, kIbDtoEvent);
    EXPECT_EQ(ext_of(r).val.immed.data, 9u);
    EXPECT_EQ(next(dto_a).event_number, kIbDtoEvent);
}

TEST_F(IbExtensions, CompareAndSwap)
{
    SKIP_UNLESS_ATOMICS();
    DAT_EP_HANDLE a, b;
    connect_pair(a, dto_a, b);
    word(256) = 5;
    word(0) = 0;
    DAT_LMR_TRIPLET result = local(0, 8);
    DAT_RMR_TRIPLET target = remote(256, 8);
    // A mismatch leaves the target and returns the old value.
    ASSERT_EQ(dat_ib_post_cmp_and_swap(a, 7, 9, &result, cookie(11), &target, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_EVENT e = next(dto_a);
    ASSERT_EQ(e.event_number, kIbDtoEvent);
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 11u);
    EXPECT_EQ(static_cast<int>(e.event_data.dto_completion_event_data.operation),
              static_cast<int>(DAT_IB_DTO_CMP_SWAP));
    EXPECT_EQ(ext_of(e).type, DAT_IB_CMP_AND_SWAP);
    EXPECT_EQ(word(0), 5u);
    EXPECT_EQ(word(256), 5u);
    // A match swaps.
    word(0) = 0;
    ASSERT_EQ(dat_ib_post_cmp_and_swap(a, 5, 9, &result, cookie(12), &target, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    e = next(dto_a);
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(word(0), 5u);
    EXPECT_EQ(word(256), 9u);
    DAT_UINT64 c[DCNT_EP_ALL_COUNTERS] = {};
    ASSERT_EQ(dat_ib_query_counters(a, DCNT_EP_ALL_COUNTERS, c, 0), kOk);
    EXPECT_EQ(c[DCNT_EP_POST_CMP_SWAP], 2u);
}

TEST_F(IbExtensions, ConcurrentFetchAndAddFromTwoEndpointsSum)
{
    SKIP_UNLESS_ATOMICS();
    DAT_EP_HANDLE a1, b1, a2, b2;
    connect_pair(a1, dto_a, b1);
    connect_pair(a2, dto_c, b2);
    word(1024) = 1000;
    constexpr int kEach = 300;
    std::vector<std::uint64_t> seen[2];
    auto run = [&](int k, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd) {
        DAT_LMR_TRIPLET result = local(static_cast<std::size_t>(64 + 8 * k), 8);
        DAT_RMR_TRIPLET target = remote(1024, 8);
        for (int i = 0; i < kEach; ++i) {
            ASSERT_EQ(dat_ib_post_fetch_and_add(ep, 1, &result, cookie(static_cast<std::uint64_t>(i)), &target,
                                                DAT_COMPLETION_DEFAULT_FLAG),
                      kOk);
            DAT_EVENT e{};
            DAT_COUNT nmore;
            ASSERT_EQ(dat_evd_wait(evd, kWait, 1, &e, &nmore), kOk);
            ASSERT_EQ(e.event_number, kIbDtoEvent);
            ASSERT_EQ(ext_of(e).type, DAT_IB_FETCH_AND_ADD);
            ASSERT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
            seen[k].push_back(word(static_cast<std::size_t>(64 + 8 * k)));
        }
    };
    std::thread t1(run, 0, a1, dto_a), t2(run, 1, a2, dto_c);
    t1.join();
    t2.join();
    EXPECT_EQ(word(1024), 1000u + 2 * kEach);
    // Every add saw a distinct original value: none was lost or repeated.
    std::set<std::uint64_t> all(seen[0].begin(), seen[0].end());
    all.insert(seen[1].begin(), seen[1].end());
    EXPECT_EQ(all.size(), static_cast<std::size_t>(2 * kEach));
    EXPECT_EQ(*all.begin(), 1000u);
    EXPECT_EQ(*all.rbegin(), 1000u + 2 * kEach - 1);
}

TEST_F(IbExtensions, AtomicErrors)
{
    SKIP_UNLESS_ATOMICS();
    DAT_EP_HANDLE a, b;
    connect_pair(a, dto_a, b);
    DAT_LMR_TRIPLET result = local(0, 8);
    DAT_LMR_TRIPLET wide = local(0, 16);
    DAT_RMR_TRIPLET target = remote(256, 8);
    EXPECT_EQ(type_of(dat_ib_post_fetch_and_add(a, 1, &wide, cookie(1), &target, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_LENGTH_ERROR));
    EXPECT_EQ(type_of(dat_ib_post_fetch_and_add(a, 1, nullptr, cookie(1), &target, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ib_post_cmp_and_swap(a, 1, 2, &result, cookie(1), nullptr, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ib_post_fetch_and_add(lmr, 1, &result, cookie(1), &target, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_INVALID_HANDLE));
    // A misaligned target is an invalid request (as on IB): an error
    // completion, the target untouched, and the connection broken. Some
    // devices refuse it at post time instead (Soft-RoCE: ibv_post_send
    // answers EINVAL): then the post says INVALID_PARAMETER.
    word(256) = 42;
    DAT_RMR_TRIPLET misaligned = remote(260, 8);
    const DAT_RETURN posted =
        dat_ib_post_fetch_and_add(a, 1, &result, cookie(2), &misaligned, DAT_COMPLETION_DEFAULT_FLAG);
    if (posted != kOk) {
        EXPECT_NE(std::getenv("FASTDAPL_TEST_IA"), nullptr) << "the software IAs refuse it at the target";
        EXPECT_EQ(type_of(posted), t(DAT_INVALID_PARAMETER));
        EXPECT_EQ(word(256), 42u);
        return;
    }
    DAT_EVENT e = next(dto_a);
    ASSERT_EQ(e.event_number, kIbDtoEvent);
    EXPECT_NE(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(ext_of(e).type, DAT_IB_FETCH_AND_ADD);
    EXPECT_EQ(ext_of(e).status, DAT_IB_OP_ERR);
    EXPECT_EQ(word(256), 42u);
}

TEST_F(IbExtensions, AtomicNeedsRemoteWriteRights)
{
    SKIP_UNLESS_ATOMICS();
    DAT_EP_HANDLE a, b;
    connect_pair(a, dto_a, b);
    std::vector<char> other(4096, 0);
    DAT_REGION_DESCRIPTION region{};
    region.for_va = other.data();
    DAT_LMR_HANDLE read_only;
    DAT_LMR_CONTEXT lc;
    DAT_RMR_CONTEXT rc;
    ASSERT_EQ(
        dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, other.size(), pz,
                       static_cast<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_REMOTE_READ_FLAG),
                       DAT_VA_TYPE_VA, &read_only, &lc, &rc, nullptr, nullptr),
        kOk);
    DAT_LMR_TRIPLET result = local(0, 8);
    DAT_RMR_TRIPLET target{reinterpret_cast<DAT_VADDR>(other.data()), 8, rc};
    ASSERT_EQ(dat_ib_post_cmp_and_swap(a, 0, 1, &result, cookie(3), &target, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_EVENT e = next(dto_a);
    ASSERT_EQ(e.event_number, kIbDtoEvent);
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_ERR_REMOTE_ACCESS);
    EXPECT_EQ(ext_of(e).status, DAT_IB_OP_ERR);
    EXPECT_EQ(other[0], 0);
}

TEST_F(IbExtensions, CountersOfEachKind)
{
    SKIP_UNLESS_SUPPORTED();
    DAT_UINT64 ia_c[DCNT_IA_ALL_COUNTERS] = {};
    ASSERT_EQ(dat_ib_query_counters(ia, DCNT_IA_ALL_COUNTERS, ia_c, 0), kOk);
    EXPECT_EQ(ia_c[DCNT_IA_PZ_CREATE], 1u);
    EXPECT_EQ(ia_c[DCNT_IA_LMR_CREATE], 1u);
    EXPECT_EQ(ia_c[DCNT_IA_EVD_CREATE], 6u);
    DAT_UINT64 evd_c[DCNT_EVD_ALL_COUNTERS] = {};
    ASSERT_EQ(dat_ib_query_counters(dto_a, DCNT_EVD_ALL_COUNTERS, evd_c, 0), kOk);
    DAT_UINT64 v = 0;
    EXPECT_EQ(type_of(dat_ib_query_counters(ia, DCNT_IA_ALL_COUNTERS + 1, &v, 0)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ib_query_counters(ia, -1, &v, 0)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ib_query_counters(ia, DCNT_IA_PZ_CREATE, nullptr, 0)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ib_query_counters(pz, 0, &v, 0)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(dat_ib_print_counters(dto_a, DCNT_EVD_WAIT, 0), kOk);
    EXPECT_EQ(type_of(dat_ib_print_counters(dto_a, DCNT_EVD_ALL_COUNTERS + 1, 0)), t(DAT_INVALID_PARAMETER));
    ASSERT_EQ(dat_ib_query_counters(ia, DCNT_IA_PZ_CREATE, &v, 1), kOk);
    EXPECT_EQ(v, 1u);
    ASSERT_EQ(dat_ib_query_counters(ia, DCNT_IA_PZ_CREATE, &v, 0), kOk);
    EXPECT_EQ(v, 0u);
}

TEST_F(IbExtensions, UnreliableDatagramsWhereSupportedAndCollectivesNowhere)
{
    DAT_EP_ATTR ud{};
    ud.service_type = static_cast<DAT_SERVICE_TYPE>(DAT_IB_SERVICE_TYPE_UD);
    ud.max_message_size = 1024;
    ud.max_recv_dtos = ud.max_request_dtos = 8;
    ud.max_recv_iov = ud.max_request_iov = 1;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_EP_HANDLE rc_ep = make_ep(dto_a, conn_a);
    DAT_LMR_TRIPLET l = local(0, 8);
    DAT_IB_ADDR_HANDLE ah{};
    if (!ud_expected(ia)) { // InfiniBand ports
        EXPECT_EQ(type_of(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, &ud, &ep)), t(DAT_MODEL_NOT_SUPPORTED));
        EXPECT_EQ(type_of(dat_ib_post_send_ud(rc_ep, 1, &l, &ah, cookie(1), DAT_COMPLETION_DEFAULT_FLAG)),
                  t(DAT_MODEL_NOT_SUPPORTED));
        EXPECT_EQ(type_of(dat_ib_ud_ah_free(rc_ep, &ah)), t(DAT_MODEL_NOT_SUPPORTED));
        EXPECT_EQ(type_of(dat_ib_ud_cm_free(rc_ep, nullptr)), t(DAT_MODEL_NOT_SUPPORTED));
    } else {
        EXPECT_EQ(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, &ud, &ep), kOk);
    }
    SKIP_UNLESS_SUPPORTED();
    EXPECT_EQ(type_of(dat_ib_collective_barrier(rc_ep, DAT_CONTEXT{}, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_MODEL_NOT_SUPPORTED));
    EXPECT_EQ(type_of(dat_extension_op(rc_ep, static_cast<DAT_EXTENDED_OP>(0x7ff))), t(DAT_INVALID_PARAMETER));
}

// --- UD endpoints (softnic IAs; verbs IAs over RoCE: the generic and the mlx5 direct path) ---------------------------

class UdEndpoints : public IbExtensions {
protected:
    void SetUp() override
    {
        IbExtensions::SetUp();
        if (provider_specific(ia, DAT_IB_ATTR_UD).value_or("") != "TRUE")
            GTEST_SKIP() << "this IA (" << test_ia_name() << ") has no UD endpoints";
    }
    static DAT_EP_ATTR ud_attr(DAT_VLEN max_message = 1024)
    {
        DAT_EP_ATTR a{};
        a.service_type = static_cast<DAT_SERVICE_TYPE>(DAT_IB_SERVICE_TYPE_UD);
        a.max_message_size = max_message;
        a.max_recv_dtos = a.max_request_dtos = 16;
        a.max_recv_iov = a.max_request_iov = 2;
        return a;
    }
    DAT_EP_HANDLE make_ud(DAT_EVD_HANDLE dto, DAT_EVD_HANDLE conn)
    {
        DAT_EP_ATTR a = ud_attr();
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        EXPECT_EQ(dat_ep_create(ia, pz, dto, dto, conn, &a, &ep), kOk);
        return ep;
    }
    // `active` asks `passive` (through a PSP) for its address handle, each
    // with four bytes of private data; both events are checked and kept.
    void exchange(DAT_EP_HANDLE active, DAT_EVD_HANDLE active_conn, DAT_EP_HANDLE passive,
                  DAT_EVD_HANDLE passive_conn)
    {
        DAT_CONN_QUAL qual = 0;
        DAT_PSP_HANDLE psp;
        ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
        ASSERT_EQ(dat_ep_connect(active, attr.ia_address_ptr, qual, kWait, 4, const_cast<char*>("ask!"),
                                 DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
                  kOk);
        DAT_EVENT e = next(cr_evd);
        ASSERT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
        ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, passive, 4, const_cast<char*>("ok!!")),
                  kOk);
        active_event = next(active_conn);
        passive_event = next(passive_conn);
        for (auto [ev, type, pdata] : {std::tuple{&active_event, DAT_IB_UD_REMOTE_AH, "ok!!"},
                                       std::tuple{&passive_event, DAT_IB_UD_PASSIVE_REMOTE_AH, "ask!"}}) {
            ASSERT_EQ(ev->event_number, static_cast<DAT_EVENT_NUMBER>(DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED));
            const auto& x = ext_of(*ev);
            EXPECT_EQ(x.type, type);
            EXPECT_EQ(x.status, DAT_OP_SUCCESS);
            EXPECT_NE(x.remote_ah.ah, nullptr);
            EXPECT_GT(x.remote_ah.qpn, 1u); // not QP0 or QP1; expect_receive checks it is the sender's
            EXPECT_EQ(std::memcmp(&reinterpret_cast<const sockaddr_in&>(x.remote_ah.ia_addr).sin_addr,
                                  &reinterpret_cast<const sockaddr_in*>(attr.ia_address_ptr)->sin_addr, 4),
                      0);
            const auto& c = ev->event_data.connect_event_data;
            ASSERT_EQ(c.private_data_size, 4);
            EXPECT_EQ(std::memcmp(c.private_data, pdata, 4), 0);
        }
        EXPECT_EQ(active_event.event_data.connect_event_data.ep_handle, active);
        EXPECT_EQ(passive_event.event_data.connect_event_data.ep_handle, passive);
        ASSERT_EQ(dat_psp_free(psp), kOk);
        // Neither endpoint is connected: each may ask or answer more peers.
        for (DAT_EP_HANDLE ep : {active, passive}) {
            DAT_EP_STATE state;
            DAT_BOOLEAN in, out;
            ASSERT_EQ(dat_ep_get_status(ep, &state, &in, &out), kOk);
            EXPECT_EQ(state, DAT_EP_STATE_UNCONNECTED);
        }
    }
    DAT_IB_ADDR_HANDLE ah_of(const DAT_EVENT& e) { return ext_of(e).remote_ah; }
    // Expects the receive of `length` payload bytes after the GRH at `offset`.
    void expect_receive(DAT_EVD_HANDLE dto, std::uint64_t recv_cookie, std::size_t offset, const char* payload,
                        std::size_t length, std::uint32_t sender_qpn)
    {
        const DAT_EVENT e = next(dto);
        ASSERT_EQ(e.event_number, kIbDtoEvent);
        const auto& d = e.event_data.dto_completion_event_data;
        EXPECT_EQ(d.status, DAT_DTO_SUCCESS);
        EXPECT_EQ(d.user_cookie.as_64, recv_cookie);
        EXPECT_EQ(static_cast<int>(d.operation), static_cast<int>(DAT_IB_DTO_RECV_UD));
        EXPECT_EQ(d.transfered_length, 40 + length);
        EXPECT_EQ(ext_of(e).type, DAT_IB_UD_RECV);
        EXPECT_EQ(ext_of(e).remote_ah.qpn, sender_qpn);
        EXPECT_EQ(ext_of(e).remote_ah.ah, nullptr);
        EXPECT_EQ(std::memcmp(buffer.data() + offset + 40, payload, length), 0);
    }
    void expect_send(DAT_EVD_HANDLE dto, std::uint64_t send_cookie, std::size_t length)
    {
        const DAT_EVENT e = next(dto);
        ASSERT_EQ(e.event_number, kIbDtoEvent);
        const auto& d = e.event_data.dto_completion_event_data;
        EXPECT_EQ(d.status, DAT_DTO_SUCCESS);
        EXPECT_EQ(d.user_cookie.as_64, send_cookie);
        EXPECT_EQ(static_cast<int>(d.operation), static_cast<int>(DAT_IB_DTO_SEND_UD));
        EXPECT_EQ(d.transfered_length, length);
        EXPECT_EQ(ext_of(e).type, DAT_IB_UD_SEND);
    }
    bool quiet(DAT_EVD_HANDLE evd)
    {
        DAT_EVENT e{};
        DAT_COUNT nmore;
        return DAT_GET_TYPE(dat_evd_wait(evd, 200000, 1, &e, &nmore)) == DAT_TIMEOUT_EXPIRED;
    }
    DAT_EVENT active_event{}, passive_event{};
};

TEST_F(UdEndpoints, CreateQueryAndWhatAUdEndpointRefuses)
{
    // A message is one datagram of at most the MTU the IA reports.
    const DAT_VLEN mtu = std::stoul(provider_specific(ia, "DAT_IB_TRANSPORT_MTU").value_or("0"));
    ASSERT_GE(mtu, 256u);
    DAT_EP_ATTR a = ud_attr(mtu);
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ASSERT_EQ(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, &a, &ep), kOk);
    DAT_EP_PARAM p{};
    ASSERT_EQ(dat_ep_query(ep, DAT_EP_FIELD_ALL, &p), kOk);
    EXPECT_EQ(static_cast<int>(p.ep_attr.service_type), static_cast<int>(DAT_IB_SERVICE_TYPE_UD));
    EXPECT_EQ(p.ep_attr.max_message_size, mtu);
    a = ud_attr(mtu + 1);
    DAT_EP_HANDLE big = DAT_HANDLE_NULL;
    EXPECT_EQ(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, &a, &big), err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6));
    // No RDMA, atomics, plain sends or write with immediate data over UD.
    DAT_LMR_TRIPLET l = local(0, 8);
    DAT_RMR_TRIPLET r = remote(64, 8);
    EXPECT_EQ(type_of(dat_ep_post_rdma_write(ep, 1, &l, cookie(1), &r, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_MODEL_NOT_SUPPORTED));
    EXPECT_EQ(type_of(dat_ep_post_rdma_read(ep, 1, &l, cookie(1), &r, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_MODEL_NOT_SUPPORTED));
    EXPECT_EQ(type_of(dat_ep_post_send(ep, 1, &l, cookie(1), DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_MODEL_NOT_SUPPORTED));
    EXPECT_EQ(type_of(dat_ib_post_rdma_write_immed(ep, 1, &l, cookie(1), &r, 7, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_MODEL_NOT_SUPPORTED));
    EXPECT_EQ(type_of(dat_ib_post_fetch_and_add(ep, 1, &l, cookie(1), &r, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_MODEL_NOT_SUPPORTED));
    // The service type is the queue pair's for life.
    DAT_EP_PARAM rc{};
    rc.ep_attr = p.ep_attr;
    rc.ep_attr.service_type = DAT_SERVICE_TYPE_RC;
    EXPECT_EQ(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE, &rc), err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    // UD operations on an RC endpoint, and bad arguments.
    DAT_EP_HANDLE rc_ep = make_ep(dto_a, conn_a);
    DAT_IB_ADDR_HANDLE ah{};
    EXPECT_EQ(dat_ib_post_send_ud(rc_ep, 1, &l, &ah, cookie(1), DAT_COMPLETION_DEFAULT_FLAG),
              err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
    EXPECT_EQ(dat_ib_ud_ah_free(rc_ep, &ah), err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
    EXPECT_EQ(dat_ib_ud_cm_free(rc_ep, nullptr), err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1));
    EXPECT_EQ(dat_ib_post_send_ud(ep, 1, &l, nullptr, cookie(1), DAT_COMPLETION_DEFAULT_FLAG),
              err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    EXPECT_EQ(dat_ib_post_send_ud(ep, 3, &l, &ah, cookie(1), DAT_COMPLETION_DEFAULT_FLAG),
              err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    EXPECT_EQ(dat_ib_post_send_ud(ep, 1, &l, &ah, cookie(1), static_cast<DAT_COMPLETION_FLAGS>(0x4000)),
              err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6));
    DAT_LMR_TRIPLET too_long = local(0, mtu + 1);
    EXPECT_EQ(type_of(dat_ib_post_send_ud(ep, 1, &too_long, &ah, cookie(1), DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_LENGTH_ERROR));
    // An address handle the provider did not make is refused, not read.
    EXPECT_EQ(dat_ib_post_send_ud(ep, 1, &l, &ah, cookie(1), DAT_COMPLETION_DEFAULT_FLAG),
              err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    ah.ah = reinterpret_cast<ibv_ah*>(buffer.data());
    EXPECT_EQ(dat_ib_post_send_ud(ep, 1, &l, &ah, cookie(1), DAT_COMPLETION_DEFAULT_FLAG),
              err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    EXPECT_EQ(dat_ib_ud_ah_free(ep, &ah), err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    EXPECT_EQ(dat_ib_ud_ah_free(ep, nullptr), err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    EXPECT_EQ(dat_ib_ud_cm_free(ep, reinterpret_cast<void*>(0x1234)), err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    EXPECT_TRUE(quiet(dto_a));
    EXPECT_EQ(dat_ep_free(ep), kOk);
    EXPECT_EQ(type_of(dat_ib_ud_ah_free(ep, &ah)), t(DAT_INVALID_HANDLE));
}

TEST_F(UdEndpoints, AddressHandlesBothWaysThenDatagramsBehindAGrh)
{
    DAT_EP_HANDLE a = make_ud(dto_a, conn_a), b = make_ud(dto_b, conn_b);
    exchange(a, conn_a, b, conn_b);
    const DAT_IB_ADDR_HANDLE to_b = ah_of(active_event), to_a = ah_of(passive_event);
    // a -> b, in two segments.
    DAT_LMR_TRIPLET recv_b = local(4096, 40 + 64);
    ASSERT_EQ(dat_ep_post_recv(b, 1, &recv_b, cookie(0xb1), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    std::memcpy(buffer.data(), "hello, ", 7);
    std::memcpy(buffer.data() + 100, "world", 5);
    DAT_LMR_TRIPLET send[2] = {local(0, 7), local(100, 5)};
    ASSERT_EQ(dat_ib_post_send_ud(a, 2, send, &to_b, cookie(0xa1), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    expect_send(dto_a, 0xa1, 12);
    expect_receive(dto_b, 0xb1, 4096, "hello, world", 12, to_a.qpn);
    // The GRH: IP version 6 as IB writes it, or (RoCE v2 over IPv4) 20
    // bytes then the IPv4 header.
    EXPECT_TRUE(static_cast<std::uint8_t>(buffer[4096]) == 0x60 || static_cast<std::uint8_t>(buffer[4096 + 20]) == 0x45)
        << std::hex << static_cast<int>(static_cast<std::uint8_t>(buffer[4096]));
    // b -> a with the handle of the passive side's event.
    DAT_LMR_TRIPLET recv_a = local(8192, 40 + 64);
    ASSERT_EQ(dat_ep_post_recv(a, 1, &recv_a, cookie(0xa2), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    std::memcpy(buffer.data() + 200, "back", 4);
    DAT_LMR_TRIPLET reply = local(200, 4);
    ASSERT_EQ(dat_ib_post_send_ud(b, 1, &reply, &to_a, cookie(0xb2), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    expect_send(dto_b, 0xb2, 4);
    expect_receive(dto_a, 0xa2, 8192, "back", 4, to_b.qpn);
    // Counted as the reference counts them.
    DAT_UINT64 sent = 0, received = 0;
    ASSERT_EQ(dat_ib_query_counters(a, DCNT_EP_POST_SEND_UD, &sent, 0), kOk);
    ASSERT_EQ(dat_ib_query_counters(b, DCNT_EP_RECV_UD, &received, 0), kOk);
    EXPECT_EQ(sent, 1u);
    EXPECT_EQ(received, 1u);
}

TEST_F(UdEndpoints, DatagramLargerThanTheBufferIsDroppedAndTheNextArrives)
{
    DAT_EP_HANDLE a = make_ud(dto_a, conn_a), b = make_ud(dto_b, conn_b);
    exchange(a, conn_a, b, conn_b);
    DAT_IB_ADDR_HANDLE to_b = ah_of(active_event);
    std::memset(buffer.data() + 4096, 'c', 40 + 16);
    DAT_LMR_TRIPLET recv_b = local(4096, 40 + 8);
    ASSERT_EQ(dat_ep_post_recv(b, 1, &recv_b, cookie(7), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_LMR_TRIPLET big = local(0, 9), small = local(100, 8);
    std::memcpy(buffer.data() + 100, "8 bytes!", 8);
    ASSERT_EQ(dat_ib_post_send_ud(a, 1, &big, &to_b, cookie(1), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    expect_send(dto_a, 1, 9); // the sender does not hear of the drop
    // The softnic drops it before the buffer; a verbs device completes the
    // buffer in error instead (docs/ud-endpoints.md): a length error, after
    // which the endpoint goes on, as the IB spec has it; or, on rdma_rxe, a
    // queue pair error that stops the endpoint's queue pair (the endpoint is
    // lost, the IA and its other endpoints are not).
    DAT_EVENT dropped{};
    DAT_COUNT nmore;
    if (DAT_GET_TYPE(dat_evd_wait(dto_b, 200000, 1, &dropped, &nmore)) == DAT_TIMEOUT_EXPIRED) {
        EXPECT_EQ(buffer[4096], 'c');
    } else {
        ASSERT_EQ(dropped.event_number, kIbDtoEvent);
        const DAT_DTO_COMPLETION_STATUS status = dropped.event_data.dto_completion_event_data.status;
        EXPECT_EQ(dropped.event_data.dto_completion_event_data.user_cookie.as_64, 7u);
        EXPECT_EQ(buffer[4096 + 48], 'c'); // nothing past the buffer
        if (ia_is_verbs(ia) && status == DAT_DTO_ERR_LOCAL_EP) {
            ASSERT_EQ(dat_ep_free(b), kOk);
            b = make_ud(dto_b, conn_b);
            exchange(a, conn_a, b, conn_b);
            to_b = ah_of(active_event);
        } else {
            EXPECT_EQ(status, DAT_DTO_ERR_LOCAL_LENGTH);
        }
        ASSERT_EQ(dat_ep_post_recv(b, 1, &recv_b, cookie(7), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    }
    ASSERT_EQ(dat_ib_post_send_ud(a, 1, &small, &to_b, cookie(2), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    expect_send(dto_a, 2, 8);
    expect_receive(dto_b, 7, 4096, "8 bytes!", 8, ah_of(passive_event).qpn);
    EXPECT_EQ(buffer[4096 + 48], 'c'); // nothing past the buffer
}

TEST_F(UdEndpoints, FreesAndTheirInvalidHandles)
{
    DAT_EP_HANDLE a = make_ud(dto_a, conn_a), b = make_ud(dto_b, conn_b);
    exchange(a, conn_a, b, conn_b);
    DAT_IB_ADDR_HANDLE to_b = ah_of(active_event);
    const DAT_CONTEXT cm_a = ext_of(active_event).context, cm_b = ext_of(passive_event).context;
    EXPECT_EQ(dat_ib_ud_cm_free(b, cm_a.as_ptr), err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2)); // a's, not b's
    EXPECT_EQ(dat_ib_ud_cm_free(a, cm_a.as_ptr), kOk);
    EXPECT_EQ(dat_ib_ud_cm_free(a, cm_a.as_ptr), err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2)); // once only
    EXPECT_EQ(dat_ib_ud_cm_free(b, cm_b.as_ptr), kOk);
    // The handle still works after its CM object went.
    DAT_LMR_TRIPLET recv_b = local(4096, 64);
    ASSERT_EQ(dat_ep_post_recv(b, 1, &recv_b, cookie(3), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_LMR_TRIPLET l = local(0, 4);
    ASSERT_EQ(dat_ib_post_send_ud(a, 1, &l, &to_b, cookie(4), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    expect_send(dto_a, 4, 4);
    EXPECT_EQ(next(dto_b).event_number, kIbDtoEvent);
    EXPECT_EQ(dat_ib_ud_ah_free(a, &to_b), kOk);
    EXPECT_EQ(dat_ib_ud_ah_free(a, &to_b), err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    EXPECT_EQ(dat_ib_post_send_ud(a, 1, &l, &to_b, cookie(5), DAT_COMPLETION_DEFAULT_FLAG),
              err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4));
    EXPECT_EQ(type_of(dat_ib_ud_cm_free(DAT_HANDLE_NULL, cm_a.as_ptr)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_ib_ud_ah_free(pz, &to_b)), t(DAT_INVALID_HANDLE));
    // Exchanged again, a new handle.
    exchange(a, conn_a, b, conn_b);
    EXPECT_EQ(dat_ib_ud_ah_free(a, &to_b), err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2)); // the old one stays freed
    DAT_IB_ADDR_HANDLE again = ah_of(active_event);
    EXPECT_EQ(dat_ib_ud_ah_free(a, &again), kOk);
}

TEST_F(UdEndpoints, RejectsNoListenerAndMismatchedServiceTypes)
{
    DAT_EP_HANDLE a = make_ud(dto_a, conn_a), b = make_ud(dto_b, conn_b);
    DAT_EP_HANDLE rc_ep = make_ep(dto_c, conn_b);
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
    // The consumer rejects: REJECT, with its private data.
    ASSERT_EQ(dat_ep_connect(a, attr.ia_address_ptr, qual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT,
                             DAT_CONNECT_DEFAULT_FLAG),
              kOk);
    DAT_EVENT e = next(cr_evd);
    ASSERT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
    DAT_CR_HANDLE cr = e.event_data.cr_arrival_event_data.cr_handle;
    // A UD request goes to a UD endpoint only (the CR stays usable).
    EXPECT_EQ(dat_cr_accept(cr, rc_ep, 0, nullptr), err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    ASSERT_EQ(dat_cr_reject(cr, 2, const_cast<char*>("no")), kOk);
    e = next(conn_a);
    EXPECT_EQ(e.event_number, static_cast<DAT_EVENT_NUMBER>(DAT_IB_UD_CONNECTION_REJECT_EVENT));
    // An RC request goes to an RC endpoint only.
    DAT_EP_HANDLE rc_active = make_ep(dto_c, conn_a);
    ASSERT_EQ(dat_ep_connect(rc_active, attr.ia_address_ptr, qual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT,
                             DAT_CONNECT_DEFAULT_FLAG),
              kOk);
    e = next(cr_evd);
    ASSERT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
    EXPECT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, b, 0, nullptr),
              err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    ASSERT_EQ(dat_cr_reject(e.event_data.cr_arrival_event_data.cr_handle, 0, nullptr), kOk);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_PEER_REJECTED);
    ASSERT_EQ(dat_psp_free(psp), kOk);
    // Nobody listens: an error event, the EP still usable.
    ASSERT_EQ(dat_ep_connect(a, attr.ia_address_ptr, qual, 500000, 0, nullptr, DAT_QOS_BEST_EFFORT,
                             DAT_CONNECT_DEFAULT_FLAG),
              kOk);
    DAT_EVENT err{};
    DAT_COUNT nmore;
    ASSERT_EQ(dat_evd_wait(conn_a, 10000000, 1, &err, &nmore), kOk);
    EXPECT_EQ(err.event_number, static_cast<DAT_EVENT_NUMBER>(DAT_IB_UD_CONNECTION_ERROR_EVENT));
    exchange(a, conn_a, b, conn_b);
}

TEST_F(UdEndpoints, DatagramsIntoASharedReceiveQueue)
{
    DAT_SRQ_ATTR srq_attr{};
    srq_attr.max_recv_dtos = 8;
    srq_attr.max_recv_iov = 1;
    DAT_SRQ_HANDLE srq;
    ASSERT_EQ(dat_srq_create(ia, pz, &srq_attr, &srq), kOk);
    DAT_EP_ATTR ud = ud_attr();
    DAT_EP_HANDLE b = DAT_HANDLE_NULL;
    ASSERT_EQ(dat_ep_create_with_srq(ia, pz, dto_b, dto_b, conn_b, srq, &ud, &b), kOk);
    DAT_EP_HANDLE a = make_ud(dto_a, conn_a);
    exchange(a, conn_a, b, conn_b);
    const DAT_IB_ADDR_HANDLE to_b = ah_of(active_event);
    for (int i = 0; i < 2; ++i) {
        DAT_LMR_TRIPLET r = local(4096 + 128 * i, 128);
        ASSERT_EQ(dat_srq_post_recv(srq, 1, &r, cookie(0x50 + i)), kOk);
    }
    std::memcpy(buffer.data(), "srq", 3);
    DAT_LMR_TRIPLET l = local(0, 3);
    ASSERT_EQ(dat_ib_post_send_ud(a, 1, &l, &to_b, cookie(9), DAT_COMPLETION_DEFAULT_FLAG), kOk);
    expect_send(dto_a, 9, 3);
    expect_receive(dto_b, 0x50, 4096, "srq", 3, ah_of(passive_event).qpn);
    EXPECT_EQ(dat_ep_free(b), kOk);
    EXPECT_EQ(dat_srq_free(srq), kOk);
}

} // namespace
