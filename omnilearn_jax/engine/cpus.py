"""How many CPUs this process may really use: its affinity set, capped by a cgroup quota.

`os.cpu_count()` counts the machine. A process pinned to cores (taskset, a container's
cpuset) or limited by a CFS quota (a container's `--cpus`, a Kubernetes CPU limit, SLURM's
cgroup plugin, `omnilearn_jax.launch --cpu_quota`) may use fewer, and a thread pool sized
from the machine then has more runnable threads than the process has CPU time for. Where the
OS has no affinity call (macOS), the machine's count is the answer.
"""

from __future__ import annotations

import math
import os

CGROUP_ROOT = "/sys/fs/cgroup"


def affinity_cpus() -> int:
    """CPUs in this process's affinity set (the machine's count where the OS has none)."""
    getter = getattr(os, "sched_getaffinity", None)
    if getter is not None:
        try:
            return max(1, len(getter(0)))
        except OSError:
            pass
    return max(1, os.cpu_count() or 1)


def quota_cpus(root: str = CGROUP_ROOT, proc_cgroup: str = "/proc/self/cgroup") -> float | None:
    """The CPU quota of this process's cgroup in cores (cgroup v2 `cpu.max`, or v1
    `cpu.cfs_quota_us` / `cpu.cfs_period_us`), or None where there is none or it cannot be
    read. Only the process's own group is read, not its ancestors'."""
    try:
        with open(proc_cgroup) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        path = path.lstrip("/")
        if controllers == "":  # v2: one hierarchy
            found = _read_v2(os.path.join(root, path, "cpu.max"))
            if found is None:  # a hybrid host mounts v2 at unified/
                found = _read_v2(os.path.join(root, "unified", path, "cpu.max"))
        elif "cpu" in controllers.split(","):
            found = _read_v1(os.path.join(root, controllers, path))
            if found is None:
                found = _read_v1(os.path.join(root, "cpu", path))
        else:
            continue
        if found is not None:
            return found
    return None


def _read_v2(path: str) -> float | None:
    try:
        with open(path) as f:
            quota, period = f.read().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def _read_v1(folder: str) -> float | None:
    try:
        with open(os.path.join(folder, "cpu.cfs_quota_us")) as f:
            quota = int(f.read())
        with open(os.path.join(folder, "cpu.cfs_period_us")) as f:
            period = int(f.read())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 else quota / period


def usable_cpus(root: str = CGROUP_ROOT, proc_cgroup: str = "/proc/self/cgroup") -> int:
    """Whole CPUs this process may keep busy at once: its affinity set, capped by its
    quota rounded up (a quarter of a core is one thread's worth of work, not none)."""
    quota = quota_cpus(root, proc_cgroup)
    cpus = affinity_cpus()
    return cpus if quota is None else max(1, min(cpus, math.ceil(quota)))
