"""The sequences of scripts/grpc-core-check.py: gRPC calls on one channel,
each attempt's answer scripted, on a scale that real scheduling on
loopback does not upset (answers 10-15 ms after their attempt, backoffs
from 100 ms, 30 ms or more between two calls' throttle events whose order
decides something)."""

# The model's draw: the middle of C-core's jitter.
DRAW = 0.5


class SequenceError(Exception):
    """A sequence that scripts too few answers."""



def A(status, after_ms, pushback_ms=None):
    return {"status": status, "after": after_ms / 1000, "pushback_ms": pushback_ms}


def U(after_ms, pb=None):
    return A("UNAVAILABLE", after_ms, pb)


def OK(after_ms):
    return A("OK", after_ms)


def INTERNAL(after_ms):
    return A("INTERNAL", after_ms)


def UNKNOWN(after_ms):
    return A("UNKNOWN", after_ms)


def fill(n, a):
    return [dict(a) for _ in range(n)]


RETRY = {"max_attempts": 4, "initial_backoff": 0.1, "max_backoff": 1.0, "multiplier": 2.0}
THROTTLE = {"max_tokens": 10, "token_ratio": 0.1}
BIG = {"max_tokens": 100, "token_ratio": 0.1}
# tokenRatio 1 written "1.0": see retry-token-ratio-written-1.
RATIO_1 = {"max_tokens": 10, "token_ratio": 1.0}


def retry(**p):
    return {**RETRY, **p}


def sequence(name, policy, throttle, calls, known=None):
    out = []
    for i, (start_ms, attempts) in enumerate(calls):
        if len(attempts) < policy["max_attempts"]:
            raise SequenceError(
                f"{name}: call {i} scripts {len(attempts)} answers, "
                f"fewer than {policy['max_attempts']}"
            )
        out.append({"start": start_ms / 1000, "attempts": attempts})
    # One draw per possible retry, all the same: the middle of the jitter.
    n = sum(len(c["attempts"]) - 1 for c in out)
    seq = {
        "name": name,
        "retry": policy,
        "hedging": None,
        "throttle": throttle,
        "calls": out,
        "draws": [DRAW] * n,
    }
    if known:
        seq["known"] = known
    return seq


def drainers(n, start_ms):
    """n calls at once whose one answer, UNAVAILABLE with a negative
    pushback, takes a token and ends the call (no retry): the same for each
    whatever order they land in."""
    return [[start_ms, fill(4, U(10, -1))] for _ in range(n)]


def generate():
    s = []
    T = THROTTLE
    # Two failures, then OK: backoffs 100 and 200 ms.
    s.append(sequence("retry-ok-after-two", retry(), T, [[0, [U(10), U(15), OK(10), OK(10)]]]))
    # Four failures: out of attempts (the throttle, 10 -> 6, still allows).
    s.append(sequence("retry-out-of-attempts", retry(), T, [[0, fill(4, U(10))]]))
    # maxAttempts 7: C-core clamps it to 5. Backoffs 100, 200, 400, 400.
    s.append(sequence("retry-max-attempts-7", retry(max_attempts=7, max_backoff=0.4), BIG,
                      [[0, fill(7, U(10))]]))
    # The backoff capped: 100, 300 -> 250, 250, 250.
    s.append(sequence("retry-backoff-cap",
                      retry(max_attempts=5, max_backoff=0.25, multiplier=3.0), T,
                      [[0, [U(10), U(10), U(10), U(10), OK(10)]]]))
    # Statuses not retryable end the call and take no token: five INTERNAL
    # and UNKNOWN calls would, if they took one each, leave 5 and the sixth
    # call's failure (4, not above 5) would be refused; it retries.
    s.append(sequence("retry-non-retryable", retry(), T, [
        [0, fill(4, INTERNAL(10))],
        [30, fill(4, UNKNOWN(10))],
        [60, fill(4, INTERNAL(10))],
        [90, fill(4, INTERNAL(10))],
        [120, fill(4, UNKNOWN(10))],
        [200, [U(10), OK(10), OK(10), OK(10)]],
        [500, [U(10), INTERNAL(10), OK(10), OK(10)]],
    ]))
    # Pushback >= 0: that delay exactly (beyond maxBackoff too), and the
    # backoff back to its start; 1 ms: at once, nearly; < 0: the call ends
    # there. (0 ms is a known difference, below.)
    s.append(sequence("retry-pushback", retry(max_attempts=5), BIG, [
        [0, [U(10), U(10, 300), U(10), OK(10), OK(10)]],
        [30, [U(10, 1), OK(10), OK(10), OK(10), OK(10)]],
        [60, [U(10), U(10, -1), OK(10), OK(10), OK(10)]],
        [90, [U(10, -1), OK(10), OK(10), OK(10), OK(10)]],
        [700, [U(10, 1200), OK(10), OK(10), OK(10), OK(10)]],
    ]))
    # A burst of four concurrent failing calls: 10 -> 6, all retry (the
    # fourth leaves 6, above 5); their retries (at 90-130 ms, whatever the
    # jitter) fail: 5, 4, 3, 2, all refused at the failure. A call at
    # 400 ms is refused at its first failure (1 left).
    s.append(sequence("retry-burst-drain", retry(), T, [
        *[[0, fill(4, U(10))] for _ in range(4)],
        [400, [U(10), OK(10), OK(10), OK(10)]],
    ]))
    # Drained (ratio 0.5): six at once leave 4; a call is refused at its
    # failure (3); ten successes at once refill it (8); a late call fails
    # twice (7, 6: both above 5) and succeeds on its third attempt.
    s.append(sequence("retry-drain-refill", retry(), {"max_tokens": 10, "token_ratio": 0.5}, [
        *drainers(6, 0),
        [100, [U(10), OK(10), OK(10), OK(10)]],
        *[[200, fill(4, OK(10))] for _ in range(10)],
        [400, [U(10), U(10), OK(10), OK(10)]],
    ]))
    # Two bursts (ratio 1): four drainers leave 6; a burst of three at
    # 100 ms is refused at its failures (5, 4, 3); six successes bring the
    # bucket to 9; a burst of three at 300 ms retries (8, 7, 6), and the
    # retries, 90-130 ms later, are refused at their failures (5, 4, 3).
    s.append(sequence("retry-two-bursts", retry(), RATIO_1, [
        *drainers(4, 0),
        *[[100, fill(4, U(10))] for _ in range(3)],
        *[[200, fill(4, OK(10))] for _ in range(6)],
        *[[300, fill(4, U(10))] for _ in range(3)],
    ]))
    # Where C-core and grpc-js differ: tokens earned during a backoff.
    # Ratio 1; four drainers leave 6; A fails at 60 ms (5, not above 5):
    # C-core refuses it there. B succeeds at 90 ms (6 again): grpc-js, which
    # asks when A's timer fires (140-180 ms), would retry A.
    s.append(sequence("retry-refused-at-failure-refill-after", retry(),
                      RATIO_1, [
        *drainers(4, 0),
        [50, [U(10), OK(10), OK(10), OK(10)]],
        [80, fill(4, OK(10))],
    ]))
    # The other way: tokens lost during a backoff. Three drainers leave 7;
    # A fails at 60 ms (6, above 5): C-core retries it. C fails at 100 ms
    # with a negative pushback (5): grpc-js, asking at A's timer, refuses.
    s.append(sequence("retry-allowed-at-failure-drained-after", retry(),
                      RATIO_1, [
        *drainers(3, 0),
        [50, [U(10), OK(10), OK(10), OK(10)]],
        [90, fill(4, U(10, -1))],
    ]))

    # Known differences: C-core does not do what the model (and gRFC A6)
    # does. Compared and shown on every run, never counted as failures.
    s.append(sequence("retry-pushback-0", retry(), BIG, [[0, [U(10, 0), OK(10), OK(10), OK(10)]]],
        known="C-core 1.85.3 never retries after a pushback of 0 ms: the call waits for its "
              "deadline (StartRetryTimer keeps the handle RunAfter(0) returns, kInvalid, as it "
              "runs the callback at once; OnRetryTimerLocked takes kInvalid for a cancelled "
              "timer and starts no attempt); the model retries at once"))
    # As retry-refused-at-failure-refill-after, then six successes and a
    # call at 200 ms: with tokenRatio 1 the bucket is full again and the
    # call retries; C-core, reading "1" as 0.001, refuses it.
    s.append(sequence("retry-token-ratio-written-1", retry(),
                      {"max_tokens": 10, "token_ratio": 1}, [
        *drainers(4, 0),
        [50, [U(10), OK(10), OK(10), OK(10)]],
        *[[100, fill(4, OK(10))] for _ in range(6)],
        [200, [U(10), OK(10), OK(10), OK(10)]],
    ], known="C-core 1.85.3 reads a tokenRatio written without a decimal point (1, not 1.0) as "
             "thousandths (RetryGlobalConfig::JsonPostLoad multiplies by 1000 only after a '.'): "
             "six successes add 0.006, not 6, and the last call is refused at its failure"))
    return s
