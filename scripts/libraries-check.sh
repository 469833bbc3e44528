#!/usr/bin/env bash
# The model's AWS retry policies against botocore itself, both
# generations: botocore 1.43.127 (the last 1.43, the 2026 behaviour off,
# as --implementation botocore-1.43 follows it) and 1.44.8 (the 2026
# behaviour always on, as the default --implementation botocore-1.44 follows
# it), each in standard and adaptive mode. Seeded sequences of answers (bursts of 5xx, timeouts,
# refused connections, throttling with an AWS error code with and without
# x-amz-retry-after, bare 429s with and without hints, successes between,
# the 500-token quota drained and refilled) are fed to botocore's own
# retry handler, quota, backoff and adaptive limiter (driven directly by
# scripts/libraries-check.py: no network, the random draw pinned, the clock
# the sequence's) and to the model's (examples/policy_trace/); every
# event's decisions are compared: retry or not, the delay, the quota's
# balance after it, and in adaptive mode whether a token was there when the
# attempt went out, whether the limiter is on and its rate.
#
#   scripts/libraries-check.sh              install (pip, into a temporary
#                                           folder), build, compare
#   scripts/libraries-check.sh --keep       keep the temporary folder (the
#                                           sequences, both sides' decisions)
#
# Prints one PASS/FAIL line per sequence, mode and generation (a FAIL names
# the first event that differs and both sides' decisions there); exits 1
# if one fails, 2 on a usage or setup error. The temporary folder (botocore
# included) is removed when it exits, whatever happened.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

# The releases compared, and which model generation follows each.
releases=(1.43.127 1.44.8)
generation() { echo "${1%.*}"; }

tmp=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $tmp ]]; then
    if [[ $keep == 1 ]]; then echo "libraries-check: kept $tmp"; else rm -rf "$tmp"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
die() { echo "libraries-check: $*" >&2; exit 2; }

command -v python3 > /dev/null || die "python3 is needed"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/libraries-check.XXXXXX")

# Each release with its dependencies in a folder of its own, from PyPI.
for r in "${releases[@]}"; do
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --target "$tmp/botocore-$r" "botocore==$r" > "$tmp/pip-$r.log" 2>&1 ||
    { cat "$tmp/pip-$r.log" >&2; die "could not install botocore $r"; }
done

cargo build --locked --quiet --example policy_trace || die "the build failed"
trace=target/debug/examples/policy_trace
check=scripts/libraries-check.py

python3 "$check" gen "$tmp/sequences.json" || die "the sequences could not be made"
failures=0
for r in "${releases[@]}"; do
  g=$(generation "$r")
  for mode in standard adaptive; do
    PYTHONPATH="$tmp/botocore-$r" python3 "$check" botocore "$mode" "$tmp/sequences.json" \
      "$tmp/botocore-$r-$mode.json" || die "botocore $r ($mode) did not run"
    "$trace" "$mode" "$g" < "$tmp/sequences.json" > "$tmp/model-$g-$mode.json" ||
      die "the model's trace ($mode $g) did not run"
    python3 "$check" compare "$tmp/sequences.json" "$tmp/botocore-$r-$mode.json" \
      "$tmp/model-$g-$mode.json" "botocore-$r/aws-$mode" || failures=$((failures + 1))
  done
done
[[ $failures == 0 ]] || exit 1
