"""Asynchronous training with parameter-server semantics (docs/async.md).

Each worker pulls the current parameters (server version v), computes the gradient of its
own batch in the time the cluster model gives (or the time measured, with `clock=wall`),
and pushes it; the server applies updates in completion order (ties: lower worker index
first); the worker then pulls again. The staleness of an update is the server version when
it is applied minus v.

Bounded staleness follows Stale Synchronous Parallel (Ho et al., NIPS 2013): a worker may
start iteration c only while c - min_j c_j <= s over the workers that hold rows
(`asp.staleness_bound`; -1 = unbounded ASP).

A worker the controller gives no rows (or whose speed is 0: lost) computes nothing, pushes
nothing and bumps no version; it is parked and out of the SSP minimum. When it is given rows
again it rejoins at the clock of the slowest active worker (never behind it, so it blocks no
one) and pulls the current version.

An update is a share of one BSP step's work (optim.py, `weighted`): with `weighting=share`
worker k pushes (sum of its per-example gradients) / B + (b_k / B) * L2 * (its pulled
parameters), and adamw's decoupled decay is scaled by b_k / B; so with staleness bound 0
and equal speeds, the W updates of a round are exactly one BSP step (plain SGD, weight decay
included). `weighting=lr` pushes the worker's mean gradient and scales the update by b_k / B
(a step size by share, which Adam does not normalise away); `mean` pushes the mean gradient.

Execution (docs/async.md): on the virtual clock the schedule does not depend on parameter
values, so this class decides it on the host and `asp.batched.BatchedServer` runs it in batches
(each wave's gradients in one call on the per-device layout, the updates between waves in one
jitted loop). On the wall clock the measured times order the updates: each worker's gradient
is one launch on its own device, the workers compute at the same time, and an update is
applied once no worker still computing can land before it (`asp/eager.py`, `asp/wall.py`).
`batched=False` runs the virtual clock's schedule event by event, as the wall clock does (the
reference in tests). Launched as W processes, worker k computes in process k and process 0
is the server (`asp/remote.py`).
"""

from __future__ import annotations

import heapq
import math
import time
from typing import Any, NamedTuple

import jax
import numpy as np

from omnilearn_jax.asp.batched import BatchedServer
from omnilearn_jax.asp.eager import EagerServer
from omnilearn_jax.asp.remote import RemoteServer
from omnilearn_jax.asp.staleness import StalenessCounts
from omnilearn_jax.asp.wall import Unmeasured, charge_floor
from omnilearn_jax.engine import buckets, optim
from omnilearn_jax.engine.flat import flattenable
from omnilearn_jax.engine.step import TrainState
from omnilearn_jax.run.distributed import async_across
from omnilearn_jax.run.loop import Runner
from omnilearn_jax.run.runlog import RunLog


def on_grid(seconds: float) -> float:
    """A virtual finish time rounded to a picosecond, so that ties go to the lower worker
    index as documented: sums of durations equal in exact arithmetic differ in their last
    bits (six 0.04 s iterations end at 0.24000000000000002, one 0.24 s iteration at 0.24),
    and the heap ordered such ties by that rounding."""
    return round(seconds, 12)


class Flight(NamedTuple):
    """A worker's gradient in flight: started from server `version` with `rows` samples."""

    version: int
    rows: int


def updates_left(done: int, clock: float, budget: float, cap: int) -> float:
    """Updates still to run: to the cap, or where a time budget will stop the run first, as
    many as the clock's pace so far fits in what is left of it (a progress line's ETA had
    counted to the cap: 'ETA 2m25s' for a run the budget ended 2 s later)."""
    left = cap - done
    if budget and clock > 0:
        left = min(left, done * max(budget - clock, 0.0) / clock)
    return left


def update_weights(weighting: str, lr_scaling: str, b_k: int, b: int, w: int):
    """(gradient coefficient on the worker's gradient sum, weight of its decay terms,
    step scale) of an update of b_k samples out of a global batch of b over w workers."""
    share = b_k / b
    if weighting == "share":
        return 1.0 / b, share, 1.0
    if weighting == "lr":
        return 1.0 / b_k, 1.0, share
    linear = b_k * w / b if lr_scaling == "linear" else 1.0
    return 1.0 / b_k, 1.0, linear


class AsyncLoop(Runner):
    unit = "update"
    tag = ("mode:asp",)

    def __init__(self, trainer, batched: bool = True):
        """`batched`: on the virtual clock, run the schedule in batches (asp/batched.py; a
        model with parameters of mixed dtypes runs event by event instead); False
        runs it event by event, as the wall clock does (the reference for tests)."""
        super().__init__(trainer)
        t, cfg = trainer, self.cfg
        self.w, self.b = cfg.num_workers, cfg.global_batch_size
        self.bound = int(cfg.asp.staleness_bound)
        self.every = int(cfg.asp.controller_every) or self.w
        self.budget = float(cfg.asp.time_budget)
        # read once: each config lookup costs microseconds, and these are read every update
        self.num_steps = int(cfg.train.num_steps)
        self.weighting, self.lr_scaling = str(cfg.asp.weighting), str(cfg.asp.lr_scaling)
        self.comm = t.timer.comm_time  # push + pull of the parameters
        self.wall = cfg.clock == "wall"
        l2 = optim.coupled_decay(cfg.optimizer)
        self.unmeasured = Unmeasured()  # wall clock: started, time not known yet
        # Across processes on the wall clock the server is a real one: an update lands when
        # its push arrives (its time measured from the send, transfers included), and the
        # clock is the seconds since the first start (`started`), so updates apply in the
        # order they arrive and no worker waits for another's.
        self.real = async_across(cfg) and self.wall
        self.started: float | None = None  # perf_counter() at clock 0 (real clock)
        if async_across(cfg):  # workers 1.. (or all) in processes of their own
            self.exec = RemoteServer(t, l2, timed=self.wall)
            self.comm = 0.0 if self.real else self.comm
        elif batched and not self.wall and flattenable(t.state.params):
            self.exec = BatchedServer(t, l2, max(2 * self.w, 8))
        else:
            self.exec = EagerServer(t, l2, timed=self.wall)
        self.now = 0.0
        self.stream_pos = 0
        self.iterations = np.zeros(self.w, np.int64)  # pushes per worker (SSP clocks)
        self.busy = np.zeros(self.w, bool)
        self.parked = np.zeros(self.w, bool)
        self.last_time = np.zeros(self.w)
        # The rows each last_time was measured at (-1: unknown, a checkpoint from before
        # they were kept): the controller sees a time only where they are the current split's.
        self.last_rows = np.zeros(self.w, np.int64)
        self.applied = np.zeros(self.w, np.int64)
        self.staleness = StalenessCounts(self.w)
        self.events: list = []  # heap of (finish time, worker, start version, rows)
        self.flights: dict[int, Flight] = {}  # worker -> its gradient in flight
        self._round_of: dict[int, int] = {}  # worker -> the round it started in
        self._last = (0, math.nan, np.zeros(self.w), 0.0)

    @property
    def version(self) -> int:
        return self.done

    def run(self) -> dict[str, Any]:
        try:
            return super().run()
        finally:
            self.exec.close()

    # -- the server's state ------------------------------------------------------------
    def server_state(self) -> TrainState:
        return self.exec.server_state()

    def sync(self) -> None:
        self.t.state = self.exec.replicated_state()

    # -- checkpoints: every worker and the gradients still in flight -------------------
    def _in_flight(self) -> dict:
        self.unmeasured.settle_all(self._measured)
        out = {}
        for k in self.flights:
            push, loss = self.exec.in_flight(k)
            # One shape for every executor (a wave's loss sum is [1], a device's []), as
            # `restore_like` expects it: a checkpoint's arrays are checked against it.
            out[str(k)] = {"push": push, "loss": np.asarray(loss).reshape(())}
        return out

    def extra_arrays(self) -> dict:
        return {
            "flights": self._in_flight(),
            "workers": {
                "iterations": self.iterations.copy(),
                "applied": self.applied.copy(),
                "busy": self.busy.astype(np.int32),
                "parked": self.parked.astype(np.int32),
                "last_time": self.last_time.copy(),
            },
        }

    def extra_meta(self) -> dict:
        self.unmeasured.settle_all(self._measured)
        return {
            "now": self.now,
            "stream_pos": self.stream_pos,
            "events": [list(e) for e in self.events],
            "flights": {str(k): [f.version, f.rows] for k, f in self.flights.items()},
            "staleness_counts": self.staleness.state(),
            "last_rows": self.last_rows.tolist(),
        }

    def restore_like(self, meta: dict) -> dict:
        params = jax.tree.map(np.asarray, self.t.state.params)
        like = {"push": params, "loss": np.zeros((), np.float32)}
        extra = self.extra_arrays()
        extra["flights"] = {k: like for k in meta["flights"]}
        return extra

    def load(self, arrays: dict, meta: dict) -> None:
        workers = arrays["workers"]
        self.iterations, self.applied = workers["iterations"], workers["applied"]
        self.busy, self.last_time = workers["busy"].astype(bool), workers["last_time"]
        self.parked = workers["parked"].astype(bool)
        self.last_rows = np.asarray(meta.get("last_rows", [-1] * self.w), np.int64)
        self.now, self.stream_pos = meta["now"], meta["stream_pos"]
        self.events = [tuple(e) for e in meta["events"]]
        heapq.heapify(self.events)
        self.staleness.load(meta)
        got = arrays["flights"]
        self.exec.load({int(k): (got[k]["push"], got[k]["loss"]) for k in got})
        self.flights = {int(k): Flight(*f) for k, f in meta["flights"].items()}

    # -- the schedule --------------------------------------------------------------------
    def finished(self) -> bool:
        return self.done >= self.num_steps or bool(self.budget and self.now >= self.budget)

    def clock_time(self) -> float:
        return self.now

    def describe(self) -> str:
        where = ""
        if isinstance(self.exec, RemoteServer):
            first = self.exec.first
            own = (
                f"worker {first} in a process of its own"
                if first == self.w - 1
                else f"workers {first}-{self.w - 1} in processes of their own"
            )  # it said "workers 1-1"
            where = f"; {own}" + (", the server in process 0 alone" if first == 0 else "")
        return f"; asynchronous, staleness bound {self.bound}{where}"

    def processes(self) -> int:
        """Across processes each is a JAX program of its own (jax.process_count() is 1 in
        each): process 0 (the server, with the workers below `first`) and one a remote
        worker."""
        if isinstance(self.exec, RemoteServer):
            return 1 + self.w - self.exec.first
        return super().processes()

    def may_start(self, k: int, active: np.ndarray, slowest: int) -> bool:
        """Whether worker k may start (SSP); `slowest`: the least clock of the workers
        active or busy."""
        if self.busy[k] or not active[k]:
            return False
        return self.bound < 0 or self.iterations[k] - slowest <= self.bound

    def start_ready(self, sizes: np.ndarray) -> list[int]:
        """Starts every idle worker with rows that may start, all from the current version;
        returns them."""
        round_index = self.done // self.w  # profiles are indexed by BSP-equivalent steps
        speeds = self.t.timer.speeds(min(round_index, self.num_steps - 1))
        active = (np.asarray(sizes) > 0) & (speeds > 0)
        rejoin = active & self.parked
        if rejoin.any():  # back after holding no rows: at the slowest active worker's clock
            # Not a busy worker's that holds no rows now: its update lands and it is parked,
            # and the rejoiner, set back to its clock, held up the active workers (the bound).
            others = active & ~rejoin
            others = others if others.any() else self.busy
            floor = self.iterations[others].min() if others.any() else self.iterations.max()
            self.iterations[rejoin] = np.maximum(self.iterations[rejoin], floor)
        self.parked = ~active & ~self.busy
        counted = active | self.busy
        slowest = self.iterations[counted].min() if counted.any() else 0
        ready = [k for k in range(self.w) if self.may_start(k, active, slowest)]
        if not ready:
            return ready
        group_sizes = np.zeros(self.w, np.int64)
        group_sizes[ready] = np.asarray(sizes)[ready]
        total = int(group_sizes.sum())
        rows = self.t.sampler.stream(self.stream_pos, total)
        self.stream_pos += total
        offsets = np.concatenate([[0], np.cumsum(group_sizes)])
        for k in ready:
            mine = rows[offsets[k] : offsets[k + 1]]
            coefficient, weight, _ = self.weights(int(group_sizes[k]))
            clock = self._clock()  # before the launch, which the stopwatch's time includes
            future = self.exec.start(k, mine, round_index, speeds, coefficient, weight)
            self.busy[k] = True
            self.flights[k] = Flight(self.done, int(group_sizes[k]))
            if self.wall:  # each device's compute, measured from its own launch: it lands
                self.unmeasured.add(k, clock, future)  # in the queue when its time is
                self._round_of[k] = round_index  # known (apply_next, asp/wall.py)
        if self.wall:
            return ready
        times = self.t.timer.cost.worker_times(
            round_index, group_sizes, speeds, draws=self.iterations
        )
        times = self.t.timer.accept(round_index, times, group_sizes)
        for k in ready:
            duration = float(times[k]) + self.comm
            self.last_time[k], self.last_rows[k] = duration, group_sizes[k]
            finish = on_grid(self.now + duration)
            heapq.heappush(self.events, (finish, k, self.done, int(group_sizes[k])))
        return ready

    def weights(self, b_k: int):
        return update_weights(self.weighting, self.lr_scaling, b_k, self.b, self.w)

    def _measured(self, k: int, clock: float) -> None:
        """Wall clock: worker k's compute time is known; its update joins the queue."""
        flight = self.flights[k]
        times, sizes = np.zeros(self.w), np.zeros(self.w, np.int64)
        times[k], sizes[k] = self.exec.seconds(k), flight.rows
        duration = float(self.t.timer.accept(self._round_of.pop(k), times, sizes)[k]) + self.comm
        self.last_time[k] = duration  # what the controller sees: guarded (faults.TimeGuard)
        self.last_rows[k] = flight.rows
        landed = clock + (times[k] if self.real else duration)  # a real server: on arrival
        heapq.heappush(self.events, (landed, k, flight.version, flight.rows))

    def _clock(self) -> float:
        """The clock a worker starts at: the loop's, or on a real server the seconds since
        the first start (continuing a resumed run's clock)."""
        if not self.real:
            return self.now
        if self.started is None:
            self.started = time.perf_counter() - self.now
        return time.perf_counter() - self.started

    def _floor(self, k: int) -> tuple[float, float]:
        """Wall clock: worker k's charge bound and its limit (asp/wall.py, charge_floor). On
        a real server a push lands when it arrives: at least the seconds elapsed so far,
        which grow without limit while it is in flight."""
        if self.real:
            return self.exec.elapsed(k), math.inf
        timer, step = self.t.timer, self._round_of[k]
        planted = (step, k) in timer.faults.bad_times
        rate, rows = timer.guard.per_sample[k], self.flights[k].rows
        return charge_floor(self.exec.elapsed(k), rate, rows, planted)

    def apply_next(self) -> dict[str, Any]:
        if self.wall:  # a worker's first time is waited for: records and the controller
            # then always see a measured time for every worker that started
            if any(self.last_time[k] == 0 for k in self.unmeasured.flights):
                self.unmeasured.settle_all(self._measured)
            head = lambda: self.events[0] if self.events else None  # noqa: E731
            self.unmeasured.settle(head, self.comm, self._measured, self._floor)
        if not self.events:
            raise RuntimeError(
                f"no worker can start at update {self.done}: every worker holds no rows or "
                f"is unavailable"
            )
        finish, k, version, b_k = heapq.heappop(self.events)
        del self.flights[k]
        _, weight, step_scale = self.weights(b_k)
        loss = self.exec.apply(k, weight, step_scale)
        staleness = self.done - version
        record = {
            "step": self.done + 1,
            "time": finish,
            "step_time": finish - self.now,
            "worker": k,
            "staleness": staleness,
            "worker_batch": b_k,
            "_loss": loss,
        }
        self.done += 1
        self.now = finish
        self.busy[k] = False
        self.iterations[k] += 1
        self.applied[k] += 1
        self.staleness.add(k, staleness)
        return record

    def advance(self, cstate, sizes):
        t = self.t
        t.faults.crash(self.done)
        self.start_ready(sizes)
        record = self.apply_next()
        record.update(batch_sizes=np.asarray(sizes).tolist(), worker_times=self.last_time.tolist())
        self.pending.append(record)
        done = self.done
        if done % self.every == 0:
            at = min(done // self.w, self.num_steps - 1)  # the round the speeds belong to
            # The round just completed (0-based), and an epoch's end once W x steps_per_epoch
            # updates are first past: is_epoch_end of the rounds done had said it one round
            # early, and for every decision of a whole round (asp.controller_every < W).
            epoch = self.w * t.sampler.steps_per_epoch
            ended = done // epoch > (done - self.every) // epoch
            obs = t.observe(
                max(done // self.w - 1, 0), sizes, self.seen_times(sizes), t.timer.speeds(at), ended
            )
            sizes, cstate = t.next_sizes(cstate, obs, at)
        return cstate, sizes

    def seen_times(self, sizes) -> np.ndarray:
        """The times the controller sees: each worker's latest, where it was measured at the
        worker's rows in `sizes`; 0 (not measured) where that iteration ran other rows (it
        began before the last move), which the controller would read as the time of the
        new rows and misjudge the worker's per-sample time by their ratio."""
        same = (self.last_rows == np.asarray(sizes)) | (self.last_rows < 0)
        return np.where(same, self.last_time, 0.0)

    def warm_up(self, sizes: np.ndarray) -> None:
        """Compiles the trainer's programs, then the executor's, so that no update
        compiles."""
        t = self.t
        t.warm_up(0, sizes, t.timer.speeds(0))
        self.exec.warm_up(buckets.uniform_bucket(self.b, t.layout))

    # -- records -------------------------------------------------------------------------
    def step_of(self, record) -> int:
        return record["step"]

    def flush(self, log: RunLog, wait: bool = True, upto: int = 0) -> None:
        for record in self.due(wait, lambda r: r["_loss"], upto):
            loss = float(np.asarray(record.pop("_loss")).sum()) / max(record["worker_batch"], 1)
            log.train({**record, "loss": loss})
            self.wrote(log, record["step"], loss, record["batch_sizes"], record["time"])

    def progress(self, log: RunLog, start: float, extra: str = "") -> None:
        stale = self.staleness_summary()["staleness_mean"]
        budget = f" of the budget {self.budget:g}s" if self.budget else ""
        super().progress(log, start, f"{budget} staleness {stale:.2f}")

    def steps_left(self, done: int, clock: float) -> float:
        return updates_left(done, clock, self.budget, self.num_steps)

    def staleness_summary(self) -> dict[str, Any]:
        return {**self.staleness.summary(), "updates_per_worker": self.applied.tolist()}

    def summary_extra(self) -> dict[str, Any]:
        short = bool(self.budget) and self.now < self.budget  # the update cap came first
        if short:  # said after the run store closes, before the closing line
            self.message = (
                f"warning: the run stopped at train.num_steps={self.num_steps} updates, at "
                f"{self.now:.2f}s on the clock, before asp.time_budget={self.budget:g}s; "
                f"raise train.num_steps to run to the budget"
            )
        return {
            "time_budget": self.budget,
            "stopped_by": "num_steps" if short or not self.budget else "time_budget",
            "mode": "asp",
            **self.staleness_summary(),
        }
