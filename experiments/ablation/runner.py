"""Runs the cells of an ablation as subprocesses of the real command line, N at a time.

Each cell is `python -m omnilearn_jax.main --config=BASE --workdir=DIR/CELL --config.K=V ...`
(or, when the ablation sets num_processes=N > 1, `python -m omnilearn_jax.launch
--num_processes=N --devices_per_process=cpu_devices/N [--cpu_quota=... --cpus=...] -- <the
same arguments>`) with its
stdout and stderr in DIR/CELL/log.txt, so cells are isolated (a crash, a hang or a leaked
JAX setting stays in its process) and a cell can be rerun by hand from its log header.

CPU sharing: with N cells at once on C cores, each cell gets a disjoint set of max(1, C // N)
cores (Linux CPU affinity; slots wrap when N > C) and matching thread counts
(OMP/OPENBLAS/MKL_NUM_THREADS); when a cell has a single core XLA's Eigen thread pool is
switched off (`--xla_cpu_multi_thread_eigen=false`). Without this, N processes each spawn a
thread per core and the cores thrash between them. A multi-process cell still takes one slot:
its P processes share the slot's cores (they inherit the launcher's affinity), and each gets
max(1, cores // P) threads, so the cell as a whole asks for as many threads as it has cores.

Resuming: a cell whose summary.json says status 'complete' is skipped; any other cell
directory (a killed or failed run) is deleted and the cell rerun from scratch. A complete
cell whose log header names another command than this ablation gives it (`stale_cells`: the
ablation file changed) stops the rerun before anything runs (experiments/ablate.py).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable

from experiments.ablation.spec import (
    Ablation,
    Cell,
    devices_per_process,
    format_value,
    launcher_options,
)
from omnilearn_jax.run.launch import die_with_parent

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def is_complete(cell_dir: str) -> bool:
    try:
        with open(os.path.join(cell_dir, "summary.json")) as f:
            return json.load(f).get("status") == "complete"
    except (OSError, ValueError):
        return False


def stale_cells(ablation: Ablation, workdir: str) -> list[str]:
    """The complete cells of `workdir` whose command (their log's header, the interpreter
    and the cell's own folder aside, so a moved workdir still resumes) is not the one this
    ablation gives them: another ablation's results, which a rerun would otherwise skip and
    report as this one's."""

    def args(command: list[str]) -> tuple[list[str], list[str]]:
        # The config's keys in any order: the same `--set` flags in another order (or an
        # ablation file's overrides reordered) gave the same config and were refused as stale.
        kept = [a for a in command[1:] if not a.startswith("--workdir=")]
        keys = sorted(a for a in kept if a.startswith("--config."))
        return [a for a in kept if not a.startswith("--config.")], keys

    stale = []
    for cell in ablation.cells():
        cell_dir = os.path.join(workdir, cell.name)
        if not is_complete(cell_dir):
            continue
        try:
            with open(os.path.join(cell_dir, "log.txt")) as f:
                ran = args(shlex.split(f.readline().removeprefix("# ")))
        except OSError:
            ran = []
        if ran != args(cell_command(ablation, cell, workdir)):
            stale.append(cell.name)
    return stale


def foreign_cells(ablation: Ablation, workdir: str) -> list[str]:
    """The complete cell directories of `workdir` that are no cell of this ablation: another
    ablation's, run there before. Accepted, the table showed the new one's cells alone and the
    analysis loaded both as one sweep."""
    if not os.path.isdir(workdir):
        return []
    own = {cell.name for cell in ablation.cells()}
    found = [
        name
        for name in sorted(os.listdir(workdir))
        if name not in own
        and os.path.exists(os.path.join(workdir, name, "log.txt"))
        and is_complete(os.path.join(workdir, name))
    ]
    return found


def cell_command(ablation: Ablation, cell: Cell, workdir: str) -> list[str]:
    path, sep, arg = ablation.base.partition(":")
    base = os.path.abspath(path) + sep + arg
    args = [f"--config={base}"]
    args.append(f"--workdir={os.path.abspath(os.path.join(workdir, cell.name))}")
    for key, value in ablation.cell_overrides(cell).items():
        args.append(f"--config.{key}={format_value(value)}")
    n = ablation.num_processes
    if n == 1:
        return [sys.executable, "-m", "omnilearn_jax.main", *args]
    # The launcher's own default (8 // N devices each) ignores the config; splitting the
    # cell's cpu_devices keeps the device count, and so the maths, of the one-process cell.
    k = devices_per_process(ablation, cell)
    launcher = ["-m", "omnilearn_jax.launch", f"--num_processes={n}", f"--devices_per_process={k}"]
    launcher += launcher_options(ablation)  # CPU quotas and cores, when the ablation sets them
    args = [a for a in args if not a.startswith("--config.cpu_devices=")]  # in k, per process
    return [sys.executable, *launcher, "--", *args]


def check_parallel(ablation: Ablation, parallel: int) -> None:
    """Cells with CPU quotas or cores (`cpu_quota`, `cpus`) run one at a time: the quotas
    are checked against the machine's cores, but a cell run beside others is pinned to its
    slot of them (`cpu_slots`), where its launcher refused them and every cell failed."""
    if parallel > 1 and (ablation.cpu_quota or ablation.cpus):
        raise ValueError(
            f"cpu_quota and cpus confine each cell's processes to this machine's cores, which "
            f"{parallel} cells at once would split between them (and their quotas measure "
            "nothing with other cells beside them): give --parallel 1"
        )


def cpu_slots(parallel: int, cores: list[int] | None = None) -> list[list[int]]:
    """Disjoint core sets, one a concurrent cell (wrapping when cells outnumber cores)."""
    if cores is None:
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not cores:
        return [[] for _ in range(parallel)]
    per = max(1, len(cores) // parallel)
    return [[cores[(s * per + i) % len(cores)] for i in range(per)] for s in range(parallel)]


def cell_env(num_threads: int) -> dict[str, str]:
    env = dict(os.environ)
    # main.py sets the CPU device count from the config; a forced count inherited from a
    # test environment would fight it.
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f]
    if num_threads == 1:
        flags.append("--xla_cpu_multi_thread_eigen=false")
    env["XLA_FLAGS"] = " ".join(flags)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(max(1, num_threads))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _fmt(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60}m{s % 60:02d}s"


class Runner:
    """Schedules cells; `run()` returns the names of the cells that failed."""

    def __init__(
        self,
        ablation: Ablation,
        workdir: str,
        parallel: int = 1,
        log: Callable[[str], None] = print,
        poll_s: float = 0.2,
    ):
        check_parallel(ablation, parallel)
        self.ablation, self.workdir, self.parallel = ablation, workdir, max(1, parallel)
        self.log, self.poll_s = log, poll_s
        self.slots = cpu_slots(self.parallel)

    def run(self) -> list[str]:
        cells = self.ablation.cells()
        todo = [c for c in cells if not is_complete(os.path.join(self.workdir, c.name))]
        skipped = len(cells) - len(todo)
        if skipped:
            self.log(f"[ablate] {skipped} of {len(cells)} cells already complete; skipping them")
        running: dict[int, tuple[subprocess.Popen, Cell, float, object]] = {}
        done, failed, durations, start = skipped, [], [], time.perf_counter()
        try:
            while todo or running:
                free = [s for s in range(self.parallel) if s not in running]
                while todo and free:
                    slot, cell = free.pop(0), todo.pop(0)
                    running[slot] = self._start(cell, slot)
                for slot, (proc, cell, t0, log_file) in list(running.items()):
                    if proc.poll() is None:
                        continue
                    log_file.close()
                    del running[slot]
                    durations.append(time.perf_counter() - t0)
                    cell_dir = os.path.join(self.workdir, cell.name)
                    if proc.returncode == 0 and is_complete(cell_dir):
                        done += 1
                    else:
                        failed.append(cell.name)
                        self.log(
                            f"[ablate] FAILED {cell.name} (exit {proc.returncode}); "
                            f"log: {os.path.join(cell_dir, 'log.txt')}"
                        )
                    self._progress(len(cells), done, len(running), failed, todo, durations, start)
                time.sleep(self.poll_s)
        except BaseException:
            for proc, *_ in running.values():
                proc.kill()
            raise
        return failed

    def _start(self, cell: Cell, slot: int):
        cell_dir = os.path.join(self.workdir, cell.name)
        if os.path.exists(cell_dir):  # a partial run: start it again from scratch
            shutil.rmtree(cell_dir)
        os.makedirs(cell_dir)
        cmd = cell_command(self.ablation, cell, self.workdir)
        cores = self.slots[slot]
        log_file = open(os.path.join(cell_dir, "log.txt"), "w")  # noqa: SIM115
        # Quoted as a shell would need it: an argument with a space (a workdir, a string
        # override) read back as two, and a rerun refused its complete cells
        log_file.write("# " + shlex.join(cmd) + "\n")
        log_file.flush()

        runner = os.getpid()

        def pin() -> None:
            # A cell dies with the runner, even a runner killed by SIGKILL: an orphaned cell
            # went on writing into the directory a rerun had cleared and started again, and
            # the rerun counted the orphan's summary as its own run.
            die_with_parent(runner)
            if cores and hasattr(os, "sched_setaffinity"):
                os.sched_setaffinity(0, cores)

        # The processes of a multi-process cell share its cores: split the threads too.
        threads = max(1, (len(cores) or 1) // self.ablation.num_processes)
        proc = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            env=cell_env(threads),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            preexec_fn=pin,
        )
        procs = self.ablation.num_processes
        shared = f", {procs} processes x {threads} thread(s)" if procs > 1 else ""
        self.log(f"[ablate] start {cell.name} (cores {cores or 'any'}{shared})")
        return proc, cell, time.perf_counter(), log_file

    def _progress(self, total, done, running, failed, todo, durations, start) -> None:
        elapsed = time.perf_counter() - start
        left = len(todo) + running
        mean = sum(durations) / len(durations)
        eta = mean * left / self.parallel
        self.log(
            f"[ablate] {done}/{total} done, {running} running, {len(failed)} failed, "
            f"{len(todo)} queued | elapsed {_fmt(elapsed)} ETA {_fmt(eta)}"
        )
