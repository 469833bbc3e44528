#!/usr/bin/env bash
# Every retry strategy with its defaults, every throttle on top of fixed
# retries, and fixed retries against a shedding server (with and without
# --respect-retry-after) and against one that drops abandoned work, through
# the classic storm: scenarios/policies.toml on the real engine, three cases
# at a time, one run each (the odds over many runs: the same scenario with
# --engine sim --runs 100).
#
#   scripts/policies.sh              full scale (~15 min); writes
#                                    results/policies/
#   scripts/policies.sh --quick      every time divided by 10 (~1.5 min);
#                                    writes only to a temporary folder
#   scripts/policies.sh --out DIR    results in DIR instead (an earlier run's
#                                    results there are replaced: --replace)
#
# Prints the verdict of each case from the storm's summary.json. Nothing is
# tuned to flatter a policy. All traffic goes to 127.0.0.1; every run stops
# by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

quick=()
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=(--quick); shift ;;
    --out) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
command -v jq >/dev/null || { echo "jq is required (apt-get install jq)" >&2; exit 2; }
# Full scale makes the committed result; a quick run, a scratch one.
if [[ -z "$out" && ${#quick[@]} -eq 0 ]]; then out=results/policies; fi
[[ -n "$out" ]] || out=$(mktemp -d "${TMPDIR:-/tmp}/policies.XXXXXX")

cargo build --release --quiet --bin storm
./target/release/storm run scenarios/policies.toml --engine real --parallel 3 \
  "${quick[@]}" --quiet --replace --out "$out" > /dev/null \
  || { echo "the storm failed; see $out" >&2; exit 2; }
jq -r '.runs[] | [.case, (if .recovered then "recovered \(.recovery_s) s after resume" else "did not recover" end)] | join(": ")' \
  "$out/summary.json"
echo "times as measured, compressed $(jq -r .protocol.time_scale "$out/summary.json")x; results: $out (summary.md has every figure)"
