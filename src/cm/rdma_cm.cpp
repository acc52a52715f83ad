// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "rdma_cm.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fastdapl::cm {

namespace {

// An rdma_cm id's context says whose it is: a listener (top bit set, the
// caller's listener id) or a connection (our id).
constexpr std::uint64_t kListenerBit = 1ull << 63;

void* context_of(std::uint64_t v) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(v)); }

// FASTDAPL_DEBUG's lines, with the monotonic clock in milliseconds: the
// disconnect's steps on two hosts are told apart by their times.
[[gnu::format(printf, 1, 2)]] void debug_line(const char* format, ...)
{
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    char text[256];
    va_list args;
    va_start(args, format);
    std::vsnprintf(text, sizeof text, format, args);
    va_end(args);
    std::fprintf(stderr, "fastdapl: [%lld.%03ld] rdma_cm %s\n", static_cast<long long>(now.tv_sec),
                 now.tv_nsec / 1'000'000, text);
}

// IB CM reject reasons that rdma_cm passes up in the event status.
constexpr int kRejectConsumer = 28;    // the peer's consumer said no
constexpr int kSidrReject = 2;         // IB_SIDR_REJECT: the same for a UD request

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

// The header a UD request's private data starts with: the magic, the
// length of the consumer's private data after it (SIDR messages arrive
// padded to their fixed size), and our queue pair's number (SIDR requests
// carry none; 24 bits, big-endian).
constexpr std::uint8_t kDatagramMagic[4] = {'f', 'd', 'U', 'D'};
constexpr std::size_t kDatagramHeader = 8;

// The header of a SIDR reply's private data (an accept or a consumer's
// reject): the magic and the length of what follows.
constexpr std::uint8_t kDatagramReplyMagic[3] = {'f', 'd', 'R'};
constexpr std::size_t kDatagramReplyHeader = 4;

std::vector<std::uint8_t> datagram_reply(const std::vector<std::uint8_t>& private_data)
{
    const std::size_t n = std::min<std::size_t>(private_data.size(), kRdmaCmMaxPrivateData);
    std::vector<std::uint8_t> sent(std::begin(kDatagramReplyMagic), std::end(kDatagramReplyMagic));
    sent.push_back(static_cast<std::uint8_t>(n));
    sent.insert(sent.end(), private_data.begin(), private_data.begin() + static_cast<std::ptrdiff_t>(n));
    return sent;
}

// A SIDR reply's private data as the peer's consumer sent it: false where
// the header is missing or claims more than arrived (or than a consumer may
// send).
bool strip_datagram_reply(std::vector<std::uint8_t>& pdata)
{
    if (pdata.size() < kDatagramReplyHeader ||
        std::memcmp(pdata.data(), kDatagramReplyMagic, sizeof kDatagramReplyMagic) != 0)
        return false;
    const std::size_t n = pdata[sizeof kDatagramReplyMagic];
    if (n > kRdmaCmMaxPrivateData || n > pdata.size() - kDatagramReplyHeader)
        return false;
    pdata.erase(pdata.begin() + static_cast<std::ptrdiff_t>(kDatagramReplyHeader + n), pdata.end());
    pdata.erase(pdata.begin(), pdata.begin() + static_cast<std::ptrdiff_t>(kDatagramReplyHeader));
    return true;
}

// The GID RoCE gives an IP address: IPv4 mapped into IPv6, IPv6 as is.
bool gid_of(const sockaddr* a, ibv_gid& gid)
{
    std::memset(&gid, 0, sizeof gid);
    if (a->sa_family == AF_INET) {
        gid.raw[10] = gid.raw[11] = 0xff;
        std::memcpy(&gid.raw[12], &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, 4);
        return true;
    }
    if (a->sa_family == AF_INET6) {
        std::memcpy(gid.raw, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, 16);
        return true;
    }
    return false;
}

// The route back to a UD requester on a RoCE port: its address's GID from
// ours (RoCE v2 preferred, as rdma_cm resolves). False where the port is
// not Ethernet (IB needs the requester's LID, which a SIDR request lacks)
// or our address has no GID.
bool route_to_requester(rdma_cm_id* id, ibv_ah_attr& ah)
{
    ibv_port_attr port{};
    ibv_gid local{}, remote{};
    if (!id->verbs || ibv_query_port(id->verbs, id->port_num, &port) != 0 ||
        port.link_layer != IBV_LINK_LAYER_ETHERNET || !gid_of(rdma_get_local_addr(id), local) ||
        !gid_of(rdma_get_peer_addr(id), remote))
        return false;
    int found = -1;
    for (int i = 0; i < port.gid_tbl_len; ++i) {
        ibv_gid_entry entry{};
        if (ibv_query_gid_ex(id->verbs, id->port_num, static_cast<std::uint32_t>(i), &entry, 0) != 0 ||
            std::memcmp(entry.gid.raw, local.raw, sizeof local.raw) != 0)
            continue;
        if (found < 0 || entry.gid_type == IBV_GID_TYPE_ROCE_V2)
            found = i;
        if (entry.gid_type == IBV_GID_TYPE_ROCE_V2)
            break;
    }
    if (found < 0)
        return false;
    ah = {};
    ah.is_global = 1;
    ah.port_num = id->port_num;
    ah.grh.dgid = remote;
    ah.grh.sgid_index = static_cast<std::uint8_t>(found);
    ah.grh.hop_limit = 64;
    return true;
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
    bool datagram = false;   // the id is in RDMA_PS_UDP (event param.ud)
    ibv_ah_attr ah_attr{};   // datagram ESTABLISHED: the route to the peer
    std::uint32_t qp_num = 0;
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
    // Disconnect requests still unanswered get a little time to go out and
    // be answered (the thread destroys each id when its answer comes).
    const auto until = std::chrono::steady_clock::now() + kCloseLinger;
    std::size_t unanswered = 0;
    for (bool first = true; thread_.joinable(); first = false) {
        {
            std::lock_guard lock(mutex_);
            unanswered = static_cast<std::size_t>(
                std::count_if(conns_.begin(), conns_.end(), [](const auto& kv) { return kv.second.lingering; }));
        }
        if (debug_ && first && unanswered > 0)
            debug_line("closing: waiting for the answers to %zu disconnect requests", unanswered);
        if (unanswered == 0 || std::chrono::steady_clock::now() >= until)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (debug_ && unanswered > 0)
        debug_line("closing: %zu disconnect requests unanswered, their ids destroyed", unanswered);
    stop_ = true;
    if (thread_.joinable()) {
        wake();
        thread_.join();
    }
    for (auto& [id, c] : conns_)
        destroy_locked(c);
    for (auto& [lid, id] : listeners_)
        rdma_destroy_id(id);
    for (auto& [lid, id] : datagram_listeners_)
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

int RdmaCm::listen(const sockaddr* local, std::uint16_t& port, std::uint64_t listener_id, bool datagrams)
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
    // UD endpoints' requests arrive in the UDP port space: the same port there.
    rdma_cm_id* udp = nullptr;
    set_port(addr, port);
    if (datagrams && (rdma_create_id(channel_, &udp, context_of(listener_id | kListenerBit), RDMA_PS_UDP) != 0 ||
        rdma_bind_addr(udp, reinterpret_cast<sockaddr*>(&addr)) != 0 || rdma_listen(udp, 128) != 0)) {
        const int err = errno ? errno : EADDRINUSE;
        if (udp)
            rdma_destroy_id(udp);
        rdma_destroy_id(id);
        return err;
    }
    std::lock_guard lock(mutex_);
    listeners_[listener_id] = id;
    if (udp)
        datagram_listeners_[listener_id] = udp;
    return 0;
}

void RdmaCm::unlisten(std::uint64_t listener_id)
{
    rdma_cm_id* id = nullptr;
    rdma_cm_id* udp = nullptr;
    {
        std::lock_guard lock(mutex_);
        auto it = listeners_.find(listener_id);
        if (it == listeners_.end())
            return;
        id = it->second;
        listeners_.erase(it);
        if (auto u = datagram_listeners_.find(listener_id); u != datagram_listeners_.end()) {
            udp = u->second;
            datagram_listeners_.erase(u);
        }
    }
    rdma_destroy_id(id); // requests not yet answered keep their own ids
    if (udp)
        rdma_destroy_id(udp);
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
    resolve_locked(c, local, remote, timeout);
    return n;
}

void RdmaCm::resolve_locked(Conn& c, const sockaddr* local, const sockaddr* remote, std::chrono::milliseconds timeout)
{
    c.deadline = std::chrono::steady_clock::now() + timeout;
    c.timeout_ms = std::clamp(static_cast<int>(timeout.count()), 100, 10000);
    c.state = State::resolving_addr;
    if (rdma_resolve_addr(c.id, const_cast<sockaddr*>(local), const_cast<sockaddr*>(remote), c.timeout_ms) != 0) {
        c.deadline = std::chrono::steady_clock::now();
        c.state = State::ended;
    }
    wake();
}

std::uint64_t RdmaCm::connect_datagram(const sockaddr* local, const sockaddr* remote, std::uint32_t qpn,
                                       std::vector<std::uint8_t> private_data, std::chrono::milliseconds timeout)
{
    if (!channel_)
        return 0;
    if (private_data.size() > kRdmaCmMaxPrivateData || qpn == 0 || qpn > 0xffffff)
        return 0;
    const std::uint64_t n = next_id_++;
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(channel_, &id, context_of(n), RDMA_PS_UDP) != 0)
        return 0;
    std::vector<std::uint8_t> sent(kDatagramHeader);
    std::memcpy(sent.data(), kDatagramMagic, sizeof kDatagramMagic);
    sent[4] = static_cast<std::uint8_t>(private_data.size());
    sent[5] = static_cast<std::uint8_t>(qpn >> 16);
    sent[6] = static_cast<std::uint8_t>(qpn >> 8);
    sent[7] = static_cast<std::uint8_t>(qpn);
    sent.insert(sent.end(), private_data.begin(), private_data.end());
    std::lock_guard lock(mutex_);
    Conn& c = conns_[n];
    c.id = id;
    c.datagram = true;
    c.qpn = qpn;
    c.private_data = std::move(sent);
    resolve_locked(c, local, remote, timeout);
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
    if (c.datagram) { // a SIDR reply with our queue pair; the thread reports it done
        const std::vector<std::uint8_t> sent = datagram_reply(private_data);
        rdma_conn_param param{};
        param.private_data = sent.data();
        param.private_data_len = static_cast<std::uint8_t>(sent.size());
        param.qp_num = qp->qp_num;
        if (rdma_accept(c.id, &param) != 0)
            return false;
        c.state = State::datagram_accepted;
        c.deadline = std::chrono::steady_clock::now();
        wake();
        return true;
    }
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
    c.deadline = std::chrono::steady_clock::now() + std::max<std::chrono::milliseconds>(timeout, kAcceptBackstop);
    wake();
    return true;
}

void RdmaCm::first_data_arrived(const ibv_qp* qp)
{
    std::lock_guard lock(mutex_);
    for (auto& [id, c] : conns_)
        if (c.qp == qp && c.state == State::accepting) {
            // The kernel's CM then reports ESTABLISHED as if the RTU came.
            rdma_notify(c.id, IBV_EVENT_COMM_EST);
            return;
        }
}

bool RdmaCm::reject(std::uint64_t request_id, std::vector<std::uint8_t> private_data)
{
    std::lock_guard lock(mutex_);
    auto it = conns_.find(request_id);
    if (it == conns_.end() || it->second.state != State::wait_consumer)
        return false;
    // A consumer's answer to a UD request says how long it is (refuse's
    // marker goes as it is).
    if (it->second.datagram && !is_non_peer_reject(private_data))
        private_data = datagram_reply(private_data);
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
        if (debug_)
            debug_line("disconnect requested on id %llu", static_cast<unsigned long long>(id));
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
    Conn& c = it->second;
    if (c.state == State::disconnecting && c.id) {
        c.lingering = true;
        c.id->qp = nullptr; // the endpoint frees its queue pair now
        c.qp = nullptr;
        c.deadline = std::chrono::steady_clock::now() + kDisconnectLinger;
        if (debug_)
            debug_line("id %llu released; it stays until its disconnect request is answered",
                       static_cast<unsigned long long>(id));
        wake();
        return;
    }
    destroy_locked(c);
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
    out.results.emplace_back(id, o, std::move(m), std::nullopt);
}

// A UD request (listener's lock held): the requester's queue pair from our
// header, the route back to it; the consumer sees the private data after
// the header.
bool RdmaCm::datagram_request(const EventCopy& e, Conn& c, Request& r)
{
    if (e.private_data.size() < kDatagramHeader ||
        std::memcmp(e.private_data.data(), kDatagramMagic, sizeof kDatagramMagic) != 0)
        return false;
    const std::size_t n = e.private_data[4];
    const auto* q = e.private_data.data() + 5;
    c.peer.qpn = static_cast<std::uint32_t>(q[0]) << 16 | static_cast<std::uint32_t>(q[1]) << 8 | q[2];
    // A length beyond what arrived, or than a consumer may send, is refused.
    if (n > kRdmaCmMaxPrivateData || n > e.private_data.size() - kDatagramHeader || c.peer.qpn == 0 ||
        !route_to_requester(e.id, c.peer.ah_attr))
        return false;
    r.datagram = true;
    r.remote_qpn = c.peer.qpn;
    const auto first = e.private_data.begin() + static_cast<std::ptrdiff_t>(kDatagramHeader);
    r.private_data.assign(first, first + static_cast<std::ptrdiff_t>(n));
    return true;
}

void RdmaCm::handle(const EventCopy& e, Pending& out)
{
    if (e.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
        const std::uint64_t listener = e.listener & ~kListenerBit;
        Conn c;
        c.id = e.id;
        c.state = State::wait_consumer;
        c.deadline = std::chrono::steady_clock::time_point::max();
        c.datagram = e.datagram;
        Request r;
        r.private_data = e.private_data;
        // A UD request without our header, or whose route we cannot make, is refused.
        if (!(e.listener & kListenerBit) || !listeners_.count(listener) ||
            (e.datagram && !datagram_request(e, c, r))) {
            rdma_reject(e.id, kNonPeerRejectMarker, sizeof kNonPeerRejectMarker);
            rdma_destroy_id(e.id);
            return;
        }
        const std::uint64_t n = next_id_++;
        e.id->context = context_of(n);
        conns_[n] = c;
        r.id = n;
        r.listener = listener;
        const sockaddr* peer = rdma_get_peer_addr(e.id);
        copy_address(r.remote, peer);
        r.conn_qual = ntohs(rdma_get_src_port(e.id));
        out.requests.push_back(std::move(r));
        return;
    }
    if (e.context & kListenerBit)
        return; // a listener's own events (device removal): nothing to tell
    auto it = conns_.find(e.context);
    if (it == conns_.end())
        return; // released meanwhile
    Conn& c = it->second;
    if (c.lingering) { // released: the answer to its disconnect request came
        if (e.type == RDMA_CM_EVENT_DISCONNECTED || e.type == RDMA_CM_EVENT_TIMEWAIT_EXIT ||
            e.type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
            destroy_locked(c);
            conns_.erase(it);
        }
        return;
    }
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
        if (c.datagram) { // a SIDR request: our queue pair's number travels in the header
            rdma_conn_param param{};
            param.private_data = c.private_data.data();
            param.private_data_len = static_cast<std::uint8_t>(std::min<std::size_t>(c.private_data.size(), 255));
            param.qp_num = c.qpn;
            if (rdma_connect(c.id, &param) != 0)
                fail(e.context, c, Outcome::failed, {}, out);
            else
                c.state = State::connecting;
            break;
        }
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
        // A SIDR reply that says no: its status is the SIDR status (2: the
        // peer's consumer rejected; others: nobody takes the service).
        if (c.datagram && e.status == kSidrReject && !is_non_peer_reject(m.private_data)) {
            // A consumer's reject says how long its private data is; one
            // that does not is no answer we take.
            if (strip_datagram_reply(m.private_data))
                fail(e.context, c, Outcome::rejected, std::move(m), out);
            else
                fail(e.context, c, Outcome::failed, {}, out);
            break;
        }
        if (c.datagram && e.status > 0) {
            fail(e.context, c, Outcome::no_listener, {}, out);
            break;
        }
        fail(e.context, c, e.status == -ETIMEDOUT ? Outcome::timed_out : Outcome::unreachable, {}, out);
        break;
    case RDMA_CM_EVENT_REJECTED:
        // The active side gave up on a request of ours, answered or not
        // yet (dat_cr_accept may have taken it already: its EP then sees
        // ACCEPT_COMPLETION_ERROR, not a reject meant for requesters).
        if (c.state == State::accepting || c.state == State::wait_consumer)
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
        if (c.datagram) { // the SIDR reply: the route to the peer's queue pair; the id is done
            if (!strip_datagram_reply(m.private_data)) { // not our reply's header, or lying about its length
                fail(e.context, c, Outcome::failed, {}, out);
                break;
            }
            DatagramPeer peer;
            peer.ah_attr = e.ah_attr;
            peer.qpn = e.qp_num;
            destroy_locked(c);
            conns_.erase(e.context);
            out.results.emplace_back(e.context, Outcome::established, std::move(m), peer);
            break;
        }
        c.state = State::established;
        c.deadline = std::chrono::steady_clock::time_point::max();
        out.results.emplace_back(e.context, Outcome::established, std::move(m), std::nullopt);
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
            e.datagram = ev->id->ps == RDMA_PS_UDP;
            const void* pdata = e.datagram ? ev->param.ud.private_data : ev->param.conn.private_data;
            const std::uint8_t plen = e.datagram ? ev->param.ud.private_data_len : ev->param.conn.private_data_len;
            if (pdata && plen) {
                const auto* p = static_cast<const std::uint8_t*>(pdata);
                e.private_data.assign(p, p + plen);
            }
            if (e.datagram && ev->event == RDMA_CM_EVENT_ESTABLISHED) {
                e.ah_attr = ev->param.ud.ah_attr;
                e.qp_num = ev->param.ud.qp_num;
            }
            rdma_ack_cm_event(ev);
            if (debug_)
                debug_line("%s (status %d) on id %llu", rdma_event_str(e.type), e.status,
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
                if (c.lingering) { // no answer: the peer will not hear more from us
                    if (debug_)
                        debug_line("id %llu: no answer to its disconnect request; destroyed",
                                   static_cast<unsigned long long>(id));
                    destroy_locked(c);
                    conns_.erase(id);
                    continue;
                }
                if (c.state == State::datagram_accepted) { // the SIDR reply went: the passive side is done
                    const DatagramPeer peer = c.peer;
                    destroy_locked(c);
                    conns_.erase(id);
                    out.results.emplace_back(id, Outcome::established, Message{}, peer);
                    continue;
                }
                fail(id, c, c.state == State::ended ? Outcome::unreachable : Outcome::timed_out, {}, out);
            }
        }
        for (const Request& r : out.requests)
            callbacks_.on_request(r);
        for (const auto& [id, o, m, peer] : out.results)
            callbacks_.on_result(id, o, m, peer ? &*peer : nullptr);
        for (const auto& [id, orderly] : out.ended)
            callbacks_.on_disconnected(id, orderly);
    }
}

} // namespace fastdapl::cm
