"""How much an asynchronous round costs against a BSP step of the same work.

    python -m benchmarks.async_bench [--workers 4] [--batch 128] [--rounds 10]
        [--clocks virtual,wall] [--json PATH] [--md PATH]

Same model, data and devices, measured side by side in one process, after compilation, on
each clock (`clock=virtual`: the schedule runs in batches, asp/batched.py; `clock=wall`: each
worker's gradient on its own device, dispatched concurrently and timed):

1. the round: a BSP step computes all W workers' batches (B samples) and applies one update;
   an async round applies W updates (each worker's batch computed from its own pulled
   version, as `asp.AsyncLoop` runs them). Blocks of rounds alternate between the two so
   machine load hits both alike; the best block of each is kept.
2. the loop: the one runner's loop body (`advance` of `loop.Loop` and `asp.AsyncLoop`:
   layout, compute, clock, controller, records flushed to a run store), n BSP steps against
   n * W async updates, blocks alternating, best block kept.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import tempfile
import time

import jax
import numpy as np

from benchmarks.args import at_least, model_name, writable


def config(mode: str, args, steps: int, clock: str = "virtual"):
    from configs import smoke

    c = smoke.get_config()
    c.clock = clock
    c.num_workers = c.num_devices = args.workers
    c.global_batch_size = args.batch
    c.model.name = args.model
    c.mode = mode
    c.controller.name = "static"  # uniform: the same work in both modes
    c.train.num_steps = steps
    c.train.eval_every = c.train.log_every = c.train.checkpoint_every = 10**6
    c.optimizer.momentum = 0.0
    return c


def build(mode: str, args, clock: str = "virtual"):
    from omnilearn_jax.run.train import Trainer

    trainer = Trainer(config(mode, args, 10**6, clock), tempfile.mkdtemp(prefix="async_bench_"))
    trainer.compile_variants()  # every bucket program, as the loops do at warm-up
    return trainer


def bsp_rounds(trainer):
    w, b = trainer.config.num_workers, trainer.config.global_batch_size
    sizes = np.full(w, b // w)
    at = [0]

    def run(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            batch = trainer.batch(at[0], sizes)
            trainer.state, metrics = trainer.engine.steps.train(trainer.state, batch)
            at[0] += 1
        jax.block_until_ready((trainer.state, metrics))
        return (time.perf_counter() - start) / n

    return run


def async_rounds(trainer):
    from omnilearn_jax.asp.loop import AsyncLoop

    loop = AsyncLoop(trainer)
    w, b = trainer.config.num_workers, trainer.config.global_batch_size
    sizes = np.full(w, b // w)
    loop.warm_up(sizes)

    def run(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n * w):
            loop.start_ready(sizes)
            loop.apply_next()
        jax.block_until_ready(loop.server_state())
        return (time.perf_counter() - start) / n

    return run


def time_bsp(trainer, rounds: int) -> float:
    """Seconds of one BSP step, mean of `rounds` after a warm one (benchmarks/report.py)."""
    run = bsp_rounds(trainer)
    run(1)
    return run(rounds)


def time_async(trainer, rounds: int) -> float:
    """Seconds of one async round of W updates, likewise."""
    run = async_rounds(trainer)
    run(1)
    return run(rounds)


def side_by_side(bsp, asp, blocks: int, n: int) -> tuple[float, float]:
    """Best block of each, blocks alternating so that machine load hits both alike."""
    bsp(2), asp(2)  # warm
    t_bsp, t_asp = [], []
    for _ in range(blocks):
        t_bsp.append(bsp(n))
        t_asp.append(asp(n))
    return min(t_bsp), min(t_asp)


def rounds(args, clock: str = "virtual") -> tuple[float, float]:
    bsp, asp = bsp_rounds(build("bsp", args, clock)), async_rounds(build("asp", args, clock))
    return side_by_side(bsp, asp, args.blocks, args.rounds)


def _runner_body(mode: str, args, clock: str = "virtual"):
    """n steps' worth of the runner's own loop body (`advance`: layout, compute, clock,
    controller, records), flushed to a run store every 20 records."""
    import controllers
    from omnilearn_jax.asp.loop import AsyncLoop
    from omnilearn_jax.run.loop import Loop
    from omnilearn_jax.run.runlog import RunLog
    from omnilearn_jax.run.train import Trainer

    workdir = tempfile.mkdtemp(prefix=f"async_bench_{mode}_")
    trainer = Trainer(config(mode, args, 10**6, clock), workdir)
    runner = (AsyncLoop if mode == "asp" else Loop)(trainer)
    w, b = args.workers, args.batch
    cstate = jax.jit(trainer.controller.init, static_argnums=(0, 1))(w, b)
    sizes = trainer.safe_sizes(controllers.initial_sizes(cstate, w, b), trainer.timer.speeds(0), 0)
    runner.warm_up(sizes)
    log = RunLog(workdir, is_main=True, tracker=None)
    carry = [cstate, sizes]
    per_step = w if mode == "asp" else 1

    def run(n: int) -> float:
        start = time.perf_counter()
        for i in range(n * per_step):
            carry[0], carry[1] = runner.advance(carry[0], carry[1])
            if (i + 1) % 20 == 0:
                runner.flush(log)
        runner.flush(log)
        runner.sync()
        jax.block_until_ready(trainer.state)
        return (time.perf_counter() - start) / n

    return run


def loops(args, clock: str = "virtual") -> tuple[float, float]:
    bsp, asp = _runner_body("bsp", args, clock), _runner_body("asp", args, clock)
    return side_by_side(bsp, asp, args.blocks, args.loop_steps)


def measure(args) -> dict:
    """Per clock: BSP step and async round, BSP and async loop body (seconds), and ratios."""
    out = {}
    for clock in args.clocks.split(","):
        bsp, asp = rounds(args, clock)
        loop_bsp, loop_asp = loops(args, clock)
        out[clock] = {
            "bsp_step_s": bsp,
            "async_round_s": asp,
            "ratio": asp / bsp,
            "bsp_loop_per_step_s": loop_bsp,
            "async_loop_per_round_s": loop_asp,
            "loop_ratio": loop_asp / loop_bsp,
        }
    return out


def table(results: dict) -> str:
    """The results as a Markdown table, one row per clock and measurement."""
    rows = ["| clock | what | BSP (ms) | async (ms) | async / BSP |", "|---|---|---|---|---|"]
    for clock, r in results.items():
        rows.append(
            f"| {clock} | step vs round (B samples) | {r['bsp_step_s'] * 1e3:.2f} | "
            f"{r['async_round_s'] * 1e3:.2f} | {r['ratio']:.2f}x |"
        )
        rows.append(
            f"| {clock} | loop body, per B samples | {r['bsp_loop_per_step_s'] * 1e3:.2f} | "
            f"{r['async_loop_per_round_s'] * 1e3:.2f} | {r['loop_ratio']:.2f}x |"
        )
    return "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--loop-steps", type=int, default=10)
    parser.add_argument("--clocks", default="virtual,wall")
    parser.add_argument("--json", default="", help="also write the results here")
    parser.add_argument("--md", default="", help="and a short Markdown report here")
    args = parser.parse_args()
    writable(parser, json=args.json, md=args.md)
    at_least(
        parser,
        rounds=(args.rounds, 1),
        blocks=(args.blocks, 1),
        loop_steps=(args.loop_steps, 1),
        workers=(args.workers, 1),
        batch=(args.batch, 1),
    )
    model_name(parser, args.model, images=True)
    if args.batch < args.workers:  # uniform batches left a worker no rows, and the async
        # loop stopped after ~30 CPU-s of compiling: "no worker can start at update 0"
        parser.error(f"--batch ({args.batch}) must be >= --workers ({args.workers}): every "
                     "worker computes, a row at least")  # fmt: skip
    if bad := sorted(set(args.clocks.split(",")) - {"virtual", "wall"}):
        parser.error(f"--clocks takes virtual and/or wall, got {bad}")
    jax.config.update("jax_num_cpu_devices", max(args.workers, 8))
    load_before = os.getloadavg()[0]
    results = measure(args)
    machine = (
        f"{platform.machine()} {os.cpu_count()} cores, {jax.devices()[0].platform}, "
        f"load {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(f"machine: {machine}; {args.model} on digits, W={args.workers}, B={args.batch}")
    print(table(results))
    if args.md:
        command = "python -m benchmarks.async_bench " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k not in ("json", "md")
        )
        with open(args.md, "w") as f:
            f.write(
                f"# Async round against a BSP step\n\n`{command}`, "
                f"{datetime.date.today().isoformat()}, {machine}; {args.model} on digits, "
                f"W={args.workers}, B={args.batch}. Best of {args.blocks} alternating blocks "
                f"each. Goal: async / BSP at most 1.3x in every row.\n\n" + table(results)
            )
    if args.json:
        with open(args.json, "w") as f:
            record = {
                "benchmark": "async_round",
                "date": datetime.date.today().isoformat(),
                "machine": machine,
                "args": vars(args),
                "clocks": results,
            }
            json.dump(record, f, indent=2)


if __name__ == "__main__":
    main()
