"""Predictive's decision rule at the margins (controllers/predictive.py): a move that promises
`min_gain` is made however noisy the estimates, and a move on trial is not undone if that
would grow a worker back over a size it measured dear per sample (`_back_over_cliff`)."""

import jax
import jax.numpy as jnp
import numpy as np

import controllers
from benchmarks import controller_heldout as heldout
from benchmarks import controller_plants as plants
from controllers import metrics, noise, response, sim
from controllers.base import Observation

B = 64


def _decide(sigma: float) -> list[int]:
    """The split predictive takes from [32, 32] when worker 1 measured 1.1x worker 0's time
    three times each (proportional curves), every worker's noise known at `sigma`."""
    c = controllers.make("predictive", b_min=1, b_max=0, settle=3, jump=0.25)
    state = c.init(2, B)
    sizes = jnp.array([32, 32], jnp.int32)
    times = jnp.array([1.0, 1.1])
    known = noise.init(2)._replace(var_sum=jnp.full(2, sigma**2), var_weight=jnp.ones(2))
    state = state._replace(
        sizes=sizes,
        mean=state.mean.at[jnp.arange(2), sizes].set(times),
        count=state.count.at[jnp.arange(2), sizes].set(3.0),
        expected=times,
        noise=known,
        settled=jnp.array([3, 3], jnp.int32),
        seen_time=jnp.ones((), jnp.float32),
        trial=response.init(2, 100),
    )
    obs = Observation.make(0, sizes, times.tolist(), global_batch=B)
    new, _ = c.update(state, obs)
    return np.asarray(new).tolist()


def test_a_move_that_promises_min_gain_is_made_at_any_noise():
    # [34, 30] gives a step 3.4 % shorter than [32, 32] on these estimates: above `min_gain`
    # (2 %). Until 2026-12-07 a move also had to beat half a standard error of the estimates
    # (sigma sqrt(2 / n), 8.2 % at 20 % noise and 3 samples), so at 20 % noise the split
    # stayed; on the tuning-side families a 2-8 % gain waited for samples after a speed change
    # most (p90 five decisions after it 1.063, with the undo rule below 1.054 without the term).
    assert _decide(0.02) == [34, 30]
    assert _decide(0.2) == [34, 30]


def test_a_move_down_from_over_a_cliff_is_not_undone_back_over_it():
    # Tuning plant 86 of seed 101 (a 3.2x memory cliff above 43 rows on the fastest worker,
    # 17 % noise). Its re-test of the cliff after the hold went over it (52 rows), and the
    # walk back down (46, then 44) changed the worker's time far less than the table had
    # planned, since 44 is still over the limit: the trial read it as unanswered and undid
    # it back to 46 rows, then held the split there 200 steps at 1.94x the optimum. 46 rows
    # had measured dearer per sample than 43 by far more than a cap's margin, so the move
    # stands.
    descs = plants.family(101, 96, change=heldout.CHANGE)
    plant = plants.build(descs[86])
    key = jax.random.split(jax.random.key(101), len(descs))[86]
    controller = controllers.make("predictive", **heldout.BOUNDS, settle=3, jump=0.25)

    def run(key):
        trace = sim.simulate(controller, plant, global_batch=heldout.B, num_steps=250, key=key)
        best = metrics.optimal_step_times(trace, plant, global_batch=heldout.B, **heldout.BOUNDS)
        return trace.model_times.max(-1) / best, trace.batch_sizes

    balance, sizes = (np.asarray(a) for a in jax.jit(run)(key))
    assert sizes[:, 0].max() > 43  # it did go over its cliff (the first moves, the re-test)
    # and came back under it each time: the re-test's probe and walk down cost 15 steps
    assert (balance[40:] > 1.5).sum() <= 20
    assert balance[-50:].max() < 1.05
