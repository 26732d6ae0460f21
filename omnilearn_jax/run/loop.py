"""The training loop of a built `Trainer`: steps, logging, evaluation, checkpoints, resume.

Per step: the sampler gives the step's B examples, the current split lays them out on the
devices, the jitted step updates the parameters, the timer gives each worker's time, and the
controller picks the next split. Every `checkpoint_every` steps (and at the end) everything
needed to continue exactly is saved; a rerun in the same workdir continues from there.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import shutil
import signal
import time
from typing import Any

import jax
import ml_collections
import numpy as np

import controllers
from omnilearn_jax.config.schema import base_config
from omnilearn_jax.engine import state as held
from omnilearn_jax.engine.step import SplitDisagreement
from omnilearn_jax.run import cgroups, distributed, inputs
from omnilearn_jax.run.checkpoint import Checkpointer, has_checkpoint, host_tree, keys_restored
from omnilearn_jax.run.interrupt import Interrupted, deferred, stop_message
from omnilearn_jax.run.metrics import time_to_target
from omnilearn_jax.run.runlog import RunLog
from omnilearn_jax.run.runstore import (
    FINAL_PARAMS,
    complete_summary,
    plain,
    read_json,
    truncate_metrics,
)
from omnilearn_jax.tracking import make_tracker


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s"


_ended = [0]  # runs that have ended in this process (settle_heap reads it)
_uncollected = [0]  # of them, those ended since settle_heap's last full collection
# On the virtual clock, a full collection after at most this many ended runs: about 6,100
# memory maps a run (below), so 4 uncollected runs stay far from Linux's 65,530.
VIRTUAL_COLLECT_EVERY = 4


def settle_heap(timed: bool = True) -> None:
    """Freezes every object left when warm-up ends (compiling leaves hundreds of thousands):
    Python's collector then never scans them again during the run. Otherwise its full
    collections, 66-180 ms each in a fresh process (measured 2026-12-02 in the HL2 job of
    benchmarks/hetero_wall.py), land inside timed steps: one added 185 ms to a 12 ms step and
    so 25% to a 60-step run. The run unfreezes at its end.

    The first run of a process collects only the young generations first (under a
    millisecond). A later one collects everything: an ended run's trainer is cyclic garbage
    in the oldest generation, and it holds the run's compiled programs, each mapped into the
    process (about 6,100 memory maps a run of the step_overhead job, 4 devices): uncollected,
    ten runs in one process passed Linux's 65,530 maps, LLVM could not map the next program
    ("Cannot allocate memory") and the process crashed (benchmarks/step_overhead.py --reps 3,
    2026-12-03). Collecting them takes 0.3-0.5 s, in warm-up, never in a timed step.

    Where no step's time feeds the results (`timed` False: the virtual clock) a later run
    does neither, unless VIRTUAL_COLLECT_EVERY runs have ended uncollected: Python's own full
    passes free ended runs meanwhile, and most of the 0.3-0.5 s a run is saved (three test
    files that train many runs in one process, with no virtual-clock collection at all,
    2026-12-04: 106 s against 125-145 s). A process's first
    run still freezes, so a fresh process's wall time (`wall_time` in its summary) has no
    collector pause on either clock."""
    if not _ended[0]:
        gc.collect(1)
    elif timed or _uncollected[0] >= VIRTUAL_COLLECT_EVERY:
        gc.collect(2)
    else:
        return
    _uncollected[0] = 0
    gc.freeze()


def heap_released() -> None:
    """The run has ended: what it froze may be collected again (by the next run's
    settle_heap at the latest)."""
    gc.unfreeze()
    _ended[0] += 1
    _uncollected[0] += 1


def save_params(params, path: str) -> None:
    """Parameters as an npz of leaves keyed by their tree path (e.g. 'layers/0/kernel')."""
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    arrays = {
        "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path): np.asarray(v)
        for path, v in flat
    }
    np.savez(path, **arrays)


# Keys that may change between a run and its resumption without changing what it computes
# (the launcher picks a free port for each launch, so a launched run's address changes).
RESUMABLE_CHANGES = (
    "train.log_every",
    "train.checkpoint_every",  # (its default went from 50 to 500 on 2026-12-05)
    "train.keep_checkpoints",
    "train.resume",
    "wandb.mode",
    "faults.crash_step",
    "distributed.coordinator_address",
    # Which process reads the config: process 0 wrote config.json, the others compare with it.
    "distributed.process_id",
)


def as_stored(config) -> dict:
    """The config as config.json holds it (lists for tuples, inf as null)."""
    return json.loads(json.dumps(plain(config.to_dict())))


def config_changes(old: dict, new: dict, ignore: tuple[str, ...] = ()) -> str:
    """The keys (dotted) whose values differ between two stored configs, with both values,
    at most five ('' when none). A key one config lacks (added to the code later, or a
    plug-in's argument) is unchanged when the other keeps its default."""
    old, new = _flat(old), _flat(new)
    default = _flat(as_stored(base_config()))
    unread = _unread_dataset_keys(old, new)
    changed = sorted(
        k
        for k in set(old) | set(new)
        if old.get(k, default.get(k)) != new.get(k) and k not in ignore and k not in unread
    )
    return ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in changed[:5])


def _unread_dataset_keys(old: dict, new: dict) -> set[str]:
    """Dataset keys (dotted) that the data set both configs name does not read: a change in
    them changes nothing (configs/paper_bsp.py stopped setting the synthetic set's keys for
    digits, and runs made before were refused as 'another config')."""
    from omnilearn_jax.data import datasets

    name = new.get("dataset.name")
    if name != old.get("dataset.name"):
        return set()
    keys = {k[8:] for k in set(old) | set(new) if k.startswith("dataset.")}
    return {f"dataset.{k}" for k in datasets.unread(name, keys)}


def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def check_same_config(workdir: str, config, *, checkpointed: bool = True) -> None:
    """A checkpoint (or a complete run) is continued only by the config that wrote it (else a
    clear error). Checkpoints without a config.json (a copied checkpoints folder) are refused:
    nothing says which config wrote them."""
    path = os.path.join(workdir, "config.json")
    if not os.path.exists(path):
        if checkpointed:
            raise ValueError(
                f"{workdir} holds checkpoints but no config.json saying which config wrote them "
                f"(a copied checkpoints folder?); use a new workdir, or "
                f"--config.train.resume=False to start afresh there"
            )
        return
    stored = read_json(path)
    resolved = stored.pop("resolved", None) or {}
    detail = config_changes(stored, as_stored(config), RESUMABLE_CHANGES)
    if detail or (detail := inputs.changed(resolved.get("input_files", []), config)):
        what = "a checkpoint of a run" if checkpointed else "a finished run"
        raise ValueError(
            f"{workdir} holds {what} with a different config ({detail}); use a new workdir, "
            f"or --config.train.resume=False to start this one afresh there"
        )


def preempted(step: int) -> bool:
    """In a multi-process run, whether every process has reached the step JAX's preemption
    service agreed on after a SIGTERM reached any of them (its notifier takes SIGTERM there,
    and the run had gone on to its end as if nothing came). One process: never (its own
    handler stops it, `interrupt.deferred`)."""
    if jax.process_count() == 1 or not jax.config.jax_enable_preemption_service:
        return False
    from jax.experimental import multihost_utils

    return bool(multihost_utils.reached_preemption_sync_point(step))


# Keys each process of one run may set for itself.
PER_PROCESS = ("distributed.process_id", "distributed.local_device_ids")


def same_config_everywhere(config) -> None:
    """Every process of a run joined over several processes runs the config process 0 runs
    (one broadcast and one all-gather, before anything is built): one given another config
    (a stale copy of the repository on one host, an override given to one process) had hung
    in a collective, or finished 'complete' with a wrong result (another learning rate on one
    process), and a user error on one process aborted all after 30 s."""
    if jax.process_count() == 1:
        return
    from jax.experimental import multihost_utils

    mine = as_stored(config)
    detail = config_changes(distributed.from_main(lambda: mine), mine, PER_PROCESS)
    differs = np.asarray(multihost_utils.process_allgather(np.int32(bool(detail)))).ravel()
    if detail:
        raise ValueError(
            f"process {jax.process_index()}'s config differs from process 0's ({detail}); "
            f"give every process of a run the same config"
        )
    if differs.any():
        others = [int(i) for i in np.flatnonzero(differs)]
        raise ValueError(
            f"process(es) {others} were given another config than process 0 (each names the "
            f"keys); give every process of a run the same config"
        )


def completed_run(workdir: str, cfg) -> dict | None:
    """When resuming (`train.resume`): the summary of the complete run in `workdir`, or None.
    First a workdir whose checkpoint or complete run another config wrote is refused
    (`check_same_config`), with or without its checkpoints (a finished run whose checkpoints
    were deleted to save space was trained afresh over, under any config). Reads files only,
    so it runs before anything is built or compiled."""
    if not cfg.train.resume:
        return None
    previous = complete_summary(workdir)
    checkpointed = has_checkpoint(workdir)
    if previous is not None or checkpointed:
        check_same_config(workdir, cfg, checkpointed=checkpointed)
    return previous


def say_complete(workdir: str, previous: dict) -> None:
    if jax.process_index() == 0:  # the others print nothing of their own but errors
        print(f"run in {workdir} is already complete ({previous['steps']} steps); nothing to do")


def resume_point(ckpt: Checkpointer, workdir: str, cfg) -> tuple[int | None, dict | None]:
    """(latest checkpoint step to resume from or None, the summary if already complete)."""
    previous = completed_run(workdir, cfg)
    latest = ckpt.latest_step() if cfg.train.resume else None
    if previous is not None:
        say_complete(workdir, previous)
        return latest, previous
    if latest is None:
        if jax.process_index() == 0 and os.path.isdir(ckpt.directory):
            shutil.rmtree(ckpt.directory)  # a fresh run must not mix with old steps
        return None, None
    return latest, None


# Train records a run holds unwritten at most (each keeps its step's metrics on the device):
# with log_every, eval_every and checkpoint_every all 20,000, a run's memory grew 200 MB in
# 10,000 steps and metrics.jsonl stayed empty until the end.
PENDING_LIMIT = 256


class NonFiniteLoss(FloatingPointError):
    """A non-finite training loss that stops the run (`train.nan_policy=stop`, or past
    `train.max_skipped` in a row under `skip`); the command line says it in one line.
    `step`: the step (or update) whose loss it was, the last one the run recorded."""

    def __init__(self, message: str, step: int) -> None:
        super().__init__(message)
        self.step = step


class Runner:
    """The one loop of a run, whatever advances it: resume, tracker, run log, periodic
    flush/eval/checkpoint, summary, Ctrl-C and failure handling are written here once.

    A mode (BSP: `Loop`; async: `asp.AsyncLoop`) supplies `advance` (one step or one
    update, including controller decisions; sets `self.done`), `flush(log, wait, upto)` (its
    buffered train records, up to step `upto` when given: all of them, or with `wait` False
    those already computed, `due`),
    `clock_time()`, `summary_extra()` and, for checkpoints, `extra_arrays`, `extra_meta` and
    `load`. It reaches the trainer through its public methods only.
    """

    unit = "step"  # what `done` counts, in messages
    tag: tuple[str, ...] = ()  # extra tracker tags

    def __init__(self, trainer):
        self.t = trainer
        self.cfg = trainer.config
        self.ckpt = Checkpointer(trainer.workdir, keep=self.cfg.train.keep_checkpoints)
        self.evals: list[dict] = []
        self.pending: list = []
        self.disagreements: list[str] = []  # multi-process steps run again (Loop.step)
        self.done = 0
        self.last_saved: int | None = None
        self.warm: tuple[float, int] | None = None  # (time, step) when compiling was over
        self.message = ""  # said after the run store and tracker are closed
        self.skipped = 0  # non-finite losses in a row (nan_policy=skip)

    # -- what a mode provides --------------------------------------------------------------
    def advance(self, cstate, sizes) -> tuple[Any, np.ndarray]:
        raise NotImplementedError

    def flush(self, log: RunLog, wait: bool = True, upto: int = 0) -> None:
        raise NotImplementedError

    def due(self, wait: bool, value, upto: int = 0) -> list:
        """The pending records to write now, oldest first: all of them (up to step `upto`
        when given), or without `wait` those before the first whose `value(record)` the
        devices have not computed yet.

        A periodic flush does not wait: fetching a value not yet computed drains the queue of
        dispatched steps, and the devices then idle while the host prepares the next step.
        The paper job's virtual clock flushes every 11 steps: its loop spent 0.43-0.58 ms a
        step (wall) in flushes that waited, 0.25-0.30 ms in these (1,000 steps, two runs
        each, 2026-12-05). The rest is written at the next flush, and the progress line of a
        step waits, a step or two, for its record (`run`); evaluations, checkpoints and the
        end write everything."""
        n = len(self.pending)
        if upto:  # the pending records are in step order
            n = sum(1 for r in self.pending if self.step_of(r) <= upto)
        if not wait:
            ready = (getattr(value(r), "is_ready", lambda: True)() for r in self.pending[:n])
            n = next((i for i, r in enumerate(ready) if not r), n)
        out, self.pending[:] = self.pending[:n], self.pending[n:]
        return out

    def step_of(self, record) -> int:
        """The step (or update) a pending record is of."""
        raise NotImplementedError

    def clock_time(self) -> float:
        raise NotImplementedError

    def finished(self) -> bool:
        return self.done >= self.cfg.train.num_steps

    def warm_up(self, sizes: np.ndarray) -> None:
        self.t.warm_up(self.done, sizes, self.t.timer.speeds(self.done))

    def describe(self) -> str:
        return ""

    def processes(self) -> int:
        """The processes the run spans (the start line says it)."""
        return jax.process_count()

    def extra_arrays(self) -> dict:
        return {}

    def extra_meta(self) -> dict:
        return {}

    def restore_like(self, meta: dict) -> dict:
        """The extra arrays' structure, from the checkpoint's JSON part."""
        return self.extra_arrays()

    def load(self, arrays: dict, meta: dict) -> None:
        pass

    def sync(self) -> None:
        """Brings `trainer.state` up to date before it is evaluated or saved."""

    def summary_extra(self) -> dict[str, Any]:
        return {}

    # -- checkpoint state ----------------------------------------------------------------
    def arrays(self, cstate, sizes, extra: dict | None = None) -> dict:
        self.sync()
        return {
            # Trees, however the steps hold them; as host numpy (the same on every process),
            # which process 0 alone writes (benchmarks/checkpoint_cadence.py times saves).
            "train": host_tree(held.plain(self.t.state)),
            # Computed identically on every process; saved as host numpy, since a
            # single-device jax.Array cannot be serialised in a multi-process run.
            "controller": host_tree(cstate),  # typed PRNG keys as their data
            "sizes": np.asarray(sizes, np.int32),
            "timer": self.t.timer.state(),  # the clock and the measured-time guard
            **(self.extra_arrays() if extra is None else extra),
        }

    def save(self, cstate, sizes, run_id: str) -> None:
        self.t.agreement.check(f"{self.unit} {self.done}")  # one all-gather, not one a step
        # `skipped`: a run resumed inside a streak of skipped updates counts on from it, as
        # the optimiser's own count (optax.apply_if_finite, in the state) does.
        meta = {"evals": self.evals, "wandb_run_id": run_id, "skipped": self.skipped}
        meta.update(self.extra_meta())  # async: settles the times in flight, which the guard
        # may reject: counted after it, as the guard's memory in `arrays` is read after it
        meta["rejected_times"] = self.t.timer.guard.rejected
        meta["repaired_splits"] = self.t.repaired_splits
        self.ckpt.save(self.done, self.arrays(cstate, sizes), meta)
        self.last_saved = self.done

    def restore(self, step: int, cstate, sizes) -> tuple[Any, np.ndarray, str]:
        like = self.arrays(cstate, sizes, self.restore_like(self.ckpt.restore_meta(step)))
        arrays, meta = self.ckpt.restore(step, like)
        # Read back as host arrays: placed where the steps hold the state now.
        where = jax.tree.map(lambda a: getattr(a, "sharding", None), held.plain(self.t.state))
        self.t.state = self.t.engine.hold(jax.device_put(arrays["train"], where))
        self.evals = list(meta["evals"])
        self.skipped = int(meta.get("skipped", 0))  # absent from checkpoints before it
        self.t.timer.guard.rejected = int(meta.get("rejected_times", 0))  # and this
        self.t.repaired_splits = int(meta.get("repaired_splits", 0))  # and this
        self.done = self.last_saved = step
        self.t.timer.load_state(arrays["timer"])
        self.load(arrays, meta)
        if jax.process_index() == 0:  # the one writer of the run store
            truncate_metrics(self.t.workdir, step)
        cstate = keys_restored(arrays["controller"], cstate)
        return cstate, np.asarray(arrays["sizes"]), meta.get("wandb_run_id", "")

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        t, cfg = self.t, self.cfg
        num_steps, w, b = cfg.train.num_steps, cfg.num_workers, cfg.global_batch_size
        latest, previous = resume_point(self.ckpt, t.workdir, cfg)
        if previous is not None:
            return previous
        cstate = jax.jit(t.controller.init, static_argnums=(0, 1))(w, b)
        sizes = t.safe_sizes(controllers.initial_sizes(cstate, w, b), t.timer.speeds(0), 0)
        run_id = ""
        if latest is not None:
            cstate, sizes, run_id = self.restore(latest, cstate, sizes)
        resolved = t.resolved_config()
        tracker = make_tracker(
            ml_collections.ConfigDict(resolved),
            t.workdir,
            process_index=jax.process_index(),
            tags=(f"controller:{cfg.controller.name}", f"hetero:{cfg.hetero.name}", *self.tag),
            resume_id=run_id,
        )
        log = RunLog(
            t.workdir, is_main=jax.process_index() == 0, tracker=tracker, append=latest is not None
        )
        log.config(resolved)
        # A run that dies without Python noticing still reads "running"; a resumed one too,
        # so that what the launcher records of its failure is not kept under the failed
        # process, exit code and error of the session before (launch.mark_failed).
        resumed = {"resumed_from": latest} if latest is not None else {}
        log.summary({"status": "running", "steps": latest or 0, **resumed})
        first = self.done
        try:
            log.say(f"compiling the {cfg.model.name} train and eval steps ({cfg.backend})...")
            # The decision first: the first steps on the devices after its first run took
            # 20-30 ms more on one of them (HL4 on the wall clock, one run in two or more),
            # which the step's warm-up now absorbs instead of the first timed step.
            t.warm_decisions(cstate, sizes)
            self.warm_up(sizes)
            settle_heap(timed=cfg.clock == "wall")
            # `launch --quota_from=steps`: the CPU quota applies from here, not to compiling.
            if (group := cgroups.enter_deferred()) is not None:
                log.say(f"CPU quota applies from the first step (group {group.name})")
            distributed.barrier("omnilearn: warm-up done")  # every clock starts together
            log.say(
                f"training {cfg.model.name} ({t.param_count:,} params) on {cfg.dataset.name}: "
                f"{w} workers on {t.layout.num_devices} {jax.devices()[0].platform} devices "
                f"({self.processes()} process(es)), B={b}, {cfg.backend}, "
                f"controller {cfg.controller.name}"
                + self.describe()
                + (f"; resumed at {self.unit} {latest}" if latest is not None else "")
            )
            start = time.perf_counter()
            aside = 0.0  # seconds of periodic evaluations and saves, not the steps' cost
            lines: list[int] = []  # steps whose progress lines wait for their records (`due`)
            # A signal stops the loop after a whole step (one process only: a checkpoint
            # needs every process, and a signal may reach only some of them).
            with deferred(enabled=jax.process_count() == 1) as stop:
                while not self.finished():
                    cstate, sizes = self.advance(cstate, sizes)
                    done, last = self.done, self.finished()
                    if last:  # the steps' wall time, before the last evaluation and save
                        self.sync()
                        jax.block_until_ready(t.state)  # the steps dispatched ahead, done
                        self.steps_wall = time.perf_counter() - start - aside
                    if done == first + 1:  # compiles end with the first step: ETA from here
                        self.warm = (time.perf_counter(), done)
                    every = cfg.train.checkpoint_every
                    evaluate = done % cfg.train.eval_every == 0 or last
                    save = bool(every and done % every == 0) or last
                    if done % cfg.train.log_every == 0 or last:
                        lines.append(done)  # said once step `done`'s record is written
                    # An evaluation or a save waits for the step anyway. Processes of one
                    # run flush alike (a non-finite loss stops them all at the same step).
                    wait = evaluate or save or jax.process_count() > 1
                    while lines:
                        self.flush(log, wait=wait, upto=lines[0])
                        if self.written() < lines[0]:
                            break
                        self.progress(log, start)
                        lines.pop(0)
                    # log_every far apart: records of device arrays would pile up unwritten
                    # (not past a progress line still waiting: it reads the last record)
                    if len(self.pending) >= PENDING_LIMIT and not lines:
                        self.flush(log, wait=wait)
                    if (evaluate or save) and not last:  # the steps queued ahead are the steps'
                        jax.block_until_ready(t.state)  # own time, not the evaluation's
                    began = time.perf_counter()
                    if evaluate:
                        self.evaluate(log)
                    if save:
                        self.flush(log)
                        self.save(cstate, sizes, tracker.run_id)
                    aside += time.perf_counter() - began if not last else 0.0
                    if not last:
                        stop.check()
                        if preempted(done):  # SIGTERM in a multi-process run
                            raise Interrupted(signal.SIGTERM, at_boundary=True)
                # Still deferred: a first signal now (the run is done) is not a stop, and one
                # here had left summary.json "running" (a second one stops it, as in a step)
                self.sync()
                # `resumed_from` stays in every later summary: W&B merges summary updates, so
                # its summary of a resumed run kept the key that summary.json had dropped.
                summary = {**self.summary(time.perf_counter() - start, tracker.run_id), **resumed}
                log.summary(summary)
                if cfg.train.save_params and log.is_main:
                    save_params(t.state.params, os.path.join(t.workdir, FINAL_PARAMS))
        except KeyboardInterrupt as error:
            # `stop.check()` raises at a step boundary: everything up to self.done is whole and
            # can be saved. A bare KeyboardInterrupt may land inside a step: keep the last
            # checkpoint rather than save a half-updated state.
            try:
                if getattr(error, "at_boundary", False) and self.last_saved != self.done:
                    self.flush(log)
                    self.save(cstate, sizes, tracker.run_id)
                else:
                    self.salvage(log)
            except NonFiniteLoss as nan:  # the save's flush found it: the run failed there
                log.summary({**self.stopped("failed", nan), **resumed})
                raise nan from None
            # A save the signal cut short (a worker gone), or a second signal during it: the
            # last checkpoint stands, and the summary says so (a second Ctrl-C had left it
            # "running")
            except BaseException:  # noqa: BLE001
                self.salvage(log)
            log.summary({**self.stopped("interrupted", error), **resumed})
            self.message = stop_message(self.done, num_steps, self.last_saved, unit=self.unit)
            error.told = True  # the command line says nothing more (run/main.py)
            raise
        except BaseException as error:  # the run store must say that the run failed
            self.salvage(log)
            log.summary({**self.stopped("failed", error), **resumed})
            raise
        finally:
            heap_released()
            # A first signal while the run store closes waits (a Ctrl-C during W&B's finish
            # had left summary.json "running"); a second stops it, the summary still written
            with deferred(enabled=jax.process_count() == 1):
                log.close()
                self.ckpt.close()
            if self.message:
                log.say(self.message)
        perplexity = summary.get("final_eval_perplexity")  # text: the measure that matters
        scored = (
            f"final eval perplexity {perplexity:.3f}"
            if perplexity is not None
            else f"final eval accuracy {summary['final_eval_accuracy']:.4f}"
        )
        log.say(
            f"done: {scored}, "
            f"{summary['total_time']:.2f}s on the {cfg.clock} clock; results in "
            f"{t.workdir} (config.json, metrics.jsonl, summary.json)"
        )
        return summary

    def salvage(self, log: RunLog) -> None:
        """A run that fails or is interrupted inside a step still writes the records of the
        steps it finished (a resume truncates those past its checkpoint). The run's own
        error is the one reported: one raised here (a device that failed, a non-finite
        loss, which drops the records after it) leaves the rest unwritten."""
        with contextlib.suppress(Exception):  # the run's own error is already on its way
            # Up to the last step counted: a signal may land after a step's record is
            # pending and before `done` counts it (the summary says `done` steps).
            if self.done:
                self.flush(log, upto=self.done)

    def stopped(self, status: str, error: BaseException) -> dict[str, Any]:
        """The summary of a run that did not finish; `resume_step` is where a rerun starts."""
        return {
            "status": status,
            "error": f"{type(error).__name__}: {error}",
            # a non-finite loss is found when its record is written, steps after it ran: the
            # run's last step is its (it said 20 where 2 were recorded)
            "steps": error.step if isinstance(error, NonFiniteLoss) else self.done,
            "last_checkpoint": self.last_saved,
            "resume_step": self.last_saved or 0,
        }

    def evaluate(self, log: RunLog) -> None:
        self.flush(log)
        self.sync()
        ev = {"step": self.done, "time": self.clock_time(), **self.t.evaluate()}
        log.eval(ev)
        self.evals.append(ev)
        log.say(
            f"  eval {self.unit} {self.done}: loss {ev['eval_loss']:.4f} "
            f"accuracy {ev['eval_accuracy']:.4f}"
            + (f" perplexity {ev['eval_perplexity']:.3f}" if "eval_perplexity" in ev else "")
        )

    def nonfinite(self, log: RunLog, step: int, loss: float) -> None:
        where = (
            f"{self.unit} {self.last_saved} in {self.ckpt.directory}"
            if self.last_saved is not None
            else "none"
        )
        limit = self.cfg.train.max_skipped
        skip = self.cfg.train.nan_policy == "skip"
        self.skipped += skip
        if skip and self.skipped <= limit:
            log.say(
                f"warning: non-finite loss {loss} at {self.unit} {step}; its update was skipped"
            )
            return
        self.pending.clear()  # the run stops at this step: no record after it is written
        if skip:  # optax.apply_if_finite applies the update past the limit
            raise NonFiniteLoss(
                f"non-finite loss ({loss}) at {self.unit} {step}, {self.skipped} in a row: "
                f"past train.max_skipped={limit} the update is applied, so the run stops; last "
                f"good checkpoint: {where}",
                step,
            )
        raise NonFiniteLoss(
            f"non-finite loss ({loss}) at {self.unit} {step}; last good checkpoint: {where}. "
            f"To drop such updates, rerun with --config.train.nan_policy=skip in a new workdir "
            f"or with --config.train.resume=False (a checkpoint of nan_policy=stop holds another "
            f"optimiser state: it cannot be continued under skip)",
            step,
        )

    def wrote(self, log: RunLog, step: int, loss: float, sizes, clock: float) -> None:
        """After a train record is written: a finite loss ends a run of skipped updates, a
        non-finite one stops the run or is skipped (`nonfinite`); the record is the one the
        next progress line names."""
        if math.isfinite(loss):
            self.skipped = 0
        else:
            self.nonfinite(log, step, loss)
        self._last = (step, loss, sizes, clock)

    def written(self) -> int:
        """The last step (or update) whose train record is written (or, resumed, was written
        before): every step leaves one record, pending until a flush writes it."""
        return self.done - len(self.pending)

    def progress(self, log: RunLog, start: float, extra: str = "") -> None:
        now = time.perf_counter()
        done, loss, sizes, clock = self._last  # the step of the line, as its record has it
        # The rate comes from the steps after the first one of this session, which carries
        # the compiles; an ETA that included them would overstate the rest several times.
        warm_at, warm_done = self.warm or (now, done)
        eta = "--"
        if done > warm_done:
            rate = (now - warm_at) / (done - warm_done)
            eta = format_duration(rate * self.steps_left(done, clock))
        log.say(
            f"{self.unit} {done}/{self.cfg.train.num_steps} loss {loss:.4f} "
            f"sizes {np.asarray(sizes).tolist()} clock {clock:.2f}s{extra} | "
            f"wall {format_duration(now - start)} ETA {eta}"
        )

    def steps_left(self, done: int, clock: float) -> float:
        """The steps (or updates) still to run, for a progress line's ETA."""
        return self.cfg.train.num_steps - done

    def summary(self, wall_time: float, run_id: str) -> dict[str, Any]:
        target = self.cfg.train.target_accuracy
        last = self.evals[-1] if self.evals else {"eval_accuracy": math.nan, "eval_loss": math.nan}
        return {
            "final_eval_accuracy": last["eval_accuracy"],
            "final_eval_loss": last["eval_loss"],
            "total_time": self.clock_time(),
            "steps": self.done,
            "time_to_target": time_to_target(self.evals, target) if target > 0 else None,
            "target_accuracy": target,
            "wall_time": wall_time,
            # From the first step to the end of the last one, less every evaluation and
            # checkpoint (what a run's steps cost, start-up excluded; with checkpoint_every=2
            # the saves had made it 10x the steps' 0.2 s).
            "steps_wall_time": getattr(self, "steps_wall", wall_time),
            "rejected_times": self.t.timer.guard.rejected,  # measured times the guard replaced
            # decisions whose sizes were no split of B (the allocation rule repaired them)
            "repaired_splits": self.t.repaired_splits,
            "wandb_run_id": run_id,
            "status": "complete",
            **self.summary_extra(),
            **self.t.metric_summary(self.evals),  # text: perplexity (lower is better)
        }


class Loop(Runner):
    """Synchronous (BSP) training: one step of all W workers, one update."""

    def clock_time(self) -> float:
        return self.t.timer.time

    def advance(self, cstate, sizes):
        cstate, sizes = self.step(self.done, cstate, sizes)
        self.done += 1
        return cstate, sizes

    def step(self, step: int, cstate, sizes):
        t = self.t
        t.faults.crash(step)
        speeds = t.timer.speeds(step)
        try:
            timed = self.train_step(step, sizes, speeds)
        except SplitDisagreement as split:  # process 0's split rules: the step again on it
            t.state, sizes = split.state, t.checked(split.split)
            self.disagreements.append(f"step {step}: {split}")
            timed = self.train_step(step, sizes, speeds)
        t.state, metrics, rec = timed
        self.pending.append((step + 1, sizes, speeds, rec, metrics))
        # Oracles get the speeds of the step they decide for (step + 1), so they are optimal
        # at every step, change points included; the other controllers see only times.
        ahead = t.timer.speeds(min(step + 1, self.cfg.train.num_steps - 1))
        sizes, cstate = t.next_sizes(cstate, t.observe(step, sizes, rec["worker_times"], ahead))
        return cstate, sizes

    def step_of(self, record) -> int:
        return record[0]

    def train_step(self, step: int, sizes, speeds):
        """Step `step` on the split `sizes`: (state, metrics, the timer's record)."""
        t = self.t
        # On the virtual clock nothing of the step is timed: its programs may take its rows.
        place = self.cfg.clock == "wall"
        batch = t.batch(step, sizes, t.timer.batch_extras(sizes, speeds), place)
        return t.timer.train_step(t.engine.steps, t.state, batch, step, sizes, speeds)

    def flush(self, log: RunLog, wait: bool = True, upto: int = 0) -> None:
        """Writes buffered train records (`Runner.due`); fetching metrics only here keeps
        dispatch async."""
        for said in self.disagreements:
            log.say(said)
        self.disagreements.clear()
        records = self.due(wait, lambda r: r[4]["accuracy"], upto)  # a step's last metric
        fetched = jax.device_get([r[4] for r in records])  # one transfer for them all
        for (done, sizes, speeds, rec, _), metrics in zip(records, fetched, strict=True):
            loss = float(metrics["loss"])
            # A non-finite loss's accuracy is argmax over non-finite logits (the share of
            # class 0 in the batch): written as null, as the loss is.
            accuracy = float(metrics["accuracy"]) if math.isfinite(loss) else math.nan
            log.train(
                {
                    "step": done,
                    "time": rec["time"],
                    "loss": loss,
                    "accuracy": accuracy,
                    "batch_sizes": sizes,
                    "worker_times": rec["worker_times"],
                    "step_time": rec["step_time"],
                    "idle_fraction": rec["idle_fraction"],
                    "balance": rec["balance"],
                    "speeds": speeds,
                }
            )
            self.wrote(log, done, loss, sizes, rec["time"])

    def summary_extra(self) -> dict[str, Any]:
        totals = self.t.timer.totals()
        return {"steps": totals["steps"], "mean_idle_fraction": totals["mean_idle_fraction"]}
