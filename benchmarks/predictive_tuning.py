"""Predictive on the tuning-side plant families (issue 26, point 4), for developing it without
touching the held-out seeds: median / 90th percentile / worst of its ratio to the optimum
after 5 and 60 decisions and 5 after a speed change, adjustments per 1,000 noisy steps, and
the noise floor's 90th percentile, per family and averaged over them.

    python -m benchmarks.predictive_tuning [--seeds 0,100,101,102,103] [--plants 96]
        [--kw '{"min_gain": 0.02}']

Families and measures as benchmarks/controller_heldout.py (its `evaluate`, same checkpoints);
the setting is the tuned one (settle=3, jump=0.25) updated by `--kw`. About 45 s a family of
96 plants on the 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import controllers
from benchmarks import controller_heldout as heldout
from benchmarks import controller_plants as plants
from benchmarks.args import at_least
from benchmarks.controller_heldout_seeds import HELD_OUT

MEASURES = ("after_5", "after_60", "after_change_5", "adjustments")
TUNED = {"settle": 3, "jump": 0.25}


def family(seed: int, count: int, kwargs: dict) -> dict:
    """One family's summary of predictive with `kwargs`, and its noise floor's p90."""
    descs = plants.family(seed, count, change=heldout.CHANGE)
    quiet = plants.family(seed, count, change=plants.NEVER, noise=0.1)
    values, _ = heldout.evaluate("predictive", kwargs, descs, quiet, None, seed, floor=True)
    own = {k: values[k] for k in MEASURES}
    floor = {k: float(np.quantile(values[f"floor_{k}"], 0.9)) for k in MEASURES[:3]}
    return {"summary": heldout.summary(own), "floor_p90": floor}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,100,101,102,103")
    parser.add_argument("--plants", type=int, default=96)
    parser.add_argument("--kw", default="{}", help="predictive's arguments over the tuned ones")
    args = parser.parse_args(argv)
    try:
        kwargs = {**TUNED, **json.loads(args.kw)}
        seeds = [int(s) for s in args.seeds.split(",")]
        controllers.make("predictive", **kwargs)  # an unknown or bad argument, at once
    except (ValueError, TypeError) as e:  # JSON, integers, the policy's own checks
        parser.error(f"--kw {args.kw!r} / --seeds {args.seeds!r}: {e}")
    if held := sorted(set(seeds) & set(HELD_OUT)):  # this script develops on tuning seeds
        parser.error(f"--seeds {held} are held-out families (benchmarks/controller_heldout_seeds)")
    at_least(parser, plants=(args.plants, 1))
    start, rows = time.time(), []
    for seed in seeds:
        out = family(seed, args.plants, kwargs)
        rows.append(out["summary"])
        cells = [
            "/".join(f"{out['summary'][k][q]:.3f}" for q in ("median", "p90", "worst"))
            for k in MEASURES
        ]
        floor = " ".join(f"{v:.3f}" for v in out["floor_p90"].values())
        print(f"seed {seed}: " + " | ".join(cells) + f" | floor p90 {floor}", flush=True)
    print(f"predictive {kwargs}; median/p90/worst, averaged over {len(rows)} families:")
    for k in MEASURES:
        means = [np.mean([r[k][q] for r in rows]) for q in ("median", "p90", "worst")]
        print(f"  {k}: " + " / ".join(f"{m:.3f}" for m in means))
    print(f"{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
