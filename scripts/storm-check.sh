#!/usr/bin/env bash
# The classic experiment, scripted: start the server, start the client, stop
# the server with a real SIGSTOP after the warm-up, resume it with SIGCONT
# after the pause, observe, and check the outcome of each strategy.
#
#   scripts/storm-check.sh            compressed: every time divided by 10 (~35 s)
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

k=10
if [[ "${1:-}" == "--full" ]]; then k=1; fi
# Scale a duration in milliseconds.
ms() { echo "$(( $1 / k ))ms"; }
secs() { awk -v a="$1" -v k="$k" 'BEGIN { printf "%.3f", a / k }'; }

cargo build --release --quiet --bin server --bin client
out=$(mktemp -d "${TMPDIR:-/tmp}/storm-check.XXXXXX")
port=$(( 20000 + RANDOM % 20000 ))
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then
    kill -CONT "$server_pid" 2>/dev/null || true
    kill -TERM "$server_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT INT TERM

warmup=$(secs 20); pause=$(secs 20); observe=$(secs 60)
total=$(awk -v a="$warmup" -v b="$pause" -v c="$observe" 'BEGIN { print a + b + c }')
failed=0

# run NAME SERVER_FLAGS... -- CLIENT_FLAGS...
run() {
  local name=$1; shift
  local sflags=() cflags=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do sflags+=("$1"); shift; done
  shift
  cflags=("$@")
  ./target/release/server --listen "127.0.0.1:$port" --base-delay "$(ms 100)" \
    --max-delay "$(ms 600000)" --report-interval "$(ms 1000)" --csv "$out/$name.server.csv" \
    "${sflags[@]}" > "$out/$name.server.log" 2>&1 &
  server_pid=$!
  # Wait until the server accepts connections.
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.05
  done
  ./target/release/client --url "http://127.0.0.1:$port/api" --lambda "$(ms 10000)" \
    --timeout "$(ms 2000)" --fixed-delay "$(ms 100)" --min-delay "$(ms 100)" \
    --report-interval "$(ms 5000)" --duration "${total}s" --seed 2014 \
    --csv "$out/$name.client.csv" "${cflags[@]}" > "$out/$name.client.log" 2>&1 &
  local client_pid=$!
  local t0; t0=$(date +%s%3N)
  sleep "$warmup"
  kill -STOP "$server_pid"
  local stopped; stopped=$(date +%s%3N)
  sleep "$pause"
  kill -CONT "$server_pid"
  local resumed; resumed=$(date +%s%3N)
  wait "$client_pid"
  kill -TERM "$server_pid"; wait "$server_pid" || true
  server_pid=""
  echo "$t0 $stopped $resumed" > "$out/$name.times"
}

# figures NAME: prints baseline, peak concurrency after resume, concurrency at
# the end, seconds (full scale) until concurrency < 100 and until OK reaches
# 50 % and 80 % of the baseline (-1 if never).
figures() {
  local name=$1
  read -r t0 stopped resumed < "$out/$name.times"
  awk -F, -v t0="$t0" -v stopped="$stopped" -v resumed="$resumed" -v k="$k" '
    FNR == 1 { file++; next }
    file == 1 {  # client
      if ($1 <= stopped && $1 - t0 > 5000 / k) { base += $3; nb++ }
      if ($1 > resumed) {
        at = ($1 - resumed) * k / 1000
        if (half < 0 && $3 >= 0.5 * base / nb) half = at
        if (most < 0 && $3 >= 0.8 * base / nb) most = at
        if ($3 > best) best = $3
      }
    }
    file == 2 {  # server
      if ($1 > resumed) {
        if ($3 > peak) peak = $3
        if (calm < 0 && $3 < 100) calm = ($1 - resumed) * k / 1000
        last = $3
      }
    }
    BEGIN { half = -1; most = -1; calm = -1 }
    END { printf "%.1f %d %d %.1f %.1f %.1f %.1f\n", base / nb, peak, last, calm, half, most, best }
  ' "$out/$name.client.csv" "$out/$name.server.csv"
}

check() {  # check DESCRIPTION CONDITION
  if awk "BEGIN { exit !($2) }"; then echo "PASS  $1"; else echo "FAIL  $1"; failed=1; fi
}

echo "results in $out (times scaled by 1/$k; figures below at full scale)"
run fixed --on-disconnect continue -- --strategy fixed
run exp2014 -- --exponential-backoff
run exponential -- --strategy exponential
run cancel --on-disconnect cancel -- --strategy fixed

printf "%-12s %9s %9s %9s %10s %10s %10s %9s\n" case baseline peak end calm_s ok50%_s ok80%_s best_ok
for name in fixed exp2014 exponential cancel; do
  read -r base peak last calm half most best < <(figures "$name")
  printf "%-12s %9s %9s %9s %10s %10s %10s %9s\n" "$name" "$base" "$peak" "$last" "$calm" "$half" "$most" "$best"
  eval "${name}_base=$base ${name}_peak=$peak ${name}_last=$last ${name}_calm=$calm ${name}_half=$half ${name}_most=$most ${name}_best=$best"
done
echo "(calm_s: seconds after resume until server concurrency < 100; okN%_s: until client OK/s >= N % of baseline; -1 = never)"

check "fixed: concurrency climbs into the thousands ($fixed_peak)" "$fixed_peak >= 1000"
check "fixed: concurrency stays in the thousands to the end ($fixed_last)" "$fixed_last >= 1000"
check "fixed: OK rate stays below half the baseline after resume (best $fixed_best of $fixed_base)" "$fixed_half < 0"
check "exponential-2014: concurrency under 100 within 10 s of resume ($exp2014_calm s)" "$exp2014_calm >= 0 && $exp2014_calm <= 10"
check "exponential-2014: OK at half the baseline within 30 s ($exp2014_half s)" "$exp2014_half >= 0 && $exp2014_half <= 30"
check "exponential-2014: OK at 80 % of the baseline within 60 s ($exp2014_most s)" "$exp2014_most >= 0 && $exp2014_most <= 60"
check "cancel: peak concurrency well below fixed/continue ($cancel_peak vs $fixed_peak)" "$cancel_peak * 2 < $fixed_peak"
echo "exponential (textbook, reported only): peak $exponential_peak, end $exponential_last, OK 80 % after ${exponential_most} s"
exit "$failed"
