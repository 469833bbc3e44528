#!/usr/bin/env python3
"""The kinds of outage scripts/gunicorn-check.sh stormed a server through,
side by side, and the checks of its --check.

  kinds.py OUT [--server 'NAME VERSION'] [--command CMD] [--check]
      Reads OUT/kinds.tsv (a row per kind, written by gunicorn-check.sh)
      and each kind's summary.json and NAME.json in OUT/FOLDER (NAME
      gunicorn, the default, or aiohttp), and writes OUT/kinds.json and
      OUT/kinds.md, which names the server and the command that made them
      (CMD). With --check, also prints a PASS, FAIL or SKIP line per check
      and exits 1 if one fails.

kinds.tsv's columns, tab-separated, a header first: kind (as the script's
--outage names it), folder (the kind's results, under OUT; empty if it
was skipped), outage (what the storm's --outage was given: sigstop=PID,
exec, freeze=CGROUP_DIR or the fault), storm_status and summary_status
(exit statuses; summary_status empty without a summary.json),
answer_s (seconds the server took to answer a GET after the storm; empty
if it did not within 60 s), stopped_after (its processes in state T
then), frozen_after (1 if its cgroup was frozen then, 0 if not, empty
without one), skipped (why the kind did not run; empty if it did).

Per kind and case: the verdicts run by run, the recovery run by run, and
the median over the runs of the baseline OK/s, the attempts a request
(the storm's amplification), the application's share of the requests
served from the resume on whose client had gone and the handlers it
cancelled from the resume on (NAME.json), and, through a fault proxy,
each of its figures (summary.json's runs[].proxy).

The checks, each a PASS or FAIL line (SKIP for a kind that did not run):
  KIND storm            the storm exited 0
  KIND left running     after the storm the server answered a GET, none
                        of its processes was stopped, its cgroup not
                        frozen
  KIND fault acted      a fault proxy's kind, in every run: status=CODE
                        injected answers, and none of CODE's class counted
                        as the server's when CODE is a 4xx or 5xx (the
                        application answers 200 only: such an answer
                        would be an injected one counted twice); reset:
                        resets; stall and blackhole: connections queued
                        or requests held, in the runs of the case named
                        fixed (every run if there is none); delay:
                        requests held
  KIND cancelled        a server that cancels (aiohttp), for sigstop,
                        exec and freeze: it cancelled handlers of gone
                        clients in every run (the resume hands it their
                        requests with their FIN); without it, a witness
                        of the stall against sigstop would set two
                        servers that finish dead work side by side
  KIND verdicts as sigstop
                        stall, exec and freeze: every run's verdict that
                        of the same case and run through sigstop (the
                        claim that each looks to clients as the stopped
                        process does); SKIP without a sigstop kind
Only data files are read.
"""

import csv
import json
import os
import statistics
import sys

PROXY_KEYS = [
    "peak_connections", "peak_queued", "peak_in_flight", "peak_held", "requests",
    "answers_2xx", "answers_4xx", "answers_5xx", "answers_other", "injected", "resets",
    "upstream_errors", "gone", "warmup_p50_ms", "peak_p99_ms",
]

# Kinds whose verdicts must be those of sigstop.
AS_SIGSTOP = ["stall", "exec", "freeze"]

# Servers that cancel a handler whose client has gone, and the kinds that
# stop them, whose resume must show it.
CANCELLING = ["aiohttp"]
STOPPING = ["sigstop", "exec", "freeze"]


def number(text, cast=int):
    return None if text in ("", None) else cast(text)


def read_rows(out):
    with open(os.path.join(out, "kinds.tsv"), newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    for row in rows:
        row["storm_status"] = number(row["storm_status"])
        row["summary_status"] = number(row["summary_status"])
        row["answer_s"] = number(row["answer_s"], float)
        row["stopped_after"] = number(row["stopped_after"])
        row["frozen_after"] = number(row["frozen_after"])
        row["skipped"] = row["skipped"] or None
        row["folder"] = row["folder"] or None
        row["outage"] = row["outage"] or None
    return rows


def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def kind_figures(out, row, server):
    """The kind's row with its runs and cases, from its data files."""
    kind = dict(row)
    kind["runs"] = None
    kind["cases"] = None
    kind["target"] = None
    if row["folder"] is None:
        return kind
    folder = os.path.join(out, row["folder"])
    summary = load(os.path.join(folder, "summary.json"))
    if summary is None:
        return kind
    app = {(r["case"], r["run"]): r["app"] for r in
           (load(os.path.join(folder, server + ".json")) or {}).get("runs", [])}
    order = [c["name"] for c in summary["cases"]]
    runs = sorted(summary["runs"], key=lambda r: (order.index(r["case"]), r["run"]))
    kind["target"] = summary.get("target")
    kind["runs"] = [{
        "case": r["case"],
        "run": r["run"],
        "recovered": r["recovered"],
        "recovery_s": r["recovery_s"],
        "baseline_ok_per_s": r["baseline_ok_per_s"],
        "attempts_per_request": r["amplification"],
        "gone_fraction_after_resume":
            app.get((r["case"], r["run"]), {}).get("gone_fraction_after_resume"),
        "cancelled": app.get((r["case"], r["run"]), {}).get("cancelled"),
        "cancelled_after_resume":
            app.get((r["case"], r["run"]), {}).get("cancelled_after_resume"),
        "proxy": r.get("proxy"),
    } for r in runs]
    cases = []
    for name in order:
        mine = [r for r in kind["runs"] if r["case"] == name]
        proxies = [r["proxy"] for r in mine if r["proxy"] is not None]
        cases.append({
            "name": name,
            "runs": len(mine),
            "verdicts": [r["recovered"] for r in mine],
            "recovered_runs": sum(1 for r in mine if r["recovered"]),
            "recovery_s": [r["recovery_s"] for r in mine],
            "baseline_ok_per_s_median": median(r["baseline_ok_per_s"] for r in mine),
            "attempts_per_request_median": median(r["attempts_per_request"] for r in mine),
            "gone_fraction_after_resume_median":
                median(r["gone_fraction_after_resume"] for r in mine),
            "cancelled_after_resume_median": median(r["cancelled_after_resume"] for r in mine),
            "proxy_median": {k: median(p.get(k) for p in proxies) for k in PROXY_KEYS}
            if proxies else None,
        })
    kind["cases"] = cases
    return kind


def base(kind):
    """A kind's name without its values: status=503,fraction=0.5 is status."""
    return kind.split(",")[0].split("=")[0]


def fault_acted(kind):
    """Whether the fault proxy's fault acted, in words: (passed, detail)."""
    runs = kind["runs"]
    missing = [r for r in runs if r["proxy"] is None]
    if missing:
        return False, "no proxy figures in %s" % ", ".join(
            "%s run %d" % (r["case"], r["run"]) for r in missing)
    what = base(kind["kind"])

    def each(rs, test, show):
        shown = "; ".join("%s run %d: %s" % (r["case"], r["run"], show(r["proxy"])) for r in rs)
        return all(test(r["proxy"]) for r in rs), shown

    if what == "status":
        # An HTTP status, or a gRPC status by name (answered Trailers-Only,
        # HTTP 200, to gRPC requests): no class of answers to rule out.
        code = kind["kind"].split(",")[0].split("=")[1]
        key = {4: "answers_4xx", 5: "answers_5xx"}.get(int(code) // 100) if code.isdigit() else None
        if key is None:
            return each(runs, lambda p: p["injected"] > 0,
                        lambda p: "%d injected" % p["injected"])
        return each(runs, lambda p: p["injected"] > 0 and p[key] == 0,
                    lambda p: "%d injected, %d %s counted as the server's" % (
                        p["injected"], p[key], key[-3:]))
    if what == "reset":
        return each(runs, lambda p: p["resets"] > 0, lambda p: "%d resets" % p["resets"])
    if what in ("stall", "blackhole"):
        fixed = [r for r in runs if r["case"] == "fixed"] or runs
        return each(fixed, lambda p: p["peak_queued"] > 0 or p["peak_held"] > 0,
                    lambda p: "peak queued %d, peak held %d" % (p["peak_queued"], p["peak_held"]))
    if what == "delay":
        return each(runs, lambda p: p["peak_held"] > 0,
                    lambda p: "peak held %d" % p["peak_held"])
    return False, "not a fault proxy's kind"


def yes(v):
    return "yes" if v else "no"


def checks(kinds, server):
    lines = []

    def add(word, name, detail):
        lines.append({"result": word, "name": name, "detail": detail})

    by_kind = {k["kind"]: k for k in kinds}
    for k in kinds:
        name = k["kind"]
        if k["skipped"]:
            add("SKIP", name, k["skipped"])
            continue
        status = k["storm_status"]
        add("PASS" if status == 0 else "FAIL", name + " storm", "exited %s" % status)
        running = (k["answer_s"] is not None and k["stopped_after"] == 0
                   and k["frozen_after"] != 1)
        down = k["stopped_after"] != 0 or k["frozen_after"] == 1
        add("PASS" if running else "FAIL", name + " left running",
            "%s %s; %s of its processes stopped%s" % (server,
                "answered a GET %.1f s after the storm" % k["answer_s"]
                if k["answer_s"] is not None else "not asked, being down" if down
                else "answered no GET within 60 s of the storm",
                k["stopped_after"], "" if k["frozen_after"] is None
                else "; its cgroup %s" % ("frozen" if k["frozen_after"] else "not frozen")))
        if base(name) in ("stall", "blackhole", "reset", "status", "delay"):
            if k["runs"] is None:
                add("FAIL", name + " fault acted", "no results (the storm exited %s)" % status)
            else:
                passed, detail = fault_acted(k)
                add("PASS" if passed else "FAIL", name + " fault acted", detail)
        if server in CANCELLING and name in STOPPING:
            if k["runs"] is None:
                add("FAIL", name + " cancelled", "no results (the storm exited %s)" % status)
            else:
                add("PASS" if all(r["cancelled"] for r in k["runs"]) else "FAIL",
                    name + " cancelled", "; ".join(
                        "%s run %d: %s handlers cancelled" % (r["case"], r["run"], r["cancelled"])
                        for r in k["runs"]))
    sigstop = by_kind.get("sigstop")
    for name in AS_SIGSTOP:
        k = by_kind.get(name)
        if k is None or k["skipped"]:
            continue
        label = name + " verdicts as sigstop"
        if sigstop is None or sigstop["skipped"]:
            add("SKIP", label, "sigstop did not run")
            continue
        if sigstop["runs"] is None:
            add("FAIL", label, "sigstop has no results (its storm exited %s)"
                % sigstop["storm_status"])
            continue
        if k["runs"] is None:
            add("FAIL", label, "no results (the storm exited %s)" % k["storm_status"])
            continue
        theirs = {(r["case"], r["run"]): r["recovered"] for r in sigstop["runs"]}
        mine = {(r["case"], r["run"]): r["recovered"] for r in k["runs"]}
        differ = []
        for key in list(theirs) + [key for key in mine if key not in theirs]:
            if mine.get(key) != theirs.get(key):
                differ.append("%s run %d: %s through %s, %s through sigstop" % (
                    key[0], key[1], verdict_word(mine.get(key)), name,
                    verdict_word(theirs.get(key))))
        if differ:
            add("FAIL", label, "; ".join(differ))
        else:
            add("PASS", label, "; ".join(
                "%s run %d: %s" % (key[0], key[1], verdict_word(v)) for key, v in theirs.items()))
    return lines


def verdict_word(v):
    return "no run" if v is None else ("recovered" if v else "not recovered")


def cell(v, digits=2):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%.*f" % (digits, v)
    return str(v)


def markdown(result):
    server = result["server"]
    lines = [
        "# %s through each kind of outage" % server,
        "",
    ] + (["Made by `%s`." % result["command"], ""] if result["command"] else []) + [
        "One row per kind and case, the kinds in the order run, each against a fresh %s. "
        "Recovered and recovery: run by run; the other figures: the median "
        "over the runs." % server.split()[0],
        "",
        "| kind | case | recovered | recovery (s) | baseline OK/s | attempts/request "
        "| gone after resume | cancelled after resume "
        "| proxy 2xx / 4xx / 5xx / other | gone at the proxy | injected | resets "
        "| peak held / queued / in flight | p50 before, via proxy (ms) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for k in result["kinds"]:
        if k["cases"] is None:
            why = ("skipped: " + k["skipped"]) if k["skipped"] else (
                "no results: the storm exited %s" % k["storm_status"])
            lines.append("| %s | - | %s |%s" % (k["kind"], why, " - |" * 11))
            continue
        for c in k["cases"]:
            p = c["proxy_median"]
            if p is None:
                proxy = ["-"] * 6
            else:
                proxy = [
                    " / ".join(cell(p[key], 0) for key in
                               ("answers_2xx", "answers_4xx", "answers_5xx", "answers_other")),
                    cell(p["gone"], 0), cell(p["injected"], 0), cell(p["resets"], 0),
                    " / ".join(cell(p[key], 0) for key in
                               ("peak_held", "peak_queued", "peak_in_flight")),
                    cell(p["warmup_p50_ms"], 1),
                ]
            gone = c["gone_fraction_after_resume_median"]
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                k["kind"], c["name"], ", ".join(yes(v) for v in c["verdicts"]),
                ", ".join(cell(v, 0) for v in c["recovery_s"]),
                cell(c["baseline_ok_per_s_median"], 1), cell(c["attempts_per_request_median"]),
                "-" if gone is None else "%.1f %%" % (100 * gone),
                cell(c["cancelled_after_resume_median"], 0), " | ".join(proxy)))
    lines += [
        "",
        "Attempts/request: attempts sent per request started, from the stop on. Gone after "
        "resume: the share of the requests the application served from the resume on "
        "whose client had closed its connection by the answer (through a fault proxy, the "
        "proxy's connection to the server). Cancelled after resume: handlers begun from the "
        "resume on that the server cancelled because their connection ended (gunicorn "
        "cancels none). Proxy columns, for a fault proxy's kinds: the server's "
        "answers passed back by status class, requests whose client had gone before their "
        "answer (answered by the server for no one, or cut short), requests the proxy "
        "answered itself and connections it reset by the fault, the most requests it held "
        "for the fault, connections in its listen queue and requests in flight to the "
        "server at a report, and the median latency through it in the warm-up.",
        "",
        "## Checks",
        "",
    ]
    for line in result["checks"]:
        lines.append("- %s %s: %s" % (line["result"], line["name"], line["detail"]))
    lines.append("")
    return "\n".join(lines)


def main(argv):
    args = argv[1:]
    options = {"--server": "gunicorn", "--command": ""}
    check = False
    rest = []
    while args:
        if args[0] == "--check":
            check = True
            args = args[1:]
        elif args[0] in options and len(args) > 1:
            options[args[0]] = args[1]
            args = args[2:]
        else:
            rest.append(args.pop(0))
    if len(rest) != 1:
        sys.stderr.write(__doc__)
        return 2
    out = rest[0]
    server = options["--server"]
    name = server.split()[0]
    kinds = [kind_figures(out, row, name) for row in read_rows(out)]
    result = {"server": server, "command": options["--command"] or None,
              "kinds": kinds, "checks": checks(kinds, name)}
    with open(os.path.join(out, "kinds.json"), "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "kinds.md"), "w") as f:
        f.write(markdown(result))
    if check:
        for line in result["checks"]:
            print("%s %s: %s" % (line["result"], line["name"], line["detail"]))
        if any(line["result"] == "FAIL" for line in result["checks"]):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
