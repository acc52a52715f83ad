// Connect / disconnect cycles across two processes through the public DAT
// API. One side disconnects (gracefully or abruptly) as soon as its
// ESTABLISHED arrives and waits for its own DISCONNECTED; the other frees
// its EP the moment its DISCONNECTED arrives. Every cycle must end with
// exactly one DISCONNECTED on each side, soon: an application that waits
// without a timeout would hang otherwise.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include <dat2/udat.h>

#include "test_ia.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <tuple>

namespace {

constexpr DAT_RETURN kOk = DAT_SUCCESS;
constexpr DAT_TIMEOUT kSetupWait = 2'000'000; // µs: a loopback connection is set up long before this
constexpr DAT_TIMEOUT kEndWait = 1'000'000;   // µs: a disconnect ends long before this
constexpr int kCycles = 1000;
constexpr int kMaxMisses = 3; // stop early: each miss costs kEndWait

// What one process tells about its cycles.
struct Tally {
    int cycles = 0;       // completed
    int misses = 0;       // the closer's DISCONNECTED did not come in time
    int wrong = 0;        // an unexpected event (BROKEN, say), or a second end event
    int setup_failed = 0; // connect / accept / create failed (the run stops)
};

// One process: IA, PZ, EVDs; an EP per cycle.
struct Side {
    Side()
    {
        ok = dat_ia_open(test_ia_name(), 8, &async, &ia) == kOk && dat_pz_create(ia, &pz) == kOk &&
             dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto_evd) == kOk &&
             dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd) == kOk &&
             dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd) == kOk;
        DAT_IA_ATTR attr{};
        ok = ok && dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &attr, 0, nullptr) == kOk;
        if (ok)
            address = attr.ia_address_ptr;
    }
    ~Side()
    {
        if (ia)
            dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    }
    bool create_ep(DAT_EP_HANDLE& ep)
    {
        DAT_EP_ATTR attr{};
        attr.service_type = DAT_SERVICE_TYPE_RC;
        attr.max_recv_dtos = 4;
        attr.max_request_dtos = 4;
        attr.max_recv_iov = 1;
        attr.max_request_iov = 1;
        return dat_ep_create(ia, pz, dto_evd, dto_evd, conn_evd, &attr, &ep) == kOk;
    }
    bool next(DAT_EVD_HANDLE evd, DAT_EVENT& e, DAT_TIMEOUT timeout)
    {
        DAT_COUNT nmore;
        return dat_evd_wait(evd, timeout, 1, &e, &nmore) == kOk;
    }
    // The end of `ep`'s connection as the closer: a disconnect and its
    // DISCONNECTED. A miss is ended abruptly, so the peer and the next cycle
    // go on.
    void close(DAT_EP_HANDLE ep, DAT_CLOSE_FLAGS how, Tally& t)
    {
        DAT_EVENT e;
        if (dat_ep_disconnect(ep, how) != kOk) {
            ++t.wrong;
            return;
        }
        if (!next(conn_evd, e, kEndWait)) {
            ++t.misses;
            DAT_EP_PARAM p{};
            dat_ep_query(ep, DAT_EP_FIELD_EP_STATE, &p);
            std::fprintf(stderr, "cycle %d: no end event after a disconnect (EP state %d)\n", t.cycles,
                         static_cast<int>(p.ep_state));
            dat_ep_disconnect(ep, DAT_CLOSE_ABRUPT_FLAG); // its DISCONNECTED follows
            next(conn_evd, e, kEndWait);
            return;
        }
        if (e.event_number != DAT_CONNECTION_EVENT_DISCONNECTED || e.event_data.connect_event_data.ep_handle != ep)
            ++t.wrong;
    }
    // The end as the other side: the EP goes as soon as its DISCONNECTED came.
    void free_on_disconnected(DAT_EP_HANDLE ep, Tally& t)
    {
        DAT_EVENT e;
        // The closer ends a miss abruptly after kEndWait: the event still comes.
        if (!next(conn_evd, e, 2 * kEndWait + kSetupWait) || e.event_number != DAT_CONNECTION_EVENT_DISCONNECTED ||
            e.event_data.connect_event_data.ep_handle != ep) {
            ++t.wrong;
            std::fprintf(stderr, "cycle %d: the freeing side got event %#x, not DISCONNECTED\n", t.cycles,
                         static_cast<unsigned>(e.event_number));
        }
        dat_ep_free(ep);
    }
    bool done(const Tally& t) const
    {
        return t.cycles == kCycles || t.misses >= kMaxMisses || t.setup_failed || t.wrong;
    }

    bool ok = false;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, dto_evd, conn_evd, cr_evd;
    DAT_PZ_HANDLE pz;
    DAT_IA_ADDRESS_PTR address = nullptr;
};

// The passive side in a child process; its tally comes back through a pipe.
pid_t fork_server(bool server_closes, DAT_CLOSE_FLAGS how, int& qual_fd, int& tally_fd)
{
    int q[2], t[2];
    if (pipe(q) != 0 || pipe(t) != 0)
        return -1;
    const pid_t pid = fork();
    if (pid != 0) {
        close(q[1]);
        close(t[1]);
        qual_fd = q[0];
        tally_fd = t[0];
        return pid;
    }
    close(q[0]);
    close(t[0]);
    alarm(60); // a child never outlives a broken test
    Tally tally;
    Side s;
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    if (!s.ok || dat_psp_create_any(s.ia, &qual, s.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp) != kOk)
        _exit(10);
    if (write(q[1], &qual, sizeof qual) != static_cast<ssize_t>(sizeof qual))
        _exit(11);
    while (!s.done(tally)) {
        DAT_EP_HANDLE ep;
        DAT_EVENT e;
        if (!s.create_ep(ep) || !s.next(s.cr_evd, e, kSetupWait) || e.event_number != DAT_CONNECTION_REQUEST_EVENT ||
            dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, ep, 0, nullptr) != kOk ||
            !s.next(s.conn_evd, e, kSetupWait) || e.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
            ++tally.setup_failed;
            break;
        }
        if (server_closes) {
            s.close(ep, how, tally);
            dat_ep_free(ep);
        } else {
            s.free_on_disconnected(ep, tally);
        }
        ++tally.cycles;
    }
    if (write(t[1], &tally, sizeof tally) != static_cast<ssize_t>(sizeof tally))
        _exit(12);
    _exit(0);
}

// (the server closes, graceful)
class DisconnectCycles : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(DisconnectCycles, EverySideGetsExactlyOneDisconnected)
{
    const bool server_closes = std::get<0>(GetParam());
    const DAT_CLOSE_FLAGS how = std::get<1>(GetParam()) ? DAT_CLOSE_GRACEFUL_FLAG : DAT_CLOSE_ABRUPT_FLAG;
    int qual_fd = -1, tally_fd = -1;
    const pid_t child = fork_server(server_closes, how, qual_fd, tally_fd);
    ASSERT_GT(child, 0);
    DAT_CONN_QUAL qual = 0;
    ASSERT_EQ(read(qual_fd, &qual, sizeof qual), static_cast<ssize_t>(sizeof qual));
    close(qual_fd);
    Side c;
    ASSERT_TRUE(c.ok);
    Tally tally;
    while (!c.done(tally)) {
        DAT_EP_HANDLE ep;
        DAT_EVENT e;
        if (!c.create_ep(ep) ||
            dat_ep_connect(ep, c.address, qual, kSetupWait, 0, nullptr, DAT_QOS_BEST_EFFORT,
                           DAT_CONNECT_DEFAULT_FLAG) != kOk ||
            !c.next(c.conn_evd, e, kSetupWait) || e.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
            ++tally.setup_failed;
            break;
        }
        if (server_closes) {
            c.free_on_disconnected(ep, tally);
        } else {
            c.close(ep, how, tally);
            dat_ep_free(ep);
        }
        ++tally.cycles;
    }
    Tally theirs;
    const bool got = read(tally_fd, &theirs, sizeof theirs) == static_cast<ssize_t>(sizeof theirs);
    close(tally_fd);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    ASSERT_TRUE(got);
    const Tally& closer = server_closes ? theirs : tally;
    const Tally& freer = server_closes ? tally : theirs;
    EXPECT_EQ(closer.misses, 0) << "of " << closer.cycles << " cycles";
    EXPECT_EQ(closer.wrong, 0);
    EXPECT_EQ(freer.wrong, 0);
    if (closer.misses < kMaxMisses) { // else the closer stopped early, and the freer's next setup failed
        EXPECT_EQ(closer.setup_failed + freer.setup_failed, 0);
        EXPECT_EQ(closer.cycles, kCycles);
        EXPECT_EQ(freer.cycles, kCycles);
    }
}

INSTANTIATE_TEST_SUITE_P(Closer, DisconnectCycles, ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                             return std::string(std::get<0>(info.param) ? "Server" : "Client") +
                                    (std::get<1>(info.param) ? "ClosesGracefully" : "ClosesAbruptly");
                         });

} // namespace
