#!/usr/bin/env bash
# Performance figures of the real programs and the virtual-time engine, one
# line per figure with its target (issue 6). Release build; every load goes
# to 127.0.0.1, every run stops by itself (about 14 minutes in all).
#
#   scripts/bench.sh            every scenario
#   scripts/bench.sh NAME...    only these: cpu storm rate memory lateness ks wrk sim
#
# The cpu, storm and lateness scenarios also run both programs on one thread
# on the same core (`taskset -c 0`, `--threads 1`), where taskset is found.
#
# BENCH_BIN=DIR runs the programs found in DIR instead of this tree's
# release build (to compare two builds; the ks scenario always tests this
# tree, and the storm's floor is always this tree's storm_floor).
#
# CPU is user + system time from /proc/PID/stat (10 ms ticks), taken over
# the steady middle of each run; rates come from the client's report lines.
# Loopback TCP work done in softirq context may be charged to whichever
# process is running, or to no process at all: the per-request figures are
# what each process was charged.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet --bins --example storm_floor
BIN=${BENCH_BIN:-target/release}
FLOOR=target/release/examples/storm_floor
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -CONT "$pid" 2>/dev/null || true; kill -INT "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# cpu_ticks PID: user + system clock ticks so far.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)
# per_request TICKS SECONDS RATE: microseconds of CPU per request, for TICKS
# spent over SECONDS at RATE requests a second.
per_request() {
  awk -v t="$1" -v s="$2" -v r="$3" -v k="$TICK" 'BEGIN { printf "%.1f", t / k / s / r * 1e6 }'
}

# start_server NAME FLAGS...: starts a server on a free port; sets SERVER, URL.
start_server() { start_program "$BIN/server" "$@"; }

# start_program PROGRAM NAME FLAGS...: start_server with another program
# that takes --listen and prints its URL the same way. This reads the
# banner, not the server's status line (--status-fd): BENCH_BIN builds from
# before the status line, and storm_floor, have only the banner.
start_program() {
  local program=$1 name=$2; shift 2
  "${PLACE[@]}" "$program" --listen 127.0.0.1:0 "$@" > "$WORK/$name.server.log" 2> "$WORK/$name.server.err" &
  SERVER=$!
  PIDS+=("$SERVER")
  for _ in $(seq 100); do
    URL=$(grep -o 'http://[^ ]*/api' "$WORK/$name.server.log" 2>/dev/null | head -1 || true)
    [[ -n "$URL" ]] && return 0
    sleep 0.05
  done
  echo "the server for $name did not start" >&2
  exit 1
}

# start_client NAME FLAGS...: starts a client against URL; sets CLIENT.
start_client() {
  local name=$1; shift
  "${PLACE[@]}" "$BIN/client" --url "$URL" --seed 1 --report-interval 1s "$@" \
    > "$WORK/$name.client.log" 2> "$WORK/$name.client.err" &
  CLIENT=$!
  PIDS+=("$CLIENT")
}

stop_server() { kill -INT "$SERVER"; wait "$SERVER" || true; }

# mean_ok NAME FROM TO: mean OK/s of the client's report lines FROM..TO (1 s each).
mean_ok() {
  grep '^OK:' "$WORK/$1.client.log" | sed -n "$2,$3p" |
    awk '{ s += $2; n++ } END { printf "%.1f", n ? s / n : 0 }'
}

# figure NAME VALUE UNIT TARGET VERDICT: one result line.
figure() { printf "%-54s %12s %-8s target %-14s %s\n" "$1" "$2" "$3" "$4" "$5"; }
check() { awk -v v="$1" -v t="$3" -v op="$2" 'BEGIN { ok = (op == "<=") ? v <= t : v >= t; print ok ? "PASS" : "FAIL" }'; }

# runtime VARIANT: sets FLAGS, PLACE (a command prefix: where the programs
# run) and LABEL for a run on the default runtime (VARIANT "default"), on
# VARIANT threads, or on one thread each on CPU 0 (VARIANT "core": no wake-up
# crosses between cores).
runtime() {
  FLAGS=(); PLACE=(env --); LABEL=""
  case $1 in
    default) ;;
    core) FLAGS=(--threads 1); PLACE=(taskset -c 0); LABEL=", one core" ;;
    *) FLAGS=(--threads "$1"); LABEL=", --threads $1" ;;
  esac
}

# Whether the one-core runs can be made: taskset is found.
ONE_CORE=0
command -v taskset > /dev/null && ONE_CORE=1

# variants NAME...: the runtime variants a scenario runs, "core" only where
# taskset is found.
variants() {
  VARIANTS=("$@")
  (( ONE_CORE )) && VARIANTS+=(core)
  return 0
}

# Same scenario as the 2014 measurement: 5,000 clients, 1 s mean think, the
# server's limit raised so latency stays at 100 ms: about 4,500 req/s. Run
# with the default runtime, with both programs on one thread, then with both
# on one thread on the same core.
bench_cpu() {
  local threads
  variants default 1
  for threads in "${VARIANTS[@]}"; do
    local name=cpu-$threads
    runtime "$threads"
    start_server "$name" --limit 1000000 "${FLAGS[@]}"
    start_client "$name" --clients 5000 --lambda 1 --duration 32s --ramp-up 2s "${FLAGS[@]}"
    sleep 6
    local s0 c0 s1 c1 ok
    s0=$(cpu_ticks "$SERVER"); c0=$(cpu_ticks "$CLIENT")
    sleep 20
    s1=$(cpu_ticks "$SERVER"); c1=$(cpu_ticks "$CLIENT")
    wait "$CLIENT"; stop_server
    ok=$(mean_ok "$name" 7 26)
    local cus sus
    cus=$(per_request $((c1 - c0)) 20 "$ok")
    sus=$(per_request $((s1 - s0)) 20 "$ok")
    figure "rate with 5,000 clients, 1 s think$LABEL" "$ok" "req/s" "~4,500" "-"
    figure "client CPU per completed request$LABEL" "$cus" "us" "<= 25" "$(check "$cus" '<=' 25)"
    figure "server CPU per completed request$LABEL" "$sus" "us" "<= 20" "$(check "$sus" '<=' 20)"
  done
}

# The default storm with fixed retries: server CPU while thousands of
# requests are stuck in its model after the resume; with the default
# runtime, with both programs on one thread, then with both on one thread
# on the same core. Each time, the same storm against storm_floor (the
# server without HTTP or the model, which never answers) gives the floor:
# what the storm's connections cost by themselves. The floor runs second,
# while the server run's last connections are still in TIME_WAIT: if that
# costs anything, it raises the floor.
bench_storm() {
  local threads
  variants default 1
  for threads in "${VARIANTS[@]}"; do
    runtime "$threads"
    storm_cpu "storm-$threads" "$BIN/server"
    local conc
    conc=$(grep -o 'concurrency: [0-9]*' "$WORK/storm-$threads.server.log" | tail -1 | cut -d' ' -f2)
    figure "requests stuck in the server after resume$LABEL" "$conc" "" "~8,000+" "-"
    figure "server CPU during the fixed-retry storm$LABEL" "$PCT" "% core" "<= 2" "$(check "$PCT" '<=' 2)"
    storm_cpu "floor-$threads" "$FLOOR"
    figure "  floor: storm_floor under the same storm$LABEL" "$PCT" "% core" "-" "-"
  done
}

# storm_cpu NAME PROGRAM: runs the storm (1,000 fixed-retry clients, the
# server stopped for 20 s after 10 s) against PROGRAM; sets PCT, the
# server's share of a core over 30 s starting 10 s after the resume.
storm_cpu() {
  local name=$1 s0 s1
  start_program "$2" "$name" "${FLAGS[@]}"
  start_client "$name" --clients 1000 --strategy fixed --duration 90s "${FLAGS[@]}"
  sleep 10
  kill -STOP "$SERVER"; sleep 20; kill -CONT "$SERVER"
  sleep 10
  s0=$(cpu_ticks "$SERVER"); sleep 30; s1=$(cpu_ticks "$SERVER")
  kill -INT "$CLIENT" 2>/dev/null || true; wait "$CLIENT" || true; stop_server
  PCT=$(awk -v t=$((s1 - s0)) -v k="$TICK" 'BEGIN { printf "%.1f", t / k / 30 * 100 }')
}

# 44,500 clients at 1 s mean think ask N / (think + latency), about 40,300 req/s.
bench_rate() {
  start_server rate --limit 1000000
  start_client rate --clients 44500 --lambda 1 --duration 40s --ramp-up 10s
  wait "$CLIENT"; stop_server
  local ok p50 expected errors
  ok=$(mean_ok rate 16 35)
  p50=$(grep '^OK:' "$WORK/rate.client.log" | sed -n '16,35p' | grep -o 'p50: [0-9.]*' | awk '{ s += $2; n++ } END { printf "%.1f", s / n }')
  expected=$(awk -v l="$p50" 'BEGIN { printf "%.0f", 44500 / (1 + l / 1000) }')
  errors=$(grep '^OK:' "$WORK/rate.client.log" | sed -n '16,35p' | awk '{ s += $5 + $8 } END { printf "%.1f", s / NR }')
  figure "sustained rate, 44,500 clients (asked $expected)" "$ok" "req/s" ">= 40,000" "$(check "$ok" '>=' 40000)"
  figure "  within 1 % of N / (think + latency)" \
    "$(awk -v o="$ok" -v e="$expected" 'BEGIN { printf "%.1f", (o - e) * 100 / e }')" "%" ">= -1" \
    "$(check "$(awk -v o="$ok" -v e="$expected" 'BEGIN { print (o - e) * 100 / e }')" '>=' -1)"
  figure "  errors + timeouts" "$errors" "/s" "0" "$(check "$errors" '<=' 0)"
}

# 100,000 users, 10 s mean think: the client's peak resident memory.
bench_memory() {
  start_server memory --limit 1000000
  start_client memory --clients 100000 --lambda 10 --duration 30s --ramp-up 5s
  sleep 25
  local hwm
  hwm=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$CLIENT/status")
  wait "$CLIENT"; stop_server
  figure "client peak RSS, 100,000 clients" "$hwm" "MB" "<= 150" "$(check "$hwm" '<=' 150)"
}

# 11,000 clients at 1 s think: 10,000 req/s; how late attempts start.
# Start lateness with the default timer (500 us steps), then an exact one,
# then the default timer with both programs on one thread on the same core;
# with both programs' CPU per request, at the same load.
bench_lateness() {
  local run runs=("500us default" "0s default")
  (( ONE_CORE )) && runs+=("500us core")
  for run in "${runs[@]}"; do
    local step=${run% *} name=lateness-${run// /-}
    runtime "${run#* }"
    start_server "$name" --limit 1000000 --timer-resolution "$step" "${FLAGS[@]}"
    start_client "$name" --clients 11000 --lambda 1 --duration 30s --ramp-up 5s \
      --timer-resolution "$step" "${FLAGS[@]}"
    sleep 10
    local s0 c0 s1 c1
    s0=$(cpu_ticks "$SERVER"); c0=$(cpu_ticks "$CLIENT")
    sleep 15
    s1=$(cpu_ticks "$SERVER"); c1=$(cpu_ticks "$CLIENT")
    wait "$CLIENT"; stop_server
    local line p50 p99 max ok
    line=$(grep 'start lateness' "$WORK/$name.client.log")
    p50=$(sed 's/.*p50: \([0-9.]*\)ms.*/\1/' <<< "$line")
    p99=$(sed 's/.*p99: \([0-9.]*\)ms.*/\1/' <<< "$line")
    max=$(sed 's/.*max: \([0-9.]*\)ms.*/\1/' <<< "$line")
    ok=$(mean_ok "$name" 11 25)
    figure "start lateness p50 at 10,000 req/s, $step$LABEL" "$p50" "ms" "-" "-"
    figure "start lateness p99 at 10,000 req/s, $step$LABEL" "$p99" "ms" "<= 1" "$(check "$p99" '<=' 1)"
    figure "start lateness max at 10,000 req/s, $step$LABEL" "$max" "ms" "-" "-"
    figure "  client, server CPU per request, $step$LABEL" \
      "$(per_request $((c1 - c0)) 15 "$ok"), $(per_request $((s1 - s0)) 15 "$ok")" "us" "-" "-"
  done
}

bench_ks() {
  if cargo test --release --quiet --lib kolmogorov_smirnov > "$WORK/ks.log" 2>&1; then
    figure "think times: KS test, 100,000 samples, 1 %" "passes" "" "passes" "PASS"
  else
    figure "think times: KS test, 100,000 samples, 1 %" "fails" "" "passes" "FAIL"
  fi
}

# A reference for raw request cost: the same server under wrk (HTTP/1.1
# keep-alive, no think time), server limit raised.
bench_wrk() {
  if ! command -v wrk > /dev/null; then
    figure "server under wrk" "skipped" "" "-" "(apt-get install wrk)"
    return
  fi
  start_server wrk --limit 1000000
  local s0 s1 rate
  s0=$(cpu_ticks "$SERVER")
  wrk -t 1 -c 500 -d 20s "$URL" > "$WORK/wrk.log"
  s1=$(cpu_ticks "$SERVER")
  stop_server
  rate=$(awk '/Requests\/sec/ { print $2 }' "$WORK/wrk.log")
  figure "server under wrk, 500 connections" "$rate" "req/s" "-" "-"
  figure "  server CPU per request under wrk" \
    "$(per_request $((s1 - s0)) 20 "$rate")" "us" "-" "-"
}

bench_sim() {
  local out line
  out=$("$BIN/storm" --engine sim --quiet --verbose --out "$WORK/sim" | grep 'events in')
  while read -r line; do
    figure "sim, default storm: ${line%%:*}" "$(grep -o '[0-9.]* M events/s' <<< "$line" | cut -d' ' -f1)" \
      "M ev/s" ">= 5" "$(check "$(grep -o '[0-9.]* M events/s' <<< "$line" | cut -d' ' -f1)" '>=' 5)"
  done <<< "$out"
  local start end ms
  start=$(date +%s%N)
  "$BIN/storm" --engine sim --quiet --out "$WORK/sim1" > /dev/null
  end=$(date +%s%N)
  ms=$(( (end - start) / 1000000 ))
  figure "sim, default storm (3 strategies), wall" "$ms" "ms" "< 1000" "$(check "$ms" '<=' 999)"
  start=$(date +%s%N)
  "$BIN/storm" --engine sim --quiet --strategies fixed --observe 50s \
    --client-args "--clients 100000" --out "$WORK/sim2" > /dev/null
  end=$(date +%s%N)
  ms=$(( (end - start) / 1000000 ))
  figure "sim, 100,000 clients for 100 s, wall" "$ms" "ms" "< 60000" "$(check "$ms" '<=' 59999)"
}

echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), $(uname -r)"
echo "commit:  $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (modified)')"
scenarios=("$@")
[[ ${#scenarios[@]} -gt 0 ]] || scenarios=(ks sim cpu storm memory lateness rate wrk)
for s in "${scenarios[@]}"; do
  case "$s" in
    cpu|storm|rate|memory|lateness|ks|wrk|sim) runtime default; "bench_$s" ;;
    *) echo "unknown scenario: $s (cpu storm rate memory lateness ks wrk sim)" >&2; exit 2 ;;
  esac
done
