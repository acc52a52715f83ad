// State shared by the test provider and the tests (see testprov.hpp).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "testprov.hpp"

#include "recording_provider.hpp"

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

std::mutex g_mutex;
std::vector<TestprovCall> g_calls;
DAT_RETURN g_return = DAT_SUCCESS;
std::map<std::string, int> g_inits, g_finis;
std::map<std::string, std::string> g_instance;
std::map<std::string, void*> g_handles;

} // namespace

extern "C" {

int testprov_call_count()
{
    std::lock_guard lock(g_mutex);
    return static_cast<int>(g_calls.size());
}

const TestprovCall* testprov_last_call()
{
    std::lock_guard lock(g_mutex);
    return g_calls.empty() ? nullptr : &g_calls.back();
}

void testprov_reset()
{
    std::lock_guard lock(g_mutex);
    g_calls.clear();
    g_return = DAT_SUCCESS;
}

void testprov_record(const TestprovCall* call)
{
    std::lock_guard lock(g_mutex);
    g_calls.push_back(*call);
}

void testprov_set_return(DAT_RETURN rc)
{
    std::lock_guard lock(g_mutex);
    g_return = rc;
}

DAT_RETURN testprov_return()
{
    std::lock_guard lock(g_mutex);
    return g_return;
}

int testprov_init_count(const char* ia_name)
{
    std::lock_guard lock(g_mutex);
    return g_inits[ia_name];
}

int testprov_fini_count(const char* ia_name)
{
    std::lock_guard lock(g_mutex);
    return g_finis[ia_name];
}

void testprov_count_init(const char* ia_name, int fini)
{
    std::lock_guard lock(g_mutex);
    ++(fini ? g_finis : g_inits)[ia_name];
}

const char* testprov_last_instance_data(const char* ia_name)
{
    std::lock_guard lock(g_mutex);
    auto it = g_instance.find(ia_name);
    return it == g_instance.end() ? nullptr : it->second.c_str();
}

void testprov_set_instance_data(const char* ia_name, const char* data)
{
    std::lock_guard lock(g_mutex);
    g_instance[ia_name] = data ? data : "";
}

void* testprov_handle(const char* ia_name)
{
    std::lock_guard lock(g_mutex);
    auto it = g_handles.find(ia_name);
    return it == g_handles.end() ? nullptr : it->second;
}

void testprov_set_handle(const char* ia_name, void* handle)
{
    std::lock_guard lock(g_mutex);
    if (handle)
        g_handles[ia_name] = handle;
    else
        g_handles.erase(ia_name);
}

} // extern "C"

// --- a provider the test program registers itself ---------------------------

namespace {

struct LinkedInObject {
    DAT_PROVIDER* provider;
};

DAT_PROVIDER g_linked_in{};
LinkedInObject g_linked_in_ia{&g_linked_in};

DAT_RETURN linked_in_open(const DAT_NAME_PTR, DAT_COUNT, DAT_EVD_HANDLE*, DAT_IA_HANDLE* ia)
{
    *ia = &g_linked_in_ia;
    return DAT_SUCCESS;
}

} // namespace

extern "C" const DAT_PROVIDER* testprov_linked_in_provider()
{
    if (!g_linked_in.ia_open_func) {
        testprov::fill_recording_table(g_linked_in);
        g_linked_in.device_name = "linked-in";
        g_linked_in.ia_open_func = &linked_in_open;
    }
    return &g_linked_in;
}
