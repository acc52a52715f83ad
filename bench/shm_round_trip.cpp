// Instructions of a busy-polled ping-pong on one IA kind (fastdapl-shm by
// default), counted without the timing noise of two processes: both ends
// live in this process, each on an IA of its own (so each has its own
// software NIC, as two processes would), and one thread plays both in the
// order two polling processes go through a round trip:
//   A posts a receive and sends (the ACK it held for B's last reply goes
//   with it); B reaps its last send's completion and the ping; B posts a
//   receive and replies (with the ping's ACK); A reaps the reply and its
//   send's completion.
// Nothing is polled in vain, so the count is the work of the messages
// alone. Then `empty` dequeues on A's idle receive EVD: what a busy poll
// that finds nothing costs. Run under
//   valgrind --tool=callgrind --collect-atstart=no --separate-threads=yes
// and divide the calling thread's count by the iterations.
// argv: rtt|empty, iterations, message bytes, IA.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "dat_check.hpp"

#include <dat2/udat.h>

#include <valgrind/callgrind.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using bench::check;
using bench::wait_for;

// Busy: dequeues until a completion comes, which must be a success.
void poll(DAT_EVD_HANDLE evd, const char* what)
{
    DAT_EVENT e{};
    DAT_RETURN rc;
    while (DAT_GET_TYPE(rc = dat_evd_dequeue(evd, &e)) == DAT_QUEUE_EMPTY) {
    }
    check(rc, what);
    if (e.event_number != DAT_DTO_COMPLETION_EVENT || e.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS)
        check(DAT_INTERNAL_ERROR, what);
}

struct End {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE request = DAT_HANDLE_NULL, recv = DAT_HANDLE_NULL, conn = DAT_HANDLE_NULL, cr = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    std::vector<char> buffer = std::vector<char>(2 * 65536);
    DAT_LMR_CONTEXT lkey = 0;

    explicit End(std::string name)
    {
        DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
        check(dat_ia_open(name.data(), 8, &async, &ia), "dat_ia_open");
        check(dat_pz_create(ia, &pz), "dat_pz_create");
        for (DAT_EVD_HANDLE* evd : {&request, &recv})
            check(dat_evd_create(ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, evd), "dat_evd_create");
        check(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn), "dat_evd_create");
        check(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr), "dat_evd_create");
        check(dat_ep_create(ia, pz, recv, request, conn, nullptr, &ep), "dat_ep_create");
        DAT_REGION_DESCRIPTION region{};
        region.for_va = buffer.data();
        DAT_LMR_HANDLE lmr;
        DAT_RMR_CONTEXT rkey;
        DAT_VLEN size;
        DAT_VADDR va;
        check(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, buffer.size(), pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
                             &lmr, &lkey, &rkey, &size, &va),
              "dat_lmr_create");
    }
    void post_recv(DAT_SEG_LENGTH bytes)
    {
        DAT_LMR_TRIPLET t{reinterpret_cast<DAT_VADDR>(buffer.data() + 65536), bytes, lkey};
        check(dat_ep_post_recv(ep, 1, &t, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");
    }
    void send(DAT_SEG_LENGTH bytes)
    {
        DAT_LMR_TRIPLET t{reinterpret_cast<DAT_VADDR>(buffer.data()), bytes, lkey};
        check(dat_ep_post_send(ep, 1, &t, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_send");
    }
};

} // namespace

int main(int argc, char** argv)
{
    const std::string what = argc > 1 ? argv[1] : "rtt";
    const int iterations = argc > 2 ? std::atoi(argv[2]) : 1000;
    const int bytes = argc > 3 ? std::atoi(argv[3]) : 8;
    const char* ia_name = argc > 4 ? argv[4] : "fastdapl-shm";
    if ((what != "rtt" && what != "empty") || iterations <= 0 || iterations > 1000000 || bytes < 1 || bytes > 65536) {
        std::fprintf(stderr, "usage: shm_round_trip rtt|empty [iterations [bytes (1..65536) [IA]]]\n");
        return 2;
    }
    End a(ia_name), b(ia_name);
    DAT_IA_ATTR attr{};
    check(dat_ia_query(b.ia, nullptr, DAT_IA_FIELD_ALL, &attr, 0, nullptr), "dat_ia_query");
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    check(dat_psp_create_any(b.ia, &qual, b.cr, DAT_PSP_CONSUMER_FLAG, &psp), "dat_psp_create_any");
    check(dat_ep_connect(a.ep, attr.ia_address_ptr, qual, 5000000, 0, nullptr, DAT_QOS_BEST_EFFORT,
                         DAT_CONNECT_DEFAULT_FLAG),
          "dat_ep_connect");
    DAT_EVENT e = wait_for(b.cr);
    check(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, b.ep, 0, nullptr), "dat_cr_accept");
    if (wait_for(a.conn).event_number != DAT_CONNECTION_EVENT_ESTABLISHED ||
        wait_for(b.conn).event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
        check(DAT_INTERNAL_ERROR, "connect");

    const auto size = static_cast<DAT_SEG_LENGTH>(bytes);
    const bool rtt = what == "rtt";
    // A few untimed round trips first (both rings set up, buffers warm).
    b.post_recv(size);
    for (int i = 0; i < (rtt ? iterations : 0) + 10; ++i) {
        const bool counted = rtt && i >= 10;
        if (counted)
            CALLGRIND_TOGGLE_COLLECT;
        a.post_recv(size);
        a.send(size);
        if (i > 0)
            poll(b.request, "B's reply completes");
        poll(b.recv, "B receives");
        b.post_recv(size);
        b.send(size);
        poll(a.recv, "A receives");
        poll(a.request, "A's send completes");
        if (counted)
            CALLGRIND_TOGGLE_COLLECT;
    }
    if (!rtt) {
        for (int i = 0; i < iterations; ++i) {
            CALLGRIND_TOGGLE_COLLECT;
            const DAT_RETURN rc = dat_evd_dequeue(a.recv, &e);
            CALLGRIND_TOGGLE_COLLECT;
            if (DAT_GET_TYPE(rc) != DAT_QUEUE_EMPTY)
                check(rc == DAT_SUCCESS ? DAT_RETURN{DAT_INTERNAL_ERROR} : rc, "an idle EVD's dequeue");
        }
    }
    std::printf("shm_round_trip: %s: %d %s of %d bytes\n", ia_name, iterations, rtt ? "round trips" : "empty dequeues",
                bytes);
    return 0;
}
