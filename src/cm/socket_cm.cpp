// The socket connection manager.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "socket_cm.hpp"

#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <ifaddrs.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>
#include <tuple>

namespace fastdapl::cm {

namespace {

// How long a passive connection may take to send its request.
constexpr std::chrono::milliseconds kRequestTimeout{5000};
// A connection refused for lack of a listener is tried again for this long
// (within the attempt's own timeout) before it is reported: consumers
// written for IB CMs, which retransmit requests, create their service point
// just after telling the peer where it will be (Debian's dtest does), and
// that message can itself be late: dapltest -T T's command crossing a link
// that loses 10% of its packets arrived after the client's 500 ms grace
// (TCP retransmits at 200 ms and up), and dapltest does not retry
// NON_PEER_REJECTED.
constexpr std::chrono::milliseconds kRefusedGrace{3000};
constexpr std::chrono::milliseconds kRefusedRetry{10};

// Nobody took the connection: refused, or reset by a listener closing as
// it arrived.
bool refused(int err) { return err == ECONNREFUSED || err == ECONNRESET; }

void set_nodelay(int fd)
{
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// The local flavour's name for a port: abstract (no file to clean up), per
// user, so that two users' IAs on one host do not meet.
socklen_t local_name(std::uint16_t port, sockaddr_un& out)
{
    std::memset(&out, 0, sizeof out);
    out.sun_family = AF_UNIX;
    const int n = std::snprintf(out.sun_path + 1, sizeof out.sun_path - 1, "fastdapl-shm/%u/%u",
                                static_cast<unsigned>(getuid()), static_cast<unsigned>(port));
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + static_cast<std::size_t>(n));
}

// Whether `a` is one of this host's IPv4 addresses (loopback included).
bool is_this_host(const sockaddr_in& a)
{
    if ((ntohl(a.sin_addr.s_addr) >> 24) == 127)
        return true;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0)
        return false;
    bool found = false;
    for (ifaddrs* i = list; i && !found; i = i->ifa_next)
        found = i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
                reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == a.sin_addr.s_addr;
    freeifaddrs(list);
    return found;
}

// A non-blocking TCP connection to `to` under way: its socket, or -1 and errno.
int start_tcp_connect(const sockaddr_in& to)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    set_nodelay(fd);
    // The TIME_WAIT this connection leaves behind must not refuse a later
    // listener on its port: a qualifier can map into the ephemeral range
    // (0xaffab1e is port 43806), and Linux lets a listener bind over
    // TIME_WAIT only when both sockets said SO_REUSEADDR.
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS) {
        const int err = errno;
        ::close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

} // namespace

SocketCm::SocketCm(Callbacks callbacks, bool local) : callbacks_(std::move(callbacks)), local_(local)
{
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    thread_ = std::thread([this] { run(); });
}

SocketCm::~SocketCm()
{
    stop_.store(true);
    wake();
    thread_.join();
    for (auto& [number, p] : ports_)
        ::close(p.fd);
    for (auto& [id, c] : conns_) {
        if (c.fd >= 0)
            ::close(c.fd);
        if (c.lane_fd >= 0)
            ::close(c.lane_fd);
    }
    ::close(wake_fd_);
}

void SocketCm::wake()
{
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

bool SocketCm::confirm_lane(int fd)
{
    Message ok;
    ok.type = MessageType::lane_ok;
    return send_message(fd, ok);
}

bool SocketCm::send_message(int fd, const Message& m)
{
    std::vector<std::uint8_t> bytes;
    if (!encode(m, bytes))
        return false;
    // Messages are a few hundred bytes: a fresh socket's buffer takes them whole.
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    return n == static_cast<ssize_t>(bytes.size());
}

int SocketCm::listen(const sockaddr_in& addr, std::uint64_t& qual, std::uint64_t listener_id)
{
    std::uint16_t port = port_of_qualifier(qual);
    std::lock_guard lock(mutex_); // held through bind: two qualifiers of one port share its socket
    if (qual != 0) {
        if (auto p = ports_.find(port); p != ports_.end()) {
            if (!p->second.listeners.emplace(qual, listener_id).second)
                return EADDRINUSE;
            listeners_[listener_id] = {port, qual};
            return 0;
        }
    }
    const int fd = open_listener(addr, port);
    if (fd < 0)
        return errno;
    if (qual == 0)
        qual = port;
    ports_[port] = Port{fd, addr, {{qual, listener_id}}};
    listeners_[listener_id] = {port, qual};
    wake();
    return 0;
}

int SocketCm::open_listener(const sockaddr_in& addr, std::uint16_t& port)
{
    const int fd = ::socket(local_ ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (local_) {
        // Any free port: the kernel has no ephemeral range for abstract
        // names, so try from a random point of the usual one.
        const bool any = port == 0;
        std::uint16_t p = port;
        if (any)
            p = static_cast<std::uint16_t>(49152 + std::random_device{}() % 16384);
        for (int tries = 0; tries < (any ? 16384 : 1); ++tries) {
            sockaddr_un name;
            const socklen_t len = local_name(p, name);
            if (::bind(fd, reinterpret_cast<const sockaddr*>(&name), len) == 0) {
                if (::listen(fd, 128) != 0)
                    break;
                port = p;
                return fd;
            }
            if (errno != EADDRINUSE)
                break;
            p = static_cast<std::uint16_t>(p == 65535 ? 49152 : p + 1);
        }
        const int err = errno;
        ::close(fd);
        errno = err;
        return -1;
    }
    // Reuse a port whose earlier connections linger in TIME_WAIT; a port
    // another socket listens on is still refused (EADDRINUSE).
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a = addr;
    a.sin_port = htons(port);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 128) != 0) {
        const int err = errno;
        ::close(fd);
        errno = err;
        return -1;
    }
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    return fd;
}

void SocketCm::unlisten(std::uint64_t listener_id)
{
    std::lock_guard lock(mutex_);
    auto it = listeners_.find(listener_id);
    if (it == listeners_.end())
        return;
    if (auto p = ports_.find(it->second.port); p != ports_.end()) {
        p->second.listeners.erase(it->second.qual);
        if (p->second.listeners.empty()) {
            ::close(p->second.fd);
            ports_.erase(p);
        }
    }
    listeners_.erase(it);
    // Requests that came for it and were not answered are refused (one
    // still on its way finds no qualifier and is refused then).
    for (auto c = conns_.begin(); c != conns_.end();) {
        if (c->second.listener == listener_id && c->second.state == State::wait_consumer) {
            Message rej;
            rej.type = MessageType::reject;
            rej.reason = static_cast<std::uint32_t>(RejectReason::no_listener);
            send_message(c->second.fd, rej);
            ::close(c->second.fd);
            c = conns_.erase(c);
        } else {
            ++c;
        }
    }
    wake();
}

std::uint64_t SocketCm::connect(const sockaddr_in& remote, std::uint64_t qual, std::uint32_t qpn,
                                std::vector<std::uint8_t> private_data, std::chrono::milliseconds timeout,
                                std::uint16_t datagram_port)
{
    const std::uint64_t id = next_id_.fetch_add(1);
    Conn c;
    c.state = State::connecting;
    c.qpn = qpn;
    c.datagram_port = datagram_port;
    c.request_pdata = std::move(private_data);
    c.deadline = std::chrono::steady_clock::now() + timeout;
    c.remote = remote;
    c.remote.sin_port = htons(port_of_qualifier(qual));
    c.conn_qual = qual;
    c.refused_until = std::min(c.deadline, std::chrono::steady_clock::now() + kRefusedGrace);
    if (local_ && !is_this_host(c.remote)) { // only this host's processes share memory
        c.error = EHOSTUNREACH;
        c.fd = -1;
    } else {
        start_connect(c); // refused or unreachable right away: handled on the CM thread
    }
    {
        std::lock_guard lock(mutex_);
        conns_[id] = std::move(c);
    }
    wake();
    return id;
}

void SocketCm::start_connect(Conn& c)
{
    c.error = 0;
    if (local_) {
        c.fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (c.fd < 0) {
            c.error = errno;
            return;
        }
        sockaddr_un name;
        const socklen_t len = local_name(ntohs(c.remote.sin_port), name);
        if (::connect(c.fd, reinterpret_cast<const sockaddr*>(&name), len) != 0) {
            // No such name, or its backlog full: refused, tried again shortly.
            c.error = errno == ENOENT || errno == EAGAIN ? ECONNREFUSED : errno;
            ::close(c.fd);
            c.fd = -1;
            c.retry_at = std::chrono::steady_clock::now() + kRefusedRetry;
        }
        return;
    }
    c.fd = start_tcp_connect(c.remote);
    if (c.fd < 0) {
        c.error = errno;
        c.retry_at = std::chrono::steady_clock::now() + kRefusedRetry;
    }
}

void SocketCm::cancel(std::uint64_t id)
{
    std::lock_guard lock(mutex_);
    auto it = conns_.find(id);
    if (it == conns_.end())
        return;
    if (it->second.fd >= 0)
        ::close(it->second.fd);
    conns_.erase(it);
}

bool SocketCm::accept(std::uint64_t request_id, std::uint32_t qpn, std::vector<std::uint8_t> private_data,
                      std::chrono::milliseconds timeout, std::uint16_t datagram_port)
{
    std::lock_guard lock(mutex_);
    auto it = conns_.find(request_id);
    if (it == conns_.end() || it->second.state != State::wait_consumer)
        return false;
    Message rep;
    rep.type = MessageType::reply;
    rep.qpn = qpn;
    rep.datagram = datagram_port != 0;
    rep.datagram_port = datagram_port;
    rep.private_data = std::move(private_data);
    // A lane for this connection may be opened under a token nobody else
    // can guess (another host's process could try to take it).
    std::uint64_t token = 0;
    const std::uint16_t lane_port = lanes() && datagram_port == 0 ? lane_listener(it->second.fd) : 0;
    if (lane_port && getrandom(&token, sizeof token, 0) == sizeof token && token != 0) {
        rep.lane_token = token;
        rep.lane_port = lane_port;
        lane_offers_[token] = {request_id, it->second.remote.sin_addr.s_addr};
    }
    if (!send_message(it->second.fd, rep)) {
        // The peer is gone: the outcome is a failure, reported by the thread.
        it->second.deadline = std::chrono::steady_clock::now();
    }
    it->second.state = State::wait_ready;
    it->second.deadline = std::chrono::steady_clock::now() + timeout;
    wake();
    return true;
}

bool SocketCm::reject(std::uint64_t request_id, std::vector<std::uint8_t> private_data, RejectReason reason)
{
    std::lock_guard lock(mutex_);
    auto it = conns_.find(request_id);
    if (it == conns_.end() || it->second.state != State::wait_consumer)
        return false;
    Message rej;
    rej.type = MessageType::reject;
    rej.reason = static_cast<std::uint32_t>(reason);
    rej.private_data = std::move(private_data);
    send_message(it->second.fd, rej); // delivery is not guaranteed (spec)
    ::shutdown(it->second.fd, SHUT_WR);
    ::close(it->second.fd);
    conns_.erase(it);
    return true;
}

void SocketCm::finish(std::uint64_t id, Conn& c, Outcome o, const Message& m, Pending& out,
                      std::vector<std::uint64_t>& done, bool hand_over)
{
    int fd = -1;
    if (hand_over) {
        fd = c.fd;
        int flags = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    } else if (c.fd >= 0) {
        ::close(c.fd);
    }
    c.fd = -1;
    out.results.emplace_back(id, o, fd, m);
    done.push_back(id);
    if (!hand_over) // passive: a connection that failed takes no lane
        std::erase_if(lane_offers_, [&](const auto& o) { return o.second.id == id; });
    if (c.lane_fd >= 0) { // passive: a lane that came before the peer's ready goes after the result
        if (hand_over)
            out.lanes.emplace_back(id, c.lane_fd, true);
        else
            ::close(c.lane_fd);
        c.lane_fd = -1;
    }
}

std::uint16_t SocketCm::lane_listener(int fd)
{
    if (lane_port_ != 0 && ports_.count(lane_port_))
        return lane_port_;
    // Where the peer reached us (the IA's address), on a port of its own.
    sockaddr_in at{};
    socklen_t len = sizeof at;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len) != 0 || at.sin_family != AF_INET)
        return 0;
    std::uint16_t port = 0;
    const int listener = open_listener(at, port);
    if (listener < 0)
        return 0;
    ports_[port] = Port{listener, at, {}}; // no qualifiers: requests on it are refused
    lane_port_ = port;
    wake(); // polled from the CM thread's next round
    return port;
}

void SocketCm::open_lane(std::uint64_t id, const sockaddr_in& remote, std::uint64_t token)
{
    Conn l;
    l.state = State::lane_connecting;
    l.remote = remote;
    l.lane_token = token;
    l.lane_for = id;
    l.deadline = std::chrono::steady_clock::now() + kRequestTimeout;
    l.fd = start_tcp_connect(remote);
    if (l.fd < 0)
        return; // no lane: the connection works without one
    conns_[next_id_.fetch_add(1)] = std::move(l);
}

void SocketCm::want_lane(std::uint64_t id)
{
    std::lock_guard lock(mutex_);
    const auto later = lanes_later_.find(id);
    if (later == lanes_later_.end())
        return;
    const LaneLater lane = later->second;
    lanes_later_.erase(later);
    open_lane(id, lane.at, lane.token);
    wake(); // the CM's thread watches the new connection from its next round
}

void SocketCm::drop_lane(std::uint64_t id)
{
    std::lock_guard lock(mutex_);
    lanes_later_.erase(id);
    std::erase_if(lane_offers_, [&](const auto& o) { return o.second.id == id; });
}

void SocketCm::lane_arrived(Conn& lane, std::uint64_t token, Pending& out)
{
    const int fd = lane.fd;
    lane.fd = -1;
    auto offer = lane_offers_.find(token);
    // Only the host the connection came from may open its lane.
    if (offer == lane_offers_.end() || offer->second.from != lane.remote.sin_addr.s_addr) {
        ::close(fd);
        return;
    }
    const std::uint64_t id = offer->second.id;
    lane_offers_.erase(offer);
    if (auto main = conns_.find(id); main != conns_.end()) {
        if (main->second.state != State::wait_ready || main->second.lane_fd >= 0) {
            ::close(fd);
            return;
        }
        main->second.lane_fd = fd; // the peer's ready is still on its way: handed over after it
        return;
    }
    out.lanes.emplace_back(id, fd, true); // the connection's outcome was reported already
}

void SocketCm::handle_readable(std::uint64_t id, Conn& c, Pending& out, std::vector<std::uint64_t>& done)
{
    // Read no further than the end of the current message: once the
    // handshake is over, the bytes after it belong to the queue pair that
    // takes over the socket.
    std::uint8_t buf[kHeaderSize + 16 + kMaxPrivateData];
    bool closed = false;
    for (;;) {
        std::size_t want = 0;
        if (c.in.size() < kHeaderSize) {
            want = kHeaderSize - c.in.size();
        } else {
            std::uint32_t body;
            std::memcpy(&body, c.in.data() + 8, 4);
            body = be32toh(body);
            const std::size_t total = kHeaderSize + std::min<std::size_t>(body, sizeof buf - kHeaderSize);
            want = total > c.in.size() ? total - c.in.size() : 0;
        }
        if (want == 0)
            break; // a whole message (or an oversized length the decoder refuses)
        const ssize_t n = ::recv(c.fd, buf, want, MSG_DONTWAIT);
        if (n > 0) {
            c.in.insert(c.in.end(), buf, buf + n);
            continue;
        }
        closed = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
        break;
    }
    // A message that arrived before the close (a reject, say) counts first.
    auto handle_close = [&] {
        if (c.state == State::wait_request || c.state == State::lane_wait_ok) {
            ::close(c.fd);
            c.fd = -1;
            done.push_back(id); // nobody was told about it yet
        } else if (c.state == State::wait_consumer) {
            return; // the consumer still answers the request, and learns then
        } else {
            finish(id, c, c.state == State::wait_reply ? Outcome::no_listener : Outcome::failed, {}, out, done, false);
        }
    };
    if (c.in.empty()) {
        if (closed)
            handle_close();
        return;
    }
    Message m;
    std::size_t used = 0;
    const DecodeResult r = decode(c.in.data(), c.in.size(), m, used);
    if (r == DecodeResult::incomplete) {
        if (closed)
            handle_close();
        return;
    }
    if (r == DecodeResult::malformed) {
        if (c.state == State::wait_request || c.state == State::lane_wait_ok) { // drop that connection, nothing else
            ::close(c.fd);
            c.fd = -1;
            done.push_back(id);
        } else {
            finish(id, c, Outcome::failed, {}, out, done, false);
        }
        return;
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(used));
    switch (c.state) {
    case State::wait_request: {
        if (m.type == MessageType::lane) { // a second stream for a connection accepted here
            lane_arrived(c, m.lane_token, out);
            done.push_back(id);
            return;
        }
        std::uint64_t listener = 0;
        if (auto p = ports_.find(c.port); m.type == MessageType::request && p != ports_.end())
            if (auto l = p->second.listeners.find(m.conn_qual); l != p->second.listeners.end())
                listener = l->second;
        if (listener == 0) {
            Message rej;
            rej.type = MessageType::reject;
            rej.reason = static_cast<std::uint32_t>(RejectReason::no_listener);
            send_message(c.fd, rej);
            ::close(c.fd);
            c.fd = -1;
            done.push_back(id);
            return;
        }
        c.state = State::wait_consumer;
        c.listener = listener;
        c.conn_qual = m.conn_qual;
        Request req;
        req.id = id;
        req.listener = c.listener;
        copy_address(req.remote, reinterpret_cast<const sockaddr*>(&c.remote));
        req.conn_qual = m.conn_qual;
        req.remote_qpn = m.qpn;
        req.datagram = m.datagram;
        req.datagram_port = m.datagram_port;
        req.private_data = std::move(m.private_data);
        out.requests.push_back(std::move(req));
        return;
    }
    case State::wait_reply:
        if (m.type == MessageType::reply && m.datagram != (c.datagram_port != 0)) {
            finish(id, c, Outcome::failed, {}, out, done, false); // a UD endpoint answered by an RC one, or back
        } else if (m.type == MessageType::reply) {
            Message ready;
            ready.type = MessageType::ready;
            if (!send_message(c.fd, ready)) {
                finish(id, c, Outcome::failed, {}, out, done, false);
                return;
            }
            const sockaddr_in remote = c.remote;
            finish(id, c, Outcome::established, m, out, done, true);
            if (lanes() && m.lane_token != 0) { // opened when a large write wants it (want_lane)
                sockaddr_in lane_at = remote;
                lane_at.sin_port = htons(m.lane_port);
                lanes_later_[id] = {lane_at, m.lane_token};
            }
        } else if (m.type == MessageType::reject) {
            const bool consumer = m.reason == static_cast<std::uint32_t>(RejectReason::consumer);
            finish(id, c, consumer ? Outcome::rejected : Outcome::no_listener, m, out, done, false);
        } else {
            finish(id, c, Outcome::failed, {}, out, done, false);
        }
        return;
    case State::wait_ready:
        finish(id, c, m.type == MessageType::ready ? Outcome::established : Outcome::failed, m, out, done,
               m.type == MessageType::ready);
        return;
    case State::lane_wait_ok: // the peer's queue pair took the lane, or it is closed
        if (m.type == MessageType::lane_ok) {
            out.lanes.emplace_back(c.lane_for, c.fd, false);
            c.fd = -1;
        } else {
            ::close(c.fd);
            c.fd = -1;
        }
        done.push_back(id);
        return;
    default: // unexpected data while connecting or waiting for the consumer
        return;
    }
}

void SocketCm::run()
{
    std::vector<pollfd> fds;
    std::vector<std::pair<bool, std::uint64_t>> owners; // (is a listening port, port number or connection id)
    while (!stop_.load()) {
        fds.clear();
        owners.clear();
        fds.push_back({wake_fd_, POLLIN, 0});
        owners.emplace_back(false, 0);
        int timeout_ms = 1000;
        {
            std::lock_guard lock(mutex_);
            const auto now = std::chrono::steady_clock::now();
            for (auto& [number, p] : ports_) {
                fds.push_back({p.fd, POLLIN, 0});
                owners.emplace_back(true, number);
            }
            for (auto& [id, c] : conns_) {
                if (c.fd >= 0 && c.state != State::wait_consumer) {
                    const bool connecting = c.state == State::connecting || c.state == State::lane_connecting;
                    fds.push_back({c.fd, static_cast<short>(connecting ? POLLOUT : POLLIN), 0});
                    owners.emplace_back(false, id);
                }
                if (c.state != State::wait_consumer) {
                    const auto until = c.fd < 0 && c.state == State::connecting ? std::min(c.deadline, c.retry_at)
                                                                                : c.deadline;
                    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
                    timeout_ms = static_cast<int>(std::max<long long>(0, std::min<long long>(timeout_ms, left)));
                }
            }
        }
        ::poll(fds.data(), fds.size(), timeout_ms);
        if (fds[0].revents & POLLIN) {
            std::uint64_t drained;
            [[maybe_unused]] ssize_t n = ::read(wake_fd_, &drained, sizeof drained);
        }
        Pending out;
        {
            std::lock_guard lock(mutex_);
            std::vector<std::uint64_t> done;
            for (std::size_t i = 1; i < fds.size(); ++i) {
                if (!fds[i].revents)
                    continue;
                const auto [is_listener, id] = owners[i];
                if (is_listener) {
                    if (auto p = ports_.find(static_cast<std::uint16_t>(id)); p == ports_.end() || p->second.fd != fds[i].fd)
                        continue;
                    for (;;) {
                        sockaddr_in peer{};
                        socklen_t len = sizeof peer;
                        const int fd = ::accept4(fds[i].fd, reinterpret_cast<sockaddr*>(&peer), &len,
                                                 SOCK_NONBLOCK | SOCK_CLOEXEC);
                        if (fd < 0)
                            break;
                        set_nodelay(fd);
                        Conn c;
                        c.fd = fd;
                        c.state = State::wait_request;
                        c.port = static_cast<std::uint16_t>(id);
                        // A Unix socket's peer has no IPv4 address: it is on this host.
                        c.remote = local_ ? ports_[static_cast<std::uint16_t>(id)].address : peer;
                        c.deadline = std::chrono::steady_clock::now() + kRequestTimeout;
                        conns_[next_id_.fetch_add(1)] = std::move(c);
                    }
                    continue;
                }
                auto it = conns_.find(id);
                if (it == conns_.end() || it->second.fd != fds[i].fd)
                    continue;
                Conn& c = it->second;
                if (c.state == State::lane_connecting) {
                    int err = 0;
                    socklen_t len = sizeof err;
                    getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
                    Message lane;
                    lane.type = MessageType::lane;
                    lane.lane_token = c.lane_token;
                    if (err == 0 && send_message(c.fd, lane)) {
                        c.state = State::lane_wait_ok;
                    } else { // no lane: the connection works without one
                        ::close(c.fd);
                        c.fd = -1;
                        done.push_back(id);
                    }
                    continue;
                }
                if (c.state == State::connecting) {
                    int err = 0;
                    socklen_t len = sizeof err;
                    getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
                    if (err == 0) {
                        Message req;
                        req.type = MessageType::request;
                        req.conn_qual = c.conn_qual;
                        req.qpn = c.qpn;
                        req.datagram = c.datagram_port != 0;
                        req.datagram_port = c.datagram_port;
                        req.private_data = c.request_pdata;
                        if (send_message(c.fd, req))
                            c.state = State::wait_reply;
                        else
                            finish(id, c, Outcome::failed, {}, out, done, false);
                    } else if (refused(err) && std::chrono::steady_clock::now() < c.refused_until) {
                        ::close(c.fd); // nobody listens yet: again shortly
                        c.fd = -1;
                        c.error = err;
                        c.retry_at = std::chrono::steady_clock::now() + kRefusedRetry;
                    } else {
                        finish(id, c, refused(err) ? Outcome::no_listener : Outcome::unreachable, {}, out, done,
                               false);
                    }
                    continue;
                }
                handle_readable(id, c, out, done);
            }
            // Attempts that failed at once, and deadlines.
            const auto now = std::chrono::steady_clock::now();
            for (auto& [id, c] : conns_) {
                if (std::find(done.begin(), done.end(), id) != done.end())
                    continue;
                if (c.fd < 0 && c.state == State::connecting) {
                    if (refused(c.error) && now < c.refused_until) {
                        if (now >= c.retry_at)
                            start_connect(c);
                    } else {
                        finish(id, c, refused(c.error) ? Outcome::no_listener : Outcome::unreachable, {}, out,
                               done, false);
                    }
                } else if (c.state != State::wait_consumer && now >= c.deadline) {
                    if (c.state == State::wait_request || c.state == State::lane_connecting ||
                        c.state == State::lane_wait_ok) {
                        ::close(c.fd);
                        c.fd = -1;
                        done.push_back(id);
                    } else {
                        finish(id, c, c.state == State::wait_ready ? Outcome::failed : Outcome::timed_out, {}, out,
                               done, false);
                    }
                }
            }
            for (std::uint64_t id : done)
                conns_.erase(id);
        }
        for (const Request& r : out.requests)
            if (callbacks_.on_request)
                callbacks_.on_request(r);
        for (auto& [id, o, fd, m] : out.results)
            if (callbacks_.on_result)
                callbacks_.on_result(id, o, fd, m);
            else if (fd >= 0)
                ::close(fd);
        for (auto& [id, fd, confirm] : out.lanes) {
            // Blocking again, as a handed-over connection is.
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            if (!callbacks_.on_lane || !callbacks_.on_lane(id, fd, confirm))
                ::close(fd);
        }
    }
}

} // namespace fastdapl::cm
