// The comparison of the library's results with the model's, and its own
// check against copies altered by hand.
'use strict';

const TIME_TOL = 1e-6; // seconds
const TOKEN_TOL = 1e-9;

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

module.exports = { compare, selftest };
