"""One decision a step in a multi-process run: process 0's split is every process's."""

import numpy as np
import pytest

from omnilearn_jax.engine import buckets
from omnilearn_jax.engine.mesh import select_devices
from omnilearn_jax.run import distributed


def test_only_the_first_mesh_position_contributes_to_a_broadcast():
    """`Steps.broadcast` sums one row a device across the mesh: the first position's row is
    the values, every other row zeros, so the sum is process 0's values on every process."""
    from omnilearn_jax.engine.step import Steps

    mine = np.array([16, 16, 16, 16])
    assert Steps.broadcast_row(mine, 0).tolist() == [16, 16, 16, 16]
    assert Steps.broadcast_row(mine, 3).tolist() == [0, 0, 0, 0]
    assert Steps.broadcast_row(mine, 0).dtype == np.int32


def test_a_broadcast_over_the_mesh_returns_the_first_row(monkeypatch):
    """Over 8 devices in one process: each device contributes its `broadcast_row`; planting
    another split on every device but the first shows that only the first one counts."""
    import jax
    import optax

    from omnilearn_jax import models
    from omnilearn_jax.engine.mesh import Placement
    from omnilearn_jax.engine.step import Steps

    apply, _ = models.create({"name": "mlp", "hidden": 4}, (8, 8, 1), 10, 0)
    planted = np.array([1, 2, 3, 4], np.int32)
    for backend in ("shard_map", "pmap"):
        steps = Placement(backend, jax.devices()).steps(apply, optax.sgd(0.1), chunk=8)
        monkeypatch.setattr(
            Steps, "broadcast_row", staticmethod(lambda v, p: v if p == 0 else planted * p)
        )
        got = steps.broadcast(np.array([40, 8, 8, 72], np.int32))
        assert got.tolist() == [40 + 28, 8 + 56, 8 + 84, 72 + 112], backend  # 1+..+7 = 28
        monkeypatch.undo()
        assert steps.broadcast(np.array([40, 8, 8, 72], np.int32)).tolist() == [40, 8, 8, 72]


def test_the_trainer_uses_the_broadcast_split(monkeypatch):
    """Trainer.next_sizes in a multi-process run: its own controller's decision is digested
    (the guard), then replaced by process 0's (`Steps.broadcast`)."""
    import contextlib

    import jax

    from omnilearn_jax.run.train import Trainer

    sent = []

    class Stub:
        agreement = distributed.Agreement()
        step_bounds = staticmethod(lambda speeds, step: ())
        decide = staticmethod(lambda cstate, obs: (np.array([16, 16, 16, 16]), cstate))
        checked = staticmethod(lambda sizes: np.asarray(sizes, np.int32))

        class engine:
            host = None

            class steps:
                @staticmethod
                def broadcast(values):
                    sent.append(values.tolist())
                    return np.array([40, 8, 8, 8], np.int32)

    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(jax, "default_device", lambda d: contextlib.nullcontext())
    obs = type("Obs", (), {"step": 3, "speeds": np.ones(4), "worker_times": np.ones(4)})()
    sizes, _ = Trainer.next_sizes(Stub(), "state", obs)
    assert sizes.tolist() == [40, 8, 8, 8] and sent == [[16, 16, 16, 16]]
    assert Stub.agreement.count == 1


def test_pack_refuses_rows_above_the_top_bucket():
    layout = buckets.make_layout(num_workers=4, num_devices=4, capacity=16)
    with pytest.raises(ValueError, match="device 3 holds 17 rows, above the largest bucket"):
        buckets.pack(np.array([5, 5, 5, 17]), layout)
    assert [b.rows for b in buckets.pack(np.array([5, 5, 6, 16]), layout)] == [8, 8, 8, 16]


def test_devices_are_ordered_by_process_then_id(monkeypatch):
    import jax

    class Dev:
        def __init__(self, process_index, id):
            self.process_index, self.id, self.platform = process_index, id, "cpu"

    shuffled = [Dev(1, 2), Dev(0, 3), Dev(1, 0), Dev(0, 1)]
    monkeypatch.setattr(jax, "devices", lambda: shuffled)
    got = [(d.process_index, d.id) for d in select_devices(0)]
    assert got == [(0, 1), (0, 3), (1, 0), (1, 2)]
    assert [(d.process_index, d.id) for d in select_devices(3)] == [(0, 1), (0, 3), (1, 0)]
