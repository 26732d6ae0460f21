"""The held-out evaluation (benchmarks/controller_heldout.py) on several disjoint held-out families.

Run: python -m benchmarks.controller_heldout_seeds [--seeds 6,7,8,9,10] [--plants 96]
         [--tune-plants 48] [--out docs/results/controller_heldout_seeds.json]

Each policy (predictive, P, PI) is tuned once, with the same effort (a grid of 6 settings),
on the tuning family (seed 0, `--tune-plants` plants); the chosen settings then run on one
held-out family per evaluation seed (`--plants` plants each, drawn with that seed; a seed
also draws the timing noise). No evaluation seed is the tuning seed. The JSON holds, per
seed and policy, the median, 90th percentile and worst over plants of each measure (ratio to
the optimum after 5 and 60 decisions, 5 decisions after a speed change; adjustments per
1,000 steps at 10 % noise); experiments/predictive_study.py turns it into intervals.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time
from typing import Any

import jax

from benchmarks import controller_heldout as heldout
from benchmarks import controller_plants as plants
from benchmarks.args import ints
from benchmarks.controller_heldout import HELD_OUT, TUNING_SEED  # the seeds, kept there
from experiments.paper import stamp

POLICIES = ("predictive", "proportional", "pi")

OUT = heldout.RESULTS / "controller_heldout_seeds.json"


def commit() -> str:
    """The checkout's short commit, with '+dirty' when tracked files have changes; under
    `make report` the commit pinned at its start (experiments/paper/stamp.py: the files its
    earlier parts write would make the tree dirty)."""
    head, dirty = stamp.commit()
    return (head or "unknown") + ("+dirty" if dirty else "")


def held_out(seeds: list[int], count: int, best: dict[str, tuple[dict, dict]]) -> dict:
    """Per seed and policy: the held-out summary (median / p90 / worst of each measure)."""
    out: dict[str, Any] = {}
    for seed in seeds:
        descs = plants.family(seed, count, change=heldout.CHANGE)
        quiet = plants.family(seed, count, change=plants.NEVER, noise=0.1)
        at = None
        out[str(seed)] = {}
        for name in POLICIES:
            values, found = heldout.evaluate(name, best[name][0], descs, quiet, at, seed)
            at = found if name == "predictive" else at
            out[str(seed)][name] = heldout.summary(values)
            print(f"  seed {seed} {name:>12}: {out[str(seed)][name]}", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default=",".join(map(str, HELD_OUT)))
    parser.add_argument("--plants", type=int, default=96)
    parser.add_argument("--tune-plants", type=int, default=48)
    parser.add_argument(
        "--out", default="runs/controller_heldout_seeds.json",
        help=f"the JSON (the committed one, {OUT.relative_to(OUT.parents[2])}, is written by "
        "make report; a trial's default leaves it alone)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    # >= 0: a negative seed failed in numpy after the whole tuning pass
    seeds = ints(parser, "seeds", args.seeds, least=0)
    if args.plants < 1 or args.tune_plants < 1:
        parser.error("--plants and --tune-plants must be >= 1")
    if TUNING_SEED in seeds:
        parser.error(f"seed {TUNING_SEED} is the tuning family; evaluate on others")
    start = time.time()
    tuning = plants.family(TUNING_SEED, args.tune_plants, change=heldout.CHANGE)
    tuning_quiet = plants.family(TUNING_SEED, args.tune_plants, change=plants.NEVER, noise=0.1)
    best = heldout.tune(tuning, tuning_quiet)
    report = {
        "command": "python -m benchmarks.controller_heldout_seeds "
        f"--seeds {args.seeds} --plants {args.plants} --tune-plants {args.tune_plants}",
        "commit": commit(),
        "date": time.strftime("%Y-%m-%d"),
        "jax": jax.__version__,
        "tuning_seed": TUNING_SEED,
        "tuning_plants": args.tune_plants,
        "plants_per_seed": args.plants,
        "goals": heldout.GOALS,
        "settings": {name: best[name][0] for name in POLICIES},
        "tuning": {name: best[name][1] for name in POLICIES},
        "seeds": held_out(seeds, args.plants, best),
    }
    report["seconds"] = round(time.time() - start, 1)
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out} in {report['seconds']} s")


if __name__ == "__main__":
    main()
