"""How much slower an asynchronous update is than a BSP step of the same work.

    python -m benchmarks.async_bench [--workers 4] [--batch 128] [--rounds 30]

Same model, data and devices. A BSP step computes all W workers' batches and applies one
update; an async round applies W updates (one per worker, each computed from its own pulled
version). Prints the wall time of a BSP step and of W async updates, and their ratio, measured
side by side after compilation.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import jax
import numpy as np


def build(mode: str, args):
    from configs import smoke
    from omnilearn_jax.train import Trainer

    c = smoke.get_config()
    c.num_workers = c.num_devices = args.workers
    c.global_batch_size = args.batch
    c.model.name = args.model
    c.mode = mode
    c.train.num_steps = 10**6
    trainer = Trainer(c, "/tmp/omnilearn_async_bench_unused")
    trainer.compile_variants()  # every bucket program, as the loops do at warm-up
    return trainer


def time_bsp(trainer, rounds: int) -> float:
    sizes = np.full(
        trainer.config.num_workers, trainer.config.global_batch_size // trainer.config.num_workers
    )
    samples = []
    for t in range(rounds + 2):
        start = time.perf_counter()
        batch = trainer.batch(t, sizes)
        trainer.state, metrics = trainer.steps.train(trainer.state, batch)
        jax.block_until_ready(metrics)
        samples.append(time.perf_counter() - start)
    return float(np.median(samples[2:]))


def time_async(trainer, rounds: int) -> float:
    from omnilearn_jax.asp import AsyncLoop

    loop = AsyncLoop(trainer)
    w = trainer.config.num_workers
    sizes = np.full(w, trainer.config.global_batch_size // w)
    samples = []
    for _ in range(rounds + 2):
        start = time.perf_counter()
        for _ in range(w):
            loop.start_ready(sizes)
            loop.apply_next()
        jax.block_until_ready(trainer.state.params)
        samples.append(time.perf_counter() - start)
    return float(np.median(samples[2:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    jax.config.update("jax_num_cpu_devices", max(args.workers, 8))
    bsp = time_bsp(build("bsp", args), args.rounds)
    asp = time_async(build("asp", args), args.rounds)
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cores, {jax.devices()[0].platform}; "
        f"{args.model} on digits, W={args.workers}, B={args.batch}"
    )
    print(f"BSP step (W batches, 1 update):       {bsp * 1e3:8.2f} ms")
    print(f"async round (W batches, W updates):   {asp * 1e3:8.2f} ms")
    print(f"async / BSP for the same work:        {asp / bsp:8.2f}x")


if __name__ == "__main__":
    main()
