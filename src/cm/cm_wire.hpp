// The socket connection manager's wire messages (softnic IAs): encoding and a
// decoder that checks every length before it trusts it.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fastdapl::cm {

// Private data both ways: the spec asks for at least 64 bytes.
inline constexpr std::uint32_t kMaxPrivateData = 256;
inline constexpr std::uint32_t kMagic = 0x4644434d; // "FDCM"
inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::size_t kHeaderSize = 12;

enum class MessageType : std::uint8_t {
    request = 1,    // active side: connect to conn_qual, with private data
    reply = 2,      // passive side accepted, with private data
    reject = 3,     // passive side (or no listener) refused, with private data
    ready = 4,      // active side saw the reply: both ends are established
    disconnect = 5, // graceful disconnect request
    // A second TCP connection for an established queue pair (fastdapl-tcp):
    // the active side opens it to the port the reply named (the passive
    // CM's lane listener, which outlives the consumer's) with the token it
    // offered; the passive side answers lane_ok once its queue pair has
    // taken it. Large RDMA writes are then split over both streams.
    lane = 6,
    lane_ok = 7,
};

enum class RejectReason : std::uint32_t {
    consumer = 1,    // dat_cr_reject: the peer's consumer said no
    no_listener = 2, // nobody listens on that qualifier
    full = 3,        // the listener's EVD could not take the request
};

struct Message {
    MessageType type = MessageType::request;
    std::uint64_t conn_qual = 0;  // request: the qualifier asked for
    std::uint32_t qpn = 0;        // request/reply: the sender's queue pair number
    // request/reply between UD endpoints: no stream follows; the sender's
    // datagram queue pair listens on this UDP port (of the CM's address).
    bool datagram = false;
    std::uint16_t datagram_port = 0;
    std::uint32_t reason = 0;     // reject: a RejectReason
    // reply between RC endpoints: nonzero offers a lane under this token,
    // to be opened to lane_port; lane: the token it answers.
    std::uint64_t lane_token = 0;
    std::uint16_t lane_port = 0;
    std::vector<std::uint8_t> private_data;
};

enum class DecodeResult {
    complete,   // `message` is filled, `consumed` bytes used
    incomplete, // a valid prefix: wait for more bytes
    malformed,  // reject this connection attempt
};

// Appends the encoded message to `out`. Returns false (nothing appended)
// when the private data is larger than kMaxPrivateData.
bool encode(const Message& message, std::vector<std::uint8_t>& out);

DecodeResult decode(const std::uint8_t* data, std::size_t size, Message& message, std::size_t& consumed);

} // namespace fastdapl::cm
