"""What checkpoints cost a run: wall time at several train.checkpoint_every, side by side.

    python -m benchmarks.checkpoint_cadence [--steps 10000] [--reps 2] [--every 50,500,0]

The job: configs/smoke.py (an MLP on digits, 8 fake CPU devices), `--steps` steps, one
progress line a half run, one evaluation at the end; each cadence run as a fresh process,
the cadences alternated `--reps` times. Printed per run: its wall time, the steps' own time
(`steps_wall_time`, which leaves saves and evaluations out) and the 1-minute load after it;
then each cadence's median wall time over the last one's (0: a save only at the end).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from benchmarks.args import at_least, ints

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one_run(steps: int, every: int, workdir: str) -> dict:
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "omnilearn_jax.main",
            "--config=configs/smoke.py",
            f"--workdir={workdir}",
            f"--config.train.num_steps={steps}",
            f"--config.train.log_every={max(steps // 2, 1)}",
            f"--config.train.eval_every={steps}",
            f"--config.train.checkpoint_every={every}",
        ],  # fmt: skip
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    with open(os.path.join(workdir, "summary.json")) as f:
        summary = json.load(f)
    return {"wall": summary["wall_time"], "steps": summary["steps_wall_time"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--every", default="50,500,0", help="cadences, comma-separated (0: end only)")
    args = p.parse_args(argv)
    at_least(p, steps=(args.steps, 1), reps=(args.reps, 1))
    cadences = ints(p, "every", args.every, least=0)
    walls: dict[int, list[float]] = {c: [] for c in cadences}
    for rep in range(args.reps):
        for every in cadences:
            with tempfile.TemporaryDirectory() as workdir:
                r = one_run(args.steps, every, workdir)
            walls[every].append(r["wall"])
            load = os.getloadavg()[0]
            print(
                f"rep {rep + 1} checkpoint_every={every}: wall {r['wall']:.1f} s, steps "
                f"{r['steps']:.1f} s, load {load:.2f}",
                flush=True,
            )
    base = float(np.median(walls[cadences[-1]]))
    for every in cadences:
        print(
            f"checkpoint_every={every}: median wall {np.median(walls[every]):.1f} s, "
            f"worst {max(walls[every]):.1f} s, {np.median(walls[every]) / base:.2f}x "
            f"checkpoint_every={cadences[-1]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
