"""Virtual clock determinism and measured wall-clock times with injected heterogeneity."""

import numpy as np

from omnilearn_jax.runstore import read_metrics
from omnilearn_jax.train import Trainer
from tests.test_train import smoke_config


def test_virtual_clock_runs_are_byte_identical(tmp_path):
    config = smoke_config()
    config.train.num_steps = 8
    config.train.eval_every = 4
    config.hetero.name = "hl"
    config.hetero.level = 8
    config.hetero.noise = 0.1
    config.cost.noise = 0.05
    config.controller.name = "proportional"
    for name in ("a", "b"):
        Trainer(config, str(tmp_path / name)).run()
    a = (tmp_path / "a" / "metrics.jsonl").read_bytes()
    assert a == (tmp_path / "b" / "metrics.jsonl").read_bytes()
    records = read_metrics(tmp_path / "a")
    times = [r["worker_times"] for r in records if "worker_times" in r]
    assert len(times) == 8 and len({tuple(t) for t in times}) > 1  # noise did vary


def test_wall_clock_measures_an_injected_slow_worker(tmp_path):
    config = smoke_config()
    config.num_workers = config.num_devices = 4
    config.global_batch_size = 64
    config.clock = "wall"
    config.hetero.name = "cores"
    config.hetero.cores = (1.0, 1.0, 0.5, 1.0)  # worker 2 is 2x slower
    config.hetero.inject = 0.004  # seconds per sample at speed 1: sleep dominates compute
    config.controller.name = "proportional"
    config.controller.deadband = 0.1
    config.train.num_steps = 12
    config.train.eval_every = 12
    Trainer(config, str(tmp_path)).run()
    train = [r for r in read_metrics(tmp_path) if "worker_times" in r]
    first = np.array(train[0]["worker_times"])
    assert train[0]["batch_sizes"] == [16, 16, 16, 16]
    ratio = first[2] / np.mean(first[[0, 1, 3]])
    assert 1.6 <= ratio <= 2.4, first
    final = np.array(train[-1]["batch_sizes"])
    share = final[2] / np.mean(final[[0, 1, 3]])
    assert 0.4 <= share <= 0.6, final
    assert final.sum() == 64


def test_per_sample_cost_zero_is_calibrated_on_this_machine(tmp_path):
    import json

    config = smoke_config()
    config.train.num_steps = 2
    config.train.eval_every = 2
    config.cost.per_sample_cost = 0.0
    config.cost.fixed_cost = 0.0
    config.cost.linear = True
    Trainer(config, str(tmp_path)).run()
    resolved = json.loads((tmp_path / "config.json").read_text())["resolved"]
    cost = resolved["per_sample_cost"]
    assert resolved["per_sample_cost_calibrated"] is True
    assert 1e-7 < cost < 1.0  # seconds per sample of a tiny MLP: positive, far below 1 s
    first = read_metrics(tmp_path)[0]
    # Linear model, uniform split of 64 over 8 workers: each worker takes 8 * cost.
    assert np.allclose(first["worker_times"], 8 * cost, rtol=1e-9)
