// The connection seam: how an IA's endpoints find peers. Two kinds: the
// socket CM of softnic IAs (src/cm/socket_cm) and rdma_cm for verbs IAs
// (src/cm/rdma_cm), made by the IA's DevicePath. They report back through
// cm_request (service_point.hpp), cm_result and ep_connection_ended (ep.hpp).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "handles.hpp"

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace fastdapl::core {

class Ep;

// The most private data any connection manager carries (the socket CM's).
inline constexpr std::uint32_t kMaxConnectionPrivateData = 256;

// A UD endpoint's exchange with one peer (dat_ep_connect or dat_cr_accept
// on a UD EP; Ia::ud_exchanges, under cm_mutex): what the peer said, until
// dat_ib_ud_cm_free (its id is the event's context) or the EP goes.
struct UdExchange {
    Ep* ep = nullptr;
    bool passive = false;
    sockaddr_storage peer{};   // the peer's IA address
    std::uint32_t peer_qpn = 0; // passive: from the request; active: from the reply
    std::uint16_t peer_port = 0;
    std::uint32_t private_data_size = 0; // what the event points at
    std::uint8_t private_data[kMaxConnectionPrivateData] = {};
};

// Why the provider refuses a request (the peer sees a non-peer reject).
enum class Refusal { no_listener, full };

class ConnectionManager {
public:
    virtual ~ConnectionManager() = default;

    // Private data a connection message carries.
    virtual DAT_COUNT max_private_data() const = 0;

    // 0, or errno (EADDRINUSE: the qualifier is taken). Port 0: any, and
    // `port` is set to the one taken.
    // Listens for connection qualifier `qual` (0: any free one, returned).
    // 0 or an errno (EADDRINUSE: taken).
    virtual int listen(const sockaddr_storage& local, std::uint64_t& qual, std::uint64_t listener) = 0;
    virtual void unlisten(std::uint64_t listener) = 0;

    // Starts a connection of `ep` (queues built) to ep.remote; its id, 0
    // when it could not start.
    virtual std::uint64_t connect(Ep& ep, std::vector<std::uint8_t> private_data,
                                  std::chrono::milliseconds timeout) = 0;
    // Accepts request `id` onto `ep` (queues built); false when not sent.
    virtual bool accept(std::uint64_t id, Ep& ep, std::vector<std::uint8_t> private_data,
                        std::chrono::milliseconds timeout) = 0;
    virtual void reject(std::uint64_t id, std::vector<std::uint8_t> private_data) = 0;
    virtual void refuse(std::uint64_t id, Refusal why) = 0;

    // An attempt (ep.cm_id) stops: the consumer disconnects it, or the EP
    // is freed under it (`freeing`). The IA's cm_mutex is held.
    virtual void stop_attempt(Ep& ep, bool freeing) = 0;
    // A UD endpoint's exchange `id` (connect or accept) stops: its EP goes.
    virtual void stop_datagram_attempt(std::uint64_t) {}
    // The attempt ended (cm_result; the IA's cm_mutex held). Established:
    // the connection's id is recorded before its event is posted, and the
    // transport handed over after it (`fd`: the socket CM's stream), so no
    // completion precedes ESTABLISHED and a disconnect right after it
    // finds the id. Failed: what the queues hold completes as flushed.
    virtual void will_establish(Ep& ep, std::uint64_t id) = 0;
    // The EP's queue pair received data while its accept still waited for
    // the active side's last handshake message (which was lost or is
    // late): the connection may count as established now. The IA's
    // cm_mutex is held.
    virtual void first_data_arrived(Ep&) {}
    virtual void established(Ep& ep, int fd) = 0;
    virtual void failed(Ep& ep) = 0;
    // Ends an established connection now (what is posted is flushed); no
    // event, the caller posts it.
    virtual void close(Ep& ep) = 0;
    // A graceful end was asked (the EP is DISCONNECT_PENDING): the
    // connection ends once every posted request has completed.
    virtual void close_gracefully(Ep& ep) = 0;
    // What a connection kept after its end goes (dat_ep_reset, dat_ep_free).
    virtual void release(Ep& ep) = 0;
};

} // namespace fastdapl::core
