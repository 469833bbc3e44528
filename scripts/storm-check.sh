#!/usr/bin/env bash
# The classic experiment, scripted: start the server, start the client, stop
# the server with a real SIGSTOP after the warm-up, resume it with SIGCONT
# after the pause, observe, and check the outcome of each strategy.
#
#   scripts/storm-check.sh            compressed: every time divided by 10 (~45 s)
#   scripts/storm-check.sh --full     the real thing: 20 s + 20 s + 60 s per case
#
# Cases and what must hold (times given at full scale):
#   fixed             concurrency climbs into the thousands after resume and
#                     stays; OK rate stays below half the baseline throughout
#   exponential-2014  concurrency under 100 within 10 s of resume; OK rate at
#                     half the baseline within 30 s and 80 % within 60 s
#   exponential       reported as it comes out (no verdict asserted)
#   fixed + cancel    the server drops abandoned work: peak concurrency far
#                     below the fixed case
# Prints one PASS/FAIL line per check and exits non-zero if any failed.
# All traffic goes to 127.0.0.1; every run stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

K=10
if [[ "${1:-}" == "--full" ]]; then K=1; fi
OUT=$(mktemp -d "${TMPDIR:-/tmp}/storm-check.XXXXXX")
# shellcheck source=scripts/storm-lib.sh
source scripts/storm-lib.sh
trap storm_cleanup EXIT INT TERM
storm_build
port=$(( 20000 + RANDOM % 20000 ))
failed=0

check() {  # check DESCRIPTION CONDITION
  if awk "BEGIN { exit !($2) }"; then echo "PASS  $1"; else echo "FAIL  $1"; failed=1; fi
}

echo "results in $OUT (times compressed ${K}x: rates as measured, times at full scale)"
# shellcheck disable=SC2046 # the strategy flags are meant to split
storm_run fixed "$port" -- $(storm_strategy fixed)
storm_run exp2014 "$port" -- --exponential-backoff
# shellcheck disable=SC2046
storm_run exponential "$port" -- $(storm_strategy exponential)
# shellcheck disable=SC2046
storm_run cancel "$port" --on-disconnect cancel -- $(storm_strategy fixed)

printf "%-12s %9s %9s %9s %8s %8s %8s %9s\n" case baseline peak end calm_s ok50_s ok80_s best_ok
for name in fixed exp2014 exponential cancel; do
  read -r base peak last calm half most best _ < <(storm_figures "$name")
  printf "%-12s %9s %9s %9s %8s %8s %8s %9s\n" "$name" "$base" "$peak" "$last" "$calm" "$half" "$most" "$best"
  eval "${name}_base=$base ${name}_peak=$peak ${name}_last=$last ${name}_calm=$calm ${name}_half=$half ${name}_most=$most ${name}_best=$best"
done
echo "(calm_s: seconds after resume until server concurrency < 100; okN_s: until client OK/s >= N % of baseline; -1 = never)"

check "fixed: concurrency climbs into the thousands ($fixed_peak)" "$fixed_peak >= 1000"
check "fixed: concurrency stays in the thousands to the end ($fixed_last)" "$fixed_last >= 1000"
check "fixed: OK rate stays below half the baseline after resume (best $fixed_best of $fixed_base)" "$fixed_half < 0"
check "exponential-2014: concurrency under 100 within 10 s of resume ($exp2014_calm s)" "$exp2014_calm >= 0 && $exp2014_calm <= 10"
check "exponential-2014: OK at half the baseline within 30 s ($exp2014_half s)" "$exp2014_half >= 0 && $exp2014_half <= 30"
check "exponential-2014: OK at 80 % of the baseline within 60 s ($exp2014_most s)" "$exp2014_most >= 0 && $exp2014_most <= 60"
check "cancel: peak concurrency well below fixed/continue ($cancel_peak vs $fixed_peak)" "$cancel_peak * 2 < $fixed_peak"
echo "exponential (textbook, reported only): peak $exponential_peak, end $exponential_last, OK 80 % after ${exponential_most} s"
exit "$failed"
