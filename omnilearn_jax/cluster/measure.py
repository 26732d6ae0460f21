"""Profiling the real train step for a cost curve, and keeping the curve with the run.

A device's compute time is taken exactly as the wall clock takes it in a run (step.py
`Steps.run_local`, timed from the device's own launch until its sums are ready), on a split
that puts `rows` rows on the first local device and none elsewhere, so the device computes
its bucket of `rows` through the per-device layout (engine/buckets.py) and nothing else runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from omnilearn_jax.cluster.curve import MEASURE, RUN_FILE, CostCurve, load_curve, measure_curve


def device_rows_timer(trainer: Any) -> Callable[[int], float]:
    """A function rows -> seconds of one local device computing that many rows of the real
    model (the trainer's local programs must be compiled: `trainer.compile_variants()`)."""
    config, layout = trainer.config, trainer.layout
    position = int(trainer.engine.placement.local_positions[0])
    per_device = layout.workers_per_device
    first = position * per_device
    delay = np.zeros(layout.num_devices, np.float32) if trainer.engine.steps.inject else None

    def run_rows(rows: int) -> float:
        sizes = np.zeros(config.num_workers, np.int64)
        share = np.full(per_device, rows // per_device)
        share[: rows % per_device] += 1
        sizes[first : first + per_device] = share
        extras = {"delay": delay} if delay is not None else None
        blocks = trainer.batch_of(np.arange(rows), sizes, extras, 0)
        _, times = trainer.engine.steps.run_local(trainer.state.params, blocks, timed=True)
        return float(times[list(trainer.engine.placement.local_positions).index(position)])

    return run_rows


def lost_on_resume(workdir: str, what: str, name: str) -> ValueError:
    """The error of a resumed run whose measurement (`name` in its directory) is gone:
    measuring again would change the run's clock where it resumes."""
    return ValueError(
        f"{workdir} resumes a run whose {what} ({name}) is gone; put the file back, or use "
        "--config.train.resume=False (or a new workdir) to start afresh"
    )


def run_curve(trainer: Any, repeats: int = 5) -> CostCurve | None:
    """The cost curve of a run, kept in its directory as `cost_curve.json`.

    A curve already in the run directory is reused (a resumed run keeps the clock it
    started with); else `cost.curve` names a file to copy in, or is 'measure': the real
    step is profiled here at every bucket size the layout compiles. '' means no curve.
    """
    setting = str(trainer.config.cost.curve)
    if not setting:
        return None
    kept = os.path.join(trainer.workdir, RUN_FILE)
    if os.path.exists(kept):
        return load_curve(kept)
    if setting == MEASURE and getattr(trainer, "resuming", False):
        raise lost_on_resume(trainer.workdir, "measured cost curve", RUN_FILE)
    if setting == MEASURE:
        # Single-process only (measuring runs the reduction, a collective the other
        # processes would not join): config_check.check_for_devices refuses it on every
        # process before the trainer gets here.
        import jax  # the platform is part of what was measured

        trainer.compile_variants()

        device = jax.devices()[0]
        source = {
            "platform": device.platform,
            "device_kind": device.device_kind,
            "model": trainer.config.model.name,
            "dataset": trainer.config.dataset.name,
        }
        curve = measure_curve(
            device_rows_timer(trainer), trainer.layout.buckets, repeats=repeats, source=source
        )
    else:
        curve = load_curve(setting)
    os.makedirs(trainer.workdir, exist_ok=True)
    curve.save(kept)
    return curve
