"""Asynchronous training with parameter-server semantics, on the virtual clock.

Each worker pulls the current parameters (server version v), computes the gradient of its
own batch in the time the cluster model gives, and pushes it; the server applies updates in
completion order (ties: lower worker index first); the worker then pulls again. The
staleness of an update is the server version when it is applied minus v.

Bounded staleness follows Stale Synchronous Parallel (Ho et al., NIPS 2013): a worker may
start iteration c only while c - min_j c_j <= s (`asp.staleness_bound`; -1 = unbounded ASP).
With s = 0 every worker finishes iteration c before any starts c + 1.

Workers take their batches from the sample stream (the BSP global batches laid end to end)
in the order they start. Workers that start from the same version are computed together in
one uneven-batch step on the device mesh (one worker per device), and each worker's gradient
stays on its device until the server applies it.

Equivalence (tested): with sgd without momentum, `weighting=share`, s = 0 and equal speeds,
W async updates apply sum_k (b_k / B) g_k at the same parameters, which is exactly one BSP
step; so n * W async updates equal n BSP steps.
"""

from __future__ import annotations

import heapq
import math
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

import controllers
from omnilearn_jax.checkpoint import Checkpointer
from omnilearn_jax.cluster import time_to_target
from omnilearn_jax.interrupt import deferred, stop_message
from omnilearn_jax.loop import resume_point
from omnilearn_jax.runlog import RunLog
from omnilearn_jax.runstore import truncate_metrics
from omnilearn_jax.step import TrainState
from omnilearn_jax.tracking import make_tracker


class Group(NamedTuple):
    """Gradients of the workers that started together from one server version."""

    sums: Any  # Sums stacked over devices [D, ...]
    version: int
    loss: np.ndarray | None = None  # filled lazily on the host


def make_apply(tx: optax.GradientTransformation):
    """state, stacked sums, worker k, scale -> state with worker k's update applied."""

    def apply(state: TrainState, grad_sums, k, scale):
        # A one-hot sum over the device axis picks worker k's gradient: a reduction (an
        # all-reduce) that is legal on a sharded axis, where indexing by a traced k is not.
        def pick(g):
            onehot = (jnp.arange(g.shape[0]) == k).astype(g.dtype) * scale
            return jnp.tensordot(onehot, g, axes=1)

        grad = jax.tree.map(pick, grad_sums)
        updates, opt_state = tx.update(grad, state.opt_state, state.params)
        return TrainState(state.step + 1, optax.apply_updates(state.params, updates), opt_state)

    return jax.jit(apply, donate_argnums=0)


class AsyncLoop:
    def __init__(self, trainer):
        self.t = trainer
        self.cfg = cfg = trainer.config
        self.w, self.b = cfg.num_workers, cfg.global_batch_size
        self.apply = make_apply(trainer.tx)
        self.bound = int(cfg.asp.staleness_bound)
        self.every = int(cfg.asp.controller_every) or self.w
        self.comm = trainer.timer.comm_time  # push + pull of the parameters
        self.version = 0
        self.now = 0.0
        self.stream_pos = 0
        self.iterations = np.zeros(self.w, np.int64)  # pushes per worker (SSP clocks)
        self.busy = np.zeros(self.w, bool)
        self.last_time = np.zeros(self.w)
        self.applied = np.zeros(self.w, np.int64)
        self.staleness: list[list[int]] = [[] for _ in range(self.w)]
        self.events: list = []  # heap of (finish time, worker, group index, rows)
        self.groups: dict[int, Group] = {}
        self.evals: list[dict] = []

    # -- checkpoints: the server, every worker, and the gradients still in flight ----------
    def arrays(self, cstate, sizes) -> dict:
        return {
            "train": self.t.state,
            "controller": jax.tree.map(np.asarray, cstate),
            "sizes": np.asarray(sizes, np.int32),
            "groups": {str(g): group.sums for g, group in self.groups.items()},
            "workers": {
                "iterations": self.iterations.copy(),
                "applied": self.applied.copy(),
                "busy": self.busy.astype(np.int32),
                "last_time": self.last_time.copy(),
            },
        }

    def meta(self, run_id: str) -> dict:
        return {
            "version": self.version,
            "now": self.now,
            "stream_pos": self.stream_pos,
            "events": [list(e) for e in self.events],
            "group_versions": {str(g): group.version for g, group in self.groups.items()},
            "staleness": self.staleness,
            "evals": self.evals,
            "wandb_run_id": run_id,
        }

    def restore(self, ckpt: Checkpointer, step: int, cstate, sizes) -> tuple[Any, Any, str]:
        meta = ckpt.restore_meta(step)
        # Gradients in flight are restored into arrays shaped like a real local step's.
        self.t.compile_variants()
        template = self.t.steps.local(
            self.t.state.params,
            self.t.batch_of(
                self.t.sampler.stream(0, self.b),
                np.full(self.w, self.b // self.w)
                + np.eye(self.w, dtype=np.int64)[0] * (self.b % self.w),
                None,
                0,
            ),
        )
        like = self.arrays(cstate, sizes)
        like["groups"] = {g: template for g in meta["group_versions"]}
        arrays, _ = ckpt.restore(step, like)
        self.t.state = arrays["train"]
        self.groups = {
            int(g): Group(arrays["groups"][g], v) for g, v in meta["group_versions"].items()
        }
        workers = arrays["workers"]
        self.iterations, self.applied = workers["iterations"], workers["applied"]
        self.busy, self.last_time = workers["busy"].astype(bool), workers["last_time"]
        self.version, self.now, self.stream_pos = meta["version"], meta["now"], meta["stream_pos"]
        self.events = [tuple(e) for e in meta["events"]]
        heapq.heapify(self.events)
        self.staleness, self.evals = meta["staleness"], meta["evals"]
        truncate_metrics(self.t.workdir, self.version)
        return arrays["controller"], np.asarray(arrays["sizes"]), meta["wandb_run_id"]

    def scale(self, k: int, b_k: int) -> float:
        """Factor on worker k's gradient sum: b_k / B of its mean (share) or its mean."""
        asp = self.cfg.asp
        s = 1.0 / self.b if asp.weighting == "share" else 1.0 / max(b_k, 1)
        if asp.lr_scaling == "linear":
            s *= b_k / (self.b / self.w)
        return s

    def may_start(self, k: int) -> bool:
        if self.busy[k]:
            return False
        return self.bound < 0 or self.iterations[k] - self.iterations.min() <= self.bound

    def start_ready(self, sizes: np.ndarray) -> None:
        """Starts every idle worker that may start, all from the current version."""
        ready = [k for k in range(self.w) if self.may_start(k)]
        if not ready:
            return
        group_sizes = np.zeros(self.w, np.int64)
        group_sizes[ready] = sizes[ready]
        rows = self.t.sampler.stream(self.stream_pos, int(group_sizes.sum()))
        self.stream_pos += int(group_sizes.sum())
        round_index = self.version // self.w  # profiles are indexed by BSP-equivalent steps
        speeds = self.t.timer.speeds(min(round_index, self.cfg.train.num_steps - 1))
        extras = self.t.timer.batch_extras(group_sizes, speeds)
        batch = self.t.batch_of(rows, group_sizes, extras, round_index)
        wall = self.cfg.clock == "wall"  # each device's compute, measured synchronised
        sums, times = self.t.steps.run_local(self.t.state.params, batch, timed=wall)
        gid = len(self.groups) and max(self.groups) + 1
        self.groups[gid] = Group(sums, self.version)
        if not wall:
            times = self.t.timer.cost.worker_times(round_index, group_sizes, speeds)
        times = self.t.timer.accept(round_index, times, group_sizes)
        for k in ready:
            duration = float(times[k]) + self.comm
            self.busy[k] = True
            self.last_time[k] = duration
            heapq.heappush(self.events, (self.now + duration, k, gid, int(group_sizes[k])))

    def apply_next(self) -> dict[str, Any]:
        finish, k, gid, b_k = heapq.heappop(self.events)
        group = self.groups[gid]
        self.t.state = self.apply(self.t.state, group.sums.grad, k, self.scale(k, b_k))
        staleness = self.version - group.version
        record = {
            "step": self.version + 1,
            "time": finish,
            "step_time": finish - self.now,
            "worker": k,
            "staleness": staleness,
            "_group": group,
            "_b": b_k,
        }
        self.version += 1
        self.now = finish
        self.busy[k] = False
        self.iterations[k] += 1
        self.applied[k] += 1
        self.staleness[k].append(staleness)
        if not any(gid == e[2] for e in self.events):
            del self.groups[gid]  # every member applied: free its gradients
        return record

    def run(self) -> dict[str, Any]:
        t, cfg = self.t, self.cfg
        ckpt = Checkpointer(t.workdir, keep=cfg.train.keep_checkpoints)
        latest, previous = resume_point(ckpt, t.workdir, cfg)
        if previous is not None:
            return previous
        cstate = jax.jit(t.controller.init, static_argnums=(0, 1))(self.w, self.b)
        sizes = t.safe_sizes(
            controllers.initial_sizes(cstate, self.w, self.b), t.timer.speeds(0), 0
        )
        run_id = ""
        if latest is not None:
            cstate, sizes, run_id = self.restore(ckpt, latest, cstate, sizes)
        resolved = t.resolved_config()
        tracker = make_tracker(
            ml_collections.ConfigDict(resolved),
            t.workdir,
            process_index=jax.process_index(),
            tags=(f"controller:{cfg.controller.name}", f"hetero:{cfg.hetero.name}", "mode:asp"),
            resume_id=run_id,
        )
        log = RunLog(
            t.workdir, is_main=jax.process_index() == 0, tracker=tracker, append=latest is not None
        )
        log.config(resolved)
        if latest is None:
            log.summary({"status": "running", "steps": 0})
        speeds = t.timer.speeds(0)
        t.warm_up(0, sizes, speeds)
        budget = float(cfg.asp.time_budget)
        pending, start = [], time.perf_counter()
        log.say(
            f"asynchronous training: {self.w} workers, B={self.b}, staleness bound "
            f"{self.bound}, controller {cfg.controller.name}"
        )
        saved, message = latest, ""  # the last checkpoint; the line said on a stop
        try:
            # A signal stops the loop after a whole update (see omnilearn_jax/interrupt.py).
            with deferred(enabled=jax.process_count() == 1) as stop:
                while self.version < cfg.train.num_steps and not (budget and self.now >= budget):
                    t.faults.crash(self.version)
                    self.start_ready(sizes)
                    record = self.apply_next()
                    record.update(batch_sizes=sizes, worker_times=self.last_time.tolist())
                    pending.append(record)
                    done = self.version
                    if done % self.every == 0:
                        obs = t.observe(
                            done // self.w,
                            sizes,
                            self.last_time,
                            t.timer.speeds(min(done // self.w, cfg.train.num_steps - 1)),
                        )
                        sizes, cstate = t.next_sizes(cstate, obs)
                    if done % cfg.train.log_every == 0:
                        self.flush(log, pending)
                        log.say(
                            f"update {done} time {self.now:.2f}s sizes {sizes.tolist()} "
                            f"staleness {self.staleness_summary()['staleness_mean']:.2f}"
                        )
                    if done % cfg.train.eval_every == 0:
                        self.evaluate(log, pending)
                    if cfg.train.checkpoint_every and done % cfg.train.checkpoint_every == 0:
                        self.flush(log, pending)
                        ckpt.save(done, self.arrays(cstate, sizes), self.meta(tracker.run_id))
                        saved = done
                    stop.check()
            self.flush(log, pending)
            if not self.evals or self.evals[-1]["step"] != self.version:
                self.evaluate(log, pending)
            ckpt.save(self.version, self.arrays(cstate, sizes), self.meta(tracker.run_id))
            summary = self.summary(time.perf_counter() - start, tracker.run_id)
            log.summary(summary)
            if cfg.train.save_params and log.is_main:
                from omnilearn_jax.loop import save_params

                save_params(t.state.params, f"{t.workdir}/final_params.npz")
        except KeyboardInterrupt as error:  # Ctrl-C or SIGTERM: save what is whole, say so
            if getattr(error, "at_boundary", False) and saved != self.version:
                self.flush(log, pending)
                ckpt.save(self.version, self.arrays(cstate, sizes), self.meta(tracker.run_id))
                saved = self.version
            log.summary(
                {
                    "status": "interrupted",
                    "error": f"{type(error).__name__}: {error}",
                    "steps": self.version,
                    "last_checkpoint": saved,
                    "resume_step": saved or 0,
                }
            )
            message = stop_message(self.version, cfg.train.num_steps, saved, unit="update")
            raise
        except BaseException as error:
            log.summary(
                {
                    "status": "failed",
                    "error": f"{type(error).__name__}: {error}",
                    "steps": self.version,
                }
            )
            raise
        finally:
            log.close()
            ckpt.close()
            if message:
                log.say(message)
        log.say(
            f"done: {self.version} updates, final eval accuracy "
            f"{summary['final_eval_accuracy']:.4f} at {self.now:.2f}s; results in {t.workdir}"
        )
        return summary

    def flush(self, log: RunLog, pending: list) -> None:
        for record in pending:
            group, k, b_k = record.pop("_group"), record["worker"], record.pop("_b")
            loss = float(np.asarray(group.sums.loss)[k]) / max(b_k, 1)
            log.train({**record, "loss": loss, "worker_batch": b_k})
            if not math.isfinite(loss) and self.cfg.train.nan_policy == "stop":
                raise FloatingPointError(f"non-finite loss ({loss}) at update {record['step']}")
        pending.clear()

    def evaluate(self, log: RunLog, pending: list) -> None:
        self.flush(log, pending)
        ev = {"step": self.version, "time": self.now, **self.t.evaluate()}
        log.eval(ev)
        self.evals.append(ev)
        log.say(f"  eval update {self.version}: accuracy {ev['eval_accuracy']:.4f}")

    def staleness_summary(self) -> dict[str, Any]:
        every = [s for per in self.staleness for s in per]
        return {
            "staleness_mean": float(np.mean(every)) if every else 0.0,
            "staleness_max": int(max(every, default=0)),
            "staleness_mean_per_worker": [float(np.mean(p)) if p else 0.0 for p in self.staleness],
            "staleness_histogram": np.bincount(every, minlength=1).tolist() if every else [],
            "updates_per_worker": self.applied.tolist(),
        }

    def summary(self, wall_time: float, run_id: str) -> dict[str, Any]:
        target = self.cfg.train.target_accuracy
        last = self.evals[-1]
        return {
            "final_eval_accuracy": last["eval_accuracy"],
            "final_eval_loss": last["eval_loss"],
            "total_time": self.now,
            "steps": self.version,
            "time_budget": float(self.cfg.asp.time_budget),
            "time_to_target": time_to_target(self.evals, target) if target > 0 else None,
            "target_accuracy": target,
            "wall_time": wall_time,
            "wandb_run_id": run_id,
            "mode": "asp",
            "status": "complete",
            **self.staleness_summary(),
        }
