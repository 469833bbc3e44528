#!/usr/bin/env python3
"""The adaptive search of the edge against the grid, from their files.

    scripts/search-compare.py GRID_DIR ADAPTIVE_DIR WALLS

GRID_DIR and ADAPTIVE_DIR are `storm sweep` results of the same map (the
grid's with --search grid); WALLS holds lines "grid|adaptive ROUND SECONDS",
the wall time of each run of the map. Prints, for every setting, the grid's
T50 and interval beside the adaptive search's, whether the adaptive T50 lies
within the grid's interval and is as narrow or narrower, and the runs each
took; then, per case, the runs against the grid's; then the map's wall time
against the grid's, pooled and for each round (interleaved rounds). Each
target's line ends PASS or FAIL; the exit status is 1 if any fails.
"""

import csv
import sys
from collections import defaultdict

RUNS_TARGET = 1 / 5
WALL_TARGET = 1 / 10


def read(folder):
    """critical.csv's rows by setting, and each setting's runs from phase.csv."""
    key = lambda r: (r["case"], r["clients"], r["arrival_rate"], r["lambda_s"],
                     r["timeout_s"], r["server_limit"])
    with open(f"{folder}/critical.csv") as f:
        critical = {key(r): r for r in csv.DictReader(f)}
    runs = defaultdict(int)
    with open(f"{folder}/phase.csv") as f:
        for r in csv.DictReader(f):
            runs[key(r)] += int(r["runs"])
    return critical, runs


def number(text):
    return float(text) if text not in ("", None) else None


def verdict(ok):
    return "PASS" if ok else "FAIL"


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    grid, grid_runs = read(sys.argv[1])
    adaptive, adaptive_runs = read(sys.argv[2])
    if set(grid) != set(adaptive):
        sys.exit("the two maps do not hold the same settings")
    failed = False
    print(f"{'case':<18} {'load':>6}  {'grid T50 (interval)':<24} {'runs':>5}  "
          f"{'adaptive T50 (interval)':<24} {'runs':>5}  within  as narrow")
    cases = defaultdict(lambda: [0, 0])
    for k, g in grid.items():
        a = adaptive[k]
        cases[k[0]][0] += grid_runs[k]
        cases[k[0]][1] += adaptive_runs[k]
        g50, a50 = number(g["t50_s"]), number(a["t50_s"])
        glo, ghi = number(g["t50_ci_low_s"]), number(g["t50_ci_high_s"])
        alo, ahi = number(a["t50_ci_low_s"]), number(a["t50_ci_high_s"])
        if g50 is None or a50 is None:
            # An edge beyond the pauses: the same side is the agreement.
            within = g["t50_outside"] == a["t50_outside"] and g50 is None and a50 is None
            narrow = within
        else:
            within = (glo is None or glo <= a50) and (ghi is None or a50 <= ghi)
            narrow = (alo is not None and ahi is not None and (glo is None or ghi is None
                      or ahi - alo <= ghi - glo + 1e-9))
        failed |= not (within and narrow)

        def said(t50, lo, hi, outside):
            if t50 is None:
                return f"beyond ({outside})"
            return f"{t50:.2f} ({'-' if lo is None else f'{lo:.2f}'}-{'-' if hi is None else f'{hi:.2f}'})"

        load = k[1] or k[2]
        print(f"{k[0]:<18} {load:>6}  {said(g50, glo, ghi, g['t50_outside']):<24} "
              f"{grid_runs[k]:>5}  {said(a50, alo, ahi, a['t50_outside']):<24} "
              f"{adaptive_runs[k]:>5}  {'yes' if within else 'NO':<6}  {'yes' if narrow else 'NO'}")
    print()
    print(f"every setting's T50 within the grid's interval, as narrow or narrower: "
          f"{verdict(not failed)}")
    for case, (g, a) in cases.items():
        ok = a <= RUNS_TARGET * g
        failed |= not ok
        print(f"runs, {case:<18} {a:>6} of the grid's {g:>6}: {a / g:.3f}  "
              f"target <= {RUNS_TARGET:.2f}  {verdict(ok)}")
    walls = defaultdict(dict)
    with open(sys.argv[3]) as f:
        for line in f:
            how, round_, seconds = line.split()
            walls[round_][how] = float(seconds)
    rounds = sorted(r for r in walls if {"grid", "adaptive"} <= set(walls[r]))
    if rounds:
        pooled = sum(walls[r]["adaptive"] for r in rounds) / sum(walls[r]["grid"] for r in rounds)
        each = [walls[r]["adaptive"] / walls[r]["grid"] for r in rounds]
        ok = all(e <= WALL_TARGET for e in each)
        failed |= not ok
        print(f"wall time, the whole map, adaptive / grid: {pooled:.3f} pooled over "
              f"{len(rounds)} round(s), each {min(each):.3f}-{max(each):.3f}  "
              f"target <= {WALL_TARGET:.2f}  {verdict(ok)}")
        for r in rounds:
            print(f"  round {r}: grid {walls[r]['grid']:.1f} s, adaptive {walls[r]['adaptive']:.1f} s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
