// Test-only DAT provider: shared state between the provider library and the tests.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <dat2/udat.h>
#include <dat2/dat_registry.h>

#include <cstdint>

// The state lives in libtestprov_observer.so, which both the test program
// and the provider library link, so it survives the provider's dlclose.
extern "C" {

struct TestprovCall {
    const char* function;   // DAT_PROVIDER member name, e.g. "ep_post_send_func"
    int nargs;
    std::uint64_t args[16]; // each argument's first 8 bytes
};

// Calls recorded since the last reset, newest last.
__attribute__((visibility("default"))) int testprov_call_count();
__attribute__((visibility("default"))) const TestprovCall* testprov_last_call();
__attribute__((visibility("default"))) void testprov_reset();
__attribute__((visibility("default"))) void testprov_record(const TestprovCall* call);

// What every provider function returns next (DAT_SUCCESS by default).
__attribute__((visibility("default"))) void testprov_set_return(DAT_RETURN rc);
__attribute__((visibility("default"))) DAT_RETURN testprov_return();

// dat_provider_init / dat_provider_fini calls, per IA name.
__attribute__((visibility("default"))) int testprov_init_count(const char* ia_name);
__attribute__((visibility("default"))) int testprov_fini_count(const char* ia_name);
__attribute__((visibility("default"))) void testprov_count_init(const char* ia_name, int fini);
__attribute__((visibility("default"))) const char* testprov_last_instance_data(const char* ia_name);
__attribute__((visibility("default"))) void testprov_set_instance_data(const char* ia_name, const char* data);

// A handle object of the provider registered as `ia_name` (first word: its
// DAT_PROVIDER*), or nullptr if that provider is not loaded.
__attribute__((visibility("default"))) void* testprov_handle(const char* ia_name);
__attribute__((visibility("default"))) void testprov_set_handle(const char* ia_name, void* handle);

// A complete provider table recording into this library, for tests that
// register a provider themselves (linked in, no dat.conf line).
__attribute__((visibility("default"))) const DAT_PROVIDER* testprov_linked_in_provider();
}
