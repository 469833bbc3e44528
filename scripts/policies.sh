#!/usr/bin/env bash
# Every retry strategy, and every throttle on top of fixed retries, through
# the classic storm: 20 s warm-up, server stopped with SIGSTOP for 20 s,
# resumed with SIGCONT, 60 s of observation. Also fixed retries against a
# server that sheds load (--shed-above 200), with and without
# --respect-retry-after.
#
#   scripts/policies.sh            full scale, three runs at a time (~9 min);
#                                  writes results/policies.md
#   scripts/policies.sh --quick    every time divided by 10 (~1 min); writes
#                                  only to a temporary folder
#
# Nothing is tuned to flatter a policy: every strategy runs with its
# defaults. All traffic goes to 127.0.0.1; every run stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

K=1
if [[ "${1:-}" == "--quick" ]]; then K=10; fi
OUT=$(mktemp -d "${TMPDIR:-/tmp}/policies.XXXXXX")
# shellcheck source=scripts/storm-lib.sh
source scripts/storm-lib.sh
storm_build

# name|server flags|client flags
cases=()
for s in fixed exponential-2014 exponential full-jitter equal-jitter decorrelated-jitter truncated-binary google; do
  cases+=("$s||$(storm_strategy "$s")")
done
for t in token-bucket budget adaptive circuit-breaker; do
  cases+=("fixed+$t||$(storm_strategy fixed) $(storm_throttle "$t")")
done
shed="--shed-above 200 --retry-after 1s"
cases+=("fixed+shed|$shed|$(storm_strategy fixed)")
cases+=("fixed+shed+retry-after|$shed|$(storm_strategy fixed) --respect-retry-after")

echo "results in $OUT (times compressed ${K}x: rates as measured, times at full scale)"
base_port=$(( 20000 + RANDOM % 20000 ))
parallel=3
i=0
for c in "${cases[@]}"; do
  IFS='|' read -r name sflags cflags <<< "$c"
  # shellcheck disable=SC2086 # the flags are meant to split
  ( trap storm_cleanup EXIT INT TERM; storm_run "$name" $(( base_port + i )) $sflags -- $cflags ) &
  i=$(( i + 1 ))
  if (( i % parallel == 0 )); then wait; fi
done
wait

table="$OUT/policies.md"
{
  echo "| case | recovered | recovery (s) | peak concurrency | concurrency at end | attempts per request | abandoned | baseline OK/s | best OK/s after resume |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  for c in "${cases[@]}"; do
    IFS='|' read -r name _ _ <<< "$c"
    read -r base peak last _ _ _ best recovery amp wasted < <(storm_figures "$name")
    if awk "BEGIN { exit !($recovery >= 0) }"; then verdict=yes; rec=$recovery; else verdict=no; rec=-; fi
    echo "| $name | $verdict | $rec | $peak | $last | $amp | $wasted | $base | $best |"
  done
} > "$table"
{
  echo
  echo "Command lines (times scaled by 1/$K):"
  echo
  for c in "${cases[@]}"; do
    IFS='|' read -r name _ _ <<< "$c"
    echo "- $name:"
    sed 's/^/  - `/; s/$/`/' "$OUT/$name.commands"
  done
} > "$OUT/commands.md"
cat "$table"
if [[ $K == 1 ]]; then
  {
    echo "# Every policy through the storm"
    echo
    echo "Made with \`scripts/policies.sh\` on the project's 2-core machine (release"
    echo "build, $(date -u +%Y-%m-%d)): server defaults, 1000 clients, mean think 10 s,"
    echo "timeout 2 s, seed 2014; the server stopped with SIGSTOP 20 s after the client"
    echo "started, resumed with SIGCONT 20 s later, observed for 60 s. Three runs at a"
    echo "time on separate ports (so each shares the two cores with two others; the"
    echo "borderline exponential-2014 case behaves the same run alone, see"
    echo "storm-check.md). Every strategy and throttle with its defaults."
    echo
    cat "$table"
    echo
    echo "Recovered: client OK/s at or above 90 % of the baseline for three consecutive"
    echo "5 s intervals within the 60 s; recovery: seconds from resume to the end of the"
    echo "first of them. Peak and end: server concurrency after resume. Attempts per"
    echo "request: attempts divided by logical requests started, from the stop to the"
    echo "end. Abandoned: requests the server finished (or, with --on-disconnect cancel,"
    echo "dropped) after their client had gone; 0 where nothing finished at all within"
    echo "the run (the 10-minute cap holds the stuck work: see concurrency at end)."
    echo "Baseline: mean OK/s over the warm-up."
    cat "$OUT/commands.md"
  } > results/policies.md
  echo "written to results/policies.md"
fi
