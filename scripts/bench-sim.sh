#!/usr/bin/env bash
# The virtual-time engine's figures (issue 21, target 5), one line each:
# events a second per strategy of the default storm on one core, the
# default storm's wall time, the default sweep's wall time. With a
# baseline storm binary, the same runs of the baseline interleaved with
# this tree's (ABAB...: the shared host drifts by up to twice within an
# hour, so only interleaved runs compare) and the speed-ups, new vs base.
#
#   scripts/bench-sim.sh                  this tree only
#   scripts/bench-sim.sh --base DIR       DIR/storm is the baseline
#   scripts/bench-sim.sh --base-rev REV   builds REV's storm first (in a
#                                         temporary git worktree, target
#                                         dir target/bench-base, reused)
#   --rounds N (default 3)                runs of each, medians reported
#   --no-sweep                            storm figures only
#
# Every run is bounded (timeout); temporary folders and worktrees are
# removed on exit.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
BASE_DIR=""
BASE_REV=""
ROUNDS=3
SWEEP=1
STORM_LIMIT=120
SWEEP_LIMIT=900

while [[ $# -gt 0 ]]; do
    case "$1" in
        --base) BASE_DIR=$2; shift 2 ;;
        --base-rev) BASE_REV=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --no-sweep) SWEEP=0; shift ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "bench-sim.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/bench-sim.XXXXXX")
WORKTREE=""
cleanup() {
    if [[ -n "$WORKTREE" ]]; then
        git -C "$ROOT" worktree remove --force "$WORKTREE" >/dev/null 2>&1 || true
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

line() {
    printf "%-54s %12s %-8s target %-14s %s\n" "$1" "$2" "$3" "$4" "$5"
}

cargo build --release --locked --bin storm >&2
NEW="$ROOT/target/release/storm"

if [[ -n "$BASE_REV" ]]; then
    WORKTREE="$TMP/base-tree"
    git -C "$ROOT" worktree add --detach "$WORKTREE" "$BASE_REV" >/dev/null 2>&1
    (cd "$WORKTREE" && CARGO_TARGET_DIR="$ROOT/target/bench-base" \
        cargo build --release --locked --bin storm >&2)
    mkdir -p "$TMP/base-bin"
    cp "$ROOT/target/bench-base/release/storm" "$TMP/base-bin/storm"
    BASE_DIR="$TMP/base-bin"
fi
if [[ -n "$BASE_DIR" && ! -x "$BASE_DIR/storm" ]]; then
    echo "bench-sim.sh: no executable $BASE_DIR/storm" >&2
    exit 2
fi

PIN=()
ONE_CORE="one core"
if command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null; then
    PIN=(taskset -c 0)
else
    ONE_CORE="unpinned"
fi

now_ms() { date +%s%3N; }

# storm BIN TAG ROUND: the default storm on one core; appends
# "strategy events ms" lines to TMP/TAG.events and the wall time (ms) to
# TMP/TAG.storm.
storm() {
    local bin=$1 tag=$2 round=$3 out="$TMP/out-$2-$3" t0 t1
    t0=$(now_ms)
    timeout "$STORM_LIMIT" "${PIN[@]}" "$bin" --engine sim --verbose --quiet \
        --out "$out" >"$TMP/storm.log" 2>&1
    t1=$(now_ms)
    echo $((t1 - t0)) >>"$TMP/$tag.storm"
    # "fixed: sim: 143041 events in 68.6 ms (2.1 M events/s), ..."
    sed -n 's/^\([a-z0-9-]*\): sim: \([0-9]*\) events in \([0-9.]*\) ms.*/\1 \2 \3/p' \
        "$TMP/storm.log" >>"$TMP/$tag.events"
    rm -rf "$out"
}

# sweep BIN TAG ROUND: the default sweep on the grid; its wall time (ms) to
# TMP/TAG.sweep, its CPU time (user + system, s) to TMP/TAG.cpu: when
# other work shares the cores, the CPU time says more of the engine.
sweep() {
    local bin=$1 tag=$2 round=$3 out="$TMP/sweep-$2-$3" t0 t1 cpu
    t0=$(now_ms)
    # The grid's sweep, the same work in every build: a build with the
    # adaptive search is told so.
    local grid=()
    if "$bin" sweep --help | grep -q -- '--search'; then grid=(--search grid); fi
    cpu=$( { TIMEFORMAT='%U %S'; time timeout "$SWEEP_LIMIT" "$bin" sweep --quiet "${grid[@]}" \
        --out "$out" >/dev/null 2>&1; } 2>&1 )
    t1=$(now_ms)
    echo $((t1 - t0)) >>"$TMP/$tag.sweep"
    awk '{ print $1 + $2 }' <<<"$cpu" >>"$TMP/$tag.cpu"
    rm -rf "$out"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for round in $(seq 1 "$ROUNDS"); do
    if [[ -n "$BASE_DIR" ]]; then storm "$BASE_DIR/storm" base "$round"; fi
    storm "$NEW" new "$round"
done
if [[ $SWEEP == 1 ]]; then
    for round in $(seq 1 "$ROUNDS"); do
        if [[ -n "$BASE_DIR" ]]; then sweep "$BASE_DIR/storm" base "$round"; fi
        sweep "$NEW" new "$round"
    done
fi

# M events a second of STRATEGY in TAG's runs: the median over rounds.
rate() {
    awk -v s="$1" '$1 == s && $3 > 0 { print $2 / $3 / 1000 }' "$TMP/$2.events" | median
}
strategies=$(awk '!seen[$1]++ { print $1 }' "$TMP/new.events")
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "-" && a + 0 >= b + 0) }'; }
verdict() { if ge "$1" "$2"; then echo PASS; else echo FAIL; fi; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }

echo "commit:  $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo '+dirty'), $ROUNDS rounds, medians${BASE_DIR:+, interleaved with $BASE_DIR/storm}"
for s in $strategies; do
    r=$(rate "$s" new)
    line "sim, default storm, $ONE_CORE: $s" "$(printf '%.1f' "$r")" "M ev/s" ">= 8" "$(verdict "$r" 8)"
    if [[ -n "$BASE_DIR" ]]; then
        b=$(rate "$s" base)
        line "  base: $s" "$(printf '%.1f' "$b")" "M ev/s" "-" "-"
        line "  speed-up: $s" "$(ratio "$r" "$b")" "x" "-" "-"
    fi
done
w=$(median <"$TMP/new.storm")
ok=$(awk -v w="$w" 'BEGIN { print (w < 1000) ? "PASS" : "FAIL" }')
line "sim, default storm (3 strategies), $ONE_CORE, wall" "$w" "ms" "< 1000" "$ok"
if [[ -n "$BASE_DIR" ]]; then
    b=$(median <"$TMP/base.storm")
    line "  base" "$b" "ms" "-" "-"
    line "  speed-up" "$(ratio "$b" "$w")" "x" "-" "-"
fi
if [[ $SWEEP == 1 ]]; then
    w=$(median <"$TMP/new.sweep")
    c=$(median <"$TMP/new.cpu")
    line "sim, default sweep, wall" "$(awk -v w="$w" 'BEGIN { printf "%.1f", w / 1000 }')" "s" "-" "-"
    line "sim, default sweep, CPU (user + system)" "$(printf '%.1f' "$c")" "s" "-" "-"
    if [[ -n "$BASE_DIR" ]]; then
        b=$(median <"$TMP/base.sweep")
        bc=$(median <"$TMP/base.cpu")
        line "  base, wall" "$(awk -v w="$b" 'BEGIN { printf "%.1f", w / 1000 }')" "s" "-" "-"
        line "  base, CPU" "$(printf '%.1f' "$bc")" "s" "-" "-"
        r=$(ratio "$b" "$w")
        line "sim, default sweep, speed-up vs base (wall)" "$r" "x" ">= 1.5x" "$(verdict "$r" 1.5)"
        # Round by round: each pair ran back to back.
        rs=$(paste "$TMP/base.sweep" "$TMP/new.sweep" | awk '{ printf "%s%.2f", (NR > 1 ? " " : ""), $1 / $2 }')
        line "  wall speed-up by round: $rs" "" "" "-" "-"
        line "  speed-up vs base (CPU)" "$(ratio "$bc" "$c")" "x" "-" "-"
    fi
fi
