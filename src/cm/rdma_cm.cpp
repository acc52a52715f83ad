// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "rdma_cm.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fastdapl::cm {

namespace {

// An rdma_cm id's context says whose it is: a listener (top bit set, the
// caller's listener id) or a connection (our id).
constexpr std::uint64_t kListenerBit = 1ull << 63;

void* context_of(std::uint64_t v) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(v)); }

// IB CM reject reasons that rdma_cm passes up in the event status.
constexpr int kRejectConsumer = 28;    // the peer's consumer said no

// A reject of ours that stands for "nobody takes it" (RdmaCm::refuse). The
// transport may pad the private data: the marker is a prefix.
bool is_non_peer_reject(const std::vector<std::uint8_t>& pdata)
{
    return pdata.size() >= sizeof kNonPeerRejectMarker &&
           std::memcmp(pdata.data(), kNonPeerRejectMarker, sizeof kNonPeerRejectMarker) == 0;
}

void move_to_error(ibv_qp* qp)
{
    if (!qp)
        return;
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(qp, &attr, IBV_QP_STATE);
}

int remaining_ms(std::chrono::steady_clock::time_point deadline)
{
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::clamp<long long>(left.count(), 1, 1 << 30));
}

} // namespace

// What the thread keeps of an event once it is acknowledged (rdma_destroy_id
// waits for every event of its id to be acknowledged, so nothing holds one
// while it takes a lock).
struct RdmaCm::EventCopy {
    rdma_cm_event_type type;
    int status;
    std::uint64_t context;   // the id's
    rdma_cm_id* id;          // CONNECT_REQUEST: the new id
    std::uint64_t listener;  // CONNECT_REQUEST: the listener's context
    std::vector<std::uint8_t> private_data;
};

RdmaCm::RdmaCm(Callbacks callbacks) : callbacks_(std::move(callbacks)), debug_(std::getenv("FASTDAPL_DEBUG") != nullptr)
{
    channel_ = rdma_create_event_channel();
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!channel_ || wake_fd_ < 0) {
        if (channel_)
            rdma_destroy_event_channel(channel_);
        channel_ = nullptr;
        return;
    }
    ::fcntl(channel_->fd, F_SETFL, ::fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
    thread_ = std::thread([this] { run(); });
}

RdmaCm::~RdmaCm()
{
    stop_ = true;
    if (thread_.joinable()) {
        wake();
        thread_.join();
    }
    for (auto& [id, c] : conns_)
        destroy_locked(c);
    for (auto& [lid, id] : listeners_)
        rdma_destroy_id(id);
    if (channel_)
        rdma_destroy_event_channel(channel_);
    if (wake_fd_ >= 0)
        ::close(wake_fd_);
}

void RdmaCm::wake()
{
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

int RdmaCm::listen(const sockaddr* local, std::uint16_t& port, std::uint64_t listener_id)
{
    if (!channel_)
        return ENODEV;
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(channel_, &id, context_of(listener_id | kListenerBit), RDMA_PS_TCP) != 0)
        return errno ? errno : ENOMEM;
    sockaddr_storage addr{};
    copy_address(addr, local);
    set_port(addr, port);
    if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&addr)) != 0 || rdma_listen(id, 128) != 0) {
        const int err = errno ? errno : EADDRINUSE;
        rdma_destroy_id(id);
        return err;
    }
    port = ntohs(rdma_get_src_port(id));
    std::lock_guard lock(mutex_);
    listeners_[listener_id] = id;
    return 0;
}

void RdmaCm::unlisten(std::uint64_t listener_id)
{
    rdma_cm_id* id = nullptr;
    {
        std::lock_guard lock(mutex_);
        auto it = listeners_.find(listener_id);
        if (it == listeners_.end())
            return;
        id = it->second;
        listeners_.erase(it);
    }
    rdma_destroy_id(id); // requests not yet answered keep their own ids
}

std::uint64_t RdmaCm::connect(const sockaddr* local, const sockaddr* remote, ibv_qp* qp,
                              std::vector<std::uint8_t> private_data, std::chrono::milliseconds timeout,
                              ReadDepth depth)
{
    if (!channel_)
        return 0;
    const std::uint64_t n = next_id_++;
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(channel_, &id, context_of(n), RDMA_PS_TCP) != 0)
        return 0;
    std::lock_guard lock(mutex_); // the thread must not see its events before it is recorded
    Conn& c = conns_[n];
    c.id = id;
    c.qp = qp;
    c.private_data = std::move(private_data);
    c.depth = depth;
    c.deadline = std::chrono::steady_clock::now() + timeout;
    c.timeout_ms = std::clamp(static_cast<int>(timeout.count()), 100, 10000);
    c.state = State::resolving_addr;
    if (rdma_resolve_addr(id, const_cast<sockaddr*>(local), const_cast<sockaddr*>(remote), c.timeout_ms) != 0) {
        // Reported like any other failure, from the thread.
        c.deadline = std::chrono::steady_clock::now();
        c.state = State::ended;
    }
    wake();
    return n;
}

bool RdmaCm::accept(std::uint64_t request_id, ibv_qp* qp, std::vector<std::uint8_t> private_data,
                    std::chrono::milliseconds timeout, ReadDepth depth)
{
    std::lock_guard lock(mutex_);
    auto it = conns_.find(request_id);
    if (it == conns_.end() || it->second.state != State::wait_consumer)
        return false;
    Conn& c = it->second;
    c.qp = qp;
    c.id->qp = qp; // rdma_cm moves it to RTR and RTS
    rdma_conn_param param{};
    param.private_data = private_data.empty() ? nullptr : private_data.data();
    param.private_data_len = static_cast<std::uint8_t>(std::min<std::size_t>(private_data.size(), 255));
    param.responder_resources = depth.responder_resources;
    param.initiator_depth = depth.initiator_depth;
    param.rnr_retry_count = 7; // an SRQ or receive queue that runs dry is waited for, not fatal
    if (rdma_accept(c.id, &param) != 0) {
        const int err = errno;
        c.id->qp = nullptr;
        errno = err;
        return false;
    }
    c.state = State::accepting;
    c.deadline = std::chrono::steady_clock::now() + timeout;
    wake();
    return true;
}

bool RdmaCm::reject(std::uint64_t request_id, std::vector<std::uint8_t> private_data)
{
    std::lock_guard lock(mutex_);
    auto it = conns_.find(request_id);
    if (it == conns_.end() || it->second.state != State::wait_consumer)
        return false;
    rdma_reject(it->second.id, private_data.empty() ? nullptr : private_data.data(),
                static_cast<std::uint8_t>(std::min<std::size_t>(private_data.size(), 255)));
    destroy_locked(it->second);
    conns_.erase(it);
    return true;
}

bool RdmaCm::refuse(std::uint64_t request_id)
{
    return reject(request_id, std::vector<std::uint8_t>(std::begin(kNonPeerRejectMarker), std::end(kNonPeerRejectMarker)));
}

void RdmaCm::disconnect(std::uint64_t id)
{
    std::lock_guard lock(mutex_);
    auto it = conns_.find(id);
    if (it == conns_.end())
        return;
    Conn& c = it->second;
    if (c.state == State::disconnecting || c.state == State::ended)
        return; // asked already
    if (c.state == State::established) {
        rdma_disconnect(c.id); // DREQ to the peer; the queue pair goes to error
        move_to_error(c.qp);   // whatever the transport does there, ours flushes
        c.state = State::disconnecting; // DISCONNECTED follows (DREP, or its timeout)
        return;
    }
    move_to_error(c.qp);
    destroy_locked(c);
    conns_.erase(it);
}

void RdmaCm::release(std::uint64_t id)
{
    std::lock_guard lock(mutex_);
    auto it = conns_.find(id);
    if (it == conns_.end())
        return;
    destroy_locked(it->second);
    conns_.erase(it);
}

void RdmaCm::destroy_locked(Conn& c)
{
    if (!c.id)
        return;
    c.id->qp = nullptr; // the queue pair is the endpoint's, not the id's
    rdma_destroy_id(c.id);
    c.id = nullptr;
}

void RdmaCm::fail(std::uint64_t id, Conn& c, Outcome o, Message m, Pending& out)
{
    move_to_error(c.qp); // receives posted meanwhile flush
    destroy_locked(c);
    conns_.erase(id);
    out.results.emplace_back(id, o, std::move(m));
}

void RdmaCm::handle(const EventCopy& e, Pending& out)
{
    if (e.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
        const std::uint64_t listener = e.listener & ~kListenerBit;
        if (!(e.listener & kListenerBit) || !listeners_.count(listener)) {
            rdma_reject(e.id, kNonPeerRejectMarker, sizeof kNonPeerRejectMarker);
            rdma_destroy_id(e.id);
            return;
        }
        const std::uint64_t n = next_id_++;
        e.id->context = context_of(n);
        Conn& c = conns_[n];
        c.id = e.id;
        c.state = State::wait_consumer;
        c.deadline = std::chrono::steady_clock::time_point::max();
        Request r;
        r.id = n;
        r.listener = listener;
        const sockaddr* peer = rdma_get_peer_addr(e.id);
        copy_address(r.remote, peer);
        r.conn_qual = ntohs(rdma_get_src_port(e.id));
        r.private_data = e.private_data;
        out.requests.push_back(std::move(r));
        return;
    }
    if (e.context & kListenerBit)
        return; // a listener's own events (device removal): nothing to tell
    auto it = conns_.find(e.context);
    if (it == conns_.end())
        return; // released meanwhile
    Conn& c = it->second;
    Message m;
    m.private_data = e.private_data;
    switch (e.type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
        if (rdma_resolve_route(c.id, c.timeout_ms) != 0)
            fail(e.context, c, Outcome::unreachable, {}, out);
        else
            c.state = State::resolving_route;
        break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        c.id->qp = c.qp; // rdma_cm moves it to RTR and RTS when the reply comes
        rdma_conn_param param{};
        param.private_data = c.private_data.empty() ? nullptr : c.private_data.data();
        param.private_data_len = static_cast<std::uint8_t>(std::min<std::size_t>(c.private_data.size(), 255));
        param.responder_resources = c.depth.responder_resources;
        param.initiator_depth = c.depth.initiator_depth;
        param.retry_count = 7;
        param.rnr_retry_count = 7;
        if (rdma_connect(c.id, &param) != 0)
            fail(e.context, c, Outcome::failed, {}, out);
        else
            c.state = State::connecting;
        break;
    }
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
        fail(e.context, c, Outcome::unreachable, {}, out);
        break;
    case RDMA_CM_EVENT_UNREACHABLE:
        fail(e.context, c, e.status == -ETIMEDOUT ? Outcome::timed_out : Outcome::unreachable, {}, out);
        break;
    case RDMA_CM_EVENT_REJECTED:
        if (c.state == State::accepting) // the active side gave up on our reply
            fail(e.context, c, Outcome::failed, {}, out);
        else if (e.status == kRejectConsumer && !is_non_peer_reject(m.private_data))
            fail(e.context, c, Outcome::rejected, std::move(m), out);
        else // no listener (IB: invalid service id), or the transport refused
            fail(e.context, c, Outcome::no_listener, {}, out);
        break;
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_CONNECT_RESPONSE: // only without a queue pair, which never happens here
        fail(e.context, c, Outcome::failed, {}, out);
        break;
    case RDMA_CM_EVENT_ESTABLISHED:
        c.state = State::established;
        c.deadline = std::chrono::steady_clock::time_point::max();
        out.results.emplace_back(e.context, Outcome::established, std::move(m));
        break;
    case RDMA_CM_EVENT_DISCONNECTED:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
        if (c.state == State::established || c.state == State::disconnecting) {
            if (c.state == State::established) {
                rdma_disconnect(c.id); // answers the peer's DREQ; the queue pair goes to error
                move_to_error(c.qp);
            }
            c.state = State::ended;
            out.ended.emplace_back(e.context, e.type == RDMA_CM_EVENT_DISCONNECTED);
        } else if (c.state != State::ended) {
            fail(e.context, c, Outcome::failed, {}, out);
        }
        break;
    default: // TIMEWAIT_EXIT, ADDR_CHANGE, multicast: nothing to do
        break;
    }
}

void RdmaCm::run()
{
    while (!stop_) {
        int wait_ms = 1000;
        {
            std::lock_guard lock(mutex_);
            for (auto& [id, c] : conns_)
                if (c.deadline != std::chrono::steady_clock::time_point::max())
                    wait_ms = std::min(wait_ms, remaining_ms(c.deadline));
        }
        pollfd fds[2] = {{channel_->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
        ::poll(fds, 2, wait_ms);
        if (fds[1].revents) {
            std::uint64_t v;
            [[maybe_unused]] ssize_t n = ::read(wake_fd_, &v, sizeof v);
        }
        Pending out;
        std::vector<EventCopy> events;
        rdma_cm_event* ev = nullptr;
        while (rdma_get_cm_event(channel_, &ev) == 0) {
            EventCopy e{ev->event, ev->status, reinterpret_cast<std::uintptr_t>(ev->id->context), ev->id, 0, {}};
            if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
                e.listener = reinterpret_cast<std::uintptr_t>(ev->listen_id->context);
            const auto& conn = ev->param.conn;
            if (conn.private_data && conn.private_data_len) {
                const auto* p = static_cast<const std::uint8_t*>(conn.private_data);
                e.private_data.assign(p, p + conn.private_data_len);
            }
            rdma_ack_cm_event(ev);
            if (debug_)
                std::fprintf(stderr, "fastdapl: rdma_cm %s (status %d) on id %llu\n", rdma_event_str(e.type), e.status,
                             static_cast<unsigned long long>(e.context));
            events.push_back(std::move(e));
        }
        {
            std::lock_guard lock(mutex_);
            for (const EventCopy& e : events)
                handle(e, out);
            const auto now = std::chrono::steady_clock::now();
            for (auto it = conns_.begin(); it != conns_.end();) {
                Conn& c = it->second;
                const std::uint64_t id = (it++)->first;
                if (c.deadline > now)
                    continue;
                fail(id, c, c.state == State::ended ? Outcome::unreachable : Outcome::timed_out, {}, out);
            }
        }
        for (const Request& r : out.requests)
            callbacks_.on_request(r);
        for (const auto& [id, o, m] : out.results)
            callbacks_.on_result(id, o, m);
        for (const auto& [id, orderly] : out.ended)
            callbacks_.on_disconnected(id, orderly);
    }
}

} // namespace fastdapl::cm
