#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2317 # $ in single quotes is for the inner shell; functions run via check and wait_for
# The scale-out on a real Slurm, on one machine: a controller and two
# compute nodes, each in its own network namespace, the server in a third,
# joined by a bridge on 10.199.0.0/24 with no route out. Runs as root; puts
# in what it lacks from Debian packages (slurmctld, slurmd, munge, a JRE,
# libhdrhistogram-java, jq) and pip (hdrhistogram, into the temporary
# folder), then builds the programs, and in a few minutes:
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
#   client     both tasks end well, each a shard from SLURM_PROCID; the
#              shards' report rows fall on the same boundaries; the merged
#              CSV has their rows, and its rates are their sums; the OK rate
#              falls during the pause and comes back
#   hlog       Java's HistogramLogProcessor (and Python's hdrh, if pip could
#              get it) reads the merged HDR interval log: its count is the
#              sum of the shards' counts, and the OK count of the merged CSV
#              within rounding
#   merge      storm merge with --server-csv and the protocol writes a
#              summary and a verdict
#   sweep      every array task and then the merge job complete (the merge
#              not before the last task); the merged critical.csv and
#              phase.csv are byte for byte the one-process sweep's
#   manifests  scripts/validate-manifests.sh passes (skipped if absent)
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
if [[ ${#missing[@]} -gt 0 ]]; then
  [[ $install == 1 ]] || { echo "cluster-test: missing packages: ${missing[*]}" >&2; exit 2; }
  echo "cluster-test: installing ${missing[*]}"
  # The packages' own services must not start (this test runs its own
  # daemons): a policy-rc.d says no for the install, if there is none.
  policy=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
  fi
  rc=0
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" > /dev/null; } || rc=$?
  [[ -n $policy ]] && rm -f "$policy"
  [[ $rc == 0 ]] || { echo "cluster-test: could not install ${missing[*]}" >&2; exit 2; }
fi

# --- programs --------------------------------------------------------------

if [[ -z $bin ]]; then
  bin=$repo/target/release
  if [[ $build == 1 ]]; then
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

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cluster-test.XXXXXX")
# munged wants every folder above its socket open to all.
chmod 755 "$tmp"
prefix=ct$$           # namespaces: $prefix-hub, -ctl, -node1, -node2, -srv
namespaces=(hub ctl node1 node2 srv)
declare -A addr=([ctl]=10.199.0.1 [node1]=10.199.0.11 [node2]=10.199.0.12 [srv]=10.199.0.20)
made_ns=()
daemons=()            # pids of everything started here, stopped in reverse
server_pid=""
failures=0

# stop PID...: SIGTERM, then SIGKILL whatever is left after 10 s.
stop() {
  local p left
  [[ $# -gt 0 ]] || return 0
  kill -CONT "$@" 2> /dev/null || true
  kill -TERM "$@" 2> /dev/null || true
  for _ in $(seq 100); do
    left=()
    for p in "$@"; do kill -0 "$p" 2> /dev/null && left+=("$p"); done
    [[ ${#left[@]} -eq 0 ]] && return 0
    sleep 0.1
  done
  kill -KILL "${left[@]}" 2> /dev/null || true
}

cleanup() {
  local rc=$? ns pids left
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
  for ns in "${made_ns[@]}"; do ip netns delete "$ns" 2> /dev/null; done
  left=$(ip netns list 2> /dev/null | grep -c "^$prefix-")
  [[ $left == 0 ]] || echo "cluster-test: warning: $left namespaces of $prefix left" >&2
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
  if "$@"; then pass "$name" "$what"; else fail "$name" "$what"; fi
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

inns ctl slurmctld -D -i > "$tmp/slurm/log/slurmctld.out" 2>&1 &
daemons+=($!)
for n in node1 node2; do
  inns "$n" slurmd -D -N "$n" > "$tmp/slurm/log/slurmd-$n.out" 2>&1 &
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

echo "cluster-test: the rest is not wired in yet" >&2
exit 1
