// The socket CM's wire messages: round trips, truncation, and every malformed form.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "cm_wire.hpp"

#include <gtest/gtest.h>

using namespace fastdapl::cm;

namespace {

std::vector<std::uint8_t> bytes_of(const Message& m)
{
    std::vector<std::uint8_t> out;
    EXPECT_TRUE(encode(m, out));
    return out;
}

Message sample(MessageType t, std::size_t pdata)
{
    Message m;
    m.type = t;
    m.conn_qual = 0x0102030405060708ull;
    m.qpn = 0x4242;
    m.reason = static_cast<std::uint32_t>(RejectReason::consumer);
    for (std::size_t i = 0; i < pdata; ++i)
        m.private_data.push_back(static_cast<std::uint8_t>(i * 3 + 1));
    return m;
}

} // namespace

TEST(CmWire, EveryTypeRoundTripsWithUpToTheMaximumPrivateData)
{
    for (auto t : {MessageType::request, MessageType::reply, MessageType::reject, MessageType::ready,
                   MessageType::disconnect}) {
        for (std::size_t pdata : {std::size_t{0}, std::size_t{1}, std::size_t{64}, std::size_t{kMaxPrivateData}}) {
            const Message in = sample(t, pdata);
            const auto wire = bytes_of(in);
            Message out;
            std::size_t used = 0;
            ASSERT_EQ(decode(wire.data(), wire.size(), out, used), DecodeResult::complete);
            EXPECT_EQ(used, wire.size());
            EXPECT_EQ(out.type, t);
            if (t == MessageType::request) {
                EXPECT_EQ(out.conn_qual, in.conn_qual);
                EXPECT_EQ(out.qpn, in.qpn);
            }
            if (t == MessageType::reply) {
                EXPECT_EQ(out.qpn, in.qpn);
            }
            if (t == MessageType::reject) {
                EXPECT_EQ(out.reason, in.reason);
            }
            if (t == MessageType::ready || t == MessageType::disconnect) {
                EXPECT_TRUE(out.private_data.empty()); // these carry none
            } else {
                EXPECT_EQ(out.private_data, in.private_data);
            }
        }
    }
}

TEST(CmWire, OversizedPrivateDataIsNotEncoded)
{
    std::vector<std::uint8_t> out;
    EXPECT_FALSE(encode(sample(MessageType::request, kMaxPrivateData + 1), out));
    EXPECT_TRUE(out.empty());
}

TEST(CmWire, EveryTruncationIsIncompleteNeverMalformed)
{
    const auto wire = bytes_of(sample(MessageType::request, 100));
    for (std::size_t n = 0; n < wire.size(); ++n) {
        Message m;
        std::size_t used = 99;
        EXPECT_EQ(decode(wire.data(), n, m, used), DecodeResult::incomplete) << n;
        EXPECT_EQ(used, 0u);
    }
}

TEST(CmWire, TwoMessagesBackToBack)
{
    auto wire = bytes_of(sample(MessageType::reply, 5));
    const auto second = bytes_of(sample(MessageType::ready, 0));
    wire.insert(wire.end(), second.begin(), second.end());
    Message m;
    std::size_t used = 0;
    ASSERT_EQ(decode(wire.data(), wire.size(), m, used), DecodeResult::complete);
    EXPECT_EQ(m.type, MessageType::reply);
    ASSERT_EQ(decode(wire.data() + used, wire.size() - used, m, used), DecodeResult::complete);
    EXPECT_EQ(m.type, MessageType::ready);
}

TEST(CmWire, MalformedForms)
{
    const auto good = bytes_of(sample(MessageType::request, 10));
    auto expect_malformed = [](std::vector<std::uint8_t> w, const char* what) {
        Message m;
        std::size_t used = 0;
        EXPECT_EQ(decode(w.data(), w.size(), m, used), DecodeResult::malformed) << what;
        EXPECT_EQ(used, 0u) << what;
    };
    auto w = good;
    w[0] ^= 1;
    expect_malformed(w, "magic");
    w = good;
    w[4] = 2;
    expect_malformed(w, "version");
    w = good;
    w[5] = 9;
    expect_malformed(w, "type");
    w = good;
    w[6] = 2;
    expect_malformed(w, "unknown flag");
    w = good;
    w[7] = 1;
    expect_malformed(w, "reserved byte");
    w = bytes_of(sample(MessageType::reject, 4));
    w[6] = 1;
    expect_malformed(w, "datagram flag on a reject");
    w = good;
    w[11] = 15; // body shorter than the fixed request fields
    expect_malformed(w, "short body");
    w = good;
    w[10] = 0x10; // body far beyond the maximum
    expect_malformed(w, "long body");
    w = good;
    w[12 + 15] = 11; // pdata length disagrees with the body length
    expect_malformed(w, "pdata length");
    // A wrong magic is refused from its first byte, before the rest arrives.
    std::vector<std::uint8_t> one = {0x00};
    expect_malformed(one, "first byte");
    // ready with a body
    auto ready = bytes_of(sample(MessageType::ready, 0));
    ready[11] = 4;
    ready.insert(ready.end(), 4, 0);
    expect_malformed(ready, "body on an empty message");
}

TEST(CmWire, DatagramRequestAndReplyCarryTheUdpPort)
{
    for (auto t : {MessageType::request, MessageType::reply}) {
        Message in = sample(t, 4);
        in.datagram = true;
        in.datagram_port = 0xbeef;
        const auto wire = bytes_of(in);
        EXPECT_EQ(wire.size(), bytes_of(sample(t, 4)).size() + 4); // the port, nothing else
        Message out;
        std::size_t used = 0;
        ASSERT_EQ(decode(wire.data(), wire.size(), out, used), DecodeResult::complete);
        EXPECT_EQ(used, wire.size());
        EXPECT_TRUE(out.datagram);
        EXPECT_EQ(out.datagram_port, 0xbeef);
        EXPECT_EQ(out.qpn, in.qpn);
        EXPECT_EQ(out.private_data, in.private_data);
        for (std::size_t n = 0; n < wire.size(); ++n) {
            Message m;
            EXPECT_EQ(decode(wire.data(), n, m, used), DecodeResult::incomplete) << n;
        }
    }
    // A plain request is not a datagram one.
    const auto plain = bytes_of(sample(MessageType::request, 4));
    Message out;
    std::size_t used = 0;
    ASSERT_EQ(decode(plain.data(), plain.size(), out, used), DecodeResult::complete);
    EXPECT_FALSE(out.datagram);
    // The flag only means something on a request or a reply.
    Message ready = sample(MessageType::ready, 0);
    ready.datagram = true;
    const auto r = bytes_of(ready);
    EXPECT_EQ(r[6], 0);
}

TEST(CmWire, DatagramPortZeroOrWiderThan16BitsIsMalformed)
{
    Message in = sample(MessageType::reply, 0);
    in.datagram = true;
    in.datagram_port = 1;
    auto wire = bytes_of(in);
    Message m;
    std::size_t used = 0;
    wire[kHeaderSize + 7] = 0; // port 0
    EXPECT_EQ(decode(wire.data(), wire.size(), m, used), DecodeResult::malformed);
    wire[kHeaderSize + 7] = 1;
    wire[kHeaderSize + 5] = 1; // 0x10001
    EXPECT_EQ(decode(wire.data(), wire.size(), m, used), DecodeResult::malformed);
    wire[kHeaderSize + 5] = 0;
    EXPECT_EQ(decode(wire.data(), wire.size(), m, used), DecodeResult::complete);
}

TEST(CmWire, LaneOfferLaneAndLaneOkRoundTrip)
{
    Message reply = sample(MessageType::reply, 7);
    reply.lane_token = 0x1122334455667788ull;
    reply.lane_port = 0xfedc;
    auto wire = bytes_of(reply);
    Message m;
    std::size_t used = 0;
    ASSERT_EQ(decode(wire.data(), wire.size(), m, used), DecodeResult::complete);
    EXPECT_EQ(used, wire.size());
    EXPECT_EQ(m.qpn, reply.qpn);
    EXPECT_EQ(m.lane_token, reply.lane_token);
    EXPECT_EQ(m.lane_port, reply.lane_port);
    EXPECT_EQ(m.private_data, reply.private_data);
    // A reply without an offer decodes with token 0; one without a port
    // offers nothing.
    wire = bytes_of(sample(MessageType::reply, 7));
    ASSERT_EQ(decode(wire.data(), wire.size(), m, used), DecodeResult::complete);
    EXPECT_EQ(m.lane_token, 0u);
    reply.lane_port = 0;
    EXPECT_EQ(bytes_of(reply), bytes_of(sample(MessageType::reply, 7)));

    Message lane;
    lane.type = MessageType::lane;
    lane.lane_token = 42;
    lane.private_data = {1, 2, 3}; // a lane carries none: not encoded
    wire = bytes_of(lane);
    EXPECT_EQ(wire.size(), kHeaderSize + 8);
    ASSERT_EQ(decode(wire.data(), wire.size(), m, used), DecodeResult::complete);
    EXPECT_EQ(m.type, MessageType::lane);
    EXPECT_EQ(m.lane_token, 42u);
    EXPECT_TRUE(m.private_data.empty());

    Message ok;
    ok.type = MessageType::lane_ok;
    wire = bytes_of(ok);
    EXPECT_EQ(wire.size(), kHeaderSize);
    ASSERT_EQ(decode(wire.data(), wire.size(), m, used), DecodeResult::complete);
    EXPECT_EQ(m.type, MessageType::lane_ok);

    // A lane with no token is not encoded.
    std::vector<std::uint8_t> out;
    lane.lane_token = 0;
    EXPECT_FALSE(encode(lane, out));
    EXPECT_TRUE(out.empty());
}

TEST(CmWire, LaneMalformedForms)
{
    auto expect_malformed = [](std::vector<std::uint8_t> w, const char* what) {
        Message m;
        std::size_t used = 0;
        EXPECT_EQ(decode(w.data(), w.size(), m, used), DecodeResult::malformed) << what;
    };
    Message reply = sample(MessageType::reply, 0);
    reply.lane_token = 5;
    reply.lane_port = 7;
    const auto offer = bytes_of(reply);
    auto w = offer;
    std::fill(w.begin() + kHeaderSize + 4, w.begin() + kHeaderSize + 12, 0);
    expect_malformed(w, "offer with token 0");
    w = offer;
    std::fill(w.begin() + kHeaderSize + 12, w.begin() + kHeaderSize + 16, 0);
    expect_malformed(w, "offer with port 0");
    w = offer;
    w[kHeaderSize + 13] = 1;
    expect_malformed(w, "offer with a port wider than 16 bits");
    w = offer;
    w[6] = 3;
    expect_malformed(w, "lane and datagram flags together");
    w = bytes_of(sample(MessageType::request, 0));
    w[6] = 2;
    expect_malformed(w, "lane flag on a request");
    Message lane;
    lane.type = MessageType::lane;
    lane.lane_token = 9;
    w = bytes_of(lane);
    std::fill(w.begin() + kHeaderSize, w.end(), 0);
    expect_malformed(w, "lane with token 0");
    w = bytes_of(lane);
    w[11] = 12;
    w.insert(w.end(), 4, 0);
    expect_malformed(w, "lane with a longer body");
    w = bytes_of(lane);
    w[6] = 2;
    expect_malformed(w, "lane flag on a lane");
    Message ok;
    ok.type = MessageType::lane_ok;
    w = bytes_of(ok);
    w[11] = 4;
    w.insert(w.end(), 4, 0);
    expect_malformed(w, "lane_ok with a body");
}
