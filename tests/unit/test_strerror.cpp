// dat_strerror through the public API: every type and subtype constant has its name.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include <dat2/udat.h>

#include "error_names.h"

#include <gtest/gtest.h>

#include <string>

TEST(Strerror, Success)
{
    const char* major = nullptr;
    const char* minor = nullptr;
    ASSERT_EQ(dat_strerror(DAT_SUCCESS, &major, &minor), static_cast<DAT_RETURN>(DAT_SUCCESS));
    ASSERT_NE(major, nullptr);
    EXPECT_STREQ(major, "DAT_SUCCESS");
    EXPECT_STREQ(minor, "DAT_NO_SUBTYPE");
}

TEST(Strerror, EveryTypeHasItsName)
{
    for (const auto& t : kReturnTypes) {
        const char* major = nullptr;
        const char* minor = nullptr;
        const DAT_RETURN rc = dat_strerror(t.value, &major, &minor);
        if (t.value == static_cast<unsigned>(DAT_EXTENSION_BASE)) {
            // The extension base names a range, not one code.
            ASSERT_EQ(rc, static_cast<DAT_RETURN>(DAT_SUCCESS)) << t.name;
            EXPECT_NE(std::string(major).find("EXTENSION"), std::string::npos);
            continue;
        }
        ASSERT_EQ(rc, static_cast<DAT_RETURN>(DAT_SUCCESS)) << t.name;
        EXPECT_STREQ(major, t.name);
        EXPECT_STREQ(minor, "DAT_NO_SUBTYPE");
    }
}

TEST(Strerror, EverySubtypeHasItsName)
{
    for (const auto& s : kReturnSubtypes) {
        const char* major = nullptr;
        const char* minor = nullptr;
        const DAT_RETURN code = DAT_CLASS_ERROR | DAT_INVALID_STATE | s.value;
        ASSERT_EQ(dat_strerror(code, &major, &minor), static_cast<DAT_RETURN>(DAT_SUCCESS)) << s.name;
        EXPECT_STREQ(major, "DAT_INVALID_STATE");
        EXPECT_STREQ(minor, s.name);
    }
}

TEST(Strerror, ClassBitsDoNotChangeTheAnswer)
{
    for (DAT_RETURN cls : {0u, static_cast<DAT_RETURN>(DAT_CLASS_WARNING), static_cast<DAT_RETURN>(DAT_CLASS_ERROR)}) {
        const char* major = nullptr;
        const char* minor = nullptr;
        ASSERT_EQ(dat_strerror(cls | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP, &major, &minor),
                  static_cast<DAT_RETURN>(DAT_SUCCESS));
        EXPECT_STREQ(major, "DAT_INVALID_HANDLE");
        EXPECT_STREQ(minor, "DAT_INVALID_HANDLE_EP");
    }
}

TEST(Strerror, NullOutputsAccepted)
{
    EXPECT_EQ(dat_strerror(DAT_QUEUE_EMPTY, nullptr, nullptr), static_cast<DAT_RETURN>(DAT_SUCCESS));
    const char* major = nullptr;
    EXPECT_EQ(dat_strerror(DAT_QUEUE_EMPTY, &major, nullptr), static_cast<DAT_RETURN>(DAT_SUCCESS));
    EXPECT_STREQ(major, "DAT_QUEUE_EMPTY");
}

TEST(Strerror, UndefinedCodesAreInvalidParameter)
{
    const char* untouched = "untouched";
    for (DAT_RETURN bad : {0x00180000u, 0x00200000u, 0x0FFF0000u, 0x00010000u | 0xFFFFu, 0x00060000u | 0x0100u}) {
        const char* major = untouched;
        const char* minor = untouched;
        const DAT_RETURN rc = dat_strerror(bad, &major, &minor);
        EXPECT_EQ(DAT_GET_TYPE(rc), static_cast<DAT_RETURN>(DAT_INVALID_PARAMETER)) << std::hex << bad;
        EXPECT_NE(rc & DAT_CLASS_ERROR, 0u);
        EXPECT_EQ(major, untouched);
        EXPECT_EQ(minor, untouched);
    }
}
