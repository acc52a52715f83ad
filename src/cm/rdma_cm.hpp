// The connection manager of verbs IAs, on librdmacm: listeners on the
// rdma_cm TCP port space (connection qualifier = port), connect with
// address and route resolution, accept, reject, disconnect, timeouts.
// The endpoint's queue pair exists before the connection is sought (DAT
// lets receives be posted first), so it is handed to the rdma_cm id, which
// then moves it through INIT/RTR/RTS on both sides and to ERROR on
// disconnect.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "socket_cm.hpp" // Outcome, Request, Message

#include <rdma/rdma_cma.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace fastdapl::cm {

// What an IB CM REQ carries for the consumer once rdma_cm has put its own
// header in (RoCE uses the same messages); REP carries more, the smaller
// figure is the one a consumer can count on both ways.
inline constexpr std::uint32_t kRdmaCmMaxPrivateData = 56;
// How long an accepted request may wait for the active side's ready
// message. Longer than the kernel CM's own retries of its reply (15, about
// 4 s apart), whose time-out then arrives first as UNREACHABLE: a ready
// message lost to the network is sent again, not a failed connection.
inline constexpr std::chrono::milliseconds kAcceptBackstop{90'000};
// How long a released id whose disconnect request is unanswered stays, and
// how long closing the CM waits for such ids (a process that exits right
// after its disconnect). The kernel sends a lost request again after its
// CM timeout; on Soft-RoCE between two Debian 12 guests (6.1) the answer to
// a resent request came 6.3 s after the first (tests/vm/pair.sh with
// FASTDAPL_DEBUG's times): 6 s, the figure before, gave up just short of it
// and left the peer connected in 2 of 24 lossy runs. 8 s covers one resend;
// the released id's 15 s covers two. Only an unanswered request makes
// closing wait.
inline constexpr std::chrono::milliseconds kDisconnectLinger{15'000};
inline constexpr std::chrono::milliseconds kCloseLinger{8'000};
inline constexpr std::uint8_t kNonPeerRejectMarker[8] = {'f', 'd', 'N', 'O', 'P', 'E', 'E', 'R'};

// UD endpoints: the queue key of every datagram queue pair. rdma_cm's UDP
// port space answers with this one (the kernel's default for IP-addressed
// ids), so both sides' queue pairs use it.
inline constexpr std::uint32_t kDatagramQkey = RDMA_UDP_QKEY;

// A UD exchange's answer about the peer: the route to its datagram queue
// pair as verbs takes it, and the queue pair's number.
struct DatagramPeer {
    ibv_ah_attr ah_attr{};
    std::uint32_t qpn = 0;
};

// What the RDMA read resources of a connection are.
struct ReadDepth {
    std::uint8_t initiator_depth = 4;     // reads this side may have in flight
    std::uint8_t responder_resources = 4; // reads the peer may have in flight here
};

class RdmaCm {
public:
    struct Callbacks { // called on the CM's thread, with no CM lock held
        std::function<void(const Request&)> on_request;
        // Active side: the outcome of connect(); passive side: of accept().
        // `message.private_data` is what the peer sent (reply or reject).
        // `peer`: a UD exchange that ended established, else nullptr.
        std::function<void(std::uint64_t id, Outcome, const Message&, const DatagramPeer* peer)> on_result;
        // An established connection ended (the peer disconnected, or the
        // link failed): its queue pair is in the error state already.
        std::function<void(std::uint64_t id, bool orderly)> on_disconnected;
    };

    explicit RdmaCm(Callbacks callbacks);
    ~RdmaCm();
    RdmaCm(const RdmaCm&) = delete;
    RdmaCm& operator=(const RdmaCm&) = delete;

    bool ok() const { return channel_ != nullptr; }

    // Listens on `local` (the IA's address) and `port` (0: a free one,
    // returned), in the TCP port space and, with `datagrams` (the IA has UD
    // endpoints), the UDP one for their requests. 0 or an errno (EADDRINUSE
    // when the qualifier is taken).
    int listen(const sockaddr* local, std::uint16_t& port, std::uint64_t listener_id, bool datagrams);
    void unlisten(std::uint64_t listener_id);

    // Starts a connection attempt from `local` to `remote` (port set) for
    // `qp`; its outcome arrives through on_result. 0 when none could start.
    std::uint64_t connect(const sockaddr* local, const sockaddr* remote, ibv_qp* qp,
                          std::vector<std::uint8_t> private_data, std::chrono::milliseconds timeout, ReadDepth depth);
    // A UD endpoint's exchange (RDMA_PS_UDP, a SIDR request): asks the peer
    // listening at `remote` for its datagram queue pair, telling it ours
    // (`qpn`, in a header before the private data: SIDR requests carry no
    // queue pair number). The answer arrives through on_result with a
    // DatagramPeer. 0 when none could start.
    std::uint64_t connect_datagram(const sockaddr* local, const sockaddr* remote, std::uint32_t qpn,
                                   std::vector<std::uint8_t> private_data, std::chrono::milliseconds timeout);
    // Answers a request: the connection will use `qp`. A UD request is
    // answered with `qp`'s number and on_result follows at once (rdma_cm
    // reports nothing more on the passive side). The outcome arrives
    // through on_result with the request's id. False for an unknown or
    // answered id, or when rdma_cm refused (errno kept). `timeout` is a
    // floor: the kernel's CM sends the reply again while the ready message
    // (RTU) does not come, each time after about 4 s, and reports its own
    // time-out, so the deadline here is no shorter than kAcceptBackstop.
    bool accept(std::uint64_t request_id, ibv_qp* qp, std::vector<std::uint8_t> private_data,
                std::chrono::milliseconds timeout, ReadDepth depth);
    bool reject(std::uint64_t request_id, std::vector<std::uint8_t> private_data);
    // The queue pair of an accepted request received data before the
    // active side's ready message (IB's communication-established event:
    // the RTU was lost or is late): the connection is established now.
    void first_data_arrived(const ibv_qp* qp);
    // Refuses a request as "nobody takes it" (an RSP already taken, a full
    // CR queue): the active side's outcome is no_listener, not rejected.
    // rdma_reject cannot choose the IB reject reason, so the refusal carries
    // kNonPeerRejectMarker as its private data, which fastdapl peers read as
    // a non-peer reject (other peers see a consumer reject).
    bool refuse(std::uint64_t request_id);
    // Ends a connection (or abandons an attempt): the queue pair goes to the
    // error state, so what it holds flushes. For an established connection
    // on_disconnected(id, true) follows once the transport has ended it
    // (the caller may have reported the end already); else no callback.
    void disconnect(std::uint64_t id);
    // Forgets the id (after disconnect, or to abandon an attempt or a
    // request); no callback follows. The queue pair is not touched.
    void release(std::uint64_t id);

private:
    enum class State { resolving_addr, resolving_route, connecting, wait_consumer, accepting, established, disconnecting, ended, datagram_accepted };
    struct Conn {
        rdma_cm_id* id = nullptr;
        State state = State::resolving_addr;
        ibv_qp* qp = nullptr;
        bool datagram = false;   // a UD exchange (RDMA_PS_UDP)
        std::uint32_t qpn = 0;   // active UD: ours
        DatagramPeer peer;       // passive UD: the requester's, known from the request
        std::vector<std::uint8_t> private_data; // active: sent with the request
        ReadDepth depth;
        std::chrono::steady_clock::time_point deadline;
        int timeout_ms = 2000;
        // Released while our disconnect request was unanswered: the id
        // stays until the answer (or the deadline), since destroying it
        // stops the kernel sending the request (again, or at all: one
        // still queued is cancelled), and the peer would never hear of it.
        bool lingering = false;
    };
    struct Pending { // callbacks to run once the lock is released
        std::vector<Request> requests;
        std::vector<std::tuple<std::uint64_t, Outcome, Message, std::optional<DatagramPeer>>> results;
        std::vector<std::pair<std::uint64_t, bool>> ended;
    };
    struct EventCopy;

    void run();
    void handle(const EventCopy& e, Pending& out);
    void fail(std::uint64_t id, Conn& c, Outcome o, Message m, Pending& out);
    bool datagram_request(const EventCopy& e, Conn& c, Request& r);
    void destroy_locked(Conn& c);
    // Starts an active connection's address resolution (lock held); a
    // failure to start is reported from the thread like any other.
    void resolve_locked(Conn& c, const sockaddr* local, const sockaddr* remote, std::chrono::milliseconds timeout);
    void wake();

    Callbacks callbacks_;
    bool debug_ = false; // FASTDAPL_DEBUG: events to stderr
    rdma_event_channel* channel_ = nullptr;
    std::mutex mutex_;
    std::map<std::uint64_t, rdma_cm_id*> listeners_;
    std::map<std::uint64_t, rdma_cm_id*> datagram_listeners_; // the same ports in RDMA_PS_UDP
    std::map<std::uint64_t, Conn> conns_;
    std::atomic<std::uint64_t> next_id_{1};
    int wake_fd_ = -1;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

} // namespace fastdapl::cm
