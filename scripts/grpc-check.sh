#!/usr/bin/env bash
# The model's gRPC retry policy and hedging against @grpc/grpc-js 1.14.7
# itself. Seeded sequences of calls on one channel (bursts of UNAVAILABLE
# draining the retry throttle below half its tokens, successes refilling it,
# non-retryable statuses, server pushback of 0 ms and more and below 0 on
# retries and hedges, hedged copies winning, losing and being cancelled,
# hedging with the throttle empty, maxAttempts above grpc-js's cap of 5,
# calls overlapping so that one call's answers move the throttle while
# another waits out its backoff) are fed to grpc-js's own RetryingCall and
# RetryThrottler (driven directly by scripts/grpc-check.js: no network, a
# virtual clock, Math.random returning the sequence's draws) and to the
# model's (examples/policy_trace/, `grpc-js`); for every call the attempts'
# start times, when it ended and with what status, and the throttle's token
# count after each change, are compared (times to 1 µs, tokens to 1e-9).
# The model's `grpc-core` flavour is compared too, for information only: its
# lines say SAME or DIFFER, and show which sequences tell grpc-js and
# C-core's orderings apart.
#
#   scripts/grpc-check.sh              install (npm, into a temporary folder),
#                                      build, compare
#   scripts/grpc-check.sh --keep       keep the temporary folder (the
#                                      sequences, both sides' results)
#   scripts/grpc-check.sh --no-model   no build: grpc-js only, and the
#                                      comparison checked against grpc-js's
#                                      results and copies altered by hand
#
# Prints one PASS/FAIL line per sequence (a FAIL names the first difference,
# both sides' values there) and one SAME/DIFFER line per sequence for
# grpc-core; exits 1 if a PASS/FAIL line fails, 2 on a usage or setup error.
# The temporary folder (grpc-js included) is removed when it exits, whatever
# happened.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

keep=0
model=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --keep) keep=1; shift ;;
    --no-model) model=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

# The release compared.
grpc_js=1.14.7

tmp=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $tmp ]]; then
    if [[ $keep == 1 ]]; then echo "grpc-check: kept $tmp"; else rm -rf "$tmp"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
die() { echo "grpc-check: $*" >&2; exit 2; }

command -v node > /dev/null || die "node is needed"
command -v npm > /dev/null || die "npm is needed"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/grpc-check.XXXXXX")

# grpc-js from the npm registry, that release exactly; its install scripts
# (protobufjs's) are not needed to load it.
npm install --no-audit --no-fund --ignore-scripts --no-save --prefix "$tmp/npm" \
  "@grpc/grpc-js@$grpc_js" > "$tmp/npm.log" 2>&1 ||
  { cat "$tmp/npm.log" >&2; die "could not install @grpc/grpc-js $grpc_js"; }
modules=$tmp/npm/node_modules
check=scripts/grpc-check.js

node "$check" gen "$tmp/sequences.json" || die "the sequences could not be made"
node "$check" grpc-js --modules "$modules" "$tmp/sequences.json" "$tmp/grpc-js.json" ||
  die "grpc-js did not run"

if [[ $model == 0 ]]; then
  node "$check" selftest "$tmp/sequences.json" "$tmp/grpc-js.json" || exit 1
  exit 0
fi

cargo build --locked --quiet --example policy_trace || die "the build failed"
trace=target/debug/examples/policy_trace
"$trace" grpc-js < "$tmp/sequences.json" > "$tmp/model-grpc-js.json" ||
  die "the model's trace (grpc-js) did not run"
"$trace" grpc-core < "$tmp/sequences.json" > "$tmp/model-grpc-core.json" ||
  die "the model's trace (grpc-core) did not run"

failures=0
node "$check" compare "$tmp/sequences.json" "$tmp/grpc-js.json" \
  "$tmp/model-grpc-js.json" "model(grpc-js)-vs-grpc-js" || failures=$((failures + 1))
node "$check" compare "$tmp/sequences.json" "$tmp/grpc-js.json" \
  "$tmp/model-grpc-core.json" "model(grpc-core)-vs-grpc-js" --informational ||
  die "the grpc-core comparison did not run"
[[ $failures == 0 ]] || exit 1
