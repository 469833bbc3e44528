#!/usr/bin/env python3
"""Sets a real gunicorn beside the project's pool with each kind of queue,
case by case, from the folders the storm and scripts/gunicorn-check.sh
wrote: attempts per request, the error mix, wasted work and the share of
requests served for clients that had gone. Reads data files only (each
folder's summary.json, its per-run CSVs, gunicorn.json); writes a
Markdown table and the same figures as JSON.

usage: backlog-compare.py --source LABEL=DIR[:PREFIX] ... --out FILE.md

A source is a storm results folder; PREFIX keeps only its cases named
PREFIX.POLICY and calls them POLICY (application.fixed -> fixed). A
folder with gunicorn.json beside its summary.json is a gunicorn run: its
wasted work and served-for-gone share come from the application's own
record of each request, the server figures of the storm being not
measured there. A virtual folder's per-run CSVs must be present (its
command makes them again)."""

import argparse
import csv
import json
import os
import shlex
import statistics
import sys


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def intervals(path):
    """Each client interval as (start_ms, end_ms, row)."""
    out, previous = [], None
    for r in rows(path):
        end = int(r["unix_ms"])
        elapsed = float(r["elapsed_s"])
        start = end - round((elapsed - (previous or 0.0)) * 1000)
        previous = elapsed
        out.append((start, end, r))
    return out


def error_mix(client_csv, timeline):
    """Shares of ok, errors and timeouts among the attempts that ended from
    the stop to the end of the observation window, as the storm's
    amplification counts them."""
    totals = {"ok": 0.0, "errors": 0.0, "timeouts": 0.0}
    for start, end, r in intervals(client_csv):
        mid = (start + end) / 2
        if not timeline["stop_ms"] < mid <= timeline["end_ms"]:
            continue
        secs = (end - start) / 1000
        totals["ok"] += float(r["ok_per_s"]) * secs
        totals["errors"] += float(r["errors_per_s"]) * secs
        totals["timeouts"] += float(r["timeouts_per_s"]) * secs
    ended = sum(totals.values())
    return {k: (v / ended if ended else None) for k, v in totals.items()}


def served_for_gone_model(server_csv, timeline, run_end_ms):
    """The share of the work the server finished from the resume to the
    end of the run whose client had gone (abandoned / all departures)."""
    done = gone = 0.0
    previous = None
    for r in rows(server_csv):
        at = int(r["unix_ms"])
        elapsed = float(r["elapsed_s"])
        secs = elapsed - (previous if previous is not None else 0.0)
        previous = elapsed
        if not timeline["resume_ms"] < at <= run_end_ms:
            continue
        done += float(r["completed_per_s"]) * secs
        gone += float(r["abandoned_per_s"]) * secs
    return gone / (done + gone) if done + gone else None


def wasted_model(server_csv, run_end_ms):
    """The work the server finished for gone clients from the start to the
    end of the run's client (the storm's own figure stops earlier, at the
    end of the observation window and its confirmation)."""
    gone, previous = 0.0, None
    for r in rows(server_csv):
        elapsed = float(r["elapsed_s"])
        secs = elapsed - (previous if previous is not None else 0.0)
        previous = elapsed
        if int(r["unix_ms"]) <= run_end_ms:
            gone += float(r["abandoned_per_s"]) * secs
    return gone


def run_end(client_csv):
    return int(rows(client_csv)[-1]["unix_ms"])


def load(label, folder, prefix):
    summary = json.load(open(os.path.join(folder, "summary.json")))
    gunicorn_path = os.path.join(folder, "gunicorn.json")
    gunicorn = json.load(open(gunicorn_path)) if os.path.exists(gunicorn_path) else None
    cases = {}
    for run in summary["runs"]:
        name = run["case"]
        if prefix:
            if not name.startswith(prefix + "."):
                continue
            name = name[len(prefix) + 1 :]
        client_csv = os.path.join(folder, run["client_csv"])
        timeline = run["timeline"]
        figures = {
            "recovered": run["recovered"],
            "attempts_per_request": run["amplification"],
            "mix": error_mix(client_csv, timeline),
        }
        if gunicorn is not None:
            app = gunicorn_run(gunicorn, run["case"], run["run"])
            # The application's own record: requests it served whose
            # client had closed its connection by the time the answer
            # went out; those begun after the client ended (the queue it
            # left) are the run's too but after its end, as the model's
            # rows stop there.
            figures["wasted"] = app["app"]["gone_at_end"] - app["app"]["served_after_client_ended"]
            figures["served_for_gone_after_resume"] = app["app"]["gone_fraction_after_resume"]
        else:
            figures["wasted"] = wasted_model(
                os.path.join(folder, run["server_csv"]), run_end(client_csv)
            )
            figures["served_for_gone_after_resume"] = served_for_gone_model(
                os.path.join(folder, run["server_csv"]), timeline, run_end(client_csv)
            )
        cases.setdefault(name, []).append(figures)
    return {"label": label, "folder": folder, "cases": cases}


def gunicorn_run(gunicorn, case, run):
    for r in gunicorn["runs"]:
        if r["case"] == case and r["run"] == run:
            return r
    sys.exit(f"gunicorn.json has no run {run} of {case}")


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarise(source):
    out = {}
    for name, runs in source["cases"].items():
        out[name] = {
            "runs": len(runs),
            "recovered": sum(1 for r in runs if r["recovered"]),
            "attempts_per_request": spread([r["attempts_per_request"] for r in runs]),
            "ok": spread([r["mix"]["ok"] for r in runs]),
            "errors": spread([r["mix"]["errors"] for r in runs]),
            "timeouts": spread([r["mix"]["timeouts"] for r in runs]),
            "wasted": spread([r["wasted"] for r in runs]),
            "served_for_gone_after_resume": spread(
                [r["served_for_gone_after_resume"] for r in runs]
            ),
        }
    return out


def cell(s, fmt):
    if s is None:
        return "-"
    low, high = fmt.format(s["min"]), fmt.format(s["max"])
    if low == high:
        return fmt.format(s["median"])
    return (fmt + " ({}-{})").format(s["median"], low, high)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", action="append", required=True, metavar="LABEL=DIR[:PREFIX]")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    sources = []
    for s in args.source:
        label, _, rest = s.partition("=")
        folder, _, prefix = rest.partition(":")
        if not label or not folder:
            sys.exit(f"--source {s}: expected LABEL=DIR[:PREFIX]")
        sources.append(load(label, folder, prefix))
    figures = {s["label"]: summarise(s) for s in sources}
    policies = []
    for s in sources:
        for name in s["cases"]:
            if name not in policies:
                policies.append(name)
    pct = "{:.0%}"
    lines = [
        "| policy | server | runs | recovered | attempts per request | OK | errors | timeouts | wasted work (to the client's end) | served for gone clients after the resume |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for policy in policies:
        for s in sources:
            f = figures[s["label"]].get(policy)
            if f is None:
                continue
            lines.append(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                    policy,
                    s["label"],
                    f["runs"],
                    f["recovered"],
                    cell(f["attempts_per_request"], "{:.1f}"),
                    cell(f["ok"], pct),
                    cell(f["errors"], pct),
                    cell(f["timeouts"], pct),
                    cell(f["wasted"], "{:.0f}"),
                    cell(f["served_for_gone_after_resume"], pct),
                )
            )
    made_by = " ".join(shlex.quote(a) for a in ["scripts/backlog-compare.py", *sys.argv[1:]])
    with open(args.out, "w") as f:
        f.write(f"Made by `{made_by}`.\n\n")
        f.write("\n".join(lines) + "\n")
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(
            {"sources": [{"label": s["label"], "folder": s["folder"]} for s in sources], "cases": figures},
            f,
            indent=2,
        )
        f.write("\n")


if __name__ == "__main__":
    main()
