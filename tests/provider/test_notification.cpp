// libfastdapl through the public DAT API: consumer notification objects
// (CNO), their link to EVDs, asynchronous overflow reports, and the
// notifications that wake a thread waiting for a completion.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include <dat2/udat.h>

#include "connect_through_psp.hpp"
#include "test_ia.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

// dat_evd_wait sleeps at once, without polling the device first: every
// completion a waiter gets then comes through the device's notification
// (set before the provider reads it, at its first wait).
[[maybe_unused]] const bool kNoWaitSpin = ::setenv("FASTDAPL_WAIT_SPIN_US", "0", 1) == 0;

constexpr DAT_RETURN kOk = DAT_SUCCESS;
constexpr DAT_TIMEOUT kSecond = 1000000;
DAT_RETURN type_of(DAT_RETURN rc) { return DAT_GET_TYPE(rc); }
DAT_RETURN t(DAT_RETURN type) { return type; }

class Notification : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_EQ(dat_ia_open(test_ia_name(), 8, &async, &ia), kOk); }
    void TearDown() override
    {
        if (ia) {
            EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), kOk);
        }
    }
    DAT_EVD_HANDLE sw_evd(DAT_CNO_HANDLE cno, DAT_COUNT qlen = 8)
    {
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        EXPECT_EQ(dat_evd_create(ia, qlen, cno, DAT_EVD_SOFTWARE_FLAG, &evd), kOk);
        return evd;
    }
    static DAT_RETURN post(DAT_EVD_HANDLE evd)
    {
        DAT_EVENT e{};
        e.event_number = DAT_SOFTWARE_EVENT;
        return dat_evd_post_se(evd, &e);
    }
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
};

// Two endpoints of the fixture's IA connected to each other, each with its
// own DTO EVD, and a registered buffer: what the completion tests use.
struct Connected {
    explicit Connected(DAT_IA_HANDLE ia_) : ia(ia_) { open(); }
    void open()
    {
        ASSERT_EQ(dat_pz_create(ia, &pz), kOk);
        for (DAT_EVD_HANDLE* evd : {&dto_a, &dto_b})
            ASSERT_EQ(dat_evd_create(ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, evd), kOk);
        for (DAT_EVD_HANDLE* evd : {&conn_a, &conn_b, &cr})
            ASSERT_EQ(dat_evd_create(ia, 8, DAT_HANDLE_NULL,
                                     evd == &cr ? DAT_EVD_CR_FLAG : DAT_EVD_CONNECTION_FLAG, evd),
                      kOk);
        ASSERT_EQ(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, nullptr, &a), kOk);
        ASSERT_EQ(dat_ep_create(ia, pz, dto_b, dto_b, conn_b, nullptr, &b), kOk);
        DAT_IA_ATTR attr{};
        ASSERT_EQ(dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &attr, 0, nullptr), kOk);
        fastdapl_test::connect_through_psp(ia, attr.ia_address_ptr, cr, a, conn_a, b, conn_b);
        DAT_REGION_DESCRIPTION region{};
        region.for_va = buffer.data();
        DAT_LMR_HANDLE lmr;
        DAT_RMR_CONTEXT rmr;
        DAT_VLEN size;
        DAT_VADDR va;
        ASSERT_EQ(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, buffer.size(), pz, DAT_MEM_PRIV_ALL_FLAG,
                                 DAT_VA_TYPE_VA, &lmr, &lkey, &rmr, &size, &va),
                  kOk);
    }
    // 8 bytes at `offset` of the buffer.
    DAT_LMR_TRIPLET piece(std::size_t offset) const
    {
        DAT_LMR_TRIPLET t{};
        t.lmr_context = lkey;
        t.virtual_address = reinterpret_cast<DAT_VADDR>(buffer.data() + offset);
        t.segment_length = 8;
        return t;
    }
    DAT_RETURN receive(DAT_EP_HANDLE ep, std::size_t offset)
    {
        DAT_LMR_TRIPLET iov = piece(offset);
        return dat_ep_post_recv(ep, 1, &iov, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG);
    }
    DAT_RETURN send(DAT_EP_HANDLE ep, std::size_t offset)
    {
        DAT_LMR_TRIPLET iov = piece(offset);
        return dat_ep_post_send(ep, 1, &iov, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG);
    }
    // The next event of a DTO EVD by dat_evd_wait (which sleeps at once): a
    // successful completion of `operation`, within 5 s.
    static bool completed(DAT_EVD_HANDLE evd, DAT_DTOS operation)
    {
        DAT_EVENT e{};
        DAT_COUNT nmore;
        return dat_evd_wait(evd, 5 * kSecond, 1, &e, &nmore) == kOk && e.event_number == DAT_DTO_COMPLETION_EVENT &&
               e.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS &&
               e.event_data.dto_completion_event_data.operation == operation;
    }

    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE dto_a = DAT_HANDLE_NULL, dto_b = DAT_HANDLE_NULL, conn_a = DAT_HANDLE_NULL,
                   conn_b = DAT_HANDLE_NULL, cr = DAT_HANDLE_NULL;
    DAT_EP_HANDLE a = DAT_HANDLE_NULL, b = DAT_HANDLE_NULL;
    std::vector<char> buffer = std::vector<char>(4096);
    DAT_LMR_CONTEXT lkey = 0;
};

struct AgentLog {
    std::atomic<int> calls{0};
    std::atomic<DAT_EVD_HANDLE> evd{nullptr};
    static void DAT_API record(DAT_PVOID self, DAT_EVD_HANDLE evd)
    {
        auto* log = static_cast<AgentLog*>(self);
        log->evd = evd;
        ++log->calls;
    }
};

TEST_F(Notification, CreateQueryModifyFreeAndTheirErrors)
{
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    EXPECT_EQ(type_of(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT{this, nullptr}, &cno)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_cno_create(async, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, nullptr)), t(DAT_INVALID_PARAMETER));
    ASSERT_EQ(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), kOk);

    DAT_HANDLE_TYPE type;
    ASSERT_EQ(dat_get_handle_type(cno, &type), kOk);
    EXPECT_EQ(type, DAT_HANDLE_TYPE_CNO);
    DAT_CNO_PARAM param{};
    ASSERT_EQ(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &param), kOk);
    // The provider's own IA pointer; our registry takes it as well as the handle it gave out.
    ASSERT_EQ(dat_get_handle_type(param.ia_handle, &type), kOk);
    EXPECT_EQ(type, DAT_HANDLE_TYPE_IA);
    EXPECT_EQ(dat_ia_query(param.ia_handle, nullptr, DAT_IA_FIELD_NONE, nullptr, DAT_PROVIDER_FIELD_NONE, nullptr), kOk);
    EXPECT_EQ(param.proxy_type, DAT_PROXY_TYPE_NONE);
    EXPECT_EQ(type_of(dat_cno_query(cno, static_cast<DAT_CNO_PARAM_MASK>(0x40), &param)), t(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_cno_query(cno, DAT_CNO_FIELD_ALL, nullptr)), t(DAT_INVALID_PARAMETER));

    AgentLog log;
    ASSERT_EQ(dat_cno_modify_agent(cno, DAT_OS_WAIT_PROXY_AGENT{&log, &AgentLog::record}), kOk);
    ASSERT_EQ(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &param), kOk);
    EXPECT_EQ(param.proxy_type, DAT_PROXY_TYPE_AGENT);
    EXPECT_EQ(param.proxy.agent.instance_data, &log);
    EXPECT_EQ(param.proxy.agent.proxy_agent_func, &AgentLog::record);
    EXPECT_EQ(type_of(dat_cno_modify_agent(cno, DAT_OS_WAIT_PROXY_AGENT{&log, nullptr})), t(DAT_INVALID_PARAMETER));

    // An EVD that feeds it keeps it alive; the EVD reports its CNO.
    DAT_EVD_HANDLE evd = sw_evd(cno);
    DAT_EVD_PARAM ep{};
    ASSERT_EQ(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &ep), kOk);
    EXPECT_EQ(ep.cno_handle, cno);
    EXPECT_EQ(type_of(dat_cno_free(cno)), t(DAT_INVALID_STATE));
    ASSERT_EQ(dat_evd_modify_cno(evd, DAT_HANDLE_NULL), kOk);
    ASSERT_EQ(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &ep), kOk);
    EXPECT_EQ(ep.cno_handle, DAT_HANDLE_NULL);
    EXPECT_EQ(type_of(dat_evd_modify_cno(evd, async)), t(DAT_INVALID_HANDLE)); // an EVD is not a CNO
    EXPECT_EQ(type_of(dat_evd_create(ia, 4, evd, DAT_EVD_SOFTWARE_FLAG, &ep.ia_handle)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(log.calls.load(), 0);
    ASSERT_EQ(dat_cno_free(cno), kOk);
    EXPECT_EQ(type_of(dat_cno_free(cno)), t(DAT_INVALID_HANDLE)); // stale
    EXPECT_EQ(type_of(dat_cno_wait(cno, 0, &ep.cno_handle)), t(DAT_INVALID_HANDLE));
    EXPECT_EQ(dat_evd_free(evd), kOk);
}

TEST_F(Notification, WaitTimesOutEmptyThenReturnsTheTriggeringEvd)
{
    DAT_CNO_HANDLE cno;
    ASSERT_EQ(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), kOk);
    DAT_EVD_HANDLE a = sw_evd(cno), b = sw_evd(cno);
    DAT_EVD_HANDLE hint = a;
    EXPECT_EQ(type_of(dat_cno_wait(cno, 1000, &hint)), t(DAT_QUEUE_EMPTY));
    EXPECT_EQ(hint, DAT_HANDLE_NULL);
    EXPECT_EQ(type_of(dat_cno_wait(cno, 0, nullptr)), t(DAT_INVALID_PARAMETER));

    // A trigger with no waiter is remembered: the next wait returns at once.
    ASSERT_EQ(post(b), kOk);
    ASSERT_EQ(dat_cno_wait(cno, 0, &hint), kOk);
    EXPECT_EQ(hint, b);
    EXPECT_EQ(type_of(dat_cno_wait(cno, 0, &hint)), t(DAT_QUEUE_EMPTY)); // taken

    // A blocked waiter wakes on a post from another thread.
    std::atomic<DAT_RETURN> rc{DAT_INTERNAL_ERROR};
    std::atomic<DAT_EVD_HANDLE> woke{nullptr};
    std::thread waiter([&] {
        DAT_EVD_HANDLE h = DAT_HANDLE_NULL;
        rc = dat_cno_wait(cno, 10 * kSecond, &h);
        woke = h;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(type_of(dat_cno_free(cno)), t(DAT_INVALID_STATE)); // linked and waited on
    ASSERT_EQ(post(a), kOk);
    waiter.join();
    EXPECT_EQ(rc.load(), kOk);
    EXPECT_EQ(woke.load(), a);

    // A disabled EVD, or one with its own waiter, does not trigger the CNO.
    ASSERT_EQ(dat_evd_disable(a), kOk);
    ASSERT_EQ(post(a), kOk);
    EXPECT_EQ(type_of(dat_cno_wait(cno, 1000, &hint)), t(DAT_QUEUE_EMPTY));
    ASSERT_EQ(dat_evd_enable(a), kOk);
    DAT_EVENT e;
    DAT_COUNT nmore;
    while (dat_evd_dequeue(a, &e) == kOk) {
    }
    while (dat_evd_dequeue(b, &e) == kOk) {
    }
    std::thread evd_waiter([&] { EXPECT_EQ(dat_evd_wait(b, 5 * kSecond, 1, &e, &nmore), kOk); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(post(b), kOk);
    evd_waiter.join();
    EXPECT_EQ(type_of(dat_cno_wait(cno, 1000, &hint)), t(DAT_QUEUE_EMPTY));
}

// Both sides of a ping-pong wait in dat_evd_wait, which sleeps at once: each
// completion reaches its waiter only through the device's notification
// (the device skips it for EVDs that nobody waits on or watches, so the
// waiter must be seen in time, every time). A lost wake-up is a 5 s
// timeout here. Each side takes a reply and its own send's completion in
// either order: a device may acknowledge the echo's reply after the next
// ping has arrived (rxe does; the software NIC carries the ACK in the ping).
TEST_F(Notification, WaitersThatSleepAtOnceAreWokenByEveryCompletion)
{
    Connected c(ia);
    ASSERT_FALSE(HasFatalFailure());
    constexpr int kRounds = 2000;
    std::atomic<int> echoed{0};
    std::thread echo([&] {
        int sent = 0;
        while (echoed < kRounds || sent < kRounds) {
            DAT_EVENT e{};
            DAT_COUNT nmore;
            if (dat_evd_wait(c.dto_b, 5 * kSecond, 1, &e, &nmore) != kOk ||
                e.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS)
                return;
            if (e.event_data.dto_completion_event_data.operation == DAT_DTO_SEND) {
                ++sent;
                continue;
            }
            if (e.event_data.dto_completion_event_data.operation != DAT_DTO_RECEIVE || echoed == kRounds ||
                c.receive(c.b, 1024) != kOk || c.send(c.b, 2048) != kOk)
                return;
            ++echoed;
        }
    });
    ASSERT_EQ(c.receive(c.b, 1024), kOk);
    int rounds = 0;
    for (; rounds < kRounds; ++rounds) {
        if (c.receive(c.a, 0) != kOk || c.send(c.a, 512) != kOk)
            break;
        // The reply's and the send's completions, in either order.
        DAT_EVENT e{};
        DAT_COUNT nmore;
        bool got_reply = false, got_send = false, fine = true;
        while (fine && !(got_reply && got_send)) {
            fine = dat_evd_wait(c.dto_a, 5 * kSecond, 1, &e, &nmore) == kOk &&
                   e.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS;
            got_reply |= fine && e.event_data.dto_completion_event_data.operation == DAT_DTO_RECEIVE;
            got_send |= fine && e.event_data.dto_completion_event_data.operation == DAT_DTO_SEND;
        }
        if (!fine)
            break;
    }
    echo.join();
    EXPECT_EQ(rounds, kRounds);
    EXPECT_EQ(echoed.load(), kRounds);
}

// A DTO EVD linked to a CNO triggers it with its completions, also while
// nobody waits on the EVD; unlinked it does not, linked again it does.
TEST_F(Notification, CompletionsTriggerTheLinkedCnoUntilUnlinked)
{
    Connected c(ia);
    ASSERT_FALSE(HasFatalFailure());
    DAT_CNO_HANDLE cno;
    ASSERT_EQ(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), kOk);
    ASSERT_EQ(dat_evd_modify_cno(c.dto_b, cno), kOk);
    DAT_EVD_HANDLE hint = DAT_HANDLE_NULL;
    DAT_EVENT e{};
    for (int linked : {1, 0, 1}) {
        ASSERT_EQ(c.receive(c.b, 1024), kOk);
        ASSERT_EQ(c.send(c.a, 0), kOk);
        if (linked) {
            ASSERT_EQ(dat_cno_wait(cno, 5 * kSecond, &hint), kOk);
            EXPECT_EQ(hint, c.dto_b);
        } else {
            EXPECT_EQ(type_of(dat_cno_wait(cno, kSecond / 2, &hint)), t(DAT_QUEUE_EMPTY));
        }
        // The receive is there either way (the CNO is only told of it).
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        DAT_RETURN rc;
        while (DAT_GET_TYPE(rc = dat_evd_dequeue(c.dto_b, &e)) == DAT_QUEUE_EMPTY &&
               std::chrono::steady_clock::now() < until) {
        }
        ASSERT_EQ(rc, kOk);
        EXPECT_EQ(e.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE);
        ASSERT_TRUE(Connected::completed(c.dto_a, DAT_DTO_SEND));
        // A second trigger for the same completion (the software mlx5
        // device's direct path gives two: a verbs IA's device thread
        // re-arms the CQ over the CQE not yet reaped) is taken before the
        // link changes, so that each round sees only its own.
        while (dat_cno_wait(cno, kSecond / 10, &hint) == kOk) {
        }
        ASSERT_EQ(dat_evd_modify_cno(c.dto_b, linked ? DAT_HANDLE_NULL : cno), kOk);
    }
    ASSERT_EQ(dat_evd_modify_cno(c.dto_b, DAT_HANDLE_NULL), kOk);
    EXPECT_EQ(dat_cno_free(cno), kOk);
}

TEST_F(Notification, AgentIsCalledOnceThenDetached)
{
    AgentLog log;
    DAT_CNO_HANDLE cno;
    ASSERT_EQ(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT{&log, &AgentLog::record}, &cno), kOk);
    DAT_EVD_HANDLE evd = sw_evd(cno);
    ASSERT_EQ(post(evd), kOk);
    EXPECT_EQ(log.calls.load(), 1);
    EXPECT_EQ(log.evd.load(), evd);
    DAT_CNO_PARAM param{};
    ASSERT_EQ(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &param), kOk);
    EXPECT_EQ(param.proxy_type, DAT_PROXY_TYPE_NONE); // calling it detached it
    ASSERT_EQ(post(evd), kOk);
    EXPECT_EQ(log.calls.load(), 1);
    ASSERT_EQ(dat_cno_modify_agent(cno, DAT_OS_WAIT_PROXY_AGENT{&log, &AgentLog::record}), kOk);
    ASSERT_EQ(post(evd), kOk);
    EXPECT_EQ(log.calls.load(), 2);
}

TEST_F(Notification, FileDescriptorCnoBecomesReadableOnTrigger)
{
    DAT_FD fd = -1;
    DAT_CNO_HANDLE cno;
    EXPECT_EQ(type_of(dat_cno_fd_create(ia, nullptr, &cno)), t(DAT_INVALID_PARAMETER));
    ASSERT_EQ(dat_cno_fd_create(ia, &fd, &cno), kOk);
    ASSERT_GE(fd, 0);
    DAT_CNO_PARAM param{};
    ASSERT_EQ(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &param), kOk);
    EXPECT_EQ(param.proxy_type, DAT_PROXY_TYPE_FD);
    EXPECT_EQ(param.proxy.fd, fd);
    EXPECT_EQ(type_of(dat_cno_modify_agent(cno, DAT_OS_WAIT_PROXY_AGENT_NULL)), t(DAT_INVALID_STATE));

    DAT_EVD_HANDLE evd = sw_evd(DAT_HANDLE_NULL);
    ASSERT_EQ(dat_evd_modify_cno(evd, cno), kOk);
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 0), 0);
    ASSERT_EQ(post(evd), kOk);
    ASSERT_EQ(poll(&p, 1, 1000), 1);
    DAT_EVD_HANDLE latest = DAT_HANDLE_NULL;
    ASSERT_EQ(dat_cno_trigger(cno, &latest), kOk);
    EXPECT_EQ(latest, evd);
    ASSERT_EQ(dat_cno_wait(cno, 0, &latest), kOk); // takes the trigger and re-arms the descriptor
    EXPECT_EQ(poll(&p, 1, 0), 0);
    ASSERT_EQ(dat_evd_modify_cno(evd, DAT_HANDLE_NULL), kOk);
    ASSERT_EQ(dat_cno_free(cno), kOk);
    EXPECT_EQ(fcntl(fd, F_GETFD), -1); // freed with the CNO
}

TEST_F(Notification, WaitersReleasedWithNullWhenTheLastEvdGoesOrTheIaCloses)
{
    DAT_CNO_HANDLE cno;
    ASSERT_EQ(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), kOk);
    DAT_EVD_HANDLE evd = sw_evd(cno);
    std::atomic<DAT_RETURN> rc{DAT_INTERNAL_ERROR};
    std::atomic<DAT_EVD_HANDLE> hint{reinterpret_cast<DAT_EVD_HANDLE>(1)};
    std::thread waiter([&] {
        DAT_EVD_HANDLE h = evd;
        rc = dat_cno_wait(cno, DAT_TIMEOUT_INFINITE, &h);
        hint = h;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(dat_evd_free(evd), kOk);
    waiter.join();
    EXPECT_EQ(rc.load(), kOk);
    EXPECT_EQ(hint.load(), DAT_HANDLE_NULL);

    evd = sw_evd(cno);
    std::thread waiter2([&] {
        DAT_EVD_HANDLE h = evd;
        rc = dat_cno_wait(cno, DAT_TIMEOUT_INFINITE, &h);
        hint = h;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), kOk);
    ia = DAT_HANDLE_NULL;
    waiter2.join();
    EXPECT_EQ(hint.load(), DAT_HANDLE_NULL);
}

TEST_F(Notification, ConnectionEventOverflowIsReportedOnTheAsyncEvd)
{
    // A connect EVD of one entry: a failed connect posts one event, a
    // second attempt's event does not fit and the overflow is reported once.
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE dto, conn;
    ASSERT_EQ(dat_pz_create(ia, &pz), kOk);
    ASSERT_EQ(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto), kOk);
    ASSERT_EQ(dat_evd_create(ia, 1, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn), kOk);
    DAT_IA_ATTR attr{};
    ASSERT_EQ(dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &attr, 0, nullptr), kOk);
    DAT_EP_HANDLE eps[2];
    for (auto& ep : eps) {
        ASSERT_EQ(dat_ep_create(ia, pz, dto, dto, conn, nullptr, &ep), kOk);
        ASSERT_EQ(dat_ep_connect(ep, attr.ia_address_ptr, 1, kSecond, 0, nullptr, DAT_QOS_BEST_EFFORT,
                                 DAT_CONNECT_DEFAULT_FLAG),
                  kOk); // port 1: nobody listens
    }
    DAT_EVENT e;
    DAT_COUNT nmore;
    ASSERT_EQ(dat_evd_wait(async, 5 * kSecond, 1, &e, &nmore), kOk);
    EXPECT_EQ(e.event_number, DAT_ASYNC_ERROR_EVD_OVERFLOW);
    EXPECT_EQ(e.event_data.asynch_error_event_data.dat_handle, conn);
    EXPECT_EQ(e.event_data.asynch_error_event_data.reason, DAT_EVD_OVERFLOW_ERROR);
    ASSERT_EQ(dat_evd_dequeue(conn, &e), kOk); // the first one is there and the EVD still works
    EXPECT_TRUE(e.event_number == DAT_CONNECTION_EVENT_NON_PEER_REJECTED ||
                e.event_number == DAT_CONNECTION_EVENT_UNREACHABLE);
    EXPECT_EQ(type_of(dat_evd_dequeue(conn, &e)), t(DAT_QUEUE_EMPTY));
}

} // namespace
