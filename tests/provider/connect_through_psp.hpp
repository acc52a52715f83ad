// Test helper: two endpoints of one IA connected over loopback through a
// PSP on a free qualifier (the usual setup of the provider tests).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <dat2/udat.h>

#include <gtest/gtest.h>

namespace fastdapl_test {

inline constexpr DAT_TIMEOUT kConnectWait = 5000000; // 5 s, in µs

// `active` connects, `passive` accepts; ESTABLISHED is taken from both
// connection EVDs. Fails the test (fatally) on any other outcome.
inline void connect_through_psp(DAT_IA_HANDLE ia, DAT_IA_ADDRESS_PTR address, DAT_EVD_HANDLE cr_evd,
                                DAT_EP_HANDLE active, DAT_EVD_HANDLE active_conn, DAT_EP_HANDLE passive,
                                DAT_EVD_HANDLE passive_conn)
{
    auto next = [](DAT_EVD_HANDLE evd) {
        DAT_EVENT e{};
        DAT_COUNT nmore;
        EXPECT_EQ(dat_evd_wait(evd, kConnectWait, 1, &e, &nmore), DAT_SUCCESS);
        return e;
    };
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    ASSERT_EQ(dat_psp_create_any(ia, &qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS);
    ASSERT_EQ(dat_ep_connect(active, address, qual, kConnectWait, 0, nullptr, DAT_QOS_BEST_EFFORT,
                             DAT_CONNECT_DEFAULT_FLAG),
              DAT_SUCCESS);
    DAT_EVENT e = next(cr_evd);
    ASSERT_EQ(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
    ASSERT_EQ(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, passive, 0, nullptr), DAT_SUCCESS);
    ASSERT_EQ(next(active_conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    ASSERT_EQ(next(passive_conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    ASSERT_EQ(dat_psp_free(psp), DAT_SUCCESS);
}

} // namespace fastdapl_test
