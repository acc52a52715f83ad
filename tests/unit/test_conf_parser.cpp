// Unit tests of the dat.conf parser.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "conf_parser.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace fastdapl::registry;

namespace {

ConfParseResult parse(const std::string& text) { return parse_conf(text); }

bool has_diagnostic_on(const ConfParseResult& r, unsigned line)
{
    for (const auto& d : r.diagnostics)
        if (d.line == line)
            return true;
    return false;
}

const std::string kGood = "ofa-v2-mlx5_0-1u u2.0 nonthreadsafe default libdaploucm.so.2 dapl.2.0 \"mlx5_0 1\" \"\"";

} // namespace

TEST(ConfParser, ReferenceLine)
{
    auto r = parse(kGood + "\n");
    ASSERT_EQ(r.entries.size(), 1u);
    EXPECT_TRUE(r.diagnostics.empty());
    const auto& e = r.entries[0];
    EXPECT_EQ(e.ia_name, "ofa-v2-mlx5_0-1u");
    EXPECT_EQ(e.api_kind, 'u');
    EXPECT_EQ(e.api_major, 2u);
    EXPECT_EQ(e.api_minor, 0u);
    EXPECT_FALSE(e.thread_safe);
    EXPECT_TRUE(e.is_default);
    EXPECT_EQ(e.library, "libdaploucm.so.2");
    EXPECT_EQ(e.provider_id, "dapl");
    EXPECT_EQ(e.provider_major, 2u);
    EXPECT_EQ(e.provider_minor, 0u);
    EXPECT_EQ(e.ia_params, "mlx5_0 1");
    EXPECT_EQ(e.platform_params, "");
    EXPECT_EQ(e.line, 1u);
}

TEST(ConfParser, KernelThreadsafeNondefaultAndDottedProviderId)
{
    auto r = parse("hca0 k1.2 threadsafe nondefault /opt/foo/2.3/libdapl.so org.foo.2.3 \"/dev/hca0 1\" \"x\"\n");
    ASSERT_EQ(r.entries.size(), 1u);
    const auto& e = r.entries[0];
    EXPECT_EQ(e.api_kind, 'k');
    EXPECT_EQ(e.api_major, 1u);
    EXPECT_EQ(e.api_minor, 2u);
    EXPECT_TRUE(e.thread_safe);
    EXPECT_FALSE(e.is_default);
    EXPECT_EQ(e.library, "/opt/foo/2.3/libdapl.so");
    EXPECT_EQ(e.provider_id, "org.foo");
    EXPECT_EQ(e.provider_major, 2u);
    EXPECT_EQ(e.provider_minor, 3u);
    EXPECT_EQ(e.platform_params, "x");
}

TEST(ConfParser, ExtraFieldsAcceptedWithNote)
{
    auto r = parse(kGood + " extra1 \"extra 2\"\n");
    ASSERT_EQ(r.entries.size(), 1u);
    ASSERT_EQ(r.diagnostics.size(), 1u);
    EXPECT_EQ(r.diagnostics[0].line, 1u);
    EXPECT_NE(r.diagnostics[0].message.find("2 extra"), std::string::npos);
}

TEST(ConfParser, CommentsBlankLinesTabsCrlfAndNoFinalNewline)
{
    std::string text = "# a comment\n"
                       "\n"
                       "   \t  \n"
                       "a\tu2.0\tthreadsafe\tdefault\tliba.so\tv.1.0\t\"p\"\t\"\"\t# trailing comment\r\n"
                       "  # indented comment\n"
                       "b u2.0 nonthreadsafe default libb.so v.1.0 \"#not a comment\" \"\"";
    auto r = parse(text);
    EXPECT_TRUE(r.diagnostics.empty());
    ASSERT_EQ(r.entries.size(), 2u);
    EXPECT_EQ(r.entries[0].ia_name, "a");
    EXPECT_EQ(r.entries[0].line, 4u);
    EXPECT_EQ(r.entries[0].ia_params, "p");
    EXPECT_EQ(r.entries[1].ia_name, "b");
    EXPECT_EQ(r.entries[1].line, 6u);
    EXPECT_EQ(r.entries[1].ia_params, "#not a comment");
}

TEST(ConfParser, QuotesAndEscapes)
{
    auto r = parse("\"name with space\" u2.0 nonthreadsafe default \"/lib path/x.so\" v.1.0 "
                   "\"say \\\"hi\\\" \\\\ back\\slash\" \"\"\n");
    ASSERT_EQ(r.entries.size(), 1u) << (r.diagnostics.empty() ? "" : r.diagnostics[0].message);
    EXPECT_EQ(r.entries[0].ia_name, "name with space");
    EXPECT_EQ(r.entries[0].library, "/lib path/x.so");
    EXPECT_EQ(r.entries[0].ia_params, "say \"hi\" \\ back\\slash");
}

TEST(ConfParser, LongValidLine)
{
    const std::string params(8000, 'p');
    auto r = parse("x u2.0 nonthreadsafe default lib.so v.1.0 \"" + params + "\" \"\"\n");
    ASSERT_EQ(r.entries.size(), 1u);
    EXPECT_EQ(r.entries[0].ia_params, params);
}

struct BadLine {
    const char* what;
    std::string line;
};

class ConfParserBadLine : public ::testing::TestWithParam<BadLine> {};

TEST_P(ConfParserBadLine, SkippedWithDiagnosticNeighboursKept)
{
    const std::string text = kGood + "\n" + GetParam().line + "\n" + kGood + "\n";
    auto r = parse(text);
    EXPECT_EQ(r.entries.size(), 2u) << GetParam().what;
    EXPECT_TRUE(has_diagnostic_on(r, 2)) << GetParam().what;
    EXPECT_FALSE(has_diagnostic_on(r, 1));
    EXPECT_FALSE(has_diagnostic_on(r, 3));
    for (const auto& e : r.entries)
        EXPECT_NE(e.line, 2u);
}

INSTANTIATE_TEST_SUITE_P(
    Lines, ConfParserBadLine,
    ::testing::Values(
        BadLine{"too few fields", "a u2.0 nonthreadsafe default lib.so v.1.0 \"p\""},
        BadLine{"one field", "lonely"},
        BadLine{"api without prefix", "a 2.0 nonthreadsafe default lib.so v.1.0 \"\" \"\""},
        BadLine{"api without dot", "a u20 nonthreadsafe default lib.so v.1.0 \"\" \"\""},
        BadLine{"api non-digits", "a u2.x nonthreadsafe default lib.so v.1.0 \"\" \"\""},
        BadLine{"api overflow", "a u4294967296.0 nonthreadsafe default lib.so v.1.0 \"\" \"\""},
        BadLine{"api sign", "a u+2.0 nonthreadsafe default lib.so v.1.0 \"\" \"\""},
        BadLine{"api negative", "a u2.-1 nonthreadsafe default lib.so v.1.0 \"\" \"\""},
        BadLine{"thread safety word", "a u2.0 safe default lib.so v.1.0 \"\" \"\""},
        BadLine{"default word", "a u2.0 nonthreadsafe yes lib.so v.1.0 \"\" \"\""},
        BadLine{"empty library", "a u2.0 nonthreadsafe default \"\" v.1.0 \"\" \"\""},
        BadLine{"provider version two parts", "a u2.0 nonthreadsafe default lib.so 1.0 \"\" \"\""},
        BadLine{"provider version non-digits", "a u2.0 nonthreadsafe default lib.so v.a.b \"\" \"\""},
        BadLine{"empty name", "\"\" u2.0 nonthreadsafe default lib.so v.1.0 \"\" \"\""},
        BadLine{"name too long", std::string(256, 'n') + " u2.0 nonthreadsafe default lib.so v.1.0 \"\" \"\""},
        BadLine{"unterminated quote", "a u2.0 nonthreadsafe default lib.so v.1.0 \"open \"\""},
        BadLine{"text after closing quote", "a u2.0 nonthreadsafe default lib.so v.1.0 \"p\"x \"\""},
        BadLine{"quote inside unquoted", "a u2.0 nonthreadsafe default li\"b.so v.1.0 \"\" \"\""},
        BadLine{"NUL byte", std::string("a u2.0 nonthreadsafe default li\0b.so v.1.0 \"\" \"\"", 49)},
        BadLine{"line over the limit", "a u2.0 nonthreadsafe default lib.so v.1.0 \"" + std::string(kMaxLineLength, 'x') + "\" \"\""}));

TEST(ConfParser, NameOf255IsAccepted)
{
    auto r = parse(std::string(255, 'n') + " u2.0 nonthreadsafe default lib.so v.1.0 \"\" \"\"\n");
    ASSERT_EQ(r.entries.size(), 1u);
    EXPECT_EQ(r.entries[0].ia_name.size(), 255u);
}

TEST(ConfParser, EmptyInput)
{
    auto r = parse("");
    EXPECT_TRUE(r.entries.empty());
    EXPECT_TRUE(r.diagnostics.empty());
}

TEST(ConfParser, ParseU32)
{
    std::uint32_t v = 7;
    EXPECT_TRUE(parse_u32("0", v));
    EXPECT_EQ(v, 0u);
    EXPECT_TRUE(parse_u32("4294967295", v));
    EXPECT_EQ(v, 4294967295u);
    EXPECT_FALSE(parse_u32("4294967296", v));
    EXPECT_FALSE(parse_u32("", v));
    EXPECT_FALSE(parse_u32("+1", v));
    EXPECT_FALSE(parse_u32("-1", v));
    EXPECT_FALSE(parse_u32(" 1", v));
    EXPECT_FALSE(parse_u32("1 ", v));
    EXPECT_FALSE(parse_u32("99999999999", v));
    // Leading zeros do not count against the range (found by a reviewer).
    EXPECT_TRUE(parse_u32("00000000001", v));
    EXPECT_EQ(v, 1u);
    EXPECT_TRUE(parse_u32("000004294967295", v));
    EXPECT_EQ(v, 4294967295u);
    EXPECT_FALSE(parse_u32("000004294967296", v));
}

TEST(ConfParser, TokenizerReportsReasons)
{
    std::vector<std::string> fields;
    std::string error;
    EXPECT_TRUE(tokenize_conf_line("  a  \"b c\"  d # e f", fields, error));
    ASSERT_EQ(fields.size(), 3u);
    EXPECT_EQ(fields[1], "b c");
    EXPECT_FALSE(tokenize_conf_line("a \"b", fields, error));
    EXPECT_NE(error.find("unterminated"), std::string::npos);
}
