"""The same wall-clock job as one process of 2 devices and as 2 processes of 1 device each:
each pinned to a core of its own (the launcher's default, `--cpus=fit`) and unpinned
(`--cpus=none`), each also under a CFS quota of one core each (needs a writable cgroup cpu
controller); unpinned also with programs dispatched to a runtime thread (`cpu_dispatch=async`,
JAX's default; `auto` runs them in the calling thread there, run/cpu_limit.py).

    python -m benchmarks.multiprocess_step [--steps 100] [--reps 2] [--json PATH]

The job: configs/paper_bsp.py (runlocal, CNN on digits), 2 workers, B = 64, static uniform
batches, `clock=wall`. Each variant is a fresh command (`omnilearn_jax.main`, or the
launcher), run side by side in one invocation, interleaved over repetitions. Printed per
variant: the median step (from the first launch until the updated state is ready, all
collectives of the step included, the split's among them), the loop's wall time per step
(decisions and batches too), and the ratio to one process (goal: at most 1.5x, pinned or not).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from benchmarks.args import SKIPPED, at_least

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = [
    "--config=configs/paper_bsp.py:runlocal,model=cnn,hetero=uniform,controller=static",
    "--config.num_workers=2",
    "--config.num_devices=2",
    "--config.global_batch_size=64",
    "--config.controller.b_min=8",
    "--config.clock=wall",
    "--config.train.checkpoint_every=0",
]
ASYNC = "--config.cpu_dispatch=async"  # JAX's own default, where `auto` runs in the caller
VARIANTS = {  # name: (kind, the launcher's options, the job's own)
    "1 process x 2 devices": ("main", [], []),
    "2 processes x 1 device, one core each (the launcher's default, --cpus=fit)": (
        "launch",
        [],
        [],
    ),
    "2 processes x 1 device, unpinned (--cpus=none)": ("launch", ["--cpus=none"], []),
    "2 processes x 1 device, unpinned, programs dispatched (cpu_dispatch=async)": (
        "launch",
        ["--cpus=none"],
        [ASYNC],
    ),
    "2 processes x 1 device, a quota of one core each, one core each (default)": (
        "launch",
        ["--cpu_quota=1,1"],
        [],
    ),
    "2 processes x 1 device, a quota of one core each, unpinned": (
        "launch",
        ["--cpus=none", "--cpu_quota=1,1"],
        [],
    ),
    "2 processes x 1 device, a quota of one core each, unpinned, dispatched": (
        "launch",
        ["--cpus=none", "--cpu_quota=1,1"],
        [ASYNC],
    ),
}


def command(kind: str, extra: list[str], steps: int, workdir: str, job_extra=()) -> list[str]:
    job = [*JOB, f"--config.train.num_steps={steps}", f"--config.train.eval_every={steps}"]
    job += [*job_extra, f"--workdir={workdir}"]
    if kind == "main":
        return [sys.executable, "-m", "omnilearn_jax.main", *job, "--config.cpu_devices=2"]
    launcher = [sys.executable, "-m", "omnilearn_jax.launch", "--num_processes=2"]
    return [*launcher, "--devices_per_process=1", *extra, "--", *job]


def step_times(workdir: str, skip: int = SKIPPED) -> list[float]:
    """A finished run's step times (ms) from its run store, the first `skip` left out."""
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    return [1e3 * r["step_time"] for r in records if "step_time" in r][skip:]


def run(kind: str, extra: list[str], steps: int, job_extra=()) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            command(kind, extra, steps, tmp, job_extra), cwd=ROOT, capture_output=True, text=True
        )
        if proc.returncode:
            raise RuntimeError(proc.stdout[-2000:] + proc.stderr[-2000:])
        steps_ms = step_times(tmp)
        with open(os.path.join(tmp, "summary.json")) as f:
            summary = json.load(f)
    return {
        "step_ms": float(np.median(steps_ms)),
        "loop_ms": 1e3 * summary["steps_wall_time"] / steps,  # start-up, evaluations, saves apart
        "load": os.getloadavg()[0],
    }


def measure(steps: int, reps: int, echo=print) -> dict:
    """Every variant `reps` times, interleaved: per variant its runs, the median step and
    loop a step (ms) and their ratios to one process."""
    rows = {name: [] for name in VARIANTS}
    for _ in range(reps):
        for name, (kind, extra, job_extra) in VARIANTS.items():
            r = run(kind, extra, steps, job_extra)
            rows[name].append(r)
            echo(f"{name}: step {r['step_ms']:.2f} ms, loop {r['loop_ms']:.2f} ms a step "
                 f"(load {r['load']:.2f})")  # fmt: skip
    base = rows["1 process x 2 devices"]
    out = {}
    for name, runs in rows.items():
        step = float(np.median([r["step_ms"] for r in runs]))
        loop = float(np.median([r["loop_ms"] for r in runs]))
        ratio = step / float(np.median([r["step_ms"] for r in base]))
        loop_ratio = loop / float(np.median([r["loop_ms"] for r in base]))
        out[name] = {"runs": runs, "step_ms": step, "loop_ms": loop, "step_ratio": ratio,
                     "loop_ratio": loop_ratio}  # fmt: skip
        echo(f"{name}: median step {step:.2f} ms ({ratio:.2f}x one process), loop "
             f"{loop:.2f} ms ({loop_ratio:.2f}x)")  # fmt: skip
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    at_least(p, steps=(args.steps, SKIPPED + 1), reps=(args.reps, 1))  # steps: median after skip
    out = measure(args.steps, args.reps, lambda line: print(line, flush=True))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
