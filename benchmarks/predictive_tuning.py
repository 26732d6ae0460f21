"""Predictive on the tuning-side plant families (issue 26, point 4), for developing it without
touching the held-out seeds: median / 90th percentile / worst of its ratio to the optimum
after 5 and 60 decisions and 5 after a speed change, adjustments per 1,000 noisy steps, the
total time over the optimum's before and after the change, and the noise floor's 90th
percentile, per family and averaged over them.

    python -m benchmarks.predictive_tuning [--seeds 0,100,101,102,103] [--plants 96]
        [--kw '{"min_gain": 0.02}'] [--at-steps 30,60,265] [--change 250] [--others]

Families and measures as benchmarks/controller_heldout.py (its `evaluate`, same checkpoints);
the setting is the tuned one (settle=3, jump=0.25) updated by `--kw`. About 45 s a family of
96 plants on the 2-core machine. `--at-steps` reads the 90th percentile at fixed steps
instead (no quiet runs, no floor): a setting that decides less often looks better after 5
decisions because each decision rests on more steps, so compare settings at equal steps too.
`--change` moves every plant's speed change (250: the held-out families'): at 20, mid-
convergence, a change comes just after a move, which step 250 never shows (after 5 and 60
decisions are then read before it, at step 19 at the latest). `--others` also runs P and PI
at their held-out tuned settings (docs/results/controller_heldout_seeds.json), read at
predictive's checkpoints on the same plants, and prints their averages beside it.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import controllers
from benchmarks import controller_heldout as heldout
from benchmarks import controller_plants as plants
from benchmarks.args import at_least, ints
from benchmarks.controller_heldout_seeds import HELD_OUT

MEASURES = ("after_5", "after_60", "after_change_5", "adjustments", *heldout.TOTALS)
TUNED = {"settle": 3, "jump": 0.25}


def family(
    seed: int, count: int, kwargs: dict, change: int = heldout.CHANGE, others: dict | None = None
) -> dict:
    """One family's summary of predictive with `kwargs`, its noise floor's p90, and with
    `others` ({policy: setting}) each other policy's summary at predictive's checkpoints."""
    descs = plants.family(seed, count, change=change)
    quiet = plants.family(seed, count, change=plants.NEVER, noise=0.1)
    values, at = heldout.evaluate(
        "predictive", kwargs, descs, quiet, None, seed, floor=True, change=change
    )
    own = {k: values[k] for k in MEASURES}
    floor = {k: float(np.quantile(values[f"floor_{k}"], 0.9)) for k in MEASURES[:3]}
    rest = {}
    for name, setting in (others or {}).items():
        found, _ = heldout.evaluate(name, setting, descs, quiet, at, seed, change=change)
        rest[name] = heldout.summary({k: found[k] for k in MEASURES})
    return {"summary": heldout.summary(own), "floor_p90": floor, "others": rest, "at": at}


def _means(rows: list[dict], label: str) -> None:
    print(label)
    for k in MEASURES:
        means = [np.mean([r[k][q] for r in rows]) for q in ("median", "p90", "worst")]
        print(f"  {k}: " + " / ".join(f"{m:.3f}" for m in means))


def at_steps(
    seed: int, count: int, kwargs: dict, steps: list[int], change: int = heldout.CHANGE
) -> tuple[dict[int, float], np.ndarray]:
    """One family's 90th percentile of the ratio to the optimum at each of `steps`, and the
    steps at which each plant's 5th and 60th decisions take effect ([2, plants]; not capped
    before the change; the last step where a plant never got there)."""
    descs = plants.family(seed, count, change=change)
    main = heldout.run("predictive", kwargs, descs, heldout.STEPS, seed)
    out = {t: float(np.quantile(main["balance"][:, t], 0.9)) for t in steps}
    reached = np.stack([main["decisions"] >= 5, main["decisions"] >= 60])
    steps_at = np.where(reached.any(-1), np.argmax(reached, axis=-1) + 1, heldout.STEPS - 1)
    return out, steps_at


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,100,101,102,103")
    parser.add_argument("--plants", type=int, default=96)
    parser.add_argument("--kw", default="{}", help="predictive's arguments over the tuned ones")
    parser.add_argument("--at-steps", default="", help="comma-separated steps (< 500)")
    parser.add_argument("--change", type=int, default=heldout.CHANGE, help="speed change step")
    parser.add_argument("--others", action="store_true", help="P and PI beside it")
    args = parser.parse_args(argv)
    seeds = ints(parser, "seeds", args.seeds, least=0)  # a negative one failed in numpy
    try:
        kwargs = {**TUNED, **json.loads(args.kw)}
        steps = [int(t) for t in args.at_steps.split(",")] if args.at_steps else []
        controllers.make("predictive", **kwargs)  # an unknown or bad argument, at once
    except (ValueError, TypeError) as e:  # JSON, integers, the policy's own checks
        parser.error(f"--kw {args.kw!r} / --at-steps: {e}")
    if held := sorted(set(seeds) & set(HELD_OUT)):  # this script develops on tuning seeds
        parser.error(f"--seeds {held} are held-out families (benchmarks/controller_heldout_seeds)")
    at_least(parser, plants=(args.plants, 1))
    at_least(parser, change=(args.change, 10))
    if args.change > heldout.STEPS - 60:
        parser.error(
            f"--change {args.change}: at most {heldout.STEPS - 60} (room for 5 decisions after "
            f"it; the 5th after it is read at step {heldout.STEPS - 1} at the latest)"
        )
    if any(not 0 <= t < heldout.STEPS for t in steps):
        parser.error(f"--at-steps {args.at_steps!r}: each step in [0, {heldout.STEPS})")
    start, rows = time.time(), []
    if steps:
        found = [at_steps(seed, args.plants, kwargs, steps, args.change) for seed in seeds]
        fifth, sixtieth = np.concatenate([f[1] for f in found], axis=1)
        print(
            f"predictive {kwargs}, speed change at step {args.change}; 90th percentile at each "
            f"step, averaged over {len(seeds)} families (5th decision at step "
            f"{np.median(fifth):.0f} at the median, {fifth.min()} at the earliest, after step "
            f"15 on {100 * np.mean(fifth > 15):.0f} % of the plants; 60th at step "
            f"{np.median(sixtieth):.0f} at the median, {sixtieth.min()} at the earliest):"
        )
        print("  " + "  ".join(f"step {t}: {np.mean([f[0][t] for f in found]):.3f}" for t in steps))
        print(f"{time.time() - start:.0f} s")
        return
    if args.change < 80:  # a 60th decision comes 61 steps in at the earliest
        print(
            f"note: after_5 and after_60 are read before the change, at step {args.change - 1} "
            "at the latest (capped there where a plant had not decided that often)"
        )
    tuned = json.loads((heldout.RESULTS / "controller_heldout_seeds.json").read_text())["settings"]
    others = {k: v for k, v in tuned.items() if k != "predictive"} if args.others else {}
    rest: dict[str, list] = {name: [] for name in others}
    for seed in seeds:
        out = family(seed, args.plants, kwargs, args.change, others)
        rows.append(out["summary"])
        for name in others:
            rest[name].append(out["others"][name])
        cells = [
            "/".join(f"{out['summary'][k][q]:.3f}" for q in ("median", "p90", "worst"))
            for k in MEASURES
        ]
        floor = " ".join(f"{v:.3f}" for v in out["floor_p90"].values())
        print(f"seed {seed}: " + " | ".join(cells) + f" | floor p90 {floor}", flush=True)
    _means(
        rows,
        f"predictive {kwargs}, speed change at step {args.change}; median/p90/worst, "
        f"averaged over {len(rows)} families:",
    )
    for name, found in rest.items():
        _means(found, f"{name} {others[name]}, at predictive's checkpoints:")
    print(f"{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
