#!/usr/bin/env bash
# Submits a sharded sweep: an array job of TASKS tasks (sweep.sbatch), and
# a merge (merge.sbatch) that starts only once every task has succeeded
# (--dependency=afterok; if a task fails, the merge is cancelled). Prints
# the two job ids.
#
#   OUT=/shared/sweep1 deploy/slurm/submit-sweep.sh scenarios/policies.toml --search grid --seeds 20
#   TASKS=16 OUT=/shared/sweep2 deploy/slurm/submit-sweep.sh --strategies fixed,exponential
#
# The arguments are `storm sweep`'s. The merged results land in OUT/merged.
#
# Environment (defaults in brackets):
#   OUT             results folder, on a filesystem every node shares
#                   [./retry-storm-sweep-DATE-TIME]
#   TASKS           array tasks (shards) [4]
#   SBATCH_ARGS     more sbatch options for both jobs, split on spaces
#                   (e.g. "--partition=short --account=me"); sbatch's own
#                   SBATCH_* variables work as well
#   RETRY_STORM_BIN folder holding storm [found on PATH]; passed on to the
#                   jobs with the rest of the environment
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

case "${1:-}" in
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
TASKS=${TASKS:-4}
[[ $TASKS =~ ^[1-9][0-9]*$ ]] || { echo "TASKS must be a positive number" >&2; exit 2; }
OUT=${OUT:-$PWD/retry-storm-sweep-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export OUT
# shellcheck disable=SC2206 # SBATCH_ARGS is split on spaces on purpose
extra=(${SBATCH_ARGS:-})

sweep=$(sbatch --parsable "${extra[@]}" --array="0-$((TASKS - 1))" \
  --output="$OUT/sweep-%A_%a.out" "$here/sweep.sbatch" "$@")
sweep=${sweep%%;*}
merge=$(sbatch --parsable "${extra[@]}" --dependency="afterok:$sweep" --kill-on-invalid-dep=yes \
  --output="$OUT/merge-%j.out" "$here/merge.sbatch")
merge=${merge%%;*}
echo "sweep $sweep ($TASKS tasks), merge $merge: results in $OUT/merged"
