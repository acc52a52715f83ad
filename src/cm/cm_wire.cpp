// The socket connection manager's wire messages.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
//
// Layout, all big-endian:
//   header  u32 magic | u8 version | u8 type | u16 zero | u32 body length
//   request u64 conn_qual | u32 qpn | u32 pdata length | pdata
//   reply   u32 qpn | u32 pdata length | pdata
//   reject  u32 reason | u32 pdata length | pdata
//   ready, disconnect: empty body
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

// Fixed part of each body before the private data.
std::size_t fixed_body(MessageType t)
{
    switch (t) {
    case MessageType::request:
        return 16;
    case MessageType::reply:
    case MessageType::reject:
        return 8;
    case MessageType::ready:
    case MessageType::disconnect:
        return 0;
    }
    return 0;
}

bool known_type(std::uint8_t t) { return t >= 1 && t <= 5; }

} // namespace

bool encode(const Message& m, std::vector<std::uint8_t>& out)
{
    if (m.private_data.size() > kMaxPrivateData || !known_type(static_cast<std::uint8_t>(m.type)))
        return false;
    const bool has_pdata = fixed_body(m.type) != 0;
    const auto body = static_cast<std::uint32_t>(fixed_body(m.type) + (has_pdata ? m.private_data.size() : 0));
    put32(out, kMagic);
    out.push_back(kVersion);
    out.push_back(static_cast<std::uint8_t>(m.type));
    out.push_back(0);
    out.push_back(0);
    put32(out, body);
    switch (m.type) {
    case MessageType::request:
        put64(out, m.conn_qual);
        put32(out, m.qpn);
        break;
    case MessageType::reply:
        put32(out, m.qpn);
        break;
    case MessageType::reject:
        put32(out, m.reason);
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
    if (size > 7 && (data[6] != 0 || data[7] != 0))
        return DecodeResult::malformed;
    if (size < kHeaderSize)
        return DecodeResult::incomplete;
    const auto type = static_cast<MessageType>(data[5]);
    const std::uint32_t body = get32(data + 8);
    const std::size_t fixed = fixed_body(type);
    if (body < fixed || body > fixed + (fixed ? kMaxPrivateData : 0))
        return DecodeResult::malformed;
    if (size < kHeaderSize + body)
        return DecodeResult::incomplete;
    const std::uint8_t* b = data + kHeaderSize;
    m = Message{};
    m.type = type;
    switch (type) {
    case MessageType::request:
        m.conn_qual = get64(b);
        m.qpn = get32(b + 8);
        break;
    case MessageType::reply:
        m.qpn = get32(b);
        break;
    case MessageType::reject:
        m.reason = get32(b);
        break;
    default:
        break;
    }
    if (fixed) {
        const std::uint32_t pdata = get32(b + fixed - 4);
        if (pdata > kMaxPrivateData || fixed + pdata != body)
            return DecodeResult::malformed;
        m.private_data.assign(b + fixed, b + fixed + pdata);
    }
    consumed = kHeaderSize + body;
    return DecodeResult::complete;
}

} // namespace fastdapl::cm
