#!/usr/bin/env bash
# shellcheck disable=SC2016 # the $ in single-quoted jq programs are jq's
# A real Prometheus (Debian's package) scraping a server and two clients
# (a closed population, and open traffic beside it) every second on loopback through a short storm, then asked over its HTTP API
# what it saw; and a tier of a chain in front of the server (server
# --call, named edge), fed by open traffic of its own. Installs prometheus (and jq, curl) if missing, without
# starting the package's own service; builds the programs (cargo build
# --release --locked); starts a server and the clients with --metrics-listen,
# and a Prometheus with its own configuration and storage in a temporary
# folder (--web.listen-address on 127.0.0.1, scrape_interval 1s); runs the
# storm by hand, every time divided by 2 (--time-scale 2): a 12 s warm-up,
# SIGSTOP to the server, a 10 s pause, SIGCONT, 30 s to watch; then reads
# /api/v1/query and /api/v1/query_range with curl and jq.
#
#   scripts/prometheus-check.sh              install, build, run (~75 s here
#                                            once installed and built)
#   scripts/prometheus-check.sh --bin DIR    the programs in DIR, no build
#   scripts/prometheus-check.sh --no-install stop (exit 2) if a package is
#                                            missing instead of installing it
#   scripts/prometheus-check.sh --keep       keep the temporary folder (logs,
#                                            prometheus.yml, the TSDB)
#   scripts/prometheus-check.sh --strategy S --on-disconnect M
#                                            another policy (default:
#                                            exponential-2014, continue: the
#                                            original's, which recovers); with
#                                            one that does not (fixed), the
#                                            recovery check fails
#
# What must hold:
#   lint         promtool check metrics finds nothing to say about either
#                program's exposition (the text format curl gets)
#   scraped      both targets up through the warm-up; while the server is
#                stopped its scrapes fail (up 0) and the client's go on
#   ok-rate      the client's OK rate (rate() of its counter) above zero in
#                the warm-up, zero through the pause (query_range), and
#                back to half the warm-up's by the end
#   concurrency  the server's scraped concurrency after the resume above
#                its highest in the warm-up; and its mean over 3 s (rate()
#                of retry_storm_server_concurrency_seconds_total, which
#                holds the bursts between scrapes) too
#   dashboard    every query of deploy/grafana/dashboard.json (variables
#                set to all jobs and a 5 s window) answers with series
#   open         a second client, of open traffic (a session a second, one
#                attempt each, 10 s to answer), scraped as its own job:
#                its sessions keep arriving through the pause at the
#                warm-up's rate, and it holds more of them in the pause
#                than it ever did in the warm-up
#   tier         a tier in front of the server (one attempt of 10 s a
#                call), fed by open traffic (a session a second, one
#                attempt each, 20 s to answer), scraped as its own job:
#                every series it serves carries tier="edge" and none of
#                the server's carries a tier; its calls start as its own
#                requests are admitted; it holds more calls in flight in
#                the pause than it ever did in the warm-up
# Prints PASS/FAIL per check; exits 1 if one fails, 2 on a usage or setup
# error. Everything it started is stopped, and its folder (and a
# policy-rc.d it wrote) removed, when it exits, whatever happened.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

bin=""
install=1
keep=0
strategy=exponential-2014
on_disconnect="continue"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin)
      [[ $# -ge 2 ]] || { usage >&2; exit 2; }
      bin=$(cd "$2" 2> /dev/null && pwd) || { echo "prometheus-check: no folder $2" >&2; exit 2; }
      shift 2 ;;
    --no-install) install=0; shift ;;
    --strategy) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; strategy=$2; shift 2 ;;
    --on-disconnect) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; on_disconnect=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

# The storm, in seconds of wall-clock time.
scale=2 warmup=12 pause=10 watch=30

tmp=""
policy=""
pids=()
# alive PID: the process runs (a child of ours that ended is a zombie until
# waited for).
alive() { [[ -e /proc/$1 ]] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2> /dev/null; }
cleanup() {
  local rc=$? p left=()
  trap - EXIT INT TERM
  set +e
  for p in "${pids[@]}"; do kill -CONT "$p" 2> /dev/null; kill -TERM "$p" 2> /dev/null; done
  # A sleep interrupted by a signal.
  # shellcheck disable=SC2046 # a list of pids
  kill $(jobs -p) 2> /dev/null
  for _ in $(seq 50); do
    left=()
    for p in "${pids[@]}"; do alive "$p" && left+=("$p"); done
    [[ ${#left[@]} -eq 0 ]] && break
    sleep 0.1
  done
  if [[ ${#left[@]} -gt 0 ]]; then
    kill -KILL "${left[@]}" 2> /dev/null
  fi
  wait 2> /dev/null
  [[ -n $policy ]] && rm -f "$policy"
  if [[ -n $tmp ]]; then
    if [[ $keep == 1 ]]; then echo "prometheus-check: kept $tmp"; else rm -rf "$tmp"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

die() { echo "prometheus-check: $*" >&2; exit 2; }

# --- packages --------------------------------------------------------------

missing=()
for need in prometheus:prometheus jq:jq curl:curl python3:python3; do
  command -v "${need%%:*}" > /dev/null || missing+=("${need#*:}")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  [[ $install == 1 ]] || die "missing packages: ${missing[*]}"
  [[ $(id -u) == 0 ]] || die "missing packages (${missing[*]}); installing them needs root"
  echo "prometheus-check: installing ${missing[*]}"
  # The package's own service must not start (this check runs its own
  # Prometheus): a policy-rc.d says no for the install, if there is none.
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
  fi
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" > /dev/null; } || die "could not install ${missing[*]}"
  if [[ -n $policy ]]; then
    rm -f "$policy"
    policy=""
  fi
fi

# --- programs --------------------------------------------------------------

if [[ -z $bin ]]; then
  cargo build --release --locked --quiet --bin server --bin client || die "the build failed"
  bin=$PWD/target/release
fi
for p in server client; do
  [[ -x $bin/$p ]] || die "no $bin/$p"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/prometheus-check.XXXXXX")

# Free loopback ports for the client's metrics and for Prometheus (the
# server takes port 0 and says which it got). They come from the thousand
# ports below the ephemeral range: a port from binding port 0, released,
# may be taken again by any bind to port 0 or as a connection's source
# port before the client or Prometheus binds it; these never are.
read -r client_port prom_port open_port < <(python3 -c '
import os, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
high = min(low, 21000)
start = max(high - 1000, 1024)
found = []
for i in range(high - start):
    port = start + (os.getpid() * 7 + i) % (high - start)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        found.append(port)
    except OSError:
        pass
    finally:
        s.close()
    if len(found) == 3:
        break
print(*found)')
[[ -n ${open_port:-} ]] || { echo "prometheus-check: no three free ports below the ephemeral range" >&2; exit 1; }

# wait_for SECONDS WHAT COMMAND...: polls until the command succeeds.
wait_for() {
  local secs=$1 what=$2 end
  shift 2
  end=$((SECONDS + secs))
  until "$@" > /dev/null 2>&1; do
    ((SECONDS < end)) || die "timed out after ${secs}s waiting for $what"
    sleep 0.2
  done
}
now() { echo "$EPOCHREALTIME"; }
# nap SECONDS: a sleep that a signal interrupts at once (bash runs a trap
# only when the foreground command ends; `wait` ends at the signal).
nap() { sleep "$1" & wait $!; }
# calc EXPRESSION: awk arithmetic, three decimals.
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }

"$bin/server" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --time-scale "$scale" \
  --on-disconnect "$on_disconnect" > "$tmp/server.log" 2>&1 &
pids+=($!)
server_pid=$!
wait_for 10 "the server's start line" grep -q 'metrics on http' "$tmp/server.log"
server_url=$(grep -o 'listening on http://[0-9.:]*/api' "$tmp/server.log" | cut -d' ' -f3)
server_metrics=$(grep -o 'metrics on http://[0-9.:]*' "$tmp/server.log" | sed 's|.*http://||')
[[ -n $server_url && -n $server_metrics ]] || die "no address in the server's start line"

# A tier in front of the server, its metrics and API on ports it picks.
"$bin/server" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --time-scale "$scale" \
  --call "$server_url" --call-client "--max-attempts 1 --timeout 10s" --tier-name edge \
  > "$tmp/tier.log" 2>&1 &
pids+=($!)
wait_for 10 "the tier's start line" grep -q 'metrics on http' "$tmp/tier.log"
tier_url=$(grep -o 'listening on http://[0-9.:]*/api' "$tmp/tier.log" | cut -d' ' -f3)
tier_metrics=$(grep -o 'metrics on http://[0-9.:]*' "$tmp/tier.log" | sed 's|.*http://||')
[[ -n $tier_url && -n $tier_metrics ]] || die "no address in the tier's start line"

cat > "$tmp/prometheus.yml" << EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: retry-storm-server
    static_configs:
      - targets: ['$server_metrics']
  - job_name: retry-storm-client
    static_configs:
      - targets: ['127.0.0.1:$client_port']
  - job_name: retry-storm-open
    static_configs:
      - targets: ['127.0.0.1:$open_port']
  - job_name: retry-storm-tier
    static_configs:
      - targets: ['$tier_metrics']
EOF
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" > "$tmp/prometheus.log" 2>&1 &
pids+=($!)
prom=http://127.0.0.1:$prom_port
wait_for 30 "Prometheus to be ready" curl -sf "$prom/-/ready"

"$bin/client" --url "$server_url" --metrics-listen "127.0.0.1:$client_port" --time-scale "$scale" \
  --strategy "$strategy" --seed 20 > "$tmp/client.log" 2>&1 &
pids+=($!)
client_pid=$!
wait_for 10 "the client's start line" grep -q 'metrics on http' "$tmp/client.log"
# Open traffic beside it: 1 % of its demand, one attempt a request, so
# that it adds next to nothing to the storm, each waiting up to 10 s.
"$bin/client" --url "$server_url" --metrics-listen "127.0.0.1:$open_port" --time-scale "$scale" \
  --arrival-rate 1 --max-attempts 1 --timeout 10s --seed 21 > "$tmp/open.log" 2>&1 &
pids+=($!)
open_pid=$!
wait_for 10 "the open client's start line" grep -q 'metrics on http' "$tmp/open.log"
# The tier's own traffic, open and light (its calls, held through the
# pause, join the backlog the server finds at its resume): what it calls
# the server for.
"$bin/client" --url "$tier_url" --time-scale "$scale" \
  --arrival-rate 1 --max-attempts 1 --timeout 20s --seed 22 > "$tmp/tier-client.log" 2>&1 &
pids+=($!)
tier_client_pid=$!
wait_for 10 "the tier client's start line" grep -q 'open traffic' "$tmp/tier-client.log"

# query EXPR TIME: the value of the first series at TIME, or "none".
query() {
  curl -sfG "$prom/api/v1/query" --data-urlencode "query=$1" --data-urlencode "time=$2" |
    jq -r '.data.result[0].value[1] // "none"'
}
# range EXPR START END: "time value" every second of the first series.
range() {
  curl -sfG "$prom/api/v1/query_range" --data-urlencode "query=$1" \
    --data-urlencode "start=$2" --data-urlencode "end=$3" --data-urlencode "step=1" |
    jq -r '.data.result[0].values[]? | "\(.[0]) \(.[1])"'
}
up() { echo "up{job=\"retry-storm-$1\"}"; }
# Every target scraped before the warm-up counts.
both_up() { [[ $(query 'sum(up)' "$(now)") == 4 ]]; }
wait_for 15 "every target up" both_up

# promtool's lint of each exposition as curl gets it (Prometheus's text
# format), kept for the verdicts below.
lint=""
for target in "$server_metrics" "127.0.0.1:$client_port" "127.0.0.1:$open_port" "$tier_metrics"; do
  curl -sf "http://$target/metrics" > "$tmp/exposition.txt" || lint+="$target: no answer; "
  promtool check metrics < "$tmp/exposition.txt" > "$tmp/lint.txt" 2>&1 || lint+="$target: $(head -1 "$tmp/lint.txt"); "
done

start=$(now)
echo "prometheus-check: Prometheus $prom scraping the server ($server_metrics) and the client (127.0.0.1:$client_port) every second; warm-up ${warmup}s"
nap "$warmup"
stopped=$(now)
kill -STOP "$server_pid"
echo "prometheus-check: server stopped for ${pause}s"
nap "$pause"
resumed=$(now)
kill -CONT "$server_pid"
echo "prometheus-check: server resumed; watching ${watch}s"
nap "$watch"
end=$(now)
# The last scrapes in.
nap 2

ok='retry_storm_client_attempts_total{job="retry-storm-client",outcome="ok"}'
conc='retry_storm_server_concurrency{job="retry-storm-server"}'
failures=0
# verdict NAME DESCRIPTION AWK-CONDITION
verdict() {
  if awk "BEGIN { exit !($3) }"; then
    echo "PASS $1: $2"
  else
    echo "FAIL $1: $2"
    failures=$((failures + 1))
  fi
}

verdict lint "promtool check metrics finds nothing in any exposition${lint:+ ($lint)}" \
  "${#lint} == 0"
num() { [[ $1 =~ ^[0-9.e+-]+$ ]] && echo "$1" || echo -1; }
# short NUMBER: one decimal, for the lines printed.
short() { awk -v v="$1" 'BEGIN { printf "%.1f", v }'; }

# Seconds of each phase to look at, leaving the first 2 s of each out.
warm_window=$((warmup - 3))s
at_stop=$(calc "$stopped - 0.5")
at_resume=$(calc "$resumed - 0.5")

server_up=$(num "$(query "min_over_time($(up server)[$warm_window])" "$at_stop")")
client_up=$(num "$(query "min_over_time($(up client)[$warm_window])" "$at_stop")")
verdict scraped "both targets up through the warm-up (server $server_up, client $client_up)" \
  "$server_up == 1 && $client_up == 1"
# A scrape is stamped when it starts: one that starts in the pause less
# than its timeout (1 s) before the resume succeeds after it.
scrapes_end=$(calc "$resumed - 1.5")
server_down=$(num "$(query "max_over_time($(up server)[$((pause - 4))s])" "$scrapes_end")")
client_on=$(num "$(query "min_over_time($(up client)[$((pause - 4))s])" "$scrapes_end")")
verdict scraped "while stopped the server's scrapes fail (up at most $server_down) and the client's go on (up $client_on)" \
  "$server_down == 0 && $client_on == 1"

baseline=$(num "$(query "rate(${ok}[5s])" "$at_stop")")
verdict ok-rate "OK rate in the warm-up above zero ($(short "$baseline")/s)" "$baseline > 0"
pause_rates=$(range "rate(${ok}[3s])" "$(calc "$stopped + 3")" "$at_resume")
pause_points=$(grep -c . <<< "$pause_rates" || true)
pause_max=$(awk 'BEGIN { m = 0 } { if ($2 > m) m = $2 } END { print m }' <<< "$pause_rates")
verdict ok-rate "OK rate zero through the pause (highest $pause_max/s over $pause_points points)" \
  "$pause_points >= $((pause - 4)) && $pause_max == 0"
final=$(num "$(query "rate(${ok}[5s])" "$end")")
back=$(range "rate(${ok}[3s])" "$resumed" "$end" |
  awk -v half="$(calc "$baseline / 2")" -v t0="$resumed" '$2 >= half { printf "%.0f s after resume", $1 - t0; exit }')
verdict ok-rate "OK rate back to half the warm-up's by the end ($(short "$final")/s; first at half ${back:-never})" \
  "$final >= $baseline / 2"

warm_conc=$(num "$(query "max_over_time(${conc}[$warm_window])" "$at_stop")")
after_conc=$(num "$(query "max_over_time(${conc}[$((watch))s])" "$end")")
verdict concurrency "server concurrency after the resume above the warm-up's (highest $after_conc against $warm_conc)" \
  "$after_conc > $warm_conc && $warm_conc >= 0"

mean='rate(retry_storm_server_concurrency_seconds_total{job="retry-storm-server"}[3s])'
warm_mean=$(num "$(query "max_over_time(${mean}[$warm_window:1s])" "$at_stop")")
after_mean=$(num "$(query "max_over_time(${mean}[$((watch))s:1s])" "$end")")
verdict concurrency "mean server concurrency over 3 s after the resume above the warm-up's (highest $(short "$after_mean") against $(short "$warm_mean"))" \
  "$after_mean > $warm_mean && $warm_mean >= 0"

# The dashboard's queries, its variables set to everything and a 5 s
# window: each parses and finds series in what Prometheus scraped.
dashboard=deploy/grafana/dashboard.json
if [[ -e $dashboard ]]; then
  exprs=$(jq -r '[.. | objects | .expr? // empty] | unique[]' "$dashboard" |
    sed -e 's/\$client/.*/g; s/\$server/.*/g; s/\$tier/.+/g; s/\$window/5s/g')
  total=0 empty=()
  while IFS= read -r expr; do
    total=$((total + 1))
    n=$(curl -sfG "$prom/api/v1/query" --data-urlencode "query=$expr" --data-urlencode "time=$end" |
      jq -r 'if .status == "success" then .data.result | length else 0 end') || n=0
    [[ $n -gt 0 ]] || empty+=("$expr")
  done <<< "$exprs"
  verdict dashboard "every query of $dashboard answers with series (${#empty[@]} of $total without${empty[0]:+: ${empty[0]}})" \
    "${#empty[@]} == 0 && $total > 0"
fi

# Open traffic arrives whatever the service does: at the warm-up's rate
# through the pause, and held longer, so more of it is outstanding.
job='{job="retry-storm-open"}'
# Rates over the whole phase: some 16 and 18 arrivals of a Poisson stream.
arrivals="retry_storm_client_sessions_arrived_total$job"
warm_arrivals=$(num "$(query "rate(${arrivals}[$warm_window])" "$at_stop")")
pause_arrivals=$(num "$(query "rate(${arrivals}[$((pause - 2))s])" "$at_resume")")
verdict open "sessions arrive through the pause ($(short "$pause_arrivals")/s against $(short "$warm_arrivals")/s in the warm-up)" \
  "$warm_arrivals > 0 && $pause_arrivals >= $warm_arrivals / 3"
held="retry_storm_client_outstanding$job"
warm_held=$(num "$(query "max_over_time(${held}[$warm_window])" "$at_stop")")
pause_held=$(num "$(query "max_over_time(${held}[$((pause - 2))s])" "$at_resume")")
verdict open "sessions held in the pause above the warm-up's (highest $pause_held against $warm_held)" \
  "$pause_held > $warm_held && $warm_held >= 0"

# The tier: its own series labelled, the server's not; its calls follow
# its requests; a stopped server holds its calls in flight.
edge='{job="retry-storm-tier",tier="edge"}'
series() { num "$(query "count({$1,__name__=~\"retry_storm_.*\"}) or vector(0)" "$at_stop")"; }
tier_all=$(series 'job="retry-storm-tier"')
tier_edge=$(series 'job="retry-storm-tier",tier="edge"')
server_all=$(series 'job="retry-storm-server"')
server_tiered=$(series 'job="retry-storm-server",tier!=""')
verdict tier "every series of the tier labelled tier=\"edge\" ($tier_edge of $tier_all), none of the server's labelled ($server_tiered of $server_all)" \
  "$tier_all > 0 && $tier_edge == $tier_all && $server_all > 0 && $server_tiered == 0"
calls=$(num "$(query "rate(retry_storm_client_requests_started_total$edge[$warm_window])" "$at_stop")")
taken=$(num "$(query "rate(retry_storm_server_admitted_total$edge[$warm_window])" "$at_stop")")
verdict tier "the tier's calls start as its requests are admitted ($(short "$calls")/s against $(short "$taken")/s)" \
  "$calls > 0 && $calls >= 0.8 * $taken && $calls <= 1.2 * $taken + 0.5"
warm_calls=$(num "$(query "max_over_time(retry_storm_client_outstanding$edge[$warm_window])" "$at_stop")")
pause_calls=$(num "$(query "max_over_time(retry_storm_client_outstanding$edge[$((pause - 2))s])" "$at_resume")")
verdict tier "the tier's calls in flight in the pause above the warm-up's (highest $pause_calls against $warm_calls)" \
  "$pause_calls > $warm_calls && $warm_calls >= 0"

# For the record: what an SRE would have seen.
delay=$(query "max_over_time(retry_storm_server_modelled_delay_seconds{job=\"retry-storm-server\"}[$((watch))s])" "$end")
p99_warm=$(query 'histogram_quantile(0.99, rate(retry_storm_client_attempt_duration_seconds_bucket{job="retry-storm-client"}[5s]))' "$at_stop")
retries=$(query 'max_over_time(rate(retry_storm_client_retries_total{job="retry-storm-client"}[3s])[30s:1s])' "$end")
echo "seen: highest modelled delay after resume ${delay}s; p99 attempt latency in the warm-up ${p99_warm}s; highest retry rate ${retries}/s"
echo "timeline: start $start, stop $stopped, resume $resumed, end $end (unix seconds)"

kill -INT "$client_pid" "$open_pid" "$tier_client_pid" 2> /dev/null || true
[[ $failures == 0 ]] || exit 1
