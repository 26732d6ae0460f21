"""Reproduces the paper's results and regenerates docs/RESULTS.md and docs/BENCHMARKS.md.

    python -m experiments.paper.reproduce [--workdir runs/paper] [--parallel 2]   # make report
    python -m experiments.paper.reproduce --small                                 # CI check

1. Runs the paper ablations of this folder with the ablation runner (experiments.ablate),
   each into WORKDIR/<name>/; a rerun finishes only missing cells.
2. Runs the benchmarks (`python -m benchmarks.report`) into BENCH_DIR/*.json and renders
   BENCHMARKS.md from them.
3. Runs the studies that have generators of their own (STUDIES; `--skip_study` leaves some
   as they are): the tuned async study (experiments/async_fair.py, its runs appended to
   WORKDIR/async_fair/async_fair.jsonl, so a rerun resumes), the controllers on held-out
   plant families (benchmarks/controller_heldout_seeds.py) and the predictive trainer
   confirmation (configs/ablation_curves.py with and without a memory limit, 5 seeds each,
   into WORKDIR/abl_curves*; a rerun finishes only missing cells); the single held-out
   family (benchmarks/controller_heldout.py), the async staleness table
   (experiments/async_staleness.py) and the cost-curve simulation with the trainer runs
   above (experiments/curves/ablate.py), each rerun whole (ONE_SHOT: minutes each); the
   GPT on the formula and on its measured curve (configs/ablation_lm.py, BSP and async,
   into WORKDIR/lm*/<mode>; a rerun finishes only missing cells; experiments/lm_results.py).
   Each writes its JSON and its document under DOCS/results/, stamped with this command's
   commit.
4. Writes RESULTS.md (tables, discussion, sources), its figures and WORKDIR/results.json
   from the run directories alone.

At full size `--only=NAME,...` runs the named parts and no benchmarks, and an existing
RESULTS.md is rewritten only where every ablation has a finished cell in WORKDIR (else it is
left as it is, and the command names what is missing: rendered from a fresh clone's empty
WORKDIR it lost its tables); BENCHMARKS.md is rendered again only where its JSON changed.

Every part's wall time goes to WORKDIR/timings.json. The stamp (experiments/paper/stamp.py)
is the tree's at the start, for every part: what one part writes into docs/ does not make the
next one's tree dirty. The quota study (experiments/real_hetero.py, measured on the wall
clock under root cgroups) is not rerun: RESULTS.md splices its committed document.

`--small` shrinks every ablation (one seed, a few steps, an MLP for the CNN; ResNet-18
skipped) and every benchmark (an MLP, the compilation cache kept), runs none of the studies
(each takes minutes to 40 min; no shrunk form says anything) but renders their documents
from the committed JSON, and writes everything, documents included, into a temporary
directory (or --workdir): it checks the pipeline, not the numbers. All cells share a JAX persistent
compilation cache (WORKDIR/.jax_cache, or one in the temp folder for --small): the cells
compile the same few programs, and compiling dominates a short CPU run. It changes no number.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

from experiments import ablate
from experiments.paper import stamp
from experiments.paper.fmt import REPO, rel
from experiments.paper.results_doc import ABLATIONS, STUDIES

SKIP_SMALL = ("resnet", "resnet_curve")  # compiling ResNet-18 alone exceeds the CI budget
# STUDIES: the studies make report runs after the ablations and the benchmarks, in this order
# (the predictive document reads the held-out JSON and the trainer JSON: written last).
ASYNC_FAIR = ("--budget", "8", "--seeds", "5")  # experiments/async_fair.py's study
HELDOUT = ("--seeds", "6,7,8,9,10", "--plants", "96", "--tune-plants", "48")
TRAINER = ("seeds=5", "limit=64,seeds=5")  # configs/ablation_curves.py overrides
TRAINER_DIRS = ("abl_curves", "abl_curves_limit64")
# The studies whose generator writes its document and JSON in one command (a rerun redoes it
# whole; each takes minutes), and how --small renders it from the committed JSON alone.
ONE_SHOT = {
    "controller_heldout": (
        ("benchmarks.controller_heldout", "--tune-plants", "48", "--plants", "96", "--write"),
        ("--out", "--doc"),
    ),
    "async_staleness": (
        ("experiments.async_staleness", "--updates", "400", "--settle", "200"),
        ("--data", "--out"),
    ),
    "cost_curves": (("experiments.curves.ablate", "--steps", "50"), ("--data", "--out")),
}
LM = "configs/ablation_lm.py"
LM_CONTROLLERS = {
    "lm": "static+proportional+pi+oracle+predictive",
    "lm_curve": "static+proportional+oracle",
}
GPT_CURVE = "data/curves/cpu_gpt_text.json"
LM_OVERRIDES = {  # the ablation_lm.py variant of each mode (lm_curve: async budget 0.3 s)
    "lm": {"bsp": "", "asp": ""},
    "lm_curve": {"bsp": f",curve={GPT_CURVE}", "asp": f",curve={GPT_CURVE},budget=0.3"},
}
LM_NOTES = {
    "lm": "",
    "lm_curve": (
        "The study of lm.md (same model, data, optimizer, 300 BSP steps, 3 seeds, HL4 and HL8) "
        f"with the virtual clock charging the GPT's own measured CPU cost curve {GPT_CURVE} "
        "instead of the formula (0.05 + 0.01 b) / cores; controllers static, proportional and "
        "oracle. On this curve a step takes milliseconds, not tenths of a second, so the "
        "async budget is 0.3 s of virtual time, about as many updates of uniform batching as "
        "lm.md's 8 s under the formula. "
    ),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="CI: tiny runs, output to a temp dir")
    p.add_argument("--workdir", default="", help="run directories (default runs/paper)")
    p.add_argument("--docs", default="", help="where RESULTS.md/BENCHMARKS.md go (default docs)")
    p.add_argument("--parallel", type=int, default=2, help="cells at once (ablation runner)")
    p.add_argument(
        "--only",
        default="",
        help="comma-separated ablations and studies to run (default: all of both); at full "
        "size no benchmarks run with it",
    )
    p.add_argument("--skip_bench", action="store_true", help="keep the benchmark JSON as is")
    p.add_argument(
        "--skip_study",
        default="",
        help=f"comma-separated studies to keep as committed ({', '.join(STUDIES)}; 'all')",
    )
    p.add_argument("--jax_cache", default="", help="persistent compilation cache directory")
    p.add_argument(
        "--docs_only",
        action="store_true",
        help="only rewrite RESULTS.md and its figures from existing runs (and timings.json)",
    )
    args = p.parse_args(argv)
    if args.small:
        args.workdir = args.workdir or tempfile.mkdtemp(prefix="omnilearn_paper_small_")
        args.docs = args.docs or args.workdir
        args.jax_cache = args.jax_cache or os.path.join(
            tempfile.gettempdir(), "omnilearn_jax_cache"
        )
    else:
        args.workdir = args.workdir or os.path.join(REPO, "runs", "paper")
        args.docs = args.docs or os.path.join(REPO, "docs")
        args.jax_cache = args.jax_cache or os.path.join(args.workdir, ".jax_cache")
    only = [n for n in args.only.split(",") if n]
    if args.only and not only:  # --only=$UNSET: not "every part" (hours of runs)
        p.error(f"--only names no part; valid: {', '.join([*ABLATIONS, *STUDIES])}")
    if args.parallel < 1:  # was left to each ablation, after the studies' start
        p.error(f"--parallel must be >= 1, got {args.parallel}")
    unknown = sorted(set(only) - set(ABLATIONS) - set(STUDIES))
    if unknown:
        p.error(f"unknown part(s) {unknown}; valid: {', '.join([*ABLATIONS, *STUDIES])}")
    names = [n for n in only if n in ABLATIONS] if only else list(ABLATIONS)
    args.names = [n for n in names if not (args.small and n in SKIP_SMALL)]
    skip = [n for n in args.skip_study.split(",") if n]
    skip = list(STUDIES) if skip == ["all"] else skip
    if set(skip) - set(STUDIES):
        p.error(f"unknown study(s) {sorted(set(skip) - set(STUDIES))}; valid: {list(STUDIES)}")
    # --only names the parts to run: an --only without a study runs none.
    args.studies = [n for n in STUDIES if n not in skip and (not only or n in only)]
    if only and not args.names and not args.studies:  # it said "done" having run nothing
        p.error(f"--only {args.only} with --skip_study {args.skip_study} leaves nothing to run")
    return args


def use_compilation_cache(path: str) -> None:
    """Every cell inherits these (the runner copies os.environ); cache every compilation."""
    os.makedirs(path, exist_ok=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = path
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"


def run_ablations(args: argparse.Namespace) -> tuple[dict[str, float], list[str]]:
    timings, failed = {}, []
    for name in args.names:
        config = os.path.join("experiments", "paper", f"{name}.py") + (
            ":small" if args.small else ""
        )
        start, began = time.perf_counter(), time.time()
        code = ablate.main(
            [
                f"--config={config}",
                f"--workdir={os.path.join(args.workdir, name)}",
                f"--parallel={args.parallel}",
            ]
        )
        timings[name] = time.perf_counter() - start
        stamp_if_ran(os.path.join(args.workdir, name), began)
        print(f"[reproduce] {name}: exit {code}, {timings[name]:.0f} s", flush=True)
        if code:
            failed.append(name)
    return timings, failed


def stamp_if_ran(workdir: str, since: float) -> bool:
    """Write WORKDIR/stamp.json, the commit an ablation's cells last ran at (export.py and
    RESULTS.md's Sources quote it), only where a cell finished at or after `since` (epoch
    seconds): a resumed run that found every cell complete ran none, and the stamp of the
    commit that did stays. Returns whether it wrote one."""
    finished = glob.glob(os.path.join(workdir, "*", "summary.json"))
    if not any(os.path.getmtime(path) >= since for path in finished):
        return False
    with open(os.path.join(workdir, "stamp.json"), "w") as f:
        json.dump(stamp.stamp(), f)
    return True


def child_env() -> dict[str, str]:
    """This environment for a part run as a command of its own: each part sets its own CPU
    device count, and a forced count inherited from a test environment would fight it."""
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f]
    env["XLA_FLAGS"] = " ".join(flags)
    return env


def run_benchmarks(args: argparse.Namespace, bench_dir: str, doc: str) -> int:
    cmd = [sys.executable, "-m", "benchmarks.report", f"--out={bench_dir}", f"--doc={doc}"]
    env = child_env()
    if not args.small:  # a full report measures compiling too; --small checks the pipeline
        env = {k: v for k, v in env.items() if not k.startswith("JAX_PERSISTENT_CACHE")}
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
    return subprocess.call(cmd + (["--small"] if args.small else []), cwd=REPO, env=env)


def module(name: str, *argv: str) -> list[str]:
    return [sys.executable, "-m", name, *argv]


def study_commands(name: str, args: argparse.Namespace) -> list[list[str]]:
    """The commands of one study, in order: its runs (none under --small: the committed JSON
    stands in), then the document from its JSON."""
    results = os.path.join(args.docs, "results")
    committed = os.path.join(REPO, "docs", "results")
    data = committed if args.small else results  # --small reads the committed JSON
    out = os.path.join(args.workdir, name)
    if name == "async_fair":
        jsonl = os.path.join(out, "async_fair.jsonl")
        run = module("experiments.async_fair", f"--out={jsonl}", *ASYNC_FAIR)
        doc = module(
            "experiments.async_fair_doc",
            f"--data={os.path.join(data, 'async_fair.json')}",
            f"--out={os.path.join(results, 'async_fair.md')}",
            f"--figure={os.path.join(args.docs, 'figures', 'async_fair_curves.png')}",
        )
        if args.small:
            return [doc]
        said = " ".join(["python -m experiments.async_fair", f"--out={rel(jsonl)}", *ASYNC_FAIR])
        run.append(f"--workdir={os.path.join(out, 'runs')}")
        return [run, doc + [f"--runs={jsonl}", f"--command={said}"]]
    if name in ONE_SHOT:
        return one_shot(name, args, data, results)
    if name in LM_NOTES:
        return lm_commands(name, args, data, results)
    predictive = module(
        "experiments.predictive_study",
        f"--heldout={os.path.join(data, 'controller_heldout_seeds.json')}",
        f"--trainer={os.path.join(data, 'predictive_trainer.json')}",
        f"--out={os.path.join(results, 'predictive_seeds.md')}",
    )
    if args.small:
        return [predictive] if name == "predictive_trainer" else []
    if name == "heldout":
        heldout = os.path.join(results, "controller_heldout_seeds.json")
        run = module("benchmarks.controller_heldout_seeds", *HELDOUT, f"--out={heldout}")
        # the predictive document also reads the trainer's JSON: written once, by the later
        return [run] if "predictive_trainer" in args.studies else [run, predictive]
    dirs = [os.path.join(args.workdir, d) for d in TRAINER_DIRS]
    runs = [
        module(
            "experiments.ablate",
            f"--config=configs/ablation_curves.py:{over}",
            f"--workdir={d}",
            f"--parallel={args.parallel}",
        )
        for over, d in zip(TRAINER, dirs, strict=True)
    ]
    said = "; ".join("python -m " + " ".join(r[2:]) for r in runs).replace(
        args.workdir, rel(args.workdir)
    )
    collect = module(
        "experiments.predictive_trainer",
        f"--runs={','.join(dirs)}",
        f"--out={os.path.join(results, 'predictive_trainer.json')}",
        f"--note=Runs: `{said}` (`make report`, part predictive_trainer).",
    )
    return [*runs, collect, predictive]


def one_shot(name: str, args: argparse.Namespace, data: str, results: str) -> list[list[str]]:
    """A generator that writes its JSON and document at once (--small: --render the
    committed JSON); cost_curves also tabulates the predictive_trainer study's runs."""
    (mod, *argv), (json_flag, doc_flag) = ONE_SHOT[name]
    json_file, doc_file = STUDIES[name]
    doc = f"{doc_flag}={os.path.join(results, doc_file)}"
    if args.small:
        return [module(mod, f"--render={os.path.join(data, json_file)}", doc)]
    if name == "cost_curves":
        argv.append(
            "--trainer_runs=" + ",".join(rel(os.path.join(args.workdir, d)) for d in TRAINER_DIRS)
        )
    return [module(mod, *argv, f"{json_flag}={os.path.join(results, json_file)}", doc)]


def lm_commands(name: str, args: argparse.Namespace, data: str, results: str) -> list[list[str]]:
    """The two LM ablations (BSP and async, into WORKDIR/<name>/<mode>; a rerun finishes only
    missing cells), then experiments/lm_results.py over them (--small: --render the JSON)."""
    json_file, doc_file = STUDIES[name]
    out = [f"--out={os.path.join(results, doc_file)}"]
    if args.small:
        return [module("experiments.lm_results", f"--render={os.path.join(data, json_file)}", *out)]
    dirs = {mode: rel(os.path.join(args.workdir, name, mode)) for mode in ("bsp", "asp")}
    runs = [
        module(
            "experiments.ablate",
            f"--config={LM}:mode={mode},controllers={LM_CONTROLLERS[name]}{LM_OVERRIDES[name][mode]}",
            f"--workdir={d}",
            f"--parallel={args.parallel}",
        )
        for mode, d in dirs.items()
    ]
    said = "; ".join("python -m " + " ".join(r[2:]) for r in runs)
    note = LM_NOTES[name] + (
        f"Runs: `{said}` (`make report`, part {name}); docs/results/{json_file} holds every "
        "run's eval curve."
    )
    collect = module(
        "experiments.lm_results",
        f"--bsp={dirs['bsp']}",
        f"--asp={dirs['asp']}",
        *out,
        f"--data={os.path.join(results, json_file)}",
        f"--note={note}",
    )
    return [*runs, collect]


def run_studies(args: argparse.Namespace) -> tuple[dict[str, float], list[str]]:
    """Each study's commands in turn (a study stops at its first failing command)."""
    env = child_env()
    for sub in ("results", "figures"):
        os.makedirs(os.path.join(args.docs, sub), exist_ok=True)
    timings, failed = {}, []
    for name in args.studies:
        start = time.perf_counter()
        commands = study_commands(name, args)
        if args.small and not commands:
            print(f"[reproduce] study {name}: not run under --small (no shrunk form)")
            continue
        code = 0
        for cmd in commands:
            print(f"[reproduce] study {name}: {' '.join(cmd[1:])}", flush=True)
            os.makedirs(os.path.join(args.workdir, name), exist_ok=True)
            began = time.time()
            code = subprocess.call(cmd, cwd=REPO, env=env)
            if cmd[2] == "experiments.ablate":
                workdir = next(a.split("=", 1)[1] for a in cmd if a.startswith("--workdir="))
                stamp_if_ran(workdir, began)
            if code:
                break
        timings[name] = time.perf_counter() - start
        print(f"[reproduce] study {name}: exit {code}, {timings[name]:.0f} s", flush=True)
        if code:
            failed.append(name)
    return timings, failed


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.chdir(REPO)  # the ablation configs are found by their repository paths
    os.makedirs(args.workdir, exist_ok=True)
    os.makedirs(args.docs, exist_ok=True)
    stamp.pin()  # every part, and the documents, stamped with the tree as it is now
    if args.docs_only:
        return write_docs(args, read_timings(args.workdir))
    use_compilation_cache(args.jax_cache)
    print(f"[reproduce] ablations {', '.join(args.names)} -> {args.workdir}", flush=True)
    timings, failed = run_ablations(args)
    bench_dir = os.path.join(args.docs, "benchmarks")
    bench_doc = os.path.join(args.docs, "BENCHMARKS.md")
    # A full-size --only runs the parts it names and no benchmarks (they would rewrite the
    # committed JSON, some of it pooled over runs, for an hour and more); --small checks the
    # whole pipeline in a temporary folder, benchmarks included.
    if not (args.skip_bench or (args.only and not args.small)):
        t0 = time.perf_counter()
        if run_benchmarks(args, bench_dir, bench_doc):
            failed.append("benchmarks")
        timings["benchmarks"] = time.perf_counter() - t0
    study_timings, study_failed = run_studies(args)
    timings.update(study_timings)
    failed += study_failed
    # A partial rerun (--only) updates its parts; the total is the sum of the parts' latest
    # wall times, so it stays the cost of the whole command.
    timings = {**read_timings(args.workdir), **timings}
    timings["total"] = sum(v for k, v in timings.items() if k != "total")
    with open(os.path.join(args.workdir, "timings.json"), "w") as f:
        json.dump(timings, f, indent=1)
    write_docs(args, timings)
    print(f"[reproduce] done in {timings['total'] / 60:.1f} min")
    if failed:
        print(f"[reproduce] FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def read_timings(workdir: str) -> dict[str, float]:
    try:
        with open(os.path.join(workdir, "timings.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def missing_runs(args: argparse.Namespace) -> list[str]:
    """The ablations RESULTS.md is built from without a finished cell here (a cell's
    summary.json beside its metrics.jsonl, the run store the tables and figures read: an
    ablation's manifest is written before any cell runs, and a cell holding a summary alone
    had passed, then the figures ended the command in a FileNotFoundError). None under
    --small, whose document, in a temporary folder, shows the parts it ran."""
    if args.small:
        return []

    def finished(name: str) -> bool:
        summaries = glob.glob(os.path.join(args.workdir, name, "*", "summary.json"))
        return any(
            os.path.isfile(os.path.join(os.path.dirname(s), "metrics.jsonl")) for s in summaries
        )

    return [n for n in ABLATIONS if not finished(n)]


def write_docs(args: argparse.Namespace, timings: dict[str, float]) -> int:
    """RESULTS.md, its figures, the per-seed JSON (DOCS/results/paper/) and
    WORKDIR/results.json from the run directories alone; BENCHMARKS.md rendered again from
    the benchmark JSON (stamped with this commit, whether or not the benchmarks ran)."""
    from experiments.paper import bench_doc, figures, results_doc

    stamped = stamp.stamp()  # before the figures and files below change the tree
    doc = os.path.join(args.docs, "RESULTS.md")
    bench_dir = os.path.join(args.docs, "benchmarks")
    missing = missing_runs(args) if os.path.exists(doc) else []
    if missing:  # rendered from these runs alone, RESULTS.md would lose their tables
        print(
            f"[reproduce] {doc} left as it is: {args.workdir} has no runs of "
            f"{', '.join(missing)} (run them, or the whole command, to write it)",
            flush=True,
        )
    else:
        made = figures.make_figures(args.workdir, os.path.join(args.docs, "figures"), args.docs)
        results_doc.write(args.workdir, doc, made, bench_dir, timings, stamped)
        print(f"[reproduce] wrote {doc}")
    # BENCHMARKS.md again only where its JSON may have changed: a run that measured nothing
    # (--docs_only, a full-size --only) would only move its stamp to this commit.
    if os.path.isdir(bench_dir) and (args.small or stamp.changed_since(bench_dir)):
        with open(os.path.join(args.docs, "BENCHMARKS.md"), "w") as f:
            f.write(bench_doc.render(bench_dir, stamped))
    return 1 if missing and args.docs_only else 0


if __name__ == "__main__":
    sys.exit(main())
