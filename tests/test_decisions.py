"""One decision a step in a multi-process run: process 0's split is every process's."""

import inspect

import numpy as np
import pytest

from omnilearn_jax.engine import buckets
from omnilearn_jax.engine.mesh import select_devices


def test_a_step_whose_processes_disagree_runs_again_on_process_0s_split():
    """Loop.step in a multi-process run: when the step's all-reduce finds that the devices
    computed different splits (`SplitDisagreement`, the state not updated), the step runs
    again on process 0's split with the state from before it, the loop goes on with that
    split, and the run log says so at the next flush."""
    from omnilearn_jax.run.loop import Loop, SplitDisagreement

    mine, theirs = np.array([16, 16, 16, 16]), np.array([40, 8, 8, 8])
    calls = []

    class Timer:
        speeds = staticmethod(lambda step: np.ones(4))
        batch_extras = staticmethod(lambda sizes, speeds: {})

        @staticmethod
        def train_step(steps, state, batch, step, sizes, speeds):
            calls.append((state, batch, sizes.tolist()))
            if len(calls) == 1:
                raise SplitDisagreement("before", np.stack([theirs, mine]))
            return state + "+1", {"loss": 0.0}, {"worker_times": np.ones(4)}

    class Trainer:
        timer, state, engine = Timer, "before", type("E", (), {"steps": None})
        faults = type("F", (), {"crash": staticmethod(lambda step: None)})
        batch = staticmethod(lambda step, sizes, extras, place=True: ("batch", tuple(sizes)))
        checked = staticmethod(lambda sizes: np.asarray(sizes, np.int32))
        observe = staticmethod(lambda step, sizes, times, ahead: sizes)
        next_sizes = staticmethod(lambda cstate, obs: (obs, cstate))

    loop = Loop.__new__(Loop)
    loop.t, loop.pending, loop.disagreements = Trainer, [], []
    loop.cfg = type("C", (), {"train": type("T", (), {"num_steps": 10}), "clock": "wall"})
    _, sizes = loop.step(3, "cstate", mine)
    assert [c[2] for c in calls] == [mine.tolist(), theirs.tolist()]
    assert calls[1][:2] == ("before", ("batch", (40, 8, 8, 8)))
    assert Trainer.state == "before+1" and sizes.tolist() == theirs.tolist()
    assert loop.pending[0][1].tolist() == theirs.tolist()
    said, loop.pending = [], []
    loop.flush(type("Log", (), {"say": staticmethod(said.append)})())
    assert said == ["step 3: devices [1] computed a split other than process 0's "
                    "[40, 8, 8, 8]: the step is run again on process 0's split"]  # fmt: skip


def test_the_warm_up_barrier_waits_for_every_process_only_in_a_multi_process_run(monkeypatch):
    """`distributed.barrier` (called by the loop after warm-up, before its clock starts) is one
    sync of every process's devices in a multi-process run and nothing in a single one."""
    import jax
    from jax.experimental import multihost_utils

    from omnilearn_jax.run import distributed, loop

    synced = []
    monkeypatch.setattr(multihost_utils, "sync_global_devices", synced.append)
    distributed.barrier("one process")
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    distributed.barrier("two processes")
    assert synced == ["two processes"]
    source = inspect.getsource(loop.Runner.run)
    warm, barrier = source.index("t.warm_decisions("), source.index("distributed.barrier(")
    assert warm < barrier < source.index("start = time.perf_counter()")


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
    # each process gives an equal share of its own devices (the first two were both process
    # 0's: process 1, with none in the mesh, crashed and process 0 waited on it)
    assert [(d.process_index, d.id) for d in select_devices(2)] == [(0, 1), (1, 0)]
    with pytest.raises(ValueError, match="num_devices=3 on 2 processes: each process gives"):
        select_devices(3)


def test_a_deferred_quota_group_is_joined_after_warm_up_and_before_the_barrier(
    tmp_path, monkeypatch
):
    """`launch --quota_from=steps`: the process compiles outside its group and writes its pid
    into the group the launcher named (`cgroups.ENV`) once warm-up is done, before the
    barrier that starts every clock; the variable is then gone from its environment."""
    import os

    from omnilearn_jax.run import cgroups, distributed, loop
    from omnilearn_jax.run.job import train_and_evaluate
    from tests.test_train import smoke_config

    group = tmp_path / "p1"
    group.mkdir()
    (group / "cgroup.procs").write_text("")
    monkeypatch.setenv(cgroups.ENV, str(group))
    seen = []
    warm = loop.Runner.warm_up

    def warm_up(self, sizes):
        seen.append(("warm-up", (group / "cgroup.procs").read_text()))
        return warm(self, sizes)

    monkeypatch.setattr(loop.Runner, "warm_up", warm_up)
    monkeypatch.setattr(
        distributed,
        "barrier",
        lambda name: seen.append(("barrier", (group / "cgroup.procs").read_text())),
    )
    config = smoke_config()
    config.train.num_steps, config.train.eval_every = 2, 2
    train_and_evaluate(config, str(tmp_path / "run"))
    assert seen == [("warm-up", ""), ("barrier", str(os.getpid()))]
    assert cgroups.ENV not in os.environ


def test_a_device_count_the_processes_cannot_share_equally_stops_before_anything_runs():
    """2 processes x 4 devices with num_devices=4 runs 2 a process; 3, or a device count
    that leaves a worker count indivisible, is one line that says what to set."""
    from omnilearn_jax.config import checks
    from tests.test_train import smoke_config

    config = smoke_config()  # 8 workers
    config.num_devices = 4
    checks.check_for_devices(config, 8, 2)
    config.num_devices = 3
    with pytest.raises(ValueError, match=r"num_devices=3 on 2 processes.* multiple of 2 up to 8"):
        checks.check_for_devices(config, 8, 2)
    config.num_devices, config.num_workers = 4, 6
    with pytest.raises(ValueError, match="to a divisor of 6 that is a multiple of the 2 processes"):
        checks.check_for_devices(config, 8, 2)
