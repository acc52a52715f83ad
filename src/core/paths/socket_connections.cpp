// The connection seam on softnic IAs: the socket CM (src/cm/socket_cm) runs
// the request/reply/ready handshake on its own thread and hands the finished
// stream to the queue pair (TCP; on fastdapl-shm a Unix socket, over which
// the queue pair sets up its shared-memory rings).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "../connection.hpp"
#include "../ia.hpp"
#include "../service_point.hpp"
#include "address.hpp"
#include "cm_events.hpp"
#include "socket_cm.hpp"
#include "softnic.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace fastdapl::core {

namespace {

static_assert(cm::kMaxPrivateData <= kMaxConnectionPrivateData);

softnic::Qp* qp_of(Ep& ep)
{
    return static_cast<SoftnicEpQueues*>(ep.queues)->qp;
}

// A UD endpoint's exchange carries its datagram port (0: an RC endpoint's).
std::uint16_t datagram_port_of(Ep& ep)
{
    return ep.ud ? static_cast<SoftnicEpQueues*>(ep.queues)->datagram_port : 0;
}

// TCP_RTO_MAX_MS (Linux 6.15), which the C library's headers may not name yet.
constexpr int kTcpRtoMaxMs = 44;

// How long a connection may go without the peer acknowledging what was
// sent, or answering keepalive probes when idle, before it is broken:
// FASTDAPL_SOFTNIC_TIMEOUT_MS, default 10 s (README). A cut link or a dead
// host then ends the connection on this side within about that long,
// instead of TCP's own quarter of an hour, and only silence does: a lossy
// link that still carries segments keeps its connections.
int link_timeout_ms()
{
    static const int ms = [] {
        const char* v = std::getenv("FASTDAPL_SOFTNIC_TIMEOUT_MS");
        const long n = v ? std::strtol(v, nullptr, 10) : 0;
        return n >= 1000 && n <= 3600000 ? static_cast<int>(n) : 10000;
    }();
    return ms;
}

void watch_link(int fd)
{
    const int ms = link_timeout_ms();
    const unsigned user_timeout = static_cast<unsigned>(ms);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
    // Retransmit at a steady interval while few segments are in flight (a
    // ping-pong message, a stream after a timeout), as RC hardware retries
    // at its ACK timeout: with TCP's doubling only three to five attempts fit
    // in the timeout, and a link that loses one packet in ten then breaks a
    // connection now and then (tests/netns at 5% loss on each hook).
    const int linear = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_THIN_LINEAR_TIMEOUTS, &linear, sizeof linear);
    // With many segments in flight (a large message) that does not apply:
    // cap the interval instead, at a tenth of the timeout (at least 1 s, the
    // least Linux takes), so that about ten retries fit in it. Kernels
    // before 6.15 refuse the option and keep TCP's doubling.
    const int rto_max_ms = std::clamp(ms / 10, 1000, 120000);
    setsockopt(fd, IPPROTO_TCP, kTcpRtoMaxMs, &rto_max_ms, sizeof rto_max_ms);
    // Idle: probes from a third of the timeout on, three of them a ninth apart.
    const int on = 1, idle = std::max(1, ms / 3000), interval = std::max(1, ms / 9000), count = 3;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

// The send buffer asked for a fastdapl-tcp connection whose peer is on this
// host: what a socket holds bounds how far the sender runs ahead of the
// receiver. The kernel's own sizing grows it to megabytes (likely why that
// costs: the pages a large write was copied into have left the cache by
// the time the receiver copies out of them); at 256 KiB (the kernel
// doubles it, and caps it at net.core.wmem_max) 1 MiB busy-polled
// bandwidth over loopback was +16 % and +22 % here (medians of two batches
// of 8 interleaved pairs; 128 KiB, 192 KiB and 512 KiB helped less), both
// sides waiting +60 % (README "Send buffers"). A peer on another host keeps
// the kernel's sizing, which follows the link's bandwidth-delay product.
constexpr long kLocalSendBuffer = 256 * 1024;

// FASTDAPL_TCP_SNDBUF: the send buffer every fastdapl-tcp connection asks
// for, in bytes (4096 to 1 GiB), or 0 for the kernel's sizing on all of
// them; -1 when unset (or not a number in range): the rule above.
long send_buffer_setting()
{
    static const long bytes = [] {
        const char* v = std::getenv("FASTDAPL_TCP_SNDBUF");
        if (!v || !*v)
            return -1L;
        char* end = nullptr;
        const long n = std::strtol(v, &end, 10);
        return *end == '\0' && (n == 0 || (n >= 4096 && n <= (1L << 30))) ? n : -1L;
    }();
    return bytes;
}

// Whether a connected TCP socket's peer is on this host: loopback, or the
// peer's address is the socket's own (a connection to one of this host's
// addresses comes from that address).
bool peer_on_this_host(int fd)
{
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
        return false;
    const bool loopback =
        (peer.ss_family == AF_INET &&
         (ntohl(reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr.s_addr) >> 24) == 127) ||
        (peer.ss_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_addr));
    return loopback || cm::same_host(local, reinterpret_cast<const sockaddr*>(&peer));
}

// A fastdapl-tcp connection's (or lane's) send buffer, as above.
void size_send_buffer(int fd)
{
    const long setting = send_buffer_setting();
    const int bytes = static_cast<int>(setting >= 0 ? setting : peer_on_this_host(fd) ? kLocalSendBuffer : 0);
    if (bytes > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}

// Whether fastdapl-tcp connections open a lane (a second TCP connection
// that large RDMA writes are split over): FASTDAPL_TCP_LANES=0 says no.
bool lanes_wanted()
{
    static const bool wanted = [] {
        const char* v = std::getenv("FASTDAPL_TCP_LANES");
        return !(v && std::strcmp(v, "0") == 0);
    }();
    return wanted;
}

class SocketConnections final : public ConnectionManager {
public:
    SocketConnections(Ia& ia, softnic::Device& device, bool shm)
        : device_(device), shm_(shm),
          cm_(cm::SocketCm::Callbacks{[&ia](const cm::Request& r) { cm_request(&ia, incoming(r)); },
                                      [&ia](std::uint64_t id, cm::Outcome o, int fd, const cm::Message& m) {
                                          cm_result(&ia, id, outcome_of(o), fd, m.private_data, m.qpn,
                                                    m.datagram_port);
                                      },
                                      shm || !lanes_wanted()
                                          ? std::function<bool(std::uint64_t, int, bool)>{}
                                          : [this](std::uint64_t id, int fd, bool confirm) {
                                                return take_lane(id, fd, confirm);
                                            }},
              shm)
    {
        if (!shm && lanes_wanted())
            device_.set_lane_request(&SocketConnections::lane_requested, this);
    }
    ~SocketConnections() override
    {
        if (!shm_ && lanes_wanted())
            device_.set_lane_request(nullptr, nullptr); // no request reaches cm_ once it goes
    }

    DAT_COUNT max_private_data() const override { return static_cast<DAT_COUNT>(cm::kMaxPrivateData); }

    int listen(const sockaddr_storage& local, std::uint64_t& qual, std::uint64_t listener) override
    {
        return cm_.listen(*reinterpret_cast<const sockaddr_in*>(&local), qual, listener);
    }
    void unlisten(std::uint64_t listener) override { cm_.unlisten(listener); }

    std::uint64_t connect(Ep& ep, std::vector<std::uint8_t> pdata, std::chrono::milliseconds timeout) override
    {
        return cm_.connect(*reinterpret_cast<const sockaddr_in*>(&ep.remote), ep.remote_port, qp_of(ep)->qpn(),
                           std::move(pdata), timeout, datagram_port_of(ep));
    }
    bool accept(std::uint64_t id, Ep& ep, std::vector<std::uint8_t> pdata, std::chrono::milliseconds timeout) override
    {
        return cm_.accept(id, qp_of(ep)->qpn(), std::move(pdata), timeout, datagram_port_of(ep));
    }
    void reject(std::uint64_t id, std::vector<std::uint8_t> pdata) override { cm_.reject(id, std::move(pdata)); }
    void refuse(std::uint64_t id, Refusal why) override
    {
        cm_.reject(id, {}, why == Refusal::full ? cm::RejectReason::full : cm::RejectReason::no_listener);
    }

    void stop_attempt(Ep& ep, bool) override { cm_.cancel(ep.cm_id); }
    void stop_datagram_attempt(std::uint64_t id) override { cm_.cancel(id); }
    void will_establish(Ep&, std::uint64_t) override {}
    void established(Ep& ep, int fd) override
    {
        if (!shm_) { // a Unix socket's peer is on this host: it ends when the process does
            watch_link(fd);
            size_send_buffer(fd);
        }
        if (!device_.connect(qp_of(ep), fd, shm_)) {
            ::close(fd);
            return;
        }
        if (!shm_ && lanes_wanted()) { // its lane follows its first large write, either side's (take_lane)
            {
                std::lock_guard lock(lanes_mutex_);
                lane_wanted_[ep.cm_id] = qp_of(ep);
            }
            device_.want_lanes(qp_of(ep), ep.cm_id);
        }
    }
    void failed(Ep& ep) override { device_.disconnect(qp_of(ep)); }
    void close(Ep& ep) override
    {
        forget_lane(ep);
        device_.disconnect(qp_of(ep));
    }
    void close_gracefully(Ep& ep) override
    {
        forget_lane(ep);
        device_.disconnect_gracefully(qp_of(ep));
    }
    void release(Ep& ep) override { forget_lane(ep); }

private:
    // On the CM's thread: the lane of connection `id`, given to its queue
    // pair if that is still connected. The passive side confirms first, so
    // that nothing else is on the lane before its peer may use it.
    bool take_lane(std::uint64_t id, int fd, bool confirm)
    {
        std::lock_guard lock(lanes_mutex_); // release() cannot free the queue pair meanwhile
        const auto it = lane_wanted_.find(id);
        if (it == lane_wanted_.end())
            return false;
        softnic::Qp* const qp = it->second;
        lane_wanted_.erase(it);
        if (confirm && !cm::SocketCm::confirm_lane(fd))
            return false;
        watch_link(fd);
        size_send_buffer(fd);
        return device_.attach_lane(qp, fd);
    }
    void forget_lane(Ep& ep)
    {
        {
            std::lock_guard lock(lanes_mutex_);
            lane_wanted_.erase(ep.cm_id);
        }
        if (!shm_ && lanes_wanted())
            cm_.drop_lane(ep.cm_id);
    }
    // Under the device's lock (Device::set_lane_request): the CM starts a
    // non-blocking connect to the offered lane and returns.
    static void lane_requested(void* self, std::uint64_t id)
    {
        static_cast<SocketConnections*>(self)->cm_.want_lane(id);
    }

    softnic::Device& device_;
    const bool shm_; // fastdapl-shm: Unix sockets and shared-memory rings
    std::mutex lanes_mutex_;
    std::unordered_map<std::uint64_t, softnic::Qp*> lane_wanted_; // connection id -> its queue pair
    cm::SocketCm cm_; // last: its thread stops before the members above go
};

} // namespace

std::unique_ptr<ConnectionManager> make_socket_connections(Ia& ia, softnic::Device& device, bool shm)
{
    return std::make_unique<SocketConnections>(ia, device, shm);
}

} // namespace fastdapl::core
