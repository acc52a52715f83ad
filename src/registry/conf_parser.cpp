// dat.conf parsing.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "conf_parser.hpp"

#include <algorithm>

namespace fastdapl::registry {

namespace {

constexpr bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// Entries have eight fields; later API versions may append more, which we
// accept and ignore so that a newer dat.conf still works here.
constexpr std::size_t kFieldCount = 8;

bool parse_api_version(std::string_view text, ConfEntry& entry, std::string& error)
{
    if (text.empty() || (text[0] != 'u' && text[0] != 'k')) {
        error = "API version '" + std::string(text) + "' must start with 'u' or 'k' (e.g. u2.0)";
        return false;
    }
    entry.api_kind = text[0];
    text.remove_prefix(1);
    const auto dot = text.find('.');
    if (dot == std::string_view::npos || !parse_u32(text.substr(0, dot), entry.api_major) ||
        !parse_u32(text.substr(dot + 1), entry.api_minor)) {
        error = "API version must be <u|k><major>.<minor>";
        return false;
    }
    return true;
}

bool parse_provider_version(std::string_view text, ConfEntry& entry, std::string& error)
{
    // <id>.<major>.<minor>; the id itself may contain dots, so split from the right.
    const auto last = text.rfind('.');
    const auto middle = last == std::string_view::npos || last == 0 ? std::string_view::npos : text.rfind('.', last - 1);
    if (middle == std::string_view::npos || middle == 0 ||
        !parse_u32(text.substr(middle + 1, last - middle - 1), entry.provider_major) ||
        !parse_u32(text.substr(last + 1), entry.provider_minor)) {
        error = "provider version '" + std::string(text) + "' must be <id>.<major>.<minor>";
        return false;
    }
    entry.provider_id = std::string(text.substr(0, middle));
    return true;
}

bool parse_entry(const std::vector<std::string>& fields, ConfEntry& entry, std::string& error)
{
    if (fields.size() < kFieldCount) {
        error = "expected 8 fields (name, API version, thread safety, default, library, provider version, "
                "instance data, platform data), found " +
                std::to_string(fields.size());
        return false;
    }
    entry.ia_name = fields[0];
    if (entry.ia_name.empty() || entry.ia_name.size() > kMaxIaNameLength) {
        error = "IA name must be 1 to 255 characters";
        return false;
    }
    if (!parse_api_version(fields[1], entry, error))
        return false;
    if (fields[2] == "threadsafe") {
        entry.thread_safe = true;
    } else if (fields[2] == "nonthreadsafe") {
        entry.thread_safe = false;
    } else {
        error = "thread safety '" + fields[2] + "' must be 'threadsafe' or 'nonthreadsafe'";
        return false;
    }
    if (fields[3] == "default") {
        entry.is_default = true;
    } else if (fields[3] == "nondefault") {
        entry.is_default = false;
    } else {
        error = "'" + fields[3] + "' must be 'default' or 'nondefault'";
        return false;
    }
    entry.library = fields[4];
    if (entry.library.empty()) {
        error = "library path is empty";
        return false;
    }
    if (!parse_provider_version(fields[5], entry, error))
        return false;
    entry.ia_params = fields[6];
    entry.platform_params = fields[7];
    return true;
}

} // namespace

bool parse_u32(std::string_view text, std::uint32_t& value)
{
    if (text.empty())
        return false;
    std::uint64_t v = 0;
    for (char c : text) {
        if (c < '0' || c > '9')
            return false;
        v = v * 10 + static_cast<unsigned>(c - '0');
        if (v > UINT32_MAX) // stop before the accumulator could overflow; leading zeros never get here
            return false;
    }
    if (v > UINT32_MAX)
        return false;
    value = static_cast<std::uint32_t>(v);
    return true;
}

bool tokenize_conf_line(std::string_view line, std::vector<std::string>& fields, std::string& error)
{
    fields.clear();
    std::size_t i = 0;
    const std::size_t n = line.size();
    while (true) {
        while (i < n && is_blank(line[i]))
            ++i;
        if (i == n || line[i] == '#')
            return true;
        std::string field;
        if (line[i] == '"') {
            ++i;
            bool closed = false;
            while (i < n) {
                char c = line[i++];
                if (c == '"') {
                    closed = true;
                    break;
                }
                if (c == '\\' && i < n && (line[i] == '"' || line[i] == '\\'))
                    c = line[i++];
                field.push_back(c);
            }
            if (!closed) {
                error = "unterminated quoted field";
                return false;
            }
            if (i < n && !is_blank(line[i]) && line[i] != '#') {
                error = "text directly after a closing quote";
                return false;
            }
        } else {
            while (i < n && !is_blank(line[i]) && line[i] != '#') {
                if (line[i] == '"') {
                    error = "quote inside an unquoted field";
                    return false;
                }
                field.push_back(line[i++]);
            }
        }
        fields.push_back(std::move(field));
    }
}

ConfParseResult parse_conf(std::string_view text)
{
    ConfParseResult result;
    std::vector<std::string> fields;
    std::string error;
    unsigned line_no = 0;
    std::size_t pos = 0;
    while (pos <= text.size()) {
        auto end = text.find('\n', pos);
        const bool last = end == std::string_view::npos;
        if (last)
            end = text.size();
        std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        ++line_no;
        if (last && line.empty())
            break;

        if (line.size() > kMaxLineLength) {
            result.diagnostics.push_back({line_no, "line longer than " + std::to_string(kMaxLineLength) +
                                                       " bytes, skipped"});
            continue;
        }
        if (line.find('\0') != std::string_view::npos) {
            result.diagnostics.push_back({line_no, "NUL byte in line, skipped"});
            continue;
        }
        if (!tokenize_conf_line(line, fields, error)) {
            result.diagnostics.push_back({line_no, error + ", skipped"});
            continue;
        }
        if (fields.empty())
            continue; // blank or comment
        ConfEntry entry;
        entry.line = line_no;
        if (!parse_entry(fields, entry, error)) {
            result.diagnostics.push_back({line_no, error + ", skipped"});
            continue;
        }
        if (fields.size() > kFieldCount)
            result.diagnostics.push_back(
                {line_no, std::to_string(fields.size() - kFieldCount) + " extra field(s) ignored"});
        result.entries.push_back(std::move(entry));
        if (last)
            break;
    }
    return result;
}

} // namespace fastdapl::registry
