// Unit tests of the dat.conf parser (src/registry/conf_parser.hpp): fields, syntax, every kind of bad line.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "conf_parser.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

using namespace fastdapl::registry;

namespace {

// What a parsed entry should hold, field by field.
struct Expect {
    std::string ia_name;
    char api_kind;
    std::uint32_t api_major, api_minor;
    bool thread_safe, is_default;
    std::string library;
    std::string provider_id;
    std::uint32_t provider_major, provider_minor;
    std::string ia_params, platform_params;
    unsigned line;
};

void expect_entry(const ConfEntry& e, const Expect& x)
{
    SCOPED_TRACE("entry '" + x.ia_name + "' on line " + std::to_string(x.line));
    EXPECT_EQ(e.ia_name, x.ia_name);
    EXPECT_EQ(e.api_kind, x.api_kind);
    EXPECT_EQ(e.api_major, x.api_major);
    EXPECT_EQ(e.api_minor, x.api_minor);
    EXPECT_EQ(e.thread_safe, x.thread_safe);
    EXPECT_EQ(e.is_default, x.is_default);
    EXPECT_EQ(e.library, x.library);
    EXPECT_EQ(e.provider_id, x.provider_id);
    EXPECT_EQ(e.provider_major, x.provider_major);
    EXPECT_EQ(e.provider_minor, x.provider_minor);
    EXPECT_EQ(e.ia_params, x.ia_params);
    EXPECT_EQ(e.platform_params, x.platform_params);
    EXPECT_EQ(e.line, x.line);
}

std::string describe(const ConfParseResult& r)
{
    std::string s;
    for (const auto& d : r.diagnostics)
        s += "  line " + std::to_string(d.line) + ": " + d.message + "\n";
    return s.empty() ? "  (no diagnostics)\n" : s;
}

std::vector<const ConfDiagnostic*> diagnostics_on(const ConfParseResult& r, unsigned line)
{
    std::vector<const ConfDiagnostic*> out;
    for (const auto& d : r.diagnostics)
        if (d.line == line)
            out.push_back(&d);
    return out;
}

// The reference's (OFED) sample line.
const std::string kReference =
    R"(ofa-v2-mlx5_0-1u u2.0 nonthreadsafe default libdaploucm.so.2 dapl.2.0 "mlx5_0 1" "")";
const Expect kReferenceExpect{"ofa-v2-mlx5_0-1u", 'u', 2, 0, false, true, "libdaploucm.so.2", "dapl", 2, 0,
                              "mlx5_0 1", "", 1};

// A minimal well-formed line; the bad lines below each change one thing.
std::string good(const std::string& name) { return name + R"( u2.0 nonthreadsafe default lib.so p.1.0 "" "")"; }

} // namespace

// ---------------------------------------------------------------------------
// Good lines

TEST(ConfParserGood, ReferenceSampleLine)
{
    const auto r = parse_conf(kReference + "\n");
    EXPECT_TRUE(r.diagnostics.empty()) << describe(r);
    ASSERT_EQ(r.entries.size(), 1u);
    expect_entry(r.entries[0], kReferenceExpect);
}

TEST(ConfParserGood, SpecExampleWithAbsolutePaths)
{
    const std::string text = "hca00 u2.0 nonthreadsafe default    /opt/foo/2.3/libdapl.so    xyz.2.3 \"/dev/hca0 1\" \"\"\n"
                             "hca00 u2.0 nonthreadsafe nondefault /opt/foo/2.0/libdapl.so    xyz.2.0 \"/dev/hca0 1\" \"\"\n"
                             "soft0 u2.0 threadsafe    default    /opt/bar/1.0/libdapl_sw.so sw.1.0  \"lo\"          \"\"\n";
    const auto r = parse_conf(text);
    EXPECT_TRUE(r.diagnostics.empty()) << describe(r);
    ASSERT_EQ(r.entries.size(), 3u);
    expect_entry(r.entries[0], {"hca00", 'u', 2, 0, false, true, "/opt/foo/2.3/libdapl.so", "xyz", 2, 3, "/dev/hca0 1", "", 1});
    expect_entry(r.entries[1], {"hca00", 'u', 2, 0, false, false, "/opt/foo/2.0/libdapl.so", "xyz", 2, 0, "/dev/hca0 1", "", 2});
    expect_entry(r.entries[2], {"soft0", 'u', 2, 0, true, true, "/opt/bar/1.0/libdapl_sw.so", "sw", 1, 0, "lo", "", 3});
}

TEST(ConfParserGood, KernelLineThreadsafeNondefault)
{
    const auto r = parse_conf(R"(hca0 k1.2 threadsafe nondefault /lib/kdapl.ko kdapl.1.2 "hca0 2" "plat")");
    EXPECT_TRUE(r.diagnostics.empty()) << describe(r);
    ASSERT_EQ(r.entries.size(), 1u);
    expect_entry(r.entries[0], {"hca0", 'k', 1, 2, true, false, "/lib/kdapl.ko", "kdapl", 1, 2, "hca0 2", "plat", 1});
}

TEST(ConfParserGood, ProviderIdsWithDots)
{
    const auto r = parse_conf("a u2.0 nonthreadsafe default l.so org.foo.bar.2.3 \"\" \"\"\n"
                              "b u2.0 nonthreadsafe default l.so fastdapl.0.1 \"\" \"\"\n"
                              "c u2.0 nonthreadsafe default l.so v1.5.x.10.20 \"\" \"\"\n"
                              "d u2.0 nonthreadsafe default l.so a..7.8 \"\" \"\"\n"
                              "e u2.0 nonthreadsafe default l.so x.4294967295.0 \"\" \"\"\n");
    EXPECT_TRUE(r.diagnostics.empty()) << describe(r);
    ASSERT_EQ(r.entries.size(), 5u);
    EXPECT_EQ(r.entries[0].provider_id, "org.foo.bar");
    EXPECT_EQ(r.entries[0].provider_major, 2u);
    EXPECT_EQ(r.entries[0].provider_minor, 3u);
    EXPECT_EQ(r.entries[1].provider_id, "fastdapl");
    EXPECT_EQ(r.entries[1].provider_major, 0u);
    EXPECT_EQ(r.entries[1].provider_minor, 1u);
    EXPECT_EQ(r.entries[2].provider_id, "v1.5.x");
    EXPECT_EQ(r.entries[2].provider_major, 10u);
    EXPECT_EQ(r.entries[2].provider_minor, 20u);
    EXPECT_EQ(r.entries[3].provider_id, "a.");
    EXPECT_EQ(r.entries[3].provider_major, 7u);
    EXPECT_EQ(r.entries[3].provider_minor, 8u);
    EXPECT_EQ(r.entries[4].provider_id, "x");
    EXPECT_EQ(r.entries[4].provider_major, 4294967295u);
}

TEST(ConfParserGood, ApiVersionForms)
{
    const auto r = parse_conf("a u0.0 nonthreadsafe default l.so p.1.0 \"\" \"\"\n"
                              "b u4294967295.4294967295 nonthreadsafe default l.so p.1.0 \"\" \"\"\n"
                              "c u02.007 nonthreadsafe default l.so p.01.02 \"\" \"\"\n"
                              "d u1.2 nonthreadsafe default l.so p.1.0 \"\" \"\"\n");
    EXPECT_TRUE(r.diagnostics.empty()) << describe(r);
    ASSERT_EQ(r.entries.size(), 4u);
    EXPECT_EQ(r.entries[0].api_major, 0u);
    EXPECT_EQ(r.entries[0].api_minor, 0u);
    EXPECT_EQ(r.entries[1].api_major, 4294967295u);
    EXPECT_EQ(r.entries[1].api_minor, 4294967295u);
    EXPECT_EQ(r.entries[2].api_major, 2u);
    EXPECT_EQ(r.entries[2].api_minor, 7u);
    EXPECT_EQ(r.entries[2].provider_major, 1u);
    EXPECT_EQ(r.entries[2].provider_minor, 2u);
    EXPECT_EQ(r.entries[3].api_major, 1u);
    EXPECT_EQ(r.entries[3].api_minor, 2u);
}

TEST(ConfParserGood, ExtraTrailingFieldsAcceptedWithDiagnostic)
{
    const auto r = parse_conf(kReference + " future1\n" +                      // line 1: one extra
                              kReference + " future1 \"future 2\"  \n" +        // line 2: two extra
                              kReference + " \"\" # comment \"not a field\"\n"); // line 3: one (empty) extra
    ASSERT_EQ(r.entries.size(), 3u) << describe(r);
    for (unsigned i = 0; i < 3; ++i) {
        Expect x = kReferenceExpect;
        x.line = i + 1;
        expect_entry(r.entries[i], x); // field 8 stays field 8; the extras are dropped
    }
    ASSERT_EQ(r.diagnostics.size(), 3u) << describe(r);
    EXPECT_EQ(r.diagnostics[0].line, 1u);
    EXPECT_NE(r.diagnostics[0].message.find("1 extra"), std::string::npos) << r.diagnostics[0].message;
    EXPECT_EQ(r.diagnostics[1].line, 2u);
    EXPECT_NE(r.diagnostics[1].message.find("2 extra"), std::string::npos) << r.diagnostics[1].message;
    EXPECT_EQ(r.diagnostics[2].line, 3u);
    EXPECT_NE(r.diagnostics[2].message.find("1 extra"), std::string::npos) << r.diagnostics[2].message;
}

TEST(ConfParserGood, AnyFieldMayBeQuoted)
{
    const auto r = parse_conf(R"("name with space" "u2.0" "threadsafe" "nondefault" "/lib path/x.so" "p.q.3.4" a b)");
    EXPECT_TRUE(r.diagnostics.empty()) << describe(r);
    ASSERT_EQ(r.entries.size(), 1u);
    expect_entry(r.entries[0], {"name with space", 'u', 2, 0, true, false, "/lib path/x.so", "p.q", 3, 4, "a", "b", 1});
}

// ---------------------------------------------------------------------------
// Syntax: comments, blank lines, line endings, whitespace

TEST(ConfParserSyntax, CommentsAndBlankLines)
{
    const std::string text = "# whole-line comment\n"                                            // 1
                             "\n"                                                                // 2
                             "   \t  \n"                                                         // 3
                             "   # indented comment with \"an unterminated quote\n"              // 4
                             "#a u2.0 nonthreadsafe default l.so p.1.0 \"\" \"\"\n"               // 5
                             "a u2.0 nonthreadsafe default l.so p.1.0 \"x\" \"\" # trailing\n"     // 6
                             "b u2.0 nonthreadsafe default l.so p.1.0 \"#kept\" \"y#z\"#tight\n"  // 7
                             "c u2.0 nonthreadsafe default l.so p.1.0 x#not-a-param y\n"          // 8
                             "#\n";                                                              // 9
    const auto r = parse_conf(text);
    ASSERT_EQ(r.entries.size(), 2u) << describe(r);
    EXPECT_EQ(r.entries[0].ia_name, "a");
    EXPECT_EQ(r.entries[0].line, 6u);
    EXPECT_EQ(r.entries[0].ia_params, "x");
    EXPECT_EQ(r.entries[0].platform_params, "");
    EXPECT_EQ(r.entries[1].ia_name, "b");
    EXPECT_EQ(r.entries[1].line, 7u);
    EXPECT_EQ(r.entries[1].ia_params, "#kept");
    EXPECT_EQ(r.entries[1].platform_params, "y#z");
    // Line 8: '#' right after "x" starts a comment, leaving 7 fields.
    ASSERT_EQ(r.diagnostics.size(), 1u) << describe(r);
    EXPECT_EQ(r.diagnostics[0].line, 8u);
    EXPECT_NE(r.diagnostics[0].message.find("found 7"), std::string::npos) << r.diagnostics[0].message;
}

TEST(ConfParserSyntax, CrlfLineEndings)
{
    const std::string text = "# comment\r\n"
                             "\r\n" +
                             kReference + "\r\n" +
                             "u u2.0 threadsafe nondefault /l.so p.3.4 inst plat\r\n" // unquoted last fields
                             "v u2.0 nonthreadsafe default l.so p.1.0 \"\" \"\"  \r\n"
                             "w u2.0 nonthreadsafe default l.so p.1.0 \"\" \"\"\r"; // no final LF
    const auto r = parse_conf(text);
    EXPECT_TRUE(r.diagnostics.empty()) << describe(r);
    ASSERT_EQ(r.entries.size(), 4u);
    Expect x = kReferenceExpect;
    x.line = 3;
    expect_entry(r.entries[0], x);
    expect_entry(r.entries[1], {"u", 'u', 2, 0, true, false, "/l.so", "p", 3, 4, "inst", "plat", 4});
    EXPECT_EQ(r.entries[2].line, 5u);
    EXPECT_EQ(r.entries[2].platform_params, "");
    EXPECT_EQ(r.entries[3].line, 6u);
    EXPECT_EQ(r.entries[3].platform_params, "");
}

TEST(ConfParserSyntax, TabsAndOtherWhitespace)
{
    const auto r = parse_conf("\t  a\tu2.0\t\tthreadsafe \t default\tl.so\tp.1.0\t\"i\"\t\"\"\t\n"
                              "b\vu2.0\fnonthreadsafe default l.so p.1.0 \"\" \"\"\n");
    EXPECT_TRUE(r.diagnostics.empty()) << describe(r);
    ASSERT_EQ(r.entries.size(), 2u);
    expect_entry(r.entries[0], {"a", 'u', 2, 0, true, true, "l.so", "p", 1, 0, "i", "", 1});
    EXPECT_EQ(r.entries[1].ia_name, "b");
    EXPECT_FALSE(r.entries[1].thread_safe);
}

TEST(ConfParserSyntax, FinalNewlineOrNot)
{
    const auto without = parse_conf("# c\n" + kReference);
    EXPECT_TRUE(without.diagnostics.empty()) << describe(without);
    ASSERT_EQ(without.entries.size(), 1u);
    EXPECT_EQ(without.entries[0].line, 2u);
    EXPECT_EQ(without.entries[0].platform_params, "");

    const auto with = parse_conf("# c\n" + kReference + "\n");
    EXPECT_TRUE(with.diagnostics.empty()) << describe(with);
    ASSERT_EQ(with.entries.size(), 1u);
    EXPECT_EQ(with.entries[0].line, 2u);

    // A bad last line without a newline is still reported, on its own number.
    const auto bad_last = parse_conf(kReference + "\nbroken");
    ASSERT_EQ(bad_last.entries.size(), 1u);
    ASSERT_EQ(bad_last.diagnostics.size(), 1u) << describe(bad_last);
    EXPECT_EQ(bad_last.diagnostics[0].line, 2u);

    // An unquoted last field at the very end of the input.
    const auto unquoted = parse_conf("a u2.0 nonthreadsafe default l.so p.1.0 i plat");
    ASSERT_EQ(unquoted.entries.size(), 1u) << describe(unquoted);
    EXPECT_EQ(unquoted.entries[0].platform_params, "plat");
}

TEST(ConfParserSyntax, EmptyAndNearlyEmptyInputs)
{
    for (const char* text : {"", "\n", "\n\n\n", "\r\n", "   ", "#", "# only a comment", "\t\n  \n#x\n"}) {
        const auto r = parse_conf(text);
        EXPECT_TRUE(r.entries.empty()) << '"' << text << '"';
        EXPECT_TRUE(r.diagnostics.empty()) << '"' << text << '"' << describe(r);
    }
}

TEST(ConfParserSyntax, QuotesAndEscapes)
{
    // Inside quotes \" and \\ are escapes; any other backslash is kept as is.
    const auto r = parse_conf(R"(a u2.0 nonthreadsafe default l.so p.1.0 "say \"hi\" \\ back\slash \n \x" "C:\dir\\")" "\n"
                              R"(b u2.0 nonthreadsafe default "" p.1.0 "" "")" "\n" // empty library: bad
                              R"(c u2.0 nonthreadsafe default /a\b\.so p.1.0 "\\\"" "\"")" "\n"
                              R"(d u2.0 nonthreadsafe default "l.so" p.1.0 "" """)" "\n"); // "" then " opens: bad
    ASSERT_EQ(r.entries.size(), 2u) << describe(r);
    EXPECT_EQ(r.entries[0].ia_params, R"(say "hi" \ back\slash \n \x)");
    EXPECT_EQ(r.entries[0].platform_params, R"(C:\dir\)");
    EXPECT_EQ(r.entries[1].ia_name, "c");
    EXPECT_EQ(r.entries[1].library, R"(/a\b\.so)"); // backslashes outside quotes are plain characters
    EXPECT_EQ(r.entries[1].ia_params, R"(\")");
    EXPECT_EQ(r.entries[1].platform_params, R"(")");
    ASSERT_EQ(r.diagnostics.size(), 2u) << describe(r);
    EXPECT_EQ(r.diagnostics[0].line, 2u);
    EXPECT_EQ(r.diagnostics[1].line, 4u);
}

TEST(ConfParserSyntax, EmptyQuotedFields)
{
    const auto r = parse_conf(R"(a u2.0 nonthreadsafe default l.so p.1.0 "" "")" "\n"
                              R"(b u2.0 nonthreadsafe default l.so p.1.0 """" "")" "\n"); // """" is bad
    ASSERT_EQ(r.entries.size(), 1u) << describe(r);
    EXPECT_EQ(r.entries[0].ia_params, "");
    EXPECT_EQ(r.entries[0].platform_params, "");
    ASSERT_EQ(r.diagnostics.size(), 1u);
    EXPECT_EQ(r.diagnostics[0].line, 2u);
}

TEST(ConfParserSyntax, NonAsciiBytesKept)
{
    const auto r = parse_conf("a u2.0 nonthreadsafe default /opt/\xC3\xA9t\xC3\xA9/l.so p.1.0 \"\xE2\x82\xAC \xFF\" \"\"\n");
    EXPECT_TRUE(r.diagnostics.empty()) << describe(r);
    ASSERT_EQ(r.entries.size(), 1u);
    EXPECT_EQ(r.entries[0].library, "/opt/\xC3\xA9t\xC3\xA9/l.so");
    EXPECT_EQ(r.entries[0].ia_params, "\xE2\x82\xAC \xFF");
}

TEST(ConfParserSyntax, LongValidLines)
{
    // The longest accepted line, exactly kMaxLineLength bytes, with a long
    // quoted field; and a 255-character IA name (the longest).
    const std::string head = "x u2.0 nonthreadsafe default lib.so v.1.0 \"";
    const std::string tail = "\" \"\"";
    const std::string params(kMaxLineLength - head.size() - tail.size(), 'p');
    const std::string longest = head + params + tail;
    ASSERT_EQ(longest.size(), kMaxLineLength);
    const std::string name(kMaxIaNameLength, 'n');
    const auto r = parse_conf(longest + "\n" + good(name) + "\n" + longest);
    EXPECT_TRUE(r.diagnostics.empty()) << describe(r);
    ASSERT_EQ(r.entries.size(), 3u);
    EXPECT_EQ(r.entries[0].ia_params, params);
    EXPECT_EQ(r.entries[1].ia_name, name);
    EXPECT_EQ(r.entries[1].line, 2u);
    EXPECT_EQ(r.entries[2].ia_params, params);
    EXPECT_EQ(r.entries[2].line, 3u);
}

TEST(ConfParserSyntax, RealisticFile)
{
    const std::string text = "# DAT v2.0, v1.2 configuration file\n"
                             "#\n"
                             "# Each entry should have the following fields:\n"
                             "# <ia_name> <api_version> <threadsafety> <default> <lib_path> \\\n"
                             "#           <provider_version> <ia_params> <platform_params>\n"
                             "\n"
                             "OpenIB-cma u1.2 nonthreadsafe default libdaplcma.so.1 dapl.1.2 \"ib0 0\" \"\"\n"
                             "ofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"ib0 0\" \"\"\n"
                             "ofa-v2-mlx4_0-1 u2.0 nonthreadsafe default libdaploscm.so.2 dapl.2.0 \"mlx4_0 1\" \"\"\n" +
                             kReference + "\n" +
                             "ofa-v2-iwarp u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"eth2 0\" \"\"\n"
                             "fastdapl-tcp u2.0 nonthreadsafe default /usr/lib/x86_64-linux-gnu/libfastdapl.so.2 "
                             "fastdapl.0.1 \"lo\" \"\"\n";
    const auto r = parse_conf(text);
    EXPECT_TRUE(r.diagnostics.empty()) << describe(r);
    ASSERT_EQ(r.entries.size(), 6u);
    const char* names[] = {"OpenIB-cma", "ofa-v2-ib0", "ofa-v2-mlx4_0-1", "ofa-v2-mlx5_0-1u", "ofa-v2-iwarp", "fastdapl-tcp"};
    for (unsigned i = 0; i < 6; ++i) {
        EXPECT_EQ(r.entries[i].ia_name, names[i]);
        EXPECT_EQ(r.entries[i].line, 7 + i);
    }
    EXPECT_EQ(r.entries[0].api_major, 1u);
    EXPECT_EQ(r.entries[0].api_minor, 2u);
    EXPECT_EQ(r.entries[0].provider_minor, 2u);
    EXPECT_EQ(r.entries[5].library, "/usr/lib/x86_64-linux-gnu/libfastdapl.so.2");
    EXPECT_EQ(r.entries[5].provider_id, "fastdapl");
}

TEST(ConfParserSyntax, DuplicatesAreKeptInFileOrder)
{
    // Choosing among duplicates is the registry's job, not the parser's.
    const auto r = parse_conf(good("same") + "\n" + good("other") + "\n" + good("same") + "\n");
    ASSERT_EQ(r.entries.size(), 3u);
    EXPECT_EQ(r.entries[0].line, 1u);
    EXPECT_EQ(r.entries[1].ia_name, "other");
    EXPECT_EQ(r.entries[2].ia_name, "same");
    EXPECT_EQ(r.entries[2].line, 3u);
}

// ---------------------------------------------------------------------------
// Bad lines: each is skipped with one diagnostic naming its line, and the
// good lines around it are parsed as if it were not there.

struct BadLine {
    const char* what;
    std::string line;
    const char* reason; // a word the diagnostic must contain: the line failed for the intended reason
};

std::ostream& operator<<(std::ostream& os, const BadLine& b) { return os << b.what; }

std::vector<BadLine> bad_lines()
{
    const std::string rest = R"( nonthreadsafe default lib.so p.1.0 "" "")"; // after the API version
    auto api = [&](const char* what, const std::string& version) {
        return BadLine{what, "bad " + version + rest, "API version"};
    };
    auto provider = [](const char* what, const std::string& version) {
        return BadLine{what, "bad u2.0 nonthreadsafe default lib.so " + version + R"( "" "")", "provider version"};
    };
    const std::string over_limit_head = "bad u2.0 nonthreadsafe default lib.so p.1.0 \"";
    return {
        // Too few fields.
        {"seven fields", R"(bad u2.0 nonthreadsafe default lib.so p.1.0 "only one")", "found 7"},
        {"one field", "lonely", "found 1"},
        {"comment eats fields", R"(bad u2.0 nonthreadsafe default lib.so p.1.0 # "" "")", "found 6"},
        {"quoted field with the separator inside", R"(bad u2.0 nonthreadsafe default lib.so "p.1.0 x" "")", "found 7"},
        // API version.
        api("API: no prefix", "2.0"),
        api("API: unknown prefix", "x2.0"),
        api("API: upper-case prefix", "U2.0"),
        api("API: prefix only", "u"),
        api("API: no dot", "u20"),
        api("API: empty major", "u.0"),
        api("API: empty minor", "u2."),
        api("API: two dots", "u2.0.1"),
        api("API: letters", "u2.x"),
        api("API: trailing letter", "u2.0a"),
        api("API: hex", "u0x2.0"),
        api("API: major over 32 bits", "u4294967296.0"),
        api("API: minor over 32 bits", "u2.4294967296"),
        api("API: far over 32 bits", "u18446744073709551617.0"),
        api("API: plus sign", "u+2.0"),
        api("API: minus sign", "u-2.0"),
        api("API: sign on minor", "u2.+0"),
        api("API: negative minor", "u2.-1"),
        api("API: blank inside (quoted)", "\"u2. 0\""),
        // Thread safety and default.
        {"thread safety: unknown word", R"(bad u2.0 safe default lib.so p.1.0 "" "")", "thread safety"},
        {"thread safety: case", R"(bad u2.0 ThreadSafe default lib.so p.1.0 "" "")", "thread safety"},
        {"thread safety: empty", R"(bad u2.0 "" default lib.so p.1.0 "" "")", "thread safety"},
        {"default: unknown word", R"(bad u2.0 nonthreadsafe yes lib.so p.1.0 "" "")", "default"},
        {"default: case", R"(bad u2.0 nonthreadsafe Default lib.so p.1.0 "" "")", "default"},
        {"default: swapped with thread safety", R"(bad u2.0 default nonthreadsafe lib.so p.1.0 "" "")", "thread safety"},
        // Library.
        {"empty library", R"(bad u2.0 nonthreadsafe default "" p.1.0 "" "")", "library"},
        // Provider version.
        provider("provider: no id", "1.0"),
        provider("provider: two parts", "p.1"),
        provider("provider: one part", "p"),
        provider("provider: empty id", ".1.0"),
        provider("provider: empty major", "p..0"),
        provider("provider: empty minor", "p.1."),
        provider("provider: letters in major", "p.x.0"),
        provider("provider: letters in minor", "p.1.y"),
        provider("provider: major over 32 bits", "p.4294967296.0"),
        provider("provider: minor over 32 bits", "p.1.4294967296"),
        provider("provider: sign", "p.+1.0"),
        provider("provider: negative minor", "p.1.-0"),
        provider("provider: empty", "\"\""),
        provider("provider: dot only", "."),
        // IA name.
        {"empty IA name", R"("" u2.0 nonthreadsafe default lib.so p.1.0 "" "")", "IA name"},
        {"IA name of 256", good(std::string(kMaxIaNameLength + 1, 'n')), "IA name"},
        {"IA name of 4000", good(std::string(4000, 'n')), "IA name"},
        // Quoting.
        {"unterminated quote", R"(bad u2.0 nonthreadsafe default lib.so p.1.0 "" "never closed)", "unterminated"},
        {"unterminated: escaped closing quote", R"(bad u2.0 nonthreadsafe default lib.so p.1.0 "" "x\")", "unterminated"},
        {"unterminated: lone quote", R"(bad u2.0 nonthreadsafe default lib.so p.1.0 "" ")", "unterminated"},
        {"text after closing quote", R"(bad u2.0 nonthreadsafe default lib.so p.1.0 "p"x "")", "after a closing quote"},
        {"quote right after closing quote", R"(bad u2.0 nonthreadsafe default lib.so p.1.0 """" "")", "after a closing quote"},
        {"quote inside unquoted field", R"(bad u2.0 nonthreadsafe default li"b.so p.1.0 "" "")", "quote inside"},
        {"quote ending unquoted field", R"(bad u2.0 nonthreadsafe default lib.so" p.1.0 "" "")", "quote inside"},
        // Bytes and size.
        {"NUL byte in a field", std::string("bad u2.0 nonthreadsafe default li") + '\0' + R"(b.so p.1.0 "" "")", "NUL"},
        {"NUL byte in quotes", std::string(R"(bad u2.0 nonthreadsafe default lib.so p.1.0 "a)") + '\0' + R"(b" "")", "NUL"},
        {"NUL byte at the end", good("bad") + '\0', "NUL"},
        {"line one byte over the limit",
         over_limit_head + std::string(kMaxLineLength + 1 - over_limit_head.size() - 4, 'x') + "\" \"\"", "longer than"},
        {"line far over the limit", over_limit_head + std::string(100000, 'x') + "\" \"\"", "longer than"},
    };
}

class ConfParserBadLine : public ::testing::TestWithParam<std::tuple<BadLine, bool>> {};

TEST_P(ConfParserBadLine, SkippedWithDiagnosticNeighboursKept)
{
    const BadLine& bad = std::get<0>(GetParam());
    const std::string eol = std::get<1>(GetParam()) ? "\r\n" : "\n";
    if (bad.what == std::string_view("line one byte over the limit")) {
        ASSERT_EQ(bad.line.size(), kMaxLineLength + 1);
    }
    // line 1 comment, 2 blank, 3 good, 4 bad, 5 good (no final newline)
    const std::string text = "# header" + eol + eol + kReference + eol + bad.line + eol + good("after");
    const auto r = parse_conf(text);

    ASSERT_EQ(r.entries.size(), 2u) << describe(r);
    Expect before = kReferenceExpect;
    before.line = 3;
    expect_entry(r.entries[0], before);
    expect_entry(r.entries[1], {"after", 'u', 2, 0, false, true, "lib.so", "p", 1, 0, "", "", 5});

    ASSERT_EQ(r.diagnostics.size(), 1u) << describe(r);
    EXPECT_EQ(r.diagnostics[0].line, 4u);
    EXPECT_NE(r.diagnostics[0].message.find(bad.reason), std::string::npos)
        << "diagnostic \"" << r.diagnostics[0].message << "\" does not mention \"" << bad.reason << "\"";
}

// The same lines alone in the file: nothing else is affected.
TEST_P(ConfParserBadLine, AloneInTheFile)
{
    const BadLine& bad = std::get<0>(GetParam());
    const auto r = parse_conf(bad.line + (std::get<1>(GetParam()) ? "\r\n" : ""));
    EXPECT_TRUE(r.entries.empty());
    ASSERT_EQ(r.diagnostics.size(), 1u) << describe(r);
    EXPECT_EQ(r.diagnostics[0].line, 1u);
    EXPECT_NE(r.diagnostics[0].message.find(bad.reason), std::string::npos) << r.diagnostics[0].message;
}

INSTANTIATE_TEST_SUITE_P(Lines, ConfParserBadLine, ::testing::Combine(::testing::ValuesIn(bad_lines()), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<ConfParserBadLine::ParamType>& info) {
                             std::string name;
                             for (char c : std::string(std::get<0>(info.param).what))
                                 name += (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c : '_';
                             return name + (std::get<1>(info.param) ? "_crlf" : "_lf");
                         });

TEST(ConfParserBad, SeveralBadLinesEachReported)
{
    const std::string text = "a\n" +                                       // 1 bad
                             kReference + "\n" +                            // 2
                             "b u3 x y z w v u\n"                           // 3 bad
                             "\n"                                           // 4
                             "c u2.0 nonthreadsafe default l.so p.1.0 \"\n" // 5 bad
                             "# d\n"                                        // 6
                             + good("e") + "\n";                            // 7
    const auto r = parse_conf(text);
    ASSERT_EQ(r.entries.size(), 2u) << describe(r);
    EXPECT_EQ(r.entries[0].line, 2u);
    EXPECT_EQ(r.entries[1].line, 7u);
    ASSERT_EQ(r.diagnostics.size(), 3u) << describe(r);
    EXPECT_EQ(r.diagnostics[0].line, 1u);
    EXPECT_EQ(r.diagnostics[1].line, 3u);
    EXPECT_EQ(r.diagnostics[2].line, 5u);
}

// A long comment line is still a line: refused by size, numbered, harmless.
TEST(ConfParserBad, OverlongCommentLine)
{
    const auto r = parse_conf("#" + std::string(kMaxLineLength, 'c') + "\n" + kReference);
    ASSERT_EQ(r.entries.size(), 1u);
    EXPECT_EQ(r.entries[0].line, 2u);
    ASSERT_EQ(diagnostics_on(r, 1).size(), 1u) << describe(r);
}

// ---------------------------------------------------------------------------
// The pieces

TEST(ConfTokenizer, FieldsAndReasons)
{
    std::vector<std::string> fields{"stale"};
    std::string error;
    ASSERT_TRUE(tokenize_conf_line("  a  \"b c\"\t\"\"  d\\e # e f", fields, error));
    EXPECT_EQ(fields, (std::vector<std::string>{"a", "b c", "", "d\\e"}));

    ASSERT_TRUE(tokenize_conf_line("", fields, error));
    EXPECT_TRUE(fields.empty()); // cleared, not appended to
    ASSERT_TRUE(tokenize_conf_line(" \t\r", fields, error));
    EXPECT_TRUE(fields.empty());
    ASSERT_TRUE(tokenize_conf_line("x#y", fields, error));
    EXPECT_EQ(fields, (std::vector<std::string>{"x"}));
    ASSERT_TRUE(tokenize_conf_line(R"("a\\"#c)", fields, error));
    EXPECT_EQ(fields, (std::vector<std::string>{"a\\"}));

    EXPECT_FALSE(tokenize_conf_line("a \"b", fields, error));
    EXPECT_NE(error.find("unterminated"), std::string::npos) << error;
    EXPECT_FALSE(tokenize_conf_line("\"a\"b", fields, error));
    EXPECT_NE(error.find("after a closing quote"), std::string::npos) << error;
    EXPECT_FALSE(tokenize_conf_line("a\"b\"", fields, error));
    EXPECT_NE(error.find("quote inside"), std::string::npos) << error;
}

TEST(ConfParseU32, Values)
{
    struct Case {
        std::string_view text;
        bool ok;
        std::uint32_t value;
    };
    const Case cases[] = {
        {"0", true, 0},
        {"7", true, 7},
        {"00", true, 0},
        {"4294967295", true, 4294967295u},
        {"0004294967", true, 4294967},
        {"4294967296", false, 0},
        {"9999999999", false, 0},
        {"18446744073709551616", false, 0}, // 2^64: must not wrap around to 0
        {"18446744073709551617", false, 0},
        {"99999999999999999999999999", false, 0},
        {"", false, 0},
        {"+1", false, 0},
        {"-1", false, 0},
        {"-0", false, 0},
        {"+", false, 0},
        {" 1", false, 0},
        {"1 ", false, 0},
        {"1\t", false, 0},
        {"1 2", false, 0},
        {"0x10", false, 0},
        {"1.0", false, 0},
        {"1e3", false, 0},
        {std::string_view("1\0", 2), false, 0},
    };
    for (const Case& c : cases) {
        std::uint32_t v = 12345;
        EXPECT_EQ(parse_u32(c.text, v), c.ok) << '"' << c.text << '"';
        if (c.ok) {
            EXPECT_EQ(v, c.value) << '"' << c.text << '"';
        }
    }
}

// "a decimal number that fits in 32 bits": leading zeros do not count
// against the range (once refused for being over ten characters).
TEST(ConfParseU32, LeadingZerosBeyondTenCharacters)
{
    std::uint32_t v = 12345;
    EXPECT_TRUE(parse_u32("00000000001", v));
    EXPECT_EQ(v, 1u);
    v = 12345;
    EXPECT_TRUE(parse_u32("000004294967295", v));
    EXPECT_EQ(v, 4294967295u);
    v = 12345;
    EXPECT_TRUE(parse_u32(std::string(1000, '0') + "42", v));
    EXPECT_EQ(v, 42u);
    EXPECT_FALSE(parse_u32("000004294967296", v));
    EXPECT_FALSE(parse_u32(std::string(1000, '0') + "4294967296", v));
    // And in a line: the API and provider versions use the same rule.
    const auto r = parse_conf(R"(a u000000000002.00000000000 nonthreadsafe default l.so p.0000000000001.0 "" "")");
    ASSERT_EQ(r.entries.size(), 1u) << describe(r);
    EXPECT_EQ(r.entries[0].api_major, 2u);
    EXPECT_EQ(r.entries[0].api_minor, 0u);
    EXPECT_EQ(r.entries[0].provider_major, 1u);
}
