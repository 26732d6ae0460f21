"""Virtual clock determinism and measured wall-clock times with injected heterogeneity."""

import numpy as np
import pytest

from omnilearn_jax.engine.buckets import device_buckets
from omnilearn_jax.run import job
from omnilearn_jax.run.job import train_and_evaluate
from omnilearn_jax.run.runstore import read_metrics
from omnilearn_jax.run.train import Trainer
from tests.test_train import smoke_config


def wall_config(cores, inject, few_buckets=False):
    """4 workers on 4 devices, B = 64, on the wall clock with `inject` seconds a sample
    waited at speed 1 on cluster `cores` (`few_buckets`: as smoke_config's)."""
    config = smoke_config(few_buckets)
    config.num_workers = config.num_devices = 4
    config.global_batch_size = 64
    config.clock = "wall"
    config.hetero.name = "cores"
    config.hetero.cores = cores
    config.hetero.inject = inject
    return config


def test_virtual_clock_runs_are_byte_identical(tmp_path):
    config = smoke_config(few_buckets=True)
    config.train.num_steps = 8
    config.train.eval_every = 4
    config.hetero.name = "hl"
    config.hetero.level = 8
    config.hetero.noise = 0.1
    config.cost.noise = 0.05
    config.controller.name = "proportional"
    for name in ("a", "b"):
        train_and_evaluate(config, str(tmp_path / name))
    a = (tmp_path / "a" / "metrics.jsonl").read_bytes()
    assert a == (tmp_path / "b" / "metrics.jsonl").read_bytes()
    records = read_metrics(tmp_path / "a")
    times = [r["worker_times"] for r in records if "worker_times" in r]
    assert len(times) == 8 and len({tuple(t) for t in times}) > 1  # noise did vary


def test_wall_clock_measures_an_injected_slow_worker(tmp_path):
    # Worker 2 is 2x slower; 0.004 s a sample at speed 1: the sleep dominates compute.
    config = wall_config((1.0, 1.0, 0.5, 1.0), 0.004, few_buckets=True)
    config.controller.name = "proportional"
    config.controller.deadband = 0.1
    config.train.num_steps = 12
    config.train.eval_every = 12
    train_and_evaluate(config, str(tmp_path))
    train = [r for r in read_metrics(tmp_path) if "worker_times" in r]
    assert train[0]["batch_sizes"] == [16, 16, 16, 16]
    speeds = np.array(config.hetero.cores)
    for record in train:
        # A worker's measured time can never be less than the wait injected on its device
        # (inject * b / speed): a time taken from a dispatch, or given to the wrong worker,
        # breaks this bound however loaded the machine is.
        sleep = config.hetero.inject * np.array(record["batch_sizes"]) / speeds
        assert (np.array(record["worker_times"]) >= sleep - 1e-4).all(), record
    final = np.array(train[-1]["batch_sizes"])
    assert final.sum() == 64
    assert final[2] < final[[0, 1, 3]].min()  # the slow worker was given fewer rows


@pytest.mark.parametrize("order", ["alone", "after", "before"])
def test_a_bsp_step_waits_out_injected_slowness_on_the_host(tmp_path, monkeypatch, order):
    """With hetero.inject on the wall clock a BSP step's local programs have no host callback
    (XLA:CPU runs such a program in its launching thread, so launches queue behind each
    other's sleeps): each device's wait is waited out on the host and each device's time
    counts its wait. 'alone' (the default): the devices compute one at a time from the
    step's start, largest block first, none launched while another computes, each time its
    own compute plus its wait, and the step returns once the last time has passed; 'after':
    every device is launched at the step's start, largest block first, its wait counted
    from its sums' readiness; 'before': the devices are launched in the order of their
    waits, none before its wait is over."""
    from omnilearn_jax.engine import step

    # 0.01 s a sample: the shortest wait (80 ms) leaves the four launches of 'after' room on
    # a loaded machine (at 0.004, 32 ms, one run with three test workers on two cores
    # launched the last device after it).
    config = wall_config((1.0, 1.0, 0.5, 1.0), 0.01)
    config.hetero.inject_order = order
    trainer = Trainer(config, str(tmp_path))
    trainer.compile_variants()
    speeds = np.array(config.hetero.cores)
    trainer.warm_up(0, np.full(4, 16), speeds)
    steps = trainer.engine.steps
    assert steps.host_wait and not steps.inject
    for program in steps.variants.values():
        assert "callback" not in program.compiled.as_text()
    sizes = np.array([8, 24, 16, 16])
    batch = trainer.batch(1, sizes, trainer.timer.batch_extras(sizes, speeds))
    np.testing.assert_allclose(batch.waits, 0.01 * sizes / speeds)  # 80, 240, 320, 160 ms
    calls, call = [], step.Program.__call__
    start = []

    def record(self, *args):
        busy = sum(not out.is_ready() for out in outs)  # devices computing at this launch
        calls.append((args[1].devices().pop(), step.time.perf_counter() - start[0], busy))
        outs.append(call(self, *args))
        return outs[-1]

    outs: list = []

    monkeypatch.setattr(step.Program, "__call__", record)
    start.append(step.time.perf_counter())
    _, times = steps.run_local(trainer.state.params, batch, timed=True)
    took = step.time.perf_counter() - start[0]
    devices = [trainer.engine.placement.devices[b.position] for b in batch]
    assert steps.wait_order == order
    if order != "before":  # rows 8, 24, 16, 16: largest first, all before the shortest wait
        assert [devices.index(d) for d, _, _ in calls] == [1, 2, 3, 0]
        if order == "after":  # alone: each launch follows the last compute (no time bound)
            assert max(at for _, at, _ in calls) < batch.waits.min()
        assert took >= times.max() >= batch.waits.max()
        assert [busy for _, _, busy in calls] == [0, 0, 0, 0] or order == "after"
    else:
        assert [devices.index(d) for d, _, _ in calls] == [0, 3, 1, 2]
        for d, at, _ in calls:
            assert at >= batch.waits[devices.index(d)]
    assert (times > batch.waits).all()  # the wait and the compute


def test_a_wall_clock_step_updates_as_the_plain_step_bit_for_bit(tmp_path):
    """The wall clock's step (no injection) dispatches the reduction and update right after
    the last launch, before it waits for the devices' times: its state is the plain step's
    bit for bit, on an uneven split (a launch a device) and on the uniform one (one launch
    over the mesh). (With injected waits the update follows the times, as the plain step.)"""
    import jax

    config = wall_config((1.0, 1.0, 0.5, 1.0), 0.0)
    trainer = Trainer(config, str(tmp_path))
    trainer.compile_variants()
    speeds = np.array(config.hetero.cores)
    trainer.warm_up(0, np.full(4, 16), speeds)
    engine, steps = trainer.engine, trainer.engine.steps
    for sizes in (np.array([8, 24, 4, 28]), np.full(4, 16)):
        batch = trainer.batch(1, sizes, trainer.timer.batch_extras(sizes, speeds))
        plain, _ = steps.train(engine.state_copy(trainer.state), batch)
        walled, _, record = trainer.timer.train_step(
            steps, engine.state_copy(trainer.state), batch, 1, sizes, speeds
        )
        for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(walled), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert int(walled.step) == int(trainer.state.step) + 1
        assert record["step_time"] >= max(record["worker_times"]) > 0


def test_the_heap_left_by_warm_up_is_frozen_for_the_steps(tmp_path, monkeypatch):
    """Python's full collections scan every object compiling left (66-180 ms each in a fresh
    process): on the wall clock the loop freezes them after warm-up, so none of those pauses
    is timed inside a step, and unfreezes them when the run ends. On the virtual clock no
    step's time feeds the results: a later run of a process neither collects nor freezes
    (0.3-0.5 s a run saved) until VIRTUAL_COLLECT_EVERY runs have ended uncollected; a
    process's first run freezes on either clock."""
    import gc

    from omnilearn_jax.run import loop

    frozen, advance = [], loop.Loop.advance

    def counted(self, *args):
        frozen.append(gc.get_freeze_count())
        return advance(self, *args)

    monkeypatch.setattr(loop.Loop, "advance", counted)
    collected, collect = [], gc.collect

    def recorded(generation=2):
        collected.append(generation)
        return collect(generation)

    monkeypatch.setattr(gc, "collect", recorded)
    monkeypatch.setattr(loop, "_ended", [0])  # as in a fresh process
    monkeypatch.setattr(loop, "_uncollected", [0])
    config = smoke_config()
    config.clock = "wall"
    config.train.num_steps = 3
    config.train.eval_every = 3
    train_and_evaluate(config, str(tmp_path / "wall"))
    assert len(frozen) == 3 and min(frozen) > 10_000  # warm-up's objects, frozen
    assert gc.get_freeze_count() == 0
    # The first run of a process: the young generations only (a full collection scans the
    # whole process, 0.16-0.56 s in a test session; a young one takes under a millisecond).
    assert collected == [1] and loop._ended == [1]
    frozen.clear()
    config.clock = "virtual"
    train_and_evaluate(config, str(tmp_path / "virtual"))
    assert frozen == [0, 0, 0] and collected == [1] and loop._ended == [2]
    assert loop._uncollected == [2]
    try:
        loop._uncollected[0] = loop.VIRTUAL_COLLECT_EVERY  # then a virtual run collects
        loop.settle_heap(timed=False)
        assert collected == [1, 2] and gc.get_freeze_count() > 10_000
        assert loop._uncollected == [0]
        gc.unfreeze()
        loop._ended[0] = 0  # a fresh process's first run freezes on the virtual clock too
        loop.settle_heap(timed=False)
        assert collected == [1, 2, 1] and gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()


def test_a_later_run_frees_the_programs_of_an_ended_one(tmp_path, monkeypatch):
    """An ended run's compiled programs must go (memory maps: ten runs of the step_overhead
    job in one process crashed LLVM when its trainers were cyclic garbage holding them).
    With the collector's own passes off, the ended trainer and its steps are gone once the
    next run has trained: freed as they are dropped, or by settle_heap's collection (on the
    wall clock) where cycles hold them. (Programs shared between runs of one config are kept
    on purpose, a bounded few: memo.Kept.)"""
    import gc
    import weakref

    from omnilearn_jax.run import loop
    from omnilearn_jax.run.job import run

    monkeypatch.setattr(loop, "_ended", [0])
    config = smoke_config(few_buckets=True)
    config.clock = "wall"
    config.train.num_steps = config.train.eval_every = 1
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        first = Trainer(config, str(tmp_path / "a"))
        run(first)
        ended = weakref.ref(first), weakref.ref(first.engine.steps)  # steps: the programs
        del first
        run(Trainer(config, str(tmp_path / "b")))
        assert [r() for r in ended] == [None, None] and loop._ended == [2]
    finally:
        if was_enabled:
            gc.enable()


def test_the_decision_is_warmed_before_the_step(tmp_path, monkeypatch):
    """The controller's decision runs once before the step's warm-up, not after it: the
    devices' first steps after the decision's first run were 20-30 ms slower on one of
    them (HL4 on the wall clock), and the step's warm-up, not the first timed step, must
    take that. (The step's warm-up stops the run here: nothing is compiled for it.)"""
    calls = []

    class Warmed(Exception):
        pass

    decisions = Trainer.warm_decisions

    def warm_decisions(self, *args):
        calls.append("warm_decisions")
        return decisions(self, *args)

    def warm_up(self, *args):
        calls.append("warm_up")
        raise Warmed

    monkeypatch.setattr(Trainer, "warm_decisions", warm_decisions)
    monkeypatch.setattr(Trainer, "warm_up", warm_up)
    config = smoke_config()
    config.controller.name = "proportional"
    with pytest.raises(Warmed):
        train_and_evaluate(config, str(tmp_path))
    assert calls == ["warm_decisions", "warm_up"]


def test_calibration_is_the_median_step_time_per_sample(monkeypatch):
    """calibrate_per_sample_cost times the real step: with a clock that advances 0.64 s
    between a step's start and end, the cost of 64 rows is exactly 0.01 s a sample."""
    from omnilearn_jax.engine import timing

    ticks = iter(np.arange(0, 100, 0.32))  # each reading 0.32 s after the last
    monkeypatch.setattr(timing.time, "perf_counter", lambda: float(next(ticks)))
    calls = []

    class Steps:
        def train(self, state, batch):
            calls.append(batch)
            next(ticks)  # the step itself takes one more tick: 0.64 s start to end
            return state, np.zeros(())

    cost = timing.calibrate_per_sample_cost(Steps(), lambda: "batch", None, rows=64, repeats=5)
    assert len(calls) == 6  # one warm-up step, then the timed repeats
    assert cost == pytest.approx(0.01, rel=1e-9)


def test_per_sample_cost_zero_is_calibrated_on_this_machine(tmp_path):
    import json

    config = smoke_config(few_buckets=True)
    config.train.num_steps = 2
    config.train.eval_every = 2
    config.cost.per_sample_cost = 0.0
    config.cost.fixed_cost = 0.0
    config.cost.linear = True
    train_and_evaluate(config, str(tmp_path))
    resolved = json.loads((tmp_path / "config.json").read_text())["resolved"]
    cost = resolved["per_sample_cost"]
    assert resolved["per_sample_cost_calibrated"] is True
    assert 1e-7 < cost < 1.0  # seconds per sample of a tiny MLP: positive, far below 1 s
    first = read_metrics(tmp_path)[0]
    # Linear model, uniform split of 64 over 8 workers: each worker takes 8 * cost.
    assert np.allclose(first["worker_times"], 8 * cost, rtol=1e-9)


def test_no_first_execution_is_timed_in_a_wall_clock_step(tmp_path):
    """Warm-up runs every (device, bucket) program once, so however the split moves, no
    step executes a program for the first time (a first run costs several times a later one
    and the controllers would read it as a slow worker)."""
    config = wall_config((1.0, 1.0, 0.25, 1.0), 0.002)
    config.controller.name = "proportional"
    config.controller.deadband = 0.05
    config.train.num_steps = 8
    config.train.eval_every = 8
    trainer = Trainer(config, str(tmp_path))
    job.run(trainer)
    train = [r for r in read_metrics(tmp_path) if "worker_times" in r]
    used = {int(b) for r in train for b in device_buckets(r["batch_sizes"], trainer.layout)}
    assert len(used) >= 3  # the split did move across buckets
    programs = trainer.engine.steps.variants
    assert len(programs) == 4 * len(trainer.layout.buckets)
    assert min(p.runs for p in programs.values()) >= 1
    assert trainer.engine.steps.first_runs_in_steps == 0


def test_devices_sharing_the_cores_of_a_process_are_timed_together(tmp_path):
    """XLA:CPU's devices share the process's cores: without an injected wait, each busy
    device of a wall-clock step is given the process's time (its longest device's), not its
    own, which measures the launch order and the siblings beside it (engine/timing.py,
    `shares_cores`). Idle devices stay at 0."""
    config = wall_config((1.0, 1.0, 1.0, 1.0), 0.0, few_buckets=True)
    config.hetero.name = "uniform"
    config.controller.name = "static"
    config.controller.sizes = (0, 8, 16, 40)
    config.train.num_steps = config.train.eval_every = 3
    train_and_evaluate(config, str(tmp_path))
    records = [r for r in read_metrics(str(tmp_path)) if "loss" in r]
    assert len(records) == 3
    for r in records:
        times = np.array(r["worker_times"])
        assert times[0] == 0.0 and times[1] > 0, times
        assert (times[1:] == times[1]).all(), times


def test_the_modelled_all_reduce_is_priced_for_every_worker():
    """Ring all-reduce of 1 MB over W = 4 at 5e-5 s a hop and 1.25e9 B/s: 2 (W - 1) hops and
    2 (W - 1) / W of the bytes, 1.5 ms a step (priced for W - 1 workers it was 1.27 ms, and
    every BSP total time low, unseen)."""
    from omnilearn_jax.engine.timing import make_timer

    config = smoke_config()
    config.num_workers, config.cost.latency, config.cost.bandwidth = 4, 5e-5, 1.25e9
    timer = make_timer(config, steps_per_epoch=1, param_bytes=1_000_000)
    assert timer.comm_time == pytest.approx(1.5e-3)


def test_an_async_schedule_is_checked_against_the_rounds_begun():
    """Async speeds change by rounds of W updates: 10 updates of 4 workers begin 3 rounds, so
    a 3-segment schedule fits (rounded down, 2 rounds, it was refused unseen), and 8 updates
    (2 rounds) do not hold it."""
    from omnilearn_jax.engine.timing import run_profile

    config = smoke_config()
    config.mode, config.num_workers, config.num_devices = "asp", 4, 4
    config.hetero.name, config.hetero.levels = "schedule", (8, 2, 4)
    config.hetero.unit, config.hetero.segment = "steps", 1
    config.train.num_steps = 10
    assert run_profile(config, steps_per_epoch=5) is not None
    config.train.num_steps = 8
    with pytest.raises(ValueError, match="train.num_steps=8 updates is 2 rounds"):
        run_profile(config, steps_per_epoch=5)


def test_workers_sharing_a_device_are_charged_its_time_by_their_rows():
    """Two workers a device, 30 and 10 rows on a device that took 0.4 s: 0.3 and 0.1 s each
    (each charged the whole 0.4 s passed every test). Stubbed device step."""
    from types import SimpleNamespace

    import jax.numpy as jnp

    from omnilearn_jax.engine.timing import make_timer

    config = smoke_config()
    config.num_workers, config.clock, config.hetero.inject = 4, "wall", 0.003
    timer = make_timer(config, steps_per_epoch=5, param_bytes=1000)
    timer.workers_per_device = 2
    state = SimpleNamespace(params={}, step=jnp.zeros((), jnp.int32))

    def run_local(params, batch, timed, then=None):
        return (state, {}), np.array([0.4, 0.2])

    steps = SimpleNamespace(run_local=run_local, devices=[])
    sizes = np.array([30, 10, 20, 0])
    _, _, record = timer.train_step(steps, state, [], 0, sizes, np.ones(4))
    assert np.asarray(record["worker_times"]) == pytest.approx([0.3, 0.1, 0.2, 0.0])


def test_workers_sharing_a_device_each_report_their_own_injected_wait(tmp_path):
    """8 workers on 4 devices: a device's time was split by rows, so a worker of speed 0.25
    beside one of speed 1 reported half of both waits (80 ms each, under its own 128 ms)."""
    config = wall_config((1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.25), 0.004, few_buckets=True)
    config.num_workers = 8
    config.train.num_steps = config.train.eval_every = 3
    train_and_evaluate(config, str(tmp_path))
    speeds = np.array(config.hetero.cores)
    for record in [r for r in read_metrics(tmp_path) if "worker_times" in r]:
        times = np.array(record["worker_times"])
        assert record["batch_sizes"] == [8] * 8
        assert (times >= 0.004 * 8 / speeds - 1e-4).all(), record  # each its own wait
        assert times[7] > 3 * times[6], record  # 128 ms + compute against 32 ms + compute
