#!/usr/bin/env python3
"""The project's `client --strategy grpc` on the wire beside C-core's
(grpcio) retries, against one scripted grpcio server, for
scripts/grpc-wire-check.sh.

  grpc-wire-check.py run CLIENT OUT       run every sequence twice, through
                                          grpcio (on PYTHONPATH) and through
                                          the client binary CLIENT; the
                                          server's log and both sides'
                                          outcomes written to OUT (JSON)
  grpc-wire-check.py compare RESULTS      one PASS/FAIL line per sequence
  grpc-wire-check.py selftest RESULTS     the comparison against RESULTS and
                                          copies altered by hand (it must
                                          pass the first and fail these)

One grpcio server on 127.0.0.1 (a port the system picks, in a process of
its own so that taking an attempt in never waits on the caller's Python
work) serves one generic unary method, /retry.Witness/Call, with raw bytes
in and out. Every attempt says, in its metadata, the sequence it belongs to
(x-sequence) and whose it is (x-run); the server answers the n-th attempt
of that pair as the sequence scripts its n-th answer (OK, or an abort with
the status, the trailer grpc-retry-pushback-ms when it gives a pushback),
and logs when the attempt arrived and the deadline it carried (grpcio reads
grpc-timeout into time_remaining(); C-core does not show it as metadata).

Per sequence, first a grpcio call on a fresh channel (its own retry
throttle) whose service config has the sequence's retryPolicy (maxAttempts,
initialBackoff, maxBackoff, backoffMultiplier, retryableStatusCodes
[UNAVAILABLE]) and the token bucket the client defaults to (10, 0.1); then
one run of CLIENT, one user, `--strategy grpc` with the same parameters
(--min-delay, --max-delay, --factor, --max-attempts, --implementation
grpc-core; its token bucket by default). The client's user thinks before
its first request (exponential, mean --lambda), and makes another request
once one ends: a very long --lambda (1000 s) with a seed whose first think
is short (SEED, below) gives one logical request early in a short run. The
client also sends one call before any load (its preflight, which refuses a
method answered UNIMPLEMENTED): the server answers a client run's first
call OK and keeps it apart from the sequence's attempts. The client's own
count of requests and attempts comes from its CSV rows (summed), never
from its display.

The comparison, per sequence: the attempts the server saw, the same from
both and as the script makes them (the first answer that is OK, not
retryable, a negative pushback, or the last of maxAttempts, ends the
call); the end, OK or not, the same from both (grpcio's status code; the
client's CSV: a request ok or failed); and each retry's gap after the
attempt before it, for each side on its own: within [0.8, 1.2] of the
backoff there (C-core's jitter; the backoff starts at initialBackoff, is
multiplied after each retry, capped at maxBackoff, and starts again after
a pushback) with NOISE either side, or, after a pushback, the pushback
itself, NOISE and PUSHBACK_SLACK of it late at most (the tolerances of
scripts/grpc-core-check.py). The client draws its jitter from its seed,
grpcio from nothing a test can pin: gaps are checked against the bounds,
never against each other. The first attempt's time is not compared (the
client's think time decides it). The deadline each attempt carried is
shown, not checked. The client runs with --deadline as long as its
--timeout, so that, as C-core does, it sends what is left of the call's
deadline in grpc-timeout (with --timeout alone it sends the attempt's own
5 s every time). C-core's first retry carries the first attempt's
deadline again (5.00 s left after 100 ms, where the client says 4.90):
its HPACK encoder sends a grpc-timeout it sent before, from the dynamic
table, when the new one is shorter by less than 3 %
(TimeoutCompressorImpl::EncodeWith, hpack_encoder.cc), so a deadline on
the wire may be up to 3 % long.
"""

import json
import os
import subprocess
import sys
import threading
import time

SERVICE = "retry.Witness"
METHOD = f"/{SERVICE}/Call"
GRPCIO_VERSION = "1.85.3"

# The comparison's tolerances, as scripts/grpc-core-check.py's: seconds of
# noise either side, C-core's jitter, and a pushback timer's lateness.
NOISE = 0.015
JITTER = 0.2
PUSHBACK_SLACK = 0.02

# The client's user: a think time of mean LAMBDA before each request; with
# SEED the first is 38 ms (Exp1's first draw from user_rng(SEED, 0) is
# 3.8e-5) and none of the next sixteen draws is below 0.01 (10 s), so one
# logical request goes in a run of RUN_LENGTH. Found by drawing as
# src/model/arrivals.rs does (rand 0.10.3, rand_distr 0.6.0).
LAMBDA = "1000s"
SEED = 6341
RUN_LENGTH = "2500ms"
# Each call's deadline: grpcio's timeout, the client's --deadline (and its
# --timeout, per attempt), longer than any sequence's call.
DEADLINE = 5.0

# The retry policy and throttle every sequence uses (the client's defaults
# for the throttle: token-bucket 10, 0.1).
POLICY = {"max_attempts": 4, "initial_backoff": 0.1, "max_backoff": 1.0, "multiplier": 2.0}
THROTTLE = {"max_tokens": 10, "token_ratio": 0.1}


def A(status, pushback_ms=None):
    return {"status": status, "pushback_ms": pushback_ms}


U = "UNAVAILABLE"

# Each sequence: its answers in order (enough for maxAttempts).
SEQUENCES = [
    ("unavailable-twice-then-ok", [A(U), A(U), A("OK"), A("OK")]),
    ("resource-exhausted", [A("RESOURCE_EXHAUSTED"), A("OK"), A("OK"), A("OK")]),
    ("pushback-200ms", [A(U, 200), A("OK"), A("OK"), A("OK")]),
    ("pushback-resets-backoff", [A(U), A(U, 300), A(U), A("OK")]),
    ("pushback-negative", [A(U, -1), A("OK"), A("OK"), A("OK")]),
    ("out-of-attempts", [A(U), A(U), A(U), A(U)]),
]


class HarnessError(Exception):
    pass


def expected(answers, policy=POLICY):
    """What the script makes of a call: the number of attempts, whether it
    ends OK, and each retry's allowed gap (low, high) in seconds."""
    backoff = policy["initial_backoff"]
    gaps = []
    for n, a in enumerate(answers[: policy["max_attempts"]], start=1):
        if a["status"] == "OK":
            return n, True, gaps
        pb = a["pushback_ms"]
        if a["status"] != U or (pb is not None and pb < 0) or n == policy["max_attempts"]:
            return n, False, gaps
        if pb is not None:
            p = pb / 1000.0
            gaps.append((p - NOISE, p + NOISE + PUSHBACK_SLACK * p))
            backoff = policy["initial_backoff"]
        else:
            gaps.append(((1 - JITTER) * backoff - NOISE, (1 + JITTER) * backoff + NOISE))
            backoff = min(backoff * policy["multiplier"], policy["max_backoff"])
    raise HarnessError("a script with fewer answers than maxAttempts")


# --- the scripted server -------------------------------------------------------


def load_grpc():
    try:
        import grpc
    except ImportError as e:
        raise HarnessError(f"grpcio not found (PYTHONPATH): {e}")
    if grpc.__version__ != GRPCIO_VERSION:
        raise HarnessError(f"grpcio {grpc.__version__} found, {GRPCIO_VERSION} wanted")
    return grpc


def serve(conn):
    """The server's process: serves until told to quit, answering the log
    (per 'run/sequence': arrival time, deadline left, answer) on request."""
    from concurrent import futures

    try:
        grpc = load_grpc()
    except HarnessError as e:
        conn.send(("error", str(e)))
        return
    scripts = dict(SEQUENCES)
    lock = threading.Lock()
    log = {}

    def handler(request, context):
        t = time.monotonic()
        left = context.time_remaining()
        md = dict(context.invocation_metadata())
        seq, run = md.get("x-sequence", ""), md.get("x-run", "")
        key = f"{run}/{seq}"
        with lock:
            attempts = log.setdefault(key, [])
            n = len(attempts)
            # A client run's first call is its preflight: answered OK, kept
            # apart (index -1).
            preflight = run.startswith("client") and n == 0
            index = -1 if preflight else n - (1 if run.startswith("client") else 0)
            script = scripts.get(seq)
            answer = None
            if preflight:
                answer = A("OK")
            elif script is not None and index < len(script):
                answer = script[index]
            attempts.append({"t": t, "left": left, "index": index,
                             "answer": answer["status"] if answer else "UNSCRIPTED"})
        if answer is None:
            context.abort(grpc.StatusCode.INTERNAL, "unscripted attempt")
        if answer["status"] == "OK":
            return b""
        if answer["pushback_ms"] is not None:
            context.set_trailing_metadata(
                (("grpc-retry-pushback-ms", str(answer["pushback_ms"])),))
        context.abort(getattr(grpc.StatusCode, answer["status"]), answer["status"])

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    identity = grpc.unary_unary_rpc_method_handler(handler)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"Call": identity}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    conn.send(("port", port))
    while True:
        msg = conn.recv()
        if msg == "log":
            with lock:
                conn.send(("log", json.loads(json.dumps(log))))
        else:
            server.stop(grace=None).wait()
            return


class ServerProcess:
    def __init__(self):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child,), daemon=True)
        self.proc.start()
        self.port = self.expect("port")
        if not self.port:
            raise HarnessError("the server could not bind 127.0.0.1")

    def expect(self, what, timeout=30):
        if not self.conn.poll(timeout):
            raise HarnessError("the server process does not answer")
        got, value = self.conn.recv()
        if got == "error":
            raise HarnessError(value)
        if got != what:
            raise HarnessError(f"the server process said {got}, {what} expected")
        return value

    def log(self):
        self.conn.send("log")
        return self.expect("log")

    def close(self):
        try:
            self.conn.send("quit")
        except OSError:
            pass
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()


# --- the two callers -------------------------------------------------------------


def service_config():
    p = POLICY
    return json.dumps({
        "methodConfig": [{
            "name": [{"service": SERVICE}],
            "retryPolicy": {
                "maxAttempts": p["max_attempts"],
                "initialBackoff": f"{p['initial_backoff']}s",
                "maxBackoff": f"{p['max_backoff']}s",
                "backoffMultiplier": p["multiplier"],
                "retryableStatusCodes": ["UNAVAILABLE"],
            },
        }],
        # tokenRatio written with its decimal point: C-core reads "1" as
        # thousandths (grpc-core-check.sh's retry-token-ratio-written-1).
        "retryThrottling": {"maxTokens": THROTTLE["max_tokens"],
                            "tokenRatio": THROTTLE["token_ratio"]},
    })


def call_grpcio(grpc, port, name):
    channel = grpc.insecure_channel(f"ipv4:127.0.0.1:{port}", options=[
        ("grpc.enable_retries", 1),
        ("grpc.service_config", service_config()),
        ("grpc.use_local_subchannel_pool", 1),
    ])
    try:
        try:
            grpc.channel_ready_future(channel).result(timeout=10)
        except grpc.FutureTimeoutError:
            raise HarnessError(f"{name}: the grpcio channel did not connect")
        stub = channel.unary_unary(METHOD, _registered_method=True)
        metadata = (("x-sequence", name), ("x-run", "grpcio"))
        try:
            stub(b"", timeout=DEADLINE, metadata=metadata)
            status = "OK"
        except grpc.RpcError as e:
            status = e.code().name
    finally:
        channel.close()
    return {"status": status, "ok": status == "OK"}


def client_command(client, port, name, status_fd):
    p = POLICY
    return [
        client, "--url", f"http://127.0.0.1:{port}/", "--grpc", f"{SERVICE}/Call",
        "--header", f"x-sequence: {name}", "--header", "x-run: client",
        "--clients", "1", "--lambda", LAMBDA, "--seed", str(SEED),
        "--duration", RUN_LENGTH, "--report-interval", RUN_LENGTH,
        "--timeout", f"{int(DEADLINE)}s", "--deadline", f"{int(DEADLINE)}s",
        "--strategy", "grpc", "--implementation", "grpc-core",
        "--min-delay", f"{int(p['initial_backoff'] * 1000)}ms",
        "--max-delay", f"{int(p['max_backoff'] * 1000)}ms",
        "--factor", str(p["multiplier"]), "--max-attempts", str(p["max_attempts"]),
        "--status-fd", str(status_fd),
    ]


def client_totals(lines):
    """The counts of the client's run: its status protocol's last line,
    ClientTotals (src/report/status.rs), as data."""
    for line in reversed(lines):
        try:
            status = json.loads(line)
        except ValueError:
            continue
        if isinstance(status, dict) and "client_totals" in status:
            return status["client_totals"]["tally"]
    raise HarnessError("the client's status lines end without its totals (client_totals)")


def call_client(client, port, name):
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(client_command(client, port, name, w), pass_fds=(w,),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(w)
    with os.fdopen(r) as status:
        lines = status.read().splitlines()
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise HarnessError(f"{name}: the client did not end")
    if proc.returncode != 0:
        raise HarnessError(f"{name}: the client exited {proc.returncode}: {err.strip()}")
    tally = client_totals(lines)
    # One logical request, finished: OK unless given up.
    return {"tally": tally, "started": tally["started"],
            "ok": tally["started"] == 1 and tally["gave_up"] == 0 and tally["ok"] == 1}


def run(client, out):
    server = ServerProcess()
    results = []
    try:
        grpc = load_grpc()
        for name, _ in SEQUENCES:
            g = call_grpcio(grpc, server.port, name)
            c = call_client(client, server.port, name)
            results.append({"name": name, "grpcio": g, "client": c})
        log = server.log()
    finally:
        server.close()
    for r in results:
        for side in ("grpcio", "client"):
            entries = log.get(f"{side}/{r['name']}", [])
            r[side]["preflight"] = [e for e in entries if e["index"] < 0]
            r[side]["attempts"] = [e for e in entries if e["index"] >= 0]
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")


# --- comparison ----------------------------------------------------------------


def ms(x):
    return f"{x * 1000:.0f}"


def gaps(attempts):
    ts = [a["t"] for a in attempts]
    return [b - a for a, b in zip(ts, ts[1:])]


def first_difference(name, r):
    """The first way the run of sequence `name` (`r`, as `run` wrote it)
    departs from the script or from C-core, or None."""
    script = dict(SEQUENCES).get(name)
    if script is None:
        return "a sequence this check does not script"
    n, ok, bounds = expected(script)
    g, c = r["grpcio"], r["client"]
    if c.get("started") != 1:
        return f"the client started {c.get('started')} logical requests, not 1 " \
               f"(its first think time and its run's length: LAMBDA, SEED, RUN_LENGTH)"
    if len(c.get("preflight", [])) != 1:
        return f"{len(c.get('preflight', []))} preflight calls from the client, 1 expected"
    t = c.get("tally", {})
    sent = t.get("ok", 0) + t.get("errors", 0) + t.get("timeouts", 0) - t.get("rejected", 0)
    if sent != len(c["attempts"]):
        return f"the client counted {sent} attempts sent, the server saw {len(c['attempts'])}"
    for side, x in (("grpcio", g), ("client", c)):
        got = len(x["attempts"])
        if got != n:
            return f"{side}: {got} attempts on the server, {n} scripted " \
                   f"(grpcio {len(g['attempts'])}, client {len(c['attempts'])})"
        if x["ok"] != ok:
            return f"{side} ended {'OK' if x['ok'] else 'not OK'}, the script " \
                   f"{'OK' if ok else 'not OK'} (grpcio {g.get('status')}, client " \
                   f"{c.get('tally')})"
    for side, x in (("grpcio", g), ("client", c)):
        for k, (gap, (lo, hi)) in enumerate(zip(gaps(x["attempts"]), bounds), start=2):
            if not lo <= gap <= hi:
                return f"{side}: attempt {k} came {ms(gap)} ms after attempt {k - 1}, " \
                       f"outside [{ms(lo)}, {ms(hi)}] ms"
    return None


def summary(r):
    g, c = r["grpcio"], r["client"]

    def shown(x):
        left = "/".join(f"{a['left']:.2f}" if a["left"] is not None else "-"
                        for a in x["attempts"])
        return f"gaps [{', '.join(ms(v) for v in gaps(x['attempts']))}] ms, " \
               f"deadline left [{left}] s"

    return f"{len(g['attempts'])} attempts, {'OK' if g['ok'] else g['status']}; " \
           f"grpcio {shown(g)}; client {shown(c)}"


def compare(results):
    failures, lines = 0, []
    got = {r["name"]: r for r in results} if isinstance(results, list) else {}
    for name, _ in SEQUENCES:
        r = got.get(name)
        diff = "no result" if r is None else first_difference(name, r)
        if diff is None:
            lines.append(f"PASS grpc-wire {name}: {summary(r)}")
        else:
            failures += 1
            lines.append(f"FAIL grpc-wire {name}: {diff}")
    return failures, lines


def selftest(results):
    """The comparison must pass RESULTS and fail copies altered beyond its
    tolerances; returns the number of its own failures."""

    def copy():
        return json.loads(json.dumps(results))

    def named(c, name):
        return next(r for r in c if r["name"] == name)

    def shift(attempts, k, by):
        for a in attempts[k:]:
            a["t"] += by

    cases = [("itself", copy(), True)]
    c = copy()
    shift(named(c, "unavailable-twice-then-ok")["client"]["attempts"], 1, 0.010)
    cases.append(("a client retry 10 ms late (within the noise)", c, True))
    c = copy()
    # 100 ms jittered: [65, 135] ms; 60 ms later is past it whatever the draw.
    shift(named(c, "unavailable-twice-then-ok")["client"]["attempts"], 1, 0.060)
    cases.append(("a client retry 60 ms late", c, False))
    c = copy()
    shift(named(c, "pushback-200ms")["client"]["attempts"], 1, 0.030)
    cases.append(("a retry 30 ms after its 200 ms pushback", c, False))
    c = copy()
    # Without the reset, the retry after the pushback would back off 400 ms.
    shift(named(c, "pushback-resets-backoff")["grpcio"]["attempts"], 3, 0.300)
    cases.append(("the backoff not reset after a pushback", c, False))
    c = copy()
    named(c, "out-of-attempts")["client"]["attempts"].pop()
    cases.append(("an attempt missing", c, False))
    c = copy()
    named(c, "resource-exhausted")["grpcio"]["ok"] = True
    cases.append(("an end changed", c, False))
    c = copy()
    named(c, "unavailable-twice-then-ok")["client"]["started"] = 2
    cases.append(("two logical requests from the client", c, False))
    c = copy()
    named(c, "out-of-attempts")["client"]["tally"]["errors"] += 1
    cases.append(("the client counting an attempt the server never saw", c, False))
    c = copy()
    c.pop()
    cases.append(("a sequence missing", c, False))
    bad = 0
    for what, altered, should_pass in cases:
        failures, lines = compare(altered)
        passed = failures == 0
        shown = "" if passed else ": " + next(l for l in lines if l.startswith("FAIL"))
        if passed == should_pass:
            print(f"PASS selftest {what}{shown}")
        else:
            bad += 1
            print(f"FAIL selftest {what}: the comparison {'passed' if passed else 'failed'} "
                  f"it{shown}")
    return bad


# --- main ------------------------------------------------------------------------


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise HarnessError(f"cannot read {path}: {e}")


def main(argv):
    cmd, rest = (argv[1], argv[2:]) if len(argv) > 1 else (None, [])
    if cmd == "run" and len(rest) == 2:
        run(rest[0], rest[1])
        return 0
    if cmd == "compare" and len(rest) == 1:
        failures, lines = compare(read_json(rest[0]))
        for line in lines:
            print(line)
        return 1 if failures else 0
    if cmd == "selftest" and len(rest) == 1:
        return 1 if selftest(read_json(rest[0])) else 0
    if cmd in ("-h", "--help"):
        print(__doc__)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except HarnessError as e:
        print(f"grpc-wire-check: {e}", file=sys.stderr)
        sys.exit(2)
