"""The dead-band table of docs/controllers.md: proportional on HL8 under 10 % timing noise.

    python -m benchmarks.deadband_table [--seeds 32] [--steps 1000]

For each dead-band, `controllers.make("proportional", deadband=d, b_min=0, b_max=0)` on
`controllers.sim.paper_plant(8, noise=0.1)` (cores 6/6/4/32, B = 128), one run a seed with
the keys `jax.random.split(jax.random.key(0), seeds)`, vmapped: the split changes (mean /
max over seeds) and max/mean worker time per step over the last half (the mean over seeds of
each run's mean, and the worst single step of any run). Modelled (the simulation's plant), not
measured.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import controllers
from controllers import sim
from controllers.metrics import imbalance

DEADBANDS = (0.02, 0.05, 0.1, 0.2)
B = 128


def table(seeds: int, steps: int) -> list[tuple[float, float, int, float, float]]:
    plant = sim.paper_plant(8, noise=0.1)

    def run(deadband, key):
        policy = controllers.make("proportional", deadband=deadband, b_min=0, b_max=0)
        trace = sim.simulate(policy, plant, global_batch=B, num_steps=steps, key=key)
        moves = jnp.any(trace.batch_sizes[1:] != trace.batch_sizes[:-1], axis=-1).sum()
        ratios = imbalance(trace.model_times[steps // 2 :], trace.batch_sizes[steps // 2 :])
        return moves, ratios.mean(), ratios.max()

    keys = jax.random.split(jax.random.key(0), seeds)
    rows = []
    for d in DEADBANDS:
        moves, mean, worst = (
            np.asarray(a) for a in jax.jit(jax.vmap(run, (None, 0)))(jnp.float32(d), keys)
        )
        rows.append(
            (d, float(moves.mean()), int(moves.max()), float(mean.mean()), float(worst.max()))
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=32)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.steps < 2:
        parser.error("--seeds must be >= 1 and --steps >= 2")
    print("| deadband | adjustments (mean / max) | max/mean time, last half (mean / worst) |")
    print("|---|---|---|")
    for d, mean_moves, max_moves, mean, worst in table(args.seeds, args.steps):
        print(f"| {d:g} | {mean_moves:.1f} / {max_moves} | {mean:.3f} / {worst:.3f} |")


if __name__ == "__main__":
    main()
