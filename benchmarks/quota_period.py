"""How the CFS period shapes short steps under a CPU quota (Linux, cgroup write access).

    python -m benchmarks.quota_period [--quota 0.25] [--periods 4000,10000,20000,100000]

A child process pinned to one core, alone in a group with `quota` of a core per period,
times a short matrix product (one thread) over and over; the same runs without a quota first.
Printed per period and kernel: the 50th and 90th percentiles and the mean, in ms, the mean's
slowdown against the unconstrained mean (the quota promises 1 / quota), and the share of
kernels that took within 2x of the promised time (unconstrained mean / quota): a step whose
time says nothing of its quota is no use to a controller, however right the mean. The period
`omnilearn_jax.launch --cpu_quota` uses (`cgroups.PERIOD_US`) was chosen from this.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from benchmarks.args import ints
from omnilearn_jax.run import cgroups

_PROBE = """
import sys, time
import numpy as np
n, seconds, promised = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
a = np.random.default_rng(0).random((n, n), dtype=np.float32)
times, end = [], time.perf_counter() + seconds
while time.perf_counter() < end:
    t = time.perf_counter()
    (a @ a).sum()
    times.append(time.perf_counter() - t)
times = np.array(times[len(times) // 10 :]) * 1e3
near = np.mean((times > promised / 2) & (times < promised * 2))
print(np.percentile(times, 50), np.percentile(times, 90), times.mean(), near)
"""


def probe(
    n: int, seconds: float, core: int, group: cgroups.Group | None, promised: float = 0.0
) -> list[float]:
    def enter() -> None:
        os.sched_setaffinity(0, {core})
        if group is not None:
            group.enter()

    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(n), str(seconds), str(promised)],
        preexec_fn=enter,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return [float(x) for x in out.stdout.split()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quota", type=float, default=0.25)
    parser.add_argument("--periods", default="4000,10000,20000,100000", help="µs, commas")
    parser.add_argument("--sizes", default="280,512", help="matrix sizes (~0.3 and ~2 ms)")
    parser.add_argument("--seconds", type=float, default=3.0, help="per probe")
    args = parser.parse_args(argv)
    if not (args.quota > 0 and args.seconds > 0):  # failed after the unconstrained probes
        parser.error(f"--quota and --seconds must be > 0, got {args.quota}, {args.seconds}")
    sizes = ints(parser, "sizes", args.sizes, least=1)
    periods = ints(parser, "periods", args.periods, least=1)
    core = max(os.sched_getaffinity(0))
    free = {n: probe(n, args.seconds, core, None) for n in sizes}
    for n in sizes:
        p50, p90, mean, _ = free[n]
        print(f"no quota        n={n}: p50 {p50:.2f} p90 {p90:.2f} mean {mean:.2f} ms")
    for period in periods:
        with cgroups.quota_groups([args.quota], period_us=period) as groups:
            period = groups[0].period_us  # the kernel's 1 ms least quota may lengthen it
            for n in sizes:
                promised = free[n][2] / args.quota
                p50, p90, mean, near = probe(n, args.seconds, core, groups[0], promised)
                print(
                    f"period {period / 1000:5.1f} ms n={n}: p50 {p50:.2f} p90 {p90:.2f} "
                    f"mean {mean:.2f} ms, {mean / free[n][2]:.2f}x the unconstrained mean, "
                    f"{near:.0%} of kernels within 2x of the promised {promised:.2f} ms"
                )


if __name__ == "__main__":
    main()
