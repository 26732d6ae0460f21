"""The CPUs a process may really use, and JAX's host threads sized to them.

XLA sizes its host thread pools (the CPU backend's Eigen pool among them) from the cores in
the process's affinity mask when the backend starts. A CFS quota (Docker's `--cpus`,
Kubernetes CPU limits, `launch --cpu_quota`) limits a process to fewer cores' worth of time
than its mask holds, so under a small quota on a many-core node it would start a compute
thread a core. `threads_for_limit` narrows the mask to as many cores as the quota allows
while the backend starts, then gives every thread of the process the whole mask back: the
pools are sized to the quota, and the threads still run on any core (on the 2-core machine
the pool differs by one thread and the step did not change measurably; docs/multihost.md).
The same holds for processes of the launcher's that share cores unpinned: each counts on
its fair share (`fair_share`), and there the smaller pool did change the step (2 processes
on 2 cores, median step 2.05/1.66/2.25 ms against 2.52/2.74/2.72 with a thread a core).
`dispatch_for` says where programs should run in the calling thread instead, and `in_caller`
applies the config's `cpu_dispatch` (auto: `dispatch_for`'s rule; async, sync: forced).

`cpu_limit` reads the quota of the process's own cgroup and of every group above it (v2
`cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), or of the group the launcher named
for `--quota_from=steps` (which the process joins later). Linux only; elsewhere, and where no
quota is set, both do nothing. Nothing here imports JAX.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from pathlib import Path

from omnilearn_jax.run import cgroups

SHARED_ENV = "OMNILEARN_SHARED_BY"  # processes the launcher started on this process's cores


def _v2_quota(group: Path) -> float | None:
    """A group's own quota / period (v2 `cpu.max`), or None."""
    text = (group / "cpu.max").read_text().split() if (group / "cpu.max").is_file() else []
    return int(text[0]) / int(text[1]) if len(text) == 2 and text[0] != "max" else None


def _v1_quota(group: Path) -> float | None:
    """A group's own quota / period (v1 `cpu.cfs_quota_us`, -1 unlimited), or None."""
    quota, period = group / "cpu.cfs_quota_us", group / "cpu.cfs_period_us"
    if not (quota.is_file() and period.is_file()) or int(quota.read_text()) <= 0:
        return None
    return int(quota.read_text()) / int(period.read_text())


def _tightest(group: Path, base: Path, quota) -> float | None:
    """The smallest `quota(g)` of `group` and the groups above it, up to `base`."""
    chain = [group, *(g for g in group.parents if g == base or base in g.parents)]
    limits = [q for q in map(quota, chain) if q is not None]
    return min(limits, default=None)


def cpu_limit(
    root: str | os.PathLike | None = None,
    proc_cgroup: str | os.PathLike = "/proc/self/cgroup",
    environ: dict | None = None,
) -> float | None:
    """Cores' worth of CPU time the process may use (a CFS quota / its period), or None where
    no quota limits it or none can be read."""
    environ = os.environ if environ is None else environ
    try:
        layout = cgroups.detect(root)
        named = environ.get(cgroups.ENV, "")  # --quota_from=steps: the group it will join
        if named:
            group = Path(named)
        else:
            group = None
            for line in Path(proc_cgroup).read_text().splitlines():
                _, controllers, path = line.split(":", 2)
                names = controllers.split(",")
                if (layout.version == 2 and controllers == "") or (
                    layout.version == 1 and "cpu" in names
                ):
                    group = layout.base / path.lstrip("/")
            if group is None:
                return None
        return _tightest(group, layout.base, _v2_quota if layout.version == 2 else _v1_quota)
    except (cgroups.CgroupError, OSError, ValueError):
        return None


def fair_share(cores: int, environ: dict | None = None) -> float | None:
    """Cores' worth of time a launched process can count on where others run on the same
    cores: its mask's `cores` over the processes sharing them, which the launcher names in
    `SHARED_ENV` (`launch.sharing`); None alone, or where no launcher named them."""
    environ = os.environ if environ is None else environ
    try:
        sharing = int(environ.get(SHARED_ENV, "") or 0)
    except ValueError:
        return None
    return cores / sharing if sharing > 1 else None


@contextlib.contextmanager
def threads_for_limit(limit: float | None = None) -> Iterator[int | None]:
    """While inside, the process's affinity holds only ceil(`limit`) of its cores (default:
    `cpu_limit()`, or where no quota is set `fair_share`), so a thread pool sized then is
    sized to the limit; on leaving, every thread of the process gets the whole mask back.
    Yields the cores narrowed to, or None where there is nothing to narrow (no limit, a limit
    of at least the mask's cores, or no affinity).

    A quota wins over the fair share: the launcher's quotas fit the cores they share
    (`cgroups.confine`), so a process may use all of its own. The smaller of the two sized a
    1.5-core process beside a 0.25-core one on 2 cores to one thread, a 1.0/0.25 cluster."""
    get = getattr(os, "sched_getaffinity", None)
    allowed = get(0) if get is not None else set()
    if limit is None and get is not None:
        limit = cpu_limit() or fair_share(len(allowed))
    cores = math.ceil(limit) if limit else 0
    if not cores or cores >= len(allowed):
        yield None
        return
    os.sched_setaffinity(0, sorted(allowed)[:cores])
    try:
        yield cores
    finally:
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):  # a thread may have ended meanwhile
                os.sched_setaffinity(int(task), allowed)


def dispatch_for(
    narrowed: int | None, processes: int = 1, devices: int = 0, cores: int = 0
) -> bool:
    """Whether JAX should run CPU programs in the calling thread (`jax_cpu_enable_async_dispatch`
    off) for a process that computes on one CPU device (`devices`): where `threads_for_limit`
    narrowed it to one core's worth of time with more cores in its mask (a quota, or a fair
    share of cores other processes of the launcher run on too, unpinned), and where it is
    one process of several (`processes`) with more than one core in its mask (`cores`). There
    a program dispatched to a runtime thread computes on one core while the main thread waits
    for it on another, and the processes' threads contend for the cores (under a quota, the
    quota runs out early in the period). With several devices a process, one calling thread
    would run their programs one after another. Measured on the 2-core machine, 2 processes
    of one device each, median step of interleaved runs (docs/multihost.md): one-core quotas
    unpinned, 600 steps 4 times each, 2.28 ms in the calling thread against 3.57 ms
    dispatched; unpinned without a quota, 300 steps 3 times each, 2.14 ms against 2.83.
    Pinned to a core each there was no gain (1.84 against 1.65)."""
    return devices == 1 and (narrowed == 1 or (processes > 1 and cores > 1))


DISPATCH = ("auto", "async", "sync")


def in_caller(choice: str, *rule_args) -> bool:
    """Whether CPU programs run in the calling thread for the config's `cpu_dispatch`:
    "sync" always, "async" never, "auto" where `dispatch_for(*rule_args)` says so."""
    if choice not in DISPATCH:
        raise ValueError(f"unknown cpu_dispatch {choice!r}; valid values: {', '.join(DISPATCH)}")
    return choice == "sync" or (choice == "auto" and dispatch_for(*rule_args))
