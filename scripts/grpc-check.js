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
const { HarnessError } = require('./grpc-check/common');
const { generate } = require('./grpc-check/sequences');
const { runGrpcJs } = require('./grpc-check/grpc-js');
const { compare, selftest } = require('./grpc-check/compare');

function die(msg) {
  process.stderr.write(`grpc-check: ${msg}\n`);
  process.exit(2);
}

function usage() {
  const src = fs.readFileSync(__filename, 'utf8');
  const m = src.match(/\/\*\n([\s\S]*?)\n \*\//);
  return m[1].split('\n').map(l => l.replace(/^ \* ?/, '')).join('\n') + '\n';
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
