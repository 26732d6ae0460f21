"""Predictive's default on the paper's dynamic schedule: speed changes every 50 steps.

With `jump` 0.6 (the default before DEFAULT_JUMP) a moderate change went unconfirmed, the next
move was undone and the split held 100 steps: mean gaps to the oracle in each segment's second
half of 7-26 % on this plant (noise keys 1-6, mean 17 %), against 1-3 % at 0.4 (mean 1.6 %;
controllers/predictive.py, DEFAULT_JUMP). Other keys reach 5 % at 0.4 (key 10), hence the mean.
"""

import jax
import jax.numpy as jnp
import numpy as np

from controllers.predictive import DEFAULT_JUMP
from experiments.curves import ablate

STEPS = 50  # per segment, as `python -m experiments.curves.ablate --steps 50`
SEEDS = range(1, 7)  # noise keys


def _second_half_gaps(**kwargs):
    times, limit = ablate.curves()["measured"]
    plant = ablate.plant(times, limit, "dynamic", STEPS, ablate.NOISE)
    total = STEPS * len(ablate.DYNAMIC)
    plants = jax.tree.map(lambda x: jnp.stack([x] * len(SEEDS)), plant)
    keys = jnp.stack([jax.random.key(seed) for seed in SEEDS])
    ratio, _ = ablate.run("predictive", plants, keys, total, **kwargs)
    half = np.arange(total) % STEPS >= STEPS // 2
    return ratio[:, half].mean(axis=1) - 1.0


def test_the_default_follows_the_dynamic_schedule():
    gaps = _second_half_gaps()
    assert gaps.mean() < 0.04, (DEFAULT_JUMP, gaps)


def test_the_old_default_lost_a_segment_to_an_undone_move():
    # The same plant with jump 0.6: the failure the default's change removed (at the other
    # defaults of then: at `memory` and `min_gain` 0.02 jump 0.6 loses less, 9 %).
    gaps = _second_half_gaps(jump=0.6, memory=0.05, min_gain=0.03)
    assert gaps.mean() > 0.1, gaps
