#!/usr/bin/env python3
"""The PASS/FAIL lines of scripts/grpc-storm-check.sh --check.

  verdicts.py OUT STORM_STATUS SERVER_STATE ANSWER_S

OUT holds the storm's summary.json; STORM_STATUS is its exit status,
SERVER_STATE the server's process state after it (/proc's letter, empty if
gone), ANSWER_S the seconds its health check took to answer after the
storm (empty: never). Checks: the storm exited 0; the server was left
running and answering; each case's verdict, run by run, is EXPECTED's,
the verdicts found when the check was written (docs/protocols.md, "Real
programs", says why each case does what it does). Exits 1 if a check
fails.
"""

import json
import os
import sys

# Recovered after a 20 s SIGSTOP of grpcio's 8 workers, per case, as found
# on 2026-11-29 at full time (fixed back 15.1 s after the resume) and with
# --quick (1.5 s): every case came back, fixed retries too, because grpcio
# skips a call whose client has cancelled it (RST_STREAM, sent at each
# attempt's timeout) before its turn in the pool, and one HTTP/2
# connection loses no retry to a full listen backlog. Fixed retries' verdict
# is reported, not checked (None): in a clean clone's .ci/run on a loaded
# machine the same --quick storm did not come back (17.2 attempts a request),
# so it sits near its edge here and one run cannot decide it.
EXPECTED = {"no-retry": True, "fixed": None, "grpc": True}


def lines(out, storm_status, state, answer_s):
    yield storm_status == "0", f"the storm exited {storm_status}"
    yield state not in ("T", "t") and answer_s != "", \
        f"the server left running (state {state or 'gone'}) and answering " \
        f"({answer_s or 'never'} s after the storm)"
    try:
        with open(os.path.join(out, "summary.json")) as f:
            runs = json.load(f)["runs"]
    except (OSError, ValueError, KeyError) as e:
        yield False, f"no summary of the storm: {e}"
        return
    seen = set()
    for r in runs:
        case = r["case"]
        if case not in EXPECTED:
            yield False, f"{case}: not a case of the witness"
            continue
        want = EXPECTED[case]
        seen.add(case)
        got = r["recovered"]
        said = f"recovered in {r['recovery_s']} s" if got else "did not recover"
        expected = {True: "recovered", False: "not", None: "either, reported only"}[want]
        yield None if want is None else got == want, \
            f"{case} run {r['run']}: {said} (expected: {expected}; " \
            f"amplification {r['amplification']}, best OK/s after {r['best_ok_per_s']} " \
            f"of a baseline of {r['baseline_ok_per_s']})"
    for case in sorted(set(EXPECTED) - seen):
        yield False, f"{case}: no run"


def main(argv):
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    failed = 0
    for ok, what in lines(*argv[1:]):
        failed += ok is False
        word = "INFO" if ok is None else "PASS" if ok else "FAIL"
        print(f"{word} grpc-storm {what}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
