// libFuzzer target: parse_conf never crashes and every result keeps the parser's invariants.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "conf_parser.hpp"

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

using namespace fastdapl::registry;

namespace {

[[noreturn]] void fail(const char* what, unsigned line)
{
    std::fprintf(stderr, "fuzz_conf_parser: invariant broken: %s (line %u)\n", what, line);
    std::abort();
}

void check(bool ok, const char* what, unsigned line = 0)
{
    if (!ok)
        fail(what, line);
}

// The input's lines as parse_conf numbers them (1-based; a final newline does
// not start another line).
std::vector<std::string_view> split_lines(std::string_view text)
{
    std::vector<std::string_view> lines;
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t end = text.find('\n', pos);
        if (end == std::string_view::npos)
            end = text.size();
        lines.push_back(text.substr(pos, end - pos));
        pos = end + 1;
    }
    return lines;
}

// parse_u32 against std::from_chars, the standard's strict decimal parser.
void check_parse_u32(std::string_view text)
{
    std::uint32_t ours = 0;
    const bool ours_ok = parse_u32(text, ours);
    std::uint32_t ref = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), ref, 10);
    const bool ref_ok = !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
    check(ours_ok == ref_ok, "parse_u32 disagrees with from_chars on acceptance");
    check(!ours_ok || ours == ref, "parse_u32 disagrees with from_chars on the value");
}

// Lines near the 16 KiB limit would make every input huge and the fuzzer
// slow. Instead an input starting with 0x01 is expanded: each 0x02 after it
// stands for kChunk 'x' bytes (at most kMaxChunks of them; later ones stay).
constexpr std::size_t kChunk = 1024;
constexpr unsigned kMaxChunks = 32;

std::string_view expand(std::string_view input, std::string& storage)
{
    if (input.empty() || input[0] != '\x01')
        return input;
    unsigned chunks = 0;
    for (char c : input.substr(1)) {
        if (c == '\x02' && chunks < kMaxChunks) {
            storage.append(kChunk, 'x');
            ++chunks;
        } else {
            storage.push_back(c);
        }
    }
    return storage;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string storage;
    const std::string_view text = expand(std::string_view(reinterpret_cast<const char*>(data), size), storage);
    const ConfParseResult r = parse_conf(text);
    const std::vector<std::string_view> lines = split_lines(text);
    const std::size_t line_count = lines.size();

    // Entries: well-formed, numbered within the input, strictly increasing.
    unsigned previous = 0;
    std::vector<std::string> fields;
    std::string error;
    for (const ConfEntry& e : r.entries) {
        check(!e.ia_name.empty(), "empty IA name", e.line);
        check(e.ia_name.size() <= kMaxIaNameLength, "IA name over 255 bytes", e.line);
        check(!e.library.empty(), "empty library", e.line);
        check(!e.provider_id.empty(), "empty provider id", e.line);
        check(e.api_kind == 'u' || e.api_kind == 'k', "API kind not u or k", e.line);
        check(e.line > previous, "entry line numbers not increasing", e.line);
        check(e.line >= 1 && e.line <= line_count, "entry line number outside the input", e.line);
        previous = e.line;

        // The entry is what its own line says, field by field.
        const std::string_view line = lines[e.line - 1];
        check(line.size() <= kMaxLineLength, "entry from an over-long line", e.line);
        check(line.find('\0') == std::string_view::npos, "entry from a line with NUL", e.line);
        check(tokenize_conf_line(line, fields, error), "entry from a line that does not tokenise", e.line);
        check(fields.size() >= 8, "entry from a line with fewer than 8 fields", e.line);
        check(fields[0] == e.ia_name && fields[4] == e.library && fields[6] == e.ia_params &&
                  fields[7] == e.platform_params,
              "entry fields differ from the line's", e.line);
        std::uint32_t major = 0, minor = 0;
        check(fields[1].size() >= 3 && fields[1][0] == e.api_kind, "API kind differs from the field", e.line);
        const auto dot = fields[1].find('.');
        check(dot != std::string::npos && parse_u32(std::string_view(fields[1]).substr(1, dot - 1), major) &&
                  parse_u32(std::string_view(fields[1]).substr(dot + 1), minor) && major == e.api_major &&
                  minor == e.api_minor,
              "API version differs from the field", e.line);
        check(fields[5].starts_with(e.provider_id + "."), "provider id is not the field's prefix", e.line);
        check(e.thread_safe == (fields[2] == "threadsafe"), "thread safety differs from the field", e.line);
        check(e.is_default == (fields[3] == "default"), "default flag differs from the field", e.line);
    }

    // Diagnostics: numbered within the input, in order, never empty.
    unsigned previous_diag = 0;
    for (const ConfDiagnostic& d : r.diagnostics) {
        check(d.line >= 1 && d.line <= line_count, "diagnostic line number outside the input", d.line);
        check(d.line >= previous_diag, "diagnostics out of order", d.line);
        check(!d.message.empty(), "empty diagnostic", d.line);
        previous_diag = d.line;
    }

    // Every line is exactly one of: ignorable (no entry, no diagnostic),
    // an entry (plus one diagnostic iff it has extra fields), or skipped
    // with exactly one diagnostic.
    std::vector<unsigned> entries_on(line_count + 1, 0), diags_on(line_count + 1, 0);
    for (const ConfEntry& e : r.entries)
        ++entries_on[e.line];
    for (const ConfDiagnostic& d : r.diagnostics)
        ++diags_on[d.line];
    for (unsigned n = 1; n <= line_count; ++n) {
        const std::string_view line = lines[n - 1];
        const bool oversize = line.size() > kMaxLineLength;
        const bool nul = !oversize && line.find('\0') != std::string_view::npos;
        const bool tokenises = !oversize && !nul && tokenize_conf_line(line, fields, error);
        if (tokenises && fields.empty()) {
            check(entries_on[n] == 0 && diags_on[n] == 0, "blank or comment line produced output", n);
        } else if (entries_on[n] == 1) {
            check(tokenises && fields.size() >= 8, "entry from a bad line", n);
            check(diags_on[n] == (fields.size() > 8 ? 1u : 0u), "extra-field diagnostic missing or spurious", n);
        } else {
            check(entries_on[n] == 0, "two entries from one line", n);
            check(diags_on[n] == 1, "skipped line without exactly one diagnostic", n);
        }
    }

    if (text.size() <= 24)
        check_parse_u32(text);
    return 0;
}
