#!/usr/bin/env bash
# Cross-validation of storm's two engines: scenarios/reference.toml (fixed,
# exponential-2014, exponential; seed 2014; warm-up 20 s, pause 20 s,
# observation 60 s) once with --engine real and once with --engine sim, then
# a side-by-side table per case read from the two summary.json files.
#
#   scripts/cross-validate.sh               real run (~3 min, both cores) + sim
#   scripts/cross-validate.sh --out DIR     results in DIR/real and DIR/sim
#   scripts/cross-validate.sh --real DIR    reuse the real run in DIR (a storm
#                                           results folder of the same
#                                           scenario, e.g. results/reference);
#                                           run only the sim
#   scripts/cross-validate.sh --scenario FILE   another scenario, e.g.
#                                           scenarios/pool-check.toml (a
#                                           thread pool with and without
#                                           CoDel and adaptive LIFO)
#
# Default results folder: results/<UTC timestamp>-cross/ (git ignores it).
# Prints PASS and exits 0 if both engines give the same verdict (recovered or
# not) for every case; prints FAIL and exits 1 otherwise. The other
# figures are reported, not asserted. Exit 2: usage or setup error.
# The real run is bounded by `timeout` (storm stops its children on SIGTERM);
# all traffic goes to 127.0.0.1.
#
# Reads JSON with jq (jq 1.6 is installed on the project machine; python3 is
# too, but jq is all this needs).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  echo "usage: $0 [--out DIR] [--real DIR] [--scenario FILE]"
}

out=""
real=""
SCENARIO=scenarios/reference.toml
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; out=$2; shift 2 ;;
    --real) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; real=$2; shift 2 ;;
    --scenario) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; SCENARIO=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

command -v jq >/dev/null || { echo "jq is required (apt-get install jq)" >&2; exit 2; }
[[ -f "$SCENARIO" ]] || { echo "no scenario file $SCENARIO" >&2; exit 2; }
[[ -n "$out" ]] || out="results/$(date -u +%Y-%m-%dT%H-%M-%SZ)-cross"
mkdir -p "$out"

cargo build --release --quiet --bin storm
# The script makes DIR/sim and DIR/real again: an earlier run's go.
storm=(./target/release/storm run "$SCENARIO" --quiet --replace)

echo "== sim: $out/sim"
"${storm[@]}" --engine sim --out "$out/sim" > "$out/sim.log" 2>&1 \
  || { echo "storm --engine sim failed; see $out/sim.log" >&2; exit 2; }

if [[ -n "$real" ]]; then
  echo "== real: $real (reused)"
  [[ -f "$real/summary.json" ]] || { echo "no summary.json in $real" >&2; exit 2; }
else
  real="$out/real"
  echo "== real: $real (about 3 minutes)"
  # 170 s expected (the tail included); SIGTERM after 600 s, SIGKILL 30 s later if it hangs.
  timeout -k 30s 600s "${storm[@]}" --engine real --out "$real" > "$out/real.log" 2>&1 \
    || { echo "storm --engine real failed or timed out; see $out/real.log" >&2; exit 2; }
fi
rj="$real/summary.json"
sj="$out/sim/summary.json"

# A reused run must have been made with the same protocol (time_scale
# included: a --quick run is not comparable).
proto='.protocol | [.warmup_s, .pause_s, .observe_s, .time_scale, .report_interval_s, .seed] | map(tonumber) | tostring'
if [[ "$(jq -r "$proto" "$rj")" != "$(jq -r "$proto" "$sj")" ]]; then
  echo "protocols differ: real $(jq -c .protocol "$rj"), sim $(jq -c .protocol "$sj")" >&2
  exit 2
fi

# field FILE CASE: one line, tab-separated: baseline, peak, recovered,
# recovery_s, wasted, amplification ("missing" if the case is absent).
field() {
  jq -r --arg s "$2" '
    [.runs[] | select(.case == $s)] | if length == 0 then "missing" else .[0] |
    [ .baseline_ok_per_s, .peak_concurrency,
      (if .recovered then "yes" else "no" end),
      (if .recovery_s == null then "-" else .recovery_s end),
      .wasted, .amplification ] | map(tostring) | join("\t") end' "$1"
}

# num VALUE DECIMALS: VALUE rounded, or "-" as is.
num() { if [[ $1 == - ]]; then echo -; else printf "%.${2}f" "$1"; fi; }

failed=0
mapfile -t names < <(jq -r '.runs[].case' "$sj")
for s in "${names[@]}"; do
  r=$(field "$rj" "$s")
  m=$(field "$sj" "$s")
  echo
  if [[ $r == missing || $m == missing ]]; then
    [[ $r == missing ]] && echo "$s: missing from the real summary"
    [[ $m == missing ]] && echo "$s: missing from the sim summary"
    failed=1
    continue
  fi
  IFS=$'\t' read -r rb rp rv rt rw ra <<< "$r"
  IFS=$'\t' read -r sb sp sv st sw sa <<< "$m"
  pct=$(awk -v r="$rp" -v s="$sp" 'BEGIN { if (r > 0) printf "%+.2f %%", (s - r) * 100 / r; else print "n/a" }')
  if [[ $rv == "$sv" ]]; then same="same verdict"; else same="VERDICTS DIFFER"; failed=1; fi
  printf "%s\n" "$s"
  printf "  %-18s %10s %10s\n" "" real sim
  printf "  %-18s %10s %10s\n" "baseline OK/s" "$(num "$rb" 1)" "$(num "$sb" 1)"
  printf "  %-18s %10s %10s   sim-real: %s\n" "peak concurrency" "$rp" "$sp" "$pct"
  printf "  %-18s %10s %10s   %s\n" "recovered" "$rv" "$sv" "$same"
  printf "  %-18s %10s %10s\n" "recovery (s)" "$(num "$rt" 1)" "$(num "$st" 1)"
  printf "  %-18s %10s %10s\n" "wasted" "$rw" "$sw"
  printf "  %-18s %10s %10s\n" "amplification" "$(num "$ra" 2)" "$(num "$sa" 2)"
done

echo
echo "real: $rj"
echo "sim:  $sj"
if (( failed )); then
  echo "FAIL  the engines disagree on a verdict (or a case is missing)"
  exit 1
fi
echo "PASS  same verdict on both engines for ${names[*]}"
