"""Cost model, virtual clock and analytic helpers."""

import math

import ml_collections
import numpy as np
import pytest

from omnilearn_jax.cluster import (
    CostModel,
    VirtualClock,
    cost_defaults,
    hetero_defaults,
    make_profile,
    ring_allreduce_time,
    unavailable_workers,
    uniform_vs_balanced_reduction,
)
from tests.helpers import assert_mean_one_lognormal


def test_linear_cost_exact():
    model = CostModel.from_config({"linear": True, "per_sample_cost": 0.02}, seed=0)
    sizes = np.array([0, 16, 32, 80])
    speeds = np.array([1.0, 4.0, 8.0, 5.0])
    np.testing.assert_array_equal(model.worker_times(0, sizes, speeds), sizes * 0.02 / speeds)
    # Turning the shape terms off by hand gives the same.
    plain = CostModel(per_sample_cost=0.02, fixed_cost=0.0, overhead=0.0, cliff_batch=0)
    np.testing.assert_array_equal(plain.worker_times(7, sizes, speeds), sizes * 0.02 / speeds)


def test_from_config_takes_every_key():
    values = {
        "per_sample_cost": 0.02,
        "fixed_cost": 1,  # an int where a float is meant: converted
        "overhead": 0.4,
        "cliff_batch": 7,
        "cliff_penalty": 2.5,
        "noise": 0.15,
        "linear": False,
        "latency": 3e-4,
        "bandwidth": 2e8,
    }
    model = CostModel.from_config(values, seed=11)
    assert model == CostModel(**{**values, "fixed_cost": 1.0}, seed=11)
    assert type(model.fixed_cost) is float and type(model.seed) is int
    # Keys left out take the defaults of the config section.
    assert CostModel.from_config({}, seed=0) == CostModel.from_config(cost_defaults(), seed=0)


def test_affine_cost_value_and_zero_samples():
    model = CostModel(per_sample_cost=0.01, fixed_cost=0.1, overhead=0.5)
    t = model.worker_times(0, np.array([0, 10]), np.array([2.0, 2.0]))
    # 0 samples: the worker launches nothing; 10 samples: 0.5 + (0.1 + 0.1) / 2.
    np.testing.assert_allclose(t, [0.0, 0.6])


def test_throughput_rises_then_falls_past_cliff():
    model = CostModel(per_sample_cost=0.01, fixed_cost=0.2, cliff_batch=64, cliff_penalty=1.0)
    table = model.time_table(np.array([1.0, 3.0]), 128)
    assert table.shape == (2, 129)
    b = np.arange(1, 129)
    for row in table:
        throughput = b / row[1:]
        assert np.all(np.diff(throughput[:64]) > 0)  # b = 1..64: amortised fixed cost
        assert np.all(np.diff(throughput[63:]) < 0)  # b = 64..128: past the cliff
    # b = 128 at speed 1: per-sample multiplier 1 + (128 - 64) / 64 = 2.
    assert table[0, 128] == pytest.approx(0.2 + 128 * 0.01 * 2)
    assert table[1, 64] == pytest.approx((0.2 + 0.64) / 3)


def test_time_table_matches_worker_times_without_noise():
    model = CostModel(cliff_batch=40, noise=0.0)
    speeds = np.array([1.0, 2.0, 6.0])
    sizes = np.array([5, 50, 73])
    table = model.time_table(speeds, 128)
    np.testing.assert_array_equal(table[np.arange(3), sizes], model.worker_times(4, sizes, speeds))


def test_cost_noise_deterministic():
    sizes, speeds = np.array([32, 32, 32, 32]), np.array([1.0, 2.0, 3.0, 4.0])
    a = CostModel(noise=0.1, seed=5)
    b = CostModel(noise=0.1, seed=5)
    c = CostModel(noise=0.1, seed=6)
    np.testing.assert_array_equal(
        a.worker_times(11, sizes, speeds), b.worker_times(11, sizes, speeds)
    )
    assert not np.allclose(a.worker_times(11, sizes, speeds), c.worker_times(11, sizes, speeds))
    assert not np.allclose(a.worker_times(11, sizes, speeds), a.worker_times(12, sizes, speeds))
    # Worker k's noise depends on (seed, step, k) only, not on how many workers there are.
    np.testing.assert_array_equal(
        a.worker_times(11, sizes[:2], speeds[:2]), a.worker_times(11, sizes, speeds)[:2]
    )


def test_cost_noise_is_mean_one_lognormal():
    # sigma 0.3: the mean correction -sigma^2 / 2 = -0.045 is 13 standard errors of the log
    # mean over 8000 draws, so dropping it (or any bias of a few %) fails.
    sizes, speeds = np.array([32, 32, 32, 32]), np.array([1.0, 2.0, 3.0, 4.0])
    noisy, sigma = CostModel(noise=0.3, seed=5), 0.3
    clean = CostModel(noise=0.0).worker_times(0, sizes, speeds)
    ratios = np.stack([noisy.worker_times(t, sizes, speeds) / clean for t in range(2000)])
    assert_mean_one_lognormal(ratios, sigma)


def test_lost_worker_time_is_inf():
    model = CostModel()
    t = model.worker_times(0, np.array([10, 0, 5]), np.array([1.0, 0.0, 0.0]))
    assert t[0] > 0 and t[1] == 0 and math.isinf(t[2])
    assert unavailable_workers([10, 0, 5], [1.0, 0.0, 0.0]) == [2]
    with pytest.raises(ValueError, match=r"worker\(s\) \[2\] have speed 0"):
        VirtualClock(3).step(t, batch_sizes=[10, 0, 5], speeds=[1.0, 0.0, 0.0])


def test_allreduce_formula():
    # 4 workers, 100 MB, 1 ms, 1 GB/s: 2*3*1e-3 + 2*3/4 * 0.1 = 0.006 + 0.15.
    assert ring_allreduce_time(1e8, 4, 1e-3, 1e9) == pytest.approx(0.156)
    assert ring_allreduce_time(1e8, 1, 1e-3, 1e9) == 0.0
    model = CostModel(latency=2e-3, bandwidth=5e8)
    assert model.allreduce_time(1e6, 8) == pytest.approx(2 * 7 * 2e-3 + 2 * 7 / 8 * 1e6 / 5e8)
    assert model.allreduce_time(1e6, 8, 0.0, 1e9) == pytest.approx(2 * 7 / 8 * 1e-3)


def test_virtual_clock_step_and_totals():
    clock = VirtualClock(4)
    rec = clock.step(np.array([1.0, 2.0, 4.0, 1.0]), comm_time=0.5)
    assert rec["step_time"] == 4.5
    assert rec["time"] == 4.5
    assert rec["worker_idle"] == [3.0, 2.0, 0.0, 3.0]
    assert rec["idle_fraction"] == pytest.approx(8.0 / (4 * 4.5))
    assert rec["balance"] == pytest.approx(4.0 / 2.0)

    # Worker 0 has no samples: it is idle the whole compute phase and left out of balance.
    rec2 = clock.step(np.array([0.0, 3.0, 3.0, 2.0]), comm_time=1.0, batch_sizes=[0, 40, 40, 48])
    assert rec2["step_time"] == 4.0
    assert rec2["time"] == 8.5
    assert rec2["worker_idle"] == [3.0, 0.0, 0.0, 1.0]
    assert rec2["idle_fraction"] == pytest.approx(4.0 / 16.0)
    assert rec2["balance"] == pytest.approx(3.0 / (8.0 / 3.0))

    tot = clock.totals()
    assert tot["total_time"] == 8.5
    assert tot["steps"] == 2
    assert tot["compute_time"] == [1.0, 5.0, 7.0, 3.0]
    assert tot["idle_time"] == [6.0, 2.0, 0.0, 4.0]
    assert tot["comm_time"] == 1.5
    assert tot["mean_idle_fraction"] == pytest.approx((8 / 18 + 4 / 16) / 2)
    assert tot["idle_fraction"] == pytest.approx(12.0 / (4 * 8.5))


def test_balanced_split_has_no_idle_time():
    speeds = make_profile(
        {"name": "cores", "cores": (1, 1, 2, 4)},
        num_workers=4,
        num_steps=10,
        steps_per_epoch=5,
        seed=0,
    ).speeds(0)
    model = CostModel(linear=True)
    sizes = np.array([16, 16, 32, 64])  # proportional to the speeds
    rec = VirtualClock(4).step(model.worker_times(0, sizes, speeds))
    assert rec["idle_fraction"] == pytest.approx(0.0, abs=1e-12)
    assert rec["balance"] == pytest.approx(1.0)
    assert rec["step_time"] == pytest.approx(128 * 0.01 / 8)
    # The uniform split waits for the slowest worker: 32 * 0.01 / 1, a 50% longer step.
    uniform = VirtualClock(4).step(model.worker_times(0, np.full(4, 32), speeds))
    assert uniform["step_time"] == pytest.approx(0.32)
    assert 1 - rec["step_time"] / uniform["step_time"] == pytest.approx(
        uniform_vs_balanced_reduction(speeds, 128)
    )


def test_time_to_target():
    from omnilearn_jax.run.metrics import time_to_target  # the one the loop uses

    records = [
        {"step": 10, "time": 5.0, "eval_accuracy": 0.4},
        {"step": 20, "time": 9.0, "eval_accuracy": 0.71},
        {"step": 30, "time": 14.0, "eval_accuracy": 0.69},
        {"step": 40, "time": 20.0, "eval_accuracy": 0.8},
    ]
    assert time_to_target(records, 0.7) == 9.0
    assert time_to_target(records, 0.8) == 20.0
    assert time_to_target(records, 0.9) is None
    assert time_to_target([], 0.5) is None
    # Unsorted (merged) records: the earliest hit, not the first listed.
    assert time_to_target(records[::-1], 0.7) == 9.0
    assert time_to_target([*records[1:], {"time": 2.0, "eval_accuracy": float("nan")}], 0.7) == 9.0


def test_uniform_vs_balanced_reduction():
    assert uniform_vs_balanced_reduction((6, 6, 4, 32), 128) == pytest.approx(2 / 3)
    assert uniform_vs_balanced_reduction((12, 12, 12, 12), 128) == pytest.approx(0.0)
    # HL2: uniform 32 / 8 = 4; balanced 128 / 48; 1 - (8/3) / 4 = 1/3.
    assert uniform_vs_balanced_reduction((12, 12, 8, 16), 128) == pytest.approx(1 / 3)


def test_config_dict_sections_and_cli_style_overrides():
    hetero = ml_collections.ConfigDict(hetero_defaults())
    cost = ml_collections.ConfigDict(cost_defaults())
    hetero.name = "hl"
    hetero.level = 8
    hetero.preempt_intervals = (1, 2)
    profile = make_profile(hetero, num_workers=4, num_steps=5, steps_per_epoch=5, seed=0)
    np.testing.assert_allclose(profile.speeds(1), [0.06, 6, 4, 32])
    model = CostModel.from_config(cost, seed=0)
    assert model.worker_times(0, np.array([10]), np.array([2.0]))[0] == pytest.approx(
        (0.05 + 10 * 0.01) / 2
    )


def test_virtual_clock_state_round_trip_continues_exactly():
    """What a checkpoint stores: a clock restored from `state()` continues as the original."""
    clock = VirtualClock(3)
    clock.step(np.array([1.0, 2.5, 0.5]), comm_time=0.25)
    clock.step(np.array([0.0, 3.0, 1.0]), comm_time=0.5, batch_sizes=[0, 4, 4])
    state = clock.state()
    assert {k: np.asarray(v).dtype for k, v in state.items()} == {
        "time": np.float64,
        "steps": np.int64,
        "compute": np.float64,
        "idle": np.float64,
        "comm": np.float64,
        "idle_fraction_sum": np.float64,
    }
    restored = VirtualClock(3)
    restored.load_state({k: np.array(v) for k, v in state.items()})
    assert restored.totals() == clock.totals()
    state["compute"][0] = 99.0  # state() hands out copies: the clock is unchanged
    assert clock.totals()["compute_time"][0] == 1.0
    times = np.array([2.0, 1.0, 1.5])
    assert restored.step(times, comm_time=0.1) == clock.step(times, comm_time=0.1)
    assert restored.totals() == clock.totals()
    assert clock.totals()["steps"] == 3 and clock.totals()["comm_time"] == pytest.approx(0.85)
