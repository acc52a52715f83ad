// Endpoints: create, query, modify, status, reset, free, receive
// watermarks (connections: ep_connect.cpp; posting: ep_post.cpp).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "ep.hpp"
#include "rmr.hpp"

#include "address.hpp" // src/cm: sockaddr helpers, no CM state
#include "api.hpp"
#include "data_path.hpp"
#include "ia.hpp"
#include "pz.hpp"

#include <algorithm>
#include <utility>

namespace fastdapl::core {

namespace {

DAT_EP_ATTR default_ep_attr()
{
    DAT_EP_ATTR a{};
    a.service_type = DAT_SERVICE_TYPE_RC;
    a.max_message_size = kMaxMessageSize;
    a.max_rdma_size = kMaxMessageSize;
    a.qos = DAT_QOS_BEST_EFFORT;
    a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.max_recv_dtos = kDefaultDtos;
    a.max_request_dtos = kDefaultDtos;
    a.max_recv_iov = kMaxSge;
    a.max_request_iov = kMaxSge;
    a.max_rdma_read_in = 4;
    a.max_rdma_read_out = 4;
    a.srq_soft_hw = DAT_HW_DEFAULT;
    a.max_rdma_read_iov = kMaxSge;
    a.max_rdma_write_iov = kMaxSge;
    return a;
}

// The defaults an IA gives for a NULL attribute: every segment count the
// IA offers (the reference's test programs post 8 and 16 segments), queue
// depths and RDMA reads within what its device allows.
DAT_EP_ATTR default_ep_attr(const Ia& ia)
{
    DAT_IA_ATTR limits{};
    fill_ia_attr(const_cast<Ia*>(&ia), &limits);
    DAT_EP_ATTR a = default_ep_attr();
    const auto cap = [](DAT_COUNT& field, DAT_COUNT limit) {
        if (limit > 0 && field > limit)
            field = limit;
    };
    cap(a.max_recv_dtos, limits.max_dto_per_ep);
    cap(a.max_request_dtos, limits.max_dto_per_ep);
    cap(a.max_recv_iov, limits.max_iov_segments_per_dto);
    cap(a.max_request_iov, limits.max_iov_segments_per_dto);
    cap(a.max_rdma_read_iov, limits.max_iov_segments_per_rdma_read);
    cap(a.max_rdma_write_iov, limits.max_iov_segments_per_rdma_write);
    cap(a.max_rdma_read_in, limits.max_rdma_read_per_ep_in);
    cap(a.max_rdma_read_out, limits.max_rdma_read_per_ep_out);
    if (limits.max_message_size > 0 && a.max_message_size > limits.max_message_size)
        a.max_message_size = limits.max_message_size;
    if (limits.max_rdma_size > 0 && a.max_rdma_size > limits.max_rdma_size)
        a.max_rdma_size = limits.max_rdma_size;
    return a;
}

// Fills zero fields with the provider's defaults (the reference reads zero
// so and consumers rely on it), then checks what the softnic can do.

// For an SRQ endpoint max_recv_dtos is its hard high watermark and
// max_recv_iov is not used (read back as 0); both are handled by the caller.
DAT_RETURN complete_ep_attr(const Ia& ia, DAT_EP_ATTR& a, DAT_RETURN_SUBTYPE which_arg, bool with_srq = false)
{
    const DAT_EP_ATTR d = default_ep_attr(ia);
    const DAT_COUNT saved_recv_dtos = a.max_recv_dtos;
    if (with_srq) {
        a.max_recv_dtos = d.max_recv_dtos;
        a.max_recv_iov = d.max_recv_iov;
    }
    for (auto [field, fallback] : {std::pair{&a.max_recv_dtos, d.max_recv_dtos},
                                   {&a.max_request_dtos, d.max_request_dtos},
                                   {&a.max_recv_iov, d.max_recv_iov},
                                   {&a.max_request_iov, d.max_request_iov},
                                   {&a.max_rdma_read_iov, d.max_rdma_read_iov},
                                   {&a.max_rdma_write_iov, d.max_rdma_write_iov}})
        if (*field == 0)
            *field = fallback;
    if (a.max_message_size == 0) // a UD endpoint's default is its largest datagram
        a.max_message_size =
            raw(a.service_type) == DAT_IB_SERVICE_TYPE_UD ? ia.device->max_datagram_size() : d.max_message_size;
    if (a.max_rdma_size == 0)
        a.max_rdma_size = d.max_rdma_size;
    // d's segment counts are the IA's limits (the provider's, lowered to the device's).
    const auto sge_ok = [&d](DAT_COUNT n) { return n > 0 && n <= d.max_request_iov; };
    const auto depth_ok = [](DAT_COUNT n) { return n > 0 && n <= kMaxDtosPerEp; };
    // The IB extension's UD endpoints, where the device kind has them: a
    // message is one datagram, at most the MTU the IA reports.
    const bool ud = raw(a.service_type) == DAT_IB_SERVICE_TYPE_UD;
    if (ud && !ia.device->ud_endpoints())
        return error(DAT_MODEL_NOT_SUPPORTED);
    if (ud && a.max_message_size > ia.device->max_datagram_size())
        return error(DAT_INVALID_PARAMETER, which_arg);
    if ((!ud && raw(a.service_type) != DAT_SERVICE_TYPE_RC) || !depth_ok(a.max_recv_dtos) || !depth_ok(a.max_request_dtos) ||
        !sge_ok(a.max_recv_iov) || !sge_ok(a.max_request_iov) || !sge_ok(a.max_rdma_read_iov) ||
        !sge_ok(a.max_rdma_write_iov) || a.max_message_size > kMaxMessageSize || a.max_rdma_size > kMaxMessageSize ||
        a.max_rdma_read_in < 0 || a.max_rdma_read_out < 0 || a.max_rdma_read_in > kMaxRdmaReadPerEp ||
        a.max_rdma_read_out > kMaxRdmaReadPerEp)
        return error(DAT_INVALID_PARAMETER, which_arg);
    if (raw(a.qos) & ~kAllQos)
        return error(DAT_INVALID_PARAMETER, which_arg);
    if (with_srq) {
        a.max_recv_dtos = saved_recv_dtos;
        a.max_recv_iov = 0;
    }
    return DAT_SUCCESS;
}

// A watermark as the consumer gives it: a count, or DAT_WATERMARK_INFINITE.
bool valid_watermark(DAT_COUNT mark)
{
    return mark >= 0 || mark == DAT_WATERMARK_INFINITE;
}

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
    DAT_EP_ATTR a = attr ? *attr : default_ep_attr(*ia);
    if (attr) {
        if (DAT_RETURN rc = complete_ep_attr(*ia, a, attr_arg, srq != nullptr); rc != DAT_SUCCESS)
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
    if (!ia->device->high_watermarks() && srq) {
        soft = hard = DAT_WATERMARK_INFINITE;
        a.max_recv_dtos = DAT_HW_DEFAULT;
        a.srq_soft_hw = DAT_HW_DEFAULT;
    }
    Ep* ep = make_object<Ep>();
    if (!ep)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    ep->provider = ia->provider;
    ep->ia = ia;
    ep->path = ia->device->kind();
    ep->pz = pz;
    ep->recv_evd = r;
    ep->request_evd = q;
    ep->connect_evd = c;
    ep->srq = srq;
    ep->soft_watermark = soft;
    ep->hard_watermark = hard;
    ep->attr = a;
    ep->ud = raw(a.service_type) == DAT_IB_SERVICE_TYPE_UD;
    if (!(pz && r && q && c))
        ep->state = DAT_EP_STATE_UNCONFIGURED_UNCONNECTED; // dat_ep_modify completes it
    if (pz && r && q && c) {
        if (DAT_RETURN rc = ensure_queues(ep); rc != DAT_SUCCESS) {
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

} // namespace

// The INVALID_STATE subtype that names the state an EP is in now.
DAT_RETURN_SUBTYPE ep_state_subtype(DAT_EP_STATE s)
{
    switch (s) {
    case DAT_EP_STATE_UNCONNECTED:
        return DAT_INVALID_STATE_EP_UNCONNECTED;
    case DAT_EP_STATE_UNCONFIGURED_UNCONNECTED:
        return DAT_INVALID_STATE_EP_UNCONFIGURED;
    case DAT_EP_STATE_RESERVED:
        return DAT_INVALID_STATE_EP_RESERVED;
    case DAT_EP_STATE_UNCONFIGURED_RESERVED:
        return DAT_INVALID_STATE_EP_UNCONFRESERVED;
    case DAT_EP_STATE_PASSIVE_CONNECTION_PENDING:
        return DAT_INVALID_STATE_EP_PASSCONNPENDING;
    case DAT_EP_STATE_UNCONFIGURED_PASSIVE:
        return DAT_INVALID_STATE_EP_UNCONFPASSIVE;
    case DAT_EP_STATE_ACTIVE_CONNECTION_PENDING:
        return DAT_INVALID_STATE_EP_ACTCONNPENDING;
    case DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING:
        return DAT_INVALID_STATE_EP_TENTCONNPENDING;
    case DAT_EP_STATE_UNCONFIGURED_TENTATIVE:
        return DAT_INVALID_STATE_EP_UNCONFTENTATIVE;
    case DAT_EP_STATE_CONNECTED:
        return DAT_INVALID_STATE_EP_CONNECTED;
    case DAT_EP_STATE_DISCONNECT_PENDING:
        return DAT_INVALID_STATE_EP_DISCPENDING;
    case DAT_EP_STATE_DISCONNECTED:
        return DAT_INVALID_STATE_EP_DISCONNECTED;
    case DAT_EP_STATE_COMPLETION_PENDING:
        return DAT_INVALID_STATE_EP_COMPLPENDING;
    default:
        return DAT_INVALID_STATE_EP_NOTREADY;
    }
}

DAT_RETURN ensure_queues(Ep* ep)
{
    if (ep->queues)
        return DAT_SUCCESS;
    if (!ep->pz || !ep->recv_evd || !ep->request_evd || !ep->connect_evd)
        return error(DAT_INVALID_STATE, !ep->pz ? DAT_INVALID_STATE_EP_PZ : DAT_INVALID_STATE_EP_EVD_REQUEST);
    return ep->ia->device->create_queues(*ep);
}

// The queue pair goes (it is rebuilt on next use).
void drop_queues(Ep* ep)
{
    if (ep->queues) {
        ep->ia->device->destroy_queues(*ep);
        forget_rmr_binds(ep); // their completions went with the queues
    }
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
    // Split PZ is not offered on verbs IAs (DevicePath::split_pz): the
    // device checks an SRQ's receive buffers against the QP's PD (Soft-RoCE
    // does), so an endpoint in another PZ would fail every receive.
    if (!srq->ia->device->split_pz() && pz && from_handle<Pz>(pz) != srq->pz)
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
    if (ep->srq && !ep->ia->device->high_watermarks()) { // no marks (ep_create_common)
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
constexpr DAT_EP_PARAM_MASK kEpNeverModifiable =
    DAT_EP_FIELD_IA_HANDLE | DAT_EP_FIELD_EP_STATE | DAT_EP_FIELD_LOCAL_PORT_QUAL | DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR |
    DAT_EP_FIELD_REMOTE_PORT_QUAL | DAT_EP_FIELD_SRQ_HANDLE | DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW;
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
        if (!ia->device->split_pz() && ep->srq && pz && pz != ep->srq->pz) // no split PZ (ep_create_with_srq)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    }
    auto evd_arg = [&](DAT_EVD_HANDLE h, Evd*& into, bool (*fits)(const Evd*), DAT_RETURN_SUBTYPE bad) -> DAT_RETURN {
        into = h ? from_handle<Evd>(h) : nullptr;
        return h && (!into || !fits(into) || into->ia != ia) ? error(DAT_INVALID_HANDLE, bad)
                                                             : static_cast<DAT_RETURN>(DAT_SUCCESS);
    };
    auto conn_evd = [](const Evd* e) { return (e->flags & DAT_EVD_CONNECTION_FLAG) != 0; };
    if (mask & DAT_EP_FIELD_RECV_EVD_HANDLE)
        if (DAT_RETURN rc = evd_arg(p->recv_evd_handle, r, &dto_evd, DAT_INVALID_HANDLE_EVD_RECV); rc != DAT_SUCCESS)
            return rc;
    if (mask & DAT_EP_FIELD_REQUEST_EVD_HANDLE)
        if (DAT_RETURN rc = evd_arg(p->request_evd_handle, q, &dto_evd, DAT_INVALID_HANDLE_EVD_REQUEST);
            rc != DAT_SUCCESS)
            return rc;
    if (mask & DAT_EP_FIELD_CONNECT_EVD_HANDLE)
        if (DAT_RETURN rc = evd_arg(p->connect_evd_handle, c, conn_evd, DAT_INVALID_HANDLE_EVD_CONN); rc != DAT_SUCCESS)
            return rc;
    // New attributes: the masked fields over the current ones, then checked.
    DAT_EP_ATTR a = ep->attr;
    const std::pair<DAT_EP_PARAM_MASK, void (*)(DAT_EP_ATTR&, const DAT_EP_ATTR&)> fields[] = {
        {DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) {
             std::memcpy(&o.service_type, &i.service_type, sizeof o.service_type);
         }},
        {DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_message_size = i.max_message_size; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_rdma_size = i.max_rdma_size; }},
        {DAT_EP_FIELD_EP_ATTR_QOS,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { std::memcpy(&o.qos, &i.qos, sizeof o.qos); }},
        {DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.recv_completion_flags = i.recv_completion_flags; }},
        {DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.request_completion_flags = i.request_completion_flags; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_recv_dtos = i.max_recv_dtos; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_request_dtos = i.max_request_dtos; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_recv_iov = i.max_recv_iov; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_request_iov = i.max_request_iov; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_rdma_read_in = i.max_rdma_read_in; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_rdma_read_out = i.max_rdma_read_out; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_rdma_read_iov = i.max_rdma_read_iov; }},
        {DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV,
         [](DAT_EP_ATTR& o, const DAT_EP_ATTR& i) { o.max_rdma_write_iov = i.max_rdma_write_iov; }},
    };
    for (const auto& [bit, copy] : fields)
        if (mask & bit)
            copy(a, in);
    if (DAT_RETURN rc = complete_ep_attr(*ep->ia, a, DAT_INVALID_ARG3, ep->srq != nullptr); rc != DAT_SUCCESS)
        return DAT_GET_TYPE(rc) == DAT_MODEL_NOT_SUPPORTED ? error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3) : rc;
    if ((raw(a.service_type) == DAT_IB_SERVICE_TYPE_UD) != ep->ud) // its queue pair is of one kind for life
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    // Everything here may change only before a connection is sought or
    // accepted; the PZ only while quiescent (Table 5).
    const DAT_EP_STATE s = ep->state.load();
    // A provider-made endpoint for a request (tentative) has nothing posted:
    // the consumer gives it its PZ and EVDs before accepting.
    const bool quiescent = s == DAT_EP_STATE_UNCONNECTED || s == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED ||
                           s == DAT_EP_STATE_UNCONFIGURED_RESERVED || s == DAT_EP_STATE_UNCONFIGURED_PASSIVE ||
                           s == DAT_EP_STATE_UNCONFIGURED_TENTATIVE || s == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING;
    const bool before_connection =
        quiescent || s == DAT_EP_STATE_RESERVED || s == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING;
    if (!before_connection || ((mask & DAT_EP_FIELD_PZ_HANDLE) && !quiescent))
        return error(DAT_INVALID_STATE, ep_state_subtype(s));
    // The queue pair is built for its PZ, CQs and sizes: a new one is made
    // on next use. Receives already posted would be lost, so not then.
    const bool reshape = (mask & kEpQueueShape) != 0;
    if (reshape && ep->queues) {
        if (!ep->srq && dp::receives_outstanding(ep) != 0)
            return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
        drop_queues(ep);
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
                                {DAT_EP_STATE_UNCONFIGURED_PASSIVE, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING},
                                {DAT_EP_STATE_UNCONFIGURED_TENTATIVE, DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING}}) {
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
    // Counted at completion time: what is not reaped yet.
    if (recv_idle)
        *recv_idle = !ep->queues || dp::receives_idle(ep) ? DAT_TRUE : DAT_FALSE;
    if (request_idle)
        *request_idle = !ep->queues || dp::requests_done(ep) ? DAT_TRUE : DAT_FALSE;
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
    ep->ia->cm->release(*ep);
    drop_queues(ep); // a fresh queue pair for the next connection
    ep->state = DAT_EP_STATE_UNCONNECTED;
    return DAT_SUCCESS;
}

void destroy_ep(Ep* ep)
{
    // No connection event for an endpoint that goes (the softnic's end
    // callback finds it DISCONNECTED already); drop_queues ends the link.
    ep->state = DAT_EP_STATE_DISCONNECTED;
    {
        std::lock_guard lock(ep->ia->cm_mutex);
        if (ep->cm_id && ep->ia->attempts.count(ep->cm_id)) {
            ep->ia->cm->stop_attempt(*ep, true);
            ep->ia->attempts.erase(ep->cm_id);
        }
        // A UD endpoint's exchanges: those under way stop, the others go.
        for (auto x = ep->ia->ud_exchanges.begin(); x != ep->ia->ud_exchanges.end();) {
            if (x->second.ep != ep) {
                ++x;
                continue;
            }
            if (ep->ia->attempts.erase(x->first))
                ep->ia->cm->stop_datagram_attempt(x->first);
            x = ep->ia->ud_exchanges.erase(x);
        }
    }
    ep->ia->cm->release(*ep);
    drop_queues(ep);
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
        s == DAT_EP_STATE_UNCONFIGURED_PASSIVE || s == DAT_EP_STATE_UNCONFIGURED_TENTATIVE)
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

DAT_RETURN ep_recv_query(DAT_EP_HANDLE handle, DAT_COUNT* nbufs_allocated, DAT_COUNT* bufs_alloc_span)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    // One snapshot: buffers allocated to the endpoint whose completion is
    // not generated yet. The softnic fills them in message order, so every
    // one holds the next message and the span equals the count.
    const DAT_COUNT allocated = ep->queues ? dp::receives_allocated(ep) : 0;
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
    if (!ep->ia->device->high_watermarks() && (soft != DAT_WATERMARK_INFINITE || hard != DAT_WATERMARK_INFINITE))
        return not_supported(); // a verbs device does not show when a buffer is taken
    ep->soft_watermark = soft;
    ep->hard_watermark = hard;
    // Without a queue pair nothing is held yet: the marks apply when it is built.
    if (ep->queues && ep->ia->device->apply_watermarks(*ep))
        ep_soft_watermark(ep);
    return DAT_SUCCESS;
}

} // namespace fastdapl::core
