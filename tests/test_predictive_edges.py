"""Edge cases predictive (controllers/predictive.py) and its change detector (cusum.py) got
wrong, each shown on a plant (each test failed before its fix)."""

import jax
import jax.numpy as jnp
import numpy as np

import controllers
from controllers import sim
from controllers.base import Observation

B, SPEEDS = 128, (6.0, 6.0, 4.0, 32.0)  # the paper's HL8: the optimum [16, 16, 10, 86]


def _drive(controller, tables, steps: int, inf_at=()):
    """`steps` steps through `update` on a noise-free table (`tables(t)`), worker 0's time
    inf at the steps `inf_at`; returns the sizes [T, W] and the decision counter [T]."""
    speeds = jnp.asarray(SPEEDS)

    def step(carry, t):
        state, sizes = carry
        table = tables(t)
        times = table[jnp.arange(4), sizes]
        times = jnp.where(jnp.isin(t, jnp.asarray(inf_at or (-1,))) & (jnp.arange(4) == 0),
                          jnp.inf, times)  # fmt: skip
        new, state = controller.update(state, Observation(t, sizes, times, speeds, table, False))
        return (state, new), (sizes, state.decisions, state.settled)

    state = controller.init(4, B)
    _, out = jax.lax.scan(step, (state, state.sizes), jnp.arange(steps))
    return tuple(np.asarray(a) for a in out)


def test_jump_zero_on_a_noise_free_plant_still_decides():
    # jump 0 disables outliers and the change detector (the docstring); with no noise the
    # CUSUM's threshold was 0, "0 >= 0" held every decision, and the split stayed uniform.
    plant = sim.make_plant(SPEEDS)
    for kwargs in ({"jump": 0.0}, {"jump": 0.0, "persist": 0.0}):
        c = controllers.make("predictive", b_min=1, b_max=0, **kwargs)
        trace, decisions = sim.simulate(c, plant, global_batch=B, num_steps=60,
                                        record=lambda s: s.decisions)  # fmt: skip
        assert np.asarray(trace.batch_sizes)[-1].tolist() == [16, 16, 10, 86], kwargs
        assert int(decisions[-1]) > 5


def test_a_lifted_cap_is_retested_where_the_others_tie():
    # A cliff on worker 3 at 64 rows (x3) goes away at step 200. Once the cap is lifted the
    # re-test gives it one row more, which cannot lower a step two tied workers set: with a
    # strict gain it never came, and the split stayed [24, 24, 16, 64] at 1.49x the optimum.
    capped = sim.make_plant(SPEEDS, limits=(0, 0, 0, 64), limit_factor=3.0)
    free = sim.make_plant(SPEEDS)
    speeds = jnp.asarray(SPEEDS)
    before, after = sim.plant_table(capped, speeds, B), sim.plant_table(free, speeds, B)
    c = controllers.make("predictive", b_min=1, b_max=0)
    sizes, _, _ = _drive(c, lambda t: jnp.where(t < 200, before, after), 700)
    assert sizes[199].tolist() == [24, 24, 16, 64]  # at the cliff while it is there
    assert sizes[-1].tolist() == [16, 16, 10, 86]  # and past it once it is gone


def test_an_infinite_time_is_no_measurement_for_settling():
    # A timer that failed (inf) on worker 0 for three steps after the first move counted
    # toward `settle`, and the next decision rested on fewer samples than it asks for.
    plant = sim.make_plant(SPEEDS, curve=((0.0, 64.0, 128.0), (8.0, 72.0, 136.0)))
    table = sim.plant_table(plant, jnp.asarray(SPEEDS), B)
    c = controllers.make("predictive", b_min=1, b_max=0, settle=3)
    sizes, _, settled = _drive(c, lambda t: table, 9, inf_at=(3, 4, 5))
    moved = int(np.argmax(np.any(sizes[1:] != sizes[:-1], axis=-1))) + 1  # the first move
    assert moved == 3
    assert settled[5, 0] == 0 and settled[5, 1:].tolist() == [3, 3, 3]
    assert sizes[7].tolist() == sizes[3].tolist()  # no move before worker 0 has 3 samples
