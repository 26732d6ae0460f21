"""Reproduces the paper's results and regenerates docs/RESULTS.md and docs/BENCHMARKS.md.

    python -m experiments.paper.reproduce [--workdir runs/paper] [--parallel 2]   # make report
    python -m experiments.paper.reproduce --small                                 # CI check

1. Runs the paper ablations of this folder with the ablation runner (experiments.ablate),
   each into WORKDIR/<name>/; a rerun finishes only missing cells.
2. Runs the benchmarks (`python -m benchmarks.report`) into BENCH_DIR/*.json and renders
   BENCHMARKS.md from them.
3. Writes RESULTS.md (tables, discussion, sources), its figures and WORKDIR/results.json
   from the run directories alone.

`--small` shrinks every ablation (one seed, a few steps, an MLP for the CNN; ResNet-18
skipped) and every benchmark (an MLP, the compilation cache kept), and writes everything,
documents included, into a temporary directory (or --workdir): it checks the pipeline, not
the numbers. All cells share a JAX persistent
compilation cache (WORKDIR/.jax_cache, or one in the temp folder for --small): the cells
compile the same few programs, and compiling dominates a short CPU run. It changes no number.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from experiments import ablate
from experiments.paper import stamp
from experiments.paper.fmt import REPO
from experiments.paper.results_doc import ABLATIONS

SKIP_SMALL = ("resnet", "resnet_curve")  # compiling ResNet-18 alone exceeds the CI budget


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="CI: tiny runs, output to a temp dir")
    p.add_argument("--workdir", default="", help="run directories (default runs/paper)")
    p.add_argument("--docs", default="", help="where RESULTS.md/BENCHMARKS.md go (default docs)")
    p.add_argument("--parallel", type=int, default=2, help="cells at once (ablation runner)")
    p.add_argument("--only", default="", help="comma-separated ablations (default: all)")
    p.add_argument("--skip_bench", action="store_true", help="keep the benchmark JSON as is")
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
    names = [n for n in args.only.split(",") if n] or list(ABLATIONS)
    unknown = sorted(set(names) - set(ABLATIONS))
    if unknown:
        p.error(f"unknown ablation(s) {unknown}; valid: {', '.join(ABLATIONS)}")
    args.names = [n for n in names if not (args.small and n in SKIP_SMALL)]
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
        start = time.perf_counter()
        code = ablate.main(
            [
                f"--config={config}",
                f"--workdir={os.path.join(args.workdir, name)}",
                f"--parallel={args.parallel}",
            ]
        )
        timings[name] = time.perf_counter() - start
        os.makedirs(os.path.join(args.workdir, name), exist_ok=True)
        with open(os.path.join(args.workdir, name, "stamp.json"), "w") as f:
            json.dump(stamp.stamp(), f)  # the commit its cells last ran at (export.py)
        print(f"[reproduce] {name}: exit {code}, {timings[name]:.0f} s", flush=True)
        if code:
            failed.append(name)
    return timings, failed


def run_benchmarks(args: argparse.Namespace, bench_dir: str, doc: str) -> int:
    cmd = [sys.executable, "-m", "benchmarks.report", f"--out={bench_dir}", f"--doc={doc}"]
    env = dict(os.environ)
    if not args.small:  # a full report measures compiling too; --small checks the pipeline
        env = {k: v for k, v in env.items() if not k.startswith("JAX_PERSISTENT_CACHE")}
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
    # The report sets its own CPU device count; a forced count inherited from a test
    # environment would fight it.
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f]
    env["XLA_FLAGS"] = " ".join(flags)
    return subprocess.call(cmd + (["--small"] if args.small else []), cwd=REPO, env=env)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.chdir(REPO)  # the ablation configs are found by their repository paths
    os.makedirs(args.workdir, exist_ok=True)
    os.makedirs(args.docs, exist_ok=True)
    if args.docs_only:
        return write_docs(args, read_timings(args.workdir))
    use_compilation_cache(args.jax_cache)
    print(f"[reproduce] ablations {', '.join(args.names)} -> {args.workdir}", flush=True)
    timings, failed = run_ablations(args)
    bench_dir = os.path.join(args.docs, "benchmarks")
    bench_doc = os.path.join(args.docs, "BENCHMARKS.md")
    if not args.skip_bench:
        t0 = time.perf_counter()
        if run_benchmarks(args, bench_dir, bench_doc):
            failed.append("benchmarks")
        timings["benchmarks"] = time.perf_counter() - t0
    # A partial rerun (--only) updates its parts; the total is the sum of the parts' latest
    # wall times, so it stays the cost of the whole command.
    timings = {**read_timings(args.workdir), **timings}
    timings["total"] = sum(v for k, v in timings.items() if k != "total")
    with open(os.path.join(args.workdir, "timings.json"), "w") as f:
        json.dump(timings, f, indent=1)
    write_docs(args, timings)
    print(f"[reproduce] wrote RESULTS.md and {bench_doc} in {timings['total'] / 60:.1f} min")
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


def write_docs(args: argparse.Namespace, timings: dict[str, float]) -> int:
    """RESULTS.md, its figures, the per-seed JSON (DOCS/results/paper/) and
    WORKDIR/results.json from the run directories alone; BENCHMARKS.md rendered again from
    the benchmark JSON (stamped with this commit, whether or not the benchmarks ran)."""
    from experiments.paper import bench_doc, figures, results_doc

    stamped = stamp.stamp()  # before the figures and files below change the tree
    made = figures.make_figures(args.workdir, os.path.join(args.docs, "figures"), args.docs)
    doc = os.path.join(args.docs, "RESULTS.md")
    bench_dir = os.path.join(args.docs, "benchmarks")
    results_doc.write(args.workdir, doc, made, bench_dir, timings, stamped)
    print(f"[reproduce] wrote {doc}")
    if os.path.isdir(bench_dir):
        with open(os.path.join(args.docs, "BENCHMARKS.md"), "w") as f:
            f.write(bench_doc.render(bench_dir, stamped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
