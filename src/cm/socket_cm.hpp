// The socket connection manager for softnic IAs: listeners on (address,
// port of the connection qualifier: port_of_qualifier), one socket per port
// shared by every qualifier that maps to it (a request names its whole
// 64-bit qualifier), the request/reply/ready handshake with
// private data, rejects, timeouts. A finished handshake hands its TCP socket
// to the caller, who gives it to the queue pair as its wire.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "address.hpp"
#include "cm_wire.hpp"

#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <tuple>
#include <mutex>
#include <thread>
#include <vector>

namespace fastdapl::cm {

enum class Outcome {
    established,  // fd is the caller's now
    rejected,     // the peer's consumer rejected (private data included)
    no_listener,  // nobody listens there (connection refused or a reject for lack of a listener)
    unreachable,  // the address cannot be reached
    timed_out,    // no answer in time
    failed,       // the peer broke the handshake (malformed message, closed early)
};

struct Request { // a connection request waiting for accept or reject
    std::uint64_t id = 0;
    std::uint64_t listener = 0;
    sockaddr_storage remote{}; // IPv4 from the socket CM, IPv4 or IPv6 from rdma_cm
    std::uint64_t conn_qual = 0;
    std::uint32_t remote_qpn = 0;
    std::vector<std::uint8_t> private_data;
    // From a UD endpoint: its datagram queue pair's UDP port.
    bool datagram = false;
    std::uint16_t datagram_port = 0;
};

class SocketCm {
public:
    struct Callbacks { // called on the CM's thread, with no CM lock held
        std::function<void(const Request&)> on_request;
        // Active side: the outcome of connect(); passive side: of accept().
        std::function<void(std::uint64_t id, Outcome, int fd, const Message&)> on_result;
        // A lane for the established connection `id` (TCP only; unset: no
        // lanes are offered or opened). `confirm`: the passive side, which
        // must call confirm_lane(fd) before the stream carries anything
        // else. Returns whether it took the socket (false: the CM closes it).
        std::function<bool(std::uint64_t id, int fd, bool confirm)> on_lane;
    };
    // Lanes are opened on demand: the active side of established connection
    // `id` opens the lane its peer offered (once; nothing happens for a
    // passive side, an unknown id or a connection offered none). Any
    // thread; it does not wait for the connection.
    void want_lane(std::uint64_t id);
    // Connection `id` is over: the lane offered for it, or offered to it,
    // can no longer be opened.
    void drop_lane(std::uint64_t id);
    // The passive side's lane_ok: the peer may use the lane from then on.
    static bool confirm_lane(int fd);

    // `local`: the fastdapl-shm flavour. Ports are abstract Unix socket
    // names ("fastdapl-shm/<uid>/<port>": one port space per user and
    // network namespace) instead of TCP ports, and only addresses of this
    // host can be connected to (others are unreachable); the stream handed
    // over is a Unix socket.
    explicit SocketCm(Callbacks callbacks, bool local = false);
    ~SocketCm();
    SocketCm(const SocketCm&) = delete;
    SocketCm& operator=(const SocketCm&) = delete;

    // Listens for `qual` on addr:port_of_qualifier(qual) (qual 0: any free
    // port, whose number is returned as the qualifier). Returns 0 or an
    // errno (EADDRINUSE when the qualifier is taken, or its port is another
    // socket's).
    int listen(const sockaddr_in& addr, std::uint64_t& qual, std::uint64_t listener_id);
    void unlisten(std::uint64_t listener_id);

    // Starts a connection attempt to `qual` at `remote` (whose port is the
    // qualifier's); its outcome arrives through on_result. `datagram_port`
    // (not 0): a UD endpoint's request, answered only by a UD endpoint's
    // reply (its Message carries the peer's port); the stream handed over
    // is the caller's to close.
    std::uint64_t connect(const sockaddr_in& remote, std::uint64_t qual, std::uint32_t qpn,
                          std::vector<std::uint8_t> private_data, std::chrono::milliseconds timeout,
                          std::uint16_t datagram_port = 0);
    // Abandons an attempt (no callback follows).
    void cancel(std::uint64_t id);

    // Answers a request. accept's outcome (the peer's ready) arrives through
    // on_result with the request's id. False for an unknown or answered id.
    bool accept(std::uint64_t request_id, std::uint32_t qpn, std::vector<std::uint8_t> private_data,
                std::chrono::milliseconds timeout, std::uint16_t datagram_port = 0);
    // `reason` other than consumer: the provider refused (the peer sees a non-peer reject).
    bool reject(std::uint64_t request_id, std::vector<std::uint8_t> private_data,
                RejectReason reason = RejectReason::consumer);

private:
    enum class State { connecting, wait_reply, wait_request, wait_consumer, wait_ready, lane_connecting, lane_wait_ok };
    struct Conn {
        int fd = -1;
        State state = State::connecting;
        std::uint64_t listener = 0; // passive: known once the request names its qualifier
        std::uint16_t port = 0;     // passive: the port it came in on
        std::uint32_t qpn = 0;
        std::uint16_t datagram_port = 0;         // active: a UD endpoint's request
        std::vector<std::uint8_t> request_pdata; // active: sent once connected
        std::vector<std::uint8_t> in;
        std::chrono::steady_clock::time_point deadline;
        sockaddr_in remote{};
        std::uint64_t conn_qual = 0;
        // Active side refused (no listener yet): tried again until then.
        int error = 0;
        std::chrono::steady_clock::time_point refused_until, retry_at;
        // Passive: the lane offered in the reply (0: none), and the lane
        // that came before the peer's ready. Active lane connection: the
        // token to name, and the connection it is for.
        std::uint64_t lane_token = 0;
        int lane_fd = -1;
        std::uint64_t lane_for = 0;
    };
    struct LaneOffer { // passive: a lane may still come for connection `id` from `from`
        std::uint64_t id = 0;
        in_addr_t from = 0;
    };
    struct LaneLater { // active: the lane the peer offered, opened when wanted
        sockaddr_in at{};
        std::uint64_t token = 0;
    };
    // A new connection attempt for `c` (c.fd, or -1 and c.error).
    void start_connect(Conn& c);
    // A socket bound and listening on `port` (0: any free one, written
    // back), or -1 and errno.
    int open_listener(const sockaddr_in& addr, std::uint16_t& port);
    struct Listener {
        std::uint16_t port = 0;
        std::uint64_t qual = 0;
    };
    struct Port { // one listening socket, the qualifiers that share it
        int fd = -1;
        sockaddr_in address{}; // local: the address requests say they came from (this host's)
        std::map<std::uint64_t, std::uint64_t> listeners; // qualifier -> listener id
    };
    struct Pending { // callbacks to run once the lock is released
        std::vector<Request> requests;
        std::vector<std::tuple<std::uint64_t, Outcome, int, Message>> results;
        std::vector<std::tuple<std::uint64_t, int, bool>> lanes; // (connection id, fd, confirm)
    };
    // Passive: the port lanes come to (opened at the first offer, on the
    // address `fd` was reached at, and kept: a consumer frees its service
    // point as soon as it has its connection); 0 if it cannot be opened.
    std::uint16_t lane_listener(int fd);
    // Active: opens the lane offered for established connection `id` (want_lane).
    void open_lane(std::uint64_t id, const sockaddr_in& remote, std::uint64_t token);
    // Passive: a lane connection named `token`.
    void lane_arrived(Conn& lane, std::uint64_t token, Pending& out);
    bool lanes() const { return !local_ && callbacks_.on_lane != nullptr; }

    void run();
    void handle_readable(std::uint64_t id, Conn& c, Pending& out, std::vector<std::uint64_t>& done);
    void finish(std::uint64_t id, Conn& c, Outcome o, const Message& m, Pending& out, std::vector<std::uint64_t>& done,
                bool hand_over);
    static bool send_message(int fd, const Message& m);
    void wake();

    Callbacks callbacks_;
    const bool local_;
    std::mutex mutex_;
    std::map<std::uint64_t, Listener> listeners_;
    std::map<std::uint16_t, Port> ports_;
    std::map<std::uint64_t, Conn> conns_;
    std::map<std::uint64_t, LaneOffer> lane_offers_; // by token, until the connection is dropped (drop_lane)
    std::map<std::uint64_t, LaneLater> lanes_later_;  // by connection id, until wanted or dropped
    std::uint16_t lane_port_ = 0;                    // the lane listener's, in ports_
    std::atomic<std::uint64_t> next_id_{1};
    int wake_fd_ = -1;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

} // namespace fastdapl::cm
