"""When each device's program starts within an uneven wall-clock step (the launch stagger).

    python -m benchmarks.launch_stagger [--level 4] [--inject 0.003] [--steps 60]

Runs the HL job of benchmarks/hetero_wall.py on the wall clock under `static` and under
`proportional`, timestamps every per-device `Program` call inside `Steps.run_local`, and prints
per controller: over the last 40 steps, the median sorted launch offsets from the start of
the step, how long each call took and the step's `run_local`; over every step after the
first 10 (50 at the default 60), the median step and slowest device from the run store and
each device's compute (its time less its injected wait).
Since injected waits are waited out on the host, every split (the uniform one too) is launched
device by device, each once its wait is over. docs/trainer.md quotes it.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import jax
import numpy as np

from benchmarks.args import at_least


def probe(level: int, inject: float, steps: int, controller: str) -> dict:
    from benchmarks.hetero_wall import job
    from omnilearn_jax.engine import step as engine_step
    from omnilearn_jax.run.job import train_and_evaluate
    from omnilearn_jax.run.runstore import read_metrics

    calls, steps_at = [], []
    call, run_local = engine_step.Program.__call__, engine_step.Steps.run_local

    def timed_call(self, *args):
        start = time.perf_counter()
        out = call(self, *args)
        calls.append((start, time.perf_counter()))
        return out

    def timed_run_local(self, *args, **kwargs):
        start = time.perf_counter()
        out = run_local(self, *args, **kwargs)
        steps_at.append((start, time.perf_counter()))
        return out

    engine_step.Program.__call__, engine_step.Steps.run_local = timed_call, timed_run_local
    try:
        with tempfile.TemporaryDirectory() as tmp:
            train_and_evaluate(job(level, controller, "wall", steps, inject), tmp)
            records = [r for r in read_metrics(tmp) if "worker_times" in r][10:]
            with open(os.path.join(tmp, "summary.json")) as f:
                wall = json.load(f)["steps_wall_time"]
    finally:
        engine_step.Program.__call__, engine_step.Steps.run_local = call, run_local
    offsets, durations = [], []
    for start, end in steps_at[-40:]:
        mine = sorted((s - start, e - s) for s, e in calls if start <= s <= end)
        if mine:
            offsets.append([o for o, _ in mine])
            durations.append(sorted(d for _, d in mine))
    times = np.array([r["worker_times"] for r in records])
    rows = np.array([r["batch_sizes"] for r in records])
    speeds = np.array([r["speeds"] for r in records])
    ms = lambda a: np.round(1e3 * np.median(np.array(a), axis=0), 2).tolist()  # noqa: E731
    return {
        "controller": controller,
        "wall_s": wall,
        "split": rows[-1].tolist(),
        "launch_offsets_ms": ms(offsets) if offsets else [],
        "call_ms": ms(durations) if durations else [],
        "run_local_ms": ms([e - s for s, e in steps_at[-40:]]),
        "step_ms": ms([r["step_time"] for r in records]),
        "slowest_device_ms": ms(times.max(axis=1)),
        "compute_ms": ms(times - inject * rows / speeds),
        "load": os.getloadavg()[0],
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--level", type=int, default=4)
    p.add_argument("--inject", type=float, default=0.003)
    p.add_argument("--steps", type=int, default=60)
    args = p.parse_args(argv)
    at_least(p, steps=(args.steps, 50))  # 10 left out, then the last 40 (it was an IndexError)
    from omnilearn_jax.cluster.profiles import HL_TABLES

    # Both were a ValueError traceback from the first run's config check.
    if args.level not in HL_TABLES["bsp"]:
        p.error(f"--level {args.level}: the paper's levels are {sorted(HL_TABLES['bsp'])}")
    if not 0 <= args.inject < float("inf"):
        p.error(f"--inject takes seconds a sample >= 0, got {args.inject}")
    jax.config.update("jax_num_cpu_devices", 8)  # the job's 4 devices; before any JAX op
    for controller in ("static", "proportional"):
        r = probe(args.level, args.inject, args.steps, controller)
        print(" ".join(f"{k}={v}" for k, v in r.items()), flush=True)


if __name__ == "__main__":
    main()
