#!/usr/bin/env bash
# A long run: server and client at about 1,000 requests a second for 30
# minutes (not in CI). Passes if neither program's memory level rises more
# than 5 % above its level after the warm-up, and every 5 s interval's OK
# rate stays within 10 % of the run's mean with no errors or timeouts.
#
#   scripts/soak.sh                 30 minutes
#   scripts/soak.sh --minutes N     N minutes (the first 5 are warm-up; at
#                                   least 15)
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
# Traffic to 127.0.0.1 only; both programs stop by themselves (the client
# at --duration, then the server on SIGINT). Samples go to a temporary
# folder, printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=30
case "${1:-}" in
  --minutes) minutes=${2:?--minutes needs a number} ;;
  -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "unknown argument: $1" >&2; exit 2 ;;
esac
warmup_s=300
window_s=300
(( minutes >= 15 )) || { echo "--minutes: at least 15 (5 of warm-up, then two 5-minute windows)" >&2; exit 2; }

cargo build --release --quiet --bins
work=$(mktemp -d)
server_pid=""; client_pid=""
cleanup() {
  [[ -n "$client_pid" ]] && kill -INT "$client_pid" 2>/dev/null || true
  [[ -n "$server_pid" ]] && kill -INT "$server_pid" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

target/release/server --listen 127.0.0.1:0 --limit 1000000 > "$work/server.log" &
server_pid=$!
for _ in $(seq 100); do
  url=$(grep -o 'http://[^ ]*/api' "$work/server.log" 2>/dev/null | head -1 || true)
  [[ -n "$url" ]] && break
  sleep 0.05
done
[[ -n "$url" ]] || { echo "the server did not start" >&2; exit 1; }

# 1,100 users at 1 s mean think and 100 ms latency: 1,000 requests a second.
target/release/client --url "$url" --clients 1100 --lambda 1 --seed 1 \
  --duration "${minutes}m" --csv "$work/client.csv" > "$work/client.log" &
client_pid=$!

echo "soak: $minutes minutes at about 1,000 req/s; samples in $work"
echo "elapsed_s,server_rss_kb,client_rss_kb,server_fds,client_fds" > "$work/memory.csv"
start=$(date +%s)
while kill -0 "$client_pid" 2>/dev/null; do
  s=$(awk '/VmRSS/ { print $2 }' "/proc/$server_pid/status" 2>/dev/null || echo 0)
  c=$(awk '/VmRSS/ { print $2 }' "/proc/$client_pid/status" 2>/dev/null || echo 0)
  sf=$(ls "/proc/$server_pid/fd" 2>/dev/null | wc -l || true)
  cf=$(ls "/proc/$client_pid/fd" 2>/dev/null | wc -l || true)
  [[ "$c" != 0 ]] && echo "$(( $(date +%s) - start )),$s,$c,$sf,$cf" >> "$work/memory.csv"
  sleep 10
done
wait "$client_pid"; client_pid=""
kill -INT "$server_pid"; wait "$server_pid"; server_pid=""

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
# Rates after the warm-up: each interval within 10 % of the mean, no errors.
read -r rate_ok mean lo hi bad < <(awk -F, -v w="$warmup_s" '
  NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
  $col["elapsed_s"] >= w && $col["elapsed_s"] < '"$((minutes * 60 - 1))"' {
    ok[++n] = $col["ok_per_s"]; sum += ok[n]
    bad += $col["errors_per_s"] + $col["timeouts_per_s"]
  }
  END {
    mean = sum / n; lo = hi = ok[1]
    for (i = 1; i <= n; i++) { if (ok[i] < lo) lo = ok[i]; if (ok[i] > hi) hi = ok[i] }
    printf "%d %.1f %.1f %.1f %.2f\n", (lo >= 0.9 * mean && hi <= 1.1 * mean && bad == 0), mean, lo, hi, bad
  }' "$work/client.csv")

verdict() { if (( $1 )); then echo PASS; else echo FAIL; fi; }
echo "server RSS level per 5 min after warm-up: ${server_levels}kB, first to last $server_change (peak $(peak 2 4))  $(verdict "$server_ok")"
echo "client RSS level per 5 min after warm-up: ${client_levels}kB, first to last $client_change (peak $(peak 3 5))  $(verdict "$client_ok")"
echo "OK/s per 5 s interval: mean $mean, range $lo-$hi; errors+timeouts/s summed: $bad  $(verdict "$rate_ok")"
tail -8 "$work/client.log"
if (( server_ok && client_ok && rate_ok )); then echo "PASS"; else echo "FAIL"; exit 1; fi
