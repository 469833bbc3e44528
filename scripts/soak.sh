#!/usr/bin/env bash
# A long run: server and client at about 1,000 requests a second for 30
# minutes (not in CI). Passes if both programs' resident memory stays within
# 5 % of its level after the warm-up, and every 5 s interval's OK rate stays
# within 10 % of the run's mean with no errors or timeouts.
#
#   scripts/soak.sh                 30 minutes
#   scripts/soak.sh --minutes N     N minutes (the first 5 are warm-up)
#
# The warm-up is long because the client's connection pool keeps the most
# connections it ever needed at once, a number that still grows, slowly,
# for the first few minutes of Poisson traffic.
#
# Traffic to 127.0.0.1 only; both programs stop by themselves (the client
# at --duration, then the server on SIGINT). Samples go to a temporary
# folder, printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=30
case "${1:-}" in
  --minutes) minutes=${2:?--minutes needs a number} ;;
  -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "unknown argument: $1" >&2; exit 2 ;;
esac
warmup_s=300
(( minutes >= 7 )) || { echo "--minutes: at least 7 (5 of warm-up)" >&2; exit 2; }

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
echo "elapsed_s,server_rss_kb,client_rss_kb" > "$work/memory.csv"
start=$(date +%s)
while kill -0 "$client_pid" 2>/dev/null; do
  s=$(awk '/VmRSS/ { print $2 }' "/proc/$server_pid/status" 2>/dev/null || echo 0)
  c=$(awk '/VmRSS/ { print $2 }' "/proc/$client_pid/status" 2>/dev/null || echo 0)
  [[ "$c" != 0 ]] && echo "$(( $(date +%s) - start )),$s,$c" >> "$work/memory.csv"
  sleep 10
done
wait "$client_pid"; client_pid=""
kill -INT "$server_pid"; wait "$server_pid"; server_pid=""

# Memory after the warm-up: every sample within 5 % of the first.
read -r server_ok server_range client_ok client_range < <(awk -F, -v w="$warmup_s" '
  NR > 1 && $1 >= w {
    if (!n++) { s0 = $2; c0 = $3; smin = smax = $2; cmin = cmax = $3 }
    if ($2 < smin) smin = $2; if ($2 > smax) smax = $2
    if ($3 < cmin) cmin = $3; if ($3 > cmax) cmax = $3
  }
  END {
    printf "%d %s %d %s\n",
      (smax <= s0 * 1.05 && smin >= s0 * 0.95), smin "-" smax "kB",
      (cmax <= c0 * 1.05 && cmin >= c0 * 0.95), cmin "-" cmax "kB"
  }' "$work/memory.csv")
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
echo "server RSS after warm-up: $server_range  $(verdict "$server_ok")"
echo "client RSS after warm-up: $client_range  $(verdict "$client_ok")"
echo "OK/s per 5 s interval: mean $mean, range $lo-$hi; errors+timeouts/s summed: $bad  $(verdict "$rate_ok")"
tail -8 "$work/client.log"
if (( server_ok && client_ok && rate_ok )); then echo "PASS"; else echo "FAIL"; exit 1; fi
