"""Does a wall-clock controller keep identical devices uniform? Issue 26, point 3, measured.

    python -m benchmarks.identical_split [--runs 4] [--steps 300]
        [--controllers static,proportional] [--cpus fit|none] [--json PATH]

The job: configs/smoke.py (an MLP on digits, 8 identical CPU devices, B = 64) as 2 processes of
4 devices (`omnilearn_jax.launch --num_processes=2`), `clock=wall`, uniform heterogeneity, each
controller in turn, `--runs` times (fresh commands, interleaved). Printed per run: the largest
distance of a worker's batch from uniform over the run (relative; the test allows the
dead-band plus one row, 0.225), the steps on which the split changed, and the processes' times
(every device of a process reports the process's time): the median of process 0's over process
1's, and the share of steps on which process 0 was slower. A static run shows the bias between
the two processes that a controller sees; tests/test_multiprocess.py holds the same job as a
test (`test_wall_clock_split_stays_uniform_on_identical_devices_in_two_processes`, unpinned).
`--cpus` is the launcher's placement (default `fit`: a core each; `none`: unpinned).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import controllers
from benchmarks.args import writable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKERS, BATCH = 8, 64


def command(controller: str, steps: int, workdir: str, cpus: str = "fit") -> list[str]:
    return [
        sys.executable, "-m", "omnilearn_jax.launch", "--num_processes=2", f"--cpus={cpus}", "--",
        "--config=configs/smoke.py", f"--workdir={workdir}", "--config.clock=wall",
        f"--config.controller.name={controller}", "--config.hetero.name=uniform",
        f"--config.train.num_steps={steps}", f"--config.train.eval_every={steps}",
        "--config.train.checkpoint_every=0", "--config.train.save_params=False",
    ]  # fmt: skip


def summarise(records: list[dict]) -> dict:
    """One run's figures from its step records (batch_sizes, worker_times)."""
    sizes = np.array([r["batch_sizes"] for r in records], float)
    times = np.array([r["worker_times"] for r in records], float)
    uniform = BATCH / WORKERS
    ratio = times[:, 0] / times[:, WORKERS // 2]  # process 0's time over process 1's
    return {
        "steps": len(records),
        "max_skew": float(np.abs(sizes - uniform).max() / uniform),
        "moves": int((np.diff(sizes, axis=0) != 0).any(axis=1).sum()),
        "final": sizes[-1].astype(int).tolist(),
        "median_ratio": float(np.median(ratio)),
        "p0_slower": float((ratio > 1).mean()),
        "seconds": float(times.max(axis=1).sum()),
    }


def run(controller: str, steps: int, cpus: str = "fit") -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            command(controller, steps, tmp, cpus), cwd=ROOT, capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{controller} run failed:\n{proc.stdout[-2000:]}{proc.stderr}")
        with open(os.path.join(tmp, "metrics.jsonl")) as f:
            records = [json.loads(line) for line in f]
    return {"controller": controller, **summarise([r for r in records if "loss" in r])}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--controllers", default="static,proportional")
    parser.add_argument(  # another word failed inside the first launch
        "--cpus", default="fit", choices=("fit", "none"), help="the launcher's --cpus"
    )
    parser.add_argument("--json", default="", help="write the runs here")
    args = parser.parse_args(argv)
    writable(parser, json=args.json)
    if args.runs < 1 or args.steps < 2:
        parser.error("--runs must be >= 1 and --steps >= 2")
    try:  # a typo had failed after the first controller's runs, losing them
        names = controllers.named(args.controllers)
    except ValueError as e:
        parser.error(str(e))
    runs = []
    for i in range(args.runs):
        for name in names:
            r = {"run": i, **run(name, args.steps, args.cpus), "load": os.getloadavg()[0]}
            runs.append(r)
            print(
                f"[identical_split] {i} {name:12s} max skew {r['max_skew']:.3f} moves "
                f"{r['moves']} final {r['final']} p0/p1 {r['median_ratio']:.2f} "
                f"(p0 slower {r['p0_slower']:.2f}) {r['seconds']:.2f} s of steps, "
                f"load {r['load']:.1f}",
                flush=True,
            )
    for name in names:
        mine = [r for r in runs if r["controller"] == name]
        inside = sum(r["max_skew"] <= 0.1 + WORKERS / BATCH for r in mine)
        ratios = [r["median_ratio"] for r in mine]
        print(
            f"[identical_split] {name}: {inside} of {len(mine)} runs within the dead-band plus "
            f"one row; median p0/p1 per run {min(ratios):.2f} to {max(ratios):.2f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"steps": args.steps, "cpus": args.cpus, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
