#!/usr/bin/env bash
# A long run: server and client at about 1,000 requests a second for 30
# minutes (not in CI). Passes if neither program's memory level rises more
# than 5 % above its level after the warm-up, every minute's OK rate stays
# within 5 % of the run's mean, and no attempt fails or times out.
#
#   scripts/soak.sh                 30 minutes
#   scripts/soak.sh --minutes N     N minutes (the first 5 are warm-up; at
#                                   least 15)
#   scripts/soak.sh --judge DIR     judge the samples of an earlier run again
#
# The level is the median of each 5-minute window's samples (one every
# 10 s). Resident memory follows the number of open connections, and that
# follows concurrency: a stall of either program or of the host (this is a
# shared virtual machine) piles requests up, opens connections for them,
# and the memory comes back once the pool closes the surplus (30 s idle)
# and the allocator returns it. A leak shows as a rising level; a burst
# does not move a 5-minute median, and memory handed back after the
# warm-up's bursts shows as a falling one, which is printed, not failed.
# The peak is printed too, with the descriptors open at that moment (the
# connections, mostly).
#
# Rates are judged per minute: a stall of a second moves one 5 s interval
# by a tenth or more and the next one back, as the delayed requests
# complete, but not the minute; a program that slows down moves the
# minutes. The 5 s range is printed, with the share of the machine's CPU
# time the hypervisor took (steal) in the worst 10 s sample, to tell the
# host's stalls from the programs'.
#
# Traffic to 127.0.0.1 only; both programs stop by themselves (the client
# at --duration, then the server on SIGINT). Samples go to a temporary
# folder, printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=30
judge_only=""
case "${1:-}" in
  --minutes) minutes=${2:?--minutes needs a number} ;;
  --judge) judge_only=${2:?--judge needs the samples folder of a run} ;;
  -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "unknown argument: $1" >&2; exit 2 ;;
esac
warmup_s=300
window_s=300

# run_soak: runs both programs for $minutes minutes, sampling into $work.
run_soak() {
  command -v jq > /dev/null || { echo "jq is required (apt-get install jq)" >&2; exit 2; }
  cargo build --release --quiet --bins
  work=$(mktemp -d)
  server_pid=""; client_pid=""
  cleanup() {
    [[ -n "$client_pid" ]] && kill -INT "$client_pid" 2>/dev/null || true
    [[ -n "$server_pid" ]] && kill -INT "$server_pid" 2>/dev/null || true
    wait 2>/dev/null || true
  }
  trap cleanup EXIT INT TERM

  # The server's first status line (JSON on descriptor 3) says where it
  # listens; its display lines are for people.
  target/release/server --listen 127.0.0.1:0 --limit 1000000 --status-fd 3 \
    3> "$work/server.status" > "$work/server.log" &
  server_pid=$!
  for _ in $(seq 100); do
    url=$(head -n 1 "$work/server.status" 2>/dev/null | jq -r '.listening.url // empty' 2>/dev/null || true)
    [[ -n "$url" ]] && break
    sleep 0.05
  done
  [[ -n "$url" ]] || { echo "the server did not start" >&2; exit 1; }

  # 1,100 users at 1 s mean think and 100 ms latency: 1,000 requests a second.
  target/release/client --url "$url" --clients 1100 --lambda 1 --seed 1 \
    --duration "${minutes}m" --csv "$work/client.csv" > "$work/client.log" &
  client_pid=$!

  echo "soak: $minutes minutes at about 1,000 req/s; samples in $work"
  echo "elapsed_s,server_rss_kb,client_rss_kb,server_fds,client_fds,steal_pct" > "$work/memory.csv"
  start=$(date +%s)
  # cpu_times: "total steal" clock ticks of all CPUs so far (user to steal;
  # the guest columns after it are already counted in user and nice).
  cpu_times() { awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t, $9 }' /proc/stat; }
  read -r total0 steal0 < <(cpu_times)
  while sleep 10; kill -0 "$client_pid" 2>/dev/null; do
    s=$(awk '/VmRSS/ { print $2 }' "/proc/$server_pid/status" 2>/dev/null || echo 0)
    c=$(awk '/VmRSS/ { print $2 }' "/proc/$client_pid/status" 2>/dev/null || echo 0)
    sf=$(ls "/proc/$server_pid/fd" 2>/dev/null | wc -l || true)
    cf=$(ls "/proc/$client_pid/fd" 2>/dev/null | wc -l || true)
    read -r total steal < <(cpu_times)
    st=$(awk -v t=$((total - total0)) -v s=$((steal - steal0)) 'BEGIN { printf "%.1f", t ? s * 100 / t : 0 }')
    total0=$total; steal0=$steal
    [[ "$c" != 0 ]] && echo "$(( $(date +%s) - start )),$s,$c,$sf,$cf,$st" >> "$work/memory.csv"
  done
  wait "$client_pid"; client_pid=""
  kill -INT "$server_pid"; wait "$server_pid"; server_pid=""
}

if [[ -n "$judge_only" ]]; then
  work=$judge_only
  [[ -f "$work/memory.csv" && -f "$work/client.csv" && -f "$work/client.log" ]] ||
    { echo "--judge: $work holds no soak samples (memory.csv, client.csv, client.log)" >&2; exit 2; }
  # The run's length: its last report, to the minute.
  minutes=$(awk -F, 'END { printf "%d", ($2 + 30) / 60 }' "$work/client.csv")
  (( minutes >= 15 )) || { echo "--judge: the run in $work lasted $minutes minutes; at least 15 are judged" >&2; exit 2; }
else
  (( minutes >= 15 )) || { echo "--minutes: at least 15 (5 of warm-up, then two 5-minute windows)" >&2; exit 2; }
  run_soak
fi

# Memory after the warm-up: no 5-minute window's median more than 5 % above
# the first window's.
median() { # column, from, to (seconds into the run)
  awk -F, -v c="$1" -v a="$2" -v b="$3" 'NR > 1 && $1 >= a && $1 < b { print $c }' \
    "$work/memory.csv" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
level_ok() { # RSS column: prints "1 levels change" or "0 levels change"
  local col=$1 ok=1 levels="" first="" m
  for (( w = warmup_s; w + 60 <= minutes * 60; w += window_s )); do
    m=$(median "$col" "$w" "$(( w + window_s ))")
    [[ -z "$first" ]] && first=$m
    (( m * 100 <= first * 105 )) || ok=0
    levels+="${levels:+,}$m"
  done
  echo "$ok $levels $(awk -v a="$first" -v b="$m" 'BEGIN { printf "%+.1f%%", (b - a) * 100 / a }')"
}
peak() { # RSS column, fd column: "peak kB at N s with M fds"
  awk -F, -v c="$1" -v f="$2" -v w="$warmup_s" 'NR > 1 && $1 >= w && $c > max {
    max = $c; at = $1; fds = $f } END { printf "%dkB at %ds with %d fds", max, at, fds }' \
    "$work/memory.csv"
}
read -r server_ok server_levels server_change < <(level_ok 2)
read -r client_ok client_levels client_change < <(level_ok 3)
# Rates after the warm-up: each whole minute's mean OK rate within 5 % of
# the run's mean; no error or timeout at all.
read -r rate_ok mean lo hi mlo mhi bad < <(awk -F, -v w="$warmup_s" -v end=$((minutes * 60)) '
  NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
  $col["elapsed_s"] >= w && $col["elapsed_s"] < end - 1 {
    ok = $col["ok_per_s"]; sum += ok; n++
    if (n == 1 || ok < lo) lo = ok
    if (n == 1 || ok > hi) hi = ok
    m = int($col["elapsed_s"] / 60); msum[m] += ok; mn[m]++
    bad += $col["errors_per_s"] + $col["timeouts_per_s"]
  }
  END {
    mean = sum / n; first = 1
    for (m in msum) {
      r = msum[m] / mn[m]
      if (first || r < mlo) mlo = r
      if (first || r > mhi) mhi = r
      first = 0
    }
    printf "%d %.1f %.1f %.1f %.1f %.1f %.2f\n", (mlo >= 0.95 * mean && mhi <= 1.05 * mean && bad == 0), mean, lo, hi, mlo, mhi, bad
  }' "$work/client.csv")
steal=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
  "steal_pct" in col && $col["steal_pct"] >= max { max = $col["steal_pct"]; at = $1 }
  END { print ("steal_pct" in col) ? (max + 0) "% at " (at + 0) " s" : "not sampled" }' "$work/memory.csv")

verdict() { if (( $1 )); then echo PASS; else echo FAIL; fi; }
echo "server RSS level per 5 min after warm-up: ${server_levels}kB, first to last $server_change (peak $(peak 2 4))  $(verdict "$server_ok")"
echo "client RSS level per 5 min after warm-up: ${client_levels}kB, first to last $client_change (peak $(peak 3 5))  $(verdict "$client_ok")"
echo "OK/s per minute: mean $mean, range $mlo-$mhi (5 s intervals: $lo-$hi); errors+timeouts/s summed: $bad  $(verdict "$rate_ok")"
echo "host: CPU time taken by the hypervisor (steal), worst 10 s sample: $steal"
tail -8 "$work/client.log"
if (( server_ok && client_ok && rate_ok )); then echo "PASS"; else echo "FAIL"; exit 1; fi
