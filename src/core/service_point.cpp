// Service points (PSP, RSP) and connection requests (CR).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "service_point.hpp"

#include "address.hpp" // src/cm: sockaddr helpers, no CM state
#include "api.hpp"
#include "ep.hpp"
#include "extensions.hpp"
#include "ia.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace fastdapl::core {

namespace {

// A request for `psp` becomes a CR and its event on the PSP's EVD (the
// IA's cm_mutex held); refused when none can be made or the EVD is full.
void deliver_request(Ia* ia, Psp* psp, const IncomingRequest& r)
{
    Cr* cr = make_object<Cr>();
    if (!cr) {
        ia->cm->refuse(r.id, Refusal::full);
        return;
    }
    ia->ib_counters.add(DCNT_IA_SP_CR);
    cr->provider = ia->provider;
    cr->ia = ia;
    cr->psp = psp;
    cr->request_id = r.id;
    cr->remote = r.remote;
    cr->conn_qual = psp->conn_qual; // the whole qualifier (rdma_cm reports only its port)
    cr->provider_ep = psp->flags == DAT_PSP_PROVIDER_FLAG;
    cr->private_data_size = static_cast<std::uint32_t>(r.private_data.size());
    cr->private_data_size = std::min<std::uint32_t>(cr->private_data_size, sizeof cr->private_data);
    if (cr->private_data_size)
        std::memcpy(cr->private_data, r.private_data.data(), cr->private_data_size);
    cr->datagram = r.datagram;
    cr->remote_qpn = r.remote_qpn;
    cr->datagram_port = r.datagram_port;
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
    // Listed before the consumer can see it (an abrupt close ends it).
    ia->requests.push_back(cr);
    if (!post_event(psp->evd, e)) { // the CR EVD is full: a non-peer reject, no overflow event (spec)
        ia->cm->refuse(r.id, Refusal::full);
        std::erase(ia->requests, cr);
        destroy_object(cr);
    }
}

// An RSP takes one request: false (and it is refused as if nobody
// listened) when this one is not the first.
bool takes_request(Psp* psp)
{
    return !(psp->reserved_ep && psp->fired.exchange(true));
}

} // namespace

void cm_request(Ia* ia, const IncomingRequest& r)
{
    Psp* psp = nullptr;
    std::lock_guard lock(ia->cm_mutex); // the PSP cannot be freed under us
    if (!ia->cm)
        return; // the IA is closing: the CM's end closes the stream
    if (auto it = ia->listeners.find(r.listener); it != ia->listeners.end())
        psp = it->second;
    if (!psp || !takes_request(psp)) {
        ia->cm->refuse(r.id, Refusal::no_listener);
        return;
    }
    deliver_request(ia, psp, r);
}

namespace {

DAT_RETURN psp_create_common(Ia* ia, DAT_CONN_QUAL* qual, bool any, DAT_EVD_HANDLE evd_handle, DAT_PSP_FLAGS flags,
                             DAT_PSP_HANDLE* out, Ep* reserved_ep = nullptr, Csp* csp = nullptr)
{
    Evd* evd = from_handle<Evd>(evd_handle);
    if (!evd || !(evd->flags & DAT_EVD_CR_FLAG) || evd->ia != ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
    if (!out || !qual)
        return error(DAT_INVALID_PARAMETER, !qual ? DAT_INVALID_ARG2 : DAT_INVALID_ARG5);
    if (flags != DAT_PSP_CONSUMER_FLAG && (flags != DAT_PSP_PROVIDER_FLAG || reserved_ep))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if (!any && *qual == 0)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2); // 0 names no port (cm::port_of_qualifier)
    Psp* psp = csp ? csp : reserved_ep ? make_object<Rsp>() : make_object<Psp>();
    if (!psp)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    psp->provider = ia->provider;
    psp->ia = ia;
    psp->evd = evd;
    psp->flags = flags;
    psp->reserved_ep = reserved_ep;
    psp->listener_id = reinterpret_cast<std::uintptr_t>(psp);
    std::uint64_t listened = any ? 0 : *qual;
    psp->conn_qual = listened; // before listen: the CM thread may read it from then on
    {
        std::lock_guard lock(ia->cm_mutex);
        ia->listeners[psp->listener_id] = psp;
    }
    const int err = ia->cm->listen(ia->address, listened, psp->listener_id);
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
    if (any) {
        std::lock_guard lock(ia->cm_mutex); // cm_request reads it under this lock
        psp->conn_qual = listened;
    }
    *qual = listened;
    if (reserved_ep) // unconfigured stays unconfigured (spec 6.6.2)
        reserved_ep->state = reserved_ep->state.load() == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED
                                 ? DAT_EP_STATE_UNCONFIGURED_RESERVED
                                 : DAT_EP_STATE_RESERVED;
    ++evd->users;
    ia->adopt(psp);
    *out = psp;
    return DAT_SUCCESS;
}

} // namespace

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
    const DAT_RETURN rc = psp_create_common(ia, qual, true, evd, flags, out);
    if (rc == DAT_SUCCESS)
        ia->ib_counters.add(DCNT_IA_PSP_CREATE_ANY);
    return rc;
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
    if (!ep_handle) {
        // A provider-made endpoint: unconfigured, with no PZ and no EVDs;
        // dat_rsp_query hands it out and dat_ep_modify configures it. It
        // is the consumer's like any other (freed by it or by the IA).
        if (qual == 0)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        DAT_EP_HANDLE made = nullptr;
        if (DAT_RETURN rc = ep_create(handle, nullptr, nullptr, nullptr, nullptr, nullptr, &made); rc != DAT_SUCCESS)
            return rc;
        const DAT_RETURN rc = psp_create_common(ia, &qual, false, evd, DAT_PSP_CONSUMER_FLAG, out, from_handle<Ep>(made));
        if (rc != DAT_SUCCESS)
            ep_free(made);
        return rc;
    }
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

// A CSP: the address's family must be the IA's and its host the IA's (or
// the wildcard); the comm a TCP stream socket of that family.
DAT_RETURN csp_create(DAT_IA_HANDLE handle, DAT_COMM* comm, DAT_IA_ADDRESS_PTR address, DAT_EVD_HANDLE evd,
                      DAT_CSP_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (!comm || !address || !out)
        return error(DAT_INVALID_PARAMETER, !comm ? DAT_INVALID_ARG2 : !address ? DAT_INVALID_ARG3 : DAT_INVALID_ARG5);
    if (comm->domain != ia->address.ss_family || comm->type != SOCK_STREAM ||
        (comm->protocol != 0 && comm->protocol != IPPROTO_TCP))
        return error(DAT_MODEL_NOT_SUPPORTED); // connections here are reliable streams of the IA's family
    sockaddr_storage where{};
    if (!cm::copy_address(where, address) || where.ss_family != ia->address.ss_family)
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
    DAT_CONN_QUAL qual = cm::port_of(where);
    if (qual == 0)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3); // the address names the port to listen on
    sockaddr_storage host = where;
    cm::set_port(host, 0);
    sockaddr_storage any{};
    any.ss_family = where.ss_family;
    sockaddr_storage ours = ia->address;
    cm::set_port(ours, 0);
    if (std::memcmp(&host, &ours, cm::address_size(host.ss_family)) != 0 &&
        std::memcmp(&host, &any, cm::address_size(host.ss_family)) != 0)
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE); // not this IA's address
    // What psp_create_common checks before it takes the object: here, so
    // that it never has to drop one it was handed.
    if (Evd* e = from_handle<Evd>(evd); !e || !(e->flags & DAT_EVD_CR_FLAG) || e->ia != ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
    Csp* csp = make_object<Csp>();
    if (!csp)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    csp->comm = *comm;
    csp->address = where;
    return psp_create_common(ia, &qual, false, evd, DAT_PSP_CONSUMER_FLAG, out, nullptr, csp);
}

DAT_RETURN csp_query(DAT_CSP_HANDLE handle, DAT_CSP_PARAM_MASK mask, DAT_CSP_PARAM* p)
{
    Csp* csp = from_handle<Csp>(handle);
    if (!csp)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CSP);
    if (mask & ~DAT_CSP_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !p)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (mask) {
        p->ia_handle = consumer_handle(csp->ia);
        p->comm = &csp->comm;
        p->address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&csp->address);
        p->evd_handle = csp->evd;
    }
    return DAT_SUCCESS;
}

DAT_RETURN csp_free(DAT_CSP_HANDLE handle)
{
    Csp* csp = from_handle<Csp>(handle);
    if (!csp)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CSP);
    csp->ia->forget(csp);
    --csp->evd->users;
    destroy_psp(csp);
    return DAT_SUCCESS;
}

namespace {

// The endpoint a request names: its RSP's, or for a request on a PSP with
// DAT_PSP_PROVIDER_FLAG one made now (unconfigured and tentative: no PZ,
// no EVDs; the consumer configures it with dat_ep_modify). Null otherwise,
// or when none can be made.
Ep* endpoint_of(Cr* cr)
{
    if (cr->ep || !cr->provider_ep)
        return cr->ep;
    DAT_EP_HANDLE made = nullptr;
    if (ep_create(cr->ia, nullptr, nullptr, nullptr, nullptr, nullptr, &made) != DAT_SUCCESS)
        return nullptr;
    cr->ep = from_handle<Ep>(made);
    cr->ep->state = DAT_EP_STATE_UNCONFIGURED_TENTATIVE;
    return cr->ep;
}

} // namespace

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
        p->local_ep_handle = endpoint_of(cr); // the RSP's, or the one made for a provider PSP; none otherwise
    }
    return DAT_SUCCESS;
}

namespace {

// A UD endpoint's request, accepted by a UD endpoint of the consumer's: the
// reply carries its queue pair number and UDP port; the EP stays
// unconnected (it may answer and ask many peers) and reports the peer's
// address handle once the requester confirms (cm_result).
DAT_RETURN accept_datagram(Cr* cr, Ep* ep, DAT_COUNT pdata_size, const DAT_PVOID pdata)
{
    if (DAT_RETURN rc = ensure_queues(ep); rc != DAT_SUCCESS)
        return rc;
    Ia* ia = cr->ia;
    UdExchange x;
    x.ep = ep;
    x.passive = true;
    x.peer = cr->remote;
    x.peer_qpn = cr->remote_qpn;
    x.peer_port = cr->datagram_port;
    x.private_data_size = cr->private_data_size; // the request's: the passive event carries it
    std::memcpy(x.private_data, cr->private_data, cr->private_data_size);
    {
        std::lock_guard lock(ia->cm_mutex);
        ia->attempts[cr->request_id] = ep;
        ia->ud_exchanges[cr->request_id] = x;
        std::erase(ia->requests, cr);
    }
    // The requester may send as soon as it has the reply.
    ia->device->expect_datagrams(*ep, x.peer, x.peer_qpn, x.peer_port, true);
    const auto* bytes = static_cast<const std::uint8_t*>(pdata);
    if (!ia->cm->accept(cr->request_id, *ep, std::vector<std::uint8_t>(bytes, bytes + pdata_size),
                        std::chrono::milliseconds(5000))) {
        std::lock_guard lock(ia->cm_mutex);
        ia->attempts.erase(cr->request_id);
        ia->ud_exchanges.erase(cr->request_id);
        post_ud_connection_failed(ep, false, nullptr, 0);
    }
    ia->ib_counters.add(DCNT_IA_SP_CR_ACCEPTED);
    destroy_object(cr);
    return DAT_SUCCESS;
}

} // namespace

DAT_RETURN cr_accept(DAT_CR_HANDLE handle, DAT_EP_HANDLE ep_handle, DAT_COUNT pdata_size, const DAT_PVOID pdata)
{
    Cr* cr = from_handle<Cr>(handle);
    if (!cr)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    if (pdata_size < 0 || pdata_size > max_private_data(cr->ia) || (pdata_size && !pdata))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3); // the CR stays usable
    // A UD endpoint answers a UD endpoint's request only, and the other way
    // round (the CR stays usable).
    if (Ep* given = ep_handle ? from_handle<Ep>(ep_handle) : nullptr; given && given->ia == cr->ia &&
                                                                      given->ud != cr->datagram)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (cr->datagram) {
        Ep* ep = ep_handle ? from_handle<Ep>(ep_handle) : nullptr;
        if (!ep || ep->ia != cr->ia || cr->ep || cr->provider_ep)
            return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        return accept_datagram(cr, ep, pdata_size, pdata);
    }
    Ep* ep = nullptr;
    if (cr->ep || cr->provider_ep) { // the request names its endpoint: only that one may take it
        if (ep_handle && ep_handle != cr->ep)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        ep = endpoint_of(cr);
        if (!ep)
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        const DAT_EP_STATE ready =
            cr->provider_ep ? DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING : DAT_EP_STATE_PASSIVE_CONNECTION_PENDING;
        if (const DAT_EP_STATE now = ep->state.load(); now != ready)
            return error(DAT_INVALID_STATE, ep_state_subtype(now));
    } else {
        if (!ep_handle)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2); // a consumer-EP PSP's request names none
        ep = from_handle<Ep>(ep_handle);
        if (!ep || ep->ia != cr->ia)
            return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        if (const DAT_EP_STATE now = ep->state.load(); now != DAT_EP_STATE_UNCONNECTED)
            return error(DAT_INVALID_STATE, ep_state_subtype(now));
    }
    if (DAT_RETURN rc = ensure_queues(ep); rc != DAT_SUCCESS)
        return rc;
    Ia* ia = cr->ia;
    ep->remote = cr->remote;
    ep->remote_port = cm::port_of(cr->remote);
    ep->connected_actively = false;
    ep->state = DAT_EP_STATE_PASSIVE_CONNECTION_PENDING;
    const auto* bytes = static_cast<const std::uint8_t*>(pdata);
    {
        std::lock_guard lock(ia->cm_mutex);
        ep->cm_id = cr->request_id;
        ia->attempts[cr->request_id] = ep;
        std::erase(ia->requests, cr);
    }
    const bool sent = ia->cm->accept(cr->request_id, *ep, std::vector<std::uint8_t>(bytes, bytes + pdata_size),
                                     std::chrono::milliseconds(5000));
    if (!sent) {
        // The CM may have ended the request meanwhile (the requester gave
        // up) and reported it to the EP already: one event, not two.
        bool unreported;
        {
            std::lock_guard lock(ia->cm_mutex);
            unreported = ia->attempts.erase(cr->request_id) > 0;
        }
        if (unreported) {
            ep->state = DAT_EP_STATE_DISCONNECTED;
            post_connection_event(ep, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR, nullptr, 0);
        }
    }
    ia->ib_counters.add(DCNT_IA_SP_CR_ACCEPTED);
    destroy_object(cr); // the CR is consumed either way
    return DAT_SUCCESS;
}

namespace {

// The endpoint a request named goes back: a provider-made one to the
// provider (freed), an RSP's to the consumer (unconnected again).
void give_back_endpoint(Cr* cr)
{
    if (cr->ep && cr->provider_ep) {
        cr->ep->state = DAT_EP_STATE_UNCONNECTED;
        ep_free(cr->ep);
    } else if (cr->ep) {
        DAT_EP_STATE s = DAT_EP_STATE_PASSIVE_CONNECTION_PENDING;
        if (!cr->ep->state.compare_exchange_strong(s, DAT_EP_STATE_UNCONNECTED)) {
            s = DAT_EP_STATE_UNCONFIGURED_PASSIVE;
            cr->ep->state.compare_exchange_strong(s, DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
        }
    }
    cr->ep = nullptr;
}

} // namespace

DAT_RETURN cr_handoff(DAT_CR_HANDLE handle, DAT_CONN_QUAL handoff)
{
    Cr* cr = from_handle<Cr>(handle);
    if (!cr)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    Ia* ia = cr->ia;
    IncomingRequest r;
    r.id = cr->request_id;
    r.remote = cr->remote;
    r.conn_qual = handoff;
    r.private_data.assign(cr->private_data, cr->private_data + cr->private_data_size);
    {
        std::lock_guard lock(ia->cm_mutex);
        // Another service point of this IA listening on that qualifier.
        Psp* target = nullptr;
        for (const auto& [id, sp] : ia->listeners)
            if (sp->conn_qual == handoff && sp != cr->psp)
                target = sp;
        if (!target)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        if (!takes_request(target))
            return error(DAT_INVALID_STATE, DAT_NO_SUBTYPE); // an RSP that took its one request
        deliver_request(ia, target, r);
        std::erase(ia->requests, cr);
    }
    give_back_endpoint(cr); // outside the CM lock: freeing an endpoint takes the IA's
    destroy_object(cr); // the consumer's CR is gone; the target's EVD has a new one
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
    cr->ia->cm->reject(cr->request_id, std::vector<std::uint8_t>(bytes, bytes + pdata_size));
    {
        std::lock_guard lock(cr->ia->cm_mutex);
        std::erase(cr->ia->requests, cr);
    }
    cr->ia->ib_counters.add(DCNT_IA_SP_CR_REJECTED);
    give_back_endpoint(cr);
    destroy_object(cr);
    return DAT_SUCCESS;
}

} // namespace fastdapl::core
