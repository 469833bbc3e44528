#!/usr/bin/env bash
# A real gRPC server stormed over gRPC through a SIGSTOP: grpcio 1.85.3
# (from PyPI, with pip, into a cache folder) serving every unary method
# from a generic handler, no .proto (scripts/grpcio/server.py: 8 worker
# threads answering after 100 ms, the executor's unbounded queue its
# backlog; grpc.health.v1.Health/Check answered SERVING), stormed by
#
#   storm run scenarios/grpc-witness.toml --target http://127.0.0.1:PORT/ \
#     --outage sigstop=PID
#
# whose cases are clients that never retry, fixed retries and gRPC's
# retry policy with its throttle (`--grpc storm.Witness/Call --strategy
# ...`, 400 clients each). A fresh server for the storm, stopped after it.
#
#   scripts/grpc-storm-check.sh             one run of each case at full
#                                           time (about 7 minutes)
#   --runs N            runs of each case (1)
#   --quick             every time divided by ten: the server answers after
#                       10 ms, the storm runs with --quick (about 1 minute)
#   --check             after the storm, a PASS/FAIL line per check, exit 1
#                       if one fails: the storm exited 0; the server left
#                       running (not stopped) and answering the health
#                       check within 60 s; per case and run, the verdict
#                       found when this check was written (all three
#                       recovered, fixed retries too: docs/protocols.md
#                       says why; scripts/grpcio/verdicts.py)
#   --scenario FILE     the storm's scenario (scenarios/grpc-witness.toml)
#   --out DIR           results in DIR, new or empty (default
#                       results/<UTC timestamp>-grpcio)
#   --bin DIR           the programs in DIR (default
#                       ${CARGO_TARGET_DIR:-target}/release, built if missing)
#   --keep              keep the temporary folder (the server's log)
#
# Leaves behind only the results: the storm's, grpcio.commands.txt
# (versions and command lines) and grpcio.json (the server's own counts:
# calls answered, and those whose client had gone, context.is_active()
# false, when the handler began and when it ended). The server is
# continued and stopped, and the temporary folder removed, on every exit.
# Exits 2 on a usage or setup error, 1 if the storm failed (or, with
# --check, a check), 130 if interrupted.
set -euo pipefail
invocation=("$0" "$@")
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

runs=1
out=""
keep=0
check=0
quick=0
bin=""
scenario=scenarios/grpc-witness.toml
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "--runs takes a number from 1" >&2; exit 2; }
            runs=$2; shift 2 ;;
    --out) [[ $# -ge 2 ]] || { echo "--out takes a folder" >&2; exit 2; }
           out=$2; shift 2 ;;
    --scenario) [[ $# -ge 2 && -f $2 ]] || { echo "--scenario takes a scenario file" >&2; exit 2; }
                scenario=$2; shift 2 ;;
    --bin) [[ $# -ge 2 && -d $2 ]] || { echo "--bin takes a folder" >&2; exit 2; }
           bin=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --check) check=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -n $out ]] || out="results/$(date -u +%Y-%m-%dT%H-%M-%SZ)-grpcio"
if [[ -e $out ]] && [[ ! -d $out || -n $(ls -A "$out") ]]; then
  echo "--out $out: already holds files; choose a new or empty folder" >&2
  exit 2
fi

grpcio=1.85.3
workers=8
service_ms=100
quick_flag=()
if [[ $quick == 1 ]]; then
  service_ms=10
  quick_flag=(--quick)
fi

tmp=""
server_pid=""
# The server continued (in case the storm left it stopped) and stopped:
# SIGTERM, which writes its counts, then SIGKILL after 10 s.
stop_server() {
  [[ -n $server_pid ]] || return 0
  if kill -0 "$server_pid" 2> /dev/null; then
    kill -CONT "$server_pid" 2> /dev/null || true
    kill -TERM "$server_pid" 2> /dev/null || true
    for _ in $(seq 100); do kill -0 "$server_pid" 2> /dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2> /dev/null || true
  fi
  wait "$server_pid" 2> /dev/null || true
  server_pid=""
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_server
  if [[ -n $tmp ]]; then
    if [[ $keep == 1 ]]; then echo "grpc-storm-check: kept $tmp"; else rm -rf "$tmp"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
die() { echo "grpc-storm-check: $*" >&2; exit 2; }

command -v python3 > /dev/null || die "python3 is needed"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/grpc-storm-check.XXXXXX")

# grpcio, that release exactly, as a wheel, as scripts/grpc-wire-check.sh
# installs it, but kept in a cache folder as gunicorn-check.sh keeps its
# server (once).
lib="${XDG_CACHE_HOME:-$HOME/.cache}/retry-storm/grpcio-$grpcio"
if [[ $(PYTHONPATH="$lib" python3 -c 'import grpc; print(grpc.__version__)' 2> /dev/null) != "$grpcio" ]]; then
  rm -rf "$lib"
  mkdir -p "$lib"
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --only-binary=:all: --target "$lib" "grpcio==$grpcio" > "$tmp/pip.log" 2>&1 ||
    { cat "$tmp/pip.log" >&2; rm -rf "$lib"; die "could not install grpcio $grpcio"; }
fi

if [[ -z $bin ]]; then
  bin="${CARGO_TARGET_DIR:-target}/release"
  [[ -x $bin/storm ]] || cargo build --release --bins || die "the build failed"
fi
[[ -x $bin/storm ]] || die "--bin $bin: no storm there"

# The server, in its own session (a Ctrl-C reaches this script and the
# storm, which stop it in order).
server_cmd=(python3 "$PWD/scripts/grpcio/server.py" --port-file "$tmp/port"
  --workers "$workers" --service-ms "$service_ms")
PYTHONPATH="$lib" PYTHONDONTWRITEBYTECODE=1 setsid "${server_cmd[@]}" \
  < /dev/null > "$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 300); do
  [[ ! -s $tmp/port ]] || break
  kill -0 "$server_pid" 2> /dev/null || break
  sleep 0.1
done
[[ -s $tmp/port ]] || { cat "$tmp/server.log" >&2; die "the grpcio server did not start"; }
port=$(cat "$tmp/port")
answers() { PYTHONPATH="$lib" python3 scripts/grpcio/answers.py "$port" "$@"; }
answers 30 > /dev/null || { cat "$tmp/server.log" >&2; die "the grpcio server does not answer its health check"; }
url="http://127.0.0.1:$port/"
echo "grpc-storm-check: grpcio $grpcio at $url, process $server_pid, $workers workers of $service_ms ms; results in $out"

mkdir -p "$out"
storm_cmd=("$bin/storm" run "$scenario" --target "$url" --outage "sigstop=$server_pid"
  --runs "$runs" "${quick_flag[@]}" --out "$out")
started=$(date +%s)
status=0
"${storm_cmd[@]}" || status=$?
[[ $status != 130 ]] || exit 130
[[ $status == 0 ]] || echo "grpc-storm-check: the storm failed ($status)" >&2

# The server left running: not stopped (state T), answering.
state=$(sed 's/.*) //' "/proc/$server_pid/stat" 2> /dev/null | cut -d' ' -f1 || true)
answer_s=""
if [[ $state == [Tt] ]]; then
  echo "grpc-storm-check: the storm left the server stopped" >&2
elif answer_s=$(answers 60); then
  echo "grpc-storm-check: the server answered its health check $answer_s s after the storm"
else
  answer_s=""
  echo "grpc-storm-check: the server did not answer its health check within 60 s after the storm" >&2
fi
stop_server
took=$(($(date +%s) - started))

quote() {
  local arg line=""
  for arg in "$@"; do
    if [[ ! $arg =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then arg="'${arg//\'/\'\\\'\'}'"; fi
    line+="${line:+ }$arg"
  done
  echo "$line"
}
{
  echo "# grpc-storm-check.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -sr), $(nproc) CPUs"
  echo "# grpcio $grpcio (pip install --target $lib --only-binary=:all: grpcio==$grpcio), $(python3 --version 2>&1), $("$bin/storm" --version)"
  quote "${invocation[@]}"
  echo "PYTHONPATH=$lib PYTHONDONTWRITEBYTECODE=1 $(quote "${server_cmd[@]}")"
  quote "${storm_cmd[@]}"
  echo "# storm exited $status in $took s; the server answered ${answer_s:-never} s after it"
} > "$out/grpcio.commands.txt"
if [[ -s $tmp/port.counts ]]; then cp "$tmp/port.counts" "$out/grpcio.json"; fi

rc=0
[[ $status == 0 ]] || rc=1
if [[ $check == 1 ]]; then
  python3 scripts/grpcio/verdicts.py "$out" "$status" "$state" "$answer_s" || rc=1
fi
echo "grpc-storm-check: results in $out ($took s)"
exit "$rc"
