#!/usr/bin/env bash
# Performance of the real programs and the virtual-time engine, each target
# a ratio to a peer or a floor measured in the same run, interleaved, on the
# same machine and the same load, so that the shared host's drift (up to
# twice within an hour) cancels. Release build; every load goes
# to 127.0.0.1 and stops by itself.
#
#   scripts/bench.sh [--rounds N] [SCENARIO...]
#
# Scenarios (default: peers storm rate sim open):
#   peers     4,500 req/s (5,000 users, 1 s mean think) against
#             `server --limit 1000000`, interleaved with oha (-c 500 -q 4500)
#             against the same server; then the same over HTTP/2 (h2c):
#             `client --http2` and `oha --http2 -c 3 -p 167 -q 4500` (the
#             client's connections and streams, see OHA_H2_CONNECTIONS);
#             hey (-c 500 -q 9) against the same server, and the same
#             client against examples/sleep_floor (a plain 100 ms sleep on
#             the same lanes) and against the server on 1 ms timer steps,
#             and the client on 1 ms steps (oha's) against the server;
#             20 s measured each, N rounds
#   peers-h2  only the two pairs of targets 1 and 1b (client and oha over
#             HTTP/1.1, then over HTTP/2), 4 runs a round: a quicker look
#             at the client's CPU per request over both protocols
#   storm     the fixed-retry storm against the server and, side by side
#             at the same time, against examples/storm_floor and against
#             examples/sleep_floor holding each request for an hour (hyper
#             without the model), N rounds; 60 s measured from 10 s after
#             the resume
#   rate      the host's ceiling first (oha, closed loop with 6,000
#             connections, against the same server: whether any client
#             could sustain 50,000 req/s here), then the highest sustained
#             rate, 56,000 users at 1 s mean think, then users asking 80 %
#             of that ceiling (whether this pair holds what the host can)
#   sim       the virtual engine (scripts/bench-sim.sh)
#   open      the virtual engine carrying millions of open requests: open
#             traffic at 100,000 req/s with fixed retries and the server
#             stopped from 5 s to 35 s of 40 s (about 3,000,000 requests
#             outstanding at the resume), against the same traffic without
#             the pause; beside it a closed population of 3,000,000 users
#             asking the same rate through the same pause, against 1,000
#             users. Each run is a process of its own on one core
#             (examples/sim_memory): peak resident memory per request held,
#             and events a second. Then the real client, 300 sessions a
#             second against the server stopped from 5 s to 35 s (some
#             9,000 held), against the same without the pause: its peak
#             memory per session held, before the resume and through it.
#             N rounds, about 3 minutes each
#   proxy     the fault proxy (`storm proxy`, its fault off) against a
#             direct connection to an upstream that answers at once
#             (examples/proxy_latency): closed loops on 1 and on 32
#             keep-alive connections, 5 s each way, in alternating order,
#             5 rounds: latency added at p50 and p99, throughput through
#             it as a share of the direct one, its CPU a request
#   search    the phase map of results/phase (scenarios/phase.toml, 8 loads,
#             pauses to 60 s) by the grid (every 2 s, 20 seeds) and by
#             the adaptive search (its defaults), in turn, the order
#             alternating round by round: per setting the adaptive T50
#             against the grid's interval and width, per case the runs,
#             and the map's wall time (scripts/search-compare.py)
#   memory    the client's peak resident memory, 100,000 users
#   lateness  how late attempts start at 10,000 req/s
#   ks        the think times' Kolmogorov-Smirnov test
#
# --rounds N    rounds of the interleaved scenarios (default 2)
# BENCH_BIN=DIR runs the server and client found in DIR instead of this
#               tree's release build (to compare two builds).
# BENCH_BASE=REV passes --base-rev REV to scripts/bench-sim.sh.
#
# Needs oha (`cargo install oha --version 1.16.0 --locked`, the version
# measured; its `--http2` is prior knowledge in clear) and hey
# (`apt-get install hey`) for the peers scenarios, and oha for the rate
# scenario's ceiling and its 80 % run; a missing peer's runs are skipped
# and said so. The lateness scenario
# reads the client's status lines with jq, and the open scenario its runs'
# lines. The open scenario takes about 2 GB of memory at once.
#
# CPU is user + system time from /proc/PID/stat (10 ms ticks), taken over
# the steady middle of each run; requests are counted from the CSV rows of
# whoever answers for them (the client's own for this client, the server's
# for oha and hey), interpolated to the same instants as the CPU samples.
# Loopback TCP work done in softirq context is charged to whichever process
# is running: each figure is what the process was charged.
#
# Each target's ratio is pooled over every round; the line under it gives
# the range of the rounds' own ratios. The verdict is PASS when every round
# meets the target, FAIL when none does, and MIXED when they disagree: the
# host drifted more within the run than the ratio's distance from its
# target, and more rounds (or a quieter host) are needed to decide.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=2
scenarios=()
while (( $# )); do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --rounds=*) ROUNDS=${1#*=}; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
    *) scenarios+=("$1"); shift ;;
  esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "--rounds: a positive whole number, not '$ROUNDS'" >&2; exit 2; }
ALL=(peers peers-h2 storm rate sim open search proxy memory lateness ks)
[[ ${#scenarios[@]} -gt 0 ]] || scenarios=(peers storm rate sim open)
for s in "${scenarios[@]}"; do
  [[ " ${ALL[*]} " == *" $s "* ]] || { echo "unknown scenario: $s (${ALL[*]})" >&2; exit 2; }
done

cargo build --release --quiet --bins --example storm_floor --example sleep_floor --example sim_memory \
  --example proxy_latency
BIN=${BENCH_BIN:-target/release}
STORM_FLOOR=target/release/examples/storm_floor
SLEEP_FLOOR=target/release/examples/sleep_floor
SIM_MEMORY=target/release/examples/sim_memory
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -CONT "$pid" 2>/dev/null || true; kill -INT "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

TICK=$(getconf CLK_TCK)
# cpu_ticks PID: user + system clock ticks so far.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
now() { date +%s.%N; }
# us_per COUNT_TICKS REQUESTS: microseconds of CPU per request.
us_per() { awk -v t="$1" -v r="$2" -v k="$TICK" 'BEGIN { printf "%.1f", (r > 0 ? t / k / r * 1e6 : 0) }'; }
# ratio A B: A / B to two places.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
# figure NAME VALUE UNIT TARGET VERDICT: one result line.
figure() { printf "%-54s %12s %-8s target %-14s %s\n" "$1" "$2" "$3" "$4" "$5"; }
# check VALUE OP LIMIT: PASS or FAIL.
check() { awk -v v="$1" -v t="$3" -v op="$2" 'BEGIN { ok = (op == "<=") ? v <= t : v >= t; print ok ? "PASS" : "FAIL" }'; }
# rounds_check OP LIMIT RATIO...: PASS if every round's ratio meets the
# target, FAIL if none does, MIXED if the rounds disagree (the host's drift
# within a round is larger than the ratio's distance from its target).
rounds_check() {
  local op=$1 limit=$2 r pass=0 fail=0; shift 2
  for r in "$@"; do
    if [[ $(check "$r" "$op" "$limit") == PASS ]]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
  done
  if (( fail == 0 )); then echo PASS; elif (( pass == 0 )); then echo FAIL; else echo MIXED; fi
}
# spread RATIO...: the lowest and highest of the rounds' ratios.
spread() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }
# target NAME POOLED OP LIMIT RATIO...: a target's line, the ratio pooled
# over every round and, after it, each round's own ratio's range; the
# verdict is the rounds' (rounds_check). With LIMIT "-" the line is a
# figure without a target.
target() {
  local name=$1 pooled=$2 op=$3 limit=$4; shift 4
  if [[ $limit == - ]]; then
    figure "$name" "$pooled" "x" "-" "-"
  else
    figure "$name" "$pooled" "x" "$op $limit" "$(rounds_check "$op" "$limit" "$@")"
  fi
  if (( $# > 1 )); then figure "     each round" "$(spread "$@")" "x" "" ""; fi
}

# counted CSV COLUMN T0 T1: how many of COLUMN (a per-second rate) happened
# between Unix instants T0 and T1 (seconds), each row's count spread evenly
# over its interval (which ends at its unix_ms and lasts the step of its
# elapsed_s).
counted() {
  awk -F, -v col="$2" -v t0="$3" -v t1="$4" '
    function part(s, e, n, t) { if (t >= e) return n; if (t <= s) return 0; return n * (t - s) / (e - s) }
    NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
    { end = $1 / 1000; len = $2 - prev; prev = $2; n = $c * len
      total += part(end - len, end, n, t1) - part(end - len, end, n, t0) }
    END { printf "%.0f", total }' "$1"
}

# per_second COUNT: COUNT over the window steady measured (T0 to T1), a second.
per_second() { awk -v r="$1" -v a="$T0" -v b="$T1" 'BEGIN { printf "%.1f", r / (b - a) }'; }

# mean_between CSV COLUMN T0 T1: the mean of COLUMN over rows ending
# between T0 and T1.
mean_between() {
  awk -F, -v col="$2" -v t0="$3" -v t1="$4" '
    NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
    $1 / 1000 > t0 && $1 / 1000 <= t1 && $c != "" { s += $c; n++ }
    END { printf "%.1f", n ? s / n : 0 }' "$1"
}

# start_program PROGRAM NAME FLAGS...: starts PROGRAM (the server or a
# floor, which take --listen and print their URL alike) on a free port;
# sets SERVER and URL.
start_program() {
  local program=$1 name=$2; shift 2
  "$program" --listen 127.0.0.1:0 "$@" > "$WORK/$name.server.log" 2> "$WORK/$name.server.err" &
  SERVER=$!
  PIDS+=("$SERVER")
  for _ in $(seq 100); do
    URL=$(grep -o 'http://[^ ]*/api' "$WORK/$name.server.log" 2>/dev/null | head -1 || true)
    [[ -n "$URL" ]] && return 0
    sleep 0.05
  done
  echo "$program did not start for $name: $(cat "$WORK/$name.server.err")" >&2
  exit 1
}
start_server() { local name=$1; shift; start_program "$BIN/server" "$name" --csv "$WORK/$name.server.csv" "$@"; }
stop_server() { kill -INT "$SERVER"; wait "$SERVER" || true; }

# start_loader NAME COMMAND...: starts COMMAND, the load of run NAME, its
# output to NAME's client log and errors; sets LOADER.
start_loader() {
  local name=$1; shift
  "$@" > "$WORK/$name.client.log" 2> "$WORK/$name.client.err" &
  LOADER=$!
  PIDS+=("$LOADER")
}

# start_client NAME FLAGS...: starts this project's client against URL;
# sets LOADER.
# Its status lines (the protocol storm's runner reads) go to NAME.client.status.
start_client() {
  local name=$1; shift
  start_loader "$name" "$BIN/client" --url "$URL" --seed 1 --report-interval 1s \
    --csv "$WORK/$name.client.csv" --status-fd 3 "$@" 3> "$WORK/$name.client.status"
}

# client_lateness NAME: how late client NAME started its attempts over its
# whole run, "P50 P99 MAX" in milliseconds, from its last status line (its
# totals); "- - -" if it gave none.
client_lateness() {
  jq -rs 'map(.client_totals // empty) | last // error("no totals")
          | .start_lateness | "\(.p50_ms // "-") \(.p99_ms // "-") \(.max_ms // "-")"' \
    "$WORK/$1.client.status" 2> /dev/null || echo "- - -"
}

# steady WARMUP SECONDS: waits WARMUP seconds, then measures SECONDS;
# sets T0, T1 and the CPU ticks LOADER_CPU and SERVER_CPU taken between.
steady() {
  sleep "$1"
  local l0 s0
  T0=$(now); l0=$(cpu_ticks "$LOADER"); s0=$(cpu_ticks "$SERVER")
  sleep "$2"
  T1=$(now); LOADER_CPU=$(( $(cpu_ticks "$LOADER") - l0 )); SERVER_CPU=$(( $(cpu_ticks "$SERVER") - s0 ))
}

# ---- peers: client and server CPU per request against oha, hey, a floor

HAVE_OHA=0; command -v oha > /dev/null && HAVE_OHA=1
HAVE_HEY=0; command -v hey > /dev/null && HAVE_HEY=1

# oha over HTTP/2 as the client: oha's -c is its connections and -p the
# streams each carries at once (c * p workers, each taking the next of
# -q's evenly paced requests when free; oha 1.16.0's client.rs). The
# client deals 4,500 req/s to one lane (a lane per 20,000), whose users
# share its connections, opening another only when every one has its 200
# streams (the server's SETTINGS_MAX_CONCURRENT_STREAMS) in use: about
# 460 streams in flight (4,500 a second for 101 ms), so three
# connections. oha gets the same three, and 501 streams on them (at most
# 200 each), the concurrency of its HTTP/1.1 run (-c 500). Each round
# prints the most connections the client had open: four when the
# balance spread its users over two lanes (two each).
OHA_H2_CONNECTIONS=3
OHA_H2_STREAMS=167

# peer_run LOADER TARGET ROUND: 28 s of LOADER (client, client-1ms, oha or
# hey) at about 4,500 req/s against TARGET (server, server-1ms or floor),
# measured from 6 s to 26 s;
# appends "LOADER TARGET loader_ticks server_ticks requests round" to
# peers.txt.
peer_run() {
  local loader=$1 target=$2 name=$1-$2-$3 requests
  case $target in
    server) start_server "$name" --limit 1000000 ;;
    # The server with its completions on tokio's 1 ms steps, as the
    # floor's sleep is, instead of its default 500 us.
    server-1ms) start_server "$name" --limit 1000000 --timer-resolution 1ms ;;
    floor) start_program "$SLEEP_FLOOR" "$name" ;;
  esac
  case $loader in
    client) start_client "$name" --clients 5000 --lambda 1 --duration 28s --ramp-up 2s ;;
    # The client starting attempts on 1 ms steps, as oha's tokio timer
    # does, instead of its default 500 us.
    client-1ms) start_client "$name" --clients 5000 --lambda 1 --duration 28s --ramp-up 2s --timer-resolution 1ms ;;
    # The same users, each attempt a stream on the connections they
    # share (h2c by prior knowledge).
    client-h2) start_client "$name" --clients 5000 --lambda 1 --duration 28s --ramp-up 2s --http2 ;;
    oha) start_loader "$name" oha --no-tui -c 500 -q 4500 -z 28s "$URL" ;;
    oha-h2) start_loader "$name" oha --no-tui --http2 -c "$OHA_H2_CONNECTIONS" -p "$OHA_H2_STREAMS" -q 4500 -z 28s "$URL" ;;
    hey) start_loader "$name" hey -c 500 -q 9 -z 28s "$URL" ;;
  esac
  steady 6 20
  wait "$LOADER" || true
  stop_server
  if [[ $loader == client* ]]; then
    requests=$(counted "$WORK/$name.client.csv" ok_per_s "$T0" "$T1")
  else
    requests=$(counted "$WORK/$name.server.csv" completed_per_s "$T0" "$T1")
  fi
  echo "$loader $target $LOADER_CPU $SERVER_CPU $requests $3" >> "$WORK/peers.txt"
  figure "  round $3: $loader -> $target, req/s" "$(per_second "$requests")" "req/s" "~4,500" "-"
  figure "  round $3: $loader, $target CPU per request" "$(us_per "$LOADER_CPU" "$requests"), $(us_per "$SERVER_CPU" "$requests")" "us" "-" "-"
  if [[ $loader == client-h2 ]]; then
    figure "  round $3: client --http2, connections (most open)" \
      "$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "connections") c = i; next } $c > m { m = $c } END { print m + 0 }' "$WORK/$name.client.csv")" \
      "" "$OHA_H2_CONNECTIONS" "-"
  fi
}

# peer_cost LOADER TARGET FIELD: microseconds per request of FIELD (3: the
# loader's CPU, 4: the server's) summed over every round of that pair.
peer_cost() {
  awk -v l="$1" -v t="$2" -v f="$3" -v k="$TICK" '
    $1 == l && $2 == t { c += $f; r += $5 } END { printf "%.1f", (r > 0 ? c / k / r * 1e6 : 0) }' "$WORK/peers.txt"
}

# round_ratios A_LOADER A_TARGET A_FIELD B_LOADER B_TARGET B_FIELD: in each
# round, A's CPU per request (FIELD as in peer_cost) over B's, one a line.
round_ratios() {
  awk -v al="$1" -v at="$2" -v af="$3" -v bl="$4" -v bt="$5" -v bf="$6" '
    $1 == al && $2 == at && $5 > 0 { a[$6] = $af / $5 }
    $1 == bl && $2 == bt && $5 > 0 { b[$6] = $bf / $5 }
    END { for (r in a) if ((r in b) && b[r] > 0) printf "%.2f\n", a[r] / b[r] }' "$WORK/peers.txt"
}

# peer_runs RUN...: every RUN (LOADER:TARGET) in turn, ROUNDS times.
peer_runs() {
  local round run
  for round in $(seq "$ROUNDS"); do
    for run in "$@"; do peer_run "${run%:*}" "${run#*:}" "$round"; done
  done
}

# peer_ran LOADER TARGET: whether that pair ran.
peer_ran() { awk -v l="$1" -v t="$2" '$1 == l && $2 == t { found = 1 } END { exit !found }' "$WORK/peers.txt"; }

# peer_target NAME OURS THEIRS: the target "NAME <= 0.8", the client's CPU
# per request over oha's, OURS and THEIRS the loaders against the server.
peer_target() {
  local rounds
  mapfile -t rounds < <(round_ratios "$2" server 3 "$3" server 3)
  RATIOS+=("$(target "$1" "$(ratio "$(peer_cost "$2" server 3)" "$(peer_cost "$3" server 3)")" "<=" 0.8 "${rounds[@]}")")
}

# peers_http2: the HTTP/2 pair's figures and target 1b, if it ran.
peers_http2() {
  peer_ran client-h2 server || return 0
  figure "client --http2 CPU per request" "$(peer_cost client-h2 server 3)" "us" "-" "-"
  figure "server CPU per request under it" "$(peer_cost client-h2 server 4)" "us" "-" "-"
  peer_ran oha-h2 server || return 0
  figure "oha --http2 CPU per request" "$(peer_cost oha-h2 server 3)" "us" "-" "-"
  figure "server CPU per request under oha --http2" "$(peer_cost oha-h2 server 4)" "us" "-" "-"
  peer_target "1b. client / oha, CPU per request, HTTP/2" client-h2 oha-h2
  RATIOS+=("$(figure "    server under the client / under oha, HTTP/2" \
    "$(ratio "$(peer_cost client-h2 server 4)" "$(peer_cost oha-h2 server 4)")" "x" "-" "-")")
}

# The HTTP/1.1 pair, then the HTTP/2 pair: the client over each protocol
# against oha over the same one.
PEER_PROTOCOLS=(client:server oha:server client-h2:server oha-h2:server)

# peers-h2: only the two pairs of targets 1 and 1b, four runs a round.
bench_peers-h2() {
  if (( ! HAVE_OHA )); then figure "oha" "skipped" "" "-" "(cargo install oha)"; return; fi
  peer_runs "${PEER_PROTOCOLS[@]}"
  figure "client CPU per request, $ROUNDS rounds" "$(peer_cost client server 3)" "us" "-" "-"
  figure "oha CPU per request" "$(peer_cost oha server 3)" "us" "-" "-"
  peer_target "1. client / oha, CPU per request" client oha
  peers_http2
}

bench_peers() {
  local runs=(client:server)
  if (( HAVE_OHA )); then runs=("${PEER_PROTOCOLS[@]}")
  else figure "oha" "skipped" "" "-" "(cargo install oha)"; runs+=(client-h2:server); fi
  (( HAVE_HEY )) && runs+=(hey:server) || figure "hey" "skipped" "" "-" "(apt-get install hey)"
  runs+=(client:floor client:server-1ms)
  if (( HAVE_OHA )); then runs+=(client-1ms:server); fi
  peer_runs "${runs[@]}"
  local ours server floor rounds
  ours=$(peer_cost client server 3); server=$(peer_cost client server 4); floor=$(peer_cost client floor 4)
  figure "client CPU per request, $ROUNDS rounds" "$ours" "us" "-" "-"
  figure "server CPU per request under the client" "$server" "us" "-" "-"
  figure "sleep_floor CPU per request under the client" "$floor" "us" "-" "-"
  if (( HAVE_OHA )); then
    local oha served
    oha=$(peer_cost oha server 3); served=$(peer_cost oha server 4)
    figure "oha CPU per request" "$oha" "us" "-" "-"
    figure "server CPU per request under oha" "$served" "us" "-" "-"
    peer_target "1. client / oha, CPU per request" client oha
    mapfile -t rounds < <(round_ratios client server 4 oha server 4)
    RATIOS+=("$(target "2b. server under the client / under oha" "$(ratio "$server" "$served")" "<=" 1.0 "${rounds[@]}")")
    local stepped
    stepped=$(peer_cost client-1ms server 3)
    figure "client CPU per request, on 1 ms steps" "$stepped" "us" "-" "-"
    figure "server CPU per request under it" "$(peer_cost client-1ms server 4)" "us" "-" "-"
    RATIOS+=("$(figure "    client on 1 ms steps as oha's / oha" "$(ratio "$stepped" "$oha")" "x" "-" "-")")
    RATIOS+=("$(figure "    server under that client / under oha" "$(ratio "$(peer_cost client-1ms server 4)" "$served")" "x" "-" "-")")
  fi
  if (( HAVE_HEY )); then
    figure "hey CPU per request" "$(peer_cost hey server 3)" "us" "-" "-"
    figure "server CPU per request under hey" "$(peer_cost hey server 4)" "us" "-" "-"
    RATIOS+=("$(figure "   client / hey, CPU per request" "$(ratio "$ours" "$(peer_cost hey server 3)")" "x" "-" "-")")
  fi
  # Target 2a holds the server on the floor's 1 ms timer steps; its
  # default 500 us step is the model's precision, and what it costs is
  # said beside it, without a target.
  local coarse
  coarse=$(peer_cost client server-1ms 4)
  figure "server CPU per request, 1 ms timer steps" "$coarse" "us" "-" "-"
  mapfile -t rounds < <(round_ratios client server-1ms 4 client floor 4)
  RATIOS+=("$(target "2a. server on 1 ms steps / sleep_floor, CPU" "$(ratio "$coarse" "$floor")" "<=" 1.1 "${rounds[@]}")")
  mapfile -t rounds < <(round_ratios client server 4 client floor 4)
  RATIOS+=("$(target "    the 500 us step: server / sleep_floor, CPU" "$(ratio "$server" "$floor")" "" "-" "${rounds[@]}")")
  peers_http2
}

# ---- storm: the server's CPU in the fixed-retry storm against the floors

# The storm's measured window after the resume, in seconds. The server
# takes only 2-3 % of a core there (about 25 ms a second), and this host
# has spells of tens of seconds in which every process on it, the clients
# too, is charged twice as much for the same work: runs made one after
# the other caught them unevenly (the ratio of two such runs spread from
# 1.07 to 1.82). So the server's storm and the floors' run side by side,
# each with its own client, paused and measured over the same instants:
# a spell then falls on all. Together they take a few percent of a core.
STORM_WINDOW=60

# How long sleep_floor holds each request in the storm: longer than the
# run, so that, like the server there, it never answers and holds every
# attempt until its client goes. What it costs beyond storm_floor is
# hyper's connection; what the server costs beyond it is the model's hold.
STORM_HOLD=1h

# storm_round ROUND: the storm (1,000 fixed-retry users, the program
# stopped for 20 s after 10 s) against the server and, at the same time,
# each with its own client, against sleep_floor (hyper, no model) and
# storm_floor (neither); appends "what ticks round" to storm.txt for each,
# over the STORM_WINDOW seconds from 10 s after the resume.
storm_round() {
  local round=$1 duration="$((10 + 20 + 10 + STORM_WINDOW + 20))s"
  local names=(server hyper floor) programs=() loads=() what
  for what in "${names[@]}"; do
    case $what in
      server) start_server "server-$round" ;;
      hyper) start_program "$SLEEP_FLOOR" "hyper-$round" --delay "$STORM_HOLD" ;;
      floor) start_program "$STORM_FLOOR" "floor-$round" ;;
    esac
    programs+=("$SERVER")
    start_client "$what-$round" --clients 1000 --strategy fixed --duration "$duration"
    loads+=("$LOADER")
  done
  sleep 10
  kill -STOP "${programs[@]}"; sleep 20; kill -CONT "${programs[@]}"
  sleep 10
  local before=() pid i
  for pid in "${programs[@]}"; do before+=("$(cpu_ticks "$pid")"); done
  sleep "$STORM_WINDOW"
  local ticks=()
  for i in "${!programs[@]}"; do ticks+=("$(( $(cpu_ticks "${programs[$i]}") - before[i] ))"); done
  kill -INT "${loads[@]}" 2>/dev/null || true
  for pid in "${loads[@]}"; do wait "$pid" || true; done
  kill -INT "${programs[@]}"
  for pid in "${programs[@]}"; do wait "$pid" || true; done
  for i in "${!names[@]}"; do storm_cpu "${names[$i]}" "${ticks[$i]}" "$round"; done
}

# storm_cpu WHAT TICKS ROUND: records and prints WHAT's CPU over the window.
storm_cpu() {
  echo "$1 $2 $3" >> "$WORK/storm.txt"
  figure "  $1-$3: CPU after the resume" "$(awk -v t="$2" -v k="$TICK" -v w="$STORM_WINDOW" 'BEGIN { printf "%.1f", t / k / w * 100 }')" "% core" "-" "-"
}

# storm_ratios A B: A's CPU over B's in storm.txt, pooled over every
# round, then each round's own, one a line.
storm_ratios() {
  awk -v a="$1" -v b="$2" '$1 == a { s[$3] = $2; sa += $2 } $1 == b { f[$3] = $2; sb += $2 }
    END { printf "%.2f\n", (sb > 0 ? sa / sb : 0); for (r in s) if ((r in f) && f[r] > 0) printf "%.2f\n", s[r] / f[r] }' \
    "$WORK/storm.txt"
}

bench_storm() {
  local round
  for round in $(seq "$ROUNDS"); do
    storm_round "$round"
    local stuck
    stuck=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "concurrency") c = i; next } $c > m { m = $c } END { print m + 0 }' "$WORK/server-$round.server.csv")
    figure "  server-$round: requests stuck after the resume" "$stuck" "" "-" "-"
  done
  local ratios
  # Target 3 is against what hyper alone costs, a required crate: the
  # server holding each request against sleep_floor's plain sleep. Beside
  # it, without a target, the server against storm_floor (no hyper) and
  # hyper's connection alone.
  mapfile -t ratios < <(storm_ratios server hyper)
  RATIOS+=("$(target "3. storm: server / sleep_floor, CPU" "${ratios[0]}" "<=" 1.1 "${ratios[@]:1}")")
  mapfile -t ratios < <(storm_ratios server floor)
  RATIOS+=("$(target "     server / storm_floor (no hyper)" "${ratios[0]}" "" "-" "${ratios[@]:1}")")
  mapfile -t ratios < <(storm_ratios hyper floor)
  RATIOS+=("$(target "     hyper's connection: sleep_floor / storm_floor" "${ratios[0]}" "" "-" "${ratios[@]:1}")")
}

# ---- rate: the highest sustained rate on this machine

# rate_run NAME USERS: USERS users (1 s mean think) against a fresh
# server; sets OK (req/s), P50 (ms), ASKED (what the users ask at that
# latency, req/s), GAP (OK against ASKED, %) and ERRORS (errors and
# timeouts a second) over the steady 20 s.
rate_run() {
  local name=$1 users=$2 csv=$WORK/$1.client.csv
  start_server "$name" --limit 1000000
  start_client "$name" --clients "$users" --lambda 1 --duration 40s --ramp-up 10s
  steady 15 20
  wait "$LOADER" || true; stop_server
  OK=$(per_second "$(counted "$csv" ok_per_s "$T0" "$T1")")
  P50=$(mean_between "$csv" p50_ms "$T0" "$T1")
  ASKED=$(awk -v n="$users" -v l="$P50" 'BEGIN { printf "%.0f", n / (1 + l / 1000) }')
  GAP=$(awk -v o="$OK" -v e="$ASKED" 'BEGIN { printf "%.1f", (o - e) * 100 / e }')
  ERRORS=$(per_second $(( $(counted "$csv" errors_per_s "$T0" "$T1") + $(counted "$csv" timeouts_per_s "$T0" "$T1") )))
  figure "  $users users, p50 latency" "$P50" "ms" "-" "-"
}

bench_rate() {
  local ceiling=""
  if (( HAVE_OHA )); then
    # The host's ceiling: oha, closed loop, each of 6,000 connections
    # sending its next request when the last is answered (60,000 req/s at
    # the model's 100 ms), against the same server; counted by the server.
    start_server ceiling --limit 1000000
    start_loader ceiling bash -c 'ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec oha --no-tui -c 6000 -z 30s "$1"' oha "$URL"
    steady 8 20
    wait "$LOADER" || true; stop_server
    ceiling=$(per_second "$(counted "$WORK/ceiling.server.csv" completed_per_s "$T0" "$T1")")
  else
    figure "host ceiling (oha)" "skipped" "" "-" "(cargo install oha)"
  fi
  # 56,000 users at 1 s mean think ask N / (think + latency), about
  # 50,900 req/s at the model's 100 ms.
  rate_run rate 56000
  RATIOS+=("$(figure "4. sustained rate (56000 users asked $ASKED)" "$OK" "req/s" ">= 50,000" "$(check "$OK" '>=' 50000)")")
  RATIOS+=("$(figure "   within 1 % of what the users ask" "$GAP" "%" ">= -1" "$(check "$GAP" '>=' -1)")")
  RATIOS+=("$(figure "   errors + timeouts" "$ERRORS" "/s" "0" "$(check "$ERRORS" '<=' 0)")")
  [[ -n $ceiling ]] || return 0
  RATIOS+=("$(figure "   the host's ceiling: oha, 6,000 connections" "$ceiling" "req/s" ">= 50,000" "$(check "$ceiling" '>=' 50000)")")
  # What this pair sustains below that ceiling: users asking 80 % of it
  # at 100 ms (each user's cycle is 1.1 s), in thousands.
  local users
  users=$(awk -v c="$ceiling" 'BEGIN { n = int(c * 0.8 * 1.1 / 1000 + 0.5) * 1000; print (n > 0 ? n : 1000) }')
  rate_run rate-80 "$users"
  RATIOS+=("$(figure "   at 80 % of it ($users users asked $ASKED)" "$OK" "req/s" "-" "-")")
  RATIOS+=("$(figure "     within 1 % of what the users ask" "$GAP" "%" ">= -1" "$(check "$GAP" '>=' -1)")")
  RATIOS+=("$(figure "     errors + timeouts" "$ERRORS" "/s" "0" "$(check "$ERRORS" '<=' 0)")")
}

# ---- sim: the virtual engine

bench_sim() {
  local args=()
  if [[ ! -x scripts/bench-sim.sh ]]; then
    figure "sim" "skipped" "" "-" "(no scripts/bench-sim.sh)"
    return
  fi
  [[ -n ${BENCH_BASE:-} ]] && args=(--base-rev "$BENCH_BASE")
  scripts/bench-sim.sh "${args[@]}" | tee "$WORK/sim.txt"
  while IFS= read -r line; do RATIOS+=("5. ${line}"); done < <(grep -E 'PASS|FAIL' "$WORK/sim.txt" || true)
}

# ---- open: the virtual engine carrying millions of open requests

# The open storm: 100,000 requests a second arriving whatever the server
# does, fixed retries that never give up, the server stopped from 5 s to
# 35 s of 40 s: some 3,000,000 requests outstanding at the resume. The
# server's limit keeps it at its base latency until then, its backlog is
# Linux's usual 4,096 whatever this host's, and the bound on sessions is
# raised above the default million so that nothing is refused.
OPEN_SERVER="--seed 1 --limit 1000000 --backlog 4096"
OPEN_CLIENT="--duration 40s --seed 1 --report-interval 1s --max-outstanding 10000000"
OPEN_RATE=100000
OPEN_PAUSE=(--pause-at 5s --pause 30s)
# The closed population beside it: as many users as the open storm holds
# requests at its peak, asking the same 100,000 a second (30 s mean
# think), through the same pause.
CLOSED_USERS=3000000
CLOSED_THINK=30
# Each floor: the same engine and length with few requests held (the
# open traffic without the pause; 1,000 users), so that what the process
# takes whatever the run (the program, the reports) cancels.
CLOSED_FLOOR_USERS=1000
OPEN_LIMIT=300

# open_run NAME ROUND CLIENT_FLAGS [PAUSE_FLAGS...]: one virtual run in a
# process of its own on one core; appends "NAME ROUND peak_kb held events
# wall_s refused" to open.txt, where held is the most sessions outstanding
# at once (open traffic) or the users (closed), and prints it.
open_run() {
  local name=$1 round=$2 client=$3 out; shift 3
  out=$(timeout "$OPEN_LIMIT" "${OPEN_PIN[@]}" "$SIM_MEMORY" --server-args "$OPEN_SERVER"     --client-args "$client $OPEN_CLIENT" "$@") || { echo "sim_memory failed for $name" >&2; exit 1; }
  jq -r --arg n "$name" --arg r "$round"     '"\($n) \($r) \(.hwm_kb) \(.peak_outstanding // .clients) \(.events) \(.wall_s) \(.refused)"'     <<<"$out" >> "$WORK/open.txt"
  read -r _ _ kb held events wall _ < <(tail -1 "$WORK/open.txt")
  figure "  round $round: $name, $held held" \
    "$(awk -v k="$kb" -v e="$events" -v w="$wall" 'BEGIN { printf "%.0f MB, %.1f", k / 1024, e / w / 1e6 }')" \
    "M ev/s" "-" "-"
}

# open_per A FLOOR [ROUND]: bytes of peak memory per request held, A
# against its FLOOR: in ROUND, or pooled over every round.
open_per() {
  awk -v a="$1" -v f="$2" -v r="${3:-}" '
    r != "" && $2 != r { next }
    $1 == a { kb += $3; n += $4 } $1 == f { kb -= $3; n -= $4 }
    END { printf "%.0f", (n > 0 ? kb * 1024 / n : 0) }' "$WORK/open.txt"
}

# open_speed A [ROUND]: M events a second of A: in ROUND, or over every
# round (all its events over all its time).
open_speed() {
  awk -v a="$1" -v r="${2:-}" '
    r != "" && $2 != r { next }
    $1 == a { e += $5; w += $6 } END { printf "%.2f", (w > 0 ? e / w / 1e6 : 0) }' "$WORK/open.txt"
}

# The real client under open traffic: 300 sessions a second against the
# server, stopped from 5 s to 35 s (some 9,000 sessions held; each holds a
# socket, and this host allows 20,000 descriptors), against the same
# without the pause.
REAL_RATE=300

# open_real NAME ROUND PAUSE: the real client's run NAME (PAUSE 1 stops
# the server); appends "NAME ROUND kb_at_resume kb held" to real.txt:
# the client's peak resident memory just before the resume and at the
# end, and the most sessions it held (its CSV's outstanding).
open_real() {
  local name=$1-$2 pause=$3 at_resume kb held
  start_server "$name" --limit 1000000
  start_client "$name" --arrival-rate "$REAL_RATE" --duration 45s
  sleep 5
  if (( pause )); then kill -STOP "$SERVER"; fi
  sleep 30
  at_resume=$(awk '/VmHWM/ { print $2 }' "/proc/$LOADER/status")
  if (( pause )); then kill -CONT "$SERVER"; fi
  sleep 8
  kb=$(awk '/VmHWM/ { print $2 }' "/proc/$LOADER/status")
  wait "$LOADER" || true; stop_server
  held=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "outstanding") c = i; next } $c > m { m = $c } END { print m + 0 }' "$WORK/$name.client.csv")
  echo "$1 $2 $at_resume $kb $held" >> "$WORK/real.txt"
  figure "  round $2: real $1, $held held" "$(awk -v a="$at_resume" -v k="$kb" 'BEGIN { printf "%.0f, %.0f", a / 1024, k / 1024 }')" "MB" "-" "-"
}

# real_per FIELD [ROUND]: bytes of the real client's peak memory per
# session held, the storm against the floor, FIELD 3 just before the
# resume, 4 over the whole run: in ROUND, or pooled over every round.
real_per() {
  awk -v f="$1" -v r="${2:-}" '
    r != "" && $2 != r { next }
    $1 == "storm" { kb += $f; n += $5 } $1 == "floor" { kb -= $f; n -= $5 }
    END { printf "%.0f", (n > 0 ? kb * 1024 / n : 0) }' "$WORK/real.txt"
}

bench_open() {
  OPEN_PIN=()
  local core="one core"
  if command -v taskset > /dev/null && taskset -c 0 true 2> /dev/null; then
    OPEN_PIN=(taskset -c 0)
  else
    core="unpinned"
  fi
  local round
  for round in $(seq "$ROUNDS"); do
    open_run open-storm "$round" "--arrival-rate $OPEN_RATE" "${OPEN_PAUSE[@]}"
    open_run open-floor "$round" "--arrival-rate $OPEN_RATE"
    open_run closed-storm "$round" "--clients $CLOSED_USERS --lambda $CLOSED_THINK" "${OPEN_PAUSE[@]}"
    open_run closed-floor "$round" "--clients $CLOSED_FLOOR_USERS --lambda $CLOSED_THINK" "${OPEN_PAUSE[@]}"
    open_real storm "$round" 1
    open_real floor "$round" 0
  done
  local peak refused open closed per=() users=() memory=() speed=() what
  peak=$(awk '$1 == "open-storm" { print $4 }' "$WORK/open.txt" | sort -g | head -1)
  refused=$(awk '$1 == "open-storm" { s += $7 } END { print s + 0 }' "$WORK/open.txt")
  RATIOS+=("$(figure "open storm: requests outstanding (least round)" "$peak" "" ">= 2,000,000" "$(check "$peak" '>=' 2000000)")")
  RATIOS+=("$(figure "   arrivals refused at the source" "$refused" "" "0" "$(check "$refused" '<=' 0)")")
  for round in $(seq "$ROUNDS"); do
    per+=("$(open_per open-storm open-floor "$round")")
    users+=("$(open_per closed-storm closed-floor "$round")")
    memory+=("$(ratio "${per[-1]}" "${users[-1]}")")
    speed+=("$(ratio "$(open_speed open-storm "$round")" "$(open_speed closed-storm "$round")")")
  done
  open=$(open_per open-storm open-floor); closed=$(open_per closed-storm closed-floor)
  RATIOS+=("$(figure "   memory per outstanding request, open" "$open" "B" "-" "-")")
  if (( ROUNDS > 1 )); then RATIOS+=("$(figure "     each round" "$(spread "${per[@]}")" "B" "" "")"); fi
  RATIOS+=("$(figure "   memory per user, closed ($CLOSED_USERS users)" "$closed" "B" "-" "-")")
  if (( ROUNDS > 1 )); then RATIOS+=("$(figure "     each round" "$(spread "${users[@]}")" "B" "" "")"); fi
  RATIOS+=("$(target "   open / closed, memory per request" "$(ratio "$open" "$closed")" "" "-" "${memory[@]}")")
  # The closed floor is a few milliseconds, too short to time.
  for what in open-storm closed-storm open-floor; do
    local rounds=()
    for round in $(seq "$ROUNDS"); do rounds+=("$(open_speed "$what" "$round")"); done
    RATIOS+=("$(figure "   $what, $core, events a second" "$(open_speed "$what")" "M ev/s" "-" "-")")
    if (( ROUNDS > 1 )); then RATIOS+=("$(figure "     each round" "$(spread "${rounds[@]}")" "M ev/s" "" "")"); fi
  done
  RATIOS+=("$(target "   open / closed storm, events a second" "$(ratio "$(open_speed open-storm)" "$(open_speed closed-storm)")" "" "-" "${speed[@]}")")
  local stopped=() burst=()
  for round in $(seq "$ROUNDS"); do stopped+=("$(real_per 3 "$round")"); burst+=("$(real_per 4 "$round")"); done
  RATIOS+=("$(figure "   real client, memory per session, server stopped" "$(real_per 3)" "B" "-" "-")")
  if (( ROUNDS > 1 )); then RATIOS+=("$(figure "     each round" "$(spread "${stopped[@]}")" "B" "" "")"); fi
  RATIOS+=("$(figure "   real client, the same through the resume" "$(real_per 4)" "B" "-" "-")")
  if (( ROUNDS > 1 )); then RATIOS+=("$(figure "     each round" "$(spread "${burst[@]}")" "B" "" "")"); fi
}

# ---- proxy: the fault proxy against a direct connection

bench_proxy() {
  target/release/examples/proxy_latency --storm "$BIN/storm" --rounds 5 --seconds 5 --connections 1,32
}

# ---- search: the adaptive search of the edge against the grid

# The map of results/phase, as its summary names it, less what says how.
SEARCH_MAP=(scenarios/phase.toml --clients 250,500,750,1000,1500,2000,3000,4000 --max-pause 60s --step 2s --quiet)

# search_run HOW ROUND: the map by HOW (grid or adaptive) into
# WORK/search-HOW-ROUND, its wall time appended to WORK/search.txt.
search_run() {
  local how=$1 round=$2 flags=() t0 t1
  if [[ $how == grid ]]; then flags=(--search grid --seeds 20); fi
  t0=$(now)
  "$BIN/storm" sweep "${SEARCH_MAP[@]}" "${flags[@]}" --out "$WORK/search-$how-$round" > /dev/null
  t1=$(now)
  local wall
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  echo "$how $round $wall" >> "$WORK/search.txt"
  figure "  round $round: the phase map by the $how" "$wall" "s" "-" "-"
}

bench_search() {
  local round
  for round in $(seq "$ROUNDS"); do
    if (( round % 2 )); then search_run grid "$round"; search_run adaptive "$round"
    else search_run adaptive "$round"; search_run grid "$round"; fi
  done
  # Every run is seeded: each round's files are the same.
  for round in $(seq 2 "$ROUNDS"); do
    for how in grid adaptive; do
      cmp -s "$WORK/search-$how-1/critical.csv" "$WORK/search-$how-$round/critical.csv" ||
        figure "  round $round: the $how's critical.csv" "differs" "" "-" "FAIL"
    done
  done
  local verdict=PASS
  python3 scripts/search-compare.py "$WORK/search-grid-1" "$WORK/search-adaptive-1" "$WORK/search.txt" ||
    verdict=FAIL
  RATIOS+=("$(figure "6. adaptive search: T50, runs and wall against the grid" "above" "" "see above" "$verdict")")
}

# ---- memory, lateness, ks: figures without a peer

# 100,000 users, 10 s mean think: the client's peak resident memory.
bench_memory() {
  start_server memory --limit 1000000
  start_client memory --clients 100000 --lambda 10 --duration 30s --ramp-up 5s
  sleep 25
  local hwm
  hwm=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$LOADER/status")
  wait "$LOADER" || true; stop_server
  figure "client peak RSS, 100,000 users" "$hwm" "MB" "-" "-"
}

# 11,000 users at 1 s think: 10,000 req/s; how late attempts start, from
# the client's totals, and both programs' CPU per request.
bench_lateness() {
  start_server lateness --limit 1000000
  start_client lateness --clients 11000 --lambda 1 --duration 30s --ramp-up 5s
  steady 10 15
  wait "$LOADER" || true; stop_server
  local requests p50 p99 max
  requests=$(counted "$WORK/lateness.client.csv" ok_per_s "$T0" "$T1")
  read -r p50 p99 max < <(client_lateness lateness)
  figure "start lateness at 10,000 req/s" "p50: ${p50}ms, p99: ${p99}ms, max: ${max}ms" "" "-" "-"
  figure "  client, server CPU per request" "$(us_per "$LOADER_CPU" "$requests"), $(us_per "$SERVER_CPU" "$requests")" "us" "-" "-"
}

bench_ks() {
  if cargo test --release --quiet --lib kolmogorov_smirnov > "$WORK/ks.log" 2>&1; then
    figure "think times: KS test, 100,000 samples, 1 %" "passes" "" "passes" "PASS"
  else
    figure "think times: KS test, 100,000 samples, 1 %" "fails" "" "passes" "FAIL"
  fi
}

echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), $(uname -r)"
echo "commit:  $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (modified)')"
echo "peers:   oha $( (( HAVE_OHA )) && oha --version | awk '{ print $2 }' || echo none), hey $( (( HAVE_HEY )) && echo "$(dpkg-query -W -f '${Version}' hey 2>/dev/null || echo found)" || echo none)"
RATIOS=()
for s in "${scenarios[@]}"; do "bench_$s"; done
if (( ${#RATIOS[@]} )); then
  echo
  echo "targets ($ROUNDS rounds, interleaved):"
  printf '%s\n' "${RATIOS[@]}"
fi
