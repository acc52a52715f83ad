// Instruction count of libdat2's forward alone: dat_evd_dequeue through the
// registry on a handle of a provider this program registers itself, whose
// evd_dequeue_func does nothing. Run under
//   valgrind --tool=callgrind --collect-atstart=no
// (bench/callgrind_forward.sh): only the loop of calls is collected.
// argv: iterations, how many providers to register (the one called is
// registered last, so a scan of the registered tables passes all others),
// and "direct" to call the provider's function without the registry (the
// loop and call overhead to subtract).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include <dat2/udat.h>
// after udat.h, which it needs
#include <dat2/dat_registry.h>

#include <valgrind/callgrind.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

DAT_RETURN noop_open(const DAT_NAME_PTR, DAT_COUNT, DAT_EVD_HANDLE*, DAT_IA_HANDLE*)
{
    return DAT_SUCCESS;
}

__attribute__((noinline)) DAT_RETURN noop_dequeue(DAT_EVD_HANDLE, DAT_EVENT*)
{
    return DAT_SUCCESS;
}

constexpr int kMax = 16;
DAT_PROVIDER g_tables[kMax];

struct Object {
    const DAT_PROVIDER* provider; // first word, as every DAT handle
};

} // namespace

int main(int argc, char** argv)
{
    const int iterations = argc > 1 ? std::atoi(argv[1]) : 1000;
    const int providers = argc > 2 ? std::atoi(argv[2]) : 1;
    const bool direct = argc > 3 && std::strcmp(argv[3], "direct") == 0;
    if (iterations <= 0 || providers < 1 || providers > kMax) {
        std::fprintf(stderr, "usage: forward_cost [iterations [providers (1-%d) [direct]]]\n", kMax);
        return 2;
    }
    for (int i = 0; i < providers; ++i) {
        g_tables[i].device_name = "forward-cost";
        g_tables[i].ia_open_func = &noop_open;
        g_tables[i].evd_dequeue_func = &noop_dequeue;
        DAT_PROVIDER_INFO info{};
        std::snprintf(info.ia_name, sizeof info.ia_name, "forward-cost-%d", i);
        info.dapl_version_major = 2;
        if (dat_registry_add_provider(&g_tables[i], &info) != DAT_SUCCESS) {
            std::fprintf(stderr, "forward_cost: dat_registry_add_provider failed\n");
            return 1;
        }
    }
    Object object{&g_tables[providers - 1]};
    DAT_EVD_HANDLE evd = &object;
    // Volatile so that the direct loop really calls through the table.
    DAT_RETURN (*volatile fn)(DAT_EVD_HANDLE, DAT_EVENT*) = g_tables[providers - 1].evd_dequeue_func;
    DAT_EVENT event;
    DAT_RETURN rc = dat_evd_dequeue(evd, &event); // resolve the PLT slot outside the collection
    CALLGRIND_TOGGLE_COLLECT;
    for (int i = 0; i < iterations; ++i)
        rc |= direct ? fn(evd, &event) : dat_evd_dequeue(evd, &event);
    CALLGRIND_TOGGLE_COLLECT;
    if (rc != DAT_SUCCESS) {
        std::fprintf(stderr, "forward_cost: dat_evd_dequeue failed\n");
        return 1;
    }
    return 0;
}
