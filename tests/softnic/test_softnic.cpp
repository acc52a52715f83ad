// The software NIC runs fast-path queues between two queue pairs over a socketpair.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "device.hpp"
#include "fault_guard.hpp"
#include "queues.hpp"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

using namespace fastdapl;
using fastpath::Sge;

namespace {

constexpr std::uint32_t kAll = softnic::kLocalRead | softnic::kLocalWrite | softnic::kRemoteRead | softnic::kRemoteWrite;

// One side of a connection: a queue pair with its CQs and the fast-path views.
struct Endpoint {
    Endpoint(softnic::Device& dev, std::uint32_t pd, std::uint32_t max_inline = 0) : dev(dev), pd(pd)
    {
        scq = dev.create_cq(64);
        rcq = dev.create_cq(64);
        qp = dev.create_qp(pd, scq, rcq, 16, 16, 4, max_inline);
        slots.resize(qp->descriptor().sq.wqe_cnt);
        cookies.resize(qp->descriptor().rq.wqe_cnt);
        sq.init({&qp->descriptor(), qp->qpn(), max_inline, slots.data(), fastpath::DoorbellMode::software, dev.doorbell()});
        rq.init(qp->descriptor(), cookies.data());
        send_cq.init(scq->descriptor());
        recv_cq.init(rcq->descriptor());
    }
    ~Endpoint()
    {
        dev.destroy_qp(qp);
        dev.destroy_cq(scq);
        dev.destroy_cq(rcq);
    }

    // Waits (polling, with inline progress unless `drive` is false: then the
    // engine thread does the work) for the next CQE of `cq`; copies it.
    bool next(fastpath::CompletionQueue& cq, mlx5_cqe64& out, int timeout_ms = 5000, bool drive = true)
    {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        while (std::chrono::steady_clock::now() < deadline) {
            if (const mlx5_cqe64* c = cq.peek()) {
                out = *c;
                cq.consume();
                cq.publish_consumer_index();
                return true;
            }
            if (drive)
                dev.progress();
            std::this_thread::yield();
        }
        return false;
    }
    // True if no CQE arrives within `ms`.
    bool quiet(fastpath::CompletionQueue& cq, int ms = 100)
    {
        mlx5_cqe64 c;
        return !next(cq, c, ms);
    }

    softnic::Device& dev;
    std::uint32_t pd;
    softnic::Cq* scq;
    softnic::Cq* rcq;
    softnic::Qp* qp;
    std::vector<fastpath::SendSlot> slots;
    std::vector<std::uint64_t> cookies;
    fastpath::SendQueue sq;
    fastpath::RecvQueue rq;
    fastpath::CompletionQueue send_cq, recv_cq;
};

struct Pair {
    // `shm`: the frames go through shared-memory rings (fastdapl-shm's wire).
    // `lanes`: each queue pair has a lane too (fastdapl-tcp's large writes
    // go over both).
    Pair(std::uint32_t max_inline = 0, bool shm = false, bool lanes = false)
        : pd(dev.alloc_pd()), a(dev, pd, max_inline), b(dev, pd, max_inline)
    {
        int sv[2];
        EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        EXPECT_TRUE(dev.connect(a.qp, sv[0], shm));
        EXPECT_TRUE(dev.connect(b.qp, sv[1], shm));
        if (lanes) {
            EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
            EXPECT_TRUE(dev.attach_lane(a.qp, sv[0]));
            EXPECT_TRUE(dev.attach_lane(b.qp, sv[1]));
        }
    }
    softnic::Device dev;
    std::uint32_t pd;
    Endpoint a, b;
};

Sge sge_of(std::vector<char>& buf, std::uint32_t key, std::size_t offset = 0, std::size_t len = 0)
{
    return {reinterpret_cast<std::uintptr_t>(buf.data() + offset), static_cast<std::uint32_t>(len ? len : buf.size() - offset), key};
}

std::uint8_t opcode(const mlx5_cqe64& c) { return c.op_own >> 4; }
std::uint8_t syndrome(const mlx5_cqe64& c) { return reinterpret_cast<const std::uint8_t*>(&c)[55]; }

std::uint64_t page_size()
{
    return static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// Fresh anonymous read-write pages; unmaps what is left of them.
struct Pages {
    explicit Pages(std::size_t n) : n(n)
    {
        void* m = mmap(nullptr, n * page_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        EXPECT_NE(m, MAP_FAILED);
        base = m == MAP_FAILED ? 0 : reinterpret_cast<std::uintptr_t>(m);
    }
    ~Pages()
    {
        for (std::size_t i = 0; i < n; ++i)
            unmap(i);
    }
    std::uint64_t at(std::size_t i) const { return base + i * page_size(); }
    void unmap(std::size_t i)
    {
        if (base && !gone[i]) {
            EXPECT_EQ(munmap(reinterpret_cast<void*>(at(i)), page_size()), 0);
        }
        gone[i] = true;
    }
    std::size_t n;
    std::uint64_t base = 0;
    std::vector<bool> gone = std::vector<bool>(n);
};

} // namespace

TEST(MemoryTable, ChecksRangeRightsAndProtectionDomain)
{
    // Registered memory must be mapped: a page of our own, its offsets as before.
    Pages page(1);
    const std::uint64_t b = page.at(0);
    softnic::MemoryTable t;
    const std::uint32_t k = t.add(b, 0x100, softnic::kLocalRead | softnic::kRemoteWrite, 7);
    ASSERT_NE(k, 0u);
    EXPECT_TRUE(t.check(k, b, 0x100, softnic::kLocalRead, 7));
    EXPECT_TRUE(t.check(k, b + 0xff, 1, softnic::kRemoteWrite, 7));
    EXPECT_TRUE(t.check(k, b + 0x100, 0, softnic::kLocalRead, 7));
    EXPECT_FALSE(t.check(k, b - 1, 1, softnic::kLocalRead, 7));
    EXPECT_FALSE(t.check(k, b + 0xff, 2, softnic::kLocalRead, 7));
    EXPECT_FALSE(t.check(k, b, ~0ull, softnic::kLocalRead, 7));
    EXPECT_FALSE(t.check(k, ~0ull, 2, softnic::kLocalRead, 7)); // wraps around
    EXPECT_FALSE(t.check(k, b, 8, softnic::kRemoteRead, 7));
    EXPECT_FALSE(t.check(k, b, 8, softnic::kLocalRead, 8));
    EXPECT_FALSE(t.check(0, b, 8, softnic::kLocalRead, 7));
    EXPECT_TRUE(t.remove(k));
    EXPECT_FALSE(t.remove(k));
    EXPECT_FALSE(t.check(k, b, 8, softnic::kLocalRead, 7));
    const std::uint32_t again = t.add(b, 0x100, softnic::kLocalRead, 7); // same slot, new key
    EXPECT_NE(again, 0u);
    EXPECT_NE(again, k);
    EXPECT_FALSE(t.check(k, b, 8, softnic::kLocalRead, 7));
}

// A region registered at another address (zero-based: iova 0) is checked
// in that space, and its keys and windows translate to where it is here.
TEST(MemoryTable, ZeroBasedRegionTranslatesOffsets)
{
    Pages page(1);
    const std::uint64_t b = page.at(0);
    softnic::MemoryTable t;
    const std::uint32_t all = softnic::kLocalRead | softnic::kLocalWrite | softnic::kRemoteRead | softnic::kRemoteWrite;
    const std::uint32_t k = t.add_at(0, b + 0x40, 0x100, all, 3);
    ASSERT_NE(k, 0u);
    std::uint64_t host = 0;
    EXPECT_TRUE(t.check(k, 0, 0x100, softnic::kLocalRead, 3, 0, &host));
    EXPECT_EQ(host, b + 0x40);
    EXPECT_TRUE(t.check(k, 0xf8, 8, softnic::kRemoteWrite, 3, 0, &host));
    EXPECT_EQ(host, b + 0x40 + 0xf8);
    EXPECT_FALSE(t.check(k, 0xf9, 8, softnic::kRemoteWrite, 3)); // past its end
    EXPECT_FALSE(t.check(k, b + 0x40, 8, softnic::kLocalRead, 3)); // its address here is not its address
    // A window over part of it, in the region's offsets.
    const std::uint32_t w = t.add_window(3);
    const std::uint32_t wk = t.bind_window(w, k, 0x80, 0x20, softnic::kRemoteRead, 0);
    ASSERT_NE(wk, 0u);
    EXPECT_TRUE(t.check(wk, 0x90, 8, softnic::kRemoteRead, 3, 0, &host));
    EXPECT_EQ(host, b + 0x40 + 0x90);
    EXPECT_FALSE(t.check(wk, 0x70, 8, softnic::kRemoteRead, 3));
    EXPECT_EQ(t.bind_window(w, k, 0xf0, 0x20, softnic::kRemoteRead, 0), 0u); // runs past the region
    // A zero-based window over the same bytes: addressed from 0, checked
    // against its own length, landing where its range starts.
    const std::uint32_t zk = t.bind_window(wk, k, 0x80, 0x20, softnic::kRemoteWrite, 0, true);
    ASSERT_NE(zk, 0u);
    EXPECT_TRUE(t.check(zk, 0, 0x20, softnic::kRemoteWrite, 3, 0, &host));
    EXPECT_EQ(host, b + 0x40 + 0x80);
    EXPECT_TRUE(t.check(zk, 0x18, 8, softnic::kRemoteWrite, 3, 0, &host));
    EXPECT_EQ(host, b + 0x40 + 0x98);
    EXPECT_FALSE(t.check(zk, 0x19, 8, softnic::kRemoteWrite, 3));   // past its end
    EXPECT_FALSE(t.check(zk, 0x80, 8, softnic::kRemoteWrite, 3));   // the region's address is not its address
    EXPECT_FALSE(t.check(zk, 0, 8, softnic::kRemoteRead, 3));       // a right it was not given
    EXPECT_FALSE(t.check(wk, 0x90, 8, softnic::kRemoteRead, 3));    // the previous binding's key is gone
}

// Guarded copies of every size a small message has (the x86-64 build copies
// up to 64 bytes with a routine of its own, larger ones with memcpy under
// sigsetjmp): exactly the bytes asked for land, nothing around them moves;
// a copy that runs into a page that is not there, from either side and at
// any point of it, returns false and the process goes on.
TEST(FaultGuard, CopiesEverySmallSizeExactly)
{
#ifdef __SANITIZE_THREAD__
    GTEST_SKIP() << "ThreadSanitizer delivers SIGSEGV late: the guard cannot work under it";
#endif
    ASSERT_TRUE(softnic::install_fault_guard() || std::getenv("FASTDAPL_SOFTNIC_FAULT_GUARD"));
    std::vector<unsigned char> src(256), dst(256);
    for (std::size_t i = 0; i < src.size(); ++i)
        src[i] = static_cast<unsigned char>(i * 7 + 1);
    for (std::size_t n = 1; n <= 130; ++n) {
        for (std::size_t offset : {0, 1, 3, 8, 15}) {
            for (const bool place : {false, true}) {
                std::fill(dst.begin(), dst.end(), 0xee);
                const softnic::Piece piece{dst.data() + 32 + offset, src.data() + offset, n};
                ASSERT_TRUE(place ? softnic::guarded_place(&piece, 1) : softnic::guarded_copy(piece.dst, piece.src, n))
                    << n << " bytes";
                for (std::size_t i = 0; i < dst.size(); ++i) {
                    const bool inside = i >= 32 + offset && i < 32 + offset + n;
                    ASSERT_EQ(dst[i], inside ? src[i - 32] : 0xee) << n << " bytes at +" << offset << ", byte " << i;
                }
            }
        }
    }
}

TEST(FaultGuard, SmallCopiesIntoOrFromMissingPagesFail)
{
#ifdef __SANITIZE_THREAD__
    GTEST_SKIP() << "ThreadSanitizer delivers SIGSEGV late: the guard cannot work under it";
#endif
    if (!softnic::install_fault_guard())
        GTEST_SKIP() << "the fault guard is off (FASTDAPL_SOFTNIC_FAULT_GUARD=0)";
    const std::uint64_t pg = page_size();
    Pages p(3); // rw, none (unmapped), rw PROT_NONE
    p.unmap(1);
    ASSERT_EQ(mprotect(reinterpret_cast<void*>(p.at(2)), pg, PROT_NONE), 0);
    std::vector<unsigned char> good(256, 0x5a);
    auto* const first = reinterpret_cast<unsigned char*>(p.at(0));
    for (std::size_t n = 1; n <= 130; ++n) {
        // Runs off the end of the first page into the missing one: the last
        // byte, or all but the first, or every byte is not there.
        for (std::size_t before : {n - 1, std::size_t{1}, std::size_t{0}}) {
            if (before >= n)
                continue;
            unsigned char* const edge = first + pg - before;
            for (const bool place : {false, true}) {
                const softnic::Piece into{edge, good.data(), n};
                EXPECT_FALSE(place ? softnic::guarded_place(&into, 1) : softnic::guarded_copy(edge, good.data(), n))
                    << n << " bytes into a missing page, " << before << " before it";
                const softnic::Piece from{good.data(), edge, n};
                EXPECT_FALSE(place ? softnic::guarded_place(&from, 1) : softnic::guarded_copy(good.data(), edge, n))
                    << n << " bytes from a missing page, " << before << " before it";
            }
        }
        // Wholly inside a PROT_NONE page, either side.
        auto* const none = reinterpret_cast<unsigned char*>(p.at(2)) + 100;
        EXPECT_FALSE(softnic::guarded_copy(none, good.data(), n)) << n;
        EXPECT_FALSE(softnic::guarded_copy(good.data(), none, n)) << n;
    }
    // What the guard refused left the process whole: a copy still works.
    std::vector<unsigned char> out(8, 0);
    EXPECT_TRUE(softnic::guarded_copy(out.data(), good.data(), out.size()));
    EXPECT_EQ(out, std::vector<unsigned char>(8, 0x5a));
}

TEST(MappedRange, RefusesWhatIsNotMappedWithTheAccessAskedFor)
{
    using softnic::RangeFault;
    const std::uint64_t pg = page_size();
    Pages p(4); // rw rw none unmapped
    ASSERT_EQ(mprotect(reinterpret_cast<void*>(p.at(2)), pg, PROT_NONE), 0);
    p.unmap(3);

    EXPECT_EQ(softnic::check_mapped(p.at(0), 2 * pg, true), RangeFault::none);
    EXPECT_EQ(softnic::check_mapped(p.at(1) + 8, pg - 8, true), RangeFault::none);
    // Not mapped at all, and PROT_NONE: from the first byte.
    EXPECT_EQ(softnic::check_mapped(p.at(3), 16, false), RangeFault::start);
    EXPECT_EQ(softnic::check_mapped(p.at(3) + 100, 1, true), RangeFault::start);
    EXPECT_EQ(softnic::check_mapped(p.at(2), 16, false), RangeFault::start);
    EXPECT_EQ(softnic::check_mapped(p.at(2) + pg - 1, 1, false), RangeFault::start);
    // Running past the end of the mapping, into PROT_NONE or into nothing.
    EXPECT_EQ(softnic::check_mapped(p.at(1), pg + 1, false), RangeFault::length);
    EXPECT_EQ(softnic::check_mapped(p.at(0), 4 * pg, true), RangeFault::length);
    // Absurd lengths, a length that wraps, and none at all: refused at once.
    EXPECT_EQ(softnic::check_mapped(p.at(0), std::uint64_t{1} << 63, false), RangeFault::length);
    EXPECT_EQ(softnic::check_mapped(p.at(0), ~std::uint64_t{0}, false), RangeFault::length);
    EXPECT_EQ(softnic::check_mapped(p.at(0), -p.at(0), false), RangeFault::length); // ends exactly at 2^64
    EXPECT_EQ(softnic::check_mapped(p.at(0), 0, false), RangeFault::length);
    // Nothing, and the kernel's own pages: the null page and vsyscall.
    EXPECT_EQ(softnic::check_mapped(0, 16, false), RangeFault::start);
    EXPECT_EQ(softnic::check_mapped(0xffffffffff600000ull, 16, false), RangeFault::start);
}

TEST(MappedRange, WriteRightsNeedWritableMemory)
{
    using softnic::RangeFault;
    const std::uint64_t pg = page_size();
    Pages p(2);
    ASSERT_EQ(mprotect(reinterpret_cast<void*>(p.at(1)), pg, PROT_READ), 0);
    EXPECT_EQ(softnic::check_mapped(p.at(1), 64, false), RangeFault::none);
    EXPECT_EQ(softnic::check_mapped(p.at(1), 64, true), RangeFault::rights);
    EXPECT_EQ(softnic::check_mapped(p.at(0), 2 * pg, false), RangeFault::none);
    EXPECT_EQ(softnic::check_mapped(p.at(0), 2 * pg, true), RangeFault::rights);
    EXPECT_EQ(softnic::check_mapped(p.at(0), pg, true), RangeFault::none);
}

TEST(MappedRange, SpansAdjacentMappings)
{
    using softnic::RangeFault;
    const std::uint64_t pg = page_size();
    Pages p(3);
    // Three mappings side by side that the kernel cannot merge: private,
    // shared, private (a shared mapping never merges with a private one).
    void* shared = mmap(reinterpret_cast<void*>(p.at(1)), pg, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    ASSERT_EQ(shared, reinterpret_cast<void*>(p.at(1)));
    EXPECT_EQ(softnic::check_mapped(p.at(0), 3 * pg, true), RangeFault::none);
    EXPECT_EQ(softnic::check_mapped(p.at(0) + pg - 1, pg + 2, true), RangeFault::none);
    // A hole in the middle breaks it.
    p.unmap(1);
    EXPECT_EQ(softnic::check_mapped(p.at(0), 3 * pg, false), RangeFault::length);
    EXPECT_EQ(softnic::check_mapped(p.at(2), pg, true), RangeFault::none);
}

TEST(MemoryTable, RefusesUnmappedRangesAndKeepsTheOthers)
{
    const std::uint64_t pg = page_size();
    Pages p(3);
    ASSERT_EQ(mprotect(reinterpret_cast<void*>(p.at(1)), pg, PROT_READ), 0);
    p.unmap(2);
    softnic::MemoryTable t;
    const std::uint32_t good = t.add(p.at(0), pg, kAll, 1);
    ASSERT_NE(good, 0u);
    softnic::RangeFault why = softnic::RangeFault::none;
    EXPECT_EQ(t.add(p.at(2), 64, softnic::kLocalRead, 1, &why), 0u);
    EXPECT_EQ(why, softnic::RangeFault::start);
    EXPECT_EQ(t.add(p.at(0), std::uint64_t{1} << 63, kAll, 1, &why), 0u);
    EXPECT_EQ(why, softnic::RangeFault::length);
    EXPECT_EQ(t.add(p.at(1), 64, softnic::kLocalRead | softnic::kRemoteWrite, 1, &why), 0u);
    EXPECT_EQ(why, softnic::RangeFault::rights);
    EXPECT_EQ(t.add(p.at(1), 64, softnic::kLocalWrite, 1, &why), 0u);
    EXPECT_EQ(why, softnic::RangeFault::rights);
    const std::uint32_t readable = t.add(p.at(1), 64, softnic::kLocalRead | softnic::kRemoteRead, 1, &why);
    EXPECT_NE(readable, 0u);
    EXPECT_EQ(why, softnic::RangeFault::none);
    EXPECT_TRUE(t.check(good, p.at(0), pg, softnic::kRemoteWrite, 1));
    EXPECT_TRUE(t.check(readable, p.at(1), 64, softnic::kRemoteRead, 1));
}

TEST(Softnic, SendReceiveMovesDataAndCompletesBothSides)
{
    Pair p;
    std::vector<char> src(4096), dst(8192, 0);
    for (std::size_t i = 0; i < src.size(); ++i)
        src[i] = static_cast<char>(i * 7);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
    const auto kd = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), dst.size(), kAll, p.pd);
    Sge r[2] = {sge_of(dst, kd, 0, 1000), sge_of(dst, kd, 1000, 7192)};
    ASSERT_TRUE(p.b.rq.post(r, 2, 0xb0));
    Sge s = sge_of(src, ks);
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, &s, 1, 4096, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 0xa0));
    p.a.sq.ring();

    mlx5_cqe64 c;
    ASSERT_TRUE(p.b.next(p.b.recv_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_RESP_SEND);
    EXPECT_EQ(be32toh(c.byte_cnt), 4096u);
    EXPECT_EQ(be16toh(c.wqe_counter), 0u);
    EXPECT_EQ(be32toh(c.sop_drop_qpn) & 0xffffff, p.b.qp->qpn());
    EXPECT_EQ(p.b.rq.complete_oldest(), 0xb0u);
    EXPECT_EQ(std::memcmp(src.data(), dst.data(), 4096), 0);

    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ);
    EXPECT_EQ(p.a.sq.slot(be16toh(c.wqe_counter)).cookie, 0xa0u);
}

// fastdapl-shm's small-message path, posted as the provider posts (the
// posting thread kicks the queue pair) and polled as a busy consumer polls:
// inline SENDs and WRITEs (and one-segment ones) framed in place in the
// peer's ring, frames handled by the consumer's look, ACKs held and carried.
// Some 90 MB of frames of every length from 1 to 60 bytes and of 65 to
// 19,964 bytes wrap the 2 MiB rings many times, so
// frames meet the ring's end at every offset (those that would wrap take the
// general path, and the reader the whole round), and the writer sees the
// reader's tail only as often as the reader publishes it.
TEST(Softnic, ShmSmallMessagesWrapTheRingsInOrder)
{
    Pair p(64, true);
    std::vector<char> src(20000), dst(20000, 0), target(20000, 0);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
    const auto kd = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), dst.size(), kAll, p.pd);
    const auto kt = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(target.data()), target.size(), kAll, p.pd);
    auto post = [&](std::uint8_t op, std::uint32_t len, const fastpath::RemoteAddress* to, std::uint64_t cookie) {
        Sge s = sge_of(src, ks, 0, len);
        ASSERT_TRUE(p.a.sq.post(op, &s, 1, len, to, 0, MLX5_WQE_CTRL_CQ_UPDATE, cookie));
        p.a.sq.publish_only();
        if (!p.dev.kick(p.a.qp))
            p.a.sq.ring();
    };
    mlx5_cqe64 c;
    for (std::uint32_t i = 0; i < 60000; ++i) {
        // Every seventh is not inline: one segment, some of them larger than
        // what is copied in place (16 KiB).
        const std::uint32_t len = i % 7 == 6 ? 65 + (i * 97) % 19900 : 1 + i % 60;
        for (std::uint32_t j = 0; j < len; ++j)
            src[j] = static_cast<char>(i * 31 + j);
        if (i % 5 == 4) { // a WRITE, then the SEND below says it is there
            const fastpath::RemoteAddress to{reinterpret_cast<std::uintptr_t>(target.data()), kt};
            post(MLX5_OPCODE_RDMA_WRITE, len, &to, i);
            ASSERT_TRUE(p.a.next(p.a.send_cq, c)) << i;
            ASSERT_EQ(opcode(c), MLX5_CQE_REQ) << i;
            ASSERT_EQ(p.a.sq.slot(be16toh(c.wqe_counter)).cookie, i);
            p.a.sq.retire_through(be16toh(c.wqe_counter));
            ASSERT_EQ(std::memcmp(target.data(), src.data(), len), 0) << i;
        }
        Sge r = sge_of(dst, kd);
        ASSERT_TRUE(p.b.rq.post(&r, 1, i));
        post(MLX5_OPCODE_SEND, len, nullptr, i);
        ASSERT_TRUE(p.b.next(p.b.recv_cq, c)) << i;
        ASSERT_EQ(opcode(c), MLX5_CQE_RESP_SEND) << i;
        ASSERT_EQ(be32toh(c.byte_cnt), len) << i;
        ASSERT_EQ(p.b.rq.complete_oldest(), i);
        ASSERT_EQ(std::memcmp(dst.data(), src.data(), len), 0) << i;
        ASSERT_TRUE(p.a.next(p.a.send_cq, c)) << i;
        ASSERT_EQ(opcode(c), MLX5_CQE_REQ) << i;
        ASSERT_EQ(p.a.sq.slot(be16toh(c.wqe_counter)).cookie, i);
        p.a.sq.retire_through(be16toh(c.wqe_counter));
    }
}

// fastdapl-shm's wake-up handshake: each side's engine thread sleeps as
// soon as it is idle (nobody polls here: the CQs are only looked at), and
// the posting thread writes each ping and pong into the peer's ring itself
// (kick), so every message meets an engine that is asleep or just going to
// sleep. A writer that missed the sleep flag would leave its frame in the
// ring until the engine's sleep timed out: counted by late_wakeups.
TEST(Softnic, ShmWritersWakeSleepingEngines)
{
    softnic::Device da, db;
    const std::uint32_t pda = da.alloc_pd(), pdb = db.alloc_pd();
    Endpoint a(da, pda, 64), b(db, pdb, 64);
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ASSERT_TRUE(da.connect(a.qp, sv[0], true));
    ASSERT_TRUE(db.connect(b.qp, sv[1], true));
    std::vector<char> inbox_a(64), inbox_b(64);
    const auto ka = da.memory().add(reinterpret_cast<std::uintptr_t>(inbox_a.data()), 64, kAll, pda);
    const auto kb = db.memory().add(reinterpret_cast<std::uintptr_t>(inbox_b.data()), 64, kAll, pdb);
    // Looks at a CQ until its next CQE, without moving the device.
    auto wait_for = [](Endpoint& end, fastpath::CompletionQueue& cq, mlx5_cqe64& out) {
        return end.next(cq, out, 10000, false);
    };
    auto send = [](softnic::Device& dev, Endpoint& from, std::uint64_t value) {
        Sge s{reinterpret_cast<std::uintptr_t>(&value), sizeof value, 0};
        ASSERT_TRUE(from.sq.post(MLX5_OPCODE_SEND, &s, 1, sizeof value, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, value));
        from.sq.publish_only();
        if (!dev.kick(from.qp))
            from.sq.ring();
    };
    mlx5_cqe64 c;
    for (std::uint64_t i = 0; i < 3000; ++i) {
        Sge ra = sge_of(inbox_a, ka), rb = sge_of(inbox_b, kb);
        ASSERT_TRUE(a.rq.post(&ra, 1, i));
        ASSERT_TRUE(b.rq.post(&rb, 1, i));
        send(da, a, i);
        ASSERT_TRUE(wait_for(b, b.recv_cq, c)) << i;
        ASSERT_EQ(opcode(c), MLX5_CQE_RESP_SEND) << i;
        ASSERT_EQ(b.rq.complete_oldest(), i);
        ASSERT_EQ(std::memcmp(inbox_b.data(), &i, sizeof i), 0) << i;
        send(db, b, ~i);
        ASSERT_TRUE(wait_for(a, a.recv_cq, c)) << i;
        ASSERT_EQ(opcode(c), MLX5_CQE_RESP_SEND) << i;
        ASSERT_EQ(a.rq.complete_oldest(), i);
        for (auto [end, cq] : {std::pair{&a, &a.send_cq}, std::pair{&b, &b.send_cq}}) {
            ASSERT_TRUE(wait_for(*end, *cq, c)) << i;
            ASSERT_EQ(opcode(c), MLX5_CQE_REQ) << i;
            end->sq.retire_through(be16toh(c.wqe_counter));
        }
        ASSERT_EQ(da.late_wakeups() + db.late_wakeups(), 0u) << i;
    }
}

TEST(Softnic, InlineSendWithImmediateAndSolicitedBit)
{
    Pair p(64);
    std::vector<char> dst(64, 0);
    const auto kd = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), dst.size(), kAll, p.pd);
    Sge r = sge_of(dst, kd);
    ASSERT_TRUE(p.b.rq.post(&r, 1, 1));
    char msg[] = "inline!";
    Sge s{reinterpret_cast<std::uintptr_t>(msg), 8, 0}; // no key: inline data is not checked against the table
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND_IMM, &s, 1, 8, nullptr, htobe32(0x5eed),
                            MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED, 2));
    std::memcpy(msg, "CHANGED", 8); // inline data was copied at post time
    p.a.sq.ring();
    mlx5_cqe64 c;
    ASSERT_TRUE(p.b.next(p.b.recv_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_RESP_SEND_IMM);
    EXPECT_EQ(be32toh(c.imm_inval_pkey), 0x5eedu);
    EXPECT_EQ(c.op_own & 2, 2); // solicited
    EXPECT_STREQ(dst.data(), "inline!");
}

TEST(Softnic, WriteThenSendOrderAndReadWithoutPeerHelp)
{
    Pair p;
    std::vector<char> local(256, 'L'), remote(256, 'R'), note(16), inbox(16);
    const auto kl = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(local.data()), 256, kAll, p.pd);
    const auto kr = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(remote.data()), 256, kAll, p.pd);
    const auto kn = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(note.data()), 16, kAll, p.pd);
    const auto ki = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(inbox.data()), 16, kAll, p.pd);
    Sge r = sge_of(inbox, ki);
    ASSERT_TRUE(p.b.rq.post(&r, 1, 9));
    Sge w = sge_of(local, kl, 0, 100);
    fastpath::RemoteAddress ra{reinterpret_cast<std::uintptr_t>(remote.data()) + 10, kr};
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_RDMA_WRITE, &w, 1, 100, &ra, 0, 0, 1)); // unsignalled
    Sge n = sge_of(note, kn);
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, &n, 1, 16, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 2));
    p.a.sq.ring();
    mlx5_cqe64 c;
    ASSERT_TRUE(p.b.next(p.b.recv_cq, c));
    // The write's data is in place when the following send's receive completes.
    EXPECT_EQ(remote[9], 'R');
    EXPECT_EQ(remote[10], 'L');
    EXPECT_EQ(remote[109], 'L');
    EXPECT_EQ(remote[110], 'R');
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(be16toh(c.wqe_counter), 1u); // only the signalled send reports
    p.a.sq.retire_through(be16toh(c.wqe_counter));
    EXPECT_EQ(p.a.sq.outstanding_bbs(), 0u);

    // RDMA READ: B's consumer does nothing; its engine answers.
    std::vector<char> into(50, 0);
    const auto kinto = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(into.data()), 50, kAll, p.pd);
    Sge rd = sge_of(into, kinto);
    fastpath::RemoteAddress src{reinterpret_cast<std::uintptr_t>(remote.data()) + 5, kr};
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_RDMA_READ, &rd, 1, 50, &src, 0, MLX5_WQE_CTRL_CQ_UPDATE, 3));
    p.a.sq.ring();
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ);
    EXPECT_EQ(be32toh(c.byte_cnt), 50u);
    EXPECT_EQ(std::memcmp(into.data(), remote.data() + 5, 50), 0);
}

// Each violation: the requester gets the remote access error, the target's
// memory is untouched, and both queue pairs fail (outstanding work flushed).
class RemoteViolation : public ::testing::TestWithParam<int> {};

TEST_P(RemoteViolation, RequesterErrorTargetUntouchedConnectionBroken)
{
    Pair p;
    std::vector<char> local(64, 'X'), target(64, 'T'), spare(64);
    const auto kl = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(local.data()), 64, kAll, p.pd);
    const std::uint32_t other_pd = p.dev.alloc_pd();
    std::uint32_t rights = kAll, pd = p.pd;
    std::uint64_t where = reinterpret_cast<std::uintptr_t>(target.data());
    if (GetParam() == 0)
        where += 60; // 64-byte write at offset 60: outside the region
    if (GetParam() == 1)
        pd = other_pd; // region of another protection domain
    if (GetParam() == 2)
        rights = softnic::kLocalRead | softnic::kLocalWrite | softnic::kRemoteRead; // no remote write
    const auto kt = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(target.data()), 64, rights, pd);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(spare.data()), 64, kAll, p.pd);
    Sge r = sge_of(spare, ks);
    ASSERT_TRUE(p.b.rq.post(&r, 1, 1)); // will be flushed
    Sge w = sge_of(local, kl);
    fastpath::RemoteAddress ra{where, kt};
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_RDMA_WRITE, &w, 1, 64, &ra, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, &w, 1, 64, nullptr, 0, 0, 2)); // behind it: flushed
    p.a.sq.ring();
    mlx5_cqe64 c;
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ_ERR);
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
    EXPECT_EQ(be16toh(c.wqe_counter), 0u);
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
    EXPECT_EQ(be16toh(c.wqe_counter), 1u);
    EXPECT_EQ(std::string(target.data(), 64), std::string(64, 'T'));
    ASSERT_TRUE(p.b.next(p.b.recv_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_RESP_ERR);
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
    EXPECT_EQ(p.a.qp->state(), softnic::QpState::error);
    EXPECT_EQ(p.b.qp->state(), softnic::QpState::error);
}

INSTANTIATE_TEST_SUITE_P(OutOfRangeWrongPdNoPrivilege, RemoteViolation, ::testing::Values(0, 1, 2));

TEST(Softnic, LocalKeyViolationFailsBeforeAnythingIsSent)
{
    Pair p;
    std::vector<char> buf(64, 'B'), dst(64, 0);
    const auto kd = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), 64, kAll, p.pd);
    const auto kb = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(buf.data()), 64, softnic::kLocalWrite, p.pd); // no local read
    Sge r = sge_of(dst, kd);
    ASSERT_TRUE(p.b.rq.post(&r, 1, 1));
    Sge s = sge_of(buf, kb);
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, &s, 1, 64, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    p.a.sq.ring();
    mlx5_cqe64 c;
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ_ERR);
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
    ASSERT_TRUE(p.b.next(p.b.recv_cq, c)); // the peer sees the connection end: its receive is flushed
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
    EXPECT_EQ(dst[0], 0);
}

TEST(Softnic, MessageLargerThanTheReceiveBuffer)
{
    Pair p;
    std::vector<char> big(200, 'G'), small(100, 0);
    const auto kb = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(big.data()), 200, kAll, p.pd);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(small.data()), 100, kAll, p.pd);
    Sge r = sge_of(small, ks);
    ASSERT_TRUE(p.b.rq.post(&r, 1, 1));
    Sge s = sge_of(big, kb);
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, &s, 1, 200, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    p.a.sq.ring();
    mlx5_cqe64 c;
    ASSERT_TRUE(p.b.next(p.b.recv_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_RESP_ERR);
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ_ERR);
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
    EXPECT_EQ(small[0], 0);
}

TEST(Softnic, ReceiveNotReadyWaitsForAPostedReceive)
{
    Pair p;
    std::vector<char> src(32, 'S'), dst(32, 0);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), 32, kAll, p.pd);
    const auto kd = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), 32, kAll, p.pd);
    Sge s = sge_of(src, ks);
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, &s, 1, 32, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    p.a.sq.ring();
    EXPECT_TRUE(p.a.quiet(p.a.send_cq, 200)); // not placed, so not complete
    Sge r = sge_of(dst, kd);
    ASSERT_TRUE(p.b.rq.post(&r, 1, 1));
    mlx5_cqe64 c;
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ);
    EXPECT_EQ(dst[31], 'S');
}

TEST(Softnic, PeerGoneFlushesEverythingInOrder)
{
    Pair p;
    std::vector<char> buf(64, 'P');
    const auto kb = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(buf.data()), 64, kAll, p.pd);
    Sge r = sge_of(buf, kb);
    for (int i = 0; i < 3; ++i)
        ASSERT_TRUE(p.a.rq.post(&r, 1, static_cast<std::uint64_t>(i)));
    p.dev.disconnect(p.b.qp); // the peer's end closes
    mlx5_cqe64 c;
    for (std::uint16_t i = 0; i < 3; ++i) {
        ASSERT_TRUE(p.a.next(p.a.recv_cq, c)) << i;
        EXPECT_EQ(opcode(c), MLX5_CQE_RESP_ERR);
        EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
        EXPECT_EQ(be16toh(c.wqe_counter), i);
    }
    // Requests posted after the failure are flushed as well.
    Sge s = sge_of(buf, kb);
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, &s, 1, 64, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 7));
    p.a.sq.ring();
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
}

TEST(Softnic, MalformedWireDataBreaksOnlyThatConnection)
{
    Pair p; // a healthy pair alongside
    Endpoint victim(p.dev, p.pd);
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ASSERT_TRUE(p.dev.connect(victim.qp, sv[0]));
    std::vector<char> buf(64);
    const auto kb = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(buf.data()), 64, kAll, p.pd);
    Sge r = sge_of(buf, kb);
    ASSERT_TRUE(victim.rq.post(&r, 1, 1));
    const char garbage[48] = "\x09\x00\x00\x07 this is not a frame of ours........";
    ASSERT_EQ(write(sv[1], garbage, sizeof garbage), static_cast<ssize_t>(sizeof garbage));
    mlx5_cqe64 c;
    ASSERT_TRUE(victim.next(victim.recv_cq, c));
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
    EXPECT_EQ(victim.qp->state(), softnic::QpState::error);
    close(sv[1]);
    EXPECT_EQ(p.a.qp->state(), softnic::QpState::ready);
    EXPECT_EQ(p.b.qp->state(), softnic::QpState::ready);
}

TEST(Softnic, ManyMessagesKeepOrderAcrossQueueWrap)
{
    Pair p;
    constexpr int kCount = 500;
    std::vector<char> src(8), dst(8 * 16);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), 8, kAll, p.pd);
    const auto kd = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), dst.size(), kAll, p.pd);
    int received = 0;
    for (int i = 0; i < 16; ++i) {
        Sge r = sge_of(dst, kd, static_cast<std::size_t>(i) * 8, 8);
        ASSERT_TRUE(p.b.rq.post(&r, 1, static_cast<std::uint64_t>(i)));
    }
    for (int i = 0; i < kCount; ++i) {
        std::memcpy(src.data(), &i, sizeof i);
        Sge s = sge_of(src, ks);
        ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, &s, 1, 8, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, static_cast<std::uint64_t>(i)));
        p.a.sq.ring();
        mlx5_cqe64 c;
        ASSERT_TRUE(p.a.next(p.a.send_cq, c)) << i;
        ASSERT_EQ(opcode(c), MLX5_CQE_REQ) << i;
        EXPECT_EQ(p.a.sq.slot(be16toh(c.wqe_counter)).cookie, static_cast<std::uint64_t>(i));
        p.a.sq.retire_through(be16toh(c.wqe_counter));
        ASSERT_TRUE(p.b.next(p.b.recv_cq, c)) << i;
        const std::uint64_t slot = p.b.rq.complete_oldest();
        int got;
        std::memcpy(&got, dst.data() + slot * 8, sizeof got);
        EXPECT_EQ(got, received++);
        Sge r = sge_of(dst, kd, slot * 8, 8);
        ASSERT_TRUE(p.b.rq.post(&r, 1, slot));
    }
}

namespace {

// Records how each side's connection ended (on the engine's thread).
struct EndRecord {
    std::atomic<int> calls{0};
    std::atomic<bool> orderly{false};
    static void on_ended(void* self, bool orderly)
    {
        auto* r = static_cast<EndRecord*>(self);
        r->orderly = orderly;
        ++r->calls;
    }
    bool wait(int ms = 5000)
    {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
        while (calls.load() == 0 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return calls.load() > 0;
    }
};

} // namespace

TEST(Softnic, DeliberateDisconnectEndsThePeerOrderly)
{
    Pair p;
    EndRecord a_end, b_end;
    p.a.qp->set_on_ended(&EndRecord::on_ended, &a_end);
    p.b.qp->set_on_ended(&EndRecord::on_ended, &b_end);
    p.dev.disconnect(p.a.qp);
    ASSERT_TRUE(b_end.wait());
    EXPECT_TRUE(b_end.orderly.load());
    EXPECT_EQ(b_end.calls.load(), 1);
}

TEST(Softnic, StreamEndingWithoutGoodbyeIsBrokenAndFailsTheOldestRequest)
{
    softnic::Device dev;
    const std::uint32_t pd = dev.alloc_pd();
    Endpoint a(dev, pd);
    EndRecord a_end;
    a.qp->set_on_ended(&EndRecord::on_ended, &a_end);
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ASSERT_TRUE(dev.connect(a.qp, sv[0]));
    std::vector<char> buf(64, 'x');
    const auto kb = dev.memory().add(reinterpret_cast<std::uintptr_t>(buf.data()), 64, kAll, pd);
    for (std::uint64_t i = 0; i < 3; ++i) {
        Sge s = sge_of(buf, kb);
        ASSERT_TRUE(a.sq.post(MLX5_OPCODE_SEND, &s, 1, 64, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, i));
    }
    a.sq.ring();
    char sink[4096];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::size_t got = 0; // the three sends reach the "peer", which then dies without a word
    while (got < 3 * (24 + 64) && std::chrono::steady_clock::now() < deadline) {
        const ssize_t n = recv(sv[1], sink, sizeof sink, MSG_DONTWAIT);
        if (n > 0)
            got += static_cast<std::size_t>(n);
        else
            dev.progress();
    }
    ASSERT_EQ(got, 3u * (24 + 64));
    close(sv[1]);
    mlx5_cqe64 c;
    ASSERT_TRUE(a.next(a.send_cq, c));
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
    EXPECT_EQ(be16toh(c.wqe_counter), 0);
    for (std::uint16_t i = 1; i < 3; ++i) {
        ASSERT_TRUE(a.next(a.send_cq, c));
        EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
        EXPECT_EQ(be16toh(c.wqe_counter), i);
    }
    ASSERT_TRUE(a_end.wait());
    EXPECT_FALSE(a_end.orderly.load());
}

TEST(Softnic, GracefulDisconnectCompletesRequestsThenEndsBothSidesOrderly)
{
    Pair p;
    EndRecord a_end, b_end;
    p.a.qp->set_on_ended(&EndRecord::on_ended, &a_end);
    p.b.qp->set_on_ended(&EndRecord::on_ended, &b_end);
    std::vector<char> src(4096, 's'), dst(4096 * 5, 0);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
    const auto kd = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), dst.size(), kAll, p.pd);
    for (std::uint64_t i = 0; i < 5; ++i) { // one more receive than sends: it is flushed at the end
        Sge r = sge_of(dst, kd, i * 4096, 4096);
        ASSERT_TRUE(p.b.rq.post(&r, 1, i));
    }
    for (std::uint64_t i = 0; i < 4; ++i) {
        Sge s = sge_of(src, ks);
        ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, &s, 1, 4096, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, i));
    }
    p.a.sq.ring();
    p.dev.disconnect_gracefully(p.a.qp); // at once: the sends must still all complete
    mlx5_cqe64 c;
    for (std::uint16_t i = 0; i < 4; ++i) {
        ASSERT_TRUE(p.a.next(p.a.send_cq, c)) << i;
        EXPECT_EQ(opcode(c), MLX5_CQE_REQ) << i;
        ASSERT_TRUE(p.b.next(p.b.recv_cq, c)) << i;
        EXPECT_EQ(opcode(c), MLX5_CQE_RESP_SEND) << i;
        EXPECT_EQ(be32toh(c.byte_cnt), 4096u);
    }
    ASSERT_TRUE(p.b.next(p.b.recv_cq, c));
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
    ASSERT_TRUE(a_end.wait());
    ASSERT_TRUE(b_end.wait());
    EXPECT_TRUE(a_end.orderly.load());
    EXPECT_TRUE(b_end.orderly.load());
    EXPECT_EQ(std::count(dst.begin(), dst.begin() + 4 * 4096, 's'), 4 * 4096);
}

TEST(Softnic, CompletionQueueOverflowBreaksItsQueuePairs)
{
    softnic::Device dev;
    const std::uint32_t pd = dev.alloc_pd();
    softnic::Cq* small = dev.create_cq(2);
    softnic::Cq* big = dev.create_cq(64);
    softnic::Qp* receiver = dev.create_qp(pd, big, small, 16, 16, 1, 0);
    Endpoint sender(dev, pd);
    EndRecord receiver_end, sender_end;
    receiver->set_on_ended(&EndRecord::on_ended, &receiver_end);
    sender.qp->set_on_ended(&EndRecord::on_ended, &sender_end);
    std::vector<std::uint64_t> cookies(receiver->descriptor().rq.wqe_cnt);
    fastpath::RecvQueue rq;
    rq.init(receiver->descriptor(), cookies.data());
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ASSERT_TRUE(dev.connect(receiver, sv[0]));
    ASSERT_TRUE(dev.connect(sender.qp, sv[1]));
    std::vector<char> buf(8 * 8, 'o');
    const auto kb = dev.memory().add(reinterpret_cast<std::uintptr_t>(buf.data()), buf.size(), kAll, pd);
    for (std::uint64_t i = 0; i < 8; ++i) {
        Sge r = sge_of(buf, kb, i * 8, 8);
        ASSERT_TRUE(rq.post(&r, 1, i));
    }
    for (std::uint64_t i = 0; i < 4; ++i) { // four receive completions for a CQ of two, never polled
        Sge s = sge_of(buf, kb, 0, 8);
        ASSERT_TRUE(sender.sq.post(MLX5_OPCODE_SEND, &s, 1, 8, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, i));
    }
    sender.sq.ring();
    ASSERT_TRUE(receiver_end.wait());
    EXPECT_FALSE(receiver_end.orderly.load());
    EXPECT_TRUE(small->overflowed());
    ASSERT_TRUE(sender_end.wait());
    EXPECT_FALSE(sender_end.orderly.load()); // the peer vanished without a goodbye
    dev.destroy_qp(receiver);
    dev.destroy_cq(small);
    dev.destroy_cq(big);
}

TEST(Softnic, SharedReceiveQueueServesSeveralQueuePairsInAnyCompletionOrder)
{
    softnic::Device dev;
    const std::uint32_t pd = dev.alloc_pd();
    std::vector<char> mem(4096);
    const std::uint32_t key = dev.memory().add(reinterpret_cast<std::uintptr_t>(mem.data()), mem.size(), kAll, pd);
    softnic::Srq* srq = dev.create_srq(pd, 8, 1);
    ASSERT_NE(srq, nullptr);
    std::vector<std::uint64_t> cookies(srq->wqe_cnt());
    fastpath::SharedReceiveQueue queue;
    queue.init(srq->descriptor(), srq->wqe_cnt(), cookies.data());
    struct Seen {
        int limit = 0, error = 0;
    } seen;
    srq->set_callbacks([](void* c) { ++static_cast<Seen*>(c)->limit; }, [](void* c) { ++static_cast<Seen*>(c)->error; },
                       &seen);
    softnic::Cq* rcq = dev.create_cq(64);
    softnic::Cq* scq = dev.create_cq(64);
    fastpath::CompletionQueue recv_cq;
    recv_cq.init(rcq->descriptor());
    // Two senders, each connected to a receiver that takes from the SRQ.
    Endpoint s1(dev, pd), s2(dev, pd);
    softnic::Qp* r1 = dev.create_qp(pd, scq, rcq, 4, 0, 1, 0, srq);
    softnic::Qp* r2 = dev.create_qp(pd, scq, rcq, 4, 0, 1, 0, srq);
    ASSERT_TRUE(r1 && r2);
    for (auto [sender, receiver] : {std::pair{&s1, r1}, {&s2, r2}}) {
        int sv[2];
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        ASSERT_TRUE(dev.connect(sender->qp, sv[0]));
        ASSERT_TRUE(dev.connect(receiver, sv[1]));
    }
    for (std::uint64_t i = 0; i < 4; ++i) {
        const Sge s = sge_of(mem, key, 64 * i, 64);
        ASSERT_TRUE(queue.post(&s, 1, 100 + i));
    }
    EXPECT_FALSE(dev.arm_srq_limit(srq, 3)); // 4 posted: not below 3
    const Sge payload = sge_of(mem, key, 2048, 8);
    ASSERT_TRUE(s1.sq.post(MLX5_OPCODE_SEND, &payload, 1, 8, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    s1.sq.ring();
    ASSERT_TRUE(s2.sq.post(MLX5_OPCODE_SEND, &payload, 1, 8, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 2));
    s2.sq.ring();
    mlx5_cqe64 c[2];
    Endpoint& poller = s1; // any endpoint's helper polls a CQ
    ASSERT_TRUE(poller.next(recv_cq, c[0]));
    ASSERT_TRUE(poller.next(recv_cq, c[1]));
    std::vector<std::uint32_t> qpns{be32toh(c[0].sop_drop_qpn) & 0xffffff, be32toh(c[1].sop_drop_qpn) & 0xffffff};
    std::sort(qpns.begin(), qpns.end());
    EXPECT_EQ(qpns, (std::vector<std::uint32_t>{std::min(r1->qpn(), r2->qpn()), std::max(r1->qpn(), r2->qpn())}));
    EXPECT_EQ(srq->taken(), 2u);
    EXPECT_EQ(seen.limit, 1); // the second take left 2 < 3
    EXPECT_EQ(r1->receives_taken() + r2->receives_taken(), 2u);
    // Completed in the opposite order: each CQE names its WQE, whose cookie it gets back.
    std::vector<std::uint64_t> got{queue.complete(be16toh(c[1].wqe_counter)), queue.complete(be16toh(c[0].wqe_counter))};
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, (std::vector<std::uint64_t>{100, 101}));
    EXPECT_EQ(queue.outstanding(), 2u);
    EXPECT_FALSE(dev.arm_srq_limit(srq, 2)); // 2 left: not below 2
    EXPECT_TRUE(dev.arm_srq_limit(srq, 3));  // 2 < 3: reported by the caller, not armed

    // A doorbell record claiming more posts than the ring holds: the SRQ
    // fails, and the queue pair that tried to take from it breaks.
    srq->descriptor().dbrec[0] = htobe32(queue.posted() + 100);
    ASSERT_TRUE(s1.sq.post(MLX5_OPCODE_SEND, &payload, 1, 8, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 3));
    s1.sq.ring();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (r1->state() != softnic::QpState::error && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(r1->state(), softnic::QpState::error);
    EXPECT_TRUE(srq->failed());
    EXPECT_EQ(seen.error, 1);
    dev.destroy_qp(r1);
    dev.destroy_qp(r2);
    dev.destroy_srq(srq);
    dev.destroy_cq(rcq);
    dev.destroy_cq(scq);
}

// Large SENDs and WRITEs go from the requester's memory to the socket and
// from the socket into the target (no intermediate buffers): several of
// them, gathered from pieces, interleaved with small messages, arrive whole
// and in order.
class LargeWrites : public ::testing::TestWithParam<bool> {}; // over a lane too

TEST_P(LargeWrites, LargeWritesAndSendsFromPiecesArriveWholeAndInOrder)
{
    Pair p(0, false, GetParam());
    constexpr std::size_t kBig = 3 * 256 * 1024 + 5; // not a multiple of any buffer size
    std::vector<char> src(kBig), target(4 * kBig, 0), inbox(kBig, 0), note(8, 'n'), notes(8 * 4, 0);
    for (std::size_t i = 0; i < src.size(); ++i)
        src[i] = static_cast<char>((i * 131) >> 3);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
    const auto kt = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(target.data()), target.size(), kAll, p.pd);
    const auto ki = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(inbox.data()), inbox.size(), kAll, p.pd);
    const auto kn = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(note.data()), note.size(), kAll, p.pd);
    const auto kns = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(notes.data()), notes.size(), kAll, p.pd);
    // Three pieces of the source, out of order.
    Sge pieces[3] = {sge_of(src, ks, 200000, kBig - 200000), sge_of(src, ks, 0, 100000), sge_of(src, ks, 100000, 100000)};
    std::vector<char> expected(src.begin() + 200000, src.end());
    expected.insert(expected.end(), src.begin(), src.begin() + 200000);
    for (int i = 0; i < 4; ++i) {
        Sge r = sge_of(notes, kns, static_cast<std::size_t>(i) * 8, 8);
        ASSERT_TRUE(p.b.rq.post(&r, 1, static_cast<std::uint64_t>(i)));
    }
    Sge rbig = sge_of(inbox, ki);
    ASSERT_TRUE(p.b.rq.post(&rbig, 1, 9));
    Sge n = sge_of(note, kn);
    std::uint64_t cookie = 0;
    for (int i = 0; i < 4; ++i) {
        fastpath::RemoteAddress ra{reinterpret_cast<std::uintptr_t>(target.data()) + static_cast<std::uint64_t>(i) * kBig, kt};
        ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_RDMA_WRITE, pieces, 3, kBig, &ra, 0, MLX5_WQE_CTRL_CQ_UPDATE, cookie++));
        ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, &n, 1, 8, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, cookie++));
    }
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, pieces, 3, kBig, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, cookie++));
    p.a.sq.ring();
    mlx5_cqe64 c;
    for (int i = 0; i < 4; ++i) {
        ASSERT_TRUE(p.b.next(p.b.recv_cq, c)) << i;
        EXPECT_EQ(opcode(c), MLX5_CQE_RESP_SEND);
        // The write before this send has landed whole.
        EXPECT_EQ(std::memcmp(target.data() + static_cast<std::size_t>(i) * kBig, expected.data(), kBig), 0) << i;
    }
    ASSERT_TRUE(p.b.next(p.b.recv_cq, c));
    EXPECT_EQ(be32toh(c.byte_cnt), kBig);
    EXPECT_EQ(std::memcmp(inbox.data(), expected.data(), kBig), 0);
    for (std::uint16_t i = 0; i < 9; ++i) {
        ASSERT_TRUE(p.a.next(p.a.send_cq, c)) << i;
        EXPECT_EQ(opcode(c), MLX5_CQE_REQ) << i;
        EXPECT_EQ(p.a.sq.slot(be16toh(c.wqe_counter)).cookie, i);
    }
    EXPECT_EQ(p.dev.striped_writes(), GetParam() ? 4u : 0u); // the writes; sends are not striped
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutLane, LargeWrites, ::testing::Bool());

// A large WRITE outside the target's region is refused before any of it is
// placed; one into a region unmapped since registration (the kernel's
// EFAULT on the direct read) is a remote access error, never a signal.
// Over a lane too (parameters 2-4), where what is left of each stream's
// part is read and dropped.
class LargeWriteViolation : public ::testing::TestWithParam<int> {};

TEST_P(LargeWriteViolation, RemoteAccessErrorBothSidesBrokenProcessAlive)
{
    Pair p(0, false, GetParam() >= 2);
    constexpr std::size_t kPages = 64; // 256 KiB with 4 KiB pages: striped
    Pages target(kPages);
    std::vector<char> local(kPages * page_size(), 'W');
    std::memset(reinterpret_cast<void*>(target.at(0)), 'T', kPages * page_size());
    const auto kl = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(local.data()), local.size(), kAll, p.pd);
    const auto kt = p.dev.memory().add(target.at(0), kPages * page_size(), kAll, p.pd);
    std::uint64_t where = target.at(0);
    const bool out_of_range = GetParam() == 0 || GetParam() == 2;
    if (out_of_range)
        where += page_size(); // runs one page past the region
    else // a page of the target is gone: with a lane, in its part (3) or the main stream's (4)
        target.unmap(GetParam() == 3 ? 3 * kPages / 4 : GetParam() == 4 ? kPages / 4 : kPages / 2);
    Sge w = sge_of(local, kl);
    fastpath::RemoteAddress ra{where, kt};
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_RDMA_WRITE, &w, 1, static_cast<std::uint32_t>(local.size()), &ra, 0,
                            MLX5_WQE_CTRL_CQ_UPDATE, 1));
    p.a.sq.ring();
    mlx5_cqe64 c;
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ_ERR);
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
    if (out_of_range) { // refused before any byte was placed
        EXPECT_EQ(*reinterpret_cast<const char*>(target.at(kPages - 1) + page_size() - 1), 'T');
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (p.b.qp->state() != softnic::QpState::error && std::chrono::steady_clock::now() < deadline)
        p.dev.progress();
    EXPECT_EQ(p.a.qp->state(), softnic::QpState::error);
    EXPECT_EQ(p.b.qp->state(), softnic::QpState::error);
}

INSTANTIATE_TEST_SUITE_P(OutOfRangeOrUnmapped, LargeWriteViolation, ::testing::Values(0, 1, 2, 3, 4));

namespace {

// A frame header as a peer writes it (softnic wire version 2).
std::vector<std::uint8_t> frame_header(std::uint8_t type, std::uint8_t flags, std::uint32_t length, std::uint64_t addr,
                                       std::uint32_t rkey)
{
    std::vector<std::uint8_t> h(24, 0);
    h[0] = type;
    h[1] = flags;
    h[3] = 2;
    const std::uint32_t len_be = htobe32(length), rkey_be = htobe32(rkey);
    const std::uint64_t addr_be = htobe64(addr);
    std::memcpy(h.data() + 4, &len_be, 4);
    std::memcpy(h.data() + 8, &addr_be, 8);
    std::memcpy(h.data() + 16, &rkey_be, 4);
    return h;
}
constexpr std::uint8_t kFrameSend = 1, kFrameWrite = 2, kFlagImm = 1, kFlagStriped = 32;

// A queue pair of `p`'s device with a lane, connected to sockets a test
// writes as the peer would (`wire`, `lane`).
struct LanedVictim {
    explicit LanedVictim(Pair& p) : ep(p.dev, p.pd)
    {
        int sv[2], lv[2];
        EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, lv), 0);
        EXPECT_TRUE(p.dev.connect(ep.qp, sv[0]));
        EXPECT_TRUE(p.dev.attach_lane(ep.qp, lv[0]));
        wire = sv[1];
        lane = lv[1];
    }
    ~LanedVictim()
    {
        close(wire);
        if (lane >= 0)
            close(lane);
    }
    Endpoint ep;
    int wire = -1, lane = -1;
};

bool wait_for_error(softnic::Device& dev, softnic::Qp* qp)
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (qp->state() != softnic::QpState::error && std::chrono::steady_clock::now() < deadline) {
        dev.progress();
        std::this_thread::yield();
    }
    return qp->state() == softnic::QpState::error;
}

} // namespace

// A striped WRITE's split (half, in whole pages) may fall on a segment's
// edge or inside one; each layout lands whole, in order with a SEND after it.
TEST(SoftnicLane, StripedWritesSplitTheirSegmentsAnywhere)
{
    Pair p(0, false, true);
    constexpr std::size_t kLen = 256 * 1024; // split at 128 KiB
    std::vector<char> src(2 * kLen + 7), target(2 * kLen + 7, 0), note(8, 'n'), inbox(8 * 4, 0);
    for (std::size_t i = 0; i < src.size(); ++i)
        src[i] = static_cast<char>(i * 7 + (i >> 12));
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
    const auto kt = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(target.data()), target.size(), kAll, p.pd);
    const auto kn = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(note.data()), note.size(), kAll, p.pd);
    const auto ki = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(inbox.data()), inbox.size(), kAll, p.pd);
    struct Layout {
        std::vector<std::pair<std::size_t, std::size_t>> pieces; // (offset in src, length)
    };
    const Layout layouts[] = {
        {{{0, kLen / 2}, {kLen / 2, kLen / 2}}},                  // on a segment's edge
        {{{0, 100000}, {100000, kLen - 100000}}},                 // inside the second
        {{{5, kLen - 5}, {0, 5}}},                                // inside the first, a tiny last one
        {{{0, 2 * kLen + 7}}},                                    // one segment, odd length
    };
    Sge n = sge_of(note, kn);
    for (int i = 0; i < 4; ++i) {
        Sge r = sge_of(inbox, ki, static_cast<std::size_t>(i) * 8, 8);
        ASSERT_TRUE(p.b.rq.post(&r, 1, static_cast<std::uint64_t>(i)));
    }
    std::uint64_t cookie = 0;
    for (const Layout& l : layouts) {
        std::fill(target.begin(), target.end(), 0);
        Sge sges[4];
        std::vector<char> expected;
        std::uint32_t total = 0;
        for (std::size_t i = 0; i < l.pieces.size(); ++i) {
            sges[i] = sge_of(src, ks, l.pieces[i].first, l.pieces[i].second);
            expected.insert(expected.end(), src.begin() + static_cast<std::ptrdiff_t>(l.pieces[i].first),
                            src.begin() + static_cast<std::ptrdiff_t>(l.pieces[i].first + l.pieces[i].second));
            total += static_cast<std::uint32_t>(l.pieces[i].second);
        }
        fastpath::RemoteAddress ra{reinterpret_cast<std::uintptr_t>(target.data()), kt};
        ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_RDMA_WRITE, sges, static_cast<std::uint32_t>(l.pieces.size()), total, &ra, 0,
                                MLX5_WQE_CTRL_CQ_UPDATE, cookie++));
        ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, &n, 1, 8, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, cookie++));
        p.a.sq.ring();
        mlx5_cqe64 c;
        ASSERT_TRUE(p.b.next(p.b.recv_cq, c));
        EXPECT_EQ(opcode(c), MLX5_CQE_RESP_SEND);
        p.b.rq.complete_oldest();
        EXPECT_EQ(std::memcmp(target.data(), expected.data(), total), 0) << total;
        if (total < target.size()) { // nothing past it
            EXPECT_EQ(target[total], 0);
        }
        for (int i = 0; i < 2; ++i) {
            ASSERT_TRUE(p.a.next(p.a.send_cq, c));
            EXPECT_EQ(opcode(c), MLX5_CQE_REQ);
            p.a.sq.retire_through(be16toh(c.wqe_counter));
        }
        Sge r = sge_of(inbox, ki, 0, 8);
        ASSERT_TRUE(p.b.rq.post(&r, 1, cookie));
    }
    EXPECT_EQ(p.dev.striped_writes(), 4u);
    EXPECT_EQ(p.a.qp->state(), softnic::QpState::ready);
    EXPECT_EQ(p.b.qp->state(), softnic::QpState::ready);
}

// The sender may stripe before the receiver's lane is attached (the CM
// hands it over on its own thread): the part on the lane waits in it, and
// the WRITE's last byte lands only once the lane is read.
TEST(SoftnicLane, StripedWriteWaitsForTheReceiversLane)
{
    Pair p;
    int lv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, lv), 0);
    ASSERT_TRUE(p.dev.attach_lane(p.a.qp, lv[0]));
    constexpr std::size_t kLen = 512 * 1024;
    std::vector<char> src(kLen, 'S'), target(kLen, 0);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
    const auto kt = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(target.data()), target.size(), kAll, p.pd);
    Sge s = sge_of(src, ks);
    fastpath::RemoteAddress ra{reinterpret_cast<std::uintptr_t>(target.data()), kt};
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_RDMA_WRITE, &s, 1, kLen, &ra, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    p.a.sq.ring();
    EXPECT_TRUE(p.a.quiet(p.a.send_cq, 200)); // not acknowledged: half of it is still in the lane
    EXPECT_EQ(target[kLen - 1], 0);
    EXPECT_EQ(p.dev.striped_writes(), 1u);
    ASSERT_TRUE(p.dev.attach_lane(p.b.qp, lv[1]));
    EXPECT_FALSE(p.dev.attach_lane(p.b.qp, lv[1])); // one lane only
    mlx5_cqe64 c;
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ);
    EXPECT_EQ(std::count(target.begin(), target.end(), 'S'), static_cast<std::ptrdiff_t>(kLen));
}

// A peer whose lane ends inside a striped WRITE's part breaks its own
// connection, nothing else.
TEST(SoftnicLane, LaneEndingInsideAPartBreaksOnlyThatConnection)
{
    Pair p; // a healthy pair alongside
    LanedVictim v(p);
    Endpoint& victim = v.ep;
    constexpr std::size_t kLen = 256 * 1024;
    std::vector<char> target(kLen, 'T'), inbox(64);
    const auto kt = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(target.data()), target.size(), kAll, p.pd);
    const auto ki = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(inbox.data()), inbox.size(), kAll, p.pd);
    Sge r = sge_of(inbox, ki);
    ASSERT_TRUE(victim.rq.post(&r, 1, 1));
    const auto h = frame_header(kFrameWrite, kFlagStriped, kLen, reinterpret_cast<std::uintptr_t>(target.data()), kt);
    ASSERT_EQ(write(v.wire, h.data(), h.size()), 24);
    const std::vector<char> half(kLen / 2, 'x');
    std::thread writer([&] { // the main part fills the socket's buffer
        [[maybe_unused]] ssize_t n = send(v.wire, half.data(), half.size(), MSG_NOSIGNAL); // ends when the victim does
    });
    ASSERT_EQ(write(v.lane, half.data(), 1000), 1000);
    close(v.lane);
    v.lane = -1;
    mlx5_cqe64 c;
    ASSERT_TRUE(victim.next(victim.recv_cq, c));
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
    EXPECT_EQ(victim.qp->state(), softnic::QpState::error);
    EXPECT_EQ(target[kLen - 1], 'T'); // the last byte never landed
    shutdown(v.wire, SHUT_RDWR);
    writer.join();
    EXPECT_EQ(p.a.qp->state(), softnic::QpState::ready);
    EXPECT_EQ(p.b.qp->state(), softnic::QpState::ready);
}

// A striped WRITE whose lane part (with the last byte) has all arrived
// before its main part: the last byte still lands last, after the main
// part, and lands.
TEST(SoftnicLane, LanePartFirstStillPlacesTheLastByteLast)
{
    Pair p;
    LanedVictim v(p);
    constexpr std::size_t kLen = 256 * 1024, kSplit = 128 * 1024; // stripe_split(kLen)
    std::vector<char> target(kLen, 0);
    const auto kt = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(target.data()), target.size(), kAll, p.pd);
    std::vector<char> bytes(kLen);
    for (std::size_t i = 0; i < kLen; ++i)
        bytes[i] = static_cast<char>(i % 253 + 1);
    const auto h = frame_header(kFrameWrite, kFlagStriped, kLen, reinterpret_cast<std::uintptr_t>(target.data()), kt);
    ASSERT_EQ(write(v.wire, h.data(), h.size()), 24);
    std::thread lane_writer([&] {
        ASSERT_EQ(send(v.lane, bytes.data() + kSplit, kLen - kSplit, MSG_NOSIGNAL), static_cast<ssize_t>(kLen - kSplit));
    });
    // The device reads the whole lane part while the main part is absent.
    int queued = 1;
    for (int i = 0; i < 2000 && queued > 0; ++i) {
        p.dev.progress();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ioctl(v.lane, TIOCOUTQ, &queued); // what the victim has not read yet
    }
    lane_writer.join();
    EXPECT_EQ(target[kLen - 1], 0); // not before the main part
    ASSERT_EQ(send(v.wire, bytes.data(), kSplit, MSG_NOSIGNAL), static_cast<ssize_t>(kSplit));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (__atomic_load_n(&target[kLen - 1], __ATOMIC_ACQUIRE) == 0 && std::chrono::steady_clock::now() < deadline) {
        p.dev.progress();
        std::this_thread::yield();
    }
    EXPECT_EQ(std::memcmp(target.data(), bytes.data(), kLen), 0);
    EXPECT_EQ(v.ep.qp->state(), softnic::QpState::ready);
}

// The striped flag anywhere but on a large plain WRITE is malformed.
TEST(SoftnicLane, StripedFlagWhereItDoesNotBelongIsMalformed)
{
    Pair p;
    std::vector<char> target(512 * 1024, 'T');
    const auto kt = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(target.data()), target.size(), kAll, p.pd);
    const std::uint64_t at = reinterpret_cast<std::uintptr_t>(target.data());
    const std::vector<std::uint8_t> frames[] = {
        frame_header(kFrameSend, kFlagStriped, 256 * 1024, 0, 0),                  // a SEND
        frame_header(kFrameWrite, kFlagStriped | kFlagImm, 256 * 1024, at, kt),    // a WRITE with immediate data
        frame_header(kFrameWrite, kFlagStriped, 64 * 1024, at, kt),                // too small to be striped
    };
    for (const auto& f : frames) {
        LanedVictim v(p);
        ASSERT_EQ(write(v.wire, f.data(), f.size()), 24);
        EXPECT_TRUE(wait_for_error(p.dev, v.ep.qp)) << int(f[0]) << " " << int(f[1]);
    }
    EXPECT_EQ(std::count(target.begin(), target.end(), 'T'), static_cast<std::ptrdiff_t>(target.size()));
    EXPECT_EQ(p.a.qp->state(), softnic::QpState::ready);
}

namespace {

// What a device's lane request was called with (Device::set_lane_request).
struct LaneRequests {
    static void record(void* self, std::uint64_t key)
    {
        auto* r = static_cast<LaneRequests*>(self);
        std::lock_guard lock(r->mutex);
        r->keys.push_back(key);
    }
    // The keys asked for, once `count` are or 300 ms have gone by.
    std::vector<std::uint64_t> after(softnic::Device& dev, std::size_t count)
    {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
        for (;;) {
            dev.progress();
            {
                std::lock_guard lock(mutex);
                if (keys.size() >= count && count > 0)
                    return keys;
                if (std::chrono::steady_clock::now() > deadline)
                    return keys;
            }
            std::this_thread::yield();
        }
    }
    std::mutex mutex;
    std::vector<std::uint64_t> keys;
};

// Posts an RDMA WRITE of `len` bytes of `src` from `from` and waits for its completion.
void write_and_reap(Endpoint& from, std::vector<char>& src, std::uint32_t ks, std::vector<char>& target,
                    std::uint32_t kt, std::size_t len, std::uint8_t op = MLX5_OPCODE_RDMA_WRITE)
{
    Sge s = sge_of(src, ks, 0, len);
    fastpath::RemoteAddress ra{reinterpret_cast<std::uintptr_t>(target.data()), kt};
    ASSERT_TRUE(from.sq.post(op, &s, 1, static_cast<std::uint32_t>(len), &ra, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    from.sq.ring();
    mlx5_cqe64 c;
    ASSERT_TRUE(from.next(from.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ);
    from.sq.retire_through(be16toh(c.wqe_counter));
}

} // namespace

// Lanes on demand: the first plain RDMA WRITE large enough to be striped,
// sent without a lane, asks for one for its own queue pair and tells the
// peer, whose queue pair asks too; once. Smaller writes and writes with
// immediate data ask nothing.
TEST(SoftnicLane, FirstLargeWriteAsksForALaneOnBothSides)
{
    Pair p;
    LaneRequests requests;
    p.dev.set_lane_request(&LaneRequests::record, &requests);
    p.dev.want_lanes(p.a.qp, 11);
    p.dev.want_lanes(p.b.qp, 22);
    constexpr std::size_t kLen = 256 * 1024;
    std::vector<char> src(kLen, 's'), target(kLen, 0);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
    const auto kt = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(target.data()), target.size(), kAll, p.pd);
    write_and_reap(p.a, src, ks, target, kt, 64 * 1024);
    std::vector<char> inbox(64);
    const auto ki = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(inbox.data()), inbox.size(), kAll, p.pd);
    Sge r = sge_of(inbox, ki);
    ASSERT_TRUE(p.b.rq.post(&r, 1, 1));
    write_and_reap(p.a, src, ks, target, kt, kLen, MLX5_OPCODE_RDMA_WRITE_IMM);
    EXPECT_TRUE(requests.after(p.dev, 0).empty());
    write_and_reap(p.a, src, ks, target, kt, kLen);
    auto keys = requests.after(p.dev, 2);
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(keys, (std::vector<std::uint64_t>{11, 22}));
    write_and_reap(p.a, src, ks, target, kt, kLen); // asked already
    write_and_reap(p.b, src, ks, target, kt, kLen); // the peer too
    EXPECT_EQ(requests.after(p.dev, 3).size(), 2u);
    EXPECT_EQ(std::count(target.begin(), target.end(), 's'), static_cast<std::ptrdiff_t>(kLen));
    EXPECT_EQ(p.dev.striped_writes(), 0u); // no lane came
    p.dev.set_lane_request(nullptr, nullptr);
}

// The peer may ask before this side's queue pair knows its key: the
// request then comes with the key. A queue pair never given one asks
// nothing, and one whose lane is attached neither.
TEST(SoftnicLane, PeersAskForALaneWaitsForTheKey)
{
    Pair p;
    LaneRequests requests;
    p.dev.set_lane_request(&LaneRequests::record, &requests);
    p.dev.want_lanes(p.a.qp, 11);
    constexpr std::size_t kLen = 256 * 1024;
    std::vector<char> src(kLen, 's'), target(kLen, 0);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
    const auto kt = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(target.data()), target.size(), kAll, p.pd);
    write_and_reap(p.a, src, ks, target, kt, kLen);
    EXPECT_EQ(requests.after(p.dev, 2), (std::vector<std::uint64_t>{11}));
    p.dev.want_lanes(p.b.qp, 22);
    EXPECT_EQ(requests.after(p.dev, 2), (std::vector<std::uint64_t>{11, 22}));

    Pair laned(0, false, true);
    laned.dev.set_lane_request(&LaneRequests::record, &requests);
    laned.dev.want_lanes(laned.a.qp, 33);
    const auto ls = laned.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, laned.pd);
    const auto lt =
        laned.dev.memory().add(reinterpret_cast<std::uintptr_t>(target.data()), target.size(), kAll, laned.pd);
    write_and_reap(laned.a, src, ls, target, lt, kLen);
    EXPECT_EQ(laned.dev.striped_writes(), 1u);
    EXPECT_EQ(requests.after(laned.dev, 3).size(), 2u);
    p.dev.set_lane_request(nullptr, nullptr);
    laned.dev.set_lane_request(nullptr, nullptr);
}

// A large WRITE is striped over the lane while this side's consumer
// busy-polls or the peer's last ACK said its consumer does (kPolling); with
// both waiting it goes whole over the connection. Our own ACKs say which
// way our consumer moves the device.
TEST(SoftnicLane, StripedWhileEitherSidePolls)
{
    constexpr std::uint8_t kFrameAck = 5, kFlagPolling = 64;
    Pair p;
    LanedVictim v(p);
    const timeval limit{5, 0}; // a read that hangs fails the test instead
    for (const int fd : {v.wire, v.lane})
        ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit), 0);
    const auto read_exactly = [](int fd, void* into, std::size_t n) {
        return recv(fd, into, n, MSG_WAITALL) == static_cast<ssize_t>(n);
    };
    constexpr std::size_t kLen = 256 * 1024, kSplit = 128 * 1024; // stripe_split(kLen)
    std::vector<char> src(kLen), got(kLen), target(64, 0);
    for (std::size_t i = 0; i < kLen; ++i)
        src[i] = static_cast<char>(i % 251 + 1);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
    const auto kt = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(target.data()), target.size(), kAll, p.pd);
    std::uint64_t cookie = 0;
    // One large WRITE from the victim, read as its peer, then ACKed with
    // `ack_flags`: whether it was striped.
    const auto one_write = [&](std::uint8_t ack_flags) {
        Sge s = sge_of(src, ks);
        fastpath::RemoteAddress ra{0x10000, 7}; // the peer's memory: the test reads the bytes
        EXPECT_TRUE(v.ep.sq.post(MLX5_OPCODE_RDMA_WRITE, &s, 1, kLen, &ra, 0, MLX5_WQE_CTRL_CQ_UPDATE, cookie++));
        v.ep.sq.ring();
        std::uint8_t h[24];
        EXPECT_TRUE(read_exactly(v.wire, h, sizeof h));
        EXPECT_EQ(h[0], kFrameWrite);
        const bool striped = (h[1] & kFlagStriped) != 0;
        std::fill(got.begin(), got.end(), 0);
        const std::size_t main = striped ? kSplit : kLen;
        EXPECT_TRUE(read_exactly(v.wire, got.data(), main));
        if (striped) {
            EXPECT_TRUE(read_exactly(v.lane, got.data() + main, kLen - main));
        }
        EXPECT_EQ(std::memcmp(got.data(), src.data(), kLen), 0);
        const auto ack = frame_header(kFrameAck, ack_flags, 0, 0, 0);
        EXPECT_EQ(write(v.wire, ack.data(), ack.size()), 24);
        mlx5_cqe64 c{};
        EXPECT_TRUE(v.ep.next(v.ep.send_cq, c, 5000, false)); // the engine thread moves it: no poll here
        EXPECT_EQ(opcode(c), MLX5_CQE_REQ);
        v.ep.sq.retire_through(be16toh(c.wqe_counter));
        return striped;
    };
    p.dev.consumer_polls_by(false);
    EXPECT_FALSE(one_write(kFlagPolling)); // neither side polled yet (as far as this side knows)
    EXPECT_TRUE(one_write(0));             // the peer's ACK said it polls
    EXPECT_FALSE(one_write(0));            // and now that it does not
    p.dev.consumer_polls_by(true);
    EXPECT_TRUE(one_write(0)); // this side polls
    EXPECT_EQ(p.dev.striped_writes(), 2u);
    // Our ACK for a WRITE from the peer: kPolling while our consumer polls.
    for (const bool polls : {false, true}) {
        p.dev.consumer_polls_by(polls);
        const auto w = frame_header(kFrameWrite, 0, 8, reinterpret_cast<std::uintptr_t>(target.data()), kt);
        ASSERT_EQ(write(v.wire, w.data(), w.size()), 24);
        ASSERT_EQ(write(v.wire, "12345678", 8), 8);
        std::uint8_t h[24];
        ASSERT_TRUE(read_exactly(v.wire, h, sizeof h));
        EXPECT_EQ(h[0], kFrameAck);
        EXPECT_EQ(h[1], polls ? kFlagPolling : 0) << polls;
    }
    EXPECT_EQ(std::memcmp(target.data(), "12345678", 8), 0);
    EXPECT_EQ(v.ep.qp->state(), softnic::QpState::ready);
}

// kLaneWanted (type 10) from a hostile peer: with a payload it is
// malformed (the connection breaks, nothing else); repeated, it asks once.
TEST(SoftnicLane, LaneWantedFromThePeer)
{
    constexpr std::uint8_t kFrameLaneWanted = 10;
    Pair p;
    LaneRequests requests;
    p.dev.set_lane_request(&LaneRequests::record, &requests);
    {
        Endpoint victim(p.dev, p.pd);
        int sv[2];
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        ASSERT_TRUE(p.dev.connect(victim.qp, sv[0]));
        p.dev.want_lanes(victim.qp, 44);
        for (int i = 0; i < 3; ++i) {
            const auto h = frame_header(kFrameLaneWanted, 0, 0, 0, 0);
            ASSERT_EQ(write(sv[1], h.data(), h.size()), 24);
        }
        EXPECT_EQ(requests.after(p.dev, 2), (std::vector<std::uint64_t>{44}));
        EXPECT_EQ(victim.qp->state(), softnic::QpState::ready);
        auto h = frame_header(kFrameLaneWanted, 0, 8, 0, 0);
        h.resize(32, 'p');
        ASSERT_EQ(write(sv[1], h.data(), h.size()), 32);
        EXPECT_TRUE(wait_for_error(p.dev, victim.qp));
        close(sv[1]);
    }
    EXPECT_EQ(p.a.qp->state(), softnic::QpState::ready);
    EXPECT_EQ(p.b.qp->state(), softnic::QpState::ready);
    p.dev.set_lane_request(nullptr, nullptr);
}

// A lane goes only to a connected TCP queue pair (not shared memory, not a
// second one).
TEST(SoftnicLane, AttachLaneRefusesWhatCannotTakeOne)
{
    Pair tcp;
    Pair shm(0, true);
    Endpoint unconnected(tcp.dev, tcp.pd);
    int lv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, lv), 0);
    EXPECT_FALSE(shm.dev.attach_lane(shm.a.qp, lv[0]));
    EXPECT_FALSE(tcp.dev.attach_lane(unconnected.qp, lv[0]));
    EXPECT_FALSE(tcp.dev.attach_lane(tcp.a.qp, -1));
    EXPECT_TRUE(tcp.dev.attach_lane(tcp.a.qp, lv[0]));
    EXPECT_FALSE(tcp.dev.attach_lane(tcp.a.qp, lv[1]));
    close(lv[1]);
}

// A large SEND whose source was unmapped after registration: the kernel
// refuses the direct send (EFAULT); the request fails with a local
// protection error and the connection breaks; no signal.
TEST(Softnic, LargeSendFromUnmappedSourceIsALocalProtectionError)
{
    Pair p;
    constexpr std::size_t kPages = 64;
    Pages source(kPages);
    std::vector<char> inbox(kPages * page_size());
    const auto ks = p.dev.memory().add(source.at(0), kPages * page_size(), kAll, p.pd);
    const auto ki = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(inbox.data()), inbox.size(), kAll, p.pd);
    Sge r = sge_of(inbox, ki);
    ASSERT_TRUE(p.b.rq.post(&r, 1, 1));
    source.unmap(0); // nothing of it can be read
    Sge s{source.at(0), static_cast<std::uint32_t>(kPages * page_size()), ks};
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, &s, 1, s.length, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    p.a.sq.ring();
    mlx5_cqe64 c;
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ_ERR);
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
    ASSERT_TRUE(p.b.next(p.b.recv_cq, c)); // the peer's receive is flushed: the stream ended
    EXPECT_EQ(opcode(c), MLX5_CQE_RESP_ERR);
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
}

// --- datagram queue pairs (UD endpoints) -----------------------------------------------

namespace {

sockaddr_in loopback()
{
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

// Two datagram queue pairs that know each other.
struct DatagramPair {
    DatagramPair() : pd(dev.alloc_pd()), a(dev, pd), b(dev, pd)
    {
        EXPECT_TRUE(dev.open_datagrams(a.qp, loopback(), a_addr));
        EXPECT_TRUE(dev.open_datagrams(b.qp, loopback(), b_addr));
        dev.add_datagram_peer(a.qp, b_addr, b.qp->qpn());
        dev.add_datagram_peer(b.qp, a_addr, a.qp->qpn());
    }
    // a sends `payload` to b.
    void send(std::vector<char>& payload, std::uint32_t key, std::uint64_t cookie)
    {
        const fastpath::RemoteAddress to{softnic::datagram_destination(b_addr), b.qp->qpn()};
        Sge s = sge_of(payload, key);
        ASSERT_TRUE(a.sq.post(softnic::kDatagramSendOpcode, &s, 1, s.length, &to, 0, MLX5_WQE_CTRL_CQ_UPDATE, cookie));
        a.sq.ring();
    }
    softnic::Device dev;
    std::uint32_t pd;
    Endpoint a, b;
    sockaddr_in a_addr{}, b_addr{};
};

// A raw UDP socket that sends to b as a hostile peer would.
void send_raw(const sockaddr_in& to, const void* bytes, std::size_t n)
{
    const int fd = socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(sendto(fd, bytes, n, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to), static_cast<ssize_t>(n));
    close(fd);
}

bool wait_dropped(softnic::Device& dev, softnic::Qp* qp, std::uint32_t n)
{
    for (int i = 0; i < 5000 && qp->datagrams_dropped() < n; ++i) {
        dev.progress();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return qp->datagrams_dropped() == n;
}

} // namespace

TEST(SoftnicDatagram, SendArrivesAfterAGrhWithItsSender)
{
    DatagramPair p;
    std::vector<char> src = {'h', 'e', 'l', 'l', 'o'}, dst(100, 0);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
    const auto kd = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), dst.size(), kAll, p.pd);
    Sge r = sge_of(dst, kd);
    ASSERT_TRUE(p.b.rq.post(&r, 1, 0xb0));
    p.send(src, ks, 0xa0);

    mlx5_cqe64 c;
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ);
    EXPECT_EQ(p.a.sq.slot(be16toh(c.wqe_counter)).cookie, 0xa0u);
    ASSERT_TRUE(p.b.next(p.b.recv_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_RESP_SEND);
    EXPECT_EQ(be32toh(c.byte_cnt), softnic::kGrhSize + 5);
    EXPECT_EQ(softnic::datagram_source_qpn(c), p.a.qp->qpn());
    const sockaddr_in from = softnic::datagram_source(c);
    EXPECT_EQ(from.sin_addr.s_addr, p.a_addr.sin_addr.s_addr);
    EXPECT_EQ(from.sin_port, p.a_addr.sin_port);
    EXPECT_EQ(p.b.rq.complete_oldest(), 0xb0u);
    EXPECT_EQ(static_cast<std::uint8_t>(dst[0]), 0x60); // GRH version 6
    EXPECT_EQ(std::memcmp(dst.data() + 20, &p.a_addr.sin_addr.s_addr, 4), 0); // IPv4-mapped source GID
    EXPECT_EQ(std::memcmp(dst.data() + softnic::kGrhSize, "hello", 5), 0);
    EXPECT_EQ(dst[softnic::kGrhSize + 5], 0);
    EXPECT_EQ(p.b.qp->datagrams_dropped(), 0u);
}

TEST(SoftnicDatagram, DatagramLargerThanTheBufferIsDroppedAndTheNextArrives)
{
    DatagramPair p;
    std::vector<char> big(100, 'B'), small(10, 'S'), dst(softnic::kGrhSize + 50, 0);
    const auto kb = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(big.data()), big.size(), kAll, p.pd);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(small.data()), small.size(), kAll, p.pd);
    const auto kd = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), dst.size(), kAll, p.pd);
    Sge r = sge_of(dst, kd);
    ASSERT_TRUE(p.b.rq.post(&r, 1, 7));
    p.send(big, kb, 1);
    mlx5_cqe64 c;
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ); // the sender never hears of the drop
    ASSERT_TRUE(wait_dropped(p.dev, p.b.qp, 1));
    EXPECT_TRUE(p.b.quiet(p.b.recv_cq));
    EXPECT_EQ(dst[0], 0);
    p.send(small, ks, 2);
    ASSERT_TRUE(p.b.next(p.b.recv_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_RESP_SEND);
    EXPECT_EQ(be32toh(c.byte_cnt), softnic::kGrhSize + 10);
    EXPECT_EQ(p.b.rq.complete_oldest(), 7u);
    EXPECT_EQ(dst[softnic::kGrhSize], 'S');
}

TEST(SoftnicDatagram, HostileDatagramsAreDroppedWithoutTouchingBuffers)
{
    DatagramPair p;
    std::vector<char> dst(200, 'c'), ok(4, 'k');
    const auto kd = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), dst.size(), kAll, p.pd);
    const auto kk = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(ok.data()), ok.size(), kAll, p.pd);
    Sge r = sge_of(dst, kd, 0, 100);
    ASSERT_TRUE(p.b.rq.post(&r, 1, 9));
    auto header = [&](std::uint32_t magic, std::uint32_t src, std::uint32_t dest, std::uint32_t len) {
        std::vector<std::uint8_t> d(16 + 8, 'x');
        for (std::uint32_t i = 0, v[4] = {magic, src, dest, len}; i < 4; ++i) {
            const std::uint32_t be = htobe32(v[i]);
            std::memcpy(d.data() + 4 * i, &be, 4);
        }
        return d;
    };
    const std::uint32_t a = p.a.qp->qpn(), b = p.b.qp->qpn();
    const std::uint8_t garbage[3] = {1, 2, 3};
    send_raw(p.b_addr, garbage, sizeof garbage);                           // shorter than a header
    auto d = header(0x12345678, a, b, 8);                                  // wrong magic
    send_raw(p.b_addr, d.data(), d.size());
    d = header(0x46445544, a, b + 1, 8);                                   // for another queue pair
    send_raw(p.b_addr, d.data(), d.size());
    d = header(0x46445544, a, b, 9);                                       // length disagrees
    send_raw(p.b_addr, d.data(), d.size());
    d = header(0x46445544, a, b, 8);                                       // well formed, from a stranger
    send_raw(p.b_addr, d.data(), d.size());
    d = header(0x46445544, a, b, 0xffffffff);                              // a huge claimed length
    send_raw(p.b_addr, d.data(), d.size());
    ASSERT_TRUE(wait_dropped(p.dev, p.b.qp, 6));
    EXPECT_TRUE(p.b.quiet(p.b.recv_cq));
    EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](char ch) { return ch == 'c'; }));
    // The queue pair still takes what its peer sends.
    p.send(ok, kk, 3);
    mlx5_cqe64 c;
    ASSERT_TRUE(p.b.next(p.b.recv_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_RESP_SEND);
    EXPECT_EQ(std::memcmp(dst.data() + softnic::kGrhSize, "kkkk", 4), 0);
    EXPECT_TRUE(std::all_of(dst.begin() + 100, dst.end(), [](char ch) { return ch == 'c'; }));
}

// What was posted before a datagram queue pair is disconnected (its EP
// freed) goes out, as a device would have sent it by then, rather than
// being flushed: a post the engine thread has not reached yet (it was
// asleep, or left posts to a polling consumer) is not lost.
TEST(SoftnicDatagram, DisconnectSendsWhatWasPosted)
{
    for (int round = 0; round < 20; ++round) {
        DatagramPair p;
        std::vector<char> src = {'b', 'y', 'e'}, dst(100, 0);
        const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
        const auto kd = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), dst.size(), kAll, p.pd);
        Sge r = sge_of(dst, kd);
        ASSERT_TRUE(p.b.rq.post(&r, 1, 0xb0));
        p.send(src, ks, 0xa0);
        p.dev.disconnect(p.a.qp);
        mlx5_cqe64 c;
        ASSERT_TRUE(p.b.next(p.b.recv_cq, c, 2000)) << round;
        EXPECT_EQ(opcode(c), MLX5_CQE_RESP_SEND) << round;
        EXPECT_EQ(std::memcmp(dst.data() + softnic::kGrhSize, "bye", 3), 0) << round;
    }
}

TEST(SoftnicDatagram, OnlyDatagramSendsRunOnADatagramQueuePair)
{
    DatagramPair p;
    std::vector<char> src(8, 's');
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
    Sge s = sge_of(src, ks);
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, &s, 1, 8, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 5));
    p.a.sq.ring();
    mlx5_cqe64 c;
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ_ERR);
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
}

TEST(SoftnicDatagram, AnAddressWithoutPortIsTakenUntilRemoved)
{
    softnic::Device dev;
    const std::uint32_t pd = dev.alloc_pd();
    Endpoint a(dev, pd), b(dev, pd);
    sockaddr_in a_addr{}, b_addr{};
    ASSERT_TRUE(dev.open_datagrams(a.qp, loopback(), a_addr));
    ASSERT_TRUE(dev.open_datagrams(b.qp, loopback(), b_addr));
    sockaddr_in any_port = loopback(); // port 0: any queue pair at that address (an exchange under way)
    dev.add_datagram_peer(b.qp, any_port, 0);
    std::vector<char> src(4, 'w'), dst(100, 0);
    const auto ks = dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, pd);
    const auto kd = dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), dst.size(), kAll, pd);
    Sge r[2] = {sge_of(dst, kd, 0, 50), sge_of(dst, kd, 50, 50)};
    ASSERT_TRUE(b.rq.post(&r[0], 1, 1));
    ASSERT_TRUE(b.rq.post(&r[1], 1, 2));
    const fastpath::RemoteAddress to{softnic::datagram_destination(b_addr), b.qp->qpn()};
    Sge s = sge_of(src, ks);
    ASSERT_TRUE(a.sq.post(softnic::kDatagramSendOpcode, &s, 1, 4, &to, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    a.sq.ring();
    mlx5_cqe64 c;
    ASSERT_TRUE(b.next(b.recv_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_RESP_SEND);
    EXPECT_EQ(softnic::datagram_source_qpn(c), a.qp->qpn());
    dev.remove_datagram_peer(b.qp, any_port, 0);
    ASSERT_TRUE(a.sq.post(softnic::kDatagramSendOpcode, &s, 1, 4, &to, 0, MLX5_WQE_CTRL_CQ_UPDATE, 2));
    a.sq.ring();
    ASSERT_TRUE(wait_dropped(dev, b.qp, 1)); // a stranger again
    EXPECT_TRUE(b.quiet(b.recv_cq));
}

// --- datagram queue pairs that take mlx5 address vectors (the software mlx5 device's UD) ---

namespace {

constexpr std::uint32_t kQkey = 0x01234567;

// The extended address vector a RoCE v2 address handle to `to` has (the
// port, per queue pair on the softnic, is not in it: the QPN finds it).
mlx5_wqe_av av_to(const sockaddr_in& to)
{
    mlx5_wqe_av av{};
    av.rlid = htobe16(0xc000); // RoCE v2's UDP source port
    av.hop_limit = 64;
    av.grh_gid_fl = htobe32(1u << 30);
    av.rgid[10] = av.rgid[11] = 0xff;
    std::memcpy(av.rgid + 12, &to.sin_addr.s_addr, 4);
    return av;
}

// Two datagram queue pairs taking address vectors with kQkey; no peer lists.
struct AvPair {
    AvPair() : pd(dev.alloc_pd()), a(dev, pd), b(dev, pd)
    {
        EXPECT_TRUE(dev.open_datagrams(a.qp, loopback(), a_addr));
        EXPECT_TRUE(dev.open_datagrams(b.qp, loopback(), b_addr));
        EXPECT_TRUE(dev.set_datagram_qkey(a.qp, kQkey));
        EXPECT_TRUE(dev.set_datagram_qkey(b.qp, kQkey));
    }
    void send(Endpoint& from, const mlx5_wqe_av& av, std::uint32_t qpn, std::uint32_t qkey, Sge s, std::uint64_t cookie,
              std::uint8_t opcode = MLX5_OPCODE_SEND)
    {
        ASSERT_TRUE(from.sq.post_datagram(opcode, &s, 1, s.length, av, qpn, qkey, 0, MLX5_WQE_CTRL_CQ_UPDATE, cookie,
                                          opcode));
        from.sq.ring();
    }
    softnic::Device dev;
    std::uint32_t pd;
    Endpoint a, b;
    sockaddr_in a_addr{}, b_addr{};
};

} // namespace

TEST(SoftnicDatagram, AddressVectorSendsArriveBothWaysWithTheirSender)
{
    AvPair p;
    std::vector<char> src(300, 'q'), dst(400, 0);
    for (std::size_t i = 0; i < src.size(); ++i)
        src[i] = static_cast<char>(i);
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
    const auto kd = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), dst.size(), kAll, p.pd);
    Sge r = sge_of(dst, kd);
    ASSERT_TRUE(p.b.rq.post(&r, 1, 0xb1));
    p.send(p.a, av_to(p.b_addr), p.b.qp->qpn(), kQkey, sge_of(src, ks), 0xa1);
    mlx5_cqe64 c;
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ);
    ASSERT_TRUE(p.b.next(p.b.recv_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_RESP_SEND);
    EXPECT_EQ(be32toh(c.byte_cnt), softnic::kGrhSize + 300);
    EXPECT_EQ(be32toh(c.flags_rqpn) & 0xffffff, p.a.qp->qpn());
    EXPECT_EQ((be32toh(c.flags_rqpn) >> 28) & 3, 1u); // a GRH, as mlx5 says
    EXPECT_EQ(std::memcmp(dst.data() + softnic::kGrhSize, src.data(), 300), 0);
    EXPECT_EQ(p.b.rq.complete_oldest(), 0xb1u);
    // And back.
    Sge back = sge_of(dst, kd, 0, 100);
    ASSERT_TRUE(p.a.rq.post(&back, 1, 0xa2));
    p.send(p.b, av_to(p.a_addr), p.a.qp->qpn(), kQkey, sge_of(src, ks, 0, 60), 0xb2);
    ASSERT_TRUE(p.a.next(p.a.recv_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_RESP_SEND);
    EXPECT_EQ(be32toh(c.flags_rqpn) & 0xffffff, p.b.qp->qpn());
    EXPECT_EQ(std::memcmp(dst.data() + softnic::kGrhSize, src.data(), 60), 0);
    EXPECT_EQ(p.a.qp->datagrams_dropped() + p.b.qp->datagrams_dropped(), 0u);
}

TEST(SoftnicDatagram, MalformedAddressVectorsAreDroppedAndCountedAtTheSender)
{
    AvPair p;
    softnic::Qp* other_qkey_qp = nullptr;
    Endpoint c3(p.dev, p.pd);
    sockaddr_in c3_addr{};
    ASSERT_TRUE(p.dev.open_datagrams(c3.qp, loopback(), c3_addr));
    ASSERT_TRUE(p.dev.set_datagram_qkey(c3.qp, kQkey + 1));
    other_qkey_qp = c3.qp;
    EXPECT_FALSE(p.dev.set_datagram_qkey(c3.qp, 0));
    std::vector<char> src(8, 's'), dst(200, 'c');
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
    const auto kd = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), dst.size(), kAll, p.pd);
    Sge r = sge_of(dst, kd);
    ASSERT_TRUE(p.b.rq.post(&r, 1, 1));
    Sge r3 = sge_of(dst, kd);
    ASSERT_TRUE(c3.rq.post(&r3, 1, 1));
    const std::uint32_t b = p.b.qp->qpn();
    mlx5_wqe_av not_mapped = av_to(p.b_addr);
    not_mapped.rgid[10] = 0;
    sockaddr_in elsewhere = p.b_addr;
    elsewhere.sin_addr.s_addr = htonl(0x7f000002);
    p.send(p.a, av_to(p.b_addr), b, kQkey + 1, sge_of(src, ks), 1);               // wrong qkey
    p.send(p.a, av_to(p.b_addr), b + 100, kQkey, sge_of(src, ks), 2);             // no such queue pair
    p.send(p.a, not_mapped, b, kQkey, sge_of(src, ks), 3);                        // not an IPv4-mapped GID
    p.send(p.a, av_to(elsewhere), b, kQkey, sge_of(src, ks), 4);                  // not where it is bound
    p.send(p.a, av_to(c3_addr), other_qkey_qp->qpn(), kQkey, sge_of(src, ks), 5); // its qkey is another
    // Not extended: the post sets the bit, so clear it in the WQE as written.
    ASSERT_TRUE(p.a.sq.post_datagram(MLX5_OPCODE_SEND, nullptr, 0, 0, av_to(p.b_addr), b, kQkey, 0,
                                     MLX5_WQE_CTRL_CQ_UPDATE, 6, MLX5_OPCODE_SEND));
    const std::uint32_t last = p.a.sq.producer_index() - 1;
    auto* wqe = reinterpret_cast<std::uint8_t*>(p.a.qp->descriptor().sq.buf) + (last & (p.a.qp->descriptor().sq.wqe_cnt - 1)) * 64;
    reinterpret_cast<mlx5_wqe_datagram_seg*>(wqe + 16)->av.dqp_dct = htobe32(b);
    p.a.sq.ring();
    mlx5_cqe64 c;
    for (std::uint64_t i = 1; i <= 6; ++i) { // each completes: a lost datagram is no error on UD
        ASSERT_TRUE(p.a.next(p.a.send_cq, c)) << i;
        EXPECT_EQ(opcode(c), MLX5_CQE_REQ) << i;
        EXPECT_EQ(p.a.sq.slot(be16toh(c.wqe_counter)).cookie, i);
    }
    EXPECT_EQ(p.a.qp->datagrams_dropped(), 6u);
    EXPECT_TRUE(p.b.quiet(p.b.recv_cq));
    EXPECT_TRUE(c3.quiet(c3.recv_cq));
    EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](char ch) { return ch == 'c'; }));
    // The sender goes on.
    p.send(p.a, av_to(p.b_addr), b, kQkey, sge_of(src, ks), 7);
    ASSERT_TRUE(p.b.next(p.b.recv_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_RESP_SEND);
}

TEST(SoftnicDatagram, AddressVectorQueuePairsTakeNoStrangersAndNoSoftnicOpcode)
{
    AvPair p;
    std::vector<char> src(8, 's'), dst(200, 'c');
    const auto ks = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(src.data()), src.size(), kAll, p.pd);
    const auto kd = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(dst.data()), dst.size(), kAll, p.pd);
    Sge r = sge_of(dst, kd);
    ASSERT_TRUE(p.b.rq.post(&r, 1, 1));
    // A well-formed softnic datagram from a socket that is no queue pair of this device.
    std::vector<std::uint8_t> d(16 + 8, 'x');
    const std::uint32_t v[4] = {0x46445544, p.a.qp->qpn(), p.b.qp->qpn(), 8};
    for (int i = 0; i < 4; ++i) {
        const std::uint32_t be = htobe32(v[i]);
        std::memcpy(d.data() + 4 * i, &be, 4);
    }
    send_raw(p.b_addr, d.data(), d.size());
    ASSERT_TRUE(wait_dropped(p.dev, p.b.qp, 1));
    EXPECT_TRUE(p.b.quiet(p.b.recv_cq));
    EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](char ch) { return ch == 'c'; }));
    // The softnic's own datagram opcode is not what such a queue pair runs.
    const fastpath::RemoteAddress to{softnic::datagram_destination(p.b_addr), p.b.qp->qpn()};
    Sge s = sge_of(src, ks);
    ASSERT_TRUE(p.a.sq.post(softnic::kDatagramSendOpcode, &s, 1, 8, &to, 0, MLX5_WQE_CTRL_CQ_UPDATE, 5));
    p.a.sq.ring();
    mlx5_cqe64 c;
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ_ERR);
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
}

// --- memory windows bound by mlx5 UMR WQEs (the mlx5 direct path's binds) ---

namespace {

// A window bind or free of a window `key` on `ep`'s send queue, the new key
// its variant advanced; the new key.
std::uint32_t post_umr(Endpoint& ep, std::uint32_t key, bool type2, std::uint32_t region, std::uint64_t addr,
                       std::uint64_t length, std::uint8_t access, bool zero_based = false, bool check_free = true)
{
    fastpath::SendQueue::WindowBind b;
    b.key = key;
    b.new_variant = static_cast<std::uint8_t>(key + 1);
    b.type2 = type2;
    b.check_free = check_free;
    b.length = length;
    b.addr = addr;
    b.region_key = region;
    b.zero_based = zero_based;
    b.access = access;
    EXPECT_TRUE(ep.sq.post_window_bind(b, MLX5_WQE_CTRL_CQ_UPDATE, 0));
    return (key & ~0xffu) | b.new_variant;
}

constexpr std::uint8_t kWindowWrite = MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE;

// The WQE at send queue index `index` of `ep`, to be spoilt before it is rung.
std::uint8_t* wqe_at(Endpoint& ep, std::uint32_t index)
{
    return static_cast<std::uint8_t*>(ep.qp->descriptor().sq.buf) + static_cast<std::size_t>(index) * 64;
}

} // namespace

// A type 1 window (any queue pair of its PD) and a type 2 one (its own
// queue pair only) bound by UMR WQEs: the peer writes through them within
// range, nowhere else; a free ends one; a rebind of the type 2 window while
// bound is refused (IB binds it only while free) and leaves it as it was.
TEST(SoftnicWindows, UmrBindsServeTheirRangeAndFreeEndsThem)
{
    Pair p;
    std::vector<char> target(4096, 'T'), local(64, 'L');
    const std::uint32_t region =
        p.dev.memory().add(reinterpret_cast<std::uintptr_t>(target.data()), target.size(), kAll, p.pd);
    const std::uint32_t kl = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(local.data()), 64, kAll, p.pd);
    const std::uint32_t w1 = p.dev.memory().add_window(p.pd, 1);
    const std::uint32_t w2 = p.dev.memory().add_window(p.pd, 2);
    const std::uint64_t base = reinterpret_cast<std::uintptr_t>(target.data());
    const std::uint32_t k1 = post_umr(p.b, w1, false, region, base + 1024, 256, kWindowWrite);
    const std::uint32_t k2 = post_umr(p.b, w2, true, region, base + 2048, 256, kWindowWrite, true); // zero-based
    p.b.sq.ring();
    mlx5_cqe64 c;
    for (int i = 0; i < 2; ++i) {
        ASSERT_TRUE(p.b.next(p.b.send_cq, c));
        EXPECT_EQ(opcode(c), MLX5_CQE_REQ);
    }
    EXPECT_TRUE(p.dev.memory().check(k1, base + 1024, 256, softnic::kRemoteWrite, p.pd, p.a.qp->qpn()));
    EXPECT_FALSE(p.dev.memory().check(w1, base + 1024, 8, softnic::kRemoteWrite, p.pd)); // the old key
    EXPECT_TRUE(p.dev.memory().check(k2, 0, 256, softnic::kRemoteWrite, p.pd, p.b.qp->qpn()));
    EXPECT_FALSE(p.dev.memory().check(k2, 0, 8, softnic::kRemoteWrite, p.pd, p.a.qp->qpn())); // another QP
    EXPECT_FALSE(p.dev.memory().check(k1, base + 1024, 8, softnic::kRemoteRead, p.pd));       // a right not given
    Sge s = sge_of(local, kl, 0, 16);
    fastpath::RemoteAddress through1{base + 1024 + 240, k1}, through2{16, k2};
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_RDMA_WRITE, &s, 1, 16, &through1, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_RDMA_WRITE, &s, 1, 16, &through2, 0, MLX5_WQE_CTRL_CQ_UPDATE, 2));
    p.a.sq.ring();
    for (int i = 0; i < 2; ++i) {
        ASSERT_TRUE(p.a.next(p.a.send_cq, c));
        EXPECT_EQ(opcode(c), MLX5_CQE_REQ);
    }
    EXPECT_EQ(std::string(target.data() + 1024 + 240, 16), std::string(16, 'L'));
    EXPECT_EQ(std::string(target.data() + 2048 + 16, 16), std::string(16, 'L'));

    // A bound type 2 window is not bound again (CHECK_FREE): an error, and
    // the binding stays; the connection fails.
    const std::uint32_t k2b = post_umr(p.b, k2, true, region, base, 256, kWindowWrite);
    p.b.sq.ring();
    ASSERT_TRUE(p.b.next(p.b.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ_ERR);
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_MW_BIND_ERR);
    EXPECT_FALSE(p.dev.memory().check(k2b, base, 8, softnic::kRemoteWrite, p.pd, p.b.qp->qpn()));
    EXPECT_TRUE(p.dev.memory().check(k2, 0, 8, softnic::kRemoteWrite, p.pd, p.b.qp->qpn()));
    EXPECT_EQ(p.b.qp->state(), softnic::QpState::error);
}

// Frees: a type 1 window by any queue pair of its PD; a type 2 window only
// by the queue pair it is bound for (CHECK_QPN), then bound again.
TEST(SoftnicWindows, UmrFreeOfATypeTwoWindowOnlyByItsQueuePair)
{
    Pair p;
    std::vector<char> target(1024, 'T');
    const std::uint32_t region =
        p.dev.memory().add(reinterpret_cast<std::uintptr_t>(target.data()), target.size(), kAll, p.pd);
    const std::uint64_t base = reinterpret_cast<std::uintptr_t>(target.data());
    const std::uint32_t w1 = p.dev.memory().add_window(p.pd, 1);
    const std::uint32_t w2 = p.dev.memory().add_window(p.pd, 2);
    std::uint32_t k1 = post_umr(p.b, w1, false, region, base, 64, kWindowWrite);
    std::uint32_t k2 = post_umr(p.b, w2, true, region, base, 64, kWindowWrite);
    k1 = post_umr(p.a, k1, false, 0, 0, 0, 0); // freed by the other queue pair: allowed for type 1
    p.b.sq.ring();
    p.a.sq.ring();
    mlx5_cqe64 c;
    for (int i = 0; i < 2; ++i) {
        ASSERT_TRUE(p.b.next(p.b.send_cq, c));
        EXPECT_EQ(opcode(c), MLX5_CQE_REQ);
    }
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ);
    EXPECT_FALSE(p.dev.memory().check(k1, base, 8, softnic::kRemoteWrite, p.pd));
    // Freed and bound again by its own queue pair.
    k2 = post_umr(p.b, k2, true, 0, 0, 0, 0);
    const std::uint32_t k2b = post_umr(p.b, k2, true, region, base + 64, 64, kWindowWrite);
    p.b.sq.ring();
    for (int i = 0; i < 2; ++i) {
        ASSERT_TRUE(p.b.next(p.b.send_cq, c));
        EXPECT_EQ(opcode(c), MLX5_CQE_REQ);
    }
    EXPECT_TRUE(p.dev.memory().check(k2b, base + 64, 64, softnic::kRemoteWrite, p.pd, p.b.qp->qpn()));
    // Another queue pair may not free it: an error there, the window stays.
    post_umr(p.a, k2b, true, 0, 0, 0, 0);
    p.a.sq.ring();
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ_ERR);
    EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_MW_BIND_ERR);
    EXPECT_TRUE(p.dev.memory().check(k2b, base + 64, 64, softnic::kRemoteWrite, p.pd, p.b.qp->qpn()));
}

// Hostile or malformed UMR WQEs: each completes in error (malformed: a
// local QP operation error; a bind the table refuses: a memory-window bind
// error), the window stays unbound, the request behind it is flushed, and
// nothing outside the WQE is read.
class HostileUmr : public ::testing::TestWithParam<int> {};

TEST_P(HostileUmr, CompletesInErrorAndLeavesTheWindowUnbound)
{
    Pair p;
    std::vector<char> target(1024, 'T');
    const std::uint64_t base = reinterpret_cast<std::uintptr_t>(target.data());
    const std::uint32_t region = p.dev.memory().add(base, target.size(), kAll, p.pd);
    const std::uint32_t read_only =
        p.dev.memory().add(base, target.size(), softnic::kLocalRead | softnic::kRemoteRead, p.pd);
    const std::uint32_t other_pd = p.dev.alloc_pd();
    const std::uint32_t foreign_region = p.dev.memory().add(base, target.size(), kAll, other_pd);
    const bool type2 = GetParam() == 11 || GetParam() == 12;
    const std::uint32_t window = p.dev.memory().add_window(p.pd, type2 ? 2 : 1);
    const std::uint32_t foreign_window = p.dev.memory().add_window(other_pd, 1);
    std::uint32_t key = window, klm_region = region;
    std::uint64_t length = 256;
    std::uint8_t access = kWindowWrite;
    bool zero_based = false;
    switch (GetParam()) {
    case 6:
        key = region;
        break; // a region's key, not a window's
    case 7:
        key = foreign_window;
        break; // a window of another PD
    case 8:
        length = 2048;
        break; // past the region's end
    case 9:
        klm_region = read_only;
        break; // remote write over a region without local write
    case 10:
        klm_region = foreign_region;
        break; // a region of another PD
    case 13:
        zero_based = true;
        break; // a zero-based type 1 window
    case 14:
        access |= MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC;
        break; // window atomics
    default:
        break;
    }
    const std::uint32_t new_key = post_umr(p.a, key, type2, klm_region, base, length, access, zero_based);
    std::uint8_t* wqe = wqe_at(p.a, 0);
    auto* ctrl = reinterpret_cast<mlx5_wqe_ctrl_seg*>(wqe);
    auto* umr = reinterpret_cast<mlx5_wqe_umr_ctrl_seg*>(wqe + 16);
    auto* mkey = reinterpret_cast<mlx5_wqe_mkey_context_seg*>(wqe + 64);
    auto* klm = reinterpret_cast<mlx5_wqe_umr_klm_seg*>(wqe + 128);
    bool malformed = true;
    switch (GetParam()) {
    case 0:
        ctrl->qpn_ds = htobe32((be32toh(ctrl->qpn_ds) & ~0x3fu) | 11);
        break; // one segment short
    case 1:
        ctrl->qpn_ds = htobe32(be32toh(ctrl->qpn_ds) | 0x3f);
        break; // 63 segments: the whole ring and more
    case 2:
        umr->flags &= static_cast<std::uint8_t>(~MLX5_WQE_UMR_CTRL_FLAG_INLINE);
        break; // a KLM list elsewhere
    case 3:
        umr->mkey_mask |= htobe64(MLX5_WQE_UMR_CTRL_MKEY_MASK_BSF_ENABLE);
        break; // a field not modelled
    case 4:
        umr->klm_octowords = htobe16(2);
        break;
    case 5:
        mkey->free = MLX5_WQE_MKEY_CONTEXT_FREE;
        break; // a free that carries a KLM
    case 11:
        mkey->qpn_mkey = htobe32((p.b.qp->qpn() << 8) | (new_key & 0xff));
        malformed = false;
        break; // for another QP
    case 12:
        klm->byte_count = htobe32(128);
        malformed = false;
        break; // the KLM and the window disagree
    default:
        malformed = false;
        break;
    }
    std::vector<char> local(16, 'L');
    const std::uint32_t kl = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(local.data()), 16, kAll, p.pd);
    Sge s = sge_of(local, kl);
    ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND, &s, 1, 16, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 2)); // flushed
    p.a.sq.ring();
    mlx5_cqe64 c;
    ASSERT_TRUE(p.a.next(p.a.send_cq, c));
    EXPECT_EQ(opcode(c), MLX5_CQE_REQ_ERR);
    EXPECT_EQ(syndrome(c), malformed ? MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR : MLX5_CQE_SYNDROME_MW_BIND_ERR);
    EXPECT_EQ(be16toh(c.wqe_counter), 0u);
    if (GetParam() != 1) { // the 63-segment WQE covered the send behind it too
        ASSERT_TRUE(p.a.next(p.a.send_cq, c));
        EXPECT_EQ(opcode(c), MLX5_CQE_REQ_ERR);
        EXPECT_EQ(syndrome(c), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
    }
    EXPECT_EQ(p.a.qp->state(), softnic::QpState::error);
    for (std::uint32_t qpn : {0u, p.a.qp->qpn(), p.b.qp->qpn()})
        EXPECT_FALSE(p.dev.memory().check(new_key, 0, 8, softnic::kRemoteWrite, p.pd, qpn));
    EXPECT_FALSE(p.dev.memory().check(new_key, base, 8, softnic::kRemoteWrite, p.pd, p.a.qp->qpn()));
    EXPECT_FALSE(p.dev.memory().check(new_key, base, 8, softnic::kRemoteWrite, other_pd));
    EXPECT_EQ(std::string(target.data(), 16), std::string(16, 'T'));
}

INSTANTIATE_TEST_SUITE_P(MalformedAndRefused, HostileUmr, ::testing::Range(0, 15));

// A peer's send with invalidate: a type 2 window of the receiver's is
// unbound; a type 1 window (IB forbids it) and a foreign key break the
// connection, the receive buffer untouched.
TEST(SoftnicWindows, SendWithInvalidateUnbindsATypeTwoWindowOnly)
{
    for (const bool type2 : {true, false}) {
        Pair p;
        std::vector<char> target(1024, 'T'), local(16, 'L'), inbox(64, 'I');
        const std::uint64_t base = reinterpret_cast<std::uintptr_t>(target.data());
        const std::uint32_t region = p.dev.memory().add(base, target.size(), kAll, p.pd);
        const std::uint32_t kl = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(local.data()), 16, kAll, p.pd);
        const std::uint32_t ki = p.dev.memory().add(reinterpret_cast<std::uintptr_t>(inbox.data()), 64, kAll, p.pd);
        const std::uint32_t window = p.dev.memory().add_window(p.pd, type2 ? 2 : 1);
        const std::uint32_t key = post_umr(p.b, window, type2, region, base, 256, kWindowWrite);
        p.b.sq.ring();
        mlx5_cqe64 c;
        ASSERT_TRUE(p.b.next(p.b.send_cq, c));
        ASSERT_EQ(opcode(c), MLX5_CQE_REQ);
        Sge r = sge_of(inbox, ki);
        ASSERT_TRUE(p.b.rq.post(&r, 1, 1));
        Sge s = sge_of(local, kl);
        ASSERT_TRUE(p.a.sq.post(MLX5_OPCODE_SEND_INVAL, &s, 1, 16, nullptr, htobe32(key), MLX5_WQE_CTRL_CQ_UPDATE, 1));
        p.a.sq.ring();
        ASSERT_TRUE(p.b.next(p.b.recv_cq, c));
        if (type2) {
            EXPECT_EQ(opcode(c), MLX5_CQE_RESP_SEND_INV);
            EXPECT_EQ(be32toh(c.imm_inval_pkey), key);
            EXPECT_FALSE(p.dev.memory().check(key, base, 8, softnic::kRemoteWrite, p.pd, p.b.qp->qpn()));
            EXPECT_EQ(std::string(inbox.data(), 16), std::string(16, 'L'));
        } else {
            EXPECT_EQ(opcode(c), MLX5_CQE_RESP_ERR);
            EXPECT_TRUE(p.dev.memory().check(key, base, 8, softnic::kRemoteWrite, p.pd, p.b.qp->qpn()));
            EXPECT_EQ(std::string(inbox.data(), 16), std::string(16, 'I'));
            // The error CQE is pushed just before the queue pair fails, by
            // whichever thread ran the round (the engine's, maybe): wait for it.
            EXPECT_TRUE(wait_for_error(p.dev, p.b.qp));
        }
    }
}
