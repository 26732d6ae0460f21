"""Measured on CPU-quota heterogeneity: controllers on a real heterogeneous cluster.

    python -m experiments.real_hetero [--clusters 1.0/0.5,1.0/0.25,0.5/0.5/0.5/0.25]
        [--controllers static,proportional,pi,predictive,oracle] [--reps 3] [--steps 150]
        [--job cnn|cnn64] [--unpinned] [--quota_from start|steps] [--mode bsp|asp]
        [--json docs/results/real_hetero.json] [--md docs/results/real_hetero.md]

Each cluster is one process a worker (1 CPU device each), started by the launcher with a CFS
quota per process (`launch --cpu_quota`, docs/cluster_quotas.md) and pinned to the cores
(`--cpus`), as the OmniLearn paper built its clusters from containers with CPU limits.
Nothing is injected: a worker is slower because its process gets less CPU time. The job is
the paper's BSP job (configs/paper_bsp.py, runlocal: CNN on digits, B = 128, bounds 16..96)
on the wall clock. For each cluster:

1. `static` (uniform batches) runs first; each process's seconds per row in it are its
   measured speed (relative to the fastest);
2. every controller then runs, each repetition beside a static repetition (interleaved, the
   static one second in even repetitions and first in odd ones, so drifting load hits both
   alike); the oracle is told the measured speeds (`hetero=cores` with
   those speeds and nothing injected: the profile only informs the oracle);
3. the virtual clock predicts, for the measured speeds and a cost linear in the rows, the
   wall time of each controller against static; the study reports how much of that
   predicted reduction real execution delivers.

Reported per cell: the median and worst (controller wall time / paired static wall time) to
the same steps, the time to the target accuracy (from each run's summary), the predicted
reduction and the fraction delivered. With `--quota_from steps` each process compiles at
full speed and joins its quota group just before the first step (`launch --quota_from`): the
steps timed run under the same quotas, start-up is shorter, and a tight quota (0.125) no
longer times out Gloo's rendezvous while it compiles. Needs a writable cgroup cpu controller
(root); it is a study, not a test. `--mode asp` runs the async job instead
(configs/paper_asp.py, W x steps updates): a parameter server in process 0 and worker k in
process k, each under its quota (docs/async.md, "Across processes").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np

import controllers
from benchmarks.args import SKIPPED, at_least, existing  # SKIPPED: a run's first steps, not timed
from benchmarks.wall_acceptance import MEANINGFUL, delivered_fraction
from controllers import tracking
from omnilearn_jax.run import cgroups

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMAND = "python -m experiments.real_hetero "
CONFIG = "configs/paper_{mode}.py:runlocal,model=cnn,hetero=uniform,controller={controller}"
# The jobs a cell can run: the runlocal CNN as configured (features 8, 16: a step's compute is
# about 0.9 ms of the 3.5-5.4 ms of CPU a process spends on it), and the same CNN 8x wider
# (features 64, 128), whose compute outweighs the per-step host work and collective that no
# split moves, as the paper's models' compute did (docs/cluster_quotas.md).
JOBS = {
    "cnn": [],
    "cnn64": ["--config.model.features=(64,128)", "--config.model.hidden=128"],
}


@dataclass(frozen=True)
class Setting:
    """How a cell's processes run: the model (`JOBS`), whether they are pinned to cores
    (`--cpus`), and when the quota applies (`launch --quota_from`)."""

    job: str = "cnn"
    pinned: bool = True
    quota_from: str = "start"
    mode: str = "bsp"  # or "asp": a parameter server in process 0, worker k in process k
    server: float = 0.0  # asp: the quota of a server process of its own; 0: beside worker 0


def pinning(quotas: list[float], cores: int | Iterable[int]) -> str:
    """Cores for each process: quotas packed onto the cores in order, so that no core is
    asked for more than one core's time (first fit); a quota over one core gets that many
    whole free cores in a row (2 had been packed onto one core, where it ran as 1). `cores`:
    the core ids this process may use (`cgroups.usable_cores`), or a count of cores from 0."""
    ids = list(range(cores)) if isinstance(cores, int) else sorted(cores)
    free, out = [1.0] * len(ids), []
    for q in quotas:
        need, share = max(math.ceil(q - 1e-9), 1), min(q, 1.0)
        core = next(
            (
                c
                for c in range(len(ids) - need + 1)
                if ids[c + need - 1] - ids[c] == need - 1  # a range of ids: --cpus=2-3
                and all(free[c + i] + 1e-9 >= share for i in range(need))
            ),
            None,
        )
        if core is None:
            raise ValueError(f"quotas {quotas} do not fit on the {len(ids)} cores {ids}")
        for i in range(need):
            free[core + i] -= q / need
        first, last = ids[core], ids[core + need - 1]
        out.append(str(first) if need == 1 else f"{first}-{last}")
    return ",".join(out)


def job_args(
    controller: str,
    workers: int,
    steps: int,
    target: float,
    speeds=None,
    job: str = "cnn",
    mode: str = "bsp",
) -> list:
    """The job's arguments; an async job runs `workers * steps` updates (as many samples as
    the BSP job's steps, in expectation) with no time budget."""
    name = "oracle" if controller == "oracle" else controller
    updates = steps * workers if mode == "asp" else steps
    args = [
        f"--config={CONFIG.format(mode=mode, controller=name)}",
        *JOBS[job],
        f"--config.num_workers={workers}",
        f"--config.num_devices={workers}",
        "--config.clock=wall",
        f"--config.train.num_steps={updates}",
        f"--config.train.eval_every={max(updates // 5, 1)}",
        "--config.train.checkpoint_every=0",
        f"--config.train.target_accuracy={target}",
    ]
    if mode == "asp":
        args += ["--config.asp.time_budget=0"]
    if speeds is not None:  # the oracle's knowledge: the measured speeds, nothing injected
        cores = ",".join(f"{s:.4f}" for s in speeds)
        args += ["--config.hetero.name=cores", f"--config.hetero.cores=({cores},)"]
    return args


def run(
    quotas: list[float],
    controller: str,
    steps: int,
    target: float,
    speeds=None,
    setting: Setting = Setting(),
) -> dict:
    """One launched run; its wall time to the steps (`steps_wall_time`: from the first step
    to the end of the last, start-up and the final evaluation and save excluded), time to
    target, per-worker seconds per row, and the final split."""
    workers = len(quotas)
    alone = [setting.server] if setting.server else []  # process 0, the server's
    processes = alone + list(quotas)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "omnilearn_jax.launch", f"--num_processes={len(processes)}"]
        cmd += ["--devices_per_process=1", "--cpu_quota=" + ",".join(map(str, processes))]
        cores = pinning(processes, cgroups.usable_cores()) if setting.pinned else "none"
        cmd += [f"--cpus={cores}", f"--quota_from={setting.quota_from}", "--"]
        cmd += [*job_args(controller, workers, steps, target, speeds, setting.job, setting.mode)]
        cmd += ["--config.asp.server_process=True"] if alone else []
        cmd += [f"--workdir={tmp}"]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(proc.stdout[-3000:] + proc.stderr[-2000:])
        with open(os.path.join(tmp, "summary.json")) as f:
            summary = json.load(f)
        with open(os.path.join(tmp, "metrics.jsonl")) as f:
            train = [r for r in map(json.loads, f) if "worker_times" in r]
    return {**measured(train, summary), "load": os.getloadavg()[0]}


def trajectory(train: list[dict]) -> dict:
    """A run's steps, compact: each split with the step it took effect at (changes only),
    and every step's wall time and slowest worker's time, in ms to 0.1."""
    splits, last = [], None
    for r in train:
        if r["batch_sizes"] != last:
            splits.append([r["step"], r["batch_sizes"]])
            last = r["batch_sizes"]
    ms = lambda x: round(1e3 * float(x), 1)  # noqa: E731
    return {
        "splits": splits,
        "step_ms": [ms(r["step_time"]) for r in train],
        "slowest_ms": [ms(max(r["worker_times"])) for r in train],
    }


def measured(train: list[dict], summary: dict) -> dict:
    """A run's figures from its summary and its training records (metrics.jsonl)."""
    rows = np.array([r["batch_sizes"] for r in train[SKIPPED:]], float)
    times = np.array([r["worker_times"] for r in train[SKIPPED:]], float)
    # nanmedian: a step where a worker held no rows says nothing of its speed (median made
    # the whole column NaN)
    per_row = np.nanmedian(np.where(rows > 0, times / np.maximum(rows, 1), np.nan), axis=0)
    return {
        "wall_s": float(summary["steps_wall_time"]),  # first step to last, start-up apart
        # steps_wall_time leaves periodic evaluations and saves out since 2026-12-05 (before,
        # it counted them): cells of the two kinds are not merged into one table.
        "wall": STEPS_ONLY,
        "clock_s": float(summary["total_time"]),
        "time_to_target": summary.get("time_to_target"),
        "final_accuracy": float(summary["final_eval_accuracy"]),
        "seconds_per_row": per_row.tolist(),
        "final_split": train[-1]["batch_sizes"],
        "trajectory": trajectory(train),
    }


def predicted(controller: str, speeds: list[float], steps: int, mode: str = "bsp") -> float:
    """The virtual clock's total time of `controller` on a cluster of these speeds, with a
    cost linear in the rows (the same bounds, dead-band and steps, or updates)."""
    from configs import paper_asp, paper_bsp
    from omnilearn_jax.run.job import train_and_evaluate

    config = paper_asp if mode == "asp" else paper_bsp
    c = config.get_config(f"runlocal,model=cnn,hetero=uniform,controller={controller}")
    c.num_workers = c.num_devices = len(speeds)
    c.hetero.name = "cores"
    c.hetero.cores = tuple(float(s) for s in speeds)
    c.cost.linear = True
    c.cost.per_sample_cost = 1e-3
    if "persist" in controllers.accepted_kwargs(controller):  # the wall clock's, as measured
        c.controller.persist = tracking.DEFAULT_PERSIST  # (the virtual clock's default is 0)
    c.train.num_steps = c.train.eval_every = steps * len(speeds) if mode == "asp" else steps
    c.train.checkpoint_every = 0
    c.asp.time_budget = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        return float(train_and_evaluate(c, tmp)["total_time"])


def study(
    clusters, controllers, reps: int, steps: int, target: float, setting: Setting = Setting()
) -> list[dict]:
    out = []
    for quotas in clusters:
        began = time.perf_counter()

        def uniform(quotas=quotas) -> dict:
            return run(quotas, "static", steps, target, None, setting)

        statics = [uniform() for _ in range(reps)]
        per_row = np.median([s["seconds_per_row"] for s in statics], axis=0)
        speeds = (per_row.min() / per_row).tolist()
        print(f"[real_hetero] quotas {quotas}: measured speeds "
              f"{[round(s, 3) for s in speeds]}", flush=True)  # fmt: skip
        virtual_static = predicted("static", speeds, steps, setting.mode)
        for controller in controllers:
            if controller == "static":
                continue
            pairs = []
            for rep in range(reps):
                told = speeds if controller == "oracle" else None
                # Which side goes first alternates, so a steady drift favours neither (until
                # 2026-12-06 the controller's run always went first)
                if rep % 2:
                    beside = uniform()
                mine = run(quotas, controller, steps, target, told, setting)
                if not rep % 2:
                    beside = uniform()
                pairs.append({"controller": mine, "static": beside, "rep": rep})
                print(f"  {controller} rep {rep}: {mine['wall_s']:.2f} s against static "
                      f"{beside['wall_s']:.2f} s, split {mine['final_split']} "
                      f"(load {mine['load']:.2f})", flush=True)  # fmt: skip
            ratios = [p["controller"]["wall_s"] / p["static"]["wall_s"] for p in pairs]
            reduction = 1.0 - predicted(controller, speeds, steps, setting.mode) / virtual_static
            measured = 1.0 - float(np.median(ratios))
            out.append({
                "quotas": quotas, "controller": controller, **asdict(setting),
                "speeds": speeds,
                "statics": statics, "pairs": pairs,
                "median_ratio": float(np.median(ratios)), "worst_ratio": float(max(ratios)),
                "predicted_reduction": reduction, "measured_reduction": measured,
                "delivered": delivered_fraction(measured, reduction),
            })  # fmt: skip
        print(f"[real_hetero] quotas {quotas}: {time.perf_counter() - began:.0f} s", flush=True)
    return out


def _median_to_target(times: list[float | None]) -> str:
    """The median over every run, a run that missed the target counting as never reaching it,
    and how many reached it: [2.87, None, None] is 'not reached (1/3)' (the median of the
    runs that reached it said 2.87 s)."""
    median = np.median([np.inf if t is None else t for t in times])
    reached = f"({sum(t is not None for t in times)}/{len(times)})"
    return f"{median:.2f} s {reached}" if np.isfinite(median) else f"not reached {reached}"


def table(cells: list[dict]) -> str:
    lines = [
        "| job | quotas | controller | measured speeds | median / static | worst / static | "
        "predicted reduction | measured (median) | delivered | time to target (median, reached) | "
        "final accuracy (median), controller / static |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        shown = _median_to_target([p["controller"]["time_to_target"] for p in c["pairs"]])
        meaningful = c["delivered"] is not None and c["predicted_reduction"] > MEANINGFUL
        delivered = f"{100 * c['delivered']:.0f}%" if meaningful else "n/a"
        lines.append(
            f"| {_job(c)} | {'/'.join(map(str, c['quotas']))} | {c['controller']} | "
            f"{'/'.join(f'{s:.2f}' for s in c['speeds'])} | {c['median_ratio']:.3f} | "
            f"{c['worst_ratio']:.3f} | {100 * c['predicted_reduction']:.1f}% | "
            f"{100 * c['measured_reduction']:.1f}% | {delivered} | {shown} | "
            f"{_accuracy(c, 'controller'):.3f} / {_accuracy(c, 'static'):.3f} |"
        )
    return "\n".join(lines)


def _accuracy(cell: dict, arm: str) -> float:
    """The median final accuracy of a cell's controller runs or their paired static runs."""
    return float(np.median([p[arm]["final_accuracy"] for p in cell["pairs"]]))


def _job(cell: dict) -> str:
    """The cell's job as the table names it: the model, `unpinned` where the processes
    were not pinned to cores (the quota alone, as a container's CPU limit is), and `quota
    from steps` where the quota applied from the first step, not to compiling; async, and
    the server's own quota where it had a process to itself."""
    name = cell.get("job", "cnn") + ("" if cell.get("pinned", True) else ", unpinned")
    name += ", quota from steps" if cell.get("quota_from") == "steps" else ""
    name += ", async" if cell.get("mode") == "asp" else ""
    return name + (f", server alone at {cell['server']}" if cell.get("server") else "")


def _key(cell: dict) -> tuple:
    return _job(cell), tuple(cell["quotas"]), cell["controller"]


def merged(old: dict, cells: list[dict], command: str) -> dict:
    """A saved study (`old`, as the JSON holds it) with `cells` added: a cell measured again
    (same quotas and controller) replaces the old one, the others are kept, and each
    command that produced kept cells is listed. Cells whose wall times count other things
    (`wall`: evaluations and saves in or out) are not put in one table."""
    new = {_key(c) for c in cells}
    kept = [c for c in old.get("cells", []) if _key(c) not in new]
    if {_wall(c) for c in kept} - {_wall(c) for c in cells}:
        raise ValueError(
            "--merge: the saved cells' wall times include periodic evaluations and saves, "
            "these leave them out; measure the saved cells again, or write another --json"
        )
    commands = old.get("commands") or [old["command"]] if old else []
    commands = [c for c in commands if c != command] if kept else []
    return {"commands": [*commands, command], "cells": kept + cells}


STEPS_ONLY = "steps"  # a cell's `wall`: steps_wall_time without evaluations and saves


def _wall(cell: dict) -> str:
    return cell["pairs"][0]["controller"].get("wall", "") if cell.get("pairs") else ""


def document(cells: list[dict], command: str | list[str]) -> str:
    """The RESULTS.md section (a `## ` fragment, experiments/paper/fragments.py): how it was
    obtained, the table, and what the goal's cell says, computed from the cells."""
    commands = [command] if isinstance(command, str) else command
    steps_only = bool(cells) and all(_wall(c) == STEPS_ONLY for c in cells)
    lines = [
        "## Measured on CPU-quota heterogeneity",
        "",
        "Measured, not modelled: one process a worker, each under a CFS CPU quota",
        "(`launch --cpu_quota`, pinned with `--cpus` unless the job says unpinned; the",
        "quota applies from the process's start, or, where the job says `quota from",
        "steps`, from the first step, compiling at full speed; docs/cluster_quotas.md), nothing",
        "injected, the wall clock. The job is configs/paper_bsp.py (runlocal: the CNN on",
        "digits, B = 128, bounds 16..96); job `cnn` is that CNN as configured (features 8,",
        "16), `cnn64` the same CNN 8x wider (features 64, 128; hidden 128), whose compute",
        "outweighs the host work and the all-reduce a step costs whatever its split (see",
        "docs/cluster_quotas.md). Each controller run is paired with a static",
        "(uniform) run next to it; times are `steps_wall_time` (first step to the end of the",
        ("last, periodic evaluations and checkpoints left out). " if steps_only else "last). ")
        + "The prediction is the virtual clock's for the measured speeds and a cost",
        "linear in the rows (modelled). Jobs marked `async` run configs/paper_asp.py",
        "(runlocal, no time budget) as a parameter server in process 0 and worker k in",
        'process k (docs/async.md, "Across processes"; `server alone at Q`: the server in a',
        "process of its own at quota Q, worker k in process k + 1) for W x the steps in",
        "updates (as many samples as the BSP cells' steps, in expectation); their accuracy",
        "column says",
        "what the split did to the model (a single run's accuracy moves by several points:",
        "compare medians, not runs).",
        "",
        "Commands: " + "; ".join(f"`{c}`" for c in commands)
        if len(commands) > 1
        else f"Command: `{commands[0]}`",
        "",
        table(cells),
        "",
    ]
    goal = [
        c
        for c in cells
        if c["quotas"] == [1.0, 0.25]
        and c["controller"] == "proportional"
        and c.get("mode", "bsp") == "bsp"
    ]
    for g in goal:
        verdict = "meets" if g["median_ratio"] <= 0.75 else "misses"
        lines += [
            f"Job `{_job(g)}`: at quotas 1.0/0.25, proportional finishes the same "
            f"steps in {g['median_ratio']:.2f}x "
            f"the time of uniform batches (median of {len(g['pairs'])}; worst "
            f"{g['worst_ratio']:.2f}x): it {verdict} the goal of 0.75x. The virtual clock "
            f"predicts a {100 * g['predicted_reduction']:.0f}% reduction for the measured "
            f"speeds; real execution delivers {100 * g['measured_reduction']:.0f}%.",
            "",
        ]
    loads = []
    for c in cells:
        each = " / ".join(f"{p['controller']['load']:.2f}" for p in c["pairs"])
        loads.append(f"{_job(c)} {'/'.join(map(str, c['quotas']))} {c['controller']} {each}")
    lines += [f"Load average after each controller run: {'; '.join(loads)}.", ""]
    return "\n".join(lines)


def dumps(saved: dict) -> str:
    """The study as JSON, indented, with each list of numbers on one line (a run's
    trajectory holds hundreds)."""
    text = json.dumps(saved, indent=1)
    flat = lambda m: "[" + ", ".join(m.group(1).replace(",", " ").split()) + "]"  # noqa: E731
    return NUMBER_LIST.sub(flat, text)


# A JSON list of numbers (NaN where a worker held no rows), each followed by a comma unless
# it is the last: one way to match any text, so a list that is not all numbers fails at once
# (the earlier pattern, commas optional, tried every split of the digits: hours on a long one).
_NUMBER = r"(?:-?[0-9][0-9.eE+-]*|NaN|-?Infinity|null)"
NUMBER_LIST = re.compile(rf"\[\s*({_NUMBER}(?:,\s*{_NUMBER})*)\s*\]")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clusters", default="1.0/0.5,1.0/0.25,0.5/0.5/0.5/0.25")
    p.add_argument("--controllers", default="static,proportional,pi,predictive,oracle")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--target", type=float, default=0.8)
    p.add_argument("--job", default="cnn", choices=sorted(JOBS), help="the model a cell trains")
    p.add_argument(
        "--unpinned",
        action="store_true",
        help="the quotas alone, no --cpus pinning (as Docker's --cpus and Kubernetes limits)",
    )
    p.add_argument(
        "--quota_from",
        default="start",
        choices=cgroups.QUOTA_FROM,
        help="when the quotas apply (launch --quota_from): before exec, or from the first step",
    )
    p.add_argument(
        "--mode",
        default="bsp",
        choices=("bsp", "asp"),
        help="asp: a parameter server in process 0 and worker k in process k, steps x W updates",
    )
    p.add_argument(
        "--server_quota",
        type=float,
        default=0.0,
        help="asp: the server in a process of its own (asp.server_process) at this quota",
    )
    p.add_argument("--json", default="")
    p.add_argument("--md", default="")
    p.add_argument("--render", default="", help="only rewrite --md from this JSON")
    p.add_argument(
        "--merge", action="store_true", help="keep --json's cells of other clusters/controllers"
    )
    args = p.parse_args(argv)
    at_least(p, reps=(args.reps, 1))  # 0 failed after the cluster's runs, a TypeError
    if args.server_quota and args.mode != "asp":
        p.error("--server_quota gives an async run's server a process of its own: add --mode asp")
    if args.render and not args.md:
        p.error("--render rewrites --md from the JSON: give --md")
    existing(p, render=args.render)  # a FileNotFoundError traceback before
    if args.render:
        with open(args.render) as f:
            saved = json.load(f)
        with open(args.md, "w") as f:
            f.write(document(saved["cells"], saved.get("commands") or saved["command"]))
        return
    setting = Setting(args.job, not args.unpinned, args.quota_from, args.mode, args.server_quota)
    try:
        clusters = checked_clusters(args.clusters, setting, args.steps)
        names = controllers.named(args.controllers)  # a typo failed after the static runs
    except ValueError as e:
        p.error(str(e))
    import jax

    jax.config.update("jax_num_cpu_devices", 8)  # the virtual predictions, in this process
    command = COMMAND + " ".join(sys.argv[1:])
    previous = None
    if args.merge and args.json and os.path.exists(args.json):
        with open(args.json) as f:
            previous = json.load(f)
    cells = []
    for quotas in clusters:  # saved after each cluster: a failure later keeps these
        cells += study([quotas], names, args.reps, args.steps, args.target, setting)
        saved = {"commands": [command], "cells": cells}
        if previous is not None:
            saved = merged(previous, cells, command)
        if args.json:
            with open(args.json, "w") as f:
                f.write(dumps(saved))
        if args.md:
            with open(args.md, "w") as f:
                f.write(document(saved["cells"], saved["commands"]))
    print(table(cells))


def checked_clusters(text: str, setting: Setting, steps: int) -> list[list[float]]:
    """`--clusters` as quota lists, each checked as the launcher checks it (before any run)."""
    if steps <= SKIPPED:
        raise ValueError(f"--steps must be over {SKIPPED}: a run's first {SKIPPED} steps are "
                         f"not measured (first executions)")  # fmt: skip
    clusters = []
    for entry in text.split(","):
        try:
            quotas = [float(q) for q in entry.split("/")]
        except ValueError:
            raise ValueError(f"--clusters entry {entry!r} is not quotas like 1.0/0.25") from None
        processes = ([setting.server] if setting.server else []) + quotas
        cores = pinning(processes, cgroups.usable_cores()) if setting.pinned else "none"
        cgroups.confine(processes, cores, len(processes))
        clusters.append(quotas)
    return clusters


if __name__ == "__main__":
    main()
