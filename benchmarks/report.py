"""Runs every benchmark, saves each result as JSON and renders docs/BENCHMARKS.md from them.

    python -m benchmarks.report [--small] [--out docs/benchmarks] [--doc docs/BENCHMARKS.md]
    python -m benchmarks.report --out docs/benchmarks/gpu --doc docs/BENCHMARKS_GPU.md  # on a GPU

One function a measurement, returning a plain dict; each builds what it times and warms it
up (compiles) first, then reports medians or best-of rates, so a busy machine only ever
makes a figure look worse, never better. The scripts' own functions are imported
(step_bench, controller_cost, controller_sim, async_bench), so the numbers are the ones
their command lines print. `--small` shrinks every measurement (CI: checks the pipeline).
A benchmark that fails is recorded with its error and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np

import controllers
from benchmarks.args import writable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def machine() -> dict:
    """Where the numbers come from: platform, cores, JAX version and device kind."""
    devices = jax.devices()
    cpu_model = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu_model = next((ln.split(":", 1)[1].strip() for ln in f if "model name" in ln), "")
    except OSError:
        pass
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    return {
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "usable_cores": affinity or os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else [],
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": devices[0].platform,
        "device_kind": devices[0].device_kind,
        "num_devices": len(devices),
    }


def step_bench(small: bool) -> dict:
    """Block step vs plain homogeneous step; each device's time against its rows."""
    from benchmarks import step_bench as sb

    args = sb.parse_args(["--repeats", "5" if small else "20"])
    apply, params, tx, x, y, shape = sb.setup(args)
    variants = sb.compare_homogeneous(args, apply, params, tx, x, y)
    devices = sb.per_device_times(args, apply, params, tx, x, y)
    base = variants["homogeneous (plain jit)"]
    return {
        "model": args.model,
        "input_shape": list(shape),
        "global_batch": args.batch,
        "repeats": args.repeats,
        "step_seconds": variants,
        "ratio_vs_homogeneous": {k: base / v for k, v in variants.items()},
        "per_device": devices,
    }


def hetero_wall(small: bool) -> dict:
    """Controllers against uniform batches on the wall clock with injected heterogeneity,
    repeated in this process and in fresh ones, beside the virtual clock's prediction
    (benchmarks/hetero_wall.py; --small: one short pair in this process)."""
    from benchmarks import hetero_wall as hw

    small_args = ["--levels=8", "--injects=0.02", "--controllers=proportional", "--reps=1"]
    return hw.acceptance(hw.parse_args([*small_args, "--steps=8", "--no-fresh"] if small else []))


def paper_trainer(
    workdir: str,
    *,
    steps: int,
    controller: str = "static",
    capacity: int = 0,
    warm: bool = True,
    small: bool = False,
):
    """The paper's BSP job (CNN on digits, 4 workers, B = 128, HL8) as a built Trainer;
    `small` (a pipeline check) swaps the CNN for an MLP, which compiles in a fraction of
    the time."""
    from configs import paper_bsp
    from omnilearn_jax.run.train import Trainer

    c = paper_bsp.get_config(f"runlocal,model={'mlp' if small else 'cnn'},controller={controller}")
    if not small:
        c.model.features, c.model.hidden = (16, 32), 64
    # One device a worker where there are enough (CPU: 8 fake devices), else share one.
    c.num_devices = next(d for d in (4, 2, 1) if d <= len(jax.devices()))
    c.train.num_steps = steps
    # `capacity` counts rows a worker's device holds; a device that holds r workers (fewer
    # devices than workers: one GPU) holds r times as many, so the job stays feasible.
    # 0: the trainer's default, min(B, workers a device x b_max).
    c.capacity = capacity * (c.num_workers // c.num_devices)
    trainer = Trainer(c, workdir)
    if warm:
        trainer.compile_variants()  # every bucket program, as the loop does at warm-up
    return trainer


def compile_count(small: bool) -> dict:
    """XLA compilations while the split changes every step, after the warm-up (every
    bucket program compiled, then one step)."""
    from omnilearn_jax.engine.compiles import CompileCounter

    steps = 10 if small else 40
    with tempfile.TemporaryDirectory() as tmp:
        trainer = paper_trainer(tmp, steps=steps + 1, warm=False, small=small)
        w, b = trainer.config.num_workers, trainer.config.global_batch_size
        rng = np.random.default_rng(0)
        speeds = trainer.timer.speeds(0)

        def one_step(t: int, sizes: np.ndarray) -> None:
            batch = trainer.batch(t, sizes)
            trainer.state, metrics, _ = trainer.timer.train_step(
                trainer.engine.steps, trainer.state, batch, t, sizes, speeds
            )
            jax.block_until_ready(metrics)

        with CompileCounter() as warm:  # the loop's warm-up: every program, then a step
            trainer.compile_variants()
            one_step(0, np.asarray(trainer.safe_sizes(np.ones(w), speeds, 0)))
        splits = set()
        with CompileCounter() as after:
            for t in range(1, steps + 1):
                sizes = np.asarray(trainer.safe_sizes(rng.dirichlet(np.ones(w)) * b, speeds, t))
                splits.add(tuple(int(s) for s in sizes))
                one_step(t, sizes)
    return {
        "steps": steps,
        "distinct_splits": len(splits),
        "compiles_first_step": warm.count,
        "compiles_after_warmup": after.count,
    }


def controller_cost(small: bool) -> dict:
    """One controller decision (observe, jitted update, allocation) as a fraction of a step."""
    from benchmarks.controller_cost import measure
    from configs import default

    out = {}
    for name in controllers.BUILT_IN:
        config = default.get_config()
        config.controller.name = name
        step_s, decide_s = measure(config, 10 if small else 40)
        out[name] = {"step_s": step_s, "decision_s": decide_s, "fraction": decide_s / step_s}
    # interleaved: each decision timed right after a step (controller_cost._median_times)
    return {"config": "configs/default.py", "controllers": out, "interleaved": True}


def controller_sim(small: bool) -> dict:
    """Controller-only simulation steps per second inside lax.scan (8 workers, B = 128)."""
    from benchmarks.controller_sim import bench_plant, steps_per_second

    steps, workers, batch = (5_000 if small else 100_000), 8, 128
    plant = bench_plant(workers, steps)
    # --small: two controllers (each one's scan compiles for seconds; the pipeline is the check)
    names = ("static", "proportional") if small else controllers.BUILT_IN
    rates = {n: steps_per_second(n, plant, batch, steps) for n in names}
    return {"workers": workers, "global_batch": batch, "steps": steps, "steps_per_s": rates}


def _plain_loop(trainer):
    """A plain homogeneous Flax/optax loop on the trainer's model, optimiser and batches:
    one jitted step over the global batch sharded on the same devices, no masks, no
    controller, no clock. Returns run(first_step, n) -> seconds."""
    import optax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from omnilearn_jax import models

    c = trainer.config
    ds = trainer.dataset
    apply, params = models.create(c.model, ds.input_shape, ds.num_classes, c.seed)
    tx = trainer.tx
    mesh = trainer.engine.placement.mesh
    sharding = NamedSharding(mesh, P("data"))
    state = [jax.device_put((params, tx.init(params)), NamedSharding(mesh, P()))]

    def train(carry, x, y):
        p, opt = carry

        def loss_fn(p):
            logits = apply(p, x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grad = jax.value_and_grad(loss_fn)(p)
        updates, opt = tx.update(grad, opt, p)
        return (optax.apply_updates(p, updates), opt), loss

    step = jax.jit(train, donate_argnums=0)

    def run(first: int, n: int) -> float:
        start = time.perf_counter()
        loss = None
        for t in range(first, first + n):
            rows = trainer.sampler.indices(t)
            x = jax.device_put(ds.x_train[rows], sharding)
            y = jax.device_put(ds.y_train[rows], sharding)
            state[0], loss = step(state[0], x, y)
        jax.block_until_ready((state[0], loss))
        return time.perf_counter() - start

    return run


def _trainer_loop(trainer, workdir: str):
    """The trainer's own loop body (loop.Loop.step: layout, jitted step, virtual clock,
    controller, allocation) with its logging to the run store every log_every steps."""
    from omnilearn_jax.run.loop import Loop
    from omnilearn_jax.run.runlog import RunLog

    loop = Loop(trainer)
    w, b = trainer.config.num_workers, trainer.config.global_batch_size
    cstate = jax.jit(trainer.controller.init, static_argnums=(0, 1))(w, b)
    carry = [
        cstate,
        trainer.safe_sizes(controllers.initial_sizes(cstate, w, b), trainer.timer.speeds(0), 0),
    ]
    log = RunLog(workdir, is_main=True, tracker=None)
    every = trainer.config.train.log_every

    def run(first: int, n: int) -> float:
        start = time.perf_counter()
        for t in range(first, first + n):
            carry[0], carry[1] = loop.step(t, carry[0], carry[1])
            if (t + 1) % every == 0:
                loop.flush(log, wait=False)  # as the trainer's loop does between evaluations
        loop.flush(log)
        jax.block_until_ready(trainer.state)
        return time.perf_counter() - start

    return run


def _compare_loops(trainer, workdir: str, n: int, rounds: int, warm: int) -> dict:
    """Best-block steps/s of the trainer's loop and of the plain loop, blocks alternating
    (so machine load hits both alike); the median over rounds of the ratio of a round's
    two blocks (plain time / trainer time: the figure least moved by a slow minute); and
    each loop's median host CPU a step (the calling thread's CPU time, `time.thread_time`):
    on a CPU backend the host's work takes cores from the devices' compute, and this figure
    moves far less with the machine than the wall clock does."""
    ours, plain = _trainer_loop(trainer, workdir), _plain_loop(trainer)
    ours(0, warm), plain(0, warm)  # compile and warm up both
    wall: dict = {"ours": [], "plain": []}
    cpu: dict = {"ours": [], "plain": []}
    at = warm
    for _ in range(rounds):
        for name, loop in (("ours", ours), ("plain", plain)):
            start = time.thread_time()
            wall[name].append(loop(at, n))
            cpu[name].append((time.thread_time() - start) / n)
        at += n
    return {
        "trainer_steps_per_s": n / min(wall["ours"]),
        "plain_steps_per_s": n / min(wall["plain"]),
        "ratio_paired_median": float(np.median(np.array(wall["plain"]) / np.array(wall["ours"]))),
        "trainer_host_cpu_ms_per_step": 1e3 * float(np.median(cpu["ours"])),
        "plain_host_cpu_ms_per_step": 1e3 * float(np.median(cpu["plain"])),
    }


def end_to_end(small: bool) -> dict:
    """Steps per second of the trainer's loop (static uniform split, virtual clock) against
    a plain homogeneous Flax/optax loop on the same model, optimiser and batches.

    `capacity` is the most rows a worker's device may hold: 96 (= b_max) is the paper job's
    default. Each device computes only its block (the smallest bucket holding its rows), so
    room for uneven splits costs nothing while the split is uniform: 32 rows a device either
    way (on fewer devices than workers, as one GPU, the capacities scale with the workers a
    device holds and bind no more: the two cases differ in their buckets only)."""
    n, rounds, warm = (10, 2, 3) if small else (40, 10, 5)
    total = warm + rounds * n + 1
    out: dict = {"steps_per_block": n, "blocks": rounds, "by_capacity": {}}
    cases = (("96", 96),) if small else (("32", 32), ("96", 96))
    for label, capacity in cases:
        with tempfile.TemporaryDirectory() as tmp:
            trainer = paper_trainer(tmp, steps=2 * total, capacity=capacity, small=small)
            got = _compare_loops(trainer, tmp, n, rounds, warm)
        ours, plain = got["trainer_steps_per_s"], got["plain_steps_per_s"]
        out["by_capacity"][label] = {
            **got,
            "ratio": ours / plain,
            "overhead_ms_per_step": 1e3 * (1 / ours - 1 / plain),
            "buckets": list(trainer.layout.buckets),
        }
    c = trainer.config
    out.update(
        job=(
            "configs/paper_bsp.py:runlocal,model=mlp (--small check), static uniform, HL8"
            if small
            else "configs/paper_bsp.py:runlocal,model=cnn (features 16,32), static uniform, HL8"
        ),
        workers=c.num_workers,
        devices=trainer.layout.num_devices,
        global_batch=c.global_batch_size,
    )
    return out


def async_vs_bsp(small: bool) -> dict:
    """An async round and loop body against a BSP step and loop body of the same work, on
    the virtual clock (batched execution) and the wall clock (benchmarks/async_bench.py)."""
    from benchmarks.async_bench import measure

    args = argparse.Namespace(
        workers=4,
        batch=128,
        model="cnn",
        rounds=5 if small else 10,
        blocks=3 if small else 7,
        loop_steps=5 if small else 10,
        clocks="virtual,wall",
    )
    return {"workers": 4, "batch": 128, "model": "cnn", "blocks": args.blocks, **measure(args)}


def _timed_run(cmd: list[str], workdir: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    env["PYTHONUNBUFFERED"] = "1"
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stdout[-500:]}")
    with open(os.path.join(workdir, "summary.json")) as f:
        summary = json.load(f)
    return {"wall_s": wall, "loop_wall_s": summary["wall_time"]}


def multiprocess(small: bool) -> dict:
    """The same short run as 1 process x 8 CPU devices and as 2 processes x 4 (launcher)."""
    if jax.default_backend() != "cpu":  # the launcher splits CPU devices between processes
        return {"skipped": f"CPU only; this machine's backend is {jax.default_backend()}"}
    steps = 20 if small else 60
    args = ["--config=configs/smoke.py", f"--config.train.num_steps={steps}"]
    with tempfile.TemporaryDirectory() as tmp:
        one, two = os.path.join(tmp, "one"), os.path.join(tmp, "two")
        py = sys.executable
        r1 = _timed_run([py, "-m", "omnilearn_jax.main", *args, f"--workdir={one}"], one)
        launch = [py, "-m", "omnilearn_jax.launch", "--num_processes=2", "--"]
        r2 = _timed_run([*launch, *args, f"--workdir={two}"], two)
    return {
        "job": f"configs/smoke.py (MLP on digits, 8 workers, B = 64), {steps} steps",
        "one_process": r1,
        "two_processes": r2,
        "wall_ratio": r2["wall_s"] / r1["wall_s"],
        "loop_ratio": r2["loop_wall_s"] / r1["loop_wall_s"],
    }


def step_overhead(small: bool) -> dict:
    """An uneven and a uniform step against their busiest device's compute, on the wall
    clock (benchmarks/step_overhead.py)."""
    from benchmarks import step_overhead as so

    return so.measure((16, 16, 16, 80), 12 if small else 200, 1 if small else 3)


def multiprocess_step(small: bool) -> dict:
    """1 process x 2 devices against 2 processes x 1 device, unpinned and one core each
    (benchmarks/multiprocess_step.py)."""
    if jax.default_backend() != "cpu":  # the launcher splits CPU devices between processes
        return {"skipped": f"CPU only; this machine's backend is {jax.default_backend()}"}
    from benchmarks import multiprocess_step as ms

    return ms.measure(20 if small else 200, 1 if small else 3)


def collective_cost(small: bool) -> dict:
    """One cross-process all-reduce on CPU, unpinned, pinned and under quotas
    (benchmarks/collective_cost.py)."""
    if jax.default_backend() != "cpu":  # two processes of one CPU device each
        return {"skipped": f"CPU only; this machine's backend is {jax.default_backend()}"}
    from benchmarks import collective_cost as cc

    return cc.measure((64,) if small else (1, 64, 4096, 65536), 20 if small else 200)


# --small runs only these (each a few seconds), enough to exercise every stage of the report.
SMALL = ("compiles", "controller_sim", "end_to_end")

BENCHMARKS = {
    "step": step_bench,
    "hetero_wall": hetero_wall,
    "compiles": compile_count,
    "controller_cost": controller_cost,
    "controller_sim": controller_sim,
    "end_to_end": end_to_end,
    "async": async_vs_bsp,
    "multiprocess": multiprocess,
    "step_overhead": step_overhead,
    "multiprocess_step": multiprocess_step,
    "collective_cost": collective_cost,
}


def _good(path: str) -> bool:
    """Whether `path` holds a benchmark's result (not an error record)."""
    try:
        with open(path) as f:
            return "error" not in json.load(f)
    except (OSError, ValueError):
        return False


def run_one(name: str, small: bool) -> dict:
    start = time.perf_counter()
    record: dict = {"benchmark": name, "small": small, "machine": machine()}
    try:
        record["result"] = BENCHMARKS[name](small)
    except Exception as e:  # noqa: BLE001 - one failing benchmark must not lose the others
        record["error"] = f"{type(e).__name__}: {e}"
    record["seconds"] = time.perf_counter() - start
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default="", help="folder for the JSON results (default docs/benchmarks; "
        "with --small, runs/benchmarks_small: a pipeline check leaves the committed ones alone)"
    )  # fmt: skip
    parser.add_argument("--doc", default="", help="markdown to write (default beside --out's)")
    parser.add_argument("--small", action="store_true", help="tiny sizes: check the pipeline")
    parser.add_argument(
        "--only", default="", help="comma-separated subset of " + ",".join(BENCHMARKS)
    )
    parser.add_argument("--cpu_devices", type=int, default=8)
    args = parser.parse_args(argv)
    writable(parser, doc=args.doc)
    # The committed results only when neither --small nor another --out says otherwise.
    committed = not (args.small or args.out)
    args.out = args.out or ("docs/benchmarks" if committed else "runs/benchmarks_small")
    args.doc = args.doc or (
        "docs/BENCHMARKS.md" if committed else os.path.join(args.out, "BENCHMARKS.md")
    )
    names = [n for n in args.only.split(",") if n] or list(SMALL if args.small else BENCHMARKS)
    if args.only and not args.only.strip(", "):  # --only=$UNSET: not "every benchmark"
        parser.error("--only names no benchmark; valid: " + ", ".join(BENCHMARKS))
    if args.cpu_devices < 1:
        parser.error(f"--cpu_devices must be >= 1, got {args.cpu_devices}")
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; valid: {', '.join(BENCHMARKS)}")
    jax.config.update("jax_num_cpu_devices", args.cpu_devices)  # before any JAX operation
    from experiments.paper import stamp

    stamped = stamp.stamp()  # the tree before this command writes into it (not "dirty")
    os.makedirs(args.out, exist_ok=True)
    failed = []
    for name in names:
        print(f"[report] {name} ...", flush=True)
        record = run_one(name, args.small)
        path = os.path.join(args.out, f"{name}.json")
        failure = os.path.join(args.out, f"{name}.failed.json")
        if "error" in record and _good(path):  # keep the last good result, said so in the doc
            path = failure
        elif os.path.exists(failure):  # this run's result replaces the one it stood in for
            os.remove(failure)
        with open(path, "w") as f:
            json.dump(record, f, indent=2)
        status = record.get("error", "ok")
        if path.endswith(".failed.json"):
            status += f" (the last good result is kept; this failure is in {path})"
        print(f"[report] {name}: {status} ({record['seconds']:.1f} s)", flush=True)
        if "error" in record:
            failed.append(name)
    from experiments.paper.bench_doc import render

    with open(args.doc, "w") as f:
        f.write(render(args.out, stamped))
    print(f"[report] wrote {args.doc} from {args.out}/*.json")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
