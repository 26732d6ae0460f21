"""How often the kernel throttles each process of a 2-process job under a one-core CFS quota,
pinned to a core each (the launcher's default) and unpinned, side by side.

    python -m benchmarks.quota_throttle [--steps 1000] [--reps 2]

The job of benchmarks/multiprocess_step.py (CNN on digits, 2 workers, B = 64, static uniform,
`clock=wall`) under `launch --cpu_quota=1,1`, with and without `--cpus=none`, unpinned also
with programs dispatched to a runtime thread (`cpu_dispatch=async`). While it runs,
each quota group's `cpu.stat` is read every 50 ms; printed per run and process: the quota
periods, the share of them in which the group was throttled (its threads had used a core's
worth of time before the period ended), the seconds throttled, and the run's median step.
A process whose threads run on two cores at once uses its quota up in half a period and then
waits: unpinned, that is where a 2-process step's time goes (docs/multihost.md). Needs root
and a writable cgroup cpu controller (v1 or v2).
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.multiprocess_step import ASYNC, ROOT, command, step_times
from omnilearn_jax.run import cgroups

QUOTA, FREE = ["--cpu_quota=1,1"], ["--cpus=none", "--cpu_quota=1,1"]
VARIANTS = {  # name: (the launcher's options, the job's own)
    "pinned (default)": (QUOTA, []),
    "unpinned": (FREE, []),
    "unpinned, programs dispatched (cpu_dispatch=async)": (FREE, [ASYNC]),
}


def throttled(stat: dict[str, str]) -> float:
    """Seconds throttled from a cpu.stat (v2: throttled_usec; v1: throttled_time, ns)."""
    if "throttled_usec" in stat:
        return int(stat["throttled_usec"]) / 1e6
    return int(stat.get("throttled_time", 0)) / 1e9


def run(extra: list[str], steps: int, job_extra=()) -> dict:
    base = cgroups.detect().base
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            command("launch", extra, steps, tmp, job_extra),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        last: dict[str, dict[str, str]] = {}
        while proc.poll() is None:
            for path in glob.glob(
                os.path.join(base, f"{cgroups.PREFIX}{proc.pid}", "p*", "cpu.stat")
            ):
                try:
                    words = Path(path).read_text().split()
                except OSError:
                    continue
                last[os.path.basename(os.path.dirname(path))] = dict(
                    zip(words[::2], words[1::2], strict=True)
                )
            time.sleep(0.05)
        if proc.returncode:
            raise RuntimeError(proc.stderr.read()[-3000:])
        steps_ms = step_times(tmp)
    groups = {
        name: {
            "periods": int(stat["nr_periods"]),
            "throttled_share": int(stat["nr_throttled"]) / max(int(stat["nr_periods"]), 1),
            "throttled_s": throttled(stat),
        }
        for name, stat in sorted(last.items())
    }
    return {"median_step_ms": statistics.median(steps_ms), "groups": groups}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--reps", type=int, default=2)
    args = p.parse_args(argv)
    for _ in range(args.reps):
        for name, (extra, job_extra) in VARIANTS.items():
            r = run(extra, args.steps, job_extra)
            per = ", ".join(
                f"{g}: {v['throttled_share']:.0%} of {v['periods']} periods throttled, "
                f"{v['throttled_s']:.2f} s"
                for g, v in r["groups"].items()
            )
            print(f"{name}: median step {r['median_step_ms']:.2f} ms; {per} "
                  f"(load {os.getloadavg()[0]:.2f})", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
