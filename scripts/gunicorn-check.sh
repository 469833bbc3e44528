#!/usr/bin/env bash
# A real server the project did not write, stormed beside the model
# through each kind of outage, one of two (--server):
#
#   gunicorn  gunicorn 27.0.1 from PyPI (the default): 20 sync workers, a
#             backlog of 1,000, scripts/gunicorn/app.py answering after
#             100 ms. A worker finishes the request in hand whatever its
#             client does: gone clients' work is done however the outage
#             came, so it cannot tell a stop that lets the server see its
#             clients go from one that hides it.
#   aiohttp   aiohttp 3.14.5 from PyPI, with every package it imports
#             pinned (scripts/aiohttp/requirements.txt, installed with
#             --no-deps): its web server with handler_cancellation=True,
#             one process, scripts/aiohttp/app.py answering after 100 ms
#             in one of 20 slots (--slots; an asyncio.Semaphore, first
#             come first served: a pool as gunicorn's 20 workers, its
#             queue the slots' waiters), a backlog of 50 a slot (1,000,
#             gunicorn's). A server that stops a request's work when its
#             client goes: dead work costs a slot only if the server does
#             not learn that its client went.
#
# Why aiohttp for the cancelling one: its cancelling is the server's own
# code, switched on by a documented parameter, in a version pinned from
# PyPI with all it imports; Node's http server would be the machine's Node
# (no registry pin) and its cancelling our handler's code on 'close'. What
# 3.14.5's code does (web_protocol.py), followed over its docs, which say
# only that "when a client disconnects, the web handler task will be
# cancelled": RequestHandler.eof_received returns None, so asyncio closes
# the transport at the client's FIN and calls connection_lost, which
# cancels the connection's task (start()), and through its await the
# handler's task. A FIN is enough: a client that only half-closes
# (shutdown(SHUT_WR)) and waits for its answer is cancelled too and gets
# none, which the docs do not say. After a SIGSTOP a gone client's request
# and its FIN wait together in the socket: at the resume asyncio accepts
# the connection, its first read gives the request (data_received queues
# it and the handler starts) and its next read the end of the stream, so
# the handler is cancelled within a turn of the loop and its slot freed
# (tried on 3.14.5: three requests sent to the stopped server and closed,
# all three cancelled 0.1 ms into their service after the resume). Through
# the fault proxy the server sees the proxy's connection: it learns that a
# client went only if the proxy closes that connection.
#
# Stormed by `storm run SCENARIO --target http://127.0.0.1:PORT/ --outage
# ...`, by default with the cases of scenarios/gunicorn.toml (fixed
# retries, the 2014 client and clients that never retry, 1,000 each), at
# full time (the kernel's SYN retransmissions do not compress). Each kind
# of outage gets a server of its own, started fresh before its storm and
# stopped after it: its own processes, request lines and runs.
#
#   scripts/gunicorn-check.sh               gunicorn, sigstop, 3 runs of
#                                           each case (about 30 minutes)
#   scripts/gunicorn-check.sh --runs 1      one run of each (about 10 minutes)
#   --server gunicorn|aiohttp   the server (gunicorn)
#   --slots N           aiohttp's slots (20), its backlog 50 times as many.
#                       With --quick, 1,000 clients' retries are 5,000 new
#                       connections a second, more than its one Python
#                       process takes (about 0.1 ms a connection cancelled,
#                       0.45 ms one answered, on the project's machine):
#                       after a SIGSTOP it kept its accept queue full and
#                       read every request after its client had gone,
#                       answering none. Two fifths of everything keep the
#                       ratios at two fifths of the rate: --slots 8 (a
#                       backlog of 400) with scenarios/cancel-witness.toml's
#                       400 clients, .ci/run's form
#   --outage KIND       the kind of outage, repeatable, in the order given
#                       (default: sigstop alone); a kind given twice is refused:
#     sigstop           --outage sigstop=PID: the storm stops the server's
#                       process, then every descendant (gunicorn's workers),
#                       and continues them children first
#     exec              the same stop by commands of one's own, run by the storm
#                       through sh -c: --outage exec --outage-start 'kill -STOP
#                       MASTER && (wait, at most 0.1 s, until /proc shows it
#                       stopped) && pkill -STOP -P MASTER' --outage-end 'pkill
#                       -CONT -P MASTER; kill -CONT MASTER' for gunicorn (the
#                       master first, so that it cannot fork a worker unseen;
#                       continued last, so that it finds its workers running);
#                       'kill -STOP PID', 'kill -CONT PID' for aiohttp
#     freeze            the server started inside a cgroup of its own (a child
#                       of a cgroup v2 mount, with cgroup.freeze, or of cgroup
#                       v1's freezer, with freezer.state: see --freezer), its
#                       processes born in it; --outage freeze=CGROUP_DIR. Needs
#                       root; where no freezer is writable the kind is skipped,
#                       and said so, not failed. The cgroup is thawed, emptied
#                       and removed when the kind ends, whatever happened
#     stall, blackhole, reset, status=CODE[,retry-after=D], delay=D, each
#                       optionally followed by ,fraction=F: a fault of the
#                       storm's fault proxy in front of the server, passed as
#                       given
#     all               sigstop exec freeze stall blackhole reset status=503
#                       delay=5s. The delay is 2.5 times the client's default
#                       timeout (2 s): every delayed attempt times out, by a wide
#                       margin whatever the service time and the timers add (an
#                       outage as clients see it, where a delay under 2 s would
#                       be a slow service), and short beside the 20 s pause, so
#                       that the requests it delays fall due while it lasts
#   --tls               gunicorn over TLS: a throwaway CA and a certificate
#                       for 127.0.0.1 (an IP SAN; ECDSA P-256 keys) made by
#                       openssl in the temporary folder at the start, and
#                       removed with it; gunicorn given --certfile and
#                       --keyfile, the storm https://127.0.0.1:PORT/, and the
#                       clients --ca-cert with the CA, added to each case's
#                       client flags in a copy of the scenario written to
#                       the temporary folder (storm run takes no client
#                       flags of its own). sigstop, exec and freeze only:
#                       the storm's fault proxy fronts a TLS target, but
#                       not yet checked against gunicorn here, so its kinds
#                       (and all) are refused, exit 2;
#                       gunicorn only. With --quick the handshakes (about
#                       1.6 ms of a worker's CPU each) are not compressed:
#                       1,000 clients' TLS connections ten times denser
#                       are more than two cores take, and the baseline
#                       falls to nothing (results/target-tls/quick)
#   --scenario FILE     the storm's scenario (scenarios/gunicorn.toml); its
#                       cases have client flags only. scenarios/gunicorn-witness.toml:
#                       clients that never retry, then fixed retries, a 30 s
#                       window and no tail, about 4 minutes a kind a run
#   --runs N            runs of each case (3)
#   --out DIR           results in DIR, which must be new or empty (default
#                       results/<UTC timestamp>-SERVER)
#   --freezer auto|v1|v2  which cgroup freezer the freeze kind uses: auto (the
#                       default) tries every cgroup v2 mount, then cgroup v1's
#                       freezer, in /proc/self/mounts, and takes the first in
#                       which it can make a cgroup
#   --check             after the storms, prints a PASS/FAIL line per check
#                       (SKIP for a kind skipped) and exits 1 if one fails:
#                       every storm exited 0; the server answered a GET after
#                       each kind, none of its processes stopped nor its cgroup
#                       frozen; a fault proxy's fault acted (status: injected
#                       above 0 and, for a 4xx or 5xx, none of its class
#                       counted as the server's, which answers 200; reset:
#                       resets above 0; stall, blackhole: connections queued or
#                       requests held in the fixed case; delay: requests held);
#                       aiohttp: it cancelled handlers in every run of
#                       sigstop, exec and freeze (else the witness would
#                       compare two servers that finish dead work); the
#                       verdicts of stall, exec and freeze those of sigstop,
#                       case by case and run by run (scripts/gunicorn/kinds.py)
#   --quick             every time divided by ten: the application answers
#                       after 10 ms, the storm runs with --quick (the
#                       clients' times, the protocol and the calm window
#                       divided by ten) and all's delay is 500ms (still 2.5
#                       times the clients' compressed timeout). The server's
#                       capacity stays twice its load's, so each case is
#                       the same distance from its edge, but ten times
#                       denser: 1,000 clients send 1,000 requests a second.
#                       The kernel's SYN retransmissions (1 s, 3 s) and the
#                       machine's costs do not compress. About 35 s a kind a
#                       run with the witness scenario (.ci/run's form)
#   --bin DIR           the programs in DIR (default
#                       ${CARGO_TARGET_DIR:-target}/release, built if missing)
#   --keep              keep the temporary folder: per kind, the server's log,
#                       the application's request lines, the kernel counters'
#                       samples
#
# How long: each kind starts the server (a few seconds), runs its storm
# (each run its protocol plus the storm's wait for a calm target before
# it, 30 s at least) and stops the server gracefully (gunicorn's workers
# finish the request in hand, within 30 s; aiohttp gives its handlers
# 5 s). scenarios/gunicorn.toml: about 10 minutes a kind a run;
# scenarios/gunicorn-witness.toml: about 4 minutes (gunicorn, sigstop,
# one run: 3 min 50 s), so `--outage all --scenario
# scenarios/gunicorn-witness.toml --runs 1` about 31 minutes.
#
# Installs the server with pip into a folder of its own,
# ${XDG_CACHE_HOME:-$HOME/.cache}/retry-storm/SERVER-VERSION (once; needs
# python3 with pip, and PyPI), builds the release binaries if they are
# missing (${CARGO_TARGET_DIR:-target}/release), and leaves behind only
# the results, in DIR with one kind, in DIR/NAME with several (NAME the
# kind with '=' and ',' turned into '-'): the storm's results, SERVER.json
# and SERVER.md (scripts/gunicorn/summarise.py: per run, requests the
# application answered, those whose client had gone when it began and
# when it finished, those it cancelled (aiohttp; in service or waiting
# for a slot), the share answered for gone clients from the resume on,
# the accept queue at its peak and how long it was full, the kernel's
# listen-queue overflows and drops, counted for the whole network
# namespace) and SERVER.commands.txt (versions and command lines); and
# in DIR, kinds.tsv (per kind: its folder, the storm's outage, its exit
# status and the summary's, the seconds the server took to answer a GET
# after the storm, its processes left stopped, its cgroup left frozen,
# why it was skipped), kinds.json and kinds.md (scripts/gunicorn/kinds.py:
# the kinds side by side, the command that made them, and the checks).
# The server, the kernel sampler and the cgroup are stopped and removed
# when a kind ends and when the script exits, whatever happened;
# processes left stopped are continued. Exits 2 on a usage or setup
# error, 1 if a storm or a summary failed (or, with --check, a check),
# 130 if interrupted.
set -euo pipefail
# The command as given, for the results.
invocation=("$0" "$@")
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

server=gunicorn
slots=20
runs=3
out=""
keep=0
check=0
tls=0
scenario=scenarios/gunicorn.toml
freezer=auto
quick=0
bin=""
asked=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --server) [[ $# -ge 2 && $2 =~ ^(gunicorn|aiohttp)$ ]] || { echo "--server takes gunicorn or aiohttp" >&2; exit 2; }
              server=$2; shift 2 ;;
    --slots) [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "--slots takes a number from 1" >&2; exit 2; }
             slots=$2; shift 2 ;;
    --runs) [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "--runs takes a number from 1" >&2; exit 2; }
            runs=$2; shift 2 ;;
    --out) [[ $# -ge 2 ]] || { echo "--out takes a folder" >&2; exit 2; }
           out=$2; shift 2 ;;
    --outage) [[ $# -ge 2 ]] || { echo "--outage takes a kind" >&2; exit 2; }
              asked+=("$2"); shift 2 ;;
    --scenario) [[ $# -ge 2 && -f $2 ]] || { echo "--scenario takes a scenario file" >&2; exit 2; }
                scenario=$2; shift 2 ;;
    --freezer) [[ $# -ge 2 && $2 =~ ^(auto|v1|v2)$ ]] || { echo "--freezer takes auto, v1 or v2" >&2; exit 2; }
               freezer=$2; shift 2 ;;
    --bin) [[ $# -ge 2 && -d $2 ]] || { echo "--bin takes a folder" >&2; exit 2; }
           bin=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --check) check=1; shift ;;
    --tls) tls=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ $server == aiohttp || $slots == 20 ]] || { echo "--slots is aiohttp's: gunicorn has 20 workers" >&2; exit 2; }
# The listening socket's backlog: 50 a slot, gunicorn's 1,000 for 20 workers.
backlog=$((slots * 50))
# all's delay is 2.5 times the clients' timeout, compressed with it.
delay=5s
[[ $quick == 0 ]] || delay=500ms
all=(sigstop exec freeze stall blackhole reset status=503 "delay=$delay")
kinds=()
for kind in "${asked[@]}"; do
  if [[ $kind == all ]]; then kinds+=("${all[@]}"); else kinds+=("$kind"); fi
done
[[ ${#kinds[@]} -gt 0 ]] || kinds=(sigstop)
if [[ -z $out ]]; then
  out="results/$(date -u +%Y-%m-%dT%H-%M-%SZ)-$server"
  [[ $tls == 0 ]] || out+=-tls
fi

# name_of, proxy_kind, refuse_twice, quote.
source scripts/outage-kinds.sh
for kind in "${kinds[@]}"; do
  if [[ $kind != sigstop && $kind != exec && $kind != freeze && ! $kind =~ $proxy_kind ]]; then
    echo "--outage $kind: not a kind; sigstop, exec, freeze, all, or a fault proxy's:" \
      "stall, blackhole, reset, status=CODE[,retry-after=D] or delay=D, each optionally" \
      "followed by ,fraction=F" >&2
    exit 2
  fi
done
refuse_twice "${kinds[@]}"
if [[ $tls == 1 ]]; then
  [[ $server == gunicorn ]] ||
    { echo "--tls is gunicorn's (--certfile, --keyfile): $server over TLS is not built" >&2; exit 2; }
  for kind in "${asked[@]}"; do
    if [[ $kind == all || $kind =~ $proxy_kind ]]; then
      why=""
      [[ $kind != all ]] || why=" all holds the fault proxy's kinds, and"
      echo "--tls --outage $kind:$why the fault proxy in front of a TLS gunicorn is not checked here yet" \
        "(docs/protocols.md, Not yet); over https give sigstop, exec or freeze" >&2
      exit 2
    fi
  done
fi
if [[ -e $out ]] && [[ ! -d $out || -n $(ls -A "$out") ]]; then
  echo "--out $out: already holds files; choose a new or empty folder" >&2
  exit 2
fi

tmp=""
master=""
sampler=""
cgroup=""
cgroup_version=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_sampler
  stop_server
  remove_cgroup
  if [[ $rc == 130 || $rc == 143 ]]; then
    echo "gunicorn-check: interrupted; $server stopped, partial results in $out" >&2
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

stop_sampler() {
  if [[ -n $sampler ]]; then
    kill "$sampler" 2> /dev/null || true
    wait "$sampler" 2> /dev/null || true
    sampler=""
  fi
}

# The cgroup's freezer file, and the values that freeze and thaw it.
freeze_file() { if [[ $cgroup_version == v2 ]]; then echo "$cgroup/cgroup.freeze"; else echo "$cgroup/freezer.state"; fi; }
thawed_value() { if [[ $cgroup_version == v2 ]]; then echo 0; else echo THAWED; fi; }
thaw_cgroup() {
  if [[ -n $cgroup && -e $(freeze_file) ]]; then thawed_value > "$(freeze_file)" 2> /dev/null || true; fi
}
# 1 if the cgroup is frozen (or freezing), 0 if not, empty without one.
frozen_now() {
  [[ -n $cgroup && -e $(freeze_file) ]] || return 0
  if [[ $cgroup_version == v2 ]]; then
    # cgroup.freeze is what was asked; cgroup.events' frozen what is.
    if [[ $(cat "$(freeze_file)") == 1 ]] || grep -qx 'frozen 1' "$cgroup/cgroup.events"; then
      echo 1
    else
      echo 0
    fi
  elif [[ $(cat "$(freeze_file)") == THAWED ]]; then
    echo 0
  else
    echo 1
  fi
}

# The server stopped: continued first, in case anything left it stopped
# or frozen (children first); then a graceful stop, which flushes the
# request lines (gunicorn's workers finish the request in hand, within
# its 30 s; aiohttp gives its handlers 5 s), and SIGKILL after 35 s to
# whatever of it is left.
stop_server() {
  [[ -n $master ]] || return 0
  thaw_cgroup
  if kill -0 "$master" 2> /dev/null; then
    local children
    children=$(pgrep -P "$master" || true)
    pkill -CONT -P "$master" 2> /dev/null || true
    kill -CONT "$master" 2> /dev/null || true
    kill -TERM "$master" 2> /dev/null || true
    for _ in $(seq 350); do kill -0 "$master" 2> /dev/null || break; sleep 0.1; done
    if kill -0 "$master" 2> /dev/null; then
      pkill -KILL -P "$master" 2> /dev/null || true
      kill -KILL "$master" 2> /dev/null || true
    fi
    # A worker outliving its master (it checks its parent once a second).
    for pid in $children; do
      if grep -qs "$server" "/proc/$pid/cmdline"; then kill -KILL "$pid" 2> /dev/null || true; fi
    done
  fi
  master=""
}

# The cgroup emptied and removed.
remove_cgroup() {
  [[ -n $cgroup ]] || return 0
  if [[ -d $cgroup ]]; then
    thaw_cgroup
    for _ in $(seq 50); do
      [[ -n $(cat "$cgroup/cgroup.procs") ]] || break
      xargs -r kill -KILL < "$cgroup/cgroup.procs" 2> /dev/null || true
      sleep 0.1
    done
    rmdir "$cgroup" 2> /dev/null ||
      echo "gunicorn-check: could not remove the cgroup $cgroup (processes: $(tr '\n' ' ' < "$cgroup/cgroup.procs"))" >&2
  fi
  cgroup=""
  cgroup_version=""
}

# A cgroup of its own with a freezer, made under the first mount that
# lets us (--freezer): sets cgroup and cgroup_version, or why_not.
make_cgroup() {
  local label=$1 version mount dir
  why_not=""
  while read -r version mount; do
    [[ $freezer == auto || $freezer == "$version" ]] || continue
    dir="$mount/retry-storm-$server-$$-$label"
    if ! mkdir "$dir" 2> /dev/null; then
      why_not+="${why_not:+; }cgroup $version at $mount: cannot make a cgroup there"
      continue
    fi
    if [[ $version == v2 && -w $dir/cgroup.freeze && -w $dir/cgroup.procs ]] ||
       [[ $version == v1 && -w $dir/freezer.state && -w $dir/cgroup.procs ]]; then
      cgroup=$dir
      cgroup_version=$version
      return 0
    fi
    rmdir "$dir" 2> /dev/null || true
    why_not+="${why_not:+; }cgroup $version at $mount: no writable freezer in a new cgroup"
  done < <(awk '$3 == "cgroup2" { print "v2", $2 }' /proc/self/mounts
           awk '$3 == "cgroup" && $4 ~ /(^|,)freezer(,|$)/ { print "v1", $2 }' /proc/self/mounts)
  [[ -n $why_not ]] || why_not="no cgroup ${freezer/auto/v1 or v2} mount with a freezer in /proc/self/mounts"
  return 1
}

command -v python3 > /dev/null || die "python3 is needed"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gunicorn-check.XXXXXX")

# The server, pinned, in a folder of its own (pip --target needs no
# virtual environment, and leaves the system's Python as it was): pins,
# the distributions and versions it must hold; pip_args, what pip
# installs. gunicorn's own dependency (packaging) is left to pip, as it
# was when results/ were made; aiohttp's are pinned, one by one.
case $server in
  gunicorn)
    version=27.0.1
    pins=("gunicorn==$version")
    pip_args=("gunicorn==$version") ;;
  aiohttp)
    version=$(sed -n 's/^aiohttp==//p' scripts/aiohttp/requirements.txt)
    mapfile -t pins < <(grep -E '^[^#[:space:]]' scripts/aiohttp/requirements.txt)
    pip_args=(--no-deps -r scripts/aiohttp/requirements.txt) ;;
esac
lib="${XDG_CACHE_HOME:-$HOME/.cache}/retry-storm/$server-$version"
installed() {
  python3 - "$lib" "${pins[@]}" 2> /dev/null << 'EOF'
import importlib.metadata, re, sys
name = lambda n: re.sub(r"[-_.]+", "-", n).lower()
have = {name(d.metadata["Name"]): d.version
        for d in importlib.metadata.distributions(path=[sys.argv[1]])}
sys.exit(any(have.get(name(n)) != v for n, v in (p.split("==") for p in sys.argv[2:])))
EOF
}
if ! installed; then
  rm -rf "$lib"
  mkdir -p "$lib"
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --target "$lib" "${pip_args[@]}" > "$tmp/pip.log" 2>&1 ||
    { cat "$tmp/pip.log" >&2; rm -rf "$lib"; die "could not install $server $version"; }
  installed || { rm -rf "$lib"; die "$server $version did not install: $(tr '\n' ' ' < "$tmp/pip.log")"; }
fi

# The release binaries, built if missing, or those of --bin.
if [[ -z $bin ]]; then
  bin="${CARGO_TARGET_DIR:-target}/release"
  if [[ ! -x $bin/storm ]]; then
    cargo build --release --bins || die "the build failed"
  fi
fi
[[ -x $bin/storm ]] || die "--bin $bin: no storm there"
# With --quick, the application's service time and the storm's times are
# divided by ten alike.
service_ms=100
quick_flag=()
if [[ $quick == 1 ]]; then
  service_ms=10
  quick_flag=(--quick)
fi

# Over TLS (--tls): a throwaway CA and a certificate for 127.0.0.1 in the
# temporary folder (scripts/gunicorn/certificates.sh); gunicorn serves the
# certificate, the clients trust the CA by --ca-cert, added to every
# case's client flags in a copy of the scenario (scripts/gunicorn/with_ca.py).
scheme=http
ca=""
tls_flags=()
tls_note=""
storm_scenario=$scenario
if [[ $tls == 1 ]]; then
  command -v openssl > /dev/null || die "--tls needs openssl"
  mkdir "$tmp/tls"
  scripts/gunicorn/certificates.sh "$tmp/tls" || die "openssl could not make the certificates"
  ca=$tmp/tls/ca.pem
  tls_flags=(--certfile "$tmp/tls/server.pem" --keyfile "$tmp/tls/server.key")
  scheme=https
  storm_scenario="$tmp/tls/$(basename "$scenario")"
  python3 scripts/gunicorn/with_ca.py selftest || die "--tls: scripts/gunicorn/with_ca.py failed its self-test"
  python3 scripts/gunicorn/with_ca.py "$scenario" "$ca" "$storm_scenario" ||
    die "--tls: could not give the clients of $scenario the CA"
  tls_note="TLS: $(openssl version), a throwaway CA and a certificate for IP 127.0.0.1 (ECDSA P-256), made in the temporary folder; $storm_scenario is $scenario with --ca-cert $ca added to each case's client flags"
fi

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# A GET answered within 60 s (each try given 10 s: a full accept queue
# drops the handshake, which the kernel retries after 1 s, 3 s, 7 s):
# prints the seconds it took, or fails.
answers() {
  python3 - "$1" "$ca" << 'EOF'
import ssl, sys, time, urllib.request
context = ssl.create_default_context(cafile=sys.argv[2]) if sys.argv[2] else None
start = time.monotonic()
while time.monotonic() - start < 60:
    try:
        urllib.request.urlopen(sys.argv[1], timeout=10, context=context).read()
        print("%.1f" % (time.monotonic() - start))
        sys.exit(0)
    except Exception:
        time.sleep(1)
sys.exit(1)
EOF
}
# The server's processes (gunicorn's master and workers) stopped now
# (state T or t).
stopped_now() {
  local n=0 pid
  for pid in "$master" $(pgrep -P "$master" || true); do
    [[ -r /proc/$pid/stat ]] || continue
    if [[ $(sed 's/.*) //' "/proc/$pid/stat" | cut -d' ' -f1) == [Tt] ]]; then n=$((n + 1)); fi
  done
  echo "$n"
}

# The server on a free loopback port, in its own session (a Ctrl-C
# reaches this script and the storm, which stop it in order), inside the
# cgroup if there is one; its files in DIR. Sets master (its first
# process), port, url, described and server_cmd.
start_server() {
  local dir=$1 launcher=() output=/dev/null starter answered children=0
  mkdir -p "$dir/requests"
  if [[ -n $cgroup ]]; then
    # shellcheck disable=SC2016 # $$, $0 and $@ are the inner shell's
    launcher=(sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cgroup")
  fi
  for _ in 1 2 3; do
    port=$(free_port)
    case $server in
      gunicorn)
        children=20
        server_cmd=(python3 -m gunicorn -w 20 -k sync --backlog 1000 -b "127.0.0.1:$port"
          --chdir "$PWD/scripts/gunicorn" --pid "$dir/server.pid" --log-file "$dir/gunicorn.log"
          --no-control-socket "${tls_flags[@]}" app:app) ;;
      aiohttp)
        output="$dir/aiohttp.log"
        server_cmd=(python3 "$PWD/scripts/aiohttp/app.py" --port "$port" --backlog "$backlog" --slots "$slots"
          --pid "$dir/server.pid") ;;
    esac
    PYTHONPATH="$lib" PYTHONDONTWRITEBYTECODE=1 GUNICORN_CHECK_LOG_DIR="$dir/requests" \
      GUNICORN_CHECK_SERVICE_MS=$service_ms setsid "${launcher[@]}" "${server_cmd[@]}" \
      < /dev/null > "$output" 2>&1 &
    starter=$!
    url="$scheme://127.0.0.1:$port/"
    answered=0
    for _ in $(seq 300); do
      if python3 -c 'import ssl, sys, urllib.request
context = ssl.create_default_context(cafile=sys.argv[2]) if sys.argv[2] else None
urllib.request.urlopen(sys.argv[1], timeout=2, context=context).read()' "$url" "$ca" 2> /dev/null; then
        answered=1
        break
      fi
      kill -0 "$starter" 2> /dev/null || break
      sleep 0.1
    done
    if [[ $answered == 1 && -s $dir/server.pid ]]; then
      master=$(cat "$dir/server.pid")
      break
    fi
    # The port was taken meanwhile, or the server failed: stop it, try again.
    kill -TERM "$starter" 2> /dev/null || true
    wait "$starter" 2> /dev/null || true
  done
  [[ -n $master ]] || { cat "$dir/$server.log" >&2; die "$server did not answer at $url"; }
  # gunicorn's workers boot one after the other.
  local workers=0
  for _ in $(seq 300); do
    workers=$(pgrep -c -P "$master" || true)
    [[ $workers -lt $children ]] || break
    sleep 0.1
  done
  case $server in
    gunicorn) described="master $master, $workers workers" ;;
    aiohttp) described="process $master, $slots slots" ;;
  esac
}

mkdir -p "$out"
printf 'kind\tfolder\toutage\tstorm_status\tsummary_status\tanswer_s\tstopped_after\tfrozen_after\tskipped\n' \
  > "$tmp/kinds.tsv"
# record KIND FOLDER OUTAGE STORM SUMMARY ANSWER STOPPED FROZEN SKIPPED
record() { (IFS=$'\t'; echo "$*") >> "$tmp/kinds.tsv"; }
failed=0
started=$(date +%s)
for kind in "${kinds[@]}"; do
  name=$(name_of "$kind")
  if [[ ${#kinds[@]} == 1 ]]; then folder=.; else folder=$name; fi
  if [[ $folder == . ]]; then dest=$out; else dest="$out/$folder"; fi
  work="$tmp/$name"
  mkdir -p "$work"
  kind_started=$(date +%s)

  if [[ $kind == freeze ]]; then
    if ! make_cgroup "$name"; then
      echo "gunicorn-check: freeze: skipped, no cgroup freezer is writable here: $why_not" >&2
      record "$kind" "" "" "" "" "" "" "" "no cgroup freezer is writable here: $why_not"
      continue
    fi
  fi
  start_server "$work"
  where=""
  if [[ -n $cgroup ]]; then
    # Every process of the server's must be in the cgroup.
    for pid in "$master" $(pgrep -P "$master"); do
      grep -qx "$pid" "$cgroup/cgroup.procs" || die "$server's process $pid is not in $cgroup"
    done
    where=", in the cgroup $cgroup (cgroup $cgroup_version)"
  fi
  echo "gunicorn-check: $kind: $server $version at $url, $described$where; results in $dest"

  case $kind in
    sigstop) outage=(--outage "sigstop=$master") ;;
    exec)
      if [[ $server == gunicorn ]]; then
        # The master first, so that it cannot fork a worker unseen, then
        # (once /proc shows it stopped, at most 0.1 s later) its workers;
        # continued children first, so that the master finds them running.
        outage=(--outage exec
          --outage-start "kill -STOP $master && for i in 1 2 3 4 5 6 7 8 9 10; do grep -q '^State:.T' /proc/$master/status && break; sleep 0.01; done && pkill -STOP -P $master"
          --outage-end "pkill -CONT -P $master; kill -CONT $master")
      else
        outage=(--outage exec --outage-start "kill -STOP $master" --outage-end "kill -CONT $master")
      fi ;;
    freeze) outage=(--outage "freeze=$cgroup") ;;
    *) outage=(--outage "$kind") ;;
  esac

  # The kernel's listen-queue counters and the server's accept queue, four
  # times a second, for the whole storm.
  python3 scripts/gunicorn/summarise.py sample "$work/netstat.tsv" "$port" &
  sampler=$!

  storm_cmd=("$bin/storm" run "$storm_scenario" --target "$url" "${outage[@]}"
    --runs "$runs" "${quick_flag[@]}" --out "$dest")
  status=0
  "${storm_cmd[@]}" || status=$?
  stop_sampler
  # A Ctrl-C reaches the storm too, which stops in order and exits 130.
  [[ $status != 130 ]] || exit 130
  [[ $status == 0 ]] || echo "gunicorn-check: $kind: the storm failed ($status)" >&2

  # The target left running: a GET answered, none of its processes
  # stopped, its cgroup not frozen.
  stopped=$(stopped_now)
  frozen=$(frozen_now)
  answer_s=""
  if [[ $stopped != 0 || $frozen == 1 ]]; then
    echo "gunicorn-check: $kind: $server left down by the storm (processes stopped: $stopped; cgroup frozen: ${frozen:--})" >&2
  elif answer_s=$(answers "$url"); then
    echo "gunicorn-check: $kind: $server answered a GET $answer_s s after the storm"
  else
    answer_s=""
    echo "gunicorn-check: $kind: $server did not answer a GET within 60 s after the storm" >&2
  fi

  stop_server
  remove_cgroup

  mkdir -p "$dest"
  {
    echo "# gunicorn-check.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -sr), $(nproc) CPUs, somaxconn $(cat /proc/sys/net/core/somaxconn)"
    echo "# $server $(PYTHONPATH="$lib" python3 -c "import $server; print($server.__version__)") (pip install --target $lib $(quote "${pip_args[@]}")), $(python3 --version 2>&1), $("$bin/storm" --version)"
    echo "# outage $kind${where:+; $server started$where}"
    [[ -z $tls_note ]] || echo "# $tls_note"
    echo "PYTHONPATH=$lib PYTHONDONTWRITEBYTECODE=1 GUNICORN_CHECK_LOG_DIR=$work/requests GUNICORN_CHECK_SERVICE_MS=$service_ms $(quote "${server_cmd[@]}")"
    quote "${storm_cmd[@]}"
    echo "# storm exited $status; $(( $(date +%s) - kind_started )) s for the kind, $server's start and stop included"
  } > "$dest/$server.commands.txt"

  summary_status=""
  if [[ -f $dest/summary.json ]]; then
    summary_status=0
    python3 scripts/gunicorn/summarise.py summarise "$server" "$backlog" "$dest" "$work/requests" \
      "$work/netstat.tsv" ||
      summary_status=$?
    [[ $summary_status == 0 ]] || echo "gunicorn-check: $kind: the summary failed" >&2
  fi
  [[ $status == 0 && $summary_status == 0 ]] || failed=1
  record "$kind" "$folder" "${outage[1]}" "$status" "$summary_status" "$answer_s" "$stopped" "$frozen" ""
  if [[ ${#kinds[@]} == 1 && -f $dest/$server.md ]]; then cat "$dest/$server.md"; fi
done

cp "$tmp/kinds.tsv" "$out/kinds.tsv"
check_status=0
check_flag=()
[[ $check == 0 ]] || check_flag=(--check)
case $server in
  gunicorn) label="gunicorn $version (20 sync workers${tls_note:+, TLS by --certfile})" ;;
  aiohttp) label="aiohttp $version (handler_cancellation=True, $slots slots)" ;;
esac
python3 scripts/gunicorn/kinds.py "$out" --server "$label" \
  --command "$(quote "${invocation[@]}")" "${check_flag[@]}" || check_status=$?
[[ ${#kinds[@]} == 1 ]] || cat "$out/kinds.md"
echo "gunicorn-check: results in $out ($(( $(date +%s) - started )) s)"
if [[ $check == 1 && $check_status == 1 ]]; then
  echo "gunicorn-check: a check failed" >&2
  exit 1
fi
[[ $check_status == 0 ]] || { echo "gunicorn-check: the comparison of the kinds failed" >&2; exit 1; }
[[ $failed == 0 ]] || { echo "gunicorn-check: a storm or a summary failed" >&2; exit 1; }
