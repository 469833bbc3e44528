#!/usr/bin/env python3
"""botocore's retry policies driven directly, for scripts/libraries-check.sh.

  libraries-check.py gen OUT              seeded sequences of outcomes, JSON
  libraries-check.py botocore MODE IN OUT run them through the botocore on
                                          PYTHONPATH (MODE standard|adaptive)
  libraries-check.py compare SEQS LIB MODEL LABEL
                                          one PASS/FAIL line per sequence

Nothing here talks to a network. The handlers are registered as botocore's
own client does (standard.register_retry_handler, and
adaptive.register_retry_handler for the adaptive mode) on a stand-in
client that only records which function each event calls; the answers are
botocore AWSResponses parsed by botocore's own JSON-protocol parser, so a
bare 429 reaches the retry code as botocore would see it (its code is
"429": the parser falls back to the status); timeouts and refused
connections are botocore's ReadTimeoutError and EndpointConnectionError.
The backoff's random draw is pinned (the private _random attribute of the
ExponentialBackoff registered) and the adaptive limiter's clock is a
stand-in (bucket.Clock replaced before registering), so the times are the
sequence's. Each event is one attempt: its send time, its answer's time,
its answer, and the draw its backoff takes if it retries.
"""

import json
import random
import sys

SEED = 20260514
DRAW_BITS = 53


def draw(rng):
    # k / 2^53: a float the model's generator returns exactly too.
    return rng.getrandbits(DRAW_BITS) / float(1 << DRAW_BITS)


# --- sequences ---------------------------------------------------------------

BARE_BODY = "overloaded, retry later\n"


def answer(kind, rng):
    """One answer of a kind: status (None: no answer), body, headers, error."""
    if kind == "ok":
        return {"status": 200, "body": "OK", "headers": {}}
    if kind == "5xx":
        return {"status": rng.choice([500, 502, 503, 504]), "body": "", "headers": {}}
    if kind == "timeout":
        return {"status": None, "error": "read-timeout"}
    if kind == "refused":
        return {"status": None, "error": "connection"}
    headers = {}
    if kind.endswith("+hint"):
        ms = rng.choice([0, 40, 250, 1000, 2500, 7000, 60000])
        headers["x-amz-retry-after"] = str(ms)
        kind = kind[: -len("+hint")]
    if kind.endswith("+http-hint"):
        headers["Retry-After"] = str(rng.choice([1, 2, 30]))
        kind = kind[: -len("+http-hint")]
    if kind == "429-bare":
        return {"status": 429, "body": BARE_BODY, "headers": headers}
    if kind == "429-code":
        code = rng.choice(["ThrottlingException", "TooManyRequestsException", "Throttling"])
        return {"status": 429, "body": json.dumps({"__type": code}), "headers": headers,
                "code": code}
    if kind == "503-slowdown":
        return {"status": 503, "body": json.dumps({"__type": "SlowDown"}), "headers": headers,
                "code": "SlowDown"}
    raise ValueError(kind)


def sequence(name, kinds, rng, start=0.0, gap=(0.001, 0.2), latency=(0.001, 0.05)):
    """Events at seeded times from a list of answer kinds."""
    t = start
    events = []
    for kind in kinds:
        t += rng.uniform(*gap)
        sent = t
        t += rng.uniform(*latency)
        ev = answer(kind, rng)
        ev.update({"kind": kind, "t_send": round(sent, 6), "t_recv": round(t, 6), "u": draw(rng)})
        events.append(ev)
    return {"name": name, "events": events}


def generate():
    rng = random.Random(SEED)
    seqs = []

    def mix(n, weights):
        kinds, w = zip(*weights.items())
        return rng.choices(kinds, weights=w, k=n)

    seqs.append(sequence("bursts-of-5xx", (["ok"] * 3 + ["5xx"] * 7) * 6, rng))
    seqs.append(sequence("timeouts", mix(80, {"ok": 3, "timeout": 4, "refused": 1}), rng))
    seqs.append(sequence("throttle-with-code", mix(80, {"ok": 3, "429-code": 4}), rng))
    seqs.append(sequence("throttle-code-and-hint",
                         mix(80, {"ok": 3, "429-code+hint": 3, "503-slowdown+hint": 1}), rng))
    seqs.append(sequence("bare-429", mix(80, {"ok": 3, "429-bare": 4}), rng))
    seqs.append(sequence("bare-429-hints",
                         mix(80, {"ok": 3, "429-bare+hint": 2, "429-bare+http-hint": 2}), rng))
    seqs.append(sequence("transient-with-hint", mix(60, {"ok": 2, "5xx": 2, "timeout": 1}), rng))
    for ev in seqs[-1]["events"]:
        if ev["status"] and ev["status"] >= 500 and rng.random() < 0.5:
            ev["headers"]["x-amz-retry-after"] = str(rng.choice([10, 300, 9000]))
    # A storm: the 500-token quota drained by failures, then refilled by
    # successes (1 each, or the last retry's cost).
    drain = ["5xx", "timeout", "429-code", "429-bare"] * 70
    rng.shuffle(drain)
    seqs.append(sequence("drain-and-refill", drain + ["ok"] * 400 + mix(200, {
        "ok": 5, "5xx": 2, "timeout": 1, "429-code": 1, "429-bare": 1}), rng))
    seqs.append(sequence("mixed", mix(400, {
        "ok": 6, "5xx": 2, "timeout": 1, "refused": 1, "429-code": 1, "429-code+hint": 1,
        "429-bare": 1, "429-bare+hint": 1, "503-slowdown": 1}), rng, start=1000.0))
    # The limiter at busier and quieter rates: many answers a second, then
    # a few.
    seqs.append(sequence("limiter-fast", mix(300, {"ok": 6, "429-code": 1, "429-bare": 1}), rng,
                         gap=(0.001, 0.02)))
    seqs.append(sequence("limiter-slow", mix(120, {"ok": 4, "429-code": 1, "429-bare": 1}), rng,
                         gap=(0.2, 1.5)))
    return seqs


# --- botocore -----------------------------------------------------------------


class Events:
    """A client's event system, reduced to remembering the handlers."""

    def __init__(self):
        self.handlers = []

    def register(self, event, handler, unique_id=None, **_):
        self.handlers.append((event, handler))

    def emit(self, event, **kwargs):
        # botocore's hierarchical emitter: 'needs-retry' hears
        # 'needs-retry.lab.GetThing'; every handler is called.
        out = []
        for name, handler in self.handlers:
            if event == name or event.startswith(name + "."):
                out.append((name, handler(**kwargs)))
        return out


class Clock:
    """bucket.Clock with the sequence's time."""

    now = 0.0

    def current_time(self):
        return Clock.now

    def sleep(self, amount):
        raise AssertionError("the check never sleeps")


def run_botocore(mode, seqs):
    import botocore
    from botocore import model, parsers
    from botocore.awsrequest import AWSResponse, HeadersDict
    from botocore.exceptions import (CapacityNotAvailableError, EndpointConnectionError,
                                     ReadTimeoutError)
    from botocore.retries import adaptive, bucket, standard

    service = model.ServiceModel({
        "metadata": {"protocol": "json", "serviceId": "Lab", "endpointPrefix": "lab",
                     "jsonVersion": "1.0", "targetPrefix": "Lab", "signatureVersion": "v4"},
        "operations": {"GetThing": {"name": "GetThing", "http": {"method": "POST",
                                                                 "requestUri": "/"}}},
        "shapes": {},
    }, service_name="lab")
    operation = service.operation_model("GetThing")
    parser = parsers.create_parser("json")
    url = "http://127.0.0.1:1/"
    bucket.Clock = Clock

    results = []
    for seq in seqs:
        # The process starts at 0, as the model's limiter does.
        Clock.now = 0.0

        class Meta:
            events = Events()
            service_model = service

        class Client:
            meta = Meta

        handler = standard.register_retry_handler(Client)
        limiter = adaptive.register_retry_handler(Client) if mode == "adaptive" else None
        current = {"u": None}
        handler._retry_policy._retry_backoff._random = lambda: current["u"]
        quota = handler._retry_quota._quota
        request_context = {}
        attempt = 1
        out = []
        for ev in seq["events"]:
            rec = {}
            if limiter is not None:
                Clock.now = ev["t_send"]
                try:
                    if limiter._enabled:
                        limiter._token_bucket.acquire(block=False)
                    rec["token"] = True
                except CapacityNotAvailableError:
                    rec["token"] = False
            Clock.now = ev["t_recv"]
            current["u"] = ev["u"]
            if ev["status"] is None:
                cls = ReadTimeoutError if ev["error"] == "read-timeout" else EndpointConnectionError
                response, exc = None, cls(endpoint_url=url)
                http = None
            else:
                headers = HeadersDict(ev["headers"])
                http = AWSResponse(url, ev["status"], headers, None)
                http._content = ev["body"].encode()
                parsed = parser.parse({"status_code": ev["status"], "headers": headers,
                                       "body": ev["body"].encode(), "context": {}},
                                      operation.output_shape)
                response, exc = (http, parsed), None
            delay = Client.meta.events.emit(
                "needs-retry.lab.GetThing", response=response, endpoint=None,
                operation=operation, attempts=attempt, caught_exception=exc,
                request_dict={"context": request_context})
            retry = next((d for name, d in delay if name.startswith("needs-retry.lab")), None)
            if http is not None and 200 <= http.status_code < 300:
                Client.meta.events.emit("after-call.lab.GetThing", http_response=http,
                                        parsed={}, model=operation, context=request_context)
            rec["retry"] = retry is not None and retry is not False
            rec["delay"] = retry if rec["retry"] else None
            rec["quota"] = quota.available_capacity
            if limiter is not None:
                rec["enabled"] = limiter._enabled
                rec["rate"] = limiter._token_bucket.max_rate
            out.append(rec)
            if rec["retry"]:
                attempt += 1
            else:
                attempt, request_context = 1, {}
        results.append({"name": seq["name"], "decisions": out})
    return {"botocore": botocore.__version__, "results": results}


# --- comparison ---------------------------------------------------------------


def close(a, b, rel=1e-9, absolute=2e-9):
    return abs(a - b) <= max(absolute, rel * max(abs(a), abs(b)))


def differ(a, b):
    """The first field on which two decisions differ, or None."""
    for key in ("retry", "quota", "token", "enabled"):
        if a.get(key) != b.get(key):
            return key
    if a.get("delay") is not None or b.get("delay") is not None:
        if a.get("delay") is None or b.get("delay") is None or not close(a["delay"], b["delay"]):
            return "delay"
    if "rate" in a or "rate" in b:
        if not close(a.get("rate", -1.0), b.get("rate", -2.0)):
            return "rate"
    return None


def compare(lib, mod, label, seqs):
    failures = 0
    by_name = {s["name"]: s for s in seqs}
    names = [s["name"] for s in seqs]
    for side, results in (("botocore", lib["results"]), ("the model", mod["results"])):
        if [r["name"] for r in results] != names:
            print(f"FAIL {label}: {side} answered sequences {[r['name'] for r in results]}, "
                  f"not {names}")
            return 1
    for theirs, ours in zip(lib["results"], mod["results"]):
        name = theirs["name"]
        assert name == ours["name"], (name, ours["name"])
        pairs = list(zip(theirs["decisions"], ours["decisions"]))
        first = next(((i, k) for i, (a, b) in enumerate(pairs) if (k := differ(a, b))), None)
        n = len(theirs["decisions"])
        retries = sum(d["retry"] for d in theirs["decisions"])
        if first is None and len(ours["decisions"]) == n:
            print(f"PASS {label} {name}: {n} events agree ({retries} retries, quota ends at "
                  f"{theirs['decisions'][-1]['quota']})")
            continue
        failures += 1
        if first is None:
            print(f"FAIL {label} {name}: {len(ours['decisions'])} decisions from the model, {n} "
                  "from botocore")
            continue
        i, key = first
        ev = by_name[name]["events"][i]
        shown = {k: ev[k] for k in ("kind", "status", "headers", "code", "error") if k in ev}
        agree = sum(differ(a, b) is None for a, b in pairs)
        print(f"FAIL {label} {name}: {agree} of {n} events agree; first difference at event {i} "
              f"({key}): {json.dumps(shown)}: botocore {json.dumps(pairs[i][0])}, model "
              f"{json.dumps(pairs[i][1])}")
    return failures


def main(argv):
    if len(argv) == 3 and argv[1] == "gen":
        with open(argv[2], "w") as f:
            json.dump(generate(), f)
        return 0
    if len(argv) == 5 and argv[1] == "botocore":
        with open(argv[3]) as f:
            seqs = json.load(f)
        with open(argv[4], "w") as f:
            json.dump(run_botocore(argv[2], seqs), f)
        return 0
    if len(argv) == 6 and argv[1] == "compare":
        loaded = []
        for path in argv[2:5]:
            with open(path) as f:
                loaded.append(json.load(f))
        return 1 if compare(loaded[1], loaded[2], argv[5], loaded[0]) else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
