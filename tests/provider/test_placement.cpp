// Where a peer's data lands, through the public DAT API: an RDMA write's last
// byte becomes visible last (consumers poll on it, as Debian's dtest -W -D
// does).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include <dat2/udat.h>

#include "connect_through_psp.hpp"
#include "test_ia.hpp"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr DAT_RETURN kOk = DAT_SUCCESS;
constexpr DAT_TIMEOUT kWait = 10'000'000; // µs

// One IA with two endpoints connected to each other over loopback, each
// with its own DTO and connection EVDs.
struct Pair {
    Pair()
    {
        ok = dat_ia_open(test_ia_name(), 16, &async, &ia) == kOk && dat_pz_create(ia, &pz) == kOk &&
             dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd) == kOk;
        if (ok)
            connect();
    }
    ~Pair()
    {
        if (ia)
            dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    }
    // A fresh pair of endpoints (the old ones stay until the IA closes).
    void connect()
    {
        ok = false;
        for (DAT_EVD_HANDLE* evd : {&dto_a, &dto_b})
            ASSERT_EQ(dat_evd_create(ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, evd), kOk);
        for (DAT_EVD_HANDLE* evd : {&conn_a, &conn_b})
            ASSERT_EQ(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, evd), kOk);
        DAT_EP_ATTR attr{};
        attr.service_type = DAT_SERVICE_TYPE_RC;
        attr.max_recv_dtos = 16;
        attr.max_request_dtos = 16;
        attr.max_recv_iov = 2;
        attr.max_request_iov = 2;
        attr.max_rdma_read_iov = 2;
        attr.max_rdma_write_iov = 2;
        attr.max_rdma_read_in = 4;
        attr.max_rdma_read_out = 4;
        ASSERT_EQ(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, &attr, &a), kOk);
        ASSERT_EQ(dat_ep_create(ia, pz, dto_b, dto_b, conn_b, &attr, &b), kOk);
        DAT_IA_ATTR ia_attr{};
        ASSERT_EQ(dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &ia_attr, 0, nullptr), kOk);
        fastdapl_test::connect_through_psp(ia, ia_attr.ia_address_ptr, cr_evd, a, conn_a, b, conn_b);
        ok = !::testing::Test::HasFatalFailure();
    }
    // Registers [p, p + n): its LMR context, and its RMR context in `rmr`.
    DAT_LMR_CONTEXT enroll(void* p, std::size_t n, DAT_RMR_CONTEXT* rmr = nullptr)
    {
        DAT_REGION_DESCRIPTION region{};
        region.for_va = p;
        DAT_LMR_HANDLE lmr;
        DAT_LMR_CONTEXT l = 0;
        DAT_RMR_CONTEXT r = 0;
        DAT_VLEN size;
        DAT_VADDR va;
        EXPECT_EQ(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, n, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr,
                                 &l, &r, &size, &va),
                  kOk);
        if (rmr)
            *rmr = r;
        return l;
    }
    static bool next(DAT_EVD_HANDLE evd, DAT_EVENT& e)
    {
        DAT_COUNT nmore;
        return dat_evd_wait(evd, kWait, 1, &e, &nmore) == kOk;
    }

    bool ok = false;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, cr_evd = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE dto_a, dto_b, conn_a, conn_b;
    DAT_EP_HANDLE a, b;
};

#ifdef FASTDAPL_ADVERSARIAL_MEMCPY
// This build (test_placement_adversarial) replaces memcpy for the whole
// process, the provider included: a correct memcpy that, for 64 KiB and
// more, stores the last 64 bytes first and the rest 2 ms later. Placement
// that leaned on memcpy's store order shows its last byte early every time;
// with real glibc it does so only now and then (its first 32 bytes go last).
extern "C" [[gnu::visibility("default")]] void* memcpy(void* dst, const void* src, std::size_t n) noexcept
{
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    if (n < 65536)
        return std::memmove(d, s, n); // not interposed: glibc's
    std::memmove(d + n - 64, s + n - 64, 64);
    const timespec pause{0, 2'000'000};
    nanosleep(&pause, nullptr);
    std::memmove(d, s, n - 64);
    return dst;
}
constexpr int kDefaultRepetitions = 10;
#else
constexpr int kDefaultRepetitions = 100;
#endif

// How many writes each size gets (FASTDAPL_PLACEMENT_REPS to run more).
int repetitions()
{
    const char* v = std::getenv("FASTDAPL_PLACEMENT_REPS");
    const int n = v ? std::atoi(v) : 0;
    return n > 0 ? n : kDefaultRepetitions;
}

// A write of `bytes` into a zeroed target, again and again. A second thread
// spins on the target's last byte; the moment it is no longer 0, the whole
// target must already be the source.
class LastByteLast : public ::testing::TestWithParam<std::size_t> {};

TEST_P(LastByteLast, WholeWriteIsVisibleOnceItsLastByteIs)
{
    const std::size_t bytes = GetParam();
    Pair pair;
    ASSERT_TRUE(pair.ok);
    std::vector<unsigned char> source(bytes), target(bytes);
    for (std::size_t i = 0; i < bytes; ++i)
        source[i] = static_cast<unsigned char>(i % 251 + 1); // never 0, the last byte included
    const DAT_LMR_CONTEXT src_l = pair.enroll(source.data(), bytes);
    DAT_RMR_CONTEXT dst_r = 0;
    pair.enroll(target.data(), bytes, &dst_r);
    const int reps = repetitions();
    int torn = 0;
    std::string first_tear;
    for (int rep = 0; rep < reps; ++rep) {
        std::memset(target.data(), 0, bytes);
        std::atomic<bool> polling{false};
        std::size_t mismatch = bytes; // the first byte that differed, or bytes
        bool seen = false;
        std::thread poller([&] {
            const unsigned char* last = target.data() + bytes - 1;
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
            polling.store(true);
            for (std::uint32_t spins = 0;; ++spins) {
                if (__atomic_load_n(last, __ATOMIC_ACQUIRE) != 0) {
                    seen = true;
                    break;
                }
                if ((spins & 0xfffff) == 0 && std::chrono::steady_clock::now() > deadline)
                    return;
            }
            // From the front: what a write ordered wrongly most likely leaves.
            for (std::size_t i = 0; i < bytes; ++i) {
                if (__atomic_load_n(target.data() + i, __ATOMIC_RELAXED) != source[i]) {
                    mismatch = i;
                    break;
                }
            }
        });
        while (!polling.load())
            std::this_thread::yield();
        DAT_LMR_TRIPLET from{reinterpret_cast<DAT_VADDR>(source.data()), static_cast<DAT_SEG_LENGTH>(bytes), src_l};
        DAT_RMR_TRIPLET to{reinterpret_cast<DAT_VADDR>(target.data()), static_cast<DAT_SEG_LENGTH>(bytes), dst_r};
        ASSERT_EQ(dat_ep_post_rdma_write(pair.a, 1, &from, DAT_DTO_COOKIE{.as_64 = static_cast<DAT_UINT64>(rep)}, &to,
                                         DAT_COMPLETION_DEFAULT_FLAG),
                  kOk);
        poller.join();
        DAT_EVENT e{};
        ASSERT_TRUE(Pair::next(pair.dto_a, e));
        ASSERT_EQ(e.event_number, DAT_DTO_COMPLETION_EVENT);
        ASSERT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
        ASSERT_TRUE(seen) << "rep " << rep << ": the last byte never arrived";
        if (mismatch != bytes && torn++ == 0)
            first_tear = "rep " + std::to_string(rep) + ": byte " + std::to_string(mismatch) +
                         " was not there yet when the last byte was";
        ASSERT_EQ(std::memcmp(target.data(), source.data(), bytes), 0) << "rep " << rep;
    }
    EXPECT_EQ(torn, 0) << torn << " of " << reps << " writes of " << bytes << " bytes showed their last byte early; "
                       << first_tear;
}

INSTANTIATE_TEST_SUITE_P(Sizes, LastByteLast, ::testing::Values(std::size_t{4} << 20, std::size_t{1} << 20));

} // namespace
