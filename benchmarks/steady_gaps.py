"""P's and PI's steady-state gap to the oracle at fixed HL levels, at low and normal noise.

Run: python -m benchmarks.steady_gaps [--steps 200]

Modelled (the plants of experiments/curves/ablate.py, its 3 noise keys): for each noise level
(1 % and 10 %), curve and level HL2, HL4, HL8, the mean step time over the oracle's minus 1
over the second half of the run, for proportional and pi. Backs the comparison of PI's
integral before and after it summed to zero (docs/controllers.md; before: run it with
71eff6d^'s controllers/pi.py): on 2026-12-06 PI moved by at most 0.2 points where it got
worse (measured HL2 at 10 % noise, 1.5 -> 1.7 %) and improved at HL4 (fixed at 10 % noise
10.2 -> 9.1 %, measured 0.6 -> 0.0 %).
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.args import at_least
from experiments.curves import ablate

LEVELS = ("HL2", "HL4", "HL8")
NOISE = (0.01, 0.1)


def gap(name: str, times: np.ndarray, limit: int, level: str, noise: float, steps: int):
    plants = [ablate.plant(times, limit, level, steps, noise)] * ablate.SEEDS
    keys = jnp.stack([jax.random.key(s + 1) for s in range(ablate.SEEDS)])
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *plants)
    ratio, _ = ablate.run(name, stacked, keys, steps)
    return float(np.asarray(ratio)[:, steps // 2 :].mean() - 1.0)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args(argv)
    at_least(p, steps=(args.steps, 2))
    print("noise curve       " + " ".join(f"{lv} P   {lv} PI " for lv in LEVELS))
    for noise in NOISE:
        for curve, (times, limit) in ablate.curves().items():
            cells = [
                gap(name, times, limit, level, noise, args.steps)
                for level in LEVELS
                for name in ("proportional", "pi")
            ]
            print(f"{noise:5.2f} {curve:10s} " + " ".join(f"{g:7.3f}" for g in cells))


if __name__ == "__main__":
    main()
