// A peer that speaks the socket CM's handshake by hand over a loopback
// socket and then sends softnic frames the library's own peers never send.
// Found by tests/provider/fuzz_wire_peer.cpp; these are its regressions.
// On fastdapl-shm (FASTDAPL_TEST_IA), the peer speaks the handshake over the
// abstract Unix socket and then attacks the shared-memory link: descriptors
// that are not sealed rings, stray bytes, corrupt ring counters.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#define DAT_EXTENSIONS 1
#include <dat2/udat.h>

#include <dat2/dat_ib_extensions.h>

#include "test_ia.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <endian.h>
#include <netinet/in.h>
#include <poll.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
        shm = provider_specific(ia, "FASTDAPL_DATA_PATH") == "softnic shm";
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

    // Connects to the PSP's port: TCP, or the local CM's abstract Unix name.
    void open_cm_stream()
    {
        if (shm) { // the socket CM's local flavour: "fastdapl-shm/<uid>/<port>", abstract
            fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
            ASSERT_GE(fd, 0);
            sockaddr_un to{};
            to.sun_family = AF_UNIX;
            const int n = std::snprintf(to.sun_path + 1, sizeof to.sun_path - 1, "fastdapl-shm/%u/%u", getuid(),
                                        static_cast<unsigned>(qual & 0xffff));
            const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
            ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), len), 0);
        } else {
            fd = ::socket(AF_INET, SOCK_STREAM, 0);
            ASSERT_GE(fd, 0);
            sockaddr_in to = address;
            to.sin_port = htons(static_cast<std::uint16_t>(qual));
            ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
        }
    }
    // Sends a request for `qual` from queue pair 0x4242 (with `udp_port`: a
    // UD endpoint's, the datagram flag set), has `accepter` accept it, and
    // reads the reply's first `size` bytes into `reply`.
    void request_accepted_by(DAT_EP_HANDLE accepter, std::uint8_t* reply, std::size_t size,
                             const std::uint16_t* udp_port = nullptr)
    {
        std::vector<std::uint8_t> body;
        put32(body, static_cast<std::uint32_t>(qual >> 32));
        put32(body, static_cast<std::uint32_t>(qual));
        put32(body, 0x4242); // our queue pair number
        if (udp_port)
            put32(body, *udp_port);
        put32(body, 0); // no private data
        std::vector<std::uint8_t> request = cm_message(1, body);
        if (udp_port)
            request[6] = 1; // the datagram flag
        send(request);
        DAT_EVENT e{};
        DAT_COUNT nmore;
        ASSERT_EQ(dat_evd_wait(cr_evd, kWait, 1, &e, &nmore), kOk);
        ASSERT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
        ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, accepter, 0, nullptr), kOk);
        std::size_t got = 0;
        while (got < size) {
            pollfd p{fd, POLLIN, 0};
            ASSERT_GT(::poll(&p, 1, 5000), 0);
            const ssize_t n = ::recv(fd, reply + got, size - got, 0);
            ASSERT_GT(n, 0);
            got += static_cast<std::size_t>(n);
        }
    }
    // Connects to the PSP, sends a request, has `ep` accept it, reads the
    // reply and sends ready: the stream now belongs to the queue pairs.
    void handshake()
    {
        open_cm_stream();
        if (HasFatalFailure())
            return;
        // The reply: a 12-byte header and an 8-byte body (qpn, no private data).
        std::uint8_t reply[20];
        request_accepted_by(ep, reply, sizeof reply);
        if (HasFatalFailure())
            return;
        ASSERT_EQ(reply[5], 2) << "not a reply";
        send(cm_message(4, {}));
        DAT_EVENT e{};
        DAT_COUNT nmore;
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
    bool shm = false;
};

// The shared-memory link (src/softnic/shm_link): a page of counters (head
// at 0, tail at 64, reader_sleeps at 128, writer_waits at 192), then 2 MiB
// of ring; each side sends its receive ring's memfd, sealed against
// shrinking, with the byte 'R'; 'W' wakes, 'G' says goodbye.
constexpr std::size_t kRingMap = 4096 + (2u << 20);

// Sends one byte with a descriptor (or none).
void send_with_fd(int socket, char byte, int passed)
{
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (passed >= 0) {
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &passed, sizeof passed);
    }
    ASSERT_EQ(::sendmsg(socket, &msg, MSG_NOSIGNAL), 1);
}

// A memfd of `bytes`, sealed against shrinking or not.
int ring_memfd(std::size_t bytes, bool sealed)
{
    const int m = memfd_create("hostile-ring", MFD_ALLOW_SEALING);
    if (m < 0 || ftruncate(m, static_cast<off_t>(bytes)) != 0)
        return -1;
    if (sealed && fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        return -1;
    return m;
}

// The library's receive ring, which it sent after the handshake.
void* take_library_ring(int socket)
{
    char byte = 0;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    pollfd p{socket, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0 || ::recvmsg(socket, &msg, 0) != 1 || byte != 'R')
        return nullptr;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    if (!c || c->cmsg_type != SCM_RIGHTS)
        return nullptr;
    int ring;
    std::memcpy(&ring, CMSG_DATA(c), sizeof ring);
    void* map = ::mmap(nullptr, kRingMap, PROT_READ | PROT_WRITE, MAP_SHARED, ring, 0);
    ::close(ring);
    return map == MAP_FAILED ? nullptr : map;
}

// A SEND frame whose payload the stream ends before: the connection is
// broken (no goodbye came), and looking for a goodbye behind the cut frame
// must not read past what arrived (it did: the frame's length moved the
// scan beyond the buffer; AddressSanitizer builds caught it).
TEST_F(HostilePeer, StreamEndingInsideAFrameBreaksTheConnection)
{
    if (shm)
        GTEST_SKIP() << "a TCP stream's frames; fastdapl-shm's link has its own tests below";
    handshake();
    if (HasFatalFailure() || IsSkipped())
        return;
    // A 24-byte frame header (type SEND, version 2, length 11) and 10 bytes.
    std::vector<std::uint8_t> frame = {1, 0, 0, 2};
    put32(frame, 11);
    frame.resize(24, 0);
    frame.resize(34, 0x77);
    send(frame);
    ::shutdown(fd, SHUT_WR);
    EXPECT_EQ(next_connection_event(), DAT_CONNECTION_EVENT_BROKEN);
}

// fastdapl-shm: what the peer passes for its ring, and what it does to the
// counters of the ring it writes into. Each attack breaks that connection
// (BROKEN), nothing else: the IA goes on accepting, and the process lives
// (an unsealed ring the peer could shrink would turn an access into SIGBUS).
// A SEND may carry ACKs the sender owed (the header's byte 2 counts them):
// one that carries more than the library has requests in flight, or
// carried ACKs on a frame that may not carry them, breaks the connection.
enum class ShmAttack {
    unsealed_ring,
    short_ring,
    no_descriptor,
    two_descriptors,
    stray_byte,
    head_past_ring,
    bad_frame,
    unowed_carried_acks,
    acks_on_a_goodbye,
    tail_past_head, // the ring the library writes into says more was read than written
};

class HostileShmPeer : public HostilePeer, public ::testing::WithParamInterface<ShmAttack> {};

TEST_P(HostileShmPeer, BreaksOnlyItsConnection)
{
    if (!shm)
        GTEST_SKIP() << "fastdapl-shm only (FASTDAPL_TEST_IA=fastdapl-shm)";
    handshake();
    if (HasFatalFailure() || IsSkipped())
        return;
    void* theirs = take_library_ring(fd); // where we write
    ASSERT_NE(theirs, nullptr);
    auto* const counters = static_cast<std::uint8_t*>(theirs);
    switch (GetParam()) {
    case ShmAttack::unsealed_ring: {
        const int m = ring_memfd(kRingMap, false);
        ASSERT_GE(m, 0);
        send_with_fd(fd, 'R', m);
        ::close(m);
        break;
    }
    case ShmAttack::short_ring: {
        const int m = ring_memfd(4096, true);
        ASSERT_GE(m, 0);
        send_with_fd(fd, 'R', m);
        ::close(m);
        break;
    }
    case ShmAttack::no_descriptor:
        send_with_fd(fd, 'R', -1);
        break;
    case ShmAttack::two_descriptors: {
        const int m = ring_memfd(kRingMap, true);
        ASSERT_GE(m, 0);
        send_with_fd(fd, 'R', m);
        send_with_fd(fd, 'R', m); // a second ring
        ::close(m);
        break;
    }
    case ShmAttack::stray_byte:
        send_with_fd(fd, 'x', -1);
        break;
    case ShmAttack::head_past_ring: // claims more bytes than the ring holds
        reinterpret_cast<std::atomic<std::uint64_t>*>(counters)->store(3u << 20);
        send_with_fd(fd, 'W', -1);
        break;
    case ShmAttack::bad_frame: { // a frame of version 9, properly in the ring
        static const std::uint8_t frame[24] = {1, 0, 0, 9};
        std::memcpy(counters + 4096, frame, sizeof frame);
        reinterpret_cast<std::atomic<std::uint64_t>*>(counters)->store(sizeof frame);
        send_with_fd(fd, 'W', -1);
        break;
    }
    case ShmAttack::tail_past_head: { // the library's first write (a small send, built in place) meets it
        const int m = ring_memfd(kRingMap, true);
        ASSERT_GE(m, 0);
        void* ring = ::mmap(nullptr, kRingMap, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0);
        ASSERT_NE(ring, MAP_FAILED);
        reinterpret_cast<std::atomic<std::uint64_t>*>(static_cast<std::uint8_t*>(ring) + 64)->store(5u << 20);
        send_with_fd(fd, 'R', m);
        ::munmap(ring, kRingMap);
        ::close(m);
        break;
    }
    case ShmAttack::unowed_carried_acks: // an empty SEND carrying 8 ACKs: the library has at most 1 request in flight
    case ShmAttack::acks_on_a_goodbye: { // a goodbye carrying one (read as a goodbye, the end would be orderly)
        const bool goodbye = GetParam() == ShmAttack::acks_on_a_goodbye;
        const std::uint8_t frame[24] = {static_cast<std::uint8_t>(goodbye ? 7 : 1), 0,
                                        static_cast<std::uint8_t>(goodbye ? 1 : 8), 2};
        std::memcpy(counters + 4096, frame, sizeof frame);
        reinterpret_cast<std::atomic<std::uint64_t>*>(counters)->store(sizeof frame);
        send_with_fd(fd, 'W', -1);
        break;
    }
    }
    // Something for the library to send, so that it looks at the link even
    // where the attack is only on the socket.
    std::uint64_t word = 0;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lctx;
    DAT_RMR_CONTEXT rctx;
    DAT_REGION_DESCRIPTION region{};
    region.for_va = &word;
    ASSERT_EQ(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, sizeof word, pz, DAT_MEM_PRIV_ALL_FLAG,
                             DAT_VA_TYPE_VA, &lmr, &lctx, &rctx, nullptr, nullptr),
              kOk);
    DAT_LMR_TRIPLET iov{reinterpret_cast<DAT_VADDR>(&word), sizeof word, lctx};
    DAT_DTO_COOKIE cookie{};
    EXPECT_EQ(dat_ep_post_send(ep, 1, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG), kOk);
    EXPECT_EQ(next_connection_event(), DAT_CONNECTION_EVENT_BROKEN);
    ::munmap(theirs, kRingMap);
    // The IA still works: another connection, a well-behaved one, is set up.
    ::close(fd);
    fd = -1;
    ASSERT_EQ(dat_ep_free(ep), kOk);
    DAT_EVENT e{};
    DAT_COUNT nmore;
    while (dat_evd_dequeue(dto, &e) == kOk) {
    }
    ASSERT_EQ(dat_ep_create(ia, pz, dto, dto, conn, nullptr, &ep), kOk);
    handshake();
    EXPECT_NE(take_library_ring(fd), nullptr);
    EXPECT_EQ(dat_lmr_free(lmr), kOk);
    (void)nmore;
}

INSTANTIATE_TEST_SUITE_P(Attacks, HostileShmPeer,
                         ::testing::Values(ShmAttack::unsealed_ring, ShmAttack::short_ring, ShmAttack::no_descriptor,
                                           ShmAttack::two_descriptors, ShmAttack::stray_byte,
                                           ShmAttack::head_past_ring, ShmAttack::bad_frame,
                                           ShmAttack::unowed_carried_acks, ShmAttack::acks_on_a_goodbye,
                                           ShmAttack::tail_past_head));

// fastdapl-shm's pulled WRITE (cross-memory attach). The peer takes part
// in the probe: its ring's control page names where the ring is mapped in
// its memory (offset 256) and a probe word (264), which the library reads
// there with process_vm_readv (the peer is this process), then sets the
// word at 272 to say it pulls. The peer then writes a frame of type 9 (a
// WRITE to addr/rkey whose payload lists source segments in its memory,
// 16 bytes each: address, length, big-endian). A well-formed one lands
// (the control); one whose list is malformed or names memory that is not
// there, or that goes past the key, breaks the connection with the target
// untouched. So does an answer to a small READ that says "pull it
// yourself" (flag 16) when the library did not ask for that.
enum class PullAttack {
    well_formed,
    ragged_list,
    empty_segment,
    wrapping_segment,
    too_many_segments,
    unmapped_source,
    past_the_key,
    unasked_pulled_answer,
};

class HostilePullPeer : public HostilePeer, public ::testing::WithParamInterface<PullAttack> {};

std::vector<std::uint8_t> softnic_frame(std::uint8_t type, std::uint8_t flags, std::uint64_t addr, std::uint32_t rkey,
                                        const std::vector<std::uint8_t>& payload)
{
    std::vector<std::uint8_t> f = {type, flags, 0, 2}; // no carried ACKs, wire version 2
    put32(f, static_cast<std::uint32_t>(payload.size()));
    put32(f, static_cast<std::uint32_t>(addr >> 32));
    put32(f, static_cast<std::uint32_t>(addr));
    put32(f, rkey);
    put32(f, 0);
    f.insert(f.end(), payload.begin(), payload.end());
    return f;
}

void put_segment(std::vector<std::uint8_t>& out, const void* addr, std::uint64_t length)
{
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    put32(out, static_cast<std::uint32_t>(static_cast<std::uint64_t>(a) >> 32));
    put32(out, static_cast<std::uint32_t>(a));
    put32(out, static_cast<std::uint32_t>(length >> 32));
    put32(out, static_cast<std::uint32_t>(length));
}

TEST_P(HostilePullPeer, BreaksOnlyItsConnectionAndLeavesTheTargetUntouched)
{
    if (!shm)
        GTEST_SKIP() << "fastdapl-shm only (FASTDAPL_TEST_IA=fastdapl-shm)";
    if (const char* mode = std::getenv("FASTDAPL_SHM_CMA");
        !mode || (std::strcmp(mode, "auto") != 0 && std::strcmp(mode, "1") != 0))
        GTEST_SKIP() << "cross-memory attach is not asked for (FASTDAPL_SHM_CMA=auto; provider-hostile-pull-peer-shm)";
    handshake();
    if (HasFatalFailure() || IsSkipped())
        return;
    void* theirs = take_library_ring(fd); // where we write
    ASSERT_NE(theirs, nullptr);
    const int m = ring_memfd(kRingMap, true);
    ASSERT_GE(m, 0);
    void* ours = ::mmap(nullptr, kRingMap, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0);
    ASSERT_NE(ours, MAP_FAILED);
    auto* const our_control = static_cast<std::uint8_t*>(ours);
    const auto owner = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ours));
    const std::uint64_t probe = 0x5eed5eed12345679u;
    std::memcpy(our_control + 256, &owner, 8);
    std::memcpy(our_control + 264, &probe, 8);
    send_with_fd(fd, 'R', m);
    ::close(m);
    auto* const pulls = reinterpret_cast<std::atomic<std::uint32_t>*>(our_control + 272);
    for (int i = 0; i < 500 && pulls->load() == 0; ++i)
        ::usleep(10000);
    ASSERT_EQ(pulls->load(), 1u) << "the library did not take part in the probe";

    std::vector<char> target(4096, 'T'), source(4096, 'S');
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lctx;
    DAT_RMR_CONTEXT rctx;
    DAT_REGION_DESCRIPTION region{};
    region.for_va = target.data();
    ASSERT_EQ(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, target.size(), pz, DAT_MEM_PRIV_ALL_FLAG,
                             DAT_VA_TYPE_VA, &lmr, &lctx, &rctx, nullptr, nullptr),
              kOk);
    const long page = sysconf(_SC_PAGESIZE);
    void* hole = ::mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(hole, MAP_FAILED);
    const auto target_at = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(target.data()));
    std::vector<std::uint8_t> list, frame;
    const PullAttack attack = GetParam();
    switch (attack) {
    case PullAttack::well_formed:
        put_segment(list, source.data(), 1000);
        put_segment(list, source.data() + 1000, 3096);
        break;
    case PullAttack::ragged_list:
        put_segment(list, source.data(), 4096);
        list.resize(20);
        break;
    case PullAttack::empty_segment:
        put_segment(list, source.data(), 100);
        put_segment(list, source.data(), 0);
        break;
    case PullAttack::wrapping_segment:
        put_segment(list, reinterpret_cast<void*>(~std::uintptr_t{0} - 0xfff), 0x2000);
        break;
    case PullAttack::too_many_segments:
        for (int i = 0; i < 17; ++i)
            put_segment(list, source.data() + i, 1);
        break;
    case PullAttack::unmapped_source:
        put_segment(list, hole, 4096);
        break;
    case PullAttack::past_the_key:
        put_segment(list, source.data(), 4096);
        break;
    case PullAttack::unasked_pulled_answer:
        break;
    }
    if (attack == PullAttack::unasked_pulled_answer) {
        // A small READ of ours is in flight (its request in our ring); the
        // answer claims it is to be pulled from an address of the peer's.
        DAT_LMR_TRIPLET into{reinterpret_cast<DAT_VADDR>(target.data()), 64, lctx};
        DAT_RMR_TRIPLET from{0x1000, 64, 0x77};
        ASSERT_EQ(dat_ep_post_rdma_read(ep, 1, &into, DAT_DTO_COOKIE{}, &from, DAT_COMPLETION_DEFAULT_FLAG), kOk);
        frame = softnic_frame(4, 16, reinterpret_cast<std::uintptr_t>(source.data()), 0, {});
    } else {
        frame = softnic_frame(9, 0, target_at + (attack == PullAttack::past_the_key ? 2048 : 0), rctx, list);
    }
    std::memcpy(static_cast<std::uint8_t*>(theirs) + 4096, frame.data(), frame.size());
    reinterpret_cast<std::atomic<std::uint64_t>*>(theirs)->store(frame.size());
    send_with_fd(fd, 'W', -1);
    if (attack == PullAttack::well_formed) {
        // The last byte is stored last, with release semantics: poll on it.
        for (int i = 0; i < 500 && __atomic_load_n(&target.back(), __ATOMIC_ACQUIRE) != 'S'; ++i)
            ::usleep(10000);
        EXPECT_EQ(std::count(target.begin(), target.end(), 'S'), 4096);
        DAT_EVENT e{};
        EXPECT_EQ(DAT_GET_TYPE(dat_evd_dequeue(conn, &e)), static_cast<DAT_RETURN>(DAT_QUEUE_EMPTY))
            << "the connection ended after a well-formed frame";
    } else {
        EXPECT_EQ(next_connection_event(), DAT_CONNECTION_EVENT_BROKEN);
        EXPECT_EQ(std::count(target.begin(), target.end(), 'T'), 4096) << "bytes moved";
    }
    ::close(fd);
    fd = -1;
    ASSERT_EQ(dat_ep_free(ep), kOk);
    ep = DAT_HANDLE_NULL;
    EXPECT_EQ(dat_lmr_free(lmr), kOk);
    ::munmap(hole, page);
    ::munmap(ours, kRingMap);
    ::munmap(theirs, kRingMap);
}

INSTANTIATE_TEST_SUITE_P(Attacks, HostilePullPeer,
                         ::testing::Values(PullAttack::well_formed, PullAttack::ragged_list, PullAttack::empty_segment,
                                           PullAttack::wrapping_segment, PullAttack::too_many_segments,
                                           PullAttack::unmapped_source, PullAttack::past_the_key,
                                           PullAttack::unasked_pulled_answer));

// A hand-made UD peer: a UD request (the datagram flag, our UDP port) to a
// UD endpoint, then datagrams from that port and from a stranger that our
// peers never send. Only the well-formed one from the peer arrives; the
// buffer's bytes past what it holds stay as they were.
TEST_F(HostilePeer, MalformedAndStrangersDatagramsAreDroppedAtAUdEndpoint)
{
    if (shm)
        GTEST_SKIP() << "the hand-made peer speaks to the CM over TCP; fastdapl-shm's CM is local";
    DAT_EP_ATTR ud{};
    ud.service_type = static_cast<DAT_SERVICE_TYPE>(DAT_IB_SERVICE_TYPE_UD);
    ud.max_message_size = 1024;
    DAT_EP_HANDLE ud_ep = DAT_HANDLE_NULL;
    ASSERT_EQ(dat_ep_create(ia, pz, dto, dto, conn, &ud, &ud_ep), kOk);
    std::vector<char> buf(256, 'c');
    DAT_REGION_DESCRIPTION region{};
    region.for_va = buf.data();
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT key;
    ASSERT_EQ(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, buf.size(), pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
                             &lmr, &key, nullptr, nullptr, nullptr),
              kOk);
    DAT_LMR_TRIPLET recv{reinterpret_cast<DAT_VADDR>(buf.data()), 40 + 16, key};
    ASSERT_EQ(dat_ep_post_recv(ud_ep, 1, &recv, DAT_DTO_COOKIE{.as_64 = 1}, DAT_COMPLETION_DEFAULT_FLAG), kOk);

    const int peer = ::socket(AF_INET, SOCK_DGRAM, 0), stranger = ::socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(peer, 0);
    ASSERT_GE(stranger, 0);
    sockaddr_in mine = address;
    mine.sin_port = 0;
    socklen_t len = sizeof mine;
    ASSERT_EQ(::bind(peer, reinterpret_cast<sockaddr*>(&mine), sizeof mine), 0);
    ASSERT_EQ(::getsockname(peer, reinterpret_cast<sockaddr*>(&mine), &len), 0);

    open_cm_stream();
    if (HasFatalFailure())
        return;
    // The reply: a 12-byte header and a 12-byte body (qpn, UDP port, no private data).
    std::uint8_t reply[24];
    const std::uint16_t udp_port = ntohs(mine.sin_port);
    request_accepted_by(ud_ep, reply, sizeof reply, &udp_port);
    if (HasFatalFailure())
        return;
    ASSERT_EQ(reply[5], 2) << "not a reply";
    ASSERT_EQ(reply[6], 1) << "not a UD endpoint's reply";
    std::uint32_t qpn, port;
    std::memcpy(&qpn, reply + 12, 4);
    std::memcpy(&port, reply + 16, 4);
    qpn = be32toh(qpn);
    sockaddr_in ud_addr = address;
    ud_addr.sin_port = htons(static_cast<std::uint16_t>(be32toh(port)));
    send(cm_message(4, {}));
    DAT_EVENT e{};
    DAT_COUNT nmore;
    ASSERT_EQ(dat_evd_wait(conn, kWait, 1, &e, &nmore), kOk);
    ASSERT_EQ(e.event_number, static_cast<DAT_EVENT_NUMBER>(DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED));

    auto datagram = [](std::uint32_t magic, std::uint32_t src, std::uint32_t dst, std::uint32_t length,
                       std::size_t payload) {
        std::vector<std::uint8_t> d;
        for (std::uint32_t v : {magic, src, dst, length})
            put32(d, v);
        d.resize(d.size() + payload, 'x');
        return d;
    };
    auto send_to = [&ud_addr](int from, const std::vector<std::uint8_t>& d) {
        ASSERT_EQ(::sendto(from, d.data(), d.size(), 0, reinterpret_cast<const sockaddr*>(&ud_addr), sizeof ud_addr),
                  static_cast<ssize_t>(d.size()));
    };
    const std::uint32_t magic = 0x46445544;
    send_to(peer, {1, 2, 3});                                      // shorter than a header
    send_to(peer, datagram(0xdeadbeef, 0x4242, qpn, 8, 8));        // wrong magic
    send_to(peer, datagram(magic, 0x4242, qpn + 1, 8, 8));         // another queue pair
    send_to(peer, datagram(magic, 0x4243, qpn, 8, 8));             // not the queue pair we named
    send_to(peer, datagram(magic, 0x4242, qpn, 0xfffffff0, 8));    // a length it does not have
    send_to(peer, datagram(magic, 0x4242, qpn, 17, 17));           // larger than the buffer
    send_to(stranger, datagram(magic, 0x4242, qpn, 8, 8));         // from another port
    send_to(peer, datagram(magic, 0x4242, qpn, 5, 5));             // the one that arrives
    ASSERT_EQ(dat_evd_wait(dto, kWait, 1, &e, &nmore), kOk);
    ASSERT_EQ(e.event_number, static_cast<DAT_EVENT_NUMBER>(DAT_IB_DTO_EVENT));
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(e.event_data.dto_completion_event_data.transfered_length, 40u + 5);
    const auto& x = *reinterpret_cast<const DAT_IB_EXTENSION_EVENT_DATA*>(e.event_extension_data);
    EXPECT_EQ(x.remote_ah.qpn, 0x4242u);
    EXPECT_EQ(std::memcmp(buf.data() + 40, "xxxxx", 5), 0);
    for (std::size_t i = 45; i < buf.size(); ++i)
        ASSERT_EQ(buf[i], 'c') << i;
    EXPECT_EQ(dat_evd_dequeue(dto, &e), DAT_QUEUE_EMPTY);
    ::close(peer);
    ::close(stranger);
}

} // namespace
