"""Measured cost curves: the curve's formula, JSON replay, the clock it drives, the profile of
the real step, and its reuse from the run directory."""

import json

import numpy as np
import pytest

from omnilearn_jax import cluster
from omnilearn_jax.cluster import curve as curve_lib
from omnilearn_jax.cluster.measure import run_curve
from omnilearn_jax.run import cgroups

# Flat up to 16 rows (the device is not yet busy), then 0.01 s a row.
KNOTS = cluster.CostCurve((8, 16, 32, 64), (0.16, 0.16, 0.32, 0.64), {"platform": "test"})


def test_curve_interpolates_holds_below_and_extends_past_its_knots():
    t = KNOTS.time([0, 1, 8, 12, 24, 64, 80])
    # 0 rows: nothing runs; below the first knot the smallest block still runs; between
    # knots linear; past the last knot the last slope (0.01 s a row) continues.
    np.testing.assert_allclose(t, [0.0, 0.16, 0.16, 0.16, 0.24, 0.64, 0.80])


def test_curve_json_round_trip_and_errors_name_the_file(tmp_path):
    path = str(tmp_path / "c.json")
    KNOTS.save(path)
    again = cluster.load_curve(path)
    assert again == KNOTS
    assert json.loads((tmp_path / "c.json").read_text())["format"] == curve_lib.FORMAT
    (tmp_path / "bad.json").write_text('{"format": "x"}')
    with pytest.raises(ValueError, match="bad.json: not a cost curve"):
        cluster.load_curve(str(tmp_path / "bad.json"))
    with pytest.raises(ValueError, match="increasing"):
        cluster.CostCurve((8, 8), (1.0, 2.0))


def test_clock_is_curve_over_speed_with_a_memory_jump():
    cost = cluster.CostModel(curve=KNOTS, memory_limits=(0, 40), memory_factor=3.0, overhead=0.01)
    times = cost.worker_times(0, np.array([24, 48]), np.array([2.0, 4.0]))
    # Worker 0: 0.24 / 2 + 0.01. Worker 1 is past its limit of 40: 0.48 * 3 / 4 + 0.01.
    np.testing.assert_allclose(times, [0.13, 0.37])
    table = cost.time_table(np.array([2.0, 4.0]), 64)
    np.testing.assert_allclose(table[:, [24, 40, 41]], [[0.13, 0.21, 0.215], [0.07, 0.11, 0.3175]])
    with pytest.raises(ValueError, match="2 entries for 3 workers"):
        cost.worker_times(0, np.ones(3, int), np.ones(3))


def test_measure_takes_the_median_and_makes_times_nondecreasing_by_pooling():
    calls = []
    noisy = iter([9.0, 1.0, 5.0, 2.0, 9.0, 3.0, 0.5, 1.5, 2.5, 9.0, 9.0])

    def run_rows(rows):
        calls.append(rows)
        return next(noisy)

    c = cluster.measure_curve(run_rows, [16, 8], repeats=3, source={"model": "m"})
    assert calls == [8, 8, 8, 8, 16, 16, 16, 16]  # one untimed call, then three timed
    # Medians: 8 rows -> 2.0 (of 1, 5, 2); 16 rows -> 1.5 (of 3, .5, 1.5): out of order,
    # so both take their mean 1.75.
    assert c.batch_sizes == (8, 16) and c.seconds == (1.75, 1.75)
    np.testing.assert_allclose(
        curve_lib.nondecreasing(np.array([1.0, 3.0, 2.0, 2.0, 5.0, 4.0])),
        [1.0, 7 / 3, 7 / 3, 7 / 3, 4.5, 4.5],
    )
    assert c.source["model"] == "m" and c.source["repeats"] == 3


def test_a_run_profiles_its_step_keeps_the_curve_and_reuses_it(tmp_path, monkeypatch):
    """cost.curve=measure times the real step at each bucket through Steps.run_local; the
    curve lands in the run directory and drives the clock; asked again on the same
    directory (as a resumed run's Trainer asks) it reads it back instead of measuring again."""
    from omnilearn_jax.cluster import measure
    from omnilearn_jax.run.train import Trainer
    from tests.test_train import smoke_config

    config = smoke_config()
    config.num_workers, config.num_devices = 2, 1  # one device: fewer programs to compile
    config.cost.curve = "measure"
    config.cost.memory_limits = (0, 4)
    config.cost.memory_factor = 5.0
    trainer = Trainer(config, str(tmp_path))
    kept = cluster.load_curve(str(tmp_path / curve_lib.RUN_FILE))
    assert kept.batch_sizes == trainer.layout.buckets
    assert all(0 < s < 10 for s in kept.seconds)  # a tiny MLP: well under 10 s a block
    assert kept.source["platform"] == "cpu" and kept.source["repeats"] == 5
    # The virtual timer's cost model (what each step's worker_times come from): uniform split,
    # 32 rows each at speed 1, so the one device computes its 64-row bucket and each worker
    # is charged half of it; the second worker is past its limit of 4 rows.
    assert trainer.timer.cost.layout == trainer.layout and 64 in trainer.layout.buckets
    times = trainer.timer.cost.worker_times(0, np.full(2, 32), trainer.timer.speeds(0))
    np.testing.assert_allclose(times, kept.time(64) / 2 * np.array([1.0, 5.0]), rtol=1e-9)
    assert trainer.resolved_config()["resolved"]["cost_curve"] == curve_lib.RUN_FILE
    # The quotas a launcher gave its processes are recorded (none here; then 1 and 0.25).
    assert trainer.resolved_config()["resolved"]["cpu_quota"] == []
    monkeypatch.setenv(cgroups.QUOTAS_ENV, "1,0.25")
    assert trainer.resolved_config()["resolved"]["cpu_quota"] == [1.0, 0.25]

    monkeypatch.setattr(measure, "measure_curve", lambda *a, **k: pytest.fail("measured again"))
    assert run_curve(trainer) == kept  # what a resumed run's Trainer calls


def test_the_curves_config_replays_the_shipped_cpu_curve():
    from configs import curves
    from omnilearn_jax.config.checks import check_config

    config = curves.get_config("limit=64,controller=oracle")
    check_config(config)
    shipped = cluster.load_curve(curves.CURVES["resnet18"])
    assert shipped.source["platform"] == "cpu" and shipped.batch_sizes[-1] == 128
    cost = cluster.CostModel.from_config(config.cost, seed=0)
    assert cost.curve == shipped and config.cost.overhead == 0.0
    # Noise-free table at speed 1: the fastest worker (index 3) past its 64-row limit takes
    # three times the curve; the others never jump.
    table = cost.time_table(np.ones(4), 128)
    np.testing.assert_allclose(table[:, 65], shipped.time(65) * np.array([1, 1, 1, 3]))
    np.testing.assert_allclose(table[:, 64], shipped.time(64))


def test_a_resume_whose_measured_curve_is_gone_is_refused_not_measured_again(tmp_path):
    """cost_curve.json deleted from a run measured with cost.curve=measure: a resume
    measured the machine again, and the clock changed where the run resumed."""
    from types import SimpleNamespace

    import ml_collections

    config = ml_collections.ConfigDict({"cost": {"curve": "measure"}})
    trainer = SimpleNamespace(config=config, workdir=str(tmp_path), resuming=True)
    with pytest.raises(ValueError, match=r"measured cost curve \(cost_curve.json\) is gone"):
        run_curve(trainer)
