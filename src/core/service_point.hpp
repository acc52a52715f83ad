// Service points (PSP, RSP) and connection requests (CR).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "connection.hpp"
#include "handles.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <vector>

namespace fastdapl::core {

class Evd;
class Ep;

class Psp : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_PSP;
    DAT_CONN_QUAL conn_qual = 0;
    Evd* evd = nullptr;
    DAT_PSP_FLAGS flags = DAT_PSP_CONSUMER_FLAG;
    std::uint64_t listener_id = 0;
    // A reserved service point: its one endpoint, and whether its single
    // connection request has come.
    Ep* reserved_ep = nullptr;
    std::atomic<bool> fired{false};
};

// An RSP is a PSP bound to one endpoint that takes one request; only its
// handle type differs.
class Rsp : public Psp {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_RSP;
};

// A CSP (dat_csp_create) is a PSP named by a socket address: it listens on
// the address's port as a qualifier, for dat_ep_common_connect.
class Csp : public Psp {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_CSP;
    DAT_COMM comm{};
    sockaddr_storage address{};
};

class Cr : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_CR;
    Psp* psp = nullptr;
    Ep* ep = nullptr; // the RSP's endpoint, or the one made for a request on a provider PSP
    bool provider_ep = false; // a PSP_PROVIDER_FLAG request: `ep` is made on first need, ours until accepted
    std::uint64_t request_id = 0;
    sockaddr_storage remote{};
    DAT_CONN_QUAL conn_qual = 0;
    std::uint32_t private_data_size = 0;
    std::uint8_t private_data[kMaxConnectionPrivateData] = {};
    // From a UD endpoint: only a UD endpoint takes it.
    bool datagram = false;
    std::uint32_t remote_qpn = 0;
    std::uint16_t datagram_port = 0;
};

// A connection request arrived for `listener` (a CM's thread, the IA's
// cm_mutex not yet held).
struct IncomingRequest {
    std::uint64_t listener = 0;
    std::uint64_t id = 0;
    sockaddr_storage remote{};
    DAT_CONN_QUAL conn_qual = 0;
    std::vector<std::uint8_t> private_data;
    bool datagram = false;
    std::uint32_t remote_qpn = 0;
    std::uint16_t datagram_port = 0;
};
void cm_request(Ia* ia, const IncomingRequest& r);

// How a connection attempt ended (a CM's thread).
enum class AttemptOutcome { established, rejected, no_listener, unreachable, timed_out, failed };
// `peer_qpn`, `peer_port`: an active UD endpoint's answer (the reply's);
// `route`: a UD exchange's way to the peer as the device kind needs it
// (verbs: an ibv_ah_attr; the softnic needs none).
void cm_result(Ia* ia, std::uint64_t id, AttemptOutcome outcome, int fd, const std::vector<std::uint8_t>& private_data,
               std::uint32_t peer_qpn = 0, std::uint16_t peer_port = 0, const void* route = nullptr);

void destroy_psp(Psp* psp);

} // namespace fastdapl::core
