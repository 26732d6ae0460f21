"""How often noise alone ends a freeze through controllers/drift.py (no speed change at all).

Run: python -m benchmarks.drift_false_ends [--workers 4000] [--steps 100]

Modelled: `--workers` independent workers, each a freeze of `--steps` steps at one split,
lognormal per-sample times of the noise level (known to the detector), confirm 3, jump 0.25,
steps long enough to span `persist`. Prints, per noise level, the share of workers whose
drift alarmed at least once, and the share of four-worker freezes that would end early
(1 - (1 - p)^4). On 2026-12-06: 0.0 % at 5 % noise, 4.2 % at 10-20 % (16 % of four-worker
freezes), where the three standard errors set the limit.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.args import at_least
from controllers import drift

NOISE = (0.05, 0.1, 0.15, 0.2)


def false_ends(sigma: float, workers: int, steps: int, seed: int = 0) -> float:
    """Share of `workers` whose drift alarmed at least once in `steps` noisy steps."""
    observe = jax.jit(
        lambda d, x: drift.observe(d, x, jnp.ones(workers, bool), sigma, 1.0, 0.25, 3, 0.1)
    )
    state, key = drift.init(workers), jax.random.key(seed)
    ever = np.zeros(workers, bool)
    for _ in range(steps):
        key, k = jax.random.split(key)
        state, drifted, _ = observe(state, jnp.exp(sigma * jax.random.normal(k, (workers,))))
        ever |= np.asarray(drifted)
    return float(ever.mean())


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=4000)
    p.add_argument("--steps", type=int, default=100)
    args = p.parse_args(argv)
    at_least(p, workers=(args.workers, 1), steps=(args.steps, 1))
    print("noise  worker alarmed  four-worker freeze ended")
    for sigma in NOISE:
        share = false_ends(sigma, args.workers, args.steps)
        print(f"{sigma:5.2f}  {100 * share:13.1f} %  {100 * (1 - (1 - share) ** 4):22.1f} %")


if __name__ == "__main__":
    main()
