"""Each policy's behaviour on the paper's HL8 cluster (cores 6/6/4/32, B = 128) and variants."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import controllers
from controllers import oracle, sim
from controllers.metrics import imbalance

B = 128
OPEN = (("b_min", 0), ("b_max", 0))  # bounds that never bind on HL8
STEPS = 200
NEVER = 10**6  # a "change" past the horizon gives every plant the same shapes (one compile)


@functools.cache
def _controller(name, **kwargs):
    return controllers.make(name, **{**dict(OPEN), **kwargs})


# Controllers are static (cached above, so each compiles once); plants and keys are traced.
_simulate = jax.jit(sim.simulate, static_argnums=0, static_argnames=("global_batch", "num_steps"))


def _plant(level, change=None, **kwargs):
    step, speeds = change or (NEVER, sim.PAPER_CORES[level])
    return sim.paper_plant(level, changes=((step, speeds),), **kwargs)


def _run(name, plant, key=0, **kwargs):
    trace = _simulate(
        _controller(name, **kwargs), plant, global_batch=B, num_steps=STEPS, key=jax.random.key(key)
    )
    sizes = np.asarray(trace.batch_sizes)
    moves = np.flatnonzero(np.any(sizes[1:] != sizes[:-1], axis=-1)) + 1  # steps with new sizes
    return sizes, np.asarray(imbalance(trace.model_times, trace.batch_sizes)), moves


def _settles(imbalances, moves, *, since, limit, max_moves):
    """At most max_moves adjustments from `since`, and within `limit` from the last one on."""
    moves = moves[moves >= since]
    last = moves[-1] if len(moves) else since
    return len(moves) <= max_moves and bool(np.all(imbalances[last:] <= limit))


def test_proportional_balances_hl8_within_three_adjustments():
    sizes, imb, moves = _run("proportional", _plant(8))
    assert imb[0] > 1.5  # uniform start: the 32-core worker idles most of the step
    assert _settles(imb, moves, since=0, limit=1.10, max_moves=3)
    np.testing.assert_array_equal(sizes[-1], [16, 16, 11, 85])  # 85.3 * 32 cores rounded


def test_pi_balances_hl8_within_five_percent():
    _, imb, moves = _run("pi", _plant(8))
    assert _settles(imb, moves, since=0, limit=1.05, max_moves=3)


def test_oracle_is_optimal_from_its_first_step():
    sizes, imb, moves = _run("oracle", _plant(8))
    # Hand-checked optimum: T* = 86/32 = 2.6875 s; 16/6, 16/6, 10/4 are all below it.
    np.testing.assert_array_equal(sizes[1:], np.tile([16, 16, 10, 86], (STEPS - 1, 1)))
    assert moves.tolist() == [1]


def test_static_uniform_never_moves():
    sizes, imb, moves = _run("static", _plant(8, noise=0.1))
    assert moves.size == 0 and np.all(sizes == 32)
    assert imb[-1] == pytest.approx((32 / 4) / np.mean([32 / 6, 32 / 6, 32 / 4, 32 / 32]))


def test_static_explicit_and_capacity_splits():
    state = controllers.make("static", sizes=(0, 8, 8, 48)).init(4, 64)
    np.testing.assert_array_equal(state.sizes, [0, 8, 8, 48])
    state = controllers.make("static", capacities=(6, 6, 4, 32)).init(4, 128)
    np.testing.assert_array_equal(state.sizes, [16, 16, 11, 85])
    with pytest.raises(ValueError, match=r"sum to 60, not the global batch 64"):
        controllers.make("static", sizes=(0, 8, 4, 48)).init(4, 64)
    with pytest.raises(ValueError, match=r"has 3 entries for 4 workers"):
        controllers.make("static", sizes=(16, 16, 32)).init(4, 64)
    with pytest.raises(ValueError, match=r"nonnegative integers"):
        controllers.make("static", sizes=(-1, 25, 20, 20))


def test_proportional_rebalances_after_speed_change_in_one_adjustment():
    plant = _plant(8, change=(100, (6.0, 6.0, 4.0, 8.0)))
    sizes, imb, moves = _run("proportional", plant)
    assert imb[100] > 1.5  # the 32-core worker lost 3/4 of its speed under 85 samples
    after = moves[moves >= 100]
    # The jump detector waits for `confirm` = 3 samples, then one move lands on the optimum.
    assert after.tolist() == [103]
    np.testing.assert_array_equal(sizes[-1], [32, 32, 21, 43])
    assert _settles(imb, moves, since=100, limit=1.10, max_moves=3)


def test_jump_detection_off_takes_more_adjustments():
    plant = _plant(8, change=(100, (6.0, 6.0, 4.0, 8.0)))
    _, imb, moves = _run("proportional", plant, jump=0.0)
    assert (moves >= 100).sum() >= 3  # the lagging EWMA is chased in several partial moves


def test_deadband_keeps_noisy_static_plant_quiet():
    plant = sim.paper_plant(8, noise=0.1)

    def adjustments(deadband, key):
        controller = controllers.make("proportional", deadband=deadband, **dict(OPEN))
        sizes = sim.simulate(controller, plant, global_batch=B, num_steps=1000, key=key).batch_sizes
        return jnp.any(sizes[1:] != sizes[:-1], axis=-1).sum()

    # The dead-band is traced here: one compile serves both values (vmapped over gains).
    deadbands = jnp.repeat(jnp.array([0.1, 0.02]), 4)
    keys = jax.random.split(jax.random.key(0), 8)
    counts = np.asarray(jax.jit(jax.vmap(adjustments))(deadbands, keys))
    # 10 % log-normal noise per step; default dead-band 0.1, smoothing 0.05 (docs/controllers.md).
    assert counts[:4].max() <= 8
    # A band inside the noise chases it, though less than it did (87-115 moves) before moves
    # had to exceed the estimates' standard error (controllers/noise.py): 28-43 now.
    assert counts[4:].min() >= 20


# PI beating P under a fixed per-step overhead is test_controllers_sim.py's
# test_pi_beats_p_under_fixed_overhead_vmapped_over_gains (ki = 0 there is P, as shown here).


def test_pi_without_integral_is_proportional():
    plant = _plant(4, noise=0.1, overhead=0.3, change=(60, (9.0, 9.0, 24.0, 6.0)))
    p_sizes, _, _ = _run("proportional", plant)
    pi_sizes, _, _ = _run("pi", plant, kp=1.0, ki=0.0)
    np.testing.assert_array_equal(p_sizes, pi_sizes)


def test_memory_cliff_lowers_b_max_and_stops_oscillation():
    # Worker 3 is 5x faster but its throughput falls 3x above 60 samples (out of memory).
    speeds = np.array([1.0, 1.0, 1.0, 5.0])

    def times(sizes):
        base = sizes / speeds
        return np.where((np.arange(4) == 3) & (sizes > 60), 3 * base, base)

    def run(cliff_drop):
        controller = _controller("proportional", cliff_drop=cliff_drop)
        update, state = jax.jit(controller.update), controller.init(4, B)
        sizes, history = np.asarray(state.sizes), []
        for step in range(80):
            obs = controllers.Observation.make(step, sizes, times(sizes), global_batch=B)
            sizes, state = update(state, obs)
            sizes = np.asarray(sizes)
            history.append(sizes)
        return np.array(history), state

    history, state = run(0.2)
    # The first move (decided on the second sample, when the noise is known) overfills the
    # fast worker
    assert history[0, 3] == 32 and history[1, 3] == 80
    assert state.tracker.cliff.hi[3] == 32  # ... which then gets its previous size as b_max
    assert np.all(history[20:] == history[-1]) and history[-1, 3] <= 60
    without, _ = run(0.0)
    assert np.any(without[20:, 3] > 60)  # no cliff rule: it keeps climbing back over the cliff


@pytest.mark.parametrize("seed", range(3))
def test_oracle_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    workers, total, lo, hi = 3, 12, 1, 8
    # Nondecreasing rows with a fixed cost and uneven increments (not just linear).
    steps = rng.exponential(size=(workers, total)) * rng.uniform(0.5, 3, size=(workers, 1))
    table = np.concatenate([np.zeros((workers, 1)), 0.3 + np.cumsum(steps, 1)], 1)
    controller = _controller("oracle", b_min=lo, b_max=hi)
    obs = controllers.Observation.make(0, [4, 4, 4], [1, 1, 1], time_table=table)
    sizes, _ = jax.jit(controller.update)(controller.init(workers, total), obs)
    best = min(
        max(table[k, b] for k, b in enumerate(split))
        for split in itertools.product(range(lo, hi + 1), repeat=workers)
        if sum(split) == total
    )
    assert int(np.sum(sizes)) == total
    assert max(table[k, b] for k, b in enumerate(np.asarray(sizes))) == pytest.approx(best)


_solve = jax.jit(oracle.solve_min_max)


def _random_table(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A nondecreasing table (3 workers, B = 10) with ties, and bounds that may bind."""
    rng = np.random.default_rng(seed)
    workers, total = 3, 10
    while True:
        lo = rng.integers(0, 4, workers)
        hi = lo + rng.integers(0, 7, workers)
        if lo.sum() <= total <= hi.sum():
            break
    steps = rng.integers(0, 3, (workers, total)) * rng.choice([0.5, 1.0, 2.0], (workers, 1))
    table = np.concatenate([np.zeros((workers, 1)), 0.25 + np.cumsum(steps, 1)], 1)
    return table, lo, hi


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_solve_min_max_is_exact_within_bounds_on_random_tables(seed):
    """Nondecreasing tables with ties and bounds that bind: the split stays in [lo, hi],
    sums to B, and its slowest time is the brute-force optimum."""
    table, lo, hi = _random_table(seed)
    workers, total = table.shape[0], table.shape[1] - 1
    sizes = np.asarray(_solve(jnp.asarray(table), jnp.asarray(lo), jnp.asarray(hi)))
    best = min(
        max(table[k, b] for k, b in enumerate(split))
        for split in itertools.product(*(range(lo[k], hi[k] + 1) for k in range(workers)))
        if sum(split) == total
    )
    assert sizes.sum() == total and np.all(sizes >= lo) and np.all(sizes <= hi), (sizes, lo, hi)
    assert max(table[k, b] for k, b in enumerate(sizes)) == best, (seed, table, lo, hi, sizes)


_spread = jax.jit(lambda table, lo, hi: oracle.solve_min_max(table, lo, hi, spread=True))


def _sorted_times(table, sizes) -> list:
    return sorted((float(table[k, b]) for k, b in enumerate(sizes)), reverse=True)


def test_the_oracle_balances_the_others_when_a_worker_at_its_bound_sets_the_optimum():
    """The measured case (docs/cluster_quotas.md): speeds 0.677/0.672/1.0/0.135, cost 0.05 +
    0.01 b, bounds 16..96. The eighth-core worker at 16 rows sets the slowest time whatever
    the rest do; the plain solve then fills worker 0 up to it ([80, 16, 16, 16]), the
    oracle's solve balances the other three instead, at the same slowest time."""
    speeds = np.array([0.677, 0.672, 1.0, 0.135])
    b = np.arange(129)[None, :]
    table = jnp.asarray(np.where(b > 0, (0.05 + 0.01 * b) / speeds[:, None], 0.0), jnp.float32)
    lo, hi = jnp.full(4, 16), jnp.full(4, 96)
    plain = np.asarray(_solve(table, lo, hi))
    spread = np.asarray(_spread(table, lo, hi))
    assert plain.tolist() == [80, 16, 16, 16]
    assert spread.tolist() == [32, 31, 49, 16] and spread.sum() == 128
    t_plain, t_spread = _sorted_times(table, plain), _sorted_times(table, spread)
    assert t_spread[0] == t_plain[0]  # the same optimum, set by worker 3
    assert t_spread[1] < 0.55 < 1.25 < t_plain[1]  # worker 0 no longer near it
    controller = _controller("oracle", b_min=16, b_max=96)
    obs = controllers.Observation.make(0, [32] * 4, [1] * 4, time_table=np.asarray(table))
    sizes, _ = jax.jit(controller.update)(controller.init(4, 128), obs)
    assert np.asarray(sizes).tolist() == [32, 31, 49, 16]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_spread_solve_keeps_the_optimum_and_is_never_worse_than_the_plain_one(seed):
    """Random nondecreasing tables with ties and binding bounds: the spread split has the
    brute-force optimum as its slowest time, and its times sorted from the slowest are
    never lexicographically larger than the plain solve's."""
    table, lo, hi = _random_table(seed)
    total = table.shape[1] - 1
    args = (jnp.asarray(table), jnp.asarray(lo), jnp.asarray(hi))
    plain, spread = np.asarray(_solve(*args)), np.asarray(_spread(*args))
    assert spread.sum() == total and np.all(spread >= lo) and np.all(spread <= hi)
    assert _sorted_times(table, spread)[0] == _sorted_times(table, plain)[0]
    assert _sorted_times(table, spread) <= _sorted_times(table, plain)


def test_the_oracle_solves_under_the_bounds_a_devices_capacity_sets(monkeypatch):
    """capacity=64 reached the policies only as a cut of their split (HL8: [22, 21, 21, 64]
    where the oracle told b_max=64 gives [24, 24, 16, 64]); the trainer's bounds now reach
    the policy where they are tighter than the config's."""
    from configs import paper_bsp
    from omnilearn_jax.config import schema

    config = paper_bsp.get_config("runlocal,model=mlp,hetero=hl8,controller=oracle")
    w, b = config.num_workers, config.global_batch_size
    lo, hi = controllers.resolve_bounds(w, b, config.controller.b_min, config.controller.b_max)
    speeds = jnp.array([6.0, 6.0, 4.0, 32.0])
    obs = controllers.Observation.make(
        0,
        jnp.full(w, b // w, jnp.int32),
        jnp.ones(w),
        speeds,
        controllers.linear_time_table(speeds, b),
    )

    def split(policy):
        shares = jax.jit(policy.update)(policy.init(w, b), obs)[0]  # as the trainer runs it
        return np.asarray(controllers.allocate(shares, b, lo, jnp.minimum(hi, 64)))

    capped = split(schema.make_controller(config, (lo, jnp.minimum(hi, 64))))
    config.controller.b_max = 64
    told = split(schema.make_controller(config))
    np.testing.assert_array_equal(capped, told)
    assert capped[3] == 64 and capped.sum() == b
    # Bounds no tighter than the config's leave the policy as the config builds it.
    config.controller.b_max = 96
    assert schema.make_controller(config, (lo, hi)) is schema.make_controller(config)
    # The trainer builds its policy so: with capacity 64, each worker's bound is 64.
    from omnilearn_jax.data import datasets
    from omnilearn_jax.run.train import Trainer

    built = []
    monkeypatch.setattr(schema, "make_controller", lambda c, bounds=None: built.append(bounds))

    def stop(section):
        raise StopIteration  # the rest of the trainer is not needed here

    monkeypatch.setattr(datasets, "load", stop)
    config.capacity, config.num_devices = 64, 4
    with pytest.raises(StopIteration):
        Trainer(config, "unused")
    np.testing.assert_array_equal(built[0][1], [64, 64, 64, 64])


def _moves(sizes: np.ndarray) -> list[int]:
    return (np.flatnonzero(np.any(sizes[1:] != sizes[:-1], -1)) + 1).tolist()


def test_pi_takes_kp_of_the_proportional_move():
    """kp=0.5 takes half of OmniLearn's move at each decision (HL8, no noise): from uniform
    [32]*4 half-way to [16, 16, 11, 85], then on at the next decisions (every third step:
    the move's trial, then the response). A kp that did nothing passed every test."""
    c = controllers.make("pi", b_min=0, b_max=0, kp=0.5, ki=0.0)
    trace = sim.simulate(c, sim.paper_plant(8), global_batch=B, num_steps=40, key=jax.random.key(0))
    sizes = np.asarray(trace.batch_sizes)
    moves = _moves(sizes)
    assert moves[:4] == [2, 5, 8, 11]
    assert sizes[moves[0]].tolist() == [24, 24, 21, 59]


def test_pi_integral_never_asks_beyond_the_bounds():
    """Anti-windup: with the fastest worker at b_max (48) and a fixed cost, anchor + ki *
    integral stays within the bounds at every step (without the clamp, 33.75 rows beyond)."""
    speeds = np.array([6.0, 6.0, 4.0, 32.0])
    c = controllers.make("pi", b_min=8, b_max=48, ki=0.5)
    update, state = jax.jit(c.update), c.init(4, B)
    sizes, beyond = np.asarray(state.sizes), []
    for step in range(120):
        times = np.where(sizes > 0, 0.3 + sizes / speeds, 0.0)
        new, state = update(state, controllers.Observation.make(step, sizes, times, global_batch=B))
        sizes = np.asarray(new)
        beyond.append(float(np.max(np.asarray(state.anchor + 0.5 * state.integral) - 48)))
    # The fast worker held at b_max, its excess shared in proportion to the others' speeds:
    # 0.3 + 30/6 = 0.3 + 20/4 = 5.3 s a step ([29, 29, 22, 48] spread it evenly: 5.8 s).
    assert max(beyond) <= 1e-4 and sizes.tolist() == [30, 30, 20, 48]


def test_a_worker_never_measured_is_given_the_average_share():
    """A worker whose time never comes (inf) is assumed average, so it is probed, not
    starved: 32 of 128 rows beside speeds 6, 6, 4 ([38, 38, 26, 26] if counted as zero)."""
    speeds = np.array([6.0, 6.0, 4.0, 1.0])
    c = controllers.make("proportional", b_min=0, b_max=0)
    update, state = jax.jit(c.update), c.init(4, B)
    sizes = np.asarray(state.sizes)
    for step in range(6):
        times = sizes / speeds
        times[3] = np.inf
        new, state = update(state, controllers.Observation.make(step, sizes, times, global_batch=B))
        sizes = np.asarray(new)
    assert sizes.tolist() == [36, 36, 24, 32]


def test_every_decides_on_every_nth_step_only():
    """`every=4`: the split moves only on steps that are multiples of 4, also after a speed
    change (step 40); a cadence counted from 1 after each decision moved at 43."""
    plant = sim.paper_plant(8, changes=((40, (6.0, 6.0, 4.0, 8.0)),))
    c = controllers.make("proportional", b_min=0, b_max=0, every=4)
    trace = sim.simulate(c, plant, global_batch=B, num_steps=80, key=jax.random.key(0))
    assert _moves(np.asarray(trace.batch_sizes)) == [4, 44]
