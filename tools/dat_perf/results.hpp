// dat_perf's results: the rows of a sweep, their table, CSV and JSON forms,
// reading a JSON result back, and comparing a result with a baseline.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace dat_perf {

// One size of one test. A metric that does not apply to the test is negative
// (printed "-" in the table, empty in CSV, null in JSON).
struct Row {
    std::string test; // "lat" or "bw"
    std::uint64_t size = 0;
    std::uint64_t iterations = 0;
    double median_us = -1, p99_us = -1, mbytes_per_s = -1, msg_per_s = -1;
};

// The parameters of a run, written at the head of a JSON result.
struct RunInfo {
    std::string ia;
    std::string mode;             // "one-process" or "two-process"
    std::string server;           // the client's -h address; empty in one process
    std::string wait;             // "evd_wait" or "busy"
    std::uint64_t iterations = 0; // -n; 0: scaled with size
    bool quick = false;
    std::uint64_t window = 0; // RDMA writes in flight (as granted)
    std::uint64_t min_size = 0, max_size = 0;
    std::string host, date; // date: ISO 8601, UTC
};

struct Result {
    RunInfo info;
    std::vector<Row> rows;
};

enum class Format { table, csv, json };

// Case-sensitive "table", "csv" or "json".
std::optional<Format> parse_format(const std::string& name);

// The metrics, as named in CSV, JSON and --compare's --metrics.
struct Metric {
    const char* name;
    double Row::*field;
    bool higher_is_worse; // latency: higher is worse; rates: lower is worse
};
const std::vector<Metric>& metrics();
const Metric* find_metric(const std::string& name);

void write_table_header(FILE* out);
void write_table_row(FILE* out, const Row& r);
void write(FILE* out, Format format, const Result& result);

// Reads a JSON result written by --format json. On failure returns false
// and sets `error`.
bool read_json(const std::string& path, Result& out, std::string& error);

struct CompareOptions {
    double tolerance_pct = 10;
    std::vector<const Metric*> metrics;
};

struct CompareOutcome {
    bool comparable = true; // false: no (test, size) in common
    int compared = 0;       // metric values compared
    int regressions = 0;
};

// Prints, for each (test, size, metric) of `current` that `baseline` has,
// both values, the change and a verdict; then a summary line.
CompareOutcome compare(FILE* out, const Result& baseline, const Result& current, const CompareOptions& options);

} // namespace dat_perf
