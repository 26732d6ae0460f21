"""Where a multi-process step's CPU goes, thread by thread, in each process.

    python -m benchmarks.step_threads [--quotas 1.0,0.25] [--controller static]
        [--steps 600] [--job cnn64] [--sizes 96,32] [--mode bsp|asp]

Launches the BSP job of experiments/real_hetero.py (configs/paper_bsp.py runlocal, one
process a worker, pinned to a core each, the quotas from the first step when given; `--sizes`
fixes the split with the static controller) and reads every thread's CPU time of both
processes from /proc/PID/task/TID/stat twice: once 20% and once 80% into the steps, so that
compiling and the last evaluation are outside the window. Printed per process: CPU ms a step
in all, in the Python main thread (the loop, dispatch, host work), and in each other thread
(named by the kernel; XLA's compute thread and Gloo's loop inherit the process's name, so the
largest of those is the compute and the next usually Gloo's exchange). Linux only; measured,
not modelled. What it showed is in docs/cluster_quotas.md ("Where a step's CPU goes").
`--mode asp` runs the async job instead (a parameter server in process 0 with worker 0,
worker 1 in process 1; `--steps` x W updates) and prints CPU ms an update.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import subprocess
import sys
import tempfile
import time

from experiments import real_hetero

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def thread_seconds(pid: int) -> dict[int, tuple[str, float]]:
    """{tid: (name, user + system CPU seconds)} of every thread of `pid`."""
    out = {}
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(os.path.join(task, "stat")) as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[int(os.path.basename(task))] = (name, (int(fields[11]) + int(fields[12])) / TICK)
    return out


def per_step(before: dict, after: dict, steps: int, pid: int) -> dict[str, float]:
    """CPU ms a step of each thread alive at both readings, keyed 'main' (tid == pid) or
    'NAME:TID', with 'total'."""
    out = {}
    for tid, (name, seconds) in after.items():
        if tid in before:
            key = "main" if tid == pid else f"{name}:{tid}"
            out[key] = 1e3 * (seconds - before[tid][1]) / steps
    out["total"] = sum(out.values())
    return out


def lines(path: str) -> int:
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def measure(
    quotas: list[float], controller: str, steps: int, job: str, sizes: str, mode: str = "bsp"
) -> list:
    """[(pid, {thread: CPU ms a step, or an update})] for each process of one launch."""
    workers = len(quotas)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "omnilearn_jax.launch", f"--num_processes={workers}"]
        cmd += ["--devices_per_process=1", f"--cpus={real_hetero.pinning(quotas, 2)}"]
        if any(q < 1 for q in quotas):
            cmd += ["--cpu_quota=" + ",".join(map(str, quotas)), "--quota_from=steps"]
        args = real_hetero.job_args(controller, workers, steps, 0.0, job=job, mode=mode)
        steps = steps * workers if mode == "asp" else steps  # the records: one an update
        cmd += ["--", *args, f"--config.train.eval_every={steps}", f"--workdir={tmp}"]
        if sizes:
            cmd += [f"--config.controller.sizes=({sizes},)"]
        metrics = os.path.join(tmp, "metrics.jsonl")
        proc = subprocess.Popen(cmd, cwd=real_hetero.ROOT, stdout=subprocess.DEVNULL)
        readings = []
        while proc.poll() is None and len(readings) < 2:
            done = lines(metrics)  # one line a step (and one an evaluation)
            if done >= (0.2 if not readings else 0.8) * steps:
                pids = [int(p) for p in subprocess.run(
                    ["pgrep", "-f", f"omnilearn_jax.main.*--workdir={tmp}"],
                    capture_output=True, text=True).stdout.split()]  # fmt: skip
                readings.append((done, {p: thread_seconds(p) for p in pids}))
            time.sleep(0.05)
        if proc.wait():
            raise RuntimeError(f"the launch failed ({proc.returncode}): {' '.join(cmd)}")
    if len(readings) < 2:
        raise RuntimeError("the run ended before the second reading; raise --steps")
    (n0, first), (n1, second) = readings
    return [(pid, per_step(first[pid], second[pid], n1 - n0, pid)) for pid in first]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quotas", default="1.0,1.0", help="a core's fraction per process")
    p.add_argument("--controller", default="static")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--job", default="cnn64", choices=sorted(real_hetero.JOBS))
    p.add_argument("--sizes", default="", help="a fixed split for the static controller")
    p.add_argument("--mode", default="bsp", choices=("bsp", "asp"))
    args = p.parse_args(argv)
    quotas = [float(q) for q in args.quotas.split(",")]
    print(f"[step_threads] quotas {quotas}, {args.job}, {args.controller} {args.sizes}, "
          f"load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    measured = measure(quotas, args.controller, args.steps, args.job, args.sizes, args.mode)
    unit = "an update" if args.mode == "asp" else "a step"
    for index, (_, ms) in enumerate(measured):
        others = collections.Counter({k: v for k, v in ms.items() if k not in ("main", "total")})
        shown = ", ".join(f"{k} {v:.2f}" for k, v in others.most_common(3))
        print(f"  process {index} (quota {quotas[index]}): {ms['total']:.2f} ms of CPU {unit}; "
              f"Python main thread {ms['main']:.2f}; others {shown}")  # fmt: skip
    print(f"[step_threads] load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
