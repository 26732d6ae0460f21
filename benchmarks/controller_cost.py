"""The cost of one controller decision in the training loop, as a fraction of a step.

    python -m benchmarks.controller_cost [--config configs/default.py] [--steps 40]

Builds the default job's trainer and times, side by side, (a) one training step as the loop
runs it (batch layout, transfer, jitted step, virtual clock) and (b) one controller decision
as the loop runs it (observation with the oracle's time table, jitted `update`, the
framework's allocation and checks), for every registered controller. Medians after warm-up.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import time

import jax
import numpy as np

import controllers
from benchmarks.args import at_least, existing


def _median_times(fns, repeats: int) -> list[float]:
    """Median seconds of each of `fns`, timed in turn within each repeat: side by side, so a
    change of the machine's load reaches both (timed in two blocks, the same step was 7-16 ms
    across controllers, and each fraction divided two moments)."""
    samples = [[] for _ in fns]
    for _ in range(repeats):
        for fn, out in zip(fns, samples, strict=True):
            start = time.perf_counter()
            jax.block_until_ready(fn())
            out.append(time.perf_counter() - start)
    return [float(np.median(x)) for x in samples]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/default.py")
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    at_least(parser, steps=(args.steps, 1))
    existing(parser, config=args.config)  # a FileNotFoundError traceback before
    spec = importlib.util.spec_from_file_location("bench_config", args.config)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.get_config()
    jax.config.update("jax_num_cpu_devices", config.cpu_devices)
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cores, {jax.devices()[0].platform} "
        f"x{len(jax.devices())}; config {args.config}"
    )
    for name in controllers.available():
        config.controller.name = name
        step_time, decide_time = measure(config, args.steps)
        print(
            f"{name:>13}: step {step_time * 1e3:7.2f} ms, decision {decide_time * 1e3:6.3f} "
            f"ms = {decide_time / step_time:6.2%} of a step"
        )


def measure(config, steps: int) -> tuple[float, float]:
    """Median seconds of one training step and of one controller decision."""
    from omnilearn_jax.run.train import Trainer

    trainer = Trainer(config, "/tmp/omnilearn_controller_cost_unused")
    trainer.compile_variants()  # every bucket program, as the loop does at warm-up
    w, b = config.num_workers, config.global_batch_size
    cstate = trainer.controller.init(w, b)
    speeds = trainer.timer.speeds(0)
    sizes = trainer.safe_sizes(controllers.initial_sizes(cstate, w, b), speeds, 0)
    counter = iter(range(10**9))

    def train_step():
        t = next(counter)
        trainer.state, metrics, _ = trainer.timer.train_step(
            trainer.engine.steps, trainer.state, trainer.batch(t, sizes), t, sizes, speeds
        )
        # the update too: its dispatch returns before it is done, and the decision timed
        # next would wait for it
        return trainer.state, metrics

    def decide():
        obs = trainer.observe(0, sizes, np.full(w, 0.1), speeds)
        return trainer.next_sizes(cstate, obs)[0]

    _median_times([train_step, decide], 3)  # compile and warm up
    step, decision = _median_times([train_step, decide], steps)
    return step, decision


if __name__ == "__main__":
    main()
