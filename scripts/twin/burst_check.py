"""The burst probe checked against what each server is known to do, from
the folders `scripts/twin-atlas.sh OUT --burst-check` made.

  python3 scripts/twin/burst_check.py OUT SERVER...

Each SERVER's OUT/SERVER/burst/calibration.json: its queue must be the
listen backlog, which the kernel told as the server configures it, one
listening socket; and what the server took in itself beyond that queue
and its workers in service (`taken_in`, with `serving` the twin's
workers, which a probe of 1 to 8 clients does not know) must be what the
server does with connections its workers cannot take yet:

- gunicorn 27.0.1 (20 sync workers, --backlog 1000): each worker accepts
  one connection when free, so at most its 20 and a few more while the
  burst came;
- waitress 3.0.2 (20 threads, its backlog 1024): it accepts up to its
  connection limit, 100, and leaves the rest in the kernel's queue;
- aiohttp 3.14.5 (--backlog 1000): asyncio's loop accepts as many as its
  backlog at each wake, hundreds beyond the kernel's queue.

The backlogs are as each server asks listen(2) for them, at most
net.core.somaxconn, as the kernel caps them. Prints PASS or FAIL a line;
exits 1 on any FAIL.
"""

import json
import os
import sys

# server: (the listen backlog it is given, least and most taken in with
# the workers in service).
KNOWN = {
    "gunicorn": (1000, 0, 25),
    "waitress": (1024, 60, 105),
    "aiohttp-cpu": (1000, 500, None),
    "aiohttp-await": (1000, 500, None),
}


def somaxconn():
    """The kernel's cap on a listen backlog, if it says."""
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def check(out, server):
    """The PASS/FAIL lines of SERVER's burst."""
    backlog, least, most = KNOWN[server]
    cap = somaxconn()
    if cap is not None:
        backlog = min(backlog, cap)
    lines = []

    def verdict(ok, what):
        lines.append("%s: %s: %s" % ("PASS" if ok else "FAIL", server, what))

    path = os.path.join(out, server, "burst", "calibration.json")
    try:
        with open(path) as f:
            burst = json.load(f).get("queue") or {}
    except (OSError, ValueError) as e:
        verdict(False, "no calibration to read: %s" % e)
        return lines
    if burst.get("tally") is None:
        verdict(False, "no burst made: %s" % burst.get("reason", "no queue record"))
        return lines

    queue = burst.get("queue") or {}
    listen = burst.get("listen") or {}
    verdict(
        queue.get("kind") == "backlog" and queue.get("depth") == backlog,
        "the queue is the listen backlog, %d deep (found %s, tally %s)"
        % (backlog, queue, burst.get("tally")),
    )
    verdict(
        listen == {"listeners": 1, "backlog": backlog},
        "the kernel told one listener of backlog %d (told %s)" % (backlog, listen or "nothing"),
    )
    taken = burst.get("taken_in")
    held = None if taken is None else taken + burst.get("serving", 0)
    within = held is not None and held >= least and (most is None or held <= most)
    verdict(
        within,
        "taken in beyond the kernel's queue, with the %d in service: %s, expected %d to %s"
        % (burst.get("serving", 0), held, least, "any" if most is None else most),
    )
    return lines


def main(out, servers):
    failed = False
    for server in servers:
        for line in check(out, server):
            print(line)
            failed |= line.startswith("FAIL")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 3 or any(s not in KNOWN for s in sys.argv[2:]):
        print(__doc__.split("\n\n")[1] + "\n  SERVER: " + ", ".join(KNOWN), file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
