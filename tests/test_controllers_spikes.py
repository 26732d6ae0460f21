"""A spike inside the measured-time guard's factor (issue 26, point 1: "one-off spikes, first
executions and a noisy neighbour never move a split far or for long").

The guard (faults.TimeGuard, factor 10) rejects a reading more than 10x a worker's reference,
but a 9x spike is accepted and reaches the controller. Each run follows the trainer's path:
the plant's times, then the guard, then the controller's update and the allocation rule within
the bounds (`Trainer.decide`). Plant: two workers at speeds 1 and 0.25 (0.1 and 0.4 ms a row,
time proportional to the rows), B = 128, bounds 16..96; the split settles at [96, 32] (worker
0 at its bound) by step 3. Then worker 0 has one step at 9x, or the pair measured under a
noisy neighbour on 2026-12-02 (128.5 ms, 8.8x its usual 14.6 ms for 96 rows, a normal step,
then 72.1 ms, 4.9x), and is normal again.

"Not far": no step's split is further from the spike-free run's (same noise draws) than the
dead-band's worth of worker 0's rows (10 % of 96: 9 rows). "Not for long": at most 2 steps
are outside that band.
"""

import contextlib
import functools
import io

import jax
import numpy as np
import pytest

import controllers
from omnilearn_jax.config import schema
from omnilearn_jax.engine.faults import TimeGuard

B = 128
PER_ROW = np.array([1e-4, 4e-4])  # seconds a row: speeds 1 and 0.25
LO, HI = np.full(2, 16, np.int32), np.full(2, 96, np.int32)
DEADBAND = 0.1  # proportional's and pi's default; predictive's is min_gain (0.03)
STEPS = 60
# Each policy at its own defaults, and predictive at the configs' `jump` (0.25, the trainer's;
# its own default is 0.4): there the pair alarmed the speed-change detector until a run
# contradicted by a normal step ended (controllers/cusum.py, `detect`).
SETTINGS = {
    "proportional": ("proportional", {}),
    "pi": ("pi", {}),
    "predictive": ("predictive", {}),
    "predictive_configs": ("predictive", {"jump": schema.base_config().controller.jump}),
}
POLICIES = tuple(SETTINGS)
ONE = ((0, 9.0),)  # (steps after the first, factor on worker 0's time)
PAIR = ((0, 128.5 / 14.6), (2, 72.1 / 14.6))


@functools.cache
def _decide(name):
    policy, kwargs = SETTINGS[name]
    controller = controllers.make(policy, b_min=16, b_max=96, **kwargs)

    def decide(state, obs):  # as Trainer.decide: the update, then the allocation rule
        shares, state = controller.update(state, obs)
        return controllers.allocate(shares, B, LO, HI, literal=True), state

    return controller, jax.jit(decide)


def _run(name, spikes=(), at=0, noise=0.0, seed=0):
    """Worker 0's rows at each step; `spikes` (offset from `at`, factor) set its time to
    that many times its usual one; `noise` is the log-normal timing noise of both workers
    (seeded, the same draws with or without the spikes)."""
    controller, decide = _decide(name)
    state = controller.init(2, B)
    sizes = np.asarray(controllers.initial_sizes(state, 2, B))
    guard, rng, rows = TimeGuard(2, outlier_factor=10.0), np.random.default_rng(seed), []
    for step in range(STEPS):
        times = sizes * PER_ROW * np.exp(noise * rng.standard_normal(2) - noise**2 / 2)
        for offset, factor in spikes:
            if step == at + offset:
                times[0] = factor * sizes[0] * PER_ROW[0]  # that many times its usual time
        with contextlib.redirect_stderr(io.StringIO()) as warned:
            times = guard(step, times, sizes)
        assert not warned.getvalue()  # inside the factor: accepted, the controller sees it
        obs = controllers.Observation.make(step, sizes, times, global_batch=B)
        new, state = decide(state, obs)
        rows.append(int(sizes[0]))
        sizes = np.asarray(new)
    return np.array(rows)


@functools.cache
def _clean(name, noise, seed):
    return _run(name, noise=noise, seed=seed)


def _excursion(name, spikes, at, noise=0.0, seed=0):
    """(largest distance in rows from the spike-free run, steps outside its dead-band)."""
    clean = _clean(name, noise, seed)
    rows = _run(name, spikes, at, noise, seed)
    away = np.abs(rows - clean)
    return int(away.max()), int((away > DEADBAND * clean).sum())


@pytest.mark.parametrize("name", POLICIES)
def test_one_spike_inside_the_guard_moves_nothing_on_a_quiet_plant(name):
    clean = _run(name)
    # Settled at the bound by step 4: the first decision waits until the steps span
    # `persist` (0.1 s: four steps of 25.6 ms; by step 3 before it).
    assert clean[:4].tolist() == [64] * 4 and clean[4:].tolist() == [96] * (STEPS - 4)
    for at in (5, 10, 20):
        assert _excursion(name, ONE, at) == (0, 0)


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("spikes", [ONE, PAIR], ids=["one", "noisy_neighbour_pair"])
def test_a_spike_inside_the_guard_moves_a_noisy_split_little_and_briefly(name, spikes):
    # 10 % timing noise on both workers, 3 seeds, the spike at 8 points after settling.
    # Before 2026-12-02 the pair moved P's and PI's split by 42 rows (seed 0, step 30) and 37
    # (seed 1, step 14) for 3 steps: the normal step between the spikes read 1.29x and 1.40x
    # its estimate, and three outliers in a row confirmed a change to 5.6x and 4.8x. Now no
    # run moves a row.
    runs = {
        (seed, at): _excursion(name, spikes, at, noise=0.1, seed=seed)
        for seed in range(3)
        for at in range(10, 40, 4)
    }
    far = {k: v for k, v in runs.items() if v[0] > DEADBAND * 96 or v[1] > 2}
    assert not far, far
