#!/usr/bin/env bash
# A real gRPC server stormed over gRPC through kinds of outage: grpcio
# 1.85.3 (from PyPI, with pip, into a cache folder) serving every unary
# method from a generic handler, no .proto (scripts/grpcio/server.py: 8
# worker threads answering after 100 ms, the executor's unbounded queue
# its backlog; grpc.health.v1.Health/Check answered SERVING), stormed by
#
#   storm run scenarios/grpc-witness.toml --target http://127.0.0.1:PORT/ \
#     --outage sigstop=PID       (or --outage stall, ..., the fault proxy's)
#
# whose cases are clients that never retry, fixed retries and gRPC's
# retry policy with its throttle (`--grpc storm.Witness/Call --strategy
# ...`, 400 clients each). Each kind of outage gets a fresh server, started
# before its storm and stopped after it.
#
#   scripts/grpc-storm-check.sh             sigstop, one run of each case at
#                                           full time (about 6 minutes a kind)
#   --outage KIND       the kind of outage, repeatable, in the order given
#                       (default: sigstop alone); a kind given twice is refused:
#     sigstop           --outage sigstop=PID: the storm stops grpcio's process
#                       for the pause and continues it at the resume
#     stall, blackhole, reset, status=CODE[,retry-after=D], delay=D, each
#                       optionally followed by ,fraction=F: a fault of the
#                       storm's fault proxy in front of grpcio, passed as given
#                       (the storm gives its proxy --http2, the clients' wire);
#                       status=unavailable (a gRPC status by name) is answered
#                       Trailers-Only, status=503 as an HTTP status
#   --runs N            runs of each case (1)
#   --quick             every time divided by ten: the server answers after
#                       10 ms, the storm runs with --quick (about 35 s a kind)
#   --check             after the storms, a PASS/FAIL line per check (INFO for
#                       what is reported, not checked), exit 1 if one fails:
#                       per kind, the storm exited 0; grpcio left running (not
#                       stopped) and answering its health check within 60 s;
#                       through the proxy, no proxy process left and the fault
#                       acted; per case and run, the verdict measured to be
#                       steady for that kind (scripts/grpcio/verdicts.py says
#                       which, and how many runs; docs/protocols.md why)
#   --scenario FILE     the storm's scenario (scenarios/grpc-witness.toml)
#   --out DIR           results in DIR, new or empty (default
#                       results/<UTC timestamp>-grpcio)
#   --bin DIR           the programs in DIR (default
#                       ${CARGO_TARGET_DIR:-target}/release, built if missing)
#   --keep              keep the temporary folder (the servers' logs)
#
# Leaves behind only the results, in DIR with one kind, in DIR/NAME with
# several (NAME the kind with '=' and ',' turned into '-'): the storm's,
# grpcio.commands.txt (versions and command lines) and grpcio.json (the
# server's own counts: calls answered, and those whose client had gone,
# context.is_active() false, when the handler began and when it ended);
# and in DIR kinds.tsv (per kind: its folder, the storm's outage and exit
# status, the seconds grpcio took to answer after the storm, its state
# then, the storm's proxies still running), kinds.json and kinds.md (the
# kinds side by side and the checks, scripts/grpcio/verdicts.py). Each
# server is continued and stopped, and the temporary folder removed, on
# every exit. Exits 2 on a usage or setup error, 1 if a storm failed (or,
# with --check, a check), 130 if interrupted.
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
kinds=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --outage) [[ $# -ge 2 ]] || { echo "--outage takes a kind" >&2; exit 2; }
              kinds+=("$2"); shift 2 ;;
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
# name_of, proxy_kind, refuse_twice, quote.
source scripts/outage-kinds.sh
[[ ${#kinds[@]} -gt 0 ]] || kinds=(sigstop)
for kind in "${kinds[@]}"; do
  if [[ $kind != sigstop && ! $kind =~ $proxy_kind ]]; then
    echo "--outage $kind: not a kind; sigstop, or a fault proxy's: stall, blackhole, reset," \
      "status=CODE[,retry-after=D] or delay=D, each optionally followed by ,fraction=F" >&2
    exit 2
  fi
done
refuse_twice "${kinds[@]}"
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

# The server, its files in DIR, in its own session (a Ctrl-C reaches this
# script and the storm, which stop it in order). Sets server_pid, port,
# url and server_cmd.
start_server() {
  local dir=$1
  server_cmd=(python3 "$PWD/scripts/grpcio/server.py" --port-file "$dir/port"
    --workers "$workers" --service-ms "$service_ms")
  PYTHONPATH="$lib" PYTHONDONTWRITEBYTECODE=1 setsid "${server_cmd[@]}" \
    < /dev/null > "$dir/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 300); do
    [[ ! -s $dir/port ]] || break
    kill -0 "$server_pid" 2> /dev/null || break
    sleep 0.1
  done
  [[ -s $dir/port ]] || { cat "$dir/server.log" >&2; die "the grpcio server did not start"; }
  port=$(cat "$dir/port")
  answers 30 > /dev/null || { cat "$dir/server.log" >&2; die "the grpcio server does not answer its health check"; }
  url="http://127.0.0.1:$port/"
}
answers() { PYTHONPATH="$lib" python3 scripts/grpcio/answers.py "$port" "$@"; }
# The storm's fault proxies still running in front of url (each a
# `storm proxy --listen 127.0.0.1:0 --upstream URL ...`): their count.
proxies_left() {
  local n=0 cmdline
  for cmdline in /proc/[0-9]*/cmdline; do
    if tr '\0' ' ' < "$cmdline" 2> /dev/null | grep -qF " proxy --listen 127.0.0.1:0 --upstream $url "; then
      n=$((n + 1))
    fi
  done
  echo "$n"
}

mkdir -p "$out"
printf 'kind\tfolder\toutage\tstorm_status\tsummary_status\tanswer_s\tstopped_after\tfrozen_after\tskipped\tstate_after\tproxies_after\n' \
  > "$tmp/kinds.tsv"
failed=0
started=$(date +%s)
for kind in "${kinds[@]}"; do
  name=$(name_of "$kind")
  if [[ ${#kinds[@]} == 1 ]]; then folder=.; else folder=$name; fi
  if [[ $folder == . ]]; then dest=$out; else dest="$out/$folder"; fi
  work="$tmp/$name"
  mkdir -p "$work" "$dest"
  kind_started=$(date +%s)
  start_server "$work"
  echo "grpc-storm-check: $kind: grpcio $grpcio at $url, process $server_pid, $workers workers of $service_ms ms; results in $dest"

  if [[ $kind == sigstop ]]; then outage="sigstop=$server_pid"; else outage=$kind; fi
  storm_cmd=("$bin/storm" run "$scenario" --target "$url" --outage "$outage"
    --runs "$runs" "${quick_flag[@]}" --out "$dest")
  status=0
  "${storm_cmd[@]}" || status=$?
  [[ $status != 130 ]] || exit 130
  [[ $status == 0 ]] || { echo "grpc-storm-check: $kind: the storm failed ($status)" >&2; failed=1; }

  # The server left running: not stopped (state T), answering; the
  # storm's proxy gone.
  state=$(sed 's/.*) //' "/proc/$server_pid/stat" 2> /dev/null | cut -d' ' -f1 || true)
  stopped=0
  answer_s=""
  if [[ $state == [Tt] ]]; then
    stopped=1
    echo "grpc-storm-check: $kind: the storm left the server stopped" >&2
  elif answer_s=$(answers 60); then
    echo "grpc-storm-check: $kind: the server answered its health check $answer_s s after the storm"
  else
    answer_s=""
    echo "grpc-storm-check: $kind: the server did not answer its health check within 60 s after the storm" >&2
  fi
  proxies=$(proxies_left)
  [[ $proxies == 0 ]] || echo "grpc-storm-check: $kind: $proxies of the storm's proxies still running" >&2
  stop_server
  took=$(($(date +%s) - kind_started))

  {
    echo "# grpc-storm-check.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -sr), $(nproc) CPUs"
    echo "# grpcio $grpcio (pip install --target $lib --only-binary=:all: grpcio==$grpcio), $(python3 --version 2>&1), $("$bin/storm" --version)"
    echo "# outage $kind"
    quote "${invocation[@]}"
    echo "PYTHONPATH=$lib PYTHONDONTWRITEBYTECODE=1 $(quote "${server_cmd[@]}")"
    quote "${storm_cmd[@]}"
    echo "# storm exited $status; $took s for the kind, the server's start and stop included; the server answered ${answer_s:-never} s after it"
  } > "$dest/grpcio.commands.txt"
  if [[ -s $work/port.counts ]]; then cp "$work/port.counts" "$dest/grpcio.json"; fi
  # kinds.tsv's row: summary_status, frozen_after and skipped are gunicorn's.
  printf '%s\t%s\t%s\t%s\t\t%s\t%s\t\t\t%s\t%s\n' "$kind" "$folder" "$outage" "$status" \
    "$answer_s" "$stopped" "$state" "$proxies" >> "$tmp/kinds.tsv"
done
cp "$tmp/kinds.tsv" "$out/kinds.tsv"

rc=$failed
check_flag=()
[[ $check == 0 ]] || check_flag=(--check)
verdicts=0
python3 scripts/grpcio/verdicts.py "$out" --command "$(quote "${invocation[@]}")" "${check_flag[@]}" ||
  verdicts=$?
if [[ $verdicts != 0 ]]; then
  [[ $check == 1 && $verdicts == 1 ]] && echo "grpc-storm-check: a check failed" >&2 ||
    echo "grpc-storm-check: the comparison of the kinds failed" >&2
  rc=1
fi
echo "grpc-storm-check: results in $out ($(($(date +%s) - started)) s)"
exit "$rc"
