"""One decision a step in a multi-process run: process 0's split is every process's."""

import numpy as np
import pytest

from omnilearn_jax.engine import buckets
from omnilearn_jax.engine.mesh import select_devices
from omnilearn_jax.run import distributed


class FakeHosts:
    """Two processes as this one sees them: it is process 1, and process 0 decided `main`."""

    def __init__(self, main):
        self.main, self.sent = np.asarray(main), []

    def broadcast_one_to_all(self, value):
        self.sent.append(np.asarray(value))
        return self.main.astype(np.asarray(value).dtype)


@pytest.fixture
def as_process_1(monkeypatch):
    import jax
    from jax.experimental import multihost_utils

    hosts = FakeHosts([40, 8, 8, 8])
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "broadcast_one_to_all", hosts.broadcast_one_to_all)
    return hosts


def test_a_process_takes_process_0s_split_over_its_own(as_process_1):
    mine = np.array([16, 16, 16, 16], np.int32)
    got = distributed.decided_by_main(mine)
    assert got.tolist() == [40, 8, 8, 8] and got.dtype == np.int32
    assert [s.dtype for s in as_process_1.sent] == [np.int32]  # W int32, once


def test_the_trainer_uses_the_broadcast_split(as_process_1, monkeypatch):
    """Trainer.next_sizes: its own controller's decision is digested (the guard), then
    replaced by process 0's."""
    from omnilearn_jax.run.train import Trainer

    class Stub:
        agreement = distributed.Agreement()
        step_bounds = staticmethod(lambda speeds, step: ())
        host = None
        decide = staticmethod(lambda cstate, obs: (np.array([16, 16, 16, 16]), cstate))
        checked = staticmethod(lambda sizes: np.asarray(sizes, np.int32))

    import jax

    monkeypatch.setattr(jax, "default_device", lambda d: __import__("contextlib").nullcontext())
    obs = type("Obs", (), {"step": 3, "speeds": np.ones(4), "worker_times": np.ones(4)})()
    sizes, _ = Trainer.next_sizes(Stub(), "state", obs)
    assert sizes.tolist() == [40, 8, 8, 8]
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
