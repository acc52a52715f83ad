#!/usr/bin/env python3
# dat_perf_plot: plots one or more dat_perf JSON results (dat_perf --format
# json) as an SVG: one-way latency and RDMA-write bandwidth against message
# size (log2 x axis), one line per file, labelled with its IA, mode and wait.
# Needs matplotlib (Debian: python3-matplotlib).
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors
"""Plot dat_perf JSON results (latency and bandwidth vs size) to an SVG."""

import argparse
import json
import os
import sys


def load(path):
    """The parsed result in `path`; raises ValueError when it is not one."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or data.get("tool") != "dat_perf":
        raise ValueError("not a dat_perf result (no \"tool\": \"dat_perf\")")
    if data.get("format_version") != 1:
        raise ValueError("format_version is not 1")
    if not isinstance(data.get("results"), list):
        raise ValueError("\"results\" is missing or not an array")
    return data


def series(data, test, metric):
    """(sizes, values) of one test's metric, by size, skipping nulls."""
    points = sorted((r["bytes"], r[metric]) for r in data["results"]
                    if r.get("test") == test and r.get(metric) is not None)
    return [p[0] for p in points], [p[1] for p in points]


def labels(runs):
    """'IA mode wait' for each run; the file name is added where two agree."""
    base = [f'{d.get("ia", "?")} {d.get("mode", "?")} {d.get("wait", "?")}' for _, d in runs]
    return [f"{b} ({os.path.basename(path)})" if base.count(b) > 1 else b
            for b, (path, _) in zip(base, runs)]


def main(argv):
    parser = argparse.ArgumentParser(
        description="Plot dat_perf JSON results (dat_perf --format json) as an SVG: "
                    "one-way latency (median, and the 99th percentile with --p99) and "
                    "RDMA-write bandwidth against message size.")
    parser.add_argument("results", nargs="+", metavar="RESULT.json",
                        help="dat_perf results; each becomes a line labelled with its IA, mode and wait")
    parser.add_argument("-o", "--output", default="dat_perf.svg",
                        help="the SVG to write (default dat_perf.svg)")
    parser.add_argument("--title", default=None, help="a title above both plots")
    parser.add_argument("--p99", action="store_true", help="also draw the 99th-percentile latency, dashed")
    args = parser.parse_args(argv)

    runs = []
    for path in args.results:
        try:
            runs.append((path, load(path)))
        except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
            print(f"dat_perf_plot: {path}: {e}", file=sys.stderr)
            return 1

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("dat_perf_plot: needs matplotlib (Debian: apt-get install python3-matplotlib)", file=sys.stderr)
        return 1
    matplotlib.rcParams["svg.hashsalt"] = "dat_perf"  # the same input gives the same SVG

    fig, (lat, bw) = plt.subplots(1, 2, figsize=(12, 4.8))
    for (path, data), label in zip(runs, labels(runs)):
        x, y = series(data, "lat", "lat_med_us")
        line = None
        if x:
            (line,) = lat.plot(x, y, marker="o", markersize=3, label=label)
        if args.p99:
            x99, y99 = series(data, "lat", "lat_p99_us")
            if x99:
                lat.plot(x99, y99, linestyle="--", linewidth=1,
                         color=line.get_color() if line else None, label=f"{label} p99")
        x, y = series(data, "bw", "mb_per_s")
        if x:
            bw.plot(x, y, marker="o", markersize=3, label=label,
                    color=line.get_color() if line else None)

    lat.set_title("send/recv ping-pong")
    lat.set_ylabel("one-way latency (µs)")
    lat.set_yscale("log")
    bw.set_title("RDMA write")
    bw.set_ylabel("bandwidth (MB/s, 10^6 B/s)")
    bw.set_yscale("log")
    for ax in (lat, bw):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.grid(True, which="major", alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize="small")
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    try:
        fig.savefig(args.output, format="svg", metadata={"Date": None})
    except OSError as e:
        print(f"dat_perf_plot: {args.output}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
