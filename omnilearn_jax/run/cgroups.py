"""CPU-quota groups: a heterogeneous cluster on one Linux machine, the way the OmniLearn paper
made one with containers (Docker's `--cpus`, Kubernetes CPU limits and SLURM's cgroup plugin
are all the same kernel CFS quota).

`quota_groups([1.0, 0.25])` creates one cgroup per process under a parent named after this
(the launcher's) pid, `omnilearn-<pid>/p<i>`, with the process's share of a core as a quota
per period: cgroup v2 `cpu.max` ("QUOTA PERIOD") or v1 `cpu.cfs_quota_us` and
`cpu.cfs_period_us`. `Group.enter` is a `preexec_fn`: the child writes its own pid into
`cgroup.procs` (and pins itself to cores when asked) before it execs, so everything it runs,
JAX included, runs under the quota. With `--quota_from=steps` the launcher instead names the
group in the child's environment (`ENV`) and the training loop calls `enter_deferred` once
warm-up is done, just before the barrier that starts every clock: compiling then runs at
full speed (a quarter-core process spends minutes compiling a wide CNN, and an eighth of a
core cannot compile the CNN within Gloo's 30 s rendezvous), and every step runs under the
quota. The cores (`--cpus`) are taken before exec either way, so XLA sizes its threads from
them as before. The groups are removed when the context ends, on an
exception or SIGTERM as well (the launcher turns SIGTERM into SIGTERM's exit). A launcher
killed by SIGKILL cannot clean up: the next start sweeps groups whose owner pid is gone.

Nothing here imports JAX; the cgroup filesystem's root is a parameter, so tests use a fake
one in a temporary folder.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import re
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = "/sys/fs/cgroup"
# The kernel refuses a quota or a period under 1 ms (EINVAL).
MIN_US = 1000
MAX_PERIOD_US = 1_000_000  # the kernel's longest CFS period
MIN_QUOTA = MIN_US / MAX_PERIOD_US  # the least share of a core a group can be given
# The period a process gets unless its quota would fall under MIN_US (a quarter of a core
# gets 4 ms). Why so short: under a 100 ms period, the kernel's default, a quarter-core
# process runs 25 ms at full speed, then waits 75 ms, so a step of a few ms takes either its
# compute time or 75 ms more, never about 4x. docs/cluster_quotas.md has the measurements.
PERIOD_US = 4000
PREFIX = "omnilearn-"
# The child's environment variable naming its group when the quota applies from the first
# step (`--quota_from=steps`); `enter_deferred` reads it.
ENV = "OMNILEARN_QUOTA_GROUP"
QUOTA_ENV = "OMNILEARN_CPU_QUOTA"  # the share of a core the launcher gave a process (said)
QUOTAS_ENV = "OMNILEARN_CPU_QUOTAS"  # every process's share, in process order (recorded)
QUOTA_FROM = ("start", "steps")
_ALTERNATIVES = (
    "run as root on Linux with a writable cgroup cpu controller, or emulate heterogeneity "
    "with --config.clock=wall --config.hetero.name=hl --config.hetero.level=4 "
    "--config.hetero.inject=SECONDS_PER_ROW (a wait a row, longer on slower workers), or pin "
    "processes with taskset beside a CPU-bound co-runner"
)


class CgroupError(RuntimeError):
    """Quota groups cannot be made here; the message is one line and names alternatives."""


@dataclass(frozen=True)
class Layout:
    """Where groups go: `base` is the cpu hierarchy's root (v2: the unified mount)."""

    version: int
    base: Path


@dataclass(frozen=True)
class Group:
    """One process's group: its directory, its quota and period (µs), its cores (if pinned)."""

    path: Path
    quota_us: int
    period_us: int
    cpus: frozenset[int] = frozenset()

    def enter(self) -> None:
        """Puts the calling process in the group (and on its cores): a `preexec_fn`."""
        join(self.path)
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)


def join(path: str | os.PathLike) -> None:
    """Moves the calling process, all its threads, into the group at `path` (cgroup v1 and
    v2 both move a whole process written to `cgroup.procs`)."""
    (Path(path) / "cgroup.procs").write_text(str(os.getpid()))


def enter_deferred(environ: dict | None = None) -> Path | None:
    """Joins the group the launcher named in `ENV` (`--quota_from=steps`) and returns its
    path; None where no group was named (every run not so launched). The variable is
    removed, so a process started from this one does not join it again."""
    environ = os.environ if environ is None else environ
    path = environ.pop(ENV, "")
    if not path:
        return None
    join(path)
    return Path(path)


def detect(root: str | os.PathLike | None = None) -> Layout:
    """The cgroup layout under `root` (default `ROOT`): v2 with the cpu controller, else v1's
    cpu hierarchy."""
    root = Path(ROOT if root is None else root)
    controllers = root / "cgroup.controllers"
    if controllers.is_file() and "cpu" in controllers.read_text().split():
        return Layout(2, root)
    if (root / "cpu" / "cpu.cfs_quota_us").is_file():
        return Layout(1, root / "cpu")
    raise CgroupError(f"no cgroup cpu controller under {root} (neither v2 nor v1): {_ALTERNATIVES}")


def quota_and_period(fraction: float, period_us: int = PERIOD_US) -> tuple[int, int]:
    """(quota, period) in µs for `fraction` of a core: the period is `period_us`, or longer
    where the quota would fall under the kernel's 1 ms minimum."""
    if not fraction > 0:
        raise ValueError(f"a CPU quota must be positive, got {fraction}")
    period = max(period_us, MIN_US, math.ceil(MIN_US / fraction))
    return round(fraction * period), period


def parse_quotas(text: str, num_processes: int, ncpu: int | None = None) -> tuple[float, ...]:
    """`--cpu_quota=1.0,0.25`: one fraction of a core per process, each in (0, ncpu]."""
    try:
        quotas = tuple(float(q) for q in text.split(","))
    except ValueError:
        raise ValueError(f"--cpu_quota takes numbers separated by commas, got {text!r}") from None
    return check_quotas(quotas, num_processes, ncpu)


def check_quotas(
    quotas: Sequence[float], num_processes: int, ncpu: int | None = None
) -> tuple[float, ...]:
    """Quotas as numbers (from Python): one a process, each in [MIN_QUOTA, ncpu]."""
    ncpu = ncpu or os.cpu_count() or 1
    quotas = tuple(float(q) for q in quotas)
    if len(quotas) != num_processes:
        raise ValueError(
            f"--cpu_quota gives {len(quotas)} quotas for {num_processes} processes: one each"
        )
    if bad := [q for q in quotas if not 0 < q <= ncpu]:
        raise ValueError(f"--cpu_quota {bad[0]} is outside (0, {ncpu}] (cores on this machine)")
    if tiny := [q for q in quotas if q < MIN_QUOTA]:  # its period would pass the kernel's 1 s
        raise ValueError(
            f"--cpu_quota {tiny[0]} is below {MIN_QUOTA} of a core: the kernel's 1 ms least "
            f"quota would need a period over its 1 s most"
        )
    return quotas


def usable_cores() -> frozenset[int]:
    """The cores this process may run on: its affinity (a taskset, a container's cpuset, a
    batch job's binding), or every core where the OS does not say (no sched_getaffinity)."""
    getter = getattr(os, "sched_getaffinity", None)  # Linux only
    return frozenset(getter(0) if getter else range(os.cpu_count() or 1))


def confine(
    quotas: str | Sequence[float] | None,
    cpus: str | Sequence[frozenset[int]],
    num_processes: int,
    allowed: set[int] | None = None,
) -> tuple[tuple[float, ...], tuple[frozenset[int], ...]]:
    """A launch's quotas (`--cpu_quota` text, numbers, or None / () for none) and cores
    (`--cpus` text or one set a process), checked together: a quota is a share of a core
    only where its process may run on that many cores, so a process's quota may not pass its
    cores, nor may the quotas of processes that share cores pass those cores (each would get
    less than it asked, silently: 2 on one core runs as 1). `fit` pins nothing where a quota
    needs more cores than it would deal out. Raises ValueError with one line."""
    usable = frozenset(allowed) if allowed is not None else usable_cores()
    if isinstance(quotas, str):
        quotas = parse_quotas(quotas, num_processes, len(usable))
    elif quotas:
        quotas = check_quotas(quotas, num_processes, len(usable))
    quotas = tuple(quotas or ())
    if isinstance(cpus, str):
        cpus = parse_cpus(cpus, num_processes, allowed, quotas=quotas)
    pinned = tuple(frozenset(c) for c in cpus)
    if pinned and len(pinned) != num_processes:
        raise ValueError(f"--cpus gives {len(pinned)} entries for {num_processes} processes")
    for i, cores in enumerate(pinned):  # sets given from Python, checked as the text's are
        if not cores or not cores <= usable:
            raise ValueError(
                f"--cpus gives process {i} the cores {sorted(cores)}, not within the cores "
                f"{sorted(usable)}"
            )
    if not quotas:
        return quotas, pinned
    cpus = pinned or (usable,) * num_processes  # unpinned: they share every usable core
    for cores in _unions(set(cpus)):
        inside = [i for i in range(num_processes) if cpus[i] <= cores]
        total = sum(quotas[i] for i in inside)
        if total > len(cores) + 1e-9:
            who = f"process{'es' if len(inside) > 1 else ''} {', '.join(map(str, inside))}"
            raise ValueError(
                f"--cpu_quota gives {who} {total:g} cores in all, but they may run only on "
                f"the {len(cores)} core(s) {sorted(cores)}: each would get less than its quota; "
                f"give smaller quotas, more cores (--cpus), or fewer processes"
            )
    return quotas, pinned


def _unions(sets: set[frozenset[int]]) -> list[frozenset[int]]:
    """Every union of the given core sets (the cores any group of processes may share: the
    quotas of the processes inside one must fit it, overlapping sets included, such as 0-1
    and 1-2), smallest first; past 12 distinct sets, each set and their union alone."""
    if len(sets) > 12:
        return sorted(sets | {frozenset().union(*sets)}, key=len)
    unions: set[frozenset[int]] = set()
    for cores in sets:
        unions |= {u | cores for u in unions} | {cores}
    return sorted(unions, key=lambda u: (len(u), sorted(u)))


def quota_env(quotas: Sequence[float], process_id: int) -> dict[str, str]:
    """What the launcher tells process `process_id` of the quotas: its own share (main.py
    warns when the clock ignores it) and every process's (the run records them)."""
    if not quotas:
        return {}
    return {QUOTA_ENV: f"{quotas[process_id]:g}", QUOTAS_ENV: ",".join(f"{q:g}" for q in quotas)}


def launched_quotas(environ: Mapping[str, str] = os.environ) -> list[float]:
    """Each process's share of a core as the launcher set it ([] when it set none): the run
    records it (config.json's `resolved.cpu_quota`), so runs under other quotas are told apart."""
    text = environ.get(QUOTAS_ENV, "")
    return [float(q) for q in text.split(",")] if text else []


def spread_cpus(num_processes: int, allowed: set[int]) -> tuple[frozenset[int], ...]:
    """`--cpus=auto`: the cores this process may use dealt out to the processes, as mpirun
    and SLURM bind ranks to cores: with at least one core a process, each gets its own
    contiguous slice (the first ones any remainder); with fewer, one core each, in turn."""
    cores = sorted(allowed)
    if num_processes <= len(cores):
        share, extra = divmod(len(cores), num_processes)
        out, start = [], 0
        for i in range(num_processes):
            size = share + (i < extra)
            out.append(frozenset(cores[start : start + size]))
            start += size
        return tuple(out)
    return tuple(frozenset({cores[i % len(cores)]}) for i in range(num_processes))


def parse_cpus(
    text: str,
    num_processes: int,
    allowed: set[int] | None = None,
    quotas: Sequence[float] = (),
) -> tuple[frozenset[int], ...]:
    """`--cpus=0,1` or `--cpus=0-1,2-3`: the cores of each process (an entry a core or a
    range), each among the cores this process may use; `auto` deals them out
    (`spread_cpus`), `fit` (the launcher's default) deals them out where there is at least
    one a process and each process's quota (if `quotas`) fits its cores, and pins nothing
    otherwise; `none` leaves every process free to run on any of them."""
    text = text.strip()
    if text == "none":
        return ()
    if allowed is None:
        getter = getattr(os, "sched_getaffinity", None)  # Linux only
        if getter is None:
            if text == "fit":
                return ()
            raise ValueError("--cpus pins processes to cores, which this OS cannot do here "
                             "(no sched_getaffinity): give --cpus=none")  # fmt: skip
        allowed = getter(0)
    if text == "fit" and num_processes > len(allowed):
        return ()
    if text in ("auto", "fit"):
        dealt = spread_cpus(num_processes, allowed)
        if text == "fit" and any(q > len(c) for q, c in zip(quotas, dealt, strict=False)):
            return ()
        return dealt
    entries = text.split(",")
    if len(entries) != num_processes:
        raise ValueError(
            f"--cpus gives {len(entries)} entries for {num_processes} processes: one each "
            "(a core, or a range like 0-3)"
        )
    sets = []
    for entry in entries:
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", entry.strip())
        if not match:
            raise ValueError(f"--cpus entry {entry!r} is not a core or a range like 0-3")
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        cores = frozenset(range(first, last + 1))
        if not cores or not cores <= allowed:
            raise ValueError(f"--cpus entry {entry!r} is not within the cores {sorted(allowed)}")
        sets.append(cores)
    return tuple(sets)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _rmdir(path: Path) -> None:
    """Removes one group; a group the kernel still sees busy right after its last process
    was reaped gets a few more tries."""
    for attempt in range(20):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno != errno.EBUSY or attempt == 19:
                raise
            time.sleep(0.01)


def remove(parent: Path) -> list[Path]:
    """Removes `parent` and its groups; returns the groups left behind (still busy)."""
    left = []
    for child in sorted(p for p in parent.glob("*") if p.is_dir()) if parent.is_dir() else []:
        try:
            _rmdir(child)
        except OSError:
            left.append(child)
    if not left:
        try:
            _rmdir(parent)
        except OSError:
            left.append(parent)
    return left


def sweep(base: Path) -> list[Path]:
    """Removes the groups of launchers that no longer run (killed by SIGKILL); returns the
    parents removed. A parent whose pid was reused by a live process waits for that one."""
    removed = []
    for parent in sorted(base.glob(PREFIX + "*")):
        match = re.fullmatch(re.escape(PREFIX) + r"(\d+)", parent.name)
        stale = match and parent.is_dir() and not _alive(int(match.group(1)))
        if stale and not remove(parent):
            removed.append(parent)
    return removed


def create(
    fractions: Sequence[float],
    *,
    root: str | os.PathLike | None = None,
    cpus: Sequence[frozenset[int]] = (),
    period_us: int = PERIOD_US,
    owner: int | None = None,
) -> list[Group]:
    """Creates one group per fraction under `omnilearn-<owner>` (default: this pid), after
    sweeping stale ones; raises `CgroupError` (one line) where that is not possible."""
    if not fractions:
        raise ValueError("give one CPU quota per process")
    if cpus and len(cpus) != len(fractions):
        raise ValueError(f"{len(cpus)} core sets for {len(fractions)} CPU quotas: one each")
    limits = [quota_and_period(f, period_us) for f in fractions]  # bad values: nothing made
    layout = detect(root)
    sweep(layout.base)
    parent = layout.base / f"{PREFIX}{os.getpid() if owner is None else owner}"
    if parent.exists():  # this process's groups from an earlier launch still stand
        raise CgroupError(
            f"{parent} exists: an earlier launch from this process left its groups (release "
            f"them with cgroups.release, or start from a new process)"
        )
    try:
        if layout.version == 2:  # children get cpu.max only where the parent delegates cpu
            (layout.base / "cgroup.subtree_control").write_text("+cpu")
        parent.mkdir()
        if layout.version == 2:
            (parent / "cgroup.subtree_control").write_text("+cpu")
        groups = []
        for i, (quota, period) in enumerate(limits):
            group = Group(parent / f"p{i}", quota, period, cpus[i] if cpus else frozenset())
            group.path.mkdir()
            if layout.version == 2:
                (group.path / "cpu.max").write_text(f"{quota} {period}")
            else:
                (group.path / "cpu.cfs_period_us").write_text(str(period))
                (group.path / "cpu.cfs_quota_us").write_text(str(quota))
            groups.append(group)
    except OSError as e:
        remove(parent)
        raise CgroupError(
            f"cannot create CPU-quota groups under {layout.base} "
            f"({e.strerror or e}): {_ALTERNATIVES}"
        ) from e
    except BaseException:  # Ctrl-C half-way: nothing made stays
        remove(parent)
        raise
    return groups


def release(groups: Sequence[Group]) -> list[Path]:
    """Removes the groups `create` made, once their processes have been reaped; names those
    left behind (still busy) on stderr and returns them."""
    left = remove(groups[0].path.parent) if groups else []
    if left:
        names = ", ".join(map(str, left))
        print(f"[launch] cgroups left behind (still busy): {names}", file=sys.stderr)
    return left


@contextlib.contextmanager
def quota_groups(fractions: Sequence[float], **kwargs) -> Iterator[list[Group]]:
    """`create(fractions, **kwargs)`, released when the block ends however it ends."""
    groups = create(fractions, **kwargs)
    try:
        yield groups
    finally:
        release(groups)
