#!/usr/bin/env bash
# Text captures of the live view (--tui) of each program, for docs/tui/:
# each program in a tmux pane of 120 x 40 with NO_COLOR set (the markers
# tell the series apart), at a moment that shows what its view is for,
# written with tmux capture-pane. Time is compressed ten times: the 2014
# storm (fixed retries, a 20 s pause) in a few seconds (--duration 300s
# runs 30 s). Needs tmux; uses ports 18170 and 18171 on 127.0.0.1.
#
#   scripts/tui-captures.sh [BIN_DIR]     # default: target/debug, built first
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
bin=${1:-target/debug}
if [[ $# -eq 0 ]]; then
  cargo build --quiet --bins
fi
command -v tmux >/dev/null || { echo "error: tmux is needed" >&2; exit 1; }
out=docs/tui
mkdir -p "$out"
sock="retry-storm-captures-$$"
t() { tmux -L "$sock" "$@"; }
cleanup() {
  t kill-server 2>/dev/null || true
  local pids
  pids=$(jobs -p)
  [[ -z "$pids" ]] || kill $pids 2>/dev/null || true
}
trap cleanup EXIT

# Waits until pane $1 shows text $2 (at most 30 s).
shows() {
  for _ in $(seq 300); do
    if t capture-pane -p -t "$1" | grep -qF -- "$2"; then return 0; fi
    sleep 0.1
  done
  echo "error: pane $1 never showed '$2'" >&2
  t capture-pane -p -t "$1" >&2
  exit 1
}

# The process named $2 in pane $1.
pid_in() { pgrep -P "$(t display -p -t "$1" '#{pane_pid}')" -x "$2"; }

capture() { t capture-pane -p -t "$1" | sed -e 's/[[:space:]]*$//' >"$out/$1.txt"; echo "wrote $out/$1.txt"; }

# The server's view: a client with fixed retries loads it; stopped for
# 2 s (20 s at full scale), resumed, it drowns in the retries.
port=18170
t new-session -d -x 120 -y 40 -s server \
  "NO_COLOR=1 $bin/server --tui --listen 127.0.0.1:$port --time-scale 10; sleep 600"
shows server "last interval"
"$bin/client" --url "http://127.0.0.1:$port/api" --time-scale 10 --duration 300s --seed 2014 >/dev/null &
sleep 2.5
kill -STOP "$(pid_in server server)"
sleep 2
kill -CONT "$(pid_in server server)"
shows server "░ stopped"
sleep 3
capture server
t send-keys -t server q
wait

# The client's view: the same storm from the other side.
port=18171
"$bin/server" --listen "127.0.0.1:$port" --time-scale 10 >/dev/null &
server=$!
sleep 0.5
t new-session -d -x 120 -y 40 -s client \
  "NO_COLOR=1 $bin/client --tui --url http://127.0.0.1:$port/api --time-scale 10 --duration 300s --seed 2014; sleep 600"
shows client "latency p99"
sleep 2
kill -STOP "$server"
sleep 2
kill -CONT "$server"
sleep 3
capture client
t send-keys -t client q
kill "$server"
wait

# The storm's view: fixed and the 2014 exponential backoff side by side,
# some seconds after the resume, the verdicts forming.
results=/tmp/retry-storm-tui-capture
rm -rf "$results"
t new-session -d -x 120 -y 40 -s storm \
  "NO_COLOR=1 $bin/storm --tui --quick --strategies fixed,exponential-2014 --tail 0s --out $results; sleep 600"
shows storm "observe, "
sleep 3.5
capture storm
t send-keys -t storm q
shows storm "interrupted"
rm -rf "$results"
