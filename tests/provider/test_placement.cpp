// Where a peer's data lands, through the public DAT API: an RDMA write's last
// byte becomes visible last (consumers poll on it, as Debian's dtest -W -D
// does), and memory unmapped under a live LMR turns a peer's access into a
// remote error and a broken connection, never a crash.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include <dat2/udat.h>

#include "connect_through_psp.hpp"
#include "test_ia.hpp"

#include <gtest/gtest.h>

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
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
    // The same by busy polling (dat_evd_dequeue), for at most 5 s.
    static bool poll(DAT_EVD_HANDLE evd, DAT_EVENT& e)
    {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        DAT_RETURN rc;
        while (DAT_GET_TYPE(rc = dat_evd_dequeue(evd, &e)) == DAT_QUEUE_EMPTY &&
               std::chrono::steady_clock::now() < deadline) {
        }
        return rc == kOk;
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
// target must already be the source. Whole writes and striped ones both.
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
        // The consumer busy-polls (dat_evd_dequeue, an empty poll first) for
        // two writes, then waits (dat_evd_wait) for four: on fastdapl-tcp a
        // large write is striped over the lane while this side or, by its
        // last ACK, the peer busy-polls, and both ends are this process, so
        // the last two of each four go whole, the others striped.
        const bool busy = rep % 6 < 2;
        if (busy) {
            DAT_EVENT none{};
            ASSERT_EQ(DAT_GET_TYPE(dat_evd_dequeue(pair.dto_a, &none)), DAT_QUEUE_EMPTY);
        }
        DAT_LMR_TRIPLET from{reinterpret_cast<DAT_VADDR>(source.data()), static_cast<DAT_SEG_LENGTH>(bytes), src_l};
        DAT_RMR_TRIPLET to{reinterpret_cast<DAT_VADDR>(target.data()), static_cast<DAT_SEG_LENGTH>(bytes), dst_r};
        ASSERT_EQ(dat_ep_post_rdma_write(pair.a, 1, &from, DAT_DTO_COOKIE{.as_64 = static_cast<DAT_UINT64>(rep)}, &to,
                                         DAT_COMPLETION_DEFAULT_FLAG),
                  kOk);
        poller.join();
        DAT_EVENT e{};
        ASSERT_TRUE(busy ? Pair::poll(pair.dto_a, e) : Pair::next(pair.dto_a, e));
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

// What each of this process's connected IPv4 TCP sockets has received so
// far, by descriptor.
std::map<int, std::uint64_t> tcp_bytes_received()
{
    std::map<int, std::uint64_t> got;
    for (int fd = 0; fd < 4096; ++fd) {
        int type = 0;
        socklen_t len = sizeof type;
        sockaddr_in peer{};
        socklen_t peer_len = sizeof peer;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM ||
            getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 || peer.sin_family != AF_INET)
            continue;
        tcp_info info{};
        len = sizeof info;
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0)
            got[fd] = info.tcpi_bytes_received;
    }
    return got;
}

// The sockets this process has connected since `before` (tcp_bytes_received),
// once there are `count` of them or 5 s have gone.
std::map<int, std::uint64_t> new_sockets(const std::map<int, std::uint64_t>& before, std::size_t count)
{
    std::map<int, std::uint64_t> sockets;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    do {
        sockets = tcp_bytes_received();
        for (const auto& [fd, n] : before)
            sockets.erase(fd);
    } while (sockets.size() < count && std::chrono::steady_clock::now() < deadline &&
             (std::this_thread::sleep_for(std::chrono::milliseconds(10)), true));
    return sockets;
}

// fastdapl-tcp: a connection gets its lane when either side first sends a
// large RDMA write (the active side opens it; the passive side asks it
// to), and from then on a large RDMA write goes half over each while a
// consumer busy-polls: of the four TCP sockets of the two connections, two
// took about half of it. While the consumers wait in dat_evd_wait (both
// ends are in this process, on one device), it goes whole over the
// connection. Parameter: the passive side writes (else the active side).
class Lanes : public ::testing::TestWithParam<bool> {};

TEST_P(Lanes, OpenAtTheFirstLargeWriteThenSplitIt)
{
    if (std::strcmp(test_ia_name(), "fastdapl-tcp") != 0)
        GTEST_SKIP() << "lanes are fastdapl-tcp's";
    if (const char* v = std::getenv("FASTDAPL_TCP_LANES"); v && std::strcmp(v, "0") == 0)
        GTEST_SKIP() << "FASTDAPL_TCP_LANES=0";
    const auto before = tcp_bytes_received();
    Pair pair;
    ASSERT_TRUE(pair.ok);
    const DAT_EP_HANDLE writer = GetParam() ? pair.b : pair.a;
    const DAT_EVD_HANDLE writer_dto = GetParam() ? pair.dto_b : pair.dto_a;
    constexpr std::size_t kBytes = 1 << 20;
    std::vector<unsigned char> source(kBytes), target(kBytes, 0);
    for (std::size_t i = 0; i < kBytes; ++i)
        source[i] = static_cast<unsigned char>(i * 7 + 3);
    const DAT_LMR_CONTEXT src_l = pair.enroll(source.data(), kBytes);
    DAT_RMR_CONTEXT dst_r = 0;
    pair.enroll(target.data(), kBytes, &dst_r);
    DAT_LMR_TRIPLET from{reinterpret_cast<DAT_VADDR>(source.data()), kBytes, src_l};
    DAT_RMR_TRIPLET to{reinterpret_cast<DAT_VADDR>(target.data()), kBytes, dst_r};
    const auto write = [&](bool busy_poll) {
        std::memset(target.data(), 0, kBytes);
        if (busy_poll) { // a busy poller's empty poll
            DAT_EVENT none{};
            ASSERT_EQ(DAT_GET_TYPE(dat_evd_dequeue(writer_dto, &none)), DAT_QUEUE_EMPTY);
        }
        ASSERT_EQ(dat_ep_post_rdma_write(writer, 1, &from, DAT_DTO_COOKIE{}, &to, DAT_COMPLETION_DEFAULT_FLAG), kOk);
        DAT_EVENT e{};
        ASSERT_TRUE(busy_poll ? Pair::poll(writer_dto, e) : Pair::next(writer_dto, e));
        ASSERT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
        EXPECT_EQ(std::memcmp(target.data(), source.data(), kBytes), 0);
    };
    // Small writes open no lane: the connection's two sockets, both ends here.
    DAT_LMR_TRIPLET small = from;
    small.segment_length = 64 * 1024;
    ASSERT_EQ(dat_ep_post_rdma_write(writer, 1, &small, DAT_DTO_COOKIE{}, &to, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_EVENT e{};
    ASSERT_TRUE(Pair::next(writer_dto, e));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_EQ(new_sockets(before, 2).size(), 2u) << "a lane was opened before a large write wanted it";
    // The first large write goes whole and asks for the lane.
    write(false);
    if (HasFatalFailure())
        return;
    const auto sockets = new_sockets(before, 4);
    ASSERT_EQ(sockets.size(), 4u) << "the connection's two sockets and its lane's";
    // Wait until the writer's queue pair has the lane (each end takes it on
    // the CM's thread): then a large write is split.
    // Sockets that took about half of one write, and those that took all of it.
    const auto measure = [&](bool busy_poll, int& halves, int& wholes) {
        const auto was = tcp_bytes_received();
        write(busy_poll);
        const auto after = tcp_bytes_received();
        halves = wholes = 0;
        for (const auto& [fd, n] : sockets) {
            if (!after.count(fd) || !was.count(fd))
                continue;
            const auto took = after.at(fd) - was.at(fd);
            halves += took >= kBytes / 2 - 4096 && took < kBytes;
            wholes += took >= kBytes;
        }
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int halves = 0, wholes = 0;
    while (halves != 2 && std::chrono::steady_clock::now() < deadline) {
        measure(true, halves, wholes);
        if (HasFatalFailure())
            return;
    }
    EXPECT_EQ(halves, 2) << "busy polling: no socket took the whole write, two took half each";
    // Waiting: whole over the connection. A side goes by how its consumer
    // last moved the device and by the peer's last ACK, so the first writes
    // of a new mode may still go the old way: a write posted before the
    // first wait (or poll), and one whose peer's ACK was queued before it.
    // The third is measured.
    for (int i = 0; i < 3; ++i)
        measure(false, halves, wholes);
    EXPECT_EQ(wholes, 1) << "waiting: one socket took the whole write";
    EXPECT_EQ(halves, 0);
    // Polling again: split again (this side's polling is enough).
    measure(true, halves, wholes);
    EXPECT_EQ(halves, 2) << "busy polling again: two sockets took half each";
}

INSTANTIATE_TEST_SUITE_P(Writer, Lanes, ::testing::Bool(), [](const auto& info) {
    return info.param ? "passive" : "active";
});

// fastdapl-tcp: a connection to a peer on this host, and its lane, ask for
// a send buffer of 256 KiB (FASTDAPL_TCP_SNDBUF: another size, or 0 for the
// kernel's sizing); Linux caps the request at net.core.wmem_max and reports
// twice what it kept.
TEST(SendBuffers, SizedForAPeerOnThisHost)
{
    if (std::strcmp(test_ia_name(), "fastdapl-tcp") != 0)
        GTEST_SKIP() << "fastdapl-tcp's sockets";
    long asked = 256 * 1024;
    if (const char* v = std::getenv("FASTDAPL_TCP_SNDBUF"); v && *v)
        asked = std::strtol(v, nullptr, 10);
    if (asked == 0)
        GTEST_SKIP() << "FASTDAPL_TCP_SNDBUF=0: the kernel sizes the buffers";
    long wmem_max = 0;
    {
        std::FILE* f = std::fopen("/proc/sys/net/core/wmem_max", "r");
        ASSERT_NE(f, nullptr);
        ASSERT_EQ(std::fscanf(f, "%ld", &wmem_max), 1);
        std::fclose(f);
    }
    const int expected = static_cast<int>(2 * std::min(asked, wmem_max));
    const bool lanes = !(std::getenv("FASTDAPL_TCP_LANES") && std::strcmp(std::getenv("FASTDAPL_TCP_LANES"), "0") == 0);
    const auto before = tcp_bytes_received();
    Pair pair;
    ASSERT_TRUE(pair.ok);
    // A large write opens the lane (when lanes are on).
    constexpr std::size_t kBytes = 1 << 20;
    std::vector<unsigned char> source(kBytes, 5), target(kBytes, 0);
    const DAT_LMR_CONTEXT src_l = pair.enroll(source.data(), kBytes);
    DAT_RMR_CONTEXT dst_r = 0;
    pair.enroll(target.data(), kBytes, &dst_r);
    DAT_LMR_TRIPLET from{reinterpret_cast<DAT_VADDR>(source.data()), kBytes, src_l};
    DAT_RMR_TRIPLET to{reinterpret_cast<DAT_VADDR>(target.data()), kBytes, dst_r};
    ASSERT_EQ(dat_ep_post_rdma_write(pair.a, 1, &from, DAT_DTO_COOKIE{}, &to, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_EVENT e{};
    ASSERT_TRUE(Pair::next(pair.dto_a, e));
    ASSERT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    const auto sockets = new_sockets(before, lanes ? 4 : 2);
    ASSERT_EQ(sockets.size(), lanes ? 4u : 2u);
    // A lane's socket is connected (and seen here) a moment before the CM
    // thread hands it to its queue pair, which sizes it first: wait for
    // that, up to 5 s (the write may have gone whole, without the lane).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (const auto& [fd, received] : sockets) {
        int bytes = 0;
        for (;;) {
            socklen_t len = sizeof bytes;
            ASSERT_EQ(getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, &len), 0);
            if (bytes == expected || std::chrono::steady_clock::now() >= deadline)
                break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        EXPECT_EQ(bytes, expected) << "socket " << fd << " (asked " << asked << ", net.core.wmem_max " << wmem_max
                                   << ")";
    }
}

// Registered memory unmapped while its LMR lives: a device would have
// pinned it; the softnic turns the access into an error completion and a
// broken connection on both sides, and the process lives on.
enum class Access {
    write_into,       // a's RDMA write into b's unmapped region
    read_from,        // a's RDMA read of b's unmapped region
    send_into,        // a's send into b's receive buffer, unmapped
    read_response_to, // a's RDMA read into its own unmapped region
    send_from,        // a's send from its own unmapped region (8 KiB on an idle queue pair: sent from the segments)
    send_from_small,  // the same, 256 bytes: gathered into the softnic's buffer
                      // (on fastdapl-shm both are first copied in place into the ring, whose fault hands them on)
    write_into_small, // write_into and send_into with 8 bytes: placed by the small copy
    send_into_small,  // (fault_guard.cpp), not memcpy under sigsetjmp
};

class UnmappedRegion : public ::testing::TestWithParam<Access> {};

TEST_P(UnmappedRegion, BreaksTheConnectionNotTheProcess)
{
#ifdef __SANITIZE_THREAD__
    GTEST_SKIP() << "ThreadSanitizer takes SIGSEGV itself and delivers it late: the fault guard's jump out of a "
                    "faulting copy cannot work under it (the normal and ASan builds run this)";
#endif
    const Access small = GetParam();
    // The small variants take the large ones' path with an 8-byte message.
    const bool is_small = small == Access::write_into_small || small == Access::send_into_small;
    const Access access = small == Access::write_into_small  ? Access::write_into
                          : small == Access::send_into_small ? Access::send_into
                                                             : small;
    constexpr std::size_t kBytes = 8192;
    Pair pair;
    ASSERT_TRUE(pair.ok);
    if (ia_is_verbs(pair.ia))
        GTEST_SKIP() << "a verbs device pins registered pages: unmapping them leaves the device's copy";
    std::vector<char> good(kBytes, 'g');
    DAT_RMR_CONTEXT good_r = 0;
    const DAT_LMR_CONTEXT good_l = pair.enroll(good.data(), kBytes, &good_r);
    void* region = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(region, MAP_FAILED);
    std::memset(region, 'u', kBytes);
    DAT_RMR_CONTEXT region_r = 0;
    const DAT_LMR_CONTEXT region_l = pair.enroll(region, kBytes, &region_r);
    const auto region_va = reinterpret_cast<DAT_VADDR>(region);
    constexpr auto seg = static_cast<DAT_SEG_LENGTH>(kBytes);
    if (access == Access::send_into) {
        DAT_LMR_TRIPLET into{region_va, seg, region_l};
        ASSERT_EQ(dat_ep_post_recv(pair.b, 1, &into, DAT_DTO_COOKIE{.as_64 = 7}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    }
    ASSERT_EQ(munmap(region, kBytes), 0);
    DAT_RETURN posted = kOk;
    const DAT_DTO_COOKIE cookie{.as_64 = 42};
    const DAT_SEG_LENGTH sent = is_small ? 8 : seg;
    const DAT_LMR_TRIPLET local_good{reinterpret_cast<DAT_VADDR>(good.data()), sent, good_l};
    const DAT_LMR_TRIPLET local_gone{region_va, seg, region_l};
    const DAT_RMR_TRIPLET remote_gone{region_va, sent, region_r};
    const DAT_RMR_TRIPLET remote_good{reinterpret_cast<DAT_VADDR>(good.data()), seg, good_r};
    // Nothing else took the address meanwhile (else the test proves nothing).
    ASSERT_EQ(msync(region, kBytes, MS_ASYNC), -1);
    ASSERT_EQ(errno, ENOMEM);
    switch (access) {
    case Access::write_into:
        posted = dat_ep_post_rdma_write(pair.a, 1, const_cast<DAT_LMR_TRIPLET*>(&local_good), cookie, &remote_gone,
                                        DAT_COMPLETION_DEFAULT_FLAG);
        break;
    case Access::read_from:
        posted = dat_ep_post_rdma_read(pair.a, 1, const_cast<DAT_LMR_TRIPLET*>(&local_good), cookie, &remote_gone,
                                       DAT_COMPLETION_DEFAULT_FLAG);
        break;
    case Access::send_into:
        posted =
            dat_ep_post_send(pair.a, 1, const_cast<DAT_LMR_TRIPLET*>(&local_good), cookie, DAT_COMPLETION_DEFAULT_FLAG);
        break;
    case Access::read_response_to:
        posted = dat_ep_post_rdma_read(pair.a, 1, const_cast<DAT_LMR_TRIPLET*>(&local_gone), cookie, &remote_good,
                                       DAT_COMPLETION_DEFAULT_FLAG);
        break;
    case Access::send_from:
        posted =
            dat_ep_post_send(pair.a, 1, const_cast<DAT_LMR_TRIPLET*>(&local_gone), cookie, DAT_COMPLETION_DEFAULT_FLAG);
        break;
    case Access::send_from_small: {
        DAT_LMR_TRIPLET small = local_gone;
        small.segment_length = 256;
        posted = dat_ep_post_send(pair.a, 1, &small, cookie, DAT_COMPLETION_DEFAULT_FLAG);
        break;
    }
    case Access::write_into_small: // taken as write_into and send_into above
    case Access::send_into_small:
        FAIL() << "not remapped";
    }
    ASSERT_EQ(posted, kOk);
    DAT_EVENT e{};
    ASSERT_TRUE(Pair::next(pair.dto_a, e));
    ASSERT_EQ(e.event_number, DAT_DTO_COMPLETION_EVENT);
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 42u);
    const DAT_DTO_COMPLETION_STATUS expected = access == Access::write_into || access == Access::read_from
                                                   ? DAT_DTO_ERR_REMOTE_ACCESS
                                               : access == Access::send_into ? DAT_DTO_ERR_REMOTE_RESPONDER
                                                                             : DAT_DTO_ERR_LOCAL_PROTECTION;
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, expected);
    if (access == Access::send_into) { // the receive that could not be filled
        ASSERT_TRUE(Pair::next(pair.dto_b, e));
        EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 7u);
        EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_ERR_LOCAL_PROTECTION);
    }
    ASSERT_TRUE(Pair::next(pair.conn_a, e));
    EXPECT_EQ(e.event_number, DAT_CONNECTION_EVENT_BROKEN);
    ASSERT_TRUE(Pair::next(pair.conn_b, e));
    EXPECT_EQ(e.event_number, DAT_CONNECTION_EVENT_BROKEN);

    // A fresh connection works: a write and a read of good memory.
    pair.connect();
    ASSERT_TRUE(pair.ok);
    std::vector<char> other(kBytes, 'o');
    const DAT_LMR_CONTEXT other_l = pair.enroll(other.data(), kBytes);
    DAT_LMR_TRIPLET from{reinterpret_cast<DAT_VADDR>(other.data()), seg, other_l};
    ASSERT_EQ(
        dat_ep_post_rdma_write(pair.a, 1, &from, DAT_DTO_COOKIE{.as_64 = 1}, &remote_good, DAT_COMPLETION_DEFAULT_FLAG),
        kOk);
    ASSERT_TRUE(Pair::next(pair.dto_a, e));
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(good.data(), kBytes), std::string(kBytes, 'o'));
    std::memset(good.data(), 'h', kBytes);
    ASSERT_EQ(
        dat_ep_post_rdma_read(pair.a, 1, &from, DAT_DTO_COOKIE{.as_64 = 2}, &remote_good, DAT_COMPLETION_DEFAULT_FLAG),
        kOk);
    ASSERT_TRUE(Pair::next(pair.dto_a, e));
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(std::string(other.data(), kBytes), std::string(kBytes, 'h'));
}

INSTANTIATE_TEST_SUITE_P(Accesses, UnmappedRegion,
                         ::testing::Values(Access::write_into, Access::read_from, Access::send_into,
                                           Access::read_response_to, Access::send_from, Access::send_from_small,
                                           Access::write_into_small, Access::send_into_small));

// The guard's handler passes on every fault that is not its own: a
// consumer's handler installed before the IA opened still gets its faults,
// and without one a fault still kills the process with SIGSEGV. Each runs in
// a fresh process (a death test, re-executed), whose first IA installs the
// guard.
sigjmp_buf consumer_jump;
void* volatile consumer_fault_address = nullptr;
void consumer_handler(int, siginfo_t* info, void*)
{
    consumer_fault_address = info->si_addr;
    siglongjmp(consumer_jump, 1);
}

bool guard_turned_off()
{
    const char* v = std::getenv("FASTDAPL_SOFTNIC_FAULT_GUARD");
    return v && std::strcmp(v, "0") == 0;
}

int consumer_handler_body()
{
    struct sigaction sa {};
    sa.sa_sigaction = consumer_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, nullptr) != 0)
        return 10;
    Pair pair; // opens the IA: the guard goes in over the consumer's handler
    if (!pair.ok)
        return 11;
    struct sigaction now {};
    if (sigaction(SIGSEGV, nullptr, &now) != 0 ||
        (!ia_is_verbs(pair.ia) && (now.sa_sigaction == consumer_handler) != guard_turned_off()))
        return 12;
    void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return 13;
    if (sigsetjmp(consumer_jump, 1) == 0) {
        *static_cast<volatile char*>(page) = 1; // faults
        return 14;
    }
    return consumer_fault_address == page ? 0 : 15;
}

int unguarded_fault_body()
{
    Pair pair;
    if (!pair.ok)
        return 11;
    void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return 12;
    *static_cast<volatile char*>(page) = 1; // faults
    return 13;
}

TEST(FaultGuard, ConsumerHandlerStillGetsItsFaults)
{
#ifdef __SANITIZE_THREAD__
    GTEST_SKIP() << "ThreadSanitizer takes SIGSEGV itself and delivers it late: the fault guard's jump out of a "
                    "faulting copy cannot work under it (the normal and ASan builds run this)";
#endif
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::_Exit(consumer_handler_body()), ::testing::ExitedWithCode(0), "");
}

TEST(FaultGuard, UnguardedFaultStillKills)
{
#ifdef __SANITIZE_ADDRESS__
    GTEST_SKIP() << "AddressSanitizer's own SIGSEGV handler comes before ours: it reports the fault and exits";
#endif
#ifdef __SANITIZE_THREAD__
    GTEST_SKIP() << "ThreadSanitizer takes SIGSEGV itself and delivers it late: the fault guard's jump out of a "
                    "faulting copy cannot work under it (the normal and ASan builds run this)";
#endif
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::_Exit(unguarded_fault_body()), ::testing::KilledBySignal(SIGSEGV), "");
}

// Receives of one segment take a shorter path in the software NIC than
// receives of several: both must place the same bytes, and both must refuse
// a message that does not fit with a length error that leaves the buffer
// as it was.
TEST(ReceiveSegments, OneOrTwoSegmentsGetTheSameBytes)
{
    Pair pair;
    ASSERT_TRUE(pair.ok);
    std::vector<char> buffer(8192, 'x');
    const DAT_LMR_CONTEXT lkey = pair.enroll(buffer.data(), buffer.size());
    char* const from = buffer.data();
    char* const into = buffer.data() + 4096;
    for (std::size_t i = 0; i < 300; ++i)
        from[i] = static_cast<char>('a' + i % 26);
    auto triplet = [&](char* p, std::size_t n) {
        return DAT_LMR_TRIPLET{reinterpret_cast<DAT_VADDR>(p), static_cast<DAT_SEG_LENGTH>(n), lkey};
    };
    for (const std::size_t bytes : {std::size_t{8}, std::size_t{64}, std::size_t{300}}) {
        for (const int segments : {1, 2}) {
            std::memset(into, 'x', 1024);
            // One segment of exactly the message's size, or two: half and the rest.
            DAT_LMR_TRIPLET recv[2] = {triplet(into, segments == 1 ? bytes : bytes / 2),
                                       triplet(into + 512, bytes - bytes / 2)};
            ASSERT_EQ(dat_ep_post_recv(pair.b, segments, recv, DAT_DTO_COOKIE{.as_64 = 7}, DAT_COMPLETION_DEFAULT_FLAG),
                      kOk);
            DAT_LMR_TRIPLET send = triplet(from, bytes);
            ASSERT_EQ(dat_ep_post_send(pair.a, 1, &send, DAT_DTO_COOKIE{.as_64 = 8}, DAT_COMPLETION_DEFAULT_FLAG),
                      kOk);
            DAT_EVENT e{};
            ASSERT_TRUE(Pair::next(pair.dto_b, e));
            EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
            EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 7u);
            EXPECT_EQ(e.event_data.dto_completion_event_data.transfered_length, bytes);
            ASSERT_TRUE(Pair::next(pair.dto_a, e));
            EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
            if (segments == 1) {
                EXPECT_EQ(std::memcmp(into, from, bytes), 0) << bytes << " bytes";
                EXPECT_EQ(into[bytes], 'x'); // nothing past the message
            } else {
                EXPECT_EQ(std::memcmp(into, from, bytes / 2), 0) << bytes << " bytes";
                EXPECT_EQ(std::memcmp(into + 512, from + bytes / 2, bytes - bytes / 2), 0) << bytes << " bytes";
                EXPECT_EQ(into[bytes / 2], 'x');
            }
        }
    }
}

TEST(ReceiveSegments, MessageLargerThanOneSegmentIsALengthErrorAndTouchesNothing)
{
    Pair pair;
    ASSERT_TRUE(pair.ok);
    std::vector<char> buffer(8192, 'x');
    const DAT_LMR_CONTEXT lkey = pair.enroll(buffer.data(), buffer.size());
    std::memset(buffer.data(), 'm', 64);
    DAT_LMR_TRIPLET recv{reinterpret_cast<DAT_VADDR>(buffer.data() + 4096), 16, lkey};
    ASSERT_EQ(dat_ep_post_recv(pair.b, 1, &recv, DAT_DTO_COOKIE{.as_64 = 7}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_LMR_TRIPLET send{reinterpret_cast<DAT_VADDR>(buffer.data()), 64, lkey};
    ASSERT_EQ(dat_ep_post_send(pair.a, 1, &send, DAT_DTO_COOKIE{.as_64 = 8}, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    DAT_EVENT e{};
    ASSERT_TRUE(Pair::next(pair.dto_b, e));
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 7u);
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_ERR_LOCAL_LENGTH);
    ASSERT_TRUE(Pair::next(pair.dto_a, e));
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 8u);
    EXPECT_NE(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(std::count(buffer.begin() + 4096, buffer.end(), 'x'), 4096); // the buffer and past it: untouched
}

} // namespace
