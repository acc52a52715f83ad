// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "json.hpp"

#include <charconv>
#include <cstdint>
#include <cstdio>

namespace dat_perf::json {

const Value* Value::find(std::string_view key) const
{
    if (kind != Kind::object)
        return nullptr;
    for (const Member& m : object)
        if (m.key == key)
            return &m.value;
    return nullptr;
}

namespace {

constexpr int kMaxDepth = 64;

class Parser {
public:
    explicit Parser(std::string_view text) : t_(text) {}

    bool document(Value& v)
    {
        skip_space();
        if (!value(v, 0))
            return false;
        skip_space();
        if (pos_ != t_.size())
            return fail("text after the end of the document");
        return true;
    }

    std::string error() const
    {
        std::size_t line = 1, column = 1;
        for (std::size_t i = 0; i < error_pos_ && i < t_.size(); ++i) {
            if (t_[i] == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + error_;
    }

private:
    bool fail(const char* what)
    {
        error_ = what;
        error_pos_ = pos_;
        return false;
    }
    bool at_end() const { return pos_ >= t_.size(); }
    char peek() const { return at_end() ? '\0' : t_[pos_]; }
    void skip_space()
    {
        while (!at_end() && (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\n' || t_[pos_] == '\r'))
            ++pos_;
    }
    bool literal(std::string_view word)
    {
        if (t_.substr(pos_, word.size()) != word)
            return fail("not a JSON value");
        pos_ += word.size();
        return true;
    }

    bool value(Value& v, int depth)
    {
        if (depth > kMaxDepth)
            return fail("nested too deeply");
        switch (peek()) {
        case '{':
            return object(v, depth);
        case '[':
            return array(v, depth);
        case '"':
            v.kind = Value::Kind::string;
            return string(v.string);
        case 't':
            v.kind = Value::Kind::boolean;
            v.boolean = true;
            return literal("true");
        case 'f':
            v.kind = Value::Kind::boolean;
            v.boolean = false;
            return literal("false");
        case 'n':
            v.kind = Value::Kind::null;
            return literal("null");
        case '\0':
            if (at_end())
                return fail("unexpected end of the text");
            return fail("not a JSON value");
        default:
            return number(v);
        }
    }

    bool object(Value& v, int depth)
    {
        v.kind = Value::Kind::object;
        ++pos_; // '{'
        skip_space();
        if (peek() == '}') {
            ++pos_;
            return true;
        }
        for (;;) {
            skip_space();
            if (peek() != '"')
                return fail("expected a string as the member's name");
            Member m;
            const std::size_t key_pos = pos_;
            if (!string(m.key))
                return false;
            if (v.find(m.key)) {
                pos_ = key_pos;
                return fail("duplicate member name");
            }
            skip_space();
            if (peek() != ':')
                return fail("expected ':' after the member's name");
            ++pos_;
            skip_space();
            if (!value(m.value, depth + 1))
                return false;
            v.object.push_back(std::move(m));
            skip_space();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() == '}') {
                ++pos_;
                return true;
            }
            return fail("expected ',' or '}' in an object");
        }
    }

    bool array(Value& v, int depth)
    {
        v.kind = Value::Kind::array;
        ++pos_; // '['
        skip_space();
        if (peek() == ']') {
            ++pos_;
            return true;
        }
        for (;;) {
            skip_space();
            Value element;
            if (!value(element, depth + 1))
                return false;
            v.array.push_back(std::move(element));
            skip_space();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() == ']') {
                ++pos_;
                return true;
            }
            return fail("expected ',' or ']' in an array");
        }
    }

    static int hex_digit(char c)
    {
        if (c >= '0' && c <= '9')
            return c - '0';
        if (c >= 'a' && c <= 'f')
            return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
            return c - 'A' + 10;
        return -1;
    }

    // Four hex digits after "\u".
    bool hex4(std::uint32_t& out)
    {
        out = 0;
        for (int i = 0; i < 4; ++i) {
            const int d = at_end() ? -1 : hex_digit(t_[pos_]);
            if (d < 0)
                return fail("expected four hex digits after \\u");
            out = out * 16 + static_cast<std::uint32_t>(d);
            ++pos_;
        }
        return true;
    }

    static void append_utf8(std::string& s, std::uint32_t cp)
    {
        if (cp < 0x80) {
            s += static_cast<char>(cp);
        } else if (cp < 0x800) {
            s += static_cast<char>(0xc0 | (cp >> 6));
            s += static_cast<char>(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            s += static_cast<char>(0xe0 | (cp >> 12));
            s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            s += static_cast<char>(0x80 | (cp & 0x3f));
        } else {
            s += static_cast<char>(0xf0 | (cp >> 18));
            s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
            s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            s += static_cast<char>(0x80 | (cp & 0x3f));
        }
    }

    bool string(std::string& out)
    {
        ++pos_; // '"'
        for (;;) {
            if (at_end())
                return fail("unterminated string");
            const char c = t_[pos_];
            if (c == '"') {
                ++pos_;
                return true;
            }
            if (static_cast<unsigned char>(c) < 0x20)
                return fail("control character in a string");
            if (c != '\\') {
                out += c;
                ++pos_;
                continue;
            }
            ++pos_;
            if (at_end())
                return fail("unterminated string");
            const char e = t_[pos_++];
            switch (e) {
            case '"':
                out += '"';
                break;
            case '\\':
                out += '\\';
                break;
            case '/':
                out += '/';
                break;
            case 'b':
                out += '\b';
                break;
            case 'f':
                out += '\f';
                break;
            case 'n':
                out += '\n';
                break;
            case 'r':
                out += '\r';
                break;
            case 't':
                out += '\t';
                break;
            case 'u': {
                std::uint32_t cp;
                if (!hex4(cp))
                    return false;
                if (cp >= 0xdc00 && cp <= 0xdfff)
                    return fail("a low surrogate without a high one");
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    std::uint32_t low;
                    if (t_.substr(pos_, 2) != "\\u")
                        return fail("a high surrogate without a low one");
                    pos_ += 2;
                    if (!hex4(low))
                        return false;
                    if (low < 0xdc00 || low > 0xdfff)
                        return fail("a high surrogate without a low one");
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                }
                append_utf8(out, cp);
                break;
            }
            default:
                --pos_;
                return fail("unknown escape in a string");
            }
        }
    }

    static bool is_digit(char c) { return c >= '0' && c <= '9'; }

    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    bool number(Value& v)
    {
        const std::size_t start = pos_;
        if (peek() == '-')
            ++pos_;
        if (peek() == '0') {
            ++pos_;
        } else if (is_digit(peek())) {
            while (is_digit(peek()))
                ++pos_;
        } else {
            pos_ = start;
            return fail("not a JSON value");
        }
        if (peek() == '.') {
            ++pos_;
            if (!is_digit(peek()))
                return fail("expected a digit after '.'");
            while (is_digit(peek()))
                ++pos_;
        }
        if (peek() == 'e' || peek() == 'E') {
            ++pos_;
            if (peek() == '+' || peek() == '-')
                ++pos_;
            if (!is_digit(peek()))
                return fail("expected a digit in the exponent");
            while (is_digit(peek()))
                ++pos_;
        }
        double d = 0;
        const auto [end, ec] = std::from_chars(t_.data() + start, t_.data() + pos_, d);
        if (ec != std::errc() || end != t_.data() + pos_) {
            pos_ = start;
            return fail("number out of range");
        }
        v.kind = Value::Kind::number;
        v.number = d;
        return true;
    }

    std::string_view t_;
    std::size_t pos_ = 0;
    std::string error_;
    std::size_t error_pos_ = 0;
};

} // namespace

bool parse(std::string_view text, Value& out, std::string& error)
{
    Parser p(text);
    out = Value{};
    if (p.document(out))
        return true;
    error = p.error();
    return false;
}

} // namespace dat_perf::json
