#!/usr/bin/env node
/*
 * gRPC's client retry policy and hedging as @grpc/grpc-js does them, driven
 * directly, for scripts/grpc-check.sh.
 *
 *   grpc-check.js gen OUT                 seeded sequences of calls and their
 *                                         attempts' answers, JSON
 *   grpc-check.js grpc-js [--modules DIR] IN OUT
 *                                         run them through the grpc-js found in
 *                                         DIR (a node_modules folder) or on
 *                                         NODE_PATH
 *   grpc-check.js compare SEQS LIB MODEL LABEL [--informational]
 *                                         one PASS/FAIL line per sequence (with
 *                                         --informational: SAME/DIFFER, exit 0)
 *   grpc-check.js selftest SEQS LIB       the comparison against LIB itself and
 *                                         against copies altered by hand (it
 *                                         must pass the first and fail these)
 *
 * Nothing here talks to a network. Each sequence gets one channel's worth of
 * grpc-js objects: a RetryThrottler built from the sequence's retryThrottling
 * as the channel builds it, the channel's MessageBufferTracker, and a
 * CallConfig that grpc-js's own service-config validation and default config
 * selector make from a service config carrying the sequence's retryPolicy or
 * hedgingPolicy. Each call is a grpc-js RetryingCall, started, sent one
 * message and half-closed as a unary call is; every decision (retry or not,
 * when, hedge or not, when to end, with what status, what the throttle does)
 * is the library's. What stands in for the rest of the channel is a fake
 * whose createLoadBalancingCall returns child calls that answer as the
 * sequence scripts them: an OK as headers, a message and an OK status; a
 * failure as a trailers-only status, with grpc-retry-pushback-ms when the
 * sequence gives a pushback. A cancelled child answers CANCELLED, as a
 * LoadBalancingCall does.
 *
 * Time is a virtual clock: setTimeout, clearTimeout and Date.now are replaced
 * for the run, and a timer fires at exactly the delay grpc-js asked for (a
 * fractional millisecond kept, a 0 ms timer at the same instant: Node itself
 * would wait at least 1 ms and fire on a millisecond clock). process.nextTick
 * work (grpc-js hands a call's status to its listener on the next tick) runs
 * at the instant that scheduled it. Math.random returns the sequence's draws in
 * order; running out of them, or a call starting more attempts than the
 * sequence scripts answers for, is a harness error (exit 2).
 *
 * Output, a JSON array in the input's order: per call the start times of the
 * attempts it sent (hedged copies included), when its final status reached
 * the caller and that status' name; and the throttle's token count each time
 * it changed (an update that leaves it where it was, a success at the cap or
 * a failure at 0, is not a change), with the time. Times in seconds.
 */
'use strict';

const fs = require('fs');
const path = require('path');

const GRPC_JS_VERSION = '1.14.7';
const SEED = 20260514n;
const TIME_TOL = 1e-6; // seconds
const TOKEN_TOL = 1e-9;
// Two throttle events of different calls closer than this are a near tie
// whose order a model may see the other way round: warned about.
const NEAR_TIE = 1e-5; // seconds
const METHOD = '/retrystorm.Lab/Call';
const SERVICE = 'retrystorm.Lab';

class HarnessError extends Error {}

function die(msg) {
  process.stderr.write(`grpc-check: ${msg}\n`);
  process.exit(2);
}

function usage() {
  const src = fs.readFileSync(__filename, 'utf8');
  const m = src.match(/\/\*\n([\s\S]*?)\n \*\//);
  return m[1].split('\n').map(l => l.replace(/^ \* ?/, '')).join('\n') + '\n';
}

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

// --- grpc-js, driven ---------------------------------------------------------

function loadGrpcJs(modulesDir) {
  let base;
  try {
    base = modulesDir
      ? path.join(path.resolve(modulesDir), '@grpc', 'grpc-js')
      : path.dirname(require.resolve('@grpc/grpc-js/package.json'));
  } catch (e) {
    throw new HarnessError('@grpc/grpc-js not found (give --modules DIR or NODE_PATH)');
  }
  const pkgFile = path.join(base, 'package.json');
  if (!fs.existsSync(pkgFile)) throw new HarnessError(`no @grpc/grpc-js in ${base}`);
  const version = JSON.parse(fs.readFileSync(pkgFile, 'utf8')).version;
  if (version !== GRPC_JS_VERSION) {
    throw new HarnessError(`@grpc/grpc-js ${version} found in ${base}, ${GRPC_JS_VERSION} wanted`);
  }
  const mod = f => require(path.join(base, 'build', 'src', f));
  return {
    version,
    ...mod('retrying-call.js'), // RetryingCall, RetryThrottler, MessageBufferTracker
    ...mod('service-config.js'), // validateServiceConfig
    ...mod('resolving-load-balancer.js'), // getDefaultConfigSelector
    ...mod('metadata.js'), // Metadata
    ...mod('constants.js'), // Status
    ...mod('call-number.js'), // getNextCallNumber
  };
}

// A duration as a service config writes it: "0.1s".
function duration(sec) {
  const s = `${+sec.toFixed(9)}s`;
  if (!/^\d+(\.\d{1,9})?s$/.test(s)) throw new HarnessError(`cannot write ${sec} s as a duration`);
  return s;
}

function serviceConfig(seq) {
  const method = { name: [{ service: SERVICE }] };
  if (!!seq.retry === !!seq.hedging) {
    throw new HarnessError(`${seq.name}: exactly one of retry and hedging must be given`);
  }
  if (seq.retry) {
    method.retryPolicy = {
      maxAttempts: seq.retry.max_attempts,
      initialBackoff: duration(seq.retry.initial_backoff),
      maxBackoff: duration(seq.retry.max_backoff),
      backoffMultiplier: seq.retry.multiplier,
      retryableStatusCodes: ['UNAVAILABLE'],
    };
  } else {
    method.hedgingPolicy = {
      maxAttempts: seq.hedging.max_attempts,
      hedgingDelay: duration(seq.hedging.hedging_delay),
      nonFatalStatusCodes: ['UNAVAILABLE'],
    };
  }
  const sc = { methodConfig: [method] };
  if (seq.throttle) {
    sc.retryThrottling = { maxTokens: seq.throttle.max_tokens, tokenRatio: seq.throttle.token_ratio };
  }
  return sc;
}

// Virtual time: a queue of timers, fired in (time, creation) order.
class Clock {
  constructor() {
    this.now = 0; // ms
    this.queue = [];
    this.ids = 0;
    this.owner = null; // the call whose event is running
  }
  schedule(atMs, fn, owner = this.owner) {
    const clock = this;
    const timer = {
      at: atMs,
      id: ++this.ids,
      fn,
      owner,
      cancelled: false,
      unref() { return this; },
      ref() { return this; },
      hasRef() { return true; },
      refresh() {
        this.cancelled = true;
        return clock.schedule(clock.now + (this.at - this.created), this.fn, this.owner);
      },
      [Symbol.toPrimitive]() { return this.id; },
    };
    timer.created = this.now;
    this.queue.push(timer);
    return timer;
  }
  next() {
    let best = -1;
    for (let i = 0; i < this.queue.length; i++) {
      const t = this.queue[i];
      if (best < 0 || t.at < this.queue[best].at ||
          (t.at === this.queue[best].at && t.id < this.queue[best].id)) best = i;
    }
    return best < 0 ? null : this.queue.splice(best, 1)[0];
  }
}

async function runOne(g, seq, clock, realSetImmediate) {
  const out = { name: seq.name, calls: [], tokens: [] };
  const throttleOps = []; // [t, call, 'read'|'write'] for the near-tie check
  const warnings = [];
  let error = null;
  const fail = msg => { if (!error) error = new HarnessError(`${seq.name}: ${msg}`); };

  const sc = g.validateServiceConfig(serviceConfig(seq));
  const callConfig = g.getDefaultConfigSelector(sc).invoke(METHOD, new g.Metadata(), 0);
  if (!callConfig.methodConfig.retryPolicy && !callConfig.methodConfig.hedgingPolicy) {
    throw new HarnessError(`${seq.name}: the config selector found no policy for ${METHOD}`);
  }
  // As the channel does when the resolver hands it a service config.
  const throttler = sc.retryThrottling
    ? new g.RetryThrottler(sc.retryThrottling.maxTokens, sc.retryThrottling.tokenRatio, undefined)
    : undefined;
  if (throttler) {
    if (typeof throttler.tokens !== 'number') throw new HarnessError('RetryThrottler has no tokens field');
    let last = throttler.tokens;
    for (const m of ['addCallSucceeded', 'addCallFailed']) {
      const own = throttler[m].bind(throttler);
      throttler[m] = () => {
        own();
        throttleOps.push([clock.now / 1000, clock.owner, 'write']);
        if (throttler.tokens !== last) {
          last = throttler.tokens;
          out.tokens.push({ t: clock.now / 1000, tokens: last });
        }
      };
    }
    const canRetry = throttler.canRetryCall.bind(throttler);
    throttler.canRetryCall = () => {
      throttleOps.push([clock.now / 1000, clock.owner, 'read']);
      return canRetry();
    };
  }
  // The channel's buffer limits, their defaults (internal-channel.ts).
  const bufferTracker = new g.MessageBufferTracker(1 << 24, 1 << 20);

  let draw = 0;
  Math.random = () => {
    if (draw >= seq.draws.length) {
      fail(`Math.random called ${draw + 1} times, only ${seq.draws.length} draws given`);
      return 0.5;
    }
    return seq.draws[draw++];
  };

  seq.calls.forEach((spec, ci) => {
    const rec = { attempts: [], end: null, status: null };
    out.calls.push(rec);
    clock.schedule(spec.start * 1000, () => {
      let children = 0;
      const channel = {
        getOptions: () => ({}),
        getTarget: () => 'dns:///retry-storm.test',
        createLoadBalancingCall: (config, method, host, credentials, deadline, callNumber) => {
          const k = children++;
          return fakeChild(g, clock, spec.attempts[k], callNumber, rec, () =>
            fail(`call ${ci} started attempt ${k + 1}, only ${spec.attempts.length} answers scripted`));
        },
      };
      const call = new g.RetryingCall(channel, callConfig, METHOD, 'retry-storm.test', undefined,
        Infinity, g.getNextCallNumber(), bufferTracker, throttler);
      call.start(new g.Metadata(), {
        onReceiveMetadata() {},
        onReceiveMessage() {},
        onReceiveStatus(status) {
          if (rec.end === null) {
            rec.end = clock.now / 1000;
            rec.status = g.Status[status.code];
          } else {
            warnings.push(`grpc-js gave call ${ci} a second status (${g.Status[status.code]}) at ` +
              `${(clock.now / 1000).toFixed(6)} s; the first (${rec.status} at ${rec.end}) kept`);
          }
        },
      });
      call.sendMessageWithContext({}, Buffer.from('ping'));
      call.halfClose();
      call.startRead();
    }, ci);
  });

  for (let ev = clock.next(); ev; ev = clock.next()) {
    if (ev.cancelled) continue;
    clock.now = ev.at;
    clock.owner = ev.owner;
    ev.fn();
    // process.nextTick work and promises, at this instant.
    await new Promise(resolve => realSetImmediate(resolve));
    if (error) throw error;
  }
  out.calls.forEach((c, ci) => { if (c.end === null) fail(`call ${ci} never ended`); });
  if (error) throw error;

  throttleOps.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < throttleOps.length; i++) {
    const [t0, c0, k0] = throttleOps[i - 1];
    const [t1, c1, k1] = throttleOps[i];
    if (c0 !== c1 && t1 - t0 < NEAR_TIE && (k0 === 'write' || k1 === 'write')) {
      warnings.push(`near tie: call ${c0} (${k0}) and call ${c1} (${k1}) use the throttle ` +
        `${((t1 - t0) * 1e6).toFixed(3)} µs apart at ${t0.toFixed(6)} s`);
    }
  }
  for (const w of warnings) process.stderr.write(`grpc-check: warning: ${seq.name}: ${w}\n`);
  return out;
}

function fakeChild(g, clock, answer, callNumber, rec, overrun) {
  let listener = null;
  let timer = null;
  let done = false;
  return {
    start(metadata, l) {
      listener = l;
      rec.attempts.push(clock.now / 1000);
      if (!answer) {
        overrun();
        done = true;
        return;
      }
      timer = clock.schedule(clock.now + answer.after * 1000, () => {
        if (done) return;
        done = true;
        const code = g.Status[answer.status];
        if (code === undefined) throw new HarnessError(`unknown status ${answer.status}`);
        if (code === g.Status.OK) {
          listener.onReceiveMetadata(new g.Metadata());
          listener.onReceiveMessage(Buffer.from('pong'));
          listener.onReceiveStatus({ code, details: 'OK', metadata: new g.Metadata(), progress: 'PROCESSED' });
        } else {
          const trailers = new g.Metadata();
          if (answer.pushback_ms !== null && answer.pushback_ms !== undefined) {
            trailers.set('grpc-retry-pushback-ms', String(answer.pushback_ms));
          }
          listener.onReceiveStatus({ code, details: answer.status, metadata: trailers, progress: 'PROCESSED' });
        }
      });
    },
    cancelWithStatus(code, details) {
      if (done) return;
      done = true;
      if (timer) timer.cancelled = true;
      listener.onReceiveStatus({ code, details, metadata: new g.Metadata(), progress: 'PROCESSED' });
    },
    sendMessageWithContext(context) {
      if (context.callback) process.nextTick(() => context.callback());
    },
    halfClose() {},
    startRead() {},
    getCallNumber: () => callNumber,
    getPeer: () => '127.0.0.1:1',
    getDeadlineInfo: () => [],
    getAuthContext: () => null,
    setCredentials() {},
    getMethod: () => METHOD,
    getHost: () => 'retry-storm.test',
  };
}

async function runGrpcJs(seqs, modulesDir) {
  const g = loadGrpcJs(modulesDir);
  const saved = {
    setTimeout: global.setTimeout,
    clearTimeout: global.clearTimeout,
    dateNow: Date.now,
    random: Math.random,
  };
  const realSetImmediate = global.setImmediate;
  const results = [];
  try {
    for (const seq of seqs) {
      const clock = new Clock();
      global.setTimeout = (fn, delay, ...args) => {
        let d = Number(delay);
        if (!(d >= 0)) d = 0; // NaN and negatives: at once (Node: 1 ms)
        return clock.schedule(clock.now + d, () => fn(...args));
      };
      global.clearTimeout = t => { if (t && typeof t === 'object') t.cancelled = true; };
      Date.now = () => clock.now;
      results.push(await runOne(g, seq, clock, realSetImmediate));
    }
  } finally {
    global.setTimeout = saved.setTimeout;
    global.clearTimeout = saved.clearTimeout;
    Date.now = saved.dateNow;
    Math.random = saved.random;
  }
  return results;
}

// --- comparison ---------------------------------------------------------------

const fmt = x => (typeof x === 'number' ? x.toFixed(6) : String(x));
const closeT = (a, b) => typeof a === 'number' && typeof b === 'number' && Math.abs(a - b) <= TIME_TOL;
const closeK = (a, b) => typeof a === 'number' && typeof b === 'number' && Math.abs(a - b) <= TOKEN_TOL;

// The first difference between the library's result and the model's, or null.
function firstDifference(lib, mod) {
  if (!Array.isArray(lib.calls) || !Array.isArray(mod.calls)) return 'no calls array';
  if (lib.calls.length !== mod.calls.length) {
    return `${lib.calls.length} calls from grpc-js, ${mod.calls.length} from the model`;
  }
  for (let i = 0; i < lib.calls.length; i++) {
    const a = lib.calls[i];
    const b = mod.calls[i];
    const la = a.attempts || [];
    const lb = b.attempts || [];
    for (let k = 0; k < Math.max(la.length, lb.length); k++) {
      if (k >= la.length || k >= lb.length || !closeT(la[k], lb[k])) {
        return `call ${i} attempt ${k + 1}: grpc-js ${k < la.length ? `at ${fmt(la[k])}` : 'none'}, ` +
          `model ${k < lb.length ? `at ${fmt(lb[k])}` : 'none'} (grpc-js [${la.map(fmt)}], model [${lb.map(fmt)}])`;
      }
    }
    if (a.status !== b.status || !closeT(a.end, b.end)) {
      return `call ${i} ended: grpc-js ${a.status} at ${fmt(a.end)}, model ${b.status} at ${fmt(b.end)}`;
    }
  }
  const ta = lib.tokens || [];
  const tb = mod.tokens || [];
  for (let k = 0; k < Math.max(ta.length, tb.length); k++) {
    const x = ta[k];
    const y = tb[k];
    if (!x || !y || !closeT(x.t, y.t) || !closeK(x.tokens, y.tokens)) {
      const show = e => (e ? `${e.tokens} at ${fmt(e.t)}` : 'none');
      return `token change ${k + 1} of ${ta.length}/${tb.length}: grpc-js ${show(x)}, model ${show(y)}`;
    }
  }
  return null;
}

function summary(r) {
  const attempts = r.calls.reduce((s, c) => s + c.attempts.length, 0);
  const ok = r.calls.filter(c => c.status === 'OK').length;
  const last = r.tokens.length ? r.tokens[r.tokens.length - 1].tokens : null;
  return `${r.calls.length} calls, ${attempts} attempts, ${ok} OK` +
    (last === null ? '' : `, tokens end at ${+last.toFixed(9)}`);
}

function compare(seqs, lib, mod, label, informational) {
  const byName = list => new Map((Array.isArray(list) ? list : []).map(r => [r.name, r]));
  const L = byName(lib);
  const M = byName(mod);
  let failures = 0;
  const lines = [];
  for (const { name } of seqs) {
    const a = L.get(name);
    const b = M.get(name);
    const diff = !a ? 'no result from grpc-js' : !b ? 'no result from the model' : firstDifference(a, b);
    if (diff === null) {
      lines.push(`${informational ? 'SAME' : 'PASS'} ${label} ${name}: ${summary(a)}`);
    } else {
      failures += 1;
      lines.push(`${informational ? 'DIFFER' : 'FAIL'} ${label} ${name}: first difference: ${diff}`);
    }
  }
  return { failures, lines };
}

// The comparison must pass the library against itself and fail it against
// copies altered by hand (and pass copies altered within the tolerances).
function selftest(seqs, lib) {
  const copy = () => JSON.parse(JSON.stringify(lib));
  const pick = (r, pred) => r.find(pred);
  const cases = [];
  cases.push(['itself', copy(), true]);
  let c = copy();
  pick(c, r => r.calls.some(x => x.attempts.length > 1)).calls.find(x => x.attempts.length > 1).attempts[1] += 2e-6;
  cases.push(['a retry 2 µs late', c, false]);
  c = copy();
  pick(c, r => r.calls.some(x => x.attempts.length > 1)).calls.find(x => x.attempts.length > 1).attempts[1] += 5e-7;
  cases.push(['a retry 0.5 µs late (within tolerance)', c, true]);
  c = copy();
  pick(c, r => r.calls.some(x => x.attempts.length > 1)).calls.find(x => x.attempts.length > 1).attempts.pop();
  cases.push(['an attempt missing', c, false]);
  c = copy();
  pick(c, r => r.calls.some(x => x.status === 'UNAVAILABLE')).calls.find(x => x.status === 'UNAVAILABLE').status = 'OK';
  cases.push(['a status changed', c, false]);
  c = copy();
  c[0].calls[0].end += 1e-3;
  cases.push(['an end 1 ms late', c, false]);
  c = copy();
  pick(c, r => r.tokens.length > 0).tokens[0].tokens += 1e-8;
  cases.push(['a token count off by 1e-8', c, false]);
  c = copy();
  pick(c, r => r.tokens.length > 0).tokens[0].tokens += 1e-10;
  cases.push(['a token count off by 1e-10 (within tolerance)', c, true]);
  c = copy();
  pick(c, r => r.tokens.length > 0).tokens.pop();
  cases.push(['a token change missing', c, false]);
  c = copy();
  c.pop();
  cases.push(['a sequence missing', c, false]);
  let bad = 0;
  for (const [what, model, shouldPass] of cases) {
    const { failures, lines } = compare(seqs, lib, model, 'selftest', false);
    const passed = failures === 0;
    if (passed === shouldPass) {
      const shown = passed ? '' : `: ${lines.find(l => l.startsWith('FAIL'))}`;
      console.log(`PASS selftest ${what}${shown}`);
    } else {
      bad += 1;
      console.log(`FAIL selftest ${what}: the comparison ${passed ? 'passed' : 'failed'} it` +
        (passed ? '' : `: ${lines.find(l => l.startsWith('FAIL'))}`));
    }
  }
  return bad;
}

// --- main -----------------------------------------------------------------------

function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new HarnessError(`cannot read ${file}: ${e.message}`);
  }
}

async function main(argv) {
  const [cmd, ...rest] = argv;
  if (cmd === 'gen' && rest.length === 1) {
    fs.writeFileSync(rest[0], JSON.stringify(generate(), null, 1) + '\n');
    return 0;
  }
  if (cmd === 'grpc-js') {
    let modules = null;
    const args = [];
    for (let i = 0; i < rest.length; i++) {
      if (rest[i] === '--modules' && i + 1 < rest.length) modules = rest[++i];
      else args.push(rest[i]);
    }
    if (args.length === 2) {
      const seqs = readJson(args[0]);
      const results = await runGrpcJs(seqs, modules);
      fs.writeFileSync(args[1], JSON.stringify(results, null, 1) + '\n');
      return 0;
    }
  }
  if (cmd === 'compare' && (rest.length === 4 || (rest.length === 5 && rest[4] === '--informational'))) {
    const [seqs, lib, mod] = rest.slice(0, 3).map(readJson);
    const informational = rest.length === 5;
    const { failures, lines } = compare(seqs, lib, mod, rest[3], informational);
    for (const l of lines) console.log(l);
    return failures && !informational ? 1 : 0;
  }
  if (cmd === 'selftest' && rest.length === 2) {
    const [seqs, lib] = rest.map(readJson);
    return selftest(seqs, lib) ? 1 : 0;
  }
  if (cmd === '-h' || cmd === '--help') {
    process.stdout.write(usage());
    return 0;
  }
  process.stderr.write(usage());
  return 2;
}

main(process.argv.slice(2)).then(
  rc => process.exit(rc),
  e => die(e instanceof HarnessError ? e.message : e.stack || String(e))
);
