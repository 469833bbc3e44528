# Shared by the storm scripts: run the classic experiment once and read its
# figures back from the CSV files. Source it; do not run it.
#
# Set before use: K (time compression, 1 = real time), OUT (results folder).
# All traffic goes to 127.0.0.1; every run stops by itself.

: "${K:=1}"
# storm_ms MILLISECONDS: a duration scaled by 1/K, for a flag.
storm_ms() { echo "$(( $1 / K ))ms"; }
# storm_secs SECONDS: seconds scaled by 1/K, for sleep.
storm_secs() { awk -v a="$1" -v k="$K" 'BEGIN { printf "%.3f", a / k }'; }

STORM_WARMUP=$(storm_secs 20)
STORM_PAUSE=$(storm_secs 20)
STORM_OBSERVE=$(storm_secs 60)
STORM_PIDS=()

storm_build() {
  cargo build --release --quiet --bin server --bin client
}

# Resumes and stops every server still running (on exit or interrupt).
storm_cleanup() {
  local pid
  for pid in "${STORM_PIDS[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  done
}

# storm_run NAME PORT SERVER_FLAGS... -- CLIENT_FLAGS...
# Starts a server and a client, stops the server with SIGSTOP after the
# warm-up, resumes it with SIGCONT after the pause, waits for the client to
# finish the observation, then stops the server. Writes OUT/NAME.* files:
# server and client CSV and logs, the exact command lines, and the times of
# start, stop and resume (Unix milliseconds).
storm_run() {
  local name=$1 port=$2; shift 2
  local sflags=() cflags=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do sflags+=("$1"); shift; done
  shift
  cflags=("$@")
  local total
  total=$(awk -v a="$STORM_WARMUP" -v b="$STORM_PAUSE" -v c="$STORM_OBSERVE" 'BEGIN { print a + b + c }')
  local server=(./target/release/server --listen "127.0.0.1:$port" --base-delay "$(storm_ms 100)"
    --max-delay "$(storm_ms 600000)" --report-interval "$(storm_ms 1000)"
    --csv "$OUT/$name.server.csv" "${sflags[@]}")
  local client=(./target/release/client --url "http://127.0.0.1:$port/api" --lambda "$(storm_ms 10000)"
    --timeout "$(storm_ms 2000)" --report-interval "$(storm_ms 5000)" --duration "${total}s"
    --seed 2014 --csv "$OUT/$name.client.csv" "${cflags[@]}")
  printf '%s\n%s\n' "${server[*]}" "${client[*]}" > "$OUT/$name.commands"
  "${server[@]}" > "$OUT/$name.server.log" 2>&1 &
  local server_pid=$!
  STORM_PIDS+=("$server_pid")
  local _
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.05
  done
  "${client[@]}" > "$OUT/$name.client.log" 2>&1 &
  local client_pid=$!
  local t0 stopped resumed
  t0=$(date +%s%3N)
  sleep "$STORM_WARMUP"
  kill -STOP "$server_pid"
  stopped=$(date +%s%3N)
  sleep "$STORM_PAUSE"
  kill -CONT "$server_pid"
  resumed=$(date +%s%3N)
  wait "$client_pid" || true
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" || true
  echo "$t0 $stopped $resumed" > "$OUT/$name.times"
}

# storm_figures NAME: one line of figures, times at full scale (x K):
#   baseline peak end calm_s ok50_s ok80_s best_ok recovery_s amplification abandoned
# baseline: mean OK/s over the warm-up, first interval excluded; peak/end:
# server concurrency after resume (highest, last); calm_s: seconds after
# resume until concurrency < 100; okN_s: until client OK/s >= N % of the
# baseline; recovery_s: until OK/s stays >= 90 % of the baseline for three
# consecutive intervals (the end of the first of them); amplification:
# attempts sent per logical request started, from the stop to the end;
# abandoned: requests the server finished (or dropped, in cancel mode) for
# clients that had gone. -1: never.
storm_figures() {
  local name=$1 t0 stopped resumed
  read -r t0 stopped resumed < "$OUT/$name.times"
  awk -F, -v t0="$t0" -v stopped="$stopped" -v resumed="$resumed" -v k="$K" '
    BEGIN { half = -1; most = -1; calm = -1; recovery = -1; streak = 0 }
    FNR == 1 { file++; for (i = 1; i <= NF; i++) col[file, $i] = i; next }
    file == 1 {  # client
      ok = $col[1, "ok_per_s"]
      if ($1 <= stopped && $1 - t0 > 5000 / k) { base += ok; nb++ }
      if ($1 > stopped) {
        started = $col[1, "requests_per_s"]
        total_started += started
        total_sent += started * $col[1, "attempts_per_request"]
      }
      if ($1 > resumed) {
        at = ($1 - resumed) * k / 1000
        b = base / nb
        if (half < 0 && ok >= 0.5 * b) half = at
        if (most < 0 && ok >= 0.8 * b) most = at
        if (ok > best) best = ok
        if (ok >= 0.9 * b) { streak++; if (streak == 1) first = at; if (streak == 3 && recovery < 0) recovery = first }
        else streak = 0
      }
    }
    file == 2 {  # server
      dt = $2 - last_elapsed; last_elapsed = $2
      wasted += $col[2, "abandoned_per_s"] * dt
      if ($1 > resumed) {
        if ($3 > peak) peak = $3
        if (calm < 0 && $3 < 100) calm = ($1 - resumed) * k / 1000
        last = $3
      }
    }
    END {
      amp = total_started > 0 ? total_sent / total_started : -1
      printf "%.1f %d %d %.1f %.1f %.1f %.1f %.1f %.2f %d\n", base / nb, peak, last, calm, half, most, best, recovery, amp, wasted
    }
  ' "$OUT/$name.client.csv" "$OUT/$name.server.csv"
}

# storm_strategy NAME: client flags selecting strategy NAME with its time
# parameters scaled by 1/K (exponential-2014's constants, e, 5 min and
# 0.1 s of jitter, are the original's and are not scaled).
storm_strategy() {
  case "$1" in
    fixed) echo "--strategy fixed --fixed-delay $(storm_ms 100)" ;;
    exponential-2014) echo "--strategy exponential-2014" ;;
    exponential|full-jitter|equal-jitter|decorrelated-jitter)
      echo "--strategy $1 --min-delay $(storm_ms 100) --max-delay $(storm_ms 300000)" ;;
    truncated-binary) echo "--strategy truncated-binary --slot-time $(storm_ms 100)" ;;
    google) echo "--strategy google --min-delay $(storm_ms 1000) --max-delay $(storm_ms 32000)" ;;
    *) echo "unknown strategy $1" >&2; return 1 ;;
  esac
}

# storm_throttle NAME: client flags adding throttle NAME with its time
# parameters scaled by 1/K.
storm_throttle() {
  case "$1" in
    token-bucket) echo "--throttle token-bucket" ;;
    budget) echo "--throttle budget --budget-ttl $(storm_ms 10000) --budget-min-per-sec $(( 10 * K ))" ;;
    adaptive) echo "--throttle adaptive --adaptive-window $(storm_ms 120000)" ;;
    circuit-breaker)
      echo "--throttle circuit-breaker --breaker-window $(storm_ms 10000) --breaker-cooldown $(storm_ms 5000)" ;;
    *) echo "unknown throttle $1" >&2; return 1 ;;
  esac
}
