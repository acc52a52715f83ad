// libFuzzer target: a hostile peer on real loopback sockets against a live
// softnic IA of this process (our libdat2 hosting libfastdapl). Each input
// is one of:
//  - raw bytes to the PSP's listening port (the socket CM's handshake);
//  - a correct handshake (request, the IA's reply, ready) that the IA
//    accepts with a fresh EP, then softnic wire frames made from the input:
//    bogus types, versions, lengths, addresses and rkeys, truncated frames,
//    huge lengths; sometimes after the EP posted a send, an RDMA write or
//    read of its own, so that acknowledgements and read responses meet a
//    request in flight. Then the peer goes away (goodbye frame, close or
//    reset).
// Some inputs' EPs take their receives from an SRQ.
// Invariants: no crash or sanitizer report; no byte outside the registered
// region ever changes (canaries); the EP sees its connection end (a
// connection event that ends it, within a bound); the PSP keeps working:
// every few inputs two EPs of the IA connect through it and exchange a
// message.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "cm_wire.hpp"
#include "fuzz_common.hpp"

#include <dat2/udat.h>

#include <arpa/inet.h>
#include <endian.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

using namespace fastdapl_fuzz;
namespace cm = fastdapl::cm;

namespace {

constexpr char kIaName[] = "fastdapl-tcp";
constexpr DAT_TIMEOUT kEventWait = 5000000; // µs: an event that must come
constexpr std::size_t kFrameHeader = 24;    // src/softnic/device.cpp's wire header
constexpr std::uint8_t kWireVersion = 2;
constexpr std::uint8_t kFrameDisconnect = 7;
// The registered region: the middle half of the pool.
constexpr std::size_t kRegionOffset = GuardedPool::kBytes / 4;
constexpr std::size_t kRegionBytes = GuardedPool::kBytes / 2;

struct World {
    GuardedPool pool;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, dto = DAT_HANDLE_NULL, conn = DAT_HANDLE_NULL, cr = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    DAT_LMR_CONTEXT lmr_context = 0;
    DAT_RMR_CONTEXT rmr_context = 0;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL; // some inputs' EPs take their receives from it
    DAT_CONN_QUAL qual = 0;
    sockaddr_in address{};
    std::uint64_t inputs = 0;
    std::uintptr_t region() const { return reinterpret_cast<std::uintptr_t>(pool.base()) + kRegionOffset; }
};
World* w = nullptr;

void check(bool ok, const char* what, unsigned long long detail = 0)
{
    if (!ok)
        fail(what, detail);
}

DAT_EP_HANDLE make_ep(DAT_EVD_HANDLE conn, DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL, DAT_COUNT hard_watermark = 0)
{
    DAT_EP_ATTR attr{};
    attr.service_type = DAT_SERVICE_TYPE_RC;
    attr.max_message_size = 1u << 20;
    attr.max_rdma_size = 1u << 20;
    attr.qos = DAT_QOS_BEST_EFFORT;
    attr.max_recv_dtos = 16;
    attr.max_request_dtos = 16;
    attr.max_recv_iov = 2;
    attr.max_request_iov = 2;
    attr.max_rdma_read_in = 4;
    attr.max_rdma_read_out = 4;
    attr.max_rdma_read_iov = 2;
    attr.max_rdma_write_iov = 2;
    DAT_EP_HANDLE ep;
    if (srq) {
        attr.max_recv_dtos = hard_watermark; // on an SRQ: the hard receive watermark (0: none)
        check(dat_ep_create_with_srq(w->ia, w->pz, w->dto, w->dto, conn, srq, &attr, &ep) == DAT_SUCCESS,
              "dat_ep_create_with_srq");
    } else {
        check(dat_ep_create(w->ia, w->pz, w->dto, w->dto, conn, &attr, &ep) == DAT_SUCCESS, "dat_ep_create");
    }
    return ep;
}

void drain(DAT_EVD_HANDLE evd)
{
    DAT_EVENT e;
    while (dat_evd_dequeue(evd, &e) == DAT_SUCCESS) {
        if (e.event_number == DAT_CONNECTION_REQUEST_EVENT) // one the raw bytes made: turn it down
            dat_cr_reject(e.event_data.cr_arrival_event_data.cr_handle, 0, nullptr);
    }
}

bool ends_connection(DAT_EVENT_NUMBER n)
{
    switch (n) {
    case DAT_CONNECTION_EVENT_DISCONNECTED:
    case DAT_CONNECTION_EVENT_BROKEN:
    case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR:
    case DAT_CONNECTION_EVENT_PEER_REJECTED:
    case DAT_CONNECTION_EVENT_NON_PEER_REJECTED:
    case DAT_CONNECTION_EVENT_TIMED_OUT:
    case DAT_CONNECTION_EVENT_UNREACHABLE:
        return true;
    default:
        return false;
    }
}

int connect_to_psp()
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    check(fd >= 0, "socket");
    sockaddr_in to = w->address;
    to.sin_port = htons(static_cast<std::uint16_t>(w->qual));
    // libFuzzer's timer (SIGALRM, for -timeout) may interrupt a connect
    // that waits for the listener's backlog on a loaded machine: the
    // connection goes on in the kernel; wait for its outcome.
    if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
        check(errno == EINTR, "connect to the PSP", errno);
        pollfd p{fd, POLLOUT, 0};
        while (::poll(&p, 1, 10000) < 0 && errno == EINTR) {
        }
        int err = ETIMEDOUT;
        socklen_t len = sizeof err;
        if (p.revents)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        check(err == 0, "connect to the PSP, interrupted", static_cast<unsigned long long>(err));
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

void send_all(int fd, const std::uint8_t* p, std::size_t n)
{
    while (n) {
        const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0)
            return; // the IA closed its end: fine, it may
        p += k;
        n -= static_cast<std::size_t>(k);
    }
}

// Ends our side: a goodbye frame and close, a close, or a reset.
void hang_up(int fd, std::uint8_t how)
{
    if (how % 3 == 0) {
        std::uint8_t bye[kFrameHeader] = {kFrameDisconnect, 0, 0, kWireVersion};
        send_all(fd, bye, sizeof bye);
    } else if (how % 3 == 1) {
        linger l{1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    ::close(fd);
}

// Reads one CM message from `fd` (the IA's reply), waiting at most a few seconds.
bool read_message(int fd, cm::Message& m)
{
    std::vector<std::uint8_t> in;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
        std::size_t used = 0;
        if (!in.empty()) {
            const cm::DecodeResult r = cm::decode(in.data(), in.size(), m, used);
            if (r == cm::DecodeResult::complete)
                return true;
            if (r == cm::DecodeResult::malformed)
                fail("the IA sent a malformed CM message");
        }
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0)
            continue;
        std::uint8_t buf[512];
        // One byte at a time past the header would be slow; the reply is
        // alone on the stream until our ready, so read what is there.
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
            return false;
        in.insert(in.end(), buf, buf + n);
    }
    return false;
}

// One frame from the input: a header whose fields are mostly plausible
// (the real rkey, addresses in and around the region), then payload bytes.
void append_frame(Reader& in, std::vector<std::uint8_t>& out)
{
    const std::uint8_t sel = in.u8();
    std::uint8_t type = static_cast<std::uint8_t>(1 + sel % 10); // kSend .. kLaneWanted
    if ((sel & 0x38) == 0x38)
        type = in.u8();
    // Any flag but kStriped (32): a striped WRITE without a lane waits 10 s
    // for it, and striping has tests of its own (test_softnic, SoftnicLane).
    const std::uint8_t flags = in.u8() & ~std::uint8_t{32};
    const std::uint8_t syndrome = in.u8();
    const std::uint8_t version = (sel & 0x40) && (in.u8() & 1) ? in.u8() : kWireVersion;
    std::uint32_t payload = in.u8() % 128;
    std::uint32_t length = payload;
    switch (in.u8() & 7) {
    case 0:
        length = in.u32(); // anything: huge, or more than we send
        break;
    case 1:
        length = payload + in.u8(); // a little more than we send: truncated
        break;
    case 2:
        payload = 0; // a read request's length without payload
        length = in.u16();
        break;
    default:
        break;
    }
    std::uint64_t addr;
    const std::uint8_t where = in.u8();
    switch (where & 3) {
    case 0:
        addr = in.u64();
        break;
    case 1: // anywhere in or around the pool
        addr = w->pool.lo() + in.u32() % (w->pool.hi() - w->pool.lo());
        break;
    default: // inside the region, perhaps running past its end
        addr = w->region() + in.u16() % kRegionBytes;
        break;
    }
    std::uint32_t rkey = w->rmr_context;
    if ((where & 0x0c) == 0)
        rkey = in.u32();
    else if ((where & 0x0c) == 4)
        rkey ^= 1u << (in.u8() % 32);
    const std::uint32_t aux = in.u32();
    std::uint8_t h[kFrameHeader] = {type, flags, syndrome, version};
    const std::uint32_t length_be = htobe32(length), rkey_be = htobe32(rkey), aux_be = htobe32(aux);
    const std::uint64_t addr_be = htobe64(addr);
    std::memcpy(h + 4, &length_be, 4);
    std::memcpy(h + 8, &addr_be, 8);
    std::memcpy(h + 16, &rkey_be, 4);
    std::memcpy(h + 20, &aux_be, 4);
    out.insert(out.end(), h, h + kFrameHeader);
    const std::size_t at = out.size();
    out.resize(at + payload);
    in.bytes(out.data() + at, payload);
}

// Raw bytes to the PSP's port: the handshake's decoder meets them for real.
void raw_handshake(Reader& in)
{
    const int fd = connect_to_psp();
    std::vector<std::uint8_t> bytes(in.u16() % 1024);
    bytes.resize(in.bytes(bytes.data(), bytes.size()));
    send_all(fd, bytes.data(), bytes.size());
    hang_up(fd, in.u8());
}

// The next connection request on the PSP for which `ours` holds; others
// (late ones from raw inputs) are turned down.
template <typename Pred>
DAT_CR_HANDLE wait_request(Pred ours)
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
        DAT_EVENT e{};
        DAT_COUNT nmore;
        if (dat_evd_wait(w->cr, 100000, 1, &e, &nmore) != DAT_SUCCESS)
            continue;
        check(e.event_number == DAT_CONNECTION_REQUEST_EVENT, "not a connection request", e.event_number);
        const DAT_CR_HANDLE cr = e.event_data.cr_arrival_event_data.cr_handle;
        DAT_CR_PARAM p{};
        check(dat_cr_query(cr, DAT_CR_FIELD_ALL, &p) == DAT_SUCCESS, "dat_cr_query");
        if (ours(p))
            return cr;
        dat_cr_reject(cr, 0, nullptr);
    }
    fail("the PSP no longer delivers requests");
}

// Waits for the event that ends `ep`'s connection on `conn`.
void expect_end(DAT_EVD_HANDLE conn, DAT_EP_HANDLE ep)
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
        DAT_EVENT e{};
        DAT_COUNT nmore;
        if (dat_evd_wait(conn, 100000, 1, &e, &nmore) == DAT_SUCCESS) {
            check(e.event_data.connect_event_data.ep_handle == ep, "a connection event for another EP");
            if (ends_connection(e.event_number))
                return;
            check(e.event_number == DAT_CONNECTION_EVENT_ESTABLISHED, "an unexpected connection event", e.event_number);
        }
        if (std::chrono::steady_clock::now() > deadline) {
            DAT_EP_STATE state = DAT_EP_STATE_UNCONNECTED;
            dat_ep_get_status(ep, &state, nullptr, nullptr);
            fail("the end of a connection the peer left was never reported; EP state", state);
        }
    }
}

// A correct handshake, accepted by a fresh EP, then frames from the input.
void hostile_connection(Reader& in)
{
    DAT_EVD_HANDLE conn;
    check(dat_evd_create(w->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn) == DAT_SUCCESS, "conn evd");
    const std::uint8_t kind = in.u8();
    const bool on_srq = (kind & 3) == 0;
    const DAT_EP_HANDLE ep = on_srq ? make_ep(conn, w->srq, (kind >> 2) % 4) : make_ep(conn);
    const std::uint8_t setup = in.u8();
    // Receives for the peer's sends, each in its own slice of the region
    // (on the SRQ: as long as it has room; other inputs' may still be there).
    for (unsigned i = 0; i < (setup & 7u); ++i) {
        const std::size_t slice = kRegionBytes / 8;
        DAT_LMR_TRIPLET iov{w->region() + i * slice, static_cast<DAT_SEG_LENGTH>(in.u16() % (slice + 1)),
                            w->lmr_context};
        DAT_DTO_COOKIE cookie{};
        if (on_srq)
            dat_srq_post_recv(w->srq, 1, &iov, cookie);
        else
            check(dat_ep_post_recv(ep, 1, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS, "post_recv");
    }
    const int fd = connect_to_psp();
    cm::Message request;
    request.type = cm::MessageType::request;
    request.conn_qual = w->qual;
    request.qpn = in.u32();
    request.private_data.resize(in.u8() % 65);
    in.bytes(request.private_data.data(), request.private_data.size());
    std::vector<std::uint8_t> bytes;
    check(cm::encode(request, bytes), "encode request");
    send_all(fd, bytes.data(), bytes.size());

    sockaddr_in mine{};
    socklen_t mine_len = sizeof mine;
    check(getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &mine_len) == 0, "getsockname");
    const DAT_CR_HANDLE cr =
        wait_request([&](const DAT_CR_PARAM& p) { return p.remote_port_qual == ntohs(mine.sin_port); });
    DAT_CR_PARAM crp{};
    check(dat_cr_query(cr, DAT_CR_FIELD_ALL, &crp) == DAT_SUCCESS, "cr_query");
    check(crp.private_data_size == static_cast<DAT_COUNT>(request.private_data.size()) &&
              (request.private_data.empty() ||
               std::memcmp(crp.private_data, request.private_data.data(), request.private_data.size()) == 0),
          "the request's private data changed");
    DAT_EVENT e{};
    DAT_COUNT nmore;
    check(dat_cr_accept(cr, ep, 0, nullptr) == DAT_SUCCESS, "cr_accept");
    cm::Message reply;
    const bool replied = read_message(fd, reply);
    check(replied && reply.type == cm::MessageType::reply, "no reply to an accepted request");

    // What goes on the stream: ready, then the frames.
    bytes.clear();
    cm::Message ready;
    ready.type = cm::MessageType::ready;
    check(cm::encode(ready, bytes), "encode ready");
    if (setup & 8) { // established first, then the EP's own requests are in flight
        send_all(fd, bytes.data(), bytes.size());
        bytes.clear();
        check(dat_evd_wait(conn, kEventWait, 1, &e, &nmore) == DAT_SUCCESS, "no ESTABLISHED");
        check(e.event_number == DAT_CONNECTION_EVENT_ESTABLISHED, "not ESTABLISHED", e.event_number);
        const std::size_t out_slice = w->region() + kRegionBytes - 4096;
        DAT_LMR_TRIPLET iov{out_slice, static_cast<DAT_SEG_LENGTH>(in.u8() * 16u), w->lmr_context};
        DAT_RMR_TRIPLET remote{in.u64(), static_cast<DAT_SEG_LENGTH>(in.u8() * 16u), in.u32()};
        DAT_DTO_COOKIE cookie{};
        for (unsigned i = 0; i < ((setup >> 4) & 3u); ++i) {
            switch (in.u8() % 3) {
            case 0:
                dat_ep_post_send(ep, 1, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG);
                break;
            case 1:
                dat_ep_post_rdma_write(ep, 1, &iov, cookie, &remote, DAT_COMPLETION_DEFAULT_FLAG);
                break;
            default:
                dat_ep_post_rdma_read(ep, 1, &iov, cookie, &remote, DAT_COMPLETION_DEFAULT_FLAG);
                break;
            }
        }
    }
    const unsigned frames = 1 + in.u8() % 8;
    for (unsigned i = 0; i < frames && !in.empty(); ++i)
        append_frame(in, bytes);
    if (setup & 0x40) { // and whatever is left, as it is
        std::vector<std::uint8_t> rest(4096);
        rest.resize(in.bytes(rest.data(), rest.size()));
        bytes.insert(bytes.end(), rest.begin(), rest.end());
    }
    send_all(fd, bytes.data(), bytes.size());
    if (setup & 0x80) { // give the IA time to act before the stream ends
        pollfd p{fd, POLLRDHUP, 0};
        ::poll(&p, 1, 2);
    }
    hang_up(fd, in.u8());
    expect_end(conn, ep);
    drain(w->dto);
    w->pool.check();
    check(dat_ep_free(ep) == DAT_SUCCESS, "dat_ep_free after the connection ended");
    drain(w->dto);
    check(dat_evd_free(conn) == DAT_SUCCESS, "dat_evd_free of the connection EVD");
}

// Two EPs of the IA connect through the PSP and exchange a message: the
// PSP, the CM and the softnic still work after what the peers did.
void psp_still_works()
{
    DAT_EVD_HANDLE conn_a, conn_b;
    check(dat_evd_create(w->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_a) == DAT_SUCCESS, "evd a");
    check(dat_evd_create(w->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_b) == DAT_SUCCESS, "evd b");
    const DAT_EP_HANDLE a = make_ep(conn_a), b = make_ep(conn_b);
    std::uint8_t* slot = w->pool.base() + kRegionOffset;
    DAT_LMR_TRIPLET recv{reinterpret_cast<DAT_VADDR>(slot), 64, w->lmr_context};
    DAT_LMR_TRIPLET send{reinterpret_cast<DAT_VADDR>(slot + 64), 64, w->lmr_context};
    std::memset(slot + 64, 0x5a, 64);
    DAT_DTO_COOKIE cookie{};
    check(dat_ep_post_recv(b, 1, &recv, cookie, DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS, "check post_recv");
    static const char kMark[] = "psp_still_works";
    check(dat_ep_connect(a, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&w->address), w->qual, kEventWait, sizeof kMark,
                         const_cast<char*>(kMark), DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG) == DAT_SUCCESS,
          "check connect");
    const DAT_CR_HANDLE cr = wait_request([](const DAT_CR_PARAM& p) {
        return p.private_data_size == sizeof kMark && std::memcmp(p.private_data, kMark, sizeof kMark) == 0;
    });
    check(dat_cr_accept(cr, b, 0, nullptr) == DAT_SUCCESS, "check accept");
    DAT_EVENT e{};
    DAT_COUNT nmore;
    for (DAT_EVD_HANDLE c : {conn_a, conn_b})
        check(dat_evd_wait(c, kEventWait, 1, &e, &nmore) == DAT_SUCCESS &&
                  e.event_number == DAT_CONNECTION_EVENT_ESTABLISHED,
              "a connection through the PSP was not established", e.event_number);
    check(dat_ep_post_send(a, 1, &send, cookie, DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS, "check send");
    for (int i = 0; i < 2; ++i) {
        check(dat_evd_wait(w->dto, kEventWait, 1, &e, &nmore) == DAT_SUCCESS, "check completion");
        check(e.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS, "check completion status",
              e.event_data.dto_completion_event_data.status);
    }
    check(std::memcmp(slot, slot + 64, 64) == 0, "the message did not arrive intact");
    check(dat_ep_disconnect(a, DAT_CLOSE_ABRUPT_FLAG) == DAT_SUCCESS, "check disconnect");
    expect_end(conn_a, a);
    expect_end(conn_b, b);
    check(dat_ep_free(a) == DAT_SUCCESS && dat_ep_free(b) == DAT_SUCCESS, "check ep_free");
    drain(w->dto);
    check(dat_evd_free(conn_a) == DAT_SUCCESS && dat_evd_free(conn_b) == DAT_SUCCESS, "check evd_free");
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
    w = new World;
    check(dat_ia_open(const_cast<char*>(kIaName), 64, &w->async, &w->ia) == DAT_SUCCESS,
          "dat_ia_open (is DAT_OVERRIDE set?)");
    DAT_IA_ATTR attr{};
    check(dat_ia_query(w->ia, nullptr, DAT_IA_FIELD_ALL, &attr, 0, nullptr) == DAT_SUCCESS, "dat_ia_query");
    std::memcpy(&w->address, attr.ia_address_ptr, sizeof w->address);
    check(dat_pz_create(w->ia, &w->pz) == DAT_SUCCESS, "dat_pz_create");
    register_handle_arena(w->pz);
    check(dat_evd_create(w->ia, 1024, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &w->dto) == DAT_SUCCESS, "dto evd");
    check(dat_evd_create(w->ia, 64, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &w->cr) == DAT_SUCCESS, "cr evd");
    DAT_REGION_DESCRIPTION region{};
    region.for_va = w->pool.base() + kRegionOffset;
    DAT_VLEN size;
    DAT_VADDR va;
    check(dat_lmr_create(w->ia, DAT_MEM_TYPE_VIRTUAL, region, kRegionBytes, w->pz, DAT_MEM_PRIV_ALL_FLAG,
                         DAT_VA_TYPE_VA, &w->lmr, &w->lmr_context, &w->rmr_context, &size, &va) == DAT_SUCCESS,
          "dat_lmr_create");
    w->pool.registered(w->region(), kRegionBytes, DAT_MEM_PRIV_ALL_FLAG);
    DAT_SRQ_ATTR srq_attr{64, 2, DAT_SRQ_LW_DEFAULT};
    check(dat_srq_create(w->ia, w->pz, &srq_attr, &w->srq) == DAT_SUCCESS, "dat_srq_create");
    // A port of our own, never one of those other tests use: a forbidden
    // one is held while the next is taken, then given back.
    check(dat_psp_create_any(w->ia, &w->qual, w->cr, DAT_PSP_CONSUMER_FLAG, &w->psp) == DAT_SUCCESS, "psp");
    while (forbidden_port(w->qual)) {
        const DAT_PSP_HANDLE taken = w->psp;
        check(dat_psp_create_any(w->ia, &w->qual, w->cr, DAT_PSP_CONSUMER_FLAG, &w->psp) == DAT_SUCCESS, "psp");
        dat_psp_free(taken);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    Reader in(data, size);
    if (in.u8() & 1)
        raw_handshake(in);
    else
        hostile_connection(in);
    drain(w->cr);
    drain(w->dto);
    drain(w->async);
    w->pool.check();
    if (++w->inputs % 8 == 0)
        psp_still_works();
    return 0;
}
