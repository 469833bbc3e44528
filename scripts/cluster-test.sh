#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2317 # $ in single quotes is for the inner shell; functions run via check and wait_for
# The scale-out on a real Slurm, on one machine: a controller and two
# compute nodes, each in its own network namespace, the server in a third,
# joined by a bridge on 10.199.0.0/24 with no route out. Runs as root; puts
# in what it lacks from Debian packages (slurmctld, slurmd, munge, a JRE,
# libhdrhistogram-java, jq, python3-pip) and pip (hdrhistogram, into the
# temporary folder), then builds the programs, and in a few minutes:
#   - a two-shard client job (deploy/slurm/client.sbatch, one task a node)
#     against the server, paused with SIGSTOP and resumed with SIGCONT
#     (warm-up, pause, observe, time divided by 10), then storm merge with
#     the server's CSV and the protocol;
#   - a sweep as an array job of 4 tasks and a merge after it
#     (deploy/slurm/submit-sweep.sh), against the same sweep in one process;
#   - scripts/validate-manifests.sh (the Kubernetes manifests), if present.
#
#   scripts/cluster-test.sh              install, build, run everything
#   scripts/cluster-test.sh --bin DIR    the programs in DIR, no build
#   scripts/cluster-test.sh --no-build   the programs in target/release as
#                                        they are
#   scripts/cluster-test.sh --no-install stop (exit 2) if a package is
#                                        missing instead of installing it
#   scripts/cluster-test.sh --cluster-only
#                                        only the cluster: up, srun and an
#                                        array job with a dependent job, down
#   scripts/cluster-test.sh --keep       keep the temporary folder (logs,
#                                        results); its path is printed
#
# What must hold:
#   cluster    slurmctld and both slurmd answer; srun -N2 runs one task in
#              each node's namespace; no address outside the subnet is
#              reachable from a node
#   client     the job completes, each task a shard from SLURM_PROCID/
#              SLURM_NTASKS; the shards' report rows fall on the same
#              boundaries; the merged CSV has their rows, each rate the sum
#              of theirs and each percentile between theirs; the OK rate
#              falls to nothing in the pause and comes back after it
#   hlog       Java's HistogramLogProcessor and scripts/hlog-totals.py
#              (Python's hdrh; skipped if pip cannot get it) read the HDR
#              interval logs: the merged log's count is the sum of the
#              shards' (attempts, and requests: tag request), and the
#              merged CSV's OK count within rounding; its largest latency
#              the CSV's; Java and Python read the same count, p50, p99
#              and max
#   merge      storm merge with --server-csv and the protocol: the same
#              client.csv as the job's merge, a verdict (recovered: the
#              server drops the work of attempts that timed out), and in
#              client.summary.json the count and percentiles Java reads
#   sweep      every array task and then the merge job complete (the merge
#              not before the last task); each shard's shard.json names
#              it; the merged critical.csv and phase.csv are byte for byte
#              the one-process sweep's
#   manifests  scripts/validate-manifests.sh passes (skipped if absent)
# About 40 s here once installed and built (2 cores).
# Prints PASS/FAIL per check and exits 1 if one fails, 2 on a usage or
# setup error. Every daemon, process, namespace and file it made is gone
# when it exits, whatever happened (with --keep, all but the folder).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

usage() { sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

bin=""
build=1
install=1
keep=0
cluster_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; bin=$(cd "$2" && pwd); build=0; shift 2 ;;
    --no-build) build=0; shift ;;
    --no-install) install=0; shift ;;
    --cluster-only) cluster_only=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ $(id -u) == 0 ]] || { echo "cluster-test: must run as root (namespaces, daemons)" >&2; exit 2; }

# --- packages --------------------------------------------------------------

hdr_jar=/usr/share/java/hdrhistogram.jar
missing=()
for need in slurmctld:slurmctld slurmd:slurmd srun:slurm-client munged:munge \
  ip:iproute2 nsenter:util-linux java:default-jre-headless jq:jq python3:python3; do
  command -v "${need%%:*}" > /dev/null || missing+=("${need#*:}")
done
[[ -e $hdr_jar ]] || missing+=(libhdrhistogram-java)
# pip, for the second reader.
python3 -m pip --version > /dev/null 2>&1 || missing+=(python3-pip)
# venv, for scripts/validate-manifests.sh (Debian's python3 makes none
# without it).
if [[ -e scripts/validate-manifests.sh ]] && ! python3 -c 'import ensurepip' 2> /dev/null; then
  missing+=(python3-venv)
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  [[ $install == 1 ]] || { echo "cluster-test: missing packages: ${missing[*]}" >&2; exit 2; }
  echo "cluster-test: installing ${missing[*]}"
  # The packages' own services must not start (this test runs its own
  # daemons): a policy-rc.d says no for the install, if there is none.
  policy=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    policy=/usr/sbin/policy-rc.d
    trap 'rm -f "$policy"' EXIT
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
  fi
  installed=1
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" > /dev/null; } || installed=0
  if [[ -n $policy ]]; then
    rm -f "$policy"
    trap - EXIT
  fi
  [[ $installed == 1 ]] || { echo "cluster-test: could not install ${missing[*]}" >&2; exit 2; }
fi

# --- programs --------------------------------------------------------------

if [[ -z $bin ]]; then
  bin=$repo/target/release
  if [[ $build == 1 && $cluster_only == 0 ]]; then
    cargo build --release --locked --quiet --bin server --bin client --bin storm
  fi
fi
if [[ $cluster_only == 0 ]]; then
  for p in server client storm; do
    [[ -x $bin/$p ]] || { echo "cluster-test: no $bin/$p" >&2; exit 2; }
  done
fi

# --- the machine's state, and putting it back ------------------------------

# Slurm variables from around us (a test run inside a job) would confuse
# srun; ours come from SLURM_CONF.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^SLURM_' || true)

# In /tmp, whatever TMPDIR says: munged wants every folder above its
# socket open to all.
tmp=$(mktemp -d /tmp/cluster-test.XXXXXX)
chmod 755 "$tmp"
prefix=ct$$           # namespaces: $prefix-hub, -ctl, -node1, -node2, -srv
namespaces=(hub ctl node1 node2 srv)
declare -A addr=([ctl]=10.199.0.1 [node1]=10.199.0.11 [node2]=10.199.0.12 [srv]=10.199.0.20)
made_ns=()
daemons=()            # pids of everything started here, stopped in reverse
server_pid=""
failures=0

# alive PID: the process runs (a child of ours that ended is a zombie until
# waited for).
alive() { [[ -e /proc/$1 ]] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2> /dev/null; }
# stop PID...: SIGTERM, then SIGKILL whatever is left after 10 s.
stop() {
  local p left
  [[ $# -gt 0 ]] || return 0
  kill -CONT "$@" 2> /dev/null || true
  kill -TERM "$@" 2> /dev/null || true
  for _ in $(seq 100); do
    left=()
    for p in "$@"; do alive "$p" && left+=("$p"); done
    [[ ${#left[@]} -eq 0 ]] && return 0
    sleep 0.1
  done
  kill -KILL "${left[@]}" 2> /dev/null || true
}

cleanup() {
  local rc=$? ns pids left p
  trap - EXIT INT TERM
  set +e
  if [[ -n ${SLURM_CONF:-} && -e ${SLURM_CONF} ]] && [[ -e /run/netns/$prefix-ctl ]]; then
    timeout 5 nsenter --net="/run/netns/$prefix-ctl" scancel --user=root > /dev/null 2>&1
  fi
  [[ -n $server_pid ]] && stop "$server_pid"
  local i rev=()
  for ((i = ${#daemons[@]} - 1; i >= 0; i--)); do rev+=("${daemons[i]}"); done
  stop "${rev[@]}"
  # Whatever is left in our namespaces (job steps, tasks) goes too.
  for ns in "${made_ns[@]}"; do
    pids=$(ip netns pids "$ns" 2> /dev/null)
    # shellcheck disable=SC2086 # a list of pids
    [[ -n $pids ]] && stop $pids
  done
  local survivors=()
  for ns in "${made_ns[@]}"; do
    # shellcheck disable=SC2207 # a list of pids
    survivors+=($(ip netns pids "$ns" 2> /dev/null))
    ip netns delete "$ns" 2> /dev/null
  done
  for p in "${daemons[@]}" $server_pid; do alive "$p" && survivors+=("$p"); done
  left=$(ip netns list 2> /dev/null | grep -c "^$prefix-")
  if [[ ${#survivors[@]} -gt 0 || $left -gt 0 ]]; then
    echo "cluster-test: cleanup left processes ${survivors[*]:-none} and $left namespaces" >&2
    [[ $rc == 0 ]] && rc=1
  fi
  if [[ $keep == 1 ]]; then
    echo "cluster-test: kept $tmp"
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }
# check NAME DESCRIPTION COMMAND...: PASS if the command succeeds.
check() {
  local name=$1 what=$2
  shift 2
  if "$@" > /dev/null; then pass "$name" "$what"; else fail "$name" "$what"; fi
}
die() { echo "cluster-test: $*" >&2; exit 2; }

# wait_for SECONDS WHAT COMMAND...: polls until the command succeeds.
wait_for() {
  local secs=$1 what=$2 end
  shift 2
  end=$((SECONDS + secs))
  until "$@" > /dev/null 2>&1; do
    ((SECONDS < end)) || { echo "cluster-test: timed out after ${secs}s waiting for $what" >&2; return 1; }
    sleep 0.2
  done
}

# --- the network -----------------------------------------------------------

# inns NS COMMAND...: runs the command in namespace NS, under hostname NS
# (its own UTS namespace: slurmctld checks that it runs on SlurmctldHost,
# and each slurmd's tasks see their node's name). nsenter and unshare exec
# the command, so it keeps the pid started here.
inns() {
  local ns=$1
  shift
  nsenter --net="/run/netns/$prefix-$ns" unshare --uts \
    sh -c 'hostname "$0" && exec "$@"' "$ns" "$@"
}
# spawn NS LOG COMMAND...: the same in the background, output to LOG; $! is
# the command's pid (not a subshell's, so that signals reach it).
spawn() {
  local ns=$1 log=$2
  shift 2
  nsenter --net="/run/netns/$prefix-$ns" unshare --uts \
    sh -c 'hostname "$0" && exec "$@"' "$ns" "$@" > "$log" 2>&1 &
  disown  # no "Killed" from bash if cleanup has to
}

for ns in "${namespaces[@]}"; do
  ip netns add "$prefix-$ns"
  made_ns+=("$prefix-$ns")
  nsenter --net="/run/netns/$prefix-$ns" ip link set lo up
done
# The bridge lives in a namespace of its own: nothing is added to the
# machine's network, and the namespaces have no default route.
nsenter --net="/run/netns/$prefix-hub" ip link add br0 type bridge
nsenter --net="/run/netns/$prefix-hub" ip link set br0 up
for ns in ctl node1 node2 srv; do
  nsenter --net="/run/netns/$prefix-hub" ip link add "v-$ns" type veth \
    peer name eth0 netns "/run/netns/$prefix-$ns"
  nsenter --net="/run/netns/$prefix-hub" ip link set "v-$ns" master br0 up
  nsenter --net="/run/netns/$prefix-$ns" ip addr add "${addr[$ns]}/24" dev eth0
  nsenter --net="/run/netns/$prefix-$ns" ip link set eth0 up
done

# --- munge and slurm -------------------------------------------------------

mkdir -p "$tmp/munge/key" "$tmp/munge/run" "$tmp/slurm/state" "$tmp/slurm/log" \
  "$tmp/slurm/spool/node1" "$tmp/slurm/spool/node2" "$tmp/jobs"
chmod 700 "$tmp/munge/key"
chmod 755 "$tmp/munge" "$tmp/munge/run"
head -c 1024 /dev/urandom > "$tmp/munge/key/munge.key"
chmod 400 "$tmp/munge/key/munge.key"
munge_socket=$tmp/munge/run/munge.socket
# A path socket serves every network namespace.
munged -F --socket="$munge_socket" --key-file="$tmp/munge/key/munge.key" \
  --pid-file="$tmp/munge/run/munged.pid" --seed-file="$tmp/munge/key/munged.seed" \
  --log-file="$tmp/munge/munged.log" > /dev/null 2>&1 &
daemons+=($!)
disown
wait_for 10 munged test -S "$munge_socket" || die "munged did not start; see $tmp/munge/munged.log"

export SLURM_CONF=$tmp/slurm/slurm.conf
cat > "$SLURM_CONF" << EOF
# A cluster on one machine (scripts/cluster-test.sh): the controller and
# each node in a network namespace of their own.
ClusterName=retrystorm
SlurmctldHost=ctl(${addr[ctl]})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$munge_socket
StateSaveLocation=$tmp/slurm/state
SlurmdSpoolDir=$tmp/slurm/spool/%n
SlurmctldPidFile=$tmp/slurm/slurmctld.pid
SlurmdPidFile=$tmp/slurm/slurmd-%n.pid
SlurmctldLogFile=$tmp/slurm/log/slurmctld.log
SlurmdLogFile=$tmp/slurm/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
SlurmctldTimeout=10
SlurmdTimeout=10
MessageTimeout=5
InactiveLimit=0
KillWait=2
MinJobAge=600
NodeName=node1 NodeAddr=${addr[node1]} CPUs=2 State=UNKNOWN
NodeName=node2 NodeAddr=${addr[node2]} CPUs=2 State=UNKNOWN
PartitionName=test Nodes=node1,node2 Default=YES MaxTime=30 State=UP
EOF

spawn ctl "$tmp/slurm/log/slurmctld.out" slurmctld -D -i
daemons+=($!)
for n in node1 node2; do
  spawn "$n" "$tmp/slurm/log/slurmd-$n.out" slurmd -D -N "$n"
  daemons+=($!)
done

# ctl COMMAND...: a Slurm command from the controller's namespace (our
# "login node"), at most 60 s.
ctl() { inns ctl timeout 60 "$@"; }

nodes_idle() { [[ $(ctl sinfo -h -N -t idle -o %N | sort -u | tr '\n' ' ') == "node1 node2 " ]]; }
wait_for 30 "two idle nodes" nodes_idle ||
  die "the cluster did not come up; see $tmp/slurm/log (run with --keep)"
pass cluster "slurmctld and two slurmd up ($(slurmctld -V))"

# job_state JOBID: the states of a job's records (an array's tasks), one a
# line.
job_state() { ctl scontrol show job -o "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
# job_done JOBID: true once no record of the job is pending or running.
job_done() {
  local states
  states=$(job_state "$1") || return 1
  [[ -n $states ]] && ! grep -qvE '^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE)$' <<< "$states"
}
# wait_job SECONDS JOBID: waits for the job to end; true if every record
# COMPLETED.
wait_job() {
  wait_for "$1" "job $2" job_done "$2" || return 1
  ! job_state "$2" | grep -qv '^COMPLETED$'
}
# job_field JOBID FIELD: a field of scontrol's record (the first, for an
# array: use one task's id).
job_field() { ctl scontrol show job -o "$1" | head -n 1 | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# Each task prints its node's name and address.
tasks=$(ctl srun -N2 --ntasks-per-node=1 sh -c 'echo $SLURM_PROCID $(hostname) $(hostname -I)' |
  sort | awk '{ printf "%s %s %s;", $1, $2, $3 }')
check cluster "srun -N2: one task in each node's namespace ($tasks)" \
  test "$tasks" == "0 node1 ${addr[node1]};1 node2 ${addr[node2]};"
unreachable() { ! inns node1 timeout 3 bash -c 'exec 3<> /dev/tcp/192.0.2.1/80' 2> /dev/null; }
check cluster "no route out of the namespaces" unreachable

if [[ $cluster_only == 1 ]]; then
  array=$(ctl sbatch --parsable --array=0-3 --output="$tmp/jobs/array-%a.out" \
    --wrap 'echo $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT $(hostname)')
  after=$(ctl sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes \
    --output="$tmp/jobs/after.out" --wrap 'cat '"$tmp"'/jobs/array-*.out')
  check cluster "an array job of 4 tasks completes" wait_job 30 "$array"
  check cluster "a job after it (afterok) completes" wait_job 30 "$after"
  check cluster "the dependent job saw every task's output" \
    test "$(awk '{print $1}' "$tmp/jobs/after.out" | sort | tr '\n' ' ')" == "0/4 1/4 2/4 3/4 "
  [[ $failures == 0 ]] || { echo "cluster-test: $failures checks failed"; exit 1; }
  echo "cluster-test: all checks passed"
  exit 0
fi

# --- readers of HDR interval logs ------------------------------------------

# Each prints "COUNT P50 P99 MAX" of a log's histograms summed (untagged,
# or those tagged TAG), in the log's unit (microseconds).

# java_hlog FILE [TAG]: as Java's HistogramLogProcessor reads it: the
# running totals on its last interval line, "T:COUNT ( 50% 90% 99% 99.9%
# 99.99% Max )".
java_hlog() {
  local tagged=() out
  [[ -n ${2:-} ]] && tagged=(-tag "$2")
  out=$(mktemp "$tmp/java.XXXXXX")
  timeout 60 java -cp "$hdr_jar" org.HdrHistogram.HistogramLogProcessor \
    -i "$1" "${tagged[@]}" -outputValueUnitRatio 1 -o "$out" > /dev/null 2>&1 || return 1
  tail -n 1 "$out" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^T:/) {
    printf "%d %d %d %d\n", substr($i, 3), $(i + 2), $(i + 4), $(i + 7); found = 1 } }
    END { exit !found }'
}

# A second reader: scripts/hlog-totals.py, with Python's hdrh (pip, into
# $tmp/py), percentiles computed as Java does.
py_reader=""
if [[ ! -e scripts/hlog-totals.py ]]; then
  echo "SKIP hlog: no Python reader (no scripts/hlog-totals.py)"
elif timeout 180 python3 -m pip install --quiet --disable-pip-version-check \
  --root-user-action=ignore --target "$tmp/py" hdrhistogram > "$tmp/pip.log" 2>&1; then
  py_reader=1
else
  echo "SKIP hlog: no Python reader (pip install hdrhistogram failed; see $tmp/pip.log)"
fi
# py_hlog FILE [TAG]: as scripts/hlog-totals.py reads it.
py_hlog() {
  PYTHONPATH=$tmp/py timeout 60 python3 scripts/hlog-totals.py --tag "${2:-}" "$1" 2> /dev/null |
    jq -r --arg t "${2:-}" '.files[][$t] | "\(.count) \(.p50) \(.p99) \(.max)"'
}

# --- a sharded real run ----------------------------------------------------

# client_run: the checks of a real run; returns early if it has nothing to
# check.
client_run() {
  # The protocol in wall-clock seconds (time divided by 10): warm-up 5 s,
  # pause 2 s, observe 5 s; the clients run 12 s from the common start.
  scale=10
  warmup=5 pause=2 observe=5
  run=$tmp/run
  mkdir -p "$run"
  url=http://${addr[srv]}:8070/api
  # The server drops the work of an attempt that timed out (and the client
  # backs off), so it recovers at once on resume: the pause shows as a gap.
  spawn srv "$run/server.log" "$bin/server" --listen "${addr[srv]}:8070" \
    --time-scale "$scale" --on-disconnect cancel --csv "$run/server.csv"
  server_pid=$!
  server_up() { inns ctl timeout 1 bash -c "exec 3<> /dev/tcp/${addr[srv]}/8070"; }
  wait_for 15 "the server" server_up || die "the server did not start; see $run/server.log"
  # SIGSTOP must reach the server itself.
  [[ $(cat "/proc/$server_pid/comm") == server ]] || die "pid $server_pid is not the server"

  # now_ns: the wall clock, in nanoseconds. sleep_until NS: sleeps until then.
  now_ns() { date +%s%N; }
  sleep_until() {
    local ns=$(($1 - $(now_ns)))
    ((ns > 0)) && sleep "$((ns / 1000000000)).$(printf %09d $((ns % 1000000000)))"
    return 0
  }

  start=$(($(date +%s) + 5))
  # The URL as the job's first argument, the client's own flags after it.
  client_job=$(START_AT=$start OUT=$run/client CLIENTS=200 DURATION=$((12 * scale))s \
    SEED=7 RETRY_STORM_BIN=$bin ctl sbatch --parsable --time=2 --output="$run/client-job.out" \
    deploy/slurm/client.sbatch "$url" --time-scale "$scale" --strategy exponential)
  client_job=${client_job%%;*}
  [[ $client_job =~ ^[0-9]+$ ]] || { fail client "sbatch client.sbatch: $client_job"; return 1; }
  echo "cluster-test: client job $client_job: 2 shards of 200 users from $(date -d "@$start" +%T)," \
    "the server paused from +${warmup}s for ${pause}s"
  sleep_until $(((start + warmup) * 1000000000))
  kill -STOP "$server_pid"
  sleep_until $(((start + warmup + pause) * 1000000000))
  kill -CONT "$server_pid"
  client_ok=1
  wait_job 60 "$client_job" || client_ok=0
  check client "the job (both tasks and the merge) completed" test "$client_ok" == 1
  if [[ $client_ok == 0 ]]; then
    # What the job and Slurm said, in the log: the folder is gone once
    # the script exits without --keep.
    echo "cluster-test: client job $client_job: state $(job_state "$client_job" | tr '\n' ' ')" \
      "$(ctl scontrol show job -o "$client_job" | grep -o 'ExitCode=[0-9:]*' | head -n 1)"
    tail -n 30 "$run/client-job.out" 2> /dev/null | sed 's/^/cluster-test: client job: /' || true
  fi
  # The server's last rows are written as it stops.
  kill -INT "$server_pid"
  wait_for 10 "the server to stop" eval '! alive "$server_pid"' || true
  alive "$server_pid" || server_pid=""

  # col FILE NAME: the column's number in a CSV's header.
  col() { head -n 1 "$1" | tr ',' '\n' | grep -nx "$2" | cut -d: -f1; }
  shards=("$run/client/shard-0/client.csv" "$run/client/shard-1/client.csv")
  merged=$run/client/merged/client.csv
  for f in "${shards[@]}" "$merged" "${shards[@]/%.csv/.hlog}" "${merged%.csv}.hlog"; do
    [[ -s $f ]] || { fail client "no $f (see $run/client-job.out)"; return 1; }
  done

  # Each task took its shard from SLURM_PROCID/SLURM_NTASKS.
  check client "each task a shard from SLURM_PROCID/SLURM_NTASKS (0/2, 1/2)" \
    test "$(grep -o 'shard [0-9]*/[0-9]* from SLURM_PROCID/SLURM_NTASKS' "$run/client-job.out" |
      sort | tr '\n' ';')" == "shard 0/2 from SLURM_PROCID/SLURM_NTASKS;shard 1/2 from SLURM_PROCID/SLURM_NTASKS;"

  rows0=$(($(wc -l < "${shards[0]}") - 1))
  rows1=$(($(wc -l < "${shards[1]}") - 1))
  rowsm=$(($(wc -l < "$merged") - 1))
  check client "the merged CSV has the shards' rows ($rows0, $rows1: $rowsm)" \
    test "$rows0" == "$rows1" -a "$rowsm" == "$rows0" -a "$rows0" -ge $((12 * 2 - 1))

  # The shards' rows on the same boundaries, from the common start.
  skew=$(paste -d, <(cut -d, -f"$(col "${shards[0]}" unix_ms)" "${shards[0]}") \
    <(cut -d, -f"$(col "${shards[1]}" unix_ms)" "${shards[1]}") |
    awk -F, 'NR > 1 { d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d } END { print m + 0 }')
  check client "the shards report on the same boundaries (at most ${skew} ms apart)" \
    test "$skew" -le 100

  # rates_summed: every rate (and in_flight) of each merged row is the sum of
  # the shards', within rounding (1 %, or 0.02); every percentile lies
  # between the shards' (a mixture's quantile does), within 1 %.
  rates_summed() {
    local name c0 c1 cm bad=0
    for name in ok_per_s errors_per_s timeouts_per_s retries_per_s in_flight gave_up_per_s \
      throttled_per_s requests_per_s sent_per_s p50_ms p99_ms; do
      c0=$(col "${shards[0]}" "$name") c1=$(col "${shards[1]}" "$name") cm=$(col "$merged" "$name")
      [[ -n $c0 && -n $c1 && -n $cm ]] || { echo "  no column $name" >&2; bad=1; continue; }
      paste -d, <(cut -d, -f"$c0" "${shards[0]}") <(cut -d, -f"$c1" "${shards[1]}") \
        <(cut -d, -f"$cm" "$merged") | awk -F, -v name="$name" '
        NR == 1 { next }
        name ~ /^p[0-9]+_ms$/ {
          if ($1 == "" || $2 == "") next
          lo = $1 < $2 ? $1 : $2; hi = $1 < $2 ? $2 : $1
          if ($3 == "" || $3 < lo * 0.99 - 0.01 || $3 > hi * 1.01 + 0.01) { bad = 1; print "  row " NR - 1 ": " name " " $3 " not within " lo "-" hi }
          next
        }
        { d = $3 - ($1 + $2); if (d < 0) d = -d
          if (d > 0.02 && d > 0.01 * ($1 + $2)) { bad = 1; print "  row " NR - 1 ": " name " " $3 " != " $1 " + " $2 } }
        END { exit bad }' >&2 || bad=1
    done
    return "$bad"
  }
  check client "every merged rate is the sum of the shards', every percentile between theirs" rates_summed

  # The OK rate: in the warm-up, in the pause (rows wholly inside it), and
  # from 1.5 s after the resume to the end.
  ok_c=$(col "$merged" ok_per_s) el_c=$(col "$merged" elapsed_s)
  read -r ok_warm ok_paused ok_after < <(awk -F, -v ok="$ok_c" -v el="$el_c" \
    -v w="$warmup" -v p="$pause" '
    NR == 1 { next }
    { e = $el; r = $ok }
    e >= 1 && e <= w { ws += r; wn++ }
    e >= w + 0.6 && e <= w + p - 0.1 { ps += r; pn++ }
    e >= w + p + 1.5 { as += r; an++ }
    END { printf "%.1f %.1f %.1f\n", wn ? ws / wn : 0, pn ? ps / pn : -1, an ? as / an : 0 }' "$merged")
  check client "the OK rate falls in the pause (${ok_warm}/s before, ${ok_paused}/s paused)" \
    awk -v w="$ok_warm" -v p="$ok_paused" 'BEGIN { exit !(w > 50 && p >= 0 && p < 0.05 * w) }'
  check client "and comes back after it (${ok_after}/s)" \
    awk -v w="$ok_warm" -v a="$ok_after" 'BEGIN { exit !(a > 0.5 * w) }'

  # The HDR logs, by two readers: the merged log's counts are the sums of
  # the shards', and the merged CSV's OK count within rounding; its largest
  # latency is the CSV's; both readers read the same numbers.
  csv_ok=$(awk -F, -v ok="$ok_c" -v el="$el_c" 'NR > 1 { n += $ok * ($el - prev); prev = $el } END { printf "%.0f\n", n }' "$merged")
  max_c=$(col "$merged" max_ms)
  csv_max=$(awk -F, -v c="$max_c" 'NR > 1 && $c != "" && $c > m { m = $c } END { print m + 0 }' "$merged")
  # read_logs READER TAG: "SHARD0 SHARD1 MERGED", each "COUNT P50 P99 MAX".
  read_logs() {
    local f line out=()
    for f in "${shards[0]%.csv}.hlog" "${shards[1]%.csv}.hlog" "${merged%.csv}.hlog"; do
      line=$("$1" "$f" "$2") && [[ $line =~ ^[0-9]+\ [0-9]+\ [0-9]+\ [0-9]+$ ]] || return 1
      out+=("$line")
    done
    echo "${out[*]}"
  }
  declare -A seen=()
  for reader in java_hlog ${py_reader:+py_hlog}; do
    name=${reader%_hlog}
    for tag in "" request; do
      what=${tag:-attempts}
      if ! numbers=$(read_logs "$reader" "$tag"); then
        fail hlog "$name could not read the logs ($what)"
        continue
      fi
      read -ra nums <<< "$numbers"
      seen[$name $what]=${nums[*]:8:4}
      a=${nums[0]} b=${nums[4]} m=${nums[8]} top=${nums[11]}
      check hlog "$name, $what: merged count $m = $a + $b (the shards')" test "$m" -gt 0 -a "$m" == $((a + b))
      [[ -n $tag ]] && continue
      check hlog "$name, $what: merged count $m = the merged CSV's OK count $csv_ok, within 0.5 %" \
        awk -v m="$m" -v c="$csv_ok" 'BEGIN { d = m - c; if (d < 0) d = -d; exit !(d <= 2 + 0.005 * m) }'
      check hlog "$name, $what: largest latency $top us = the merged CSV's largest max_ms $csv_max, within 0.5 %" \
        awk -v t="$top" -v c="$csv_max" 'BEGIN { d = t / 1000 - c; if (d < 0) d = -d; exit !(t > 0 && d <= 0.005 * c + 0.001) }'
    done
  done
  if [[ -n $py_reader ]]; then
    for what in attempts request; do
      check hlog "Java and Python read the same merged $what: count, p50, p99, max ${seen[java $what]:-?}" \
        test "${seen[java $what]:-java}" == "${seen[py $what]:-py}"
    done
  fi

  # The full merge: the server's CSV beside, and the protocol for a verdict.
  full=$run/full
  if "$bin/storm" merge --out "$full" --server-csv "$run/server.csv" \
    --warmup "${warmup}s" --pause "${pause}s" --observe "${observe}s" \
    "$run"/client/shard-* > "$run/merge.log" 2>&1; then
    pass merge "storm merge --server-csv --warmup --pause --observe"
    check merge "its client.csv is the job's merge's" cmp -s "$full/client.csv" "$merged"
    verdict=$(jq -r '.figures | if .recovered then "recovered \(.recovery_s) s after resume" else "did not recover" end' \
      "$full/client.summary.json" 2> /dev/null) || verdict=""
    check merge "client.summary.json has a verdict: ${verdict:-none}" \
      jq -e '.figures.recovered == true and .timeline.stop_ms > .timeline.start_ms' "$full/client.summary.json"
    # The summary's count and percentiles, as Java reads the merged log.
    for what in attempts request; do
      key=${what%s}_latency
      said=$(jq -r --arg k "$key" '.[$k] | [.count, (.p50_ms, .p99_ms, .max_ms | . * 1000 | round)] | map(tostring) | join(" ")' \
        "$full/client.summary.json" 2> /dev/null) || said=""
      check merge "client.summary.json's $key (count, p50, p99, max) is Java's: ${said:-none}" \
        test "$said" == "${seen[java $what]:-none}"
    done
  else
    fail merge "storm merge --server-csv ... failed: $(tail -n 3 "$run/merge.log")"
  fi
}
client_run || true

# --- a sharded sweep -------------------------------------------------------

# sweep_run: the checks of a sharded sweep.
sweep_run() {
  # shellcheck disable=SC2054 # the commas are storm's lists
  sweep_args=(--strategies fixed,exponential --clients 200,400,800 --search grid --seeds 4
    --max-pause 30s --resolution 2s --step 10s --threads 1)
  sweep=$tmp/sweep
  submitted=$(OUT=$sweep TASKS=4 SBATCH_ARGS=--time=2 RETRY_STORM_BIN=$bin ctl deploy/slurm/submit-sweep.sh "${sweep_args[@]}")
  read -r sweep_job merge_job < <(sed -n 's/^sweep \([0-9]*\) .*, merge \([0-9]*\):.*/\1 \2/p' <<< "$submitted")
  [[ -n ${merge_job:-} ]] || { fail sweep "submit-sweep.sh: $submitted"; return 1; }
  "$bin/storm" sweep "${sweep_args[@]}" --out "$tmp/sweep-one" --quiet > "$tmp/sweep-one.log" 2>&1 ||
    fail sweep "the one-process sweep failed: $(tail -n 3 "$tmp/sweep-one.log")"
  check sweep "array job $sweep_job: 4 tasks completed" wait_job 120 "$sweep_job"
  check sweep "merge job $merge_job completed" wait_job 60 "$merge_job"
  last_end=$(ctl scontrol show job -o "$sweep_job" | grep -o 'EndTime=[^ ]*' | cut -d= -f2 | sort | tail -n 1)
  merge_start=$(job_field "$merge_job" StartTime)
  after_tasks() { [[ $merge_start =~ ^[0-9]{4}- && $last_end =~ ^[0-9]{4}- && ! $merge_start < $last_end ]]; }
  check sweep "the merge started after the last task ended ($merge_start >= $last_end)" after_tasks
  check sweep "4 shards, each named in its shard.json (0/4 to 3/4)" test "$(
    for i in 0 1 2 3; do jq -r '"\(.kind) \(.shard.index)/\(.shard.count)"' "$sweep/shard-$i/shard.json"; done |
      tr '\n' ';')" == "sweep 0/4;sweep 1/4;sweep 2/4;sweep 3/4;"
  for f in critical.csv phase.csv; do
    check sweep "merged $f is byte for byte the one-process sweep's" \
      cmp "$sweep/merged/$f" "$tmp/sweep-one/$f"
  done
}
sweep_run || true

# --- the Kubernetes manifests ----------------------------------------------

if [[ -e scripts/validate-manifests.sh ]]; then
  if timeout 300 bash scripts/validate-manifests.sh > "$tmp/manifests.log" 2>&1; then
    pass manifests "scripts/validate-manifests.sh"
  else
    fail manifests "scripts/validate-manifests.sh: $(tail -n 5 "$tmp/manifests.log")"
  fi
else
  echo "SKIP manifests: no scripts/validate-manifests.sh"
fi

if [[ $failures -gt 0 ]]; then
  echo "cluster-test: $failures checks failed (rerun with --keep for the logs)"
  exit 1
fi
echo "cluster-test: all checks passed"
