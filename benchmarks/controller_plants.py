"""A random family of emulated clusters for judging controllers off their tuning plants.

Each plant: 4 workers, B = 128, speeds log-uniform in [2, 32]; a time curve at speed 1 that is
affine (a fixed cost of 0-40 sample-equivalents, 0 included: proportional) or saturating
(flat up to a knee at 8-48 rows, then linear); half the plants have a memory cliff on the
fastest worker (2-4x its time above 40-80 % of its proportional share); timing noise
log-normal with sigma 0-0.2; at step `change` every speed is multiplied by 0.5-2 and the
speeds are shuffled. A seed picks the whole family, so tuning and held-out sets are disjoint
by seed.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from controllers import sim

NUM_WORKERS, GLOBAL_BATCH = 4, 128
KNEE_MID = 64.0  # the middle knot of an affine curve (any size between works)
NEVER = 10**6  # a change past the horizon keeps the shapes of a plant with a change


def draw(rng: np.random.Generator, *, change: int, noise: float | None = None) -> dict[str, Any]:
    """One plant's description (plain numbers, for the JSON report and for `build`)."""
    speeds = np.exp(rng.uniform(np.log(2.0), np.log(32.0), NUM_WORKERS))
    kind = "affine" if rng.random() < 0.5 else "saturating"
    if kind == "affine":
        fixed = float(rng.choice([0.0, rng.uniform(0.0, 40.0)]))
        knots = (0.0, KNEE_MID, float(GLOBAL_BATCH))
        times = (fixed, fixed + KNEE_MID, fixed + GLOBAL_BATCH)
    else:
        knee = float(rng.uniform(8.0, 48.0))
        knots = (0.0, knee, float(GLOBAL_BATCH))
        times = (knee, knee, float(GLOBAL_BATCH))
    limits = np.zeros(NUM_WORKERS, int)
    factor = 1.0
    if rng.random() < 0.5:
        fastest = int(np.argmax(speeds))
        share = GLOBAL_BATCH * speeds[fastest] / speeds.sum()
        limits[fastest] = max(2, int(share * rng.uniform(0.4, 0.8)))
        factor = float(rng.uniform(2.0, 4.0))
    changed = rng.permutation(speeds * rng.uniform(0.5, 2.0, NUM_WORKERS))
    drawn_noise = float(rng.uniform(0.0, 0.2))
    return {
        "kind": kind,
        "cliff": bool(limits.any()),
        "speeds": speeds.round(3).tolist(),
        "changed_speeds": changed.round(3).tolist(),
        "change": int(change),
        "curve": (knots, times),
        "limits": limits.tolist(),
        "limit_factor": factor,
        # drawn whatever `noise` says, so a family with its noise fixed (the quiet runs that
        # count adjustments) holds the same plants: drawn only when not given, every plant
        # after the first was another plant (the adjustments were counted on other plants
        # than the ratios, until 2026-12-06)
        "noise": float(noise) if noise is not None else drawn_noise,
    }


def build(desc: dict[str, Any]) -> sim.Plant:
    return sim.make_plant(
        desc["speeds"],
        changes=((desc["change"], desc["changed_speeds"]),),
        noise=desc["noise"],
        curve=desc["curve"],
        limits=desc["limits"],
        limit_factor=desc["limit_factor"],
    )


def family(seed: int, count: int, *, change: int, noise: float | None = None) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [draw(rng, change=change, noise=noise) for _ in range(count)]


def stack(descs: list[dict]) -> sim.Plant:
    """The plants as one pytree with a leading plant axis (for vmap)."""
    return jax.tree.map(lambda *x: jnp.stack(x), *(build(d) for d in descs))
