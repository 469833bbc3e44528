#!/usr/bin/env bash
# A real thread-pool server the project did not write, stormed beside the
# model: gunicorn 27.0.1 from PyPI (20 sync workers, a backlog of 1,000,
# scripts/gunicorn/app.py answering after 100 ms), stopped with SIGSTOP
# (the master and its workers) by `storm --target ... --outage
# sigstop=MASTER_PID` with the cases of scenarios/gunicorn.toml: fixed
# retries, the 2014 client and clients that never retry, 1,000 each, at
# full time (the kernel's SYN retransmissions do not compress).
#
#   scripts/gunicorn-check.sh               3 runs of each case (about 30 minutes)
#   scripts/gunicorn-check.sh --runs 1      one run of each (about 10 minutes)
#   scripts/gunicorn-check.sh --out DIR     results in DIR (default
#                                           results/<UTC timestamp>-gunicorn)
#   scripts/gunicorn-check.sh --keep        keep the temporary folder: gunicorn's
#                                           log, the application's request lines,
#                                           the kernel counters' samples
#
# Installs gunicorn with pip into a folder of its own,
# ${XDG_CACHE_HOME:-$HOME/.cache}/retry-storm/gunicorn-27.0.1 (once; needs
# python3 with pip, and PyPI), builds the release binaries if they
# are missing, starts gunicorn on a free loopback port, runs the storm, and
# writes beside the storm's results: gunicorn.json and gunicorn.md (per run:
# requests the application served, those whose client had gone when it
# began and when it finished, the share served for gone clients from the
# resume on, gunicorn's accept queue at its peak and how long it was full,
# the kernel's listen-queue overflows and drops, counted for the whole
# network namespace) and gunicorn.commands.txt (versions and command
# lines). gunicorn is stopped when the script exits, whatever happened.
# Exits 2 on a usage or setup error, 1 if the storm or the summary failed,
# 130 if interrupted.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

version=27.0.1
runs=3
out=""
keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "--runs takes a number from 1" >&2; exit 2; }
            runs=$2; shift 2 ;;
    --out) [[ $# -ge 2 ]] || { echo "--out takes a folder" >&2; exit 2; }
           out=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -n $out ]] || out="results/$(date -u +%Y-%m-%dT%H-%M-%SZ)-gunicorn"

tmp=""
master=""
sampler=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $sampler ]]; then kill "$sampler" 2> /dev/null || true; fi
  if [[ -n $master ]] && kill -0 "$master" 2> /dev/null; then
    # Continued first, in case anything left it stopped; then a graceful
    # stop, and SIGKILL after 10 s.
    kill -CONT "$master" 2> /dev/null || true
    pkill -CONT -P "$master" 2> /dev/null || true
    kill -TERM "$master" 2> /dev/null || true
    for _ in $(seq 100); do kill -0 "$master" 2> /dev/null || break; sleep 0.1; done
    if kill -0 "$master" 2> /dev/null; then
      pkill -KILL -P "$master" 2> /dev/null || true
      kill -KILL "$master" 2> /dev/null || true
    fi
  fi
  if [[ -n $tmp ]]; then
    if [[ $keep == 1 ]]; then echo "gunicorn-check: kept $tmp"; else rm -rf "$tmp"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
die() { echo "gunicorn-check: $*" >&2; exit 2; }

command -v python3 > /dev/null || die "python3 is needed"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gunicorn-check.XXXXXX")

# gunicorn, pinned, in a folder of its own (pip --target needs no
# virtual environment, and leaves the system's Python as it was).
lib="${XDG_CACHE_HOME:-$HOME/.cache}/retry-storm/gunicorn-$version"
installed() {
  PYTHONPATH="$lib" python3 -c 'import sys, gunicorn; sys.exit(gunicorn.__version__ != sys.argv[1])' \
    "$version" 2> /dev/null
}
if ! installed; then
  rm -rf "$lib"
  mkdir -p "$lib"
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --target "$lib" "gunicorn==$version" > "$tmp/pip.log" 2>&1 ||
    { cat "$tmp/pip.log" >&2; rm -rf "$lib"; die "could not install gunicorn $version"; }
  installed || { rm -rf "$lib"; die "gunicorn $version did not install"; }
fi

# The release binaries, built if missing.
bin="${CARGO_TARGET_DIR:-target}/release"
if [[ ! -x $bin/storm ]]; then
  cargo build --release --bins || die "the build failed"
fi

# gunicorn on a free loopback port, in its own process group (a Ctrl-C
# reaches this script and the storm, which stop it in order).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
mkdir -p "$tmp/requests"
app_dir=$(cd scripts/gunicorn && pwd)
for attempt in 1 2 3; do
  port=$(free_port)
  gunicorn_cmd=(python3 -m gunicorn -w 20 -k sync --backlog 1000 -b "127.0.0.1:$port"
    --chdir "$app_dir" --pid "$tmp/gunicorn.pid" --log-file "$tmp/gunicorn.log"
    --no-control-socket app:app)
  PYTHONPATH="$lib" PYTHONDONTWRITEBYTECODE=1 GUNICORN_CHECK_LOG_DIR="$tmp/requests" \
    setsid "${gunicorn_cmd[@]}" \
    < /dev/null > /dev/null 2>&1 &
  starter=$!
  url="http://127.0.0.1:$port/"
  answered=0
  for _ in $(seq 300); do
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2).read()' \
      "$url" 2> /dev/null; then
      answered=1
      break
    fi
    kill -0 "$starter" 2> /dev/null || break
    sleep 0.1
  done
  if [[ $answered == 1 && -s $tmp/gunicorn.pid ]]; then
    master=$(cat "$tmp/gunicorn.pid")
    break
  fi
  # The port was taken meanwhile, or gunicorn failed: stop it, try again.
  kill -TERM "$starter" 2> /dev/null || true
  wait "$starter" 2> /dev/null || true
done
[[ -n $master ]] || { cat "$tmp/gunicorn.log" >&2; die "gunicorn did not answer at $url"; }
# Its workers boot one after the other.
for _ in $(seq 300); do
  workers=$(pgrep -c -P "$master" || true)
  [[ $workers -lt 20 ]] || break
  sleep 0.1
done
echo "gunicorn-check: gunicorn $version at $url, master $master, $workers workers; results in $out"

# The kernel's listen-queue counters and gunicorn's accept queue, four
# times a second, for the whole storm.
python3 scripts/gunicorn/summarise.py sample "$tmp/netstat.tsv" "$port" &
sampler=$!

storm_cmd=("$bin/storm" run scenarios/gunicorn.toml --target "$url" --outage "sigstop=$master"
  --runs "$runs" --out "$out")
status=0
"${storm_cmd[@]}" || status=$?
kill "$sampler" 2> /dev/null || true
sampler=""
# Every worker's lines flushed at its exit: gunicorn stopped gracefully
# now (its workers finish the request in hand, within its 30 s).
kill -TERM "$master" 2> /dev/null || true
for _ in $(seq 350); do kill -0 "$master" 2> /dev/null || break; sleep 0.1; done
# A Ctrl-C reaches the storm too, which stops in order and exits 130.
[[ $status != 130 ]] || { echo "gunicorn-check: interrupted" >&2; exit 130; }
[[ $status == 0 ]] || { echo "gunicorn-check: the storm failed ($status)" >&2; exit 1; }

{
  echo "# gunicorn-check.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -sr), $(nproc) CPUs, somaxconn $(cat /proc/sys/net/core/somaxconn)"
  echo "# gunicorn $(PYTHONPATH="$lib" python3 -c 'import gunicorn; print(gunicorn.__version__)') (pip install --target $lib gunicorn==$version), $(python3 --version 2>&1), $("$bin/storm" --version)"
  echo "PYTHONPATH=$lib PYTHONDONTWRITEBYTECODE=1 GUNICORN_CHECK_LOG_DIR=$tmp/requests $(printf '%q ' "${gunicorn_cmd[@]}")"
  printf '%q ' "${storm_cmd[@]}"
  echo
} > "$out/gunicorn.commands.txt"
python3 scripts/gunicorn/summarise.py summarise "$out" "$tmp/requests" "$tmp/netstat.tsv" ||
  { echo "gunicorn-check: the summary failed" >&2; exit 1; }
cat "$out/gunicorn.md"
echo "gunicorn-check: results in $out"
