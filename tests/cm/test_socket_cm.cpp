// The socket CM's handshake on loopback: accept, reject, no listener, timeout, bad peers.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "socket_cm.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

using namespace fastdapl::cm;
using namespace std::chrono_literals;

namespace {

struct Result {
    std::uint64_t id;
    Outcome outcome;
    int fd;
    Message message;
};

struct Lane {
    std::uint64_t id;
    int fd;
    bool confirm;
};

// What a CM with lanes does with one: take it (confirming it on the
// passive side), or refuse it.
enum class Lanes { none, take, refuse };

// A CM whose callbacks land in queues the test waits on.
struct Harness {
    explicit Harness(Lanes lanes_mode = Lanes::none)
        : cm({[this](const Request& r) { push(requests, r); },
              [this](std::uint64_t id, Outcome o, int fd, const Message& m) {
                  push(results, Result{id, o, fd, m});
              },
              lanes_mode == Lanes::none ? std::function<bool(std::uint64_t, int, bool)>{}
                                        : [this, lanes_mode](std::uint64_t id, int fd, bool confirm) {
                                              if (lanes_mode == Lanes::refuse)
                                                  return false;
                                              if (confirm && !SocketCm::confirm_lane(fd))
                                                  return false;
                                              push(lanes, Lane{id, fd, confirm});
                                              return true;
                                          }})
    {
    }
    ~Harness()
    {
        for (int fd : fds)
            ::close(fd);
        for (const Lane& l : lanes)
            ::close(l.fd);
    }
    template <typename T>
    void push(std::deque<T>& q, T v)
    {
        std::lock_guard lock(mutex);
        q.push_back(std::move(v));
        cv.notify_all();
    }
    template <typename T>
    std::optional<T> pop(std::deque<T>& q, std::chrono::milliseconds timeout = 5s)
    {
        std::unique_lock lock(mutex);
        if (!cv.wait_for(lock, timeout, [&] { return !q.empty(); }))
            return std::nullopt;
        T v = std::move(q.front());
        q.pop_front();
        return v;
    }
    std::optional<Result> result_for(std::uint64_t id)
    {
        for (int tries = 0; tries < 4; ++tries) {
            auto r = pop(results);
            if (!r)
                return std::nullopt;
            if (r->fd >= 0)
                fds.push_back(r->fd);
            if (r->id == id)
                return r;
            others.push_back(*r);
        }
        return std::nullopt;
    }

    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Request> requests;
    std::deque<Result> results;
    std::deque<Lane> lanes;
    std::vector<Result> others;
    std::vector<int> fds;
    SocketCm cm;
};

sockaddr_in loopback()
{
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

std::vector<std::uint8_t> pdata(std::size_t n, std::uint8_t seed)
{
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = static_cast<std::uint8_t>(seed + i);
    return v;
}

} // namespace

TEST(SocketCm, ListenPicksAFreePortAndRefusesATakenOne)
{
    Harness h;
    std::uint64_t port = 0;
    ASSERT_EQ(h.cm.listen(loopback(), port, 1), 0);
    EXPECT_NE(port, 0);
    std::uint64_t same = port;
    EXPECT_EQ(h.cm.listen(loopback(), same, 2), EADDRINUSE);
    std::uint64_t other = 0;
    ASSERT_EQ(h.cm.listen(loopback(), other, 3), 0);
    EXPECT_NE(other, port);
}

// 64-bit qualifiers: those that map to one port share its socket, and a
// request reaches the listener of its whole qualifier.
TEST(SocketCm, QualifiersSharingAPortReachTheirOwnListeners)
{
    Harness h;
    std::uint64_t port = 0;
    ASSERT_EQ(h.cm.listen(loopback(), port, 1), 0);
    std::uint64_t wide = port | 0xaffa0000ull << 16, wider = port | 0x1234ull << 48;
    ASSERT_EQ(port_of_qualifier(wide), port);
    ASSERT_EQ(h.cm.listen(loopback(), wide, 2), 0);
    ASSERT_EQ(h.cm.listen(loopback(), wider, 3), 0);
    std::uint64_t again = wide;
    EXPECT_EQ(h.cm.listen(loopback(), again, 4), EADDRINUSE);
    for (auto [qual, listener] : {std::pair{wide, 2u}, {wider, 3u}, {port, 1u}}) {
        const std::uint64_t attempt = h.cm.connect(loopback(), qual, 1, {}, 5s);
        auto req = h.pop(h.requests);
        ASSERT_TRUE(req);
        EXPECT_EQ(req->listener, listener);
        EXPECT_EQ(req->conn_qual, qual);
        ASSERT_TRUE(h.cm.reject(req->id, {}));
        auto r = h.result_for(attempt);
        ASSERT_TRUE(r);
        EXPECT_EQ(r->outcome, Outcome::rejected);
    }
    // A qualifier nobody listens for, on a port that is listened on.
    auto r = h.result_for(h.cm.connect(loopback(), port | 0x77ull << 32, 1, {}, 5s));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, Outcome::no_listener);
    // The port stays open while any of its qualifiers does.
    h.cm.unlisten(1);
    h.cm.unlisten(2);
    const std::uint64_t attempt = h.cm.connect(loopback(), wider, 1, {}, 5s);
    auto req = h.pop(h.requests);
    ASSERT_TRUE(req);
    EXPECT_EQ(req->listener, 3u);
    ASSERT_TRUE(h.cm.reject(req->id, {}));
    ASSERT_TRUE(h.result_for(attempt));
    h.cm.unlisten(3);
    r = h.result_for(h.cm.connect(loopback(), wider, 1, {}, 300ms));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, Outcome::no_listener);
}

TEST(SocketCm, PortOfQualifier)
{
    EXPECT_EQ(port_of_qualifier(0), 0);
    EXPECT_EQ(port_of_qualifier(1), 1);
    EXPECT_EQ(port_of_qualifier(0xffff), 0xffff);
    EXPECT_EQ(port_of_qualifier(0xaffab1e), 0xab1e);
    EXPECT_EQ(port_of_qualifier(0x10000), 1);
    EXPECT_EQ(port_of_qualifier(0x5000000000000ull), 5);
}

TEST(SocketCm, AcceptCarriesPrivateDataBothWaysAndHandsOverConnectedSockets)
{
    Harness h;
    std::uint64_t port = 0;
    ASSERT_EQ(h.cm.listen(loopback(), port, 7), 0);
    const auto ask = pdata(64, 1), answer = pdata(200, 100);
    const std::uint64_t attempt = h.cm.connect(loopback(), port, 0x101, ask, 5s);
    auto req = h.pop(h.requests);
    ASSERT_TRUE(req);
    EXPECT_EQ(req->listener, 7u);
    EXPECT_EQ(req->conn_qual, port);
    EXPECT_EQ(req->remote_qpn, 0x101u);
    EXPECT_EQ(req->private_data, ask);
    ASSERT_EQ(req->remote.ss_family, AF_INET);
    EXPECT_EQ(ntohl(reinterpret_cast<const sockaddr_in&>(req->remote).sin_addr.s_addr), INADDR_LOOPBACK);
    ASSERT_TRUE(h.cm.accept(req->id, 0x202, answer, 5s));
    EXPECT_FALSE(h.cm.accept(req->id, 0x202, answer, 5s)); // answered once only
    auto active = h.result_for(attempt);
    ASSERT_TRUE(active);
    EXPECT_EQ(active->outcome, Outcome::established);
    EXPECT_EQ(active->message.private_data, answer);
    EXPECT_EQ(active->message.qpn, 0x202u);
    auto passive = h.result_for(req->id);
    if (!passive) { // it may have arrived first
        for (auto& r : h.others)
            if (r.id == req->id)
                passive = r;
    }
    ASSERT_TRUE(passive);
    EXPECT_EQ(passive->outcome, Outcome::established);
    ASSERT_GE(active->fd, 0);
    ASSERT_GE(passive->fd, 0);
    ASSERT_EQ(::write(active->fd, "ping", 4), 4);
    char buf[4];
    ASSERT_EQ(::read(passive->fd, buf, 4), 4);
    EXPECT_EQ(std::memcmp(buf, "ping", 4), 0);
}

TEST(SocketCm, RejectDeliversThePeersPrivateData)
{
    Harness h;
    std::uint64_t port = 0;
    ASSERT_EQ(h.cm.listen(loopback(), port, 1), 0);
    const std::uint64_t attempt = h.cm.connect(loopback(), port, 1, {}, 5s);
    auto req = h.pop(h.requests);
    ASSERT_TRUE(req);
    ASSERT_TRUE(h.cm.reject(req->id, pdata(80, 9)));
    EXPECT_FALSE(h.cm.reject(req->id, {}));
    auto r = h.result_for(attempt);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, Outcome::rejected);
    EXPECT_EQ(r->message.private_data, pdata(80, 9));
    EXPECT_EQ(r->fd, -1);
}

TEST(SocketCm, NoListenerAndListenerGoneWhileWaiting)
{
    Harness h;
    std::uint64_t port = 0;
    ASSERT_EQ(h.cm.listen(loopback(), port, 1), 0);
    h.cm.unlisten(1); // the port is free again: nobody listens there
    auto r = h.result_for(h.cm.connect(loopback(), port, 1, {}, 5s));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, Outcome::no_listener);

    ASSERT_EQ(h.cm.listen(loopback(), port, 2), 0);
    const std::uint64_t attempt = h.cm.connect(loopback(), port, 1, {}, 5s);
    ASSERT_TRUE(h.pop(h.requests));
    h.cm.unlisten(2);
    r = h.result_for(attempt);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, Outcome::no_listener);
}

// A request that comes just before its listener (a consumer that tells the
// peer where to connect, then creates the service point) is tried again for
// a short while instead of failing at once; long past that, it fails.
TEST(SocketCm, RequestBeforeItsListenerIsTriedAgainBriefly)
{
    Harness h;
    std::uint64_t port = 0;
    ASSERT_EQ(h.cm.listen(loopback(), port, 1), 0);
    h.cm.unlisten(1); // a free port
    const std::uint64_t attempt = h.cm.connect(loopback(), port, 1, {}, 5s);
    std::this_thread::sleep_for(100ms);
    ASSERT_EQ(h.cm.listen(loopback(), port, 2), 0);
    auto req = h.pop(h.requests);
    ASSERT_TRUE(req);
    ASSERT_TRUE(h.cm.accept(req->id, 2, {}, 5s));
    auto r = h.result_for(attempt);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, Outcome::established);
    h.cm.unlisten(2);

    // Nobody ever listens: no_listener, after the grace (3 s) and well
    // before the timeout.
    auto start = std::chrono::steady_clock::now();
    r = h.result_for(h.cm.connect(loopback(), port, 1, {}, 30s));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, Outcome::no_listener);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 2900ms);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);

    // A timeout shorter than the grace ends the retries: still no_listener.
    start = std::chrono::steady_clock::now();
    r = h.result_for(h.cm.connect(loopback(), port, 1, {}, 300ms));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, Outcome::no_listener);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2500ms);
}

// A listener that comes seconds late (its peer announced it over a lossy
// link) is still found within the grace.
TEST(SocketCm, ListenerTwoSecondsLateIsStillFound)
{
    Harness h;
    std::uint64_t port = 0;
    ASSERT_EQ(h.cm.listen(loopback(), port, 1), 0);
    h.cm.unlisten(1);
    const std::uint64_t attempt = h.cm.connect(loopback(), port, 1, {}, 30s);
    std::this_thread::sleep_for(2s);
    ASSERT_EQ(h.cm.listen(loopback(), port, 2), 0);
    auto req = h.pop(h.requests);
    ASSERT_TRUE(req);
    ASSERT_TRUE(h.cm.accept(req->id, 2, {}, 5s));
    auto r = h.result_for(attempt);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, Outcome::established);
    h.cm.unlisten(2);
}

TEST(SocketCm, SilentPeerTimesOut)
{
    Harness h;
    const int silent = ::socket(AF_INET, SOCK_STREAM, 0); // accepts in the kernel, never answers
    sockaddr_in a = loopback();
    ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(silent, 4), 0);
    socklen_t len = sizeof a;
    getsockname(silent, reinterpret_cast<sockaddr*>(&a), &len);
    const auto start = std::chrono::steady_clock::now();
    auto r = h.result_for(h.cm.connect(loopback(), ntohs(a.sin_port), 1, {}, 300ms));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, Outcome::timed_out);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
    ::close(silent);
}

TEST(SocketCm, MalformedRequestDropsOnlyThatConnection)
{
    Harness h;
    std::uint64_t port = 0;
    ASSERT_EQ(h.cm.listen(loopback(), port, 1), 0);
    const int raw = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback();
    a.sin_port = htons(port);
    ASSERT_EQ(::connect(raw, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const char junk[] = "GET / HTTP/1.0\r\n\r\n";
    ASSERT_EQ(::write(raw, junk, sizeof junk), static_cast<ssize_t>(sizeof junk));
    char c;
    EXPECT_EQ(::read(raw, &c, 1), 0); // closed on us, nothing sent back
    ::close(raw);
    EXPECT_FALSE(h.pop(h.requests, 100ms)); // the consumer never saw it
    // A well-formed request right after is served normally.
    const std::uint64_t attempt = h.cm.connect(loopback(), port, 1, pdata(3, 3), 5s);
    auto req = h.pop(h.requests);
    ASSERT_TRUE(req);
    ASSERT_TRUE(h.cm.accept(req->id, 2, {}, 5s));
    auto r = h.result_for(attempt);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, Outcome::established);
}

TEST(SocketCm, ActiveSideMalformedReplyFails)
{
    Harness h;
    const int fake = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback();
    ASSERT_EQ(::bind(fake, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(fake, 4), 0);
    socklen_t len = sizeof a;
    getsockname(fake, reinterpret_cast<sockaddr*>(&a), &len);
    const std::uint64_t attempt = h.cm.connect(loopback(), ntohs(a.sin_port), 1, {}, 5s);
    const int conn = ::accept(fake, nullptr, nullptr);
    ASSERT_GE(conn, 0);
    const char junk[16] = "FDCM\x07 nonsense";
    ASSERT_EQ(::write(conn, junk, sizeof junk), static_cast<ssize_t>(sizeof junk));
    auto r = h.result_for(attempt);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, Outcome::failed);
    ::close(conn);
    ::close(fake);
}

TEST(SocketCm, DatagramEndpointsExchangeTheirUdpPorts)
{
    Harness h;
    std::uint64_t port = 0;
    ASSERT_EQ(h.cm.listen(loopback(), port, 7), 0);
    const std::uint64_t attempt = h.cm.connect(loopback(), port, 0x101, pdata(4, 1), 5s, 0x4001);
    auto req = h.pop(h.requests);
    ASSERT_TRUE(req);
    EXPECT_TRUE(req->datagram);
    EXPECT_EQ(req->datagram_port, 0x4001);
    EXPECT_EQ(req->remote_qpn, 0x101u);
    ASSERT_TRUE(h.cm.accept(req->id, 0x202, pdata(4, 9), 5s, 0x4002));
    auto active = h.result_for(attempt);
    ASSERT_TRUE(active);
    EXPECT_EQ(active->outcome, Outcome::established);
    EXPECT_TRUE(active->message.datagram);
    EXPECT_EQ(active->message.datagram_port, 0x4002);
    EXPECT_EQ(active->message.qpn, 0x202u);
    if (active->fd >= 0)
        ::close(active->fd);
}

TEST(SocketCm, DatagramRequestAnsweredByAStreamEndpointFails)
{
    Harness h;
    std::uint64_t port = 0;
    ASSERT_EQ(h.cm.listen(loopback(), port, 7), 0);
    const std::uint64_t attempt = h.cm.connect(loopback(), port, 0x101, {}, 5s, 0x4001);
    auto req = h.pop(h.requests);
    ASSERT_TRUE(req);
    ASSERT_TRUE(h.cm.accept(req->id, 0x202, {}, 5s)); // no datagram port: an RC endpoint's reply
    auto active = h.result_for(attempt);
    ASSERT_TRUE(active);
    EXPECT_EQ(active->outcome, Outcome::failed);
    EXPECT_LT(active->fd, 0);
}

namespace {

// Connects `active` to a listener of `passive` and accepts: the two
// established sockets (active's first).
// The main connection (a to p) still carries bytes.
void expect_stands(int a, int p)
{
    ASSERT_EQ(::write(a, "main", 4), 4);
    char buf[4];
    ASSERT_EQ(::read(p, buf, 4), 4);
    EXPECT_EQ(std::memcmp(buf, "main", 4), 0);
}

std::pair<int, int> establish(Harness& active, Harness& passive, std::uint64_t& attempt, std::uint64_t& request)
{
    std::uint64_t port = 0;
    EXPECT_EQ(passive.cm.listen(loopback(), port, 1), 0);
    attempt = active.cm.connect(loopback(), port, 0x11, {}, 5s);
    auto req = passive.pop(passive.requests);
    EXPECT_TRUE(req);
    if (!req)
        return {-1, -1};
    request = req->id;
    EXPECT_TRUE(passive.cm.accept(req->id, 0x22, {}, 5s));
    auto a = active.result_for(attempt);
    auto p = passive.result_for(req->id);
    EXPECT_TRUE(a && p);
    if (!a || !p)
        return {-1, -1};
    EXPECT_EQ(a->outcome, Outcome::established);
    EXPECT_EQ(p->outcome, Outcome::established);
    return {a->fd, p->fd};
}

} // namespace

TEST(SocketCm, LaneOpensWhenTheActiveSideWantsItOnBothSides)
{
    Harness active(Lanes::take), passive(Lanes::take);
    std::uint64_t attempt = 0, request = 0;
    const auto [a, p] = establish(active, passive, attempt, request);
    ASSERT_GE(a, 0);
    ASSERT_GE(p, 0);
    // Offered, not opened until wanted: the passive side cannot open it,
    // ids that are not the active side's established connection do nothing.
    EXPECT_FALSE(active.pop(active.lanes, 200ms));
    EXPECT_FALSE(passive.pop(passive.lanes, 10ms));
    passive.cm.want_lane(request);
    active.cm.want_lane(attempt + 1000);
    EXPECT_FALSE(active.pop(active.lanes, 200ms));
    EXPECT_FALSE(passive.pop(passive.lanes, 10ms));
    active.cm.want_lane(attempt);
    active.cm.want_lane(attempt); // once
    auto passive_lane = passive.pop(passive.lanes);
    auto active_lane = active.pop(active.lanes);
    ASSERT_TRUE(passive_lane);
    ASSERT_TRUE(active_lane);
    EXPECT_EQ(passive_lane->id, request); // the connection each is for
    EXPECT_TRUE(passive_lane->confirm);
    EXPECT_EQ(active_lane->id, attempt);
    EXPECT_FALSE(active_lane->confirm);
    // The two lanes are one connection, with nothing of the handshake left
    // on it (the active CM read exactly the confirmation), both ways.
    ASSERT_EQ(::write(active_lane->fd, "lane", 4), 4);
    char buf[8];
    ASSERT_EQ(::read(passive_lane->fd, buf, sizeof buf), 4);
    EXPECT_EQ(std::memcmp(buf, "lane", 4), 0);
    ASSERT_EQ(::write(passive_lane->fd, "back", 4), 4);
    ASSERT_EQ(::read(active_lane->fd, buf, sizeof buf), 4);
    EXPECT_EQ(std::memcmp(buf, "back", 4), 0);
    // Handed over blocking, as the main connection is.
    EXPECT_EQ(fcntl(active_lane->fd, F_GETFL) & O_NONBLOCK, 0);
    EXPECT_EQ(fcntl(passive_lane->fd, F_GETFL) & O_NONBLOCK, 0);
    EXPECT_FALSE(active.pop(active.lanes, 100ms)); // one each
    EXPECT_FALSE(passive.pop(passive.lanes, 10ms));
}

TEST(SocketCm, NoLaneForAConnectionDropped)
{
    Harness active(Lanes::take), passive(Lanes::take);
    std::uint64_t attempt = 0, request = 0;
    {
        // Dropped on the active side: the offer it had is forgotten.
        const auto [a, p] = establish(active, passive, attempt, request);
        ASSERT_GE(a, 0);
        active.cm.drop_lane(attempt);
        active.cm.want_lane(attempt);
        EXPECT_FALSE(active.pop(active.lanes, 300ms));
        EXPECT_FALSE(passive.pop(passive.lanes, 10ms));
    }
    {
        // Dropped on the passive side: the lane the active side then opens
        // names a token no longer offered, and is closed.
        const auto [a, p] = establish(active, passive, attempt, request);
        ASSERT_GE(a, 0);
        passive.cm.drop_lane(request);
        active.cm.want_lane(attempt);
        EXPECT_FALSE(active.pop(active.lanes, 300ms));
        EXPECT_FALSE(passive.pop(passive.lanes, 10ms));
        // The connection stands.
        expect_stands(a, p);
    }
}

TEST(SocketCm, NoLaneUnlessBothSidesTakeLanes)
{
    {
        Harness active(Lanes::take), passive; // the passive side offers none
        std::uint64_t attempt = 0, request = 0;
        const auto [a, p] = establish(active, passive, attempt, request);
        ASSERT_GE(a, 0);
        active.cm.want_lane(attempt);
        EXPECT_FALSE(active.pop(active.lanes, 300ms));
    }
    {
        Harness active, passive(Lanes::take); // offered, never opened
        std::uint64_t attempt = 0, request = 0;
        const auto [a, p] = establish(active, passive, attempt, request);
        ASSERT_GE(p, 0);
        active.cm.want_lane(attempt);
        EXPECT_FALSE(passive.pop(passive.lanes, 300ms));
    }
    {
        // The passive side's provider refuses it (its queue pair is gone):
        // the active side's attempt ends with no lane, and its connection stands.
        Harness active(Lanes::take), passive(Lanes::refuse);
        std::uint64_t attempt = 0, request = 0;
        const auto [a, p] = establish(active, passive, attempt, request);
        ASSERT_GE(a, 0);
        active.cm.want_lane(attempt);
        EXPECT_FALSE(active.pop(active.lanes, 300ms));
        expect_stands(a, p);
    }
}

TEST(SocketCm, LaneWithAnUnknownTokenIsClosed)
{
    Harness active(Lanes::take), passive(Lanes::take);
    std::uint64_t attempt = 0, request = 0;
    const auto [a, p] = establish(active, passive, attempt, request);
    ASSERT_GE(a, 0);
    active.cm.want_lane(attempt);
    ASSERT_TRUE(passive.pop(passive.lanes));
    ASSERT_TRUE(active.pop(active.lanes));
    // Another client names tokens it guessed, on any port of the CM: each
    // connection is closed on it, unanswered.
    sockaddr_in to = loopback();
    std::uint64_t port = 0;
    ASSERT_EQ(passive.cm.listen(loopback(), port, 2), 0);
    to.sin_port = htons(static_cast<std::uint16_t>(port));
    for (std::uint64_t token : {std::uint64_t{1}, ~std::uint64_t{0}}) {
        const int raw = ::socket(AF_INET, SOCK_STREAM, 0);
        ASSERT_EQ(::connect(raw, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
        Message lane;
        lane.type = MessageType::lane;
        lane.lane_token = token;
        std::vector<std::uint8_t> bytes;
        ASSERT_TRUE(encode(lane, bytes));
        ASSERT_EQ(::write(raw, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
        char c;
        EXPECT_EQ(::read(raw, &c, 1), 0); // closed, nothing sent back
        ::close(raw);
    }
    EXPECT_FALSE(passive.pop(passive.lanes, 100ms));
    // The connection and its lane are untouched.
    expect_stands(a, p);
}
