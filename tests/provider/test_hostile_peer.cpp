// A peer that speaks the socket CM's handshake by hand over a loopback
// socket and then sends softnic frames the library's own peers never send.
// Found by tests/provider/fuzz_wire_peer.cpp; these are its regressions.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include <dat2/udat.h>

#include "test_ia.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <endian.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

constexpr DAT_RETURN kOk = DAT_SUCCESS;
constexpr DAT_TIMEOUT kWait = 5000000; // 5 s, in µs

void put32(std::vector<std::uint8_t>& out, std::uint32_t v)
{
    v = htobe32(v);
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    out.insert(out.end(), p, p + 4);
}

// A socket CM message (src/cm/cm_wire.cpp): magic "FDCM", version 1, type,
// two zero bytes, the body's length, the body; all big-endian.
std::vector<std::uint8_t> cm_message(std::uint8_t type, const std::vector<std::uint8_t>& body)
{
    std::vector<std::uint8_t> m;
    put32(m, 0x4644434d);
    m.insert(m.end(), {1, type, 0, 0});
    put32(m, static_cast<std::uint32_t>(body.size()));
    m.insert(m.end(), body.begin(), body.end());
    return m;
}

class HostilePeer : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(dat_ia_open(test_ia_name(), 16, &async, &ia), kOk);
        DAT_IA_ATTR attr{};
        ASSERT_EQ(dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &attr, 0, nullptr), kOk);
        std::memcpy(&address, attr.ia_address_ptr, sizeof address);
        if (ia_is_verbs(ia))
            GTEST_SKIP() << "the socket CM and softnic frames are the softnic's";
        ASSERT_EQ(dat_pz_create(ia, &pz), kOk);
        ASSERT_EQ(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto), kOk);
        ASSERT_EQ(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn), kOk);
        ASSERT_EQ(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd), kOk);
        ASSERT_EQ(dat_ep_create(ia, pz, dto, dto, conn, nullptr, &ep), kOk);
        ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
        while (qual == 15828 || qual == 45248) { // Debian's dtest/dapltest ports: leave them to those
            const DAT_PSP_HANDLE taken = psp;
            ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), kOk);
            ASSERT_EQ(dat_psp_free(taken), kOk);
        }
    }
    void TearDown() override
    {
        if (fd >= 0)
            ::close(fd);
        if (ia) {
            EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), kOk);
        }
    }

    // Connects to the PSP, sends a request, has `ep` accept it, reads the
    // reply and sends ready: the stream now belongs to the queue pairs.
    void handshake()
    {
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        ASSERT_GE(fd, 0);
        sockaddr_in to = address;
        to.sin_port = htons(static_cast<std::uint16_t>(qual));
        ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
        std::vector<std::uint8_t> body;
        put32(body, static_cast<std::uint32_t>(qual >> 32));
        put32(body, static_cast<std::uint32_t>(qual));
        put32(body, 0x4242); // our queue pair number
        put32(body, 0);      // no private data
        send(cm_message(1, body));
        DAT_EVENT e{};
        DAT_COUNT nmore;
        ASSERT_EQ(dat_evd_wait(cr_evd, kWait, 1, &e, &nmore), kOk);
        ASSERT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
        ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, ep, 0, nullptr), kOk);
        // The reply: a 12-byte header and an 8-byte body (qpn, no private data).
        std::uint8_t reply[20];
        std::size_t got = 0;
        while (got < sizeof reply) {
            pollfd p{fd, POLLIN, 0};
            ASSERT_GT(::poll(&p, 1, 5000), 0);
            const ssize_t n = ::recv(fd, reply + got, sizeof reply - got, 0);
            ASSERT_GT(n, 0);
            got += static_cast<std::size_t>(n);
        }
        ASSERT_EQ(reply[5], 2) << "not a reply";
        send(cm_message(4, {}));
        ASSERT_EQ(dat_evd_wait(conn, kWait, 1, &e, &nmore), kOk);
        ASSERT_EQ(e.event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    }
    void send(const std::vector<std::uint8_t>& bytes)
    {
        ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    }
    DAT_EVENT_NUMBER next_connection_event()
    {
        DAT_EVENT e{};
        DAT_COUNT nmore;
        EXPECT_EQ(dat_evd_wait(conn, kWait, 1, &e, &nmore), kOk);
        return e.event_number;
    }

    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, dto = DAT_HANDLE_NULL, conn = DAT_HANDLE_NULL, cr_evd = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_CONN_QUAL qual = 0;
    sockaddr_in address{};
    int fd = -1;
};

// A SEND frame whose payload the stream ends before: the connection is
// broken (no goodbye came), and looking for a goodbye behind the cut frame
// must not read past what arrived (it did: the frame's length moved the
// scan beyond the buffer; AddressSanitizer builds caught it).
TEST_F(HostilePeer, StreamEndingInsideAFrameBreaksTheConnection)
{
    handshake();
    if (HasFatalFailure() || IsSkipped())
        return;
    // A 24-byte frame header (type SEND, version 1, length 11) and 10 bytes.
    std::vector<std::uint8_t> frame = {1, 0, 0, 1};
    put32(frame, 11);
    frame.resize(24, 0);
    frame.resize(34, 0x77);
    send(frame);
    ::shutdown(fd, SHUT_WR);
    EXPECT_EQ(next_connection_event(), DAT_CONNECTION_EVENT_BROKEN);
}

} // namespace
