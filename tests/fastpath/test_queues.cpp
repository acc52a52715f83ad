// The mlx5 queue engine against the mlx5dv.h definitions: WQE fields, doorbells, CQE ownership.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "queues.hpp"

#include <gtest/gtest.h>

#include <sys/eventfd.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <vector>

using namespace fastdapl::fastpath;

namespace {

// Queue memory laid out as a device would hand it to mlx5dv_init_obj.
struct FakeQp {
    explicit FakeQp(std::uint32_t sq_bbs, std::uint32_t rq_wqes = 16, std::uint32_t rq_stride = 64,
                    std::uint32_t bf_size = 256)
        : sq(static_cast<std::size_t>(sq_bbs) * 64, 0xEE), rq(static_cast<std::size_t>(rq_wqes) * rq_stride, 0xEE),
          uar(2 * 256, 0), slots(sq_bbs), cookies(rq_wqes)
    {
        dv.dbrec = dbrec;
        dv.sq.buf = sq.data();
        dv.sq.wqe_cnt = sq_bbs;
        dv.sq.stride = 64;
        dv.rq.buf = rq.data();
        dv.rq.wqe_cnt = rq_wqes;
        dv.rq.stride = rq_stride;
        dv.bf.reg = uar.data();
        dv.bf.size = bf_size;
    }
    std::vector<std::uint8_t> sq, rq, uar;
    __be32 dbrec[2] = {0, 0};
    std::vector<SendSlot> slots;
    std::vector<std::uint64_t> cookies;
    mlx5dv_qp dv{};
};

SendQueue make_sq(FakeQp& q, std::uint32_t max_inline = 0, DoorbellMode mode = DoorbellMode::software,
                  SoftwareDoorbell sw = {})
{
    SendQueue s;
    s.init({&q.dv, 0x1234, max_inline, q.slots.data(), mode, sw});
    return s;
}

const mlx5_wqe_ctrl_seg* ctrl_at(FakeQp& q, std::uint32_t bb) { return reinterpret_cast<const mlx5_wqe_ctrl_seg*>(&q.sq[bb * 64]); }

template <typename T>
const T* seg_at(FakeQp& q, std::uint32_t bb, std::uint32_t seg)
{
    return reinterpret_cast<const T*>(&q.sq[(bb * 64 + seg * 16) % q.sq.size()]);
}

} // namespace

TEST(SendQueue, GatherSendMatchesTheMlx5dvHelpers)
{
    FakeQp q(16);
    SendQueue s = make_sq(q);
    Sge sge[2] = {{0x1000, 100, 0x11}, {0x2000, 200, 0x22}};
    ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, sge, 2, 300, nullptr, 0, control_flags(DAT_COMPLETION_DEFAULT_FLAG), 77));

    mlx5_wqe_ctrl_seg want{};
    mlx5dv_set_ctrl_seg(&want, 0, MLX5_OPCODE_SEND, 0, 0x1234, MLX5_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
    EXPECT_EQ(std::memcmp(ctrl_at(q, 0), &want, sizeof want), 0);
    EXPECT_EQ(be32toh(ctrl_at(q, 0)->opmod_idx_opcode), (0u << 8) | MLX5_OPCODE_SEND);
    EXPECT_EQ(be32toh(ctrl_at(q, 0)->qpn_ds), (0x1234u << 8) | 3u);
    for (int i = 0; i < 2; ++i) {
        mlx5_wqe_data_seg d{};
        mlx5dv_set_data_seg(&d, sge[i].length, sge[i].lkey, sge[i].addr);
        EXPECT_EQ(std::memcmp(seg_at<mlx5_wqe_data_seg>(q, 0, 1 + i), &d, sizeof d), 0) << i;
    }
    EXPECT_EQ(s.producer_index(), 1u);
    EXPECT_EQ(s.slot(0).cookie, 77u);
    EXPECT_EQ(s.slot(0).length, 300u);
    EXPECT_EQ(s.slot(0).signaled, 1);
}

TEST(SendQueue, RdmaWriteHasARemoteAddressSegment)
{
    FakeQp q(16);
    SendQueue s = make_sq(q);
    Sge sge{0x3000, 8, 0x33};
    RemoteAddress r{0xdeadbeef0000ull, 0x4455};
    ASSERT_TRUE(s.post(MLX5_OPCODE_RDMA_WRITE, &sge, 1, 8, &r, 0, 0, 5));
    const auto* raddr = seg_at<mlx5_wqe_raddr_seg>(q, 0, 1);
    EXPECT_EQ(be64toh(raddr->raddr), r.addr);
    EXPECT_EQ(be32toh(raddr->rkey), r.rkey);
    EXPECT_EQ(raddr->reserved, 0u);
    EXPECT_EQ(be32toh(ctrl_at(q, 0)->qpn_ds) & 0x3f, 3u);
    EXPECT_EQ(ctrl_at(q, 0)->fm_ce_se, 0); // suppressed: no CQE on success
    EXPECT_EQ(s.slot(0).signaled, 0);
}

TEST(SendQueue, SmallSendsAreInlined)
{
    FakeQp q(16);
    SendQueue s = make_sq(q, 64);
    char a[] = "hello, ", b[] = "inline world";
    Sge sge[2] = {{reinterpret_cast<std::uintptr_t>(a), 7, 1}, {reinterpret_cast<std::uintptr_t>(b), 12, 2}};
    ASSERT_TRUE(s.post(MLX5_OPCODE_SEND_IMM, sge, 2, 19, nullptr, htobe32(0xabcd), MLX5_WQE_CTRL_CQ_UPDATE, 1));
    const auto* hdr = seg_at<mlx5_wqe_inl_data_seg>(q, 0, 1);
    EXPECT_EQ(be32toh(hdr->byte_count), 19u | MLX5_INLINE_SEG);
    EXPECT_EQ(std::memcmp(&q.sq[16 + 4], "hello, inline world", 19), 0);
    EXPECT_EQ(be32toh(ctrl_at(q, 0)->qpn_ds) & 0x3f, 1u + 2u); // ctrl + ceil((4+19)/16)
    EXPECT_EQ(be32toh(ctrl_at(q, 0)->imm), 0xabcdu);
    EXPECT_EQ(be32toh(ctrl_at(q, 0)->opmod_idx_opcode) & 0xff, static_cast<unsigned>(MLX5_OPCODE_SEND_IMM));
}

TEST(SendQueue, ReadsAreNeverInlined)
{
    FakeQp q(16);
    SendQueue s = make_sq(q, 64);
    Sge sge{0x5000, 8, 9};
    RemoteAddress r{0x6000, 7};
    ASSERT_TRUE(s.post(MLX5_OPCODE_RDMA_READ, &sge, 1, 8, &r, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    const auto* d = seg_at<mlx5_wqe_data_seg>(q, 0, 2);
    EXPECT_EQ(be32toh(d->byte_count), 8u);
    EXPECT_EQ(be64toh(d->addr), 0x5000u);
}

namespace {

// Source bytes that end where an unreadable page begins: a copy that reads
// one byte past its source faults.
class EdgeOfPage {
public:
    EdgeOfPage()
    {
        void* p = mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            std::abort();
        base_ = static_cast<std::uint8_t*>(p);
        mprotect(base_ + kPage, kPage, PROT_NONE);
    }
    ~EdgeOfPage() { munmap(base_, 2 * kPage); }
    EdgeOfPage(const EdgeOfPage&) = delete;
    EdgeOfPage& operator=(const EdgeOfPage&) = delete;
    // `len` bytes of a pattern that depends on `seed`, ending at the edge.
    const std::uint8_t* fill(std::uint32_t len, std::uint32_t seed)
    {
        std::uint8_t* p = base_ + kPage - len;
        for (std::uint32_t i = 0; i < len; ++i)
            p[i] = static_cast<std::uint8_t>(seed * 7 + i * 13 + 1);
        return p;
    }

private:
    static constexpr std::size_t kPage = 4096;
    std::uint8_t* base_ = nullptr;
};

} // namespace

// One segment of inline data that fits the first basic block: at every
// length the WQE is exactly ctrl, (remote address,) inline header, data;
// the rest of the queue is not written and the source is not over-read.
TEST(SendQueue, SmallInlineWritesExactlyTheWqeAtEveryLength)
{
    EdgeOfPage edge;
    for (const bool rdma : {false, true}) {
        const std::uint32_t limit = rdma ? 28 : 44;
        for (std::uint32_t len = 0; len <= limit; ++len) {
            SCOPED_TRACE(testing::Message() << (rdma ? "RDMA write" : "send") << " of " << len << " bytes");
            FakeQp q(4);
            SendQueue s = make_sq(q, 256);
            const std::uint8_t* src = edge.fill(len, len);
            Sge sge{reinterpret_cast<std::uintptr_t>(src), len, 5};
            RemoteAddress r{0x1122334455667788ull, 0x99aabbcc};
            const std::uint8_t op = rdma ? MLX5_OPCODE_RDMA_WRITE_IMM : MLX5_OPCODE_SEND_IMM;
            const std::uint8_t fm = MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED;
            // The second WQE, so its index in the control segment is 1.
            ASSERT_TRUE(s.post(op, &sge, 1, len, rdma ? &r : nullptr, htobe32(0x01020304), fm, 1));
            ASSERT_TRUE(s.post(op, &sge, 1, len, rdma ? &r : nullptr, htobe32(0x05060708), fm, 2));
            EXPECT_EQ(s.producer_index(), 2u);

            std::vector<std::uint8_t> want(64, 0xEE);
            const std::uint32_t ds = 1 + (rdma ? 1 : 0) + (4 + len + 15) / 16;
            mlx5_wqe_ctrl_seg ctrl{};
            mlx5dv_set_ctrl_seg(&ctrl, 1, op, 0, 0x1234, fm, static_cast<std::uint8_t>(ds), 0, htobe32(0x05060708));
            std::memcpy(&want[0], &ctrl, sizeof ctrl);
            std::size_t at = 16;
            if (rdma) {
                mlx5_wqe_raddr_seg raddr{htobe64(r.addr), htobe32(r.rkey), 0};
                std::memcpy(&want[at], &raddr, sizeof raddr);
                at += 16;
            }
            const __be32 byte_count = htobe32(len | MLX5_INLINE_SEG);
            std::memcpy(&want[at], &byte_count, 4);
            std::memcpy(&want[at + 4], src, len);
            EXPECT_EQ(std::vector<std::uint8_t>(q.sq.begin() + 64, q.sq.begin() + 128), want);
            EXPECT_EQ(std::vector<std::uint8_t>(q.sq.begin() + 128, q.sq.end()), std::vector<std::uint8_t>(128, 0xEE));

            const SendSlot& slot = s.slot(1);
            EXPECT_EQ(slot.cookie, 2u);
            EXPECT_EQ(slot.length, len);
            EXPECT_EQ(slot.opcode, op);
            EXPECT_EQ(slot.bbs, 1);
            EXPECT_EQ(slot.signaled, 1);
        }
    }
}

TEST(SendQueue, InlineBeyondTheFirstBasicBlockOrMaxInline)
{
    EdgeOfPage edge;
    {
        FakeQp q(8);
        SendQueue s = make_sq(q, 256);
        const std::uint8_t* src = edge.fill(45, 3); // one byte more than the first basic block holds
        Sge sge{reinterpret_cast<std::uintptr_t>(src), 45, 5};
        ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, &sge, 1, 45, nullptr, 0, 0, 1));
        EXPECT_EQ(s.producer_index(), 2u);
        EXPECT_EQ(be32toh(ctrl_at(q, 0)->qpn_ds) & 0x3f, 1u + 4u);
        EXPECT_EQ(std::memcmp(&q.sq[20], src, 45), 0);
        RemoteAddress r{0x1000, 1};
        src = edge.fill(29, 4);
        sge = Sge{reinterpret_cast<std::uintptr_t>(src), 29, 5};
        ASSERT_TRUE(s.post(MLX5_OPCODE_RDMA_WRITE, &sge, 1, 29, &r, 0, 0, 2));
        EXPECT_EQ(s.producer_index(), 4u);
        EXPECT_EQ(be32toh(ctrl_at(q, 2)->qpn_ds) & 0x3f, 2u + 3u);
        EXPECT_EQ(std::memcmp(&q.sq[128 + 36], src, 29), 0);
        EXPECT_EQ(s.slot(2).bbs, 2);
    }
    {
        FakeQp q(8);
        SendQueue s = make_sq(q, 8); // max_inline below what the basic block could hold
        const std::uint8_t* src = edge.fill(9, 5);
        Sge sge{reinterpret_cast<std::uintptr_t>(src), 9, 0x77};
        ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, &sge, 1, 9, nullptr, 0, 0, 1));
        mlx5_wqe_data_seg d{};
        mlx5dv_set_data_seg(&d, 9, 0x77, sge.addr);
        EXPECT_EQ(std::memcmp(seg_at<mlx5_wqe_data_seg>(q, 0, 1), &d, sizeof d), 0); // a pointer, not inline
        EXPECT_EQ(be32toh(ctrl_at(q, 0)->qpn_ds) & 0x3f, 2u);
        sge.length = 8;
        ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, &sge, 1, 8, nullptr, 0, 0, 2));
        EXPECT_EQ(be32toh(seg_at<mlx5_wqe_inl_data_seg>(q, 1, 1)->byte_count), 8u | MLX5_INLINE_SEG);
    }
}

TEST(SendQueue, FullQueueRefusesASmallInlineSendAndWritesNothing)
{
    FakeQp q(4);
    SendQueue s = make_sq(q, 64);
    char data[8] = "abcdefg";
    Sge sge{reinterpret_cast<std::uintptr_t>(data), 8, 1};
    for (int i = 0; i < 4; ++i)
        ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, &sge, 1, 8, nullptr, 0, 0, static_cast<std::uint64_t>(i)));
    const std::vector<std::uint8_t> before = q.sq;
    const std::vector<SendSlot> slots_before = q.slots;
    EXPECT_FALSE(s.post(MLX5_OPCODE_SEND, &sge, 1, 8, nullptr, 0, 0, 99));
    EXPECT_EQ(q.sq, before);
    EXPECT_EQ(std::memcmp(q.slots.data(), slots_before.data(), q.slots.size() * sizeof(SendSlot)), 0);
    EXPECT_EQ(s.producer_index(), 4u);
    s.retire_through(0);
    EXPECT_TRUE(s.post(MLX5_OPCODE_SEND, &sge, 1, 8, nullptr, 0, 0, 100));
    EXPECT_EQ(s.slot(4).cookie, 100u);
}

TEST(SendQueue, InlineDataWrapsAtTheEndOfTheQueue)
{
    FakeQp q(4);
    SendQueue s = make_sq(q, 128);
    Sge tiny{0, 0, 0};
    for (int i = 0; i < 3; ++i) // move the producer to the last basic block
        ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, &tiny, 0, 0, nullptr, 0, 0, 0));
    s.retire_through(2);
    std::vector<std::uint8_t> payload(100);
    for (std::size_t i = 0; i < payload.size(); ++i)
        payload[i] = static_cast<std::uint8_t>(i + 1);
    Sge sge{reinterpret_cast<std::uintptr_t>(payload.data()), 100, 0};
    ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, &sge, 1, 100, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 9));
    // WQE at BB 3 (bytes 192..255): ctrl, inline header + 44 bytes, then bytes 0..55 again.
    EXPECT_EQ(be32toh(seg_at<mlx5_wqe_inl_data_seg>(q, 3, 1)->byte_count), 100u | MLX5_INLINE_SEG);
    EXPECT_EQ(std::memcmp(&q.sq[192 + 16 + 4], payload.data(), 44), 0);
    EXPECT_EQ(std::memcmp(&q.sq[0], payload.data() + 44, 56), 0);
    EXPECT_EQ(s.slot(3).bbs, 2);
}

TEST(SendQueue, FullQueueRefusesAndWritesNothing)
{
    FakeQp q(4);
    SendQueue s = make_sq(q);
    Sge sge{0x1000, 1, 1};
    for (int i = 0; i < 4; ++i)
        ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, &sge, 1, 1, nullptr, 0, 0, static_cast<std::uint64_t>(i)));
    const std::vector<std::uint8_t> before = q.sq;
    EXPECT_FALSE(s.post(MLX5_OPCODE_SEND, &sge, 1, 1, nullptr, 0, 0, 99));
    EXPECT_EQ(q.sq, before);
    EXPECT_EQ(s.free_bbs(), 0u);
    s.retire_through(1); // an unsignalled WQE 0 retires implicitly with WQE 1
    EXPECT_EQ(s.free_bbs(), 2u);
    EXPECT_TRUE(s.post(MLX5_OPCODE_SEND, &sge, 1, 1, nullptr, 0, 0, 100));
    EXPECT_EQ(s.slot(4).cookie, 100u);
}

TEST(SendQueue, CompletionFlagsMapToControlBits)
{
    EXPECT_EQ(control_flags(DAT_COMPLETION_DEFAULT_FLAG), MLX5_WQE_CTRL_CQ_UPDATE);
    EXPECT_EQ(control_flags(DAT_COMPLETION_SUPPRESS_FLAG), 0);
    EXPECT_EQ(control_flags(DAT_COMPLETION_UNSIGNALLED_FLAG), MLX5_WQE_CTRL_CQ_UPDATE);
    EXPECT_EQ(control_flags(DAT_COMPLETION_SOLICITED_WAIT_FLAG), MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED);
    EXPECT_EQ(control_flags(DAT_COMPLETION_BARRIER_FENCE_FLAG), MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_FENCE);
    EXPECT_EQ(control_flags(static_cast<DAT_COMPLETION_FLAGS>(DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG)),
              MLX5_WQE_CTRL_SOLICITED);
    // Every combination, and flags the control segment has no bit for
    // (threshold, invalidate fence) change nothing.
    for (unsigned f = 0; f < 64; ++f) {
        std::uint8_t want = (f & DAT_COMPLETION_SUPPRESS_FLAG) ? 0 : MLX5_WQE_CTRL_CQ_UPDATE;
        if (f & DAT_COMPLETION_SOLICITED_WAIT_FLAG)
            want |= MLX5_WQE_CTRL_SOLICITED;
        if (f & DAT_COMPLETION_BARRIER_FENCE_FLAG)
            want |= MLX5_WQE_CTRL_FENCE;
        EXPECT_EQ(control_flags(static_cast<DAT_COMPLETION_FLAGS>(f)), want) << f;
    }
}

TEST(SendQueue, SyndromesMapToDatStatuses)
{
    EXPECT_EQ(status_of_syndrome(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR), DAT_DTO_ERR_LOCAL_LENGTH);
    EXPECT_EQ(status_of_syndrome(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR), DAT_DTO_ERR_LOCAL_EP);
    EXPECT_EQ(status_of_syndrome(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR), DAT_DTO_ERR_LOCAL_PROTECTION);
    EXPECT_EQ(status_of_syndrome(MLX5_CQE_SYNDROME_WR_FLUSH_ERR), DAT_DTO_ERR_FLUSHED);
    EXPECT_EQ(status_of_syndrome(MLX5_CQE_SYNDROME_MW_BIND_ERR), DAT_RMR_OPERATION_FAILED);
    EXPECT_EQ(status_of_syndrome(MLX5_CQE_SYNDROME_BAD_RESP_ERR), DAT_DTO_ERR_BAD_RESPONSE);
    EXPECT_EQ(status_of_syndrome(MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR), DAT_DTO_ERR_REMOTE_ACCESS);
    EXPECT_EQ(status_of_syndrome(MLX5_CQE_SYNDROME_REMOTE_OP_ERR), DAT_DTO_ERR_REMOTE_RESPONDER);
    EXPECT_EQ(status_of_syndrome(MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR), DAT_DTO_ERR_TRANSPORT);
    EXPECT_EQ(status_of_syndrome(MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR), DAT_DTO_ERR_RECEIVER_NOT_READY);
}

TEST(Doorbell, SoftwareDoorbellRecordAndWakeOnlyWhenAsleep)
{
    FakeQp q(16);
    std::atomic<std::uint32_t> sleeping{0};
    const int fd = eventfd(0, EFD_NONBLOCK);
    ASSERT_GE(fd, 0);
    SendQueue s = make_sq(q, 0, DoorbellMode::software, {&sleeping, fd});
    Sge sge{0x1000, 4, 1};
    ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, &sge, 1, 4, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    EXPECT_EQ(q.dbrec[MLX5_SND_DBR], 0u); // nothing published before the doorbell
    s.ring();
    EXPECT_EQ(be32toh(q.dbrec[MLX5_SND_DBR]), 1u);
    std::uint64_t count = 0;
    EXPECT_EQ(read(fd, &count, sizeof count), -1); // engine awake: no syscall made
    sleeping = 1;
    ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, &sge, 1, 4, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 2));
    s.ring();
    EXPECT_EQ(read(fd, &count, sizeof count), static_cast<ssize_t>(sizeof count));
    EXPECT_EQ(count, 1u);
    close(fd);
}

TEST(Doorbell, BlueFlameCopiesTheWqeAndAlternatesHalves)
{
    FakeQp q(16);
    SendQueue s = make_sq(q, 0, DoorbellMode::blueflame);
    Sge sge{0x1000, 4, 1};
    ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, &sge, 1, 4, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    s.ring();
    EXPECT_EQ(be32toh(q.dbrec[MLX5_SND_DBR]), 1u);
    EXPECT_EQ(std::memcmp(q.uar.data(), &q.sq[0], 64), 0);
    ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, &sge, 1, 4, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 2));
    s.ring();
    EXPECT_EQ(std::memcmp(q.uar.data() + 256, &q.sq[64], 64), 0);
}

TEST(Doorbell, EightByteDoorbellWithoutBlueFlameBuffer)
{
    FakeQp q(16, 16, 64, 0); // uuar 0: no BlueFlame, always the 8-byte write
    SendQueue s = make_sq(q, 0, DoorbellMode::blueflame);
    Sge sge{0x1000, 4, 1};
    ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, &sge, 1, 4, nullptr, 0, MLX5_WQE_CTRL_CQ_UPDATE, 1));
    s.ring();
    EXPECT_EQ(std::memcmp(q.uar.data(), &q.sq[0], 8), 0);
    EXPECT_EQ(q.uar[8], 0);
}

TEST(RecvQueue, ShortListsEndWithTheInvalidKeyAndCompleteInOrder)
{
    FakeQp q(16, 4, 64); // 4 data segments per receive WQE
    RecvQueue r;
    r.init(q.dv, q.cookies.data());
    EXPECT_EQ(r.max_sge(), 4u);
    Sge sge[2] = {{0x1000, 10, 3}, {0x2000, 20, 4}};
    ASSERT_TRUE(r.post(sge, 2, 41));
    ASSERT_TRUE(r.post(sge, 1, 42));
    const auto* d = reinterpret_cast<const mlx5_wqe_data_seg*>(q.rq.data());
    EXPECT_EQ(be32toh(d[1].lkey), 4u);
    EXPECT_EQ(be32toh(d[2].lkey), static_cast<unsigned>(MLX5_INVALID_LKEY));
    EXPECT_EQ(be32toh(d[2].byte_count), 0u);
    EXPECT_EQ(be32toh(q.dbrec[MLX5_RCV_DBR]), 2u);
    EXPECT_FALSE(r.post(sge, 5, 1)); // more segments than a WQE holds
    ASSERT_TRUE(r.post(sge, 1, 43));
    ASSERT_TRUE(r.post(sge, 1, 44));
    EXPECT_FALSE(r.post(sge, 1, 45)); // full
    EXPECT_EQ(r.complete_oldest(), 41u);
    EXPECT_EQ(r.complete_oldest(), 42u);
    EXPECT_TRUE(r.post(sge, 1, 46));
}

// A device writing CQEs: owner bit = wrap parity of the producer index.
struct FakeCq {
    FakeCq(std::uint32_t n, std::uint32_t size) : mem(static_cast<std::size_t>(n) * size)
    {
        dv.buf = mem.data();
        dv.dbrec = dbrec;
        dv.cqe_cnt = n;
        dv.cqe_size = size;
        for (std::uint32_t i = 0; i < n; ++i)
            cqe(i)->op_own = MLX5_CQE_INVALID << 4; // as rdma-core initialises them
    }
    mlx5_cqe64* cqe(std::uint32_t i)
    {
        return reinterpret_cast<mlx5_cqe64*>(&mem[(i % dv.cqe_cnt) * dv.cqe_size + dv.cqe_size - 64]);
    }
    void produce(std::uint32_t pi, std::uint16_t counter)
    {
        mlx5_cqe64* c = cqe(pi);
        c->wqe_counter = htobe16(counter);
        c->byte_cnt = htobe32(pi);
        c->op_own = static_cast<std::uint8_t>((MLX5_CQE_REQ << 4) | ((pi / dv.cqe_cnt) & 1));
    }
    std::vector<std::uint8_t> mem;
    __be32 dbrec[2] = {0, 0};
    mlx5dv_cq dv{};
};

TEST(CompletionQueue, OwnershipSurvivesWrapAtEverySize)
{
    for (std::uint32_t cqe_size : {64u, 128u}) {
        for (std::uint32_t n = 1; n <= 4096; n *= 2) {
            FakeCq dev(n, cqe_size);
            CompletionQueue cq;
            cq.init(dev.dv);
            std::uint32_t pi = 0;
            for (std::uint32_t lap = 0; lap < 3; ++lap) {
                // Produce a burst that ends mid-ring, consume it, check nothing more is seen.
                const std::uint32_t burst = n == 1 ? 1 : n - 1;
                for (std::uint32_t i = 0; i < burst; ++i, ++pi)
                    dev.produce(pi, static_cast<std::uint16_t>(pi));
                for (std::uint32_t i = 0; i < burst; ++i) {
                    const mlx5_cqe64* c = cq.peek();
                    ASSERT_NE(c, nullptr) << "n=" << n << " size=" << cqe_size << " lap=" << lap << " i=" << i;
                    EXPECT_EQ(be32toh(c->byte_cnt), cq.consumer_index());
                    EXPECT_EQ(CompletionQueue::opcode(c), MLX5_CQE_REQ);
                    cq.consume();
                }
                ASSERT_EQ(cq.peek(), nullptr) << "n=" << n << " size=" << cqe_size << " lap=" << lap;
                cq.publish_consumer_index();
                EXPECT_EQ(be32toh(dev.dbrec[0]), cq.consumer_index() & 0xffffff);
            }
        }
    }
}

TEST(CompletionQueue, ErrorCqeSyndrome)
{
    FakeCq dev(8, 64);
    CompletionQueue cq;
    cq.init(dev.dv);
    dev.produce(0, 0);
    auto* raw = reinterpret_cast<std::uint8_t*>(dev.cqe(0));
    raw[kErrCqeSyndromeOffset] = MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
    dev.cqe(0)->op_own = static_cast<std::uint8_t>(MLX5_CQE_REQ_ERR << 4);
    const mlx5_cqe64* c = cq.peek();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(CompletionQueue::opcode(c), MLX5_CQE_REQ_ERR);
    EXPECT_EQ(status_of_syndrome(CompletionQueue::syndrome(c)), DAT_DTO_ERR_REMOTE_ACCESS);
}

// --- shared receive queue ------------------------------------------------------------

namespace {

// SRQ memory as a device hands it over: WQEs of a next-segment plus data segments.
// A data segment as mlx5dv_set_data_seg writes it, at `offset` of `wqe`.
void mlx5wqe_set(std::vector<std::uint8_t>& wqe, std::size_t offset, std::uint32_t length, std::uint32_t lkey,
                 std::uint64_t addr)
{
    mlx5_wqe_data_seg d{};
    mlx5dv_set_data_seg(&d, length, lkey, addr);
    std::memcpy(&wqe[offset], &d, sizeof d);
}

struct FakeSrq {
    FakeSrq(std::uint32_t wqes, std::uint32_t stride) : buf(static_cast<std::size_t>(wqes) * stride, 0xEE), cookies(wqes)
    {
        dv.buf = buf.data();
        dv.dbrec = dbrec;
        dv.stride = stride;
        dv.head = 0;
        dv.tail = wqes - 1;
    }
    const mlx5_wqe_srq_next_seg* next(std::uint32_t i) const
    {
        return reinterpret_cast<const mlx5_wqe_srq_next_seg*>(&buf[i * dv.stride]);
    }
    const mlx5_wqe_data_seg* data(std::uint32_t i) const
    {
        return reinterpret_cast<const mlx5_wqe_data_seg*>(next(i) + 1);
    }
    std::vector<std::uint8_t> buf;
    __be32 dbrec[2] = {0, 0};
    std::vector<std::uint64_t> cookies;
    mlx5dv_srq dv{};
};

} // namespace

TEST(SharedReceiveQueue, WqesAreANextSegmentThenDataSegments)
{
    FakeSrq q(8, 64); // 16-byte next segment + 3 data segments
    SharedReceiveQueue s;
    s.init(q.dv, 8, q.cookies.data());
    EXPECT_EQ(s.max_sge(), 3u);
    EXPECT_EQ(s.capacity(), 7u);
    for (std::uint32_t i = 0; i < 8; ++i) // the free list as a fresh device SRQ has it
        EXPECT_EQ(be16toh(q.next(i)->next_wqe_index), (i + 1) % 8) << i;
    Sge sge[2] = {{0x1000, 10, 3}, {0x2000, 20, 4}};
    ASSERT_TRUE(s.post(sge, 2, 41));
    mlx5_wqe_data_seg expected[2];
    mlx5dv_set_data_seg(&expected[0], 10, 3, 0x1000);
    mlx5dv_set_data_seg(&expected[1], 20, 4, 0x2000);
    EXPECT_EQ(std::memcmp(q.data(0), expected, sizeof expected), 0);
    EXPECT_EQ(be32toh(q.data(0)[2].lkey), static_cast<unsigned>(MLX5_INVALID_LKEY)); // short list terminated
    EXPECT_EQ(be32toh(q.dbrec[0]), 1u);
    EXPECT_FALSE(s.post(sge, 4, 1)); // more segments than a WQE holds
    EXPECT_EQ(be32toh(q.dbrec[0]), 1u);
    EXPECT_EQ(s.outstanding(), 1u);
}

// One segment (the post without a loop) at every WQE size: the segment,
// the invalid key behind it only where the WQE has room for more, nothing
// else written; and the refusals.
TEST(SharedReceiveQueue, OneSegmentPostsWriteExactlyTheirWqe)
{
    for (const std::uint32_t stride : {32u, 64u, 128u}) {
        SCOPED_TRACE(testing::Message() << "stride " << stride);
        FakeSrq q(4, stride);
        SharedReceiveQueue s;
        s.init(q.dv, 4, q.cookies.data());
        const std::uint32_t max_sge = (stride - 16) / 16;
        ASSERT_EQ(s.max_sge(), max_sge);
        for (std::uint32_t i = 0; i < 3; ++i) {
            std::vector<std::uint8_t> want(q.buf.begin() + i * stride, q.buf.begin() + (i + 1) * stride);
            const Sge sge{0x1000ull * (i + 1) + 0xabc00000000ull, 100 + i, 7 + i};
            ASSERT_TRUE(s.post(&sge, 1, 50 + i)) << i;
            mlx5wqe_set(want, 16, sge.length, sge.lkey, sge.addr);
            if (max_sge > 1)
                mlx5wqe_set(want, 32, 0, MLX5_INVALID_LKEY, 0);
            EXPECT_EQ(std::vector<std::uint8_t>(q.buf.begin() + i * stride, q.buf.begin() + (i + 1) * stride), want)
                << "WQE " << i;
            EXPECT_EQ(be32toh(q.dbrec[0]), i + 1);
            EXPECT_EQ(q.cookies[i], 50u + i);
        }
        const std::vector<std::uint8_t> before = q.buf;
        const Sge sge{0x9000, 1, 1};
        EXPECT_FALSE(s.post(&sge, 1, 99)); // only the sentinel is left
        EXPECT_EQ(q.buf, before);
        EXPECT_EQ(be32toh(q.dbrec[0]), 3u);
        EXPECT_EQ(s.complete(1), 51u);
        EXPECT_TRUE(s.post(&sge, 1, 100)); // the old tail, 3
        EXPECT_EQ(be64toh(q.data(3)->addr), 0x9000u);
        EXPECT_EQ(be32toh(q.dbrec[0]), 4u);
    }
    // A WQE with room for no data segment refuses one.
    FakeSrq q(4, 16);
    SharedReceiveQueue s;
    s.init(q.dv, 4, q.cookies.data());
    const std::vector<std::uint8_t> before = q.buf;
    const Sge sge{0x9000, 1, 1};
    EXPECT_FALSE(s.post(&sge, 1, 1));
    EXPECT_EQ(q.buf, before);
    EXPECT_EQ(q.dbrec[0], 0u);
}

TEST(SharedReceiveQueue, OutOfOrderCompletionsLoseAndRepeatNothing)
{
    constexpr std::uint32_t kWqes = 16;
    FakeSrq q(kWqes, 32); // one data segment
    SharedReceiveQueue s;
    s.init(q.dv, kWqes, q.cookies.data());
    std::vector<std::uint16_t> posted_at; // WQE index of each posted cookie
    std::uint64_t next_cookie = 0;
    std::vector<bool> completed;
    auto post_one = [&] {
        Sge sge{0x1000 + next_cookie, 8, 1};
        const std::uint32_t before = be32toh(q.dbrec[0]);
        if (!s.post(&sge, 1, next_cookie))
            return false;
        // The WQE just filled is the one whose data names this cookie.
        for (std::uint32_t i = 0; i < kWqes; ++i)
            if (be64toh(q.data(i)->addr) == 0x1000 + next_cookie)
                posted_at.push_back(static_cast<std::uint16_t>(i));
        EXPECT_EQ(be32toh(q.dbrec[0]), (before + 1) & 0xffff);
        completed.push_back(false);
        ++next_cookie;
        return true;
    };
    while (post_one()) {
    }
    EXPECT_EQ(next_cookie, kWqes - 1u); // one WQE stays the sentinel
    EXPECT_EQ(s.free_wqes(), 0u);
    // Complete in a scrambled order, reposting as it goes, many times round.
    std::uint64_t done = 0;
    unsigned seed = 7;
    while (done < 2000) {
        std::vector<std::uint64_t> open;
        for (std::uint64_t c = 0; c < completed.size(); ++c)
            if (!completed[c])
                open.push_back(c);
        ASSERT_FALSE(open.empty());
        const std::uint64_t victim = open[rand_r(&seed) % open.size()];
        EXPECT_EQ(s.complete(posted_at[victim]), victim); // the CQE names the WQE; the cookie comes back
        completed[victim] = true;
        ++done;
        ASSERT_TRUE(post_one()); // its WQE is free again
    }
    EXPECT_EQ(s.outstanding(), kWqes - 1u);
    // No two open cookies share a WQE.
    std::vector<int> users(kWqes, 0);
    for (std::uint64_t c = 0; c < completed.size(); ++c)
        if (!completed[c])
            ++users[posted_at[c]];
    for (std::uint32_t i = 0; i < kWqes; ++i)
        EXPECT_LE(users[i], 1) << i;
}

// --- cleaning a queue pair's CQEs ----------------------------------------------------

namespace {

constexpr std::uint32_t kQpA = 0x00a11a;
constexpr std::uint32_t kQpB = 0x00b22b;

// A CQE of queue pair `qpn` as the device writes it at producer index `pi`.
void produce_for(FakeCq& dev, std::uint32_t pi, std::uint8_t opcode, std::uint32_t qpn, std::uint16_t counter)
{
    dev.produce(pi, counter);
    mlx5_cqe64* c = dev.cqe(pi);
    c->sop_drop_qpn = htobe32(qpn);
    c->op_own = static_cast<std::uint8_t>((opcode << 4) | (c->op_own & MLX5_CQE_OWNER_MASK));
}

std::uint32_t qpn_at(FakeCq& dev, std::uint32_t i)
{
    return be32toh(dev.cqe(i)->sop_drop_qpn) & 0xffffff;
}

// Posts `n` one-segment receives with cookies first, first + 1, ...; returns how many went in.
std::uint32_t post_receives(SharedReceiveQueue& s, std::uint32_t n, std::uint64_t first)
{
    std::uint32_t done = 0;
    for (; done < n; ++done) {
        Sge sge{0x1000 + first + done, 8, 1};
        if (!s.post(&sge, 1, first + done))
            break;
    }
    return done;
}

} // namespace

TEST(CleanQueuePair, SharedCqDropsOnlyThatQpAndGivesItsSrqWqesBack)
{
    FakeSrq q(8, 32);
    SharedReceiveQueue srq;
    srq.init(q.dv, 8, q.cookies.data());
    ASSERT_EQ(post_receives(srq, 6, 0), 6u); // a fresh free list: cookie i in WQE i
    for (std::uint32_t i = 0; i < 6; ++i)
        ASSERT_EQ(be64toh(q.data(i)->addr), 0x1000u + i) << i;
    FakeCq dev(16, 64);
    CompletionQueue cq;
    cq.init(dev.dv);
    struct {
        std::uint8_t op;
        std::uint32_t qpn;
        std::uint16_t counter;
    } const cqes[] = {{MLX5_CQE_REQ, kQpA, 0}, {MLX5_CQE_RESP_SEND, kQpB, 0}, {MLX5_CQE_RESP_SEND, kQpA, 1},
                      {MLX5_CQE_REQ, kQpB, 0}, {MLX5_CQE_RESP_SEND, kQpA, 2}, {MLX5_CQE_RESP_SEND, kQpB, 3},
                      {MLX5_CQE_REQ, kQpA, 1}, {MLX5_CQE_RESP_SEND, kQpA, 4}};
    for (std::uint32_t pi = 0; pi < 8; ++pi)
        produce_for(dev, pi, cqes[pi].op, cqes[pi].qpn, cqes[pi].counter);

    clean_queue_pair(kQpA, &cq, &cq, &srq);

    for (std::uint32_t pi = 0; pi < 8; ++pi) {
        EXPECT_EQ(qpn_at(dev, pi), cqes[pi].qpn == kQpA ? CompletionQueue::kNoQpn : kQpB) << pi;
        EXPECT_EQ(CompletionQueue::opcode(dev.cqe(pi)), cqes[pi].op) << pi;
        EXPECT_EQ(be16toh(dev.cqe(pi)->wqe_counter), cqes[pi].counter) << pi;
    }
    EXPECT_EQ(cq.consumer_index(), 0u); // nothing consumed or published
    EXPECT_EQ(be32toh(dev.dbrec[0]), 0u);
    EXPECT_TRUE(cq.ready_at(7));
    EXPECT_FALSE(cq.ready_at(8));
    EXPECT_EQ(srq.outstanding(), 3u); // A's receives (WQEs 1, 2, 4) only, not its requester CQEs
    EXPECT_EQ(srq.free_wqes(), 4u);
    // The free list now runs 6, 7 and then A's WQEs in CQE order, 4 staying the sentinel.
    EXPECT_EQ(post_receives(srq, 5, 100), 4u);
    EXPECT_EQ(be64toh(q.data(1)->addr), 0x1000u + 102);
    EXPECT_EQ(be64toh(q.data(2)->addr), 0x1000u + 103);
    EXPECT_EQ(be64toh(q.data(4)->addr), 0x1000u + 4); // the sentinel is not written
    EXPECT_EQ(be64toh(q.data(0)->addr), 0x1000u + 0); // B's WQEs are still its own
    EXPECT_EQ(be64toh(q.data(3)->addr), 0x1000u + 3);
    EXPECT_EQ(srq.complete(0), 0u);
    EXPECT_EQ(srq.complete(3), 3u);
}

TEST(CleanQueuePair, SeparateCqsAreBothCleanedAndRequesterCqesGiveNothingBack)
{
    FakeSrq q(8, 32);
    SharedReceiveQueue srq;
    srq.init(q.dv, 8, q.cookies.data());
    ASSERT_EQ(post_receives(srq, 4, 0), 4u);
    FakeCq sdev(8, 64), rdev(8, 128);
    CompletionQueue scq, rcq;
    scq.init(sdev.dv);
    rcq.init(rdev.dv);
    // Requester counters that are also indices of posted SRQ WQEs: giving them back would show.
    produce_for(sdev, 0, MLX5_CQE_REQ, kQpA, 1);
    produce_for(sdev, 1, MLX5_CQE_REQ, kQpB, 2);
    produce_for(sdev, 2, MLX5_CQE_REQ_ERR, kQpA, 3);
    produce_for(rdev, 0, MLX5_CQE_RESP_SEND, kQpA, 2);
    produce_for(rdev, 1, MLX5_CQE_RESP_SEND, kQpB, 3);
    produce_for(rdev, 2, MLX5_CQE_RESP_ERR, kQpA, 0); // a flushed receive

    clean_queue_pair(kQpA, &scq, &rcq, &srq);

    EXPECT_EQ(qpn_at(sdev, 0), CompletionQueue::kNoQpn);
    EXPECT_EQ(qpn_at(sdev, 1), kQpB);
    EXPECT_EQ(qpn_at(sdev, 2), CompletionQueue::kNoQpn);
    EXPECT_EQ(qpn_at(rdev, 0), CompletionQueue::kNoQpn);
    EXPECT_EQ(qpn_at(rdev, 1), kQpB);
    EXPECT_EQ(qpn_at(rdev, 2), CompletionQueue::kNoQpn);
    EXPECT_EQ(srq.outstanding(), 2u); // WQEs 2 and 0; 1 and 3 stay posted
    EXPECT_EQ(srq.free_wqes(), 5u);
    EXPECT_EQ(scq.consumer_index(), 0u);
    EXPECT_EQ(rcq.consumer_index(), 0u);
}

TEST(CleanQueuePair, WithoutSrqReceivesAreDroppedAllTheSame)
{
    FakeCq sdev(4, 64), rdev(4, 64);
    CompletionQueue scq, rcq;
    scq.init(sdev.dv);
    rcq.init(rdev.dv);
    produce_for(sdev, 0, MLX5_CQE_REQ, kQpA, 0);
    produce_for(rdev, 0, MLX5_CQE_RESP_SEND, kQpA, 0);
    produce_for(rdev, 1, MLX5_CQE_RESP_SEND_IMM, kQpB, 0);
    produce_for(rdev, 2, MLX5_CQE_RESP_ERR, kQpA, 1);

    clean_queue_pair(kQpA, &scq, &rcq, nullptr);

    EXPECT_EQ(qpn_at(sdev, 0), CompletionQueue::kNoQpn);
    EXPECT_EQ(qpn_at(rdev, 0), CompletionQueue::kNoQpn);
    EXPECT_EQ(qpn_at(rdev, 1), kQpB);
    EXPECT_EQ(qpn_at(rdev, 2), CompletionQueue::kNoQpn);
    EXPECT_EQ(rcq.consumer_index(), 0u);
}

TEST(CleanQueuePair, ConsumedAndHardwareOwnedCqesAreLeftAlone)
{
    FakeSrq q(16, 32);
    SharedReceiveQueue srq;
    srq.init(q.dv, 16, q.cookies.data());
    ASSERT_EQ(post_receives(srq, 11, 0), 11u);
    FakeCq dev(8, 64);
    CompletionQueue cq;
    cq.init(dev.dv);
    for (std::uint32_t pi = 0; pi < 8; ++pi) // a full first lap, all read
        produce_for(dev, pi, MLX5_CQE_RESP_SEND, kQpA, static_cast<std::uint16_t>(pi));
    for (std::uint32_t i = 0; i < 8; ++i)
        cq.consume();
    for (std::uint32_t pi = 8; pi < 11; ++pi) // second lap: entries 0-2; 3-7 still hold the first lap's
        produce_for(dev, pi, MLX5_CQE_RESP_SEND, kQpA, static_cast<std::uint16_t>(pi));
    cq.consume(); // entry 0 read
    ASSERT_EQ(cq.consumer_index(), 9u);
    ASSERT_FALSE(cq.ready_at(2)); // entry 3 is the device's again

    clean_queue_pair(kQpA, &cq, &cq, &srq);

    EXPECT_EQ(qpn_at(dev, 0), kQpA); // consumed
    EXPECT_EQ(qpn_at(dev, 1), CompletionQueue::kNoQpn);
    EXPECT_EQ(qpn_at(dev, 2), CompletionQueue::kNoQpn);
    for (std::uint32_t i = 3; i < 8; ++i) // owned by hardware
        EXPECT_EQ(qpn_at(dev, i), kQpA) << i;
    EXPECT_EQ(srq.outstanding(), 9u); // WQEs 9 and 10 only
    EXPECT_EQ(cq.consumer_index(), 9u);
}

namespace {

// An address vector as rdma-core's mlx5 builds one for a RoCE v2 address
// handle: every field set to something distinct.
mlx5_wqe_av roce_av()
{
    mlx5_wqe_av av{};
    av.key.qkey.qkey = htobe32(0xdeadbeef); // a post replaces it
    av.dqp_dct = htobe32(0x00abcdef);       // and this
    av.stat_rate_sl = 0x35;
    av.fl_mlid = 0x02;
    av.rlid = htobe16(0xc123); // RoCE v2: the UDP source port
    const std::uint8_t mac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
    std::memcpy(av.rmac, mac, 6);
    av.tclass = 0x20;
    av.hop_limit = 64;
    av.grh_gid_fl = htobe32(1u << 30 | 3u << 20 | 0x12345);
    const std::uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 7, 9};
    std::memcpy(av.rgid, gid, 16);
    return av;
}

} // namespace

TEST(SendQueue, DatagramSendMatchesTheMlx5dvDatagramHelper)
{
    FakeQp q(16);
    SendQueue s = make_sq(q);
    mlx5_wqe_av av = roce_av();
    Sge sge[2] = {{0x1000, 100, 0x11}, {0x2000, 200, 0x22}};
    ASSERT_TRUE(s.post_datagram(MLX5_OPCODE_SEND, sge, 2, 300, av, 0x4567, 0x80010000, 0,
                                control_flags(DAT_COMPLETION_DEFAULT_FLAG), 77, 0x0e));

    mlx5_wqe_ctrl_seg want_ctrl{};
    mlx5dv_set_ctrl_seg(&want_ctrl, 0, MLX5_OPCODE_SEND, 0, 0x1234, MLX5_WQE_CTRL_CQ_UPDATE, 1 + 3 + 2, 0, 0);
    EXPECT_EQ(std::memcmp(ctrl_at(q, 0), &want_ctrl, sizeof want_ctrl), 0);
    mlx5_wqe_datagram_seg want{};
    mlx5dv_set_dgram_seg(&want, std::uint64_t{0x80010000} << 32, 0x4567, 1, av.stat_rate_sl, av.fl_mlid,
                         be16toh(av.rlid), av.rmac, av.tclass, av.hop_limit, be32toh(av.grh_gid_fl), av.rgid);
    EXPECT_EQ(std::memcmp(seg_at<mlx5_wqe_datagram_seg>(q, 0, 1), &want, sizeof want), 0);
    const auto* got = seg_at<mlx5_wqe_datagram_seg>(q, 0, 1);
    EXPECT_EQ(be32toh(got->av.dqp_dct), 0x4567u | MLX5_EXTENDED_UD_AV);
    EXPECT_EQ(be32toh(got->av.key.qkey.qkey), 0x80010000u);
    for (int i = 0; i < 2; ++i) {
        mlx5_wqe_data_seg d{};
        mlx5dv_set_data_seg(&d, sge[i].length, sge[i].lkey, sge[i].addr);
        EXPECT_EQ(std::memcmp(seg_at<mlx5_wqe_data_seg>(q, 0, 4 + i), &d, sizeof d), 0) << i;
    }
    // 16 + 48 + 32 bytes: two basic blocks; the slot says what the completion reports.
    EXPECT_EQ(s.producer_index(), 2u);
    EXPECT_EQ(s.slot(0).bbs, 2);
    EXPECT_EQ(s.slot(0).opcode, 0x0e);
    EXPECT_EQ(s.slot(0).cookie, 77u);
    EXPECT_EQ(s.slot(0).length, 300u);
}

TEST(SendQueue, DatagramInlineWithImmediateWrapsAtTheEndOfTheQueue)
{
    FakeQp q(4);
    SendQueue s = make_sq(q, 128);
    Sge tiny{0, 0, 0};
    for (int i = 0; i < 3; ++i) // move the producer to the last basic block
        ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, &tiny, 0, 0, nullptr, 0, 0, 0));
    s.retire_through(2);
    const mlx5_wqe_av av = roce_av();
    std::vector<std::uint8_t> payload(40);
    for (std::size_t i = 0; i < payload.size(); ++i)
        payload[i] = static_cast<std::uint8_t>(0xa0 + i);
    Sge sge{reinterpret_cast<std::uintptr_t>(payload.data()), 40, 5};
    ASSERT_TRUE(s.post_datagram(MLX5_OPCODE_SEND_IMM, &sge, 1, 40, av, 0x77, 0x11111111, htobe32(0xfeed),
                                MLX5_WQE_CTRL_CQ_UPDATE, 9, 0x0e));
    // WQE at BB 3 (bytes 192..255): the control and datagram segments fill
    // the block; the inline header and data continue at byte 0.
    EXPECT_EQ(be32toh(ctrl_at(q, 3)->opmod_idx_opcode), 3u << 8 | MLX5_OPCODE_SEND_IMM);
    EXPECT_EQ(be32toh(ctrl_at(q, 3)->qpn_ds) & 0x3f, 1u + 3u + 3u); // ceil((4 + 40) / 16) = 3
    EXPECT_EQ(be32toh(ctrl_at(q, 3)->imm), 0xfeedu);
    const auto* d = seg_at<mlx5_wqe_datagram_seg>(q, 3, 1);
    EXPECT_EQ(be32toh(d->av.dqp_dct), 0x77u | MLX5_EXTENDED_UD_AV);
    EXPECT_EQ(std::memcmp(d->av.rgid, av.rgid, 16), 0);
    EXPECT_EQ(be32toh(reinterpret_cast<const mlx5_wqe_inl_data_seg*>(&q.sq[0])->byte_count), 40u | MLX5_INLINE_SEG);
    EXPECT_EQ(std::memcmp(&q.sq[4], payload.data(), 40), 0);
    EXPECT_EQ(s.slot(3).bbs, 2);
}

TEST(SendQueue, FullQueueRefusesADatagramAndWritesNothing)
{
    FakeQp q(4);
    SendQueue s = make_sq(q);
    Sge sge{0x1000, 1, 1};
    for (int i = 0; i < 3; ++i)
        ASSERT_TRUE(s.post(MLX5_OPCODE_SEND, &sge, 1, 1, nullptr, 0, 0, static_cast<std::uint64_t>(i)));
    const std::vector<std::uint8_t> before = q.sq;
    const mlx5_wqe_av av = roce_av();
    Sge two[2] = {{0x1000, 1, 1}, {0x2000, 1, 1}};
    EXPECT_FALSE(s.post_datagram(MLX5_OPCODE_SEND, two, 2, 2, av, 1, 1, 0, 0, 99, 0x0e)); // two blocks, one free
    EXPECT_EQ(q.sq, before);
    EXPECT_FALSE(s.post_datagram(MLX5_OPCODE_SEND, two, 1, 1, av, 1, 1, 0, 0, 99, 0x0e)); // 16 + 48 + 16: two
    EXPECT_TRUE(s.post_datagram(MLX5_OPCODE_SEND, two, 0, 0, av, 1, 1, 0, 0, 100, 0x0e)); // empty: 64 bytes, one
    EXPECT_EQ(s.free_bbs(), 0u);
}
