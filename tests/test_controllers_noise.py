"""Timing noise in the throughput policies (controllers/noise.py, issue 26): a move must be
evidence, not noise. The two-process replay is tests/test_identical_devices.py."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import controllers
from controllers import noise


def test_common_factor_is_the_median_ratio_of_the_measured_workers_nearer_one():
    ratios = jnp.array([2.0, 4.0, 100.0, 0.5, 0.9])
    odd = noise.common_factor(ratios, jnp.array([True, True, False, True, False]))
    # Of the two middle values (2 and 0.9, or 2 and 4), the one nearer 1.
    even = noise.common_factor(ratios, jnp.array([True, True, False, True, True]))
    pair = noise.common_factor(ratios, jnp.array([True, True, False, False, False]))
    alone = noise.common_factor(ratios, jnp.array([False, False, True, False, False]))
    assert [float(x) for x in (odd, even, pair, alone)] == pytest.approx([2.0, 0.9, 2.0, 1.0])


def test_move_error_is_smaller_for_the_larger_share():
    # sigma 0.2 and 0.1; sq_weight / weight^2 = 1/4: standard errors 0.1 and 0.05.
    n = noise.init(2)._replace(
        sq_weight=jnp.array([0.25, 0.25]),
        var_sum=jnp.array([0.04, 0.01]),
        var_weight=jnp.array([1.0, 1.0]),
    )
    error = noise.move_error(n, jnp.ones(2), jnp.array([0.25, 0.75]))
    # (3/4)^2 (0.1^2 + 0.05^2) and (1/4)^2 (0.05^2 + 0.1^2)
    np.testing.assert_allclose(error, [0.0839, 0.02795], rtol=1e-3)


@functools.cache
def _update(name):
    controller = controllers.make(name)
    return controller, jax.jit(controller.update)


def _neighbour(name, seed, steps=300):
    """Four identical workers (128 rows), time proportional to the rows; worker 3 has 50 %
    log-normal timing noise, the others 5 %. Returns (largest distance of a batch from
    uniform, relative; number of steps whose split changed)."""
    controller, update = _update(name)
    state, sizes = controller.init(4, 128), np.full(4, 32)
    rng, sigma = np.random.default_rng(seed), np.array([0.05, 0.05, 0.05, 0.5])
    worst, moves = 0.0, 0
    for step in range(steps):
        times = sizes / 12.0 * np.exp(sigma * rng.standard_normal(4) - sigma**2 / 2)
        obs = controllers.Observation.make(step, sizes, times, global_batch=128)
        new, state = update(state, obs)
        new = np.asarray(new)
        moves += int(np.any(new != sizes))
        sizes = new
        worst = max(worst, float(np.abs(sizes - 32).max() / 32))
    return worst, moves


@pytest.mark.parametrize("name", ["proportional", "pi"])
def test_a_noisy_neighbour_moves_the_split_little_and_seldom(name):
    # Before the noise gate (measured 2026-12-01): 18-32 moves a run (P) and 23-34 (PI),
    # batches 44-122 % from uniform. Now seeds 0 and 1 never move; in 2 and 3 the noisy
    # worker's first samples happen to agree, it looks quiet, and the split moves early
    # (P: 5 moves in all, PI: 17).
    runs = [_neighbour(name, seed) for seed in range(4)]
    assert max(w for w, _ in runs) <= 0.25, runs
    assert sum(m for _, m in runs) <= {"proportional": 6, "pi": 20}[name], runs
