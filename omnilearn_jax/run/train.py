"""The trainer: everything a run needs, built from its config (data, layout, engine,
timer, controller), and what a step asks of it.

Per step: the sampler gives the B examples of the step (seed and step only), the current
split lays them out on the devices, the engine's programs update the parameters, the clock
gives each worker's time, and the controller picks the next split from what it observed.
A loop drives it: `job.run(trainer)` picks the BSP or the async one.
"""

from __future__ import annotations

import functools
import math
import sys
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

import controllers
from omnilearn_jax import models
from omnilearn_jax.cluster.curve import RUN_FILE, curve_from_dict
from omnilearn_jax.cluster.measure import lost_on_resume, run_curve
from omnilearn_jax.config import checks, schema, unread
from omnilearn_jax.data import datasets
from omnilearn_jax.engine import buckets, optim, step
from omnilearn_jax.engine.engine import Engine
from omnilearn_jax.engine.faults import PlantedFaults
from omnilearn_jax.engine.memo import Last, key_of
from omnilearn_jax.engine.mesh import select_devices
from omnilearn_jax.engine.timing import (
    calibrate_per_sample_cost,
    check_cluster,
    make_timer,
    profile_steps,
)
from omnilearn_jax.run import cgroups, distributed, inputs, metrics
from omnilearn_jax.run.checkpoint import has_checkpoint
from omnilearn_jax.run.runstore import (
    FINAL_PARAMS,
    MEASURED_FILE,
    complete_summary,
    start_measured,
    write_measured,
)


# A process compiles these once for each policy and batch, not once a run: the policy is
# shared between equal configs (`controllers.shared_from_config`) and jax.jit caches by
# function. Bounds reach `allocate` already resolved (`literal`): 0 is then a real bound.
@functools.lru_cache(maxsize=64)
def allocation(global_batch: int):
    """The allocation rule alone, jitted: shares and bounds -> int32 sizes."""
    return jax.jit(lambda s, lo, hi: controllers.allocate(s, global_batch, lo, hi, literal=True))


def checked_update(update, name: str):
    """`update`, whose output is checked as it is traced: (sizes [W], a state of the input
    state's structure, shapes and dtypes). A policy that breaks this failed deep inside the
    allocation ("Incompatible types for broadcasting", "too many values to unpack"), or,
    with a state whose dtype changed, compiled its decision anew at every step."""

    def run(cstate, obs):
        out = update(cstate, obs)
        if not (isinstance(out, tuple) and len(out) == 2):
            tuple_of = isinstance(out, tuple)
            got = f"a tuple of {len(out)}" if tuple_of else f"an array of shape {np.shape(out)}"
            raise ValueError(f"controller {name!r}: update must return (sizes, state), got {got}")
        w = obs.batch_sizes.shape
        if jnp.shape(out[0]) != w:
            raise ValueError(
                f"controller {name!r}: update's sizes must have shape {w} (one a worker), "
                f"got {jnp.shape(out[0])}"
            )
        kind = lambda a: (jnp.shape(a), str(jnp.result_type(a)))  # noqa: E731
        if jax.tree.structure(cstate) != jax.tree.structure(out[1]):
            changed = ["its structure"]
        else:
            leaves = jax.tree.leaves(out[1])
            pairs = zip(jax.tree_util.tree_leaves_with_path(cstate), leaves, strict=True)
            changed = [
                f"{jax.tree_util.keystr(path)} {kind(a)} -> {kind(b)}"
                for (path, a), b in pairs
                if kind(a) != kind(b)
            ]
        if changed:
            raise ValueError(
                f"controller {name!r}: update must return a state of its input's structure, "
                f"shapes and dtypes (else the decision compiles again at every step); changed: "
                + ", ".join(changed[:3])
                + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
            )
        return out

    return run


@functools.lru_cache(maxsize=64)
def decision(
    controller: controllers.Controller, global_batch: int, device: jax.Device, name: str = ""
):
    """The controller's update and the allocation rule as one jitted dispatch on `device`
    (inputs and outputs placed there): (state, obs, lo, hi) -> (sizes, state, valid), valid
    whether the update's own sizes were a split (integers >= 0 summing to B) that the rule
    had only to bound, not to repair (read at warm-up: `Trainer.warm_decisions`). Placed by
    shardings rather than under `jax.default_device`, whose context a step entered for
    nothing else (`Trainer.next_sizes` 77 us against 84 us a step for the static controller
    of `benchmarks.report`'s paper job, 2026-12-05)."""

    update = checked_update(controller.update, name)

    def decide(cstate, obs, lo, hi):
        shares, cstate = update(cstate, obs)
        whole = jnp.issubdtype(jnp.result_type(shares), jnp.integer)
        valid = whole & (jnp.sum(shares) == global_batch) & jnp.all(shares >= 0)
        return controllers.allocate(shares, global_batch, lo, hi, literal=True), cstate, valid

    there = jax.sharding.SingleDeviceSharding(device)
    return jax.jit(decide, in_shardings=there, out_shardings=there)


def worker_bounds(config: ml_collections.ConfigDict, per_device: int) -> tuple:
    """(lo, hi, capacity): each worker's bounds and the rows one device may hold.

    The framework's invariant: sum B, within [b_min, b_max] and within what a device holds.
    A device's `per_device` workers share its capacity: where their bounds cannot overfill it
    (capacity at least min(B, per_device * b_max), the default) each worker keeps b_max;
    otherwise each gets capacity // per_device, which keeps every split within it."""
    w, b = config.num_workers, config.global_batch_size
    lo, hi = (
        np.asarray(a)
        for a in controllers.resolve_bounds(
            w, b, config.controller.b_min, config.controller.b_max, xp=np
        )
    )
    fill = min(b, per_device * int(hi.max()))  # the most rows a device's workers can hold
    # A capacity above that can never be used: it would only add buckets, each compiled and
    # warmed up on every device (capacity=4096 for B=128: 25 buckets instead of 10).
    capacity = min(config.capacity, fill) if config.capacity else fill
    if fill > capacity and capacity < per_device:  # split: a bound of 0 reads as "no bound"
        raise ValueError(
            f"capacity={capacity} is below the {per_device} workers a device holds: each "
            f"needs a row at least; raise capacity"
        )
    # A device's workers split its capacity, the remainder to its first ones (7 rows over
    # 2 workers: 4 and 3, not 3 and 3), so the device can hold its capacity.
    spread = capacity // per_device + (np.arange(w) % per_device < capacity % per_device)
    share = capacity if fill <= capacity else spread
    return lo, np.minimum(hi, share), capacity


def budget_schedule(config: ml_collections.ConfigDict) -> list[str]:
    """The sentence (if any) for an async run that a time budget stops while its learning
    rate schedule runs over train.num_steps updates, the cap: under paper_asp's budget 0.5 s
    a cosine schedule stopped at update 52 of 1760, its rate barely decayed."""
    schedule = config.optimizer.get("schedule", "constant")
    if config.mode != "asp" or not float(config.asp.time_budget) or schedule == "constant":
        return []
    return [
        f"optimizer.schedule={schedule} runs over train.num_steps={config.train.num_steps} "
        f"updates (the cap; warm-up and decay count updates), but asp.time_budget="
        f"{config.asp.time_budget:g} s may stop the run long before: set train.num_steps to "
        f"the updates the budget allows, or schedule=constant"
    ]


def own_cpus(config: ml_collections.ConfigDict) -> int:
    """The devices a one-process CPU run takes when `num_devices` is 0 (all): `cpu_devices`,
    as the command line creates (run/main.py), where the process has more (JAX fixes the
    count at its first operation: a notebook or a test session that made 8 ran the
    Quickstart's 4 workers on 8 devices, and failed); 0 (all) otherwise. With fewer than
    `cpu_devices` the run takes them all and says that it differs from the command line's."""
    if config.num_devices or config.cpu_devices <= 0 or jax.process_count() > 1:
        return 0
    devices = jax.devices()
    if devices[0].platform != "cpu":
        return 0
    if config.cpu_devices > len(devices):
        print(
            f"warning: cpu_devices={config.cpu_devices} but this process has {len(devices)} "
            f"CPU device(s), which the run uses (the command line makes {config.cpu_devices}; "
            f"JAX fixes the count at its first operation: call jax.config.update("
            f"'jax_num_cpu_devices', {config.cpu_devices}) before any)",
            file=sys.stderr,
            flush=True,
        )
    return config.cpu_devices if config.cpu_devices < len(devices) else 0


class Trainer:
    """Everything a run needs, built from the config; `run()` executes the loop."""

    def __init__(self, config: ml_collections.ConfigDict, workdir: str):
        checks.check_config_types(config)  # unknown keys and wrong types first
        # An async run across processes keeps one device spare for decisions (cpu_devices).
        spare = distributed.async_across(config)
        share = 0 if spare else own_cpus(config)  # a CPU process with more than cpu_devices
        available = share or len(jax.devices()) - int(spare)
        checks.check_for_devices(config, available, jax.process_count())
        controllers.load_plugin(config.controller.plugin)  # registers user controllers
        self.config, self.workdir = config, workdir
        self.agreement = distributed.Agreement()  # of the decisions, across processes
        # Per-step host work that only depends on the split or on the speeds, which change
        # rarely, is kept from the last step (`checked`, `time_table`; the engine keeps the
        # last split's blocks).
        self._checked, self._table = Last(), Last()
        w, b = config.num_workers, config.global_batch_size
        # 0 (all devices) stays 0: every process's devices, however many each has; an async
        # run across processes leaves its spare out.
        devices = select_devices(config.num_devices or (available if spare or share else 0))
        r = w // len(devices)
        lo, hi, capacity = worker_bounds(config, r)
        self.bounds = (lo, hi)
        controllers.check_bounds(w, b, *self.bounds)
        checks.check_static_sizes(config, *self.bounds)
        # Persist by the clock; the bounds a device's capacity tightens reach the policy.
        self.controller = schema.make_controller(config, self.bounds)
        if jax.process_index() == 0:
            notes = [*budget_schedule(config), *unread.calibration_notes(config)]
            for sentence in [*unread.unread_keys(config).values(), *notes]:
                print(f"warning: {sentence}", file=sys.stderr, flush=True)

        self.dataset = datasets.load(config.dataset)
        self.sampler = datasets.GlobalBatchSampler(len(self.dataset.y_train), b, config.seed)
        # Build the cluster model once now, only to check it: a bad profile, trace or cost
        # section must fail before the model is created or anything compiles.
        check_cluster(config, steps_per_epoch=self.sampler.steps_per_epoch)
        self.faults = PlantedFaults(config.faults)
        self.faults.check(w)
        layout = buckets.make_layout(
            num_workers=w,
            num_devices=len(devices),
            capacity=capacity,
            ratio=config.bucket_ratio,
            memory_rows=config.memory_rows,
        )
        apply, params = models.create(
            config.model, self.dataset.input_shape, self.dataset.num_classes, config.seed
        )
        skip = config.train.max_skipped if config.train.nan_policy == "skip" else 0
        # An async server's optimiser takes each update's share of a BSP step (optim.py).
        tx = optim.create(
            config.optimizer,
            config.train.num_steps,
            skip_nonfinite=skip,
            weighted=config.mode == "asp",
        )
        self.tx = tx
        self.engine = Engine(
            backend=config.backend,
            devices=devices,
            layout=layout,
            apply=apply,
            tx=tx,
            x=self.dataset.x_train,
            y=self.dataset.y_train,
            inputs=self.faults.inputs,
            inject=config.clock == "wall" and float(config.hetero.get("inject", 0.0)) > 0,
            global_batch=b,
            eval_rows=-(-config.train.eval_batch_size // len(devices)),
            host_wait=config.mode != "asp",  # async workers sleep inside their programs
            flat=config.mode != "asp",  # async executors hold their own packed states
            wait_order=config.hetero.get("inject_order", step.WAIT_ORDERS[0]),
        )
        self.layout = layout
        self.state = self.engine.hold(
            self.engine.replicate(step.TrainState(np.zeros((), np.int32), params, tx.init(params)))
        )
        self.param_count = models.param_count(params)
        # What the run measures about the machine is measured once, at its start, on process
        # 0, broadcast, and kept in the run store for its resumptions (a fresh run measures
        # again): so every process and every resumption model the same machine.
        # A run resumes from its checkpoint, or is complete (its summary says so, checkpoints
        # deleted or not): either keeps what it measured and left (final parameters).
        self.resuming = resuming = config.train.resume and (
            has_checkpoint(workdir) or complete_summary(workdir) is not None
        )
        kept = distributed.from_main(
            lambda: start_measured(
                workdir,
                resuming=resuming,
                also=(RUN_FILE, FINAL_PARAMS),
            )
        )
        # 0 = calibrate on this machine (measured.json).
        self.calibrated_cost = (
            self.measured_cost(kept) if config.cost.per_sample_cost == 0 else None
        )
        # cost.curve: a measured cost curve drives the virtual clock; kept in the run directory
        # as cost_curve.json and reused from there on resume (cluster/measure.py).
        curve = distributed.from_main(lambda: (c := run_curve(self)) and c.to_dict())
        self.cost_curve = curve_from_dict(curve) if curve else None
        self.timer = make_timer(
            config,
            steps_per_epoch=self.sampler.steps_per_epoch,
            param_bytes=models.param_bytes(params),
            per_sample_cost=self.calibrated_cost,
            faults=self.faults,
            curve=self.cost_curve,
            layout=self.layout,
        )
        self.timer.workers_per_device = r
        self.allocate = allocation(b)
        self.decide = decision(self.controller, b, self.engine.host, config.controller.name)
        # Decisions whose sizes the allocation rule had to repair (summary.json), and whether
        # the warning was said.
        self.repaired_splits, self._repair_warned = 0, False
        self.check_availability()

    def check_availability(self) -> None:
        """`step_bounds`' errors for every step the profile has, before anything compiles
        or the run store is written: a worker the profile takes away (speed 0: a preemption
        with no trickle, a trace's zero) while b_min forces samples on it, or whose loss
        leaves the others too little room, failed only at that step, after compiling and
        with a failed run in the workdir."""
        steps, _ = profile_steps(self.config)  # async: rounds of W updates
        for at in range(steps):
            self.step_bounds(self.timer.speeds(at), at)

    def measured_cost(self, kept: dict) -> float:
        """The calibrated per-sample cost: the one `kept` from the start of the run being
        resumed, else measured now (process 0's measurement) and kept in measured.json."""
        if "per_sample_cost" in kept:
            return float(kept["per_sample_cost"])
        if self.resuming:
            raise lost_on_resume(self.workdir, "calibrated cost", MEASURED_FILE)
        cost = float(distributed.main_value(self.calibrate()))
        if jax.process_index() == 0:
            device = jax.devices()[0]
            source = {"platform": device.platform, "device_kind": device.device_kind}
            write_measured(self.workdir, {"per_sample_cost": cost, "source": source})
        return cost

    def calibrate(self) -> float:
        """Seconds per sample of the real step here (every process runs the step, which is
        one program over all of them; process 0's measurement is kept, see __init__)."""
        w, b = self.config.num_workers, self.config.global_batch_size
        self.compile_variants()
        uniform = controllers.allocate(np.ones(w), b, *self.bounds)
        copy = self.engine.state_copy(self.state)
        batch = lambda: self.batch(0, np.asarray(uniform))  # noqa: E731
        return calibrate_per_sample_cost(self.engine.steps, batch, copy, rows=int(max(uniform)))

    # -- pieces of a step ----------------------------------------------------------------
    def batch(
        self, step_index: int, sizes: np.ndarray, extras: dict | None = None, place: bool = True
    ) -> dict:
        """This process's devices' part of the global batch of `step_index`, placed (or,
        without `place`, an uneven step's rows left for the devices' programs to take)."""
        return self.batch_of(self.sampler.indices(step_index), sizes, extras, step_index, place)

    def batch_of(
        self, rows, sizes: np.ndarray, extras: dict | None, step_index: int, place: bool = True
    ) -> list:
        """Lays training rows `rows` (sum(sizes) of them, in worker order) on the devices
        (`Engine.batch`)."""
        return self.engine.batch(rows, sizes, (extras or {}).get("delay"), step_index, place)

    def compile_variants(self) -> int:
        """Compiles every (device, bucket) local program not compiled yet; returns how many."""
        return self.engine.compile(self.state)

    def warm_up(self, step_index: int, sizes: np.ndarray, speeds: np.ndarray) -> int:
        """Compiles everything the loop will run before its first step: every (device,
        bucket) local program, the reduction and update (on a throwaway copy of the state)
        and the evaluation step. Returns the number of local programs compiled."""
        compiled = self.compile_variants()
        batch = self.batch(step_index, sizes, self.timer.batch_extras(sizes, speeds))
        self.timer.warm_up(self.engine.steps, self.engine.state_copy(self.state), batch)
        self.engine.warm_eval(self.state.params, self.dataset.x_test, self.dataset.y_test)
        return compiled

    def warm_decisions(self, cstate, sizes: np.ndarray) -> None:
        """Compiles the controller's decision by running it once on made-up times, the
        results thrown away: compiled in the first step instead, on a process under a
        quarter-core quota a compile takes seconds of the run's wall time."""
        w = self.config.num_workers
        speeds = self.timer.speeds(0)
        obs = self.observe(0, sizes, np.ones(w, np.float32), speeds)
        bounds = self.step_bounds(obs.speeds, 1)
        _, _, valid = self.decide(cstate, obs, *bounds)
        if not bool(valid):
            self._warn_repaired("on made-up times at warm-up")

    def _warn_repaired(self, when: str) -> None:
        """The warning, once a run, that the policy's sizes were not a split."""
        if self._repair_warned or jax.process_index() != 0:  # the contract, not the trainer
            return
        self._repair_warned = True
        print(
            f"warning: controller {self.config.controller.name!r} returned sizes that are "
            f"not a split of B={self.config.global_batch_size} into integers >= 0 ({when}); "
            f"the trainer repairs them with controllers.allocate at every such step "
            f"(summary.json's repaired_splits counts them), which may not be what the policy "
            f"means. Check it with tests/test_controllers_contract.py (docs/controllers.md)",
            file=sys.stderr,
            flush=True,
        )

    def evaluate(self) -> dict[str, float]:
        ds = self.dataset
        totals = self.engine.eval_sums(self.state.params, ds.x_test, ds.y_test)
        out = {"eval_loss": totals[0] / totals[2], "eval_accuracy": totals[1] / totals[2]}
        if ds.y_test.ndim > 1:  # sequences: the loss is a mean over tokens, in nats
            out["eval_perplexity"] = float(np.exp(out["eval_loss"]))
        return out

    def metric_summary(self, evals: list[dict]) -> dict[str, Any]:
        """Summary keys a loop adds for the data set's own metric. Text: the final perplexity
        and, with train.target_perplexity > 0, time_to_target for it (lower is better; it
        replaces the accuracy target's)."""
        if self.dataset.y_test.ndim < 2:
            return {}
        out = {"final_eval_perplexity": evals[-1]["eval_perplexity"] if evals else math.nan}
        target = float(self.config.train.target_perplexity)
        if target > 0:
            out["target_perplexity"] = target
            out["time_to_target"] = metrics.time_to_target(evals, target, "eval_perplexity")
        return out

    def observe(
        self, step_index: int, sizes, worker_times, speeds, epoch_end: bool | None = None
    ) -> controllers.Observation:
        """What the controller sees after step `step_index`; `speeds` are the true speeds
        of the next step (only oracles may read them and the time table). `epoch_end`: the
        sampler's for that step unless given (async counts epochs in updates)."""
        if epoch_end is None:
            epoch_end = self.sampler.is_epoch_end(step_index)
        return controllers.Observation(
            step=np.int32(step_index),
            batch_sizes=np.asarray(sizes, np.int32),
            worker_times=np.asarray(worker_times, np.float32),
            speeds=np.asarray(speeds, np.float32),
            time_table=self.time_table(speeds),
            epoch_end=np.bool_(epoch_end),
        )

    def time_table(self, speeds) -> np.ndarray:
        """The oracles' time table for `speeds`, rebuilt only when the speeds change.

        It stays a host array, like every input of `decide`: one committed device array
        would make the controller state committed after the first decision and change the
        signature of the second, which would compile again.
        """

        def build():
            table = self.timer.time_table(speeds).astype(np.float32)
            table.flags.writeable = False
            return table

        return self._table.get(key_of(np.asarray(speeds, np.float32)), build)

    def counted(self, step: int) -> str:
        """0-based `step` as messages count it, from 1 ("step 3"; async: "update round 3")."""
        return f"{self.timer.guard.unit} {step + 1}"

    def step_bounds(self, speeds: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-worker bounds for `step`: the run's bounds, and 0 for an unavailable worker
        (speed 0), with a clear error when the others cannot take over its samples."""
        lo, hi = self.bounds
        lost = np.asarray(speeds) <= 0
        if not lost.any():
            return lo, hi
        if (lo[lost] > 0).any():
            k = int(np.flatnonzero(lost & (lo > 0))[0])
            raise ValueError(
                f"worker {k} is unavailable (speed 0) at {self.counted(step)} but "
                f"b_min={lo[k]} "
                f"forces samples on it; set controller.b_min=0 so the trainer can move "
                f"its samples to the others"
            )
        hi = np.where(lost, 0, hi)
        if hi.sum() < self.config.global_batch_size:
            raise ValueError(
                f"at {self.counted(step)} workers {np.flatnonzero(lost).tolist()} are unavailable "
                f"and the others hold at most {int(hi.sum())} samples (b_max and "
                f"device capacity) < global batch {self.config.global_batch_size}"
            )
        return lo, hi

    def safe_sizes(self, shares, speeds: np.ndarray, step: int) -> np.ndarray:
        """The framework, not each controller, guarantees the invariant: sum B, in bounds,
        and no samples for an unavailable worker (speed 0 at the step being decided)."""
        sizes = self.allocate(shares, *self.step_bounds(speeds, step))
        return self.checked(np.asarray(sizes))

    def checked(self, sizes: np.ndarray) -> np.ndarray:
        """The split, validated against the layout. Every process decides it itself from
        the same inputs (virtual times are a function of (seed, step) and of the cost
        measured once on process 0; wall times are gathered). The step's own all-reduce
        carries every process's split and updates only where they agree, else the step runs
        again on process 0's (`Steps.finish_timed`, `Loop.step`); `agreement` checks at
        checkpoints that the decisions agreed."""
        b = self.config.global_batch_size
        return self._checked.get(
            key_of(sizes), lambda: buckets.check_sizes(sizes, b, self.layout)
        ).copy()  # a new split is checked; the caller may write to its copy

    def next_sizes(self, cstate, obs, at: int | None = None) -> tuple[np.ndarray, Any]:
        """The controller's split for step `at` (0-based; default obs.step + 1), whose speeds
        obs.speeds are (async: the update round the speeds belong to)."""
        bounds = self.step_bounds(obs.speeds, int(obs.step) + 1 if at is None else at)
        sizes, cstate, valid = self.decide(cstate, obs, *bounds)
        if not bool(valid):  # a policy that met the contract at warm-up may break it later
            self.repaired_splits += 1
            self._warn_repaired(f"first after step {int(obs.step) + 1}, counted from 1")
        sizes = self.checked(np.asarray(sizes))
        self.agreement.add(np.asarray(obs.worker_times), sizes)
        return sizes, cstate

    def worker_delay(self, k: int, rows: int, speeds: np.ndarray) -> float | None:
        """Worker k's injected seconds for `rows` rows at `speeds` (hetero.inject on the wall
        clock; async mode has one worker a device), or None without injection."""
        sizes = np.zeros(self.config.num_workers, np.int64)
        sizes[k] = rows
        delays = self.timer.batch_extras(sizes, speeds).get("delay")
        return None if delays is None else float(delays[k])

    def resolved_config(self) -> dict:
        resolved = self.config.to_dict()
        resolved["resolved"] = {
            "num_devices": self.layout.num_devices,
            "capacity": self.layout.capacity,
            "buckets": list(self.layout.buckets),
            "rows_at_once": self.layout.chunk,
            # One local program per (device, bucket), all compiled at warm-up.
            "variants": [
                [int(p), rows]
                for p in self.engine.placement.local_positions
                for rows in self.layout.buckets
            ],
            "steps_per_epoch": self.sampler.steps_per_epoch,
            "param_count": self.param_count,
            # What the data set gave the model (dataset.input_shape and num_classes are the
            # synthetic set's keys; text's vocabulary is its 256 bytes).
            "input_shape": list(self.dataset.input_shape),
            "num_classes": self.dataset.num_classes,
            "platform": jax.devices()[0].platform,
            "per_sample_cost": self.timer.cost.per_sample_cost,
            "per_sample_cost_calibrated": self.calibrated_cost is not None,
            "cost_curve": RUN_FILE if self.cost_curve is not None else "",
            "cpu_quota": cgroups.launched_quotas(),
            "input_files": inputs.digests(self.config),  # what a resume must find again
        }
        return resolved
