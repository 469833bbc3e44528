#!/usr/bin/env bash
# The model's gRPC retry policy as grpc-go and C-core do it (`grpc-core`)
# against C-core itself: grpcio 1.85.3, Python's gRPC, C-core inside. C-core
# has no clock or random source to replace, so this check runs for real: a
# grpcio server and a grpcio client on 127.0.0.1, in real time. Sequences of
# calls on one channel (a retry succeeding after failures, out of attempts,
# maxAttempts 7 clamped to 5, the backoff capped, non-retryable statuses
# taking no token, server pushback of 1 ms and more (beyond maxBackoff too)
# waited exactly and resetting the backoff, a negative pushback ending the
# call, bursts of concurrent failing calls draining the retry throttle below
# half its tokens so that calls are refused at the failure itself,
# successes refilling it, and the two sequences where C-core and grpc-js
# part: tokens earned or lost by other calls during a call's backoff) are
# made by scripts/grpc-core-check.py, answered by its server as they script
# and run through a fresh channel each (a fresh throttle), and fed to the
# model (examples/policy_trace/, `grpc-core`, its draw pinned at the middle
# of the jitter). Per call the number of attempts and the final status must
# be the same; the first attempt within 15 ms, each retry's gap after the
# attempt before it within 15 ms plus 20 % of the model's backoff there (C-core
# jitters it by 0.8-1.2; a pushback is waited exactly, so 15 ms plus 2 % of
# it for C-core's timer, seen up to 21 ms late after 1.2 s), and
# the end likewise. Two sequences show what C-core does unlike the model
# (a pushback of 0 ms leaves the call hanging until its deadline; a
# tokenRatio written without a decimal point is read as thousandths): their
# lines say KNOWN and never fail. The model's `grpc-js` flavour is compared
# too, for information only: its lines say SAME or DIFFER, and show which
# sequences tell C-core and grpc-js apart. Real time wants a machine not
# saturated by other work: the run takes a higher priority where that is
# allowed (as root), and a FAIL on a call's first attempt (which no C-core
# decision moves) says that the harness itself was late.
#
#   scripts/grpc-core-check.sh              install (pip, into a temporary
#                                           folder), build, run, compare
#   scripts/grpc-core-check.sh --keep       keep the temporary folder (the
#                                           sequences, both sides' results)
#   scripts/grpc-core-check.sh --no-model   no build: grpcio only, and the
#                                           comparison checked against
#                                           grpcio's results and copies
#                                           altered by hand
#
# Prints one PASS/FAIL/KNOWN line per sequence (a FAIL names the first
# difference, both sides' values there) and one SAME/DIFFER line per
# sequence for grpc-js; exits 1 if a PASS/FAIL line fails, 2 on a usage or
# setup error. It takes about 15 s past the install and the build, most of
# it real time that the calls take (4 s of it the call left hanging). The
# temporary folder (grpcio included) is removed when it exits, whatever
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
grpcio=1.85.3

tmp=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $tmp ]]; then
    if [[ $keep == 1 ]]; then echo "grpc-core-check: kept $tmp"; else rm -rf "$tmp"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
die() { echo "grpc-core-check: $*" >&2; exit 2; }

command -v python3 > /dev/null || die "python3 is needed"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/grpc-core-check.XXXXXX")

# grpcio from PyPI, that release exactly, as a wheel (its source would take
# long to build on this machine).
python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
  --only-binary=:all: --target "$tmp/grpcio" "grpcio==$grpcio" > "$tmp/pip.log" 2>&1 ||
  { cat "$tmp/pip.log" >&2; die "could not install grpcio $grpcio"; }
check=scripts/grpc-core-check.py

python3 "$check" gen "$tmp/sequences.json" || die "the sequences could not be made"
# Real time on a shared machine: the run at a higher priority where that is
# allowed (as root), so that other work (a build) delays it less.
prio=()
if [[ $(nice -n -15 nice 2> /dev/null) -lt $(nice) ]]; then prio=(nice -n -15); fi
# C-core logs at ERROR what it clamps (maxAttempts 7): kept in a file, shown
# if the run fails.
PYTHONPATH="$tmp/grpcio" ${prio[@]+"${prio[@]}"} python3 "$check" grpcio \
  "$tmp/sequences.json" "$tmp/grpcio.json" 2> "$tmp/grpcio.log" ||
  { cat "$tmp/grpcio.log" >&2; die "grpcio did not run"; }

if [[ $model == 0 ]]; then
  python3 "$check" selftest "$tmp/sequences.json" "$tmp/grpcio.json" || exit 1
  exit 0
fi

cargo build --locked --quiet --example policy_trace || die "the build failed"
trace=target/debug/examples/policy_trace
"$trace" grpc-core < "$tmp/sequences.json" > "$tmp/model-grpc-core.json" ||
  die "the model's trace (grpc-core) did not run"
"$trace" grpc-js < "$tmp/sequences.json" > "$tmp/model-grpc-js.json" ||
  die "the model's trace (grpc-js) did not run"

failures=0
rc=0
python3 "$check" compare "$tmp/sequences.json" "$tmp/grpcio.json" \
  "$tmp/model-grpc-core.json" "model(grpc-core)-vs-grpcio" || rc=$?
[[ $rc == 0 || $rc == 1 ]] || die "the comparison did not run"
[[ $rc == 0 ]] || failures=$((failures + 1))
python3 "$check" compare "$tmp/sequences.json" "$tmp/grpcio.json" \
  "$tmp/model-grpc-js.json" "model(grpc-js)-vs-grpcio" --informational ||
  die "the grpc-js comparison did not run"
[[ $failures == 0 ]] || exit 1
