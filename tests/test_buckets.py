"""Capacity buckets: a padded step sized to the busiest device, with no compile after warm-up
and the same gradients as one fixed capacity."""

import os
import sys

import jax
import numpy as np
import pytest

from omnilearn_jax import masking
from omnilearn_jax.compiles import CompileCounter
from omnilearn_jax.runstore import read_metrics
from omnilearn_jax.train import Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def smoke_config(**overrides):
    sys.path.insert(0, ROOT)
    from configs import smoke

    config = smoke.get_config()
    for key, value in overrides.items():
        section, _, leaf = key.replace("__", ".").rpartition(".")
        (config[section] if section else config)[leaf] = value
    return config


def _layout(capacity=96, workers=4, devices=4):
    return masking.make_layout(
        "padded", num_workers=workers, num_devices=devices, capacity=capacity, micro_batch=0
    )


def test_bucket_capacities_span_the_uniform_share_to_the_full_capacity():
    caps = {
        n: [lay.capacity for lay in masking.bucket_layouts(_layout(), 128, n)] for n in (1, 2, 3, 4)
    }
    assert caps == {1: [96], 2: [32, 96], 3: [32, 64, 96], 4: [32, 56, 80, 96]}
    buckets = masking.bucket_layouts(_layout(), 128, 3)
    assert masking.pick_layout(buckets, np.array([32, 32, 32, 32])).capacity == 32
    assert masking.pick_layout(buckets, np.array([31, 31, 33, 33])).capacity == 64
    assert masking.pick_layout(buckets, np.array([10, 10, 20, 88])).capacity == 96
    # Two workers a device: the device's rows decide, not one worker's.
    two = masking.bucket_layouts(_layout(capacity=96, workers=8), 128, 3)
    assert masking.pick_layout(two, np.array([16, 17, 16, 15, 16, 16, 16, 16])).capacity == 64
    # A capacity over B: no device can hold more than B rows, so no bucket above B.
    over = masking.bucket_layouts(_layout(capacity=200), 128, 3)
    assert [lay.capacity for lay in over] == [32, 80, 128]
    assert masking.bucket_layouts(_layout(capacity=200), 128, 1)[0].capacity == 200
    with pytest.raises(ValueError, match="needs layout=padded"):
        lay = masking.make_layout("micro", num_workers=4, num_devices=4, capacity=96, micro_batch=8)
        masking.bucket_layouts(lay, 128, 2)


def test_buckets_give_the_gradient_of_one_capacity_and_never_compile_after_warm_up(tmp_path):
    one = Trainer(smoke_config(), str(tmp_path / "one"))
    many = Trainer(smoke_config(capacity_buckets=3), str(tmp_path / "many"))
    assert [lay.capacity for lay in many.layouts] == [8, 40, 64]
    speeds = many.timer.speeds(0)
    uniform = np.full(8, 8, np.int32)
    assert many.warm_up(0, uniform, speeds) == 3
    rng = np.random.default_rng(3)
    splits = [rng.multinomial(64, rng.dirichlet(np.ones(8) * a)) for a in (50.0, 2.0, 0.3)]
    splits += [uniform, np.eye(8, dtype=np.int64)[5] * 64]
    one.state, _ = one.steps.train(  # compiles the single-capacity trainer's step
        one.placement.replicate(jax.tree.map(np.array, one.state)), one.batch(0, uniform)
    )
    one.state = one.placement.replicate(jax.tree.map(np.array, many.state))
    used = set()
    with CompileCounter() as compiles:
        for step, sizes in enumerate(splits):
            sizes = np.asarray(sizes, np.int32)
            batch = many.batch(step, sizes)
            used.add(batch["x"].shape[2])
            many.state, m_many = many.steps.train(many.state, batch)
            one.state, m_one = one.steps.train(one.state, one.batch(step, sizes))
            diff = max(
                float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                for a, b in zip(
                    jax.tree.leaves(many.state.params),
                    jax.tree.leaves(one.state.params),
                    strict=True,
                )
            )
            assert diff <= 1e-6, (sizes, diff)  # the same update, up to float rounding
            assert abs(float(m_many["loss"]) - float(m_one["loss"])) <= 1e-6
    assert compiles.count == 0
    assert used == {8, 40, 64}  # each bucket was used, and only the buckets


def test_a_bucketed_run_follows_the_same_loss_curve(tmp_path):
    base = {
        "controller__name": "proportional",
        "hetero__name": "hl",
        "hetero__level": 8,
        "train__num_steps": 12,
        "train__eval_every": 12,
    }
    Trainer(smoke_config(**base), str(tmp_path / "one")).run()
    Trainer(smoke_config(capacity_buckets=4, **base), str(tmp_path / "many")).run()
    a = [r for r in read_metrics(tmp_path / "one") if "loss" in r]
    b = [r for r in read_metrics(tmp_path / "many") if "loss" in r]
    assert [r["batch_sizes"] for r in a] == [r["batch_sizes"] for r in b]
    assert len({tuple(r["batch_sizes"]) for r in a}) > 1  # the split did move
    np.testing.assert_allclose([r["loss"] for r in b], [r["loss"] for r in a], atol=1e-5)
