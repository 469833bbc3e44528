#!/usr/bin/env python3
"""gRPC's client retry policy as C-core does it (grpcio), run for real, for
scripts/grpc-core-check.sh.

  grpc-core-check.py gen OUT              sequences of calls and their
                                          attempts' answers, JSON (the format
                                          of scripts/grpc-check.js)
  grpc-core-check.py grpcio SEQS OUT      run them through the grpcio on
                                          PYTHONPATH: a real client and a real
                                          server on 127.0.0.1, in real time
  grpc-core-check.py compare SEQS LIB MODEL LABEL [--informational]
                                          one PASS/FAIL line per sequence (with
                                          --informational: SAME/DIFFER, exit 0)
  grpc-core-check.py selftest SEQS LIB    the comparison against LIB itself and
                                          against copies altered by hand (it
                                          must pass the first and fail these)

C-core has no clock or random source that a test can replace, so nothing is
driven here: each sequence gets a grpcio server of its own on 127.0.0.1 (a
port the system picks; the servers run in a second Python process, so that
taking attempts in never waits on the client's Python work) whose one
generic unary method answers each attempt as the sequence scripts it (it
finds the call by the request's payload, the call's index, and the attempt
by C-core's grpc-previous-rpc-attempts metadata, checked against its own
count of arrivals; it waits the answer's `after`, then returns OK or aborts
with the status, with the trailing metadata grpc-retry-pushback-ms when the
answer gives a pushback), and one fresh channel (so a fresh retry throttle:
C-core keeps one per channel) carrying a service config with the sequence's
retryPolicy and retryThrottling, retries on. The channel is connected
before the sequence's clock starts; each call starts at its start time,
from a scheduler thread. The server records when each attempt arrives, the
client when each call ends and with what status. Every decision (retry or
not, how long to back off, whether the throttle allows it) is C-core's.

So the times are real ones: the answers come a few milliseconds late, and
C-core jitters each backoff by a factor in [0.8, 1.2) that nothing pins. The
sequences are built for that: answers 10 to 15 ms after their attempt,
backoffs of 100 ms and more, and wherever the order of two calls' throttle
events decides something, 30 ms or more between them, jitter's worst case
included; calls whose order decides nothing (a burst, successes) start
together. The model runs them with its draw pinned at 0.5, the middle of
the jitter.

The comparison, per call: the same number of attempts and the same final
status, exactly; the first attempt within 15 ms of the model's; each
retry's gap after the attempt before it within 15 ms plus 20 % of the
model's backoff before it (2 % when that backoff was a server pushback,
which C-core waits exactly but for its timer's lateness) of the model's
gap; the end's gap after the
last attempt within 15 ms plus 20 % of the model's wait after the last
answer. Gaps, not times since the start, so that one retry's jitter is not
counted again against every retry after it. C-core's token count cannot be
read: the output's tokens are empty, and the throttle shows only in its
decisions. A sequence may carry `known`: what C-core does there unlike the
model, a finding of this check; its line says KNOWN with the first
difference, and is not counted as a failure.

Output of `grpcio`, a JSON array in the input's order, as grpc-check.js's:
per call the arrival times of its attempts, when it ended and its status'
name; times in seconds from the sequence's own start.
"""

import json
import sys
import threading
import time

from grpc_core_sequences import SequenceError, generate

METHOD = "/retrystorm.Lab/Call"
SERVICE = "retrystorm.Lab"
# A method the service config gives no retry policy: C-core's retry filter
# lets its calls by without touching the throttle (ShouldRetry returns at
# once). Calls to it before a sequence's clock starts warm the connection
# and the server's worker threads.
WARM_METHOD = "/retrystorm.Warm/Up"
WARM_SERVICE = "retrystorm.Warm"
WARM_SLEEP = 0.02
GRPCIO_VERSION = "1.85.3"

# The comparison's tolerances (seconds, and a share of a jittered backoff).
NOISE = 0.015
JITTER = 0.2
# C-core waits a pushback exactly, but its timer fires late by a share of
# the wait on a 2-core machine: after a pushback of 1200 ms the retry came
# 7.7 to 21 ms after the model's instant in six runs on 2026-11-29 (16 to
# 21 ms in four of them, beyond NOISE alone), after 300 ms 5.6 ms. A
# model that ignored the pushback or jittered it (20 %) is off by far more.
PUSHBACK_SLACK = 0.02

# Each call's deadline, after the sequence's last start (its longest call
# takes 2 s): a call that C-core leaves hanging ends then, DEADLINE_EXCEEDED.
DEADLINE = 4.0


class HarnessError(Exception):
    pass


# --- grpcio, for real ----------------------------------------------------------


def service_config(seq):
    if not seq.get("retry") or seq.get("hedging"):
        raise HarnessError(
            f"{seq['name']}: a retry policy and no hedging wanted (C-core has no hedging)")
    r = seq["retry"]

    def duration(sec):
        # As a service config writes it: "0.1s".
        text = f"{round(sec, 9):.9f}".rstrip("0").rstrip(".")
        return f"{text}s"

    return json.dumps({
        "methodConfig": [{
            "name": [{"service": SERVICE}],
            "retryPolicy": {
                "maxAttempts": r["max_attempts"],
                "initialBackoff": duration(r["initial_backoff"]),
                "maxBackoff": duration(r["max_backoff"]),
                "backoffMultiplier": r["multiplier"],
                "retryableStatusCodes": ["UNAVAILABLE"],
            },
        }],
        "retryThrottling": {
            # C-core reads maxTokens as an integer.
            "maxTokens": int(seq["throttle"]["max_tokens"]),
            # Written as the sequence writes it: to C-core, 1 and 1.0 differ
            # (retry-token-ratio-written-1).
            "tokenRatio": seq["throttle"]["token_ratio"],
        },
    })


def load_grpc():
    try:
        import grpc
    except ImportError as e:
        raise HarnessError(f"grpcio not found (PYTHONPATH): {e}")
    if grpc.__version__ != GRPCIO_VERSION:
        raise HarnessError(f"grpcio {grpc.__version__} found, {GRPCIO_VERSION} wanted")
    return grpc


def serve(conn):
    """The server's side, in a process of its own (so that its Python work,
    taking each attempt in, does not wait on the client's): for each
    sequence a fresh server, its port sent back, and when told to stop the
    attempts' arrival times (time.monotonic, one clock for every process)."""
    from concurrent import futures

    try:
        grpc = load_grpc()
    except HarnessError as e:
        conn.send(("error", str(e)))
        return
    conn.send(("ready", None))
    while True:
        msg, calls = conn.recv()
        if msg == "quit":
            return
        lock = threading.Lock()
        arrivals = [[] for _ in calls]  # per call: (attempt index, time)
        errors = []

        def handler(request, context, calls=calls, arrivals=arrivals, errors=errors, lock=lock):
            t = time.monotonic()
            try:
                ci = int(request.decode())
                spec = calls[ci]
            except (ValueError, IndexError):
                with lock:
                    errors.append(f"a request the sequence has no call for: {request!r}")
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unknown call")
            md = dict(context.invocation_metadata())
            previous = int(md.get("grpc-previous-rpc-attempts", "0"))
            with lock:
                count = len(arrivals[ci])
                arrivals[ci].append((previous, t))
                if previous != count:
                    errors.append(
                        f"call {ci}: attempt {count + 1} arrived saying {previous} before it")
                if previous >= len(spec["attempts"]):
                    errors.append(f"call {ci} sent attempt {previous + 1}, only "
                                  f"{len(spec['attempts'])} answers scripted")
                    context.abort(grpc.StatusCode.INTERNAL, "unscripted attempt")
            answer = spec["attempts"][previous]
            time.sleep(max(0.0, t + answer["after"] - time.monotonic()))
            if answer["status"] == "OK":
                return b"pong"
            code = getattr(grpc.StatusCode, answer["status"], None)
            if code is None:
                with lock:
                    errors.append(f"unknown status {answer['status']}")
                code = grpc.StatusCode.UNKNOWN
            if answer.get("pushback_ms") is not None:
                pushback = str(answer["pushback_ms"])
                context.set_trailing_metadata((("grpc-retry-pushback-ms", pushback),))
            context.abort(code, answer["status"])

        def warm(request, context):
            time.sleep(WARM_SLEEP)
            return b""

        # Enough workers that no attempt ever waits for one.
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=len(calls) * 2 + 8))
        server.add_generic_rpc_handlers((
            grpc.method_handlers_generic_handler(
                SERVICE, {"Call": grpc.unary_unary_rpc_method_handler(handler)}),
            grpc.method_handlers_generic_handler(
                WARM_SERVICE, {"Up": grpc.unary_unary_rpc_method_handler(warm)}),
        ))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        conn.send(("port", port))
        conn.recv()  # stop
        server.stop(grace=None).wait()
        conn.send(("done", (arrivals, errors)))


class ServerProcess:
    def __init__(self):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child,), daemon=True)
        self.proc.start()
        self.expect("ready")

    def expect(self, what, timeout=30):
        if not self.conn.poll(timeout):
            raise HarnessError("the server process does not answer")
        got, value = self.conn.recv()
        if got == "error":
            raise HarnessError(value)
        if got != what:
            raise HarnessError(f"the server process said {got}, {what} expected")
        return value

    def start(self, calls):
        self.conn.send(("start", calls))
        return self.expect("port")

    def stop(self):
        self.conn.send(("stop", None))
        return self.expect("done")

    def close(self):
        try:
            self.conn.send(("quit", None))
        except OSError:
            pass
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()


def run_one(grpc, server, seq):
    name = seq["name"]
    calls = seq["calls"]
    lock = threading.Lock()
    port = server.start(calls)
    if not port:
        raise HarnessError(f"{name}: the server could not bind 127.0.0.1")
    channel = grpc.insecure_channel(f"ipv4:127.0.0.1:{port}", options=[
        ("grpc.enable_retries", 1),
        ("grpc.service_config", service_config(seq)),
        # A subchannel of this channel's own, not one shared through the
        # process-wide pool.
        ("grpc.use_local_subchannel_pool", 1),
    ])
    results = [{"attempts": [], "end": None, "status": None} for _ in calls]
    done = threading.Event()
    remaining = [len(calls)]
    epoch = None
    try:
        try:
            grpc.channel_ready_future(channel).result(timeout=10)
        except grpc.FutureTimeoutError:
            raise HarnessError(f"{name}: the channel did not connect")
        # As many calls at once as the sequence makes at most, and more:
        # the server's worker threads are made, the HTTP/2 streams opened.
        warm = channel.unary_unary(WARM_METHOD, _registered_method=True)
        for f in [warm.future(b"", timeout=10) for _ in range(len(calls) + 4)]:
            f.result()
        stub = channel.unary_unary(METHOD, _registered_method=True)
        length = max(c["start"] for c in calls) + DEADLINE
        order = sorted(range(len(calls)), key=lambda i: (calls[i]["start"], i))

        def ended(ci, fut):
            t = time.monotonic()
            code = fut.code()
            with lock:
                results[ci]["end"] = t
                results[ci]["status"] = code.name if code is not None else "NONE"
                remaining[0] -= 1
                if remaining[0] == 0:
                    done.set()

        epoch = time.monotonic() + 0.05
        for ci in order:
            delay = epoch + calls[ci]["start"] - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            fut = stub.future(str(ci).encode(), timeout=epoch + length - time.monotonic())
            fut.add_done_callback(lambda f, ci=ci: ended(ci, f))
        if not done.wait(timeout=epoch + length + 5 - time.monotonic()):
            raise HarnessError(f"{name}: calls still running past their deadline")
    finally:
        channel.close()
        arrivals, errors = server.stop()
    if errors:
        raise HarnessError(f"{name}: {errors[0]}")
    for ci, rec in enumerate(results):
        rec["attempts"] = [round(t - epoch, 6) for _, t in sorted(arrivals[ci])]
        rec["end"] = round(rec["end"] - epoch, 6)
    return {"name": name, "calls": results, "tokens": []}


def run_grpcio(seqs):
    # The server's process first: spawned before this one loads grpcio and
    # starts its threads.
    server = ServerProcess()
    try:
        grpc = load_grpc()
        return [run_on_time(grpc, server, seq) for seq in seqs]
    finally:
        server.close()


# How often a sequence is run again when this harness, not C-core, was
# late: a call's first attempt reached the server more than NOISE after
# the start the sequence gives it.
TRIES = 3


def run_on_time(grpc, server, seq):
    """Runs `seq`, again (up to TRIES times) while the harness started a
    call late: the machine's load, which says nothing of C-core's
    decisions. The retries' timing is never a reason to run again."""
    for attempt in range(1, TRIES + 1):
        result = run_one(grpc, server, seq)
        late = [
            c["attempts"][0] - call["start"]
            for c, call in zip(result["calls"], seq["calls"])
            if c["attempts"] and c["attempts"][0] - call["start"] > NOISE
        ]
        if not late:
            return result
        print(
            f"grpc-core-check: {seq['name']}: a call started {max(late) * 1000:.0f} ms "
            f"late (run {attempt} of {TRIES}); the harness was late, not C-core",
            file=sys.stderr,
        )
    return result


# --- comparison ----------------------------------------------------------------


def fmt(x):
    return f"{x:.3f}" if isinstance(x, (int, float)) else str(x)


def first_difference(seq, lib, mod):
    """The first difference between the library's result and the model's, or
    None."""
    la, lm = lib.get("calls"), mod.get("calls")
    if not isinstance(la, list) or not isinstance(lm, list):
        return "no calls array"
    if len(la) != len(lm) or len(la) != len(seq["calls"]):
        return f"{len(la)} calls from grpcio, {len(lm)} from the model, " \
               f"{len(seq['calls'])} in the sequence"
    for i, (a, b, spec) in enumerate(zip(la, lm, seq["calls"])):
        xa, xb = a.get("attempts") or [], b.get("attempts") or []
        shown = f"(grpcio [{', '.join(map(fmt, xa))}] end {fmt(a.get('end'))}, " \
                f"model [{', '.join(map(fmt, xb))}] end {fmt(b.get('end'))})"
        if len(xa) != len(xb):
            return f"call {i}: {len(xa)} attempts from grpcio, {len(xb)} from the model {shown}"
        if a.get("status") != b.get("status"):
            return f"call {i} ended: grpcio {a.get('status')}, model {b.get('status')} {shown}"
        if not xa:
            return f"call {i}: no attempt {shown}"
        if abs(xa[0] - xb[0]) > NOISE:
            # No C-core decision is in it: the harness was late.
            return f"call {i} attempt 1: grpcio at {fmt(xa[0])}, model at {fmt(xb[0])}, " \
                   f"more than {NOISE * 1000:.0f} ms apart (the call went late: a machine " \
                   f"too busy to keep real time?) {shown}"
        # Each retry's gap after the attempt before it, then the end's gap
        # after the last attempt; what the model waited after that attempt's
        # answer is the share that C-core jitters (none after a pushback).
        for k in range(1, len(xa) + 1):
            prev = spec["attempts"][k - 1]
            if k < len(xa):
                ga, gb, what = xa[k] - xa[k - 1], xb[k] - xb[k - 1], f"attempt {k + 1}"
            else:
                ga, gb, what = a["end"] - xa[-1], b["end"] - xb[-1], "the end"
            wait = max(0.0, gb - prev["after"])
            pb = prev.get("pushback_ms")
            pushed = k < len(xa) and pb is not None and pb >= 0
            tol = NOISE + (PUSHBACK_SLACK * pb / 1000.0 if pushed else JITTER * wait)
            if abs(ga - gb) > tol:
                return f"call {i} {what}: {fmt(ga)} s after attempt {k} in grpcio, " \
                       f"{fmt(gb)} s in the model, more than {tol * 1000:.1f} ms apart {shown}"
    return None


def summary(r):
    attempts = sum(len(c["attempts"]) for c in r["calls"])
    ok = sum(1 for c in r["calls"] if c["status"] == "OK")
    return f"{len(r['calls'])} calls, {attempts} attempts, {ok} OK"


def compare(seqs, lib, mod, label, informational=False):
    L = {r["name"]: r for r in lib} if isinstance(lib, list) else {}
    M = {r["name"]: r for r in mod} if isinstance(mod, list) else {}
    failures = 0
    lines = []
    for seq in seqs:
        name = seq["name"]
        a, b = L.get(name), M.get(name)
        if a is None:
            diff = "no result from grpcio"
        elif b is None:
            diff = "no result from the model"
        else:
            diff = first_difference(seq, a, b)
        known = seq.get("known")
        if diff is None:
            note = " (its known difference did not show)" if known else ""
            word = "SAME" if informational else "PASS"
            lines.append(f"{word} {label} {name}: {summary(a)}{note}")
        elif known and a is not None and b is not None:
            # Shown, not counted: what C-core does there is a finding, not
            # the model's to follow.
            lines.append(f"KNOWN {label} {name}: first difference: {diff}; known: {known}")
        else:
            failures += 1
            word = "DIFFER" if informational else "FAIL"
            lines.append(f"{word} {label} {name}: first difference: {diff}")
    return failures, lines


def selftest(seqs, lib):
    """The comparison must pass LIB against itself and copies altered within
    the tolerances, and fail copies altered beyond them."""

    def copy():
        return json.loads(json.dumps(lib))

    known = {q["name"] for q in seqs if q.get("known")}

    def call_where(r, pred):
        for res in r:
            if res["name"] in known:
                continue
            for c in res["calls"]:
                if pred(c):
                    return c
        raise HarnessError("selftest: no call to alter")

    retried = lambda c: len(c["attempts"]) > 1  # noqa: E731
    cases = [("itself", copy(), True)]
    c = copy()
    call_where(c, retried)["attempts"][1] += 0.010
    cases.append(("a retry 10 ms late (within the noise)", c, True))
    c = copy()
    call = call_where(c, retried)
    call["attempts"][1] += 0.080
    call["end"] += 0.080
    for k in range(2, len(call["attempts"])):
        call["attempts"][k] += 0.080
    cases.append(("a retry and all after it 80 ms late", c, False))
    c = copy()
    call = call_where(c, retried)
    call["attempts"].pop()
    cases.append(("an attempt missing", c, False))
    c = copy()
    call_where(c, lambda x: x["status"] == "UNAVAILABLE")["status"] = "OK"
    cases.append(("a status changed", c, False))
    c = copy()
    # retry-burst-drain's last call, refused by the throttle at its first
    # failure, ended a backoff later as grpc-js would end it.
    burst = [r for r in c if r["name"] == "retry-burst-drain"]
    if not burst:
        raise HarnessError("selftest: no retry-burst-drain to alter")
    burst[0]["calls"][-1]["end"] += 0.1
    cases.append(("a throttled call ending a 100 ms backoff after its failure", c, False))
    c = copy()
    # retry-pushback's call after a pushback of 1200 ms, retried 60 ms
    # late: beyond its timer's slack (15 ms and 2 %, 39 ms).
    pushed = [r for r in c if r["name"] == "retry-pushback"]
    if not pushed:
        raise HarnessError("selftest: no retry-pushback to alter")
    call = pushed[0]["calls"][-1]
    call["attempts"][1] += 0.060
    call["end"] += 0.060
    cases.append(("a retry 60 ms after a pushback of 1200 ms", c, False))
    c = copy()
    c[0]["calls"][0]["attempts"] = [t + 0.02 for t in c[0]["calls"][0]["attempts"]]
    c[0]["calls"][0]["end"] += 0.02
    cases.append(("a call started 20 ms late", c, False))
    c = copy()
    c.pop()
    cases.append(("a sequence missing", c, False))
    bad = 0
    for what, model, should_pass in cases:
        failures, lines = compare(seqs, lib, model, "selftest")
        passed = failures == 0
        shown = "" if passed else ": " + next(l for l in lines if l.startswith("FAIL"))
        if passed == should_pass:
            print(f"PASS selftest {what}{shown}")
        else:
            bad += 1
            did = "passed" if passed else "failed"
            print(f"FAIL selftest {what}: the comparison {did} it{shown}")
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
    if cmd == "gen" and len(rest) == 1:
        try:
            seqs = generate()
        except SequenceError as e:
            raise HarnessError(str(e)) from e
        with open(rest[0], "w") as f:
            json.dump(seqs, f, indent=1)
            f.write("\n")
        return 0
    if cmd == "grpcio" and len(rest) == 2:
        out = run_grpcio(read_json(rest[0]))
        with open(rest[1], "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
        return 0
    if cmd == "compare" and (len(rest) == 4 or (len(rest) == 5 and rest[4] == "--informational")):
        seqs, lib, mod = (read_json(p) for p in rest[:3])
        informational = len(rest) == 5
        failures, lines = compare(seqs, lib, mod, rest[3], informational)
        for line in lines:
            print(line)
        return 1 if failures and not informational else 0
    if cmd == "selftest" and len(rest) == 2:
        seqs, lib = (read_json(p) for p in rest)
        return 1 if selftest(seqs, lib) else 0
    if cmd in ("-h", "--help"):
        print(__doc__)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except HarnessError as e:
        print(f"grpc-core-check: {e}", file=sys.stderr)
        sys.exit(2)
