"""Tables of scripts/twin-check.sh's results, in Markdown on stdout.

    summarise.py --shapes OUT     each hidden shape of the project's server
                                  beside its twin: flags, error, T50s
    summarise.py --gunicorn OUT   gunicorn's twin, its predicted edges and
                                  the checks against gunicorn
"""

import csv
import json
import os
import sys


def critical(path):
    """case -> (t50, low, high, outside) from a sweep's critical.csv."""
    rows = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            rows[r["case"]] = (r["t50_s"], r["t50_ci_low_s"], r["t50_ci_high_s"], r["t50_outside"])
    return rows


def t50(row):
    if row is None:
        return "-"
    value, low, high, outside = row
    if not value:
        return "beyond the pauses tried (%s)" % (outside or "?")
    return "%s (%s to %s)" % (value, low or "?", high or "?")


def shapes(out):
    print("# Twins of the project's own server at hidden shapes\n")
    print("Made by `scripts/twin-check.sh --shapes %s`: the server started at each" % os.path.basename(out))
    print("shape's true flags, `storm calibrate` told only its URL; then the true")
    print("server swept in the twin's scenario. T50 in seconds, 20 runs a pause,")
    print("1,000 clients, 2 s timeout; its 95 % interval in brackets.\n")
    print("| hidden | true flags | twin flags | error | fixed T50: twin | true | 2014 client T50: twin | true |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for shape in ("exponential", "linear", "pool"):
        folder = os.path.join(out, shape)
        with open(os.path.join(folder, "calibration.json")) as f:
            cal = json.load(f)
        truth = open(os.path.join(out, shape + ".truth")).read().strip()
        best = cal["fits"]["shapes"][cal["fits"]["best"]]
        twin = critical(os.path.join(folder, "predict", "critical.csv"))
        true = critical(os.path.join(out, shape + ".true-sweep", "critical.csv"))
        print("| %s | `%s` | `%s` | %.3f | %s | %s | %s | %s |" % (
            shape, truth, cal["twin_flags"], best["score"]["error"],
            t50(twin.get("fixed")), t50(true.get("fixed")),
            t50(twin.get("exponential-2014")), t50(true.get("exponential-2014"))))
    print()
    for shape in ("exponential", "linear", "pool"):
        with open(os.path.join(out, shape, "calibration.json")) as f:
            cal = json.load(f)
        errors = ", ".join("%s %.3f" % (s["twin"]["shape"], s["score"]["error"]) for s in cal["fits"]["shapes"])
        gone = cal.get("gone") or {}
        print("- %s: every shape's error: %s; USL %.3f. Gone clients' work: %s. Probe: %d levels, %s." % (
            shape, errors, cal["fits"]["usl"]["score"]["error"], gone.get("verdict", "-"),
            len(cal["levels"]), cal["probe_end"]))


def gunicorn(out):
    folder = os.path.join(out, "gunicorn")
    with open(os.path.join(folder, "calibration.json")) as f:
        cal = json.load(f)
    best = cal["fits"]["shapes"][cal["fits"]["best"]]
    print("# A twin of gunicorn 27.0.1, predicted and checked\n")
    print("Made by `scripts/twin-check.sh --gunicorn %s` (its command: `%s`).\n" % (
        os.path.basename(out), cal["command"]))
    print("Twin: `%s` (error %.3f). Gone clients' work: %s.\n" % (
        cal["twin_flags"], best["score"]["error"], (cal.get("gone") or {}).get("verdict", "-")))
    print("| policy | predicted T50 s (95 %) | T90 | T10 |")
    print("| --- | --- | --- | --- |")
    for c in cal["predictions"]:
        print("| %s | %s | %s | %s |" % (
            c["case"], t50((str(c["t50_s"] or ""), str(c["t50_ci_low_s"] or ""),
                            str(c["t50_ci_high_s"] or ""), c["t50_outside"])),
            c["t90_s"], c["t10_s"]))
    print("\n`holds`: gunicorn's share lies within the twin's interval (the check's")
    print("rule in docs/twin.md, as in `verify.csv`); `overlap`: the two intervals")
    print("overlap, which is what 3 storms can say (3 of 3 never lies within an")
    print("interval whose top is below 1).\n")
    print("| policy | pause s | twin P(recover) (95 %) | gunicorn (95 %) | holds | overlap |")
    print("| --- | --- | --- | --- | --- | --- |")
    for c in cal["checks"]:
        # storm calibrate writes it since issue 61; older records are read
        # by the same rule.
        overlap = c.get("overlap", c["measured_low"] <= c["predicted_high"]
                        and c["predicted_low"] <= c["measured_high"])
        print("| %s | %g | %.2f, %d of %d (%.2f to %.2f) | %.2f, %d of %d (%.2f to %.2f) | %s | %s |" % (
            c["case"], c["pause_s"], c["predicted_p"], c["predicted_recovered"], c["predicted_runs"],
            c["predicted_low"], c["predicted_high"], c["measured_p"], c["measured_recovered"],
            c["measured_runs"], c["measured_low"], c["measured_high"], "yes" if c["holds"] else "no",
            "yes" if overlap else "no"))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("--shapes", "--gunicorn"):
        sys.exit(__doc__)
    (shapes if sys.argv[1] == "--shapes" else gunicorn)(sys.argv[2])
