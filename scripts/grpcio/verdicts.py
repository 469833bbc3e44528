#!/usr/bin/env python3
"""The kinds of outage scripts/grpc-storm-check.sh stormed grpcio through,
side by side, and the checks of its --check.

  verdicts.py OUT [--command CMD] [--check]

Reads OUT/kinds.tsv (a row per kind, written by grpc-storm-check.sh, in
the columns of scripts/gunicorn/kinds.py's, plus state_after, grpcio's
process state after the storm, /proc's letter, and proxies_after, the
storm's fault proxies still running then) and each kind's summary.json,
and writes OUT/kinds.json and OUT/kinds.md (kinds.py's table: per kind
and case the verdicts, recovery, attempts a request and the proxy's
figures; CMD the command that made them). With --check, also prints a
PASS, FAIL or INFO line per check and exits 1 if one fails:

  KIND storm            the storm exited 0
  KIND left running     grpcio not left stopped, and answering its health
                        check within 60 s of the storm
  KIND proxy gone       a fault proxy's kind: none of the storm's proxies
                        left running
  KIND fault acted      a fault proxy's kind: kinds.py's check (stall and
                        blackhole held requests or queued connections in
                        the fixed case, status answered, delay held, reset
                        reset)
  KIND CASE run N       the verdict measured to be steady for that kind
                        and case (EXPECTED); INFO, reported only, where it
                        was not, and for a kind not measured here
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gunicorn"))
import kinds as gunicorn_kinds  # noqa: E402

# Per kind (exactly as --outage gives it: only the kinds measured; any
# other is reported) and case, whether it recovers from a 20 s outage of grpcio's 8 workers
# (True, False), or None: reported only, having been seen both ways or
# being near its edge.
#
# sigstop, found on 2026-11-29 at full time (fixed back 15.1 s after the
# resume) and with --quick (1.5 s): every case came back, fixed retries
# too, because grpcio skips a call whose client has cancelled it
# (RST_STREAM, sent at each attempt's timeout) before its turn in the
# pool, and one HTTP/2 connection loses no retry to a full listen backlog.
# Fixed retries' verdict is reported, not checked: in a clean clone's
# .ci/run on a loaded machine the same --quick storm did not come back
# (17.2 attempts a request), nor in any of the three --quick runs of
# 2026-11-29 below, so it sits near its edge and one run cannot decide it.
#
# The fault proxy's kinds, from three --quick runs of each on 2026-11-29
# on this project's loaded 2-core machine (load average 3), interleaved
# with sigstop (each round: sigstop stall blackhole delay=500ms
# status=unavailable reset, a fresh grpcio each): no-retry and grpc came
# back in every run of every kind but one (below). Not checked:
#  - stall, fixed: back in 2 of 3 (2.5 s and 2 s after the resume, at
#    8.80 and 6.24 attempts a request), not in the third (8.59);
#  - blackhole, fixed: back in 3 of 3, but 1 to 2 s into a 3 s window, as
#    the stall's that flipped;
#  - status, no-retry: back at once in every run, but in one OK/s then
#    fell under 90 % of the baseline for three half-second reports (334
#    to 358 of 398) 2.5 s after the resume, a relapse by the verdict's rule:
#    clients that never retry, answered at once during the outage, made
#    no storm; that dip is the load's noise at --quick.
# delay=500ms (2.5 times the clients' compressed timeout), status and
# reset: fixed retries back at once in 3 of 3 (2.42 to 2.63, 19.9 to
# 22.0 and 22.4 to 25.3 attempts a request).
EXPECTED = {
    "sigstop": {"no-retry": True, "fixed": None, "grpc": True},
    "stall": {"no-retry": True, "fixed": None, "grpc": True},
    "blackhole": {"no-retry": True, "fixed": None, "grpc": True},
    "delay=500ms": {"no-retry": True, "fixed": True, "grpc": True},
    "status=unavailable": {"no-retry": None, "fixed": True, "grpc": True},
    "reset": {"no-retry": True, "fixed": True, "grpc": True},
}

PROXY_KINDS = ("stall", "blackhole", "reset", "status", "delay")


def checks(kinds):
    """kinds.py's check lines (result, name, detail) for grpcio."""
    lines = []

    def add(ok, name, detail):
        word = "INFO" if ok is None else "PASS" if ok else "FAIL"
        lines.append({"result": word, "name": name, "detail": detail})

    for k in kinds:
        name, base = k["kind"], gunicorn_kinds.base(k["kind"])
        add(k["storm_status"] == 0, name + " storm", "exited %s" % k["storm_status"])
        stopped = k["state_after"] in ("T", "t")
        add(not stopped and k["answer_s"] is not None, name + " left running",
            "grpcio in state %s, %s" % (k["state_after"] or "gone",
                                       "not asked, being stopped" if stopped else
                                       "answered its health check %.1f s after the storm"
                                       % k["answer_s"] if k["answer_s"] is not None else
                                       "no answer to its health check within 60 s"))
        if base in PROXY_KINDS:
            add(k["proxies_after"] == "0", name + " proxy gone",
                "%s of the storm's proxies running after it" % k["proxies_after"])
            if k["runs"] is None:
                add(False, name + " fault acted", "no results (the storm exited %s)"
                    % k["storm_status"])
            else:
                passed, detail = gunicorn_kinds.fault_acted(k)
                add(passed, name + " fault acted", detail)
        if k["runs"] is None:
            continue
        expected = EXPECTED.get(name, {})
        for r in k["runs"]:
            want = expected.get(r["case"])
            said = "recovered in %s s" % r["recovery_s"] if r["recovered"] else "did not recover"
            add(None if want is None else r["recovered"] == want,
                "%s %s run %d" % (name, r["case"], r["run"]),
                "%s (expected: %s; attempts a request %s, baseline OK/s %s)" % (
                    said, {True: "recovered", False: "not", None: "either, reported only"}[want],
                    r["attempts_per_request"], r["baseline_ok_per_s"]))
        for case in sorted(set(expected) - {r["case"] for r in k["runs"]}):
            add(False, "%s %s" % (name, case), "no run")
    return lines


def main(argv):
    args = argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    command = None
    if len(args) == 3 and args[1] == "--command":
        command = args[2]
        args = args[:1]
    if len(args) != 1:
        sys.stderr.write(__doc__)
        return 2
    out = args[0]
    rows = gunicorn_kinds.read_rows(out)
    kinds = [gunicorn_kinds.kind_figures(out, row, "grpcio") for row in rows]
    result = {"server": "grpcio 1.85.3 (8 worker threads)", "command": command,
              "kinds": kinds, "checks": checks(kinds)}
    with open(os.path.join(out, "kinds.json"), "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "kinds.md"), "w") as f:
        f.write(gunicorn_kinds.markdown(result))
    if check:
        for line in result["checks"]:
            print("%s grpc-storm %s: %s" % (line["result"], line["name"], line["detail"]))
        if any(line["result"] == "FAIL" for line in result["checks"]):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
