// The software NIC's engine.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "device.hpp"

#include "cross_memory.hpp"
#include "fault_guard.hpp"
#include "mapped_range.hpp"

#include <endian.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

namespace fastdapl::softnic {

// A frame's header, decoded (fields in host order).
struct WireHeader {
    std::uint8_t type, flags, syndrome, version;
    std::uint32_t length;
    std::uint64_t addr;
    std::uint32_t rkey;
    std::uint32_t aux;
};

namespace {

using fastpath::Sge;

// Wire frames: a 24-byte header in network byte order, then `length` bytes.
enum FrameType : std::uint8_t {
    kSend = 1,       // flags: kImm, kSolicited; syndrome: carried ACKs (below)
    kWrite = 2,      // flags: kImm, kStriped (below); syndrome: carried ACKs
    kReadReq = 3,    // addr, rkey, length = bytes to read; no payload
    kReadResp = 4,   // payload
    kAck = 5,        // a SEND or WRITE was placed; flags: kPolling (below)
    kNak = 6,        // syndrome; the connection is broken after it
    kDisconnect = 7, // an orderly end: the sender closes after it; a stream
                     // that ends without one was broken (peer died, link cut)
    kAtomicReq = 8,  // addr, rkey; payload: swap_add, compare (16 bytes, big-endian);
                     // flags: kCompareSwap (else fetch and add). Answered by a
                     // kReadResp of the target's original 8 bytes.
    kWritePull = 9,  // fastdapl-shm, cross-memory attach: a WRITE to addr, rkey
                     // (flags: kImm, aux) whose payload is the initiator's
                     // source segments (encode_pull_segments): the target
                     // checks the key, copies from them with process_vm_readv,
                     // then ACKs (or NAKs)
    kLaneWanted = 10, // fastdapl-tcp: the sender would stripe its large WRITEs
                      // over a lane it has not got; no payload
};
// kStriped (fastdapl-tcp with a lane, a kWrite without kImm of kStripeMin
// and up): the first stripe_split(length) bytes of the payload follow the
// header, the rest are the next bytes on the lane.
// kInvalidate: aux is a key of the receiver's to invalidate. kPull (fastdapl-
// shm): on a kReadReq, the requester pulls the bytes itself; the kReadResp
// then carries no payload, only the checked source's address in the
// responder's memory (addr), and the requester sends nothing after its READ
// until it has pulled them (Qp::kHoldPulledRead).
// kPolling (on a kAck): the sender's consumer busy-polls (Device::stripes).
enum FrameFlags : std::uint8_t {
    kImm = 1,
    kSolicited = 2,
    kCompareSwap = 4,
    kInvalidate = 8,
    kPull = 16,
    kStriped = 32,
    kPolling = 64
};
// Carried ACKs (version 2): the syndrome byte of a kSend or kWrite counts
// ACKs the sender owed, which count before the frame, as that many kAck
// frames ahead of it would (a small message on fastdapl-shm carries them:
// one frame to parse, not 1 + N). Any other frame but kNak says 0 there.
constexpr std::uint8_t kMaxCarriedAcks = 8;
constexpr std::uint8_t kWireVersion = 2;
constexpr std::size_t kHeader = 24;
constexpr std::size_t kOutputHighWater = 8u << 20; // stop taking WQEs while this much is unsent
// A WRITE at least this large is read from the socket into its target (one
// copy, by the kernel) rather than through the receive buffer.
constexpr std::size_t kDirectPlacementMin = 64 * 1024;
// On fastdapl-tcp with a lane, an RDMA WRITE (no immediate data) at least
// this large is striped (kStriped): its first stripe_split() bytes follow
// the header on the main stream, the rest go over the lane.
constexpr std::size_t kStripeMin = 128 * 1024;
// Half, in whole pages, so the lane's part (which holds the last byte) is
// never empty.
constexpr std::size_t stripe_split(std::size_t length) { return (length / 2) & ~std::size_t{4095}; }
static_assert(kStripeMin >= kDirectPlacementMin && stripe_split(kStripeMin) > 0);
// How long a striped WRITE waits for the lane to be attached before the
// connection fails (the lane follows the connection's establishment; a
// peer that stripes before it has one is at fault).
constexpr std::chrono::seconds kLaneWait{10};
// A SEND or WRITE at least this large goes from the consumer's memory to the
// socket (sendmsg), not through the gather and output buffers.
constexpr std::size_t kDirectSendMin = 64 * 1024;
// With nothing in flight, a SEND or WRITE at least this large goes that way
// too: below it, copying a few bytes twice costs less than the iovecs and
// the fault guard per segment (inline data is always gathered).
constexpr std::size_t kIdleDirectMin = 512;
// On fastdapl-shm, a SEND or WRITE of one segment up to this size posted on
// an idle queue pair is copied straight into the peer's ring by the
// posting thread (Device::send_in_place); larger ones go as above.
constexpr std::size_t kInPlaceMax = 16 * 1024;
// On fastdapl-shm, a WRITE or READ at least this large is copied by the
// side whose memory receives it straight from the other process's memory
// (cross-memory attach), where the link's probe allowed it: one copy by
// one process instead of two through the ring, which need both running.
// Measured (README): even with the rings at 16 KiB; at 32 KiB 3x them with
// the cores busy, 1.2x on an idle machine.
constexpr std::size_t kCmaMin = 32 * 1024;
// The smallest request that takes one of the two ways above.
constexpr std::size_t kLargeMin = std::min(kCmaMin, kDirectSendMin);

// FASTDAPL_DEBUG set: why a connection broke, with the kernel's view of the
// stream (retransmissions, backoff), on stderr. Only where a connection
// ends, never on the data path.
void report_broken(int fd, std::uint32_t qpn, const char* where, int err)
{
    static const bool debug = std::getenv("FASTDAPL_DEBUG") != nullptr;
    if (!debug)
        return;
    tcp_info ti{};
    socklen_t len = sizeof ti;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        len = 0;
    std::fprintf(stderr,
                 "fastdapl softnic: QP 0x%x: connection broken (%s: %s); tcp: rto %u us, retransmits of the "
                 "last segment %u, in all %u, last ack received %u ms ago\n",
                 qpn, where, err ? std::strerror(err) : "end of stream without a disconnect frame",
                 len ? ti.tcpi_rto : 0, len ? ti.tcpi_retransmits : 0, len ? ti.tcpi_total_retrans : 0,
                 len ? ti.tcpi_last_ack_recv : 0);
}

WireHeader decode(const std::uint8_t* p)
{
    WireHeader h;
    h.type = p[0];
    h.flags = p[1];
    h.syndrome = p[2];
    h.version = p[3];
    std::uint32_t v32;
    std::uint64_t v64;
    std::memcpy(&v32, p + 4, 4);
    h.length = be32toh(v32);
    std::memcpy(&v64, p + 8, 8);
    h.addr = be64toh(v64);
    std::memcpy(&v32, p + 16, 4);
    h.rkey = be32toh(v32);
    std::memcpy(&v32, p + 20, 4);
    h.aux = be32toh(v32);
    return h;
}

void encode(std::uint8_t* h, std::uint8_t type, std::uint8_t flags, std::uint8_t syndrome, std::uint64_t addr,
            std::uint32_t rkey, std::uint32_t aux, std::uint32_t length)
{
    h[0] = type;
    h[1] = flags;
    h[2] = syndrome;
    h[3] = kWireVersion;
    const std::uint32_t len_be = htobe32(length), rkey_be = htobe32(rkey), aux_be = htobe32(aux);
    const std::uint64_t addr_be = htobe64(addr);
    std::memcpy(h + 4, &len_be, 4);
    std::memcpy(h + 8, &addr_be, 8);
    std::memcpy(h + 16, &rkey_be, 4);
    std::memcpy(h + 20, &aux_be, 4);
}

std::uint8_t* aligned_zeroed(std::size_t bytes)
{
    bytes = (bytes + 4095) & ~std::size_t{4095};
    void* p = std::aligned_alloc(4096, bytes);
    if (p)
        std::memset(p, 0, bytes);
    return static_cast<std::uint8_t*>(p);
}

std::uint32_t round_pow2(std::uint32_t v)
{
    std::uint32_t r = 1;
    while (r < v)
        r <<= 1;
    return r;
}

// A doorbell record (or consumer index) the consumer published. seq_cst,
// not only acquire, for run()'s sleep: after setting sleeping_ the engine's
// reads of the records are ordered after that store (a plain load on x86).
std::uint32_t load_be32(const volatile __be32* p)
{
    return be32toh(__atomic_load_n(p, __ATOMIC_SEQ_CST));
}

// Whether the complete frames in `in` include the peer's orderly goodbye.
bool has_disconnect_frame(const std::vector<std::uint8_t>& in)
{
    std::size_t pos = 0;
    while (in.size() - pos >= kHeader) {
        const WireHeader h = decode(in.data() + pos);
        if (h.version != kWireVersion || h.length > kMaxMessageSize)
            return false;
        if (h.type == kDisconnect)
            return true;
        const std::size_t payload = h.type == kReadReq ? 0 : h.length;
        if (in.size() - pos - kHeader < payload)
            return false; // a frame cut short by the end of the stream: nothing follows it
        pos += kHeader + payload;
    }
    return false;
}

// The orderly goodbye straight onto a socket no queue pair drives (best
// effort: a peer that is gone sees the stream end anyway).
void send_goodbye_now(int fd)
{
    std::uint8_t frame[kHeader] = {kDisconnect, 0, 0, kWireVersion};
    [[maybe_unused]] ssize_t n = ::send(fd, frame, sizeof frame, MSG_NOSIGNAL | MSG_DONTWAIT);
}

} // namespace

// --- CQ -----------------------------------------------------------------------

bool Cq::push(const Entry& e)
{
    const std::uint32_t consumed = load_be32(&dbrec_[0]) & 0xffffff;
    *attention_ = true;
    if (((pi_ - consumed) & 0xffffff) >= cnt_) {
        overflowed_.store(true, std::memory_order_relaxed);
        *overflow_seen_ = true;
        return false;
    }
    auto* cqe = reinterpret_cast<mlx5_cqe64*>(mem_.get() + static_cast<std::size_t>(pi_ & (cnt_ - 1)) * 64);
    // Every byte but op_own is written, field by field (no memset call):
    // what a device does not fill reads as zero.
    std::memset(cqe, 0, 32);
    cqe->srqn_uidx = 0;
    cqe->imm_inval_pkey = e.imm_be;
    std::memset(&cqe->app, 0, 4);
    cqe->byte_cnt = htobe32(e.byte_cnt);
    // The timestamp's bytes: a datagram's sender (datagram_source reads it
    // back), and in its last byte (55) an error CQE's syndrome.
    std::uint8_t stamp[8] = {};
    if (e.src_qpn) { // bit 28 of flags_rqpn: a GRH is in the buffer, as mlx5 says
        cqe->flags_rqpn = htobe32((e.src_qpn & 0xffffff) | 1u << 28);
        std::memcpy(stamp, &e.src_addr, 4);
        std::memcpy(stamp + 4, &e.src_port, 2);
    }
    stamp[7] = e.syndrome;
    std::memcpy(&cqe->timestamp, stamp, 8);
    cqe->sop_drop_qpn = htobe32(e.qpn & 0xffffff);
    cqe->wqe_counter = htobe16(e.wqe_counter);
    cqe->signature = 0;
    const std::uint8_t op_own = static_cast<std::uint8_t>(e.opcode << 4 | (e.solicited ? 2 : 0) | ((pi_ >> log_) & 1));
    __atomic_store_n(&cqe->op_own, op_own, __ATOMIC_RELEASE); // the CQE's body before its owner byte
    ++pi_;
    pushed_ = true;
    return true;
}

// --- device ---------------------------------------------------------------------

Device::Device()
{
    install_fault_guard();
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    thread_ = std::thread([this] { run(); });
}

Device::~Device()
{
    stop_.store(true);
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
    thread_.join();
    for (Qp* qp : qps_) {
        if (qp->fd_ >= 0)
            ::close(qp->fd_);
        if (qp->lane_fd_ >= 0)
            ::close(qp->lane_fd_);
        delete qp;
    }
    for (Cq* cq : cqs_)
        delete cq;
    for (Srq* srq : srqs_)
        delete srq;
    ::close(wake_fd_);
    ::close(epoll_fd_);
}

Cq* Device::create_cq(std::uint32_t min_entries)
{
    auto cq = std::make_unique<Cq>();
    cq->cnt_ = round_pow2(std::max<std::uint32_t>(min_entries, 2));
    cq->log_ = fastpath::log2_of(cq->cnt_);
    cq->mem_.reset(aligned_zeroed(static_cast<std::size_t>(cq->cnt_) * 64));
    if (!cq->mem_)
        return nullptr;
    for (std::uint32_t i = 0; i < cq->cnt_; ++i) // invalid and owned by hardware, like a fresh mlx5 CQ
        cq->mem_.get()[i * 64 + 63] = MLX5_CQE_INVALID << 4 | 1;
    cq->dv_.buf = cq->mem_.get();
    cq->dv_.dbrec = cq->dbrec_;
    cq->dv_.cqe_cnt = cq->cnt_;
    cq->dv_.cqe_size = 64;
    cq->attention_ = &cq_attention_;
    cq->overflow_seen_ = &overflow_seen_;
    std::lock_guard lock(mutex_);
    cqs_.push_back(cq.get());
    return cq.release();
}

bool Device::resize_cq(Cq* cq, std::uint32_t min_entries)
{
    std::lock_guard lock(mutex_); // no CQE is written meanwhile
    const std::uint32_t cnt = round_pow2(std::max<std::uint32_t>(min_entries, 2));
    const std::uint32_t consumed = load_be32(&cq->dbrec_[0]) & 0xffffff;
    const std::uint32_t pending = (cq->pi_ - consumed) & 0xffffff;
    if (pending > cnt)
        return false;
    std::unique_ptr<std::uint8_t, void (*)(void*)> mem(aligned_zeroed(static_cast<std::size_t>(cnt) * 64), &std::free);
    if (!mem)
        return false;
    for (std::uint32_t i = 0; i < cnt; ++i)
        mem.get()[i * 64 + 63] = MLX5_CQE_INVALID << 4 | 1;
    for (std::uint32_t j = 0; j < pending; ++j) {
        std::uint8_t* to = mem.get() + static_cast<std::size_t>(j) * 64;
        std::memcpy(to, cq->mem_.get() + static_cast<std::size_t>((consumed + j) & (cq->cnt_ - 1)) * 64, 64);
        to[63] = static_cast<std::uint8_t>(to[63] & ~1u); // owner bit of index j < cnt: software's on pass 0
    }
    cq->mem_ = std::move(mem);
    cq->cnt_ = cnt;
    cq->log_ = fastpath::log2_of(cnt);
    cq->pi_ = pending;
    cq->dbrec_[0] = 0;
    cq->dv_.buf = cq->mem_.get();
    cq->dv_.cqe_cnt = cnt;
    return true;
}

void Device::destroy_cq(Cq* cq)
{
    std::lock_guard lock(mutex_);
    cqs_.erase(std::remove(cqs_.begin(), cqs_.end(), cq), cqs_.end());
    delete cq;
}

Qp* Device::create_qp(std::uint32_t pd, Cq* send_cq, Cq* recv_cq, std::uint32_t sq_wqes, std::uint32_t rq_wqes,
                      std::uint32_t max_sge, std::uint32_t max_inline, Srq* srq)
{
    if (max_sge == 0 || max_sge > kMaxSge || !send_cq || !recv_cq)
        return nullptr;
    auto qp = std::make_unique<Qp>();
    qp->pd_ = pd;
    qp->srq_ = srq;
    if (srq)
        rq_wqes = 1; // unused: receives come from the SRQ
    qp->send_cq_ = send_cq;
    qp->recv_cq_ = recv_cq;
    // Room for every WQE at its largest: ctrl + raddr + max_sge data segments.
    const std::uint32_t max_wqe_bbs = (16 * (2 + std::max(max_sge, (max_inline + 4 + 15) / 16)) + 63) / 64;
    qp->sq_cnt_ = round_pow2(std::max<std::uint32_t>(sq_wqes, 1) * max_wqe_bbs);
    qp->rq_cnt_ = round_pow2(std::max<std::uint32_t>(rq_wqes, 1));
    qp->rq_stride_ = round_pow2(16 * max_sge);
    qp->max_inline_ = max_inline;
    qp->sq_.reset(aligned_zeroed(static_cast<std::size_t>(qp->sq_cnt_) * 64));
    qp->rq_.reset(aligned_zeroed(static_cast<std::size_t>(qp->rq_cnt_) * qp->rq_stride_));
    if (!qp->sq_ || !qp->rq_)
        return nullptr;
    qp->dv_.dbrec = qp->dbrec_;
    qp->dv_.sq.buf = qp->sq_.get();
    qp->dv_.sq.wqe_cnt = qp->sq_cnt_;
    qp->dv_.sq.stride = 64;
    qp->dv_.rq.buf = qp->rq_.get();
    qp->dv_.rq.wqe_cnt = qp->rq_cnt_;
    qp->dv_.rq.stride = qp->rq_stride_;
    qp->dv_.bf.reg = nullptr;
    qp->dv_.bf.size = 0;
    std::lock_guard lock(mutex_);
    std::uint32_t i = 0;
    while (i < kMaxQps && qpn_used_[(qpn_cursor_ + i) % kMaxQps])
        ++i;
    if (i == kMaxQps)
        return nullptr; // every number is live
    const std::uint32_t index = (qpn_cursor_ + i) % kMaxQps;
    qpn_used_[index] = true;
    qpn_cursor_ = (index + 1) % kMaxQps;
    qp->qpn_ = kFirstQpn + index;
    qps_.push_back(qp.get());
    return qp.release();
}

Srq* Device::create_srq(std::uint32_t pd, std::uint32_t min_wqes, std::uint32_t max_sge)
{
    if (max_sge == 0 || max_sge > kMaxSge || min_wqes == 0 || min_wqes >= 0x8000)
        return nullptr; // the doorbell record counts posts in 16 bits
    auto srq = std::make_unique<Srq>();
    srq->pd_ = pd;
    srq->cnt_ = round_pow2(min_wqes + 1); // one WQE always stays on the free list
    srq->stride_ = round_pow2(static_cast<std::uint32_t>(sizeof(mlx5_wqe_srq_next_seg) + 16 * max_sge));
    srq->max_sge_ = (srq->stride_ - sizeof(mlx5_wqe_srq_next_seg)) / 16;
    srq->mem_.reset(aligned_zeroed(static_cast<std::size_t>(srq->cnt_) * srq->stride_));
    if (!srq->mem_)
        return nullptr;
    srq->dv_.buf = srq->mem_.get();
    srq->dv_.dbrec = srq->dbrec_;
    srq->dv_.stride = srq->stride_;
    srq->dv_.head = 0; // as a fresh mlx5 SRQ: the list runs 0, 1, ..., cnt - 1
    srq->dv_.tail = srq->cnt_ - 1;
    std::lock_guard lock(mutex_);
    srqs_.push_back(srq.get());
    return srq.release();
}

bool Device::grow_srq(Srq* srq, std::uint32_t min_wqes)
{
    const std::uint32_t cnt = round_pow2(min_wqes + 1);
    if (min_wqes >= 0x8000)
        return false;
    std::lock_guard lock(mutex_); // no WQE is taken meanwhile
    if (cnt <= srq->cnt_)
        return true;
    std::unique_ptr<std::uint8_t, void (*)(void*)> mem(aligned_zeroed(static_cast<std::size_t>(cnt) * srq->stride_),
                                                        &std::free);
    if (!mem)
        return false;
    std::memcpy(mem.get(), srq->mem_.get(), static_cast<std::size_t>(srq->cnt_) * srq->stride_);
    srq->mem_ = std::move(mem);
    srq->cnt_ = cnt;
    srq->dv_.buf = srq->mem_.get();
    return true;
}

void Device::destroy_srq(Srq* srq)
{
    std::lock_guard lock(mutex_);
    srqs_.erase(std::remove(srqs_.begin(), srqs_.end(), srq), srqs_.end());
    delete srq;
}

bool Device::arm_srq_limit(Srq* srq, std::uint32_t limit)
{
    std::lock_guard lock(mutex_);
    const auto posted = static_cast<std::uint16_t>(load_be32(srq->dbrec_));
    const auto available = static_cast<std::uint16_t>(posted - static_cast<std::uint16_t>(srq->taken_.load()));
    if (limit && available < limit) {
        srq->limit_ = 0;
        return true;
    }
    srq->limit_ = limit;
    return false;
}

bool Device::set_watermarks(Qp* qp, std::int32_t soft, std::int32_t hard)
{
    std::lock_guard lock(mutex_);
    const std::uint32_t generated = qp->recv_generated_.load();
    // Buffers whose completion is not generated yet: taken from the SRQ, or
    // posted to the queue pair's own receive queue.
    const std::uint32_t allocated =
        qp->srq_ ? qp->recv_taken_.load() - generated
                 : static_cast<std::uint16_t>(load_be32(&qp->dbrec_[MLX5_RCV_DBR]) - static_cast<std::uint16_t>(generated));
    const std::uint32_t held = qp->recv_taken_.load() - qp->recv_reaped_.load();
    const bool soft_now = soft != kNoWatermark && allocated > static_cast<std::uint32_t>(soft);
    qp->soft_mark_.store(soft_now ? kNoWatermark : soft);
    qp->hard_mark_.store(hard);
    if (hard != kNoWatermark && held > static_cast<std::uint32_t>(hard) && qp->state() == QpState::ready)
        fail(*qp, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, false);
    return soft_now;
}

// A receive buffer for a message that arrives: the next WQE of the queue
// pair's receive queue, or of its SRQ. `failed`: the queue pair broke (a
// hard watermark, or an SRQ in error).
Device::Take Device::take_receive(Qp& qp, std::uint32_t& index)
{
    const std::int32_t hard = qp.hard_mark_.load(std::memory_order_relaxed);
    if (hard != kNoWatermark && qp.recv_taken_.load(std::memory_order_relaxed) - qp.recv_reaped_.load() >=
                                    static_cast<std::uint32_t>(hard)) {
        fail(qp, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, false); // more than the consumer allowed it
        return Take::failed;
    }
    if (Srq* srq = qp.srq_) {
        if (srq->failed()) {
            fail(qp, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, false);
            return Take::failed;
        }
        const auto posted = static_cast<std::uint16_t>(load_be32(srq->dbrec_));
        const auto available =
            static_cast<std::uint16_t>(posted - static_cast<std::uint16_t>(srq->taken_.load(std::memory_order_relaxed)));
        if (available >= srq->cnt_) { // more posted than the ring holds: the doorbell record is corrupt
            srq->failed_.store(true, std::memory_order_release);
            if (srq->on_error_)
                srq->on_error_(srq->callback_context_);
            fail(qp, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, false);
            return Take::failed;
        }
        if (available == 0)
            return Take::none;
        index = srq->head_;
        const auto* next = reinterpret_cast<const mlx5_wqe_srq_next_seg*>(
            srq->mem_.get() + static_cast<std::size_t>(index) * srq->stride_);
        srq->head_ = be16toh(next->next_wqe_index) & (srq->cnt_ - 1);
        count_one(srq->taken_);
        if (srq->limit_ && available - 1u < srq->limit_) { // one event per arming
            srq->limit_ = 0;
            if (srq->on_limit_)
                srq->on_limit_(srq->callback_context_);
        }
    } else {
        const auto posted = static_cast<std::uint16_t>(load_be32(&qp.dbrec_[MLX5_RCV_DBR]));
        if (static_cast<std::uint16_t>(qp.rq_next_) == posted)
            return Take::none;
        index = qp.rq_next_++;
    }
    count_one(qp.recv_taken_);
    const std::uint32_t taken = qp.recv_taken_.load(std::memory_order_relaxed);
    std::int32_t soft = qp.soft_mark_.load(std::memory_order_relaxed);
    if (qp.srq_ && soft != kNoWatermark && taken - qp.recv_generated_.load() > static_cast<std::uint32_t>(soft) &&
        qp.soft_mark_.compare_exchange_strong(soft, kNoWatermark) && qp.on_soft_)
        qp.on_soft_(qp.on_soft_context_);
    return Take::taken;
}

void Device::destroy_qp(Qp* qp)
{
    std::lock_guard lock(mutex_);
    close_wire(*qp, false);
    qp->shm_.reset();
    qps_.erase(std::remove(qps_.begin(), qps_.end(), qp), qps_.end());
    qpn_used_[qp->qpn_ - kFirstQpn] = false;
    delete qp;
}

bool Device::connect(Qp* qp, int fd, bool shm)
{
    std::lock_guard lock(mutex_);
    if (fd < 0)
        return false;
    if (qp->state() != QpState::reset) {
        // Disconnected before its wire came: the goodbye disconnect() could
        // not send goes out now (one frame fits a fresh socket's buffer),
        // so the peer ends orderly too. The caller closes the socket.
        if (qp->goodbye_owed_) {
            qp->goodbye_owed_ = false;
            if (shm)
                ShmLink::send_goodbye(fd);
            else
                send_goodbye_now(fd);
        }
        return false;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    if (shm) {
        qp->shm_.reset(ShmLink::create(fd));
        if (!qp->shm_) {
            // No memory for the ring, or the peer closed already: after a
            // goodbye (a disconnect right after ESTABLISHED, before our
            // ring could go) the end is orderly; otherwise it is broken.
            const bool orderly = ShmLink::goodbye_on(fd);
            qp->state_.store(QpState::ready, std::memory_order_release);
            fail(*qp, orderly ? MLX5_CQE_SYNDROME_WR_FLUSH_ERR : MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, false);
            return false;
        }
    }
    qp->fd_ = fd;
    qp->epoll_mask_ = EPOLLIN;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = qp;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
        // The consumer may have seen the connection established already:
        // it ends, broken, so it hears of it (the caller closes the socket).
        qp->fd_ = -1;
        qp->shm_.reset();
        qp->state_.store(QpState::ready, std::memory_order_release);
        fail(*qp, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, false);
        return false;
    }
    // A graceful disconnect asked for before the wire came (drain_ set)
    // starts on the engine's next round, as if asked now.
    qp->state_.store(QpState::ready, std::memory_order_release);
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
    return true;
}

bool Device::attach_lane(Qp* qp, int fd)
{
    std::lock_guard lock(mutex_);
    if (fd < 0 || qp->state() != QpState::ready || qp->fd_ < 0 || qp->shm_ || qp->datagram_ || qp->lane_fd_ >= 0)
        return false;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    // Edge-triggered: the lane is read only while a striped WRITE's part is
    // due, and written only while one is being sent; bytes waiting for
    // their frame's header on the main stream must not keep waking the
    // engine (the main stream's arrival does).
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
    ev.data.ptr = qp;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
        return false;
    qp->lane_fd_ = fd;
    const std::uint64_t one = 1; // a striped WRITE may be waiting for it
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
    return true;
}

void Device::set_lane_request(void (*request)(void*, std::uint64_t), void* context)
{
    std::lock_guard lock(mutex_);
    lane_request_ = request;
    lane_request_context_ = context;
}

void Device::want_lanes(Qp* qp, std::uint64_t key)
{
    std::lock_guard lock(mutex_);
    if (qp->shm_ || qp->datagram_ || key == 0)
        return;
    qp->lane_key_ = key;
    if (qp->lane_peer_asked_) // the peer's kLaneWanted came before this call
        ask_for_lane(*qp, false);
}

void Device::ask_for_lane(Qp& qp, bool tell_peer)
{
    if (qp.lane_key_ == 0) { // not (yet) told this queue pair may take one
        qp.lane_peer_asked_ |= !tell_peer;
        return;
    }
    if (qp.lane_asked_ || qp.lane_fd_ >= 0)
        return;
    qp.lane_asked_ = true;
    if (tell_peer)
        send_frame(qp, kLaneWanted, 0, 0, 0, 0, 0, nullptr, 0);
    if (lane_request_)
        lane_request_(lane_request_context_, qp.lane_key_);
}

bool Device::open_datagrams(Qp* qp, const sockaddr_in& local, sockaddr_in& bound)
{
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    sockaddr_in at = local;
    at.sin_port = 0;
    // Room for bursts while the engine is busy elsewhere (the kernel caps it
    // at net.core.rmem_max/wmem_max): what overflows is lost, as UD allows.
    const int room = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &room, sizeof room);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &room, sizeof room);
    socklen_t len = sizeof bound;
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&at), sizeof at) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
        ::close(fd);
        return false;
    }
    std::lock_guard lock(mutex_);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = qp;
    if (qp->state() != QpState::reset || epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
        ::close(fd);
        return false;
    }
    qp->fd_ = fd;
    qp->epoll_mask_ = EPOLLIN;
    qp->datagram_ = true;
    qp->datagram_local_ = bound;
    qp->state_.store(QpState::ready, std::memory_order_release);
    return true;
}

void Device::add_datagram_peer(Qp* qp, const sockaddr_in& peer, std::uint32_t qpn)
{
    std::lock_guard lock(mutex_);
    for (const Qp::DatagramPeer& p : qp->datagram_peers_)
        if (peer.sin_port != 0 && p.addr == peer.sin_addr.s_addr && p.port == peer.sin_port && p.qpn == qpn)
            return; // known already
    qp->datagram_peers_.push_back({peer.sin_addr.s_addr, peer.sin_port, peer.sin_port ? qpn : 0});
}

bool Device::set_datagram_qkey(Qp* qp, std::uint32_t qkey)
{
    std::lock_guard lock(mutex_);
    if (!qp->datagram_ || qkey == 0)
        return false;
    qp->datagram_qkey_ = qkey;
    return true;
}

void Device::remove_datagram_peer(Qp* qp, const sockaddr_in& peer, std::uint32_t qpn)
{
    std::lock_guard lock(mutex_);
    auto& peers = qp->datagram_peers_;
    const std::uint32_t q = peer.sin_port ? qpn : 0;
    for (auto p = peers.begin(); p != peers.end(); ++p) {
        if (p->addr == peer.sin_addr.s_addr && p->port == peer.sin_port && p->qpn == q) {
            peers.erase(p);
            return;
        }
    }
}

void Device::disconnect(Qp* qp)
{
    std::lock_guard lock(mutex_);
    if (qp->state() == QpState::ready && qp->datagram_) {
        // What was posted goes out first, as a device would have sent it by
        // now: while consumers poll, posts wait for a polling round, and a
        // consumer that then only takes events already queued (then frees
        // the EP) would otherwise lose its last datagrams.
        execute_send_queue(*qp);
        if (qp->state() == QpState::ready)
            fail(*qp, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, false); // no peer to say goodbye to
    } else if (qp->state() == QpState::ready) {
        // Say goodbye, so the peer reports DISCONNECTED rather than BROKEN.
        // Bytes already queued go first; give them a moment, not forever.
        send_frame(*qp, kDisconnect, 0, 0, 0, 0, 0, nullptr, 0);
        // On shared memory the frame needs the peer's ring, which may not
        // have come yet (a disconnect right after ESTABLISHED): the goodbye
        // goes on the socket as well, read by the peer before the end.
        if (qp->shm_)
            ShmLink::send_goodbye(qp->fd_);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
        while (qp->state() == QpState::ready && qp->output_pending() &&
               std::chrono::steady_clock::now() < deadline) {
            if (!flush_output(*qp)) {
                if (qp->shm_) { // room comes as the peer reads; the socket says nothing of it
                    ::usleep(1000);
                } else { // room on the stream, or on the lane if a striped WRITE's part waits for it
                    const bool lane = qp->direct_send_.lane_first < qp->direct_send_.lane_count;
                    pollfd p{lane ? qp->lane_fd_ : qp->fd_, POLLOUT, 0};
                    ::poll(&p, 1, 10);
                }
            }
        }
        if (qp->state() == QpState::ready)
            fail(*qp, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, false);
    } else {
        // Not connected yet (the consumer may act on ESTABLISHED before
        // connect() attaches the socket): connect() says goodbye instead.
        if (qp->state() == QpState::reset)
            qp->goodbye_owed_ = true;
        flush_all(*qp);
    }
    qp->state_.store(QpState::error, std::memory_order_release);
    Cq* const cqs[] = {qp->send_cq_, qp->recv_cq_};
    notify_cqs(cqs, 2);
}

void Device::disconnect_gracefully(Qp* qp)
{
    {
        std::lock_guard lock(mutex_);
        if (qp->state() == QpState::error || qp->drain_ != Qp::Drain::none)
            return; // ended already (its end was reported), or draining
        qp->drain_ = Qp::Drain::requests;
        // Not connected yet (the consumer may act on ESTABLISHED before
        // connect() attaches the socket): the drain starts once it is.
        if (qp->state() == QpState::reset)
            return;
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

// A graceful disconnect: once every request has completed, the goodbye
// frame goes out; once it is on the wire, the queue pair closes orderly.
bool Device::advance_drain(Qp& qp)
{
    if (qp.drain_ == Qp::Drain::requests) {
        const std::uint16_t published = static_cast<std::uint16_t>(load_be32(&qp.dbrec_[MLX5_SND_DBR]));
        if (static_cast<std::uint16_t>(qp.sq_next_) != published || !qp.inflight_.empty() || qp.send_hold_)
            return false;
        send_frame(qp, kDisconnect, 0, 0, 0, 0, 0, nullptr, 0);
        qp.drain_ = Qp::Drain::goodbye;
        flush_output(qp);
    }
    if (qp.drain_ == Qp::Drain::goodbye && qp.state() == QpState::ready && !qp.output_pending()) {
        fail(qp, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, false);
        return true;
    }
    return false;
}

bool Device::kick(Qp* qp)
{
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock())
        return false;
    // Only when the wire is idle for this QP (a ping-pong): a stream of
    // posts is better left to the engine, which batches them while the
    // consumer goes on posting.
    if (qp->state() != QpState::ready || !qp->inflight_.empty() ||
        (qp->output_pending() && !qp->out_acks_only_))
        return false;
    // A small SEND or WRITE on fastdapl-shm is built where it goes, in the
    // peer's ring; what is published after it takes the general path.
    if (qp->shm_ && send_in_place(*qp) &&
        static_cast<std::uint16_t>(qp->sq_next_) == static_cast<std::uint16_t>(load_be32(&qp->dbrec_[MLX5_SND_DBR])))
        return true;
    execute_send_queue(*qp);
    flush_output(*qp);
    if (qp->state() == QpState::ready)
        update_epoll(*qp);
    Cq* const cqs[] = {qp->send_cq_, qp->recv_cq_}; // a local error completes at once
    notify_cqs(cqs, 2);
    return true;
}

bool Device::progress_as_consumer()
{
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock())
        return false;
    switch (consumer_look_locked()) {
    case Look::quiet:
        return false;
    case Look::rings:
        ring_round_locked();
        return true;
    case Look::round:
        break;
    }
    consumer_round_ = true;
    consumer_in_round_.store(true, std::memory_order_relaxed);
    progress_locked(true);
    consumer_in_round_.store(false, std::memory_order_relaxed);
    consumer_round_ = false;
    socket_turn_ = false;
    return true;
}

// Whether a connected shared-memory queue pair is in the state a ring round
// handles (ring_round_locked): frames come from its ring and nothing else is
// under way. Anything else (a flush, a post to execute, output other than
// acknowledgements, a frame half read or waiting for a receive buffer, a
// drain, an EPOLLOUT to take back) takes a whole round.
bool Device::ring_only(const Qp& qp)
{
    return qp.shm_ && qp.shm_->ready() && qp.fd_ >= 0 &&
           static_cast<std::uint16_t>(qp.sq_next_) == static_cast<std::uint16_t>(load_be32(&qp.dbrec_[MLX5_SND_DBR])) &&
           !qp.direct_send_.busy() && (qp.out_acks_only_ || qp.out_sent_ == qp.out_.size()) &&
           qp.in_.empty() && qp.direct_.remaining == 0 && !qp.waiting_for_recv_ && qp.drain_ == Qp::Drain::none &&
           qp.epoll_mask_ == EPOLLIN;
}

Device::Look Device::consumer_look_locked()
{
    // Every kShmSocketLook-th look, a whole round asks the sockets whether
    // a peer is gone; CQEs not announced or an overflow not handled take a
    // round too.
    if (++consumer_looks_ % kShmSocketLook == 0) {
        socket_turn_ = true;
        return Look::round;
    }
    if (cq_attention_ || receiver_waiting_.load(std::memory_order_relaxed))
        return Look::round;
    bool arrived = false, acks_unsent = false;
    for (const Qp* qp : qps_) {
        const QpState state = qp->state();
        if (state == QpState::reset)
            continue; // a round passes it by
        if (state != QpState::ready || !ring_only(*qp))
            return Look::round;
        arrived |= !qp->shm_->rx_empty(); // the look that ends most busy polls
        acks_unsent |= qp->out_sent_ != qp->out_.size();
    }
    return arrived || acks_unsent ? Look::rings : Look::quiet;
}

void Device::ring_round_locked()
{
    // What progress_locked and receive do for these queue pairs, without
    // the steps that consumer_look_locked found nothing for: ACKs held
    // since the last look go out, the frames in the ring are handled where
    // they are, and the ACKs they owe are held for the consumer's next post
    // (only while the engine thread yields, so that it looks again within
    // its quiet time if the consumer goes away).
    const bool hold_acks = engine_yields_.load(std::memory_order_relaxed);
    for (Qp* qp : qps_) {
        if (qp->state() != QpState::ready)
            continue;
        if (qp->out_sent_ != qp->out_.size())
            flush_output(*qp);
        for (ShmLink::Arrived got; qp->state() == QpState::ready && qp->in_.empty() &&
                                   qp->direct_.remaining == 0 && (got = qp->shm_->peek()).size > 0;) {
            const std::size_t used = parse_frames(*qp, got.bytes, got.size);
            if (qp->state() != QpState::ready)
                break; // failed: nothing is kept
            if (used < got.size && qp->direct_.remaining == 0)
                qp->in_.assign(got.bytes + used, got.bytes + got.size); // a whole round takes it from here
            qp->shm_->consume(got.size);
            if (qp->waiting_for_recv_)
                receiver_waiting_.store(true, std::memory_order_relaxed);
        }
        if (qp->state() != QpState::ready)
            continue;
        if (hold_acks && qp->out_acks_only_ && !qp->direct_send_.busy())
            qp->acks_held_ = qp->output_pending();
        else
            flush_output(*qp);
    }
    if (overflow_seen_)
        handle_overflows();
    notify_pushed();
}

void Device::notify_pushed()
{
    cq_attention_ = false; // what it was raised for is done (rounds handle overflows first)
    notify_cqs(cqs_.data(), cqs_.size()); // waiters are told once per round, not once per CQE
}

void Device::notify_cqs(Cq* const* cqs, std::size_t n)
{
    [[maybe_unused]] bool fenced = false; // unused under ThreadSanitizer
    for (std::size_t i = 0; i < n; ++i) {
        Cq* cq = cqs[i];
        if (!cq->pushed_)
            continue;
        cq->pushed_ = false;
        auto fn = cq->notify_.load(std::memory_order_acquire);
        if (!fn)
            continue;
        // A busy poller's CQ (nobody waits, no CNO) is not told: the
        // notification takes the EVD's lock, twice a round trip. The
        // fence orders the CQEs written before the look at the word.
        if (cq->interest_) {
#if defined(__SANITIZE_THREAD__)
            // ThreadSanitizer builds have no fences: a seq_cst read-modify-
            // write of the word (the waiter's is one too) carries the order.
            const bool wanted = cq->interest_->fetch_add(0, std::memory_order_seq_cst) != 0;
#else
            if (!fenced) {
                std::atomic_thread_fence(std::memory_order_seq_cst);
                fenced = true;
            }
            const bool wanted = cq->interest_->load(std::memory_order_relaxed) != 0;
#endif
            if (!wanted && !cq->overflowed())
                continue;
        }
        fn(cq->notify_context_);
    }
}

void Device::run()
{
    epoll_event events[32];
    std::uint32_t polls_seen = consumer_polls_.load(std::memory_order_relaxed);
    std::uint32_t left_seen = consumer_left_.load(std::memory_order_seq_cst);
    while (!stop_.load()) {
        // Consumers polled since the last round, and none went to sleep:
        // they move the sockets themselves.
        const std::uint32_t polls = consumer_polls_.load(std::memory_order_relaxed);
        const std::uint32_t left = consumer_left_.load(std::memory_order_seq_cst);
        // A consumer in a round (which can read megabytes) is polling too.
        const bool yield = (polls != polls_seen || consumer_in_round_.load(std::memory_order_relaxed)) &&
                           left == left_seen;
        polls_seen = polls;
        left_seen = left;
        if (yield) {
            // Posts do not ring (sleeping_ stays 0): the polling consumer
            // puts them on the wire in its next round. Wait for a consumer
            // going to sleep, or look again after the quiet time.
            engine_yields_.store(true, std::memory_order_seq_cst);
            bool woken = false;
            if (consumer_left_.load(std::memory_order_seq_cst) == left_seen && !stop_.load()) {
                pollfd wake{wake_fd_, POLLIN, 0};
                woken = ::poll(&wake, 1, kConsumerQuietMs) > 0;
            }
            engine_yields_.store(false, std::memory_order_seq_cst);
            std::uint64_t drained;
            [[maybe_unused]] ssize_t n = ::read(wake_fd_, &drained, sizeof drained);
            if (woken) { // a waiter went to sleep (unless a consumer's round has the device)
                std::unique_lock lock(mutex_, std::try_to_lock);
                if (lock.owns_lock())
                    progress_locked();
            }
            continue;
        }
        bool busy;
        {
            std::lock_guard lock(mutex_);
            busy = progress_locked();
        }
        if (busy)
            continue;
        // Tell doorbells we may sleep, then look once more: a doorbell rung
        // before the flag was visible is seen by this second round. The
        // store and the records' loads are seq_cst; the doorbell orders its
        // record before its load of the flag (SendQueue::wake_software_engine):
        // no fence is needed here.
        sleeping_.store(1, std::memory_order_seq_cst);
        bool rings = false;
        {
            std::lock_guard lock(mutex_);
            // Shared-memory peers: their next write wakes us on the socket
            // (the flag first, then this round's look at the rings).
            for (Qp* qp : qps_) {
                if (qp->shm_ && qp->state() == QpState::ready) {
                    rings = true;
                    busy |= !qp->shm_->prepare_to_sleep();
                }
            }
            busy |= progress_locked();
        }
        // A message waiting for a receive buffer is looked at again soon:
        // receive_posted() reads receiver_waiting_ without ordering against
        // our look at the receive queue (a fence on every post would be the
        // price), so a post just then would otherwise wait for the timeout.
        bool slept_out = false; // the long sleep ended by its timeout, not by a wake-up
        if (!busy && !stop_.load()) {
            const bool short_sleep = receiver_waiting_.load(std::memory_order_relaxed);
            slept_out = epoll_wait(epoll_fd_, events, 32, short_sleep ? 1 : kEngineSleepMs) == 0 && !short_sleep;
        }
        sleeping_.store(0);
        if (rings) {
            std::lock_guard lock(mutex_);
            for (Qp* qp : qps_)
                if (qp->shm_)
                    qp->shm_->woke();
            // Frames that waited for the timeout: the writer missed this
            // side's sleep flag (a wake-up handshake that failed), or wrote
            // just as the timeout ran out.
            if (slept_out && std::any_of(qps_.begin(), qps_.end(), [](const Qp* qp) {
                    return qp->shm_ && qp->state() == QpState::ready && !qp->shm_->rx_empty();
                }))
                late_wakeups_.fetch_add(1, std::memory_order_relaxed);
        }
        std::uint64_t drained;
        [[maybe_unused]] ssize_t n = ::read(wake_fd_, &drained, sizeof drained);
    }
}

bool Device::progress_locked(bool consumer)
{
    struct NotifyAfter { // tell waiters once per round, not once per CQE
        Device& device;
        ~NotifyAfter() { device.notify_pushed(); }
    } notify_after{*this};
    bool busy = false;
    bool receiver_waiting = false;
    for (Qp* qp : qps_) {
        if (qp->state() == QpState::error) {
            flush_all(*qp); // WQEs posted after the error complete as flushed
            continue;
        }
        if (qp->state() != QpState::ready)
            continue;
        busy |= execute_send_queue(*qp);
        busy |= flush_output(*qp);
        busy |= qp->datagram_ ? receive_datagrams(*qp) : receive(*qp);
        receiver_waiting |= qp->waiting_for_recv_;
        // ACKs of what just arrived wait for the consumer's reply or its
        // next round (those before them went out in this round's first
        // flush); only while the engine thread yields, so that it looks
        // again within its quiet time if the consumer goes away.
        if (consumer && qp->out_acks_only_ && !qp->direct_send_.busy() &&
            qp->output_pending() && engine_yields_.load(std::memory_order_relaxed))
            qp->acks_held_ = true;
        else
            busy |= flush_output(*qp);
        if (qp->drain_ != Qp::Drain::none && qp->state() == QpState::ready)
            busy |= advance_drain(*qp);
        if (qp->state() == QpState::ready)
            update_epoll(*qp);
    }
    receiver_waiting_.store(receiver_waiting, std::memory_order_relaxed);
    return handle_overflows() || busy;
}

bool Device::handle_overflows()
{
    // A completion that found its CQ full was lost: as on an mlx5 device,
    // every queue pair feeding that CQ fails (its consumer sees BROKEN).
    bool any = false;
    overflow_seen_ = false;
    for (Cq* cq : cqs_) {
        if (!cq->overflowed() || cq->overflow_handled_)
            continue;
        cq->overflow_handled_ = true;
        cq->pushed_ = true; // so its waiter wakes and sees the overflow
        for (Qp* qp : qps_)
            if ((qp->send_cq_ == cq || qp->recv_cq_ == cq) && qp->state() == QpState::ready)
                fail(*qp, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, false);
        any = true;
    }
    return any;
}

void Device::update_epoll(Qp& qp)
{
    if (qp.fd_ < 0)
        return;
    // A full ring is announced by the peer's wake-up byte, not EPOLLOUT.
    // While a striped WRITE waits for its lane part only, the frames
    // behind it on this stream must not keep waking the engine.
    // Likewise a striped WRITE being sent whose lane part is all that is
    // left (the output buffer goes after it): the lane's EPOLLOUT wakes it.
    const bool lane_only = qp.direct_.remaining > 0 && qp.direct_.remaining == qp.direct_.lane_remaining;
    const Qp::DirectSend& d = qp.direct_send_;
    const bool output_here = d.first < d.count || (!d.busy() && qp.out_sent_ < qp.out_.size());
    const std::uint32_t in = lane_only ? 0u : static_cast<std::uint32_t>(EPOLLIN);
    const std::uint32_t want =
        output_here && !qp.acks_held_ && !qp.shm_ ? (in | static_cast<std::uint32_t>(EPOLLOUT)) : in;
    if (want == qp.epoll_mask_)
        return;
    epoll_event ev{};
    ev.events = want;
    ev.data.ptr = &qp;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, qp.fd_, &ev);
    qp.epoll_mask_ = want;
}

bool Device::send_frame(Qp& qp, std::uint8_t type, std::uint8_t flags, std::uint8_t syndrome, std::uint64_t addr,
                        std::uint32_t rkey, std::uint32_t aux, const void* payload, std::uint32_t length,
                        bool registered)
{
    std::uint8_t h[kHeader];
    encode(h, type, flags, syndrome, addr, rkey, aux, length);
    if (qp.out_sent_ == qp.out_.size()) {
        qp.out_.clear();
        qp.out_sent_ = 0;
        qp.out_acks_only_ = true;
    }
    qp.out_acks_only_ = qp.out_acks_only_ && type == kAck;
    const std::size_t start = qp.out_.size();
    qp.out_.resize(start + kHeader + (payload ? length : 0));
    std::memcpy(qp.out_.data() + start, h, kHeader);
    if (payload && length) {
        std::uint8_t* const to = qp.out_.data() + start + kHeader;
        if (!registered) { // the gathered bytes of a send or write: ours
            std::memcpy(to, payload, length);
        } else if (!guarded_copy(to, payload, length)) { // unmapped since it was registered
            qp.out_.resize(start);
            return false;
        }
    }
    return true;
}

ssize_t Device::wire_send(Qp& qp, const iovec* iov, std::size_t count, bool registered)
{
    if (qp.shm_) {
        const bool setting_up = !qp.shm_->ready();
        const ssize_t n = qp.shm_->write(iov, count, registered);
        // Until the peer's ring came, a write reads the socket for it, and
        // may take wake-ups meant for the engine's sleep: wake it instead.
        if (setting_up) {
            const std::uint64_t one = 1;
            [[maybe_unused]] ssize_t w = ::write(wake_fd_, &one, sizeof one);
        }
        return n;
    }
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(iov);
    msg.msg_iovlen = count;
    return ::sendmsg(qp.fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

ssize_t Device::wire_receive(Qp& qp, void* into, std::size_t want, bool registered)
{
    if (!qp.shm_)
        return ::recv(qp.fd_, into, want, 0);
    // A polling consumer reads the rings, and asks the socket whether the
    // peer is gone only every kShmSocketLook-th time it finds nothing, so
    // that an idle poll costs no system call. The engine thread reads the
    // socket whenever its ring is empty: it sleeps on it.
    using Look = ShmLink::Look;
    const Look look = !consumer_round_ ? Look::all : socket_turn_ ? Look::for_end : Look::no;
    return qp.shm_->read(into, want, look, registered);
}

void Device::ask_quick_acks(Qp& qp)
{
    if (!qp.quickack_owed_)
        return;
    qp.quickack_owed_ = false;
    const int one = 1;
    setsockopt(qp.fd_, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
}

void Device::split_for_lane(Qp::DirectSend& d, std::size_t main_bytes)
{
    // iov[1..count) are the segments; the first main_bytes of them stay.
    std::uint32_t i = 1;
    std::size_t left = main_bytes;
    while (i < d.count && left > 0 && left >= d.iov[i].iov_len)
        left -= d.iov[i++].iov_len;
    std::uint32_t main_end = i, n = 0;
    if (left > 0) { // a segment split between the two
        auto* const base = static_cast<std::uint8_t*>(d.iov[i].iov_base);
        d.lane_iov[n++] = {base + left, d.iov[i].iov_len - left};
        d.iov[i].iov_len = left;
        main_end = ++i;
    }
    for (; i < d.count; ++i)
        d.lane_iov[n++] = d.iov[i];
    d.count = main_end;
    d.lane_count = n;
    d.lane_first = 0;
}

bool Device::flush_direct(Qp& qp, bool& moved)
{
    Qp::DirectSend& d = qp.direct_send_;
    // A striped WRITE's two parts go side by side, each as far as its
    // socket takes it.
    for (bool progress = true; progress && qp.fd_ >= 0 && d.busy();) {
        progress = false;
        for (const bool lane : {false, true}) {
            iovec* const iov = lane ? d.lane_iov : d.iov;
            std::uint32_t& first = lane ? d.lane_first : d.first;
            const std::uint32_t count = lane ? d.lane_count : d.count;
            if (first == count)
                continue;
            ssize_t n;
            if (lane) {
                msghdr msg{};
                msg.msg_iov = iov + first;
                msg.msg_iovlen = count - first;
                n = ::sendmsg(qp.lane_fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
            } else {
                n = wire_send(qp, iov + first, count - first, true);
            }
            if (n > 0) {
                moved = progress = true;
                if (!lane)
                    ask_quick_acks(qp);
                auto left = static_cast<std::size_t>(n);
                while (first < count && left >= iov[first].iov_len)
                    left -= iov[first++].iov_len;
                if (first < count) {
                    iov[first].iov_base = static_cast<std::uint8_t*>(iov[first].iov_base) + left;
                    iov[first].iov_len -= left;
                }
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                continue;
            if (n < 0 && errno == EINTR) {
                progress = true;
                continue;
            }
            // The consumer's memory was unmapped while it was being sent (the
            // kernel says EFAULT), or the peer is gone: the frame is cut short.
            const bool fault = n < 0 && errno == EFAULT;
            if (!fault)
                report_broken(lane ? qp.lane_fd_ : qp.fd_, qp.qpn_, lane ? "send (lane)" : "send", n < 0 ? errno : 0);
            fail(qp, fault ? MLX5_CQE_SYNDROME_LOCAL_PROT_ERR : MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, true);
            moved = true;
            return false;
        }
    }
    return true;
}

bool Device::flush_output(Qp& qp)
{
    bool moved = false;
    qp.acks_held_ = false;
    if (!flush_direct(qp, moved) || qp.direct_send_.busy())
        return moved;
    while (qp.fd_ >= 0 && qp.out_sent_ < qp.out_.size()) {
        const iovec out{qp.out_.data() + qp.out_sent_, qp.out_.size() - qp.out_sent_};
        const ssize_t n = wire_send(qp, &out, 1, false);
        if (n > 0) {
            qp.out_sent_ += static_cast<std::size_t>(n);
            moved = true;
            ask_quick_acks(qp);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n < 0 && errno == EINTR)
            continue;
        report_broken(qp.fd_, qp.qpn_, "send", n < 0 ? errno : 0);
        fail(qp, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, true); // the peer is gone
        return true;
    }
    return moved;
}

void Device::queue_ack(Qp& qp)
{
    static const auto frames = [] {
        std::array<std::array<std::uint8_t, kHeader>, 2> h;
        encode(h[0].data(), kAck, 0, 0, 0, 0, 0, 0);
        encode(h[1].data(), kAck, kPolling, 0, 0, 0, 0, 0);
        return h;
    }();
    const auto& frame = frames[consumer_busy_polls_.load(std::memory_order_relaxed) ? 1 : 0];
    if (qp.out_sent_ == qp.out_.size()) {
        qp.out_.clear();
        qp.out_sent_ = 0;
        qp.out_acks_only_ = true;
    }
    const std::size_t at = qp.out_.size();
    qp.out_.resize(at + kHeader);
    std::memcpy(qp.out_.data() + at, frame.data(), kHeader);
}

bool Device::send_in_place(Qp& qp)
{
    // The shape a small SEND or WRITE has when write_request made it: the
    // control segment, for a WRITE the remote address, then inline data
    // that does not wrap at the queue's end; the same checks as
    // execute_send_queue's. Anything else, or a ring without room: false,
    // and the general path takes the WQE.
    const std::uint16_t published = static_cast<std::uint16_t>(load_be32(&qp.dbrec_[MLX5_SND_DBR]));
    const std::uint32_t bb = qp.sq_next_;
    if (static_cast<std::uint16_t>(bb) == published || qp.send_hold_ || qp.datagram_ ||
        qp.direct_send_.busy() ||
        !(qp.out_acks_only_ || qp.out_sent_ == qp.out_.size()))
        return false;
    const std::size_t ring_bytes = static_cast<std::size_t>(qp.sq_cnt_) * 64;
    const std::uint8_t* const wqe = qp.sq_.get() + static_cast<std::size_t>(bb & (qp.sq_cnt_ - 1)) * 64;
    const auto* ctrl = reinterpret_cast<const mlx5_wqe_ctrl_seg*>(wqe);
    const std::uint32_t op_word = be32toh(ctrl->opmod_idx_opcode);
    const std::uint8_t opcode = op_word & 0xff;
    if (opcode != MLX5_OPCODE_SEND && opcode != MLX5_OPCODE_RDMA_WRITE)
        return false;
    const std::uint32_t first_data = opcode == MLX5_OPCODE_SEND ? 1 : 2;
    const std::uint32_t ds = be32toh(ctrl->qpn_ds) & 0x3f;
    const std::uint32_t bbs = std::max<std::uint32_t>(1, (ds * 16 + 63) / 64);
    const std::size_t data_at = static_cast<std::size_t>(bb & (qp.sq_cnt_ - 1)) * 64 + first_data * 16;
    if (ds <= first_data || bbs > static_cast<std::uint16_t>(published - static_cast<std::uint16_t>(bb)) ||
        data_at + 16 > ring_bytes)
        return false;
    std::uint32_t first_word;
    std::memcpy(&first_word, qp.sq_.get() + data_at, 4);
    first_word = be32toh(first_word);
    // Inline data, or one segment of registered memory up to kInPlaceMax
    // (its key checked as the general path checks it).
    const bool is_inline = (first_word & MLX5_INLINE_SEG) != 0;
    const std::uint32_t length = is_inline ? first_word & ~MLX5_INLINE_SEG : first_word;
    const std::uint8_t* from = qp.sq_.get() + data_at + 4;
    if (is_inline) {
        if (length > qp.max_inline_ || ds - first_data != (length + 4 + 15) / 16 || data_at + 4 + length > ring_bytes)
            return false;
    } else {
        const auto* d = reinterpret_cast<const mlx5_wqe_data_seg*>(qp.sq_.get() + data_at);
        std::uint64_t host = 0;
        if (ds - first_data != 1 || length == 0 || length > kInPlaceMax ||
            !memory_.check(be32toh(d->lkey), be64toh(d->addr), length, kLocalRead, qp.pd_, 0, &host))
            return false;
        from = reinterpret_cast<const std::uint8_t*>(host);
    }
    // What the output buffer holds unsent is whole ACK frames: the frame
    // carries their count instead.
    const std::size_t carried = qp.out_.size() - qp.out_sent_;
    if (carried % kHeader != 0 || carried / kHeader > kMaxCarriedAcks)
        return false;
    std::uint8_t* const to = qp.shm_->reserve(kHeader + length);
    // Registered memory may have been unmapped since: the general path then
    // finds the fault again and reports it (nothing was published here).
    if (!to || (!is_inline && !guarded_copy(to + kHeader, from, length)))
        return false;
    std::uint64_t raddr = 0;
    std::uint32_t rkey = 0;
    if (opcode == MLX5_OPCODE_RDMA_WRITE) {
        const auto* r = reinterpret_cast<const mlx5_wqe_raddr_seg*>(wqe + 16);
        raddr = be64toh(r->raddr);
        rkey = be32toh(r->rkey);
    }
    const std::uint8_t flags =
        opcode == MLX5_OPCODE_SEND && (ctrl->fm_ce_se & MLX5_WQE_CTRL_SOLICITED) ? kSolicited : 0;
    encode(to, opcode == MLX5_OPCODE_SEND ? kSend : kWrite, flags, static_cast<std::uint8_t>(carried / kHeader), raddr,
           rkey, be32toh(ctrl->imm), length);
    if (is_inline)
        std::memcpy(to + kHeader, from, length);
    qp.shm_->commit(kHeader + length);
    qp.out_sent_ = qp.out_.size();
    qp.acks_held_ = false;
    qp.sq_next_ += bbs;
    Qp::InFlight f;
    f.wqe_index = static_cast<std::uint16_t>(op_word >> 8);
    f.opcode = opcode;
    f.signaled = (ctrl->fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) != 0;
    f.length = length;
    qp.inflight_.push_back(f);
    return true;
}

// Reads the WQEs the consumer published and puts them on the wire.
bool Device::execute_send_queue(Qp& qp)
{
    bool worked = false;
    const std::uint32_t mask = qp.sq_cnt_ - 1;
    const std::uint16_t published = static_cast<std::uint16_t>(load_be32(&qp.dbrec_[MLX5_SND_DBR]));
    std::uint8_t* const base = qp.sq_.get();
    // The ring's bytes are a power of two (sq_cnt_ is): a mask, not a
    // division, wraps an offset (several per WQE).
    const std::size_t ring_mask = static_cast<std::size_t>(qp.sq_cnt_) * 64 - 1;
    auto seg = [&](std::uint32_t bb, std::uint32_t i) -> std::uint8_t* {
        return base + ((static_cast<std::size_t>(bb & mask) * 64 + i * 16) & ring_mask);
    };
    Bytes& payload = gather_; // reused: no allocation per WQE once warm
    while (static_cast<std::uint16_t>(qp.sq_next_) != published && qp.state() == QpState::ready &&
           !qp.send_hold_ && qp.out_.size() - qp.out_sent_ < kOutputHighWater) {
        const std::uint32_t bb = qp.sq_next_;
        const auto* ctrl = reinterpret_cast<const mlx5_wqe_ctrl_seg*>(seg(bb, 0));
        const std::uint32_t op_word = be32toh(ctrl->opmod_idx_opcode);
        const std::uint8_t opcode = op_word & 0xff;
        const auto wqe_index = static_cast<std::uint16_t>(op_word >> 8);
        const std::uint32_t ds = be32toh(ctrl->qpn_ds) & 0x3f;
        const bool signaled = (ctrl->fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) != 0;
        const std::uint32_t bbs = std::max<std::uint32_t>(1, (ds * 16 + 63) / 64);
        Qp::InFlight f;
        f.wqe_index = wqe_index;
        f.opcode = opcode;
        f.signaled = signaled;
        // A WQE whose segment count runs past what the doorbell published
        // (a hostile or broken one): an error, and what it claims is taken.
        if (bbs > static_cast<std::uint16_t>(published - static_cast<std::uint16_t>(bb))) [[unlikely]] {
            qp.sq_next_ += static_cast<std::uint16_t>(published - static_cast<std::uint16_t>(bb));
            qp.send_hold_ |= Qp::kHoldLocalError;
            qp.local_error_wqe_ = f;
            qp.local_error_syndrome_ = MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
            if (qp.inflight_.empty())
                finish_local_error(qp);
            return true;
        }
        const bool rdma = opcode == MLX5_OPCODE_RDMA_WRITE || opcode == MLX5_OPCODE_RDMA_WRITE_IMM ||
                          opcode == MLX5_OPCODE_RDMA_READ;
        // 8-byte atomics: remote address, atomic and one data segment, the
        // original value scattered into it as a read's response is.
        const bool atomic = opcode == MLX5_OPCODE_ATOMIC_CS || opcode == MLX5_OPCODE_ATOMIC_FA;
        const bool reads_back = opcode == MLX5_OPCODE_RDMA_READ || atomic;
        // A NOP moves nothing: it completes in order, once everything
        // before it has (memory-window binds are ordered this way).
        const bool nop = opcode == MLX5_OPCODE_NOP;
        // A datagram queue pair runs datagram sends and NOPs only: the
        // softnic's opcode, or for one that takes address vectors a SEND
        // with an mlx5 datagram segment.
        const bool datagram_send = opcode == kDatagramSendOpcode && qp.datagram_qkey_ == 0;
        const bool av_send = opcode == MLX5_OPCODE_SEND && qp.datagram_qkey_ != 0;
        const bool known = qp.datagram_ ? datagram_send || av_send || nop
                                        : rdma || atomic || nop || opcode == MLX5_OPCODE_SEND ||
                                              opcode == MLX5_OPCODE_SEND_IMM || opcode == MLX5_OPCODE_SEND_INVAL;
        std::uint64_t raddr = 0;
        std::uint32_t rkey = 0;
        std::uint32_t first_data = 1;
        if (known && (rdma || atomic || datagram_send)) {
            const auto* r = reinterpret_cast<const mlx5_wqe_raddr_seg*>(seg(bb, 1));
            raddr = be64toh(r->raddr);
            rkey = be32toh(r->rkey);
            first_data = atomic ? 3 : 2;
        }
        mlx5_wqe_av av{};
        if (known && av_send) { // three segments, which may wrap at the queue's end
            static_assert(sizeof(mlx5_wqe_datagram_seg) == 48);
            for (std::uint32_t i = 0; i < 3; ++i)
                std::memcpy(reinterpret_cast<std::uint8_t*>(&av) + 16 * i, seg(bb, 1 + i), 16);
            first_data = 4;
        }
        // A memory-window bind (mlx5's UMR WQE): executed now, in the
        // memory table; it completes in order, as a NOP does. Its segments
        // are copied out first (they may wrap at the queue's end); nothing
        // past its `ds` is read.
        if (opcode == MLX5_OPCODE_UMR && !qp.datagram_) {
            qp.sq_next_ += bbs;
            worked = true;
            std::uint8_t wqe[64 * 16];
            for (std::uint32_t i = 0; i < ds; ++i)
                std::memcpy(wqe + 16 * i, seg(bb, i), 16);
            if (const std::uint8_t syndrome = execute_window_bind(qp, wqe, ds); syndrome != 0) {
                qp.send_hold_ |= Qp::kHoldLocalError;
                qp.local_error_wqe_ = f;
                qp.local_error_syndrome_ = syndrome;
                if (qp.inflight_.empty())
                    finish_local_error(qp);
                return true;
            }
            if (!qp.inflight_.empty())
                qp.inflight_.push_back(f); // completed after the requests before it (complete_leading_nops)
            else if (signaled)
                qp.send_cq_->push({MLX5_CQE_REQ, 0, false, wqe_index, 0, 0, qp.qpn_});
            continue;
        }
        // Gather (or, for READ, record the scatter list), checking every key.
        bool local_ok = known && ds >= first_data && ds - first_data <= (qp.max_inline_ + 4 + 15) / 16 + kMaxSge &&
                        (!nop || ds == 1);
        payload.clear();
        const std::uint32_t first_word = ds > first_data ? be32toh(*reinterpret_cast<const std::uint32_t*>(seg(bb, first_data))) : 0;
        // A large SEND or WRITE is sent from the consumer's memory, not
        // gathered: once what is queued before it has gone. On fastdapl-shm
        // a large WRITE is pulled by the target where it said it can: the
        // frame names the segments, in the order of the other frames (once
        // a direct send's segments, whose list it shares, have gone).
        enum class Large : std::uint8_t { no, direct_send, pull };
        Large large = Large::no;
        // A direct send may start once the one before it went, carrying
        // what the output buffer holds if that is a few acknowledgements.
        const bool direct_may_start = !qp.direct_send_.busy() &&
                                      qp.out_.size() - qp.out_sent_ <= Qp::kCarriedMax;
        // Nothing in flight: this request is sent from where its bytes are
        // from kIdleDirectMin up (a stream's later ones are gathered and
        // batched).
        const bool idle_wire = direct_may_start && qp.inflight_.empty() && !reads_back && !nop && !qp.datagram_;
        if (local_ok && ds > first_data && !(first_word & MLX5_INLINE_SEG) && !reads_back && !nop && !qp.datagram_ &&
            ds - first_data <= kMaxSge) {
            std::uint64_t total = 0;
            for (std::uint32_t i = first_data; i < ds; ++i)
                total += be32toh(reinterpret_cast<const mlx5_wqe_data_seg*>(seg(bb, i))->byte_count);
            if (total >= kLargeMin) {
                large = qp.shm_ && qp.shm_->peer_pulls() &&
                                (opcode == MLX5_OPCODE_RDMA_WRITE || opcode == MLX5_OPCODE_RDMA_WRITE_IMM)
                            ? Large::pull
                        : total >= kDirectSendMin ? Large::direct_send
                                                  : Large::no;
                if ((large == Large::direct_send && !direct_may_start) ||
                    (large == Large::pull && qp.direct_send_.busy()))
                    break;
            }
            if (large == Large::no && idle_wire && total >= kIdleDirectMin)
                large = Large::direct_send;
        }
        std::uint32_t direct_iovs = 1; // iov[0]: the header
        if (local_ok && ds > first_data && (first_word & MLX5_INLINE_SEG) && !reads_back) {
            std::uint32_t len = first_word & ~MLX5_INLINE_SEG;
            local_ok = len <= qp.max_inline_;
            if (local_ok && len > 0) { // inline bytes start 4 bytes into the segment and may wrap (an empty buffer's data() may be null)
                const std::size_t ring = static_cast<std::size_t>(qp.sq_cnt_) * 64;
                const std::size_t off = (static_cast<std::size_t>(bb & mask) * 64 + first_data * 16 + 4) & ring_mask;
                const std::size_t first = std::min<std::size_t>(len, ring - off);
                payload.resize(len);
                std::memcpy(payload.data(), base + off, first);
                std::memcpy(payload.data() + first, base, len - first);
            }
            f.length = len;
        } else {
            for (std::uint32_t i = first_data; local_ok && i < ds; ++i) {
                const auto* d = reinterpret_cast<const mlx5_wqe_data_seg*>(seg(bb, i));
                const Sge s{be64toh(d->addr), be32toh(d->byte_count), be32toh(d->lkey)};
                std::uint64_t host = 0; // where s.addr is here (a zero-based region's are offsets)
                if (reads_back) {
                    local_ok =
                        f.nsge < kMaxSge && memory_.check(s.lkey, s.addr, s.length, kLocalWrite, qp.pd_, 0, &host);
                    if (local_ok)
                        f.sge[f.nsge++] = {host, s.length, s.lkey};
                } else {
                    local_ok = memory_.check(s.lkey, s.addr, s.length, kLocalRead, qp.pd_, 0, &host);
                    if (local_ok && large != Large::no) { // the kernel reports unmapped memory as EFAULT
                        qp.direct_send_.iov[direct_iovs++] = {reinterpret_cast<void*>(host), s.length};
                    } else if (local_ok) { // memory unmapped since it was registered: a protection error
                        const std::size_t at = payload.size();
                        payload.resize(at + s.length);
                        local_ok = guarded_copy(payload.data() + at, reinterpret_cast<const void*>(host), s.length);
                    }
                }
                f.length += s.length;
            }
        }
        if (local_ok && f.length > kMaxMessageSize)
            local_ok = false;
        if (atomic && (ds != 4 || f.length != 8))
            local_ok = false;
        if ((datagram_send || av_send) && f.length > kMaxDatagramPayload)
            local_ok = false;
        qp.sq_next_ += bbs;
        worked = true;
        if (!local_ok) {
            qp.send_hold_ |= Qp::kHoldLocalError;
            qp.local_error_wqe_ = f;
            qp.local_error_syndrome_ = known ? MLX5_CQE_SYNDROME_LOCAL_PROT_ERR : MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
            if (qp.inflight_.empty())
                finish_local_error(qp);
            return true;
        }
        const std::uint32_t imm = ctrl->imm; // already big-endian
        if (large == Large::pull) { // the target copies from the segments; the memory is the provider's until its ACK
            queue_pulled_write(qp, opcode == MLX5_OPCODE_RDMA_WRITE_IMM, raddr, rkey, be32toh(imm), direct_iovs - 1);
            qp.inflight_.push_back(f);
            continue;
        }
        if (large == Large::direct_send) { // the header now, the payload from the consumer's memory
            Qp::DirectSend& d = qp.direct_send_;
            const bool write = opcode == MLX5_OPCODE_RDMA_WRITE || opcode == MLX5_OPCODE_RDMA_WRITE_IMM;
            const bool striped = opcode == MLX5_OPCODE_RDMA_WRITE && qp.lane_fd_ >= 0 && f.length >= kStripeMin &&
                                 stripes(qp);
            const std::uint8_t flags =
                write ? (opcode == MLX5_OPCODE_RDMA_WRITE_IMM ? kImm : 0) | (striped ? kStriped : 0)
                      : ((opcode == MLX5_OPCODE_SEND_IMM ? kImm : 0) | (opcode == MLX5_OPCODE_SEND_INVAL ? kInvalidate : 0) |
                         ((ctrl->fm_ce_se & MLX5_WQE_CTRL_SOLICITED) ? kSolicited : 0));
            // What the output buffer holds goes first (direct_may_start: a few bytes).
            const std::size_t carried = qp.out_.size() - qp.out_sent_;
            if (carried)
                std::memcpy(d.prefix, qp.out_.data() + qp.out_sent_, carried);
            qp.out_sent_ = qp.out_.size();
            encode(d.prefix + carried, write ? kWrite : kSend, flags, 0, raddr, rkey, be32toh(imm), f.length);
            d.iov[0] = {d.prefix, carried + kHeader};
            d.count = direct_iovs;
            d.first = 0;
            d.lane_count = d.lane_first = 0;
            if (striped) {
                split_for_lane(d, stripe_split(f.length));
                striped_writes_.fetch_add(1, std::memory_order_relaxed);
            } else if (opcode == MLX5_OPCODE_RDMA_WRITE && f.length >= kStripeMin && !qp.lane_asked_) {
                ask_for_lane(qp, true); // this one goes whole; later ones are striped once the lane is here
            }
            qp.inflight_.push_back(f);
            continue;
        }
        if (av_send) { // as kDatagramSendOpcode below
            send_to_address_vector(qp, av, payload.data(), f.length);
            if (signaled)
                qp.send_cq_->push({MLX5_CQE_REQ, 0, false, wqe_index, f.length, 0, qp.qpn_});
            continue;
        }
        switch (opcode) {
        case kDatagramSendOpcode: // complete once handed to the kernel: nothing acknowledges a datagram
            send_datagram(qp, raddr, rkey, payload.data(), f.length);
            if (signaled)
                qp.send_cq_->push({MLX5_CQE_REQ, 0, false, wqe_index, f.length, 0, qp.qpn_});
            continue;
        case MLX5_OPCODE_SEND:
        case MLX5_OPCODE_SEND_IMM:
        case MLX5_OPCODE_SEND_INVAL: { // imm: the immediate data, or the key to invalidate
            std::uint8_t flags = (opcode == MLX5_OPCODE_SEND_IMM ? kImm : 0) |
                                 (opcode == MLX5_OPCODE_SEND_INVAL ? kInvalidate : 0) |
                                 ((ctrl->fm_ce_se & MLX5_WQE_CTRL_SOLICITED) ? kSolicited : 0);
            send_frame(qp, kSend, flags, 0, 0, 0, be32toh(imm), payload.data(), f.length);
            break;
        }
        case MLX5_OPCODE_RDMA_WRITE:
        case MLX5_OPCODE_RDMA_WRITE_IMM:
            send_frame(qp, kWrite, opcode == MLX5_OPCODE_RDMA_WRITE_IMM ? kImm : 0, 0, raddr, rkey, be32toh(imm),
                       payload.data(), f.length);
            break;
        case MLX5_OPCODE_RDMA_READ: { // header only: length is what to read
            // Large, and this side may read the responder's memory: it
            // pulls the bytes itself, and holds what follows until then.
            const bool pull = f.length >= kCmaMin && qp.shm_ && qp.shm_->can_pull();
            send_frame(qp, kReadReq, pull ? kPull : 0, 0, raddr, rkey, 0, nullptr, f.length);
            if (pull)
                qp.send_hold_ |= Qp::kHoldPulledRead;
            break;
        }
        case MLX5_OPCODE_ATOMIC_CS:
        case MLX5_OPCODE_ATOMIC_FA: {
            std::uint8_t operands[16]; // swap_add, compare: big-endian in the WQE and on the wire
            std::memcpy(operands, seg(bb, 2), sizeof operands);
            send_frame(qp, kAtomicReq, opcode == MLX5_OPCODE_ATOMIC_CS ? kCompareSwap : 0, 0, raddr, rkey, 0, operands,
                       sizeof operands);
            break;
        }
        case MLX5_OPCODE_NOP:
            if (qp.inflight_.empty()) {
                if (signaled)
                    qp.send_cq_->push({MLX5_CQE_REQ, 0, false, wqe_index, 0, 0, qp.qpn_});
                continue;
            }
            break; // completed after the requests before it (complete_leading_nops)
        }
        qp.inflight_.push_back(f);
    }
    return worked;
}

bool Device::receive(Qp& qp)
{
    bool worked = false;
    bool peer_closed = false, broken = false;
    int broken_errno = 0;
    qp.waiting_for_recv_ = false;
    // A member, not the stack: progress also runs on consumer threads, whose
    // stacks may be small (dapltest's are).
    std::uint8_t* const buf = receive_buffer_.data();
    // A read that came back short took all the socket held: the next round
    // (level-triggered epoll, or the consumer's next poll) looks again,
    // which saves a recv that would say EAGAIN per message.
    bool socket_drained = false;
    for (;;) {
        if (!parse_frames(qp) || qp.fd_ < 0 || qp.state() != QpState::ready || socket_drained)
            break;
        if (qp.direct_.remaining > 0) { // a large WRITE's payload, read into its target
            bool drained = false;
            const Take took = receive_direct(qp, &drained);
            if (took == Take::taken) {
                worked = true;
                if (drained && qp.direct_.remaining > 0)
                    break; // asked again, the sockets would say EAGAIN
                continue;
            }
            if (took == Take::failed)
                return true;
            break; // nothing more to read now
        }
        // fastdapl-shm: the frames are handled where they are in the ring,
        // as they would be in the receive buffer below, without copying
        // them there; what is left is kept as below.
        if (qp.shm_ && qp.in_.empty()) {
            if (const ShmLink::Arrived got = qp.shm_->peek(); got.size > 0) {
                worked = true;
                const std::size_t used = parse_frames(qp, got.bytes, got.size);
                if (qp.state() != QpState::ready)
                    break; // failed: nothing is kept
                if (used < got.size && qp.direct_.remaining == 0)
                    qp.in_.assign(got.bytes + used, got.bytes + got.size);
                qp.shm_->consume(got.size);
                continue;
            }
        }
        // After a large WRITE, the next frame is read header first, likely
        // another one: its payload then goes straight into its target
        // rather than up to 64 KiB of it through this buffer and a copy.
        const std::size_t want = qp.expect_large_ && qp.in_.empty() && !qp.shm_ ? kHeader : receive_buffer_.size();
        const ssize_t n = wire_receive(qp, buf, want, false);
        if (n > 0) {
            worked = true;
            socket_drained = !qp.shm_ && static_cast<std::size_t>(n) < want;
            if (qp.in_.empty()) {
                // Nothing held from before: the frames are handled where they
                // were read, and only what is left (a frame not all here, or
                // one waiting for a receive buffer) is kept.
                const auto got = static_cast<std::size_t>(n);
                const std::size_t used = parse_frames(qp, buf, got);
                if (qp.state() != QpState::ready)
                    break; // failed: nothing is kept (fail() dropped the input)
                qp.expect_large_ = qp.direct_.remaining > 0;
                if (used < got) // a frame not all here, or the frames behind a striped WRITE's first part
                    qp.in_.assign(buf + used, buf + got);
                continue;
            }
            qp.expect_large_ = false;
            qp.in_.insert(qp.in_.end(), buf, buf + n);
            if (qp.in_.size() > kMaxMessageSize + 2 * kHeader) // never happens with a sane peer
                break;
            continue;
        }
        if (n == 0) {
            peer_closed = true;
        } else if (errno == EINTR) {
            continue;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
            broken = true;
            broken_errno = errno;
        }
        parse_frames(qp); // what arrived before the end of the stream
        break;
    }
    // What arrived before the end of the stream (a NAK, say) counts first.
    // The end is orderly only if the peer said so: a frame may still wait
    // behind a send that has no receive buffer, so look past it.
    if ((peer_closed || broken) && qp.state() == QpState::ready) {
        // Our own goodbye sent (a graceful disconnect), the peer's close is
        // its answer; it may come before our round that ends the drain.
        const bool orderly = peer_closed && !broken && qp.direct_.remaining == 0 &&
                             (has_disconnect_frame(qp.in_) || (qp.shm_ && qp.shm_->goodbye_seen()) ||
                              (qp.drain_ == Qp::Drain::goodbye && !qp.output_pending()));
        if (orderly) {
            fail(qp, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, false);
        } else {
            report_broken(qp.fd_, qp.qpn_, "receive", broken_errno);
            fail(qp, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, true);
        }
        worked = true;
    }
    return worked;
}

namespace {

// A datagram's header: magic, source and destination queue pair numbers,
// payload length, each 4 bytes in network byte order.
constexpr std::uint32_t kDatagramMagic = 0x46445544; // "FDUD"
constexpr std::size_t kDatagramHeader = 16;
constexpr int kDatagramsPerRound = 64;

void put_be32(std::uint8_t* p, std::uint32_t v)
{
    v = htobe32(v);
    std::memcpy(p, &v, 4);
}
std::uint32_t get_be32(const std::uint8_t* p)
{
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return be32toh(v);
}

} // namespace

void Device::send_datagram(Qp& qp, std::uint64_t destination, std::uint32_t dest_qpn, const std::uint8_t* payload,
                           std::uint32_t length)
{
    datagram_out_.resize(kDatagramHeader + length);
    std::uint8_t* d = datagram_out_.data();
    put_be32(d, kDatagramMagic);
    put_be32(d + 4, qp.qpn_);
    put_be32(d + 8, dest_qpn);
    put_be32(d + 12, length);
    if (length)
        std::memcpy(d + kDatagramHeader, payload, length);
    const sockaddr_in to = datagram_address(destination);
    // Unreliable by definition: a datagram the kernel will not take is lost.
    for (;;) {
        const ssize_t n = ::sendto(qp.fd_, d, kDatagramHeader + length, MSG_DONTWAIT | MSG_NOSIGNAL,
                                   reinterpret_cast<const sockaddr*>(&to), sizeof to);
        if (n >= 0 || errno != EINTR)
            break;
    }
}

Qp* Device::address_vector_qp(std::uint32_t qpn, std::uint32_t qkey, std::uint32_t addr) const
{
    for (Qp* q : qps_)
        if (q->qpn_ == qpn && q->datagram_ && q->datagram_qkey_ == qkey && q->datagram_local_.sin_addr.s_addr == addr &&
            q->state() == QpState::ready)
            return q;
    return nullptr;
}

void Device::send_to_address_vector(Qp& qp, const mlx5_wqe_av& av, const std::uint8_t* payload, std::uint32_t length)
{
    // The extended form (it has the GID), an IPv4-mapped GID (RoCE v2 over
    // IPv4), our qkey, and a queue pair of this device that takes it.
    static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    const std::uint32_t dqp = be32toh(av.dqp_dct);
    std::uint32_t addr;
    std::memcpy(&addr, av.rgid + 12, 4);
    const Qp* to = (dqp & MLX5_EXTENDED_UD_AV) && std::memcmp(av.rgid, kMapped, sizeof kMapped) == 0
                       ? address_vector_qp(dqp & 0xffffff, be32toh(av.key.qkey.qkey), addr)
                       : nullptr;
    if (!to) { // unreliable: the datagram is lost, the send completes
        qp.datagrams_dropped_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    send_datagram(qp, datagram_destination(to->datagram_local_), to->qpn_, payload, length);
}

bool Device::receive_datagrams(Qp& qp)
{
    bool worked = false;
    // The datagram's header lands just before where the GRH ends, so the
    // prefix and the payload are one run of bytes to place.
    std::uint8_t* const buf = receive_buffer_.data();
    std::uint8_t* const header = buf + kGrhSize - kDatagramHeader;
    const std::size_t room = receive_buffer_.size() - (kGrhSize - kDatagramHeader);
    auto drop = [&qp] { qp.datagrams_dropped_.fetch_add(1, std::memory_order_relaxed); };
    for (int round = 0; round < kDatagramsPerRound && qp.fd_ >= 0 && qp.state() == QpState::ready; ++round) {
        sockaddr_in from{};
        socklen_t from_len = sizeof from;
        const ssize_t n = ::recvfrom(qp.fd_, header, room, MSG_DONTWAIT | MSG_TRUNC, reinterpret_cast<sockaddr*>(&from),
                                     &from_len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break; // nothing more (or an ICMP error from an earlier send: not ours to report)
        }
        worked = true;
        const auto got = static_cast<std::size_t>(n);
        if (got < kDatagramHeader || got > room || from_len != sizeof from || from.sin_family != AF_INET ||
            get_be32(header) != kDatagramMagic || get_be32(header + 12) != got - kDatagramHeader ||
            got - kDatagramHeader > kMaxDatagramPayload || get_be32(header + 8) != qp.qpn_) {
            drop();
            continue;
        }
        const std::uint32_t src_qpn = get_be32(header + 4);
        // One that takes address vectors: from such a queue pair of this
        // device with our qkey, at the address and port it is bound to.
        const Qp* sender = qp.datagram_qkey_ ? address_vector_qp(src_qpn, qp.datagram_qkey_, from.sin_addr.s_addr) : nullptr;
        const bool known = qp.datagram_qkey_
            ? sender && sender->datagram_local_.sin_port == from.sin_port
            : std::any_of(qp.datagram_peers_.begin(), qp.datagram_peers_.end(), [&](const Qp::DatagramPeer& p) {
                  return p.addr == from.sin_addr.s_addr && (p.port == 0 || (p.port == from.sin_port && p.qpn == src_qpn));
              });
        if (!known) {
            drop();
            continue;
        }
        const std::size_t length = kGrhSize + (got - kDatagramHeader);
        // The buffer it would take, looked at before it is taken: one too
        // small (or none posted: IB has no receiver-not-ready for UD)
        // drops the datagram and stays for the next.
        const mlx5_wqe_data_seg* segs = nullptr;
        std::uint32_t max_sge = 0;
        if (Srq* srq = qp.srq_) {
            const auto posted = static_cast<std::uint16_t>(load_be32(srq->dbrec_));
            const auto available = static_cast<std::uint16_t>(
                posted - static_cast<std::uint16_t>(srq->taken_.load(std::memory_order_relaxed)));
            if (available != 0 && available < srq->cnt_ && !srq->failed()) {
                segs = reinterpret_cast<const mlx5_wqe_data_seg*>(
                    srq->mem_.get() + static_cast<std::size_t>(srq->head_) * srq->stride_ + sizeof(mlx5_wqe_srq_next_seg));
                max_sge = srq->max_sge_;
            }
        } else if (static_cast<std::uint16_t>(qp.rq_next_) != static_cast<std::uint16_t>(load_be32(&qp.dbrec_[MLX5_RCV_DBR]))) {
            segs = reinterpret_cast<const mlx5_wqe_data_seg*>(
                qp.rq_.get() + static_cast<std::size_t>(qp.rq_next_ & (qp.rq_cnt_ - 1)) * qp.rq_stride_);
            max_sge = qp.rq_stride_ / 16;
        }
        std::uint64_t capacity = 0;
        for (std::uint32_t i = 0; segs && i < max_sge && be32toh(segs[i].lkey) != MLX5_INVALID_LKEY; ++i)
            capacity += be32toh(segs[i].byte_count);
        if (!segs || length > capacity) {
            drop();
            continue;
        }
        std::uint32_t index = 0;
        if (take_receive(qp, index) != Take::taken)
            return true; // the queue pair failed taking it (a watermark, the SRQ's error)
        // The GRH as IB writes it for RoCE v2 over IPv4: version 6, payload
        // length, next header, hop limit, then the IPv4-mapped source and
        // destination GIDs.
        std::memset(buf, 0, kGrhSize);
        buf[0] = 0x60;
        const auto grh_length = htobe16(static_cast<std::uint16_t>(got - kDatagramHeader));
        std::memcpy(buf + 4, &grh_length, 2);
        buf[6] = 0x1b;
        buf[7] = 64;
        buf[18] = buf[19] = buf[34] = buf[35] = 0xff;
        std::memcpy(buf + 20, &from.sin_addr.s_addr, 4);
        std::memcpy(buf + 36, &qp.datagram_local_.sin_addr.s_addr, 4);
        const std::uint32_t pd = qp.srq_ ? qp.srq_->pd_ : qp.pd_;
        Piece pieces[2 * kMaxSge];
        std::size_t npieces = 0, done = 0;
        bool ok = true;
        for (std::uint32_t i = 0; ok && i < max_sge && i < std::size(pieces) && done < length &&
                                  be32toh(segs[i].lkey) != MLX5_INVALID_LKEY;
             ++i) {
            const std::size_t part = std::min<std::size_t>(be32toh(segs[i].byte_count), length - done);
            std::uint64_t host = 0;
            ok = memory_.check(be32toh(segs[i].lkey), be64toh(segs[i].addr), part, kLocalWrite, pd, 0, &host);
            pieces[npieces++] = {reinterpret_cast<void*>(host), buf + done, part};
            done += part;
        }
        ok = ok && done == length && guarded_place(pieces, npieces);
        // A buffer it may not write: that receive fails, the queue pair goes on
        // (nothing of the peer's is at fault).
        qp.recv_cq_->push({static_cast<std::uint8_t>(ok ? MLX5_CQE_RESP_SEND : MLX5_CQE_RESP_ERR),
                           static_cast<std::uint8_t>(ok ? 0 : MLX5_CQE_SYNDROME_LOCAL_PROT_ERR), false,
                           static_cast<std::uint16_t>(index), ok ? static_cast<std::uint32_t>(length) : 0, 0, qp.qpn_,
                           src_qpn, from.sin_addr.s_addr, from.sin_port});
        count_one(qp.recv_generated_);
    }
    return worked;
}

bool Device::parse_frames(Qp& qp)
{
    if (qp.in_.size() < kHeader) // no frame to look at (the usual case: frames are parsed where they are read)
        return qp.state() == QpState::ready;
    const std::size_t pos = parse_frames(qp, qp.in_.data(), qp.in_.size());
    if (pos && qp.state() == QpState::ready) // fail() already discarded the input
        qp.in_.erase(qp.in_.begin(), qp.in_.begin() + static_cast<std::ptrdiff_t>(pos));
    return qp.state() == QpState::ready;
}

std::size_t Device::parse_frames(Qp& qp, const std::uint8_t* in, std::size_t size)
{
    // Handle every complete frame.
    std::size_t pos = 0;
    while (qp.state() == QpState::ready && qp.direct_.remaining == 0 && size - pos >= kHeader) {
        std::uint8_t header[kHeader];
        std::memcpy(header, in + pos, kHeader);
        const WireHeader h = decode(header);
        const bool striped = (h.flags & kStriped) != 0;
        if (h.version != kWireVersion || h.length > kMaxMessageSize || h.type < kSend || h.type > kLaneWanted ||
            (h.syndrome && h.type != kNak && ((h.type != kSend && h.type != kWrite) || h.syndrome > kMaxCarriedAcks)) ||
            (striped && (h.type != kWrite || (h.flags & kImm) || h.length < kStripeMin || qp.shm_))) {
            fail(qp, MLX5_CQE_SYNDROME_BAD_RESP_ERR, true); // malformed: drop the connection, nothing else
            return pos;
        }
        if (striped) {
            // Its first part follows on this stream, the rest on the lane
            // (read once the lane is attached, if it is not yet): both go
            // straight into the target; the frames behind it wait.
            if (!take_carried_acks(qp, h.syndrome))
                return pos;
            const std::size_t here = std::min(stripe_split(h.length), size - pos - kHeader);
            start_direct(qp, h.addr, h.rkey, h.length, in + pos + kHeader, here, true);
            pos += kHeader + here;
            break;
        }
        const std::size_t payload = (h.type == kReadReq) ? 0 : h.length;
        if (size - pos < kHeader + payload) {
            // A large WRITE is read from the socket into its target
            // (checked first), not through this buffer.
            if (h.type == kWrite && !(h.flags & kImm) && payload >= kDirectPlacementMin) {
                if (!take_carried_acks(qp, h.syndrome))
                    return pos;
                start_direct(qp, h.addr, h.rkey, h.length, in + pos + kHeader, size - pos - kHeader);
                pos = size;
                break;
            }
            // A message for an SRQ buffer takes it as it starts to arrive,
            // as a device does: it counts against the queue pair from then on.
            const bool needs_buffer = h.type == kSend || (h.type == kWrite && (h.flags & kImm));
            if (qp.srq_ && needs_buffer && qp.srq_reserved_ == Qp::kNoWqe) {
                std::uint32_t index = 0;
                if (take_receive(qp, index) == Take::taken)
                    qp.srq_reserved_ = index;
            }
            break;
        }
        bool wait_for_recv = false;
        if (!handle_frame(qp, h, in + pos + kHeader, payload, wait_for_recv))
            return pos; // the queue pair failed
        if (wait_for_recv) {
            qp.waiting_for_recv_ = qp.state() == QpState::ready;
            break; // RC receiver-not-ready: keep the frame until a receive is posted
        }
        qp.carried_acks_taken_ = false; // the next frame's are its own
        pos += kHeader + payload;
    }
    return pos;
}

void Device::start_direct(Qp& qp, std::uint64_t addr, std::uint32_t rkey, std::uint32_t length,
                          const std::uint8_t* arrived, std::size_t n, bool striped)
{
    // What came with the header is placed now; the rest, but for the last
    // byte, is read straight into the target; the last byte lands last.
    std::uint64_t host = 0; // where addr is here (a zero-based region's are offsets)
    const bool allowed = memory_.check(rkey, addr, length, kRemoteWrite, qp.pd_, qp.qpn_, &host);
    auto* const to = reinterpret_cast<std::uint8_t*>(host);
    const bool refused = !allowed || (n && !guarded_copy(to, arrived, n)); // unmapped since registration
    const std::size_t lane_part = striped ? length - stripe_split(length) : 0;
    qp.direct_ = {refused ? nullptr : to + n, length - n, refused, refused ? nullptr : to + (length - lane_part),
                  lane_part, striped};
    if (striped && qp.lane_fd_ < 0) // the peer's lane may still be on its way (its CM hands it over)
        qp.lane_due_ = std::chrono::steady_clock::now() + kLaneWait;
    qp.quickack_owed_ = !qp.shm_;
}

ssize_t Device::read_part(Qp& qp, bool lane, std::uint8_t* to, std::size_t want, std::uint8_t* tail)
{
    Qp::DirectWrite& d = qp.direct_;
    if (d.refused) {
        to = receive_buffer_.data();
        want = std::min(want, receive_buffer_.size());
        tail = nullptr;
    }
    // The kernel reports memory unmapped since registration as EFAULT.
    ssize_t n;
    if (tail) { // TCP: the last of `want` bytes goes to `tail`, the rest to `to`
        iovec iov[2] = {{to, want - 1}, {tail, 1}};
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = 2;
        n = ::recvmsg(lane ? qp.lane_fd_ : qp.fd_, &msg, 0);
    } else {
        n = lane ? ::recv(qp.lane_fd_, to, want, 0) : wire_receive(qp, to, want, true);
    }
    if (n > 0)
        return n;
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (n < 0 && errno == EFAULT) {
        d.refused = true; // the rest is dropped, then refused
        return 0;
    }
    // The stream ended inside a message: broken.
    report_broken(lane ? qp.lane_fd_ : qp.fd_, qp.qpn_, lane ? "receive (lane)" : "receive", n < 0 ? errno : 0);
    fail(qp, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, true);
    return -1;
}

Device::Take Device::receive_direct(Qp& qp, bool* drained)
{
    Qp::DirectWrite& d = qp.direct_;
    bool moved = false;
    bool all_short = true;
    // All but the WRITE's last byte: the main stream's part, and a striped
    // one's lane part (which ends with that byte) once the lane is here.
    for (const bool lane : {false, true}) {
        const std::size_t left = lane ? d.lane_remaining : d.remaining - d.lane_remaining;
        const bool holds_last = lane || !d.striped;
        // Over TCP the last byte comes with the rest, into d.tail; on
        // fastdapl-shm (and once refused) it is read alone, below.
        const bool fold = holds_last && !qp.shm_ && !d.refused;
        const std::size_t want = holds_last && left > 0 && !fold ? left - 1 : left;
        if (want == 0 || (lane && qp.lane_fd_ < 0))
            continue;
        const bool refused = d.refused;
        std::uint8_t*& to = lane ? d.lane_to : d.to;
        const ssize_t n = read_part(qp, lane, to, want, fold ? &d.tail : nullptr);
        if (n < 0)
            return Take::failed;
        moved = moved || n > 0 || d.refused != refused;
        const auto got = static_cast<std::size_t>(n);
        all_short = all_short && got < want;
        const bool tail_read = fold && got == want && !d.refused;
        d.remaining -= got;
        if (lane)
            d.lane_remaining -= got;
        if (!d.refused) {
            to += tail_read ? got - 1 : got;
            if (tail_read)
                d.tail_at = to;
        }
    }
    if (d.lane_remaining > 0 && qp.lane_fd_ < 0 && std::chrono::steady_clock::now() >= qp.lane_due_) {
        // Striped, and no lane came (a peer that never opened one).
        fail(qp, MLX5_CQE_SYNDROME_BAD_RESP_ERR, true);
        return Take::failed;
    }
    if (drained)
        *drained = all_short;
    std::uint8_t last = 0;
    std::uint8_t* at = nullptr;
    if (d.remaining == 0) { // read whole, the last byte into d.tail (or dropped with the rest)
        last = d.tail;
        at = d.tail_at;
    } else {
        if (d.remaining != 1 || (d.lane_remaining == 1 && qp.lane_fd_ < 0))
            return moved ? Take::taken : Take::none;
        // The last byte, after everything else has landed.
        const bool lane = d.lane_remaining == 1;
        const bool refused = d.refused;
        const ssize_t n = read_part(qp, lane, &last, 1);
        if (n < 0)
            return Take::failed;
        if (n == 0)
            return moved || d.refused != refused ? Take::taken : Take::none;
        at = lane ? d.lane_to : d.to;
    }
    const bool placed = !d.refused && at && [&] {
        const Piece piece{at, &last, 1};
        return guarded_place(&piece, 1);
    }();
    d = {};
    if (!placed) {
        remote_access_error(qp);
        return Take::failed;
    }
    queue_ack(qp);
    return Take::taken;
}

void Device::refuse(Qp& qp, std::uint8_t told, std::uint8_t here)
{
    send_frame(qp, kNak, 0, told, 0, 0, 0, nullptr, 0);
    flush_output(qp);
    fail(qp, here, false); // broken on this side too, not an orderly end
}

void Device::remote_access_error(Qp& qp)
{
    refuse(qp, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
}

bool Device::acknowledge(Qp& qp)
{
    // The oldest request in flight was placed: it must be one that an ACK
    // answers (a READ or atomic is answered with its data).
    if (qp.inflight_.empty()) {
        fail(qp, MLX5_CQE_SYNDROME_BAD_RESP_ERR, true);
        return false;
    }
    const Qp::InFlight& f = qp.inflight_.front();
    if (f.opcode == MLX5_OPCODE_RDMA_READ || f.opcode == MLX5_OPCODE_ATOMIC_CS || f.opcode == MLX5_OPCODE_ATOMIC_FA) {
        fail(qp, MLX5_CQE_SYNDROME_BAD_RESP_ERR, true);
        return false;
    }
    return retire_oldest(qp, 0);
}

bool Device::retire_oldest(Qp& qp, std::uint32_t byte_count)
{
    const Qp::InFlight& f = qp.inflight_.front();
    if (f.signaled)
        qp.send_cq_->push({MLX5_CQE_REQ, 0, false, f.wqe_index, byte_count, 0, qp.qpn_});
    qp.inflight_.pop_front();
    complete_leading_nops(qp);
    if (qp.inflight_.empty() && (qp.send_hold_ & Qp::kHoldLocalError)) {
        finish_local_error(qp);
        return false;
    }
    return true;
}

bool Device::take_carried_acks(Qp& qp, std::uint8_t count)
{
    for (; count; --count)
        if (!acknowledge(qp))
            return false;
    return true;
}

bool Device::handle_frame(Qp& qp, const WireHeader& h, const std::uint8_t* payload, std::size_t payload_len,
                          bool& wait_for_recv)
{
    // The receive WQE this message lands in (its data segments), or nullptr:
    // none posted (wait for one) or the queue pair failed taking it.
    auto consume_recv = [&](std::uint32_t& index) -> const mlx5_wqe_data_seg* {
        if (qp.srq_reserved_ != Qp::kNoWqe) {
            index = qp.srq_reserved_;
            qp.srq_reserved_ = Qp::kNoWqe;
        } else if (take_receive(qp, index) != Take::taken) {
            return nullptr;
        }
        if (Srq* srq = qp.srq_)
            return reinterpret_cast<const mlx5_wqe_data_seg*>(srq->mem_.get() + static_cast<std::size_t>(index) * srq->stride_ +
                                                               sizeof(mlx5_wqe_srq_next_seg));
        return reinterpret_cast<const mlx5_wqe_data_seg*>(qp.rq_.get() +
                                                           static_cast<std::size_t>(index & (qp.rq_cnt_ - 1)) * qp.rq_stride_);
    };
    auto push_receive = [&](const Cq::Entry& e) {
        qp.recv_cq_->push(e);
        count_one(qp.recv_generated_);
    };
    // The ACKs a SEND or WRITE carries count first, once, also when the
    // frame then waits for a receive buffer (and is handled again later).
    if (h.syndrome && (h.type == kSend || h.type == kWrite) && !qp.carried_acks_taken_) {
        if (!take_carried_acks(qp, h.syndrome))
            return false;
        qp.carried_acks_taken_ = true;
    }
    switch (h.type) {
    case kSend: {
        std::uint32_t index = 0;
        const mlx5_wqe_data_seg* segs = consume_recv(index);
        if (!segs) {
            wait_for_recv = true;
            return true;
        }
        const std::uint32_t max_sge = qp.srq_ ? qp.srq_->max_sge_ : qp.rq_stride_ / 16;
        // The message is in receive WQE `index`: its completion, and the ACK it owes.
        auto send_arrived = [&](std::uint32_t index) {
            push_receive({static_cast<std::uint8_t>((h.flags & kImm)          ? MLX5_CQE_RESP_SEND_IMM
                                                    : (h.flags & kInvalidate) ? MLX5_CQE_RESP_SEND_INV
                                                                              : MLX5_CQE_RESP_SEND),
                          0, (h.flags & kSolicited) != 0, static_cast<std::uint16_t>(index),
                          static_cast<std::uint32_t>(payload_len), htobe32(h.aux), qp.qpn_});
            queue_ack(qp);
            return true;
        };
        // The common case first, without the loops below: a receive of one
        // segment (the list ends after it), a message that fits, no key to
        // invalidate. The same check and placement as below; anything that
        // fails them falls through to the general code, which finds the same
        // failure and reports it.
        if (!(h.flags & kInvalidate) && be32toh(segs[0].lkey) != MLX5_INVALID_LKEY &&
            (max_sge == 1 || be32toh(segs[1].lkey) == MLX5_INVALID_LKEY) &&
            payload_len <= be32toh(segs[0].byte_count)) {
            std::uint64_t host = 0;
            if (memory_.check(be32toh(segs[0].lkey), be64toh(segs[0].addr), be32toh(segs[0].byte_count), kLocalWrite,
                              qp.srq_ ? qp.srq_->pd_ : qp.pd_, 0, &host)) {
                const Piece piece{reinterpret_cast<void*>(host), payload, payload_len};
                if (guarded_place(&piece, 1))
                    return send_arrived(index);
            }
        }
        std::uint64_t capacity = 0;
        bool ok = true;
        std::uint64_t hosts[2 * kMaxSge]; // where each segment is here (a zero-based region's are offsets); set by each
                                          // check that passed
        for (std::uint32_t i = 0; i < max_sge && be32toh(segs[i].lkey) != MLX5_INVALID_LKEY; ++i) {
            ok = ok && memory_.check(be32toh(segs[i].lkey), be64toh(segs[i].addr), be32toh(segs[i].byte_count),
                                     kLocalWrite, qp.srq_ ? qp.srq_->pd_ : qp.pd_, 0,
                                     i < std::size(hosts) ? &hosts[i] : nullptr);
            capacity += be32toh(segs[i].byte_count);
        }
        // A send that invalidates one of our keys: a key of this QP's PD (an
        // EP-scoped window: bound to this QP), else an invalid request that
        // breaks the connection with the buffer untouched.
        if (ok && payload_len <= capacity && (h.flags & kInvalidate) && !memory_.invalidate(h.aux, qp.pd_, qp.qpn_)) {
            push_receive({MLX5_CQE_RESP_ERR, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, false, static_cast<std::uint16_t>(index),
                          0, 0, qp.qpn_});
            refuse(qp, MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
            return false;
        }
        Piece pieces[2 * kMaxSge]; // an SRQ WQE's stride may hold more than kMaxSge
        std::size_t npieces = 0;
        if (ok && payload_len <= capacity) {
            std::size_t done = 0;
            for (std::uint32_t i = 0; i < max_sge && i < std::size(pieces) && done < payload_len &&
                                      be32toh(segs[i].lkey) != MLX5_INVALID_LKEY;
                 ++i) {
                const std::size_t n = std::min<std::size_t>(be32toh(segs[i].byte_count), payload_len - done);
                pieces[npieces++] = {reinterpret_cast<void*>(hosts[i]), payload + done, n};
                done += n;
            }
            // The buffer's memory may have been unmapped since it was
            // registered: then it is a protection error, as a bad key is.
            ok = guarded_place(pieces, npieces);
        }
        if (!ok || payload_len > capacity) {
            const std::uint8_t local = ok ? MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR : MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
            push_receive({MLX5_CQE_RESP_ERR, local, false, static_cast<std::uint16_t>(index), 0, 0, qp.qpn_});
            refuse(qp, MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR, local);
            return false;
        }
        return send_arrived(index);
    }
    case kWrite: {
        // The target range first: a refused write takes no receive buffer.
        std::uint64_t host = 0; // where h.addr is here (a zero-based region's are offsets)
        if (!memory_.check(h.rkey, h.addr, payload_len, kRemoteWrite, qp.pd_, qp.qpn_, &host)) {
            remote_access_error(qp); // memory untouched; broken on this side too
            return false;
        }
        std::uint32_t index = 0;
        if (h.flags & kImm) {
            if (!consume_recv(index)) {
                wait_for_recv = true;
                return true;
            }
        }
        // The last byte lands last (consumers poll on it). Memory unmapped
        // since it was registered faults: a remote access error, as a bad
        // key is; the receive buffer a WRITE with immediate took is flushed.
        const Piece piece{reinterpret_cast<void*>(host), payload, payload_len};
        if (!guarded_place(&piece, 1)) {
            if (h.flags & kImm)
                push_receive({MLX5_CQE_RESP_ERR, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, false,
                              static_cast<std::uint16_t>(index), 0, 0, qp.qpn_});
            remote_access_error(qp);
            return false;
        }
        if (h.flags & kImm)
            push_receive({MLX5_CQE_RESP_WR_IMM, 0, false, static_cast<std::uint16_t>(index),
                          static_cast<std::uint32_t>(payload_len), htobe32(h.aux), qp.qpn_});
        queue_ack(qp);
        return true;
    }
    case kReadReq: {
        // A range that passes the check may still fault (unmapped since it
        // was registered): the same remote access error. A requester that
        // pulls (fastdapl-shm) gets where the checked range is here; it
        // finds a fault itself.
        std::uint64_t host = 0;
        const bool pull = (h.flags & kPull) && qp.shm_;
        if (!memory_.check(h.rkey, h.addr, h.length, kRemoteRead, qp.pd_, qp.qpn_, &host) ||
            !send_frame(qp, kReadResp, pull ? kPull : 0, 0, pull ? host : 0, 0, 0,
                        pull ? nullptr : reinterpret_cast<const void*>(host), pull ? 0 : h.length, true)) {
            remote_access_error(qp);
            return false;
        }
        return true;
    }
    case kAtomicReq: {
        // IB: an atomic needs an 8-byte aligned target (else an invalid
        // request), and here remote read and write rights on it.
        // The word must be aligned where it is here too (a zero-based
        // region's offsets are aligned relative to its start).
        std::uint8_t syndrome = 0;
        std::uint64_t host = 0;
        if (payload_len != 16 || (h.addr & 7) != 0)
            syndrome = MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR;
        else if (!memory_.check(h.rkey, h.addr, 8, kRemoteRead | kRemoteWrite, qp.pd_, qp.qpn_, &host))
            syndrome = MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
        else if ((host & 7) != 0)
            syndrome = MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR;
        if (syndrome) {
            refuse(qp, syndrome, syndrome);
            return false;
        }
        std::uint64_t swap_add = 0, compare = 0;
        std::memcpy(&swap_add, payload, 8);
        std::memcpy(&compare, payload + 8, 8);
        swap_add = be64toh(swap_add);
        compare = be64toh(compare);
        // Atomic with respect to every other atomic on this word, whichever
        // queue pair or process issues it.
        auto* target = reinterpret_cast<std::uint64_t*>(host);
        std::uint64_t original = compare;
        if (h.flags & kCompareSwap)
            __atomic_compare_exchange_n(target, &original, swap_add, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        else
            original = __atomic_fetch_add(target, swap_add, __ATOMIC_SEQ_CST);
        send_frame(qp, kReadResp, 0, 0, 0, 0, 0, &original, sizeof original);
        return true;
    }
    case kAck:
        qp.peer_busy_polls_ = (h.flags & kPolling) != 0;
        return acknowledge(qp);
    case kLaneWanted: // only where a lane can be: a connected TCP queue pair
        if (qp.shm_ || qp.datagram_ || payload_len != 0) {
            fail(qp, MLX5_CQE_SYNDROME_BAD_RESP_ERR, true);
            return false;
        }
        ask_for_lane(qp, false);
        return true;
    case kReadResp: {
        if (qp.inflight_.empty()) {
            fail(qp, MLX5_CQE_SYNDROME_BAD_RESP_ERR, true);
            return false;
        }
        Qp::InFlight& f = qp.inflight_.front();
        const bool is_read = f.opcode == MLX5_OPCODE_RDMA_READ || f.opcode == MLX5_OPCODE_ATOMIC_CS ||
                             f.opcode == MLX5_OPCODE_ATOMIC_FA; // answered with the data
        if (is_read != (h.type == kReadResp) || (is_read && payload_len != f.length && !(h.flags & kPull))) {
            fail(qp, MLX5_CQE_SYNDROME_BAD_RESP_ERR, true);
            return false;
        }
        if (is_read && (qp.send_hold_ & Qp::kHoldPulledRead) && qp.inflight_.size() == 1) {
            // The READ this side pulls is the last one in flight (nothing
            // went out after it): once it is at the front, this answer is
            // its, and must say so (and carry nothing).
            if (!(h.flags & kPull) || payload_len != 0 || f.opcode != MLX5_OPCODE_RDMA_READ) {
                fail(qp, MLX5_CQE_SYNDROME_BAD_RESP_ERR, true);
                return false;
            }
            if (!pull_read(qp, f, h.addr))
                return false;
            qp.send_hold_ &= ~Qp::kHoldPulledRead;
        } else if (is_read && (h.flags & kPull)) { // not asked for
            fail(qp, MLX5_CQE_SYNDROME_BAD_RESP_ERR, true);
            return false;
        } else if (is_read) {
            Piece pieces[kMaxSge];
            std::size_t done = 0;
            for (std::uint32_t i = 0; i < f.nsge; ++i) {
                pieces[i] = {reinterpret_cast<void*>(f.sge[i].addr), payload + done, f.sge[i].length};
                done += f.sge[i].length;
            }
            // Local memory unmapped since it was registered: this READ
            // fails with a protection error, and the connection with it.
            if (!guarded_place(pieces, f.nsge)) {
                fail(qp, MLX5_CQE_SYNDROME_LOCAL_PROT_ERR, true);
                return false;
            }
        }
        return retire_oldest(qp, f.length); // a read's CQE counts its bytes
    }
    case kWritePull: {
        // A large WRITE on fastdapl-shm: the key checked as for kWrite, then
        // this side copies the initiator's segments (in its memory) into the
        // checked range, the last byte last. A malformed list, or one from a
        // peer this side cannot read, ends the connection.
        PullSegment segments[kMaxSge];
        std::size_t count = 0;
        std::uint64_t total = 0;
        if (!qp.shm_ || !qp.shm_->can_pull() ||
            !decode_pull_segments(payload, payload_len, kMaxSge, kMaxMessageSize, segments, count, total)) {
            fail(qp, MLX5_CQE_SYNDROME_BAD_RESP_ERR, true);
            return false;
        }
        std::uint64_t host = 0;
        if (!memory_.check(h.rkey, h.addr, total, kRemoteWrite, qp.pd_, qp.qpn_, &host)) {
            remote_access_error(qp); // memory untouched; broken on this side too
            return false;
        }
        std::uint32_t index = 0;
        if ((h.flags & kImm) && !consume_recv(index)) {
            wait_for_recv = true;
            return true;
        }
        const iovec into{reinterpret_cast<void*>(host), static_cast<std::size_t>(total)};
        iovec from[kMaxSge];
        for (std::size_t i = 0; i < count; ++i)
            from[i] = {reinterpret_cast<void*>(segments[i].addr), static_cast<std::size_t>(segments[i].length)};
        if (!pull_last_byte_last(qp.shm_->peer(), &into, 1, from, count)) {
            // Whose memory faulted: this side's range, unmapped since it was
            // registered, is a remote access error (as for kWrite); else the
            // initiator's segments were, a local protection error there (as
            // its own copy would have found); other errors: the peer is gone
            // or may no longer be read.
            std::uint8_t syndrome = MLX5_CQE_SYNDROME_REMOTE_OP_ERR;
            if (errno == EFAULT)
                syndrome = check_mapped(host, total, true) == RangeFault::none ? MLX5_CQE_SYNDROME_LOCAL_PROT_ERR
                                                                               : MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
            if (h.flags & kImm)
                push_receive({MLX5_CQE_RESP_ERR, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, false,
                              static_cast<std::uint16_t>(index), 0, 0, qp.qpn_});
            refuse(qp, syndrome, syndrome);
            return false;
        }
        if (h.flags & kImm)
            push_receive({MLX5_CQE_RESP_WR_IMM, 0, false, static_cast<std::uint16_t>(index),
                          static_cast<std::uint32_t>(total), htobe32(h.aux), qp.qpn_});
        queue_ack(qp);
        return true;
    }
    case kDisconnect:
        fail(qp, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, false); // orderly: the peer's DISCONNECTED
        return false;
    case kNak:
        fail(qp, h.syndrome ? h.syndrome : static_cast<std::uint8_t>(MLX5_CQE_SYNDROME_REMOTE_OP_ERR), true);
        return false;
    }
    return false;
}

void Device::queue_pulled_write(Qp& qp, bool imm_flag, std::uint64_t raddr, std::uint32_t rkey, std::uint32_t imm,
                                std::uint32_t count)
{
    PullSegment segments[kMaxSge];
    for (std::uint32_t i = 0; i < count; ++i) {
        const iovec& v = qp.direct_send_.iov[1 + i];
        segments[i] = {reinterpret_cast<std::uintptr_t>(v.iov_base), v.iov_len};
    }
    std::uint8_t encoded[kMaxSge * kPullSegmentBytes];
    encode_pull_segments(segments, count, encoded);
    send_frame(qp, kWritePull, imm_flag ? kImm : 0, 0, raddr, rkey, imm, encoded,
               static_cast<std::uint32_t>(count * kPullSegmentBytes));
}

bool Device::pull_read(Qp& qp, const Qp::InFlight& f, std::uint64_t source)
{
    iovec into[kMaxSge];
    for (std::uint32_t i = 0; i < f.nsge; ++i)
        into[i] = {reinterpret_cast<void*>(f.sge[i].addr), f.sge[i].length};
    const iovec from{reinterpret_cast<void*>(source), f.length};
    if (pull_last_byte_last(qp.shm_->peer(), into, f.nsge, &from, 1))
        return true;
    // Whose memory faulted: this side's, unmapped since it was registered,
    // is a local protection error (as the fault guard finds); else the
    // responder's (unmapped, or an address it should not have named) is a
    // remote access error. Other errors: the peer is gone or may no longer
    // be read.
    std::uint8_t syndrome = MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR;
    if (errno == EFAULT) {
        syndrome = MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
        for (std::uint32_t i = 0; i < f.nsge; ++i)
            if (f.sge[i].length && check_mapped(f.sge[i].addr, f.sge[i].length, true) != RangeFault::none)
                syndrome = MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
    }
    fail(qp, syndrome, true);
    return false;
}

void Device::complete_leading_nops(Qp& qp)
{
    while (!qp.inflight_.empty() &&
           (qp.inflight_.front().opcode == MLX5_OPCODE_NOP || qp.inflight_.front().opcode == MLX5_OPCODE_UMR)) {
        const Qp::InFlight& f = qp.inflight_.front();
        if (f.signaled)
            qp.send_cq_->push({MLX5_CQE_REQ, 0, false, f.wqe_index, 0, 0, qp.qpn_});
        qp.inflight_.pop_front();
    }
}

std::uint8_t Device::execute_window_bind(const Qp& qp, const std::uint8_t* wqe, std::uint32_t ds)
{
    // The shape: a free is 8 segments (control, UMR control, mkey
    // context), a bind 12 (and one KLM, padded to 64 bytes). The UMR
    // control segment says which, and must say it consistently.
    if (ds != fastpath::SendQueue::kWindowFreeDs && ds != fastpath::SendQueue::kWindowBindDs)
        return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
    mlx5_wqe_ctrl_seg ctrl;
    mlx5_wqe_umr_ctrl_seg umr;
    mlx5_wqe_mkey_context_seg mkey;
    std::memcpy(&ctrl, wqe, sizeof ctrl);
    std::memcpy(&umr, wqe + 16, sizeof umr);
    std::memcpy(&mkey, wqe + 16 + sizeof umr, sizeof mkey);
    const bool bind = ds == fastpath::SendQueue::kWindowBindDs;
    const std::uint64_t mask = be64toh(umr.mkey_mask);
    const bool type2 = (mask & MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN) != 0;
    constexpr std::uint8_t kKnownFlags = MLX5_WQE_UMR_CTRL_FLAG_INLINE | MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET |
                                         MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE | MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN;
    constexpr std::uint64_t kBindMask =
        MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN | MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR |
        MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE | MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ |
        MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE | MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC;
    const std::uint64_t want = MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE | MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY |
                               (type2 ? MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN : 0) | (bind ? kBindMask : 0);
    const std::uint8_t want_free = bind ? 0 : MLX5_WQE_MKEY_CONTEXT_FREE;
    if (!(umr.flags & MLX5_WQE_UMR_CTRL_FLAG_INLINE) || (umr.flags & ~kKnownFlags) || mask != want ||
        be16toh(umr.klm_octowords) != (bind ? 4 : 0) || umr.translation_offset != 0 || mkey.free != want_free ||
        ((umr.flags & MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE) && !(bind && type2)) ||
        ((umr.flags & MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN) && (bind || !type2)))
        return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
    const std::uint32_t qpn_mkey = be32toh(mkey.qpn_mkey);
    const std::uint32_t new_key = (be32toh(ctrl.imm) & ~0xffu) | (qpn_mkey & 0xffu);
    // A bound type 2 window names its queue pair: this one; otherwise all ones.
    const std::uint32_t for_qpn = qpn_mkey >> 8;
    if (for_qpn != ((type2 && bind) ? qp.qpn_ : 0xffffffu))
        return MLX5_CQE_SYNDROME_MW_BIND_ERR;
    std::uint64_t addr = 0, length = 0;
    std::uint32_t region = 0, access = 0;
    bool zero_based = false;
    if (bind) {
        mlx5_wqe_umr_klm_seg klm;
        std::memcpy(&klm, wqe + 16 + sizeof umr + sizeof mkey, sizeof klm);
        length = be64toh(mkey.len);
        addr = be64toh(klm.address);
        region = be32toh(klm.mkey);
        const std::uint64_t start = be64toh(mkey.start_addr);
        zero_based = start != addr;
        // One KLM covers the window: its length; the window starts at its
        // address, or at 0. Remote read and write only (no window atomics here).
        constexpr std::uint8_t kRights =
            MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ | MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE;
        if (length == 0 || length != be32toh(klm.byte_count) || (zero_based && start != 0) ||
            (mkey.access_flags & ~kRights))
            return MLX5_CQE_SYNDROME_MW_BIND_ERR;
        access = ((mkey.access_flags & MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ) ? kRemoteRead : 0u) |
                 ((mkey.access_flags & MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE) ? kRemoteWrite : 0u);
    }
    const bool require_free = (umr.flags & MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE) != 0;
    if (!memory_.bind_window_request(new_key, qp.pd_, type2 ? 2 : 1, require_free, region, addr, length, access,
                                     qp.qpn_, zero_based))
        return MLX5_CQE_SYNDROME_MW_BIND_ERR;
    return 0;
}

void Device::finish_local_error(Qp& qp)
{
    const Qp::InFlight& f = qp.local_error_wqe_;
    qp.send_cq_->push({MLX5_CQE_REQ_ERR, qp.local_error_syndrome_, false, f.wqe_index, 0, 0, qp.qpn_});
    qp.send_hold_ &= ~Qp::kHoldLocalError;
    fail(qp, qp.local_error_syndrome_, false); // a local error breaks the connection
}

// The queue pair enters the error state: the oldest in-flight request gets
// `syndrome` if the failure is the requester's, everything else is flushed,
// and the connection is closed.
void Device::fail(Qp& qp, std::uint8_t syndrome, bool requester_error)
{
    if (requester_error && !qp.inflight_.empty()) {
        const Qp::InFlight& f = qp.inflight_.front();
        qp.send_cq_->push({MLX5_CQE_REQ_ERR, syndrome, false, f.wqe_index, 0, 0, qp.qpn_});
        qp.inflight_.pop_front();
    }
    const bool was_ready = qp.state() == QpState::ready;
    qp.state_.store(QpState::error, std::memory_order_release);
    if (was_ready && qp.on_ended_ && !qp.ended_reported_) {
        qp.ended_reported_ = true;
        qp.on_ended_(qp.on_ended_context_, syndrome == MLX5_CQE_SYNDROME_WR_FLUSH_ERR && !requester_error);
    }
    close_wire(qp, true);
    qp.shm_.reset();
    qp.out_.clear();
    qp.out_sent_ = 0;
    qp.direct_send_.count = qp.direct_send_.first = 0;
    qp.direct_send_.lane_count = qp.direct_send_.lane_first = 0;
    qp.in_.clear();
    qp.direct_ = {};
    flush_all(qp);
}

void Device::close_wire(Qp& qp, bool shut_down)
{
    for (int* fd : {&qp.fd_, &qp.lane_fd_}) {
        if (*fd < 0)
            continue;
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, *fd, nullptr);
        if (shut_down)
            ::shutdown(*fd, SHUT_RDWR);
        ::close(*fd);
        *fd = -1;
    }
}

// Completes every outstanding request and receive with a flush error, in order.
void Device::flush_all(Qp& qp)
{
    if (qp.send_hold_ & Qp::kHoldLocalError) { // the connection failed first: it is flushed with the rest
        qp.inflight_.push_back(qp.local_error_wqe_);
    }
    qp.send_hold_ = 0; // a pulled READ's hold ends with it
    qp.inflight_.for_each([&](const Qp::InFlight& f) {
        qp.send_cq_->push({MLX5_CQE_REQ_ERR, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, false, f.wqe_index, 0, 0, qp.qpn_});
    });
    qp.inflight_.clear();
    const std::uint32_t mask = qp.sq_cnt_ - 1;
    const std::uint16_t published = static_cast<std::uint16_t>(load_be32(&qp.dbrec_[MLX5_SND_DBR]));
    while (static_cast<std::uint16_t>(qp.sq_next_) != published) {
        const auto* ctrl = reinterpret_cast<const mlx5_wqe_ctrl_seg*>(qp.sq_.get() + static_cast<std::size_t>(qp.sq_next_ & mask) * 64);
        const std::uint32_t ds = be32toh(ctrl->qpn_ds) & 0x3f;
        qp.send_cq_->push({MLX5_CQE_REQ_ERR, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, false,
                           static_cast<std::uint16_t>(be32toh(ctrl->opmod_idx_opcode) >> 8), 0, 0, qp.qpn_});
        // Never past what was published (a WQE may claim more than it has).
        const std::uint32_t left = static_cast<std::uint16_t>(published - static_cast<std::uint16_t>(qp.sq_next_));
        qp.sq_next_ += std::min(left, std::max<std::uint32_t>(1, (ds * 16 + 63) / 64));
    }
    // Receives: only the buffers this queue pair holds. SRQ WQEs it has not
    // taken stay on the SRQ for the others.
    if (qp.srq_) {
        if (qp.srq_reserved_ != Qp::kNoWqe) {
            qp.recv_cq_->push({MLX5_CQE_RESP_ERR, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, false,
                               static_cast<std::uint16_t>(qp.srq_reserved_), 0, 0, qp.qpn_});
            count_one(qp.recv_generated_);
            qp.srq_reserved_ = Qp::kNoWqe;
        }
        return;
    }
    const std::uint16_t posted = static_cast<std::uint16_t>(load_be32(&qp.dbrec_[MLX5_RCV_DBR]));
    while (static_cast<std::uint16_t>(qp.rq_next_) != posted) {
        qp.recv_cq_->push({MLX5_CQE_RESP_ERR, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, false,
                           static_cast<std::uint16_t>(qp.rq_next_), 0, 0, qp.qpn_});
        ++qp.rq_next_;
        count_one(qp.recv_taken_); // a flush consumes it too
        count_one(qp.recv_generated_);
    }
}

} // namespace fastdapl::softnic
