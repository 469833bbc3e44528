# Shared by the storm scripts: run the classic experiment once and read its
# figures back from the CSV files. Source it; do not run it.
#
# Set before use: K (time compression, 1 = real time), OUT (results folder).
# Both programs get --time-scale K, so every flag below is written at full
# scale and the whole experiment, strategies' constants included, runs K
# times faster. All traffic goes to 127.0.0.1; every run stops by itself.

: "${K:=1}"
# storm_secs SECONDS: seconds scaled by 1/K, for sleep.
storm_secs() { awk -v a="$1" -v k="$K" 'BEGIN { printf "%.3f", a / k }'; }

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
# Starts a server and a client, stops the server with SIGSTOP after a 20 s
# warm-up, resumes it with SIGCONT 20 s later, waits for the client to finish
# 60 s of observation and two more 5 s intervals (to confirm a recovery
# that starts late in the window), then stops the server (full-scale times). Writes
# OUT/NAME.* files: server and client CSV and logs, the exact command lines,
# and the Unix milliseconds of start, stop and resume.
storm_run() {
  local name=$1 port=$2; shift 2
  local sflags=() cflags=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do sflags+=("$1"); shift; done
  shift
  cflags=("$@")
  local server=(./target/release/server --listen "127.0.0.1:$port" --time-scale "$K"
    --csv "$OUT/$name.server.csv" "${sflags[@]}")
  local client=(./target/release/client --url "http://127.0.0.1:$port/api" --time-scale "$K"
    --duration 110s --seed 2014 --csv "$OUT/$name.client.csv" "${cflags[@]}")
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
  sleep "$(storm_secs 20)"
  # Stamp each phase before signalling, so that no report row written after
  # the signal can fall before the stamp.
  stopped=$(date +%s%3N)
  kill -STOP "$server_pid"
  sleep "$(storm_secs 20)"
  resumed=$(date +%s%3N)
  kill -CONT "$server_pid"
  wait "$client_pid" || true
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" || true
  local pid kept=()
  for pid in "${STORM_PIDS[@]}"; do [[ $pid == "$server_pid" ]] || kept+=("$pid"); done
  STORM_PIDS=("${kept[@]}")
  echo "$t0 $stopped $resumed" > "$OUT/$name.times"
}

# storm_figures NAME: one line of figures:
#   baseline peak end calm_s ok50_s ok80_s best_ok recovery_s amplification abandoned
# Rates are as measured (K times the full-scale rates); times are given at
# full scale. baseline: mean OK/s over the warm-up, first interval excluded;
# peak/end: server concurrency after resume (highest, last); calm_s: seconds
# after resume until concurrency falls under 100 after its peak; okN_s: until
# client OK/s >= N % of the baseline; recovery_s: the start of the first
# run of three consecutive intervals at >= 90 % of the baseline that is not
# followed by three below it, if it starts within the 60 s window (the
# same rule as storm's verdict); amplification: attempts sent per logical request started, from the
# stop to the end; abandoned: requests the server finished (or dropped, in
# cancel mode) for clients that had gone. -1: never.
storm_figures() {
  local name=$1 t0 stopped resumed
  read -r t0 stopped resumed < "$OUT/$name.times"
  awk -F, -v t0="$t0" -v stopped="$stopped" -v resumed="$resumed" -v k="$K" '
    BEGIN { half = -1; most = -1; calm = -1; recovery = -1; n = 0; m = 0; pr = t0 }
    FNR == 1 { file++; for (i = 1; i <= NF; i++) col[file, $i] = i; next }
    file == 1 {  # client
      ok = $col[1, "ok_per_s"]
      # An interval belongs to the phase its middle falls in.
      mid = (pr + $1) / 2
      if (mid <= stopped && FNR > 2) { base += ok; nb++ }
      if (mid > stopped) {
        total_started += $col[1, "requests_per_s"]
        total_sent += $col[1, "sent_per_s"]
      }
      if (mid > resumed) {
        at = ($1 - resumed) * k / 1000
        b = base / nb
        if (half < 0 && ok >= 0.5 * b) half = at
        if (most < 0 && ok >= 0.8 * b) most = at
        if (ok > best) best = ok
        m++; good[m] = ok >= 0.9 * b; begin[m] = pr > resumed ? (pr - resumed) * k / 1000 : 0
      }
      pr = $1
    }
    file == 2 {  # server
      dt = $2 - last_elapsed; last_elapsed = $2
      wasted += $col[2, "abandoned_per_s"] * dt
      if ($1 > resumed) {
        n++; at_[n] = ($1 - resumed) * k / 1000; conc[n] = $3
        if ($3 > peak) { peak = $3; peak_at = n }
        last = $3
      }
    }
    END {
      for (i = peak_at; i <= n; i++) if (conc[i] < 100) { calm = at_[i]; break }
      cand = 0; rg = 0; rb = 0
      for (i = 1; i <= m; i++) {
        if (good[i]) { rg++; rb = 0; if (rg == 3 && cand == 0) cand = i - 2 }
        else { rb++; rg = 0; if (rb == 3) cand = 0 }
      }
      if (cand > 0 && begin[cand] < 60) recovery = begin[cand]
      amp = total_started > 0 ? total_sent / total_started : -1
      printf "%.1f %d %d %.1f %.1f %.1f %.1f %.1f %.2f %d\n", base / nb, peak, last, calm, half, most, best, recovery, amp, wasted
    }
  ' "$OUT/$name.client.csv" "$OUT/$name.server.csv"
}

# storm_strategy NAME: client flags selecting strategy NAME.
storm_strategy() { echo "--strategy $1"; }

# storm_throttle NAME: client flags adding throttle NAME.
storm_throttle() { echo "--throttle $1"; }
