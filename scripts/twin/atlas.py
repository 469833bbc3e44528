"""The twin atlas's table, from the folders scripts/twin-atlas.sh made.

  python3 scripts/twin/atlas.py OUT > OUT/atlas.md

For every server (a folder of OUT holding calibrate/calibration.json and
measured/critical.csv) and every policy: what calibrate's probes told of
the server (order, queue, work for gone clients), the twin it fitted, the
T50 its twin predicts with its 95 % interval (calibration.json's
predictions, the twin's sweep in virtual time), the T50 the real
adaptive search measured with its interval and its storms
(measured/critical.csv), the difference in seconds, and whether the two
intervals overlap. An empty end of an interval lies beyond the pauses:
below 0, or above the longest pause. A server not yet measured is listed
as such.
"""

import csv
import json
import os
import sys

ORDER = ["gunicorn", "waitress", "aiohttp-cpu", "aiohttp-await", "grpcio"]

KINDS = {
    "gunicorn": "sync worker pool, queue in the listen backlog",
    "waitress": "thread pool behind a limit of 100 connections, tasks queued",
    "aiohttp-cpu": "event loop, CPU work a request",
    "aiohttp-await": "event loop, handlers await (no limit)",
    "grpcio": "gRPC thread pool",
}


def number(v):
    """A cell's number, or None for an empty one."""
    if v is None or v == "":
        return None
    return float(v)


def edge(row, max_pause):
    """(T50, low, high, outside) of a critical row, the open ends of the
    interval made 0 and infinity."""
    t50 = number(row.get("t50_s"))
    low = number(row.get("t50_ci_low_s"))
    high = number(row.get("t50_ci_high_s"))
    outside = row.get("t50_outside") or None
    return t50, 0.0 if low is None else low, float("inf") if high is None else high, outside


def said(e, max_pause):
    """An edge in words: T50 (low-high), or where it lies beyond the pauses."""
    t50, low, high, outside = e
    top = "more" if high == float("inf") else "%.1f" % high
    if t50 is None:
        where = "> %g" % max_pause if outside != "shorter" else "fails at 0"
        return "%s (%.1f-%s)" % (where, low, top)
    return "%.1f (%.1f-%s)" % (t50, low, top)


def difference(p, m, max_pause):
    """Measured minus predicted T50, in seconds, or words where either lies
    beyond the pauses."""
    if p[0] is not None and m[0] is not None:
        return "%+.1f" % (m[0] - p[0])
    if p[0] is None and m[0] is None and p[3] == m[3]:
        return "0 (both beyond)"
    return "-"


def max_pause_of(folder):
    """The longest pause of the measured search, from its summary."""
    try:
        text = open(os.path.join(folder, "measured", "summary.md")).read()
    except OSError:
        return 60.0
    marker = "pauses from 0 to "
    if marker in text:
        return float(text.split(marker, 1)[1].split(" ", 1)[0])
    return 60.0


def told(cal):
    """What the probes told of the service, from calibration.json: how it
    answered requests sent at once (the order probe), where requests wait
    (the burst), and whether it finishes work for clients that have gone;
    "-" for a probe not made or that told nothing."""
    order = (cal.get("order") or {}).get("order") or "-"
    burst = cal.get("queue") or {}
    queue = burst.get("queue")
    if queue is None:
        where = "-"
    elif queue["kind"] == "backlog":
        where = "backlog %d" % queue["depth"]
        if burst.get("taken_in") is not None:
            where += " (the kernel's; %d taken in)" % burst["taken_in"]
    else:
        where = "%s %d" % (queue["kind"], queue["places"])
    gone = (cal.get("gone") or {}).get("verdict") or "-"
    return "%s; %s; %s" % (order, where, gone)


def shown(out):
    """OUT as a path from the working folder, if it lies within it."""
    rel = os.path.relpath(out)
    return out if rel.startswith("..") else rel


def main(out):
    servers = [s for s in ORDER if os.path.isdir(os.path.join(out, s))]
    print("# The twin atlas\n")
    print("Made by `scripts/twin-atlas.sh %s`: each server calibrated by `storm"
          " calibrate` (its twin's T50 predicted in virtual time) and measured by"
          " `storm sweep twin.toml --target URL --outage sigstop=PID` (the real"
          " adaptive search, a storm a run). *told*: what calibrate's probes"
          " told of the service: requests sent at once answered in waves or"
          " together; where requests wait (the burst: a backlog the kernel told,"
          " and the connections the service took in itself beyond it and its"
          " workers); whether work for clients"
          " that have gone continues, is cancelled or unclear. T50 in seconds with its 95 %%"
          " interval; an open end lies beyond the pauses. *overlap*: whether the"
          " twin's interval and the measured one meet.\n" % shown(out))
    print("| server | kind | told | twin | policy | twin T50 (95 %) | measured T50 (95 %) | storms | difference s | overlap |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for server in servers:
        folder = os.path.join(out, server)
        try:
            cal = json.load(open(os.path.join(folder, "calibrate", "calibration.json")))
        except OSError:
            print("| %s | %s | | not calibrated | | | | | | |" % (server, KINDS[server]))
            continue
        twin = cal.get("twin_flags") or "-"
        probes = told(cal)
        predicted = {c["case"]: c for c in cal.get("predictions", [])}
        path = os.path.join(folder, "measured", "critical.csv")
        measured = {}
        if os.path.exists(path):
            measured = {r["case"]: r for r in csv.DictReader(open(path))}
        max_pause = max_pause_of(folder)
        for case, p_row in predicted.items():
            p = edge(p_row, max_pause)
            m_row = measured.get(case)
            if m_row is None:
                print("| %s | %s | %s | `%s` | %s | %s | not measured | | | |" % (
                    server, KINDS[server], probes, twin, case, said(p, max_pause)))
                continue
            m = edge(m_row, max_pause)
            overlap = m[1] <= p[2] and p[1] <= m[2]
            print("| %s | %s | %s | `%s` | %s | %s | %s | %s | %s | %s |" % (
                server, KINDS[server], probes, twin, case, said(p, max_pause), said(m, max_pause),
                m_row["seeds"], difference(p, m, max_pause), "yes" if overlap else "**no**"))
    missing = [s for s in ORDER if s not in servers]
    if missing:
        print("\nNot yet run: %s (scripts/twin-atlas.sh goes on where it stopped)." % ", ".join(missing))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
