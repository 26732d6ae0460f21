"""Controllers on real measurements: spikes and slowdowns must not fool them, cliffs must not
escape them (issue 26). Each scenario plants a deterministic trap in the paper's HL8 cluster
(cores 6/6/4/32, B = 128, time = (8 + b) / cores).

- first execution: a worker's first step at a size it never ran takes 3x (a new program);
- spike: one step at 3x, three steps after the fast worker first grows;
- cliff: the fast worker's time triples above 60 rows, until a given step or for good;
- neighbour: the fast worker runs at half speed for the 6 steps after it first grows (and, in
  `neighbour_twice`, again after a speed change lets it grow past 100 rows).
"""

import functools

import jax
import numpy as np
import pytest

import controllers

B = 128
CORES = np.array([6.0, 6.0, 4.0, 32.0])
FAST = 3
CLIFF = 60  # the fast worker memory limit in the cliff scenarios
FIXED = 8.0  # a fixed cost per step, worth 8 samples: time is affine, not proportional
OPEN = {"b_min": 1, "b_max": 0}
POLICIES = ("proportional", "pi", "predictive")


@functools.cache
def _update(name, **settings):
    controller = controllers.make(name, **OPEN, **settings)
    return controller, jax.jit(controller.update)


def _run(name, trap, steps, **settings):
    """Runs `steps` steps with `trap(step, sizes, grew_at, ran)` multiplying the times.

    grew_at: the step from which the fast worker first ran above 32 (None before); ran: the
    (worker, size) pairs run before this step; `settings`: the policy's arguments. Returns
    sizes [T, W] and the final state.
    """
    controller, update = _update(name, **settings)
    state = controller.init(4, B)
    sizes = np.asarray(controllers.initial_sizes(state, 4, B))
    # Warm-up ran the first split once (design.md trap 13): only later sizes are new.
    ran, grew_at, history = set(enumerate(sizes.tolist())), None, []
    for step in range(steps):
        if grew_at is None and sizes[FAST] > B // 4:
            grew_at = step
        times = (FIXED + sizes) / CORES * trap(step, sizes, grew_at, ran)
        ran.update(enumerate(sizes.tolist()))
        obs = controllers.Observation.make(step, sizes, times, global_batch=B)
        new, state = update(state, obs)
        history.append(sizes)
        sizes = np.asarray(new)
    return np.array(history), state


def no_trap(step, sizes, grew_at, ran):
    return np.ones(4)


def first_execution(step, sizes, grew_at, ran):
    return np.array([3.0 if (k, int(b)) not in ran else 1.0 for k, b in enumerate(sizes)])


def spike(step, sizes, grew_at, ran):
    factor = np.ones(4)
    if grew_at is not None and step == grew_at + 3:
        factor[FAST] = 3.0
    return factor


def cliff_until(end):
    def trap(step, sizes, grew_at, ran):
        factor = np.ones(4)
        factor[FAST] = 3.0 if sizes[FAST] > CLIFF and step < end else 1.0
        return factor

    return trap


def _cap(name, state):
    """The fast worker's upper bound (None for predictive, whose caps live in its table)."""
    return None if name == "predictive" else int(state.tracker.cliff.hi[FAST])


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("trap", [first_execution, spike], ids=["first_execution", "spike"])
def test_spikes_leave_the_split_where_it_would_be_without_them(name, trap):
    clean, _ = _run(name, no_trap, 60)
    sizes, state = _run(name, trap, 60)
    assert clean[-1][FAST] >= 95  # the affine optimum gives the fast worker 99-101 rows
    # No cap, no lasting move: once the fast worker first holds 80+ rows it keeps them, and
    # the split ends within two rows of the spike-free run's (P stops anywhere inside its
    # dead-band, so a spike may shift where by a row).
    reached = np.flatnonzero(sizes[:, FAST] >= 80)[0]
    assert sizes[reached:, FAST].min() >= 80
    assert np.abs(sizes[-1] - clean[-1]).max() <= 2, (sizes[-1], clean[-1])
    assert _cap(name, state) in (None, B)


@pytest.mark.parametrize("name", POLICIES)
def test_a_cap_is_lifted_once_the_cliff_is_gone(name):
    # A real cliff (another job holding memory) until step 40, then none.
    sizes, _ = _run(name, cliff_until(40), 300)
    # Found and respected while it lasts: predictive's walk down the cliff's bracket (62, 61
    # rows, each a gain of 2 % or more on its predicted curve) ends at step 22.
    assert sizes[22:40, FAST].max() <= CLIFF
    assert sizes[-50:, FAST].min() >= 90  # released: near the cliff-free optimum again


@pytest.mark.parametrize("name", POLICIES)
def test_a_persistent_cliff_is_still_found_and_respected(name):
    sizes, state = _run(name, cliff_until(10**6), 400)
    assert sizes[-1][FAST] <= CLIFF
    # Re-tested after each hold (100, then 200 steps): P and PI spend the two windows of the
    # verdict (2 x 5 steps) over the cliff each time, predictive one probe of 5 steps one row
    # over the cap (122-126 and 327-331; 12 steps over from step 20 at `jump` 0.4 and 0.6,
    # its first walk down the bracket included). Before its lift forgot a cap's every point
    # at once and re-tested one row over it (2026-12-06), its one re-test (steps 211-232)
    # probed 99, 73, 67, 64, 62, 61 rows, walking down a bracket from its dear end.
    over = sizes[20:, FAST] > CLIFF
    assert over.sum() <= 22
    if name != "predictive":
        assert _cap(name, state) <= CLIFF


def test_predictive_retests_a_persistent_cliff_at_the_configs_jump():
    # The trainer's configs give every policy `jump` 0.25 (omnilearn_jax/config/schema.py):
    # predictive's first walk down the cliff's bracket ends at step 24; after each hold (100,
    # then 200 steps) it re-tests one row over the cap for 5 steps (124-128, 329-333), and the
    # split ends at the limit. Before 2026-12-06 its one re-test spent 30 steps over the
    # cliff (211-240), walking down from the cliff-free optimum.
    sizes, _ = _run("predictive", cliff_until(10**6), 400, jump=0.25)
    over = np.flatnonzero(sizes[24:, FAST] > CLIFF) + 24
    assert over.tolist() == [*range(124, 129), *range(329, 334)], over
    assert (sizes[over, FAST] == CLIFF + 1).all()
    assert sizes[-1][FAST] == CLIFF


def neighbour(step, sizes, grew_at, ran):
    """The fast worker runs at half speed for the 6 steps after it first grows."""
    factor = np.ones(4)
    if grew_at is not None and step < grew_at + 6:
        factor[FAST] = 2.0
    return factor


@pytest.mark.parametrize("name", POLICIES)
def test_a_short_slowdown_after_a_growth_passes(name):
    clean, _ = _run(name, no_trap, 250)
    sizes, state = _run(name, neighbour, 250)
    assert np.abs(sizes[-1] - clean[-1]).max() <= 2, (sizes[-1], clean[-1])
    if name == "predictive":
        # Its slow samples at 86 rows read as a cliff there: the worker stays below it until
        # the cap is lifted after its hold (100 steps), then goes to the clean optimum. Its
        # move from 75 to 81 rows (times back to normal) stands; before a patient trial
        # counted the error of the times before a move (controllers/response.py), that right
        # move was undone at step 19 and the worker held 75 rows, reaching 99 at step 119.
        # The lift's re-test goes to the cap's own size first (86 rows at step 108), then 99
        # (step 111).
        assert sizes[30:100, FAST].max() < 86 and sizes[30:100, FAST].min() >= 81
        assert np.flatnonzero(sizes[:, FAST] >= 95)[0] <= 111
        assert sizes[-20:, FAST].min() >= 95
    else:
        # P and PI need both windows slow: no cap, and the fast worker never gives rows back.
        assert _cap(name, state) == B
        reached = np.flatnonzero(sizes[:, FAST] >= 80)[0]
        assert sizes[reached:, FAST].min() >= 80


def neighbour_twice(change):
    """`neighbour`, and again after the fast worker first grows past 100 rows: from step
    `change` it has 48 cores (1.5x), which moves its optimum from 99 rows to 112."""
    second = []

    def trap(step, sizes, grew_at, ran):
        factor = neighbour(step, sizes, grew_at, ran)
        if step >= change:
            factor[FAST] *= 32.0 / 48.0
            if not second and sizes[FAST] > 100:
                second.append(step)
            if second and step < second[0] + 6:
                factor[FAST] *= 2.0
        return factor

    return trap, second


def test_predictive_holds_a_second_false_cap_no_longer_than_the_first():
    """A slowdown after a growth reads to predictive as a cliff, lifted after `cliff_hold`
    (100 steps); its re-test finds none (`test_a_short_slowdown_after_a_growth_passes`).
    A later one, after a speed change lets the worker grow again, is held 100 steps too:
    the clean re-test reset the worker's strikes. Before (2026-12-06) strikes only grew, so
    the second cap was held 200 steps, a third 400, up to 1,600."""
    trap, second = neighbour_twice(change=150)
    sizes, state = _run("predictive", trap, 450)
    assert np.flatnonzero(sizes[:150, FAST] >= 95)[0] <= 111  # the first lift, as before
    grew = second[0]  # to 112 rows (step 153), slow there for 6 steps: back to 103, then 105
    capped = sizes[grew + 10 : grew + 90, FAST]
    assert capped.max() < 112, capped  # the slowdown read as a cliff at 112 rows
    back = np.flatnonzero(sizes[grew + 10 :, FAST] >= 110) + 10
    # Released after one hold: back at 112 rows 103 steps after the growth (203 before).
    assert back.size and back[0] <= 115, back[:3]
    assert sizes[-20:, FAST].min() >= 110
    assert int(state.strikes[FAST]) == 0
