#!/usr/bin/env bash
# The twin atlas: servers the project did not write, each of a different
# kind, each calibrated (the twin `storm calibrate` fits, and its T50 per
# policy predicted in virtual time) and measured (the server's own T50 per
# policy, by the real adaptive search: `storm sweep twin.toml --target URL
# --outage sigstop=PID`, a storm a run), side by side.
#
#   scripts/twin-atlas.sh OUT [--servers LIST] [--max-runs N] [--short]
#                             [--recalibrate] [--burst-check] [--bin DIR]
#
# Servers (comma-separated; all five by default, in this order), each
# pinned from PyPI into a cache folder
# (${XDG_CACHE_HOME:-$HOME/.cache}/retry-storm/NAME-VERSION):
#   gunicorn       gunicorn 27.0.1, 20 sync workers, backlog 1,000
#                  (scripts/gunicorn/app.py answering after 100 ms): a pool
#                  whose queue is the listen backlog
#   waitress       waitress 3.0.2, 20 threads, its other settings its own
#                  (the same WSGI application): a thread pool whose queue
#                  is the application's, behind a limit of connections
#   aiohttp-cpu    aiohttp 3.14.5, one event loop spending 5 ms of CPU on
#                  each request (scripts/aiohttp/app.py --work cpu --slots
#                  0): first come, first served, one at a time
#   aiohttp-await  aiohttp 3.14.5, one event loop whose handlers await
#                  100 ms (--slots 0): no limit but the loop's own CPU
#   grpcio         grpcio 1.85.3, 20 workers answering after 100 ms
#                  (scripts/grpcio/server.py), asked its health check
# Every server keeps aiohttp's and its own defaults for work of clients
# that have gone (aiohttp: handlers not cancelled).
#
# Policies: fixed retries, the 2014 client, AWS standard (aws-standard),
# 1,000 clients, a 2 s timeout, pauses to 60 s; each storm a 10 s warm-up
# and 30 s observed, the server calm 10 s before it. --max-runs N storms a
# policy at most (12; the search stops sooner once T50's interval is 4 s
# wide). --short: a look at the whole of it in minutes, not an atlas (3 s
# warm-up, 10 s observed, 3 s calm, pauses to 20 s, 3 storms a policy,
# probe levels to 32).
#
# OUT/SERVER/calibrate is storm calibrate's folder, OUT/SERVER/measured
# the sweep's; a server whose measured/critical.csv exists is not run
# again, so that an atlas stopped part way goes on where it stopped.
# --recalibrate: such a server is calibrated again (its twin and
# prediction made by the programs as they are now: minutes) and its
# measured search kept, which reads only the cases' client flags, never
# the twin's server.
# OUT/atlas.md: the table (scripts/twin/atlas.py). A full atlas takes
# hours: about 3 storms of a minute a policy and server are the least.
#
# --burst-check: not the atlas, a check of the burst probe against the
# servers (gunicorn, waitress and aiohttp awaiting by default; grpcio
# speaks HTTP/2, where no burst is made): each started, probed at 1 to 8
# clients and burst (no gone-client or order probe, no prediction) into
# OUT/SERVER/burst, and scripts/twin/burst_check.py checks each queue
# against what the server is known to do, PASS or FAIL a line: the
# kernel's listen backlog as configured, and the connections taken in
# beyond it: a few beyond its 20 workers for gunicorn's sync workers,
# up to its limit of 100 for waitress, hundreds for aiohttp's loop,
# which accepts ahead. Exits 1 on a FAIL. About a minute.
# --bin DIR: the programs in DIR (target/release by default, built if
# missing).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "twin-atlas: $*" >&2; exit 2; }

[[ $# -ge 1 ]] || { usage >&2; exit 2; }
case $1 in -h | --help) usage; exit 0 ;; -*) usage >&2; exit 2 ;; esac
out=$1
shift
servers=gunicorn,waitress,aiohttp-cpu,aiohttp-await,grpcio
max_runs=12
short=0
recalibrate=0
burst_check=0
servers_given=
bin=
while [[ $# -gt 0 ]]; do
  case $1 in
    --servers) [[ $# -ge 2 ]] || die "--servers takes a list"; servers=$2; servers_given=$2; shift 2 ;;
    --max-runs) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || die "--max-runs takes a number"; max_runs=$2; shift 2 ;;
    --short) short=1; shift ;;
    --recalibrate) recalibrate=1; shift ;;
    --burst-check) burst_check=1; servers=${servers_given:-gunicorn,waitress,aiohttp-await}; shift ;;
    --bin) [[ $# -ge 2 && -x ${2:-}/storm ]] || die "--bin takes a folder holding storm"; bin=$(cd "$2" && pwd); shift 2 ;;
    *) usage >&2; exit 2 ;;
  esac
done
if ((burst_check && (short || recalibrate))); then
  die "--burst-check is not the atlas: it takes no --short or --recalibrate"
fi
IFS=, read -r -a wanted <<< "$servers"
for s in "${wanted[@]}"; do
  [[ $s =~ ^(gunicorn|waitress|aiohttp-cpu|aiohttp-await|grpcio)$ ]] || die "unknown server: $s"
  ((!burst_check)) || [[ $s != grpcio ]] || die "grpcio speaks HTTP/2, where no burst is made"
done
command -v python3 > /dev/null || die "python3 is needed"
mkdir -p "$out"
out=$(cd "$out" && pwd)

cd "$(dirname "$0")/.."
if [[ -z $bin ]]; then
  bin="${CARGO_TARGET_DIR:-target}/release"
  [[ -x $bin/storm ]] || cargo build --release --bins || die "the build failed"
fi
bin=$(cd "$bin" && pwd)

policies=fixed,exponential-2014,aws-standard
protocol=(--warmup 10s --observe 30s)
max_pause=60s
calm=10s
probe=()
if ((short)); then
  protocol=(--warmup 3s --observe 10s --report-interval 1s)
  max_pause=20s
  calm=3s
  max_runs=3
  probe=(--max-concurrency 32 --seeds 5)
fi

server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then
    kill -CONT -- "-$server_pid" 2> /dev/null || true
    kill -TERM -- "-$server_pid" 2> /dev/null || true
    wait "$server_pid" 2> /dev/null || true
  fi
}
trap cleanup EXIT
trap 'echo "twin-atlas: interrupted; what was made is in $out" >&2; exit 130' INT TERM

# pinned NAME VERSION PIP_ARGS...: NAME at VERSION installed (once) into
# its cache folder, whose path it prints.
pinned() {
  local name=$1 version=$2 lib
  shift 2
  lib="${XDG_CACHE_HOME:-$HOME/.cache}/retry-storm/$name-$version"
  if [[ ! -f $lib/.installed ]]; then
    rm -rf "$lib"
    mkdir -p "$lib"
    python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
      --target "$lib" "$@" >&2 || { rm -rf "$lib"; die "could not install $name $version"; }
    touch "$lib/.installed"
  fi
  echo "$lib"
}

# A free loopback port.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start SERVER DIR: the server in a session of its own, its output in
# DIR; sets server_pid, url and wire (the request flags it is asked with).
start() {
  local server=$1 dir=$2 port lib
  port=$(free_port)
  url="http://127.0.0.1:$port/"
  wire=()
  local cmd
  case $server in
    gunicorn)
      lib=$(pinned gunicorn 27.0.1 gunicorn==27.0.1)
      cmd=(python3 -m gunicorn -w 20 -k sync --backlog 1000 -b "127.0.0.1:$port"
        --chdir scripts/gunicorn --no-control-socket app:app) ;;
    waitress)
      lib=$(pinned waitress 3.0.2 waitress==3.0.2)
      cmd=(python3 -m waitress "--listen=127.0.0.1:$port" --threads=20 app:app) ;;
    aiohttp-cpu | aiohttp-await)
      lib=$(pinned aiohttp 3.14.5 --no-deps -r scripts/aiohttp/requirements.txt)
      cmd=(python3 scripts/aiohttp/app.py --port "$port" --slots 0 --handler-cancellation off)
      [[ $server == aiohttp-cpu ]] && cmd+=(--work cpu) ;;
    grpcio)
      lib=$(pinned grpcio 1.85.3 --only-binary=:all: grpcio==1.85.3)
      cmd=(python3 scripts/grpcio/server.py --port-file "$dir/port" --workers 20 --service-ms 100)
      wire=(--grpc) ;;
  esac
  local service_ms=100
  # Every server at about half its capacity under the storm's load
  # (1,000 clients asking every 10 s): 20 workers of 100 ms, or one of 5.
  [[ $server == aiohttp-cpu ]] && service_ms=5
  # waitress imports the application from its working folder.
  (
    [[ $server == waitress ]] && cd scripts/gunicorn
    PYTHONPATH="$lib" PYTHONDONTWRITEBYTECODE=1 GUNICORN_CHECK_SERVICE_MS=$service_ms \
      exec setsid "${cmd[@]}" < /dev/null > "$dir/server.log" 2>&1
  ) &
  server_pid=$!
  if [[ $server == grpcio ]]; then
    for _ in $(seq 300); do [[ -s $dir/port ]] && break; sleep 0.1; done
    [[ -s $dir/port ]] || { cat "$dir/server.log" >&2; die "$server did not start"; }
    url="http://127.0.0.1:$(cat "$dir/port")/"
  fi
  # Answering: storm calibrate waits for its first answer itself; a
  # server that never listens is found here.
  for _ in $(seq 300); do
    python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' \
      "$(sed 's/.*:\([0-9]*\)\/$/\1/' <<< "$url")" 2> /dev/null && return 0
    kill -0 "$server_pid" 2> /dev/null || break
    sleep 0.1
  done
  cat "$dir/server.log" >&2
  die "$server did not start"
}

stop() {
  cleanup
  server_pid=
}

# calibrate SERVER DIR: storm calibrate of the server started, into
# DIR/calibrate (replaced).
calibrate() {
  local server=$1 dir=$2
  rm -rf "$dir/calibrate"
  # Workers that boot one after the other are waited for by the probe's
  # first answer.
  "$bin/storm" calibrate --target "$url" "${wire[@]}" --out "$dir/calibrate" \
    --strategies "$policies" "${probe[@]}" "${protocol[@]}" --max-pause "$max_pause" \
    > "$dir/calibrate.log" 2>&1 || { tail -5 "$dir/calibrate.log" >&2; die "$server: calibrate failed"; }
}

if ((burst_check)); then
  for server in "${wanted[@]}"; do
    dir="$out/$server"
    mkdir -p "$dir"
    rm -rf "$dir/burst"
    echo "twin-atlas: $server: the burst"
    start "$server" "$dir"
    "$bin/storm" calibrate --target "$url" --out "$dir/burst" --quick --levels 1,2,4,8 \
      --level-warmup 300ms --hold 700ms --no-gone --batches 0 --no-predict \
      > "$dir/burst.log" 2>&1 || { tail -5 "$dir/burst.log" >&2; die "$server: calibrate failed"; }
    stop
  done
  python3 scripts/twin/burst_check.py "$out" "${wanted[@]}"
  exit 0
fi

for server in "${wanted[@]}"; do
  dir="$out/$server"
  if [[ -f $dir/measured/critical.csv ]]; then
    if ((recalibrate)); then
      echo "twin-atlas: $server: calibrating again, its measured search kept"
      rm -f "$dir/port"
      start "$server" "$dir"
      calibrate "$server" "$dir"
      stop
    else
      echo "twin-atlas: $server done before, kept"
    fi
    continue
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "twin-atlas: $server: calibrating"
  start "$server" "$dir"
  calibrate "$server" "$dir"
  echo "twin-atlas: $server: measuring ($(grep -m1 '^server' "$dir/calibrate/twin.toml" || true))"
  # The gunicorn master's pid stops its workers too.
  "$bin/storm" sweep "$dir/calibrate/twin.toml" --target "$url" --outage "sigstop=$server_pid" \
    --calm "$calm" --max-pause "$max_pause" --max-runs "$max_runs" --out "$dir/measured" \
    > "$dir/measured.log" 2>&1 || { tail -5 "$dir/measured.log" >&2; die "$server: the search failed"; }
  stop
done
python3 scripts/twin/atlas.py "$out" > "$out/atlas.md"
echo "twin-atlas: $out/atlas.md"
