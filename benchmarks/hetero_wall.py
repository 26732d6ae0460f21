"""The wall-clock acceptance benchmark of issue 26: what balancing saves on this machine,
in repeated runs, beside what the virtual clock predicts for the same cluster.

    python -m benchmarks.hetero_wall [--levels 2,4,8] [--injects 0.003,0.02]
        [--controllers proportional,pi,predictive] [--reps 3] [--steps 60] [--fresh]
        [--json docs/benchmarks/hetero_wall.json] [--md hetero_wall.md] [--dry_run]
        [--set controller.persist=0 ...]
    python -m benchmarks.hetero_wall --merge A.json,B.json [--pool] --json OUT.json [--md OUT.md]

The paper's BSP job (configs/paper_bsp.py, runlocal, CNN on digits, 4 workers on 4 devices,
B = 128, bounds 16..96) runs on the wall clock at each heterogeneity level and injected
cost: each controller run next to a static (uniform) run of its own, repeated `--reps`
times inside this process and (`--fresh`) once a fresh process per run
(`--one` runs a single job and prints one JSON line). Heterogeneity is injected on the
devices (`hetero.inject`: worker k waits inject * b_k / speed_k beside its compute: by
default after computing alone, the devices one at a time; `--set hetero.inject_order='after'`
or `'before'` for the other orders, docs/trainer.md), so a slow worker really takes longer
and a worker given fewer rows really computes fewer.
For each cell: the median and the worst of controller / static wall time per mode, the
median reduction against the reduction the virtual clock predicts for the same profile (a
linear cost of `inject` seconds a sample at speed 1, the same bounds and controller), the
highest 1-minute load average seen, and the goals' verdicts (benchmarks/wall_acceptance.py).
`--set KEY=VALUE` (repeatable) overrides a config value in every job, wall and virtual (for
example a controller setting, to compare two values in two runs of the benchmark).
`--merge` joins results of this benchmark measured at different times (same job, steps,
repetitions, modes, settings and wait order) into one table, a later file's cells (level,
inject, controller) replacing an earlier one's (`--pool`: pooling their runs), and says
which cells came from which file (wall_acceptance.merge); it measures nothing.
With `--json`, each run is also kept in JSON.partial as it ends; after a failed run or a
Ctrl-C the same command goes on from the complete pairs there (the file is removed at the end).
Run it on a quiet machine: every other process's load lands in the figures.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np

import controllers
from benchmarks import wall_acceptance as wa
from benchmarks.args import writable
from controllers import tracking
from omnilearn_jax.cluster.profiles import HL_TABLES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "hetero_wall run: "  # the line a `--one` process prints its result on
SETTINGS: dict[str, object] = {}  # --set: flattened config keys -> values, for every job


def job(level: int, controller: str, clock: str, steps: int, inject: float):
    from configs import paper_bsp

    c = paper_bsp.get_config(f"runlocal,model=cnn,hetero=hl{level},controller={controller}")
    # One device a worker where there are enough (CPU: 8 fake devices), else share them.
    c.num_devices = next(d for d in (4, 2, 1) if d <= len(jax.devices()))
    c.clock = clock
    c.train.num_steps = steps
    c.train.eval_every = steps
    c.train.log_every = steps
    c.train.checkpoint_every = 0
    if clock == "wall":
        c.hetero.inject = inject
    else:  # the same cluster as the virtual clock models it, and the same controller: the
        # wall clock's persist (the virtual clock's own default is 0, schema.controller_section)
        if "persist" in controllers.accepted_kwargs(controller):  # static has none to set
            c.controller.persist = tracking.DEFAULT_PERSIST
        c.cost.linear = True
        c.cost.per_sample_cost = inject
    c.update_from_flattened_dict(SETTINGS)
    return c


def timed_run(config) -> tuple[float, list[dict]]:
    """A run's total time (the clock's) and its step records."""
    from omnilearn_jax.run.job import train_and_evaluate
    from omnilearn_jax.run.runstore import read_metrics

    with tempfile.TemporaryDirectory() as tmp:
        train_and_evaluate(config, tmp)
        with open(os.path.join(tmp, "summary.json")) as f:
            total = float(json.load(f)["total_time"])
        return total, [r for r in read_metrics(tmp) if "worker_times" in r]


def total_time(config) -> float:
    return timed_run(config)[0]


def aware_job(level: int, controller: str, steps: int, inject: float, fixed: float):
    """The virtual job of `job(level, ...)` with `fixed` seconds charged to every worker's
    step beside its injected wait (cost.overhead, not scaled by the speed)."""
    c = job(level, controller, "virtual", steps, inject)
    c.cost.linear = False  # linear ignores the overhead; fixed_cost 0 and no cliff: affine
    c.cost.overhead = fixed
    return c


def compute_predictions(runs: list[dict], controllers, steps: int) -> dict:
    """{(level, inject, controller): the virtual clock's reduction with the seconds a step
    that the injected wait does not explain (wall_acceptance.unexplained_seconds, the median
    over the static runs of that level and inject) charged to every step}."""
    fixed: dict[tuple[int, float], list[float]] = {}
    for r in runs:
        if r["controller"] == "static" and "unexplained" in r:
            fixed.setdefault((r["level"], r["inject"]), []).append(r["unexplained"])
    out = {}
    for (level, inject), values in sorted(fixed.items()):
        c = float(np.median(values))
        static = total_time(aware_job(level, "static", steps, inject, c))
        for name in controllers:
            out[(level, inject, name)] = (
                1.0 - total_time(aware_job(level, name, steps, inject, c)) / static
            )
    return out


def predictions(levels, injects, controllers, steps: int) -> dict:
    """{(level, inject, controller): reduction the virtual clock predicts against static}."""
    out = {}
    for level in levels:
        for inject in injects:
            static = total_time(job(level, "static", "virtual", steps, inject))
            for c in controllers:
                out[(level, inject, c)] = (
                    1.0 - total_time(job(level, c, "virtual", steps, inject)) / static
                )
    return out


def run_here(run: dict, steps: int) -> dict:
    """The run's wall time (the sum of its steps), the load average right after it, for
    a static run the seconds a step its injected wait does not explain, and what its
    controller did (wall_acceptance.trace: to tell a controller's bad run from a slow
    machine)."""
    level, inject = run["level"], run["inject"]
    seconds, records = timed_run(job(level, run["controller"], "wall", steps, inject))
    out = {**run, "seconds": seconds, "load": list(os.getloadavg())}
    speeds = speeds_by_level([level], steps)[level]
    if run["controller"] == "static":
        out["unexplained"] = wa.unexplained_seconds(records, inject, speeds)
    return {**out, **wa.trace(records, inject, speeds)}


def run_fresh(run: dict, steps: int, cpu_devices: int) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.hetero_wall", "--one"]
    cmd += [f"--levels={run['level']}", f"--injects={run['inject']!r}"]
    cmd += [f"--controllers={run['controller']}", f"--steps={steps}"]
    cmd += [f"--cpu_devices={cpu_devices}"]
    cmd += [f"--set={key}={value!r}" for key, value in SETTINGS.items()]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    measured = json.loads(lines[-1][len(MARK) :])
    return {**run, **measured}


def speeds_by_level(levels, steps: int) -> dict[int, list[float]]:
    from omnilearn_jax.cluster import make_profile

    out = {}
    for level in levels:
        c = job(level, "static", "wall", steps, 0.0)
        profile = make_profile(
            c.hetero, num_workers=c.num_workers, num_steps=steps, steps_per_epoch=1, seed=c.seed
        )
        out[level] = [float(s) for s in profile.speeds(0)]
    return out


def acceptance(args: argparse.Namespace) -> dict:
    """Runs the plan the arguments describe; returns the JSON-able result."""
    levels, injects, controllers = args.levels, args.injects, args.controllers
    modes = ("in-process", "fresh") if args.fresh else ("in-process",)
    plan = wa.schedule(levels, injects, controllers, args.reps, modes)
    speeds = speeds_by_level(levels, args.steps)
    batch = job(levels[0], "static", "wall", args.steps, 0.0).global_batch_size
    # Each cell's static and controllers, once as predicted and once with compute charged
    virtual = 2 * len(levels) * len(injects) * (1 + len(controllers))
    estimate = wa.estimate_seconds(plan, args.steps, speeds, batch)
    estimate += virtual * (wa.IN_PROCESS_START + args.steps * wa.STEP_OVERHEAD)
    print(
        f"[hetero_wall] {len(plan)} wall runs ({', '.join(modes)}) and {virtual} virtual "
        f"runs of {args.steps} steps: about {estimate / 60:.0f} min",
        flush=True,
    )
    if args.dry_run:
        return {"estimate_seconds": estimate, "runs": plan}
    began = time.perf_counter()
    predicted = predictions(levels, injects, controllers, args.steps)
    print(f"[hetero_wall] virtual predictions: {time.perf_counter() - began:.0f} s", flush=True)
    partial = f"{args.json}.partial" if args.json else ""
    setup = {"steps": args.steps, "settings": dict(SETTINGS), "cpu_devices": args.cpu_devices}
    runs = kept_runs(partial, setup, plan)
    if runs:
        print(f"[hetero_wall] {len(runs)} runs kept from {partial}", flush=True)
    for i, run in enumerate(plan, 1):
        if any(_plan_key(r) == _plan_key(run) for r in runs):
            continue
        began = time.perf_counter()
        try:
            if run["mode"] == "fresh":
                done = run_fresh(run, args.steps, args.cpu_devices)
            else:
                done = run_here(run, args.steps)
        except BaseException:
            if partial:
                print(f"[hetero_wall] run {i} failed: {len(runs)} runs kept in {partial}; the "
                      "same command goes on from them", file=sys.stderr, flush=True)  # fmt: skip
            raise
        done["elapsed"] = time.perf_counter() - began  # start-up and compile included
        runs.append(done)
        if partial:
            _write_json(partial, {"setup": setup, "runs": runs})
        print(
            f"[hetero_wall] {i}/{len(plan)} {run['mode']} HL{run['level']} inject "
            f"{run['inject']:g} rep {run['rep']} {run['controller']}: {done['seconds']:.2f} s "
            f"(load {done['load'][0]:.1f}; {done['elapsed']:.0f} s in all)",
            flush=True,
        )
    if partial and os.path.exists(partial):
        os.remove(partial)
    aware = compute_predictions(runs, controllers, args.steps)
    rows = wa.summarise(wa.pair_ratios(runs), predicted, aware)
    return {
        "job": "configs/paper_bsp.py:runlocal,model=cnn, clock=wall, default layout",
        "steps": args.steps,
        "reps": args.reps,
        "modes": list(modes),
        "settings": dict(SETTINGS),
        # The wait after or before each device's compute (hetero.inject_order, engine/step.py)
        "inject_order": job(levels[0], "static", "wall", args.steps, 0.0).hetero.inject_order,
        "estimate_seconds": estimate,
        "predicted": [
            {"level": k[0], "inject": k[1], "controller": k[2], "reduction": v}
            for k, v in predicted.items()
        ],
        "predicted_with_compute": [
            {"level": k[0], "inject": k[1], "controller": k[2], "reduction": v}
            for k, v in aware.items()
        ],
        "runs": runs,
        "cells": rows,
        "passed": wa.passed(rows),
    }


def check_settings(args: argparse.Namespace) -> None:
    """Every job the plan makes passes the trainer's config checks, with `--set`'s values,
    before any run (a mistyped key passed --dry_run and failed the first run, a traceback)."""
    from omnilearn_jax.config.checks import check_config

    for name in ("static", *args.controllers):
        for clock in ("wall", "virtual"):
            try:
                check_config(job(args.levels[0], name, clock, args.steps, args.injects[0]))
            except ValueError as e:
                raise SystemExit(f"hetero_wall: {e}") from None


def _plan_key(run: dict) -> tuple:
    return tuple((k, run.get(k)) for k in ("mode", "level", "inject", "rep", "controller", "pair"))


def _write_json(path: str, value) -> None:
    """`value` as JSON at `path`, replaced whole (a kill mid-write leaves the last copy)."""
    with open(path + ".tmp", "w") as f:
        json.dump(value, f, indent=1)
    os.replace(path + ".tmp", path)


def kept_runs(path: str, setup: dict, plan: list[dict]) -> list[dict]:
    """The runs an earlier call with the same `setup` (steps, settings, devices) saved at
    `path` before it failed or was stopped, those of `plan` whose pair (a controller run and
    its static neighbour) is complete; [] where there is no such file. Another set-up's file
    is refused: its runs would be paired with this one's. Before, a failed run lost every run
    before it (216 in the default grid)."""
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        saved = json.load(f)
    if saved.get("setup") != json.loads(json.dumps(setup)):  # as saved: a tuple is a list
        raise SystemExit(
            f"hetero_wall: {path} holds runs of another set-up ({saved.get('setup')}, this "
            f"one: {setup}); delete it or give another --json"
        )
    planned = {_plan_key(r) for r in plan}
    runs = [r for r in saved["runs"] if _plan_key(r) in planned]

    def pair(r: dict) -> tuple:
        return r["mode"], r["level"], r["inject"], r["rep"], r.get("pair", r["controller"])

    halves = [pair(r) for r in runs]
    return [r for r, p in zip(runs, halves, strict=True) if halves.count(p) == 2]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])  # the sentence
    parser.add_argument("--levels", default="2,4,8")
    parser.add_argument("--injects", default="0.003,0.02", help="seconds a sample at speed 1")
    parser.add_argument("--controllers", default="proportional,pi,predictive")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--fresh", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--json", default="", help="write the result here")
    parser.add_argument("--md", default="", help="write the markdown table here")
    parser.add_argument("--one", action="store_true", help="one wall run; prints one line")
    parser.add_argument("--dry_run", action="store_true", help="print the estimate and stop")
    parser.add_argument("--cpu_devices", type=int, default=8)
    parser.add_argument("--merge", default="", help="join these result files (comma-separated)")
    parser.add_argument("--pool", action="store_true",
                        help="with --merge: a cell in several files pools their runs")  # fmt: skip
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config value for every job, e.g. controller.persist=0")  # fmt: skip
    args = parser.parse_args(argv)
    writable(parser, json=args.json, md=args.md)
    if args.one and (args.dry_run or args.json or args.md or args.merge):  # each was dropped
        parser.error("--one runs one job and prints one line; --dry_run, --json, --md and "
                     "--merge are the grid's")  # fmt: skip
    if args.dry_run and (args.json or args.md or args.merge):  # each was dropped, or run
        parser.error("--dry_run prints the plan and writes nothing; leave out --json, --md "
                     "and --merge")  # fmt: skip
    try:
        args.settings = {k: _value(v) for k, v in (item.split("=", 1) for item in args.set)}
    except ValueError:
        parser.error(f"--set takes KEY=VALUE, got {args.set!r}")
    try:
        args.levels = [int(v) for v in args.levels.split(",")]
        args.injects = [float(v) for v in args.injects.split(",")]
    except ValueError:
        parser.error(f"--levels and --injects take numbers, got {args.levels!r}, {args.injects!r}")
    if bad := sorted(set(args.levels) - set(HL_TABLES["bsp"])):
        parser.error(f"--levels {bad}: the paper's levels are {sorted(HL_TABLES['bsp'])}")
    # 0 is not "no wait": the virtual job reads a per_sample_cost of 0 as "measure this
    # machine's compute", so its prediction answered another question (20.6 % at HL4).
    if bad := [v for v in args.injects if not (math.isfinite(v) and v > 0)]:
        parser.error(f"--injects takes seconds a sample > 0, got {bad}")
    for name, values in (("levels", args.levels), ("injects", args.injects)):
        if len(set(values)) < len(values):  # the plan ran twice, then failed pairing its runs
            parser.error(f"--{name} repeats a value: {values}")
    try:  # zero runs had passed every goal; a typo failed a run in, with a traceback
        args.controllers = controllers.named(args.controllers)
    except ValueError as e:
        parser.error(str(e))
    if "static" in args.controllers and not args.one:
        parser.error("static is the baseline every controller run is paired with")
    if args.reps < 1 or args.steps <= wa.SKIPPED or args.cpu_devices < 1:
        parser.error(
            f"--reps and --cpu_devices must be >= 1 and --steps over {wa.SKIPPED} (a run's "
            f"first {wa.SKIPPED} steps are left out of its median)"
        )
    args.merge = [v for v in args.merge.split(",") if v]
    if args.merge and not args.json:
        parser.error("--merge writes its joined result to --json")
    if args.pool and not args.merge:
        parser.error("--pool pools the runs of --merge's files: give --merge")
    if missing := [p for p in args.merge if not os.path.isfile(p)]:
        parser.error(f"--merge: no such file {missing[0]!r}")
    return args


def _value(text: str):
    """A --set value: a Python literal (0, 0.1, True, 'a') or else the text itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def merged_record(paths, pool: bool = False) -> dict:
    """The file record of `--merge`: the joined result; the machine of the first file with
    the highest load averages of all."""
    records = []
    for path in paths:
        try:
            with open(path) as f:
                record = json.load(f)
            ok = record.get("benchmark") == "hetero_wall" and "cells" in record.get("result", {})
        except (OSError, ValueError, AttributeError):
            ok = False
        if not ok:  # a KeyError traceback before
            raise SystemExit(f"hetero_wall --merge: {path} is not a result of this benchmark")
        records.append(record)
    machine = dict(records[0]["machine"])
    loads = [r["machine"]["load_average"] for r in records]
    machine["load_average"] = [max(column) for column in zip(*loads, strict=True)]
    result = wa.merge([r["result"] for r in records], list(paths), pool=pool)
    return {"benchmark": "hetero_wall", "small": False, "machine": machine, "result": result}


def write(record: dict, args: argparse.Namespace) -> None:
    result = record["result"]
    print(wa.text_table(result["cells"]))
    print(f"[hetero_wall] all goals {'PASS' if result['passed'] else 'FAIL'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=2)
    if args.md:
        with open(args.md, "w") as f:
            f.write(wa.section(result))


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.merge:
        write(merged_record(args.merge, args.pool), args)
        return
    SETTINGS.update(args.settings)
    jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    check_settings(args)
    if args.one:
        run = {"level": args.levels[0], "inject": args.injects[0]}
        done = run_here({**run, "controller": args.controllers[0]}, args.steps)
        keys = ("seconds", "load", "unexplained", *wa.TRACE_KEYS)
        print(MARK + json.dumps({k: done[k] for k in keys if k in done}), flush=True)
        return
    from benchmarks.report import machine

    result = acceptance(args)
    if args.dry_run:
        return
    record = {"benchmark": "hetero_wall", "small": False, "machine": machine()}
    write({**record, "result": result}, args)


if __name__ == "__main__":
    main()
