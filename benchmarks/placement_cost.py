"""What placing a shared-bucket step's inputs costs: whole arrays against device by device.

    python -m benchmarks.placement_cost [--devices 4] [--rows 32] [--reps 300] [--rounds 5]

The paper job's uniform split (configs/paper_bsp.py: CNN on 28x28x1 digits, 4 devices of 32
rows): `Placement.blocks` of one step as the trainer calls it (masks already placed), once
placing each field whole over the data axis (`Placement.whole`, one transfer a field) and
once device by device (the path every other split takes) followed by assembling the mesh
inputs (`Steps.assemble`, what a shared-bucket step did before). Each variant runs `--reps`
times a round, alternated over `--rounds` rounds in this process, inputs ready before the
clock stops; printed: the median microseconds of each (median over rounds of each round's
median) and their ratio, with the load average. Measured on this machine's CPU (fake
devices); no step is run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from benchmarks.args import at_least


def measure(devices: int, rows: int, reps: int, rounds: int) -> dict:
    import jax
    import numpy as np

    from omnilearn_jax.engine import buckets
    from omnilearn_jax.engine.mesh import Placement
    from omnilearn_jax.models import create

    placement = Placement("shard_map", jax.devices()[:devices])
    apply, _ = create({"name": "mlp", "hidden": 8}, (4,), 10, 0)
    steps = placement.steps(apply, None, chunk=rows)
    layout = buckets.make_layout(num_workers=devices, num_devices=devices, capacity=rows)
    blocks = buckets.pack(np.full(devices, rows), layout, placement.local_positions)
    rng = np.random.default_rng(0)
    xs = [rng.random((rows, 28, 28, 1), dtype=np.float32) for _ in blocks]
    ys = [np.zeros(rows, np.int32) for _ in blocks]
    where = [placement.devices[b.position] for b in blocks]
    masks = jax.device_put([b.mask[None] for b in blocks], where)  # as the engine keeps them

    def whole():
        return placement.blocks(blocks, xs, ys, masks, None, rows).whole

    def one_by_one():
        placed = placement.blocks(blocks, xs, ys, masks, None, 0)
        return [
            steps.assemble([f(b) for b in placed])
            for f in (lambda b: b.x, lambda b: b.y, lambda b: b.mask)
        ]

    variants = {"whole": whole, "device_by_device": one_by_one}
    medians: dict[str, list[float]] = {name: [] for name in variants}
    for f in variants.values():  # warm-up: first transfers and shardings
        jax.block_until_ready(f())
    for _ in range(rounds):
        for name, f in variants.items():
            times = []
            for _ in range(reps):
                start = time.perf_counter()
                jax.block_until_ready(f())
                times.append(time.perf_counter() - start)
            medians[name].append(statistics.median(times))
    us = {name: 1e6 * statistics.median(m) for name, m in medians.items()}
    return {
        **{f"{name}_us": v for name, v in us.items()},
        "whole_over_device_by_device": us["whole"] / us["device_by_device"],
        "load": os.getloadavg()[0],
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    at_least(parser, reps=(args.reps, 1), rounds=(args.rounds, 1), devices=(args.devices, 1))
    at_least(parser, rows=(args.rows, 1))
    import jax

    jax.config.update("jax_num_cpu_devices", max(8, args.devices))  # before any JAX work
    r = measure(args.devices, args.rows, args.reps, args.rounds)
    print(
        f"placing a shared-bucket step ({args.devices} devices x {args.rows} rows of 28x28x1): "
        f"whole {r['whole_us']:.0f} us, device by device and assembled "
        f"{r['device_by_device_us']:.0f} us, ratio {r['whole_over_device_by_device']:.3f} "
        f"(load {r['load']:.1f})"
    )


if __name__ == "__main__":
    main()
