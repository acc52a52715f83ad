// A small, strict JSON reader for dat_perf's --compare and --input (RFC 8259:
// objects, arrays, strings with escapes, numbers, true/false/null). Strict:
// no comments, no trailing commas, no text after the document, no duplicate
// keys, no control characters in strings, nesting at most 64 deep.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dat_perf::json {

struct Member;

struct Value {
    enum class Kind { null, boolean, number, string, array, object };
    Kind kind = Kind::null;
    bool boolean = false;
    double number = 0;
    std::string string;
    std::vector<Value> array;
    std::vector<Member> object; // in document order

    // The member named `key` of an object; nullptr if absent or not an object.
    const Value* find(std::string_view key) const;
};

struct Member {
    std::string key;
    Value value;
};

// Parses `text` as one JSON document. On failure returns false and sets
// `error` to "line L, column C: what was wrong".
bool parse(std::string_view text, Value& out, std::string& error);

} // namespace dat_perf::json
