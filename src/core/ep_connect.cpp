// Endpoint connections: connect, disconnect, the CM's results, and the
// connection events.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "address.hpp" // src/cm: sockaddr helpers, no CM state
#include "api.hpp"
#include "data_path.hpp"
#include "ep.hpp"
#include "extensions.hpp"
#include "ia.hpp"
#include "service_point.hpp"

#include <dat2/fastdapl.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace fastdapl::core {

void post_connection_event(Ep* ep, DAT_EVENT_NUMBER number, const std::uint8_t* pdata, std::uint32_t size)
{
    if (!ep->connect_evd)
        return;
    size = pdata ? std::min<std::uint32_t>(size, kMaxConnectionPrivateData) : 0;
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

// An SRQ endpoint also reports on the async EVD that it will take no more
// buffers from the SRQ (what IB calls "last WQE reached"; the reference does
// the same, and its dtestsrq waits for it): the consumer may free it then.
void post_connection_end(Ep* ep, DAT_EVENT_NUMBER number)
{
    post_connection_event(ep, number, nullptr, 0);
    if (ep->srq)
        post_async(ep->ia, DAT_ASYNC_ERROR_EP_BROKEN, ep, DAT_EP_TRANSFER_TO_ERROR);
}

void ep_connection_ended(Ep* ep, bool orderly)
{
    for (DAT_EP_STATE from : {DAT_EP_STATE_CONNECTED, DAT_EP_STATE_DISCONNECT_PENDING}) {
        if (ep->state.compare_exchange_strong(from, DAT_EP_STATE_DISCONNECTED)) {
            post_connection_end(ep, orderly ? DAT_CONNECTION_EVENT_DISCONNECTED : DAT_CONNECTION_EVENT_BROKEN);
            return;
        }
    }
}

void ep_completion_broke(Ep* ep, Evd* locked)
{
    for (DAT_EP_STATE from : {DAT_EP_STATE_CONNECTED, DAT_EP_STATE_DISCONNECT_PENDING}) {
        if (!ep->state.compare_exchange_strong(from, DAT_EP_STATE_DISCONNECTED))
            continue;
        if (ep->connect_evd == locked) { // the event goes straight into the EVD whose lock is held
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
        ep->ia->cm->close(*ep);
        return;
    }
}

void ep_soft_watermark(void* context)
{
    auto* ep = static_cast<Ep*>(context);
    post_async(ep->ia, static_cast<DAT_EVENT_NUMBER>(FASTDAPL_ASYNC_WATERMARK_EVENT), ep,
               DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT);
}

namespace {

std::chrono::milliseconds attempt_timeout(DAT_TIMEOUT timeout)
{
    return timeout == DAT_TIMEOUT_INFINITE ? std::chrono::milliseconds(24L * 3600 * 1000)
                                           : std::chrono::milliseconds(std::max<DAT_TIMEOUT>(1, timeout / 1000));
}

// dat_ep_connect on a UD endpoint: asks the peer's UD endpoint for its
// queue pair number and UDP port. The EP stays unconnected (it may ask
// many peers at once); the answer is an extension event (cm_result).
DAT_RETURN connect_datagram(Ep* ep, DAT_IA_ADDRESS_PTR remote, DAT_CONN_QUAL qual, DAT_TIMEOUT timeout,
                            DAT_COUNT pdata_size, const DAT_PVOID pdata)
{
    if (!remote || remote->sa_family != ep->ia->address.ss_family)
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
    if (cm::port_of_qualifier(qual) == 0)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (DAT_RETURN rc = ensure_queues(ep); rc != DAT_SUCCESS)
        return rc;
    Ia* ia = ep->ia;
    const auto* bytes = static_cast<const std::uint8_t*>(pdata);
    std::lock_guard lock(ia->cm_mutex); // the result cannot be handled before the id is recorded
    cm::copy_address(ep->remote, remote);
    cm::set_port(ep->remote, cm::port_of_qualifier(qual));
    ep->remote_port = qual;
    const std::uint64_t id =
        ia->cm->connect(*ep, std::vector<std::uint8_t>(bytes, bytes + pdata_size), attempt_timeout(timeout));
    if (id == 0)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    UdExchange& x = ia->ud_exchanges[id];
    x.ep = ep;
    x.peer = ep->remote;
    ia->attempts[id] = ep;
    // The peer learns this EP's port first: what it sends may arrive before
    // its reply is handled here.
    ia->device->expect_datagrams(*ep, x.peer, 0, 0, true);
    return DAT_SUCCESS;
}

// The end of a UD endpoint's exchange `id` (cm_mutex held): the peer's
// address handle in an extension event, or why there is none.
void datagram_result(Ia* ia, std::uint64_t id, Ep* ep, AttemptOutcome outcome, const std::vector<std::uint8_t>& pdata,
                     std::uint32_t peer_qpn, std::uint16_t peer_port, const void* route)
{
    auto it = ia->ud_exchanges.find(id);
    if (it == ia->ud_exchanges.end())
        return;
    UdExchange& x = it->second;
    const auto size = static_cast<std::uint32_t>(std::min<std::size_t>(pdata.size(), kMaxConnectionPrivateData));
    if (!x.passive)
        ia->device->expect_datagrams(*ep, x.peer, 0, 0, false); // the exchange is over
    if (outcome == AttemptOutcome::established) {
        if (!x.passive) { // the reply's
            x.peer_qpn = peer_qpn;
            x.peer_port = peer_port;
            x.private_data_size = size;
            std::memcpy(x.private_data, pdata.data(), size);
        }
        if (void* ah = ia->device->make_address_handle(*ep, x.peer, x.peer_qpn, x.peer_port, route)) {
            post_ud_established(ep, x, id, ah);
            return;
        }
    }
    post_ud_connection_failed(ep, outcome == AttemptOutcome::rejected, pdata.data(), size);
    ia->ud_exchanges.erase(it);
}

} // namespace

DAT_RETURN ep_connect(DAT_EP_HANDLE handle, DAT_IA_ADDRESS_PTR remote, DAT_CONN_QUAL qual, DAT_TIMEOUT timeout,
                      DAT_COUNT pdata_size, const DAT_PVOID pdata, DAT_QOS qos, DAT_CONNECT_FLAGS flags)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    ep->ib_counters.add(DCNT_EP_CONNECT); // requests, as dat_ib_query_counters reports them
    if (timeout == 0 || pdata_size < 0 || pdata_size > max_private_data(ep->ia) || (pdata_size > 0 && !pdata))
        return error(DAT_INVALID_PARAMETER, timeout == 0 ? DAT_INVALID_ARG4 : DAT_INVALID_ARG5);
    if (static_cast<std::uint32_t>(qos) & ~kAllQos)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    // One path per connection: asked for more, a connection goes ahead on
    // one (as the spec allows); requiring more cannot be met.
    if (flags == DAT_CONNECT_MULTIPATH_REQUIRED_FLAG)
        return not_supported();
    if (flags != DAT_CONNECT_DEFAULT_FLAG && flags != DAT_CONNECT_MULTIPATH_FLAG)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    if (ep->ud)
        return connect_datagram(ep, remote, qual, timeout, pdata_size, pdata);
    if (const DAT_EP_STATE now = ep->state.load(); now != DAT_EP_STATE_UNCONNECTED)
        return error(DAT_INVALID_STATE, ep_state_subtype(now));
    // The IA's own family only: rdma_cm resolves a route within one family,
    // and the software NIC's sockets speak IPv4.
    if (!remote || remote->sa_family != ep->ia->address.ss_family)
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
    if (cm::port_of_qualifier(qual) == 0)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3); // 0 names no port
    if (DAT_RETURN rc = ensure_queues(ep); rc != DAT_SUCCESS)
        return rc;
    Ia* ia = ep->ia;
    cm::copy_address(ep->remote, remote);
    cm::set_port(ep->remote, cm::port_of_qualifier(qual));
    ep->remote_port = qual;
    ep->connected_actively = true;
    ep->connect_flags = flags;
    ep->state = DAT_EP_STATE_ACTIVE_CONNECTION_PENDING;
    const auto* bytes = static_cast<const std::uint8_t*>(pdata);
    const auto wait = attempt_timeout(timeout);
    std::lock_guard lock(ia->cm_mutex); // the result cannot be handled before the id is recorded
    ep->cm_id = ia->cm->connect(*ep, std::vector<std::uint8_t>(bytes, bytes + pdata_size), wait);
    if (ep->cm_id == 0) {
        ep->state = DAT_EP_STATE_UNCONNECTED;
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    ia->attempts[ep->cm_id] = ep;
    return DAT_SUCCESS;
}

void cm_result(Ia* ia, std::uint64_t id, AttemptOutcome outcome, int fd, const std::vector<std::uint8_t>& pdata,
               std::uint32_t peer_qpn, std::uint16_t peer_port, const void* route)
{
    Ep* ep = nullptr;
    std::lock_guard lock(ia->cm_mutex); // the EP cannot be freed under us
    if (auto it = ia->attempts.find(id); it != ia->attempts.end()) {
        ep = it->second;
        ia->attempts.erase(it);
    }
    if (!ep || !ia->cm) { // gone, or the IA is closing
        if (fd >= 0)
            ::close(fd);
        return;
    }
    if (ep->ud) { // no stream follows the exchange
        if (fd >= 0)
            ::close(fd);
        datagram_result(ia, id, ep, outcome, pdata, peer_qpn, peer_port, route);
        return;
    }
    const bool passive = ep->state.load() == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING;
    const auto size = static_cast<std::uint32_t>(pdata.size());
    if (outcome == AttemptOutcome::established) {
        ep->state = DAT_EP_STATE_CONNECTED;
        ia->cm->will_establish(*ep, id);
        // The event goes first: no completion may precede ESTABLISHED.
        post_connection_event(ep, DAT_CONNECTION_EVENT_ESTABLISHED, passive ? nullptr : pdata.data(),
                              passive ? 0 : size);
        ia->cm->established(*ep, fd);
        return;
    }
    ep->state = DAT_EP_STATE_DISCONNECTED;
    ia->cm->failed(*ep); // receives posted meanwhile complete as flushed
    DAT_EVENT_NUMBER n = DAT_CONNECTION_EVENT_NON_PEER_REJECTED;
    switch (outcome) {
    case AttemptOutcome::rejected:
        n = DAT_CONNECTION_EVENT_PEER_REJECTED;
        break;
    case AttemptOutcome::unreachable:
        n = DAT_CONNECTION_EVENT_UNREACHABLE;
        break;
    case AttemptOutcome::timed_out:
        n = DAT_CONNECTION_EVENT_TIMED_OUT;
        break;
    case AttemptOutcome::failed:
        n = passive ? DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR : DAT_CONNECTION_EVENT_NON_PEER_REJECTED;
        break;
    default:
        break;
    }
    post_connection_event(ep, n, pdata.data(), size);
}

// The socket-style connect to a CSP: the remote address carries the port
// the CSP listens on, which is its qualifier.
DAT_RETURN ep_common_connect(DAT_EP_HANDLE handle, DAT_IA_ADDRESS_PTR remote, DAT_TIMEOUT timeout,
                             DAT_COUNT pdata_size, const DAT_PVOID pdata)
{
    if (!from_handle<Ep>(handle))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    sockaddr_storage where{};
    if (!remote || !cm::copy_address(where, remote))
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
    const DAT_CONN_QUAL port = cm::port_of(where);
    if (port == 0)
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_MALFORMED);
    return ep_connect(handle, remote, port, timeout, pdata_size, pdata, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
}

DAT_RETURN ep_dup_connect(DAT_EP_HANDLE handle, DAT_EP_HANDLE dup_handle, DAT_TIMEOUT timeout, DAT_COUNT pdata_size,
                          const DAT_PVOID pdata, DAT_QOS qos)
{
    if (!from_handle<Ep>(handle))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    Ep* dup = from_handle<Ep>(dup_handle);
    if (!dup)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (dup->ia != from_handle<Ep>(handle)->ia)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (const DAT_EP_STATE s = dup->state.load(); s != DAT_EP_STATE_CONNECTED)
        return error(DAT_INVALID_STATE, ep_state_subtype(s));
    // The remote end of a connection this side accepted is the peer's
    // endpoint, not a service point: nothing to connect to again.
    if (!dup->connected_actively)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    sockaddr_storage remote = dup->remote;
    return ep_connect(handle, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&remote), dup->remote_port, timeout, pdata_size,
                      pdata, qos, dup->connect_flags);
}

DAT_RETURN ep_disconnect(DAT_EP_HANDLE handle, DAT_CLOSE_FLAGS flags)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (raw(flags) != DAT_CLOSE_ABRUPT_FLAG && raw(flags) != DAT_CLOSE_GRACEFUL_FLAG)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ep->ib_counters.add(DCNT_EP_DISCONNECT);
    DAT_EP_STATE s = ep->state.load();
    if (s == DAT_EP_STATE_DISCONNECTED)
        return DAT_SUCCESS; // nothing to do, no event
    if (s == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING) {
        std::lock_guard lock(ep->ia->cm_mutex);
        ep->ia->cm->stop_attempt(*ep, false);
        ep->ia->attempts.erase(ep->cm_id);
    } else if (s == DAT_EP_STATE_CONNECTED && flags == DAT_CLOSE_GRACEFUL_FLAG) {
        // Requests drain, then the connection ends; DISCONNECTED follows.
        if (ep->state.compare_exchange_strong(s, DAT_EP_STATE_DISCONNECT_PENDING))
            ep->ia->cm->close_gracefully(*ep);
        return DAT_SUCCESS;
    } else if (s == DAT_EP_STATE_DISCONNECT_PENDING && flags == DAT_CLOSE_GRACEFUL_FLAG) {
        return DAT_SUCCESS; // already draining
    } else if (s != DAT_EP_STATE_CONNECTED && s != DAT_EP_STATE_DISCONNECT_PENDING) {
        return error(DAT_INVALID_STATE, ep_state_subtype(s));
    }
    // Abrupt (or a graceful one during connection setup): flushed at once.
    if (!ep->state.compare_exchange_strong(s, DAT_EP_STATE_DISCONNECTED))
        return DAT_SUCCESS; // the peer ended it first; its event is posted
    ep->ia->cm->close(*ep);
    post_connection_end(ep, DAT_CONNECTION_EVENT_DISCONNECTED);
    return DAT_SUCCESS;
}

} // namespace fastdapl::core
