#!/usr/bin/env python3
"""What scripts/gunicorn-check.sh measured, run by run.

  summarise.py sample FILE PORT
      Appends the kernel's listen-queue figures to FILE four times a
      second until killed: unix milliseconds, TcpExt ListenOverflows and
      ListenDrops from /proc/net/netstat (counters of the whole network
      namespace, every listening socket in it), and the accept queue of
      the socket listening on 127.0.0.1:PORT from /proc/net/tcp (its
      rx_queue: connections waiting to be accepted; -1 if not found).

  summarise.py summarise SERVER BACKLOG STORM_DIR REQUESTS_DIR NETSTAT_FILE
      Reads the storm's summary.json and client CSV files in STORM_DIR,
      the application's request lines (REQUESTS_DIR/requests.PID.tsv:
      start, end, gone at start, gone at end, and from a server that
      cancels (scripts/aiohttp/app.py) how the request ended, 0 answered,
      1 cancelled waiting for a slot, 2 cancelled in service, and the
      seconds it held a slot; gunicorn's four columns are answered
      requests) and the counters' samples, and writes
      STORM_DIR/SERVER.json and STORM_DIR/SERVER.md (SERVER: gunicorn or
      aiohttp; BACKLOG: its listening socket's, at which its accept
      queue counts as full).

A run's window runs from its client's start (timeline.start_ms in
summary.json) to the next run's start, or for the last run to the end of
what was recorded: the requests a run left in the server's queue, served
after its client ended, count to it. gunicorn-check.sh gives each kind of
outage a server, a request folder and a samples file of its own, so a
window never holds another kind's requests. Only data files are read.
"""

import csv
import glob
import json
import os
import statistics
import sys
import time


SAMPLE_S = 0.25



def sample(path, port):
    with open(path, "a", buffering=1) as out:
        while True:
            counters = listen_counters()
            queue = accept_queue(port)
            out.write("%d\t%d\t%d\t%d\n" % (time.time() * 1000, *counters, queue))
            time.sleep(SAMPLE_S)


def accept_queue(port):
    """The accept queue of the socket listening on 127.0.0.1:port."""
    local = "0100007F:%04X" % port
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if fields[1] == local and fields[3] == "0A":
                return int(fields[4].split(":")[1], 16)
    return -1


def listen_counters():
    """TcpExt ListenOverflows and ListenDrops, now."""
    with open("/proc/net/netstat") as f:
        lines = [line.split() for line in f if line.startswith("TcpExt:")]
    names, values = lines[0], lines[1]
    field = dict(zip(names[1:], (int(v) for v in values[1:])))
    return field["ListenOverflows"], field["ListenDrops"]


ANSWERED, CANCELLED_WAITING, CANCELLED_IN_SERVICE = 0, 1, 2


def read_requests(folder):
    """Every request line: (start_ms, end_ms, gone_at_start, gone_at_end,
    outcome, slot_s); gunicorn's lines are answered, their slot the whole
    request."""
    rows = []
    for path in sorted(glob.glob(os.path.join(folder, "requests.*.tsv"))):
        with open(path) as f:
            for line in f:
                if not line.endswith("\n"):
                    continue  # a line cut short by a killed worker
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 4:
                    parts += [ANSWERED, float(parts[1]) - float(parts[0])]
                elif len(parts) != 6:
                    continue
                start, end, at_start, at_end, outcome, slot_s = parts
                rows.append((float(start) * 1000, float(end) * 1000, at_start == "1",
                             at_end == "1", int(outcome), float(slot_s)))
    rows.sort()
    return rows


def read_samples(path):
    samples = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4:
                    samples.append(tuple(int(p) for p in parts))
    return samples


def counters_at(samples, ms):
    """The counters at the last sample at or before ms (else the first)."""
    best = samples[0]
    for s in samples:
        if s[0] <= ms:
            best = s
        else:
            break
    return best[1], best[2]


def client_totals(path, start_ms, resume_ms):
    """The client's OK, errors and timeouts over its run and from the
    resume on: each interval's rate times its length."""
    totals = {"ok": 0.0, "errors": 0.0, "timeouts": 0.0}
    after = dict(totals)
    previous = start_ms
    last = start_ms
    with open(path) as f:
        for row in csv.DictReader(f):
            ms = int(row["unix_ms"])
            secs = max(ms - previous, 0) / 1000.0
            middle = previous + (ms - previous) / 2
            for key, column in (("ok", "ok_per_s"), ("errors", "errors_per_s"),
                                ("timeouts", "timeouts_per_s")):
                n = float(row[column]) * secs
                totals[key] += n
                if middle > resume_ms:
                    after[key] += n
            previous = ms
            last = ms
    rounded = lambda d: {k: round(v) for k, v in d.items()}
    return rounded(totals), rounded(after), last


def summarise(server, backlog, storm_dir, requests_dir, netstat_path):
    with open(os.path.join(storm_dir, "summary.json")) as f:
        summary = json.load(f)
    requests = read_requests(requests_dir)
    samples = read_samples(netstat_path)
    runs = sorted(summary["runs"], key=lambda r: r["timeline"]["start_ms"])
    out_runs = []
    for i, run in enumerate(runs):
        t = run["timeline"]
        start, stop, resume = t["start_ms"], t["stop_ms"], t["resume_ms"]
        end = runs[i + 1]["timeline"]["start_ms"] if i + 1 < len(runs) else float("inf")
        client, client_after, client_end = client_totals(
            os.path.join(storm_dir, run["client_csv"]), start, resume)
        begun = [r for r in requests if start <= r[0] < end]
        mine = [r for r in begun if r[4] == ANSWERED]
        cancelled = [r for r in begun if r[4] != ANSWERED]
        after = [r for r in mine if r[0] >= resume]
        gone_after = sum(1 for r in after if r[3])
        record_end = end if end != float("inf") else max(
            [r[1] for r in begun] + [client_end] + [s[0] for s in samples[-1:]])
        kernel = None
        if samples:
            o0, d0 = counters_at(samples, start)
            o1, d1 = counters_at(samples, record_end)
            queue = [s[3] for s in samples if start <= s[0] < record_end and s[3] >= 0]
            kernel = {
                "listen_overflows": o1 - o0,
                "listen_drops": d1 - d0,
                "accept_queue_peak": max(queue) if queue else None,
                "accept_queue_full_s":
                    round(sum(1 for q in queue if q >= backlog) * SAMPLE_S, 2),
            }
        out_runs.append({
            "case": run["case"],
            "run": run["run"],
            "window": {
                "start_ms": start, "stop_ms": stop, "resume_ms": resume,
                "client_end_ms": client_end, "end_ms": int(record_end),
            },
            "client": {
                "recovered": run["recovered"],
                "recovery_s": run["recovery_s"],
                "baseline_ok_per_s": run["baseline_ok_per_s"],
                "attempts_per_request": run["amplification"],
                "total": client,
                "after_resume": client_after,
            },
            "app": {
                "served": len(mine),
                "gone_at_start": sum(1 for r in mine if r[2]),
                "gone_at_end": sum(1 for r in mine if r[3]),
                "served_in_pause": sum(1 for r in mine if stop <= r[0] < resume),
                "served_after_resume": len(after),
                "gone_after_resume": gone_after,
                "gone_fraction_after_resume":
                    round(gone_after / len(after), 4) if after else None,
                "served_after_client_ended": sum(1 for r in mine if r[0] >= client_end),
                "cancelled": len(cancelled),
                "cancelled_in_service":
                    sum(1 for r in cancelled if r[4] == CANCELLED_IN_SERVICE),
                "cancelled_after_resume": sum(1 for r in cancelled if r[0] >= resume),
                "slot_s_cancelled": round(sum(r[5] for r in cancelled), 3),
            },
            "kernel": kernel,
        })
    cases = []
    for name in dict.fromkeys(r["case"] for r in out_runs):
        mine = [r for r in out_runs if r["case"] == name]
        fractions = [r["app"]["gone_fraction_after_resume"] for r in mine
                     if r["app"]["gone_fraction_after_resume"] is not None]
        amplification = [r["client"]["attempts_per_request"] for r in mine
                         if r["client"]["attempts_per_request"] is not None]
        cases.append({
            "name": name,
            "runs": len(mine),
            "recovered_runs": sum(1 for r in mine if r["client"]["recovered"]),
            "attempts_per_request_median":
                statistics.median(amplification) if amplification else None,
            "gone_fraction_after_resume_median":
                statistics.median(fractions) if fractions else None,
            "cancelled_after_resume_median":
                statistics.median(r["app"]["cancelled_after_resume"] for r in mine),
            "listen_overflows_total": sum((r["kernel"] or {}).get("listen_overflows", 0)
                                          for r in mine),
        })
    result = {
        "server": server,
        "target": summary.get("target"),
        "note": "listen_overflows and listen_drops are TcpExt ListenOverflows and "
                "ListenDrops from /proc/net/netstat: the whole network namespace's, every "
                "listening socket's (a fault proxy's too), not the server's alone; "
                "accept_queue_peak and accept_queue_full_s are the server's socket's own "
                "(/proc/net/tcp), "
                "sampled every %g s, full at its backlog of %d" % (SAMPLE_S, backlog),
        "runs": out_runs,
        "cases": cases,
    }
    with open(os.path.join(storm_dir, server + ".json"), "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    with open(os.path.join(storm_dir, server + ".md"), "w") as f:
        f.write(markdown(result))


def markdown(result):
    def cell(v, digits=2):
        if v is None:
            return "-"
        if isinstance(v, float):
            return "%.*f" % (digits, v)
        return str(v)

    lines = [
        "# %s stormed" % result["server"],
        "",
        "Target %s, outage %s. One row per run, in the order run." % (
            (result["target"] or {}).get("url", "?"), (result["target"] or {}).get("outage", "?")),
        "",
        "| case | run | recovered | attempts/request | client OK / error / timeout after resume "
        "| served | gone at start | gone at end | served in pause | gone after resume "
        "| cancelled (in service) | cancelled after resume "
        "| accept queue peak | queue full (s) | listen overflows | listen drops |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
        "| --- | --- | --- |",
    ]
    for r in result["runs"]:
        c, a, k = r["client"], r["app"], r["kernel"] or {}
        after = c["after_resume"]
        lines.append("| %s | %d | %s | %s | %d / %d / %d | %d | %d | %d | %d | %s | %d (%d) | %d "
                     "| %s | %s | %s | %s |" % (
            r["case"], r["run"], "yes" if c["recovered"] else "no",
            cell(c["attempts_per_request"]), after["ok"], after["errors"], after["timeouts"],
            a["served"], a["gone_at_start"], a["gone_at_end"], a["served_in_pause"],
            "-" if a["gone_fraction_after_resume"] is None
            else "%.1f %%" % (100 * a["gone_fraction_after_resume"]),
            a["cancelled"], a["cancelled_in_service"], a["cancelled_after_resume"],
            cell(k.get("accept_queue_peak")), cell(k.get("accept_queue_full_s")),
            cell(k.get("listen_overflows")), cell(k.get("listen_drops"))))
    lines += [
        "",
        "Attempts/request: the storm's amplification (attempts sent per request started, "
        "from the stop on). Client OK / error / timeout: the client's attempts from the "
        "resume to its end. Served: requests the application answered in the run's window "
        "(from its client's start to the next run's); gone at start and at end: those whose "
        "client had closed its connection when the handler began and when it finished "
        "(through a fault proxy, the client is the proxy's connection to the server). "
        "Served in pause: 0 when the server itself is stopped or frozen, or when a fault "
        "proxy forwards it nothing (stall, blackhole, reset, status); a delay forwards "
        "requests late, and a fault given to a fraction forwards the rest. Gone after "
        "resume: the share of the requests served from the resume on whose client had gone "
        "by the answer. Cancelled: handlers the server cancelled because their client's "
        "connection ended, in the window (in service: holding a slot, the rest waiting for "
        "one; gunicorn cancels none), and those begun from the resume on. "
        "Accept queue, listen overflows and drops: %s." % result["note"],
        "",
    ]
    return "\n".join(lines)


def main(argv):
    if len(argv) == 4 and argv[1] == "sample":
        sample(argv[2], int(argv[3]))
    elif len(argv) == 7 and argv[1] == "summarise":
        summarise(argv[2], int(argv[3]), argv[4], argv[5], argv[6])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
