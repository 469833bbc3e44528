// The seeded sequences of calls that scripts/grpc-check.js feeds to grpc-js
// and to the model.
'use strict';

const SEED = 20260514n;

// --- a seeded generator ------------------------------------------------------

// splitmix64: small, seeded, the same on every machine.
class Rng {
  constructor(seed) {
    this.s = BigInt.asUintN(64, seed);
  }
  next64() {
    this.s = BigInt.asUintN(64, this.s + 0x9e3779b97f4a7c15n);
    let z = this.s;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    return z ^ (z >> 31n);
  }
  // A multiple of 2^-52 in [0, 1): exact in an f64, the draw a model reads.
  draw() {
    return Number(this.next64() >> 12n) / 2 ** 52;
  }
  int(lo, hi) {
    // lo..hi inclusive
    return lo + Number(this.next64() % BigInt(hi - lo + 1));
  }
  chance(p) {
    return this.draw() < p;
  }
  pick(weights) {
    const entries = Object.entries(weights);
    let total = 0;
    for (const [, w] of entries) total += w;
    let x = this.draw() * total;
    for (const [k, w] of entries) {
      if (x < w) return k;
      x -= w;
    }
    return entries[entries.length - 1][0];
  }
}

// --- sequences ---------------------------------------------------------------

const A = (status, afterMs, pushbackMs = null) => ({
  status,
  after: afterMs / 1000,
  pushback_ms: pushbackMs,
});
const U = (afterMs, pb = null) => A('UNAVAILABLE', afterMs, pb);
const OK = afterMs => A('OK', afterMs);
const INTERNAL = afterMs => A('INTERNAL', afterMs);
const UNKNOWN = afterMs => A('UNKNOWN', afterMs);

const RETRY = { max_attempts: 4, initial_backoff: 0.1, max_backoff: 1.0, multiplier: 2.0 };
const THROTTLE = { max_tokens: 10, token_ratio: 0.1 };

// Call i of a sequence starts at startMs plus i * 12.3 µs: answers scripted in
// whole milliseconds then never land on the same instant as another call's.
function phased(i, startMs) {
  return (Math.round(startMs * 10000) + 123 * i) / 1e7;
}

function sequence(name, policy, throttle, calls, rng) {
  const retry = policy.kind === 'retry' ? policy.p : null;
  const hedging = policy.kind === 'hedging' ? policy.p : null;
  const maxAttempts = (retry || hedging).max_attempts;
  const out = calls.map(([startMs, attempts], i) => {
    if (attempts.length < maxAttempts) {
      throw new Error(`${name}: call ${i} scripts ${attempts.length} answers, fewer than ${maxAttempts}`);
    }
    return { start: phased(i, startMs), attempts };
  });
  // One draw per retry at most (hedging draws none), all the same value: the
  // model's users draw from streams of their own, so the two sides agree on
  // a draw's value, not on the order of draws across overlapping calls.
  const n = retry ? out.reduce((s, c) => s + c.attempts.length - 1, 0) : 0;
  const u = rng.draw();
  const draws = Array.from({ length: n }, () => u);
  return { name, retry, hedging, throttle, calls: out, draws };
}

const retry = p => ({ kind: 'retry', p: { ...RETRY, ...p } });
const hedging = p => ({ kind: 'hedging', p: { max_attempts: 3, hedging_delay: 0.05, ...p } });
const fill = (n, a) => Array.from({ length: n }, () => a);

function randomCalls(rng, n, spanMs, maxAttempts, weights, pushbacks) {
  const calls = [];
  let t = 0;
  for (let i = 0; i < n; i++) {
    t += rng.int(1, Math.max(1, Math.round((2 * spanMs) / n)));
    const attempts = [];
    for (let k = 0; k < maxAttempts; k++) {
      const kind = rng.pick(weights);
      const after = rng.int(2, 60);
      let pb = null;
      if (kind === 'UNAVAILABLE' && pushbacks && rng.chance(pushbacks)) {
        pb = rng.chance(0.2) ? -1 : rng.int(0, 300);
      }
      attempts.push(A(kind, after, pb));
    }
    calls.push([t, attempts]);
  }
  return calls;
}

function generate() {
  const rng = new Rng(SEED);
  const s = [];
  const T = THROTTLE;

  // Retries.
  s.push(sequence('retry-ok-after-two', retry({}), T, [[0, [U(5), U(5), OK(5), OK(5)]]], rng));
  // Every failure takes a token, the last one (out of attempts) too.
  s.push(sequence('retry-out-of-attempts', retry({}), T, [[0, fill(4, U(5))]], rng));
  // Eight calls fail at once: the bucket falls to 2, below max/2, and the
  // retries are refused when their timers fire.
  s.push(sequence('retry-burst-drain', retry({}), T,
    Array.from({ length: 8 }, (_, i) => [2 * i, fill(4, U(3))]), rng));
  // Drained, then successes refill it (ratio 0.5) and a late call retries.
  s.push(sequence('retry-drain-refill', retry({}), { max_tokens: 10, token_ratio: 0.5 }, [
    ...Array.from({ length: 6 }, (_, i) => [2 * i, fill(4, U(3))]),
    ...Array.from({ length: 10 }, (_, i) => [400 + 20 * i, fill(4, OK(4))]),
    [700, [U(5), U(5), OK(5), OK(5)]],
  ], rng));
  // The throttle asked when the timer fires, not at the failure. Four
  // failures with a negative pushback (a token each, no retry) leave 6; A
  // fails at 15 ms (5 left: refused if asked there); B succeeds at 30 ms
  // (6 again, ratio 1); A's timer fires at 95..135 ms and A retries.
  s.push(sequence('retry-decided-at-timer-allows', retry({}), { max_tokens: 10, token_ratio: 1 }, [
    ...Array.from({ length: 4 }, (_, i) => [i, fill(4, U(2, -1))]),
    [10, [U(5), OK(5), OK(5), OK(5)]],
    [20, fill(4, OK(10))],
  ], rng));
  // The other way: three such failures leave 7; A fails at 15 ms (6 left:
  // allowed if asked there); C fails at 25 ms with a negative pushback (5
  // left); A's timer finds 5, not above 5: A ends then, UNAVAILABLE.
  s.push(sequence('retry-decided-at-timer-refuses', retry({}), { max_tokens: 10, token_ratio: 1 }, [
    ...Array.from({ length: 3 }, (_, i) => [i, fill(4, U(2, -1))]),
    [10, [U(5), OK(5), OK(5), OK(5)]],
    [20, fill(4, U(5, -1))],
  ], rng));
  // Statuses not retryable: no token taken, no retry.
  s.push(sequence('retry-non-retryable', retry({}), T, [
    [0, fill(4, INTERNAL(5))],
    [10, [U(5), INTERNAL(5), OK(5), OK(5)]],
    [20, fill(4, UNKNOWN(5))],
    [30, [U(5), U(5), UNKNOWN(5), OK(5)]],
  ], rng));
  // Pushback >= 0: the delay exactly, the backoff back to its start; 0 at
  // once; < 0: the call ends at that answer. A bucket large enough that the
  // throttle never refuses.
  s.push(sequence('retry-pushback', retry({ max_attempts: 5 }), { max_tokens: 100, token_ratio: 0.1 }, [
    [0, [U(5), U(5), U(5, 30), U(5), OK(5)]],
    [3, [U(7, 0), OK(5), OK(5), OK(5), OK(5)]],
    [9, [U(4), U(6, -1), OK(5), OK(5), OK(5)]],
    [1200, [U(5, 250), U(5, 1), OK(5), OK(5), OK(5)]],
  ], rng));
  // maxAttempts 7: grpc-js allows 5 at most.
  s.push(sequence('retry-max-attempts-7', retry({ max_attempts: 7, initial_backoff: 0.05 }),
    { max_tokens: 100, token_ratio: 0.1 }, [[0, fill(7, U(5))]], rng));
  // The backoff capped: 0.2, 0.6 -> 0.5, 0.5, 0.5.
  s.push(sequence('retry-backoff-cap', retry({
    max_attempts: 5, initial_backoff: 0.2, max_backoff: 0.5, multiplier: 3,
  }), T, [[0, [U(5), U(5), U(5), U(5), OK(5)]]], rng));

  // Hedging.
  s.push(sequence('hedge-second-copy-wins', hedging({}), T,
    [[0, [OK(200), OK(30), OK(30)]]], rng));
  // A non-fatal failure starts the next copy at once.
  s.push(sequence('hedge-non-fatal-next-at-once', hedging({ max_attempts: 4, hedging_delay: 0.5 }), T,
    [[0, [U(10), U(20), OK(40), OK(40)]]], rng));
  // A pushback delays the copy it starts; the hedging timer runs on.
  s.push(sequence('hedge-pushback', hedging({ max_attempts: 4, hedging_delay: 0.1 }), T,
    [[0, [U(10, 250), OK(300), OK(150), OK(100)]],
     [1000, [U(10, 20), U(15, 0), OK(50), OK(50)]]], rng));
  // A negative pushback ends the call and cancels the copies.
  s.push(sequence('hedge-negative-pushback', hedging({}), T,
    [[0, [OK(300), U(20, -1), OK(300)]]], rng));
  // A fatal status ends the call and cancels the copies.
  s.push(sequence('hedge-fatal', hedging({}), T,
    [[0, [OK(300), INTERNAL(20), OK(300)]]], rng));
  // All copies fail: the call ends at the last failure.
  s.push(sequence('hedge-all-fail', hedging({}), T,
    [[0, fill(3, U(200))]], rng));
  // The throttle drained by hedged failures (to 0), the next calls still hedge.
  s.push(sequence('hedge-throttle-low', hedging({ max_attempts: 4 }), T, [
    ...Array.from({ length: 3 }, (_, i) => [2 * i, fill(4, U(120))]),
    [400, [OK(120), OK(30), OK(200), OK(200)]],
    [700, [U(10), OK(120), OK(200), OK(200)]],
  ], rng));
  // maxAttempts 7: grpc-js sends 5 copies at most.
  s.push(sequence('hedge-max-attempts-7', hedging({ max_attempts: 7, hedging_delay: 0.02 }),
    { max_tokens: 100, token_ratio: 0.1 }, [[0, fill(7, U(500))]], rng));

  // Seeded storms: overlapping calls, a mix of answers.
  s.push(sequence('retry-storm-a', retry({}), T,
    randomCalls(rng, 30, 600, 4, { OK: 4, UNAVAILABLE: 5, INTERNAL: 1 }, 0), rng));
  s.push(sequence('retry-storm-b', retry({ max_attempts: 5, initial_backoff: 0.05, max_backoff: 0.4 }),
    { max_tokens: 20, token_ratio: 0.5 },
    randomCalls(rng, 50, 1500, 5, { OK: 5, UNAVAILABLE: 6, UNKNOWN: 1 }, 0.15), rng));
  s.push(sequence('hedge-storm', hedging({ max_attempts: 4, hedging_delay: 0.03 }),
    { max_tokens: 20, token_ratio: 0.5 },
    randomCalls(rng, 30, 800, 4, { OK: 5, UNAVAILABLE: 6, INTERNAL: 1 }, 0.15), rng));
  return s;
}

module.exports = { generate };
