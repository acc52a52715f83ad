// The software NIC: executes mlx5 send/receive queues and writes mlx5 CQEs,
// moving data over one stream socket per queue pair, with RC semantics.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "memory_table.hpp"
#include "queues.hpp" // SoftwareDoorbell
#include "shm_link.hpp"
#include "spin_lock.hpp" // fastpath

#include <infiniband/mlx5dv.h>
#include <netinet/in.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace fastdapl::softnic {

struct WireHeader; // a frame's header, decoded (device.cpp)

// A byte buffer that grows without zeroing what is copied over next (a
// std::vector zeroes on resize, and with an allocator that does not, it
// relocates byte by byte). Its capacity stays after clear().
class Bytes {
public:
    std::uint8_t* data() { return bytes_.get(); }
    const std::uint8_t* data() const { return bytes_.get(); }
    std::size_t size() const { return size_; }
    void clear() { size_ = 0; }
    // New bytes are left as they are.
    void resize(std::size_t n)
    {
        if (n > capacity_)
            grow(n);
        size_ = n;
    }
    void push_back(std::uint8_t byte)
    {
        resize(size_ + 1);
        bytes_[size_ - 1] = byte;
    }

private:
    void grow(std::size_t n)
    {
        const std::size_t capacity = std::max({n, 2 * capacity_, std::size_t{256}});
        auto bytes = std::make_unique_for_overwrite<std::uint8_t[]>(capacity);
        if (size_)
            std::memcpy(bytes.get(), bytes_.get(), size_);
        bytes_ = std::move(bytes);
        capacity_ = capacity;
    }
    std::unique_ptr<std::uint8_t[]> bytes_;
    std::size_t size_ = 0, capacity_ = 0;
};

// Bytes of one message the wire accepts; larger frames break the connection.
inline constexpr std::uint32_t kMaxMessageSize = 1u << 30;
inline constexpr std::uint32_t kMaxSge = 16;
inline constexpr std::uint32_t kFirstQpn = 0x100;
inline constexpr std::uint32_t kMaxQps = 1u << 16; // qpn - kFirstQpn indexes a consumer's table

class Device;

// Datagram queue pairs (the IB extension's UD endpoints): one UDP socket per
// queue pair. A datagram send is this opcode (mlx5's LSO number, an opcode
// only UD queues take there) with a remote-address segment naming the
// destination (datagram_destination: address and port in raddr, the
// destination queue pair number in rkey). Each receive buffer starts with
// a GRH-sized prefix, as on IB; a datagram larger than the buffer it would
// take, from a peer not added to the queue pair, or for another queue pair
// is dropped (counted).
inline constexpr std::uint8_t kDatagramSendOpcode = 0x0e;
inline constexpr std::uint32_t kGrhSize = 40;
inline constexpr std::uint32_t kMaxDatagramPayload = 4096; // the IB MTU the IA reports

// The remote-address segment's fields for a datagram to `to` (IPv4).
inline std::uint64_t datagram_destination(const sockaddr_in& to)
{
    return static_cast<std::uint64_t>(ntohl(to.sin_addr.s_addr)) << 16 | ntohs(to.sin_port);
}
inline sockaddr_in datagram_address(std::uint64_t destination)
{
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(static_cast<std::uint32_t>(destination >> 16));
    to.sin_port = htons(static_cast<std::uint16_t>(destination & 0xffff));
    return to;
}
// The sender of a datagram receive's CQE: its queue pair number is in
// flags_rqpn (as on mlx5), its address and port where mlx5 puts a
// timestamp (the softnic writes none).
inline std::uint32_t datagram_source_qpn(const mlx5_cqe64& cqe)
{
    return be32toh(cqe.flags_rqpn) & 0xffffff;
}
inline sockaddr_in datagram_source(const mlx5_cqe64& cqe)
{
    sockaddr_in from{};
    from.sin_family = AF_INET;
    const auto* t = reinterpret_cast<const std::uint8_t*>(&cqe.timestamp);
    std::memcpy(&from.sin_addr.s_addr, t, 4);
    std::memcpy(&from.sin_port, t + 4, 2);
    return from;
}

// A completion queue in the mlx5 layout (64-byte CQEs).
class Cq {
public:
    const mlx5dv_cq& descriptor() const { return dv_; }
    bool overflowed() const { return overflowed_.load(std::memory_order_relaxed); }

    // Called on the engine's thread after it wrote CQEs (to wake a waiter).
    // With `interest`, only while that word is nonzero (someone waits or
    // watches) or the CQ overflowed: its owner raises the word, fences
    // (seq_cst), then looks at the CQ; the device writes CQEs, fences, then
    // reads the word, so that one of the two sees the other's store.
    void set_notify(void (*notify)(void*), void* context, std::atomic<std::uint32_t>* interest = nullptr)
    {
        notify_context_ = context;
        interest_ = interest;
        notify_.store(notify, std::memory_order_release);
    }

private:
    friend class Device;
    struct Entry {
        std::uint8_t opcode;     // MLX5_CQE_*
        std::uint8_t syndrome;   // error CQEs
        bool solicited;
        std::uint16_t wqe_counter;
        std::uint32_t byte_cnt;
        std::uint32_t imm_be;    // as it goes into imm_inval_pkey
        std::uint32_t qpn;
        // datagram receives: the sender (network byte order for the address)
        std::uint32_t src_qpn = 0;
        std::uint32_t src_addr = 0;
        std::uint16_t src_port = 0;
    };
    bool push(const Entry& e); // false when full: the CQ overflowed

    std::unique_ptr<std::uint8_t, void (*)(void*)> mem_{nullptr, &std::free};
    __be32 dbrec_[2] = {0, 0};
    std::uint32_t cnt_ = 0;
    std::uint32_t log_ = 0;
    std::uint32_t pi_ = 0;
    std::atomic<bool> overflowed_{false};
    mlx5dv_cq dv_{};
    std::atomic<void (*)(void*)> notify_{nullptr};
    void* notify_context_ = nullptr;
    std::atomic<std::uint32_t>* interest_ = nullptr; // not const: TSan builds read it with an RMW
    bool pushed_ = false; // since the last notification
    bool* attention_ = nullptr; // the device's cq_attention_, raised by every push
    bool* overflow_seen_ = nullptr; // the device's, raised when a push finds the CQ full
    bool overflow_handled_ = false;
};

// A shared receive queue in the mlx5 layout: each WQE is a next segment
// (linking the free list software keeps) followed by data segments; the
// doorbell record counts posts (16 bits). Queue pairs created on it take
// WQEs as messages arrive, following the links from the head.
class Srq {
public:
    const mlx5dv_srq& descriptor() const { return dv_; }
    std::uint32_t wqe_cnt() const { return cnt_; }
    std::uint32_t max_sge() const { return max_sge_; }
    // WQEs queue pairs have taken since creation (free-running).
    std::uint32_t taken() const { return taken_.load(std::memory_order_acquire); }
    bool failed() const { return failed_.load(std::memory_order_acquire); }

    // Called on the engine's thread, with the device busy: the armed limit
    // was crossed (Device::arm_srq_limit); the SRQ entered the error state.
    void set_callbacks(void (*on_limit)(void*), void (*on_error)(void*), void* context)
    {
        on_limit_ = on_limit;
        on_error_ = on_error;
        callback_context_ = context;
    }

private:
    friend class Device;
    std::unique_ptr<std::uint8_t, void (*)(void*)> mem_{nullptr, &std::free};
    __be32 dbrec_[1] = {0};
    std::uint32_t pd_ = 0; // receive buffers are checked against it, not the queue pair's
    std::uint32_t cnt_ = 0, stride_ = 0, max_sge_ = 0;
    mlx5dv_srq dv_{};
    // engine state (under the device's mutex)
    std::uint32_t head_ = 0;  // the WQE the next arriving message takes
    std::uint32_t limit_ = 0; // armed limit: an event when fewer are left; 0 = none
    std::atomic<std::uint32_t> taken_{0};
    std::atomic<bool> failed_{false};
    void (*on_limit_)(void*) = nullptr;
    void (*on_error_)(void*) = nullptr;
    void* callback_context_ = nullptr;
};

// Adds one to a count that has one writer at a time (the engine under the
// device's mutex, or the one EVD that reaps a queue pair's receives): a
// published plain increment, no locked instruction.
inline void count_one(std::atomic<std::uint32_t>& count)
{
    count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

// "No mark" for a queue pair's receive watermarks (DAT_WATERMARK_INFINITE).
inline constexpr std::int32_t kNoWatermark = -1;

enum class QpState { reset, ready, error };

class Qp {
public:
    const mlx5dv_qp& descriptor() const { return dv_; }
    std::uint32_t qpn() const { return qpn_; }
    std::uint32_t max_inline() const { return max_inline_; }
    QpState state() const { return state_.load(std::memory_order_acquire); }
    bool datagram() const { return datagram_; }
    // Datagrams dropped at this queue pair (malformed, unknown sender, no
    // buffer or one too small).
    std::uint32_t datagrams_dropped() const { return datagrams_dropped_.load(std::memory_order_relaxed); }

    // Called once, on the engine's thread, when the connection ends: with
    // true for an orderly close by the peer, false for an error.
    void set_on_ended(void (*fn)(void*, bool orderly), void* context)
    {
        on_ended_context_ = context;
        on_ended_ = fn;
    }

    // Receive accounting (free-running counts). A buffer is taken when a
    // message starts to arrive for it (from the SRQ), or is consumed by one
    // (own receive queue); its completion is generated when the message has
    // landed, or it is flushed; software reports when it reaped that.
    Srq* srq() const { return srq_; }
    std::uint32_t receives_taken() const { return recv_taken_.load(std::memory_order_acquire); }
    std::uint32_t receives_completed() const { return recv_generated_.load(std::memory_order_acquire); }
    void note_receive_reaped() { count_one(recv_reaped_); } // by the EVD that reaps them
    // Soft mark: `on_soft` runs once (engine thread) when more buffers than
    // the mark were taken and not completed; Device::set_watermarks arms it.
    void set_on_soft_watermark(void (*on_soft)(void*), void* context)
    {
        on_soft_ = on_soft;
        on_soft_context_ = context;
    }

private:
    friend class Device;
    struct InFlight {
        std::uint16_t wqe_index = 0;
        std::uint8_t opcode = 0;
        bool signaled = false;
        std::uint32_t length = 0;
        std::uint32_t nsge = 0;
        // READ: where the response goes; the first nsge are set (left
        // unzeroed: 256 bytes to clear for every small send otherwise).
        fastpath::Sge sge[kMaxSge];
    };

    std::uint32_t qpn_ = 0;
    std::uint32_t pd_ = 0;
    Cq* send_cq_ = nullptr;
    Cq* recv_cq_ = nullptr;
    std::unique_ptr<std::uint8_t, void (*)(void*)> sq_{nullptr, &std::free};
    std::unique_ptr<std::uint8_t, void (*)(void*)> rq_{nullptr, &std::free};
    __be32 dbrec_[2] = {0, 0};
    std::uint32_t sq_cnt_ = 0, rq_cnt_ = 0, rq_stride_ = 0, max_inline_ = 0;
    mlx5dv_qp dv_{};
    Srq* srq_ = nullptr;
    static constexpr std::uint32_t kNoWqe = ~0u;
    std::uint32_t srq_reserved_ = kNoWqe; // SRQ WQE taken by a message still arriving
    std::atomic<std::uint32_t> recv_taken_{0}, recv_generated_{0}, recv_reaped_{0};
    std::atomic<std::int32_t> soft_mark_{kNoWatermark}, hard_mark_{kNoWatermark};
    void (*on_soft_)(void*) = nullptr;
    void* on_soft_context_ = nullptr;

    // engine state (under the device's mutex)
    std::atomic<QpState> state_{QpState::reset};
    int fd_ = -1;
    // On a fastdapl-shm IA the frames go through shared-memory rings; fd_
    // is then the Unix socket beside them (wake-ups and the end).
    std::unique_ptr<ShmLink> shm_;
    // fastdapl-tcp: a second connection to the peer's queue pair (attach_lane),
    // or -1. A large RDMA WRITE goes half over each: one TCP connection on
    // loopback carries 5-5.6 GB/s here, two 6.6-7 (README).
    int lane_fd_ = -1;
    std::chrono::steady_clock::time_point lane_due_{}; // a striped WRITE came first: when the lane must be here
    // Lanes are opened when first wanted (Device::want_lanes): the name the
    // device's lane request gives this queue pair's connection (0: it takes
    // no lane), whether it was requested, and whether the peer asked for
    // one before lane_key_ was known.
    std::uint64_t lane_key_ = 0;
    bool lane_asked_ = false;
    bool lane_peer_asked_ = false;
    // The peer's last ACK said its consumer busy-polls (kPolling): large
    // WRITEs are striped when either side polls (Device::stripes).
    bool peer_busy_polls_ = false;
    std::uint32_t sq_next_ = 0; // next basic block to execute
    std::uint32_t rq_next_ = 0; // next receive WQE to consume
    // Requests sent and not completed, oldest first: a ring that doubles
    // when full, so a queue pair's steady state allocates nothing (a deque
    // of these allocated and freed a node per request).
    class InFlightRing {
    public:
        bool empty() const { return head_ == tail_; }
        std::size_t size() const { return tail_ - head_; }
        InFlight& front() { return slots_[head_ & mask_]; }
        void pop_front() { ++head_; }
        // Copies the segments in use only (a small send has none: 256
        // bytes of scatter list were copied for each before).
        void push_back(const InFlight& f)
        {
            if (slots_.empty() || tail_ - head_ > mask_) [[unlikely]]
                regrow(std::max<std::size_t>(2 * slots_.size(), 16));
            InFlight& slot = slots_[tail_++ & mask_];
            slot.wqe_index = f.wqe_index;
            slot.opcode = f.opcode;
            slot.signaled = f.signaled;
            slot.length = f.length;
            slot.nsge = f.nsge;
            std::copy_n(f.sge, f.nsge, slot.sge);
        }
        void clear() { head_ = tail_; }
        template <typename Fn> void for_each(Fn&& fn) const
        {
            for (std::size_t i = head_; i != tail_; ++i)
                fn(slots_[i & mask_]);
        }

    private:
        void regrow(std::size_t capacity)
        {
            std::vector<InFlight> slots(capacity);
            for (std::size_t i = head_; i != tail_; ++i)
                slots[i - head_] = slots_[i & mask_];
            tail_ -= head_;
            head_ = 0;
            slots_ = std::move(slots);
            mask_ = capacity - 1;
        }
        std::vector<InFlight> slots_;
        std::size_t mask_ = 0; // slots_.size() - 1 (a power of two), kept: the size divides by sizeof(InFlight)
        std::size_t head_ = 0, tail_ = 0; // free-running
    };
    InFlightRing inflight_;
    // Why the send queue takes no more WQEs for now (one byte, so that the
    // post path tests one thing): a WQE that failed a local check waits
    // for the older ones in flight to complete, so completions stay in
    // order, then the QP fails (kHoldLocalError); a READ the responder
    // lent its memory for (cross-memory attach) holds everything after it
    // until it was pulled, so that no later request changes that memory
    // first, as no later request could on a device (kHoldPulledRead).
    static constexpr std::uint8_t kHoldLocalError = 1, kHoldPulledRead = 2;
    std::uint8_t send_hold_ = 0;
    InFlight local_error_wqe_{};
    std::uint8_t local_error_syndrome_ = 0;
    // A SEND or WRITE that is large, or of kIdleDirectMin and up with
    // nothing in flight (a ping-pong), goes out from the consumer's
    // segments (sendmsg, or into the ring of fastdapl-shm), ahead of what
    // out_ holds after it: no gather and output buffer copies. The memory stays the provider's until the request
    // completes, after the peer's ACK.
    // A direct send also carries what the output buffer held unsent when it
    // started (acknowledgements, up to this many bytes): one write for both.
    static constexpr std::size_t kCarriedMax = 8 * 24;
    struct DirectSend {
        std::uint8_t prefix[kCarriedMax + 24]; // carried bytes, then the frame's header
        iovec iov[kMaxSge + 1];
        std::uint32_t count = 0, first = 0; // iov[first..count) is unsent
        // A striped WRITE's second part, for the lane.
        iovec lane_iov[kMaxSge];
        std::uint32_t lane_count = 0, lane_first = 0;
        bool busy() const { return first < count || lane_first < lane_count; }
    } direct_send_;
    Bytes out_;
    std::size_t out_sent_ = 0;
    bool output_pending() const { return direct_send_.busy() || out_sent_ < out_.size(); }
    // What is unsent is acknowledgements only: a polling consumer leaves
    // them for its next post or round (one send for the ACK and the reply).
    bool out_acks_only_ = false;
    bool acks_held_ = false; // a consumer's round held them back (no EPOLLOUT for them)
    // TCP: a large message came in since this side last sent. A socket that
    // sends soon after it received is taken by the kernel for an interactive
    // one, whose ACKs it delays to ride on data, and a bulk sender on the
    // other side then waits for them: after sending, the ACKs are asked to
    // go at once again (TCP_QUICKACK, which the kernel resets by itself).
    bool quickack_owed_ = false;
    // The last frame read started a large WRITE: the next is read header
    // first (Device::receive).
    bool expect_large_ = false;
    std::vector<std::uint8_t> in_;
    // A large WRITE being read from the socket straight into its target:
    // where the next byte goes and how many are still to come (its last
    // byte included, which is placed last).
    // A refused one is read and dropped, then NAKed: the requester has sent
    // it all by then, and reads the NAK rather than a reset connection.
    // A striped one (kStriped) has its second part on the lane: `remaining`
    // counts both parts, `lane_remaining` the lane's, whose end is the
    // WRITE's last byte. Over TCP the last byte is read with the bytes
    // before it, into `tail` (the kernel never writes it into the target),
    // and stored at `tail_at` once everything else has landed: no system
    // call of its own.
    struct DirectWrite {
        std::uint8_t* to = nullptr;
        std::size_t remaining = 0;
        bool refused = false;
        std::uint8_t* lane_to = nullptr;
        std::size_t lane_remaining = 0;
        bool striped = false;            // the last byte is the lane part's (which may end first)
        std::uint8_t* tail_at = nullptr; // set once `tail` holds the last byte
        std::uint8_t tail = 0;
    } direct_;
    std::uint32_t epoll_mask_ = 0;
    bool waiting_for_recv_ = false; // a complete message has no receive buffer yet
    bool carried_acks_taken_ = false; // that message's carried ACKs counted already
    void (*on_ended_)(void*, bool) = nullptr;
    void* on_ended_context_ = nullptr;
    bool ended_reported_ = false;
    enum class Drain : std::uint8_t { none, requests, goodbye };
    Drain drain_ = Drain::none; // a graceful disconnect in progress (or asked for before connect)
    bool goodbye_owed_ = false; // disconnected before connect(): it says goodbye on the socket
    // A datagram queue pair: fd_ is its UDP socket; it takes datagrams from
    // these senders only (address and port in network byte order; port 0:
    // any port and queue pair at that address).
    struct DatagramPeer {
        std::uint32_t addr;
        std::uint16_t port;
        std::uint32_t qpn;
    };
    bool datagram_ = false;
    // Nonzero: the queue pair takes address vectors (set_datagram_qkey).
    std::uint32_t datagram_qkey_ = 0;
    sockaddr_in datagram_local_{};
    std::vector<DatagramPeer> datagram_peers_;
    std::atomic<std::uint32_t> datagrams_dropped_{0};
};

class Device {
public:
    Device();
    ~Device();
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    MemoryTable& memory() { return memory_; }
    std::uint32_t alloc_pd() { return next_pd_.fetch_add(1) ; }

    Cq* create_cq(std::uint32_t min_entries);
    // A new ring of at least `min_entries`, holding the CQEs software has not
    // consumed yet (its consumer index, as published, starts again at 0).
    // False, and nothing changed, when they would not fit or memory is short.
    bool resize_cq(Cq* cq, std::uint32_t min_entries);
    void destroy_cq(Cq* cq);
    // With `srq`, receives come from it and `rq_wqes` is ignored.
    Qp* create_qp(std::uint32_t pd, Cq* send_cq, Cq* recv_cq, std::uint32_t sq_wqes, std::uint32_t rq_wqes,
                  std::uint32_t max_sge, std::uint32_t max_inline, Srq* srq = nullptr);
    // Flushes what is outstanding (if connected) and frees the queue pair.
    void destroy_qp(Qp* qp);

    // The queue pair sends and receives over `fd` (a connected stream
    // socket the device now owns) and moves to the ready state. False when
    // it did not take `fd` (the caller closes it): the queue pair was
    // disconnected first (the peer is told goodbye on `fd`), or `fd` cannot
    // be watched (the connection ends broken: on_ended reports it).
    // `shm`: fd is a Unix stream socket to a process on this host, and the
    // frames go through shared-memory rings set up over it (ShmLink).
    bool connect(Qp* qp, int fd, bool shm = false);
    // Gives connected TCP queue pair `qp` its lane (a second stream to the
    // same peer queue pair, which has one too): large RDMA WRITEs are
    // split over both from then on, and the peer's striped ones are read
    // from it. False when it did not take `fd` (the caller closes it): not
    // connected over TCP, a lane already, or ended.
    bool attach_lane(Qp* qp, int fd);
    // Lanes on demand: connected TCP queue pair `qp` may take a lane, under
    // `key` (not 0). The first large RDMA WRITE it sends without one asks
    // for it: `request(context, key)` runs on this side (under the device's
    // lock: it must not block; the socket CM starts a non-blocking
    // connect), and the peer is told
    // (kLaneWanted), whose device does the same for its own queue pair, so
    // that the side that can open the lane (the connection's active side)
    // opens it whichever side wants it. Once per queue pair.
    // Takes the device's lock: after it returns, the old request is not
    // running and will not run.
    void set_lane_request(void (*request)(void* context, std::uint64_t key), void* context);
    void want_lanes(Qp* qp, std::uint64_t key);
    // RDMA WRITEs sent split over a lane (for tests).
    std::uint64_t striped_writes() const { return striped_writes_.load(std::memory_order_relaxed); }
    // Makes `qp` a datagram queue pair on a UDP socket bound to `local`'s
    // address (any port), ready at once; `bound` is its address. False when
    // the socket cannot be made (or `qp` is connected already).
    bool open_datagrams(Qp* qp, const sockaddr_in& local, sockaddr_in& bound);
    // Datagrams from queue pair `qpn` at `peer` are taken from now on; with
    // port 0 in `peer`, from any port and queue pair at its address (while
    // an exchange with it is under way: its answer may race the exchange's
    // end), until removed (one such entry per remove).
    void add_datagram_peer(Qp* qp, const sockaddr_in& peer, std::uint32_t qpn);
    void remove_datagram_peer(Qp* qp, const sockaddr_in& peer, std::uint32_t qpn);
    // Makes datagram queue pair `qp` one that sends as an mlx5 UD queue pair
    // does (for the software mlx5 device, tests/fake_mlx5): a SEND whose
    // datagram segment (mlx5_wqe_datagram_seg, the extended address vector)
    // names the destination by its IPv4-mapped GID and queue pair number,
    // with `qkey` (nonzero). Such a destination is a queue pair of this
    // device (loopback, as a NIC delivers to its own GID): a datagram queue
    // pair bound to that address, taking address vectors with the same
    // qkey; a segment naming anything else is dropped and counted. It takes
    // datagrams from any such queue pair of this device (no peer list).
    // False when `qp` is not a datagram queue pair or `qkey` is 0.
    bool set_datagram_qkey(Qp* qp, std::uint32_t qkey);

    // Breaks the connection: every outstanding WQE completes as flushed.
    // The peer is told it was deliberate (its side ends orderly), also when
    // connect() comes later.
    void disconnect(Qp* qp);
    // Lets every posted request complete, then ends the connection orderly
    // (the on_ended callback reports it); receives then flush. Before
    // connect(), it takes effect as soon as the queue pair is connected.
    void disconnect_gracefully(Qp* qp);

    // A shared receive queue of at least `min_wqes` WQEs (plus the one the
    // free list keeps) of `max_sge` data segments each.
    Srq* create_srq(std::uint32_t pd, std::uint32_t min_wqes, std::uint32_t max_sge);
    // A larger ring holding the same WQEs at the same indices (completions
    // in flight still name them); software links the new ones. False, and
    // nothing changed, if memory is short. Never shrinks.
    bool grow_srq(Srq* srq, std::uint32_t min_wqes);
    // Only once no queue pair uses it.
    void destroy_srq(Srq* srq);
    // Arms the SRQ's limit (0 disarms). True when fewer than `limit` WQEs are
    // posted and not taken already: then it is not armed; the caller reports.
    bool arm_srq_limit(Srq* srq, std::uint32_t limit);
    // Sets a queue pair's receive watermarks (kNoWatermark: none). True when
    // the soft mark is exceeded already: then it is not armed; the caller
    // reports. An exceeded hard mark breaks a connected queue pair at once.
    bool set_watermarks(Qp* qp, std::int32_t soft, std::int32_t hard);

    // A receive was posted: wakes the engine if a message waits for one.
    // (Unordered with the engine's look: a post it misses is seen on its
    // next round, 200 ms at the latest.)
    void receive_posted()
    {
        if (receiver_waiting_.load(std::memory_order_relaxed)) {
            const std::uint64_t one = 1;
            [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
        }
    }

    // Doorbell wiring for fastpath::SendQueue.
    fastpath::SoftwareDoorbell doorbell() { return {&sleeping_, wake_fd_}; }

    // One round of work on the caller's thread (the consumer polls), if the
    // engine thread is not busy with it already. While consumers poll, the
    // engine thread leaves the sockets and the posts to them: it no longer
    // wakes for arriving data or doorbells (a wake-up and a lock hand-off
    // per message), and takes over again when polling stops for
    // kConsumerQuietMs or a consumer says it sleeps.
    // False when it found nothing to do, or another thread had the device.
    bool progress(bool busy_poll = true)
    {
        consumer_polls_by(busy_poll);
        consumer_polls_.store(consumer_polls_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return progress_as_consumer();
    }
    // How the consumer moves the device: busy polling (dat_evd_dequeue), or
    // not (dat_evd_wait, which may find its event at once and never poll).
    void consumer_polls_by(bool busy_poll)
    {
        if (consumer_busy_polls_.load(std::memory_order_relaxed) != busy_poll)
            consumer_busy_polls_.store(busy_poll, std::memory_order_relaxed);
    }
    // A consumer that polled goes to sleep (dat_evd_wait): the engine thread
    // watches the sockets again at once, so nothing waits for its look.
    void consumer_sleeps()
    {
        // Counted first, then the engine's flag read (it sets the flag, then
        // reads the count): one of the two sees the other.
        consumer_left_.store(consumer_left_.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
        if (engine_yields_.load(std::memory_order_seq_cst)) {
            const std::uint64_t one = 1;
            [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
        }
    }
    // How long the engine thread leaves the sockets alone after the last poll.
    static constexpr int kConsumerQuietMs = 1;
    // The engine thread sleeps this long at most when idle.
    static constexpr int kEngineSleepMs = 200;
    // Times the engine's sleep ended by its timeout with frames of a
    // fastdapl-shm peer waiting in a ring: their writer did not wake it.
    std::uint32_t late_wakeups() const { return late_wakeups_.load(std::memory_order_relaxed); }
    // Puts what `qp`'s send queue holds on the wire from the caller's thread
    // (a post), saving the engine thread's wake-up, when nothing of this QP
    // is in flight. False when it did not (busy QP, or another thread holds
    // the engine): ring the doorbell then.
    bool kick(Qp* qp);

private:
    void run();
    bool progress_as_consumer();
    // What a polling consumer's look at the device (held) finds to do:
    // nothing (a busy poll that finds nothing costs this look alone), only
    // frames in shared-memory rings or ACKs to send (ring_round_locked), or
    // a whole round (progress_locked).
    enum class Look { quiet, rings, round };
    Look consumer_look_locked();
    static bool ring_only(const Qp& qp);
    void ring_round_locked();
    // Calls the notification of every CQ that CQEs were written to.
    void notify_pushed();
    // The same for the `n` CQs `cqs` (one may come twice): those written to
    // since their last notification and wanted (Cq::set_notify).
    static void notify_cqs(Cq* const* cqs, std::size_t n);
    // Fails the queue pairs of every CQ that overflowed since the last
    // look; true when there was one.
    bool handle_overflows();
    // A polling consumer asks the sockets of empty rings whether the peer
    // is gone in every kShmSocketLook-th look (no system call in the
    // others); the engine thread reads the socket whenever it looks.
    static constexpr std::uint32_t kShmSocketLook = 1024;
    // `consumer`: on a polling consumer's thread (it may hold back ACKs).
    bool progress_locked(bool consumer = false);
    bool execute_send_queue(Qp& qp);
    bool receive(Qp& qp);
    // A datagram queue pair's arrivals (receive's counterpart).
    bool receive_datagrams(Qp& qp);
    // Sends one datagram of `payload` to the destination a WQE names.
    void send_datagram(Qp& qp, std::uint64_t destination, std::uint32_t dest_qpn, const std::uint8_t* payload,
                       std::uint32_t length);
    // Sends one datagram to the queue pair of this device that address
    // vector `av` names (set_datagram_qkey), or drops and counts it.
    void send_to_address_vector(Qp& qp, const mlx5_wqe_av& av, const std::uint8_t* payload, std::uint32_t length);
    // The datagram queue pair of this device that takes address vectors
    // with `qkey`, numbered `qpn`, bound to `addr` (network byte order).
    Qp* address_vector_qp(std::uint32_t qpn, std::uint32_t qkey, std::uint32_t addr) const;
    // Handles the complete frames of qp.in_; false when the queue pair
    // failed (or the frames stop for good).
    bool parse_frames(Qp& qp);
    // Handles the complete frames of `in` (qp.in_'s bytes, or bytes just
    // read while qp.in_ is empty): how many bytes it took; a large WRITE
    // begun takes all (start_direct).
    std::size_t parse_frames(Qp& qp, const std::uint8_t* in, std::size_t size);
    // A large WRITE to (addr, rkey, length) whose first `n` payload bytes
    // arrived with its header: checked, then read into its target (or
    // dropped and refused).
    void start_direct(Qp& qp, std::uint64_t addr, std::uint32_t rkey, std::uint32_t length,
                      const std::uint8_t* arrived, std::size_t n, bool striped = false);
    // A request refused: the peer is told `told` (a NAK, sent at once), and
    // the queue pair fails with `here`.
    void refuse(Qp& qp, std::uint8_t told, std::uint8_t here);
    void remote_access_error(Qp& qp);
    // A large WRITE the target pulls (fastdapl-shm): its frame, naming the
    // `count` segments gathered into qp.direct_send_.iov[1..].
    [[gnu::noinline]] void queue_pulled_write(Qp& qp, bool imm_flag, std::uint64_t raddr, std::uint32_t rkey,
                                              std::uint32_t imm, std::uint32_t count);
    // A pulled READ's bytes (fastdapl-shm): copied from `source` in the
    // responder's memory into the READ's segments; false when it failed
    // (and the queue pair with it).
    bool pull_read(Qp& qp, const Qp::InFlight& f, std::uint64_t source);
    // `h`: the frame's header, decoded once from a copy of where it arrived
    // (a ring the peer may still write), so that every look sees the same
    // values.
    bool handle_frame(Qp& qp, const WireHeader& h, const std::uint8_t* payload, std::size_t payload_len,
                      bool& wait_for_recv);
    // An ACK: the oldest request in flight completes. False when the queue
    // pair failed (nothing answered by an ACK was in flight, or a local
    // error waited for it).
    bool acknowledge(Qp& qp);
    // The oldest request in flight completes (a CQE if it was signalled,
    // counting `byte_count`), and the NOPs behind it; false when a local
    // error waited for it (the queue pair failed).
    bool retire_oldest(Qp& qp, std::uint32_t byte_count);
    // The ACKs a SEND or WRITE frame carried (its header's count).
    bool take_carried_acks(Qp& qp, std::uint8_t count);
    bool flush_output(Qp& qp);
    // Queues an ACK frame (the common answer: no encoding).
    void queue_ack(Qp& qp);
    // On fastdapl-shm, with nothing in flight or held back: the next WQE, if
    // it is a SEND or WRITE of inline data or of one segment of up to 16 KiB
    // (the shapes a small post has), is framed in place in the peer's ring,
    // carrying the count of the ACKs the output buffer holds. False when it
    // is not, the ring has no room, or the segment faults: execute_send_queue
    // then takes it.
    bool send_in_place(Qp& qp);
    // The wire's send and receive: the socket's, or the shared-memory
    // rings' (same results as sendmsg and recv on a non-blocking socket).
    // `registered`: the source (send) or target (receive) is a consumer's
    // memory, which may have been unmapped; the device's own buffers are not.
    ssize_t wire_send(Qp& qp, const iovec* iov, std::size_t count, bool registered);
    ssize_t wire_receive(Qp& qp, void* into, std::size_t want, bool registered);
    // After a send on TCP: TCP_QUICKACK again if a large WRITE came in since
    // the last one (Qp::quickack_owed_).
    void ask_quick_acks(Qp& qp);
    // Sends qp.direct_send_'s unsent part; false when the queue pair failed.
    bool flush_direct(Qp& qp, bool& moved);
    // Moves what follows the first `main_bytes` bytes of d's segments to
    // its lane part.
    static void split_for_lane(Qp::DirectSend& d, std::size_t main_bytes);
    // Whether a large WRITE on a queue pair with a lane is striped now:
    // while this side's consumer or, by its last ACK, the peer's busy-polls.
    bool stripes(const Qp& qp) const
    {
        return qp.peer_busy_polls_ || consumer_busy_polls_.load(std::memory_order_relaxed);
    }
    enum class Take { taken, none, failed };
    Take take_receive(Qp& qp, std::uint32_t& index);
    // Reads more of the WRITE start_direct began (taken: bytes moved).
    // `drained`: every socket it read came back short (took all there was):
    // the caller need not ask them again this round.
    Take receive_direct(Qp& qp, bool* drained = nullptr);
    // Reads up to `want` bytes of that WRITE from the lane or the main
    // stream into `to` (a scratch buffer once refused): how many, 0 for
    // none now, -1 when the queue pair failed.
    ssize_t read_part(Qp& qp, bool lane, std::uint8_t* to, std::size_t want, std::uint8_t* tail = nullptr);
    // Closes the queue pair's socket and lane (`shut_down`: ends the
    // connections too, also for copies of the descriptors a fork made).
    void close_wire(Qp& qp, bool shut_down);
    void fail(Qp& qp, std::uint8_t syndrome, bool requester_error);
    void finish_local_error(Qp& qp);
    // NOPs and window binds at the head of the in-flight list complete
    // (their requests before them have).
    void complete_leading_nops(Qp& qp);
    // A UMR WQE (`ds` segments, copied out of the ring into `wqe`) as a
    // memory-window bind or free by `qp`: 0 when done, else the syndrome of
    // its error completion (nothing changed then).
    std::uint8_t execute_window_bind(const Qp& qp, const std::uint8_t* wqe, std::uint32_t ds);
    void flush_all(Qp& qp);
    bool advance_drain(Qp& qp);
    void update_epoll(Qp& qp);
    // Queues a frame. A payload in registered memory (`registered`: a
    // READ's response) is copied under the fault guard: false, and nothing
    // queued, when reading it faulted.
    bool send_frame(Qp& qp, std::uint8_t type, std::uint8_t flags, std::uint8_t syndrome, std::uint64_t addr,
                    std::uint32_t rkey, std::uint32_t aux, const void* payload, std::uint32_t length,
                    bool registered = false);

    MemoryTable memory_;
    std::atomic<std::uint32_t> next_pd_{1};
    // Queue pair numbers: kFirstQpn + an index below kMaxQps, unique among
    // live queue pairs and reused as late as possible.
    std::vector<bool> qpn_used_ = std::vector<bool>(kMaxQps);
    std::uint32_t qpn_cursor_ = 0;
    // Held for a round of work (engine thread or a polling consumer) and by
    // the control calls; never across a sleep. A spin lock: a consumer's
    // poll takes it every time (a pthread mutex cost 60 instructions there).
    fastpath::SpinLock mutex_;
    std::vector<Qp*> qps_;
    std::vector<Cq*> cqs_;
    std::vector<Srq*> srqs_;
    Bytes gather_; // a send's bytes, gathered before they are framed
    Bytes datagram_out_; // a datagram's header and payload
    std::vector<std::uint8_t> receive_buffer_ = std::vector<std::uint8_t>(64 * 1024);
    int epoll_fd_ = -1;
    int wake_fd_ = -1;
    std::atomic<std::uint32_t> sleeping_{0};
    std::atomic<bool> receiver_waiting_{false}; // a message waits for a receive buffer
    std::atomic<bool> stop_{false};
    // Consumer polls (a count: the engine only asks whether it moved), and
    // times a consumer went to sleep while the engine thread yielded.
    std::atomic<std::uint32_t> consumer_polls_{0}, consumer_left_{0};
    std::atomic<bool> engine_yields_{false};
    std::atomic<std::uint32_t> late_wakeups_{0};
    std::atomic<std::uint64_t> striped_writes_{0};
    void (*lane_request_)(void*, std::uint64_t) = nullptr;
    void* lane_request_context_ = nullptr;
    // A lane for `qp`, once (Qp::lane_key_); `tell_peer`: this side wants
    // it, and says so with kLaneWanted.
    void ask_for_lane(Qp& qp, bool tell_peer);
    bool consumer_round_ = false; // progress_locked runs on a polling consumer's thread
    // The same, readable without the lock: the engine thread that finds the
    // device taken by a consumer's round stands aside instead of queuing
    // for it (back_off's sleeps, each a wake-up on a busy core).
    std::atomic<bool> consumer_in_round_{false};
    // How the consumer last moved the device: dat_evd_dequeue (busy poll,
    // progress(true)) or dat_evd_wait (its spin, progress(false), then
    // sleep). With both sides waiting, striping a large WRITE over a lane
    // cost a third of the bandwidth on two cores (README, "Lanes"), so it
    // is striped only while this side or the peer busy-polls. True until a
    // consumer says otherwise.
    std::atomic<bool> consumer_busy_polls_{true};
    std::uint32_t consumer_looks_ = 0;
    bool socket_turn_ = false; // this consumer round asks the sockets of empty rings whether the peer is gone
    // A CQE was written (or lost to an overflow) since the last round's
    // notifications: the next consumer look takes a whole round.
    bool cq_attention_ = false;
    bool overflow_seen_ = false; // a CQ overflowed since handle_overflows looked
    std::thread thread_;
};

} // namespace fastdapl::softnic
