// The registry (libdat2) through the public API, with a test-only provider.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
//
// The registry reads dat.conf once per process, so each suite runs in its
// own process with its own DAT_OVERRIDE (see meson.build): Registry* with
// registry.conf, MissingConf* with a path that does not exist.
#include "testprov.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

extern "C" DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE* ia_handle_p);
extern char** environ;

namespace {

constexpr DAT_RETURN kErrorBit = DAT_CLASS_ERROR;

DAT_RETURN type_of(DAT_RETURN rc) { return DAT_GET_TYPE(rc); }
DAT_RETURN subtype_of(DAT_RETURN rc) { return DAT_GET_SUBTYPE(rc); }

DAT_RETURN open_ia(const char* name, DAT_IA_HANDLE* ia, DAT_UINT32 major = 2, DAT_UINT32 minor = 0,
                   DAT_BOOLEAN ts = DAT_FALSE)
{
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    return dat_ia_openv(const_cast<char*>(name), 8, &async, ia, major, minor, ts);
}

std::uint64_t bits(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

class Registry : public ::testing::Test {
protected:
    void SetUp() override { testprov_reset(); }
};

// --- lookup and version matching --------------------------------------------

TEST_F(Registry, UnknownNameIsProviderNotFound)
{
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    const DAT_RETURN rc = dat_ia_open(const_cast<char*>("no-such-ia"), 8, &async, &ia);
    EXPECT_EQ(type_of(rc), static_cast<DAT_RETURN>(DAT_PROVIDER_NOT_FOUND));
    EXPECT_EQ(subtype_of(rc), static_cast<DAT_RETURN>(DAT_NAME_NOT_REGISTERED));
    EXPECT_NE(rc & kErrorBit, 0u);
    EXPECT_EQ(ia, DAT_HANDLE_NULL);
}

TEST_F(Registry, MismatchSubtypes)
{
    DAT_IA_HANDLE ia;
    DAT_RETURN rc = open_ia("testprov", &ia, 3, 0);
    EXPECT_EQ(type_of(rc), static_cast<DAT_RETURN>(DAT_PROVIDER_NOT_FOUND));
    EXPECT_EQ(subtype_of(rc), static_cast<DAT_RETURN>(DAT_MAJOR_NOT_FOUND));
    rc = open_ia("testprov", &ia, 2, 0, DAT_TRUE);
    EXPECT_EQ(subtype_of(rc), static_cast<DAT_RETURN>(DAT_THREAD_SAFETY_NOT_FOUND));
    rc = open_ia("testprov-ts", &ia, 2, 0, DAT_FALSE);
    EXPECT_EQ(subtype_of(rc), static_cast<DAT_RETURN>(DAT_THREAD_SAFETY_NOT_FOUND));
    rc = open_ia("testprov-minor", &ia, 2, 9);
    EXPECT_EQ(type_of(rc), static_cast<DAT_RETURN>(DAT_PROVIDER_NOT_FOUND));
    EXPECT_EQ(subtype_of(rc), static_cast<DAT_RETURN>(DAT_MINOR_NOT_FOUND));
    EXPECT_EQ(testprov_init_count("testprov-ts"), 0);
}

TEST_F(Registry, ThreadSafeEntryOpensWhenAskedFor)
{
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("testprov-ts", &ia, 2, 0, DAT_TRUE), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
}

TEST_F(Registry, ExactMinorElseSmallestNewer)
{
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("testprov-minor", &ia, 2, 3), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_STREQ(testprov_last_instance_data("testprov-minor"), "minor3");
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
    ASSERT_EQ(open_ia("testprov-minor", &ia, 2, 4), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_STREQ(testprov_last_instance_data("testprov-minor"), "minor5");
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
    ASSERT_EQ(open_ia("testprov-minor", &ia, 2, 0), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_STREQ(testprov_last_instance_data("testprov-minor"), "minor3");
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
}

TEST_F(Registry, NondefaultKernelAndMalformedLinesAreNotLoaded)
{
    DAT_IA_HANDLE ia;
    for (const char* name : {"testprov-nondefault", "testprov-kernel", "testprov-badversion", "this"}) {
        const DAT_RETURN rc = open_ia(name, &ia);
        EXPECT_EQ(type_of(rc), static_cast<DAT_RETURN>(DAT_PROVIDER_NOT_FOUND)) << name;
        EXPECT_EQ(testprov_init_count(name), 0) << name;
    }
}

TEST_F(Registry, SecondDefaultLineForOneKeyIsIgnored)
{
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("testprov-dup", &ia), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_STREQ(testprov_last_instance_data("testprov-dup"), "first");
    EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
}

// --- dat_registry_list_providers ----------------------------------------------

TEST_F(Registry, ListProviders)
{
    DAT_COUNT total = -1;
    DAT_RETURN rc = dat_registry_list_providers(0, &total, nullptr);
    EXPECT_EQ(type_of(rc), static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));
    ASSERT_EQ(total, 15); // u... default lines of registry.conf, the duplicate and malformed ones left out

    std::vector<DAT_PROVIDER_INFO> infos(static_cast<std::size_t>(total));
    std::vector<DAT_PROVIDER_INFO*> list;
    for (auto& i : infos)
        list.push_back(&i);
    DAT_COUNT n = -1;
    rc = dat_registry_list_providers(total - 1, &n, list.data());
    EXPECT_EQ(type_of(rc), static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));
    EXPECT_EQ(n, total);
    EXPECT_EQ(type_of(dat_registry_list_providers(total, nullptr, list.data())),
              static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));

    std::vector<DAT_PROVIDER_INFO*> holes = list;
    holes[1] = nullptr;
    EXPECT_EQ(type_of(dat_registry_list_providers(total, &n, holes.data())),
              static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));

    ASSERT_EQ(dat_registry_list_providers(total, &n, list.data()), static_cast<DAT_RETURN>(DAT_SUCCESS));
    ASSERT_EQ(n, total);
    std::set<std::string> names;
    for (auto& i : infos) {
        names.insert(i.ia_name);
        EXPECT_EQ(i.dapl_version_major, 2u);
    }
    for (const char* expected : {"testprov", "testprov-ts", "testprov-minor", "testprov-dup", "testprov-missinglib"})
        EXPECT_TRUE(names.count(expected)) << expected;
    for (const char* absent : {"testprov-nondefault", "testprov-kernel", "testprov-badversion", "this"})
        EXPECT_FALSE(names.count(absent)) << absent;
}

// --- loading, unloading, reference counts ----------------------------------------

TEST_F(Registry, InitOnFirstOpenFiniOnLastClose)
{
    const int inits = testprov_init_count("testprov");
    const int finis = testprov_fini_count("testprov");
    DAT_IA_HANDLE a, b;
    ASSERT_EQ(open_ia("testprov", &a), static_cast<DAT_RETURN>(DAT_SUCCESS));
    ASSERT_EQ(open_ia("testprov", &b), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_NE(a, b);
    EXPECT_EQ(testprov_init_count("testprov"), inits + 1);
    ASSERT_EQ(dat_ia_close(a, DAT_CLOSE_GRACEFUL_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(testprov_fini_count("testprov"), finis);
    ASSERT_EQ(dat_ia_close(b, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(testprov_fini_count("testprov"), finis + 1);
    EXPECT_EQ(testprov_handle("testprov"), nullptr); // the provider removed itself
    ASSERT_EQ(open_ia("testprov", &a), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(testprov_init_count("testprov"), inits + 2);
    EXPECT_EQ(dat_ia_close(a, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
}

TEST_F(Registry, ProviderCloseFailureKeepsTheIaOpen)
{
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("testprov", &ia), static_cast<DAT_RETURN>(DAT_SUCCESS));
    testprov_set_return(kErrorBit | DAT_INVALID_STATE | DAT_INVALID_STATE_IA_IN_USE);
    EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG),
              kErrorBit | DAT_INVALID_STATE | DAT_INVALID_STATE_IA_IN_USE);
    testprov_set_return(DAT_SUCCESS);
    EXPECT_EQ(dat_ia_query(ia, nullptr, 0, nullptr, 0, nullptr), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
}

TEST_F(Registry, ProviderThatDoesNotRegister)
{
    DAT_IA_HANDLE ia;
    const DAT_RETURN rc = open_ia("testprov-noreg", &ia);
    EXPECT_EQ(type_of(rc), static_cast<DAT_RETURN>(DAT_PROVIDER_NOT_FOUND));
    EXPECT_EQ(testprov_init_count("testprov-noreg"), 1);
    EXPECT_EQ(testprov_fini_count("testprov-noreg"), 0);
}

TEST_F(Registry, MissingLibraryAndLibraryWithoutInit)
{
    DAT_IA_HANDLE ia;
    EXPECT_EQ(type_of(open_ia("testprov-missinglib", &ia)), static_cast<DAT_RETURN>(DAT_PROVIDER_NOT_FOUND));
    EXPECT_EQ(type_of(open_ia("testprov-notaprovider", &ia)), static_cast<DAT_RETURN>(DAT_PROVIDER_NOT_FOUND));
    // A second attempt fails the same way: nothing half-loaded was left behind.
    EXPECT_EQ(type_of(open_ia("testprov-missinglib", &ia)), static_cast<DAT_RETURN>(DAT_PROVIDER_NOT_FOUND));
}

TEST_F(Registry, InitRegisteringAnotherNameLeavesNothingBehind)
{
    // Its init registered "testprov-ghost" only; the library is unloaded
    // again, so that registration must go with it (no call into freed code).
    DAT_IA_HANDLE ia;
    EXPECT_EQ(type_of(open_ia("testprov-alias", &ia)), static_cast<DAT_RETURN>(DAT_PROVIDER_NOT_FOUND));
    EXPECT_EQ(type_of(open_ia("testprov-ghost", &ia)), static_cast<DAT_RETURN>(DAT_PROVIDER_NOT_FOUND));
    DAT_COUNT n = 0;
    std::vector<DAT_PROVIDER_INFO> infos(64);
    std::vector<DAT_PROVIDER_INFO*> list;
    for (auto& i : infos)
        list.push_back(&i);
    ASSERT_EQ(dat_registry_list_providers(static_cast<DAT_COUNT>(list.size()), &n, list.data()), DAT_SUCCESS);
    for (DAT_COUNT i = 0; i < n; ++i)
        EXPECT_STRNE(infos[static_cast<std::size_t>(i)].ia_name, "testprov-ghost");
    EXPECT_EQ(type_of(open_ia("testprov-alias", &ia)), static_cast<DAT_RETURN>(DAT_PROVIDER_NOT_FOUND)); // again
}

TEST_F(Registry, ProviderWithoutIaCloseIsRefusedNotCalled)
{
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("testprov-noclose", &ia), DAT_SUCCESS);
    EXPECT_EQ(type_of(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG)), static_cast<DAT_RETURN>(DAT_MODEL_NOT_SUPPORTED));
    // The handle is still open and usable.
    EXPECT_EQ(dat_ia_query(ia, nullptr, 0, nullptr, 0, nullptr), DAT_SUCCESS);
}

TEST_F(Registry, FailedOpenPassesTheProvidersErrorAndUnloads)
{
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    for (int attempt = 1; attempt <= 2; ++attempt) {
        EXPECT_EQ(open_ia("testprov-failopen", &ia),
                  kErrorBit | DAT_INVALID_ADDRESS | DAT_INVALID_ADDRESS_UNREACHABLE);
        EXPECT_EQ(testprov_init_count("testprov-failopen"), attempt);
        EXPECT_EQ(testprov_fini_count("testprov-failopen"), attempt);
    }
}

// --- dynamic registry ----------------------------------------------------------

TEST_F(Registry, AddAndRemoveProviderErrors)
{
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("testprov", &ia), static_cast<DAT_RETURN>(DAT_SUCCESS));
    const auto* provider = *static_cast<DAT_PROVIDER* const*>(testprov_handle("testprov"));
    DAT_PROVIDER_INFO info{};
    std::strcpy(info.ia_name, "testprov");
    info.dapl_version_major = 2;
    EXPECT_EQ(type_of(dat_registry_add_provider(provider, &info)),
              static_cast<DAT_RETURN>(DAT_PROVIDER_ALREADY_REGISTERED));
    EXPECT_EQ(type_of(dat_registry_remove_provider(provider, &info)), static_cast<DAT_RETURN>(DAT_PROVIDER_IN_USE));
    EXPECT_EQ(type_of(dat_registry_add_provider(nullptr, &info)), static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_registry_add_provider(provider, nullptr)), static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_registry_remove_provider(nullptr, &info)), static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));
    DAT_PROVIDER_INFO unknown{};
    std::strcpy(unknown.ia_name, "never-registered");
    unknown.dapl_version_major = 2;
    EXPECT_EQ(type_of(dat_registry_remove_provider(provider, &unknown)),
              static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));
    DAT_PROVIDER_INFO unterminated;
    std::memset(&unterminated, 'x', sizeof unterminated);
    EXPECT_EQ(type_of(dat_registry_add_provider(provider, &unterminated)),
              static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));
    // still usable after all of that
    EXPECT_EQ(dat_ia_query(ia, nullptr, 0, nullptr, 0, nullptr), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
}

TEST_F(Registry, LinkedInProviderWithoutConfLine)
{
    DAT_PROVIDER_INFO info{};
    std::strcpy(info.ia_name, "linked-in");
    info.dapl_version_major = 2;
    const DAT_PROVIDER* provider = testprov_linked_in_provider();
    ASSERT_EQ(dat_registry_add_provider(provider, &info), static_cast<DAT_RETURN>(DAT_SUCCESS));
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("linked-in", &ia), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(type_of(dat_registry_remove_provider(provider, &info)), static_cast<DAT_RETURN>(DAT_PROVIDER_IN_USE));
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(dat_registry_remove_provider(provider, &info), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(type_of(open_ia("linked-in", &ia)), static_cast<DAT_RETURN>(DAT_PROVIDER_NOT_FOUND));
}

// The forward looks first where it last found a provider's table: a
// provider removed right after serving calls must not keep being called.
TEST_F(Registry, RemovedProviderIsRefusedRightAfterServingCalls)
{
    DAT_PROVIDER_INFO info{};
    std::strcpy(info.ia_name, "linked-in-removed");
    info.dapl_version_major = 2;
    const DAT_PROVIDER* provider = testprov_linked_in_provider();
    ASSERT_EQ(dat_registry_add_provider(provider, &info), static_cast<DAT_RETURN>(DAT_SUCCESS));
    struct {
        const DAT_PROVIDER* provider;
    } object{provider};
    DAT_HANDLE_TYPE type;
    DAT_EVENT event;
    for (int i = 0; i < 3; ++i) { // the same provider, call after call
        testprov_reset();
        ASSERT_EQ(dat_get_handle_type(&object, &type), static_cast<DAT_RETURN>(DAT_SUCCESS));
        ASSERT_EQ(dat_evd_dequeue(&object, &event), static_cast<DAT_RETURN>(DAT_SUCCESS));
        ASSERT_EQ(testprov_call_count(), 2);
        EXPECT_EQ(testprov_last_call()->args[0], bits(&object));
    }
    ASSERT_EQ(dat_registry_remove_provider(provider, &info), static_cast<DAT_RETURN>(DAT_SUCCESS));
    testprov_reset();
    EXPECT_EQ(type_of(dat_get_handle_type(&object, &type)), static_cast<DAT_RETURN>(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_evd_dequeue(&object, &event)), static_cast<DAT_RETURN>(DAT_INVALID_HANDLE));
    EXPECT_EQ(testprov_call_count(), 0);

    // Another provider served in between, then the removed one again.
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("testprov", &ia), static_cast<DAT_RETURN>(DAT_SUCCESS));
    void* live = testprov_handle("testprov");
    ASSERT_EQ(dat_get_handle_type(live, &type), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(testprov_last_call()->args[0], bits(live));
    testprov_reset();
    EXPECT_EQ(type_of(dat_get_handle_type(&object, &type)), static_cast<DAT_RETURN>(DAT_INVALID_HANDLE));
    EXPECT_EQ(testprov_call_count(), 0);
    EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
}

TEST_F(Registry, UnloadedProviderIsRefusedRightAfterServingCalls)
{
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("testprov", &ia), static_cast<DAT_RETURN>(DAT_SUCCESS));
    // A stale handle: an object of ours whose first word is the provider's
    // table (the provider's own objects go with its library).
    struct {
        const DAT_PROVIDER* provider;
    } stale{*static_cast<DAT_PROVIDER* const*>(testprov_handle("testprov"))};
    DAT_HANDLE_TYPE type;
    DAT_EVENT event;
    for (int i = 0; i < 3; ++i) {
        testprov_reset();
        ASSERT_EQ(dat_evd_dequeue(&stale, &event), static_cast<DAT_RETURN>(DAT_SUCCESS));
        ASSERT_EQ(testprov_call_count(), 1);
    }
    // The last close: the provider removes itself and is unloaded.
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
    ASSERT_EQ(testprov_handle("testprov"), nullptr);
    testprov_reset();
    EXPECT_EQ(type_of(dat_evd_dequeue(&stale, &event)), static_cast<DAT_RETURN>(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_get_handle_type(&stale, &type)), static_cast<DAT_RETURN>(DAT_INVALID_HANDLE));
    EXPECT_EQ(testprov_call_count(), 0);
}

// Calls alternating between two providers (the forward looking first where
// it found the other one) are all served, each with its own handle.
TEST_F(Registry, CallsAlternatingBetweenProvidersAreAllServed)
{
    DAT_PROVIDER_INFO info{};
    std::strcpy(info.ia_name, "linked-in-alternating");
    info.dapl_version_major = 2;
    const DAT_PROVIDER* linked = testprov_linked_in_provider();
    ASSERT_EQ(dat_registry_add_provider(linked, &info), static_cast<DAT_RETURN>(DAT_SUCCESS));
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("testprov", &ia), static_cast<DAT_RETURN>(DAT_SUCCESS));
    void* loaded = testprov_handle("testprov");
    struct {
        const DAT_PROVIDER* provider;
    } mine{linked};
    ASSERT_NE(*static_cast<DAT_PROVIDER* const*>(loaded), linked);
    DAT_EVENT event;
    for (int i = 0; i < 6; ++i) {
        void* h = i % 3 == 0 ? loaded : static_cast<void*>(&mine);
        testprov_reset();
        ASSERT_EQ(dat_evd_dequeue(h, &event), static_cast<DAT_RETURN>(DAT_SUCCESS));
        ASSERT_EQ(testprov_call_count(), 1);
        EXPECT_EQ(testprov_last_call()->args[0], bits(h));
    }
    EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(dat_registry_remove_provider(linked, &info), static_cast<DAT_RETURN>(DAT_SUCCESS));
}

TEST_F(Registry, ProvidersRelated)
{
    DAT_HA_RELATIONSHIP rel = DAT_HA_EXTENSION_BASE;
    char rel1[] = "testprov-rel1", rel1b[] = "testprov-rel1b", rel0[] = "testprov-rel0", none[] = "nope";
    EXPECT_EQ(dat_registry_providers_related(rel1, rel1, &rel), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(rel, DAT_HA_TRUE);
    EXPECT_EQ(type_of(dat_registry_providers_related(rel1, none, &rel)), static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_registry_providers_related(nullptr, rel1, &rel)),
              static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_registry_providers_related(rel1, rel0, nullptr)),
              static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));
    ASSERT_EQ(dat_registry_providers_related(rel1, rel0, &rel), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(rel, DAT_HA_UNKNOWN); // nothing open to ask

    DAT_IA_HANDLE a, b, c;
    ASSERT_EQ(open_ia(rel1, &a), static_cast<DAT_RETURN>(DAT_SUCCESS));
    ASSERT_EQ(open_ia(rel1b, &b), static_cast<DAT_RETURN>(DAT_SUCCESS));
    ASSERT_EQ(open_ia(rel0, &c), static_cast<DAT_RETURN>(DAT_SUCCESS));
    ASSERT_EQ(dat_registry_providers_related(rel1, rel1b, &rel), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(rel, DAT_HA_TRUE);
    ASSERT_EQ(dat_registry_providers_related(rel1, rel0, &rel), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(rel, DAT_HA_CONFLICTING);
    for (DAT_IA_HANDLE ia : {a, b, c})
        EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
}

// --- IA handles ----------------------------------------------------------------------

TEST_F(Registry, IaHandlesMapBackAndDieOnClose)
{
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("testprov", &ia), static_cast<DAT_RETURN>(DAT_SUCCESS));
    DAT_IA_HANDLE real = DAT_HANDLE_NULL;
    ASSERT_EQ(dats_get_ia_handle(ia, &real), static_cast<DAT_RETURN>(DAT_SUCCESS));
    ASSERT_NE(real, DAT_HANDLE_NULL);
    EXPECT_NE(real, ia);
    EXPECT_EQ(*static_cast<DAT_PROVIDER* const*>(real), *static_cast<DAT_PROVIDER* const*>(testprov_handle("testprov")));
    DAT_IA_HANDLE again = DAT_HANDLE_NULL;
    ASSERT_EQ(dats_get_ia_handle(real, &again), static_cast<DAT_RETURN>(DAT_SUCCESS)); // the provider's own pointer
    EXPECT_EQ(again, real);

    EXPECT_EQ(type_of(dat_ia_close(ia, static_cast<DAT_CLOSE_FLAGS>(7))), static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(type_of(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG)), static_cast<DAT_RETURN>(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dat_ia_query(ia, nullptr, 0, nullptr, 0, nullptr)), static_cast<DAT_RETURN>(DAT_INVALID_HANDLE));
    EXPECT_EQ(type_of(dats_get_ia_handle(ia, &again)), static_cast<DAT_RETURN>(DAT_INVALID_HANDLE));

    // A new IA that reuses the slot does not revive the old handle.
    DAT_IA_HANDLE next;
    ASSERT_EQ(open_ia("testprov", &next), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_NE(next, ia);
    EXPECT_EQ(type_of(dat_ia_query(ia, nullptr, 0, nullptr, 0, nullptr)), static_cast<DAT_RETURN>(DAT_INVALID_HANDLE));
    EXPECT_EQ(dat_ia_close(next, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));

    for (std::uintptr_t garbage : {std::uintptr_t{0}, std::uintptr_t{1}, std::uintptr_t{0x12345}, std::uintptr_t{0x7fff0001}})
        EXPECT_EQ(type_of(dats_get_ia_handle(reinterpret_cast<DAT_IA_HANDLE>(garbage), &again)),
                  static_cast<DAT_RETURN>(DAT_INVALID_HANDLE));
}

TEST_F(Registry, OpenvRejectsNullArguments)
{
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    char name[] = "testprov";
    EXPECT_EQ(type_of(dat_ia_openv(nullptr, 8, &async, &ia, 2, 0, DAT_FALSE)), static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ia_openv(name, 8, nullptr, &ia, 2, 0, DAT_FALSE)), static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_ia_openv(name, 8, &async, nullptr, 2, 0, DAT_FALSE)), static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER));
    std::string long_name(300, 'a');
    EXPECT_EQ(type_of(dat_ia_openv(long_name.data(), 8, &async, &ia, 2, 0, DAT_FALSE)),
              static_cast<DAT_RETURN>(DAT_PROVIDER_NOT_FOUND));
}

// --- dispatch of every entry point -------------------------------------------------------

struct Dispatch {
    const char* api;
    const char* member;
    bool takes_ia;
    std::function<DAT_RETURN(DAT_HANDLE)> call;
    std::vector<std::uint64_t> args; // expected arguments after the handle
};

#define P(x) reinterpret_cast<void*>(static_cast<std::uintptr_t>(x))

std::vector<Dispatch> dispatch_table()
{
    static DAT_EVENT event;
    static DAT_LMR_TRIPLET lmr_iov[2];
    static DAT_RMR_TRIPLET rmr_iov;
    static DAT_RMR_TRIPLET rmr_local;
    static DAT_EP_ATTR ep_attr;
    static DAT_EP_PARAM ep_param;
    static DAT_SRQ_ATTR srq_attr;
    static DAT_COMM comm;
    static sockaddr addr;
    DAT_CONTEXT ctx;
    ctx.as_64 = 0x1122334455667788ull;
    DAT_DTO_COOKIE cookie;
    cookie.as_64 = 0xc00c1e;
    DAT_OS_WAIT_PROXY_AGENT agent{P(0x5150), nullptr};
    DAT_REGION_DESCRIPTION region;
    region.for_va = P(0xbeef0);
    auto b = [](const void* p) { return bits(p); };
    return {
        {"dat_ia_query", "ia_query_func", true,
         [](DAT_HANDLE h) { return dat_ia_query(h, static_cast<DAT_EVD_HANDLE*>(P(0x10)), 0x3, static_cast<DAT_IA_ATTR*>(P(0x20)), 0x5, static_cast<DAT_PROVIDER_ATTR*>(P(0x30))); },
         {0x10, 0x3, 0x20, 0x5, 0x30}},
        {"dat_set_consumer_context", "set_consumer_context_func", false,
         [ctx](DAT_HANDLE h) { return dat_set_consumer_context(h, ctx); }, {ctx.as_64}},
        {"dat_get_consumer_context", "get_consumer_context_func", false,
         [](DAT_HANDLE h) { return dat_get_consumer_context(h, static_cast<DAT_CONTEXT*>(P(0x40))); }, {0x40}},
        {"dat_get_handle_type", "get_handle_type_func", false,
         [](DAT_HANDLE h) { return dat_get_handle_type(h, static_cast<DAT_HANDLE_TYPE*>(P(0x48))); }, {0x48}},
        {"dat_cno_create", "cno_create_func", true,
         [agent](DAT_HANDLE h) { return dat_cno_create(h, agent, static_cast<DAT_CNO_HANDLE*>(P(0x50))); }, {0x5150, 0x50}},
        {"dat_cno_modify_agent", "cno_modify_agent_func", false,
         [agent](DAT_HANDLE h) { return dat_cno_modify_agent(h, agent); }, {0x5150}},
        {"dat_cno_query", "cno_query_func", false,
         [](DAT_HANDLE h) { return dat_cno_query(h, DAT_CNO_FIELD_ALL, static_cast<DAT_CNO_PARAM*>(P(0x58))); }, {DAT_CNO_FIELD_ALL, 0x58}},
        {"dat_cno_free", "cno_free_func", false, [](DAT_HANDLE h) { return dat_cno_free(h); }, {}},
        {"dat_cno_wait", "cno_wait_func", false,
         [](DAT_HANDLE h) { return dat_cno_wait(h, 77, static_cast<DAT_EVD_HANDLE*>(P(0x60))); }, {77, 0x60}},
        {"dat_cno_fd_create", "cno_fd_create_func", true,
         [](DAT_HANDLE h) { return dat_cno_fd_create(h, static_cast<DAT_FD*>(P(0x68)), static_cast<DAT_CNO_HANDLE*>(P(0x70))); }, {0x68, 0x70}},
        {"dat_cno_trigger", "cno_trigger_func", false,
         [](DAT_HANDLE h) { return dat_cno_trigger(h, static_cast<DAT_EVD_HANDLE*>(P(0x78))); }, {0x78}},
        {"dat_cr_query", "cr_query_func", false,
         [](DAT_HANDLE h) { return dat_cr_query(h, DAT_CR_FIELD_ALL, static_cast<DAT_CR_PARAM*>(P(0x80))); }, {DAT_CR_FIELD_ALL, 0x80}},
        {"dat_cr_accept", "cr_accept_func", false,
         [](DAT_HANDLE h) { return dat_cr_accept(h, P(0x88), 64, P(0x90)); }, {0x88, 64, 0x90}},
        {"dat_cr_reject", "cr_reject_func", false,
         [](DAT_HANDLE h) { return dat_cr_reject(h, 65, P(0x98)); }, {65, 0x98}},
        {"dat_cr_handoff", "cr_handoff_func", false,
         [](DAT_HANDLE h) { return dat_cr_handoff(h, 0x123456789ull); }, {0x123456789ull}},
        {"dat_evd_create", "evd_create_func", true,
         [](DAT_HANDLE h) { return dat_evd_create(h, 33, P(0xa0), DAT_EVD_DTO_FLAG, static_cast<DAT_EVD_HANDLE*>(P(0xa8))); }, {33, 0xa0, DAT_EVD_DTO_FLAG, 0xa8}},
        {"dat_evd_query", "evd_query_func", false,
         [](DAT_HANDLE h) { return dat_evd_query(h, DAT_EVD_FIELD_ALL, static_cast<DAT_EVD_PARAM*>(P(0xb0))); }, {DAT_EVD_FIELD_ALL, 0xb0}},
        {"dat_evd_modify_cno", "evd_modify_cno_func", false,
         [](DAT_HANDLE h) { return dat_evd_modify_cno(h, P(0xb8)); }, {0xb8}},
        {"dat_evd_enable", "evd_enable_func", false, [](DAT_HANDLE h) { return dat_evd_enable(h); }, {}},
        {"dat_evd_disable", "evd_disable_func", false, [](DAT_HANDLE h) { return dat_evd_disable(h); }, {}},
        {"dat_evd_set_unwaitable", "evd_set_unwaitable_func", false, [](DAT_HANDLE h) { return dat_evd_set_unwaitable(h); }, {}},
        {"dat_evd_clear_unwaitable", "evd_clear_unwaitable_func", false, [](DAT_HANDLE h) { return dat_evd_clear_unwaitable(h); }, {}},
        {"dat_evd_wait", "evd_wait_func", false,
         [](DAT_HANDLE h) { return dat_evd_wait(h, 1000, 2, &event, static_cast<DAT_COUNT*>(P(0xc0))); }, {1000, 2, b(&event), 0xc0}},
        {"dat_evd_resize", "evd_resize_func", false, [](DAT_HANDLE h) { return dat_evd_resize(h, 99); }, {99}},
        {"dat_evd_post_se", "evd_post_se_func", false, [](DAT_HANDLE h) { return dat_evd_post_se(h, &event); }, {b(&event)}},
        {"dat_evd_dequeue", "evd_dequeue_func", false, [](DAT_HANDLE h) { return dat_evd_dequeue(h, &event); }, {b(&event)}},
        {"dat_evd_free", "evd_free_func", false, [](DAT_HANDLE h) { return dat_evd_free(h); }, {}},
        {"dat_ep_create", "ep_create_func", true,
         [](DAT_HANDLE h) { return dat_ep_create(h, P(0xd0), P(0xd8), P(0xe0), P(0xe8), &ep_attr, static_cast<DAT_EP_HANDLE*>(P(0xf0))); },
         {0xd0, 0xd8, 0xe0, 0xe8, b(&ep_attr), 0xf0}},
        {"dat_ep_create_with_srq", "ep_create_with_srq_func", true,
         [](DAT_HANDLE h) { return dat_ep_create_with_srq(h, P(0xd0), P(0xd8), P(0xe0), P(0xe8), P(0xf8), &ep_attr, static_cast<DAT_EP_HANDLE*>(P(0xf0))); },
         {0xd0, 0xd8, 0xe0, 0xe8, 0xf8, b(&ep_attr), 0xf0}},
        {"dat_ep_query", "ep_query_func", false,
         [](DAT_HANDLE h) { return dat_ep_query(h, DAT_EP_FIELD_ALL, &ep_param); }, {DAT_EP_FIELD_ALL, b(&ep_param)}},
        {"dat_ep_modify", "ep_modify_func", false,
         [](DAT_HANDLE h) { return dat_ep_modify(h, DAT_EP_FIELD_EP_ATTR_QOS, &ep_param); }, {DAT_EP_FIELD_EP_ATTR_QOS, b(&ep_param)}},
        {"dat_ep_connect", "ep_connect_func", false,
         [](DAT_HANDLE h) { return dat_ep_connect(h, &addr, 4242, 5000000, 64, P(0x100), DAT_QOS_LOW_LATENCY, DAT_CONNECT_MULTIPATH_REQUIRED_FLAG); },
         {b(&addr), 4242, 5000000, 64, 0x100, DAT_QOS_LOW_LATENCY, DAT_CONNECT_MULTIPATH_REQUIRED_FLAG}},
        {"dat_ep_common_connect", "ep_common_connect_func", false,
         [](DAT_HANDLE h) { return dat_ep_common_connect(h, &addr, 17, 3, P(0x108)); }, {b(&addr), 17, 3, 0x108}},
        {"dat_ep_dup_connect", "ep_dup_connect_func", false,
         [](DAT_HANDLE h) { return dat_ep_dup_connect(h, P(0x110), 18, 4, P(0x118), DAT_QOS_PREMIUM); }, {0x110, 18, 4, 0x118, DAT_QOS_PREMIUM}},
        {"dat_ep_disconnect", "ep_disconnect_func", false,
         [](DAT_HANDLE h) { return dat_ep_disconnect(h, DAT_CLOSE_GRACEFUL_FLAG); }, {DAT_CLOSE_GRACEFUL_FLAG}},
        {"dat_ep_post_send", "ep_post_send_func", false,
         [cookie](DAT_HANDLE h) { return dat_ep_post_send(h, 2, lmr_iov, cookie, DAT_COMPLETION_SUPPRESS_FLAG); },
         {2, b(lmr_iov), cookie.as_64, DAT_COMPLETION_SUPPRESS_FLAG}},
        {"dat_ep_post_send_with_invalidate", "ep_post_send_with_invalidate_func", false,
         [cookie](DAT_HANDLE h) { return dat_ep_post_send_with_invalidate(h, 1, lmr_iov, cookie, DAT_COMPLETION_DEFAULT_FLAG, DAT_TRUE, 0xabcd); },
         {1, b(lmr_iov), cookie.as_64, DAT_COMPLETION_DEFAULT_FLAG, DAT_TRUE, 0xabcd}},
        {"dat_ep_post_recv", "ep_post_recv_func", false,
         [cookie](DAT_HANDLE h) { return dat_ep_post_recv(h, 2, lmr_iov, cookie, DAT_COMPLETION_DEFAULT_FLAG); },
         {2, b(lmr_iov), cookie.as_64, DAT_COMPLETION_DEFAULT_FLAG}},
        {"dat_ep_post_rdma_read", "ep_post_rdma_read_func", false,
         [cookie](DAT_HANDLE h) { return dat_ep_post_rdma_read(h, 1, lmr_iov, cookie, &rmr_iov, DAT_COMPLETION_BARRIER_FENCE_FLAG); },
         {1, b(lmr_iov), cookie.as_64, b(&rmr_iov), DAT_COMPLETION_BARRIER_FENCE_FLAG}},
        {"dat_ep_post_rdma_read_to_rmr", "ep_post_rdma_read_to_rmr_func", false,
         [cookie](DAT_HANDLE h) { return dat_ep_post_rdma_read_to_rmr(h, &rmr_local, cookie, &rmr_iov, DAT_COMPLETION_DEFAULT_FLAG); },
         {b(&rmr_local), cookie.as_64, b(&rmr_iov), DAT_COMPLETION_DEFAULT_FLAG}},
        {"dat_ep_post_rdma_write", "ep_post_rdma_write_func", false,
         [cookie](DAT_HANDLE h) { return dat_ep_post_rdma_write(h, 2, lmr_iov, cookie, &rmr_iov, DAT_COMPLETION_UNSIGNALLED_FLAG); },
         {2, b(lmr_iov), cookie.as_64, b(&rmr_iov), DAT_COMPLETION_UNSIGNALLED_FLAG}},
        {"dat_ep_get_status", "ep_get_status_func", false,
         [](DAT_HANDLE h) { return dat_ep_get_status(h, static_cast<DAT_EP_STATE*>(P(0x120)), static_cast<DAT_BOOLEAN*>(P(0x128)), static_cast<DAT_BOOLEAN*>(P(0x130))); },
         {0x120, 0x128, 0x130}},
        {"dat_ep_free", "ep_free_func", false, [](DAT_HANDLE h) { return dat_ep_free(h); }, {}},
        {"dat_ep_reset", "ep_reset_func", false, [](DAT_HANDLE h) { return dat_ep_reset(h); }, {}},
        {"dat_ep_recv_query", "ep_recv_query_func", false,
         [](DAT_HANDLE h) { return dat_ep_recv_query(h, static_cast<DAT_COUNT*>(P(0x138)), static_cast<DAT_COUNT*>(P(0x140))); }, {0x138, 0x140}},
        {"dat_ep_set_watermark", "ep_set_watermark_func", false,
         [](DAT_HANDLE h) { return dat_ep_set_watermark(h, 5, 9); }, {5, 9}},
        {"dat_lmr_create", "lmr_create_func", true,
         [region](DAT_HANDLE h) { return dat_lmr_create(h, DAT_MEM_TYPE_VIRTUAL, region, 4096, P(0x148), DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_ZB,
                                                     static_cast<DAT_LMR_HANDLE*>(P(0x150)), static_cast<DAT_LMR_CONTEXT*>(P(0x158)), static_cast<DAT_RMR_CONTEXT*>(P(0x160)),
                                                     static_cast<DAT_VLEN*>(P(0x168)), static_cast<DAT_VADDR*>(P(0x170))); },
         {DAT_MEM_TYPE_VIRTUAL, 0xbeef0, 4096, 0x148, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_ZB, 0x150, 0x158, 0x160, 0x168, 0x170}},
        {"dat_lmr_query", "lmr_query_func", false,
         [](DAT_HANDLE h) { return dat_lmr_query(h, DAT_LMR_FIELD_ALL, static_cast<DAT_LMR_PARAM*>(P(0x178))); }, {DAT_LMR_FIELD_ALL, 0x178}},
        {"dat_lmr_free", "lmr_free_func", false, [](DAT_HANDLE h) { return dat_lmr_free(h); }, {}},
        {"dat_lmr_sync_rdma_read", "lmr_sync_rdma_read_func", true,
         [](DAT_HANDLE h) { return dat_lmr_sync_rdma_read(h, lmr_iov, 2); }, {b(lmr_iov), 2}},
        {"dat_lmr_sync_rdma_write", "lmr_sync_rdma_write_func", true,
         [](DAT_HANDLE h) { return dat_lmr_sync_rdma_write(h, lmr_iov, 1); }, {b(lmr_iov), 1}},
        {"dat_rmr_create", "rmr_create_func", false,
         [](DAT_HANDLE h) { return dat_rmr_create(h, static_cast<DAT_RMR_HANDLE*>(P(0x180))); }, {0x180}},
        {"dat_rmr_create_for_ep", "rmr_create_for_ep_func", false,
         [](DAT_HANDLE h) { return dat_rmr_create_for_ep(h, static_cast<DAT_RMR_HANDLE*>(P(0x188))); }, {0x188}},
        {"dat_rmr_query", "rmr_query_func", false,
         [](DAT_HANDLE h) { return dat_rmr_query(h, DAT_RMR_FIELD_ALL, static_cast<DAT_RMR_PARAM*>(P(0x190))); }, {DAT_RMR_FIELD_ALL, 0x190}},
        {"dat_rmr_bind", "rmr_bind_func", false,
         [cookie](DAT_HANDLE h) { return dat_rmr_bind(h, P(0x198), lmr_iov, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, P(0x1a0), cookie,
                                                     DAT_COMPLETION_SUPPRESS_FLAG, static_cast<DAT_RMR_CONTEXT*>(P(0x1a8))); },
         {0x198, b(lmr_iov), DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, 0x1a0, cookie.as_64, DAT_COMPLETION_SUPPRESS_FLAG, 0x1a8}},
        {"dat_rmr_free", "rmr_free_func", false, [](DAT_HANDLE h) { return dat_rmr_free(h); }, {}},
        {"dat_psp_create", "psp_create_func", true,
         [](DAT_HANDLE h) { return dat_psp_create(h, 1234, P(0x1b0), DAT_PSP_PROVIDER_FLAG, static_cast<DAT_PSP_HANDLE*>(P(0x1b8))); },
         {1234, 0x1b0, DAT_PSP_PROVIDER_FLAG, 0x1b8}},
        {"dat_psp_create_any", "psp_create_any_func", true,
         [](DAT_HANDLE h) { return dat_psp_create_any(h, static_cast<DAT_CONN_QUAL*>(P(0x1c0)), P(0x1b0), DAT_PSP_CONSUMER_FLAG, static_cast<DAT_PSP_HANDLE*>(P(0x1b8))); },
         {0x1c0, 0x1b0, DAT_PSP_CONSUMER_FLAG, 0x1b8}},
        {"dat_psp_query", "psp_query_func", false,
         [](DAT_HANDLE h) { return dat_psp_query(h, DAT_PSP_FIELD_ALL, static_cast<DAT_PSP_PARAM*>(P(0x1c8))); }, {DAT_PSP_FIELD_ALL, 0x1c8}},
        {"dat_psp_free", "psp_free_func", false, [](DAT_HANDLE h) { return dat_psp_free(h); }, {}},
        {"dat_rsp_create", "rsp_create_func", true,
         [](DAT_HANDLE h) { return dat_rsp_create(h, 4321, P(0x1d0), P(0x1d8), static_cast<DAT_RSP_HANDLE*>(P(0x1e0))); }, {4321, 0x1d0, 0x1d8, 0x1e0}},
        {"dat_rsp_query", "rsp_query_func", false,
         [](DAT_HANDLE h) { return dat_rsp_query(h, DAT_RSP_FIELD_ALL, static_cast<DAT_RSP_PARAM*>(P(0x1e8))); }, {DAT_RSP_FIELD_ALL, 0x1e8}},
        {"dat_rsp_free", "rsp_free_func", false, [](DAT_HANDLE h) { return dat_rsp_free(h); }, {}},
        {"dat_csp_create", "csp_create_func", true,
         [](DAT_HANDLE h) { return dat_csp_create(h, &comm, &addr, P(0x1f0), static_cast<DAT_CSP_HANDLE*>(P(0x1f8))); }, {b(&comm), b(&addr), 0x1f0, 0x1f8}},
        {"dat_csp_query", "csp_query_func", false,
         [](DAT_HANDLE h) { return dat_csp_query(h, DAT_CSP_FIELD_ALL, static_cast<DAT_CSP_PARAM*>(P(0x200))); }, {DAT_CSP_FIELD_ALL, 0x200}},
        {"dat_csp_free", "csp_free_func", false, [](DAT_HANDLE h) { return dat_csp_free(h); }, {}},
        {"dat_pz_create", "pz_create_func", true,
         [](DAT_HANDLE h) { return dat_pz_create(h, static_cast<DAT_PZ_HANDLE*>(P(0x208))); }, {0x208}},
        {"dat_pz_query", "pz_query_func", false,
         [](DAT_HANDLE h) { return dat_pz_query(h, DAT_PZ_FIELD_ALL, static_cast<DAT_PZ_PARAM*>(P(0x210))); }, {DAT_PZ_FIELD_ALL, 0x210}},
        {"dat_pz_free", "pz_free_func", false, [](DAT_HANDLE h) { return dat_pz_free(h); }, {}},
        {"dat_srq_create", "srq_create_func", true,
         [](DAT_HANDLE h) { return dat_srq_create(h, P(0x218), &srq_attr, static_cast<DAT_SRQ_HANDLE*>(P(0x220))); }, {0x218, b(&srq_attr), 0x220}},
        {"dat_srq_free", "srq_free_func", false, [](DAT_HANDLE h) { return dat_srq_free(h); }, {}},
        {"dat_srq_post_recv", "srq_post_recv_func", false,
         [cookie](DAT_HANDLE h) { return dat_srq_post_recv(h, 2, lmr_iov, cookie); }, {2, b(lmr_iov), cookie.as_64}},
        {"dat_srq_query", "srq_query_func", false,
         [](DAT_HANDLE h) { return dat_srq_query(h, DAT_SRQ_FIELD_ALL, static_cast<DAT_SRQ_PARAM*>(P(0x228))); }, {DAT_SRQ_FIELD_ALL, 0x228}},
        {"dat_srq_resize", "srq_resize_func", false, [](DAT_HANDLE h) { return dat_srq_resize(h, 256); }, {256}},
        {"dat_srq_set_lw", "srq_set_lw_func", false, [](DAT_HANDLE h) { return dat_srq_set_lw(h, 3); }, {3}},
        // An op outside DAT_OPEN/CLOSE_EXTENSION_BASE (0x1000, 0x2000), which
        // the registry handles itself (dat_ib_open_query, dat_ib_close_query).
        {"dat_extension_op", "handle_extendedop_func", false,
         [](DAT_HANDLE h) { return dat_extension_op(h, 0x101, DAT_UINT64{0xaa}, DAT_UINT64{0xbb}, DAT_UINT64{0xcc}); },
         {0x101, 0xaa, 0xbb, 0xcc}},
    };
}

TEST_F(Registry, EveryEntryPointReachesItsProviderFunctionWithItsArguments)
{
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("testprov", &ia), static_cast<DAT_RETURN>(DAT_SUCCESS));
    DAT_IA_HANDLE real_ia;
    ASSERT_EQ(dats_get_ia_handle(ia, &real_ia), static_cast<DAT_RETURN>(DAT_SUCCESS));
    void* object = testprov_handle("testprov");
    ASSERT_NE(object, nullptr);
    const auto table = dispatch_table();
    // 85 exports = these 76 + dat_ia_open(v), dat_ia_close, the four dat_registry_*
    // calls, dat_strerror and dats_get_ia_handle, tested above.
    EXPECT_EQ(table.size(), 76u);
    const DAT_RETURN distinct = kErrorBit | DAT_QUEUE_FULL | DAT_INVALID_ARG7;
    for (const auto& d : table) {
        testprov_reset();
        testprov_set_return(distinct);
        const DAT_RETURN rc = d.call(d.takes_ia ? ia : object);
        EXPECT_EQ(rc, distinct) << d.api;
        ASSERT_EQ(testprov_call_count(), 1) << d.api;
        const TestprovCall* c = testprov_last_call();
        EXPECT_STREQ(c->function, d.member) << d.api;
        EXPECT_EQ(c->args[0], bits(d.takes_ia ? real_ia : object)) << d.api << ": the provider gets its own handle";
        ASSERT_GE(c->nargs, static_cast<int>(d.args.size()) + 1) << d.api;
        for (std::size_t i = 0; i < d.args.size(); ++i)
            EXPECT_EQ(c->args[i + 1], d.args[i]) << d.api << " argument " << i + 1;
    }
    testprov_reset();
    EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
}

TEST_F(Registry, GenericCallsTranslateIaHandles)
{
    DAT_IA_HANDLE ia, real;
    ASSERT_EQ(open_ia("testprov", &ia), static_cast<DAT_RETURN>(DAT_SUCCESS));
    ASSERT_EQ(dats_get_ia_handle(ia, &real), static_cast<DAT_RETURN>(DAT_SUCCESS));
    DAT_HANDLE_TYPE type;
    testprov_reset();
    ASSERT_EQ(dat_get_handle_type(ia, &type), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(testprov_last_call()->args[0], bits(real));
    ASSERT_EQ(dat_extension_op(ia, 5, DAT_UINT64{1}, DAT_UINT64{2}, DAT_UINT64{3}), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_EQ(testprov_last_call()->args[0], bits(real));
    ASSERT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
    testprov_reset();
    EXPECT_EQ(type_of(dat_get_handle_type(ia, &type)), static_cast<DAT_RETURN>(DAT_INVALID_HANDLE));
    EXPECT_EQ(testprov_call_count(), 0);
}

TEST_F(Registry, BadHandlesNeverReachAProvider)
{
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("testprov", &ia), static_cast<DAT_RETURN>(DAT_SUCCESS));
    struct {
        void* not_a_provider;
        char payload[64];
    } foreign{&foreign, {}};
    alignas(8) static char misaligned_buffer[32];
    const std::vector<std::pair<const char*, DAT_HANDLE>> bad = {
        {"NULL", nullptr},
        {"small integer", P(8)},
        {"misaligned", misaligned_buffer + 1},
        {"foreign object", &foreign},
        {"closed-looking IA tag", P(0x70001)},
    };
    for (const auto& d : dispatch_table()) {
        for (const auto& [what, h] : bad) {
            testprov_reset();
            const DAT_RETURN rc = d.call(h);
            EXPECT_EQ(type_of(rc), static_cast<DAT_RETURN>(DAT_INVALID_HANDLE)) << d.api << " with " << what;
            EXPECT_NE(rc & kErrorBit, 0u) << d.api;
            EXPECT_EQ(testprov_call_count(), 0) << d.api << " with " << what;
        }
    }
    testprov_reset();
    EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
}

TEST_F(Registry, MissingProviderFunctionsAreModelNotSupported)
{
    DAT_IA_HANDLE ia;
    ASSERT_EQ(open_ia("testprov-null", &ia), static_cast<DAT_RETURN>(DAT_SUCCESS));
    void* object = testprov_handle("testprov-null");
    for (const auto& d : dispatch_table()) {
        if (std::strcmp(d.member, "ia_query_func") == 0)
            continue;
        testprov_reset();
        const DAT_RETURN rc = d.call(d.takes_ia ? ia : object);
        EXPECT_EQ(type_of(rc), static_cast<DAT_RETURN>(DAT_MODEL_NOT_SUPPORTED)) << d.api;
        EXPECT_NE(rc & kErrorBit, 0u);
    }
    EXPECT_EQ(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), static_cast<DAT_RETURN>(DAT_SUCCESS));
}

// --- diagnostics -------------------------------------------------------------------------

// Runs this test program again as a child that only lists providers, with
// or without FASTDAPL_DEBUG, and returns what it wrote on stderr.
std::string child_stderr(bool debug)
{
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0)
        return "pipe failed";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e)
        if (std::strncmp(*e, "FASTDAPL_DEBUG=", 15) != 0 && std::strncmp(*e, "DAT_DBG_TYPE=", 13) != 0)
            env_strings.emplace_back(*e);
    if (debug)
        env_strings.emplace_back("FASTDAPL_DEBUG=1");
    std::vector<char*> envp;
    for (auto& s : env_strings)
        envp.push_back(s.data());
    envp.push_back(nullptr);
    char self[] = "/proc/self/exe";
    char mode[] = "--list-providers-child";
    char* argv[] = {self, mode, nullptr};
    pid_t pid;
    const int rc = posix_spawn(&pid, self, &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(pipe_fds[1]);
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0)
        out.append(buf, static_cast<std::size_t>(n));
    close(pipe_fds[0]);
    if (rc != 0)
        return "spawn failed";
    int status = 0;
    waitpid(pid, &status, 0);
    return out;
}

TEST_F(Registry, MalformedLinesAreReportedWithFileAndLineOnlyInDebugMode)
{
    const std::string conf = std::getenv("DAT_OVERRIDE");
    const std::string quiet = child_stderr(false);
    EXPECT_EQ(quiet, "");
    const std::string loud = child_stderr(true);
    EXPECT_NE(loud.find(conf + ":18:"), std::string::npos) << loud; // "this line is malformed"
    EXPECT_NE(loud.find(conf + ":19:"), std::string::npos) << loud; // bad API version
    EXPECT_NE(loud.find(conf + ":9:"), std::string::npos) << loud;  // duplicate default
}

// --- no static registry ----------------------------------------------------------------

TEST(MissingConf, ListIsInternalErrorAndOpenIsNotFound)
{
    DAT_COUNT n = -1;
    DAT_PROVIDER_INFO info;
    DAT_PROVIDER_INFO* list[1] = {&info};
    EXPECT_EQ(type_of(dat_registry_list_providers(1, &n, list)), static_cast<DAT_RETURN>(DAT_INTERNAL_ERROR));
    EXPECT_EQ(n, 0);
    DAT_IA_HANDLE ia;
    EXPECT_EQ(type_of(open_ia("testprov", &ia)), static_cast<DAT_RETURN>(DAT_PROVIDER_NOT_FOUND));
    DAT_HA_RELATIONSHIP rel;
    char a[] = "a", b[] = "b";
    EXPECT_EQ(type_of(dat_registry_providers_related(a, b, &rel)), static_cast<DAT_RETURN>(DAT_INTERNAL_ERROR));
}

} // namespace

int main(int argc, char** argv)
{
    if (argc == 2 && std::strcmp(argv[1], "--list-providers-child") == 0) {
        DAT_COUNT n = 0;
        dat_registry_list_providers(0, &n, nullptr);
        return 0;
    }
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
