// The socket connection manager's wire messages.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
//
// Layout, all big-endian:
//   header  u32 magic | u8 version | u8 type | u8 flags | u8 zero | u32 body length
//   request u64 conn_qual | u32 qpn | [u32 UDP port] | u32 pdata length | pdata
//   reply   u32 qpn | [u32 UDP port] | u32 pdata length | pdata
//   (flags: kFlagDatagram, on a request or reply only, adds the UDP port:
//   UD endpoints; its upper 16 bits are zero. kFlagLane, on a reply only,
//   adds u64 lane token | u32 lane port after the qpn: a lane offered, both
//   nonzero, the port's upper 16 bits zero; never with kFlagDatagram)
//   reject  u32 reason | u32 pdata length | pdata
//   lane    u64 lane token (nonzero)
//   ready, disconnect, lane_ok: empty body
#include "cm_wire.hpp"

#include <endian.h>

#include <cstring>

namespace fastdapl::cm {

namespace {

void put32(std::vector<std::uint8_t>& out, std::uint32_t v)
{
    v = htobe32(v);
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    out.insert(out.end(), p, p + 4);
}

void put64(std::vector<std::uint8_t>& out, std::uint64_t v)
{
    v = htobe64(v);
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    out.insert(out.end(), p, p + 8);
}

std::uint32_t get32(const std::uint8_t* p)
{
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return be32toh(v);
}

std::uint64_t get64(const std::uint8_t* p)
{
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return be64toh(v);
}

constexpr std::uint8_t kFlagDatagram = 1;
constexpr std::uint8_t kFlagLane = 2;

// Fixed part of each body (before the private data, where it has some).
std::size_t fixed_body(MessageType t, bool datagram, bool lane)
{
    switch (t) {
    case MessageType::request:
        return datagram ? 20 : 16;
    case MessageType::reply:
        return datagram ? 12 : lane ? 20 : 8;
    case MessageType::reject:
        return 8;
    case MessageType::lane:
        return 8;
    case MessageType::ready:
    case MessageType::disconnect:
    case MessageType::lane_ok:
        return 0;
    }
    return 0;
}

bool has_private_data(MessageType t)
{
    return t == MessageType::request || t == MessageType::reply || t == MessageType::reject;
}

bool known_type(std::uint8_t t) { return t >= 1 && t <= 7; }

} // namespace

bool encode(const Message& m, std::vector<std::uint8_t>& out)
{
    if (m.private_data.size() > kMaxPrivateData || !known_type(static_cast<std::uint8_t>(m.type)))
        return false;
    const bool datagram = m.datagram && (m.type == MessageType::request || m.type == MessageType::reply);
    const bool lane = m.type == MessageType::reply && !datagram && m.lane_token != 0 && m.lane_port != 0;
    if (m.type == MessageType::lane && m.lane_token == 0)
        return false;
    const bool has_pdata = has_private_data(m.type);
    const auto body =
        static_cast<std::uint32_t>(fixed_body(m.type, datagram, lane) + (has_pdata ? m.private_data.size() : 0));
    put32(out, kMagic);
    out.push_back(kVersion);
    out.push_back(static_cast<std::uint8_t>(m.type));
    out.push_back(datagram ? kFlagDatagram : lane ? kFlagLane : 0);
    out.push_back(0);
    put32(out, body);
    switch (m.type) {
    case MessageType::request:
        put64(out, m.conn_qual);
        put32(out, m.qpn);
        if (datagram)
            put32(out, m.datagram_port);
        break;
    case MessageType::reply:
        put32(out, m.qpn);
        if (datagram)
            put32(out, m.datagram_port);
        if (lane) {
            put64(out, m.lane_token);
            put32(out, m.lane_port);
        }
        break;
    case MessageType::reject:
        put32(out, m.reason);
        break;
    case MessageType::lane:
        put64(out, m.lane_token);
        break;
    default:
        break;
    }
    if (has_pdata) {
        put32(out, static_cast<std::uint32_t>(m.private_data.size()));
        out.insert(out.end(), m.private_data.begin(), m.private_data.end());
    }
    return true;
}

DecodeResult decode(const std::uint8_t* data, std::size_t size, Message& m, std::size_t& consumed)
{
    consumed = 0;
    // Check what is there as soon as it is there: a wrong magic or version
    // is refused before the rest arrives.
    static const std::uint8_t magic_be[4] = {0x46, 0x44, 0x43, 0x4d};
    for (std::size_t i = 0; i < 4 && i < size; ++i)
        if (data[i] != magic_be[i])
            return DecodeResult::malformed;
    if (size > 4 && data[4] != kVersion)
        return DecodeResult::malformed;
    if (size > 5 && !known_type(data[5]))
        return DecodeResult::malformed;
    const bool datagram = size > 6 && data[6] == kFlagDatagram;
    const bool lane = size > 6 && data[6] == kFlagLane;
    if (size > 6 && data[6] != 0 &&
        !(datagram && (data[5] == static_cast<std::uint8_t>(MessageType::request) ||
                       data[5] == static_cast<std::uint8_t>(MessageType::reply))) &&
        !(lane && data[5] == static_cast<std::uint8_t>(MessageType::reply)))
        return DecodeResult::malformed;
    if (size > 7 && data[7] != 0)
        return DecodeResult::malformed;
    if (size < kHeaderSize)
        return DecodeResult::incomplete;
    const auto type = static_cast<MessageType>(data[5]);
    const std::uint32_t body = get32(data + 8);
    const std::size_t fixed = fixed_body(type, datagram, lane);
    const bool has_pdata = has_private_data(type);
    if (body < fixed || body > fixed + (has_pdata ? kMaxPrivateData : 0))
        return DecodeResult::malformed;
    if (size < kHeaderSize + body)
        return DecodeResult::incomplete;
    const std::uint8_t* b = data + kHeaderSize;
    m = Message{};
    m.type = type;
    m.datagram = datagram;
    const std::uint8_t* port = nullptr;
    switch (type) {
    case MessageType::request:
        m.conn_qual = get64(b);
        m.qpn = get32(b + 8);
        port = datagram ? b + 12 : nullptr;
        break;
    case MessageType::reply:
        m.qpn = get32(b);
        port = datagram ? b + 4 : nullptr;
        if (lane) {
            m.lane_token = get64(b + 4);
            const std::uint32_t p = get32(b + 12);
            if (m.lane_token == 0 || p == 0 || p > 0xffff)
                return DecodeResult::malformed;
            m.lane_port = static_cast<std::uint16_t>(p);
        }
        break;
    case MessageType::reject:
        m.reason = get32(b);
        break;
    case MessageType::lane:
        if ((m.lane_token = get64(b)) == 0)
            return DecodeResult::malformed;
        break;
    default:
        break;
    }
    if (port) {
        const std::uint32_t p = get32(port);
        if (p == 0 || p > 0xffff)
            return DecodeResult::malformed;
        m.datagram_port = static_cast<std::uint16_t>(p);
    }
    if (has_pdata) {
        const std::uint32_t pdata = get32(b + fixed - 4);
        if (pdata > kMaxPrivateData || fixed + pdata != body)
            return DecodeResult::malformed;
        m.private_data.assign(b + fixed, b + fixed + pdata);
    }
    consumed = kHeaderSize + body;
    return DecodeResult::complete;
}

} // namespace fastdapl::cm
