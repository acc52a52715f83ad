// Soak: a mix of work through the public DAT API for a given time, then a
// check that the process is back where it started. Each round opens an IA
// and, on it: connects and disconnects endpoints (graceful and abrupt,
// either side first), moves sequenced messages through an SRQ shared by
// two connections, RDMA-writes a pattern into the peer and reads it back,
// and waits on a CNO for completions. Every byte moved is checked. At the
// end, with every IA closed, the resident set, open files and threads are
// compared with what they were after the warm-up: rounds for --warmup
// seconds, long enough for the handle arena's quarantine of freed slots
// (8 MiB) and the allocator's per-thread arenas to fill.
// Connections are paced (--max-connects-per-second, default 150): each
// leaves a socket in TIME_WAIT for a minute, and a faster churn exhausts
// the host's ephemeral ports (about 28,000), which no provider can help.
// usage: soak [--seconds N] [--warmup S] [--ia NAME] [--rss-slack-kib K] [--max-connects-per-second R]
// Exit 0 when every check passed; 1 otherwise (each failure printed).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include <dat2/udat.h>

#include <dirent.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr DAT_TIMEOUT kWait = 10'000'000; // µs

int g_failures = 0;
std::uint64_t g_bytes_checked = 0;

void fail(const char* what, DAT_RETURN rc = DAT_SUCCESS)
{
    ++g_failures;
    const char* major = "";
    const char* minor = "";
    if (rc != DAT_SUCCESS)
        dat_strerror(rc, &major, &minor);
    std::fprintf(stderr, "soak: FAIL: %s %s %s\n", what, major, minor);
}

bool ok(DAT_RETURN rc, const char* what)
{
    if (rc == DAT_SUCCESS)
        return true;
    fail(what, rc);
    return false;
}

// What /proc says about this process.
struct Usage {
    long rss_kib = 0;
    int fds = 0;
    int threads = 0;
};

int count_entries(const char* dir)
{
    int n = 0;
    if (DIR* d = opendir(dir)) {
        while (const dirent* e = readdir(d))
            n += e->d_name[0] != '.';
        closedir(d);
    }
    return n;
}

Usage usage()
{
    Usage u;
    if (FILE* f = std::fopen("/proc/self/status", "r")) {
        char line[256];
        while (std::fgets(line, sizeof line, f))
            if (std::strncmp(line, "VmRSS:", 6) == 0)
                u.rss_kib = std::strtol(line + 6, nullptr, 10);
        std::fclose(f);
    }
    u.fds = count_entries("/proc/self/fd") - 1; // less the directory being read
    u.threads = count_entries("/proc/self/task");
    return u;
}

// One IA with what every workload needs.
struct Ia {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE dto_a = DAT_HANDLE_NULL, dto_b = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE conn_a = DAT_HANDLE_NULL, conn_b = DAT_HANDLE_NULL, cr = DAT_HANDLE_NULL;
    DAT_IA_ADDRESS_PTR address = nullptr;
    std::vector<unsigned char> mem;
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    DAT_LMR_CONTEXT lctx = 0;
    DAT_RMR_CONTEXT rctx = 0;
    bool good = false;

    explicit Ia(const char* name) : mem(1 << 20)
    {
        good = ok(dat_ia_open(const_cast<char*>(name), 64, &async, &ia), "dat_ia_open") &&
               ok(dat_pz_create(ia, &pz), "dat_pz_create") &&
               ok(dat_evd_create(ia, 512, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto_a), "dat_evd_create") &&
               ok(dat_evd_create(ia, 512, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto_b), "dat_evd_create") &&
               ok(dat_evd_create(ia, 64, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_a), "dat_evd_create") &&
               ok(dat_evd_create(ia, 64, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_b), "dat_evd_create") &&
               ok(dat_evd_create(ia, 64, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr), "dat_evd_create");
        if (!good)
            return;
        DAT_IA_ATTR attr{};
        good = ok(dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &attr, 0, nullptr), "dat_ia_query");
        address = attr.ia_address_ptr;
        DAT_REGION_DESCRIPTION region{};
        region.for_va = mem.data();
        good = good && ok(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, mem.size(), pz, DAT_MEM_PRIV_ALL_FLAG,
                                         DAT_VA_TYPE_VA, &lmr, &lctx, &rctx, nullptr, nullptr),
                          "dat_lmr_create");
    }
    ~Ia()
    {
        if (ia)
            ok(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), "dat_ia_close");
    }
    DAT_LMR_TRIPLET piece(std::size_t offset, DAT_SEG_LENGTH length)
    {
        return {reinterpret_cast<DAT_VADDR>(mem.data() + offset), length, lctx};
    }
    bool next(DAT_EVD_HANDLE evd, DAT_EVENT& e, const char* what)
    {
        DAT_COUNT nmore = 0;
        return ok(dat_evd_wait(evd, kWait, 1, &e, &nmore), what);
    }
    // An active EP (on dto_a/conn_a) connected to a passive one (dto_b/conn_b).
    bool connect(DAT_EP_HANDLE& a, DAT_EP_HANDLE& b, DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL)
    {
        a = b = DAT_HANDLE_NULL;
        if (!ok(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, nullptr, &a), "dat_ep_create"))
            return false;
        DAT_RETURN rc;
        if (srq) {
            DAT_EP_ATTR attr{};
            attr.service_type = DAT_SERVICE_TYPE_RC;
            rc = dat_ep_create_with_srq(ia, pz, dto_b, dto_b, conn_b, srq, &attr, &b);
        } else {
            rc = dat_ep_create(ia, pz, dto_b, dto_b, conn_b, nullptr, &b);
        }
        if (!ok(rc, "dat_ep_create (passive)"))
            return false;
        DAT_CONN_QUAL qual = 0;
        DAT_PSP_HANDLE psp;
        if (!ok(dat_psp_create_any(ia, &qual, cr, DAT_PSP_CONSUMER_FLAG, &psp), "dat_psp_create_any"))
            return false;
        DAT_EVENT e{};
        bool done = ok(dat_ep_connect(a, address, qual, kWait, 0, nullptr, DAT_QOS_BEST_EFFORT,
                                      DAT_CONNECT_DEFAULT_FLAG),
                       "dat_ep_connect") &&
                    next(cr, e, "connection request") &&
                    ok(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, b, 0, nullptr), "dat_cr_accept");
        DAT_EVENT ea{}, eb{};
        done = done && next(conn_a, ea, "ESTABLISHED (active)") && next(conn_b, eb, "ESTABLISHED (passive)");
        if (done && (ea.event_number != DAT_CONNECTION_EVENT_ESTABLISHED ||
                     eb.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)) {
            char what[96];
            std::snprintf(what, sizeof what, "connection not established (events 0x%x, 0x%x)",
                          static_cast<unsigned>(ea.event_number), static_cast<unsigned>(eb.event_number));
            fail(what);
            done = false;
        }
        ok(dat_psp_free(psp), "dat_psp_free");
        return done;
    }
    // Ends a connection from one side; both sides must see their event.
    void disconnect(DAT_EP_HANDLE a, DAT_EP_HANDLE b, bool graceful, bool passive_first)
    {
        ok(dat_ep_disconnect(passive_first ? b : a, graceful ? DAT_CLOSE_GRACEFUL_FLAG : DAT_CLOSE_ABRUPT_FLAG),
           "dat_ep_disconnect");
        DAT_EVENT e{};
        if (next(conn_a, e, "DISCONNECTED (active)") && e.event_number != DAT_CONNECTION_EVENT_DISCONNECTED)
            fail("active side: not DISCONNECTED");
        if (next(conn_b, e, "DISCONNECTED (passive)") && e.event_number != DAT_CONNECTION_EVENT_DISCONNECTED)
            fail("passive side: not DISCONNECTED");
    }
    void drain(DAT_EVD_HANDLE evd)
    {
        DAT_EVENT e{};
        while (dat_evd_dequeue(evd, &e) == DAT_SUCCESS) {
        }
    }
};

// Connections made and ended, every way round.
void churn(Ia& x, int rounds)
{
    for (int i = 0; i < rounds; ++i) {
        DAT_EP_HANDLE a, b;
        if (x.connect(a, b))
            x.disconnect(a, b, i % 2 == 0, i % 4 >= 2);
        x.drain(x.dto_a);
        x.drain(x.dto_b);
        if (a)
            ok(dat_ep_free(a), "dat_ep_free");
        if (b)
            ok(dat_ep_free(b), "dat_ep_free");
    }
}

// Sequenced messages from two connections into one SRQ; each checked.
void srq_traffic(Ia& x, int messages)
{
    constexpr std::size_t kSize = 512, kBuffers = 32, kBase = 1 << 19;
    DAT_SRQ_ATTR attr{static_cast<DAT_COUNT>(kBuffers), 1, DAT_SRQ_LW_DEFAULT};
    DAT_SRQ_HANDLE srq;
    if (!ok(dat_srq_create(x.ia, x.pz, &attr, &srq), "dat_srq_create"))
        return;
    for (std::size_t i = 0; i < kBuffers; ++i) {
        DAT_LMR_TRIPLET s = x.piece(kBase + i * kSize, kSize);
        ok(dat_srq_post_recv(srq, 1, &s, DAT_DTO_COOKIE{.as_64 = i}), "dat_srq_post_recv");
    }
    DAT_EP_HANDLE a[2] = {}, b[2] = {};
    bool up = x.connect(a[0], b[0], srq) && x.connect(a[1], b[1], srq);
    std::uint32_t sent = 0, received = 0, sequence[2] = {0, 0};
    while (up && received < static_cast<std::uint32_t>(messages)) {
        // At most kBuffers in flight: one per SRQ buffer.
        while (sent < static_cast<std::uint32_t>(messages) && sent - received < kBuffers / 2) {
            const int c = static_cast<int>(sent % 2);
            unsigned char* out = x.mem.data() + (sent % 64) * kSize;
            const std::uint32_t header[2] = {static_cast<std::uint32_t>(c), sequence[c]++};
            std::memcpy(out, header, sizeof header);
            for (std::size_t k = sizeof header; k < kSize; ++k)
                out[k] = static_cast<unsigned char>(header[0] * 131 + header[1] * 7 + k);
            DAT_LMR_TRIPLET s = x.piece((sent % 64) * kSize, kSize);
            if (!ok(dat_ep_post_send(a[c], 1, &s, DAT_DTO_COOKIE{.as_64 = sent}, DAT_COMPLETION_DEFAULT_FLAG),
                    "dat_ep_post_send")) {
                up = false;
                break;
            }
            ++sent;
            DAT_EVENT e{};
            if (!x.next(x.dto_a, e, "send completion") ||
                e.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS) {
                fail("send did not complete");
                up = false;
            }
        }
        DAT_EVENT e{};
        if (!up || !x.next(x.dto_b, e, "SRQ receive"))
            break;
        const auto& d = e.event_data.dto_completion_event_data;
        if (d.status != DAT_DTO_SUCCESS || d.transfered_length != kSize) {
            fail("SRQ receive failed or short");
            break;
        }
        const std::uint64_t slot = d.user_cookie.as_64;
        const unsigned char* in = x.mem.data() + kBase + slot * kSize;
        std::uint32_t header[2];
        std::memcpy(header, in, sizeof header);
        bool good = header[0] < 2;
        for (std::size_t k = sizeof header; good && k < kSize; ++k)
            good = in[k] == static_cast<unsigned char>(header[0] * 131 + header[1] * 7 + k);
        if (!good)
            fail("SRQ message corrupt");
        g_bytes_checked += kSize;
        ++received;
        DAT_LMR_TRIPLET again = x.piece(kBase + slot * kSize, kSize);
        ok(dat_srq_post_recv(srq, 1, &again, DAT_DTO_COOKIE{.as_64 = slot}), "dat_srq_post_recv (again)");
    }
    for (int c = 0; c < 2; ++c) {
        if (a[c] && b[c])
            x.disconnect(a[c], b[c], false, c == 1);
        x.drain(x.dto_a);
        x.drain(x.dto_b);
        if (a[c])
            ok(dat_ep_free(a[c]), "dat_ep_free");
        if (b[c])
            ok(dat_ep_free(b[c]), "dat_ep_free");
    }
    x.drain(x.dto_b); // the SRQ's flushed buffers are not the endpoints'
    ok(dat_srq_free(srq), "dat_srq_free");
}

// A pattern RDMA-written into the peer's buffer, read back elsewhere, both
// compared; completions taken through a CNO.
void rdma_with_cno(Ia& x, int rounds, std::uint32_t seed)
{
    DAT_CNO_HANDLE cno;
    if (!ok(dat_cno_create(x.ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), "dat_cno_create"))
        return;
    DAT_EP_HANDLE a, b;
    if (!x.connect(a, b)) {
        ok(dat_cno_free(cno), "dat_cno_free");
        return;
    }
    ok(dat_evd_modify_cno(x.dto_a, cno), "dat_evd_modify_cno");
    constexpr std::size_t kSize = 64 * 1024;
    for (int r = 0; r < rounds; ++r) {
        unsigned char* src = x.mem.data();
        unsigned char* dst = x.mem.data() + 2 * kSize;
        unsigned char* back = x.mem.data() + 4 * kSize;
        for (std::size_t k = 0; k < kSize; ++k)
            src[k] = static_cast<unsigned char>((seed + static_cast<std::uint32_t>(r) * 31 + k * 13) >> 1);
        std::memset(back, 0, kSize);
        DAT_LMR_TRIPLET local = x.piece(0, kSize), into = x.piece(4 * kSize, kSize);
        DAT_RMR_TRIPLET remote{reinterpret_cast<DAT_VADDR>(dst), kSize, x.rctx};
        ok(dat_ep_post_rdma_write(a, 1, &local, DAT_DTO_COOKIE{.as_64 = 1}, &remote, DAT_COMPLETION_DEFAULT_FLAG),
           "dat_ep_post_rdma_write");
        ok(dat_ep_post_rdma_read(a, 1, &into, DAT_DTO_COOKIE{.as_64 = 2}, &remote, DAT_COMPLETION_DEFAULT_FLAG),
           "dat_ep_post_rdma_read");
        for (int done = 0; done < 2;) {
            DAT_EVENT e{};
            if (dat_evd_dequeue(x.dto_a, &e) == DAT_SUCCESS) {
                if (e.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS)
                    fail("RDMA completion in error");
                ++done;
                continue;
            }
            DAT_EVD_HANDLE woken = DAT_HANDLE_NULL;
            const DAT_RETURN rc = dat_cno_wait(cno, kWait, &woken);
            if (rc != DAT_SUCCESS && DAT_GET_TYPE(rc) != DAT_QUEUE_EMPTY) {
                fail("dat_cno_wait", rc);
                break;
            }
        }
        if (std::memcmp(src, dst, kSize) != 0 || std::memcmp(src, back, kSize) != 0)
            fail("RDMA data differs");
        g_bytes_checked += 2 * kSize;
    }
    ok(dat_evd_modify_cno(x.dto_a, DAT_HANDLE_NULL), "dat_evd_modify_cno (off)");
    x.disconnect(a, b, true, false);
    x.drain(x.dto_a);
    x.drain(x.dto_b);
    ok(dat_ep_free(a), "dat_ep_free");
    ok(dat_ep_free(b), "dat_ep_free");
    ok(dat_cno_free(cno), "dat_cno_free");
}

void round(const char* ia_name, std::uint32_t n)
{
    Ia x(ia_name);
    if (!x.good)
        return;
    churn(x, 8);
    srq_traffic(x, 200);
    rdma_with_cno(x, 8, n);
}

} // namespace

int main(int argc, char** argv)
{
    double seconds = 60, warmup = 10, max_rate = 150;
    const char* ia = "fastdapl-tcp";
    long rss_slack_kib = 2048;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string opt = argv[i];
        if (opt == "--seconds")
            seconds = std::atof(argv[i + 1]);
        else if (opt == "--max-connects-per-second")
            max_rate = std::atof(argv[i + 1]);
        else if (opt == "--warmup")
            warmup = std::atof(argv[i + 1]);
        else if (opt == "--ia")
            ia = argv[i + 1];
        else if (opt == "--rss-slack-kib")
            rss_slack_kib = std::atol(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: soak [--seconds N] [--warmup S] [--ia NAME] [--rss-slack-kib K] "
                                 "[--max-connects-per-second R]\n");
            return 2;
        }
    }
    const auto warm = std::chrono::steady_clock::now();
    do
        round(ia, 0);
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - warm).count() < warmup && g_failures == 0);
    const Usage before = usage();
    const auto start = std::chrono::steady_clock::now();
    std::uint32_t rounds = 0;
    constexpr int kConnectionsPerRound = 11;
    for (;;) {
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (elapsed >= seconds || g_failures != 0)
            break;
        const double ahead = rounds * kConnectionsPerRound / max_rate - elapsed;
        if (ahead > 0)
            std::this_thread::sleep_for(std::chrono::duration<double>(ahead));
        round(ia, ++rounds);
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const Usage after = usage();
    std::printf("soak: %u rounds in %.0f s on %s: %u connections, %.1f MB checked\n", rounds, took, ia,
                rounds * kConnectionsPerRound, static_cast<double>(g_bytes_checked) / 1e6);
    std::printf("soak: rss %ld -> %ld KiB, open files %d -> %d, threads %d -> %d\n", before.rss_kib, after.rss_kib,
                before.fds, after.fds, before.threads, after.threads);
    if (after.fds != before.fds)
        fail("open files not back to where they were");
    if (after.threads != before.threads)
        fail("threads not back to where they were");
    if (after.rss_kib > before.rss_kib + rss_slack_kib)
        fail("resident set grew past the slack");
    if (g_failures) {
        std::printf("soak: %d failures\n", g_failures);
        return 1;
    }
    std::printf("soak: ok\n");
    return 0;
}
