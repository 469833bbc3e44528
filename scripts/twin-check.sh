#!/usr/bin/env bash
# Twins checked against what they stand for, with `storm calibrate`:
#
#   scripts/twin-check.sh --shapes OUT     the project's own server at one
#       hidden shape of each kind (the exponential curve, the linear curve,
#       a pool), each calibrated at full time (levels 1 to 256, 2 s warm-up
#       and 5 s held each) without being told its flags; then the true
#       server swept in virtual time beside its twin. OUT/shapes.md sets
#       the fitted parameters and predicted T50 beside the true ones
#       (scripts/twin/summarise.py). About 6 minutes.
#   scripts/twin-check.sh --gunicorn OUT   gunicorn 27.0.1 (20 sync workers,
#       a backlog of 1,000, scripts/gunicorn/app.py answering after 100 ms)
#       calibrated, its twin's T50 predicted for fixed retries and the 2014
#       client, and checked with --verify: storms against gunicorn through
#       the storm's stalling fault proxy at three pauses around each T50,
#       3 runs a pause (a 10 s warm-up, 30 s observed, 10 s calm before
#       each). OUT/gunicorn.md the same table. About 30 minutes.
#
# Both write into OUT (new or empty). Builds the release binaries if they
# are missing; installs gunicorn as scripts/gunicorn-check.sh does, into
# ${XDG_CACHE_HOME:-$HOME/.cache}/retry-storm/gunicorn-27.0.1.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "twin-check: $*" >&2; exit 2; }

[[ $# -eq 2 ]] || { usage >&2; exit 2; }
mode=$1
out=$2
case $mode in --shapes | --gunicorn) ;; -h | --help) usage; exit 0 ;; *) usage >&2; exit 2 ;; esac
if [[ -d $out && -n $(ls -A "$out") ]]; then die "$out is not empty"; fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

cd "$(dirname "$0")/.."
bin="${CARGO_TARGET_DIR:-target}/release"
if [[ ! -x $bin/storm ]]; then
  cargo build --release --bins || die "the build failed"
fi
bin=$(cd "$bin" && pwd)

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2> /dev/null || true; done
}
trap cleanup EXIT
trap 'echo "twin-check: interrupted; partial results in $out" >&2; exit 130' INT TERM

# A server of the project's at FLAGS on a free loopback port, its
# address in $url.
start_server() {
  local log=$1
  shift
  "$bin/server" --listen 127.0.0.1:0 "$@" > "$log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    url=$(grep -o 'http://[0-9.]*:[0-9]*/[a-z]*' "$log" | head -1 || true)
    [[ -z $url ]] || break
    sleep 0.1
  done
  [[ -n $url ]] || { cat "$log" >&2; die "the server did not start"; }
}

if [[ $mode == --shapes ]]; then
  declare -A truth=(
    [exponential]="--model exponential --base-delay 40ms --limit 24 --factor 1.4 --scale 15"
    [linear]="--model linear --base-delay 25ms --slope 1500us"
    [pool]="--model pool --workers 12 --service-time 80ms --service-distribution exponential --queue 2000"
  )
  for shape in exponential linear pool; do
    echo "twin-check: $shape, the server at ${truth[$shape]} (not told)"
    # shellcheck disable=SC2086 # the flags are words
    start_server "$out/$shape.server.log" ${truth[$shape]}
    "$bin/storm" calibrate --target "$url" --out "$out/$shape" \
      --strategies fixed,exponential-2014 --seeds 20
    kill -TERM "${pids[-1]}"
    wait "${pids[-1]}" 2> /dev/null || true
    unset 'pids[-1]'
    # The true server in the same scenario, in virtual time.
    python3 - "$out/$shape/twin.toml" "${truth[$shape]}" > "$out/$shape.true.toml" << 'EOF'
import re, sys
text = open(sys.argv[1]).read()
lines = [l for l in text.splitlines() if not l.startswith("#")]
out = "\n".join(re.sub(r'^server = ".*"$', 'server = "%s"' % sys.argv[2], l) for l in lines)
print("# The true server of twin-check's %s shape, in the twin's scenario." % sys.argv[1])
print(out)
EOF
    "$bin/storm" sweep "$out/$shape.true.toml" --search grid --seeds 20 --out "$out/$shape.true-sweep" --quiet
    echo "${truth[$shape]}" > "$out/$shape.truth"
  done
  python3 scripts/twin/summarise.py --shapes "$out" > "$out/shapes.md"
  echo "twin-check: $out/shapes.md"
  exit 0
fi

# gunicorn, pinned, in a folder of its own, as scripts/gunicorn-check.sh
# installs it.
version=27.0.1
lib="${XDG_CACHE_HOME:-$HOME/.cache}/retry-storm/gunicorn-$version"
if [[ ! -f $lib/gunicorn/__init__.py ]]; then
  mkdir -p "$lib"
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --target "$lib" "gunicorn==$version" || { rm -rf "$lib"; die "could not install gunicorn $version"; }
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$out/gunicorn.requests"
PYTHONPATH="$lib" PYTHONDONTWRITEBYTECODE=1 GUNICORN_CHECK_LOG_DIR="$out/gunicorn.requests" \
  setsid python3 -m gunicorn -w 20 -k sync --backlog 1000 -b "127.0.0.1:$port" \
  --chdir scripts/gunicorn --log-file "$out/gunicorn.log" --no-control-socket app:app \
  < /dev/null > /dev/null 2>&1 &
pids+=($!)
url="http://127.0.0.1:$port/"
for _ in $(seq 300); do
  if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2).read()' \
    "$url" 2> /dev/null; then
    break
  fi
  sleep 0.1
done
master=${pids[-1]}
# Its workers boot one after the other.
for _ in $(seq 300); do
  [[ $(pgrep -c -P "$master" || true) -lt 20 ]] || break
  sleep 0.1
done
"$bin/storm" calibrate --target "$url" --out "$out/gunicorn" \
  --strategies fixed,exponential-2014 --seeds 20 --max-pause 60s \
  --warmup 10s --observe 30s --calm 10s --verify --verify-runs 3
rm -rf "$out/gunicorn.requests"
python3 scripts/twin/summarise.py --gunicorn "$out" > "$out/gunicorn.md"
echo "twin-check: $out/gunicorn.md"
