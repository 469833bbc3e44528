// grpc-js's own RetryingCall and RetryThrottler, driven through a fake
// channel on a virtual clock (scripts/grpc-check.js's header says how).
'use strict';

const fs = require('fs');
const path = require('path');
const { HarnessError } = require('./common');

const GRPC_JS_VERSION = '1.14.7';
// Two throttle events of different calls closer than this are a near tie
// whose order a model may see the other way round: warned about.
const NEAR_TIE = 1e-5; // seconds
const METHOD = '/retrystorm.Lab/Call';
const SERVICE = 'retrystorm.Lab';

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

module.exports = { runGrpcJs };
