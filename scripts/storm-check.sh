#!/usr/bin/env bash
# shellcheck disable=SC2016 # the $ in single-quoted jq programs are jq's
# The classic experiment's checks: scenarios/storm-check.toml on the real
# engine (a real SIGSTOP and SIGCONT, one case after the other), then
# PASS/FAIL per check, read from the storm's summary.json.
#
#   scripts/storm-check.sh               every time divided by 10 (~1 min)
#   scripts/storm-check.sh --full        the real thing: ~2 min per case
#   scripts/storm-check.sh --out DIR     results in DIR (default: a
#                                        temporary folder; an earlier
#                                        run's results there are replaced);
#                                        checks.txt beside them
#
# What must hold (seconds from resume, at full scale):
#   fixed             concurrency climbs into the thousands after resume and
#                     stays; OK/s never reaches half the baseline
#   exponential-2014  the server calm within 10 s; OK/s at half the
#                     baseline within 30 s and at 80 % within 60 s
#   exponential       reported as it comes out (no verdict asserted)
#   cancel            (fixed retries, server --on-disconnect cancel) peak
#                     concurrency under half that of fixed
# Exits 1 if a check fails, 2 on a usage or setup error. All traffic goes
# to 127.0.0.1; every run stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

quick=(--quick)
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --full) quick=(); shift ;;
    --out) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
command -v jq >/dev/null || { echo "jq is required (apt-get install jq)" >&2; exit 2; }
[[ -n "$out" ]] || out=$(mktemp -d "${TMPDIR:-/tmp}/storm-check.XXXXXX")

cargo build --release --quiet --bin storm
./target/release/storm run scenarios/storm-check.toml --engine real --in-turn \
  "${quick[@]}" --quiet --replace --out "$out" > /dev/null \
  || { echo "the storm failed; see $out" >&2; exit 2; }

summary="$out/summary.json"
# Times in the summary are as measured; the checks are at full scale.
k=$(jq -r .protocol.time_scale "$summary")
# fig CASE KEY: a figure of a case, "null" when it never happened.
fig() { jq -r --arg c "$1" --arg k "$2" '.runs[] | select(.case == $c) | .[$k]' "$summary"; }
# secs CASE KEY: a time of a case in seconds at full scale, or "never".
secs() {
  jq -r --arg c "$1" --arg f "$2" --argjson k "$k" \
    '.runs[] | select(.case == $c) | .[$f] | if . == null then "never" else . * $k * 10 | round / 10 end' \
    "$summary"
}
# check DESCRIPTION CONDITION: PASS or FAIL, the condition a jq expression
# over the runs keyed by case.
check() {
  if [[ $(jq -r --argjson k "$k" "[.runs[] | {(.case): .}] | add | $2" "$summary") == true ]]; then
    echo "PASS  $1"
  else
    echo "FAIL  $1"
  fi
}
{
  echo "scenarios/storm-check.toml, real engine, time compressed ${k}x (rates as measured, seconds at full scale); results in $out"
  check "fixed: concurrency climbs into the thousands ($(fig fixed peak_concurrency))" \
    '.fixed != null and .fixed.peak_concurrency >= 1000'
  check "fixed: concurrency stays in the thousands to the end ($(fig fixed end_concurrency))" \
    '.fixed != null and .fixed.end_concurrency >= 1000'
  check "fixed: OK/s never reaches half the baseline after resume (best $(fig fixed best_ok_per_s) of $(fig fixed baseline_ok_per_s))" \
    '.fixed != null and (.fixed | has("to_50pct_s")) and .fixed.to_50pct_s == null'
  check "exponential-2014: the server calm within 10 s of resume ($(secs exponential-2014 calm_s) s)" \
    '.["exponential-2014"].calm_s != null and .["exponential-2014"].calm_s * $k <= 10'
  check "exponential-2014: OK/s at half the baseline within 30 s ($(secs exponential-2014 to_50pct_s) s)" \
    '.["exponential-2014"].to_50pct_s != null and .["exponential-2014"].to_50pct_s * $k <= 30'
  check "exponential-2014: OK/s at 80 % of the baseline within 60 s ($(secs exponential-2014 to_80pct_s) s)" \
    '.["exponential-2014"].to_80pct_s != null and .["exponential-2014"].to_80pct_s * $k <= 60'
  check "cancel: peak concurrency under half of fixed's ($(fig cancel peak_concurrency) against $(fig fixed peak_concurrency))" \
    '.cancel != null and .fixed != null and .cancel.peak_concurrency * 2 < .fixed.peak_concurrency'
  echo "exponential (textbook, reported only): peak $(fig exponential peak_concurrency), at end $(fig exponential end_concurrency), recovered $(fig exponential recovered)"
} | tee "$out/checks.txt"
if grep -q '^FAIL' "$out/checks.txt"; then exit 1; fi
