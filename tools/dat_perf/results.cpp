// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "results.hpp"

#include "json.hpp"

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace dat_perf {

namespace {

constexpr int kFormatVersion = 1;

std::string json_string(const std::string& s)
{
    std::string out = "\"";
    for (const char c : s) {
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\t':
            out += "\\t";
            break;
        case '\r':
            out += "\\r";
            break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char b[8];
                std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(c));
                out += b;
            } else {
                out += c;
            }
        }
    }
    return out + "\"";
}

// A metric's value in JSON (null when it does not apply) or CSV (empty).
std::string number_or(double v, const char* absent)
{
    if (v < 0)
        return absent;
    char b[40];
    std::snprintf(b, sizeof b, "%.3f", v);
    return b;
}

void write_csv(FILE* out, const std::vector<Row>& rows)
{
    std::fprintf(out, "test,bytes,iterations");
    for (const Metric& m : metrics())
        std::fprintf(out, ",%s", m.name);
    std::fprintf(out, "\n");
    for (const Row& r : rows) {
        std::fprintf(out, "%s,%" PRIu64 ",%" PRIu64, r.test.c_str(), r.size, r.iterations);
        for (const Metric& m : metrics())
            std::fprintf(out, ",%s", number_or(r.*m.field, "").c_str());
        std::fprintf(out, "\n");
    }
}

void write_json(FILE* out, const Result& result)
{
    const RunInfo& i = result.info;
    std::fprintf(out, "{\n");
    std::fprintf(out, "  \"tool\": \"dat_perf\",\n");
    std::fprintf(out, "  \"format_version\": %d,\n", kFormatVersion);
    std::fprintf(out, "  \"ia\": %s,\n", json_string(i.ia).c_str());
    std::fprintf(out, "  \"mode\": %s,\n", json_string(i.mode).c_str());
    std::fprintf(out, "  \"server\": %s,\n", i.server.empty() ? "null" : json_string(i.server).c_str());
    std::fprintf(out, "  \"wait\": %s,\n", json_string(i.wait).c_str());
    if (i.iterations)
        std::fprintf(out, "  \"iterations\": %" PRIu64 ",\n", i.iterations);
    else
        std::fprintf(out, "  \"iterations\": null,\n");
    std::fprintf(out, "  \"quick\": %s,\n", i.quick ? "true" : "false");
    std::fprintf(out, "  \"window\": %" PRIu64 ",\n", i.window);
    std::fprintf(out, "  \"min_size\": %" PRIu64 ",\n", i.min_size);
    std::fprintf(out, "  \"max_size\": %" PRIu64 ",\n", i.max_size);
    std::fprintf(out, "  \"host\": %s,\n", json_string(i.host).c_str());
    std::fprintf(out, "  \"date\": %s,\n", json_string(i.date).c_str());
    std::fprintf(out, "  \"units\": {\"bytes\": \"bytes per message\", \"lat_med_us\": \"microseconds, one-way, "
                      "median\", \"lat_p99_us\": \"microseconds, one-way, 99th percentile\", \"mb_per_s\": \"10^6 "
                      "bytes per second\", \"msg_per_s\": \"RDMA writes per second\"},\n");
    std::fprintf(out, "  \"results\": [");
    const char* separator = "\n";
    for (const Row& r : result.rows) {
        std::fprintf(out, "%s    {\"test\": %s, \"bytes\": %" PRIu64 ", \"iterations\": %" PRIu64, separator,
                     json_string(r.test).c_str(), r.size, r.iterations);
        for (const Metric& m : metrics())
            std::fprintf(out, ", \"%s\": %s", m.name, number_or(r.*m.field, "null").c_str());
        std::fprintf(out, "}");
        separator = ",\n";
    }
    std::fprintf(out, "%s]\n}\n", result.rows.empty() ? "" : "\n  ");
}

// --- reading ---

using json::Value;

bool is_count(const Value& v)
{
    return v.kind == Value::Kind::number && v.number >= 0 && v.number <= 9007199254740992.0 &&
           std::floor(v.number) == v.number;
}

class Reader {
public:
    explicit Reader(std::string& error) : error_(error) {}

    bool fail(const std::string& what)
    {
        error_ = what;
        return false;
    }

    bool string(const Value& o, const char* key, std::string& out, bool nullable = false)
    {
        const Value* v = o.find(key);
        if (v && nullable && v->kind == Value::Kind::null) {
            out.clear();
            return true;
        }
        if (!v || v->kind != Value::Kind::string)
            return fail(std::string("\"") + key + "\" is missing or not a string");
        out = v->string;
        return true;
    }
    bool count(const Value& o, const char* key, std::uint64_t& out, bool nullable = false)
    {
        const Value* v = o.find(key);
        if (v && nullable && v->kind == Value::Kind::null) {
            out = 0;
            return true;
        }
        if (!v || !is_count(*v))
            return fail(std::string("\"") + key + "\" is missing or not a non-negative integer");
        out = static_cast<std::uint64_t>(v->number);
        return true;
    }

    bool result(const Value& root, Result& out)
    {
        if (root.kind != Value::Kind::object)
            return fail("not a JSON object");
        const Value* tool = root.find("tool");
        if (!tool || tool->kind != Value::Kind::string || tool->string != "dat_perf")
            return fail("not a dat_perf result (no \"tool\": \"dat_perf\")");
        const Value* version = root.find("format_version");
        if (!version || version->kind != Value::Kind::number || version->number != kFormatVersion)
            return fail("\"format_version\" is missing or not " + std::to_string(kFormatVersion) +
                        " (the one this dat_perf reads)");
        RunInfo& i = out.info;
        if (!string(root, "ia", i.ia) || !string(root, "mode", i.mode) || !string(root, "server", i.server, true) ||
            !string(root, "wait", i.wait) || !count(root, "iterations", i.iterations, true) ||
            !count(root, "window", i.window) || !count(root, "min_size", i.min_size) ||
            !count(root, "max_size", i.max_size) || !string(root, "host", i.host) || !string(root, "date", i.date))
            return false;
        const Value* quick = root.find("quick");
        if (!quick || quick->kind != Value::Kind::boolean)
            return fail("\"quick\" is missing or not true/false");
        i.quick = quick->boolean;
        const Value* rows = root.find("results");
        if (!rows || rows->kind != Value::Kind::array)
            return fail("\"results\" is missing or not an array");
        for (std::size_t n = 0; n < rows->array.size(); ++n) {
            if (!row(rows->array[n], out.rows))
                return fail("results[" + std::to_string(n) + "]: " + error_);
        }
        return true;
    }

private:
    bool row(const Value& v, std::vector<Row>& rows)
    {
        if (v.kind != Value::Kind::object)
            return fail("not an object");
        Row r;
        if (!string(v, "test", r.test) || !count(v, "bytes", r.size) || !count(v, "iterations", r.iterations))
            return false;
        if (r.test != "lat" && r.test != "bw")
            return fail("\"test\" is \"" + r.test + "\", not \"lat\" or \"bw\"");
        if (r.size == 0)
            return fail("\"bytes\" is 0");
        for (const Metric& m : metrics()) {
            const Value* value = v.find(m.name);
            if (!value)
                return fail(std::string("\"") + m.name + "\" is missing");
            if (value->kind == Value::Kind::null)
                continue;
            if (value->kind != Value::Kind::number || value->number < 0)
                return fail(std::string("\"") + m.name + "\" is not a non-negative number or null");
            r.*m.field = value->number;
        }
        for (const Row& other : rows)
            if (other.test == r.test && other.size == r.size)
                return fail("a second row for " + r.test + " " + std::to_string(r.size) + " B");
        rows.push_back(std::move(r));
        return true;
    }

    std::string& error_;
};

const Row* find_row(const Result& r, const std::string& test, std::uint64_t size)
{
    for (const Row& row : r.rows)
        if (row.test == test && row.size == size)
            return &row;
    return nullptr;
}

} // namespace

std::optional<Format> parse_format(const std::string& name)
{
    if (name == "table")
        return Format::table;
    if (name == "csv")
        return Format::csv;
    if (name == "json")
        return Format::json;
    return std::nullopt;
}

const std::vector<Metric>& metrics()
{
    static const std::vector<Metric> all = {
        {"lat_med_us", &Row::median_us, true},
        {"lat_p99_us", &Row::p99_us, true},
        {"mb_per_s", &Row::mbytes_per_s, false},
        {"msg_per_s", &Row::msg_per_s, false},
    };
    return all;
}

const Metric* find_metric(const std::string& name)
{
    for (const Metric& m : metrics())
        if (name == m.name)
            return &m;
    return nullptr;
}

void write_table_header(FILE* out)
{
    std::fprintf(out, "%-4s %10s %8s %12s %12s %12s %12s\n", "test", "bytes", "iters", "lat_med_us", "lat_p99_us",
                 "MB/s", "msg/s");
}

void write_table_row(FILE* out, const Row& r)
{
    auto col = [](double v, int precision) {
        char b[32];
        if (v < 0)
            std::snprintf(b, sizeof b, "%12s", "-");
        else
            std::snprintf(b, sizeof b, "%12.*f", precision, v);
        return std::string(b);
    };
    std::fprintf(out, "%-4s %10" PRIu64 " %8" PRIu64 " %s %s %s %s\n", r.test.c_str(), r.size, r.iterations,
                 col(r.median_us, 2).c_str(), col(r.p99_us, 2).c_str(), col(r.mbytes_per_s, 1).c_str(),
                 col(r.msg_per_s, 0).c_str());
    std::fflush(out);
}

void write(FILE* out, Format format, const Result& result)
{
    switch (format) {
    case Format::table:
        write_table_header(out);
        for (const Row& r : result.rows)
            write_table_row(out, r);
        break;
    case Format::csv:
        write_csv(out, result.rows);
        break;
    case Format::json:
        write_json(out, result);
        break;
    }
    std::fflush(out);
}

bool read_json(const std::string& path, Result& out, std::string& error)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        error = std::string("cannot open it: ") + std::strerror(errno);
        return false;
    }
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) {
        error = "cannot read it";
        return false;
    }
    Value root;
    if (!json::parse(text.str(), root, error))
        return false;
    out = Result{};
    Reader reader(error);
    return reader.result(root, out);
}

CompareOutcome compare(FILE* out, const Result& baseline, const Result& current, const CompareOptions& options)
{
    CompareOutcome outcome;
    bool any_common = false;
    for (const Row& r : current.rows)
        any_common = any_common || find_row(baseline, r.test, r.size);
    if (!any_common) {
        outcome.comparable = false;
        return outcome;
    }
    const double t = options.tolerance_pct / 100;
    std::fprintf(out,
                 "compared with the baseline: a regression is latency more than %g%% higher or a rate more "
                 "than %g%% lower\n",
                 options.tolerance_pct, options.tolerance_pct);
    std::fprintf(out, "%-4s %10s %-10s %12s %12s %8s  %s\n", "test", "bytes", "metric", "baseline", "current", "change",
                 "verdict");
    std::string regressed;
    for (const Row& r : current.rows) {
        const Row* b = find_row(baseline, r.test, r.size);
        for (const Metric* m : options.metrics) {
            const double now = r.*m->field;
            if (now < 0)
                continue; // does not apply to this test
            if (!b) {
                std::fprintf(out, "%-4s %10" PRIu64 " %-10s %12s %12.3f %8s  %s\n", r.test.c_str(), r.size, m->name,
                             "-", now, "-", "new");
                continue;
            }
            const double was = b->*m->field;
            if (was <= 0)
                continue; // nothing to compare with
            ++outcome.compared;
            const double change = (now - was) / was;
            const bool worse = m->higher_is_worse ? now > was * (1 + t) : now < was * (1 - t);
            const bool better = m->higher_is_worse ? now < was * (1 - t) : now > was * (1 + t);
            const char* verdict = worse ? "REGRESSED" : better ? "better" : "ok";
            std::fprintf(out, "%-4s %10" PRIu64 " %-10s %12.3f %12.3f %+7.1f%%  %s\n", r.test.c_str(), r.size, m->name,
                         was, now, 100 * change, verdict);
            if (worse) {
                ++outcome.regressions;
                regressed += (regressed.empty() ? "" : ", ") + r.test + " " + std::to_string(r.size) + " B " + m->name;
            }
        }
    }
    int missing = 0;
    for (const Row& b : baseline.rows)
        missing += find_row(current, b.test, b.size) ? 0 : 1;
    if (missing)
        std::fprintf(out, "%d baseline row%s not measured in this run\n", missing, missing == 1 ? "" : "s");
    if (outcome.regressions)
        std::fprintf(out, "REGRESSION: %d of %d values beyond %g%%: %s\n", outcome.regressions, outcome.compared,
                     options.tolerance_pct, regressed.c_str());
    else
        std::fprintf(out, "no regression: %d values within %g%% or better\n", outcome.compared, options.tolerance_pct);
    std::fflush(out);
    return outcome;
}

} // namespace dat_perf
