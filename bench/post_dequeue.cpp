// Instruction count of the data path through the public API: one
// dat_ep_post_send of 8 bytes and one dat_evd_dequeue of its completion,
// on a connected loopback pair of one IA; and one dat_srq_post_recv. The IA
// is the third argument, else $FASTDAPL_BENCH_IA, else fastdapl-tcp (the
// softnic); fastdapl-mlx5_0-1 on the software mlx5 device measures the mlx5
// direct path (bench/README.md). Run under
//   valgrind --tool=callgrind --collect-atstart=no --separate-threads=yes
// Only the two calls are collected (client requests around them), and only
// the calling thread's file counts: the engine thread's work (which moves
// the bytes and writes the CQE) is in its own file.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "dat_check.hpp"

#include <dat2/udat.h>

#include <valgrind/callgrind.h>

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using bench::check;
using bench::wait_for;

} // namespace

int main(int argc, char** argv)
{
    // argv: which call to collect (post|dequeue|srq-post), iterations, IA.
    const std::string collect = argc > 1 ? argv[1] : "post";
    const int iterations = argc > 2 ? std::atoi(argv[2]) : 1000;
    const char* env_ia = std::getenv("FASTDAPL_BENCH_IA");
    std::string ia_name = argc > 3 ? argv[3] : env_ia && *env_ia ? env_ia : "fastdapl-tcp";
    const bool collect_post = collect == "post", collect_dequeue = collect == "dequeue";
    const bool collect_srq_post = collect == "srq-post";
    if ((!collect_post && !collect_dequeue && !collect_srq_post) || iterations <= 0 || iterations > 30000) {
        std::fprintf(stderr, "usage: post_dequeue post|dequeue|srq-post [iterations, at most 30000 [IA]]\n");
        return 2;
    }
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, dto_a, dto_b, conn_a, conn_b, cr;
    DAT_PZ_HANDLE pz;
    check(dat_ia_open(ia_name.data(), 8, &async, &ia), "dat_ia_open");
    check(dat_pz_create(ia, &pz), "dat_pz_create");
    for (DAT_EVD_HANDLE* evd : {&dto_a, &dto_b})
        check(dat_evd_create(ia, 256, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, evd), "dat_evd_create");
    for (DAT_EVD_HANDLE* evd : {&conn_a, &conn_b})
        check(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, evd), "dat_evd_create");
    check(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr), "dat_evd_create");
    DAT_EP_HANDLE a, b;
    check(dat_ep_create(ia, pz, dto_a, dto_a, conn_a, nullptr, &a), "dat_ep_create");
    check(dat_ep_create(ia, pz, dto_b, dto_b, conn_b, nullptr, &b), "dat_ep_create");
    std::vector<char> buffer(4096);
    DAT_REGION_DESCRIPTION region{};
    region.for_va = buffer.data();
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lkey;
    DAT_RMR_CONTEXT rkey;
    DAT_VLEN size;
    DAT_VADDR va;
    check(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, buffer.size(), pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr,
                         &lkey, &rkey, &size, &va),
          "dat_lmr_create");
    DAT_IA_ATTR attr{};
    DAT_PROVIDER_ATTR provider_attr{};
    check(dat_ia_query(ia, nullptr, DAT_IA_FIELD_ALL, &attr, DAT_PROVIDER_FIELD_ALL, &provider_attr), "dat_ia_query");
    // Which data path was measured (the gate checks it is the one it meant).
    for (DAT_COUNT i = 0; i < provider_attr.num_provider_specific_attr; ++i) {
        const DAT_NAMED_ATTR& named = provider_attr.provider_specific_attr[i];
        if (std::string(named.name) == "FASTDAPL_DATA_PATH")
            std::printf("post_dequeue: %s: FASTDAPL_DATA_PATH %s\n", ia_name.c_str(), named.value);
    }
    DAT_CONN_QUAL qual = 0;
    DAT_PSP_HANDLE psp;
    check(dat_psp_create_any(ia, &qual, cr, DAT_PSP_CONSUMER_FLAG, &psp), "dat_psp_create_any");
    check(dat_ep_connect(a, attr.ia_address_ptr, qual, 5000000, 0, nullptr, DAT_QOS_BEST_EFFORT,
                         DAT_CONNECT_DEFAULT_FLAG),
          "dat_ep_connect");
    DAT_EVENT e = wait_for(cr);
    check(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, b, 0, nullptr), "dat_cr_accept");
    wait_for(conn_a);
    wait_for(conn_b);

    if (collect_srq_post) { // an SRQ with room for every post: nothing needs to complete
        DAT_SRQ_ATTR srq_attr{iterations, 1, DAT_SRQ_LW_DEFAULT};
        DAT_SRQ_HANDLE srq;
        check(dat_srq_create(ia, pz, &srq_attr, &srq), "dat_srq_create");
        DAT_LMR_TRIPLET recv{reinterpret_cast<DAT_VADDR>(buffer.data() + 2048), 64, lkey};
        for (int i = 0; i < iterations; ++i) {
            CALLGRIND_TOGGLE_COLLECT;
            const DAT_RETURN posted = dat_srq_post_recv(srq, 1, &recv, DAT_DTO_COOKIE{});
            CALLGRIND_TOGGLE_COLLECT;
            check(posted, "dat_srq_post_recv");
        }
        std::printf("post_dequeue: %d receives posted to an SRQ\n", iterations);
        return 0;
    }

    DAT_LMR_TRIPLET send{reinterpret_cast<DAT_VADDR>(buffer.data()), 8, lkey};
    DAT_LMR_TRIPLET recv{reinterpret_cast<DAT_VADDR>(buffer.data() + 2048), 64, lkey};
    int dequeued = 0;
    for (int i = 0; i < iterations; ++i) {
        check(dat_ep_post_recv(b, 1, &recv, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");
        if (collect_post)
            CALLGRIND_TOGGLE_COLLECT;
        const DAT_RETURN posted = dat_ep_post_send(a, 1, &send, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG);
        if (collect_post)
            CALLGRIND_TOGGLE_COLLECT;
        check(posted, "dat_ep_post_send");
        wait_for(dto_b);
        // Until the send's completion is there, without taking it: a wait
        // for two events that times out at once reports how many are ready.
        DAT_COUNT ready = 0;
        DAT_EVENT unused;
        // Yielding between looks: under valgrind, threads run one at a time,
        // and a loop without a system call would keep the device's thread
        // from running for a whole time slice.
        while (ready < 1) {
            if (dat_evd_wait(dto_a, 0, 2, &unused, &ready) == DAT_SUCCESS)
                check(DAT_INTERNAL_ERROR, "two completions for one send");
            if (ready < 1)
                sched_yield();
        }
        if (collect_dequeue)
            CALLGRIND_TOGGLE_COLLECT;
        const DAT_RETURN got = dat_evd_dequeue(dto_a, &e);
        if (collect_dequeue)
            CALLGRIND_TOGGLE_COLLECT;
        check(got, "dat_evd_dequeue");
        if (e.event_number != DAT_DTO_COMPLETION_EVENT || e.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS)
            check(DAT_INTERNAL_ERROR, "the send did not complete");
        ++dequeued;
    }
    std::printf("post_dequeue: %d sends posted, %d completions dequeued\n", iterations, dequeued);
    return 0;
}
