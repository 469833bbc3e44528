#!/usr/bin/env python3
# Totals of HdrHistogram interval logs, read independently of retry-storm's
# own Rust code: with the Python `hdrhistogram` package (module `hdrh`,
# https://pypi.org/project/hdrhistogram/), whose HistogramLogReader reads the
# standard log format (Java's HistogramLogWriter; V2 compressed histograms,
# optional `Tag=NAME,` prefix). It checks what `client --hlog` and
# `storm merge` write: per file and per tag (untagged as ""), the number of
# interval histograms, the total count, and p50, p99 and max of the sum of
# every interval, in the units stored (the client: microseconds).
#
#   scripts/hlog-totals.py FILE.hlog...            every tag of every file
#   scripts/hlog-totals.py --tag request FILE...   only that tag ("" for the
#                                                  untagged histograms)
#   scripts/hlog-totals.py --all FILE...           also "all": every file
#                                                  summed, per tag (the
#                                                  shards' logs together
#                                                  should give the merged
#                                                  log's numbers)
#
# Output, JSON on stdout:
#   {"files": {"FILE": {"TAG": {"intervals": N, "count": N, "p50": V,
#                               "p99": V, "max": V}, ...}, ...},
#    "all": {"TAG": {...}}}                        ("all" with --all only)
# A tag with no recorded value has p50, p99 and max null. Percentiles as
# Java's AbstractHistogram.getValueAtPercentile computes them: the highest
# value equivalent to the one where the count reaches ceil(p * total / 100).
#
# It installs nothing: `pip install hdrhistogram` (0.10.x) first, e.g. in a
# venv. Exits 1 if a file cannot be read or holds no interval, 2 on a usage
# error or without the package.
#
# The same log read by Java's HistogramLogProcessor (Debian:
# apt-get install -y libhdrhistogram-java, HdrHistogram 2.1.11), values as
# stored (ratio 1):
#   java -cp /usr/share/java/hdrhistogram.jar \
#     org.HdrHistogram.HistogramLogProcessor -i FILE.hlog \
#     -outputValueUnitRatio 1 [-tag request] -o OUT
# OUT has a line per interval; its last line's "T:COUNT ( 50% 90% 99%
# 99.9% 99.99% Max )" are the count, p50, p99 and max above. OUT.hgrm has
# the whole distribution of the sum, ending in "#[Max = ..., Total count =
# ...]" (without -o, only that goes to stdout).
import argparse
import json
import math
import sys

try:
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader
except ImportError:
    print("the Python package hdrhistogram is required: pip install hdrhistogram",
          file=sys.stderr)
    sys.exit(2)


def usage():
    lines = []
    with open(__file__, encoding="utf-8") as f:
        next(f)  # the shebang
        for line in f:
            if not line.startswith("#"):
                break
            lines.append(line[2:] if line.startswith("# ") else line[1:])
    return "".join(lines)


def value_at_percentile(hist, percentile):
    """Java's getValueAtPercentile (HdrHistogram 2.1.11), on hdrh's counts."""
    p = min(max(math.nextafter(percentile, -math.inf), 0.0), 100.0)
    target = max(math.ceil(p * hist.get_total_count() / 100.0), 1)
    seen = 0
    for index in range(hist.counts_len):
        seen += hist.get_count_at_index(index)
        if seen >= target:
            value = hist.get_value_from_index(index)
            if percentile == 0.0:
                return hist.get_lowest_equivalent_value(value)
            return hist.get_highest_equivalent_value(value)
    return 0


def read_intervals(path):
    """Every interval histogram of a log, in order, as (tag, histogram)."""
    reader = HistogramLogReader(path, None)
    try:
        out = []
        while True:
            hist = reader.get_next_interval_histogram()
            if hist is None:
                return out
            out.append((hist.get_tag() or "", hist))
    finally:
        reader.input_file.close()


def summed(hists):
    """The sum of histograms, in one wide enough to hold each of them.

    hdrh's histograms do not resize: the sum gets the largest range among
    them (and the first one's resolution, which every interval of one log
    shares), so adding never overflows it.
    """
    first = hists[0]
    highest = max(max(h.highest_trackable_value, h.get_max_value()) for h in hists)
    highest = max(highest, 2 * first.lowest_trackable_value)
    total = HdrHistogram(first.lowest_trackable_value, highest,
                         first.significant_figures)
    for h in hists:
        total.add(h)
    return total


def totals(intervals):
    by_tag = {}
    for tag, hist in intervals:
        by_tag.setdefault(tag, []).append(hist)
    out = {}
    for tag in sorted(by_tag):
        hists = by_tag[tag]
        total = summed(hists)
        count = total.get_total_count()
        out[tag] = {
            "intervals": len(hists),
            "count": count,
            "p50": value_at_percentile(total, 50.0) if count else None,
            "p99": value_at_percentile(total, 99.0) if count else None,
            "max": total.get_max_value() if count else None,
        }
    return out


def main():
    parser = argparse.ArgumentParser(
        usage="%(prog)s [--tag TAG] [--all] FILE.hlog...",
        description=usage(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="+", metavar="FILE.hlog")
    parser.add_argument("--tag", help='only this tag ("" for untagged)')
    parser.add_argument("--all", action="store_true",
                        help='also "all": every file summed, per tag')
    args = parser.parse_args()

    files = {}
    every = []
    failed = False
    for path in args.files:
        try:
            intervals = read_intervals(path)
        except Exception as err:  # noqa: BLE001
            # OSError, or on a corrupt line hdrh's own exceptions, ValueError,
            # zlib.error or binascii.Error: any of them fails this file.
            print(f"{path}: {type(err).__name__}: {err}", file=sys.stderr)
            failed = True
            continue
        if args.tag is not None:
            intervals = [(t, h) for t, h in intervals if t == args.tag]
        if not intervals:
            print(f"{path}: no interval histogram"
                  + (f" tagged {args.tag!r}" if args.tag is not None else ""),
                  file=sys.stderr)
            failed = True
        files[path] = totals(intervals)
        every.extend(intervals)

    result = {"files": files}
    if args.all:
        result["all"] = totals(every)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
