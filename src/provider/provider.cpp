// libfastdapl.so.2: the DAT provider table and the calls delivered so far
// (IA, PZ, LMR, software/async EVDs, handle helpers). Calls of later work
// answer DAT_MODEL_NOT_SUPPORTED with the error class bit.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "objects.hpp"
#if FASTDAPL_HAVE_MLX5DV
#include "mlx5_queues.hpp" // the mlx5 direct path
#endif

#include <dat2/fastdapl.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#define FASTDAPL_EXPORT __attribute__((visibility("default")))

using namespace fastdapl;
using namespace fastdapl::core;

namespace {

constexpr std::uint32_t kProviderMajor = 0;
constexpr std::uint32_t kProviderMinor = 1;
constexpr DAT_COUNT kMaxEvdQlen = 1 << 20;
constexpr DAT_COUNT kMinAsyncQlen = 4096;

// One table per registered IA name; objects point at their IA's table.
struct Registration {
    DAT_PROVIDER table{};
    DAT_PROVIDER_INFO info{};
    std::string name;
    std::string ia_params;
};
std::mutex g_registrations_mutex;
std::map<std::string, std::unique_ptr<Registration>> g_registrations;

DAT_RETURN not_supported() { return error(DAT_MODEL_NOT_SUPPORTED); }

// FASTDAPL_DEBUG set: reasons for failures go to stderr.
const bool g_debug = std::getenv("FASTDAPL_DEBUG") != nullptr;

// An enum field as the integer the consumer stored: it may hold any value,
// and reading it as the enum type would be undefined for unknown ones.
template <typename E>
std::underlying_type_t<E> raw(const E& field)
{
    std::underlying_type_t<E> v;
    std::memcpy(&v, &field, sizeof v);
    return v;
}

// IA address from ia_params: an interface name ("lo", "eth0") or an IPv4
// address; empty means loopback.
bool resolve_address(const std::string& params, sockaddr_storage& out)
{
    std::string word = params.substr(0, params.find(' '));
    if (word.empty())
        word = "lo";
    auto* sin = reinterpret_cast<sockaddr_in*>(&out);
    std::memset(&out, 0, sizeof out);
    sin->sin_family = AF_INET;
    if (inet_pton(AF_INET, word.c_str(), &sin->sin_addr) == 1)
        return true;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0)
        return false;
    bool found = false;
    for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && word == i->ifa_name) {
            std::memcpy(sin, i->ifa_addr, sizeof *sin);
            found = true;
        }
    }
    freeifaddrs(list);
    return found;
}

// --- IA handles in query results ----------------------------------------------

// The IA handle a consumer holds: the registry that hosts us gave it out, and
// only it knows the mapping. Debian's registry hands out small indexes and
// takes nothing else, so the first time it is asked for, the index that
// dats_get_ia_handle maps to this IA is looked for; our registry takes the
// provider's own pointer as well, which is the answer when none is found.
using GetIaHandle = DAT_RETURN (*)(DAT_IA_HANDLE, DAT_IA_HANDLE*);

DAT_IA_HANDLE consumer_handle(Ia* ia)
{
    if (DAT_IA_HANDLE known = ia->consumer_handle.load(std::memory_order_acquire))
        return known;
    static const auto get = reinterpret_cast<GetIaHandle>(dlsym(RTLD_DEFAULT, "dats_get_ia_handle"));
    DAT_IA_HANDLE found = ia;
    constexpr std::uintptr_t kIndexesTried = 4096;
    for (std::uintptr_t i = 1; get && i < kIndexesTried; ++i) {
        DAT_IA_HANDLE real = nullptr;
        if (get(reinterpret_cast<DAT_IA_HANDLE>(i), &real) == DAT_SUCCESS && real == ia) {
            found = reinterpret_cast<DAT_IA_HANDLE>(i);
            break;
        }
    }
    ia->consumer_handle.store(found, std::memory_order_release);
    return found;
}

// --- EVD ------------------------------------------------------------------------

Evd* new_evd(Ia* ia, DAT_COUNT qlen, DAT_EVD_FLAGS flags)
{
    Evd* evd = make_object<Evd>();
    if (!evd)
        return nullptr;
    evd->provider = ia->provider;
    evd->ia = ia;
    evd->qlen = qlen;
    evd->flags = flags;
    return evd;
}

// --- CNO triggering -------------------------------------------------------------

// One trigger: a waiter wakes (or the next wait returns at once), the agent
// is called once and detached, the eventfd becomes readable.
void trigger_cno(Cno* cno, Evd* evd)
{
    DAT_OS_WAIT_PROXY_AGENT agent{nullptr, nullptr};
    {
        std::lock_guard lock(cno->mutex);
        cno->last_trigger = evd;
        cno->pending = 1; // several triggers before a wake-up merge into one
        std::swap(agent, cno->agent);
        if (cno->fd >= 0) {
            const std::uint64_t one = 1;
            [[maybe_unused]] ssize_t n = ::write(cno->fd, &one, sizeof one);
        }
        cno->cv.notify_one();
    }
    if (agent.proxy_agent_func) // outside the lock: the agent may call us
        agent.proxy_agent_func(agent.instance_data, evd);
}

// Wakes the EVD's waiter, wherever it sleeps (the EVD's lock held).
void wake_waiters(Evd* evd)
{
    evd->cv.notify_all();
    if (evd->fd_waiting) {
        const std::uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(evd->wake_fd, &one, sizeof one);
    }
}

// The CNO to trigger for a new event, read under the EVD's lock: none while
// the EVD is disabled or a thread waits on it directly.
Cno* cno_to_trigger(Evd* evd) { return evd->enabled && evd->waiters == 0 ? evd->cno.load() : nullptr; }

// Queues an event; false when the queue is full.
bool post_event(Evd* evd, const DAT_EVENT& event)
{
    Cno* cno;
    {
        std::lock_guard lock(evd->mutex);
        if (static_cast<DAT_COUNT>(evd->events.size()) >= evd->qlen)
            return false;
        evd->events.push_back(event);
        wake_waiters(evd);
        cno = cno_to_trigger(evd);
    }
    if (cno)
        trigger_cno(cno, evd);
    return true;
}

// An event on the IA's async EVD. When that EVD fills up, its own overflow
// is the last thing it reports (the spec calls that catastrophic).
void post_async(Ia* ia, DAT_EVENT_NUMBER number, DAT_HANDLE about, DAT_COUNT reason)
{
    Evd* async = ia->async_evd;
    if (!async)
        return; // opened with DAT_EVD_ASYNC_EXISTS and none given: nowhere to report
    DAT_EVENT e{};
    e.event_number = number;
    e.evd_handle = async;
    e.event_data.asynch_error_event_data.dat_handle = about;
    e.event_data.asynch_error_event_data.reason = reason;
    std::lock_guard lock(async->mutex);
    if (async->overflow_reported)
        return;
    if (static_cast<DAT_COUNT>(async->events.size()) >= async->qlen) {
        async->overflow_reported = true;
        e.event_number = DAT_ASYNC_ERROR_EVD_OVERFLOW;
        e.event_data.asynch_error_event_data.dat_handle = async;
        e.event_data.asynch_error_event_data.reason = DAT_EVD_OVERFLOW_ERROR;
    }
    async->events.push_back(e);
    wake_waiters(async);
}

// Once per EVD: events that did not fit were lost.
void report_overflow(Evd* evd)
{
    if (!evd->overflow_reported.exchange(true))
        post_async(evd->ia, DAT_ASYNC_ERROR_EVD_OVERFLOW, evd, DAT_EVD_OVERFLOW_ERROR);
}

// --- verbs IAs: the generic data path ---------------------------------------------------

// Whether an EVD has a completion queue (softnic or verbs).
bool has_cq(const Evd* evd) { return evd->cq || evd->verbs_cq; }

// Asks a verbs CQ for one event on its channel at the next completion (the
// EVD's lock held). An mlx5 CQ on the direct path is armed by hand: rdma-core
// does not know its consumer index.
void arm_cq(Evd* evd)
{
    if (evd->direct)
        evd->cq_view.arm(false);
    else
        ibv_req_notify_cq(evd->verbs_cq, 0);
}

// Events read from a verbs CQ's channel (the EVD's lock held): each moves a
// hand-armed CQ's arm sequence number on, as the device expects.
void note_cq_events(Evd* evd, unsigned events)
{
    for (unsigned i = 0; evd->direct && i < events; ++i)
        evd->cq_view.note_event();
}

// A verbs work request's wr_id: a request's sequence number shifted left
// (bit 0 clear), or a receive's slot shifted left with bit 0 set. A
// completion in error does not say its opcode, so the tag tells which.
constexpr std::uint64_t kRecvTag = 1;

DAT_DTO_COMPLETION_STATUS status_of_wc(ibv_wc_status s)
{
    switch (s) {
    case IBV_WC_SUCCESS:
        return DAT_DTO_SUCCESS;
    case IBV_WC_LOC_LEN_ERR:
        return DAT_DTO_ERR_LOCAL_LENGTH;
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_EEC_OP_ERR:
        return DAT_DTO_ERR_LOCAL_EP;
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
        return DAT_DTO_ERR_LOCAL_PROTECTION;
    case IBV_WC_WR_FLUSH_ERR:
        return DAT_DTO_ERR_FLUSHED;
    case IBV_WC_BAD_RESP_ERR:
        return DAT_DTO_ERR_BAD_RESPONSE;
    case IBV_WC_REM_ACCESS_ERR:
        return DAT_DTO_ERR_REMOTE_ACCESS;
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
        return DAT_DTO_ERR_REMOTE_RESPONDER;
    case IBV_WC_RNR_RETRY_EXC_ERR:
        return DAT_DTO_ERR_RECEIVER_NOT_READY;
    default: // retry exceeded, remote aborted, fatal: the link failed
        return DAT_DTO_ERR_TRANSPORT;
    }
}

void post_connection_end(Ep* ep, DAT_EVENT_NUMBER number);

// An error completion (not a flush): the queue pair is in the error state,
// so the connection is broken. Reported as BROKEN now, as the software NIC
// does, and the connection is ended so the peer hears of it (its rdma_cm
// DISCONNECTED then finds the EP already ended). `locked` is the EVD whose
// lock the caller holds: the event goes straight into it if it is also the
// connection EVD.
void verbs_completion_broke(Ep* ep, Evd* locked)
{
    for (DAT_EP_STATE from : {DAT_EP_STATE_CONNECTED, DAT_EP_STATE_DISCONNECT_PENDING}) {
        if (!ep->state.compare_exchange_strong(from, DAT_EP_STATE_DISCONNECTED))
            continue;
        if (ep->connect_evd == locked) {
            DAT_EVENT e{};
            e.event_number = DAT_CONNECTION_EVENT_BROKEN;
            e.evd_handle = locked;
            e.event_data.connect_event_data.ep_handle = ep;
            ep->event_pdata_size = 0;
            if (static_cast<DAT_COUNT>(locked->events.size()) < locked->qlen)
                locked->events.push_back(e);
            else
                report_overflow(locked);
            if (ep->srq)
                post_async(ep->ia, DAT_ASYNC_ERROR_EP_BROKEN, ep, DAT_EP_TRANSFER_TO_ERROR);
        } else {
            post_connection_end(ep, DAT_CONNECTION_EVENT_BROKEN);
        }
        if (ep->rdma_cm_id)
            ep->ia->rdma_cm->disconnect(ep->rdma_cm_id);
        return;
    }
}

// Every request of a verbs EP has completed (and been reaped).
bool verbs_requests_done(const Ep* ep)
{
    return ep->direct ? ep->sq.outstanding_bbs() == 0 : ep->verbs_send_posted == ep->verbs_send_retired;
}

// After a verbs EP's completion was turned into an event (either data
// path; `locked`'s lock held): an error other than a flush breaks the
// connection, and a graceful disconnect ends once its requests drained.
void verbs_completion_reaped(Ep* ep, Evd* locked, DAT_DTO_COMPLETION_STATUS status, bool request)
{
    if (status != DAT_DTO_SUCCESS && status != DAT_DTO_ERR_FLUSHED) [[unlikely]]
        verbs_completion_broke(ep, locked);
    else if (request && ep->state.load(std::memory_order_relaxed) == DAT_EP_STATE_DISCONNECT_PENDING &&
             verbs_requests_done(ep))
        ep->ia->rdma_cm->disconnect(ep->rdma_cm_id);
}

// A DTO completion event of `ep` on `evd`, its data left for the caller.
DAT_DTO_COMPLETION_EVENT_DATA& begin_dto_event(DAT_EVENT& e, Evd* evd, Ep* ep)
{
    std::memset(&e, 0, sizeof e);
    e.event_number = DAT_DTO_COMPLETION_EVENT;
    e.evd_handle = evd;
    auto& d = e.event_data.dto_completion_event_data;
    d.ep_handle = ep;
    return d;
}

// Work completions polled ahead into the EVD's buffer (its lock held).
std::uint32_t verbs_poll(Evd* evd)
{
    if (evd->polled_count == 0)
        evd->polled_head = 0;
    const auto size = static_cast<std::uint32_t>(evd->polled.size());
    const std::uint32_t end = evd->polled_head + evd->polled_count;
    if (end < size) {
        const int n = ibv_poll_cq(evd->verbs_cq, static_cast<int>(size - end), &evd->polled[end]);
        if (n > 0)
            evd->polled_count += static_cast<std::uint32_t>(n);
    }
    return evd->polled_count;
}

// A receive slot of a verbs SRQ back on its free ring (one reaper at a time).
void srq_slot_free(Srq* srq, std::uint32_t slot)
{
    const std::uint32_t tail = srq->verbs_free_tail.load(std::memory_order_relaxed);
    srq->verbs_free[tail % srq->verbs_free.size()] = slot;
    srq->verbs_free_tail.store(tail + 1, std::memory_order_release);
}

bool verbs_take_completion(Evd* evd, DAT_EVENT& e)
{
    for (;;) {
        if (evd->polled_count == 0 && verbs_poll(evd) == 0)
            return false;
        const ibv_wc wc = evd->polled[evd->polled_head];
        ++evd->polled_head;
        --evd->polled_count;
        Ep* ep = evd->ia->verbs_eps.find(wc.qp_num);
        if (wc.status != IBV_WC_SUCCESS && g_debug) [[unlikely]]
            std::fprintf(stderr, "fastdapl: completion error on qp %u: %s (vendor 0x%x), wr_id 0x%llx\n", wc.qp_num,
                         ibv_wc_status_str(wc.status), wc.vendor_err, static_cast<unsigned long long>(wc.wr_id));
        if (!ep) // its EP is gone: nothing to report the completion to
            continue;
        auto& d = begin_dto_event(e, evd, ep);
        d.status = status_of_wc(wc.status);
        if (!(wc.wr_id & kRecvTag)) {
            const std::uint64_t seq = wc.wr_id >> 1;
            const Ep::VerbsSend& s = ep->verbs_sends[seq & (ep->verbs_sends.size() - 1)];
            d.user_cookie.as_64 = s.cookie;
            d.operation = static_cast<DAT_DTOS>(s.operation);
            d.transfered_length = d.status == DAT_DTO_SUCCESS ? s.length : 0;
            if (seq + 1 > ep->verbs_send_retired) // earlier unsignalled requests are done too
                ep->verbs_send_retired = seq + 1;
        } else {
            const auto slot = static_cast<std::uint32_t>(wc.wr_id >> 1);
            if (Srq* srq = ep->srq) {
                srq->lock_completions();
                d.user_cookie.as_64 = srq->verbs_cookies[slot];
                srq_slot_free(srq, slot);
                softnic::count_one(srq->verbs_reaped);
                srq->unlock_completions();
            } else {
                d.user_cookie.as_64 = ep->verbs_recv_cookies[slot & (ep->verbs_recv_cookies.size() - 1)];
                ++ep->verbs_recv_reaped;
            }
            d.operation = DAT_DTO_RECEIVE;
            d.transfered_length = d.status == DAT_DTO_SUCCESS ? wc.byte_len : 0;
        }
        verbs_completion_reaped(ep, evd, d.status, !(wc.wr_id & kRecvTag));
        return true;
    }
}

unsigned verbs_send_flags(DAT_COMPLETION_FLAGS flags)
{
    unsigned f = 0;
    // UNSIGNALLED still completes (a non-notification event); SUPPRESS
    // leaves out the completion of a success. An unsignalled WR's error still
    // completes, and a later signalled one retires it.
    if (!(flags & DAT_COMPLETION_SUPPRESS_FLAG))
        f |= IBV_SEND_SIGNALED;
    if (flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG)
        f |= IBV_SEND_SOLICITED;
    if (flags & DAT_COMPLETION_BARRIER_FENCE_FLAG)
        f |= IBV_SEND_FENCE;
    return f;
}

// A receive work request for `slot` (own RQ or SRQ: the completion names it).
ibv_recv_wr verbs_recv_wr(std::uint32_t slot, ibv_sge* sge, DAT_COUNT n)
{
    ibv_recv_wr wr{};
    wr.wr_id = (static_cast<std::uint64_t>(slot) << 1) | kRecvTag;
    wr.sg_list = sge;
    wr.num_sge = n;
    return wr;
}

// A DAT IOV as verbs scatter/gather entries (n is checked by the caller).
void to_verbs_sges(const DAT_LMR_TRIPLET* iov, DAT_COUNT n, ibv_sge* sge)
{
    for (DAT_COUNT i = 0; i < n; ++i)
        sge[i] = {iov[i].virtual_address, static_cast<std::uint32_t>(iov[i].segment_length), iov[i].lmr_context};
}

// The generic verbs post of a request (the checks are done).
DAT_RETURN verbs_post_request(Ep* ep, std::uint8_t mlx5_opcode, DAT_COUNT n, const DAT_LMR_TRIPLET* iov,
                              std::uint64_t total, DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET* remote,
                              DAT_COMPLETION_FLAGS flags)
{
    const auto depth = static_cast<std::uint64_t>(ep->verbs_sends.size());
    if (ep->verbs_send_posted - ep->verbs_send_retired >= depth) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    ibv_sge sge[softnic::kMaxSge];
    to_verbs_sges(iov, n, sge);
    ibv_send_wr wr{};
    const std::uint64_t seq = ep->verbs_send_posted;
    wr.wr_id = seq << 1;
    wr.sg_list = sge;
    wr.num_sge = n;
    wr.send_flags = verbs_send_flags(flags);
    // Inline only what verbs can copy at post time; reads land in the list.
    if (total <= ep->verbs_max_inline && mlx5_opcode != MLX5_OPCODE_RDMA_READ && n > 0)
        wr.send_flags |= IBV_SEND_INLINE;
    DAT_DTOS operation = DAT_DTO_SEND;
    switch (mlx5_opcode) {
    case MLX5_OPCODE_RDMA_WRITE:
        wr.opcode = IBV_WR_RDMA_WRITE;
        operation = DAT_DTO_RDMA_WRITE;
        break;
    case MLX5_OPCODE_RDMA_READ:
        wr.opcode = IBV_WR_RDMA_READ;
        operation = DAT_DTO_RDMA_READ;
        break;
    default:
        wr.opcode = IBV_WR_SEND;
        break;
    }
    if (remote) {
        wr.wr.rdma.remote_addr = remote->virtual_address;
        wr.wr.rdma.rkey = remote->rmr_context;
    }
    Ep::VerbsSend& s = ep->verbs_sends[seq & (depth - 1)];
    s.cookie = cookie.as_64;
    s.length = static_cast<std::uint32_t>(total);
    s.operation = operation;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(ep->verbs_qp, &wr, &bad) != 0) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    ep->verbs_send_posted = seq + 1;
    return DAT_SUCCESS;
}

DAT_RETURN verbs_post_recv(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie)
{
    const auto depth = static_cast<std::uint32_t>(ep->verbs_recv_cookies.size());
    if (ep->verbs_recv_posted - ep->verbs_recv_reaped >= depth) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    ibv_sge sge[softnic::kMaxSge];
    to_verbs_sges(iov, n, sge);
    const std::uint32_t slot = ep->verbs_recv_posted;
    ep->verbs_recv_cookies[slot & (depth - 1)] = cookie.as_64;
    ibv_recv_wr wr = verbs_recv_wr(slot, sge, n);
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(ep->verbs_qp, &wr, &bad) != 0) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    ++ep->verbs_recv_posted;
    return DAT_SUCCESS;
}

DAT_RETURN verbs_srq_post_recv(Srq* srq, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie)
{
    const std::uint32_t head = srq->verbs_free_head.load(std::memory_order_relaxed);
    if (head == srq->verbs_free_tail.load(std::memory_order_acquire) ||
        static_cast<DAT_COUNT>(srq->verbs_posted.load(std::memory_order_relaxed) -
                               srq->verbs_reaped.load(std::memory_order_acquire)) >= srq->max_recv_dtos) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    const std::uint32_t slot = srq->verbs_free[head % srq->verbs_free.size()];
    ibv_sge sge[softnic::kMaxSge];
    to_verbs_sges(iov, n, sge);
    srq->verbs_cookies[slot] = cookie.as_64;
    ibv_recv_wr wr = verbs_recv_wr(slot, sge, n);
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_srq_recv(srq->verbs_srq, &wr, &bad) != 0) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    srq->verbs_free_head.store(head + 1, std::memory_order_release);
    softnic::count_one(srq->verbs_posted);
    return DAT_SUCCESS;
}

// --- completions ----------------------------------------------------------------------

void evd_notify(void* context)
{
    auto* evd = static_cast<Evd*>(context);
    if (evd->cq->overflowed()) // the software NIC breaks the connections that feed it
        report_overflow(evd);
    Cno* cno;
    {
        std::lock_guard lock(evd->mutex);
        wake_waiters(evd);
        cno = cno_to_trigger(evd);
    }
    if (cno)
        trigger_cno(cno, evd);
}

Ep* ep_of_qpn(Ia* ia, std::uint32_t qpn)
{
    const std::uint32_t index = qpn - softnic::kFirstQpn;
    return index < softnic::kMaxQps ? ia->eps_by_qpn[index].load(std::memory_order_acquire) : nullptr;
}

DAT_DTOS operation_of(std::uint8_t mlx5_opcode)
{
    switch (mlx5_opcode) {
    case MLX5_OPCODE_RDMA_WRITE:
    case MLX5_OPCODE_RDMA_WRITE_IMM:
        return DAT_DTO_RDMA_WRITE;
    case MLX5_OPCODE_RDMA_READ:
        return DAT_DTO_RDMA_READ;
    default:
        return DAT_DTO_SEND;
    }
}

// A receive CQE whose data the device put in the CQE (scatter-to-CQE, which
// we disable on mlx5 QPs but do not rely on): copied to the receive buffers
// before the CQE is released. The softnic never does this.
DAT_DTO_COMPLETION_STATUS scatter_from_cqe(Evd* evd, Ep* ep, const mlx5_cqe64* cqe, std::uint16_t counter)
{
    if (Srq* srq = ep->srq)
        return evd->cq_view.scatter_inline(cqe, srq->queue.segments(counter), srq->queue.max_sge());
    return evd->cq_view.scatter_inline(cqe, ep->rq.segments_of_oldest(), ep->rq.max_sge());
}

bool is_receive_cqe(std::uint8_t opcode)
{
    return opcode == MLX5_CQE_RESP_SEND || opcode == MLX5_CQE_RESP_SEND_IMM || opcode == MLX5_CQE_RESP_SEND_INV ||
           opcode == MLX5_CQE_RESP_WR_IMM || opcode == MLX5_CQE_RESP_ERR;
}

// Turns the next CQE of a CQ in the mlx5 layout into an event (the EVD's
// lock held). False when there is none. One reader for the softnic's CQs
// and mlx5 devices' (Direct: the direct path); they differ in how a CQE's
// QP number finds its EP and in who ends a connection a CQE shows broken.
template <bool Direct>
bool take_mlx5_completion(Evd* evd, DAT_EVENT& e)
{
    for (;;) {
        const mlx5_cqe64* cqe = evd->cq_view.peek();
        if (!cqe)
            return false;
        const std::uint8_t opcode = fastpath::CompletionQueue::opcode(cqe);
        const std::uint32_t qpn = be32toh(cqe->sop_drop_qpn) & 0xffffff;
        const std::uint16_t counter = be16toh(cqe->wqe_counter);
        Ep* ep = Direct ? evd->ia->verbs_eps.find(qpn) : ep_of_qpn(evd->ia, qpn);
        const bool request = opcode == MLX5_CQE_REQ || opcode == MLX5_CQE_REQ_ERR;
        // One test for the common case: a plain success (opcodes up to
        // RESP_SEND_INV are completions; resize and no-packet are not).
        // The softnic writes no other kinds of CQE than it is asked for.
        const bool attention = fastpath::CompletionQueue::needs_attention(cqe);
        const bool known = !Direct || (attention ? !fastpath::CompletionQueue::is_compressed(cqe) &&
                                                       (request || is_receive_cqe(opcode))
                                                 : opcode <= MLX5_CQE_RESP_SEND_INV);
        // Its EP is gone (or a cleaned CQE), or a CQE we never ask for
        // (compressed, resize): nothing to report it to.
        if (!ep || !known) [[unlikely]] {
            if (ep && g_debug)
                std::fprintf(stderr, "fastdapl: CQE with opcode %u, format %d on qp %u skipped\n", opcode,
                             static_cast<int>(fastpath::CompletionQueue::format(cqe)), qpn);
            evd->cq_view.consume();
            evd->cq_view.publish_consumer_index();
            continue;
        }
        auto& d = begin_dto_event(e, evd, ep);
        d.status = attention ? fastpath::CompletionQueue::status(cqe) : DAT_DTO_SUCCESS;
        if (request) {
            const fastpath::SendSlot& slot = ep->sq.slot(counter);
            d.user_cookie.as_64 = slot.cookie;
            d.operation = operation_of(slot.opcode);
            d.transfered_length = d.status == DAT_DTO_SUCCESS ? slot.length : 0;
            ep->sq.retire_through(counter);
        } else {
            if (attention && d.status == DAT_DTO_SUCCESS && fastpath::CompletionQueue::is_inline_scattered(cqe))
                [[unlikely]]
                d.status = scatter_from_cqe(evd, ep, cqe, counter);
            if (Srq* srq = ep->srq) { // the CQE names the SRQ WQE; it goes back on the free list
                srq->lock_completions();
                d.user_cookie.as_64 = srq->queue.complete(counter);
                srq->unlock_completions();
            } else {
                d.user_cookie.as_64 = ep->rq.complete_oldest();
            }
            if constexpr (!Direct)
                ep->qp->note_receive_reaped();
            d.operation = DAT_DTO_RECEIVE;
            d.transfered_length = d.status == DAT_DTO_SUCCESS ? be32toh(cqe->byte_cnt) : 0;
        }
        // Released only now: the device may reuse the entry once it is published.
        evd->cq_view.consume();
        evd->cq_view.publish_consumer_index();
        if constexpr (Direct) // the softnic ends its connections itself
            verbs_completion_reaped(ep, evd, d.status, request);
        return true;
    }
}

// Turns the next completion of a DTO EVD into an event (its lock held).
bool take_completion(Evd* evd, DAT_EVENT& e)
{
    if (evd->cq) [[likely]]
        return take_mlx5_completion<false>(evd, e);
    if (evd->direct)
        return take_mlx5_completion<true>(evd, e);
    return evd->verbs_cq ? verbs_take_completion(evd, e) : false;
}

// Events ready on an EVD, counting at most `limit` (CQEs are not consumed).
DAT_COUNT ready_events(Evd* evd, DAT_COUNT limit)
{
    DAT_COUNT n = static_cast<DAT_COUNT>(evd->events.size());
    const bool mlx5_layout = evd->cq || evd->direct; // softnic or mlx5 direct
    for (std::uint32_t k = 0; mlx5_layout && n < limit && evd->cq_view.ready_at(k); ++k)
        ++n;
    if (evd->verbs_cq && !evd->direct && n < limit)
        n += static_cast<DAT_COUNT>(verbs_poll(evd));
    return n;
}

// Completions first: a connection's DTOs complete (or flush) before its
// DISCONNECTED event is posted, and no DTO completes before ESTABLISHED.
bool take_event(Evd* evd, DAT_EVENT& e)
{
    if (take_completion(evd, e))
        return true;
    if (evd->events.empty())
        return false;
    e = evd->events.front();
    evd->events.pop_front();
    return true;
}

void post_connection_event(Ep* ep, DAT_EVENT_NUMBER number, const std::uint8_t* pdata, std::uint32_t size)
{
    if (!ep->connect_evd)
        return;
    ep->event_pdata_size = size;
    if (size)
        std::memcpy(ep->event_pdata, pdata, size);
    DAT_EVENT e{};
    e.event_number = number;
    e.evd_handle = ep->connect_evd;
    e.event_data.connect_event_data.ep_handle = ep;
    e.event_data.connect_event_data.private_data_size = static_cast<DAT_COUNT>(size);
    e.event_data.connect_event_data.private_data = size ? ep->event_pdata : nullptr;
    if (!post_event(ep->connect_evd, e))
        report_overflow(ep->connect_evd); // the event is lost; the connection is not affected
}

// --- EP --------------------------------------------------------------------------------

void release_connection(Ep* ep);

// Private data a connection message carries: the socket CM's, or what an
// IB CM REQ leaves after rdma_cm's header (the smallest of REQ/REP/REJ).
DAT_COUNT max_private_data(const Ia* ia)
{
    return static_cast<DAT_COUNT>(ia->verbs ? cm::kRdmaCmMaxPrivateData : cm::kMaxPrivateData);
}

// The INVALID_STATE subtype that names the state an EP is in now.
DAT_RETURN_SUBTYPE ep_state_subtype(DAT_EP_STATE s)
{
    switch (s) {
    case DAT_EP_STATE_UNCONNECTED: return DAT_INVALID_STATE_EP_UNCONNECTED;
    case DAT_EP_STATE_UNCONFIGURED_UNCONNECTED: return DAT_INVALID_STATE_EP_UNCONFIGURED;
    case DAT_EP_STATE_RESERVED: return DAT_INVALID_STATE_EP_RESERVED;
    case DAT_EP_STATE_UNCONFIGURED_RESERVED: return DAT_INVALID_STATE_EP_UNCONFRESERVED;
    case DAT_EP_STATE_PASSIVE_CONNECTION_PENDING: return DAT_INVALID_STATE_EP_PASSCONNPENDING;
    case DAT_EP_STATE_UNCONFIGURED_PASSIVE: return DAT_INVALID_STATE_EP_UNCONFPASSIVE;
    case DAT_EP_STATE_ACTIVE_CONNECTION_PENDING: return DAT_INVALID_STATE_EP_ACTCONNPENDING;
    case DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING: return DAT_INVALID_STATE_EP_TENTCONNPENDING;
    case DAT_EP_STATE_UNCONFIGURED_TENTATIVE: return DAT_INVALID_STATE_EP_UNCONFTENTATIVE;
    case DAT_EP_STATE_CONNECTED: return DAT_INVALID_STATE_EP_CONNECTED;
    case DAT_EP_STATE_DISCONNECT_PENDING: return DAT_INVALID_STATE_EP_DISCPENDING;
    case DAT_EP_STATE_DISCONNECTED: return DAT_INVALID_STATE_EP_DISCONNECTED;
    case DAT_EP_STATE_COMPLETION_PENDING: return DAT_INVALID_STATE_EP_COMPLPENDING;
    default: return DAT_INVALID_STATE_EP_NOTREADY;
    }
}

DAT_EP_ATTR default_ep_attr()
{
    DAT_EP_ATTR a{};
    a.service_type = DAT_SERVICE_TYPE_RC;
    a.max_message_size = softnic::kMaxMessageSize;
    a.max_rdma_size = softnic::kMaxMessageSize;
    a.qos = DAT_QOS_BEST_EFFORT;
    a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.max_recv_dtos = 64;
    a.max_request_dtos = 64;
    a.max_recv_iov = 4;
    a.max_request_iov = 4;
    a.max_rdma_read_in = 4;
    a.max_rdma_read_out = 4;
    a.srq_soft_hw = DAT_HW_DEFAULT;
    a.max_rdma_read_iov = 4;
    a.max_rdma_write_iov = 4;
    return a;
}

constexpr std::uint32_t kMaxInline = 64;
constexpr DAT_COUNT kMaxDtosPerEp = 1 << 14;
constexpr std::uint64_t kInlineSendLimit = 64 * 1024; // softnic: sent from the posting thread up to this
constexpr DAT_COUNT kMaxRdmaReadPerEp = 16;

// The end of an established connection. An SRQ endpoint also reports on
// the async EVD that it will take no more buffers from the SRQ (what IB
// calls "last WQE reached"; the reference does the same, and its dtestsrq
// waits for it): the consumer may free the endpoint then.
void post_connection_end(Ep* ep, DAT_EVENT_NUMBER number)
{
    post_connection_event(ep, number, nullptr, 0);
    if (ep->srq)
        post_async(ep->ia, DAT_ASYNC_ERROR_EP_BROKEN, ep, DAT_EP_TRANSFER_TO_ERROR);
}

void ep_connection_ended(void* context, bool orderly)
{
    // On the softnic's thread: the peer closed (orderly) or the link failed.
    // Exactly one of DISCONNECTED or BROKEN per teardown: whoever moves the
    // state first reports it.
    auto* ep = static_cast<Ep*>(context);
    for (DAT_EP_STATE from : {DAT_EP_STATE_CONNECTED, DAT_EP_STATE_DISCONNECT_PENDING}) {
        if (ep->state.compare_exchange_strong(from, DAT_EP_STATE_DISCONNECTED)) {
            post_connection_end(ep, orderly ? DAT_CONNECTION_EVENT_DISCONNECTED : DAT_CONNECTION_EVENT_BROKEN);
            return;
        }
    }
}

// A soft high watermark was crossed (softnic thread, or the setting call).
void ep_soft_watermark(void* context)
{
    auto* ep = static_cast<Ep*>(context);
    post_async(ep->ia, static_cast<DAT_EVENT_NUMBER>(FASTDAPL_ASYNC_WATERMARK_EVENT), ep,
               DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT);
}

std::int32_t device_mark(DAT_COUNT mark) { return mark == DAT_WATERMARK_INFINITE ? softnic::kNoWatermark : mark; }

std::uint32_t power_of_two_at_least(std::uint32_t n)
{
    std::uint32_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

// --- verbs IAs on mlx5 devices: the direct path ------------------------------------------
//
// Control objects are rdma-core's (the same PD, MR, rdma_cm, async events
// as the generic path); the queues of CQs, QPs and SRQs are handed to
// src/fastpath through mlx5dv (src/verbs/mlx5_queues) and posted and polled
// there, as the softnic's are: take_completion reads both.

// Runs `fn` with the EP's EVDs locked (no poll runs) and its SRQ's
// completions held: how a queue pair's CQEs are cleaned before it goes.
template <class Fn>
void with_completions_held(Ep* ep, Fn fn)
{
    Evd* recv = ep->recv_evd;
    Evd* request = ep->request_evd;
    std::unique_lock<std::mutex> recv_lock(recv->mutex, std::defer_lock);
    std::unique_lock<std::mutex> request_lock(request->mutex, std::defer_lock);
    if (recv == request)
        recv_lock.lock();
    else
        std::lock(recv_lock, request_lock);
    if (ep->srq)
        ep->srq->lock_completions();
    fn();
    if (ep->srq)
        ep->srq->unlock_completions();
}

#if FASTDAPL_HAVE_MLX5DV
constexpr bool kMlx5DirectBuilt = true;

// The EVD's CQ, created through mlx5dv and read through its cq_view.
void direct_create_cq(Evd* evd, int cqe)
{
    ibv_cq* cq = verbs::create_cq(evd->ia->verbs->context(), cqe, evd->verbs_channel, evd);
    if (cq && !verbs::init_cq(cq, evd->cq_view)) {
        ibv_destroy_cq(cq);
        cq = nullptr;
    }
    evd->verbs_cq = cq;
    evd->direct = cq != nullptr;
}

// An RC QP on a parent domain of its own: its thread domain gives it a
// doorbell register no other QP rings, so posts on different EPs need no
// lock. Without one (an old kernel, a device without dynamic UARs) the EP
// cannot have a QP. `init.cap` receives what the device granted.
ibv_qp* direct_create_qp(Ep* ep, ibv_qp_init_attr& init)
{
    ibv_context* context = ep->ia->verbs->context();
    verbs::Mlx5Resources r = verbs::create_mlx5_resources(context, ep->pz->verbs_pd);
    if (!r.dedicated_doorbell) {
        if (g_debug)
            std::fprintf(stderr, "fastdapl: no thread domain for a dedicated doorbell register\n");
        verbs::destroy_mlx5_resources(r);
        return nullptr;
    }
    ibv_qp_cap granted{};
    ibv_qp* qp = verbs::create_rc_qp(context, r.parent_pd, init.send_cq, init.recv_cq, init.srq, init.cap, &granted);
    if (!qp) { // some devices copy nothing inline
        init.cap.max_inline_data = 0;
        qp = verbs::create_rc_qp(context, r.parent_pd, init.send_cq, init.recv_cq, init.srq, init.cap, &granted);
    }
    if (!qp) {
        verbs::destroy_mlx5_resources(r);
        return nullptr;
    }
    init.cap = granted;
    ep->direct_td = r.td;
    ep->direct_pd = r.parent_pd;
    return qp;
}

// The send queue (and own receive queue) of a new direct QP as the fast
// path's; false when the device's layout is not one it drives.
bool direct_init_queues(Ep* ep, ibv_qp* qp, std::uint32_t max_inline)
{
    const verbs::QpQueueSizes sizes = verbs::qp_queue_sizes(qp);
    if (sizes.sq_bbs == 0)
        return false;
    ep->send_slots.assign(sizes.sq_bbs, {});
    ep->recv_cookies.assign(ep->srq ? 0 : sizes.rq_wqes, 0);
    return verbs::init_send_queue(qp, ep->sq, ep->send_slots.data(), max_inline) &&
           (ep->srq || verbs::init_recv_queue(qp, ep->rq, ep->recv_cookies.data()));
}

void direct_release_domain(Ep* ep)
{
    verbs::Mlx5Resources r{ep->direct_td, ep->direct_pd, ep->direct_td != nullptr};
    verbs::destroy_mlx5_resources(r);
    ep->direct_td = nullptr;
    ep->direct_pd = nullptr;
}

// Before the QP is destroyed: it stops (RESET), and its CQEs not yet
// reaped are dropped from the EVDs, an SRQ's WQEs they name going back on
// its free list (rdma-core cleans only CQs it polls itself).
void direct_clean_qp(Ep* ep, ibv_qp* qp)
{
    with_completions_held(ep, [ep, qp] {
        if (!verbs::clean_qp_before_destroy(qp, &ep->request_evd->cq_view, &ep->recv_evd->cq_view,
                                            ep->srq ? &ep->srq->queue : nullptr) &&
            g_debug)
            std::fprintf(stderr, "fastdapl: qp %u did not go to RESET; its completions stay on the CQs\n", qp->qp_num);
    });
}

// An SRQ whose ring the fast path posts to.
bool direct_adopt_srq(Srq* srq)
{
    srq->direct = verbs::init_srq(srq->verbs_srq, srq->queue, srq->cookies);
    return srq->direct;
}

#else // built without libmlx5: no direct path

constexpr bool kMlx5DirectBuilt = false;
void direct_create_cq(Evd*, int) {}
ibv_qp* direct_create_qp(Ep*, ibv_qp_init_attr&) { return nullptr; }
bool direct_init_queues(Ep*, ibv_qp*, std::uint32_t) { return false; }
void direct_release_domain(Ep*) {}
void direct_clean_qp(Ep*, ibv_qp*) {}
bool direct_adopt_srq(Srq*) { return false; }

#endif

// A verbs RC queue pair for the endpoint, in INIT so that receives can be
// posted before a connection is sought (rdma_cm takes it on from there).
DAT_RETURN verbs_create_qp(Ep* ep)
{
    Ia* ia = ep->ia;
    const ibv_device_attr& dev = ia->verbs->attr();
    ibv_qp_init_attr init{};
    init.qp_context = ep;
    init.send_cq = ep->request_evd->verbs_cq;
    init.recv_cq = ep->recv_evd->verbs_cq;
    init.srq = ep->srq ? ep->srq->verbs_srq : nullptr;
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 0;
    const auto limit = [](DAT_COUNT want, int most) {
        return static_cast<std::uint32_t>(std::min<long>(std::max<DAT_COUNT>(want, 1), std::max(most, 1)));
    };
    init.cap.max_send_wr = limit(ep->attr.max_request_dtos, dev.max_qp_wr);
    init.cap.max_recv_wr = ep->srq ? 0 : limit(ep->attr.max_recv_dtos, dev.max_qp_wr);
    init.cap.max_send_sge = limit(std::max({ep->attr.max_request_iov, ep->attr.max_rdma_read_iov, ep->attr.max_rdma_write_iov}),
                                  dev.max_sge);
    init.cap.max_recv_sge = ep->srq ? 0 : limit(ep->attr.max_recv_iov, dev.max_sge);
    init.cap.max_inline_data = kMaxInline;
    ibv_qp* qp = nullptr;
    if (ia->mlx5_direct) {
        qp = direct_create_qp(ep, init);
    } else {
        qp = ibv_create_qp(ep->pz->verbs_pd, &init);
        if (!qp) { // some devices copy nothing inline
            init.cap.max_inline_data = 0;
            qp = ibv_create_qp(ep->pz->verbs_pd, &init);
        }
    }
    if (!qp)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    const auto fail = [ep, qp] {
        ibv_destroy_qp(qp);
        direct_release_domain(ep);
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    };
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = ia->verbs->port();
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
        return fail();
    ep->direct = ia->mlx5_direct;
    if (ep->direct && !direct_init_queues(ep, qp, init.cap.max_inline_data)) {
        ep->direct = false;
        return fail();
    }
    ep->verbs_max_inline = init.cap.max_inline_data;
    if (!ep->direct) { // the generic path's rings of what was posted
        ep->verbs_sends.assign(power_of_two_at_least(init.cap.max_send_wr), {});
        ep->verbs_recv_cookies.assign(ep->srq ? 0 : power_of_two_at_least(init.cap.max_recv_wr), 0);
    }
    ep->verbs_send_posted = ep->verbs_send_retired = 0;
    ep->verbs_recv_posted = ep->verbs_recv_reaped = 0;
    ep->verbs_qp = qp;
    ia->verbs_eps.insert(qp->qp_num, ep);
    return DAT_SUCCESS;
}

// Generic path, after an SRQ endpoint's QP is destroyed: its receive
// completions still on the CQ (or polled ahead) are taken out now and
// their SRQ slots come back. Left there, they would be skipped when polled
// (no EP to report to) and the slots lost to the SRQ for good.
void verbs_drop_srq_completions(Ep* ep, std::uint32_t qpn)
{
    Srq* srq = ep->srq;
    Evd* evd = ep->recv_evd;
    with_completions_held(ep, [srq, evd, qpn] {
        std::vector<ibv_wc> kept;
        const auto sort = [&](const ibv_wc& wc) {
            if (wc.qp_num != qpn)
                kept.push_back(wc);
            else if (wc.wr_id & kRecvTag) {
                srq_slot_free(srq, static_cast<std::uint32_t>(wc.wr_id >> 1));
                softnic::count_one(srq->verbs_reaped);
            }
        };
        for (std::uint32_t i = 0; i < evd->polled_count; ++i)
            sort(evd->polled[evd->polled_head + i]);
        ibv_wc batch[32];
        for (int n; (n = ibv_poll_cq(evd->verbs_cq, 32, batch)) > 0;)
            for (int i = 0; i < n; ++i)
                sort(batch[i]);
        const std::size_t size = std::max<std::size_t>(evd->polled.size(), kept.size());
        evd->polled = std::move(kept);
        evd->polled_count = static_cast<std::uint32_t>(evd->polled.size());
        evd->polled_head = 0;
        evd->polled.resize(size);
    });
}

// The queue pair needs its PZ and both DTO EVDs; built when all are known.
DAT_RETURN ensure_qp(Ep* ep)
{
    if (ep->qp || ep->verbs_qp)
        return DAT_SUCCESS;
    if (!ep->pz || !ep->recv_evd || !ep->request_evd || !ep->connect_evd)
        return error(DAT_INVALID_STATE, !ep->pz ? DAT_INVALID_STATE_EP_PZ : DAT_INVALID_STATE_EP_EVD_REQUEST);
    Ia* ia = ep->ia;
    if (ia->verbs)
        return verbs_create_qp(ep);
    const auto max_sge = static_cast<std::uint32_t>(std::max(ep->srq ? 1 : ep->attr.max_recv_iov, ep->attr.max_request_iov));
    softnic::Qp* qp = ia->device->create_qp(
        ep->pz->pd, ep->request_evd->cq, ep->recv_evd->cq, static_cast<std::uint32_t>(ep->attr.max_request_dtos),
        ep->srq ? 0 : static_cast<std::uint32_t>(ep->attr.max_recv_dtos), max_sge, kMaxInline,
        ep->srq ? ep->srq->device_srq : nullptr);
    if (!qp)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    ep->send_slots.assign(qp->descriptor().sq.wqe_cnt, {});
    ep->recv_cookies.assign(ep->srq ? 0 : qp->descriptor().rq.wqe_cnt, 0);
    ep->sq.init({&qp->descriptor(), qp->qpn(), kMaxInline, ep->send_slots.data(), fastpath::DoorbellMode::software,
                 ia->device->doorbell()});
    if (!ep->srq)
        ep->rq.init(qp->descriptor(), ep->recv_cookies.data());
    qp->set_on_ended(&ep_connection_ended, ep);
    qp->set_on_soft_watermark(&ep_soft_watermark, ep);
    ia->device->set_watermarks(qp, device_mark(ep->soft_watermark), device_mark(ep->hard_watermark)); // none taken yet
    ep->qp = qp;
    ia->eps_by_qpn[qp->qpn() - softnic::kFirstQpn].store(ep, std::memory_order_release);
    return DAT_SUCCESS;
}

// The queue pair goes: it stops (what it held completes as flushed), its
// completions not yet reaped are dropped from the EVDs (an SRQ's WQEs they
// name go back on its free list), then it is destroyed.
void drop_qp(Ep* ep)
{
    if (ibv_qp* qp = ep->verbs_qp) {
        // Generic path: its completions still on the CQs are skipped when
        // polled (no EP has its number any more), except an SRQ endpoint's
        // receives, whose slots are taken back at once. Direct path: its
        // CQEs are cleaned before the destroy (SRQ WQEs come back).
        if (ep->direct)
            direct_clean_qp(ep, qp);
        const std::uint32_t qpn = qp->qp_num;
        ep->ia->verbs_eps.erase(qpn);
        ibv_destroy_qp(qp);
        ep->verbs_qp = nullptr;
        if (ep->srq && !ep->direct)
            verbs_drop_srq_completions(ep, qpn); // after the destroy: no more come
        direct_release_domain(ep); // after its last QP
        ep->direct = false;
        return;
    }
    if (!ep->qp)
        return;
    softnic::Qp* qp = ep->qp;
    ep->ia->device->disconnect(qp); // it writes no more CQEs
    with_completions_held(ep, [ep, qp] {
        fastpath::clean_queue_pair(qp->qpn(), &ep->request_evd->cq_view, &ep->recv_evd->cq_view,
                                   ep->srq ? &ep->srq->queue : nullptr);
    });
    ep->ia->eps_by_qpn[qp->qpn() - softnic::kFirstQpn].store(nullptr, std::memory_order_release);
    ep->ia->device->destroy_qp(qp);
    ep->qp = nullptr;
}

bool dto_evd(Evd* evd) { return evd && (evd->flags & DAT_EVD_DTO_FLAG) && has_cq(evd); }

// Fills zero fields with the provider's defaults (the reference reads zero
// so and consumers rely on it), then checks what the softnic can do.

// For an SRQ endpoint max_recv_dtos is its hard high watermark and
// max_recv_iov is not used (read back as 0); both are handled by the caller.
DAT_RETURN complete_ep_attr(DAT_EP_ATTR& a, DAT_RETURN_SUBTYPE which_arg, bool with_srq = false)
{
    const DAT_EP_ATTR d = default_ep_attr();
    const DAT_COUNT saved_recv_dtos = a.max_recv_dtos;
    if (with_srq) {
        a.max_recv_dtos = d.max_recv_dtos;
        a.max_recv_iov = d.max_recv_iov;
    }
    for (auto [field, fallback] : {std::pair{&a.max_recv_dtos, d.max_recv_dtos}, {&a.max_request_dtos, d.max_request_dtos},
                                   {&a.max_recv_iov, d.max_recv_iov}, {&a.max_request_iov, d.max_request_iov},
                                   {&a.max_rdma_read_iov, d.max_rdma_read_iov},
                                   {&a.max_rdma_write_iov, d.max_rdma_write_iov}})
        if (*field == 0)
            *field = fallback;
    if (a.max_message_size == 0)
        a.max_message_size = d.max_message_size;
    if (a.max_rdma_size == 0)
        a.max_rdma_size = d.max_rdma_size;
    const auto sge_ok = [](DAT_COUNT n) { return n > 0 && n <= static_cast<DAT_COUNT>(softnic::kMaxSge); };
    const auto depth_ok = [](DAT_COUNT n) { return n > 0 && n <= kMaxDtosPerEp; };
    if (raw(a.service_type) != DAT_SERVICE_TYPE_RC || !depth_ok(a.max_recv_dtos) || !depth_ok(a.max_request_dtos) ||
        !sge_ok(a.max_recv_iov) || !sge_ok(a.max_request_iov) || !sge_ok(a.max_rdma_read_iov) ||
        !sge_ok(a.max_rdma_write_iov) || a.max_message_size > softnic::kMaxMessageSize ||
        a.max_rdma_size > softnic::kMaxMessageSize || a.max_rdma_read_in < 0 || a.max_rdma_read_out < 0 ||
        a.max_rdma_read_in > kMaxRdmaReadPerEp || a.max_rdma_read_out > kMaxRdmaReadPerEp)
        return error(DAT_INVALID_PARAMETER, which_arg);
    if (raw(a.qos) != DAT_QOS_BEST_EFFORT)
        return not_supported();
    if (with_srq) {
        a.max_recv_dtos = saved_recv_dtos;
        a.max_recv_iov = 0;
    }
    return DAT_SUCCESS;
}

// A watermark as the consumer gives it: a count, or DAT_WATERMARK_INFINITE.
bool valid_watermark(DAT_COUNT mark) { return mark >= 0 || mark == DAT_WATERMARK_INFINITE; }

DAT_RETURN ep_create_common(DAT_IA_HANDLE handle, DAT_PZ_HANDLE pz_handle, DAT_EVD_HANDLE recv, DAT_EVD_HANDLE request,
                            DAT_EVD_HANDLE connect, Srq* srq, const DAT_EP_ATTR* attr, DAT_EP_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (srq && srq->ia != ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    Pz* pz = pz_handle ? from_handle<Pz>(pz_handle) : nullptr;
    if (pz_handle && (!pz || pz->ia != ia))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    Evd* r = recv ? from_handle<Evd>(recv) : nullptr;
    Evd* q = request ? from_handle<Evd>(request) : nullptr;
    Evd* c = connect ? from_handle<Evd>(connect) : nullptr;
    if ((recv && !dto_evd(r)) || (r && r->ia != ia))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_RECV);
    if ((request && !dto_evd(q)) || (q && q->ia != ia))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if ((connect && (!c || !(c->flags & DAT_EVD_CONNECTION_FLAG))) || (c && c->ia != ia))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
    const DAT_RETURN_SUBTYPE attr_arg = srq ? DAT_INVALID_ARG7 : DAT_INVALID_ARG6;
    if (!out)
        return error(DAT_INVALID_PARAMETER, srq ? DAT_INVALID_ARG8 : DAT_INVALID_ARG7);
    DAT_EP_ATTR a = attr ? *attr : default_ep_attr();
    if (attr) {
        if (DAT_RETURN rc = complete_ep_attr(a, attr_arg, srq != nullptr); rc != DAT_SUCCESS)
            return rc;
    }
    // An SRQ endpoint's marks: max_recv_dtos is the hard one, srq_soft_hw
    // the soft one. Zero reads as "none" (DAT_HW_DEFAULT), as zero fields
    // read as defaults everywhere here: consumers that clear the attribute
    // struct (the reference's dtestsrq does) get no surprise events.
    DAT_COUNT soft = DAT_WATERMARK_INFINITE, hard = DAT_WATERMARK_INFINITE;
    if (srq) {
        if (!valid_watermark(a.max_recv_dtos) || !valid_watermark(a.srq_soft_hw))
            return error(DAT_INVALID_PARAMETER, attr_arg);
        hard = a.max_recv_dtos == 0 ? DAT_WATERMARK_INFINITE : a.max_recv_dtos;
        soft = a.srq_soft_hw == 0 ? DAT_WATERMARK_INFINITE : a.srq_soft_hw;
        a.max_recv_dtos = hard;
        a.srq_soft_hw = soft;
    } else {
        a.srq_soft_hw = DAT_HW_DEFAULT;
    }
    // A verbs device does not show when an endpoint takes an SRQ buffer, so
    // it has no high watermarks. The spec both says an SRQ endpoint's
    // max_recv_dtos must then be DAT_HW_DEFAULT and that a query reports
    // unsupported marks as DAT_HW_DEFAULT; consumers written for the
    // reference (dtestsrq) pass counts here, so the marks are taken, not
    // armed, and read back as DAT_HW_DEFAULT. dat_ep_set_watermark refuses.
    if (ia->verbs && srq) {
        soft = hard = DAT_WATERMARK_INFINITE;
        a.max_recv_dtos = DAT_HW_DEFAULT;
        a.srq_soft_hw = DAT_HW_DEFAULT;
    }
    Ep* ep = make_object<Ep>();
    if (!ep)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    ep->provider = ia->provider;
    ep->ia = ia;
    ep->pz = pz;
    ep->recv_evd = r;
    ep->request_evd = q;
    ep->connect_evd = c;
    ep->srq = srq;
    ep->soft_watermark = soft;
    ep->hard_watermark = hard;
    ep->attr = a;
    if (!(pz && r && q && c))
        ep->state = DAT_EP_STATE_UNCONFIGURED_UNCONNECTED; // dat_ep_modify completes it
    if (pz && r && q && c) {
        if (DAT_RETURN rc = ensure_qp(ep); rc != DAT_SUCCESS) {
            destroy_object(ep);
            return rc;
        }
    }
    if (pz)
        ++pz->users;
    for (Evd* evd : {r, q, c})
        if (evd)
            ++evd->users;
    if (srq)
        ++srq->users;
    ia->adopt(ep);
    *out = ep;
    return DAT_SUCCESS;
}

DAT_RETURN ep_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv, DAT_EVD_HANDLE request,
                     DAT_EVD_HANDLE connect, const DAT_EP_ATTR* attr, DAT_EP_HANDLE* out)
{
    return ep_create_common(ia, pz, recv, request, connect, nullptr, attr, out);
}

DAT_RETURN ep_create_with_srq(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv, DAT_EVD_HANDLE request,
                              DAT_EVD_HANDLE connect, DAT_SRQ_HANDLE srq_handle, const DAT_EP_ATTR* attr,
                              DAT_EP_HANDLE* out)
{
    if (!from_handle<Ia>(ia))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    Srq* srq = from_handle<Srq>(srq_handle);
    if (!srq)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    if (!attr) // the spec requires one: max_recv_dtos is the hard watermark
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    // Split PZ is not offered on verbs IAs (provider attribute): the
    // device checks an SRQ's receive buffers against the QP's PD (Soft-RoCE
    // does), so an endpoint in another PZ would fail every receive.
    if (srq->ia->verbs && pz && from_handle<Pz>(pz) != srq->pz)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    return ep_create_common(ia, pz, recv, request, connect, srq, attr, out);
}

DAT_RETURN ep_query(DAT_EP_HANDLE handle, DAT_EP_PARAM_MASK mask, DAT_EP_PARAM* p)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (mask & ~DAT_EP_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !p)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!mask)
        return DAT_SUCCESS;
    std::memset(p, 0, sizeof *p);
    p->ia_handle = consumer_handle(ep->ia);
    p->ep_state = ep->state.load();
    p->local_ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&ep->ia->address);
    p->remote_ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&ep->remote);
    p->remote_port_qual = ep->remote_port;
    p->pz_handle = ep->pz;
    p->recv_evd_handle = ep->recv_evd;
    p->request_evd_handle = ep->request_evd;
    p->connect_evd_handle = ep->connect_evd;
    p->srq_handle = ep->srq;
    p->ep_attr = ep->attr;
    if (ep->srq && ep->ia->verbs) { // no marks on a verbs device (ep_create_common)
        p->ep_attr.max_recv_dtos = DAT_HW_DEFAULT;
        p->ep_attr.srq_soft_hw = DAT_HW_DEFAULT;
        p->ep_attr.max_recv_iov = 0;
    } else if (ep->srq) { // the marks as last set (dat_ep_set_watermark too)
        p->ep_attr.max_recv_dtos = ep->hard_watermark;
        p->ep_attr.srq_soft_hw = ep->soft_watermark;
        p->ep_attr.max_recv_iov = 0;
    }
    return DAT_SUCCESS;
}

// Table 5 of the spec: what dat_ep_modify may change, and when. Only the
// states this provider has are listed (no provider-created EPs yet).
constexpr DAT_EP_PARAM_MASK kEpNeverModifiable = DAT_EP_FIELD_IA_HANDLE | DAT_EP_FIELD_EP_STATE |
                                                 DAT_EP_FIELD_LOCAL_PORT_QUAL | DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR |
                                                 DAT_EP_FIELD_REMOTE_PORT_QUAL | DAT_EP_FIELD_SRQ_HANDLE |
                                                 DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW;
constexpr DAT_EP_PARAM_MASK kEpQueueShape = DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE |
                                            DAT_EP_FIELD_REQUEST_EVD_HANDLE | DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS |
                                            DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS | DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV |
                                            DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV;

DAT_RETURN ep_modify(DAT_EP_HANDLE handle, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM* p)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if ((mask & ~DAT_EP_FIELD_ALL) || (mask & kEpNeverModifiable))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!mask)
        return DAT_SUCCESS;
    if (!p)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    Ia* ia = ep->ia;
    // The common connection model (communicators) is not offered; the local
    // address can only be the IA's own.
    if (mask & DAT_EP_FIELD_COMM)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (mask & DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR) {
        if (!cm::same_host(ia->address, p->local_ia_address_ptr))
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    }
    // An SRQ endpoint's hard mark (max_recv_dtos) changes through
    // dat_ep_set_watermark only; it has no receive IOV of its own.
    if (ep->srq && (mask & (DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS | DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV)))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    const DAT_EP_ATTR& in = p->ep_attr;
    if (((mask & DAT_EP_FIELD_EP_ATTR_NUM_TRANSPORT_ATTR) && in.ep_transport_specific_count != 0) ||
        ((mask & DAT_EP_FIELD_EP_ATTR_NUM_PROVIDER_ATTR) && in.ep_provider_specific_count != 0))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3); // this provider has none
    // New objects: of this IA, with the right streams.
    Pz* pz = ep->pz;
    Evd* r = ep->recv_evd;
    Evd* q = ep->request_evd;
    Evd* c = ep->connect_evd;
    if (mask & DAT_EP_FIELD_PZ_HANDLE) {
        pz = p->pz_handle ? from_handle<Pz>(p->pz_handle) : nullptr;
        if (p->pz_handle && (!pz || pz->ia != ia))
            return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
        if (ia->verbs && ep->srq && pz && pz != ep->srq->pz) // no split PZ on verbs (ep_create_with_srq)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    }
    auto evd_arg = [&](DAT_EVD_HANDLE h, Evd*& into, bool (*fits)(Evd*), DAT_RETURN_SUBTYPE bad) -> DAT_RETURN {
        into = h ? from_handle<Evd>(h) : nullptr;
        return h && (!into || !fits(into) || into->ia != ia) ? error(DAT_INVALID_HANDLE, bad) : static_cast<DAT_RETURN>(DAT_SUCCESS);
    };
    auto conn_evd = [](Evd* e) { return (e->flags & DAT_EVD_CONNECTION_FLAG) != 0; };
    if (mask & DAT_EP_FIELD_RECV_EVD_HANDLE)
        if (DAT_RETURN rc = evd_arg(p->recv_evd_handle, r, &dto_evd, DAT_INVALID_HANDLE_EVD_RECV); rc != DAT_SUCCESS)
            return rc;
    if (mask & DAT_EP_FIELD_REQUEST_EVD_HANDLE)
        if (DAT_RETURN rc = evd_arg(p->request_evd_handle, q, &dto_evd, DAT_INVALID_HANDLE_EVD_REQUEST); rc != DAT_SUCCESS)
            return rc;
    if (mask & DAT_EP_FIELD_CONNECT_EVD_HANDLE)
        if (DAT_RETURN rc = evd_arg(p->connect_evd_handle, c, conn_evd, DAT_INVALID_HANDLE_EVD_CONN); rc != DAT_SUCCESS)
            return rc;
    // New attributes: the masked fields over the current ones, then checked.
    DAT_EP_ATTR a = ep->attr;
    const std::pair<DAT_EP_PARAM_MASK, void (*)(DAT_EP_ATTR&, const DAT_EP_ATTR&)> fields[] = {
        {DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { std::memcpy(&o.service_type, &i.service_type, sizeof o.service_type); }},
        {DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE, [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_message_size = i.max_message_size; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE, [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_rdma_size = i.max_rdma_size; }},
        {DAT_EP_FIELD_EP_ATTR_QOS, [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { std::memcpy(&o.qos, &i.qos, sizeof o.qos); }},
        {DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.recv_completion_flags = i.recv_completion_flags; }},
        {DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.request_completion_flags = i.request_completion_flags; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_recv_dtos = i.max_recv_dtos; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS, [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_request_dtos = i.max_request_dtos; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV, [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_recv_iov = i.max_recv_iov; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV, [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_request_iov = i.max_request_iov; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN, [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_rdma_read_in = i.max_rdma_read_in; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT, [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_rdma_read_out = i.max_rdma_read_out; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV, [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_rdma_read_iov = i.max_rdma_read_iov; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV, [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_rdma_write_iov = i.max_rdma_write_iov; }},
    };
    for (const auto& [bit, copy] : fields)
        if (mask & bit)
            copy(a, in);
    if (DAT_RETURN rc = complete_ep_attr(a, DAT_INVALID_ARG3, ep->srq != nullptr); rc != DAT_SUCCESS)
        return DAT_GET_TYPE(rc) == DAT_MODEL_NOT_SUPPORTED ? error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3) : rc;
    // Everything here may change only before a connection is sought or
    // accepted; the PZ only while quiescent (Table 5).
    const DAT_EP_STATE s = ep->state.load();
    const bool quiescent = s == DAT_EP_STATE_UNCONNECTED || s == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED ||
                           s == DAT_EP_STATE_UNCONFIGURED_RESERVED || s == DAT_EP_STATE_UNCONFIGURED_PASSIVE;
    const bool before_connection = quiescent || s == DAT_EP_STATE_RESERVED || s == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING;
    if (!before_connection || ((mask & DAT_EP_FIELD_PZ_HANDLE) && !quiescent))
        return error(DAT_INVALID_STATE, ep_state_subtype(s));
    // The queue pair is built for its PZ, CQs and sizes: a new one is made
    // on next use. Receives already posted would be lost, so not then.
    const bool reshape = (mask & kEpQueueShape) != 0;
    if (reshape && ep->qp) {
        if (!ep->srq && ep->rq.outstanding() > 0)
            return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
        drop_qp(ep);
    }
    if (reshape && ep->verbs_qp) { // a verbs QP's CQs and sizes are fixed: a new one, as above
        if (!ep->srq && (ep->direct ? ep->rq.outstanding() != 0 : ep->verbs_recv_posted != ep->verbs_recv_reaped))
            return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
        drop_qp(ep);
    }
    if (pz != ep->pz) {
        if (pz)
            ++pz->users;
        if (ep->pz)
            --ep->pz->users;
        ep->pz = pz;
    }
    for (auto [slot, to] : {std::pair{&ep->recv_evd, r}, {&ep->request_evd, q}, {&ep->connect_evd, c}}) {
        if (*slot == to)
            continue;
        if (to)
            ++to->users;
        if (*slot)
            --(*slot)->users;
        *slot = to;
    }
    ep->attr = a;
    // Completing the configuration leaves the unconfigured sub-state for
    // its configured twin (spec 6.6.2); there is no way back.
    if (ep->pz && ep->recv_evd && ep->request_evd && ep->connect_evd) {
        for (auto [from, to] : {std::pair{DAT_EP_STATE_UNCONFIGURED_UNCONNECTED, DAT_EP_STATE_UNCONNECTED},
                                {DAT_EP_STATE_UNCONFIGURED_RESERVED, DAT_EP_STATE_RESERVED},
                                {DAT_EP_STATE_UNCONFIGURED_PASSIVE, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING}}) {
            DAT_EP_STATE expected = from;
            if (ep->state.compare_exchange_strong(expected, to))
                break;
        }
    }
    return DAT_SUCCESS;
}

DAT_RETURN ep_get_status(DAT_EP_HANDLE handle, DAT_EP_STATE* state, DAT_BOOLEAN* recv_idle, DAT_BOOLEAN* request_idle)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (state)
        *state = ep->state.load();
    if (ep->verbs_qp) { // counted at completion time: what is not reaped yet
        const bool recv_done = ep->direct ? ep->rq.outstanding() == 0 : ep->verbs_recv_posted == ep->verbs_recv_reaped;
        if (recv_idle)
            *recv_idle = ep->srq || recv_done ? DAT_TRUE : DAT_FALSE;
        if (request_idle)
            *request_idle = verbs_requests_done(ep) ? DAT_TRUE : DAT_FALSE;
        return DAT_SUCCESS;
    }
    if (recv_idle)
        *recv_idle = !ep->qp || (ep->srq ? ep->qp->receives_taken() == ep->qp->receives_completed()
                                         : ep->rq.outstanding() == 0)
                         ? DAT_TRUE
                         : DAT_FALSE;
    if (request_idle)
        *request_idle = !ep->qp || ep->sq.outstanding_bbs() == 0 ? DAT_TRUE : DAT_FALSE;
    return DAT_SUCCESS;
}

// RDMA reads in flight each way, as rdma_cm negotiates them.
cm::ReadDepth read_depth(const Ep* ep)
{
    const ibv_device_attr& dev = ep->ia->verbs->attr();
    const auto clamp = [](DAT_COUNT want, int most) {
        return static_cast<std::uint8_t>(std::clamp<long>(want, 0, std::min(most, 255)));
    };
    return {clamp(ep->attr.max_rdma_read_out, dev.max_qp_init_rd_atom), clamp(ep->attr.max_rdma_read_in, dev.max_qp_rd_atom)};
}

DAT_RETURN ep_connect(DAT_EP_HANDLE handle, DAT_IA_ADDRESS_PTR remote, DAT_CONN_QUAL qual, DAT_TIMEOUT timeout,
                      DAT_COUNT pdata_size, const DAT_PVOID pdata, DAT_QOS qos, DAT_CONNECT_FLAGS flags)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (timeout == 0 || pdata_size < 0 || pdata_size > max_private_data(ep->ia) || (pdata_size > 0 && !pdata))
        return error(DAT_INVALID_PARAMETER, timeout == 0 ? DAT_INVALID_ARG4 : DAT_INVALID_ARG5);
    if (qos != DAT_QOS_BEST_EFFORT || flags != DAT_CONNECT_DEFAULT_FLAG)
        return not_supported();
    if (const DAT_EP_STATE now = ep->state.load(); now != DAT_EP_STATE_UNCONNECTED)
        return error(DAT_INVALID_STATE, ep_state_subtype(now));
    // The IA's own family only: rdma_cm resolves a route within one family,
    // and the software NIC's sockets speak IPv4.
    if (!remote || remote->sa_family != ep->ia->address.ss_family)
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
    if (qual > 0xffff)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3); // qualifiers are TCP ports here
    if (DAT_RETURN rc = ensure_qp(ep); rc != DAT_SUCCESS)
        return rc;
    Ia* ia = ep->ia;
    cm::copy_address(ep->remote, remote);
    cm::set_port(ep->remote, static_cast<std::uint16_t>(qual));
    ep->remote_port = qual;
    ep->state = DAT_EP_STATE_ACTIVE_CONNECTION_PENDING;
    const auto* bytes = static_cast<const std::uint8_t*>(pdata);
    std::vector<std::uint8_t> pd(bytes, bytes + pdata_size);
    const auto wait = timeout == DAT_TIMEOUT_INFINITE ? std::chrono::milliseconds(24L * 3600 * 1000)
                                                      : std::chrono::milliseconds(std::max<DAT_TIMEOUT>(1, timeout / 1000));
    std::lock_guard lock(ia->cm_mutex); // the result cannot be handled before the id is recorded
    if (ia->verbs) {
        ep->cm_id = ia->rdma_cm->connect(reinterpret_cast<const sockaddr*>(&ia->address),
                                         reinterpret_cast<const sockaddr*>(&ep->remote), ep->verbs_qp, std::move(pd),
                                         wait, read_depth(ep));
        if (ep->cm_id == 0) {
            ep->state = DAT_EP_STATE_UNCONNECTED;
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        }
        ia->attempts[ep->cm_id] = ep;
        return DAT_SUCCESS;
    }
    ep->cm_id = ia->cm->connect(*reinterpret_cast<const sockaddr_in*>(&ep->remote), static_cast<std::uint16_t>(qual),
                                ep->qp->qpn(), std::move(pd), wait);
    ia->attempts[ep->cm_id] = ep;
    return DAT_SUCCESS;
}

void cm_result(Ia* ia, std::uint64_t id, cm::Outcome outcome, int fd, const cm::Message& m)
{
    Ep* ep = nullptr;
    std::lock_guard lock(ia->cm_mutex); // the EP cannot be freed under us
    if (auto it = ia->attempts.find(id); it != ia->attempts.end()) {
        ep = it->second;
        ia->attempts.erase(it);
    }
    if (!ep) {
        if (fd >= 0)
            ::close(fd);
        return;
    }
    const bool passive = ep->state.load() == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING;
    if (outcome == cm::Outcome::established) {
        ep->state = DAT_EP_STATE_CONNECTED;
        // The event goes first: no completion may precede ESTABLISHED.
        if (ia->verbs) { // its rdma_cm id is kept for the disconnect
            ep->rdma_cm_id = id;
            ia->connections[id] = ep;
        }
        post_connection_event(ep, DAT_CONNECTION_EVENT_ESTABLISHED, passive ? nullptr : m.private_data.data(),
                              passive ? 0 : static_cast<std::uint32_t>(m.private_data.size()));
        if (!ia->verbs && !ia->device->connect(ep->qp, fd))
            ::close(fd);
        return;
    }
    ep->state = DAT_EP_STATE_DISCONNECTED;
    if (!ia->verbs) // rdma_cm moved the queue pair to the error state already
        ia->device->disconnect(ep->qp); // receives posted meanwhile complete as flushed
    DAT_EVENT_NUMBER n = DAT_CONNECTION_EVENT_NON_PEER_REJECTED;
    switch (outcome) {
    case cm::Outcome::rejected:
        n = DAT_CONNECTION_EVENT_PEER_REJECTED;
        break;
    case cm::Outcome::unreachable:
        n = DAT_CONNECTION_EVENT_UNREACHABLE;
        break;
    case cm::Outcome::timed_out:
        n = DAT_CONNECTION_EVENT_TIMED_OUT;
        break;
    case cm::Outcome::failed:
        n = passive ? DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR : DAT_CONNECTION_EVENT_NON_PEER_REJECTED;
        break;
    default:
        break;
    }
    post_connection_event(ep, n, m.private_data.data(), static_cast<std::uint32_t>(m.private_data.size()));
}

DAT_RETURN ep_disconnect(DAT_EP_HANDLE handle, DAT_CLOSE_FLAGS flags)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (raw(flags) != DAT_CLOSE_ABRUPT_FLAG && raw(flags) != DAT_CLOSE_GRACEFUL_FLAG)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    DAT_EP_STATE s = ep->state.load();
    if (s == DAT_EP_STATE_DISCONNECTED)
        return DAT_SUCCESS; // nothing to do, no event
    if (s == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING) {
        std::lock_guard lock(ep->ia->cm_mutex);
        if (ep->ia->verbs)
            ep->ia->rdma_cm->disconnect(ep->cm_id);
        else
            ep->ia->cm->cancel(ep->cm_id);
        ep->ia->attempts.erase(ep->cm_id);
    } else if (s == DAT_EP_STATE_CONNECTED && flags == DAT_CLOSE_GRACEFUL_FLAG) {
        // Requests drain, then the connection ends; DISCONNECTED follows.
        if (ep->state.compare_exchange_strong(s, DAT_EP_STATE_DISCONNECT_PENDING)) {
            if (!ep->ia->verbs)
                ep->ia->device->disconnect_gracefully(ep->qp);
            else if (verbs_requests_done(ep)) // else the reaper of the last one does it
                ep->ia->rdma_cm->disconnect(ep->rdma_cm_id);
        }
        return DAT_SUCCESS;
    } else if (s == DAT_EP_STATE_DISCONNECT_PENDING && flags == DAT_CLOSE_GRACEFUL_FLAG) {
        return DAT_SUCCESS; // already draining
    } else if (s != DAT_EP_STATE_CONNECTED && s != DAT_EP_STATE_DISCONNECT_PENDING) {
        return error(DAT_INVALID_STATE, ep_state_subtype(s));
    }
    // Abrupt (or a graceful one during connection setup): flushed at once.
    if (!ep->state.compare_exchange_strong(s, DAT_EP_STATE_DISCONNECTED))
        return DAT_SUCCESS; // the peer ended it first; its event is posted
    if (ep->ia->verbs) {
        if (ep->rdma_cm_id)
            ep->ia->rdma_cm->disconnect(ep->rdma_cm_id); // the queue pair flushes
    } else {
        ep->ia->device->disconnect(ep->qp);
    }
    post_connection_end(ep, DAT_CONNECTION_EVENT_DISCONNECTED);
    return DAT_SUCCESS;
}

DAT_RETURN ep_reset(DAT_EP_HANDLE handle)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    const DAT_EP_STATE s = ep->state.load();
    if (s == DAT_EP_STATE_UNCONNECTED)
        return DAT_SUCCESS;
    if (s != DAT_EP_STATE_DISCONNECTED)
        return error(DAT_INVALID_STATE, ep_state_subtype(s));
    release_connection(ep);
    drop_qp(ep); // a fresh queue pair for the next connection
    ep->state = DAT_EP_STATE_UNCONNECTED;
    return DAT_SUCCESS;
}

// A verbs endpoint's rdma_cm id goes (after its connection ended).
void release_connection(Ep* ep)
{
    if (!ep->rdma_cm_id)
        return;
    std::lock_guard lock(ep->ia->cm_mutex);
    ep->ia->rdma_cm->disconnect(ep->rdma_cm_id); // nothing if it ended already
    ep->ia->rdma_cm->release(ep->rdma_cm_id);
    ep->ia->connections.erase(ep->rdma_cm_id);
    ep->rdma_cm_id = 0;
}

void destroy_ep(Ep* ep)
{
    // No connection event for an endpoint that goes (the softnic's end
    // callback finds it DISCONNECTED already); drop_qp ends the link.
    ep->state = DAT_EP_STATE_DISCONNECTED;
    {
        std::lock_guard lock(ep->ia->cm_mutex);
        if (ep->cm_id && ep->ia->attempts.count(ep->cm_id)) {
            if (ep->ia->verbs)
                ep->ia->rdma_cm->release(ep->cm_id);
            else
                ep->ia->cm->cancel(ep->cm_id);
            ep->ia->attempts.erase(ep->cm_id);
        }
    }
    release_connection(ep);
    drop_qp(ep);
    destroy_object(ep);
}

DAT_RETURN ep_free(DAT_EP_HANDLE handle)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    const DAT_EP_STATE s = ep->state.load();
    if (s == DAT_EP_STATE_RESERVED || s == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING ||
        s == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING || s == DAT_EP_STATE_UNCONFIGURED_RESERVED ||
        s == DAT_EP_STATE_UNCONFIGURED_PASSIVE)
        return error(DAT_INVALID_STATE, ep_state_subtype(s));
    if (ep->pz)
        --ep->pz->users;
    for (Evd* evd : {ep->recv_evd, ep->request_evd, ep->connect_evd})
        if (evd)
            --evd->users;
    ep->ia->forget(ep);
    Srq* srq = ep->srq;
    destroy_ep(ep); // its queue pair (and the SRQ WQEs its completions held) first
    if (srq)
        --srq->users;
    return DAT_SUCCESS;
}

// --- posting ---------------------------------------------------------------------------

constexpr DAT_COMPLETION_FLAGS kPostFlags = static_cast<DAT_COMPLETION_FLAGS>(
    DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
    DAT_COMPLETION_BARRIER_FENCE_FLAG);

DAT_RETURN check_request_state(Ep* ep)
{
    const DAT_EP_STATE s = ep->state.load(std::memory_order_relaxed);
    if (s == DAT_EP_STATE_CONNECTED || s == DAT_EP_STATE_DISCONNECTED) // the latter: flushed at once
        return ep->qp || ep->verbs_qp ? static_cast<DAT_RETURN>(DAT_SUCCESS)
                                      : error(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_DISCONNECTED);
    return error(DAT_INVALID_STATE, ep_state_subtype(s));
}

DAT_RETURN post_request(Ep* ep, std::uint8_t opcode, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                        const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags, DAT_COUNT max_iov)
{
    if (DAT_RETURN rc = check_request_state(ep); rc != DAT_SUCCESS) [[unlikely]]
        return rc;
    // UNSIGNALLED only on an EP whose request stream was set up for it (spec 6.8.1).
    const bool unsignalled_refused =
        (flags & DAT_COMPLETION_UNSIGNALLED_FLAG) && !(ep->attr.request_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG);
    if (n < 0 || n > max_iov || (n > 0 && !iov) || (flags & ~kPostFlags) || unsignalled_refused) [[unlikely]]
        return error(DAT_INVALID_PARAMETER, n < 0 || n > max_iov ? DAT_INVALID_ARG2 : DAT_INVALID_ARG5);
    std::uint64_t total = 0;
    for (DAT_COUNT i = 0; i < n; ++i)
        total += iov[i].segment_length;
    // Sends are held to the EP's max_message_size. RDMA is held to the
    // device's limit only: the reference does the same, and its dtest
    // writes more than the max_rdma_size it asks for.
    const std::uint64_t limit = remote ? softnic::kMaxMessageSize : ep->attr.max_message_size;
    // The bytes moved are the local list's; the remote range is checked by
    // the target against its registration (an access error, not ours).
    if (total > limit) [[unlikely]]
        return error(DAT_LENGTH_ERROR);
    if (ep->verbs_qp && !ep->direct) [[unlikely]] // the generic verbs path (not the mlx5 direct one)
        return verbs_post_request(ep, opcode, n, iov, total, cookie, remote, flags);
    fastpath::RemoteAddress ra{};
    if (remote)
        ra = {remote->virtual_address, remote->rmr_context};
    if (!ep->sq.post(opcode, reinterpret_cast<const fastpath::Sge*>(iov), static_cast<std::uint32_t>(n),
                     static_cast<std::uint32_t>(total), remote ? &ra : nullptr, 0, fastpath::control_flags(flags),
                     cookie.as_64)) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    if (ep->direct) { // an mlx5 device: doorbell record, then BlueFlame or the 8-byte doorbell
        ep->sq.ring();
        return DAT_SUCCESS;
    }
    // The software NIC: send from this thread rather than wake the engine's.
    // Large messages stay with the engine: copying them here would delay the
    // caller more than a wake-up costs.
    ep->sq.publish_only();
    if (!ep->ia->inline_sends || total > kInlineSendLimit || !ep->ia->device->kick(ep->qp))
        ep->sq.wake_software_engine();
    return DAT_SUCCESS;
}

DAT_RETURN ep_post_send(DAT_EP_HANDLE handle, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                        DAT_COMPLETION_FLAGS flags)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep) [[unlikely]]
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    return post_request(ep, MLX5_OPCODE_SEND, n, iov, cookie, nullptr, flags, ep->attr.max_request_iov);
}

// RDMA write and read differ only in their opcode and IOV limit.
template <std::uint8_t Opcode, DAT_COUNT DAT_EP_ATTR::*MaxIov>
DAT_RETURN ep_post_rdma(DAT_EP_HANDLE handle, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                        const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep) [[unlikely]]
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (!remote) [[unlikely]]
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    return post_request(ep, Opcode, n, iov, cookie, remote, flags, ep->attr.*MaxIov);
}

DAT_RETURN ep_post_recv(DAT_EP_HANDLE handle, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                        DAT_COMPLETION_FLAGS flags)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep) [[unlikely]]
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (ep->srq) [[unlikely]] // its receives come from the SRQ (dat_srq_post_recv)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
    if (n < 0 || n > ep->attr.max_recv_iov || (n > 0 && !iov) || (flags & DAT_COMPLETION_SUPPRESS_FLAG) ||
        (flags & ~kPostFlags) ||
        ((flags & DAT_COMPLETION_UNSIGNALLED_FLAG) && !(ep->attr.recv_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG)))
        [[unlikely]]
        return error(DAT_INVALID_PARAMETER, n < 0 || n > ep->attr.max_recv_iov ? DAT_INVALID_ARG2 : DAT_INVALID_ARG5);
    if (!ep->qp && !ep->verbs_qp) {
        if (DAT_RETURN rc = ensure_qp(ep); rc != DAT_SUCCESS)
            return rc;
    }
    if (ep->verbs_qp && !ep->direct) [[unlikely]]
        return verbs_post_recv(ep, n, iov, cookie);
    if (!ep->rq.post(reinterpret_cast<const fastpath::Sge*>(iov), static_cast<std::uint32_t>(n), cookie.as_64))
        [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    if (ep->qp) // the software NIC may wait for receives; a device reads the doorbell record
        ep->ia->device->receive_posted();
    return DAT_SUCCESS;
}

// --- SRQ ---------------------------------------------------------------------------------

constexpr DAT_COUNT kMaxRecvPerSrq = 0x7fff; // the doorbell record counts posts in 16 bits
constexpr DAT_COUNT kMaxEpPerSrq = 1 << 16;

void srq_low_watermark(void* context)
{
    auto* srq = static_cast<Srq*>(context);
    post_async(srq->ia, static_cast<DAT_EVENT_NUMBER>(FASTDAPL_ASYNC_WATERMARK_EVENT), srq, DAT_SRQ_LOW_WATERMARK_EVENT);
}

void srq_failed(void* context)
{
    auto* srq = static_cast<Srq*>(context);
    post_async(srq->ia, DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR, srq, DAT_SRQ_TRANSFER_TO_ERROR);
}

// A verbs SRQ's receive slots: `count` of them, all free (a resize adds
// the new ones behind those in use; posts and reaps must not run then).
void verbs_srq_slots(Srq* srq, std::uint32_t count)
{
    const auto old = static_cast<std::uint32_t>(srq->verbs_cookies.size());
    if (count <= old)
        return;
    // The free ring keeps its order: rebuilt with the free slots first.
    const std::uint32_t head = srq->verbs_free_head.load(), tail = srq->verbs_free_tail.load();
    std::vector<std::uint32_t> ring;
    for (std::uint32_t i = head; i != tail; ++i)
        ring.push_back(srq->verbs_free[i % srq->verbs_free.size()]);
    for (std::uint32_t i = old; i < count; ++i)
        ring.push_back(i);
    const auto free_now = static_cast<std::uint32_t>(ring.size());
    ring.resize(count);
    srq->verbs_cookies.resize(count, 0);
    srq->verbs_free = std::move(ring);
    srq->verbs_free_head.store(0);
    srq->verbs_free_tail.store(free_now);
}

DAT_RETURN srq_create(DAT_IA_HANDLE handle, DAT_PZ_HANDLE pz_handle, DAT_SRQ_ATTR* attr, DAT_SRQ_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    Pz* pz = from_handle<Pz>(pz_handle);
    if (!pz || pz->ia != ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (!attr || !out)
        return error(DAT_INVALID_PARAMETER, !attr ? DAT_INVALID_ARG3 : DAT_INVALID_ARG4);
    // A new SRQ is empty: a low watermark would fire at once, so the spec
    // asks for DAT_SRQ_LW_DEFAULT here and dat_srq_set_lw afterwards.
    if (attr->max_recv_dtos <= 0 || attr->max_recv_iov <= 0 || attr->low_watermark != DAT_SRQ_LW_DEFAULT)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (attr->max_recv_dtos > kMaxRecvPerSrq || attr->max_recv_iov > static_cast<DAT_COUNT>(softnic::kMaxSge))
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    Srq* srq = make_object<Srq>();
    if (!srq)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    srq->provider = ia->provider;
    srq->ia = ia;
    srq->pz = pz;
    srq->max_recv_dtos = attr->max_recv_dtos;
    srq->max_recv_iov = attr->max_recv_iov;
    if (ia->verbs) {
        ibv_srq_init_attr init{};
        init.srq_context = srq;
        init.attr.max_wr = static_cast<std::uint32_t>(attr->max_recv_dtos);
        init.attr.max_sge = static_cast<std::uint32_t>(attr->max_recv_iov);
        srq->verbs_srq = ibv_create_srq(pz->verbs_pd, &init);
        if (srq->verbs_srq && ia->mlx5_direct && !direct_adopt_srq(srq)) {
            ibv_destroy_srq(srq->verbs_srq);
            srq->verbs_srq = nullptr;
        }
        if (!srq->verbs_srq) {
            destroy_object(srq);
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
        }
        if (!srq->direct)
            verbs_srq_slots(srq, static_cast<std::uint32_t>(attr->max_recv_dtos));
        ++pz->users;
        ia->adopt(srq);
        *out = srq;
        return DAT_SUCCESS;
    }
    srq->device_srq = ia->device->create_srq(pz->pd, static_cast<std::uint32_t>(attr->max_recv_dtos),
                                             static_cast<std::uint32_t>(attr->max_recv_iov));
    if (!srq->device_srq) {
        destroy_object(srq);
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    }
    srq->cookies.assign(srq->device_srq->wqe_cnt(), 0);
    srq->queue.init(srq->device_srq->descriptor(), srq->device_srq->wqe_cnt(), srq->cookies.data());
    srq->device_srq->set_callbacks(&srq_low_watermark, &srq_failed, srq);
    ++pz->users;
    ia->adopt(srq);
    *out = srq;
    return DAT_SUCCESS;
}

void destroy_srq(Srq* srq)
{
    if (srq->verbs_srq)
        ibv_destroy_srq(srq->verbs_srq);
    else
        srq->ia->device->destroy_srq(srq->device_srq);
    destroy_object(srq);
}

DAT_RETURN srq_free(DAT_SRQ_HANDLE handle)
{
    Srq* srq = from_handle<Srq>(handle);
    if (!srq)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    if (srq->users.load() > 0) // nothing changes: the endpoints go first
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE);
    --srq->pz->users;
    srq->ia->forget(srq);
    destroy_srq(srq);
    return DAT_SUCCESS;
}

DAT_RETURN srq_post_recv(DAT_SRQ_HANDLE handle, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie)
{
    Srq* srq = from_handle<Srq>(handle);
    if (!srq) [[unlikely]]
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    if (n < 0 || n > srq->max_recv_iov || (n > 0 && !iov)) [[unlikely]]
        return error(DAT_INVALID_PARAMETER, n < 0 || n > srq->max_recv_iov ? DAT_INVALID_ARG2 : DAT_INVALID_ARG3);
    if (srq->verbs_srq && !srq->direct) [[unlikely]]
        return verbs_srq_post_recv(srq, n, iov, cookie);
    if (static_cast<DAT_COUNT>(srq->queue.outstanding()) >= srq->max_recv_dtos ||
        !srq->queue.post(reinterpret_cast<const fastpath::Sge*>(iov), static_cast<std::uint32_t>(n), cookie.as_64))
        [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    if (srq->device_srq)
        srq->ia->device->receive_posted();
    return DAT_SUCCESS;
}

// Posted and not yet reaped.
DAT_COUNT srq_outstanding(Srq* srq)
{
    if (srq->verbs_srq && !srq->direct)
        return static_cast<DAT_COUNT>(srq->verbs_posted.load() - srq->verbs_reaped.load());
    return static_cast<DAT_COUNT>(srq->queue.outstanding());
}

// Buffers still on the SRQ: posted, not yet taken by an endpoint. A verbs
// device does not show when it takes one: there a buffer counts as taken
// when its completion is reaped.
DAT_COUNT srq_available(Srq* srq)
{
    if (srq->verbs_srq)
        return srq_outstanding(srq);
    return static_cast<DAT_COUNT>(srq->queue.posted() - srq->device_srq->taken());
}

bool srq_failed_now(Srq* srq) { return srq->device_srq ? srq->device_srq->failed() : srq->verbs_failed.load(); }

DAT_SRQ_STATE srq_state(Srq* srq) { return srq_failed_now(srq) ? DAT_SRQ_STATE_ERROR : DAT_SRQ_STATE_OPERATIONAL; }

DAT_RETURN srq_query(DAT_SRQ_HANDLE handle, DAT_SRQ_PARAM_MASK mask, DAT_SRQ_PARAM* p)
{
    Srq* srq = from_handle<Srq>(handle);
    if (!srq)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    if (mask & ~DAT_SRQ_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!p)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    std::memset(p, 0, sizeof *p);
    p->ia_handle = consumer_handle(srq->ia);
    p->srq_state = srq_state(srq);
    p->pz_handle = srq->pz;
    p->max_recv_dtos = srq->max_recv_dtos;
    p->max_recv_iov = srq->max_recv_iov;
    p->low_watermark = srq->low_watermark.load();
    // Outstanding first: a buffer reaped between the two reads then shows
    // in neither, never as available yet not outstanding.
    p->outstanding_dto_count = srq_outstanding(srq);
    p->available_dto_count = srq_available(srq);
    return DAT_SUCCESS;
}

DAT_RETURN srq_resize(DAT_SRQ_HANDLE handle, DAT_COUNT qlen)
{
    Srq* srq = from_handle<Srq>(handle);
    if (!srq)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    if (qlen <= 0)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (srq_failed_now(srq))
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_ERROR);
    if (qlen > kMaxRecvPerSrq)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    // Never lose a buffer: not below what is outstanding, nor below the
    // low watermark (spec 6.5.5).
    if (qlen < srq_outstanding(srq) || qlen < srq->low_watermark.load())
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE);
    if (srq->direct && static_cast<std::uint32_t>(qlen) > srq->queue.capacity()) {
        // rdma-core's mlx5 SRQs do not grow (IBV_SRQ_MAX_WR is refused): up to what was built.
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    } else if (srq->verbs_srq && !srq->direct && qlen > static_cast<DAT_COUNT>(srq->verbs_cookies.size())) {
        ibv_srq_attr a{};
        a.max_wr = static_cast<std::uint32_t>(qlen);
        if (ibv_modify_srq(srq->verbs_srq, &a, IBV_SRQ_MAX_WR) != 0) // not every device resizes
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
        srq->lock_completions();
        verbs_srq_slots(srq, static_cast<std::uint32_t>(qlen));
        srq->unlock_completions();
    } else if (!srq->verbs_srq && static_cast<std::uint32_t>(qlen) > srq->queue.capacity()) {
        // A larger ring, the WQEs at their indices; completions wait meanwhile.
        srq->lock_completions();
        bool grown = srq->ia->device->grow_srq(srq->device_srq, static_cast<std::uint32_t>(qlen));
        if (grown) {
            srq->cookies.resize(srq->device_srq->wqe_cnt(), 0);
            srq->queue.grow(srq->device_srq->descriptor(), srq->device_srq->wqe_cnt(), srq->cookies.data());
        }
        srq->unlock_completions();
        if (!grown)
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    // Shrinking keeps the ring and lowers what may be outstanding.
    srq->max_recv_dtos = qlen;
    return DAT_SUCCESS;
}

DAT_RETURN srq_set_lw(DAT_SRQ_HANDLE handle, DAT_COUNT low_watermark)
{
    Srq* srq = from_handle<Srq>(handle);
    if (!srq)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    if (low_watermark < 0 || low_watermark > srq->max_recv_dtos)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (srq_failed_now(srq))
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_ERROR);
    srq->low_watermark = low_watermark;
    if (srq->verbs_srq) {
        // The device's limit event (IBV_EVENT_SRQ_LIMIT_REACHED, once per
        // arming) fires when fewer than the limit are left; 0 disarms.
        // Already below it: the one event of this arming now.
        if (low_watermark > 0 && srq_available(srq) < low_watermark) {
            srq_low_watermark(srq);
            return DAT_SUCCESS;
        }
        ibv_srq_attr a{};
        a.srq_limit = static_cast<std::uint32_t>(low_watermark);
        if (low_watermark > 0 && ibv_modify_srq(srq->verbs_srq, &a, IBV_SRQ_LIMIT) != 0)
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
        return DAT_SUCCESS;
    }
    // Armed in the device; already below it: the one event of this arming now.
    if (srq->ia->device->arm_srq_limit(srq->device_srq, static_cast<std::uint32_t>(low_watermark)))
        srq_low_watermark(srq);
    return DAT_SUCCESS;
}

DAT_RETURN ep_recv_query(DAT_EP_HANDLE handle, DAT_COUNT* nbufs_allocated, DAT_COUNT* bufs_alloc_span)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    // One snapshot: buffers allocated to the endpoint whose completion is
    // not generated yet. The softnic fills them in message order, so every
    // one holds the next message and the span equals the count.
    DAT_COUNT allocated = 0;
    if (ep->verbs_qp && !ep->srq) // a verbs device shows no more than what is not reaped yet
        allocated = static_cast<DAT_COUNT>(ep->direct ? ep->rq.outstanding() : ep->verbs_recv_posted - ep->verbs_recv_reaped);
    if (softnic::Qp* qp = ep->qp) {
        const std::uint32_t completed = qp->receives_completed();
        allocated = static_cast<DAT_COUNT>(ep->srq ? qp->receives_taken() - completed : ep->rq.posted() - completed);
    }
    if (nbufs_allocated)
        *nbufs_allocated = allocated;
    if (bufs_alloc_span)
        *bufs_alloc_span = allocated;
    return DAT_SUCCESS;
}

DAT_RETURN ep_set_watermark(DAT_EP_HANDLE handle, DAT_COUNT soft, DAT_COUNT hard)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (!valid_watermark(soft) || !valid_watermark(hard))
        return error(DAT_INVALID_PARAMETER, !valid_watermark(soft) ? DAT_INVALID_ARG2 : DAT_INVALID_ARG3);
    if (ep->ia->verbs && (soft != DAT_WATERMARK_INFINITE || hard != DAT_WATERMARK_INFINITE))
        return not_supported(); // a verbs device does not show when a buffer is taken
    ep->soft_watermark = soft;
    ep->hard_watermark = hard;
    // Without a queue pair nothing is held yet: the marks apply when it is built.
    if (ep->qp && ep->ia->device->set_watermarks(ep->qp, device_mark(soft), device_mark(hard)))
        ep_soft_watermark(ep);
    return DAT_SUCCESS;
}

// --- PSP and CR -------------------------------------------------------------------------

// The provider refuses a request (the peer sees a non-peer reject).
void refuse_request(Ia* ia, std::uint64_t id, cm::RejectReason reason)
{
    if (ia->verbs)
        ia->rdma_cm->refuse(id);
    else
        ia->cm->reject(id, {}, reason);
}

void cm_request(Ia* ia, const cm::Request& r)
{
    Psp* psp = nullptr;
    std::lock_guard lock(ia->cm_mutex); // the PSP cannot be freed under us
    if (auto it = ia->listeners.find(r.listener); it != ia->listeners.end())
        psp = it->second;
    // An RSP takes one request; later ones are refused as if nobody listened.
    if (!psp || (psp->reserved_ep && psp->fired.exchange(true))) {
        refuse_request(ia, r.id, cm::RejectReason::no_listener);
        return;
    }
    Cr* cr = make_object<Cr>();
    if (!cr) {
        refuse_request(ia, r.id, cm::RejectReason::full);
        return;
    }
    cr->provider = ia->provider;
    cr->ia = ia;
    cr->psp = psp;
    cr->request_id = r.id;
    cr->remote = r.remote;
    cr->conn_qual = r.conn_qual;
    cr->private_data_size = static_cast<std::uint32_t>(r.private_data.size());
    if (!r.private_data.empty())
        std::memcpy(cr->private_data, r.private_data.data(), r.private_data.size());
    DAT_EVENT e{};
    e.event_number = DAT_CONNECTION_REQUEST_EVENT;
    e.evd_handle = psp->evd;
    auto& d = e.event_data.cr_arrival_event_data;
    d.sp_handle.psp_handle = psp; // the same slot as rsp_handle
    if (Ep* ep = psp->reserved_ep) {
        cr->ep = ep;
        // The endpoint is pending before the consumer can see the request.
        DAT_EP_STATE from = DAT_EP_STATE_RESERVED;
        if (!ep->state.compare_exchange_strong(from, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING)) {
            from = DAT_EP_STATE_UNCONFIGURED_RESERVED;
            ep->state.compare_exchange_strong(from, DAT_EP_STATE_UNCONFIGURED_PASSIVE);
        }
    }
    d.local_ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&ia->address);
    d.conn_qual = psp->conn_qual;
    d.cr_handle = cr;
    d.truncate_flag = DAT_FALSE;
    if (!post_event(psp->evd, e)) { // the CR EVD is full: a non-peer reject, no overflow event (spec)
        refuse_request(ia, r.id, cm::RejectReason::full);
        destroy_object(cr);
    }
}

DAT_RETURN psp_create_common(Ia* ia, DAT_CONN_QUAL* qual, bool any, DAT_EVD_HANDLE evd_handle, DAT_PSP_FLAGS flags,
                             DAT_PSP_HANDLE* out, Ep* reserved_ep = nullptr)
{
    Evd* evd = from_handle<Evd>(evd_handle);
    if (!evd || !(evd->flags & DAT_EVD_CR_FLAG) || evd->ia != ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
    if (!out || !qual)
        return error(DAT_INVALID_PARAMETER, !qual ? DAT_INVALID_ARG2 : DAT_INVALID_ARG5);
    if (flags == DAT_PSP_PROVIDER_FLAG)
        return not_supported(); // ep_creator is DAT_PSP_CREATES_EP_NEVER
    if (flags != DAT_PSP_CONSUMER_FLAG)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if (!any && (*qual == 0 || *qual > 0xffff))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2); // qualifiers are TCP ports 1..65535 here
    Psp* psp = reserved_ep ? make_object<Rsp>() : make_object<Psp>();
    if (!psp)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    psp->provider = ia->provider;
    psp->ia = ia;
    psp->evd = evd;
    psp->flags = flags;
    psp->reserved_ep = reserved_ep;
    psp->listener_id = reinterpret_cast<std::uintptr_t>(psp);
    std::uint16_t port = any ? 0 : static_cast<std::uint16_t>(*qual);
    {
        std::lock_guard lock(ia->cm_mutex);
        ia->listeners[psp->listener_id] = psp;
    }
    const int err = ia->verbs ? ia->rdma_cm->listen(reinterpret_cast<const sockaddr*>(&ia->address), port, psp->listener_id)
                              : ia->cm->listen(*reinterpret_cast<const sockaddr_in*>(&ia->address), port, psp->listener_id);
    if (err != 0) {
        {
            std::lock_guard lock(ia->cm_mutex);
            ia->listeners.erase(psp->listener_id);
        }
        destroy_object(psp);
        if (err == EADDRINUSE)
            return error(any ? DAT_CONN_QUAL_UNAVAILABLE : DAT_CONN_QUAL_IN_USE);
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    psp->conn_qual = port;
    *qual = port;
    if (reserved_ep) // unconfigured stays unconfigured (spec 6.6.2)
        reserved_ep->state = reserved_ep->state.load() == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED
                                 ? DAT_EP_STATE_UNCONFIGURED_RESERVED
                                 : DAT_EP_STATE_RESERVED;
    ++evd->users;
    ia->adopt(psp);
    *out = psp;
    return DAT_SUCCESS;
}

DAT_RETURN psp_create(DAT_IA_HANDLE handle, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                      DAT_PSP_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    return psp_create_common(ia, &qual, false, evd, flags, out);
}

DAT_RETURN psp_create_any(DAT_IA_HANDLE handle, DAT_CONN_QUAL* qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                          DAT_PSP_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    return psp_create_common(ia, qual, true, evd, flags, out);
}

DAT_RETURN psp_query(DAT_PSP_HANDLE handle, DAT_PSP_PARAM_MASK mask, DAT_PSP_PARAM* p)
{
    Psp* psp = from_handle<Psp>(handle);
    if (!psp)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP);
    if (mask & ~DAT_PSP_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !p)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (mask) {
        p->ia_handle = consumer_handle(psp->ia);
        p->conn_qual = psp->conn_qual;
        p->evd_handle = psp->evd;
        p->psp_flags = psp->flags;
    }
    return DAT_SUCCESS;
}

void destroy_psp(Psp* psp)
{
    Ia* ia = psp->ia;
    std::lock_guard lock(ia->cm_mutex);
    if (ia->verbs)
        ia->rdma_cm->unlisten(psp->listener_id);
    else
        ia->cm->unlisten(psp->listener_id);
    ia->listeners.erase(psp->listener_id);
    destroy_object(psp);
}

DAT_RETURN psp_free(DAT_PSP_HANDLE handle)
{
    Psp* psp = from_handle<Psp>(handle);
    if (!psp)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP);
    psp->ia->forget(psp);
    --psp->evd->users;
    destroy_psp(psp);
    return DAT_SUCCESS;
}

DAT_RETURN rsp_create(DAT_IA_HANDLE handle, DAT_CONN_QUAL qual, DAT_EP_HANDLE ep_handle, DAT_EVD_HANDLE evd,
                      DAT_RSP_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (!ep_handle)
        return not_supported(); // provider-created endpoints: ep_creator is DAT_PSP_CREATES_EP_NEVER
    Ep* ep = from_handle<Ep>(ep_handle);
    if (!ep || ep->ia != ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (const DAT_EP_STATE s = ep->state.load();
        s != DAT_EP_STATE_UNCONNECTED && s != DAT_EP_STATE_UNCONFIGURED_UNCONNECTED)
        return error(DAT_INVALID_STATE, ep_state_subtype(s));
    if (qual == 0)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    return psp_create_common(ia, &qual, false, evd, DAT_PSP_CONSUMER_FLAG, out, ep);
}

DAT_RETURN rsp_query(DAT_RSP_HANDLE handle, DAT_RSP_PARAM_MASK mask, DAT_RSP_PARAM* p)
{
    Rsp* rsp = from_handle<Rsp>(handle);
    if (!rsp)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP);
    if (mask & ~DAT_RSP_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !p)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (mask) {
        p->ia_handle = consumer_handle(rsp->ia);
        p->conn_qual = rsp->conn_qual;
        p->evd_handle = rsp->evd;
        p->ep_handle = rsp->reserved_ep;
    }
    return DAT_SUCCESS;
}

DAT_RETURN rsp_free(DAT_RSP_HANDLE handle)
{
    Rsp* rsp = from_handle<Rsp>(handle);
    if (!rsp)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP);
    // The endpoint returns to the consumer unless a request already took it.
    Ep* ep = rsp->reserved_ep;
    DAT_EP_STATE s = DAT_EP_STATE_RESERVED;
    if (!ep->state.compare_exchange_strong(s, DAT_EP_STATE_UNCONNECTED)) {
        s = DAT_EP_STATE_UNCONFIGURED_RESERVED;
        ep->state.compare_exchange_strong(s, DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
    }
    rsp->ia->forget(rsp);
    --rsp->evd->users;
    destroy_psp(rsp);
    return DAT_SUCCESS;
}

DAT_RETURN cr_query(DAT_CR_HANDLE handle, DAT_CR_PARAM_MASK mask, DAT_CR_PARAM* p)
{
    Cr* cr = from_handle<Cr>(handle);
    if (!cr)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    if (mask & ~DAT_CR_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !p)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (mask) {
        p->remote_ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&cr->remote);
        p->remote_port_qual = cm::port_of(cr->remote);
        p->private_data_size = static_cast<DAT_COUNT>(cr->private_data_size);
        p->private_data = cr->private_data_size ? cr->private_data : nullptr;
        p->local_ep_handle = cr->ep; // the RSP's endpoint; none for a PSP
    }
    return DAT_SUCCESS;
}

DAT_RETURN cr_accept(DAT_CR_HANDLE handle, DAT_EP_HANDLE ep_handle, DAT_COUNT pdata_size, const DAT_PVOID pdata)
{
    Cr* cr = from_handle<Cr>(handle);
    if (!cr)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    if (pdata_size < 0 || pdata_size > max_private_data(cr->ia) || (pdata_size && !pdata))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3); // the CR stays usable
    Ep* ep = nullptr;
    if (cr->ep) { // an RSP's request: only its own endpoint may take it
        if (ep_handle && ep_handle != cr->ep)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        ep = cr->ep;
        if (const DAT_EP_STATE now = ep->state.load(); now != DAT_EP_STATE_PASSIVE_CONNECTION_PENDING)
            return error(DAT_INVALID_STATE, ep_state_subtype(now));
    } else {
        if (!ep_handle)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2); // we never create EPs for PSPs
        ep = from_handle<Ep>(ep_handle);
        if (!ep || ep->ia != cr->ia)
            return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        if (const DAT_EP_STATE now = ep->state.load(); now != DAT_EP_STATE_UNCONNECTED)
            return error(DAT_INVALID_STATE, ep_state_subtype(now));
    }
    if (DAT_RETURN rc = ensure_qp(ep); rc != DAT_SUCCESS)
        return rc;
    Ia* ia = cr->ia;
    ep->remote = cr->remote;
    ep->remote_port = cm::port_of(cr->remote);
    ep->state = DAT_EP_STATE_PASSIVE_CONNECTION_PENDING;
    const auto* bytes = static_cast<const std::uint8_t*>(pdata);
    {
        std::lock_guard lock(ia->cm_mutex);
        ep->cm_id = cr->request_id;
        ia->attempts[cr->request_id] = ep;
    }
    const bool sent = ia->verbs ? ia->rdma_cm->accept(cr->request_id, ep->verbs_qp,
                                                      std::vector<std::uint8_t>(bytes, bytes + pdata_size),
                                                      std::chrono::milliseconds(5000), read_depth(ep))
                                : ia->cm->accept(cr->request_id, ep->qp->qpn(),
                                                 std::vector<std::uint8_t>(bytes, bytes + pdata_size),
                                                 std::chrono::milliseconds(5000));
    if (!sent) {
        {
            std::lock_guard lock(ia->cm_mutex);
            ia->attempts.erase(cr->request_id);
        }
        ep->state = DAT_EP_STATE_DISCONNECTED;
        post_connection_event(ep, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, nullptr, 0);
    }
    destroy_object(cr); // the CR is consumed either way
    return DAT_SUCCESS;
}

DAT_RETURN cr_reject(DAT_CR_HANDLE handle, DAT_COUNT pdata_size, const DAT_PVOID pdata)
{
    Cr* cr = from_handle<Cr>(handle);
    if (!cr)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    if (pdata_size < 0 || pdata_size > max_private_data(cr->ia) || (pdata_size && !pdata))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    const auto* bytes = static_cast<const std::uint8_t*>(pdata);
    if (cr->ia->verbs)
        cr->ia->rdma_cm->reject(cr->request_id, std::vector<std::uint8_t>(bytes, bytes + pdata_size));
    else
        cr->ia->cm->reject(cr->request_id, std::vector<std::uint8_t>(bytes, bytes + pdata_size));
    if (cr->ep) { // an RSP's endpoint goes back to the consumer
        DAT_EP_STATE s = DAT_EP_STATE_PASSIVE_CONNECTION_PENDING;
        if (!cr->ep->state.compare_exchange_strong(s, DAT_EP_STATE_UNCONNECTED)) {
            s = DAT_EP_STATE_UNCONFIGURED_PASSIVE;
            cr->ep->state.compare_exchange_strong(s, DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
        }
    }
    destroy_object(cr);
    return DAT_SUCCESS;
}

// --- CNO ------------------------------------------------------------------------------

bool agent_valid(const DAT_OS_WAIT_PROXY_AGENT& a) { return a.proxy_agent_func || !a.instance_data; }

DAT_RETURN cno_make(Ia* ia, const DAT_OS_WAIT_PROXY_AGENT& agent, int fd, DAT_CNO_HANDLE* out)
{
    Cno* cno = make_object<Cno>();
    if (!cno)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    cno->provider = ia->provider;
    cno->ia = ia;
    cno->agent = agent;
    cno->fd = fd;
    ia->adopt(cno);
    *out = cno;
    return DAT_SUCCESS;
}

DAT_RETURN cno_create(DAT_IA_HANDLE handle, DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (!agent_valid(agent))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    return cno_make(ia, agent, -1, out);
}

DAT_RETURN cno_fd_create(DAT_IA_HANDLE handle, DAT_FD* fd_out, DAT_CNO_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (!fd_out || !out)
        return error(DAT_INVALID_PARAMETER, !fd_out ? DAT_INVALID_ARG2 : DAT_INVALID_ARG3);
    // Readable after a trigger; reading it (or dat_cno_wait) re-arms it.
    const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    if (DAT_RETURN rc = cno_make(ia, DAT_OS_WAIT_PROXY_AGENT{nullptr, nullptr}, fd, out); rc != DAT_SUCCESS) {
        ::close(fd);
        return rc;
    }
    *fd_out = fd;
    return DAT_SUCCESS;
}

DAT_RETURN cno_modify_agent(DAT_CNO_HANDLE handle, DAT_OS_WAIT_PROXY_AGENT agent)
{
    Cno* cno = from_handle<Cno>(handle);
    if (!cno)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    if (!agent_valid(agent))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(cno->mutex);
    if (cno->fd >= 0)
        return error(DAT_INVALID_STATE); // its file descriptor is its agent for good
    cno->agent = agent;
    return DAT_SUCCESS;
}

DAT_RETURN cno_query(DAT_CNO_HANDLE handle, DAT_CNO_PARAM_MASK mask, DAT_CNO_PARAM* param)
{
    Cno* cno = from_handle<Cno>(handle);
    if (!cno)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    // The Linux values are not bit flags (PROXY = 3, ALL = 4): any of them fills everything.
    if (static_cast<unsigned>(mask) > DAT_CNO_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !param)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!mask)
        return DAT_SUCCESS;
    std::lock_guard lock(cno->mutex);
    std::memset(param, 0, sizeof *param);
    param->ia_handle = consumer_handle(cno->ia);
    if (cno->fd >= 0) {
        param->proxy_type = DAT_PROXY_TYPE_FD;
        param->proxy.fd = cno->fd;
    } else if (cno->agent.proxy_agent_func) {
        param->proxy_type = DAT_PROXY_TYPE_AGENT;
        param->proxy.agent = cno->agent;
    } else {
        param->proxy_type = DAT_PROXY_TYPE_NONE;
        param->proxy.agent = DAT_OS_WAIT_PROXY_AGENT{nullptr, nullptr};
    }
    return DAT_SUCCESS;
}

void destroy_cno(Cno* cno)
{
    if (cno->fd >= 0)
        ::close(cno->fd);
    destroy_object(cno);
}

DAT_RETURN cno_free(DAT_CNO_HANDLE handle)
{
    Cno* cno = from_handle<Cno>(handle);
    if (!cno)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    {
        std::lock_guard lock(cno->mutex);
        if (cno->users.load() > 0 || cno->waiters > 0)
            return error(DAT_INVALID_STATE, cno->waiters > 0 ? DAT_INVALID_STATE_CNO_DEAD : DAT_INVALID_STATE_CNO_IN_USE);
    }
    cno->ia->forget(cno);
    destroy_cno(cno);
    return DAT_SUCCESS;
}

// Wakes every waiter with a NULL EVD (the IA closes, or no EVD feeds it any more).
void release_cno_waiters(Cno* cno)
{
    std::unique_lock lock(cno->mutex);
    ++cno->release_epoch;
    cno->cv.notify_all();
    while (cno->waiters > 0) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
    }
}

DAT_RETURN cno_wait(DAT_CNO_HANDLE handle, DAT_TIMEOUT timeout, DAT_EVD_HANDLE* evd_out)
{
    Cno* cno = from_handle<Cno>(handle);
    if (!cno)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    if (!evd_out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    std::unique_lock lock(cno->mutex);
    ++cno->waiters;
    const std::uint64_t epoch = cno->release_epoch;
    auto woken = [&] { return cno->pending > 0 || cno->release_epoch != epoch; };
    if (timeout == DAT_TIMEOUT_INFINITE)
        cno->cv.wait(lock, woken);
    else
        cno->cv.wait_for(lock, std::chrono::microseconds(timeout), woken);
    --cno->waiters;
    if (cno->pending > 0) {
        cno->pending = 0; // this waiter takes the trigger
        *evd_out = cno->last_trigger;
        if (cno->fd >= 0) { // taken here: the descriptor is no longer readable
            std::uint64_t drained;
            [[maybe_unused]] ssize_t n = ::read(cno->fd, &drained, sizeof drained);
        }
        return DAT_SUCCESS;
    }
    *evd_out = DAT_HANDLE_NULL;
    if (cno->release_epoch != epoch)
        return DAT_SUCCESS; // released: the hint is NULL
    return error(DAT_QUEUE_EMPTY);
}

DAT_RETURN cno_trigger(DAT_CNO_HANDLE handle, DAT_EVD_HANDLE* evd_out)
{
    Cno* cno = from_handle<Cno>(handle);
    if (!cno)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    if (!evd_out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(cno->mutex);
    *evd_out = cno->last_trigger;
    return DAT_SUCCESS;
}

// Moves an EVD from its CNO (if any) to `to` (may be NULL).
void link_cno(Evd* evd, Cno* to)
{
    Cno* from = evd->cno.exchange(to);
    if (to)
        ++to->users;
    if (to && evd->verbs_cq) { // its completions trigger the CNO from now on, through the device thread
        evd->ia->verbs->watch_cq(evd, evd->verbs_channel);
        std::lock_guard lock(evd->mutex);
        arm_cq(evd);
    } else if (!to && evd->verbs_cq) {
        evd->ia->verbs->unwatch_cq(evd);
    }
    if (from && --from->users == 0)
        release_cno_waiters(from); // nothing can trigger it any more
}

DAT_RETURN evd_modify_cno(DAT_EVD_HANDLE handle, DAT_CNO_HANDLE cno_handle)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    Cno* cno = cno_handle ? from_handle<Cno>(cno_handle) : nullptr;
    if (cno_handle && (!cno || cno->ia != evd->ia))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    link_cno(evd, cno);
    return DAT_SUCCESS;
}

// --- IA -------------------------------------------------------------------------

// --- verbs IAs: device, events -----------------------------------------------------------

std::string mtu_text(ibv_mtu mtu)
{
    switch (mtu) {
    case IBV_MTU_256: return "256";
    case IBV_MTU_512: return "512";
    case IBV_MTU_1024: return "1024";
    case IBV_MTU_2048: return "2048";
    default: return "4096";
    }
}

// Whether an mlx5 device's IA takes the direct path, and the data path
// attribute that says so. Opt-in (FASTDAPL_MLX5_DIRECT=1) until it has run
// on mlx5 hardware: no machine this project is tested on has one.
std::string choose_mlx5_direct(ibv_context* context, bool& direct)
{
    direct = false;
    const char* want = std::getenv("FASTDAPL_MLX5_DIRECT");
    if (!kMlx5DirectBuilt)
        return "generic verbs (mlx5 device; this build has no libmlx5, so no direct path)";
    if (!want || std::strcmp(want, "1") != 0)
        return "generic verbs (mlx5 device; FASTDAPL_MLX5_DIRECT=1 selects the mlx5 direct path)";
#if FASTDAPL_HAVE_MLX5DV
    // Each EP needs a thread domain for a doorbell register of its own: try one.
    if (ibv_pd* pd = ibv_alloc_pd(context)) {
        verbs::Mlx5Resources r = verbs::create_mlx5_resources(context, pd);
        direct = r.dedicated_doorbell;
        verbs::destroy_mlx5_resources(r);
        ibv_dealloc_pd(pd);
    }
#else
    (void)context;
#endif
    return direct ? "mlx5 direct (src/fastpath posts and polls; a doorbell register per endpoint)"
                  : "generic verbs (mlx5 device; no thread domain, which the direct path needs)";
}

// Opens the device and port of a verbs IA and finds its address (the
// port's network interface's). The provider-specific attributes say which
// device, port and data path the IA uses.
DAT_RETURN open_verbs_device(const std::string& name, std::uint8_t port, int family, std::unique_ptr<verbs::Device>& device,
                             sockaddr_storage& addr, std::vector<std::pair<std::string, std::string>>& specific,
                             bool& mlx5_direct)
{
    std::string why;
    device = verbs::Device::open(name, port, why);
    if (!device) {
        if (std::getenv("FASTDAPL_DEBUG"))
            std::fprintf(stderr, "fastdapl: %s\n", why.c_str());
        return error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    }
    for (const verbs::PortInfo& p : verbs::discover_ports()) {
        if (p.device != name || p.port != port)
            continue;
        addr = family == AF_INET6 ? p.address6 : p.address;
        specific = {{"FASTDAPL_DEVICE", p.device},
                    {"FASTDAPL_PORT", std::to_string(p.port)},
                    {"FASTDAPL_GID", p.gid},
                    {"FASTDAPL_GID_INDEX", std::to_string(p.gid_index)},
                    {"FASTDAPL_LINK_LAYER", p.link_layer},
                    {"FASTDAPL_NETDEV", p.netdev}};
        std::string path = "generic verbs";
        if (p.mlx5)
            path = choose_mlx5_direct(device->context(), mlx5_direct);
        specific.emplace_back("FASTDAPL_DATA_PATH", path);
    }
    // rdma_cm and the DAT address need an IP address of the port's interface.
    if (addr.ss_family == AF_UNSPEC || (family != AF_UNSPEC && addr.ss_family != family)) {
        if (std::getenv("FASTDAPL_DEBUG"))
            std::fprintf(stderr, "fastdapl: %s port %u has no %s address\n", name.c_str(), port,
                         family == AF_INET6 ? "IPv6" : family == AF_INET ? "IPv4" : "IP");
        device.reset();
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
    }
    return DAT_SUCCESS;
}

// A CQ that was armed has completions (`events` read from its channel by
// the device thread): waiters and the CNO hear of it.
void verbs_cq_event(Evd* evd, unsigned events)
{
    Cno* cno;
    {
        std::lock_guard lock(evd->mutex);
        note_cq_events(evd, events);
        wake_waiters(evd);
        cno = cno_to_trigger(evd);
        if (evd->cno.load()) // a CNO keeps the CQ armed
            arm_cq(evd);
    }
    if (cno)
        trigger_cno(cno, evd);
}

// Device, port, queue pair and SRQ events as DAT async events.
void verbs_async_event(Ia* ia, const ibv_async_event& ev)
{
    if (g_debug)
        std::fprintf(stderr, "fastdapl: async event %s\n", ibv_event_type_str(ev.event_type));
    switch (ev.event_type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR: {
        std::lock_guard lock(ia->cm_mutex); // the EP cannot be freed under us
        Ep* ep = ia->verbs_eps.find(ev.element.qp->qp_num);
        if (!ep)
            return;
        ep_connection_ended(ep, false);
        post_async(ia, DAT_ASYNC_ERROR_EP_BROKEN, ep, DAT_EP_TRANSFER_TO_ERROR);
        return;
    }
    case IBV_EVENT_CQ_ERR:
        if (auto* evd = static_cast<Evd*>(ev.element.cq->cq_context))
            report_overflow(evd);
        return;
    case IBV_EVENT_SRQ_LIMIT_REACHED: // once per arming, like the DAT low watermark
        srq_low_watermark(ev.element.srq->srq_context);
        return;
    case IBV_EVENT_SRQ_ERR: {
        auto* srq = static_cast<Srq*>(ev.element.srq->srq_context);
        srq->verbs_failed = true;
        srq_failed(srq);
        return;
    }
    case IBV_EVENT_DEVICE_FATAL:
    case IBV_EVENT_PORT_ERR:
        post_async(ia, DAT_ASYNC_ERROR_IA_CATASTROPHIC, ia, DAT_IA_CATASTROPHIC_ERROR);
        return;
    default: // COMM_EST, LAST_WQE_REACHED (the connection's end says it), port up, LID/GID changes
        return;
    }
}

void rdma_cm_disconnected(Ia* ia, std::uint64_t id, bool orderly)
{
    std::lock_guard lock(ia->cm_mutex); // the EP cannot be freed under us
    auto it = ia->connections.find(id);
    if (it != ia->connections.end())
        ep_connection_ended(it->second, orderly);
}

void start_verbs(Ia* ia)
{
    ia->verbs->start({[](void* evd, unsigned events) { verbs_cq_event(static_cast<Evd*>(evd), events); },
                      [ia](const ibv_async_event& ev) { verbs_async_event(ia, ev); }});
    ia->rdma_cm = std::make_unique<cm::RdmaCm>(cm::RdmaCm::Callbacks{
        [ia](const cm::Request& r) { cm_request(ia, r); },
        [ia](std::uint64_t id, cm::Outcome o, const cm::Message& m) { cm_result(ia, id, o, -1, m); },
        [ia](std::uint64_t id, bool orderly) { rdma_cm_disconnected(ia, id, orderly); }});
}

DAT_RETURN ia_open(const DAT_NAME_PTR name, DAT_COUNT async_qlen, DAT_EVD_HANDLE* async_evd, DAT_IA_HANDLE* ia_out)
{
    if (!name || !async_evd || !ia_out)
        return error(DAT_INVALID_PARAMETER, !name ? DAT_INVALID_ARG1 : !async_evd ? DAT_INVALID_ARG3 : DAT_INVALID_ARG4);
    Registration* reg = nullptr;
    {
        std::lock_guard lock(g_registrations_mutex);
        auto it = g_registrations.find(name);
        if (it == g_registrations.end())
            return error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
        reg = it->second.get();
    }
    Evd* shared = nullptr;
    if (*async_evd != DAT_HANDLE_NULL && *async_evd != DAT_EVD_ASYNC_EXISTS) {
        shared = from_handle<Evd>(*async_evd);
        if (!shared || !(shared->flags & DAT_EVD_ASYNC_FLAG))
            return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC);
    } else if (*async_evd == DAT_HANDLE_NULL && (async_qlen <= 0 || async_qlen > kMaxEvdQlen)) {
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    // A verbs IA names its device and port; a softnic IA its interface.
    std::string device_name;
    std::uint8_t port = 0;
    int family = AF_UNSPEC;
    const bool verbs_ia = verbs::parse_ia_params(reg->ia_params, device_name, port, &family);
    sockaddr_storage addr{};
    std::unique_ptr<verbs::Device> device;
    std::vector<std::pair<std::string, std::string>> specific;
    bool mlx5_direct = false;
    if (verbs_ia) {
        if (DAT_RETURN rc = open_verbs_device(device_name, port, family, device, addr, specific, mlx5_direct);
            rc != DAT_SUCCESS)
            return rc;
    } else if (!resolve_address(reg->ia_params, addr)) {
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
    }
    Ia* ia = make_object<Ia>();
    if (!ia)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    ia->provider = &reg->table;
    ia->ia = ia;
    ia->name = name;
    ia->address = addr;
    if (verbs_ia) {
        ia->verbs = std::move(device);
        ia->mlx5_direct = mlx5_direct;
        ia->specific = std::move(specific);
        start_verbs(ia);
    } else {
        ia->device = std::make_unique<softnic::Device>();
    }
    ia->specific.emplace_back("DAT_IB_TRANSPORT_MTU", verbs_ia ? mtu_text(ia->verbs->port_attr().active_mtu) : "4096");
    // Every IA reads remote memory; consumers written for the reference
    // (its dtest) look for this name before they post RDMA reads.
    ia->specific.emplace_back("DAT_IB_RDMA_READ", "TRUE");
    for (const auto& [k, v] : ia->specific)
        ia->specific_attrs.push_back({k.c_str(), v.c_str()});
    // FASTDAPL_SOFTNIC_INLINE=0: every post wakes the engine thread (to
    // measure the fast path alone, or compare).
    const char* inline_env = std::getenv("FASTDAPL_SOFTNIC_INLINE");
    ia->inline_sends = !(inline_env && std::strcmp(inline_env, "0") == 0);
    if (!verbs_ia)
        ia->cm = std::make_unique<cm::SocketCm>(cm::SocketCm::Callbacks{
            [ia](const cm::Request& r) { cm_request(ia, r); },
            [ia](std::uint64_t id, cm::Outcome o, int fd, const cm::Message& m) { cm_result(ia, id, o, fd, m); }});
    if (*async_evd == DAT_HANDLE_NULL) {
        // At least kMinAsyncQlen: every SRQ endpoint's disconnect reports
        // there, and consumers size it for errors only (dtestsrq asks 8 for
        // 100 connections). The spec lets the provider give more.
        ia->async_evd = new_evd(ia, std::max(async_qlen, kMinAsyncQlen), DAT_EVD_ASYNC_FLAG);
        if (!ia->async_evd) {
            destroy_object(ia);
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        }
        ia->async_evd->is_async = true;
        ia->owns_async_evd = true;
        *async_evd = ia->async_evd;
    } else {
        ia->async_evd = shared; // nullptr for DAT_EVD_ASYNC_EXISTS
    }
    *ia_out = ia;
    return DAT_SUCCESS;
}

void release_waiters(Evd* evd)
{
    std::unique_lock lock(evd->mutex);
    evd->aborted = true;
    ++evd->unwaitable_epoch;
    wake_waiters(evd);
    while (evd->waiters > 0) { // they leave promptly once woken
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
    }
}

void release_memory(Lmr* lmr);
void destroy_pz(Pz* pz);
void destroy_cq(Evd* evd);

void destroy_any(Object* o)
{
    switch (o->type) {
    case DAT_HANDLE_TYPE_LMR: {
        auto* lmr = static_cast<Lmr*>(o);
        release_memory(lmr);
        destroy_object(lmr);
        break;
    }
    case DAT_HANDLE_TYPE_PZ:
        destroy_pz(static_cast<Pz*>(o));
        break;
    case DAT_HANDLE_TYPE_EVD: {
        auto* evd = static_cast<Evd*>(o);
        release_waiters(evd);
        link_cno(evd, nullptr); // CNOs go after every EVD
        destroy_cq(evd);
        destroy_object(evd);
        break;
    }
    case DAT_HANDLE_TYPE_EP:
        destroy_ep(static_cast<Ep*>(o));
        break;
    case DAT_HANDLE_TYPE_PSP:
        destroy_psp(static_cast<Psp*>(o));
        break;
    case DAT_HANDLE_TYPE_RSP:
        destroy_psp(static_cast<Rsp*>(o));
        break;
    case DAT_HANDLE_TYPE_SRQ:
        destroy_srq(static_cast<Srq*>(o));
        break;
    case DAT_HANDLE_TYPE_CNO: {
        auto* cno = static_cast<Cno*>(o);
        release_cno_waiters(cno);
        destroy_cno(cno);
        break;
    }
    default:
        break;
    }
}

DAT_RETURN ia_close(DAT_IA_HANDLE handle, DAT_CLOSE_FLAGS flags)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (raw(flags) != DAT_CLOSE_ABRUPT_FLAG && raw(flags) != DAT_CLOSE_GRACEFUL_FLAG)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (flags == DAT_CLOSE_GRACEFUL_FLAG && ia->children.load() > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE);
    // Abrupt close: every object of the IA goes, newest first (LMRs before
    // the PZ they use); a thread waiting on an EVD returns DAT_ABORT.
    std::vector<Object*> objects;
    {
        std::lock_guard lock(ia->objects_mutex);
        objects.swap(ia->objects);
    }
    if (ia->owns_async_evd && ia->async_evd)
        objects.insert(objects.begin(), ia->async_evd);
    // Connections first (EPs and PSPs, which use the CM), then the rest.
    for (auto it = objects.rbegin(); it != objects.rend(); ++it)
        if ((*it)->type == DAT_HANDLE_TYPE_EP || (*it)->type == DAT_HANDLE_TYPE_PSP || (*it)->type == DAT_HANDLE_TYPE_RSP)
            destroy_any(*it);
    ia->cm.reset(); // no callback runs after this
    ia->rdma_cm.reset();
    for (auto it = objects.rbegin(); it != objects.rend(); ++it)
        if ((*it)->magic == kObjectMagic && (*it)->type != DAT_HANDLE_TYPE_CNO)
            destroy_any(*it);
    for (auto it = objects.rbegin(); it != objects.rend(); ++it) // last: EVDs may still have named them
        if ((*it)->magic == kObjectMagic)
            destroy_any(*it);
    ia->children = 0;
    ia->device.reset();
    ia->verbs.reset();
    destroy_object(ia);
    return DAT_SUCCESS;
}

void fill_ia_attr(Ia* ia, DAT_IA_ATTR* a)
{
    std::memset(a, 0, sizeof *a);
    std::snprintf(a->adapter_name, sizeof a->adapter_name, "softnic-tcp");
    std::snprintf(a->vendor_name, sizeof a->vendor_name, "fastdapl");
    a->hardware_version_major = kProviderMajor;
    a->hardware_version_minor = kProviderMinor;
    a->ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&ia->address);
    a->max_eps = 1 << 16;
    a->max_dto_per_ep = kMaxDtosPerEp;
    a->max_rdma_read_per_ep_in = kMaxRdmaReadPerEp;
    a->max_rdma_read_per_ep_out = kMaxRdmaReadPerEp;
    a->max_evds = 1 << 16;
    a->max_evd_qlen = kMaxEvdQlen;
    a->max_iov_segments_per_dto = softnic::kMaxSge;
    a->max_lmrs = 1 << 24;
    a->max_lmr_block_size = 0xffffffffu;
    a->max_lmr_virtual_address = ~DAT_VADDR{0};
    a->max_pzs = 1 << 16;
    a->max_message_size = softnic::kMaxMessageSize;
    a->max_rdma_size = softnic::kMaxMessageSize;
    a->max_rmrs = 0; // memory windows: not yet
    a->max_rmr_target_address = 0;
    a->max_srqs = 1 << 16;
    a->max_ep_per_srq = kMaxEpPerSrq;
    a->max_recv_per_srq = kMaxRecvPerSrq;
    a->max_iov_segments_per_rdma_read = softnic::kMaxSge;
    a->max_iov_segments_per_rdma_write = softnic::kMaxSge;
    a->max_rdma_read_in = 16;
    a->max_rdma_read_out = 16;
    a->max_rdma_read_per_ep_in_guaranteed = DAT_TRUE;
    a->max_rdma_read_per_ep_out_guaranteed = DAT_TRUE;
    a->zb_supported = DAT_FALSE;
    a->extension_supported = DAT_EXTENSION_NONE;
    if (ia->verbs) { // what the device says it can do
        const ibv_device_attr& d = ia->verbs->attr();
        std::snprintf(a->adapter_name, sizeof a->adapter_name, "%s", ia->verbs->name().c_str());
        a->hardware_version_major = static_cast<DAT_UINT32>(d.hw_ver);
        a->hardware_version_minor = 0;
        a->max_eps = d.max_qp;
        a->max_dto_per_ep = std::min(d.max_qp_wr, kMaxDtosPerEp);
        a->max_rdma_read_per_ep_in = d.max_qp_rd_atom;
        a->max_rdma_read_per_ep_out = d.max_qp_init_rd_atom;
        a->max_rdma_read_in = d.max_qp_rd_atom;
        a->max_rdma_read_out = d.max_qp_init_rd_atom;
        a->max_evd_qlen = std::min(d.max_cqe, kMaxEvdQlen);
        a->max_iov_segments_per_dto = std::min<DAT_COUNT>(d.max_sge, softnic::kMaxSge);
        a->max_iov_segments_per_rdma_read = a->max_iov_segments_per_dto;
        a->max_iov_segments_per_rdma_write = a->max_iov_segments_per_dto;
        a->max_lmrs = d.max_mr;
        a->max_lmr_block_size = d.max_mr_size;
        a->max_pzs = d.max_pd;
        a->max_message_size = ia->verbs->port_attr().max_msg_sz;
        a->max_rdma_size = ia->verbs->port_attr().max_msg_sz;
        a->max_srqs = d.max_srq;
        a->max_recv_per_srq = std::min(d.max_srq_wr, kMaxRecvPerSrq);
    }
}

void fill_provider_attr(Ia* ia, DAT_PROVIDER_ATTR* p)
{
    // evd_stream_merging_supported is const in the ABI: build the whole struct.
    DAT_PROVIDER_ATTR attr{};
    std::snprintf(attr.provider_name, sizeof attr.provider_name, "fastdapl");
    attr.provider_version_major = kProviderMajor;
    attr.provider_version_minor = kProviderMinor;
    attr.dapl_version_major = DAT_VERSION_MAJOR;
    attr.dapl_version_minor = DAT_VERSION_MINOR;
    attr.lmr_mem_types_supported = static_cast<DAT_MEM_TYPE>(DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR);
    attr.iov_ownership_on_return = DAT_IOV_CONSUMER;
    attr.dat_qos_supported = DAT_QOS_BEST_EFFORT;
    attr.completion_flags_supported = static_cast<DAT_COMPLETION_FLAGS>(
        DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
        DAT_COMPLETION_BARRIER_FENCE_FLAG);
    attr.is_thread_safe = DAT_FALSE;
    attr.max_private_data_size = max_private_data(ia);
    attr.supports_multipath = DAT_FALSE;
    attr.ep_creator = DAT_PSP_CREATES_EP_NEVER;
    attr.pz_support = DAT_PZ_UNIQUE;
    attr.optimal_buffer_alignment = DAT_OPTIMAL_ALIGNMENT;
    // Software, CR, DTO, connection and async streams merge freely; RMR bind
    // completions (index 4) do not exist yet.
    for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j)
            const_cast<DAT_BOOLEAN&>(attr.evd_stream_merging_supported[i][j]) = (i != 4 && j != 4) ? DAT_TRUE : DAT_FALSE;
    attr.srq_supported = DAT_TRUE;
    attr.srq_watermarks_supported =
        ia->verbs ? FASTDAPL_SRQ_WATERMARK_LOW // the device's SRQ limit event; takes are not visible
                  : FASTDAPL_SRQ_WATERMARK_LOW | FASTDAPL_EP_WATERMARK_SOFT_HIGH | FASTDAPL_EP_WATERMARK_HARD_HIGH;
    // Softnic: receive buffers are checked against the SRQ's PZ. Verbs: the
    // device checks them against the QP's PD, so the PZs must match.
    attr.srq_ep_pz_difference_supported = ia->verbs ? DAT_FALSE : DAT_TRUE;
    attr.srq_info_supported = FASTDAPL_SRQ_INFO_AVAILABLE | FASTDAPL_SRQ_INFO_OUTSTANDING;
    attr.ep_recv_info_supported = FASTDAPL_EP_RECV_INFO_NBUFS | FASTDAPL_EP_RECV_INFO_SPAN;
    attr.lmr_sync_req = DAT_FALSE;
    attr.dto_async_return_guaranteed = DAT_FALSE;
    attr.rdma_write_for_rdma_read_req = DAT_FALSE;
    attr.rdma_read_lmr_rmr_context_exposure = DAT_FALSE;
    attr.rmr_scope_supported = DAT_RMR_SCOPE_PZ;
    attr.is_signal_safe = DAT_FALSE;
    attr.ha_supported = DAT_FALSE;
    attr.ha_loadbalancing = DAT_HA_LB_NONE;
    // Consumers written for IB providers size messages by the transport's
    // MTU when not told (the reference's dtestsrq refuses to run without
    // it). The softnic has no packets; 4096 is the largest IB/RoCE MTU.
    // Verbs IAs also name their device, port, GID and data path.
    attr.num_provider_specific_attr = static_cast<DAT_COUNT>(ia->specific_attrs.size());
    attr.provider_specific_attr = ia->specific_attrs.data();
    std::memcpy(static_cast<void*>(p), &attr, sizeof attr);
}

DAT_RETURN ia_query(DAT_IA_HANDLE handle, DAT_EVD_HANDLE* async_evd, DAT_IA_ATTR_MASK ia_mask, DAT_IA_ATTR* ia_attr,
                    DAT_PROVIDER_ATTR_MASK provider_mask, DAT_PROVIDER_ATTR* provider_attr)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if ((ia_mask && !ia_attr) || (provider_mask && !provider_attr))
        return error(DAT_INVALID_PARAMETER, ia_mask && !ia_attr ? DAT_INVALID_ARG4 : DAT_INVALID_ARG6);
    if (async_evd)
        *async_evd = ia->async_evd ? static_cast<DAT_EVD_HANDLE>(ia->async_evd) : DAT_EVD_OUT_OF_SCOPE;
    if (ia_mask)
        fill_ia_attr(ia, ia_attr);
    if (provider_mask)
        fill_provider_attr(ia, provider_attr);
    return DAT_SUCCESS;
}

// --- generic handle calls --------------------------------------------------------

DAT_RETURN set_consumer_context(DAT_HANDLE h, DAT_CONTEXT context)
{
    Object* o = any_object(h);
    if (!o)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    o->context = context;
    return DAT_SUCCESS;
}

DAT_RETURN get_consumer_context(DAT_HANDLE h, DAT_CONTEXT* context)
{
    Object* o = any_object(h);
    if (!o)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    if (!context)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    *context = o->context;
    return DAT_SUCCESS;
}

DAT_RETURN get_handle_type(DAT_HANDLE h, DAT_HANDLE_TYPE* type)
{
    Object* o = any_object(h);
    if (!o)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    if (!type)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    *type = o->type;
    return DAT_SUCCESS;
}

// --- PZ ---------------------------------------------------------------------------

DAT_RETURN pz_create(DAT_IA_HANDLE handle, DAT_PZ_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (!out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    Pz* pz = make_object<Pz>();
    if (!pz)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    pz->provider = ia->provider;
    pz->ia = ia;
    if (ia->verbs) {
        pz->verbs_pd = ibv_alloc_pd(ia->verbs->context());
        if (!pz->verbs_pd) {
            destroy_object(pz);
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
        }
    } else {
        pz->pd = ia->device->alloc_pd();
    }
    ia->adopt(pz);
    *out = pz;
    return DAT_SUCCESS;
}

DAT_RETURN pz_query(DAT_PZ_HANDLE handle, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM* param)
{
    Pz* pz = from_handle<Pz>(handle);
    if (!pz)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (mask & ~DAT_PZ_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !param)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (mask & DAT_PZ_FIELD_IA_HANDLE)
        param->ia_handle = consumer_handle(pz->ia);
    return DAT_SUCCESS;
}

void destroy_pz(Pz* pz)
{
    if (pz->verbs_pd)
        ibv_dealloc_pd(pz->verbs_pd);
    destroy_object(pz);
}

DAT_RETURN pz_free(DAT_PZ_HANDLE handle)
{
    Pz* pz = from_handle<Pz>(handle);
    if (!pz)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (pz->users.load() > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);
    pz->ia->forget(pz);
    destroy_pz(pz);
    return DAT_SUCCESS;
}

// --- LMR --------------------------------------------------------------------------

std::uint32_t softnic_access(DAT_MEM_PRIV_FLAGS p)
{
    std::uint32_t a = 0;
    if (p & DAT_MEM_PRIV_LOCAL_READ_FLAG)
        a |= softnic::kLocalRead;
    if (p & DAT_MEM_PRIV_LOCAL_WRITE_FLAG)
        a |= softnic::kLocalWrite;
    if (p & DAT_MEM_PRIV_REMOTE_READ_FLAG)
        a |= softnic::kRemoteRead;
    if (p & DAT_MEM_PRIV_REMOTE_WRITE_FLAG)
        a |= softnic::kRemoteWrite;
    return a;
}

DAT_RETURN lmr_create(DAT_IA_HANDLE handle, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region, DAT_VLEN length,
                      DAT_PZ_HANDLE pz_handle, DAT_MEM_PRIV_FLAGS privileges, DAT_VA_TYPE va_type,
                      DAT_LMR_HANDLE* lmr_out, DAT_LMR_CONTEXT* lmr_context, DAT_RMR_CONTEXT* rmr_context,
                      DAT_VLEN* registered_length, DAT_VADDR* registered_address)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    Pz* pz = from_handle<Pz>(pz_handle);
    if (!pz || pz->ia != ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (!lmr_out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    if (privileges & ~DAT_MEM_PRIV_ALL_FLAG)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    if (va_type == DAT_VA_TYPE_ZB)
        return error(DAT_MODEL_NOT_SUPPORTED); // zb_supported is FALSE
    if (va_type != DAT_VA_TYPE_VA)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    std::uint64_t addr = 0;
    Lmr* base = nullptr;
    switch (type) {
    case DAT_MEM_TYPE_VIRTUAL:
        if (!region.for_va || length == 0)
            return error(DAT_INVALID_PARAMETER, region.for_va ? DAT_INVALID_ARG4 : DAT_INVALID_ARG3);
        addr = reinterpret_cast<std::uintptr_t>(region.for_va);
        if (addr + length < addr)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
        break;
    case DAT_MEM_TYPE_LMR:
        // Re-registration of an existing LMR's memory, possibly in another PZ.
        base = from_handle<Lmr>(region.for_lmr_handle);
        if (!base || base->ia != ia)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        addr = reinterpret_cast<std::uintptr_t>(base->region.for_va);
        length = base->length;
        break;
    case DAT_MEM_TYPE_SHARED_VIRTUAL:
        return error(DAT_MODEL_NOT_SUPPORTED);
    default:
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    Lmr* lmr = make_object<Lmr>();
    if (!lmr)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    lmr->provider = ia->provider;
    lmr->ia = ia;
    lmr->pz = pz;
    lmr->mem_type = type;
    lmr->region.for_va = reinterpret_cast<DAT_PVOID>(addr);
    lmr->length = length;
    lmr->privileges = privileges;
    lmr->va_type = va_type;
    lmr->remote = (privileges & (DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG)) != 0;
    if (ia->verbs) {
        lmr->mr = ibv_reg_mr(pz->verbs_pd, reinterpret_cast<void*>(addr), length,
                             verbs::access_flags(static_cast<std::uint32_t>(privileges)));
        lmr->key = lmr->mr ? lmr->mr->lkey : 0;
    } else {
        lmr->key = ia->device->memory().add(addr, length, softnic_access(privileges), pz->pd);
    }
    if (lmr->key == 0 && !lmr->mr) {
        destroy_object(lmr);
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    }
    if (base) {
        lmr->region.for_lmr_handle = base;
        ++base->users;
    }
    ++pz->users;
    ia->adopt(lmr);
    *lmr_out = lmr;
    if (lmr_context)
        *lmr_context = lmr->key;
    if (rmr_context)
        *rmr_context = !lmr->remote ? 0 : lmr->mr ? lmr->mr->rkey : lmr->key; // no remote rights, no remote key
    if (registered_length)
        *registered_length = length;
    if (registered_address)
        *registered_address = addr;
    return DAT_SUCCESS;
}

DAT_RETURN lmr_query(DAT_LMR_HANDLE handle, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM* param)
{
    Lmr* lmr = from_handle<Lmr>(handle);
    if (!lmr)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
    if (mask & ~DAT_LMR_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !param)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!mask)
        return DAT_SUCCESS;
    param->ia_handle = consumer_handle(lmr->ia);
    param->mem_type = lmr->mem_type;
    param->region_desc = lmr->region;
    param->length = lmr->length;
    param->pz_handle = lmr->pz;
    param->mem_priv = lmr->privileges;
    param->va_type = lmr->va_type;
    param->lmr_context = lmr->key;
    param->rmr_context = lmr->remote ? lmr->key : 0;
    param->registered_size = lmr->length;
    param->registered_address = lmr->mem_type == DAT_MEM_TYPE_LMR
                                    ? reinterpret_cast<std::uintptr_t>(static_cast<Lmr*>(lmr->region.for_lmr_handle)->region.for_va)
                                    : reinterpret_cast<std::uintptr_t>(lmr->region.for_va);
    return DAT_SUCCESS;
}

void release_memory(Lmr* lmr)
{
    if (lmr->mr)
        ibv_dereg_mr(lmr->mr);
    else
        lmr->ia->device->memory().remove(lmr->key);
}

DAT_RETURN lmr_free(DAT_LMR_HANDLE handle)
{
    Lmr* lmr = from_handle<Lmr>(handle);
    if (!lmr)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
    if (lmr->users.load() > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE);
    release_memory(lmr);
    if (lmr->mem_type == DAT_MEM_TYPE_LMR)
        --static_cast<Lmr*>(lmr->region.for_lmr_handle)->users;
    --lmr->pz->users;
    lmr->ia->forget(lmr);
    destroy_object(lmr);
    return DAT_SUCCESS;
}

DAT_RETURN lmr_sync(DAT_IA_HANDLE handle, const DAT_LMR_TRIPLET* segments, DAT_VLEN count)
{
    // Memory is coherent for the softnic: nothing to do once the arguments check out.
    if (!from_handle<Ia>(handle))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (!segments || count == 0)
        return error(DAT_INVALID_PARAMETER, segments ? DAT_INVALID_ARG3 : DAT_INVALID_ARG2);
    return DAT_SUCCESS;
}

// --- EVD ----------------------------------------------------------------------------

constexpr DAT_EVD_FLAGS kStreamsDeliveredSoFar = static_cast<DAT_EVD_FLAGS>(
    DAT_EVD_SOFTWARE_FLAG | DAT_EVD_ASYNC_FLAG | DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG | DAT_EVD_CR_FLAG);

void destroy_cq(Evd* evd)
{
    if (evd->verbs_channel)
        evd->ia->verbs->unwatch_cq(evd); // no notification names it after this
    if (evd->verbs_cq) {
        ibv_destroy_cq(evd->verbs_cq);
        evd->verbs_cq = nullptr;
    }
    if (evd->verbs_channel) {
        ibv_destroy_comp_channel(evd->verbs_channel);
        evd->verbs_channel = nullptr;
    }
    if (evd->wake_fd >= 0) {
        ::close(evd->wake_fd);
        evd->wake_fd = -1;
    }
    if (evd->cq)
        evd->ia->device->destroy_cq(evd->cq);
}

DAT_RETURN evd_create(DAT_IA_HANDLE handle, DAT_COUNT qlen, DAT_CNO_HANDLE cno, DAT_EVD_FLAGS flags, DAT_EVD_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (qlen <= 0 || qlen > kMaxEvdQlen)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    if (flags == 0 || (flags & ~(DAT_EVD_SOFTWARE_FLAG | DAT_EVD_DEFAULT_FLAG | DAT_EVD_ASYNC_FLAG)))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    // DAT_EVD_DEFAULT_FLAG includes the RMR bind stream; accepting it is
    // harmless while dat_rmr_bind is unsupported (no such event can occur).
    if (flags & ~(kStreamsDeliveredSoFar | DAT_EVD_RMR_BIND_FLAG))
        return not_supported();
    Cno* linked = cno ? from_handle<Cno>(cno) : nullptr;
    if (cno && (!linked || linked->ia != ia))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    Evd* evd = new_evd(ia, qlen, flags);
    if (!evd)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    if ((flags & DAT_EVD_DTO_FLAG) && ia->verbs) {
        const int most = std::max(ia->verbs->attr().max_cqe, 1);
        evd->verbs_channel = verbs::create_channel(ia->verbs->context());
        evd->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        const int cqe = std::min(static_cast<int>(qlen), most);
        if (evd->verbs_channel && evd->wake_fd >= 0 && ia->mlx5_direct)
            direct_create_cq(evd, cqe);
        else if (evd->verbs_channel && evd->wake_fd >= 0)
            evd->verbs_cq = ibv_create_cq(ia->verbs->context(), cqe, evd, evd->verbs_channel, 0);
        if (!evd->verbs_cq) {
            destroy_object(evd);
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
        }
        evd->polled.resize(64);
    } else if (flags & DAT_EVD_DTO_FLAG) {
        evd->cq = ia->device->create_cq(static_cast<std::uint32_t>(qlen));
        if (!evd->cq) {
            destroy_object(evd);
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
        }
        evd->cq_view.init(evd->cq->descriptor());
        evd->cq->set_notify(&evd_notify, evd);
    }
    if (linked)
        link_cno(evd, linked);
    ia->adopt(evd);
    *out = evd;
    return DAT_SUCCESS;
}

// Whether an EP stream feeding `evd` completes in a mode where a threshold
// above 1 means nothing (UNSIGNALLED requests or receives, SOLICITED_WAIT
// receives). Looked up only for such waits, which are rare.
bool fed_without_threshold(Evd* evd)
{
    constexpr auto kRecvModes = static_cast<DAT_COMPLETION_FLAGS>(DAT_COMPLETION_UNSIGNALLED_FLAG |
                                                                  DAT_COMPLETION_SOLICITED_WAIT_FLAG);
    std::lock_guard lock(evd->ia->objects_mutex);
    for (Object* o : evd->ia->objects) {
        if (o->type != DAT_HANDLE_TYPE_EP)
            continue;
        const auto* ep = static_cast<const Ep*>(o);
        if ((ep->recv_evd == evd && (ep->attr.recv_completion_flags & kRecvModes)) ||
            (ep->request_evd == evd && (ep->attr.request_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG)))
            return true;
    }
    return false;
}

DAT_RETURN evd_query(DAT_EVD_HANDLE handle, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM* param)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (mask & ~DAT_EVD_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !param)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!mask)
        return DAT_SUCCESS;
    std::lock_guard lock(evd->mutex);
    param->ia_handle = consumer_handle(evd->ia);
    param->evd_qlen = evd->qlen;
    param->evd_state = static_cast<DAT_EVD_STATE>(
        (evd->enabled ? DAT_EVD_STATE_ENABLED : DAT_EVD_STATE_DISABLED) |
        (evd->waitable ? DAT_EVD_STATE_WAITABLE : DAT_EVD_STATE_UNWAITABLE) |
        (fed_without_threshold(evd) ? DAT_EVD_STATE_CONFIG_NOTIFY : DAT_EVD_STATE_CONFIG_THRESHOLD));
    param->cno_handle = evd->cno.load();
    param->evd_flags = evd->flags;
    return DAT_SUCCESS;
}

DAT_RETURN evd_free(DAT_EVD_HANDLE handle)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    {
        std::lock_guard lock(evd->mutex);
        if (evd->waiters > 0)
            return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    }
    if (evd->is_async && evd->ia->async_evd == evd)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_ASYNC); // freed with its IA
    if (evd->users.load() > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE);
    evd->ia->forget(evd);
    link_cno(evd, nullptr);
    destroy_cq(evd);
    destroy_object(evd);
    return DAT_SUCCESS;
}

DAT_RETURN evd_post_se(DAT_EVD_HANDLE handle, const DAT_EVENT* event)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (!event || event->event_number != DAT_SOFTWARE_EVENT)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!(evd->flags & DAT_EVD_SOFTWARE_FLAG))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    DAT_EVENT e = *event;
    e.evd_handle = evd;
    if (!post_event(evd, e))
        return error(DAT_QUEUE_FULL);
    return DAT_SUCCESS;
}

DAT_RETURN evd_dequeue(DAT_EVD_HANDLE handle, DAT_EVENT* event)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (!event)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::unique_lock lock(evd->mutex);
    if (evd->waiters > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    if (take_event(evd, *event))
        return DAT_SUCCESS;
    if (evd->cq && evd->ia->device) { // let the software NIC move, then look once more
        lock.unlock();
        evd->ia->device->progress();
        lock.lock();
        if (take_event(evd, *event))
            return DAT_SUCCESS;
    }
    // An empty queue is the ordinary answer of a polling loop, not an
    // error: the value without the class bit, as the reference returns it
    // (its dtest -p compares the whole value). DAT_GET_TYPE reads it alike.
    return DAT_QUEUE_EMPTY;
}


// Sleeps until the EVD's channel or wake fd is readable, or the deadline
// (nullptr: none); false when the deadline passed. Takes the channel's
// events (the device thread may have taken them first, for a CNO) and
// counts them in `cq_events`.
bool sleep_on_channel(Evd* evd, const std::chrono::steady_clock::time_point* deadline, unsigned& cq_events)
{
    timespec left{};
    if (deadline) {
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            *deadline - std::chrono::steady_clock::now()).count();
        if (ns <= 0)
            return false;
        left.tv_sec = static_cast<time_t>(ns / 1000000000);
        left.tv_nsec = static_cast<long>(ns % 1000000000);
    }
    pollfd fds[2] = {{evd->verbs_channel->fd, POLLIN, 0}, {evd->wake_fd, POLLIN, 0}};
    if (::ppoll(fds, 2, deadline ? &left : nullptr, nullptr) == 0)
        return false;
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    while (ibv_get_cq_event(evd->verbs_channel, &cq, &context) == 0) {
        ibv_ack_cq_events(cq, 1);
        ++cq_events;
    }
    std::uint64_t v;
    [[maybe_unused]] ssize_t n = ::read(evd->wake_fd, &v, sizeof v);
    return true;
}

DAT_RETURN evd_wait(DAT_EVD_HANDLE handle, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT* event, DAT_COUNT* nmore)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (threshold <= 0 || threshold > evd->qlen)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!event)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if (threshold > 1 && fed_without_threshold(evd))
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_CONFIG_NOTIFY);
    std::unique_lock lock(evd->mutex);
    if (!evd->waitable)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
    if (evd->waiters > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    ++evd->waiters;
    const std::uint64_t epoch = evd->unwaitable_epoch;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(timeout);
    bool timed_out = false;
    while (ready_events(evd, threshold) < threshold && evd->unwaitable_epoch == epoch && !timed_out) {
        if (evd->cq) { // a round of inline progress before sleeping
            lock.unlock();
            evd->ia->device->progress();
            lock.lock();
            if (ready_events(evd, threshold) >= threshold || evd->unwaitable_epoch != epoch)
                break;
        }
        if (evd->verbs_cq) {
            // Armed, then looked at once more: a completion after the look
            // makes the channel's fd readable. Sleeps on that fd, and on
            // the wake fd for everything else (posts, unwaitable, abort).
            arm_cq(evd);
            if (ready_events(evd, threshold) >= threshold)
                break;
            evd->fd_waiting = true;
            lock.unlock();
            unsigned cq_events = 0;
            timed_out = !sleep_on_channel(evd, timeout == DAT_TIMEOUT_INFINITE ? nullptr : &deadline, cq_events);
            lock.lock();
            note_cq_events(evd, cq_events);
            evd->fd_waiting = false;
            continue;
        }
        // Sleeps: woken by a post, by the software NIC's CQ notification, or by unwaitable.
        if (timeout == DAT_TIMEOUT_INFINITE)
            evd->cv.wait(lock);
        else
            timed_out = evd->cv.wait_until(lock, deadline) == std::cv_status::timeout;
    }
    --evd->waiters;
    if (evd->verbs_cq && evd->cno.load()) // the CNO's trigger may have been taken here
        arm_cq(evd);
    if (evd->aborted)
        return error(DAT_ABORT);
    if (evd->unwaitable_epoch != epoch)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
    const DAT_COUNT ready = ready_events(evd, threshold);
    if (ready < threshold) {
        if (nmore)
            *nmore = ready_events(evd, evd->qlen);
        return error(DAT_TIMEOUT_EXPIRED);
    }
    take_event(evd, *event);
    if (nmore)
        *nmore = ready_events(evd, evd->qlen);
    return DAT_SUCCESS;
}

DAT_RETURN evd_set_enabled(DAT_EVD_HANDLE handle, bool enabled)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    std::lock_guard lock(evd->mutex);
    evd->enabled = enabled;
    return DAT_SUCCESS;
}

DAT_RETURN evd_enable(DAT_EVD_HANDLE h) { return evd_set_enabled(h, true); }
DAT_RETURN evd_disable(DAT_EVD_HANDLE h) { return evd_set_enabled(h, false); }

DAT_RETURN evd_set_unwaitable(DAT_EVD_HANDLE handle)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    std::lock_guard lock(evd->mutex);
    evd->waitable = false;
    ++evd->unwaitable_epoch; // releases a blocked waiter with INVALID_STATE
    wake_waiters(evd);
    return DAT_SUCCESS;
}

DAT_RETURN evd_clear_unwaitable(DAT_EVD_HANDLE handle)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    std::lock_guard lock(evd->mutex);
    evd->waitable = true;
    return DAT_SUCCESS;
}

DAT_RETURN evd_resize(DAT_EVD_HANDLE handle, DAT_COUNT qlen)
{
    // Not thread safe with other calls on the same EVD (the spec leaves that
    // to the provider): its completion queue is replaced.
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (qlen <= 0 || qlen > kMaxEvdQlen)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    {
        std::lock_guard lock(evd->mutex);
        if (evd->waiters > 0)
            return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
        if (qlen < ready_events(evd, kMaxEvdQlen))
            return error(DAT_INVALID_STATE); // events would be lost
    }
    // Outside the EVD's lock: the software NIC takes its own, then notifies
    // EVDs (which takes theirs).
    if (evd->cq && !evd->ia->device->resize_cq(evd->cq, static_cast<std::uint32_t>(qlen)))
        return error(DAT_INVALID_STATE); // completions arrived meanwhile and would not fit
    // A hand-polled mlx5 CQ keeps its ring (rdma-core's resize would move
    // CQEs behind our consumer index): up to its size.
    if (evd->direct && static_cast<std::uint32_t>(qlen) > evd->cq_view.size())
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    if (evd->verbs_cq && !evd->direct && ibv_resize_cq(evd->verbs_cq, qlen) != 0)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD); // not every device resizes
    std::lock_guard lock(evd->mutex);
    if (evd->cq)
        evd->cq_view.init(evd->cq->descriptor());
    evd->qlen = qlen; // software events: the queue grows on demand
    return DAT_SUCCESS;
}

// --- the table ------------------------------------------------------------------------

// Entry points of later work: a typed stub per DAT_PROVIDER slot that
// answers DAT_MODEL_NOT_SUPPORTED (class bit set).
template <typename F>
struct Unsupported;
template <typename... A>
struct Unsupported<DAT_RETURN (*)(A...)> {
    static DAT_RETURN call(A...) { return not_supported(); }
};
#define FASTDAPL_LATER(member) t.member = &Unsupported<decltype(DAT_PROVIDER::member)>::call

void fill_table(DAT_PROVIDER& t, const char* device_name)
{
    t.device_name = device_name;
    t.extension = nullptr;
    t.ia_open_func = &ia_open;
    t.ia_query_func = &ia_query;
    t.ia_close_func = &ia_close;
    t.set_consumer_context_func = &set_consumer_context;
    t.get_consumer_context_func = &get_consumer_context;
    t.get_handle_type_func = &get_handle_type;
    t.pz_create_func = &pz_create;
    t.pz_query_func = &pz_query;
    t.pz_free_func = &pz_free;
    t.lmr_create_func = &lmr_create;
    t.lmr_query_func = &lmr_query;
    t.lmr_free_func = &lmr_free;
    t.lmr_sync_rdma_read_func = &lmr_sync;
    t.lmr_sync_rdma_write_func = &lmr_sync;
    t.evd_create_func = &evd_create;
    t.evd_query_func = &evd_query;
    t.evd_free_func = &evd_free;
    t.evd_post_se_func = &evd_post_se;
    t.evd_dequeue_func = &evd_dequeue;
    t.evd_wait_func = &evd_wait;
    t.evd_enable_func = &evd_enable;
    t.evd_disable_func = &evd_disable;
    t.evd_set_unwaitable_func = &evd_set_unwaitable;
    t.evd_clear_unwaitable_func = &evd_clear_unwaitable;
    t.evd_resize_func = &evd_resize;
    t.cr_reject_func = &cr_reject;
    t.cr_accept_func = &cr_accept;
    t.cr_query_func = &cr_query;
    t.psp_create_any_func = &psp_create_any;
    t.psp_free_func = &psp_free;
    t.psp_query_func = &psp_query;
    t.psp_create_func = &psp_create;
    t.ep_reset_func = &ep_reset;
    t.ep_free_func = &ep_free;
    t.ep_get_status_func = &ep_get_status;
    t.ep_post_rdma_write_func = &ep_post_rdma<MLX5_OPCODE_RDMA_WRITE, &DAT_EP_ATTR::max_rdma_write_iov>;
    t.ep_post_rdma_read_func = &ep_post_rdma<MLX5_OPCODE_RDMA_READ, &DAT_EP_ATTR::max_rdma_read_iov>;
    t.ep_post_recv_func = &ep_post_recv;
    t.ep_post_send_func = &ep_post_send;
    t.ep_disconnect_func = &ep_disconnect;
    t.ep_connect_func = &ep_connect;
    t.ep_query_func = &ep_query;
    t.ep_create_func = &ep_create;
    // Issue 3 (EP, connections, DTOs, CNO) and issue 4 (SRQ) fill these.
    t.cno_create_func = &cno_create;
    t.cno_modify_agent_func = &cno_modify_agent;
    t.cno_query_func = &cno_query;
    t.cno_free_func = &cno_free;
    t.cno_wait_func = &cno_wait;
    FASTDAPL_LATER(cr_handoff_func);
    t.evd_modify_cno_func = &evd_modify_cno;
    t.ep_modify_func = &ep_modify;
    FASTDAPL_LATER(ep_dup_connect_func);
    FASTDAPL_LATER(rmr_create_func);
    FASTDAPL_LATER(rmr_query_func);
    FASTDAPL_LATER(rmr_bind_func);
    FASTDAPL_LATER(rmr_free_func);
    t.rsp_create_func = &rsp_create;
    t.rsp_query_func = &rsp_query;
    t.rsp_free_func = &rsp_free;
    t.ep_create_with_srq_func = &ep_create_with_srq;
    t.ep_recv_query_func = &ep_recv_query;
    t.ep_set_watermark_func = &ep_set_watermark;
    t.srq_create_func = &srq_create;
    t.srq_free_func = &srq_free;
    t.srq_post_recv_func = &srq_post_recv;
    t.srq_query_func = &srq_query;
    t.srq_resize_func = &srq_resize;
    t.srq_set_lw_func = &srq_set_lw;
    FASTDAPL_LATER(csp_create_func);
    FASTDAPL_LATER(csp_query_func);
    FASTDAPL_LATER(csp_free_func);
    FASTDAPL_LATER(ep_common_connect_func);
    FASTDAPL_LATER(rmr_create_for_ep_func);
    FASTDAPL_LATER(ep_post_send_with_invalidate_func);
    FASTDAPL_LATER(ep_post_rdma_read_to_rmr_func);
    t.cno_fd_create_func = &cno_fd_create;
    t.cno_trigger_func = &cno_trigger;
    FASTDAPL_LATER(ia_ha_related_func);
    t.handle_extendedop_func = [](DAT_HANDLE, DAT_EXTENDED_OP, va_list) { return not_supported(); };
}

#undef FASTDAPL_LATER

} // namespace

extern "C" FASTDAPL_EXPORT void dat_provider_init(const DAT_PROVIDER_INFO* info, const char* instance_data)
{
    if (!info)
        return;
    // rdma-core's libraries keep process-wide state (device and driver
    // lists, librdmacm's contexts) and are not made to be unloaded and
    // loaded again: they stay when the registry closes this provider.
    for (const char* lib : {"libibverbs.so.1", "librdmacm.so.1"})
        dlopen(lib, RTLD_NOW | RTLD_NODELETE | RTLD_NOLOAD);
    auto reg = std::make_unique<Registration>();
    reg->info = *info;
    reg->name.assign(info->ia_name, strnlen(info->ia_name, DAT_NAME_MAX_LENGTH));
    reg->ia_params = instance_data ? instance_data : "";
    fill_table(reg->table, reg->name.c_str());
    Registration* raw = reg.get();
    {
        std::lock_guard lock(g_registrations_mutex);
        if (g_registrations.count(reg->name))
            return;
        g_registrations[reg->name] = std::move(reg);
    }
    if (dat_registry_add_provider(&raw->table, &raw->info) != DAT_SUCCESS) {
        std::lock_guard lock(g_registrations_mutex);
        g_registrations.erase(raw->name); // leave no entry behind on failure
    }
}

extern "C" FASTDAPL_EXPORT void dat_provider_fini(const DAT_PROVIDER_INFO* info)
{
    if (!info)
        return;
    std::lock_guard lock(g_registrations_mutex);
    auto it = g_registrations.find(std::string(info->ia_name, strnlen(info->ia_name, DAT_NAME_MAX_LENGTH)));
    if (it == g_registrations.end())
        return;
    // Our registry stops routing to a table once it is removed (it checks
    // every handle's table against the registered ones), so it can go.
    dat_registry_remove_provider(&it->second->table, &it->second->info);
    g_registrations.erase(it);
}
