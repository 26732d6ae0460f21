"""OmniLearn's async claim (up to +6.9% accuracy at equal time), over seeds.

    python -m experiments.async_seeds [--seeds 5] [--budget 4] [--momentum 0.9] \
        [--out docs/results/async_seeds.md]

configs/paper_asp.py (parameter server on the virtual clock, async HL8 core table 4/4/4/28,
updates weighted by batch share, weight decay by share), MLP on digits (`runlocal`), with
server momentum (`--momentum`), where a stale update does the most harm: it is replayed by
the momentum for many updates after. Uniform batches (static) against the proportional
controller, same seeds (paired: the same initial parameters and data order), every run
stopped at the same virtual time. Reports each arm's mean final accuracy with a 95% Student
t interval, the paired difference with its interval, and whether the interval excludes 0.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

import numpy as np

from experiments.paper.fmt import signed
from experiments.stats import mean_half

ARMS = ("static", "proportional")


def run(controller: str, seed: int, args, root: str) -> dict:
    from configs import paper_asp
    from omnilearn_jax.run.job import train_and_evaluate

    c = paper_asp.get_config(f"hetero=hl8,controller={controller},runlocal,model=mlp")
    c.seed = seed
    c.asp.time_budget = args.budget
    c.optimizer.momentum = args.momentum
    c.optimizer.learning_rate = args.lr
    c.asp.weighting = args.weighting
    c.train.num_steps = 100_000  # the budget ends the run
    c.train.eval_every = c.train.log_every = 10**6
    c.train.checkpoint_every = 0
    workdir = os.path.join(root, f"{controller}_s{seed}")
    summary = train_and_evaluate(c, workdir)
    return {k: summary[k] for k in ("final_eval_accuracy", "steps", "staleness_mean_per_worker")}


def interval(values: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its 95% Student t interval."""
    return mean_half(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=4.0, help="virtual seconds a run")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--weighting", default="share", help="asp.weighting: share, lr, mean")
    parser.add_argument("--workdir", default="runs/async_seeds")
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    if args.seeds < 2:  # one seed has no interval ("not significant ... includes 0" of none)
        parser.error(f"--seeds must be >= 2 for an interval over seeds, got {args.seeds}")
    from omnilearn_jax.config.checks import WEIGHTINGS

    if args.weighting not in WEIGHTINGS or not args.budget > 0:
        parser.error(f"--weighting is one of {', '.join(WEIGHTINGS)} and --budget > 0 s")
    import jax

    jax.config.update("jax_num_cpu_devices", 4)  # paper_asp: one CPU device a worker
    # The settings in the folder's name: a rerun with others met another run's checkpoints.
    root = os.path.join(
        args.workdir,
        f"b{args.budget:g}_m{args.momentum:g}_lr{args.lr:g}_{args.weighting}",
    )
    results = {arm: [run(arm, s, args, root) for s in range(args.seeds)] for arm in ARMS}
    acc = {arm: np.array([r["final_eval_accuracy"] for r in results[arm]]) for arm in ARMS}
    diff = acc["proportional"] - acc["static"]
    d_mean, d_half = interval(diff)
    significant = abs(d_mean) > d_half
    command = "python -m experiments.async_seeds " + " ".join(
        f"--{k} {getattr(args, k)}" for k in ("seeds", "budget", "momentum", "lr", "weighting")
    )
    lines = [
        f"## Async accuracy at equal time, over seeds: asp.weighting={args.weighting}",
        "",
        f"`{command}` on {datetime.date.today().isoformat()} (2-core CPU, virtual clock, so "
        f"the numbers do not depend on the machine): configs/paper_asp.py at async HL8 "
        f"(cores 4/4/4/28), MLP on digits (`runlocal`), server SGD with momentum "
        f"{args.momentum} and learning rate {args.lr}, `asp.weighting={args.weighting}`, "
        f"every run stopped at {args.budget:g} virtual seconds; seeds 0..{args.seeds - 1}, "
        f"the same seeds for both controllers (paired).",
        "",
        "| controller | final accuracy, mean | 95% interval | per seed | updates (mean) | "
        "mean staleness per worker (mean over seeds) |",
        "|---|---|---|---|---|---|",
    ]
    for arm in ARMS:
        mean, half = interval(acc[arm])
        per_run = [r["staleness_mean_per_worker"] for r in results[arm]]  # None: no update
        stale = np.mean(np.array(per_run, dtype=float), axis=0)
        updates = np.mean([r["steps"] for r in results[arm]])
        lines.append(
            f"| {arm} | {mean:.4f} | [{mean - half:.4f}, {mean + half:.4f}] | "
            f"{', '.join(f'{a:.3f}' for a in acc[arm])} | {updates:.0f} | "
            f"{' / '.join(f'{s:.2f}' for s in stale)} |"
        )
    verdict = (
        "significant at the 5% level (the interval excludes 0)"
        if significant
        else "not significant at the 5% level (the interval includes 0)"
    )
    lines += [
        "",
        f"Paired difference, proportional minus uniform: {signed(d_mean * 100)} points, 95% "
        f"interval [{signed((d_mean - d_half) * 100)}, {signed((d_mean + d_half) * 100)}] points: "
        f"{verdict}. OmniLearn reports up to +6.9%.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
