// libFuzzer target: the dat.conf parser must never crash and must keep its invariants.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "conf_parser.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

using namespace fastdapl::registry;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const ConfParseResult r = parse_conf(text);
    std::size_t lines = 1;
    for (char c : text)
        lines += c == '\n';
    unsigned previous = 0;
    for (const ConfEntry& e : r.entries) {
        if (e.ia_name.empty() || e.ia_name.size() > kMaxIaNameLength || e.library.empty())
            std::abort();
        if (e.line <= previous || e.line > lines)
            std::abort();
        if (e.api_kind != 'u' && e.api_kind != 'k')
            std::abort();
        previous = e.line;
    }
    for (const ConfDiagnostic& d : r.diagnostics)
        if (d.line == 0 || d.line > lines || d.message.empty())
            std::abort();
    return 0;
}
