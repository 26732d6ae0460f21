"""Response trials on two held-out plants (benchmarks/controller_heldout.py, seed 1): a right
move stands (issue 26, point 4). From c8d2a41 the trial planned each worker's time change as
its rows' change; below a knee (43: worker 3 from 8 rows to 1) or beside a fixed cost (33:
worker 0 from 16 to 4 against 32) the time barely moves, so R < 0.25, the right move was undone
and the policy held 100, then 200, then 400 steps at the split before it (1.51x, 1.46x). Now
the trial plans with predictive's own curve (controllers/predictive.py, `_planned`)."""

import jax
import numpy as np
import pytest

import controllers
from benchmarks import controller_heldout as heldout
from benchmarks import controller_plants as plants
from controllers import metrics, sim

# Plant 43: saturating (knee at 23 rows) with a cliff at 40 rows on worker 1. Plant 33: affine
# with a fixed cost of 32 rows. Both were held at 1.46-1.51x the optimum from step 14-20 to
# the speed change (250) before the trial planned with the curve.
PLANTS = (43, 33)


def balance(index: int) -> np.ndarray:
    """Slowest noise-free time over the optimum, steps 0-249, at the tuned setting of the
    committed docs/results/controller_heldout.json (settle 3, jump 0.25) and the benchmark's
    seed for this plant."""
    desc = plants.family(1, 96, change=heldout.CHANGE)[index]
    plant = plants.build(desc)
    ctrl = controllers.make("predictive", **heldout.BOUNDS, settle=3, jump=0.25)
    key = jax.random.split(jax.random.key(1), 96)[index]
    trace = sim.simulate(ctrl, plant, global_batch=heldout.B, num_steps=heldout.CHANGE, key=key)
    best = metrics.optimal_step_times(trace, plant, global_batch=heldout.B, **heldout.BOUNDS)
    return np.asarray(trace.model_times.max(-1) / best)


@pytest.mark.parametrize("index", PLANTS)
def test_a_right_move_below_a_knee_or_beside_a_fixed_cost_stands(index):
    ratio = balance(index)
    # Before c8d2a41: 1.000 and 1.003 at the 60th decision. The worst of steps 100-249.
    assert ratio[100:].max() <= 1.1, (index, float(ratio[100:].max()))
