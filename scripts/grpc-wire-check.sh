#!/usr/bin/env bash
# The project's client, `--grpc --strategy grpc`, retrying on the wire as
# C-core does: one grpcio 1.85.3 server on 127.0.0.1 answers each attempt
# of a call as a script says (UNAVAILABLE twice then OK; RESOURCE_EXHAUSTED,
# not retryable; UNAVAILABLE with a pushback of 200 ms; a pushback of 300 ms
# between two backoffs, which it resets; a negative pushback, which ends
# the call; UNAVAILABLE until the attempts run out), and logs when every
# attempt arrived and the deadline it carried. Each sequence is called
# twice: by a grpcio (C-core) client whose channel's service config has the
# retry policy (maxAttempts 4, initialBackoff 0.1s, maxBackoff 1s,
# backoffMultiplier 2, retryableStatusCodes [UNAVAILABLE]) and by the
# project's `client` (one user making one logical request, `--strategy grpc
# --implementation grpc-core` with the same parameters, its totals read from
# its status lines as data). Per sequence both must make the attempts the
# script makes and end alike (OK or not), and each side's every retry must
# come after the attempt before it within C-core's jitter, 0.8-1.2 of the
# backoff, 15 ms either side, or after a pushback that exactly, 15 ms plus
# 2 % of it late at most (scripts/grpc-core-check.sh's tolerances). The
# client draws its jitter from its seed: gaps are checked against those
# bounds, never against grpcio's. scripts/grpc-wire-check.py holds the
# sequences, the server, both callers and the comparison, with its reasons.
#
#   scripts/grpc-wire-check.sh              install grpcio (pip, into a
#                                           temporary folder), build the
#                                           client, run, compare
#   scripts/grpc-wire-check.sh --keep       keep the temporary folder (the
#                                           server's log, both sides' ends)
#   scripts/grpc-wire-check.sh --bin DIR    the client in DIR, not built
#                                           (cargo build's client is not
#                                           cargo test's: the tests' features
#                                           make the library another build)
#
# Prints one PASS/FAIL line per sequence (a FAIL names the first
# difference, and each line shows both sides' gaps and the deadline each
# attempt carried); the comparison's self-test runs first, shown only when
# it fails (exit 2: then the comparison means nothing). Exits 1 if a line
# fails, 2 on a usage or setup error. About 22 s with grpcio's wheel cached
# and the client built, most of it the client's runs (2.5 s each). Real time wants a machine not
# saturated by other work. The temporary folder (grpcio included) is
# removed when it exits, whatever happened.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

keep=0
bin=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --keep) keep=1; shift ;;
    --bin) [[ -x ${2:-}/client ]] || { echo "--bin takes a folder holding client" >&2; exit 2; }
      bin=$(cd "$2" && pwd); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."

# The release compared.
grpcio=1.85.3

tmp=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $tmp ]]; then
    if [[ $keep == 1 ]]; then echo "grpc-wire-check: kept $tmp"; else rm -rf "$tmp"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
die() { echo "grpc-wire-check: $*" >&2; exit 2; }

command -v python3 > /dev/null || die "python3 is needed"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/grpc-wire-check.XXXXXX")

# grpcio from PyPI, that release exactly, as a wheel.
python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
  --only-binary=:all: --target "$tmp/grpcio" "grpcio==$grpcio" > "$tmp/pip.log" 2>&1 ||
  { cat "$tmp/pip.log" >&2; die "could not install grpcio $grpcio"; }

if [[ -z $bin ]]; then
  cargo build --locked --quiet --bin client || die "the build failed"
  bin="${CARGO_TARGET_DIR:-target}/debug"
fi
client="$bin/client"
[[ -x $client ]] || die "no client binary at $client"

check=scripts/grpc-wire-check.py
PYTHONPATH="$tmp/grpcio" python3 "$check" run "$client" "$tmp/results.json" \
  2> "$tmp/run.log" || { cat "$tmp/run.log" >&2; die "the sequences did not run"; }

rc=0
python3 "$check" selftest "$tmp/results.json" > "$tmp/selftest.txt" || rc=$?
if [[ $rc != 0 ]]; then
  cat "$tmp/selftest.txt"
  [[ $rc == 1 ]] || die "the self-test did not run"
  # The comparison itself is wrong: what it says of the runs means nothing.
  die "the comparison failed its self-test"
fi
python3 "$check" compare "$tmp/results.json" || rc=$?
[[ $rc == 0 || $rc == 1 ]] || die "the comparison did not run"
exit "$rc"
