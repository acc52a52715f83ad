// Doorbells as the device sees them: the ORDER of doorbell-record writes and
// UAR/BlueFlame stores (send doorbell, CQ arm), CQ arm words, data scattered
// to the CQE, and an SRQ adopted from rdma-core's free list.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "queues.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <array>
#include <cstring>
#include <vector>

using namespace fastdapl::fastpath;

namespace {

// A fake UAR page whose stores are observed one at a time, in order.
//
// The page is mapped PROT_NONE. A store to it faults (SIGSEGV): the handler
// records the store's address, both doorbell-record words and (once) the
// watched queue memory as they are at that moment, opens the page, fills it
// with 0x00 and sets the trap flag, so the store is retried, completes and
// traps (SIGTRAP) right after. To see every byte it wrote, even one equal to
// what was there, the store is run a second time over 0xFF (it is one
// register-to-memory move; that the registers did not change is checked):
// a byte is written when it differs from 0x00 after the first run or from
// 0xFF after the second. The page then gets its logical contents back and
// is closed again. Every store to the page is thus one event, with what was
// already in memory when it happened and exactly which bytes it wrote.
class UarTrace {
public:
    static constexpr std::size_t kPage = 4096;
    static constexpr std::size_t kMaxEvents = 128;
    static constexpr std::uint8_t kFill = 0xA5; // what an unwritten UAR byte holds

    struct Event {
        std::size_t offset = 0;     // the faulting address, from the page start
        std::size_t written_lo = 0; // bytes the store wrote: [lo, hi)
        std::size_t written_hi = 0;
        bool replayed = false;           // the second run could be made
        std::uint32_t dbrec[2] = {0, 0}; // the doorbell record (host order) when the store was made
    };

    UarTrace(const volatile __be32* dbrec, const std::uint8_t* watch, std::size_t watch_len)
        : dbrec_(dbrec), watch_(watch), watch_len_(watch_len)
    {
        void* p = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            std::abort();
        page_ = static_cast<std::uint8_t*>(p);
        std::memset(page_, kFill, kPage);
        std::memcpy(shadow_.data(), page_, kPage);
        snapshot_.assign(watch_len_, 0);
        active_ = this;
        struct sigaction sa{};
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sa.sa_sigaction = on_segv;
        sigaction(SIGSEGV, &sa, &old_segv_);
        sa.sa_sigaction = on_trap;
        sigaction(SIGTRAP, &sa, &old_trap_);
        mprotect(page_, kPage, PROT_NONE);
    }
    ~UarTrace()
    {
        sigaction(SIGSEGV, &old_segv_, nullptr);
        sigaction(SIGTRAP, &old_trap_, nullptr);
        active_ = nullptr;
        munmap(page_, kPage);
    }
    UarTrace(const UarTrace&) = delete;
    UarTrace& operator=(const UarTrace&) = delete;

    // Whether each store is observed (single-stepping needs x86-64).
    static constexpr bool supported()
    {
#if defined(__x86_64__)
        return true;
#else
        return false;
#endif
    }

    std::uint8_t* page() const { return page_; }
    std::size_t count() const { return n_; }
    const Event& operator[](std::size_t i) const { return events_[i]; }
    // The watched memory as it was at the first store to the page.
    const std::vector<std::uint8_t>& snapshot_at_first_store() const { return snapshot_; }
    // The page's bytes now (reads open it for a moment).
    std::vector<std::uint8_t> bytes(std::size_t offset, std::size_t len)
    {
        mprotect(page_, kPage, PROT_READ);
        std::vector<std::uint8_t> v(page_ + offset, page_ + offset + len);
        mprotect(page_, kPage, PROT_NONE);
        return v;
    }
    // Each store wrote exactly one aligned run of `width` bytes at the
    // address it faulted on (a 64-bit word, or one BlueFlame chunk).
    ::testing::AssertionResult all_single_stores(std::size_t width) const
    {
        for (std::size_t i = 0; i < n_; ++i) {
            const Event& e = events_[i];
            if (!e.replayed || e.offset % width != 0 || e.written_lo != e.offset || e.written_hi != e.offset + width)
                return ::testing::AssertionFailure() << "store " << i << " at +" << e.offset << " wrote ["
                                                     << e.written_lo << ", " << e.written_hi << ")"
                                                     << (e.replayed ? "" : " (not replayed)");
        }
        return ::testing::AssertionSuccess();
    }
    ::testing::AssertionResult all_single_64bit_stores() const { return all_single_stores(8); }

private:
#if defined(__x86_64__)
    // Registers a replay must find unchanged (not RIP, flags, fault info).
    static bool same_registers(const greg_t* a, const greg_t* b)
    {
        for (int r : {REG_R8, REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RDI, REG_RSI, REG_RBP,
                      REG_RBX, REG_RDX, REG_RAX, REG_RCX, REG_RSP})
            if (a[r] != b[r])
                return false;
        return true;
    }
#endif

    static void on_segv(int sig, siginfo_t* si, void* ctx)
    {
        UarTrace* t = active_;
        auto* addr = static_cast<std::uint8_t*>(si->si_addr);
        if (!t || addr < t->page_ || addr >= t->page_ + kPage || t->n_ == kMaxEvents) {
            signal(sig, SIG_DFL); // a real crash: let it happen
            return;
        }
        Event& e = t->events_[t->n_];
        e.offset = static_cast<std::size_t>(addr - t->page_);
        e.dbrec[0] = be32toh(t->dbrec_[0]);
        e.dbrec[1] = be32toh(t->dbrec_[1]);
        if (t->n_ == 0 && t->watch_len_)
            std::memcpy(t->snapshot_.data(), t->watch_, t->watch_len_);
        mprotect(t->page_, kPage, PROT_READ | PROT_WRITE);
        std::memset(t->page_, 0x00, kPage);
#if defined(__x86_64__)
        auto* uc = static_cast<ucontext_t*>(ctx);
        std::memcpy(t->regs_, uc->uc_mcontext.gregs, sizeof t->regs_);
        t->phase_ = 1;
        uc->uc_mcontext.gregs[REG_EFL] |= 0x100; // trap after the retried store
#else
        (void)ctx; // without single-stepping only the first store is seen
        std::memcpy(t->page_, t->shadow_.data(), kPage);
        ++t->n_;
#endif
    }

    static void on_trap(int sig, siginfo_t*, void* ctx)
    {
        UarTrace* t = active_;
        if (!t || t->phase_ == 0) {
            signal(sig, SIG_DFL);
            return;
        }
#if defined(__x86_64__)
        auto* uc = static_cast<ucontext_t*>(ctx);
        Event& e = t->events_[t->n_];
        if (t->phase_ == 1 && same_registers(t->regs_, uc->uc_mcontext.gregs)) {
            std::memcpy(t->run1_.data(), t->page_, kPage); // first run over 0x00; now again over 0xFF
            std::memset(t->page_, 0xFF, kPage);
            uc->uc_mcontext.gregs[REG_RIP] = t->regs_[REG_RIP];
            t->phase_ = 2;
            return; // the trap flag is still set
        }
        const bool replayed = t->phase_ == 2;
        if (!replayed) {
            std::memcpy(t->run1_.data(), t->page_, kPage);
            std::memset(t->page_, 0xFF, kPage);
        }
        std::size_t lo = kPage, hi = 0;
        for (std::size_t i = 0; i < kPage; ++i) {
            const bool written = t->run1_[i] != 0x00 || (replayed && t->page_[i] != 0xFF);
            if (!written)
                continue;
            t->shadow_[i] = t->run1_[i];
            lo = i < lo ? i : lo;
            hi = i + 1;
        }
        e.written_lo = lo;
        e.written_hi = hi;
        e.replayed = replayed;
        std::memcpy(t->page_, t->shadow_.data(), kPage);
        uc->uc_mcontext.gregs[REG_EFL] &= ~0x100LL;
        t->phase_ = 0;
        ++t->n_;
        mprotect(t->page_, kPage, PROT_NONE);
#else
        (void)ctx;
#endif
    }

    static inline UarTrace* active_ = nullptr;
    const volatile __be32* dbrec_;
    const std::uint8_t* watch_;
    std::size_t watch_len_;
    std::uint8_t* page_ = nullptr;
    std::array<std::uint8_t, kPage> shadow_{}; // the page's logical contents
    std::array<std::uint8_t, kPage> run1_{};
    std::vector<std::uint8_t> snapshot_;
    int phase_ = 0; // 1: first run of a store, 2: its replay
#if defined(__x86_64__)
    greg_t regs_[NGREG]{};
#endif
    std::array<Event, kMaxEvents> events_{};
    std::size_t n_ = 0;
    struct sigaction old_segv_{}, old_trap_{};
};

constexpr std::size_t kBfOffset = 0x800; // where the BlueFlame register sits in a UAR page

// A send queue whose BlueFlame register is inside a traced UAR page.
struct TracedSq {
    explicit TracedSq(std::uint32_t sq_bbs, std::uint32_t bf_size, DoorbellMode mode, std::uint32_t max_inline = 0)
        : sq(static_cast<std::size_t>(sq_bbs) * 64, 0xEE), slots(sq_bbs), trace(dbrec, sq.data(), sq.size())
    {
        dv.dbrec = dbrec;
        dv.sq.buf = sq.data();
        dv.sq.wqe_cnt = sq_bbs;
        dv.sq.stride = 64;
        dv.bf.reg = trace.page() + kBfOffset;
        dv.bf.size = bf_size;
        s.init({&dv, 0x1234, max_inline, slots.data(), mode, {}});
    }
    std::uint32_t snd_dbrec() const { return be32toh(dbrec[MLX5_SND_DBR]); }
    std::vector<std::uint8_t> wqe(std::uint32_t bb, std::uint32_t len) const
    {
        return {sq.begin() + bb * 64, sq.begin() + bb * 64 + len};
    }

    std::vector<std::uint8_t> sq;
    __be32 dbrec[2] = {0, 0};
    std::vector<SendSlot> slots;
    UarTrace trace;
    mlx5dv_qp dv{};
    SendQueue s;
};

std::uint8_t small_payload[4] = {1, 2, 3, 4};
Sge small_sge{reinterpret_cast<std::uintptr_t>(small_payload), 4, 1}; // inlined where max_inline allows

bool post_small(SendQueue& s, std::uint64_t cookie)
{
    return s.post(MLX5_OPCODE_SEND, &small_sge, 1, 4, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, cookie);
}

// What one store of a BlueFlame copy writes (16 bytes with SSE2).
constexpr std::size_t kChunk = kBlueFlameStoreBytes;

// Checks the events [first, first+n) are consecutive BlueFlame-chunk
// stores, in ascending order from `offset`, each made after the doorbell
// record held `dbrec`.
void expect_copy(const UarTrace& t, std::size_t first, std::size_t n, std::size_t offset, std::uint32_t dbrec)
{
    ASSERT_GE(t.count(), first + n);
    for (std::size_t i = 0; i < n; ++i) {
        EXPECT_EQ(t[first + i].offset, offset + kChunk * i) << "store " << first + i;
        EXPECT_EQ(t[first + i].dbrec[MLX5_SND_DBR], dbrec) << "doorbell record not yet written at store " << first + i;
    }
}

#define REQUIRE_TRACE()                                                                          \
    do {                                                                                         \
        if (!UarTrace::supported())                                                              \
            GTEST_SKIP() << "observing each store needs single-stepping (x86-64)";               \
    } while (0)

} // namespace

// --- send doorbell order ------------------------------------------------------------

TEST(DoorbellOrder, EightByteDoorbellAfterTheRecord)
{
    REQUIRE_TRACE();
    TracedSq q(16, 256, DoorbellMode::uar_8byte);
    ASSERT_TRUE(post_small(q.s, 1));
    q.s.ring();
    ASSERT_EQ(q.trace.count(), 1u); // one 64-bit store
    EXPECT_TRUE(q.trace.all_single_64bit_stores());
    EXPECT_EQ(q.trace[0].offset, kBfOffset);
    EXPECT_EQ(q.trace[0].dbrec[MLX5_SND_DBR], 1u); // record first
    EXPECT_EQ(q.trace.snapshot_at_first_store(), q.sq); // the WQE complete before the doorbell
    EXPECT_EQ(q.trace.bytes(kBfOffset, 8), q.wqe(0, 8)); // the ctrl segment's first 8 bytes
    EXPECT_EQ(q.trace.bytes(kBfOffset + 8, 8), std::vector<std::uint8_t>(8, UarTrace::kFill));
}

TEST(DoorbellOrder, BlueFlameCopiesTheWholeWqeAfterTheRecord)
{
    REQUIRE_TRACE();
    TracedSq q(16, 256, DoorbellMode::blueflame, 128);
    std::vector<std::uint8_t> payload(100);
    for (std::size_t i = 0; i < payload.size(); ++i)
        payload[i] = static_cast<std::uint8_t>(3 * i + 1);
    Sge sge{reinterpret_cast<std::uintptr_t>(payload.data()), 100, 0};
    ASSERT_TRUE(q.s.post(MLX5_OPCODE_SEND, &sge, 1, 100, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1)); // 2 BBs inline
    ASSERT_EQ(q.s.producer_index(), 2u);
    q.s.ring();
    ASSERT_EQ(q.trace.count(), 128 / kChunk); // 128 bytes in BlueFlame-chunk stores
    EXPECT_TRUE(q.trace.all_single_stores(kChunk));
    expect_copy(q.trace, 0, 128 / kChunk, kBfOffset, 2);
    EXPECT_EQ(q.trace.snapshot_at_first_store(), q.sq);
    EXPECT_EQ(q.trace.bytes(kBfOffset, 128), q.wqe(0, 128));
}

TEST(DoorbellOrder, TwoPostsOneRingUseTheEightByteDoorbell)
{
    REQUIRE_TRACE();
    TracedSq q(16, 256, DoorbellMode::blueflame);
    ASSERT_TRUE(post_small(q.s, 1));
    ASSERT_TRUE(post_small(q.s, 2));
    q.s.ring();
    ASSERT_EQ(q.trace.count(), 1u);
    EXPECT_TRUE(q.trace.all_single_64bit_stores());
    EXPECT_EQ(q.trace[0].offset, kBfOffset);
    EXPECT_EQ(q.trace[0].dbrec[MLX5_SND_DBR], 2u); // both WQEs published before the doorbell
    EXPECT_EQ(q.trace.snapshot_at_first_store(), q.sq);
    EXPECT_EQ(q.trace.bytes(kBfOffset, 8), q.wqe(1, 8)); // the last WQE's ctrl segment
}

TEST(DoorbellOrder, WqeWrappingTheQueueEndIsNotBlueFlamed)
{
    REQUIRE_TRACE();
    TracedSq q(4, 256, DoorbellMode::blueflame, 128);
    for (int i = 0; i < 3; ++i) // producer to the last basic block
        ASSERT_TRUE(post_small(q.s, static_cast<std::uint64_t>(i)));
    q.s.ring();
    q.s.retire_through(2);
    const std::size_t before = q.trace.count();
    std::vector<std::uint8_t> payload(100, 0x42);
    Sge sge{reinterpret_cast<std::uintptr_t>(payload.data()), 100, 0};
    ASSERT_TRUE(q.s.post(MLX5_OPCODE_SEND, &sge, 1, 100, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 9)); // BBs 3 and 0
    q.s.ring();
    ASSERT_EQ(q.trace.count(), before + 1); // 8-byte doorbell, not a 128-byte copy
    EXPECT_TRUE(q.trace.all_single_64bit_stores());
    EXPECT_EQ(q.trace[before].offset, kBfOffset + 256); // second ring: the other half
    EXPECT_EQ(q.trace[before].dbrec[MLX5_SND_DBR], 5u);
    EXPECT_EQ(q.trace.bytes(kBfOffset + 256, 8), q.wqe(3, 8));
}

TEST(DoorbellOrder, WqeLargerThanTheBlueFlameBufferIsNotBlueFlamed)
{
    REQUIRE_TRACE();
    TracedSq q(16, 256, DoorbellMode::blueflame);
    std::vector<Sge> sges(16, Sge{0x1000, 1, 1}); // ctrl + 16 data segments: 272 bytes, 5 BBs
    ASSERT_TRUE(q.s.post(MLX5_OPCODE_SEND, sges.data(), 16, 16, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    ASSERT_EQ(q.s.producer_index(), 5u);
    q.s.ring();
    ASSERT_EQ(q.trace.count(), 1u);
    EXPECT_EQ(q.trace[0].dbrec[MLX5_SND_DBR], 5u);
    EXPECT_EQ(q.trace.bytes(kBfOffset, 8), q.wqe(0, 8));
}

TEST(DoorbellOrder, BlueFlameHalvesAlternateAcrossRings)
{
    REQUIRE_TRACE();
    TracedSq q(16, 256, DoorbellMode::blueflame);
    for (std::uint32_t ring = 0; ring < 3; ++ring) {
        const std::size_t first = q.trace.count();
        ASSERT_TRUE(post_small(q.s, ring));
        q.s.ring();
        ASSERT_EQ(q.trace.count(), first + 64 / kChunk) << "ring " << ring; // one BB copied
        const std::size_t half = ring % 2 ? 256 : 0;                        // 0, bf.size, 0
        expect_copy(q.trace, first, 64 / kChunk, kBfOffset + half, ring + 1);
        EXPECT_EQ(q.trace.bytes(kBfOffset + half, 64), q.wqe(ring, 64)) << "ring " << ring;
    }
    EXPECT_TRUE(q.trace.all_single_stores(kChunk));
}

TEST(DoorbellOrder, NoBlueFlameBufferFallsBackToTheEightByteDoorbell)
{
    REQUIRE_TRACE();
    TracedSq q(16, 0, DoorbellMode::blueflame); // uuar 0
    for (std::uint32_t ring = 0; ring < 2; ++ring) {
        ASSERT_TRUE(post_small(q.s, ring));
        q.s.ring();
        ASSERT_EQ(q.trace.count(), ring + 1u);
        EXPECT_EQ(q.trace[ring].offset, kBfOffset) << "no halves to alternate between";
        EXPECT_EQ(q.trace[ring].dbrec[MLX5_SND_DBR], ring + 1);
        EXPECT_EQ(q.trace.bytes(kBfOffset, 8), q.wqe(ring, 8));
    }
    EXPECT_TRUE(q.trace.all_single_64bit_stores());
}

TEST(DoorbellOrder, NothingPendingRingsNothing)
{
    REQUIRE_TRACE();
    TracedSq q(16, 256, DoorbellMode::blueflame);
    q.s.ring();
    EXPECT_EQ(q.trace.count(), 0u);
    EXPECT_EQ(q.snd_dbrec(), 0u);
}

// --- CQ arming ------------------------------------------------------------------------

namespace {

// A CQ (64- or 128-byte CQEs) whose UAR is a traced page.
struct TracedCq {
    TracedCq(std::uint32_t n, std::uint32_t size, std::uint32_t cqn = 0x00abcdef)
        : mem(static_cast<std::size_t>(n) * size), trace(dbrec, nullptr, 0)
    {
        dv.buf = mem.data();
        dv.dbrec = dbrec;
        dv.cqe_cnt = n;
        dv.cqe_size = size;
        dv.cq_uar = trace.page();
        dv.cqn = cqn;
        for (std::uint32_t i = 0; i < n; ++i)
            cqe(i)->op_own = MLX5_CQE_INVALID << 4;
        cq.init(dv);
    }
    mlx5_cqe64* cqe(std::uint32_t i)
    {
        return reinterpret_cast<mlx5_cqe64*>(&mem[(i % dv.cqe_cnt) * dv.cqe_size + dv.cqe_size - 64]);
    }
    // The UAR's CQ doorbell word as the device reads it (big-endian bytes).
    std::uint64_t uar_word()
    {
        std::uint64_t v;
        const auto b = trace.bytes(MLX5_CQ_DOORBELL, 8);
        std::memcpy(&v, b.data(), 8);
        return be64toh(v);
    }
    std::vector<std::uint8_t> mem;
    __be32 dbrec[2] = {0, 0};
    UarTrace trace;
    mlx5dv_cq dv{};
    CompletionQueue cq;
};

} // namespace

TEST(CqArm, WordLayout)
{
    EXPECT_EQ(CompletionQueue::arm_word(0, false, 0), 0u);
    EXPECT_EQ(CompletionQueue::arm_word(1, false, 7), 0x10000007u);
    EXPECT_EQ(CompletionQueue::arm_word(3, true, 0x123456), 0x31123456u);
    EXPECT_EQ(CompletionQueue::arm_word(4, false, 1), 0x00000001u); // sn wraps mod 4
    EXPECT_EQ(CompletionQueue::arm_word(6, true, 0x1ffffff), 0x21ffffffu); // ci keeps 24 bits
}

TEST(CqArm, RecordThenOneBigEndianUarStore)
{
    REQUIRE_TRACE();
    TracedCq q(8, 64);
    ASSERT_TRUE(q.cq.armable());
    q.cq.arm(false);
    ASSERT_EQ(q.trace.count(), 1u); // a single 64-bit store
    EXPECT_TRUE(q.trace.all_single_64bit_stores());
    EXPECT_EQ(q.trace[0].offset, static_cast<std::size_t>(MLX5_CQ_DOORBELL));
    // The record held the arm word before the UAR store was made.
    EXPECT_EQ(q.trace[0].dbrec[1], 0u | MLX5_CQ_DB_REQ_NOT);
    EXPECT_EQ(q.uar_word(), (std::uint64_t{0} << 32) | 0x00abcdefu);
    EXPECT_EQ(q.dbrec[0], 0u); // SET_CI is not the arm's business

    // Solicited only, after some CQEs were consumed: sn unchanged without an event.
    for (int i = 0; i < 5; ++i)
        q.cq.consume();
    q.dbrec[1] = 0; // a stale record must be rewritten before the next UAR store
    q.cq.arm(true);
    ASSERT_EQ(q.trace.count(), 2u);
    const std::uint32_t want = MLX5_CQ_DB_REQ_NOT_SOL | 5u;
    EXPECT_EQ(q.trace[1].dbrec[1], want);
    EXPECT_EQ(be32toh(q.dbrec[1]), want);
    EXPECT_EQ(q.uar_word(), (std::uint64_t{want} << 32) | 0x00abcdefu);
    // Big-endian on the bus: the sequence/command byte first, the CQN's low byte last.
    const auto raw = q.trace.bytes(MLX5_CQ_DOORBELL, 8);
    EXPECT_EQ(raw[0], 0x01);
    EXPECT_EQ(raw[3], 0x05);
    EXPECT_EQ(raw[7], 0xef);
}

TEST(CqArm, SequenceNumberFollowsEventsOnlyAndWrapsModFour)
{
    REQUIRE_TRACE();
    TracedCq q(8, 128, 0x77);
    const std::uint32_t expected_sn[] = {0, 0, 1, 2, 3, 0, 1};
    for (std::size_t i = 0; i < std::size(expected_sn); ++i) {
        if (i >= 2)
            q.cq.note_event(); // an event was read: the next arm is the next sequence number
        q.cq.arm(i % 2 == 1);
        ASSERT_EQ(q.trace.count(), i + 1);
        const std::uint32_t want = expected_sn[i] << 28 | (i % 2 ? static_cast<std::uint32_t>(MLX5_CQ_DB_REQ_NOT_SOL) : 0u);
        EXPECT_EQ(q.trace[i].dbrec[1], want) << i;
        EXPECT_EQ(q.uar_word(), (std::uint64_t{want} << 32) | 0x77u) << i;
    }
    EXPECT_EQ(q.cq.arm_sequence(), 5u);
}

TEST(CqArm, ConsumerIndexKeepsItsLow24Bits)
{
    REQUIRE_TRACE();
    TracedCq q(8, 64, 0xffffff);
    for (std::uint32_t i = 0; i < (1u << 24) + 3; ++i)
        q.cq.consume();
    q.cq.arm(false);
    ASSERT_EQ(q.trace.count(), 1u);
    EXPECT_EQ(q.trace[0].dbrec[1], 3u);
    EXPECT_EQ(q.uar_word(), (std::uint64_t{3} << 32) | 0xffffffu);
}

TEST(CqArm, SoftnicCqsHaveNoUar)
{
    std::vector<std::uint8_t> mem(8 * 64);
    __be32 dbrec[2] = {0, 0};
    mlx5dv_cq dv{};
    dv.buf = mem.data();
    dv.dbrec = dbrec;
    dv.cqe_cnt = 8;
    dv.cqe_size = 64;
    CompletionQueue cq;
    cq.init(dv);
    EXPECT_FALSE(cq.armable());
}

// --- CQE formats: inline scatter, compressed --------------------------------------------

namespace {

struct PlainCq {
    PlainCq(std::uint32_t n, std::uint32_t size) : mem(static_cast<std::size_t>(n) * size)
    {
        dv.buf = mem.data();
        dv.dbrec = dbrec;
        dv.cqe_cnt = n;
        dv.cqe_size = size;
        for (std::uint32_t i = 0; i < n; ++i)
            cqe(i)->op_own = MLX5_CQE_INVALID << 4;
        cq.init(dv);
    }
    mlx5_cqe64* cqe(std::uint32_t i)
    {
        return reinterpret_cast<mlx5_cqe64*>(&mem[(i % dv.cqe_cnt) * dv.cqe_size + dv.cqe_size - 64]);
    }
    // A receive CQE at index 0 whose data is in the CQE (format 1 or 2).
    mlx5_cqe64* produce_inline(std::uint8_t format, const std::uint8_t* data, std::uint32_t len, std::uint32_t byte_cnt)
    {
        mlx5_cqe64* c = cqe(0);
        auto* where = format == 1 ? reinterpret_cast<std::uint8_t*>(c) : reinterpret_cast<std::uint8_t*>(c) - 64;
        std::memcpy(where, data, len);
        c->byte_cnt = htobe32(byte_cnt);
        c->sop_drop_qpn = htobe32(0x42);
        c->op_own = static_cast<std::uint8_t>(MLX5_CQE_RESP_SEND << 4 | format << 2 | 0);
        return c;
    }
    std::vector<std::uint8_t> mem;
    __be32 dbrec[2] = {0, 0};
    mlx5dv_cq dv{};
    CompletionQueue cq;
};

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed)
{
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = static_cast<std::uint8_t>(seed + 7 * i);
    return v;
}

// Two receive buffers with guard bytes on both sides.
struct Buffers {
    static constexpr std::size_t kGuard = 16;
    Buffers(std::uint32_t a_len, std::uint32_t b_len)
        : a(a_len + 2 * kGuard, 0xCC), b(b_len + 2 * kGuard, 0xCC),
          sge{{reinterpret_cast<std::uintptr_t>(a.data() + kGuard), a_len, 1},
              {reinterpret_cast<std::uintptr_t>(b.data() + kGuard), b_len, 2}}
    {
    }
    const std::uint8_t* in_a() const { return a.data() + kGuard; }
    const std::uint8_t* in_b() const { return b.data() + kGuard; }
    bool untouched_from(const std::vector<std::uint8_t>& v, std::size_t from) const
    {
        for (std::size_t i = from; i < v.size(); ++i)
            if (v[i] != 0xCC)
                return false;
        return true;
    }
    bool guards_intact() const
    {
        for (std::size_t i = 0; i < kGuard; ++i)
            if (a[i] != 0xCC || b[i] != 0xCC || a[a.size() - 1 - i] != 0xCC || b[b.size() - 1 - i] != 0xCC)
                return false;
        return true;
    }
    std::vector<std::uint8_t> a, b;
    Sge sge[2];
};

} // namespace

TEST(InlineScatter, ThirtyTwoBytesInTheCqe64AcrossTwoSges)
{
    PlainCq q(8, 64);
    const auto data = pattern(32, 1);
    q.produce_inline(1, data.data(), 32, 20);
    const mlx5_cqe64* c = q.cq.peek();
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(CompletionQueue::is_inline_scattered(c));
    EXPECT_TRUE(CompletionQueue::needs_attention(c));
    EXPECT_FALSE(CompletionQueue::is_compressed(c));
    EXPECT_EQ(CompletionQueue::status(c), DAT_DTO_SUCCESS);
    Buffers b(8, 16);
    ASSERT_EQ(q.cq.scatter_inline(c, b.sge, 2), DAT_DTO_SUCCESS);
    EXPECT_EQ(std::memcmp(b.in_a(), data.data(), 8), 0);
    EXPECT_EQ(std::memcmp(b.in_b(), data.data() + 8, 12), 0);
    EXPECT_TRUE(b.untouched_from(b.b, Buffers::kGuard + 12)); // byte_cnt bytes, not 32
    EXPECT_TRUE(b.guards_intact());
}

TEST(InlineScatter, SixtyFourBytesBeforeTheCqe64In128ByteCqes)
{
    PlainCq q(8, 128);
    const auto data = pattern(64, 9);
    q.produce_inline(2, data.data(), 64, 50);
    const mlx5_cqe64* c = q.cq.peek();
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(CompletionQueue::is_inline_scattered(c));
    EXPECT_EQ(CompletionQueue::format(c), CqeFormat::inline_64);
    Buffers b(30, 30);
    ASSERT_EQ(q.cq.scatter_inline(c, b.sge, 2), DAT_DTO_SUCCESS);
    EXPECT_EQ(std::memcmp(b.in_a(), data.data(), 30), 0);
    EXPECT_EQ(std::memcmp(b.in_b(), data.data() + 30, 20), 0);
    EXPECT_TRUE(b.untouched_from(b.b, Buffers::kGuard + 20));
    EXPECT_TRUE(b.guards_intact());
}

TEST(InlineScatter, MoreDataThanTheScatterListIsALengthErrorAndWritesNothing)
{
    PlainCq q(8, 128);
    const auto data = pattern(64, 3);
    q.produce_inline(2, data.data(), 64, 40);
    const mlx5_cqe64* c = q.cq.peek();
    ASSERT_NE(c, nullptr);
    Buffers b(16, 16); // 32 bytes of room for 40
    EXPECT_EQ(q.cq.scatter_inline(c, b.sge, 2), DAT_DTO_ERR_LOCAL_LENGTH);
    EXPECT_TRUE(b.untouched_from(b.a, 0));
    EXPECT_TRUE(b.untouched_from(b.b, 0));
    EXPECT_EQ(q.cq.scatter_inline(c, b.sge, 1), DAT_DTO_ERR_LOCAL_LENGTH); // fewer SGEs, same
    EXPECT_TRUE(b.untouched_from(b.a, 0));
}

TEST(InlineScatter, ByteCountBeyondWhatTheFormatHoldsIsRefused)
{
    PlainCq q(8, 64);
    const auto data = pattern(32, 5);
    q.produce_inline(1, data.data(), 32, 33); // format 1 holds at most 32
    Buffers b(64, 64);
    EXPECT_EQ(q.cq.scatter_inline(q.cq.peek(), b.sge, 2), DAT_DTO_ERR_LOCAL_LENGTH);
    EXPECT_TRUE(b.untouched_from(b.a, 0));
}

TEST(InlineScatter, SixtyFourByteFormatInA64ByteCqIsRefused)
{
    PlainCq q(8, 64);
    const auto data = pattern(8, 5);
    mlx5_cqe64* c = q.cqe(0);
    c->byte_cnt = htobe32(8);
    c->op_own = static_cast<std::uint8_t>(MLX5_CQE_RESP_SEND << 4 | 2 << 2);
    Buffers b(64, 64);
    EXPECT_EQ(q.cq.scatter_inline(q.cq.peek(), b.sge, 2), DAT_DTO_ERR_LOCAL_EP);
    EXPECT_TRUE(b.untouched_from(b.a, 0));
}

TEST(InlineScatter, FromTheReceiveWqesOwnDataSegments)
{
    // Receive WQEs of 4 data segments; the scatter list is read back from the WQE.
    std::vector<std::uint8_t> rq(4 * 64, 0xEE);
    __be32 qp_dbrec[2] = {0, 0};
    mlx5dv_qp dv{};
    dv.dbrec = qp_dbrec;
    dv.rq.buf = rq.data();
    dv.rq.wqe_cnt = 4;
    dv.rq.stride = 64;
    std::vector<std::uint64_t> cookies(4);
    RecvQueue r;
    r.init(dv, cookies.data());
    Buffers b(5, 40);
    ASSERT_TRUE(r.post(b.sge, 2, 77));

    PlainCq q(8, 64);
    const auto data = pattern(32, 11);
    q.produce_inline(1, data.data(), 32, 25);
    ASSERT_EQ(q.cq.scatter_inline(q.cq.peek(), r.segments_of_oldest(), r.max_sge()), DAT_DTO_SUCCESS);
    EXPECT_EQ(std::memcmp(b.in_a(), data.data(), 5), 0);
    EXPECT_EQ(std::memcmp(b.in_b(), data.data() + 5, 20), 0);
    EXPECT_TRUE(b.guards_intact());
    EXPECT_EQ(r.complete_oldest(), 77u);

    // A list that ends (invalid key) before byte_cnt is reached: refused.
    Buffers small(4, 4);
    ASSERT_TRUE(r.post(small.sge, 2, 78));
    q.cq.consume();
    mlx5_cqe64* c = q.cqe(1);
    std::memcpy(c, data.data(), 32);
    c->byte_cnt = htobe32(9);
    c->op_own = static_cast<std::uint8_t>(MLX5_CQE_RESP_SEND << 4 | 1 << 2);
    EXPECT_EQ(q.cq.scatter_inline(q.cq.peek(), r.segments_of_oldest(), r.max_sge()), DAT_DTO_ERR_LOCAL_LENGTH);
    EXPECT_TRUE(small.untouched_from(small.a, 0));
}

TEST(CqeFormat, CompressedCqesAreReportedAsErrors)
{
    PlainCq q(8, 64);
    mlx5_cqe64* c = q.cqe(0);
    c->byte_cnt = htobe32(4);
    c->op_own = static_cast<std::uint8_t>(MLX5_CQE_RESP_SEND << 4 | 3 << 2); // a mini-CQE array
    const mlx5_cqe64* seen = q.cq.peek();
    ASSERT_NE(seen, nullptr); // not silently skipped: the caller sees it ...
    EXPECT_TRUE(CompletionQueue::is_compressed(seen));
    EXPECT_TRUE(CompletionQueue::needs_attention(seen));
    EXPECT_FALSE(CompletionQueue::is_inline_scattered(seen));
    EXPECT_EQ(CompletionQueue::status(seen), DAT_DTO_ERR_LOCAL_EP); // ... as an error, not a receive
    Buffers b(64, 64);
    EXPECT_EQ(q.cq.scatter_inline(seen, b.sge, 2), DAT_DTO_ERR_LOCAL_EP);
    EXPECT_TRUE(b.untouched_from(b.a, 0));
}

TEST(CqeFormat, OnlyPlainSuccessfulCqesNeedNoAttention)
{
    mlx5_cqe64 c{};
    auto with = [&c](std::uint8_t opcode, std::uint8_t format, std::uint8_t owner) {
        c.op_own = static_cast<std::uint8_t>(opcode << 4 | format << 2 | owner);
        return &c;
    };
    for (std::uint8_t owner : {0, 1}) {
        for (std::uint8_t op : {MLX5_CQE_REQ, MLX5_CQE_RESP_WR_IMM, MLX5_CQE_RESP_SEND, MLX5_CQE_RESP_SEND_IMM,
                                MLX5_CQE_RESP_SEND_INV}) {
            EXPECT_FALSE(CompletionQueue::needs_attention(with(op, 0, owner))) << int(op);
            EXPECT_EQ(CompletionQueue::status(with(op, 0, owner)), DAT_DTO_SUCCESS) << int(op);
            EXPECT_TRUE(CompletionQueue::needs_attention(with(op, 1, owner))) << int(op);
            EXPECT_TRUE(CompletionQueue::needs_attention(with(op, 3, owner))) << int(op);
        }
        EXPECT_TRUE(CompletionQueue::needs_attention(with(MLX5_CQE_REQ_ERR, 0, owner)));
        EXPECT_TRUE(CompletionQueue::needs_attention(with(MLX5_CQE_RESP_ERR, 0, owner)));
    }
    reinterpret_cast<std::uint8_t*>(&c)[kErrCqeSyndromeOffset] = MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
    EXPECT_EQ(CompletionQueue::status(with(MLX5_CQE_RESP_ERR, 0, 0)), DAT_DTO_ERR_LOCAL_LENGTH);
    EXPECT_EQ(CompletionQueue::status(with(MLX5_CQE_RESIZE_CQ, 0, 0)), DAT_DTO_ERR_LOCAL_EP);
}

// --- SRQ adopted from rdma-core -------------------------------------------------------

namespace {

// SRQ memory as rdma-core leaves it: `wqes` WQEs allocated, the free list
// head..tail linked in order, the rest (its ODP wait queue) off the list.
struct RdmaCoreSrq {
    RdmaCoreSrq(std::uint32_t wqes, std::uint32_t stride, std::uint32_t head, std::uint32_t list_len,
                std::uint32_t counter)
        : buf(static_cast<std::size_t>(wqes) * stride, 0xEE)
    {
        dv.buf = buf.data();
        dv.dbrec = dbrec;
        dv.stride = stride;
        dv.head = head;
        std::uint32_t i = head;
        for (std::uint32_t n = 1; n < list_len; ++n) {
            const std::uint32_t next = (i + 1) % list_len;
            next_of(i)->next_wqe_index = htobe16(static_cast<std::uint16_t>(next));
            i = next;
        }
        dv.tail = i;
        dbrec[0] = htobe32(counter);
    }
    mlx5_wqe_srq_next_seg* next_of(std::uint32_t i)
    {
        return reinterpret_cast<mlx5_wqe_srq_next_seg*>(&buf[i * dv.stride]);
    }
    const mlx5_wqe_data_seg* data(std::uint32_t i) { return reinterpret_cast<const mlx5_wqe_data_seg*>(next_of(i) + 1); }
    std::vector<std::uint8_t> buf;
    __be32 dbrec[2] = {0, 0};
    mlx5dv_srq dv{};
};

} // namespace

TEST(SharedReceiveQueue, AdoptsRdmaCoresFreeListWithoutRelinking)
{
    // 32 WQEs allocated, 11 on the list (0..10), 21 kept off it.
    RdmaCoreSrq q(32, 32, 0, 11, 0x1fffe);
    const std::vector<std::uint8_t> original = q.buf;
    const auto list = SharedReceiveQueue::inspect_free_list(q.dv);
    ASSERT_TRUE(list.ok);
    EXPECT_EQ(list.length, 11u);
    EXPECT_EQ(list.index_limit, 16u);
    std::vector<std::uint64_t> cookies(list.index_limit);
    SharedReceiveQueue s;
    s.adopt(q.dv, list, be32toh(q.dbrec[0]), cookies.data());
    EXPECT_EQ(q.buf, original); // nothing relinked
    EXPECT_EQ(s.capacity(), 10u);
    EXPECT_EQ(s.outstanding(), 0u);
    Sge sge{0x5000, 8, 1};
    for (std::uint32_t i = 0; i < 10; ++i) {
        sge.addr = 0x5000 + i;
        ASSERT_TRUE(s.post(&sge, 1, 100 + i)) << i;
        EXPECT_EQ(be64toh(q.data(i)->addr), 0x5000u + i); // in list order
        EXPECT_EQ(be32toh(q.dbrec[0]), (0x1fffeu + i + 1) & 0xffff) << "counter continues from the record";
    }
    EXPECT_FALSE(s.post(&sge, 1, 999)); // the tail stays the sentinel
    for (std::size_t i = 10 * 32; i < q.buf.size(); ++i)
        ASSERT_EQ(q.buf[i], 0xEE) << "WQE " << i / 32 << " is not on the list";
    // Out of order completions come back and are reposted.
    EXPECT_EQ(s.complete(7), 107u);
    EXPECT_EQ(s.complete(2), 102u);
    ASSERT_TRUE(s.post(&sge, 1, 200)); // the old tail (10), then 7
    ASSERT_TRUE(s.post(&sge, 1, 201));
    EXPECT_FALSE(s.post(&sge, 1, 202)); // 2 is the tail now
    EXPECT_EQ(s.complete(10), 200u);
    EXPECT_EQ(s.complete(7), 201u);
}

TEST(SharedReceiveQueue, AdoptsAListThatDoesNotStartAtZero)
{
    RdmaCoreSrq q(8, 32, 5, 8, 0);
    const auto list = SharedReceiveQueue::inspect_free_list(q.dv);
    ASSERT_TRUE(list.ok);
    EXPECT_EQ(list.length, 8u);
    EXPECT_EQ(q.dv.tail, 4u);
    std::vector<std::uint64_t> cookies(list.index_limit);
    SharedReceiveQueue s;
    s.adopt(q.dv, list, 0, cookies.data());
    Sge sge{0x5000, 8, 1};
    ASSERT_TRUE(s.post(&sge, 1, 1));
    EXPECT_EQ(s.segments(5), q.data(5));
    EXPECT_EQ(be64toh(q.data(5)->addr), 0x5000u);
}

TEST(SharedReceiveQueue, AFreeListThatNeverReachesItsTailIsRefused)
{
    RdmaCoreSrq q(8, 32, 0, 8, 0);
    q.next_of(3)->next_wqe_index = htobe16(1); // a cycle that skips the tail
    EXPECT_FALSE(SharedReceiveQueue::inspect_free_list(q.dv, 64).ok);
}
