// dat.conf parsing: the static registry's text format, with no I/O of its own.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fastdapl::registry {

// Longest IA name, excluding the terminating NUL (DAT_NAME_MAX_LENGTH - 1).
inline constexpr std::size_t kMaxIaNameLength = 255;
// Longest accepted line. Real entries are ~100 bytes; anything far larger is
// damage, and refusing it keeps a corrupt file from costing unbounded memory.
inline constexpr std::size_t kMaxLineLength = 16 * 1024;

struct ConfEntry {
    std::string ia_name;
    char api_kind = 'u'; // 'u' user (uDAPL) or 'k' kernel (kDAPL)
    std::uint32_t api_major = 0;
    std::uint32_t api_minor = 0;
    bool thread_safe = false;
    bool is_default = false;
    std::string library;
    std::string provider_id;
    std::uint32_t provider_major = 0;
    std::uint32_t provider_minor = 0;
    std::string ia_params;
    std::string platform_params;
    unsigned line = 0; // 1-based line number in its file
};

struct ConfDiagnostic {
    unsigned line = 0;
    std::string message;
};

struct ConfParseResult {
    std::vector<ConfEntry> entries;          // every well-formed line, in file order
    std::vector<ConfDiagnostic> diagnostics; // one per skipped or suspicious line
};

// Splits one line into fields. Whitespace separates fields; "double quotes"
// group a field that may contain spaces, with \" and \\ as the only escapes;
// '#' outside quotes starts a comment. Returns false (with a reason) when the
// line cannot be tokenised; then `fields` is unspecified.
bool tokenize_conf_line(std::string_view line, std::vector<std::string>& fields, std::string& error);

// Parses a whole dat.conf. Never throws on bad input: malformed lines are
// skipped and reported in `diagnostics`.
ConfParseResult parse_conf(std::string_view text);

// Parses a decimal number that fits in 32 bits; rejects signs, blanks, overflow.
bool parse_u32(std::string_view text, std::uint32_t& value);

} // namespace fastdapl::registry
