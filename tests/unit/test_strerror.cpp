// dat_strerror through the public API: every type and subtype constant of dat_error.h has its name.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include <dat2/udat.h>

#include "error_names.h" // kDatReturnTypes / kDatReturnSubtypes, generated from dat_error.h

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

constexpr DAT_RETURN kClassBits[] = {
    0,
    static_cast<DAT_RETURN>(DAT_CLASS_WARNING),
    static_cast<DAT_RETURN>(DAT_CLASS_ERROR),
    static_cast<DAT_RETURN>(DAT_CLASS_ERROR) | static_cast<DAT_RETURN>(DAT_CLASS_WARNING),
};

constexpr DAT_RETURN type_of(DAT_RETURN rc) { return DAT_GET_TYPE(rc); }
constexpr DAT_RETURN as_rc(DAT_UINT32 v) { return static_cast<DAT_RETURN>(v); }

// Sentinels that a failing call must leave in place.
const char kUntouched[] = "untouched";

std::map<DAT_UINT32, std::string> type_names()
{
    std::map<DAT_UINT32, std::string> m;
    for (const auto& t : kDatReturnTypes)
        m[t.value] = t.name;
    return m;
}

std::map<DAT_UINT32, std::string> subtype_names()
{
    std::map<DAT_UINT32, std::string> m;
    for (const auto& s : kDatReturnSubtypes)
        m[s.value] = s.name;
    return m;
}

// The extension range belongs to extensions (dat_ib_extensions.h and others):
// its codes are defined, though the core header names only its base.
bool in_extension_range([[maybe_unused]] DAT_UINT32 type)
{
#ifdef DAT_EXTENSIONS
    return type >= static_cast<DAT_UINT32>(DAT_EXTENSION_BASE) && type < static_cast<DAT_UINT32>(DAT_NOT_IMPLEMENTED);
#else
    return false;
#endif
}

// The name expected for a type constant. DAT_EXTENSION_BASE stands for the
// whole extension range, and dat_strerror says so after the name.
::testing::AssertionResult names_type(const char* got, std::string_view name)
{
    if (got == nullptr)
        return ::testing::AssertionFailure() << "no string for " << name;
    if (got == name)
        return ::testing::AssertionSuccess();
#ifdef DAT_EXTENSIONS
    if (name == "DAT_EXTENSION_BASE" && std::string_view(got).starts_with(name))
        return ::testing::AssertionSuccess();
#endif
    return ::testing::AssertionFailure() << "got \"" << got << "\" for " << name;
}

} // namespace

// ---------------------------------------------------------------------------
// The generated list itself: a broken generator must not make the tests
// below pass vacuously.

TEST(StrerrorTable, GeneratedListIsComplete)
{
    const auto types = type_names();
    const auto subtypes = subtype_names();
    // One entry per value: no two constants share a value, none was dropped.
    EXPECT_EQ(types.size(), std::size(kDatReturnTypes));
    EXPECT_EQ(subtypes.size(), std::size(kDatReturnSubtypes));
    // DAT 2.0 (Linux): 24 core types plus DAT_NOT_IMPLEMENTED, 104 subtypes
    // (DAT_NO_SUBTYPE = 0 to DAT_THREAD_SAFETY_NOT_FOUND = 103).
#ifdef DAT_EXTENSIONS
    EXPECT_EQ(types.size(), 26u);
#else
    EXPECT_EQ(types.size(), 25u);
#endif
    EXPECT_EQ(subtypes.size(), 104u);
    EXPECT_EQ(subtypes.rbegin()->first, subtypes.size() - 1) << "subtypes are not 0..N-1";
    EXPECT_EQ(types.at(static_cast<DAT_UINT32>(DAT_SUCCESS)), "DAT_SUCCESS");
    EXPECT_EQ(types.at(static_cast<DAT_UINT32>(DAT_NOT_IMPLEMENTED)), "DAT_NOT_IMPLEMENTED");
    EXPECT_EQ(types.at(static_cast<DAT_UINT32>(DAT_RESERVED_LMR)), "DAT_RESERVED_LMR");
    EXPECT_EQ(subtypes.at(static_cast<DAT_UINT32>(DAT_NO_SUBTYPE)), "DAT_NO_SUBTYPE");
    EXPECT_EQ(subtypes.at(static_cast<DAT_UINT32>(DAT_INVALID_STATE_SRQ_SHUTDOWN)), "DAT_INVALID_STATE_SRQ_SHUTDOWN");
    EXPECT_EQ(subtypes.at(static_cast<DAT_UINT32>(DAT_THREAD_SAFETY_NOT_FOUND)), "DAT_THREAD_SAFETY_NOT_FOUND");
}

TEST(StrerrorTable, ConstantsHaveTheShapeOfTheirKind)
{
    for (const auto& t : kDatReturnTypes) {
        EXPECT_EQ(t.value & ~static_cast<DAT_UINT32>(DAT_TYPE_MASK), 0u) << t.name << " has bits outside the type";
        EXPECT_TRUE(std::string_view(t.name).starts_with("DAT_")) << t.name;
    }
    for (const auto& s : kDatReturnSubtypes) {
        EXPECT_EQ(s.value & ~static_cast<DAT_UINT32>(DAT_SUBTYPE_MASK), 0u) << s.name << " has bits outside the subtype";
        EXPECT_TRUE(std::string_view(s.name).starts_with("DAT_")) << s.name;
    }
}

// ---------------------------------------------------------------------------
// Defined codes

TEST(Strerror, Success)
{
    const char* major = kUntouched;
    const char* minor = kUntouched;
    // DAT_SUCCESS is the one code that may be compared whole.
    ASSERT_EQ(dat_strerror(DAT_SUCCESS, &major, &minor), as_rc(DAT_SUCCESS));
    ASSERT_NE(major, nullptr);
    ASSERT_NE(minor, nullptr);
    EXPECT_STREQ(major, "DAT_SUCCESS");
    EXPECT_STREQ(minor, "DAT_NO_SUBTYPE");
}

TEST(Strerror, EveryTypeHasItsName)
{
    for (const auto& t : kDatReturnTypes) {
        const char* major = kUntouched;
        const char* minor = kUntouched;
        const DAT_RETURN rc = dat_strerror(as_rc(t.value), &major, &minor);
        ASSERT_EQ(rc, as_rc(DAT_SUCCESS)) << t.name << ": rc 0x" << std::hex << rc;
        ASSERT_NE(major, nullptr) << t.name;
        EXPECT_NE(major[0], '\0') << t.name;
        EXPECT_TRUE(names_type(major, t.name));
        EXPECT_STREQ(minor, "DAT_NO_SUBTYPE") << t.name;
    }
}

TEST(Strerror, EverySubtypeHasItsName)
{
    for (const auto& s : kDatReturnSubtypes) {
        const char* major = kUntouched;
        const char* minor = kUntouched;
        const DAT_RETURN code = static_cast<DAT_RETURN>(DAT_CLASS_ERROR) | as_rc(DAT_INVALID_STATE) | as_rc(s.value);
        ASSERT_EQ(dat_strerror(code, &major, &minor), as_rc(DAT_SUCCESS)) << s.name;
        ASSERT_NE(minor, nullptr) << s.name;
        EXPECT_NE(minor[0], '\0') << s.name;
        EXPECT_STREQ(minor, s.name);
        EXPECT_STREQ(major, "DAT_INVALID_STATE") << s.name;
    }
}

// Every type with every subtype, under every combination of class bits: the
// class never changes the answer, and the two halves are looked up apart.
TEST(Strerror, EveryTypeWithEverySubtypeAndClass)
{
    unsigned checked = 0;
    for (DAT_RETURN cls : kClassBits)
        for (const auto& t : kDatReturnTypes)
            for (const auto& s : kDatReturnSubtypes) {
                const char* major = kUntouched;
                const char* minor = kUntouched;
                const DAT_RETURN code = cls | as_rc(t.value) | as_rc(s.value);
                ASSERT_EQ(dat_strerror(code, &major, &minor), as_rc(DAT_SUCCESS))
                    << t.name << " | " << s.name << " class 0x" << std::hex << cls;
                ASSERT_TRUE(names_type(major, t.name)) << "class 0x" << std::hex << cls << ", " << s.name;
                ASSERT_STREQ(minor, s.name) << t.name << " class 0x" << std::hex << cls;
                ++checked;
            }
    EXPECT_EQ(checked, std::size(kClassBits) * std::size(kDatReturnTypes) * std::size(kDatReturnSubtypes));
}

TEST(Strerror, ClassBitsDoNotChangeTheAnswer)
{
    const char* first_major = nullptr;
    const char* first_minor = nullptr;
    for (DAT_RETURN cls : kClassBits) {
        const char* major = nullptr;
        const char* minor = nullptr;
        ASSERT_EQ(dat_strerror(cls | as_rc(DAT_INVALID_HANDLE) | as_rc(DAT_INVALID_HANDLE_EP), &major, &minor),
                  as_rc(DAT_SUCCESS))
            << std::hex << cls;
        EXPECT_STREQ(major, "DAT_INVALID_HANDLE");
        EXPECT_STREQ(minor, "DAT_INVALID_HANDLE_EP");
        if (first_major == nullptr) {
            first_major = major;
            first_minor = minor;
        }
        // Static strings: the same pointers every time.
        EXPECT_EQ(major, first_major);
        EXPECT_EQ(minor, first_minor);
    }
}

TEST(Strerror, NullOutputsAccepted)
{
    EXPECT_EQ(dat_strerror(DAT_QUEUE_EMPTY, nullptr, nullptr), as_rc(DAT_SUCCESS));

    const char* major = kUntouched;
    EXPECT_EQ(dat_strerror(as_rc(DAT_QUEUE_EMPTY) | as_rc(DAT_RESOURCE_SRQ), &major, nullptr), as_rc(DAT_SUCCESS));
    EXPECT_STREQ(major, "DAT_QUEUE_EMPTY");

    const char* minor = kUntouched;
    EXPECT_EQ(dat_strerror(as_rc(DAT_QUEUE_EMPTY) | as_rc(DAT_RESOURCE_SRQ), nullptr, &minor), as_rc(DAT_SUCCESS));
    EXPECT_STREQ(minor, "DAT_RESOURCE_SRQ");

    // An undefined code with NULL outputs is still reported, not dereferenced.
    EXPECT_EQ(type_of(dat_strerror(0x00180000u, nullptr, nullptr)), as_rc(DAT_INVALID_PARAMETER));
    EXPECT_EQ(type_of(dat_strerror(0xFFFFu, nullptr, nullptr)), as_rc(DAT_INVALID_PARAMETER));
}

#ifdef DAT_EXTENSIONS
// Codes of the extension range are defined (dat_ib_extensions.h uses them),
// the whole range from DAT_EXTENSION_BASE up to, not including,
// DAT_NOT_IMPLEMENTED; they carry a non-empty name.
TEST(Strerror, ExtensionRangeIsDefined)
{
    for (DAT_UINT32 type : {static_cast<DAT_UINT32>(DAT_EXTENSION_BASE),
                            static_cast<DAT_UINT32>(DAT_EXTENSION_BASE) + 0x10000u, 0x20000000u, 0x3FFE0000u}) {
        const char* major = kUntouched;
        const char* minor = kUntouched;
        ASSERT_EQ(dat_strerror(static_cast<DAT_RETURN>(DAT_CLASS_ERROR) | type | as_rc(DAT_INVALID_ARG2), &major, &minor),
                  as_rc(DAT_SUCCESS))
            << std::hex << type;
        ASSERT_NE(major, nullptr);
        EXPECT_NE(major, kUntouched);
        EXPECT_NE(major[0], '\0');
        EXPECT_STREQ(minor, "DAT_INVALID_ARG2");
    }
}
#endif

// ---------------------------------------------------------------------------
// Undefined codes: DAT_INVALID_PARAMETER (compared by type), outputs untouched.

namespace {

::testing::AssertionResult rejected(DAT_RETURN code)
{
    const char* major = kUntouched;
    const char* minor = kUntouched;
    const DAT_RETURN rc = dat_strerror(code, &major, &minor);
    if (type_of(rc) != as_rc(DAT_INVALID_PARAMETER))
        return ::testing::AssertionFailure() << "code 0x" << std::hex << code << " gave rc 0x" << rc;
    if (major != kUntouched || minor != kUntouched)
        return ::testing::AssertionFailure() << "code 0x" << std::hex << code << " wrote an output";
    return ::testing::AssertionSuccess();
}

} // namespace

TEST(Strerror, NamedUndefinedCodes)
{
    // Types: the first unused one after DAT_COMM_NOT_SUPPORTED, one further
    // up, and the last one below the extension range.
    EXPECT_TRUE(rejected(0x00180000u));
    EXPECT_TRUE(rejected(0x00200000u));
    EXPECT_TRUE(rejected(0x0FFF0000u));
    EXPECT_TRUE(rejected(static_cast<DAT_RETURN>(DAT_CLASS_ERROR) | 0x00180000u | as_rc(DAT_INVALID_ARG1)));
    // Subtypes: the first after the last constant, and the largest.
    EXPECT_TRUE(rejected(as_rc(DAT_THREAD_SAFETY_NOT_FOUND) + 1u));
    EXPECT_TRUE(rejected(0xFFFFu));
    EXPECT_TRUE(rejected(static_cast<DAT_RETURN>(DAT_CLASS_ERROR) | as_rc(DAT_INVALID_HANDLE) | 0xFFFFu));
    EXPECT_TRUE(rejected(static_cast<DAT_RETURN>(DAT_CLASS_WARNING) | as_rc(DAT_SUCCESS) | 0x1000u));
    // Both halves undefined (type 0x0FFF, subtype 0xFFFF), with and without class bits.
    EXPECT_TRUE(rejected(0x0FFFFFFFu));
    EXPECT_TRUE(rejected(0xCFFFFFFFu));
}

// Every one of the 16384 type values: the listed ones and the extension
// range are defined, every other one is rejected.
TEST(Strerror, EveryTypeValue)
{
    const auto types = type_names();
    unsigned undefined = 0;
    for (DAT_UINT32 index = 0; index <= 0x3FFFu; ++index) {
        const DAT_UINT32 type = index << 16;
        for (DAT_RETURN cls : {DAT_RETURN{0}, static_cast<DAT_RETURN>(DAT_CLASS_ERROR)}) {
            const DAT_RETURN code = cls | type | as_rc(DAT_INVALID_ARG3);
            if (types.count(type) != 0 || in_extension_range(type)) {
                const char* major = kUntouched;
                ASSERT_EQ(dat_strerror(code, &major, nullptr), as_rc(DAT_SUCCESS)) << std::hex << code;
                ASSERT_NE(major, kUntouched);
            } else {
                ASSERT_TRUE(rejected(code));
                ++undefined;
            }
        }
    }
    // 0x18..0xFFF below the extension range (without extensions, up to 0x3FFE), twice.
#ifdef DAT_EXTENSIONS
    EXPECT_EQ(undefined, 2u * (0x1000u - 0x18u));
#else
    EXPECT_EQ(undefined, 2u * (0x3FFFu - 0x18u));
#endif
}

// Every one of the 65536 subtype values.
TEST(Strerror, EverySubtypeValue)
{
    const auto subtypes = subtype_names();
    unsigned defined = 0;
    for (DAT_UINT32 sub = 0; sub <= 0xFFFFu; ++sub) {
        const DAT_RETURN code = static_cast<DAT_RETURN>(DAT_CLASS_ERROR) | as_rc(DAT_INVALID_PARAMETER) | sub;
        const auto it = subtypes.find(sub);
        if (it != subtypes.end()) {
            const char* minor = kUntouched;
            ASSERT_EQ(dat_strerror(code, nullptr, &minor), as_rc(DAT_SUCCESS)) << it->second;
            ASSERT_STREQ(minor, it->second.c_str());
            ++defined;
        } else {
            ASSERT_TRUE(rejected(code));
        }
    }
    EXPECT_EQ(defined, subtypes.size());
}

// Our registry marks its errors with the error class (the reference leaves
// it out in places); consumers still compare with DAT_GET_TYPE.
TEST(Strerror, RejectionCarriesTheErrorClass)
{
    const DAT_RETURN rc = dat_strerror(0x00180000u, nullptr, nullptr);
    EXPECT_NE(rc & static_cast<DAT_RETURN>(DAT_CLASS_ERROR), 0u) << std::hex << rc;
    EXPECT_EQ(DAT_IS_WARNING(rc), 0u);
}

// Non-blocking and thread-safe: many threads at once get the same answers.
TEST(Strerror, ConcurrentCallsAgree)
{
    std::atomic<unsigned> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&wrong] {
            for (int round = 0; round < 200; ++round)
                for (const auto& s : kDatReturnSubtypes) {
                    const char* major = nullptr;
                    const char* minor = nullptr;
                    const DAT_RETURN rc = dat_strerror(as_rc(DAT_ABORT) | as_rc(s.value), &major, &minor);
                    if (rc != as_rc(DAT_SUCCESS) || major == nullptr || minor == nullptr ||
                        std::strcmp(major, "DAT_ABORT") != 0 || std::strcmp(minor, s.name) != 0)
                        wrong.fetch_add(1, std::memory_order_relaxed);
                }
        });
    for (auto& th : threads)
        th.join();
    EXPECT_EQ(wrong.load(), 0u);
}
