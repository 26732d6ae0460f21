"""What one cross-process all-reduce costs on CPU: the fixed part of a multi-process step.

    python -m benchmarks.collective_cost [--sizes 1,64,4096,65536] [--calls 200] [--json F]
    python -m benchmarks.report --only collective_cost   # the same, as a BENCHMARKS.md section

Two processes of one CPU device each (jax.distributed on this machine, XLA's Gloo
collectives over loopback TCP) run one jitted `psum` of `size` float32 over and over, and then
the engine's own cross-device sum (engine/step.py, `_all_summed`: an all-gather added up in
device order up to `GATHER_BYTES`, a psum above), as a multi-process BSP step's finish does
once a step (`finish_timed`). Printed per placement and size: the wall time of a call of each
and the CPU time each process spends in the psum, both in ms, the engine's sum over the psum,
and the psum's ratio to the same size unpinned, side by side in one run. Placements:

- `unpinned`: the kernel places the processes' threads on any core;
- `pinned`: each process on a core of its own (`launch --cpus=0,1`, as experiments/real_hetero.py
  runs its quota cells);
- `quota` and `quota, pinned`: the same under CPU quotas 1.0 and 0.25 of a core
  (`launch --cpu_quota=1.0,0.25`), where cgroups are writable (root); skipped otherwise;
- last, unpinned with process 0 arriving 20 ms late to each call: the CPU process 1 spends
  while it waits in the all-reduce (does a waiting process spend its quota?).

Measured, not modelled: the wall clock and `getrusage` of each process. What it showed is in
docs/cluster_quotas.md ("Where the rest goes").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys

from benchmarks.args import at_least, ints, writable
from omnilearn_jax.run import cgroups

_WORKER = """
import json, os, resource, sys, time
pid, port, size, calls = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
late = float(sys.argv[5]) if pid == 0 else 0.0  # process 0 arrives this late to each call
engine = sys.argv[6] == "engine"  # the engine's sum (engine/step.py) rather than a psum
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
jax.config.update("jax_num_cpu_devices", 1)
jax.distributed.initialize(f"127.0.0.1:{port}", 2, pid)
from omnilearn_jax.engine import step
mesh = Mesh(np.array(jax.devices()), (step.AXIS,))
body = (lambda x: step._all_summed(x, 2)) if engine else (lambda x: jax.lax.psum(x, step.AXIS))
psum = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P(step.AXIS), out_specs=P(),
                             check_vma=not engine))
local = jax.device_put(np.ones((1, size), np.float32), jax.local_devices()[0])
x = jax.make_array_from_single_device_arrays((2, size), NamedSharding(mesh, P(step.AXIS)), [local])
for _ in range(20):
    psum(x).block_until_ready()
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
c0, t0 = cpu(), time.perf_counter()
for _ in range(calls):
    if late:
        time.sleep(late)
    psum(x).block_until_ready()
wall, used = time.perf_counter() - t0, cpu() - c0
assert float(np.asarray(psum(x).addressable_shards[0].data).ravel()[0]) == 2.0
print(json.dumps({"wall_ms": 1e3 * wall / calls, "cpu_ms": 1e3 * used / calls}))
"""

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUOTAS = (1.0, 0.25)
LATE = 0.02  # seconds process 0 arrives late to each call in the waiting row


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pair(
    size: int, calls: int, cores=(None, None), groups=(None, None), late: float = 0.0,
    op: str = "psum",
) -> list[dict]:  # fmt: skip
    """One run of the two processes calling `op` ("psum", or "engine": the engine's sum),
    process 0 sleeping `late` seconds before each call (process 1 then waits in it); each
    one's {wall_ms, cpu_ms} a call."""
    port = str(_free_port())
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    procs = []
    for pid in range(2):

        def enter(core=cores[pid], group=groups[pid]) -> None:
            if group is not None:
                group.enter()
            if core is not None:
                os.sched_setaffinity(0, {core})

        cmd = [sys.executable, "-c", _WORKER, str(pid), port, str(size), str(calls), str(late)]
        procs.append(
            subprocess.Popen(
                [*cmd, op], env=env, stdout=subprocess.PIPE, text=True, preexec_fn=enter, cwd=ROOT
            )
        )
    out = [p.communicate(timeout=600)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError(f"a worker failed: {[p.returncode for p in procs]}")
    return [json.loads(o.strip().splitlines()[-1]) for o in out]


def placements(quota: bool) -> list[tuple[str, tuple, bool]]:
    """(name, cores, under quotas) of each placement measured."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    pinned = (cores[0], cores[1 % len(cores)]) if cores else (None, None)
    out = [("unpinned", (None, None), False), ("pinned", pinned, False)]
    if quota:
        out += [("quota", (None, None), True), ("quota, pinned", pinned, True)]
    return out


def measure(sizes=(1, 64, 4096, 65536), calls: int = 200) -> dict:
    """Every placement and size, a psum then the engine's sum, then the waiting row: {quotas
    (None where cgroups are not writable), rows: [{placement, size, load, wall_ms, cpu_ms:
    [p0, p1] (the psum's), engine_ms}]}."""
    try:
        groups = cgroups.create(QUOTAS)
    except cgroups.CgroupError as e:
        print(f"[collective_cost] no quota placements: {e}", flush=True)
        groups = None
    rows = []
    try:
        for name, cores, quota in placements(groups is not None):
            for size in sizes:
                placed = (cores, tuple(groups) if quota else (None, None))
                each = pair(size, calls, *placed)
                engine = pair(size, calls, *placed, op="engine")[0]["wall_ms"]
                cpu = [e["cpu_ms"] for e in each]
                rows.append({"placement": name, "size": size, "load": os.getloadavg()[0],
                             "wall_ms": each[0]["wall_ms"], "cpu_ms": cpu,
                             "engine_ms": engine})  # fmt: skip
                print(f"[collective_cost] {name:14s} size {size:6d}: {each[0]['wall_ms']:.2f} ms "
                      f"a call, CPU {each[0]['cpu_ms']:.2f} / {each[1]['cpu_ms']:.2f} ms; the "
                      f"engine's sum {engine:.2f} ms (load {rows[-1]['load']:.2f})",
                      flush=True)  # fmt: skip
    finally:
        if groups:
            cgroups.release(groups)
    # Does a process that waits in the all-reduce spend CPU (its quota) while it waits?
    wait = pair(4096, max(calls // 4, 1), late=LATE)
    rows.append({"placement": f"unpinned, process 0 {1e3 * LATE:.0f} ms late", "size": 4096,
                 "load": os.getloadavg()[0], "wall_ms": wait[0]["wall_ms"],
                 "cpu_ms": [e["cpu_ms"] for e in wait], "late_ms": 1e3 * LATE})  # fmt: skip
    print(f"[collective_cost] process 1 waiting {1e3 * LATE:.0f} ms a call in the psum spent "
          f"{wait[1]['cpu_ms']:.2f} ms of CPU on it", flush=True)  # fmt: skip
    return {"quotas": list(QUOTAS) if groups is not None else None, "rows": rows}


def table(result: dict) -> str:
    """The rows as markdown: the psum's wall time, the engine's sum's and their ratio, the
    psum's CPU time, and its wall time as a ratio to the same size unpinned."""
    rows = result["rows"]
    base = {r["size"]: r["wall_ms"] for r in rows if r["placement"] == "unpinned"}
    lines = [
        "| placement | floats | psum a call (ms) | engine's sum (ms) | engine / psum "
        "| psum CPU p0 / p1 (ms) | psum / unpinned |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        engine = r.get("engine_ms")
        mine = "- | -" if engine is None else f"{engine:.2f} | {engine / r['wall_ms']:.2f}x"
        # The waiting row's calls include process 0's own sleep, which is no all-reduce time:
        # left in, its ratio said 14.43x where the psum took 1.24x (rows before late_ms
        # was kept name the delay in their placement)
        late = r.get("late_ms") or float(next(iter(_LATE.findall(r["placement"])), 0.0))
        wall = f"{r['wall_ms']:.2f}" + (f" ({late:.0f} of it the delay)" if late else "")
        ratio = (r["wall_ms"] - late) / base.get(r["size"], float("nan"))
        lines.append(f"| {r['placement']} | {r['size']} | {wall} | {mine} | "
                     f"{r['cpu_ms'][0]:.2f} / {r['cpu_ms'][1]:.2f} | {ratio:.2f}x |")  # fmt: skip
    return "\n".join(lines)


_LATE = re.compile(r"process 0 (\d+(?:\.\d+)?) ms late")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1,64,4096,65536", help="float32 elements a psum sums")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    # Before any cgroup or process: "invalid literal for int()", a division by 0 calls in the
    # workers, the JSON written after every measurement.
    sizes = ints(p, "sizes", args.sizes, least=1)
    at_least(p, calls=(args.calls, 1))
    writable(p, json=args.json)
    result = measure(sizes, args.calls)
    print("\n" + table(result))
    if args.json:
        command = "python -m benchmarks.collective_cost " + " ".join(
            sys.argv[1:] if argv is None else argv
        )
        with open(args.json, "w") as f:
            json.dump({"command": command, **result}, f, indent=1)


if __name__ == "__main__":
    main()
