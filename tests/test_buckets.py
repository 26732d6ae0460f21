"""Per-device buckets: the block sizes, which block each device computes, how many rows are
computed for a split, and a trainer that runs its blocks with no compile after warm-up."""

import os
import sys

import jax
import numpy as np
import pytest

from omnilearn_jax.engine import buckets
from omnilearn_jax.engine.compiles import CompileCounter
from omnilearn_jax.engine.mesh import Placement
from omnilearn_jax.engine.step import Steps
from omnilearn_jax.run.train import Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def smoke_config(**overrides):
    sys.path.insert(0, ROOT)
    from configs import smoke

    config = smoke.get_config()
    for key, value in overrides.items():
        section, _, leaf = key.replace("__", ".").rpartition(".")
        (config[section] if section else config)[leaf] = value
    return config


def test_bucket_sizes_are_multiples_of_8_about_the_ratio_apart():
    assert buckets.bucket_sizes(128) == (8, 16, 24, 32, 40, 56, 72, 96, 120, 128)
    assert buckets.bucket_sizes(64, ratio=2.0) == (8, 16, 32, 64)
    assert buckets.bucket_sizes(100) == (8, 16, 24, 32, 40, 56, 72, 96, 104)
    assert buckets.bucket_sizes(5) == (8,)
    for ratio in (1.1, 1.25, 1.5):
        sizes = np.array(buckets.bucket_sizes(1000, ratio))
        assert (sizes % 8 == 0).all() and (np.diff(sizes) > 0).all()
        # each bucket is the last times the ratio rounded up to 8 (the last: the capacity)
        np.testing.assert_array_equal(sizes[1:-1], np.ceil(sizes[:-2] * ratio / 8) * 8)
    # a memory budget: blocks above it are whole numbers of chunks
    assert buckets.bucket_sizes(128, memory_rows=30) == (8, 16, 24, 32, 64, 96, 128)
    with pytest.raises(ValueError, match="bucket_ratio must be a finite number > 1"):
        buckets.bucket_sizes(64, ratio=1.0)
    with pytest.raises(ValueError, match="memory_rows must be >= 0"):
        buckets.bucket_sizes(64, memory_rows=-8)


def test_each_device_gets_the_smallest_bucket_holding_its_rows():
    layout = buckets.make_layout(num_workers=16, num_devices=8, capacity=128)
    sizes = np.array([2, 2, 0, 0, 8, 9, 20, 30, 1, 0, 16, 16, 33, 34, 0, 1])
    counts = buckets.device_counts(sizes, layout)
    assert counts.tolist() == [4, 0, 17, 50, 1, 32, 67, 1]
    assert buckets.device_buckets(counts, layout).tolist() == [8, 0, 24, 56, 8, 32, 72, 8]
    blocks = buckets.pack(sizes, layout)
    assert [b.rows for b in blocks] == [8, 0, 24, 56, 8, 32, 72, 8]
    assert [int(b.mask.sum()) for b in blocks] == counts.tolist()
    # the valid slots of all blocks, in device order, are the global batch in order
    rows = np.concatenate([b.index[b.mask] for b in blocks])
    assert rows.tolist() == list(range(int(sizes.sum())))


def test_evaluation_blocks_hold_every_row_once():
    """uniform_blocks spreads the remainder of rows over devices: 359 test rows on 8
    devices are 45 x 7 + 44, each once (dropping the remainder had evaluated 352)."""
    index, mask = buckets.uniform_blocks(359, 8, 48)
    assert int(mask.sum()) == 359
    assert sorted(index[mask].tolist()) == list(range(359))
    assert mask.sum(axis=1).tolist() == [45] * 7 + [44]


def test_a_split_over_a_devices_capacity_is_refused():
    layout = buckets.make_layout(num_workers=8, num_devices=4, capacity=100)
    ok = np.array([50, 50, 10, 10, 10, 10, 10, 10])  # 100 rows on device 0: its capacity
    assert buckets.check_sizes(ok, 160, layout).tolist() == ok.tolist()
    with pytest.raises(ValueError, match="put 101 rows on one device, over its capacity of 100"):
        buckets.check_sizes(np.array([51, 50, 10, 10, 10, 9, 10, 10]), 160, layout)


@pytest.mark.parametrize(
    "sizes, computed",
    [
        ([16] * 8, 128),  # uniform: exactly the valid rows
        ([15, 17, 16, 16, 16, 16, 14, 18], 144),  # near uniform: 17 and 18 rows -> 24
        ([4, 4, 4, 4, 4, 4, 4, 100], 7 * 8 + 120),  # one device holds 25 times another's rows
    ],
)
def test_rows_computed_follow_the_rows_held(sizes, computed):
    layout = buckets.make_layout(num_workers=8, num_devices=8, capacity=128)
    counts = buckets.device_counts(np.array(sizes), layout)
    assert int(buckets.device_buckets(counts, layout).sum()) == computed


def test_a_trainer_runs_each_block_at_its_bucket_with_no_compile_after_warm_up(tmp_path):
    t = Trainer(smoke_config(bucket_ratio=2.0), str(tmp_path))
    assert t.layout.buckets == (8, 16, 32, 64)
    speeds = t.timer.speeds(0)
    uniform = np.full(8, 8, np.int32)
    assert t.warm_up(0, uniform, speeds) == 4 * 8  # every (device, bucket) program
    assert len(t.engine.steps.variants) == 32
    # One engine: the trainer itself holds no device, placement or compiled steps.
    held = [k for k, v in vars(t).items() if isinstance(v, (jax.Device, Placement, Steps))]
    assert held == [] and isinstance(t.engine.placement, Placement)
    rng = np.random.default_rng(3)
    splits = [rng.multinomial(64, rng.dirichlet(np.ones(8) * a)) for a in (50.0, 2.0, 0.3)]
    splits += [uniform, np.eye(8, dtype=np.int64)[5] * 64]
    with CompileCounter() as compiles:
        for step, sizes in enumerate(splits):
            sizes = np.asarray(sizes, np.int32)
            batch = t.batch(step, sizes)
            assert [b.rows for b in batch] == [
                0 if n == 0 else min(r for r in (8, 16, 32, 64) if r >= n) for n in sizes
            ]
            # each device received only its bucket's rows, and its valid rows are its
            # workers' rows of the step's global batch
            rows = t.sampler.indices(step)
            start = 0
            for b, n in zip(batch, sizes, strict=True):
                if n:
                    x = np.asarray(b.x)[0]
                    assert x.shape[0] == b.rows
                    np.testing.assert_array_equal(x[:n], t.dataset.x_train[rows[start : start + n]])
                    assert not x[n:].any()  # padded rows are zeros
                else:
                    assert b.x is None
                start += n
            t.state, metrics = t.engine.steps.train(t.state, batch)
            assert np.isfinite(float(metrics["loss"]))
        # A shared bucket with padding (61 rows, the last device's 5 in a bucket of 8) is
        # gathered for every device at once, in the mesh's rows: each device still holds
        # its own rows, its padding zeros, and the whole mask counts the 61.
        rows, sizes = t.sampler.indices(0)[:61], np.array([8] * 7 + [5])
        whole = t.engine.batch(rows, sizes, None, 0)
        assert whole.shared == 8 and int(np.asarray(whole.whole[2]).sum()) == 61
        for b in whole:
            n, at = sizes[b.position], rows[8 * b.position : 8 * b.position + sizes[b.position]]
            x, y = np.asarray(b.x)[0], np.asarray(b.y)[0]
            np.testing.assert_array_equal(x[:n], t.dataset.x_train[at])
            np.testing.assert_array_equal(y[:n], t.dataset.y_train[at])
            assert not x[n:].any() and not y[n:].any()
            assert b.x.devices() == {t.engine.placement.devices[b.position]}
        t.state, metrics = t.engine.steps.train(t.state, whole)
        assert np.isfinite(float(metrics["loss"]))
    assert compiles.count == 0


@pytest.mark.parametrize("backend", ["shard_map", "pmap"])
def test_an_unplaced_uneven_step_updates_as_the_placed_one_bit_for_bit(tmp_path, backend):
    """On the virtual clock an uneven step's rows stay on the host and each device's program
    takes them as it launches (`Engine.batch(place=False)`): the update equals the placed
    step's bit for bit, nothing compiles, and a step placed whole is still placed."""
    from omnilearn_jax.engine.compiles import CompileCounter

    t = Trainer(smoke_config(bucket_ratio=2.0, backend=backend), str(tmp_path))
    t.warm_up(0, np.full(8, 8, np.int32), t.timer.speeds(0))
    sizes = np.array([0, 1, 2, 3, 4, 5, 6, 43], np.int32)  # an empty device, padding
    with CompileCounter() as compiles:
        host, placed = t.batch(1, sizes, place=False), t.batch(1, sizes)
        assert host[0].x is None and isinstance(host[7].x, np.ndarray)
        assert all(isinstance(b.x, jax.Array) for b in placed if b.rows)
        a, metrics_a = t.engine.steps.train(t.engine.state_copy(t.state), host)
        b, metrics_b = t.engine.steps.train(t.engine.state_copy(t.state), placed)
        jax.block_until_ready((a, b))
    assert compiles.count == 0
    assert float(metrics_a["loss"]) == float(metrics_b["loss"])
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    assert not np.array_equal(
        np.asarray(jax.tree.leaves(a)[0]), np.asarray(jax.tree.leaves(t.state)[0])
    )
    whole = t.batch(2, np.full(8, 8, np.int32), place=False)
    assert whole.whole is not None and isinstance(whole[0].x, jax.Array)
