// The provider's object types: IA, PZ, LMR, EVD, EP, PSP, CR.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "device.hpp" // softnic
#include "object.hpp"
#include "queues.hpp" // fastpath
#include "rdma_cm.hpp"
#include "socket_cm.hpp"
#include "discovery.hpp"
#include "verbs_device.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fastdapl::core {

class Evd;
class Ep;
class Psp;
class Cno;
class Srq;

// Endpoints by queue pair number for devices whose numbers are not small
// (verbs: 24 bits): open addressing, written under the IA's lock, read
// without one on every completion. A removed entry keeps its number with
// no endpoint, so probes pass over it; an insert reuses the first such.
class QpnTable {
public:
    static constexpr std::uint32_t kSize = 1u << 17; // twice the endpoints an IA offers
    void insert(std::uint32_t qpn, Ep* ep)
    {
        std::lock_guard lock(mutex_);
        Slot* reuse = nullptr;
        for (std::uint32_t i = hash(qpn);; i = (i + 1) & (kSize - 1)) {
            Slot& s = slots_[i];
            const std::uint32_t k = s.qpn.load(std::memory_order_relaxed);
            if (k == qpn) {
                s.ep.store(ep, std::memory_order_release);
                return;
            }
            if (!reuse && (k == kEmpty || !s.ep.load(std::memory_order_relaxed)))
                reuse = &s;
            if (k == kEmpty)
                break;
        }
        reuse->ep.store(nullptr, std::memory_order_relaxed);
        reuse->qpn.store(qpn, std::memory_order_release);
        reuse->ep.store(ep, std::memory_order_release);
    }
    void erase(std::uint32_t qpn)
    {
        std::lock_guard lock(mutex_);
        for (std::uint32_t i = hash(qpn);; i = (i + 1) & (kSize - 1)) {
            const std::uint32_t k = slots_[i].qpn.load(std::memory_order_relaxed);
            if (k == qpn)
                slots_[i].ep.store(nullptr, std::memory_order_release);
            if (k == qpn || k == kEmpty)
                return;
        }
    }
    Ep* find(std::uint32_t qpn) const
    {
        for (std::uint32_t i = hash(qpn);; i = (i + 1) & (kSize - 1)) {
            const std::uint32_t k = slots_[i].qpn.load(std::memory_order_acquire);
            if (k == qpn)
                return slots_[i].ep.load(std::memory_order_acquire);
            if (k == kEmpty)
                return nullptr;
        }
    }

private:
    static constexpr std::uint32_t kEmpty = ~0u; // qpns have 24 bits
    static std::uint32_t hash(std::uint32_t qpn) { return (qpn * 2654435761u) >> 15; }
    struct Slot {
        std::atomic<std::uint32_t> qpn{kEmpty};
        std::atomic<Ep*> ep{nullptr};
    };
    std::mutex mutex_;
    std::unique_ptr<Slot[]> slots_{new Slot[kSize]};
};

class Ia : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_IA;

    std::string name;
    sockaddr_storage address{};
    std::atomic<DAT_IA_HANDLE> consumer_handle{nullptr}; // as the hosting registry names it (found lazily)
    std::unique_ptr<softnic::Device> device;  // softnic IAs
    std::unique_ptr<verbs::Device> verbs;     // verbs IAs (rdma-core device and port)
    std::unique_ptr<cm::RdmaCm> rdma_cm;      // verbs IAs' connection manager
    QpnTable verbs_eps;                       // verbs IAs: endpoints by queue pair number
    // verbs IAs on an mlx5 device with the direct path chosen: CQs, QPs and
    // SRQs are created through mlx5dv and posted/polled by src/fastpath.
    bool mlx5_direct = false;
    // Provider-specific attributes (dat_ia_query): names and values, and
    // the DAT_NAMED_ATTRs that point into them.
    std::vector<std::pair<std::string, std::string>> specific;
    std::vector<DAT_NAMED_ATTR> specific_attrs;
    bool inline_sends = true; // a post on an idle QP is sent from the caller's thread
    Evd* async_evd = nullptr;
    bool owns_async_evd = false;
    std::atomic<int> children{0}; // live consumer objects, for a graceful close
    std::mutex objects_mutex;
    std::vector<Object*> objects; // the same objects, for an abrupt (cascading) close

    // Connection management: the socket CM and who its ids belong to.
    std::unique_ptr<cm::SocketCm> cm;
    // Held by the CM's callbacks for their whole run and by whoever frees a
    // connection object, so neither sees the other half done. Recursive: a
    // callback's event may run a CNO agent that calls back into the API.
    std::recursive_mutex cm_mutex;
    std::map<std::uint64_t, Psp*> listeners;  // listener id -> PSP
    std::map<std::uint64_t, Ep*> attempts;    // connect or accept id -> EP
    std::map<std::uint64_t, Ep*> connections; // verbs: rdma_cm id of an established connection -> EP
    // Completions name their queue pair: a table indexed by its number,
    // read without a lock on every completion.
    std::unique_ptr<std::atomic<Ep*>[]> eps_by_qpn{new std::atomic<Ep*>[softnic::kMaxQps]()};

    void adopt(Object* o)
    {
        std::lock_guard lock(objects_mutex);
        objects.push_back(o);
        ++children;
    }
    void forget(Object* o)
    {
        std::lock_guard lock(objects_mutex);
        std::erase(objects, o);
        --children;
    }
};

class Pz : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_PZ;
    std::uint32_t pd = 0;
    ibv_pd* verbs_pd = nullptr;
    std::atomic<int> users{0}; // LMRs, RMRs, EPs, SRQs in this PZ
};

class Lmr : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_LMR;
    Pz* pz = nullptr;
    DAT_MEM_TYPE mem_type = DAT_MEM_TYPE_VIRTUAL;
    DAT_REGION_DESCRIPTION region{};
    DAT_VLEN length = 0;
    DAT_MEM_PRIV_FLAGS privileges = DAT_MEM_PRIV_NONE_FLAG;
    DAT_VA_TYPE va_type = DAT_VA_TYPE_VA;
    std::uint32_t key = 0; // softnic memory key (lmr_context, and rmr_context when remote access is granted)
    ibv_mr* mr = nullptr;  // verbs: lkey is the lmr_context, rkey the rmr_context
    bool remote = false;
    std::atomic<int> users{0}; // RMRs bound to it, LMRs registered on top of it
};

class Evd : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_EVD;
    DAT_EVD_FLAGS flags = DAT_EVD_DEFAULT_FLAG;
    DAT_COUNT qlen = 0;
    bool enabled = true;
    bool waitable = true;
    bool is_async = false; // the IA's async EVD: freed with the IA
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<DAT_EVENT> events;
    int waiters = 0;
    std::uint64_t unwaitable_epoch = 0; // bumped to release waiters
    bool aborted = false;               // the IA closed abruptly under a waiter
    std::atomic<bool> overflow_reported{false}; // DAT_ASYNC_ERROR_EVD_OVERFLOW goes out once
    std::atomic<int> users{0};          // EPs and PSPs that report here

    // DTO stream: one software-NIC CQ serves every EP that reports here.
    softnic::Cq* cq = nullptr;
    fastpath::CompletionQueue cq_view;
    std::atomic<Cno*> cno{nullptr}; // notified of new events while enabled and not waited on

    // DTO stream on a verbs device: its CQ, and work completions polled
    // ahead of the consumer (to count them for wait thresholds).
    ibv_cq* verbs_cq = nullptr;
    ibv_comp_channel* verbs_channel = nullptr; // this CQ's alone: a waiter sleeps on its fd
    int wake_fd = -1;         // eventfd: wakes a waiter sleeping on the channel for other events
    bool fd_waiting = false;  // a waiter sleeps on the fds (not on cv)
    std::vector<ibv_wc> polled;
    std::uint32_t polled_head = 0, polled_count = 0;
    // mlx5 direct: verbs_cq is DV-owned and read through cq_view (as the
    // softnic's); armed by hand (cq_view.arm), never by ibv_req_notify_cq.
    bool direct = false;
};

// Consumer notification object: wakes one waiter per trigger, calls (and
// detaches) its proxy agent, or makes its eventfd readable.
class Cno : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_CNO;
    std::mutex mutex;
    std::condition_variable cv;
    DAT_OS_WAIT_PROXY_AGENT agent{nullptr, nullptr};
    int fd = -1;                    // dat_cno_fd_create: an eventfd, else -1
    int pending = 0;                // triggers not yet taken by a waiter (merged: 0 or 1)
    Evd* last_trigger = nullptr;    // for dat_cno_trigger and the waiters' hint
    int waiters = 0;
    std::uint64_t release_epoch = 0; // bumped when the IA closes or its last EVD goes
    std::atomic<int> users{0};       // EVDs that feed it
};

class Psp : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_PSP;
    DAT_CONN_QUAL conn_qual = 0;
    Evd* evd = nullptr;
    DAT_PSP_FLAGS flags = DAT_PSP_CONSUMER_FLAG;
    std::uint64_t listener_id = 0;
    // A reserved service point: its one endpoint, and whether its single
    // connection request has come.
    Ep* reserved_ep = nullptr;
    std::atomic<bool> fired{false};
};

// An RSP is a PSP bound to one endpoint that takes one request; only its
// handle type differs.
class Rsp : public Psp {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_RSP;
};

class Cr : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_CR;
    Psp* psp = nullptr;
    Ep* ep = nullptr; // the RSP's endpoint, for a request on an RSP
    std::uint64_t request_id = 0;
    sockaddr_storage remote{};
    DAT_CONN_QUAL conn_qual = 0;
    std::uint32_t private_data_size = 0;
    std::uint8_t private_data[cm::kMaxPrivateData] = {};
};

// Shared receive queue: the device's ring, the fast path's view of it, and
// the cookies its WQEs carry.
class Srq : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_SRQ;
    Pz* pz = nullptr;
    softnic::Srq* device_srq = nullptr;
    ibv_srq* verbs_srq = nullptr;
    // verbs: receives posted and completions reaped (the device's take is
    // not visible to software). A receive's wr_id names its slot, which
    // holds the cookie; free slots wait in a ring with one writer each way
    // (the poster takes, the reaper, under lock_completions, gives back).
    std::atomic<std::uint32_t> verbs_posted{0}, verbs_reaped{0};
    std::atomic<bool> verbs_failed{false}; // IBV_EVENT_SRQ_ERR
    std::vector<std::uint64_t> verbs_cookies;
    std::vector<std::uint32_t> verbs_free;
    std::atomic<std::uint32_t> verbs_free_head{0}, verbs_free_tail{0};
    bool direct = false; // mlx5 direct: verbs_srq's ring is `queue` (posted by us, not ibv_post_srq_recv)
    fastpath::SharedReceiveQueue queue;
    std::vector<std::uint64_t> cookies;
    DAT_COUNT max_recv_dtos = 0; // what the consumer may have outstanding (posted, not reaped)
    DAT_COUNT max_recv_iov = 0;
    std::atomic<DAT_COUNT> low_watermark{DAT_SRQ_LW_DEFAULT};
    std::atomic<int> users{0}; // endpoints attached
    // Completions hand WQEs back from whichever EVD reaps them: one at a
    // time. Posting does not take it (the queue is safe against one poster).
    std::atomic_flag completing = ATOMIC_FLAG_INIT;
    void lock_completions()
    {
        while (completing.test_and_set(std::memory_order_acquire))
            completing.wait(true, std::memory_order_relaxed);
    }
    void unlock_completions()
    {
        completing.clear(std::memory_order_release);
        completing.notify_one();
    }
};

class Ep : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_EP;
    Pz* pz = nullptr;
    Srq* srq = nullptr; // receives come from here (dat_ep_create_with_srq); fixed for life
    Evd* recv_evd = nullptr;
    Evd* request_evd = nullptr;
    Evd* connect_evd = nullptr;
    DAT_EP_ATTR attr{};
    std::atomic<DAT_EP_STATE> state{DAT_EP_STATE_UNCONNECTED};
    softnic::Qp* qp = nullptr;
    // verbs: the queue pair, and a ring of what each posted request was
    // (wr_id is its sequence number; a signalled completion retires every
    // earlier one). Receives carry the consumer's cookie as wr_id.
    ibv_qp* verbs_qp = nullptr;
    struct VerbsSend {
        std::uint64_t cookie;
        std::uint32_t length;
        std::uint32_t operation; // DAT_DTOS
    };
    std::vector<VerbsSend> verbs_sends;
    std::uint64_t verbs_send_posted = 0, verbs_send_retired = 0;
    std::uint32_t verbs_recv_posted = 0, verbs_recv_reaped = 0;
    std::vector<std::uint64_t> verbs_recv_cookies; // own receive queue: completes in order
    std::uint32_t verbs_max_inline = 0;
    // mlx5 direct: verbs_qp's queues are `sq` and `rq` below; its thread
    // domain and the parent domain over the PZ give it a doorbell register
    // of its own (so posts on different EPs never share one).
    bool direct = false;
    ibv_td* direct_td = nullptr;
    ibv_pd* direct_pd = nullptr;
    std::uint64_t rdma_cm_id = 0; // the rdma_cm connection, kept until reset or free
    fastpath::SendQueue sq;
    fastpath::RecvQueue rq;
    std::vector<fastpath::SendSlot> send_slots;
    std::vector<std::uint64_t> recv_cookies;
    std::uint64_t cm_id = 0;
    sockaddr_storage remote{}; // IPv4, or IPv6 on verbs IAs
    DAT_CONN_QUAL remote_port = 0;
    // Receive watermarks (dat_ep_set_watermark; for an SRQ endpoint also
    // max_recv_dtos and srq_soft_hw at creation). DAT_WATERMARK_INFINITE: none.
    DAT_COUNT soft_watermark = DAT_WATERMARK_INFINITE;
    DAT_COUNT hard_watermark = DAT_WATERMARK_INFINITE;
    // Private data of the last connection event, kept while the consumer may read it.
    std::uint32_t event_pdata_size = 0;
    std::uint8_t event_pdata[cm::kMaxPrivateData] = {};
};

} // namespace fastdapl::core
