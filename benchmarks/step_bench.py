"""Masked uneven steps against a plain homogeneous step, and step time against trip count.

    python -m benchmarks.step_bench [--model cnn] [--batch 256] [--repeats 30]

Prints, measured side by side in one run (interleaved, medians):
1. speed ratio = homogeneous unmasked step time / masked step time, for the same global
   batch, when the layout's capacity equals the largest per-device batch (goal >= 0.95);
2. step time against the number of micro-batches one device runs: it must grow with the
   trip count, which is what lets a device with fewer samples finish sooner.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from omnilearn_jax import masking, models
from omnilearn_jax.mesh import Placement
from omnilearn_jax.step import TrainState


def _timed(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return times


def homogeneous_step(apply, tx, mesh):
    """The plain data-parallel step: jit over a batch sharded on the data axis, no masks."""

    def train(state, x, y):
        def loss_fn(p):
            return optax.softmax_cross_entropy_with_integer_labels(apply(p, x), y).mean()

        loss, grad = jax.value_and_grad(loss_fn)(state.params)
        updates, opt_state = tx.update(grad, state.opt_state, state.params)
        return TrainState(
            state.step + 1, optax.apply_updates(state.params, updates), opt_state
        ), loss

    return jax.jit(train, donate_argnums=0), NamedSharding(mesh, P("data"))


def masked_runner(placement, steps, layout, x, y, sizes, state):
    packed = masking.pack_indices(np.asarray(sizes), layout)
    xs, ys = masking.gather(x, y, packed)
    batch = placement.batch({"x": xs, "y": ys, "mask": packed.mask, "trips": packed.trips})
    holder = [state]

    def run():
        holder[0], metrics = steps.train(holder[0], batch)
        return metrics

    return run


def fresh_state(placement, params, tx):
    params = jax.tree.map(jnp.array, params)
    return placement.replicate(TrainState(jnp.zeros((), jnp.int32), params, tx.init(params)))


def compare_homogeneous(args, apply, params, tx, x, y) -> dict[str, float]:
    """Prints the comparison; returns the median step time (s) of each variant."""
    devices = jax.devices()
    d, b = len(devices), args.batch
    placement = Placement("shard_map", devices)
    homo, sharding = homogeneous_step(apply, tx, placement.mesh)
    hx, hy = jax.device_put(x[:b], sharding), jax.device_put(y[:b], sharding)
    hstate = [fresh_state(placement, params, tx)]

    def run_homo():
        hstate[0], loss = homo(hstate[0], hx, hy)
        return loss

    sizes_uniform = np.full(d, b // d)
    skew = np.array([b // d + (k % 2) * 2 - 1 for k in range(d)])
    skew[-1] += b - skew.sum()
    runners = {"homogeneous (plain jit)": run_homo}
    for name, sizes in (("uniform", sizes_uniform), ("uneven", skew)):
        cap = int(sizes.max())
        for kind in ("padded", "micro"):
            layout = masking.make_layout(
                kind,
                num_workers=d,
                num_devices=d,
                capacity=cap,
                micro_batch=cap if kind == "padded" else args.micro,
            )
            steps = placement.steps(apply, tx)
            runners[f"masked {kind:6s} {name} (capacity {cap})"] = masked_runner(
                placement, steps, layout, x[:b], y[:b], sizes, fresh_state(placement, params, tx)
            )
    for run in runners.values():  # compile and warm up
        for _ in range(3):
            jax.block_until_ready(run())
    samples = {k: [] for k in runners}
    for _ in range(args.repeats):  # interleaved, so machine noise hits every variant alike
        for k, run in runners.items():
            samples[k] += _timed(run, 1)
    base = np.median(samples["homogeneous (plain jit)"])
    print(
        f"\n1. global batch {b} on {d} devices; median step time over {args.repeats} "
        f"interleaved repeats; ratio = homogeneous / this (goal >= 0.95)"
    )
    for k, v in samples.items():
        med = np.median(v)
        print(f"   {k:42s} {med * 1e3:8.2f} ms   ratio {base / med:5.3f}")
    return {k: float(np.median(v)) for k, v in samples.items()}


def trip_count_scan(args, apply, params, tx, x, y) -> dict[int, float]:
    """Prints the scan; returns the median step time (s) for each micro-batch trip count."""
    device = jax.devices()[:1]
    placement = Placement("shard_map", device)
    m, kmax = args.micro, args.max_trips
    layout = masking.make_layout(
        "micro", num_workers=1, num_devices=1, capacity=m * kmax, micro_batch=m
    )
    steps = placement.steps(apply, tx)
    runners = {
        k: masked_runner(
            placement,
            steps,
            layout,
            x[: k * m],
            y[: k * m],
            [k * m],
            fresh_state(placement, params, tx),
        )
        for k in range(1, kmax + 1)
    }
    for run in runners.values():
        jax.block_until_ready(run())
    samples = {k: [] for k in runners}
    for _ in range(args.repeats):
        for k, run in runners.items():
            samples[k] += _timed(run, 1)
    print(f"\n2. one device, micro-batch {m}, capacity {m * kmax} rows (same compiled step)")
    t1 = np.median(samples[1])
    for k, v in samples.items():
        med = np.median(v)
        print(
            f"   {k:2d} micro-batches ({k * m:4d} rows): {med * 1e3:8.2f} ms  "
            f"({med / t1:4.2f}x one micro-batch)"
        )
    return {k: float(np.median(v)) for k, v in samples.items()}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--micro", type=int, default=16)
    parser.add_argument("--max_trips", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--cpu_devices", type=int, default=8)
    return parser.parse_args(argv)


def setup(args: argparse.Namespace):
    """Model, optimiser and random data of the benchmark: (apply, params, tx, x, y, shape)."""
    rng = np.random.default_rng(0)
    shape = (16, 16, 3)
    x = rng.standard_normal(
        (max(args.batch, args.micro * args.max_trips), *shape), dtype=np.float32
    )
    y = rng.integers(0, 10, len(x)).astype(np.int32)
    apply, params = models.create(
        {"name": args.model, "features": (16, 32), "hidden": 64}, shape, 10, 0
    )
    tx = optax.sgd(0.01, momentum=0.9)
    return apply, params, tx, x, y, shape


def main() -> None:
    args = parse_args()
    jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    apply, params, tx, x, y, shape = setup(args)
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cores, {jax.devices()[0].platform} "
        f"x{len(jax.devices())} ({jax.devices()[0].device_kind}), jax {jax.__version__}; "
        f"model {args.model} on inputs {shape}"
    )
    compare_homogeneous(args, apply, params, tx, x, y)
    trip_count_scan(args, apply, params, tx, x, y)


if __name__ == "__main__":
    main()
