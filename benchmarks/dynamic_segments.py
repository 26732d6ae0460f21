"""P's and PI's gap to the oracle per segment of the cost curves' dynamic schedule.

Run: python -m benchmarks.dynamic_segments [--curves fixed,saturating] [--trace 1]

Modelled (the plants of experiments/curves/ablate.py: HL1, 2, 4, 8, 8, 4, 2, 1, 50 steps
each, 10 % noise, its 3 seeds). For each curve and policy: the steady-state gap (mean step
time over the oracle's minus 1, second half of every segment) and each segment's own, which
shows where a policy's gap comes from. `--trace K` also prints, for proportional on the first
curve and noise key K, the steps of the last three segments (from step 295) where its split,
its trial or its freeze changed: a move undone freezes P for 100 decisions, and a speed change
its outlier run did not confirm left the freeze in place before controllers/drift.py (key 1:
a move undone at step 309, the freeze then held to the end, at [19, 17, 1, 91] from step 320
and across the change to equal workers at step 350; now it ends at step 353,
tests/test_controllers_drift.py).
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import controllers
from controllers import sim
from experiments.curves import ablate

STEPS = 50  # steps a segment, as in the cost-curve study (`--steps 50`)


def segments(curve: str, name: str) -> tuple[float, np.ndarray]:
    """(steady-state gap over the schedule, each segment's second-half gap [8])."""
    times, limit = ablate.curves()[curve]
    plants = [ablate.plant(times, limit, "dynamic", STEPS, ablate.NOISE)] * ablate.SEEDS
    keys = jnp.stack([jax.random.key(s + 1) for s in range(ablate.SEEDS)])
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *plants)
    total = STEPS * len(ablate.DYNAMIC)
    ratio, _ = ablate.run(name, stacked, keys, total)
    half = ratio.reshape(ablate.SEEDS, len(ablate.DYNAMIC), STEPS)[..., STEPS // 2 :]
    return float(half.mean() - 1.0), half.mean(axis=(0, 2)) - 1.0


def record(curve: str, key: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Proportional on `curve`'s dynamic schedule, noise key `key`: each step's split [T, W],
    whether a move is on trial [T] and the decisions left frozen after an undo [T]."""
    times, limit = ablate.curves()[curve]
    plant = ablate.plant(times, limit, "dynamic", STEPS, ablate.NOISE)
    out, rec = sim.simulate(
        controllers.make("proportional", **ablate.BOUNDS),
        plant,
        global_batch=ablate.B,
        num_steps=STEPS * len(ablate.DYNAMIC),
        key=jax.random.key(key),
        record=lambda s: (s.tracker.trial.open, s.tracker.trial.frozen),
    )
    return np.asarray(out.batch_sizes), np.asarray(rec[0]), np.asarray(rec[1])


def trace(curve: str, key: int) -> None:
    sizes, trial, frozen = record(curve, key)
    print(f"proportional, {curve}, key {key}: step, split, trial open, decisions frozen")
    for t in range(STEPS * 6 - 5, len(sizes)):
        moved = (sizes[t] != sizes[t - 1]).any() or trial[t] != trial[t - 1]
        if moved or (frozen[t] > 0) != (frozen[t - 1] > 0):
            print(f"  {t:4d} {sizes[t].tolist()} {bool(trial[t])} {int(frozen[t])}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--curves", default="fixed,saturating")
    p.add_argument("--trace", type=int, default=0, help="noise key to trace (0: none)")
    args = p.parse_args(argv)
    names = args.curves.split(",")
    if unknown := sorted(set(names) - set(ablate.curves())):
        p.error(f"--curves: unknown {unknown}; known: {sorted(ablate.curves())}")
    print("curve      policy        gap    per segment (HL1 2 4 8 8 4 2 1)")
    for curve in names:
        for name in ("proportional", "pi"):
            gap, each = segments(curve, name)
            print(f"{curve:10s} {name:12s} {gap:6.3f}  " + " ".join(f"{g:.3f}" for g in each))
    if args.trace:
        trace(names[0], args.trace)


if __name__ == "__main__":
    main()
