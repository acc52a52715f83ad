// Remote memory regions through the public DAT API: create (PZ and EP
// scope), bind as a posted request with its DAT_RMR_BIND_COMPLETION_EVENT,
// remote access through the window and nowhere else, rebind, unbind,
// query, free, and every error the calls document. On an IA whose device
// kind binds no windows (max_rmrs 0) the calls answer MODEL_NOT_SUPPORTED.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "connect_through_psp.hpp"

#include <dat2/udat.h>

#include <sys/mman.h>

#include "test_ia.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr DAT_RETURN kOk = DAT_SUCCESS;
constexpr DAT_TIMEOUT kWait = 5000000; // 5 s, in µs
DAT_RETURN type_of(DAT_RETURN rc) { return DAT_GET_TYPE(rc); }
DAT_RETURN t(DAT_RETURN type) { return type; }

class Rmrs : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(dat_ia_open(test_ia_name(), 16, &async, &ia), kOk);
        ASSERT_EQ(dat_pz_create(ia, &pz), kOk);
        ASSERT_EQ(dat_pz_create(ia, &other_pz), kOk);
        for (DAT_EVD_HANDLE* evd : {&dto_a, &dto_b})
            ASSERT_EQ(dat_evd_create(ia, 64, DAT_HANDLE_NULL,
                                     static_cast<DAT_EVD_FLAGS>(DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG), evd),
                      kOk);
        for (DAT_EVD_HANDLE* evd : {&conn_a, &conn_b})
            ASSERT_EQ(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, evd), kOk);
        ASSERT_EQ(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd), kOk);
        DAT_IA_ATTR attr{};
        ASSERT_EQ(dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &attr, 0, nullptr), kOk);
        address = attr.ia_address_ptr;
        max_rmrs = attr.max_rmrs;
        buffer.assign(1 << 16, 0);
        DAT_REGION_DESCRIPTION region{};
        region.for_va = buffer.data();
        ASSERT_EQ(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, buffer.size(), pz,
                                 static_cast<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_LOCAL_READ_FLAG |
                                                                 DAT_MEM_PRIV_LOCAL_WRITE_FLAG),
                                 DAT_VA_TYPE_VA, &lmr, &lmr_context, nullptr, nullptr, nullptr),
                  kOk);
    }
    void TearDown() override
    {
        if (ia) {
            EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), kOk);
        }
    }
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
    void connect_pair(DAT_EP_HANDLE& active, DAT_EP_HANDLE& passive)
    {
        active = make_ep(dto_a, conn_a);
        passive = make_ep(dto_b, conn_b);
        fastdapl_test::connect_through_psp(ia, address, cr_evd, active, conn_a, passive, conn_b);
    }
    DAT_LMR_TRIPLET piece(std::size_t offset, DAT_SEG_LENGTH length)
    {
        return {reinterpret_cast<DAT_VADDR>(buffer.data() + offset), length, lmr_context};
    }
    // Binds `rmr` on `ep` over `range` and takes its completion from `evd`.
    DAT_RMR_CONTEXT bind(DAT_RMR_HANDLE rmr, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd, DAT_LMR_TRIPLET range,
                         DAT_MEM_PRIV_FLAGS rights, std::uint64_t cookie, DAT_VA_TYPE va_type = DAT_VA_TYPE_VA)
    {
        DAT_RMR_CONTEXT context = 0;
        EXPECT_EQ(dat_rmr_bind(rmr, lmr, &range, rights, va_type, ep, DAT_RMR_COOKIE{.as_64 = cookie},
                               DAT_COMPLETION_DEFAULT_FLAG, &context),
                  kOk);
        DAT_EVENT e = next(evd);
        EXPECT_EQ(e.event_number, DAT_RMR_BIND_COMPLETION_EVENT);
        EXPECT_EQ(e.event_data.rmr_completion_event_data.rmr_handle, rmr);
        EXPECT_EQ(e.event_data.rmr_completion_event_data.user_cookie.as_64, cookie);
        EXPECT_EQ(e.event_data.rmr_completion_event_data.status, DAT_RMR_BIND_SUCCESS);
        return context;
    }
    // An RDMA write of `length` bytes from offset 0 to `remote`; its status.
    DAT_DTO_COMPLETION_STATUS write(DAT_EP_HANDLE from, DAT_RMR_TRIPLET remote, DAT_SEG_LENGTH length)
    {
        DAT_LMR_TRIPLET local = piece(0, length);
        EXPECT_EQ(dat_ep_post_rdma_write(from, 1, &local, DAT_DTO_COOKIE{.as_64 = 9}, &remote,
                                         DAT_COMPLETION_DEFAULT_FLAG),
                  kOk);
        return next(dto_a).event_data.dto_completion_event_data.status;
    }
    // Binds `rmr` zero-based on `ep` over `range`; takes the completion.
    DAT_RMR_CONTEXT bind_zero_based(DAT_RMR_HANDLE rmr, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd, DAT_LMR_TRIPLET range,
                                    DAT_MEM_PRIV_FLAGS rights, std::uint64_t cookie)
    {
        return bind(rmr, ep, evd, range, rights, cookie, DAT_VA_TYPE_ZB);
    }
    // An RDMA read from `remote` to offset `into`; its status.
    DAT_DTO_COMPLETION_STATUS read(DAT_EP_HANDLE from, std::size_t into, DAT_RMR_TRIPLET remote)
    {
        DAT_LMR_TRIPLET local = piece(into, remote.segment_length);
        EXPECT_EQ(dat_ep_post_rdma_read(from, 1, &local, DAT_DTO_COOKIE{.as_64 = 5}, &remote,
                                        DAT_COMPLETION_DEFAULT_FLAG),
                  kOk);
        return next(dto_a).event_data.dto_completion_event_data.status;
    }
    bool supported() const { return max_rmrs > 0; }

    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL, other_pz = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE dto_a, dto_b, conn_a, conn_b, cr_evd;
    DAT_IA_ADDRESS_PTR address = nullptr;
    DAT_COUNT max_rmrs = 0;
    std::vector<char> buffer;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lmr_context;
};

constexpr auto kRemoteRW =
    static_cast<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG);

TEST_F(Rmrs, AttributesSayWhetherWindowsAreThere)
{
    DAT_PROVIDER_ATTR p{};
    ASSERT_EQ(dat_ia_query(ia, nullptr, 0, nullptr, DAT_PROVIDER_FIELD_ALL, &p), kOk);
    DAT_RMR_HANDLE rmr;
    if (!supported()) {
        EXPECT_EQ(type_of(dat_rmr_create(pz, &rmr)), t(DAT_MODEL_NOT_SUPPORTED));
        EXPECT_EQ(type_of(dat_rmr_create_for_ep(pz, &rmr)), t(DAT_MODEL_NOT_SUPPORTED));
        GTEST_SKIP() << "this IA's device kind binds no memory windows (max_rmrs 0)";
    }
    EXPECT_EQ(p.rmr_scope_supported, DAT_RMR_SCOPE_ANY);
    EXPECT_EQ(type_of(dat_rmr_create(ia, &rmr)), t(DAT_INVALID_HANDLE)); // not a PZ
    EXPECT_EQ(type_of(dat_rmr_create(pz, nullptr)), t(DAT_INVALID_PARAMETER));
    ASSERT_EQ(dat_rmr_create(pz, &rmr), kOk);
    DAT_HANDLE_TYPE type;
    ASSERT_EQ(dat_get_handle_type(rmr, &type), kOk);
    EXPECT_EQ(type, DAT_HANDLE_TYPE_RMR);
    DAT_RMR_PARAM q{};
    ASSERT_EQ(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &q), kOk);
    EXPECT_EQ(q.pz_handle, pz);
    EXPECT_EQ(q.rmr_scope, DAT_RMR_SCOPE_PZ);
    EXPECT_EQ(q.rmr_context, 0u); // unbound
    EXPECT_EQ(q.lmr_triplet.segment_length, 0u);
    EXPECT_EQ(type_of(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, nullptr)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_rmr_query(rmr, static_cast<DAT_RMR_PARAM_MASK>(0x100), &q)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_rmr_query(pz, DAT_RMR_FIELD_ALL, &q)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_pz_free(pz)), t(DAT_INVALID_STATE)); // the RMR is in it
    ASSERT_EQ(dat_rmr_free(rmr), kOk);
    EXPECT_EQ(type_of(dat_rmr_free(rmr)), t(DAT_INVALID_HANDLE));
    DAT_RMR_HANDLE ep_scoped;
    ASSERT_EQ(dat_rmr_create_for_ep(pz, &ep_scoped), kOk);
    ASSERT_EQ(dat_rmr_query(ep_scoped, DAT_RMR_FIELD_ALL, &q), kOk);
    EXPECT_EQ(q.rmr_scope, DAT_RMR_SCOPE_EP);
    ASSERT_EQ(dat_rmr_free(ep_scoped), kOk);
}

TEST_F(Rmrs, BoundWindowGivesRemoteAccessToItsRangeOnly)
{
    if (!supported())
        GTEST_SKIP() << "no memory windows on this IA";
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    DAT_RMR_HANDLE rmr;
    ASSERT_EQ(dat_rmr_create(pz, &rmr), kOk);
    const DAT_LMR_TRIPLET window = piece(8192, 1024);
    const DAT_RMR_CONTEXT ctx = bind(rmr, b, dto_b, window, kRemoteRW, 77);
    ASSERT_NE(ctx, 0u);
    DAT_RMR_PARAM q{};
    ASSERT_EQ(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &q), kOk);
    EXPECT_EQ(q.rmr_context, ctx);
    EXPECT_EQ(q.lmr_triplet.virtual_address, window.virtual_address);
    EXPECT_EQ(q.lmr_triplet.segment_length, 1024u);
    EXPECT_EQ(q.mem_priv, kRemoteRW);
    EXPECT_EQ(type_of(dat_lmr_free(lmr)), t(DAT_INVALID_STATE)); // the window uses it

    // A write and a read through the window.
    std::memcpy(buffer.data(), "through the window", 18);
    EXPECT_EQ(write(a, {window.virtual_address + 100, 18, ctx}, 18), DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(buffer.data() + 8192 + 100, 18), "through the window");
    DAT_LMR_TRIPLET into = piece(4096, 18);
    DAT_RMR_TRIPLET from{window.virtual_address + 100, 18, ctx};
    ASSERT_EQ(dat_ep_post_rdma_read(a, 1, &into, DAT_DTO_COOKIE{.as_64 = 3}, &from, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    EXPECT_EQ(next(dto_a).event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(buffer.data() + 4096, 18), "through the window");

    // The LMR's own context gives no remote access (it has no remote rights),
    // and the window's ends where it ends: a remote access error, the
    // connection broken, the memory untouched.
    std::memset(buffer.data() + 8192 + 1024, 0x5a, 64);
    EXPECT_NE(write(a, {window.virtual_address + 1000, 64, ctx}, 64), DAT_DTO_SUCCESS);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_BROKEN);
    EXPECT_EQ(buffer[8192 + 1024], 0x5a);
    ASSERT_EQ(dat_rmr_free(rmr), kOk);
    EXPECT_EQ(dat_lmr_free(lmr), kOk); // no window on it now
}

TEST_F(Rmrs, RebindRetiresTheOldContextAndUnbindEndsAccess)
{
    if (!supported())
        GTEST_SKIP() << "no memory windows on this IA";
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    DAT_RMR_HANDLE rmr;
    ASSERT_EQ(dat_rmr_create(pz, &rmr), kOk);
    const DAT_RMR_CONTEXT first = bind(rmr, b, dto_b, piece(8192, 1024), kRemoteRW, 1);
    const DAT_RMR_CONTEXT second = bind(rmr, b, dto_b, piece(16384, 512), DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 2);
    EXPECT_NE(first, second);
    std::memcpy(buffer.data(), "rebound", 7);
    EXPECT_EQ(write(a, {reinterpret_cast<DAT_VADDR>(buffer.data() + 16384), 7, second}, 7), DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(buffer.data() + 16384, 7), "rebound");

    // A suppressed bind reports nothing, yet binds.
    DAT_RMR_CONTEXT third = 0;
    DAT_LMR_TRIPLET range = piece(20000, 256);
    ASSERT_EQ(dat_rmr_bind(rmr, lmr, &range, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, b, DAT_RMR_COOKIE{},
                           DAT_COMPLETION_SUPPRESS_FLAG, &third),
              kOk);
    ASSERT_NE(third, 0u);
    EXPECT_EQ(write(a, {reinterpret_cast<DAT_VADDR>(buffer.data() + 20000), 7, third}, 7), DAT_DTO_SUCCESS);
    DAT_EVENT e{};
    EXPECT_EQ(type_of(dat_evd_dequeue(dto_b, &e)), t(DAT_QUEUE_EMPTY));

    // Unbind (length 0): the query shows no binding; the old context fails.
    DAT_LMR_TRIPLET none{};
    DAT_RMR_CONTEXT after = 1;
    ASSERT_EQ(dat_rmr_bind(rmr, DAT_HANDLE_NULL, &none, DAT_MEM_PRIV_NONE_FLAG, DAT_VA_TYPE_VA, b,
                           DAT_RMR_COOKIE{.as_64 = 4}, DAT_COMPLETION_DEFAULT_FLAG, &after),
              kOk);
    e = next(dto_b);
    EXPECT_EQ(e.event_number, DAT_RMR_BIND_COMPLETION_EVENT);
    EXPECT_EQ(e.event_data.rmr_completion_event_data.user_cookie.as_64, 4u);
    DAT_RMR_PARAM q{};
    ASSERT_EQ(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &q), kOk);
    EXPECT_EQ(q.rmr_context, 0u);
    EXPECT_EQ(dat_lmr_free(lmr), kOk); // unbound: the LMR is free to go
    std::memset(buffer.data() + 16384, 0, 16);
    EXPECT_NE(write(a, {reinterpret_cast<DAT_VADDR>(buffer.data() + 16384), 7, second}, 7), DAT_DTO_SUCCESS);
    EXPECT_EQ(buffer[16384], 0);
}

TEST_F(Rmrs, EndpointScopedWindowServesOnlyItsConnection)
{
    if (!supported())
        GTEST_SKIP() << "no memory windows on this IA";
    DAT_EP_HANDLE a, b, c, d;
    connect_pair(a, b);
    connect_pair(c, d); // c on dto_a/conn_a too, d on dto_b/conn_b
    DAT_RMR_HANDLE rmr;
    ASSERT_EQ(dat_rmr_create_for_ep(pz, &rmr), kOk);
    const DAT_RMR_CONTEXT ctx = bind(rmr, b, dto_b, piece(8192, 1024), DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 5);
    std::memcpy(buffer.data(), "scoped", 6);
    EXPECT_EQ(write(a, {reinterpret_cast<DAT_VADDR>(buffer.data() + 8192), 6, ctx}, 6), DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(buffer.data() + 8192, 6), "scoped");
    // The same context over the other connection (c -> d) is refused.
    std::memset(buffer.data() + 8192, 0, 6);
    EXPECT_NE(write(c, {reinterpret_cast<DAT_VADDR>(buffer.data() + 8192), 6, ctx}, 6), DAT_DTO_SUCCESS);
    EXPECT_EQ(buffer[8192], 0);
}

// An EP-scoped RMR rebound while bound, on its own EP and then on another
// (on verbs and the mlx5 direct path a type 2 window, which IB binds only
// while free: the provider frees it first, or, bound for another queue
// pair, replaces it); each bind retires the context before it, serves only
// its own connection, and an unbind through yet another EP ends it.
TEST_F(Rmrs, EndpointScopedWindowRebindsOnItsEndpointAndOnAnother)
{
    if (!supported())
        GTEST_SKIP() << "no memory windows on this IA";
    DAT_EP_HANDLE a, b, c, d;
    connect_pair(a, b);
    connect_pair(c, d);
    DAT_RMR_HANDLE rmr;
    ASSERT_EQ(dat_rmr_create_for_ep(pz, &rmr), kOk);
    const auto at = [&](std::size_t offset, DAT_RMR_CONTEXT ctx) {
        return DAT_RMR_TRIPLET{reinterpret_cast<DAT_VADDR>(buffer.data() + offset), 6, ctx};
    };
    std::memcpy(buffer.data(), "window", 6);
    const DAT_RMR_CONTEXT first = bind(rmr, b, dto_b, piece(8192, 1024), DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 1);
    EXPECT_EQ(write(a, at(8192, first), 6), DAT_DTO_SUCCESS);
    const DAT_RMR_CONTEXT second = bind(rmr, b, dto_b, piece(16384, 1024), DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 2);
    EXPECT_NE(second, first);
    EXPECT_EQ(write(a, at(16384, second), 6), DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(buffer.data() + 16384, 6), "window");
    // Moved to d (the c -> d connection): only c reaches it now.
    const DAT_RMR_CONTEXT third = bind(rmr, d, dto_b, piece(24576, 1024), DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 3);
    EXPECT_NE(third, second);
    EXPECT_EQ(write(c, at(24576, third), 6), DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(buffer.data() + 24576, 6), "window");
    std::memset(buffer.data() + 24576, 0, 6);
    EXPECT_NE(write(a, at(24576, third), 6), DAT_DTO_SUCCESS); // a -> b: not its connection
    EXPECT_EQ(buffer[24576], 0);
    // The old contexts, over their old connection (broken by the refusal
    // above): nothing lands.
    std::memset(buffer.data() + 16384, 0, 6);
    EXPECT_NE(write(a, at(16384, second), 6), DAT_DTO_SUCCESS);
    EXPECT_EQ(buffer[16384], 0);
    // Unbound through b, whose connection is broken: the unbind is flushed,
    // and the RMR reads unbound; the window no longer serves c.
    DAT_LMR_TRIPLET none{};
    DAT_RMR_CONTEXT after = 1;
    ASSERT_EQ(dat_rmr_bind(rmr, DAT_HANDLE_NULL, &none, DAT_MEM_PRIV_NONE_FLAG, DAT_VA_TYPE_VA, b,
                           DAT_RMR_COOKIE{.as_64 = 4}, DAT_COMPLETION_DEFAULT_FLAG, &after),
              kOk);
    DAT_EVENT e = next(dto_b);
    while (e.event_number == DAT_DTO_COMPLETION_EVENT) // b's flushed receives, if any
        e = next(dto_b);
    EXPECT_EQ(e.event_number, DAT_RMR_BIND_COMPLETION_EVENT);
    EXPECT_EQ(e.event_data.rmr_completion_event_data.user_cookie.as_64, 4u);
    DAT_RMR_PARAM q{};
    ASSERT_EQ(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &q), kOk);
    EXPECT_EQ(q.rmr_context, 0u);
    // Bound again on d, where it was: served; then freed there.
    const DAT_RMR_CONTEXT fourth = bind(rmr, d, dto_b, piece(8192, 1024), DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 5);
    EXPECT_NE(fourth, third);
    std::memset(buffer.data() + 8192, 0, 6);
    EXPECT_EQ(write(c, at(8192, fourth), 6), DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(buffer.data() + 8192, 6), "window");
    EXPECT_EQ(dat_rmr_free(rmr), kOk);
}

// A window longer than 2 GiB: one KLM of an mlx5 UMR WQE spans at most
// that, so the mlx5 direct path answers DAT_LENGTH_ERROR and the RMR stays
// unbound; the softnic binds it. (The region is reserved, never touched.)
TEST_F(Rmrs, WindowPastTwoGibibytes)
{
    if (!supported())
        GTEST_SKIP() << "no memory windows on this IA";
    const bool direct = ia_is_mlx5_direct(ia);
    if (ia_is_verbs(ia) && !direct)
        GTEST_SKIP() << "generic verbs path: the device's own limit";
    const std::size_t size = (std::size_t{1} << 31) + (std::size_t{1} << 20);
    void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    DAT_REGION_DESCRIPTION region{};
    region.for_va = m;
    DAT_LMR_HANDLE big = DAT_HANDLE_NULL;
    DAT_LMR_CONTEXT big_context = 0;
    ASSERT_EQ(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, size, pz,
                             static_cast<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG),
                             DAT_VA_TYPE_VA, &big, &big_context, nullptr, nullptr, nullptr),
              kOk);
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    DAT_RMR_HANDLE rmr;
    ASSERT_EQ(dat_rmr_create_for_ep(pz, &rmr), kOk);
    DAT_LMR_TRIPLET range{reinterpret_cast<DAT_VADDR>(m), (DAT_SEG_LENGTH{1} << 31) + 4096, big_context};
    DAT_RMR_CONTEXT ctx = 0;
    const DAT_RETURN rc = dat_rmr_bind(rmr, big, &range, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, b,
                                       DAT_RMR_COOKIE{.as_64 = 1}, DAT_COMPLETION_DEFAULT_FLAG, &ctx);
    DAT_RMR_PARAM q{};
    if (direct) {
        EXPECT_EQ(type_of(rc), t(DAT_LENGTH_ERROR));
        ASSERT_EQ(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &q), kOk);
        EXPECT_EQ(q.rmr_context, 0u);
        EXPECT_EQ(q.lmr_triplet.segment_length, 0u);
        // 2 GiB exactly fits one KLM.
        range.segment_length = DAT_SEG_LENGTH{1} << 31;
        ASSERT_EQ(dat_rmr_bind(rmr, big, &range, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, b,
                               DAT_RMR_COOKIE{.as_64 = 2}, DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                  kOk);
    } else {
        ASSERT_EQ(rc, kOk);
    }
    DAT_EVENT e = next(dto_b);
    EXPECT_EQ(e.event_number, DAT_RMR_BIND_COMPLETION_EVENT);
    EXPECT_EQ(e.event_data.rmr_completion_event_data.status, DAT_RMR_BIND_SUCCESS);
    ASSERT_EQ(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &q), kOk);
    EXPECT_EQ(q.rmr_context, ctx);
    EXPECT_EQ(q.lmr_triplet.segment_length, range.segment_length);
    EXPECT_EQ(dat_rmr_free(rmr), kOk);
    EXPECT_EQ(dat_lmr_free(big), kOk);
    munmap(m, size);
}

// A bind is a request on the EP's send queue: where the queue is full (its
// requests not yet completed) the bind is refused at once, nothing posted,
// and the RMR is left unbound.
TEST_F(Rmrs, BindOnAFullSendQueueIsRefused)
{
    if (!supported())
        GTEST_SKIP() << "no memory windows on this IA";
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    DAT_RMR_HANDLE filled, target, rmr;
    ASSERT_EQ(dat_rmr_create(pz, &filled), kOk);
    ASSERT_EQ(dat_rmr_create(pz, &target), kOk);
    const DAT_RMR_CONTEXT ctx = bind(filled, b, dto_b, piece(8192, 1024), DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 1);
    bind(target, b, dto_b, piece(12288, 1024), DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 3);
    ASSERT_EQ(dat_rmr_create_for_ep(pz, &rmr), kOk);
    // Suppressed writes: no completion retires them until a signalled one.
    // They go to an RMR the refused binds leave alone (a refused rebind ends
    // `target`'s binding, and writes still on the wire would then fail).
    DAT_LMR_TRIPLET local = piece(0, 8);
    const DAT_RMR_TRIPLET remote{reinterpret_cast<DAT_VADDR>(buffer.data() + 8192), 8, ctx};
    DAT_RETURN rc = kOk;
    for (int i = 0; i < 100000 && rc == kOk; ++i)
        rc = dat_ep_post_rdma_write(a, 1, &local, DAT_DTO_COOKIE{}, &remote, DAT_COMPLETION_SUPPRESS_FLAG);
    ASSERT_EQ(type_of(rc), t(DAT_INSUFFICIENT_RESOURCES));
    for (DAT_RMR_HANDLE r : {rmr, target}) {
        DAT_LMR_TRIPLET range = piece(16384, 512);
        DAT_RMR_CONTEXT c = 0;
        EXPECT_EQ(type_of(dat_rmr_bind(r, lmr, &range, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, a,
                                       DAT_RMR_COOKIE{.as_64 = 2}, DAT_COMPLETION_DEFAULT_FLAG, &c)),
                  t(DAT_INSUFFICIENT_RESOURCES));
        DAT_RMR_PARAM q{};
        ASSERT_EQ(dat_rmr_query(r, DAT_RMR_FIELD_ALL, &q), kOk);
        EXPECT_EQ(q.rmr_context, 0u);
        EXPECT_EQ(q.lmr_triplet.segment_length, 0u);
    }
    DAT_EVENT e{};
    EXPECT_EQ(type_of(dat_evd_dequeue(dto_a, &e)), t(DAT_QUEUE_EMPTY)) // nothing was posted
        << "event " << std::hex << e.event_number << " status " << e.event_data.dto_completion_event_data.status;
}

TEST_F(Rmrs, BindErrorsLeaveEverythingAsItWas)
{
    if (!supported())
        GTEST_SKIP() << "no memory windows on this IA";
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    DAT_RMR_HANDLE rmr;
    ASSERT_EQ(dat_rmr_create(pz, &rmr), kOk);
    DAT_RMR_CONTEXT ctx = 0;
    DAT_LMR_TRIPLET range = piece(0, 1024);
    const DAT_RMR_COOKIE cookie{};
    const auto try_bind = [&](DAT_RMR_HANDLE r, DAT_LMR_HANDLE l, const DAT_LMR_TRIPLET* what,
                              DAT_MEM_PRIV_FLAGS rights, DAT_VA_TYPE va, DAT_EP_HANDLE ep,
                              DAT_COMPLETION_FLAGS flags = DAT_COMPLETION_DEFAULT_FLAG) {
        return type_of(dat_rmr_bind(r, l, what, rights, va, ep, cookie, flags, &ctx));
    };
    EXPECT_EQ(try_bind(pz, lmr, &range, kRemoteRW, DAT_VA_TYPE_VA, b), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(try_bind(rmr, lmr, &range, kRemoteRW, DAT_VA_TYPE_VA, pz), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(try_bind(rmr, pz, &range, kRemoteRW, DAT_VA_TYPE_VA, b), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(try_bind(rmr, lmr, nullptr, kRemoteRW, DAT_VA_TYPE_VA, b), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(try_bind(rmr, lmr, &range, DAT_MEM_PRIV_LOCAL_WRITE_FLAG, DAT_VA_TYPE_VA, b), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(try_bind(rmr, lmr, &range, kRemoteRW, static_cast<DAT_VA_TYPE>(7), b), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(try_bind(rmr, lmr, &range, kRemoteRW, DAT_VA_TYPE_VA, b, static_cast<DAT_COMPLETION_FLAGS>(0x100)),
              t(DAT_INVALID_PARAMETER));
    DAT_LMR_TRIPLET wrong_key = range;
    wrong_key.lmr_context ^= 0x100;
    EXPECT_EQ(try_bind(rmr, lmr, &wrong_key, kRemoteRW, DAT_VA_TYPE_VA, b), t(DAT_INVALID_PARAMETER));
    DAT_LMR_TRIPLET past_end = piece(buffer.size() - 16, 32);
    EXPECT_EQ(try_bind(rmr, lmr, &past_end, kRemoteRW, DAT_VA_TYPE_VA, b), t(DAT_PROTECTION_VIOLATION));
    // An LMR without local write cannot give remote write.
    DAT_REGION_DESCRIPTION region{};
    region.for_va = buffer.data();
    DAT_LMR_HANDLE read_only;
    DAT_LMR_CONTEXT read_only_context;
    ASSERT_EQ(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, 4096, pz, DAT_MEM_PRIV_LOCAL_READ_FLAG, DAT_VA_TYPE_VA,
                             &read_only, &read_only_context, nullptr, nullptr, nullptr),
              kOk);
    DAT_LMR_TRIPLET ro{reinterpret_cast<DAT_VADDR>(buffer.data()), 1024, read_only_context};
    EXPECT_EQ(try_bind(rmr, read_only, &ro, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, b),
              t(DAT_PRIVILEGES_VIOLATION));
    // An RMR of another PZ than the EP and the LMR.
    DAT_RMR_HANDLE elsewhere;
    ASSERT_EQ(dat_rmr_create(other_pz, &elsewhere), kOk);
    EXPECT_EQ(try_bind(elsewhere, lmr, &range, kRemoteRW, DAT_VA_TYPE_VA, b), t(DAT_PROTECTION_VIOLATION));
    // An endpoint that is not connected.
    DAT_EP_HANDLE idle = make_ep(dto_b, conn_b);
    EXPECT_EQ(try_bind(rmr, lmr, &range, kRemoteRW, DAT_VA_TYPE_VA, idle), t(DAT_INVALID_STATE));
    // After all that, the RMR binds and works.
    const DAT_RMR_CONTEXT good = bind(rmr, b, dto_b, range, kRemoteRW, 8);
    std::memcpy(buffer.data() + 2048, "still fine", 10);
    DAT_LMR_TRIPLET local = piece(2048, 10);
    DAT_RMR_TRIPLET remote{reinterpret_cast<DAT_VADDR>(buffer.data() + 100), 10, good};
    ASSERT_EQ(dat_ep_post_rdma_write(a, 1, &local, DAT_DTO_COOKIE{}, &remote, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    EXPECT_EQ(next(dto_a).event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(buffer.data() + 100, 10), "still fine");
}

TEST_F(Rmrs, BindOnADisconnectedEndpointIsFlushed)
{
    if (!supported())
        GTEST_SKIP() << "no memory windows on this IA";
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    ASSERT_EQ(dat_ep_disconnect(b, DAT_CLOSE_ABRUPT_FLAG), kOk);
    EXPECT_EQ(next(conn_b).event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
    DAT_RMR_HANDLE rmr;
    ASSERT_EQ(dat_rmr_create(pz, &rmr), kOk);
    DAT_LMR_TRIPLET range = piece(0, 1024);
    DAT_RMR_CONTEXT ctx = 0;
    ASSERT_EQ(dat_rmr_bind(rmr, lmr, &range, kRemoteRW, DAT_VA_TYPE_VA, b, DAT_RMR_COOKIE{.as_64 = 6},
                           DAT_COMPLETION_DEFAULT_FLAG, &ctx),
              kOk);
    DAT_EVENT e = next(dto_b);
    EXPECT_EQ(e.event_number, DAT_RMR_BIND_COMPLETION_EVENT);
    EXPECT_EQ(e.event_data.rmr_completion_event_data.user_cookie.as_64, 6u);
    EXPECT_EQ(e.event_data.rmr_completion_event_data.status, DAT_DTO_ERR_FLUSHED);
    DAT_RMR_PARAM q{};
    ASSERT_EQ(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &q), kOk);
    EXPECT_EQ(q.rmr_context, 0u); // the bind did not take
    EXPECT_EQ(dat_lmr_free(lmr), kOk);
}

// A PZ-scoped RMR serving one connection, rebound on an EP whose
// connection is gone: the bind is flushed, the RMR reads unbound, and its
// old context stops working over the live connection too (on
// verbs IAs the type 1 window is replaced; the softnic rebinds at once).
TEST_F(Rmrs, FlushedRebindEndsTheOldBinding)
{
    if (!supported())
        GTEST_SKIP() << "no memory windows on this IA";
    DAT_EP_HANDLE a, b, c, d;
    connect_pair(a, b);
    connect_pair(c, d);
    DAT_RMR_HANDLE rmr;
    ASSERT_EQ(dat_rmr_create(pz, &rmr), kOk);
    const DAT_RMR_CONTEXT ctx = bind(rmr, d, dto_b, piece(8192, 1024), DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 1);
    std::memcpy(buffer.data(), "before", 6);
    const DAT_RMR_TRIPLET there{reinterpret_cast<DAT_VADDR>(buffer.data() + 8192), 6, ctx};
    EXPECT_EQ(write(c, there, 6), DAT_DTO_SUCCESS);
    ASSERT_EQ(dat_ep_disconnect(b, DAT_CLOSE_ABRUPT_FLAG), kOk);
    DAT_EVENT e = next(conn_b);
    EXPECT_EQ(e.event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
    DAT_LMR_TRIPLET range = piece(16384, 1024);
    DAT_RMR_CONTEXT again = 0;
    ASSERT_EQ(dat_rmr_bind(rmr, lmr, &range, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, b,
                           DAT_RMR_COOKIE{.as_64 = 2}, DAT_COMPLETION_DEFAULT_FLAG, &again),
              kOk);
    e = next(dto_b);
    EXPECT_EQ(e.event_number, DAT_RMR_BIND_COMPLETION_EVENT);
    EXPECT_EQ(e.event_data.rmr_completion_event_data.status, DAT_DTO_ERR_FLUSHED);
    DAT_RMR_PARAM q{};
    ASSERT_EQ(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &q), kOk);
    EXPECT_EQ(q.rmr_context, 0u);
    std::memset(buffer.data() + 8192, 0, 6);
    EXPECT_NE(write(c, there, 6), DAT_DTO_SUCCESS);
    EXPECT_EQ(buffer[8192], 0);
    EXPECT_EQ(dat_rmr_free(rmr), kOk);
}

// A zero-based window: the peer addresses it from 0 (offsets into it),
// through its context only, with the rights it was given; the query says
// so. Verbs devices bind zero-based windows of EP scope only (type 2: the
// IB spec forbids zero-based type 1 windows), so a PZ-scoped one is refused
// there, left unbound.
TEST_F(Rmrs, ZeroBasedWindowIsAddressedFromZero)
{
    if (!supported())
        GTEST_SKIP() << "no memory windows on this IA";
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    DAT_RMR_HANDLE rmr;
    ASSERT_EQ(dat_rmr_create_for_ep(pz, &rmr), kOk);
    const DAT_LMR_TRIPLET window = piece(8192, 1024);
    const DAT_RMR_CONTEXT ctx = bind_zero_based(rmr, b, dto_b, window, kRemoteRW, 21);
    ASSERT_NE(ctx, 0u);
    DAT_RMR_PARAM q{};
    ASSERT_EQ(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &q), kOk);
    EXPECT_EQ(q.va_type, DAT_VA_TYPE_ZB);
    EXPECT_EQ(q.rmr_context, ctx);
    EXPECT_EQ(q.lmr_triplet.virtual_address, window.virtual_address); // where it lies here
    EXPECT_EQ(q.lmr_triplet.segment_length, 1024u);
    EXPECT_EQ(q.mem_priv, kRemoteRW);

    // Writes at its first and last bytes, reads back from both ends.
    std::memcpy(buffer.data(), "zero-based window", 17);
    EXPECT_EQ(write(a, {0, 17, ctx}, 17), DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(buffer.data() + 8192, 17), "zero-based window");
    EXPECT_EQ(write(a, {1024 - 17, 17, ctx}, 17), DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(buffer.data() + 8192 + 1024 - 17, 17), "zero-based window");
    EXPECT_EQ(read(a, 4096, {5, 12, ctx}), DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(buffer.data() + 4096, 12), "based window");
    EXPECT_EQ(read(a, 4200, {1024 - 17, 17, ctx}), DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(buffer.data() + 4200, 17), "zero-based window");

    // An RDMA read into a zero-based RMR of ours names its offsets too.
    DAT_RMR_HANDLE landing;
    ASSERT_EQ(dat_rmr_create_for_ep(pz, &landing), kOk);
    const DAT_RMR_CONTEXT into =
        bind_zero_based(landing, a, dto_a, piece(24000, 64), DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 22);
    const DAT_RMR_TRIPLET landing_at{10, 17, into}, source{0, 17, ctx};
    ASSERT_EQ(dat_ep_post_rdma_read_to_rmr(a, &landing_at, DAT_DTO_COOKIE{.as_64 = 23}, &source,
                                           DAT_COMPLETION_DEFAULT_FLAG),
              kOk);
    EXPECT_EQ(next(dto_a).event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(buffer.data() + 24010, 17), "zero-based window");
    const DAT_RMR_TRIPLET past_landing{60, 17, into};
    EXPECT_EQ(type_of(dat_ep_post_rdma_read_to_rmr(a, &past_landing, DAT_DTO_COOKIE{}, &source,
                                                   DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_PROTECTION_VIOLATION));

    // PZ scope: a zero-based window where the device binds one.
    DAT_RMR_HANDLE pz_scoped;
    ASSERT_EQ(dat_rmr_create(pz, &pz_scoped), kOk);
    if (ia_is_verbs(ia)) {
        DAT_LMR_TRIPLET range = piece(20000, 256);
        DAT_RMR_CONTEXT refused = 0;
        EXPECT_EQ(type_of(dat_rmr_bind(pz_scoped, lmr, &range, kRemoteRW, DAT_VA_TYPE_ZB, b, DAT_RMR_COOKIE{},
                                       DAT_COMPLETION_DEFAULT_FLAG, &refused)),
                  t(DAT_MODEL_NOT_SUPPORTED));
        ASSERT_EQ(dat_rmr_query(pz_scoped, DAT_RMR_FIELD_ALL, &q), kOk);
        EXPECT_EQ(q.rmr_context, 0u);
        EXPECT_EQ(q.lmr_triplet.segment_length, 0u);
    } else {
        const DAT_RMR_CONTEXT any =
            bind_zero_based(pz_scoped, b, dto_b, piece(20000, 256), DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 24);
        EXPECT_EQ(write(a, {0, 7, any}, 7), DAT_DTO_SUCCESS);
        EXPECT_EQ(std::string(buffer.data() + 20000, 7), "zero-ba");
    }

    // A right it was not given: refused, the target untouched.
    DAT_RMR_HANDLE read_only;
    ASSERT_EQ(dat_rmr_create_for_ep(pz, &read_only), kOk);
    const DAT_RMR_CONTEXT ro =
        bind_zero_based(read_only, b, dto_b, piece(16384, 512), DAT_MEM_PRIV_REMOTE_READ_FLAG, 25);
    std::memcpy(buffer.data() + 16384, "read only", 9);
    EXPECT_EQ(read(a, 4400, {0, 9, ro}), DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(buffer.data() + 4400, 9), "read only");
    EXPECT_NE(write(a, {0, 9, ro}, 9), DAT_DTO_SUCCESS);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_BROKEN);
    EXPECT_EQ(std::string(buffer.data() + 16384, 9), "read only");
}

// A zero-based window ends where it ends: past its last byte (still inside
// the LMR) a remote access error, the window's last bytes and the memory
// after it untouched. (Soft-RoCE checks only the region: README.)
TEST_F(Rmrs, ZeroBasedWindowEndsWhereItEnds)
{
    if (!supported())
        GTEST_SKIP() << "no memory windows on this IA";
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    DAT_RMR_HANDLE rmr;
    ASSERT_EQ(dat_rmr_create_for_ep(pz, &rmr), kOk);
    const DAT_RMR_CONTEXT ctx = bind_zero_based(rmr, b, dto_b, piece(8192, 1024), kRemoteRW, 31);
    std::memset(buffer.data(), 0x11, 64);
    std::memset(buffer.data() + 8192 + 1000, 0x5a, 24 + 64);
    EXPECT_NE(write(a, {1000, 64, ctx}, 64), DAT_DTO_SUCCESS);
    EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_BROKEN);
    EXPECT_EQ(buffer[8192 + 1000], 0x5a);
    EXPECT_EQ(buffer[8192 + 1024], 0x5a);
}

// An RDMA read into a local RMR: the bytes land through the region the RMR
// is bound to, within its range, if it gives remote write.
TEST_F(Rmrs, RdmaReadIntoAnRmr)
{
    if (!supported())
        GTEST_SKIP() << "no memory windows on this IA";
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    DAT_RMR_HANDLE source, target, read_only;
    ASSERT_EQ(dat_rmr_create(pz, &source), kOk);
    ASSERT_EQ(dat_rmr_create(pz, &target), kOk);
    ASSERT_EQ(dat_rmr_create(pz, &read_only), kOk);
    const DAT_RMR_CONTEXT from = bind(source, b, dto_b, piece(8192, 1024), DAT_MEM_PRIV_REMOTE_READ_FLAG, 1);
    const DAT_RMR_CONTEXT into = bind(target, a, dto_a, piece(16384, 512), DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 2);
    const DAT_RMR_CONTEXT no_write = bind(read_only, a, dto_a, piece(20000, 512), DAT_MEM_PRIV_REMOTE_READ_FLAG, 3);
    std::memcpy(buffer.data() + 8192, "read into an rmr", 16);
    const DAT_RMR_TRIPLET remote{reinterpret_cast<DAT_VADDR>(buffer.data() + 8192), 16, from};
    const DAT_RMR_TRIPLET local{reinterpret_cast<DAT_VADDR>(buffer.data() + 16384 + 10), 16, into};
    ASSERT_EQ(dat_ep_post_rdma_read_to_rmr(a, &local, DAT_DTO_COOKIE{.as_64 = 44}, &remote,
                                           DAT_COMPLETION_DEFAULT_FLAG),
              kOk);
    DAT_EVENT e = next(dto_a);
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 44u);
    EXPECT_EQ(e.event_data.dto_completion_event_data.operation, DAT_DTO_RDMA_READ);
    EXPECT_EQ(std::string(buffer.data() + 16384 + 10, 16), "read into an rmr");

    const auto refused = [&](DAT_RMR_TRIPLET into_local) {
        return type_of(dat_ep_post_rdma_read_to_rmr(a, &into_local, DAT_DTO_COOKIE{}, &remote,
                                                    DAT_COMPLETION_DEFAULT_FLAG));
    };
    EXPECT_EQ(refused({local.virtual_address, 16, into ^ 0x1000}), t(DAT_PROTECTION_VIOLATION)); // no such RMR
    EXPECT_EQ(refused({local.virtual_address + 500, 16, into}), t(DAT_PROTECTION_VIOLATION)); // past its end
    EXPECT_EQ(refused({reinterpret_cast<DAT_VADDR>(buffer.data() + 20000), 16, no_write}),
              t(DAT_PRIVILEGES_VIOLATION));
    EXPECT_EQ(type_of(dat_ep_post_rdma_read_to_rmr(a, nullptr, DAT_DTO_COOKIE{}, &remote, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ep_post_rdma_read_to_rmr(pz, &local, DAT_DTO_COOKIE{}, &remote, DAT_COMPLETION_DEFAULT_FLAG)),
              t(DAT_INVALID_HANDLE));
    // Freed, its context names nothing.
    ASSERT_EQ(dat_rmr_free(target), kOk);
    EXPECT_EQ(refused(local), t(DAT_PROTECTION_VIOLATION));
}

// A send that invalidates the receiver's RMR context: the receive says
// so, the RMR is unbound, the context stops working; invalidate FALSE is a
// plain send. On verbs IAs only an EP-scoped RMR (a type 2 window) can be
// invalidated by a peer: IB forbids it for a type 1 window (PZ scope).
TEST_F(Rmrs, SendWithInvalidateUnbindsTheReceiversRmr)
{
    if (!supported())
        GTEST_SKIP() << "no memory windows on this IA";
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    std::vector<DAT_RMR_HANDLE> rmrs(1);
    ASSERT_EQ(dat_rmr_create_for_ep(pz, &rmrs[0]), kOk);
    if (!ia_is_verbs(ia)) {
        rmrs.emplace_back();
        ASSERT_EQ(dat_rmr_create(pz, &rmrs[1]), kOk);
    }
    const auto receive = [&](std::uint64_t cookie) {
        DAT_LMR_TRIPLET r = piece(32768, 64);
        EXPECT_EQ(dat_ep_post_recv(b, 1, &r, DAT_DTO_COOKIE{.as_64 = cookie}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    };
    DAT_LMR_TRIPLET s = piece(0, 16);
    receive(10);
    ASSERT_EQ(dat_ep_post_send_with_invalidate(a, 1, &s, DAT_DTO_COOKIE{.as_64 = 11}, DAT_COMPLETION_DEFAULT_FLAG,
                                               DAT_FALSE, 0x12345),
              kOk); // the context is ignored
    EXPECT_EQ(next(dto_a).event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    DAT_EVENT e = next(dto_b);
    EXPECT_EQ(e.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE);

    std::vector<DAT_RMR_CONTEXT> contexts;
    for (DAT_RMR_HANDLE rmr : rmrs) {
        const std::uint64_t n = contexts.size();
        const DAT_RMR_CONTEXT ctx = bind(rmr, b, dto_b, piece(8192, 1024), DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 1 + n);
        contexts.push_back(ctx);
        receive(12 + n);
        ASSERT_EQ(dat_ep_post_send_with_invalidate(a, 1, &s, DAT_DTO_COOKIE{.as_64 = 13}, DAT_COMPLETION_DEFAULT_FLAG,
                                                   DAT_TRUE, ctx),
                  kOk);
        e = next(dto_a);
        EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
        EXPECT_EQ(e.event_data.dto_completion_event_data.operation, DAT_DTO_SEND);
        e = next(dto_b);
        EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
        EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 12 + n);
        EXPECT_EQ(e.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE_WITH_INVALIDATE);
        EXPECT_EQ(e.event_data.dto_completion_event_data.rmr_context, ctx);
        EXPECT_EQ(e.event_data.dto_completion_event_data.transfered_length, 16u);
        DAT_RMR_PARAM q{};
        ASSERT_EQ(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &q), kOk);
        EXPECT_EQ(q.rmr_context, 0u); // unbound, as a bind of length 0 leaves it
        EXPECT_EQ(q.lmr_triplet.segment_length, 0u);
    }
    // An invalidated context no longer works.
    std::memset(buffer.data() + 8192, 0, 16);
    EXPECT_NE(write(a, {reinterpret_cast<DAT_VADDR>(buffer.data() + 8192), 16, contexts[0]}, 16), DAT_DTO_SUCCESS);
    EXPECT_EQ(buffer[8192], 0);
    EXPECT_EQ(dat_lmr_free(lmr), kOk); // no window holds it now
}

// Where an IA offers no windows (max_rmrs 0: an mlx5 device without windows, Soft-RoCE
// by default) a peer holds no key of it that a send could invalidate (an
// LMR's rmr_context on verbs is a plain MR's, which devices refuse to
// invalidate): such a send is refused at once, nothing posted; the plain
// send (invalidate FALSE) still goes.
TEST_F(Rmrs, SendWithInvalidateWithoutWindowsIsNotOffered)
{
    if (supported())
        GTEST_SKIP() << "this IA binds windows: sends invalidate them (the tests above)";
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    DAT_LMR_TRIPLET r = piece(32768, 64), s = piece(0, 16);
    std::memcpy(buffer.data(), "plain send", 10);
    ASSERT_EQ(dat_ep_post_recv(b, 1, &r, DAT_DTO_COOKIE{.as_64 = 1}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    EXPECT_EQ(type_of(dat_ep_post_send_with_invalidate(a, 1, &s, DAT_DTO_COOKIE{.as_64 = 2},
                                                       DAT_COMPLETION_DEFAULT_FLAG, DAT_TRUE, 0x1234)),
              t(DAT_MODEL_NOT_SUPPORTED));
    ASSERT_EQ(dat_ep_post_send_with_invalidate(a, 1, &s, DAT_DTO_COOKIE{.as_64 = 3}, DAT_COMPLETION_DEFAULT_FLAG,
                                               DAT_FALSE, 0x1234),
              kOk);
    DAT_EVENT e = next(dto_a);
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 3u); // the refused one left nothing
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    e = next(dto_b);
    EXPECT_EQ(e.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE);
    EXPECT_EQ(e.event_data.dto_completion_event_data.transfered_length, 16u);
    EXPECT_EQ(std::string(buffer.data() + 32768, 10), "plain send");
}

// Invalidating a key the receiver does not have: an invalid request that
// fails the receive and breaks the connection. Where the receiver's device
// places data first (Soft-RoCE, measured: the bytes land, the sender's
// send succeeds, its side sees a disconnect) only the receiver's side is
// checked on verbs IAs; the softnic refuses before placing anything.
TEST_F(Rmrs, SendInvalidatingAnUnknownKeyBreaksTheConnection)
{
    if (!supported())
        GTEST_SKIP() << "no memory windows on this IA";
    DAT_EP_HANDLE a, b;
    connect_pair(a, b);
    std::memset(buffer.data() + 32768, 0x7e, 64);
    DAT_LMR_TRIPLET r = piece(32768, 64), s = piece(0, 16);
    ASSERT_EQ(dat_ep_post_recv(b, 1, &r, DAT_DTO_COOKIE{.as_64 = 1}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    ASSERT_EQ(dat_ep_post_send_with_invalidate(a, 1, &s, DAT_DTO_COOKIE{.as_64 = 2}, DAT_COMPLETION_DEFAULT_FLAG,
                                               DAT_TRUE, 0x00abcd01),
              kOk);
    // The receiver's failed receive first: reaping it breaks b's connection.
    EXPECT_NE(next(dto_b).event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    const DAT_DTO_COMPLETION_STATUS sent = next(dto_a).event_data.dto_completion_event_data.status;
    const DAT_EVENT_NUMBER ended = next(conn_b).event_number;
    if (ia_is_verbs(ia)) {
        // The sender's side may fail too (the mlx5 direct path's software
        // device refuses it; the sender breaks) and rdma_cm's disconnect
        // from it race b's own break: either ends b's connection.
        EXPECT_TRUE(ended == DAT_CONNECTION_EVENT_BROKEN || ended == DAT_CONNECTION_EVENT_DISCONNECTED) << ended;
    } else {
        EXPECT_EQ(ended, DAT_CONNECTION_EVENT_BROKEN);
    }
    if (!ia_is_verbs(ia)) {
        EXPECT_NE(sent, DAT_DTO_SUCCESS);
        EXPECT_EQ(next(conn_a).event_number, DAT_CONNECTION_EVENT_BROKEN);
        EXPECT_EQ(buffer[32768], 0x7e);
    }
    EXPECT_EQ(type_of(dat_ep_post_send_with_invalidate(pz, 1, &s, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG,
                                                       DAT_TRUE, 1)),
              t(DAT_INVALID_HANDLE));
}

} // namespace
