// The fake mlx5 device's librdmacm: connections inside one process on the
// TCP port space of 127.0.0.1 / ::1, with the events, statuses and private
// data lengths the kernel's rdma_cm gives over RoCE (IB CM messages: REQ
// carries 56 bytes for the consumer, REP 196, REJ 148, padded with zeros).
// An accepted connection joins the two softnic queue pairs by a socketpair.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "fake.hpp"

#include <rdma/rdma_cma.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace fake {
namespace {

constexpr int kReqPrivate = 56, kRepPrivate = 196, kRejPrivate = 148;
constexpr int kRejTimeout = 4, kRejInvalidServiceId = 8, kRejConsumer = 28; // IB CM reject reasons
// UD ids (RDMA_PS_UDP) exchange SIDR messages: a request with 216 bytes for
// the consumer, a reply with 136; the reply's status (the UNREACHABLE
// event's) says why not.
constexpr int kSidrReqPrivate = 216, kSidrRepPrivate = 136;
constexpr int kSidrUnsupported = 1, kSidrReject = 2;

enum class IdState { idle, bound, listening, addr_resolved, route_resolved, connecting, req_rcvd, established, disconnected, ended };

struct Id;
struct Event {
    rdma_cm_event ev{}; // first: rdma_ack_cm_event gets its address
    Id* acker = nullptr; // whose events_completed it counts toward (a request: the listener's)
    std::uint8_t pdata[256]{};
};

struct EvChannel {
    rdma_event_channel ch{};
    EventQueue<Event*> q;
};

struct Id {
    rdma_cm_id id{};
    IdState st = IdState::idle;
    bool bound = false;
    Id* peer = nullptr;     // the other end of a request or connection
    unsigned unacked = 0;   // events handed out (or queued) and not acknowledged
    rdma_conn_param asked{}; // a request's parameters, for the passive side's event
};

std::vector<Id*>& g_ids = *new std::vector<Id*>; // never destroyed, as g_mu

Id* id_of(rdma_cm_id* id) { return reinterpret_cast<Id*>(id); }
sockaddr* src(Id* i) { return &i->id.route.addr.src_addr; }
sockaddr* dst(Id* i) { return &i->id.route.addr.dst_addr; }

std::uint16_t port_of(const sockaddr* a)
{
    return ntohs(a->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(a)->sin6_port
                                          : reinterpret_cast<const sockaddr_in*>(a)->sin_port);
}
void set_port(sockaddr* a, std::uint16_t port)
{
    if (a->sa_family == AF_INET6)
        reinterpret_cast<sockaddr_in6*>(a)->sin6_port = htons(port);
    else
        reinterpret_cast<sockaddr_in*>(a)->sin_port = htons(port);
}
std::size_t size_of(const sockaddr* a) { return a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in); }
bool is_any(const sockaddr* a)
{
    return a->sa_family == AF_INET6 ? IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr)
                                    : reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == htonl(INADDR_ANY);
}
// The device's port has lo's addresses only.
bool is_local(const sockaddr* a)
{
    return a->sa_family == AF_INET6 ? IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr)
                                    : reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
}
bool same_host(const sockaddr* a, const sockaddr* b)
{
    if (a->sa_family != b->sa_family)
        return false;
    return a->sa_family == AF_INET6 ? std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                                                  &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, 16) == 0
                                    : reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
                                          reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
}

// Within one port space (TCP and UDP ones are apart).
bool port_taken(rdma_port_space ps, const sockaddr* a, std::uint16_t port)
{
    for (Id* o : g_ids)
        if (o->bound && o->id.ps == ps && port_of(src(o)) == port &&
            (is_any(src(o)) || is_any(a) || same_host(src(o), a) || src(o)->sa_family != a->sa_family))
            return true;
    return false;
}

int fail(int err)
{
    errno = err;
    return -1;
}

// Queues an event for `to` on its channel; `len` bytes of `pdata` in a
// field of `field` bytes (the IB CM message's), the rest zeros.
void deliver(Id* to, rdma_cm_event_type type, int status, const void* pdata = nullptr, int len = 0, int field = 0,
             Id* listener = nullptr)
{
    auto* e = new Event;
    e->ev.id = &to->id;
    e->ev.listen_id = listener ? &listener->id : nullptr;
    e->ev.event = type;
    e->ev.status = status;
    if (field) {
        std::memcpy(e->pdata, pdata, static_cast<std::size_t>(std::min(len, field)));
        e->ev.param.conn.private_data = e->pdata;
        e->ev.param.conn.private_data_len = static_cast<std::uint8_t>(field);
    }
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
        const rdma_conn_param& a = to->asked;
        e->ev.param.conn.responder_resources = a.initiator_depth;
        e->ev.param.conn.initiator_depth = a.responder_resources;
        e->ev.param.conn.retry_count = a.retry_count;
        e->ev.param.conn.rnr_retry_count = a.rnr_retry_count;
        e->ev.param.conn.qp_num = to->peer->id.qp ? to->peer->id.qp->qp_num : 0;
    }
    e->acker = listener ? listener : to;
    ++e->acker->unacked;
    reinterpret_cast<EvChannel*>(to->id.channel)->q.push(e);
}

// The same for a UD id: its private data goes in param.ud; an ESTABLISHED
// (the SIDR reply that accepts) carries the route to the peer, its queue
// pair and rdma_cm's qkey.
void deliver_ud(Id* to, rdma_cm_event_type type, int status, const void* pdata, int len, int field,
                Id* listener = nullptr, const ibv_ah_attr* ah = nullptr, std::uint32_t qpn = 0)
{
    auto* e = new Event;
    e->ev.id = &to->id;
    e->ev.listen_id = listener ? &listener->id : nullptr;
    e->ev.event = type;
    e->ev.status = status;
    if (pdata && len)
        std::memcpy(e->pdata, pdata, static_cast<std::size_t>(std::min(len, field)));
    e->ev.param.ud.private_data = e->pdata;
    e->ev.param.ud.private_data_len = static_cast<std::uint8_t>(field);
    if (ah) {
        e->ev.param.ud.ah_attr = *ah;
        e->ev.param.ud.qp_num = qpn;
        e->ev.param.ud.qkey = RDMA_UDP_QKEY;
    }
    e->acker = listener ? listener : to;
    ++e->acker->unacked;
    reinterpret_cast<EvChannel*>(to->id.channel)->q.push(e);
}

// The route a SIDR reply gives the requester: RoCE v2 to the address it asked for.
ibv_ah_attr route_to(const sockaddr* a)
{
    ibv_ah_attr ah{};
    ah.is_global = 1;
    ah.port_num = 1;
    ah.grh.hop_limit = 64;
    ah.grh.sgid_index = 0;
    if (a->sa_family == AF_INET) {
        ah.grh.dgid.raw[10] = ah.grh.dgid.raw[11] = 0xff;
        std::memcpy(&ah.grh.dgid.raw[12], &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, 4);
    } else {
        std::memcpy(ah.grh.dgid.raw, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, 16);
    }
    return ah;
}

// Ends the pairing of a request or connection from `i`'s side.
void unlink(Id* i)
{
    if (i->peer)
        i->peer->peer = nullptr;
    i->peer = nullptr;
}

} // namespace

bool connect_pair(Qp* active, Qp* passive)
{
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
        return false;
    return device().connect(active->sq, fds[0]) && device().connect(passive->sq, fds[1]);
}

} // namespace fake

using namespace fake;

FAKE_API rdma_event_channel* rdma_create_event_channel()
{
    auto* c = new EvChannel;
    c->q.fd = ::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
    c->ch.fd = c->q.fd;
    return &c->ch;
}

FAKE_API void rdma_destroy_event_channel(rdma_event_channel* ch)
{
    ::close(ch->fd);
    delete reinterpret_cast<EvChannel*>(ch);
}

FAKE_API int rdma_get_cm_event(rdma_event_channel* ch, rdma_cm_event** event)
{
    Event* e = nullptr;
    if (!reinterpret_cast<EvChannel*>(ch)->q.pop(e))
        return -1;
    *event = &e->ev;
    return 0;
}

FAKE_API int rdma_ack_cm_event(rdma_cm_event* event)
{
    std::lock_guard lock(g_mu);
    auto* e = reinterpret_cast<Event*>(event);
    --e->acker->unacked;
    delete e;
    g_acked.notify_all();
    return 0;
}

FAKE_API ibv_context** rdma_get_devices(int* n)
{
    auto** list = static_cast<ibv_context**>(std::calloc(2, sizeof(ibv_context*)));
    list[0] = shared_context();
    if (n)
        *n = 1;
    return list;
}
FAKE_API void rdma_free_devices(ibv_context** list) { std::free(list); }

FAKE_API int rdma_create_id(rdma_event_channel* ch, rdma_cm_id** out, void* context, rdma_port_space ps)
{
    if ((ps != RDMA_PS_TCP && ps != RDMA_PS_UDP) || !ch)
        return fail(EINVAL); // only what the provider uses
    std::lock_guard lock(g_mu);
    auto* i = new Id;
    i->id.channel = ch;
    i->id.context = context;
    i->id.ps = ps;
    i->id.qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
    g_ids.push_back(i);
    *out = &i->id;
    return 0;
}

FAKE_API int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr)
{
    std::lock_guard lock(g_mu);
    Id* i = id_of(id);
    if (i->bound || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
        return fail(EINVAL);
    if (!is_any(addr) && !is_local(addr))
        return fail(EADDRNOTAVAIL);
    std::uint16_t port = port_of(addr);
    if (port == 0) { // rdma_cm picks a free one
        static std::uint16_t next = 40000;
        for (int tries = 0; tries < 20000 && (port == 0 || port_taken(id->ps, addr, port)); ++tries)
            port = next = static_cast<std::uint16_t>(next >= 60000 ? 40000 : next + 1);
    }
    if (port_taken(id->ps, addr, port))
        return fail(EADDRINUSE);
    std::memcpy(src(i), addr, size_of(addr));
    set_port(src(i), port);
    i->bound = true;
    i->st = IdState::bound;
    if (!is_any(addr)) { // bound to the device's address: its context
        id->verbs = shared_context();
        id->port_num = 1;
    }
    return 0;
}

FAKE_API int rdma_listen(rdma_cm_id* id, int)
{
    std::lock_guard lock(g_mu);
    Id* i = id_of(id);
    if (!i->bound) {
        sockaddr_in any{};
        any.sin_family = AF_INET;
        if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&any)) != 0)
            return -1;
    }
    if (i->st != IdState::bound)
        return fail(EINVAL);
    i->st = IdState::listening;
    return 0;
}

FAKE_API __be16 rdma_get_src_port(rdma_cm_id* id) { return htons(port_of(src(id_of(id)))); }
FAKE_API __be16 rdma_get_dst_port(rdma_cm_id* id) { return htons(port_of(dst(id_of(id)))); }

FAKE_API int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int)
{
    std::lock_guard lock(g_mu);
    Id* i = id_of(id);
    if (!dst_addr || (src_addr && src_addr->sa_family != dst_addr->sa_family))
        return fail(EINVAL);
    if (!i->bound) {
        sockaddr_storage local{};
        if (src_addr)
            std::memcpy(&local, src_addr, size_of(src_addr));
        else
            local.ss_family = dst_addr->sa_family;
        if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&local)) != 0)
            return -1;
    }
    std::memcpy(dst(i), dst_addr, size_of(dst_addr));
    if (!is_local(dst_addr)) { // no route through this device (its only netdev is lo)
        deliver(i, RDMA_CM_EVENT_ADDR_ERROR, -ENODEV);
        return 0;
    }
    if (is_any(src(i))) { // the source becomes the device's address
        const std::uint16_t port = port_of(src(i));
        std::memcpy(src(i), dst_addr, size_of(dst_addr));
        set_port(src(i), port);
    }
    id->verbs = shared_context();
    id->port_num = 1;
    i->st = IdState::addr_resolved;
    deliver(i, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    return 0;
}

FAKE_API int rdma_resolve_route(rdma_cm_id* id, int)
{
    std::lock_guard lock(g_mu);
    Id* i = id_of(id);
    if (i->st != IdState::addr_resolved)
        return fail(EINVAL);
    i->st = IdState::route_resolved;
    deliver(i, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    return 0;
}

FAKE_API int rdma_connect(rdma_cm_id* id, rdma_conn_param* param)
{
    std::lock_guard lock(g_mu);
    Id* i = id_of(id);
    const bool sidr = id->ps == RDMA_PS_UDP;
    if (i->st != IdState::route_resolved || !param || param->private_data_len > (sidr ? kSidrReqPrivate : kReqPrivate))
        return fail(EINVAL);
    if (!id->qp && !sidr)
        trap("rdma_connect without id->qp (CONNECT_RESPONSE flow) is not modelled");
    Id* listener = nullptr;
    for (Id* o : g_ids)
        if (o->st == IdState::listening && o->id.ps == id->ps && port_of(src(o)) == port_of(dst(i)) &&
            (same_host(src(o), dst(i)) || (is_any(src(o)) && src(o)->sa_family == dst(i)->sa_family)))
            listener = o;
    i->st = IdState::connecting;
    if (!listener && sidr) { // a SIDR reply: the service is not supported there
        i->st = IdState::ended;
        deliver_ud(i, RDMA_CM_EVENT_UNREACHABLE, kSidrUnsupported, nullptr, 0, kSidrRepPrivate);
        return 0;
    }
    if (!listener) { // the peer's CM: no listener for this service ID
        i->st = IdState::ended;
        deliver(i, RDMA_CM_EVENT_REJECTED, kRejInvalidServiceId, nullptr, 0, kRejPrivate);
        return 0;
    }
    auto* n = new Id; // the passive side's id for this request
    n->id.verbs = shared_context();
    n->id.channel = listener->id.channel;
    n->id.context = listener->id.context;
    n->id.ps = id->ps;
    n->id.port_num = 1;
    n->id.qp_type = id->qp_type;
    std::memcpy(src(n), dst(i), size_of(dst(i)));
    std::memcpy(dst(n), src(i), size_of(src(i)));
    n->st = IdState::req_rcvd;
    n->asked = *param;
    n->peer = i;
    i->peer = n;
    g_ids.push_back(n);
    if (sidr) // a SIDR request carries no queue pair number
        deliver_ud(n, RDMA_CM_EVENT_CONNECT_REQUEST, 0, param->private_data, param->private_data_len, kSidrReqPrivate,
                   listener);
    else
        deliver(n, RDMA_CM_EVENT_CONNECT_REQUEST, 0, param->private_data, param->private_data_len, kReqPrivate, listener);
    return 0;
}

FAKE_API int rdma_accept(rdma_cm_id* id, rdma_conn_param* param)
{
    std::lock_guard lock(g_mu);
    Id* n = id_of(id);
    if (id->ps == RDMA_PS_UDP) { // the SIDR reply: the requester learns our queue pair; nothing comes back
        if (n->st != IdState::req_rcvd || !param || param->private_data_len > kSidrRepPrivate || param->qp_num == 0)
            return fail(EINVAL);
        n->st = IdState::ended;
        if (Id* a = n->peer) {
            a->st = IdState::ended;
            const ibv_ah_attr ah = route_to(src(n));
            deliver_ud(a, RDMA_CM_EVENT_ESTABLISHED, 0, param->private_data, param->private_data_len, kSidrRepPrivate,
                       nullptr, &ah, param->qp_num);
        }
        unlink(n);
        return 0;
    }
    if (n->st != IdState::req_rcvd || (param && param->private_data_len > kRepPrivate))
        return fail(EINVAL);
    if (!id->qp)
        trap("rdma_accept without id->qp is not modelled");
    Id* a = n->peer;
    if (!a)
        return 0; // the active side gave up: its reject is queued for us already
    // librdmacm moves the passive QP to RTR and RTS before sending the REP.
    Qp* pq = qp_of(id->qp);
    if (set_state(pq, QpState::rtr) != 0 || set_state(pq, QpState::rts) != 0)
        return fail(EINVAL);
    Qp* aq = qp_of(a->id.qp);
    if (set_state(aq, QpState::rtr) != 0 || set_state(aq, QpState::rts) != 0) {
        // The active side's librdmacm cannot take the REP: it rejects, and says CONNECT_ERROR.
        n->st = a->st = IdState::ended;
        unlink(n);
        deliver(a, RDMA_CM_EVENT_CONNECT_ERROR, -EINVAL);
        deliver(n, RDMA_CM_EVENT_REJECTED, kRejConsumer, nullptr, 0, kRejPrivate);
        return 0;
    }
    if (!connect_pair(aq, pq))
        trap("could not join the softnic queue pairs 0x%x and 0x%x", aq->qp.qp_num, pq->qp.qp_num);
    n->st = a->st = IdState::established;
    deliver(a, RDMA_CM_EVENT_ESTABLISHED, 0, param ? param->private_data : nullptr, param ? param->private_data_len : 0,
            kRepPrivate);
    deliver(n, RDMA_CM_EVENT_ESTABLISHED, 0); // the RTU carries nothing for the consumer
    return 0;
}

FAKE_API int rdma_reject(rdma_cm_id* id, const void* pdata, uint8_t len)
{
    std::lock_guard lock(g_mu);
    Id* n = id_of(id);
    const bool sidr = id->ps == RDMA_PS_UDP;
    if (n->st != IdState::req_rcvd || len > (sidr ? kSidrRepPrivate : kRejPrivate))
        return fail(EINVAL);
    n->st = IdState::ended;
    if (Id* a = n->peer) {
        a->st = IdState::ended;
        if (sidr) // a SIDR reply that says no
            deliver_ud(a, RDMA_CM_EVENT_UNREACHABLE, kSidrReject, pdata, len, kSidrRepPrivate);
        else
            deliver(a, RDMA_CM_EVENT_REJECTED, kRejConsumer, pdata, len, kRejPrivate);
    }
    unlink(n);
    return 0;
}

FAKE_API int rdma_disconnect(rdma_cm_id* id)
{
    std::lock_guard lock(g_mu);
    Id* i = id_of(id);
    if (i->st != IdState::established && i->st != IdState::disconnected)
        return fail(EINVAL);
    if (id->qp) // librdmacm moves the QP to ERROR (RoCE and IB)
        set_state(qp_of(id->qp), QpState::error);
    if (i->st == IdState::established) { // DREQ: both ends hear DISCONNECTED (this one after the DREP)
        i->st = IdState::disconnected;
        deliver(i, RDMA_CM_EVENT_DISCONNECTED, 0);
        if (Id* p = i->peer) {
            p->st = IdState::disconnected;
            deliver(p, RDMA_CM_EVENT_DISCONNECTED, 0);
        }
        unlink(i);
    }
    return 0;
}

FAKE_API int rdma_destroy_id(rdma_cm_id* id)
{
    std::unique_lock lock(g_mu);
    Id* i = id_of(id);
    // Events not yet read go with the id, as the kernel drops them (a
    // request's new id is destroyed and its active side rejected).
    auto* ch = reinterpret_cast<EvChannel*>(id->channel);
    std::vector<Event*> dropped;
    {
        std::lock_guard qlock(ch->q.mu);
        auto& items = ch->q.items;
        for (auto it = items.begin(); it != items.end();) {
            Event* e = *it;
            if (e->ev.id == id || e->ev.listen_id == id) {
                dropped.push_back(e);
                it = items.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (Event* e : dropped) {
        --e->acker->unacked;
        if (e->ev.listen_id == id && e->ev.id != id)
            rdma_destroy_id(e->ev.id);
        delete e;
    }
    wait_acked(lock, [i] { return i->unacked == 0; }, "rdma_destroy_id");
    if (Id* p = i->peer) { // what the IB CM sends when a cm_id goes in each state
        if (i->st == IdState::established) {
            p->st = IdState::disconnected;
            deliver(p, RDMA_CM_EVENT_DISCONNECTED, 0);
        } else if (i->st == IdState::connecting && id->ps == RDMA_PS_UDP) {
            // A SIDR request whose sender went: its reply will find nobody.
        } else if (i->st == IdState::connecting) {
            p->st = IdState::ended;
            deliver(p, RDMA_CM_EVENT_REJECTED, kRejTimeout, nullptr, 0, kRejPrivate);
        } else if (i->st == IdState::req_rcvd && id->ps == RDMA_PS_UDP) {
            p->st = IdState::ended; // the CM rejects a SIDR request left unanswered
            deliver_ud(p, RDMA_CM_EVENT_UNREACHABLE, kSidrReject, nullptr, 0, kSidrRepPrivate);
        } else if (i->st == IdState::req_rcvd) {
            p->st = IdState::ended;
            deliver(p, RDMA_CM_EVENT_REJECTED, kRejConsumer, nullptr, 0, kRejPrivate);
        }
        unlink(i);
    }
    g_ids.erase(std::find(g_ids.begin(), g_ids.end(), i));
    delete i;
    return 0;
}
