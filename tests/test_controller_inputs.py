"""Inputs the controller pieces refused late, obscurely or not at all, and edge cases they
got wrong (each test failed before its fix)."""

import numpy as np
import pytest

import controllers
from controllers import metrics, sim
from controllers.base import resolve_bounds
from controllers.registry import RegistrationError, register


def _run(name: str, steps: int = 60, **kwargs) -> np.ndarray:
    c = controllers.make(name, b_min=0, b_max=0, persist=0.0, **kwargs)
    trace = sim.simulate(c, sim.paper_plant(8), global_batch=128, num_steps=steps)
    return np.asarray(trace.batch_sizes)


def test_pi_needs_a_p_move_to_move_at_all():
    # kp=0 re-anchored at the current sizes at every firing of the dead-band and reset the
    # integral there, so no ki ever moved a row: refused now.
    with pytest.raises(ValueError, match=r"pi: kp must be a number in \(0, 2\], got 0"):
        controllers.make("pi", kp=0, ki=0.5)
    sizes = _run("pi", kp=0.5, ki=0.5)
    assert sizes[-1].tolist() != [32] * 4 and sizes[-1].sum() == 128


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        ("proportional", {"deadband": "0.1"}, "deadband must be >= 0, got '0.1'"),
        ("proportional", {"smoothing": "0.05"}, r"smoothing must be in \(0, 1\], got '0.05'"),
        ("pi", {"ki": "0.1"}, r"ki must be a number in \[0, 2\], got '0.1'"),
    ],
)
def test_numbers_given_as_strings_are_refused_at_once(name, kwargs, message):
    # float("0.1") passed the checks, and the policy failed at its first update
    with pytest.raises(ValueError, match=message):
        controllers.make(name, **kwargs)
    controllers.make(name, **{k: float(v) for k, v in kwargs.items()})  # the number is fine
    controllers.make(name, **{k: np.float32(v) for k, v in kwargs.items()})


@pytest.mark.parametrize(
    "b_min, b_max", [(-2, 0), (0, -7), (2.7, 0), (0, float("nan")), (float("inf"), 0)]
)
def test_bounds_are_whole_rows_or_the_sentinels(b_min, b_max):
    # -7 had meant the paper's bound, 2.7 became 2, NaN and inf raised a cast's error
    with pytest.raises(ValueError, match=r"must be a whole number of rows >= 0, or -1"):
        resolve_bounds(4, 128, b_min, b_max)
    lo, hi = resolve_bounds(4, 128, -1, 0)
    assert lo.tolist() == [16] * 4 and hi.tolist() == [128] * 4
    assert resolve_bounds(4, 128, 2.0, np.array([40, 40, 40, 40]))[0].tolist() == [2] * 4


@pytest.mark.parametrize("name", ["a,b", " pad ", "two words", "tab\t"])
def test_a_name_that_named_cannot_select_is_refused(name):
    # `named` splits on commas and strips spaces: "a,b" registered and could never be chosen
    with pytest.raises(RegistrationError, match="letters, digits"):
        register(name)


def test_a_per_worker_overhead_is_each_workers_own():
    plant = sim.make_plant([1.0, 2.0, 4.0], overhead=[0.5, 0.0, 0.0])
    table = np.asarray(sim.plant_table(plant, plant.speeds[0], 8))
    assert table[:, 2].tolist() == pytest.approx([2.5, 1.0, 0.5])  # 0.5 + 2/1, 2/2, 2/4
    assert table[:, 0].tolist() == [0.0, 0.0, 0.0]
    small = sim.make_plant([1.0, 2.0, 4.0], overhead=[0.5, 0.0, 0.0])  # W = B + 1 = 3
    assert np.asarray(sim.plant_table(small, small.speeds[0], 2))[0].tolist() == [0, 1.5, 2.5]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"overhead": -1.0}, "overhead must be >= 0"),
        ({"overhead": [0.1, 0.2]}, "overhead must be a number or one a worker"),
        ({"limits": 4, "limit_factor": 0.3}, r"limit_factor .* must be >= 1"),
        ({"curve": ((0.0, 8.0), (4.0, 1.0))}, "curve's times must be >= 0 and never fall"),
    ],
)
def test_a_plant_whose_time_falls_with_the_batch_is_refused(kwargs, message):
    # the oracle, the metrics' yardstick, is optimal only on tables that never fall
    with pytest.raises(ValueError, match=message):
        sim.make_plant([1.0, 2.0, 4.0], **kwargs)


def test_the_steady_state_tail_stays_within_the_steps_from_start():
    c = controllers.make("proportional", b_min=0, b_max=0, persist=0.0)
    plant = sim.paper_plant(8)
    trace = sim.simulate(c, plant, global_batch=128, num_steps=30)
    best = metrics.optimal_step_times(trace, plant, global_batch=128, b_min=0, b_max=0)
    settled = float(metrics.control_metrics(trace, best, tail=10).steady_state_imbalance)
    # From step 25 on, a tail of 100 is those 5 settled steps, not the unbalanced first ones.
    late = float(metrics.control_metrics(trace, best, start=25, tail=100).steady_state_imbalance)
    assert late == pytest.approx(settled)
    whole = float(metrics.control_metrics(trace, best, tail=100).steady_state_imbalance)
    assert whole > settled + 1e-3  # the whole trace's tail does hold the first steps
