// The softnic device kind: the software NIC (src/softnic) runs the mlx5
// queues that src/fastpath writes, over one TCP stream per queue pair.
// Control plane: SoftnicPath (softnic.cpp). Data path: the inline
// functions below, reached through data_path.hpp.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "../device_path.hpp"
#include "../ep.hpp"
#include "../evd.hpp"
#include "../ia.hpp"
#include "../srq.hpp"
#include "device.hpp" // softnic
#include "address_handles.hpp"
#include "mlx5_reader.hpp"
#include "queues.hpp" // fastpath

#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace fastdapl::core {

// Sends up to this size go out from the posting thread (when the queue pair
// is idle); larger ones are the engine thread's: copying them in the caller
// would delay it more than a wake-up costs.
inline constexpr std::uint64_t kSoftnicCallerSendLimit = 64 * 1024;
static_assert(kDatagramSendOpcode == softnic::kDatagramSendOpcode);
static_assert(kMaxUdMessageSize <= softnic::kMaxDatagramPayload);

struct SoftnicEpQueues : EpQueues {
    softnic::Device* device = nullptr;
    softnic::Qp* qp = nullptr;
    bool caller_sends = true; // a post on an idle queue pair is sent from the caller's thread
    fastpath::SendQueue sq;
    fastpath::RecvQueue rq;
    std::vector<fastpath::SendSlot> send_slots;
    std::vector<std::uint64_t> recv_cookies;
    // A UD endpoint: its datagram queue pair's UDP port (host order) and the
    // IA's address handles.
    std::uint16_t datagram_port = 0;
    const AddressHandles* address_handles = nullptr;
};

struct SoftnicCompletions : EvdCompletions {
    softnic::Device* device = nullptr;
    softnic::Cq* cq = nullptr;
    fastpath::CompletionQueue view;
    const std::atomic<Ep*>* eps = nullptr; // the IA's endpoints by queue pair number - kFirstQpn
};

struct SoftnicSrqRing : SrqRing {
    softnic::Device* device = nullptr;
    softnic::Srq* srq = nullptr;
    fastpath::SharedReceiveQueue queue;
    std::vector<std::uint64_t> cookies;
};

class SoftnicPath : public DevicePath {
public:
    // `shm`: the fastdapl-shm kind (processes of one host, shared-memory
    // rings); else TCP.
    SoftnicPath(const sockaddr_storage& address, bool shm);
    ~SoftnicPath() override;

    std::unique_ptr<ConnectionManager> make_connections(Ia& ia) override;
    void limit_ia_attr(DAT_IA_ATTR& attr) const override;
    bool ib_extensions() const override { return true; }
    bool atomics() const override { return true; }
    bool ud_endpoints() const override { return true; }
    void* make_address_handle(Ep& ep, const sockaddr_storage& peer, std::uint32_t qpn, std::uint16_t udp_port,
                              const void* route) override;
    bool free_address_handle(void* ah) override { return address_handles_.free(ah); }
    void expect_datagrams(Ep& ep, const sockaddr_storage& peer, std::uint32_t qpn, std::uint16_t udp_port,
                          bool expect) override;
    bool high_watermarks() const override { return true; }
    bool split_pz() const override { return true; }
    DAT_RETURN create_pd(Pz& pz) override;
    void destroy_pd(Pz&) override {}
    DAT_RETURN register_memory(Lmr& lmr, std::uint64_t addr, std::uint64_t length) override;
    void deregister_memory(Lmr& lmr) override;
    DAT_RETURN create_completions(Evd& evd) override;
    DAT_RETURN resize_completions(Evd& evd, DAT_COUNT qlen) override;
    void destroy_completions(Evd& evd) override;
    void watch_completions(Evd&, bool) override {} // the softnic's notification triggers the CNO
    DAT_RETURN create_queues(Ep& ep) override;
    void destroy_queues(Ep& ep) override;
    bool apply_watermarks(Ep& ep) override;
    DAT_RETURN create_srq(Srq& srq) override;
    DAT_RETURN grow_srq(Srq& srq, DAT_COUNT qlen) override;
    DAT_RETURN arm_srq_limit(Srq& srq, DAT_COUNT low_watermark, bool& below_now) override;
    void destroy_srq(Srq& srq) override;
    DAT_COUNT max_rmrs() const override { return 1 << 20; }
    DAT_RETURN create_window(Rmr& rmr) override;
    DAT_RETURN bind_window(Rmr& rmr, const Lmr* lmr, const DAT_LMR_TRIPLET& range, DAT_MEM_PRIV_FLAGS privileges,
                           Ep& ep, bool& posted) override;
    void bind_failed(Rmr& rmr) override;
    void destroy_window(Rmr& rmr) override;

    softnic::Device& device() { return *device_; }

private:
    std::unique_ptr<softnic::Device> device_;
    bool shm_ = false;
    bool caller_sends_ = true;
    // Completions name their queue pair: a table indexed by its number,
    // read without a lock on every completion.
    std::unique_ptr<std::atomic<Ep*>[]> eps_ { new std::atomic<Ep*>[ softnic::kMaxQps ]() };
    AddressHandles address_handles_;
};

// --- data path ---------------------------------------------------------------------------

namespace softnic_path {

[[gnu::always_inline]] inline DAT_RETURN post_request(Ep* ep, std::uint8_t opcode, DAT_COUNT n,
                                                      const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                                                      std::uint64_t cookie, const DAT_RMR_TRIPLET* remote,
                                                      std::uint8_t ctrl_flags)
{
    auto* q = static_cast<SoftnicEpQueues*>(ep->queues);
    if (!write_request(q->sq, opcode, n, iov, total, cookie, remote, ctrl_flags)) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    // Sent from this thread rather than waking the engine's.
    q->sq.publish_only();
    if (!q->caller_sends || total > kSoftnicCallerSendLimit || !q->device->kick(q->qp))
        q->sq.wake_software_engine();
    return DAT_SUCCESS;
}

// The IB extensions' requests (not the fast path): sent as post_request's are.
// A request whose control segment carries 32 bits besides (`imm`, stored as
// given): write with immediate data, or a send that invalidates the peer's
// key (big-endian, as the device reads it).
inline DAT_RETURN post_with_immediate(Ep* ep, std::uint8_t opcode, DAT_COUNT n, const DAT_LMR_TRIPLET* iov,
                                      std::uint32_t total, std::uint64_t cookie, const DAT_RMR_TRIPLET* remote,
                                      std::uint32_t imm, std::uint8_t ctrl_flags)
{
    auto* q = static_cast<SoftnicEpQueues*>(ep->queues);
    if (!write_request(q->sq, opcode, n, iov, total, cookie, remote, ctrl_flags, imm))
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    q->sq.publish_only();
    if (!q->caller_sends || total > kSoftnicCallerSendLimit || !q->device->kick(q->qp))
        q->sq.wake_software_engine();
    return DAT_SUCCESS;
}

inline DAT_RETURN post_atomic(Ep* ep, std::uint8_t opcode, const DAT_LMR_TRIPLET& local, const DAT_RMR_TRIPLET& remote,
                              std::uint64_t swap_add, std::uint64_t compare, std::uint64_t cookie,
                              std::uint8_t ctrl_flags)
{
    auto* q = static_cast<SoftnicEpQueues*>(ep->queues);
    if (!write_atomic(q->sq, opcode, local, remote, swap_add, compare, cookie, ctrl_flags))
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    q->sq.publish_only();
    if (!q->caller_sends || !q->device->kick(q->qp))
        q->sq.wake_software_engine();
    return DAT_SUCCESS;
}

// A UD endpoint's datagram: the destination rides in the WQE's
// remote-address segment (softnic::datagram_destination, queue pair in rkey).
inline DAT_RETURN post_datagram(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                                std::uint64_t cookie, const void* ah, std::uint32_t qpn, std::uint8_t ctrl_flags)
{
    auto* q = static_cast<SoftnicEpQueues*>(ep->queues);
    DAT_RMR_TRIPLET to{};
    if (!q->address_handles || !q->address_handles->destination_of(ah, to.virtual_address))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    to.rmr_context = qpn;
    return post_with_immediate(ep, kDatagramSendOpcode, n, iov, total, cookie, &to, 0, ctrl_flags);
}

inline DAT_RETURN post_recv(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint64_t cookie)
{
    auto* q = static_cast<SoftnicEpQueues*>(ep->queues);
    if (!q->rq.post(reinterpret_cast<const fastpath::Sge*>(iov), static_cast<std::uint32_t>(n), cookie)) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    q->device->receive_posted(); // the software NIC may wait for receives
    return DAT_SUCCESS;
}

[[gnu::always_inline]] inline DAT_RETURN srq_post(Srq* srq, DAT_COUNT n, const DAT_LMR_TRIPLET* iov,
                                                  std::uint64_t cookie)
{
    auto* r = static_cast<SoftnicSrqRing*>(srq->ring);
    if (static_cast<DAT_COUNT>(r->queue.outstanding()) >= srq->max_recv_dtos ||
        !r->queue.post(reinterpret_cast<const fastpath::Sge*>(iov), static_cast<std::uint32_t>(n), cookie)) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    r->device->receive_posted();
    return DAT_SUCCESS;
}

// How the CQE reader finds things on the softnic.
struct Kind {
    using Queues = SoftnicEpQueues;
    static constexpr bool kDirect = false;
    static constexpr bool kDatagrams = true;
    static void mark_datagram(DAT_EVENT& e, Ep* ep, const mlx5_cqe64& cqe)
    {
        mark_datagram_receive(e, ep, softnic::datagram_source_qpn(cqe), softnic::datagram_source(cqe).sin_addr.s_addr);
    }
    static Ep* find(const SoftnicCompletions& c, std::uint32_t qpn)
    {
        const std::uint32_t index = qpn - softnic::kFirstQpn;
        return index < softnic::kMaxQps ? c.eps[index].load(std::memory_order_acquire) : nullptr;
    }
    static fastpath::SharedReceiveQueue& srq_queue(Srq* srq) { return static_cast<SoftnicSrqRing*>(srq->ring)->queue; }
    static void receive_reaped(SoftnicEpQueues& q) { q.qp->note_receive_reaped(); }
    // The softnic ends its connections itself.
    static void reaped(Ep*, SoftnicEpQueues&, Evd*, DAT_DTO_COMPLETION_STATUS, bool) {}
};

[[gnu::always_inline]] inline bool take_completion(Evd* evd, DAT_EVENT& e)
{
    return take_mlx5_completion<Kind>(evd, *static_cast<SoftnicCompletions*>(evd->completions), e);
}

inline DAT_COUNT ready_completions(Evd* evd, DAT_COUNT have, DAT_COUNT limit)
{
    return count_ready(static_cast<SoftnicCompletions*>(evd->completions)->view, have, limit);
}

// Lets the software NIC move (the EVD's lock not held): false when it
// found nothing to do, or another thread had it. `busy_poll`: called by
// dat_evd_dequeue, not by dat_evd_wait's spin.
inline bool progress(Evd* evd, bool busy_poll)
{
    return static_cast<SoftnicCompletions*>(evd->completions)->device->progress(busy_poll);
}

// A consumer entered dat_evd_wait (Device::consumer_polls_by).
inline void consumer_waits(Evd* evd)
{
    static_cast<SoftnicCompletions*>(evd->completions)->device->consumer_polls_by(false);
}

inline void consumer_sleeps(Evd* evd)
{
    static_cast<SoftnicCompletions*>(evd->completions)->device->consumer_sleeps();
}

inline bool requests_done(const Ep* ep)
{
    return static_cast<const SoftnicEpQueues*>(ep->queues)->sq.outstanding_bbs() == 0;
}

inline std::uint32_t receives_outstanding(const Ep* ep)
{
    return static_cast<const SoftnicEpQueues*>(ep->queues)->rq.outstanding();
}

// Buffers the endpoint holds whose completion is not generated yet.
inline DAT_COUNT receives_allocated(const Ep* ep)
{
    const auto* q = static_cast<const SoftnicEpQueues*>(ep->queues);
    const std::uint32_t completed = q->qp->receives_completed();
    return static_cast<DAT_COUNT>(ep->srq ? q->qp->receives_taken() - completed : q->rq.posted() - completed);
}

inline DAT_COUNT srq_outstanding(const Srq* srq)
{
    return static_cast<DAT_COUNT>(static_cast<const SoftnicSrqRing*>(srq->ring)->queue.outstanding());
}

inline DAT_COUNT srq_available(const Srq* srq)
{
    const auto* r = static_cast<const SoftnicSrqRing*>(srq->ring);
    return static_cast<DAT_COUNT>(r->queue.posted() - r->srq->taken());
}

inline bool srq_failed(const Srq* srq)
{
    return static_cast<const SoftnicSrqRing*>(srq->ring)->srq->failed();
}

} // namespace softnic_path

} // namespace fastdapl::core
