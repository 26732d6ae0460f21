"""The training loop: `train_and_evaluate(config, workdir)`.

Per step: the sampler gives the B examples of the step (seed and step only), the current
split lays them out on the devices, the jitted step updates the parameters, the clock gives
each worker's time, and the controller picks the next split from what it observed.
"""

from __future__ import annotations

import importlib
import math
import time
from typing import Any

import jax
import ml_collections
import numpy as np

import controllers
from omnilearn_jax import data, masking, models, optim, step, validate
from omnilearn_jax.cluster import time_to_target
from omnilearn_jax.mesh import Placement, select_devices
from omnilearn_jax.runlog import RunLog
from omnilearn_jax.timing import calibrate_per_sample_cost, check_cluster, make_timer
from omnilearn_jax.tracking import make_tracker


def _format_eta(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s"


class Trainer:
    """Everything a run needs, built from the config; `run()` executes the loop."""

    def __init__(self, config: ml_collections.ConfigDict, workdir: str):
        validate.check_config(config, len(jax.devices()))
        if config.controller.plugin:
            importlib.import_module(config.controller.plugin)  # registers user controllers
        self.controller = controllers.make_from_config(config.controller)
        self.config, self.workdir = config, workdir
        w, b = config.num_workers, config.global_batch_size
        devices = select_devices(config.num_devices)
        r = w // len(devices)
        lo, hi = (
            np.asarray(a)
            for a in controllers.resolve_bounds(
                w, b, config.controller.b_min, config.controller.b_max, xp=np
            )
        )
        capacity = config.capacity or min(b, r * int(hi.max()))
        # The framework's invariant: sum B, within [b_min, b_max] and within what a device
        # holds (a device's capacity is shared by its r workers).
        self.bounds = (lo, np.minimum(hi, capacity // r))
        controllers.check_bounds(w, b, *self.bounds)
        validate.check_static_sizes(config, *self.bounds)

        self.dataset = data.load(config.dataset)
        self.sampler = data.GlobalBatchSampler(len(self.dataset.y_train), b, config.seed)
        # Build the cluster model once now, only to check it: a bad profile, trace or cost
        # section must fail before the model is created or anything compiles.
        check_cluster(config, steps_per_epoch=self.sampler.steps_per_epoch)
        self.placement = Placement(config.backend, devices)
        self.layout = masking.make_layout(
            config.layout,
            num_workers=w,
            num_devices=len(devices),
            capacity=capacity,
            micro_batch=config.micro_batch_size,
        )
        apply, params = models.create(
            config.model, self.dataset.input_shape, self.dataset.num_classes, config.seed
        )
        tx = optim.create(config.optimizer, config.train.num_steps)
        self.steps = self.placement.steps(apply, tx)
        self.state = self.placement.replicate(
            step.TrainState(np.zeros((), np.int32), params, tx.init(params))
        )
        self.param_count = models.param_count(params)
        self.calibrated_cost = None
        if config.cost.per_sample_cost == 0:  # 0 = measure the real model on this machine
            uniform = controllers.allocate(np.ones(w), b, *self.bounds)
            copy = self.placement.replicate(jax.tree.map(np.array, self.state))
            self.calibrated_cost = calibrate_per_sample_cost(
                self.steps,
                lambda: self.batch(0, np.asarray(uniform)),
                copy,
                rows=int(np.max(uniform)),
            )
        self.timer = make_timer(
            config,
            steps_per_epoch=self.sampler.steps_per_epoch,
            param_bytes=models.param_bytes(params),
            per_sample_cost=self.calibrated_cost,
        )
        self.timer.workers_per_device = r
        self.update = jax.jit(self.controller.update)
        self.allocate = jax.jit(lambda s, lo, hi: controllers.allocate(s, b, lo, hi))
        self.eval_layout = masking.make_layout(
            "padded",
            num_workers=len(devices),
            num_devices=len(devices),
            capacity=-(-config.train.eval_batch_size // len(devices)),
            micro_batch=0,
        )

    # -- pieces of a step ----------------------------------------------------------------
    def batch(self, step_index: int, sizes: np.ndarray, extras: dict | None = None) -> dict:
        """This process's devices' part of the global batch of `step_index`, placed."""
        rows = self.sampler.indices(step_index)
        local = self.placement.local_positions
        packed = masking.pack_indices(sizes, self.layout, local)
        x, y = masking.gather(self.dataset.x_train[rows], self.dataset.y_train[rows], packed)
        extras = {k: v[local] for k, v in (extras or {}).items()}  # per-device entries
        return self.placement.batch(
            {"x": x, "y": y, "mask": packed.mask, "trips": packed.trips, **extras}
        )

    def evaluate(self) -> dict[str, float]:
        ds, lay = self.dataset, self.eval_layout
        chunk = lay.capacity * lay.num_devices
        totals = np.zeros(3)
        for start in range(0, len(ds.y_test), chunk):
            n = min(chunk, len(ds.y_test) - start)
            sizes = np.full(lay.num_devices, n // lay.num_devices)
            sizes[: n % lay.num_devices] += 1
            packed = masking.pack_indices(sizes, lay, self.placement.local_positions)
            x, y = masking.gather(
                ds.x_test[start : start + n], ds.y_test[start : start + n], packed
            )
            batch = self.placement.batch(
                {"x": x, "y": y, "mask": packed.mask, "trips": packed.trips}
            )
            sums = self.steps.eval(self.state.params, batch)
            totals += [float(sums["loss"]), float(sums["correct"]), float(sums["count"])]
        return {"eval_loss": totals[0] / totals[2], "eval_accuracy": totals[1] / totals[2]}

    def observe(self, step_index: int, sizes, worker_times, speeds) -> controllers.Observation:
        """What the controller sees after step `step_index`; `speeds` are the true speeds
        of the next step (only oracles may read them and the time table)."""
        return controllers.Observation(
            step=np.int32(step_index),
            batch_sizes=np.asarray(sizes, np.int32),
            worker_times=np.asarray(worker_times, np.float32),
            speeds=np.asarray(speeds, np.float32),
            time_table=self.timer.time_table(speeds).astype(np.float32),
            epoch_end=np.bool_(self.sampler.is_epoch_end(step_index)),
        )

    def safe_sizes(self, sizes) -> np.ndarray:
        """The framework, not each controller, guarantees the invariant: sum B, in bounds."""
        sizes = self.allocate(sizes, *self.bounds)
        return masking.check_sizes(np.asarray(sizes), self.config.global_batch_size, self.layout)

    def next_sizes(self, cstate, obs) -> tuple[np.ndarray, Any]:
        sizes, cstate = self.update(cstate, obs)
        return self.safe_sizes(sizes), cstate

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg = self.config
        num_steps = cfg.train.num_steps
        resolved = self.resolved_config()
        tracker = make_tracker(
            ml_collections.ConfigDict(resolved),
            self.workdir,
            process_index=jax.process_index(),
            tags=(f"controller:{cfg.controller.name}", f"hetero:{cfg.hetero.name}"),
        )
        log = RunLog(self.workdir, is_main=jax.process_index() == 0, tracker=tracker)
        log.config(resolved)
        w, b = cfg.num_workers, cfg.global_batch_size
        cstate = jax.jit(self.controller.init, static_argnums=(0, 1))(w, b)
        sizes = self.safe_sizes(controllers.initial_sizes(cstate, w, b))
        speeds = self.timer.speeds(0)
        self.timer.warm_up(
            self.steps,
            self.placement.replicate(jax.tree.map(np.array, self.state)),
            self.batch(0, sizes, self.timer.batch_extras(sizes, speeds)),
        )
        evals, pending, start, done = [], [], time.perf_counter(), 0
        log.say(
            f"training {cfg.model.name} ({self.param_count:,} params) on {cfg.dataset.name}: "
            f"{w} workers on {self.layout.num_devices} {jax.devices()[0].platform} devices "
            f"({jax.process_count()} process(es)), B={b}, {cfg.backend}/{cfg.layout}, "
            f"controller {cfg.controller.name}"
        )
        try:
            for t in range(num_steps):
                speeds = self.timer.speeds(t)
                batch = self.batch(t, sizes, self.timer.batch_extras(sizes, speeds))
                self.state, metrics, rec = self.timer.train_step(
                    self.steps, self.state, batch, t, sizes, speeds
                )
                pending.append((t + 1, sizes, speeds, rec, metrics))
                # Oracles get the speeds of the step they decide for (t + 1), so they are
                # optimal at every step, change points included; the others see only times.
                obs = self.observe(
                    t, sizes, rec["worker_times"], self.timer.speeds(min(t + 1, num_steps - 1))
                )
                sizes, cstate = self.next_sizes(cstate, obs)
                done = t + 1
                if done % cfg.train.log_every == 0 or done == num_steps:
                    self._flush(log, pending)
                    self._progress(log, done, num_steps, start)
                if done % cfg.train.eval_every == 0 or done == num_steps:
                    self._flush(log, pending)
                    ev = {"step": done, "time": self.timer.time, **self.evaluate()}
                    log.eval(ev)
                    evals.append(ev)
                    log.say(
                        f"  eval step {done}: loss {ev['eval_loss']:.4f} "
                        f"accuracy {ev['eval_accuracy']:.4f}"
                    )
            summary = self.summary(evals, time.perf_counter() - start)
            summary["wandb_run_id"] = tracker.run_id
            log.summary(summary)
            if cfg.train.save_params and log.is_main:
                save_params(self.state.params, f"{self.workdir}/final_params.npz")
        except BaseException as error:  # the run store must say that the run failed
            log.summary(
                {
                    "status": "failed",
                    "error": f"{type(error).__name__}: {error}",
                    "steps": done,
                }
            )
            raise
        finally:
            log.close()
        log.say(
            f"done: final eval accuracy {summary['final_eval_accuracy']:.4f}, "
            f"{summary['total_time']:.2f}s on the {cfg.clock} clock; results in "
            f"{self.workdir} (config.json, metrics.jsonl, summary.json)"
        )
        return summary

    def _flush(self, log: RunLog, pending: list) -> None:
        """Writes buffered train records; fetching metrics only here keeps dispatch async."""
        for done, sizes, speeds, rec, metrics in pending:
            log.train(
                {
                    "step": done,
                    "time": rec["time"],
                    "loss": float(metrics["loss"]),
                    "accuracy": float(metrics["accuracy"]),
                    "batch_sizes": sizes,
                    "worker_times": rec["worker_times"],
                    "step_time": rec["step_time"],
                    "idle_fraction": rec["idle_fraction"],
                    "balance": rec["balance"],
                    "speeds": speeds,
                }
            )
            self._last = (done, float(metrics["loss"]), sizes)
        pending.clear()

    def _progress(self, log: RunLog, done: int, num_steps: int, start: float) -> None:
        elapsed = time.perf_counter() - start
        _, loss, sizes = self._last
        eta = elapsed / done * (num_steps - done)
        log.say(
            f"step {done}/{num_steps} loss {loss:.4f} sizes {sizes.tolist()} "
            f"clock {self.timer.time:.2f}s | wall {_format_eta(elapsed)} "
            f"ETA {_format_eta(eta)}"
        )

    def summary(self, evals: list[dict], wall_time: float) -> dict[str, Any]:
        totals = self.timer.totals()
        target = self.config.train.target_accuracy
        last = evals[-1] if evals else {"eval_accuracy": math.nan, "eval_loss": math.nan}
        return {
            "final_eval_accuracy": last["eval_accuracy"],
            "final_eval_loss": last["eval_loss"],
            "total_time": totals["total_time"],
            "steps": totals["steps"],
            "time_to_target": time_to_target(evals, target) if target > 0 else None,
            "target_accuracy": target,
            "mean_idle_fraction": totals["mean_idle_fraction"],
            "wall_time": wall_time,
            "status": "complete",
        }

    def resolved_config(self) -> dict:
        resolved = self.config.to_dict()
        resolved["resolved"] = {
            "num_devices": self.layout.num_devices,
            "capacity": self.layout.capacity,
            "micro_batch_size": self.layout.micro_batch,
            "num_micro": self.layout.num_micro,
            "steps_per_epoch": self.sampler.steps_per_epoch,
            "param_count": self.param_count,
            "platform": jax.devices()[0].platform,
            "per_sample_cost": self.timer.cost.per_sample_cost,
            "per_sample_cost_calibrated": self.calibrated_cost is not None,
        }
        return resolved


def save_params(params, path: str) -> None:
    """Parameters as an npz of leaves keyed by their tree path (e.g. 'layers/0/kernel')."""
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    arrays = {
        "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path_): np.asarray(v)
        for path_, v in flat
    }
    np.savez(path, **arrays)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
    """Trains and evaluates as the config says; writes the run store to `workdir`."""
    return Trainer(config, workdir).run()
