// dat_perf: latency and bandwidth sweeps over the public uDAPL API.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
//
// lat: send/receive ping-pong; one-way latency = round trip / 2.
// bw:  RDMA writes into the server's buffer, a window of them in flight.
// Both ends in one process by default; -s and -h ADDR split them.
// Results as a table, CSV or JSON; --compare checks them against a baseline.
#include "results.hpp"

#include <dat2/udat.h>

#include <arpa/inet.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using dat_perf::Format;
using dat_perf::Result;
using dat_perf::Row;
using Clock = std::chrono::steady_clock;

struct Options {
    std::string ia_name = "fastdapl-tcp";
    std::string server_address; // client mode when set
    bool server = false;
    DAT_CONN_QUAL port = 47000;
    bool lat = true, bw = true;
    std::uint64_t min_size = 1, max_size = 4u << 20;
    int iterations = 0; // 0: scaled with size
    bool quick = false;
    bool busy = false;
    int window = 32;
    // Results and checks.
    std::optional<Format> format; // --format
    std::string output;           // --output FILE
    std::string input;            // --input FILE: no measurement
    std::string baseline;         // --compare FILE
    double tolerance_pct = 10;
    std::vector<const dat_perf::Metric*> compare_metrics;
};

// Exit codes besides 0 (success), 1 (a DAT call or the run failed) and 2 (usage).
constexpr int kExitRegression = 3;  // --compare: some value regressed
constexpr int kExitBadBaseline = 4; // --compare or --input: unreadable, not a result, nothing in common

[[noreturn]] void die(const char* what, DAT_RETURN rc)
{
    const char* major = "";
    const char* minor = "";
    dat_strerror(rc, &major, &minor);
    std::fprintf(stderr, "dat_perf: %s: %s %s (0x%x)\n", what, major, minor, static_cast<unsigned>(rc));
    std::exit(1);
}

void check(DAT_RETURN rc, const char* what)
{
    if (rc != DAT_SUCCESS)
        die(what, rc);
}

// Control messages travel as sends; data messages of the latency test too.
// `written` follows the RDMA writes of one bandwidth size: the server checks
// that the data landed and answers with `count` 1 (it did) or 0.
enum class Op : std::uint32_t { latency = 1, quit = 2, written = 3 };
struct Control {
    std::uint32_t magic;
    Op op;
    std::uint64_t size;
    std::uint64_t count; // latency: pings to echo; written: the check's result
};
constexpr std::uint32_t kMagic = 0x70657266; // "perf"
constexpr std::uint64_t kControlSize = 64;

// What the writes of one size carry: differs from size to size, so data left
// by an earlier size does not pass the server's check.
char write_pattern(std::uint64_t size)
{
    return static_cast<char>(0x80 | (std::countr_zero(size) & 0x7f));
}

const char* event_name(DAT_EVENT_NUMBER n)
{
    switch (n) {
    case DAT_DTO_COMPLETION_EVENT: return "DTO_COMPLETION";
    case DAT_CONNECTION_REQUEST_EVENT: return "CONNECTION_REQUEST";
    case DAT_CONNECTION_EVENT_ESTABLISHED: return "ESTABLISHED";
    case DAT_CONNECTION_EVENT_PEER_REJECTED: return "PEER_REJECTED";
    case DAT_CONNECTION_EVENT_NON_PEER_REJECTED: return "NON_PEER_REJECTED (nobody listens there?)";
    case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR: return "ACCEPT_COMPLETION_ERROR";
    case DAT_CONNECTION_EVENT_DISCONNECTED: return "DISCONNECTED";
    case DAT_CONNECTION_EVENT_BROKEN: return "BROKEN";
    case DAT_CONNECTION_EVENT_TIMED_OUT: return "TIMED_OUT";
    case DAT_CONNECTION_EVENT_UNREACHABLE: return "UNREACHABLE";
    default: return "an unexpected event";
    }
}

// What the server tells the client when it accepts: where to write.
struct AcceptData {
    std::uint32_t magic;
    std::uint32_t rmr_context;
    std::uint64_t address;
    std::uint64_t length;
};

constexpr DAT_TIMEOUT kConnectTimeout = 10'000'000; // µs
// The kernel's CM sends a lost disconnect request again only after about
// 6 s (Soft-RoCE with 5% loss), and may have to send it more than once.
constexpr DAT_TIMEOUT kDisconnectTimeout = 30'000'000; // µs

// One end: an IA with its objects, and a registered buffer holding a
// receive area and a send/write area of max_size each.
class End {
public:
    End(const Options& o) : opt_(o)
    {
        check(dat_ia_open(const_cast<char*>(o.ia_name.c_str()), 8, &async_, &ia_), "dat_ia_open");
        DAT_PROVIDER_ATTR pattr{};
        check(dat_ia_query(ia_, nullptr, DAT_IA_FIELD_ALL, &ia_attr_, DAT_PROVIDER_FIELD_ALL, &pattr), "dat_ia_query");
        check(dat_pz_create(ia_, &pz_), "dat_pz_create");
        // Room for the write window plus the control messages, within what the IA allows.
        const DAT_COUNT depth = std::min<DAT_COUNT>(2 * o.window + 8, ia_attr_.max_dto_per_ep);
        check(dat_evd_create(ia_, depth, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &recv_evd_), "dat_evd_create (recv)");
        check(dat_evd_create(ia_, depth, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &request_evd_), "dat_evd_create (request)");
        check(dat_evd_create(ia_, 4, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd_), "dat_evd_create (conn)");
        DAT_EP_ATTR attr{};
        attr.service_type = DAT_SERVICE_TYPE_RC;
        attr.max_recv_dtos = depth;
        attr.max_request_dtos = depth;
        attr.max_recv_iov = 1;
        attr.max_request_iov = 1;
        attr.max_rdma_read_iov = 1;
        attr.max_rdma_write_iov = 1;
        attr.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
        attr.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
        check(dat_ep_create(ia_, pz_, recv_evd_, request_evd_, conn_evd_, &attr, &ep_), "dat_ep_create");
        // The provider may grant a shallower queue than asked: the window follows it.
        DAT_EP_PARAM ep_param{};
        check(dat_ep_query(ep_, DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS, &ep_param), "dat_ep_query");
        window_ = std::max(1, std::min(o.window, static_cast<int>(ep_param.ep_attr.max_request_dtos)));
        area_ = std::max<std::uint64_t>(o.max_size, kControlSize);
        const std::size_t align = std::max<std::size_t>(pattr.optimal_buffer_alignment, 64);
        void* mem = nullptr;
        if (posix_memalign(&mem, align, 2 * area_) != 0) {
            std::fprintf(stderr, "dat_perf: cannot allocate %" PRIu64 " bytes\n", 2 * area_);
            std::exit(1);
        }
        buffer_ = static_cast<char*>(mem);
        std::memset(buffer_, 0, 2 * area_);
        DAT_REGION_DESCRIPTION region{};
        region.for_va = buffer_;
        DAT_VLEN registered;
        DAT_VADDR va;
        check(dat_lmr_create(ia_, DAT_MEM_TYPE_VIRTUAL, region, 2 * area_, pz_, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
                             &lmr_, &lmr_context_, &rmr_context_, &registered, &va),
              "dat_lmr_create");
    }
    ~End() { std::free(buffer_); }
    End(const End&) = delete;
    End& operator=(const End&) = delete;

    char* recv_area() { return buffer_; }
    char* send_area() { return buffer_ + area_; }

    // --- connection ---
    DAT_CONN_QUAL listen(DAT_CONN_QUAL port)
    {
        check(dat_evd_create(ia_, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd_), "dat_evd_create (cr)");
        if (port == 0)
            check(dat_psp_create_any(ia_, &port, cr_evd_, DAT_PSP_CONSUMER_FLAG, &psp_), "dat_psp_create_any");
        else
            check(dat_psp_create(ia_, port, cr_evd_, DAT_PSP_CONSUMER_FLAG, &psp_), "dat_psp_create");
        return port;
    }
    void accept()
    {
        DAT_EVENT e = wait(cr_evd_, DAT_TIMEOUT_INFINITE, "connection request");
        if (e.event_number != DAT_CONNECTION_REQUEST_EVENT) {
            std::fprintf(stderr, "dat_perf: CR EVD: %s, expected CONNECTION_REQUEST\n", event_name(e.event_number));
            std::exit(1);
        }
        post_control_recv(); // before the client can send anything
        AcceptData data{kMagic, static_cast<std::uint32_t>(rmr_context_), reinterpret_cast<std::uintptr_t>(recv_area()),
                        area_};
        check(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, ep_, sizeof data, &data), "dat_cr_accept");
        expect_connection_event(DAT_CONNECTION_EVENT_ESTABLISHED);
        check(dat_psp_free(psp_), "dat_psp_free");
    }
    void connect(const sockaddr_storage& server, DAT_CONN_QUAL port)
    {
        const std::uint32_t hello = kMagic;
        check(dat_ep_connect(ep_, reinterpret_cast<DAT_IA_ADDRESS_PTR>(const_cast<sockaddr_storage*>(&server)), port,
                             kConnectTimeout, sizeof hello, const_cast<std::uint32_t*>(&hello), DAT_QOS_BEST_EFFORT,
                             DAT_CONNECT_DEFAULT_FLAG),
              "dat_ep_connect");
        DAT_EVENT e = expect_connection_event(DAT_CONNECTION_EVENT_ESTABLISHED);
        const auto& c = e.event_data.connect_event_data;
        if (c.private_data_size < static_cast<DAT_COUNT>(sizeof(AcceptData)))
            die("the server sent no buffer description", DAT_INTERNAL_ERROR);
        AcceptData data;
        std::memcpy(&data, c.private_data, sizeof data);
        if (data.magic != kMagic)
            die("the server is not dat_perf", DAT_INTERNAL_ERROR);
        remote_.rmr_context = data.rmr_context;
        remote_.virtual_address = data.address;
        remote_.segment_length = static_cast<DAT_SEG_LENGTH>(std::min<std::uint64_t>(data.length, 0xffffffffu));
    }
    void disconnect()
    {
        DAT_EP_STATE state;
        check(dat_ep_get_status(ep_, &state, nullptr, nullptr), "dat_ep_get_status");
        if (state == DAT_EP_STATE_CONNECTED)
            check(dat_ep_disconnect(ep_, DAT_CLOSE_GRACEFUL_FLAG), "dat_ep_disconnect");
        expect_ended(wait(conn_evd_, kDisconnectTimeout, "disconnect"));
    }

    // The server's end, after the client's quit: the client disconnects
    // once its quit has completed, so this side waits for that rather than
    // starting a disconnect of its own, which could flush the quit's send
    // at the client before its ACK got through (a lossy link: the quit
    // arrived, its ACK was lost, and the retry met a closed connection).
    // Only if the client's disconnect does not come does this side start one.
    void await_disconnect()
    {
        DAT_EVENT e;
        DAT_COUNT nmore;
        const DAT_RETURN rc = dat_evd_wait(conn_evd_, kDisconnectTimeout, 1, &e, &nmore);
        if (DAT_GET_TYPE(rc) == DAT_TIMEOUT_EXPIRED) {
            disconnect();
            return;
        }
        check(rc, "waiting for the client's disconnect");
        expect_ended(e);
    }
    // A connection event that must be its end.
    static void expect_ended(const DAT_EVENT& e)
    {
        if (e.event_number != DAT_CONNECTION_EVENT_DISCONNECTED && e.event_number != DAT_CONNECTION_EVENT_BROKEN) {
            std::fprintf(stderr, "dat_perf: disconnect: %s, expected DISCONNECTED\n", event_name(e.event_number));
            std::exit(1);
        }
    }

    // Frees every object, then closes the IA gracefully: that fails if
    // anything was left behind. (Error exits skip this and close nothing.)
    void close()
    {
        check(dat_ep_free(ep_), "dat_ep_free");
        check(dat_lmr_free(lmr_), "dat_lmr_free");
        check(dat_evd_free(recv_evd_), "dat_evd_free (recv)");
        check(dat_evd_free(request_evd_), "dat_evd_free (request)");
        check(dat_evd_free(conn_evd_), "dat_evd_free (conn)");
        if (cr_evd_ != DAT_HANDLE_NULL)
            check(dat_evd_free(cr_evd_), "dat_evd_free (cr)");
        check(dat_pz_free(pz_), "dat_pz_free");
        check(dat_ia_close(ia_, DAT_CLOSE_GRACEFUL_FLAG), "dat_ia_close");
    }

    // --- data ---
    void post_recv(std::uint64_t size)
    {
        DAT_LMR_TRIPLET iov{reinterpret_cast<std::uintptr_t>(recv_area()),
                            static_cast<DAT_SEG_LENGTH>(std::max(size, kControlSize)), lmr_context_};
        check(dat_ep_post_recv(ep_, 1, &iov, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");
    }
    void post_control_recv() { post_recv(kControlSize); }
    void send(std::uint64_t size)
    {
        DAT_LMR_TRIPLET iov{reinterpret_cast<std::uintptr_t>(send_area()), static_cast<DAT_SEG_LENGTH>(size),
                            lmr_context_};
        check(dat_ep_post_send(ep_, size ? 1 : 0, &iov, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG),
              "dat_ep_post_send");
    }
    void send_control(const Control& c)
    {
        std::memcpy(send_area(), &c, sizeof c);
        send(kControlSize);
        reap(request_evd_, "control send");
    }
    void write(std::uint64_t size, std::uint64_t index)
    {
        DAT_LMR_TRIPLET iov{reinterpret_cast<std::uintptr_t>(send_area()), static_cast<DAT_SEG_LENGTH>(size),
                            lmr_context_};
        DAT_RMR_TRIPLET target = remote_;
        target.segment_length = static_cast<DAT_SEG_LENGTH>(size);
        check(dat_ep_post_rdma_write(ep_, 1, &iov, DAT_DTO_COOKIE{.as_64 = index}, &target, DAT_COMPLETION_DEFAULT_FLAG),
              "dat_ep_post_rdma_write");
    }
    // The next completion on `evd`, which must be a success.
    DAT_DTO_COMPLETION_EVENT_DATA reap(DAT_EVD_HANDLE evd, const char* what)
    {
        DAT_EVENT e = opt_.busy ? poll(evd, what) : wait(evd, 30'000'000, what);
        if (e.event_number != DAT_DTO_COMPLETION_EVENT) {
            std::fprintf(stderr, "dat_perf: %s: %s, expected DTO_COMPLETION\n", what, event_name(e.event_number));
            std::exit(1);
        }
        const auto& d = e.event_data.dto_completion_event_data;
        if (d.status != DAT_DTO_SUCCESS) {
            std::fprintf(stderr, "dat_perf: %s: completion status %d\n", what, static_cast<int>(d.status));
            std::exit(1);
        }
        return d;
    }
    sockaddr_storage address() const
    {
        sockaddr_storage a{};
        const auto* sa = ia_attr_.ia_address_ptr;
        std::memcpy(&a, sa, sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
        return a;
    }
    DAT_EVD_HANDLE recv_evd() const { return recv_evd_; }
    DAT_EVD_HANDLE request_evd() const { return request_evd_; }
    int window() const { return window_; }
    Control received_control() const
    {
        Control c;
        std::memcpy(&c, buffer_, sizeof c);
        return c;
    }

private:
    DAT_EVENT wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout, const char* what)
    {
        DAT_EVENT e{};
        DAT_COUNT nmore;
        check(dat_evd_wait(evd, timeout, 1, &e, &nmore), what);
        return e;
    }
    DAT_EVENT poll(DAT_EVD_HANDLE evd, const char* what)
    {
        DAT_EVENT e; // not cleared: a successful dequeue fills it (a memset of it per reap is time measured)
        // The clock is read only every 4096th empty poll: a read per poll
        // (tens of ns from the vDSO, more in a VM) delayed the dequeue that
        // finds the message, and took a third of a busy ping-pong's time.
        Clock::time_point deadline{};
        for (std::uint32_t empty = 1;; ++empty) {
            const DAT_RETURN rc = dat_evd_dequeue(evd, &e);
            if (rc == DAT_SUCCESS)
                return e;
            if (DAT_GET_TYPE(rc) != DAT_QUEUE_EMPTY)
                die(what, rc);
            if (empty % 4096 == 0) [[unlikely]] {
                const auto now = Clock::now();
                if (deadline == Clock::time_point{})
                    deadline = now + std::chrono::seconds(30);
                else if (now > deadline)
                    die(what, rc);
            }
        }
    }
    DAT_EVENT expect_connection_event(DAT_EVENT_NUMBER expected)
    {
        DAT_EVENT e = wait(conn_evd_, kConnectTimeout, "connection event");
        if (e.event_number != expected) {
            std::fprintf(stderr, "dat_perf: connection: %s, expected %s\n", event_name(e.event_number),
                         event_name(expected));
            std::exit(1);
        }
        return e;
    }

    const Options& opt_;
    DAT_IA_HANDLE ia_ = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async_ = DAT_HANDLE_NULL;
    DAT_IA_ATTR ia_attr_{};
    DAT_PZ_HANDLE pz_ = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE recv_evd_ = DAT_HANDLE_NULL, request_evd_ = DAT_HANDLE_NULL, conn_evd_ = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE cr_evd_ = DAT_HANDLE_NULL;
    DAT_PSP_HANDLE psp_ = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep_ = DAT_HANDLE_NULL;
    DAT_LMR_HANDLE lmr_ = DAT_HANDLE_NULL;
    DAT_LMR_CONTEXT lmr_context_ = 0;
    DAT_RMR_CONTEXT rmr_context_ = 0;
    DAT_RMR_TRIPLET remote_{};
    char* buffer_ = nullptr;
    std::uint64_t area_ = 0;
    int window_ = 1;
};

// --- the server: echoes pings until told to stop ------------------------------------

void serve(End& end)
{
    for (;;) {
        end.reap(end.recv_evd(), "control receive");
        const Control c = end.received_control();
        if (c.magic != kMagic)
            die("malformed control message", DAT_INTERNAL_ERROR);
        if (c.op == Op::quit)
            break;
        if (c.op == Op::written) {
            // The message itself landed on the first kControlSize bytes; the
            // last byte written is past them for all but the smallest sizes.
            const bool landed = c.size <= kControlSize || end.recv_area()[c.size - 1] == write_pattern(c.size);
            end.post_control_recv(); // before the answer lets the client go on
            end.send_control(Control{kMagic, Op::written, c.size, landed ? 1u : 0u});
            continue;
        }
        if (c.op != Op::latency)
            die("unknown control message", DAT_INTERNAL_ERROR);
        // Every ping has its receive posted before the client may send it:
        // the first here, each next one right after the pong that lets the
        // client send it. Between a ping's arrival and its pong nothing else
        // runs, as in ucx_perftest's loop: the next ping's receive is posted,
        // and the previous pong's send completion (its ACK came with this
        // ping) reaped, after the pong is sent.
        end.post_recv(c.size);
        end.send_control(Control{kMagic, Op::latency, c.size, c.count}); // ready
        for (std::uint64_t i = 0; i < c.count; ++i) {
            end.reap(end.recv_evd(), "ping");
            end.send(c.size);
            end.post_recv(i + 1 < c.count ? c.size : kControlSize); // the last one is for the next control
            if (i > 0)
                end.reap(end.request_evd(), "pong send");
        }
        if (c.count > 0)
            end.reap(end.request_evd(), "pong send");
    }
    end.await_disconnect();
    end.close();
}

// --- the client: runs the sweep -----------------------------------------------------

std::uint64_t scaled(const Options& o, std::uint64_t size, std::uint64_t most, std::uint64_t byte_budget)
{
    if (o.iterations > 0)
        return static_cast<std::uint64_t>(o.iterations);
    std::uint64_t n = std::clamp<std::uint64_t>(byte_budget / std::max<std::uint64_t>(size, 1), 20, most);
    if (o.quick)
        n = std::max<std::uint64_t>(n / 50, 5);
    return n;
}

// Untimed messages before the measured ones (both tests, as ucx_perftest's
// -w): the first messages of a run pay for first touches of rings and buffers.
std::uint64_t warmup_count(std::uint64_t n)
{
    return std::min<std::uint64_t>(n / 10 + 1, 50);
}

Row latency(End& end, const Options& o, std::uint64_t size)
{
    const std::uint64_t n = scaled(o, size, 2000, 64u << 20);
    const std::uint64_t warmup = warmup_count(n);
    std::vector<double> rtt_us;
    rtt_us.reserve(n);
    end.post_recv(kControlSize); // for "ready"
    end.send_control(Control{kMagic, Op::latency, size, n + warmup});
    end.reap(end.recv_evd(), "ready");
    for (std::uint64_t i = 0; i < n + warmup; ++i) {
        end.post_recv(size);
        const auto start = Clock::now();
        end.send(size);
        end.reap(end.recv_evd(), "pong");
        const auto stop = Clock::now();
        end.reap(end.request_evd(), "ping send");
        if (i >= warmup)
            rtt_us.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
    }
    std::sort(rtt_us.begin(), rtt_us.end());
    Row r{"lat", size, n};
    r.median_us = rtt_us[rtt_us.size() / 2] / 2;
    r.p99_us = rtt_us[std::min(rtt_us.size() - 1, rtt_us.size() * 99 / 100)] / 2;
    return r;
}

Row bandwidth(End& end, const Options& o, std::uint64_t size)
{
    const std::uint64_t n = scaled(o, size, 20000, 512u << 20);
    const std::uint64_t window = static_cast<std::uint64_t>(end.window());
    std::memset(end.send_area(), write_pattern(size), size);
    const auto stream = [&](std::uint64_t count) {
        std::uint64_t posted = 0, done = 0;
        while (done < count) {
            while (posted < count && posted - done < window)
                end.write(size, posted++);
            end.reap(end.request_evd(), "RDMA write");
            ++done;
        }
    };
    stream(warmup_count(n));
    const auto start = Clock::now();
    stream(n);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    // Untimed: a send behind the writes tells the server they are done
    // (an RC connection delivers in order); it checks the data arrived.
    end.post_control_recv();
    end.send_control(Control{kMagic, Op::written, size, n});
    end.reap(end.recv_evd(), "written answer");
    const Control answer = end.received_control();
    if (answer.magic != kMagic || answer.op != Op::written || answer.size != size)
        die("malformed answer from the server", DAT_INTERNAL_ERROR);
    if (answer.count != 1) {
        std::fprintf(stderr, "dat_perf: bw %" PRIu64 " B: the server's buffer does not hold the written data\n", size);
        std::exit(1);
    }
    Row r{"bw", size, n};
    r.mbytes_per_s = static_cast<double>(size) * static_cast<double>(n) / seconds / 1e6;
    r.msg_per_s = static_cast<double>(n) / seconds;
    return r;
}

// Where the rows go while the sweep runs: the table streams to stdout (as
// before) unless stdout carries another format; progress goes to stderr
// when it is a terminal, once a sweep has taken more than a second.
class Sink {
public:
    Sink(bool stream_table, std::size_t total)
        : stream_table_(stream_table), total_(total),
          progress_(isatty(STDERR_FILENO) && !(stream_table && isatty(STDOUT_FILENO))), start_(Clock::now())
    {
        if (stream_table_)
            dat_perf::write_table_header(stdout);
    }
    void starting(const char* test, std::uint64_t size)
    {
        if (progress_ && Clock::now() - start_ > std::chrono::seconds(1)) {
            std::fprintf(stderr, "\r\033[Kdat_perf: %s %" PRIu64 " B (%zu of %zu)", test, size, rows.size() + 1,
                         total_);
            shown_ = true;
        }
    }
    void add(Row r)
    {
        if (stream_table_)
            dat_perf::write_table_row(stdout, r);
        rows.push_back(std::move(r));
    }
    void done()
    {
        if (shown_)
            std::fprintf(stderr, "\r\033[K");
    }

    std::vector<Row> rows;

private:
    bool stream_table_;
    std::size_t total_;
    bool progress_;
    bool shown_ = false;
    Clock::time_point start_;
};

std::size_t sizes_in_sweep(const Options& o)
{
    std::size_t n = 0;
    for (std::uint64_t size = o.min_size; size <= o.max_size; size *= 2)
        ++n;
    return n;
}

std::vector<Row> run_client(End& end, const Options& o, bool stream_table)
{
    Sink sink(stream_table, sizes_in_sweep(o) * ((o.lat ? 1 : 0) + (o.bw ? 1 : 0)));
    if (o.lat)
        for (std::uint64_t size = o.min_size; size <= o.max_size; size *= 2) {
            sink.starting("lat", size);
            sink.add(latency(end, o, size));
        }
    if (o.bw)
        for (std::uint64_t size = o.min_size; size <= o.max_size; size *= 2) {
            sink.starting("bw", size);
            sink.add(bandwidth(end, o, size));
        }
    sink.done();
    end.send_control(Control{kMagic, Op::quit, 0, 0});
    end.disconnect();
    end.close();
    return std::move(sink.rows);
}

dat_perf::RunInfo run_info(const Options& o, const End& end)
{
    dat_perf::RunInfo i;
    i.ia = o.ia_name;
    i.mode = o.server_address.empty() ? "one-process" : "two-process";
    i.server = o.server_address;
    i.wait = o.busy ? "busy" : "evd_wait";
    i.iterations = static_cast<std::uint64_t>(o.iterations);
    i.quick = o.quick;
    i.window = static_cast<std::uint64_t>(end.window());
    i.min_size = o.min_size;
    i.max_size = o.max_size;
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0)
        i.host = host;
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    char date[32] = {};
    if (gmtime_r(&now, &utc))
        std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
    i.date = date;
    return i;
}

void usage(FILE* out)
{
    std::fprintf(out, "usage: dat_perf [options]            both ends in this process\n"
                      "       dat_perf -s [options]         server: waits for one client\n"
                      "       dat_perf -h ADDRESS [options] client of a server at ADDRESS (IPv4 or IPv6)\n"
                      "       dat_perf --input RESULT.json [output and --compare options]\n"
                      "                                     no measurement: format or check a saved result\n"
                      "measurement options:\n"
                      "  -P, --provider NAME    IA name from dat.conf (default fastdapl-tcp)\n"
                      "  -p, --port PORT        connection qualifier (default 47000; one process: any free)\n"
                      "  -t, --test TEST        lat, bw or all (default all)\n"
                      "  -m, --min-size BYTES   smallest message (default 1)\n"
                      "  -M, --max-size BYTES   largest message (default 4194304); sizes double from -m\n"
                      "  -n, --iterations N     iterations per size (default: fewer as sizes grow)\n"
                      "  -w, --window N         RDMA writes in flight in the bandwidth test (default 32,\n"
                      "                         at most the EP's max_request_dtos)\n"
                      "  -b, --busy             poll with dat_evd_dequeue instead of waiting in dat_evd_wait\n"
                      "  -q, --quick            few iterations (a smoke test)\n"
                      "output options (the client and one process; not the server):\n"
                      "      --format FORMAT    table (default), csv or json; without --output it goes to\n"
                      "                         stdout in place of the table\n"
                      "      --output FILE      write the result to FILE in --format's format (if not given:\n"
                      "                         json for *.json, csv for *.csv, else table); stdout still\n"
                      "                         shows the table\n"
                      "      --input FILE       read a result written by --format json instead of measuring\n"
                      "      --compare FILE     compare the result with a baseline written by --format json:\n"
                      "                         per test, size and metric, print both values, the change and\n"
                      "                         a verdict (to stderr when stdout carries csv or json)\n"
                      "      --tolerance PCT    a regression is a latency more than PCT %% higher or a rate\n"
                      "                         more than PCT %% lower than the baseline's (default 10)\n"
                      "      --metrics LIST     the metrics --compare checks, comma-separated, from the column\n"
                      "                         names below (default lat_med_us,mb_per_s)\n"
                      "      --help             this text\n"
                      "columns (table / csv and json names):\n"
                      "  test                   lat: send/recv ping-pong; bw: RDMA writes into the peer's buffer\n"
                      "  bytes                  message size in bytes\n"
                      "  iters / iterations     messages measured at this size, after n/10+1 (at most 50)\n"
                      "                         untimed warm-up messages\n"
                      "  lat_med_us             lat: one-way latency (round trip / 2), median, microseconds\n"
                      "  lat_p99_us             lat: one-way latency, 99th percentile, microseconds\n"
                      "  MB/s / mb_per_s        bw: 10^6 bytes per second of RDMA writes\n"
                      "  msg/s / msg_per_s      bw: RDMA writes completed per second\n"
                      "  a column that does not apply to the test: \"-\" in the table, empty in csv, null in json.\n"
                      "  json: an object with the run's parameters (tool, format_version, ia, mode, server,\n"
                      "  wait, iterations, quick, window, min_size, max_size, host, date in UTC, units) and\n"
                      "  \"results\", an array of one object per row with the csv columns.\n"
                      "exit status: 0 success; 1 a DAT call or the run failed; 2 usage error;\n"
                      "  3 --compare found a regression; 4 the --compare or --input file cannot be read,\n"
                      "  is not a dat_perf JSON result, or has none of the result's tests and sizes.\n"
                      "progress goes to stderr during a sweep when stderr is a terminal.\n");
}

[[noreturn]] void bad(const char* what, const char* value)
{
    std::fprintf(stderr, "dat_perf: %s: %s\n", what, value);
    std::exit(2);
}

Options parse(int argc, char** argv)
{
    Options o;
    enum : int { kFormat = 256, kOutput, kInput, kCompare, kTolerance, kMetrics };
    static const option longs[] = {{"server", no_argument, nullptr, 's'},
                                   {"host", required_argument, nullptr, 'h'},
                                   {"provider", required_argument, nullptr, 'P'},
                                   {"port", required_argument, nullptr, 'p'},
                                   {"test", required_argument, nullptr, 't'},
                                   {"min-size", required_argument, nullptr, 'm'},
                                   {"max-size", required_argument, nullptr, 'M'},
                                   {"iterations", required_argument, nullptr, 'n'},
                                   {"window", required_argument, nullptr, 'w'},
                                   {"busy", no_argument, nullptr, 'b'},
                                   {"quick", no_argument, nullptr, 'q'},
                                   {"help", no_argument, nullptr, 'H'},
                                   {"format", required_argument, nullptr, kFormat},
                                   {"output", required_argument, nullptr, kOutput},
                                   {"input", required_argument, nullptr, kInput},
                                   {"compare", required_argument, nullptr, kCompare},
                                   {"tolerance", required_argument, nullptr, kTolerance},
                                   {"metrics", required_argument, nullptr, kMetrics},
                                   {}};
    int c;
    auto number = [](const char* s, const char* what) {
        char* end = nullptr;
        const unsigned long long v = std::strtoull(s, &end, 0);
        if (!end || *end || v == 0) {
            std::fprintf(stderr, "dat_perf: %s: not a positive number: %s\n", what, s);
            std::exit(2);
        }
        return static_cast<std::uint64_t>(v);
    };
    bool metrics_given = false;
    while ((c = getopt_long(argc, argv, "sh:P:p:t:m:M:n:w:bq", longs, nullptr)) != -1) {
        switch (c) {
        case 's':
            o.server = true;
            break;
        case 'h':
            o.server_address = optarg;
            break;
        case 'P':
            o.ia_name = optarg;
            break;
        case 'p':
            o.port = number(optarg, "-p");
            break;
        case 't':
            o.lat = std::strcmp(optarg, "lat") == 0 || std::strcmp(optarg, "all") == 0;
            o.bw = std::strcmp(optarg, "bw") == 0 || std::strcmp(optarg, "all") == 0;
            if (!o.lat && !o.bw)
                bad("-t: lat, bw or all, not", optarg);
            break;
        case 'm':
            o.min_size = number(optarg, "-m");
            break;
        case 'M':
            o.max_size = number(optarg, "-M");
            break;
        case 'n':
            o.iterations = static_cast<int>(std::min<std::uint64_t>(number(optarg, "-n"), 1u << 30));
            break;
        case 'w':
            o.window = static_cast<int>(std::min<std::uint64_t>(number(optarg, "-w"), 1024));
            break;
        case 'b':
            o.busy = true;
            break;
        case 'q':
            o.quick = true;
            break;
        case kFormat:
            o.format = dat_perf::parse_format(optarg);
            if (!o.format)
                bad("--format: table, csv or json, not", optarg);
            break;
        case kOutput:
            o.output = optarg;
            break;
        case kInput:
            o.input = optarg;
            break;
        case kCompare:
            o.baseline = optarg;
            break;
        case kTolerance: {
            char* end = nullptr;
            o.tolerance_pct = std::strtod(optarg, &end);
            if (!end || *end || end == optarg || !(o.tolerance_pct >= 0) || o.tolerance_pct > 1e6)
                bad("--tolerance: not a percentage from 0 to 1000000", optarg);
            break;
        }
        case kMetrics: {
            metrics_given = true;
            o.compare_metrics.clear();
            std::string list = optarg;
            std::size_t start = 0;
            for (;;) {
                const std::size_t comma = list.find(',', start);
                const std::string name = list.substr(start, comma == std::string::npos ? comma : comma - start);
                const dat_perf::Metric* m = dat_perf::find_metric(name);
                if (!m)
                    bad("--metrics: lat_med_us, lat_p99_us, mb_per_s or msg_per_s, not", name.c_str());
                o.compare_metrics.push_back(m);
                if (comma == std::string::npos)
                    break;
                start = comma + 1;
            }
            break;
        }
        case 'H':
            usage(stdout);
            std::exit(0);
        default:
            usage(stderr);
            std::exit(2);
        }
    }
    if (!metrics_given)
        o.compare_metrics = {dat_perf::find_metric("lat_med_us"), dat_perf::find_metric("mb_per_s")};
    if (optind != argc || (o.server && !o.server_address.empty()) || o.min_size > o.max_size ||
        o.max_size > (1u << 30)) {
        usage(stderr);
        std::exit(2);
    }
    const bool results_options = o.format || !o.output.empty() || !o.baseline.empty() || !o.input.empty();
    if (o.server && results_options)
        bad("the server has no results", "--format, --output, --input and --compare are for the client");
    if (!o.input.empty() && !o.server_address.empty())
        bad("--input reads a result instead of measuring", "it does not go with -h");
    return o;
}

// The format of --output FILE: --format's, else from the file's suffix.
Format output_format(const Options& o)
{
    if (o.format)
        return *o.format;
    auto ends_with = [&](const char* suffix) {
        const std::size_t n = std::strlen(suffix);
        return o.output.size() >= n && o.output.compare(o.output.size() - n, n, suffix) == 0;
    };
    if (ends_with(".json"))
        return Format::json;
    if (ends_with(".csv"))
        return Format::csv;
    return Format::table;
}

Result read_or_exit(const std::string& path, const char* option)
{
    Result r;
    std::string error;
    if (!dat_perf::read_json(path, r, error)) {
        std::fprintf(stderr, "dat_perf: %s %s: %s\n", option, path.c_str(), error.c_str());
        std::exit(kExitBadBaseline);
    }
    return r;
}

// Measures (or reads --input), writes the result where asked, compares.
int run_sweep(const Options& o)
{
    std::optional<Result> baseline;
    if (!o.baseline.empty())
        baseline = read_or_exit(o.baseline, "--compare");
    FILE* output = nullptr;
    if (!o.output.empty()) {
        output = std::fopen(o.output.c_str(), "w");
        if (!output) {
            std::fprintf(stderr, "dat_perf: --output %s: %s\n", o.output.c_str(), std::strerror(errno));
            return 1;
        }
    }
    // stdout: the table, streamed as rows come, unless --format without --output.
    const Format stdout_format = o.output.empty() && o.format ? *o.format : Format::table;
    Result result;
    if (!o.input.empty()) {
        result = read_or_exit(o.input, "--input");
        dat_perf::write(stdout, stdout_format, result);
    } else {
        const bool stream_table = stdout_format == Format::table;
        if (!o.server_address.empty()) {
            // A numeric IPv4 or IPv6 address (fe80::1%eth0 names its interface).
            addrinfo hints{};
            hints.ai_flags = AI_NUMERICHOST;
            addrinfo* found = nullptr;
            if (getaddrinfo(o.server_address.c_str(), nullptr, &hints, &found) != 0 || !found ||
                found->ai_addrlen > sizeof(sockaddr_storage)) {
                std::fprintf(stderr, "dat_perf: -h: not an IPv4 or IPv6 address: %s\n", o.server_address.c_str());
                return 2;
            }
            sockaddr_storage server{};
            std::memcpy(&server, found->ai_addr, found->ai_addrlen);
            freeaddrinfo(found);
            End end(o);
            end.connect(server, o.port);
            result.info = run_info(o, end);
            result.rows = run_client(end, o, stream_table);
        } else {
            // One process: the server end on its own thread and IA, on any free qualifier.
            End server_end(o), client_end(o);
            const DAT_CONN_QUAL port = server_end.listen(0);
            std::thread server_thread([&] {
                server_end.accept();
                serve(server_end);
            });
            client_end.connect(server_end.address(), port);
            result.info = run_info(o, client_end);
            result.rows = run_client(client_end, o, stream_table);
            server_thread.join();
        }
        if (!stream_table)
            dat_perf::write(stdout, stdout_format, result);
    }
    if (output) {
        dat_perf::write(output, output_format(o), result);
        if (std::ferror(output) || std::fclose(output) != 0) {
            std::fprintf(stderr, "dat_perf: --output %s: write failed\n", o.output.c_str());
            return 1;
        }
    }
    if (!baseline)
        return 0;
    const dat_perf::RunInfo &b = baseline->info, &r = result.info;
    if (b.ia != r.ia || b.mode != r.mode || b.wait != r.wait)
        std::fprintf(stderr, "dat_perf: note: the baseline ran on %s (%s, %s), this result on %s (%s, %s)\n",
                     b.ia.c_str(), b.mode.c_str(), b.wait.c_str(), r.ia.c_str(), r.mode.c_str(), r.wait.c_str());
    FILE* report = stdout_format == Format::table ? stdout : stderr;
    const dat_perf::CompareOutcome outcome =
        dat_perf::compare(report, *baseline, result, {o.tolerance_pct, o.compare_metrics});
    if (!outcome.comparable) {
        std::fprintf(stderr, "dat_perf: --compare %s: the baseline has none of this result's tests and sizes\n",
                     o.baseline.c_str());
        return kExitBadBaseline;
    }
    return outcome.regressions ? kExitRegression : 0;
}

} // namespace

int main(int argc, char** argv)
{
    const Options o = parse(argc, argv);
    if (o.server) {
        End end(o);
        const DAT_CONN_QUAL port = end.listen(o.port);
        std::fprintf(stderr, "dat_perf: server on %s, qualifier %" PRIu64 "\n", o.ia_name.c_str(), port);
        end.accept();
        serve(end);
        return 0;
    }
    return run_sweep(o);
}
