"""Per-worker times for each step: modelled on a virtual clock, or measured (wall clock).

Virtual (`clock=virtual`): the cluster model gives each worker's compute time from its batch
size and its speed at that step; the BSP step takes the slowest worker plus a ring
all-reduce. Deterministic, so the same config and seed give byte-identical run stores.

Wall (`clock=wall`): the step runs in two halves; the first runs each device's own program
on its own block (step.py) and leaves its sums on the device, and the host polls each
device's sums until they are ready, so every device's compute time is measured from its own
launch with the device synchronised, never the time of an asynchronous dispatch, and the
host-to-device transfer (finished before any clock starts) is not in it.
With several workers on one device, each gets the device's time in proportion to its rows.
`hetero.inject > 0` makes a worker wait `inject * b / speed` seconds beside its compute
(in a BSP step by default each device computes alone, then waits, hetero.inject_order
'alone'; before it in async), so one machine shows real heterogeneity; on real mixed
hardware nothing is injected.
"""

from __future__ import annotations

import sys
import time

import jax
import numpy as np

from omnilearn_jax.cluster import CostCurve, CostModel, VirtualClock, make_profile
from omnilearn_jax.cluster.registry import unread_keys
from omnilearn_jax.engine.buckets import Layout
from omnilearn_jax.engine.faults import PlantedFaults, TimeGuard
from omnilearn_jax.engine.state import params_of


class Timer:
    """Shared parts: the speed profile, the cost model (for oracles) and the clock."""

    def __init__(
        self,
        config,
        *,
        steps_per_epoch: int,
        param_bytes: int,
        cost: CostModel,
        faults: PlantedFaults,
    ):
        w = config.num_workers
        self.profile = run_profile(config, steps_per_epoch)
        self.cost = cost
        self.clock = VirtualClock(w)
        self.comm_time = cost.allreduce_time(param_bytes, w) if w > 1 else 0.0
        self.global_batch = config.global_batch_size
        self.faults = faults
        unit = "update round" if config.mode == "asp" else "step"  # async: W updates a round
        self.guard = TimeGuard(w, config.train.outlier_factor, unit)

    modelled = False  # whether the times are the cost model's (exact) or measured

    def accept(self, step: int, times: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Measured (or modelled) times after planted faults and the guard. The guard replaces
        only readings that can be wrong: measured ones, and planted faults; a modelled time is
        exact, however far it moves (it had replaced a preempted worker's 100x time with its
        time at full speed)."""
        trusted = self.faults.untouched(step, len(times)) if self.modelled else None
        return self.guard(step, self.faults.times(step, times), sizes, trusted)

    def speeds(self, step: int) -> np.ndarray:
        return self.profile.speeds(step)

    def time_table(self, speeds: np.ndarray) -> np.ndarray:
        return self.cost.time_table(speeds, self.global_batch)

    def batch_extras(self, sizes: np.ndarray, speeds: np.ndarray) -> dict:
        return {}

    def warm_up(self, steps, state_copy, batch) -> None:
        """Runs a whole step on a throwaway state, so nothing compiles in a counted or
        timed step."""
        jax.block_until_ready(steps.train(state_copy, batch))

    def state(self) -> dict:
        """What the timer carries from step to step (the clock's accumulators and the guard's
        memory), as arrays for a checkpoint; everything else is a function of (seed, step)."""
        return {"clock": self.clock.state(), "guard": self.guard.state()}

    def load_state(self, state) -> None:
        self.clock.load_state(state["clock"])
        self.guard.load_state(state["guard"])

    @property
    def time(self) -> float:
        return self.clock.time

    def totals(self) -> dict:
        return self.clock.totals()


class VirtualTimer(Timer):
    modelled = True

    def train_step(self, steps, state, batch, step: int, sizes, speeds):
        if jax.process_count() > 1:  # process 0's split rules the step (Steps.finish_timed)
            state, metrics = steps.train_checked(state, batch, sizes)
        else:
            state, metrics = steps.train(state, batch)
        times = self.accept(step, self.cost.worker_times(step, sizes, speeds), sizes)
        record = self.clock.step(times, self.comm_time, batch_sizes=sizes, speeds=speeds)
        return state, metrics, record


class WallTimer(Timer):
    # A one-process step without host waits dispatches its reduction and update right after
    # the last device's launch (`Steps.run_local`'s `then`; with host waits, once the times
    # are read); False: only once every device's time is read, as before
    # (benchmarks/step_overhead.py measures both side by side).
    finish_early = True

    def __init__(self, config, **kwargs):
        super().__init__(config, **kwargs)
        self.inject = float(config.hetero.get("inject", 0.0))
        self.workers_per_device = None  # set by the trainer from its layout

    def batch_extras(self, sizes: np.ndarray, speeds: np.ndarray) -> dict:
        if self.inject <= 0:
            return {}
        per_worker = self.inject * np.asarray(sizes) / np.maximum(speeds, 1e-9)
        delay = per_worker.reshape(-1, self.workers_per_device).sum(axis=1)
        return {"delay": delay.astype(np.float32)}

    def train_step(self, steps, state, batch, step: int, sizes, speeds):
        # Each device's blocks are on it before any clock starts: the transfer is not
        # compute. Each device's time runs from its own launch to its own sums being ready,
        # so neither the transfer nor the launch order of the devices is in it.
        jax.block_until_ready([(b.x, b.y, b.mask) for b in batch])
        start = time.perf_counter()
        # Every process must see every worker's time, and process 0's split rules the step:
        # both travel in a multi-process step's one collective, after the times are read.
        multi = jax.process_count() > 1
        if multi or not self.finish_early:
            stacked, device_times = steps.run_local(params_of(state), batch, timed=True)
        else:  # the reduction and update are dispatched before the times are waited for
            (state, metrics), device_times = steps.run_local(
                params_of(state), batch, timed=True, then=lambda s: steps.finish(state, s)
            )
        if self.inject <= 0 and shares_cores(steps.devices):
            device_times = np.where(device_times > 0, np.max(device_times), 0.0)
        if multi:
            state, metrics, every = steps.finish_timed(state, stacked, device_times, sizes)
            device_times = np.asarray(every, np.float64)
        elif not self.finish_early:
            state, metrics = steps.finish(state, stacked)
        jax.block_until_ready(state.step)
        wall = time.perf_counter() - start
        rows = np.asarray(sizes, np.float64).reshape(len(device_times), -1)
        per_device_rows = rows.sum(axis=1, keepdims=True)
        share = np.divide(rows, per_device_rows, out=np.zeros_like(rows), where=per_device_rows > 0)
        # A device's compute is shared by its workers' rows; an injected wait is each worker's
        # own (inject * b_k / speed_k). Shared by rows too, two workers on one device, of
        # speeds 4 and 32, each reported half of both waits: the 8x spread read as 1.2x, and
        # a worker's time fell below its own wait.
        wait = np.zeros_like(rows)
        if self.inject > 0:
            slow = np.maximum(np.asarray(speeds, np.float64).reshape(rows.shape), 1e-9)
            wait = self.inject * rows / slow
        compute = np.maximum(device_times - wait.sum(axis=1), 0.0)
        times = self.accept(step, (share * compute[:, None] + wait).reshape(-1), sizes)
        comm = max(wall - float(times.max()), 0.0)  # reduce + update + host overhead
        record = self.clock.step(times, comm, batch_sizes=sizes)
        return state, metrics, record


def shares_cores(devices) -> bool:
    """Whether these devices (one process's) compute on the same processor cores, so that each
    busy one is timed at the longest one's time (`WallTimer.train_step`).

    XLA:CPU's devices are the process's threads on the host's cores: a device's own time,
    from its launch until its sums are ready, measures which siblings ran beside it (on the
    2-core machine the first device launched of four equal ones took 0.3-0.8 ms where the
    last took 0.1-0.2), not its rows, and a throughput controller reads that as a slow
    device and moves the rows of identical devices (tests/test_multiprocess.py). The
    process's time, until its last device is ready, is what its rows cost together; rows
    move between processes, not between its devices. A GPU or TPU device is a processor of
    its own and keeps its own time; so does a device with an injected wait (hetero.inject),
    whose time is the wait it emulates."""
    return len(devices) > 1 and all(d.platform == "cpu" for d in devices)


def calibrate_per_sample_cost(steps, make_batch, state, rows: int, repeats: int = 5) -> float:
    """Seconds per sample of the real train step on this machine (median of `repeats`)."""
    batch = make_batch()
    state, metrics = steps.train(state, batch)  # compile and warm up
    jax.block_until_ready(metrics)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        state, metrics = steps.train(state, batch)
        jax.block_until_ready(metrics)
        samples.append(time.perf_counter() - start)
    return float(np.median(samples)) / rows


def make_timer(
    config,
    *,
    steps_per_epoch: int,
    param_bytes: int,
    per_sample_cost: float | None = None,
    faults: PlantedFaults | None = None,
    curve: CostCurve | None = None,
    layout: Layout | None = None,
) -> Timer:
    """`per_sample_cost` (when calibrated) replaces `cost.per_sample_cost` of the config;
    a measured `curve` replaces the cost formula, charged per device at the bucket `layout`
    makes it compute (cluster/cost.py)."""
    values = config.cost.to_dict()
    if per_sample_cost is not None:
        values["per_sample_cost"] = per_sample_cost
    cost = CostModel.from_config(values, seed=config.seed, curve=curve, layout=layout)
    cls = WallTimer if config.clock == "wall" else VirtualTimer
    faults = faults if faults is not None else PlantedFaults(config.faults)
    return cls(
        config, steps_per_epoch=steps_per_epoch, param_bytes=param_bytes, cost=cost, faults=faults
    )


def profile_steps(config) -> tuple[int, str]:
    """How many steps of the speed profile a run reads, and what they count: its steps, or
    for an async run its rounds of W updates (a BSP step's samples)."""
    w, updates = config.num_workers, int(config.train.num_steps)
    if config.mode == "asp":
        return -(-updates // w), f"rounds of {w} updates"
    return updates, "steps"


def run_profile(config, steps_per_epoch: int):
    """The run's speed profile. Async runs index it by rounds of W updates (a BSP step's
    samples), so a schedule is checked against the rounds the run has: checked against its
    updates, a schedule's tail could lie past the run's end and never run, silently."""
    w, updates = config.num_workers, int(config.train.num_steps)
    rounds, _ = profile_steps(config)
    try:
        return make_profile(
            config.hetero,
            num_workers=w,
            num_steps=rounds,
            steps_per_epoch=steps_per_epoch,
            seed=config.seed,
        )
    except ValueError as e:
        if rounds == updates:
            raise
        raise ValueError(
            f"{e} (async: speeds change by rounds of W={w} updates, and "
            f"train.num_steps={updates} updates is {rounds} rounds)"
        ) from None


def check_cluster(config, *, steps_per_epoch: int) -> None:
    """Raises the cluster model's clear error for a bad `hetero` or `cost` section, and warns
    (process 0) of a profile's key that the profile in use ignores."""
    profile = run_profile(config, steps_per_epoch)
    if jax.process_index() == 0:
        for sentence in [*unread_keys(config.hetero), *profile.unreached(*profile_steps(config))]:
            print(f"warning: {sentence}", file=sys.stderr, flush=True)
    check_cost(config).time_table(np.ones(config.num_workers), 1)  # one memory limit a worker


def check_cost(config) -> CostModel:
    """The cost model of the config's `cost` section, built to raise its clear error for a
    bad value (a per_sample_cost of 0 asks for calibration, checked later)."""
    values = config.cost.to_dict()
    if values.get("per_sample_cost") == 0:
        values["per_sample_cost"] = 1.0
    return CostModel.from_config(values, seed=config.seed)
