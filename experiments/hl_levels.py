"""Step time after settling at the paper's BSP heterogeneity levels, per controller.

    python -m experiments.hl_levels [--steps 60] [--settle 30] [--workdir runs/hl_levels]

Runs the real trainer (virtual clock, 4 workers, B = 128, the paper's core tables HL1/2/4/8)
for `static` (uniform), `proportional`, `pi` and `oracle`, and prints the mean virtual step
time after settling and the reduction against uniform, next to the analytic value for a
linear cost model without overhead: 1 - (B / sum(speeds)) / max_k(b_uniform / speed_k)
(e.g. HL8: 1 - (128/48)/(32/4) = 66.7%). The cost model here is linear and communication
is free, so the analytic value is what a perfect continuous split achieves; the integer
oracle is a little short of it.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from omnilearn_jax.cluster import hl_speeds, uniform_vs_balanced_reduction

CONTROLLERS = ("static", "proportional", "pi", "oracle")
LEVELS = (1, 2, 4, 8)

DEVICES = 4  # the job's devices, one a worker


def level_config(level: int, controller: str, steps: int):
    from configs import smoke

    c = smoke.get_config()
    c.num_workers = 4
    c.num_devices = DEVICES
    c.global_batch_size = 128
    c.train.num_steps = steps
    c.train.eval_every = steps
    c.train.log_every = steps
    c.hetero.name = "hl"
    c.hetero.level = level
    c.cost.linear = True
    c.cost.latency = 0.0
    c.cost.bandwidth = 1e18  # communication free: the analytic value has none
    c.controller.name = controller
    c.controller.b_min = 0
    c.controller.b_max = 0  # bounds that never bind, as in the analytic value
    return c


def settled_step_time(workdir: str, settle: int) -> float:
    from omnilearn_jax.run.runstore import read_metrics

    times = [r["step_time"] for r in read_metrics(workdir) if "step_time" in r]
    return float(np.mean(times[settle:]))


def run_levels(
    levels=LEVELS, controllers=CONTROLLERS, *, steps: int, settle: int, workdir: str
) -> dict[tuple[int, str], float]:
    from omnilearn_jax.run.job import train_and_evaluate

    results = {}
    for level in levels:
        for name in controllers:
            # The step count in the name: a rerun with other --steps gets runs of its own
            # (the same folder held a checkpoint of another config: a traceback).
            run_dir = os.path.join(workdir, f"hl{level}_{name}_{steps}steps")
            train_and_evaluate(level_config(level, name, steps), run_dir)
            results[level, name] = settled_step_time(run_dir, settle)
    return results


def report(results: dict, levels=LEVELS, controllers=CONTROLLERS) -> str:
    lines = [
        f"{'level':6s}"
        + "".join(f"{c:>14s}" for c in controllers)
        + "   reduction vs uniform (p / pi / oracle)   analytic"
    ]
    for level in levels:
        uniform = results[level, "static"]
        row = f"HL{level:<4d}" + "".join(f"{results[level, c]:14.4f}" for c in controllers)
        cuts = " / ".join(
            f"{1 - results[level, c] / uniform:6.1%}" for c in ("proportional", "pi", "oracle")
        )
        analytic = uniform_vs_balanced_reduction(hl_speeds(level, "bsp", 4), 128)
        lines.append(f"{row}   {cuts:>36s}   {analytic:8.1%}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--settle", type=int, default=30)
    parser.add_argument("--workdir", default="runs/hl_levels")
    parser.add_argument("--cpu_devices", type=int, default=8)
    args = parser.parse_args(argv)
    # The job's 4 devices (level_config): JAX's "Unable to initialize backend 'cpu'" at 0, and
    # "num_devices=4 but only 2 device(s) are available" from the first run at 2.
    if args.cpu_devices < DEVICES:
        parser.error(
            f"--cpu_devices must be >= {DEVICES} (the job's devices), got {args.cpu_devices}"
        )
    if not 0 <= args.settle < args.steps:  # a mean over no step: a table of NaN, after 16 runs
        parser.error(f"--settle ({args.settle}) must be in [0, --steps) ({args.steps})")
    import jax

    jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    results = run_levels(steps=args.steps, settle=args.settle, workdir=args.workdir)
    print("\nmean virtual step time (s) after settling, 4 workers, B = 128, linear cost")
    print(report(results))


if __name__ == "__main__":
    main()
