// Endpoint: its attributes, state and connection, and the queue engine of
// its IA's device kind.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "connection.hpp"
#include "device_path.hpp"
#include "evd.hpp"
#include "handles.hpp"
#include "srq.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace fastdapl::core {

class Pz;

class Ep : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_EP;
    PathKind path = PathKind::softnic;
    bool ud = false; // DAT_IB_SERVICE_TYPE_UD: datagrams, no connection (extensions.cpp)
    EpQueues* queues = nullptr; // built once the PZ and the EVDs are known
    std::atomic<DAT_EP_STATE> state{DAT_EP_STATE_UNCONNECTED};
    DAT_EP_ATTR attr{};
    Pz* pz = nullptr;
    Srq* srq = nullptr; // receives come from here (dat_ep_create_with_srq); fixed for life
    Evd* recv_evd = nullptr;
    Evd* request_evd = nullptr;
    Evd* connect_evd = nullptr;
    std::uint64_t cm_id = 0;         // the connection attempt (connect or accept)
    std::uint64_t connection_id = 0; // the CM's established connection, where it keeps one (rdma_cm)
    sockaddr_storage remote{};       // IPv4, or IPv6 on verbs IAs
    DAT_CONN_QUAL remote_port = 0;
    // The last connection was this EP's own request (dat_ep_connect): its
    // remote end is a service point that dat_ep_dup_connect can ask again.
    bool connected_actively = false;
    DAT_CONNECT_FLAGS connect_flags = DAT_CONNECT_DEFAULT_FLAG;
    // Receive watermarks (dat_ep_set_watermark; for an SRQ endpoint also
    // max_recv_dtos and srq_soft_hw at creation). DAT_WATERMARK_INFINITE: none.
    DAT_COUNT soft_watermark = DAT_WATERMARK_INFINITE;
    DAT_COUNT hard_watermark = DAT_WATERMARK_INFINITE;
    // Private data of the last connection event, kept while the consumer may read it.
    std::uint32_t event_pdata_size = 0;
    std::uint8_t event_pdata[kMaxConnectionPrivateData] = {};
    EpCounters ib_counters; // dat_ib_query_counters
};

// Every DAT_QOS value the spec defines, alone or together. Each is taken
// and changes nothing: one traffic class per device (README).
inline constexpr std::uint32_t kAllQos =
    DAT_QOS_BEST_EFFORT | DAT_QOS_HIGH_THROUGHPUT | DAT_QOS_LOW_LATENCY | DAT_QOS_ECONOMY | DAT_QOS_PREMIUM;

// The INVALID_STATE subtype that names the state an EP is in now.
DAT_RETURN_SUBTYPE ep_state_subtype(DAT_EP_STATE s);

// The queue pair needs its PZ and both DTO EVDs; built when all are known.
DAT_RETURN ensure_queues(Ep* ep);
void destroy_ep(Ep* ep);

void post_connection_event(Ep* ep, DAT_EVENT_NUMBER number, const std::uint8_t* pdata, std::uint32_t size);
// The end of an established connection (DISCONNECTED or BROKEN); an SRQ
// endpoint also reports on the async EVD that it takes no more buffers.
void post_connection_end(Ep* ep, DAT_EVENT_NUMBER number);
// The transport ended the connection (the peer closed: orderly, or the link
// failed). Exactly one event per teardown: whoever moves the state first.
void ep_connection_ended(Ep* ep, bool orderly);
// An error completion (not a flush) broke the connection (the reaper, with
// `locked`'s lock held): BROKEN now, and the transport is closed so the
// peer hears of it.
void ep_completion_broke(Ep* ep, Evd* locked);
// A soft high watermark was crossed.
void ep_soft_watermark(void* ep);

// Runs `fn` with the EP's DTO EVDs locked (no poll runs) and its SRQ's
// completions held: how a queue pair's completions are cleaned before it goes.
template <class Fn>
void with_completions_held(Ep* ep, Fn fn)
{
    Evd* recv = ep->recv_evd;
    Evd* request = ep->request_evd;
    std::unique_lock<SpinLock> recv_lock(recv->mutex, std::defer_lock);
    std::unique_lock<SpinLock> request_lock(request->mutex, std::defer_lock);
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

} // namespace fastdapl::core
