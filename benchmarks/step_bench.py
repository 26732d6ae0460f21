"""The per-device block step against a plain homogeneous step, and each device's time
against the rows it holds.

    python -m benchmarks.step_bench [--model cnn] [--batch 128] [--repeats 20]

Prints, measured side by side in one run (interleaved, medians):
1. speed ratio = plain homogeneous step time / block step time, for the same global batch
   on the same devices, with a uniform split (goal >= 0.95), and the same for a split where
   one device holds most of the batch (its block is bigger, so the step takes longer);
2. each device's compute time (from its own launch until its sums are ready) for a split
   where one device holds 25 times the rows of each other one, beside the ideal ratio.
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

from benchmarks.args import at_least, model_name
from omnilearn_jax import models
from omnilearn_jax.engine import buckets
from omnilearn_jax.engine.mesh import Placement
from omnilearn_jax.engine.step import TrainState


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


def fresh_state(placement, params, tx):
    params = jax.tree.map(jnp.array, params)
    return placement.replicate(TrainState(jnp.zeros((), jnp.int32), params, tx.init(params)))


def block_steps(apply, params, tx, x, batch: int, placement=None):
    """The trainer's steps with every bucket compiled, and its layout for `batch` rows."""
    devices = jax.devices()
    placement = placement or Placement("shard_map", devices)
    layout = buckets.make_layout(num_workers=len(devices), num_devices=len(devices), capacity=batch)
    steps = placement.steps(apply, tx, chunk=layout.chunk)
    state = fresh_state(placement, params, tx)
    steps.compile(state, x[:1], layout.buckets, buckets.uniform_bucket(batch, layout))
    return placement, steps, layout


def skewed_split(batch: int, d: int) -> np.ndarray:
    """One device holds 25 times the rows of each other one (when the batch allows)."""
    small = max(batch // (d - 1 + 25), 1)
    sizes = np.full(d, small)
    sizes[-1] = batch - small * (d - 1)
    return sizes


def compare_homogeneous(args, apply, params, tx, x, y) -> dict[str, float]:
    """Prints the comparison; returns the median step time (s) of each variant."""
    d, b = len(jax.devices()), args.batch
    placement, steps, layout = block_steps(apply, params, tx, x, b)
    homo, sharding = homogeneous_step(apply, tx, placement.mesh)
    hx, hy = jax.device_put(x[:b], sharding), jax.device_put(y[:b], sharding)
    holders = {}

    def plain():
        holders["plain"], loss = homo(holders["plain"], hx, hy)
        return loss

    def ours(name, blocks):
        def run():
            holders[name], metrics = steps.train(holders[name], blocks)
            return metrics["loss"]

        return run

    uniform = np.full(d, b // d)
    uniform[: b % d] += 1
    runners = {
        "homogeneous (plain jit)": plain,
        "blocks, uniform split": ours("uniform", placement.split(layout, uniform, x[:b], y[:b])),
    }
    if d > 1:  # on one device (one GPU) a skewed split is the uniform one
        skewed = placement.split(layout, skewed_split(b, d), x[:b], y[:b])
        runners["blocks, skewed split"] = ours("skewed", skewed)
    for name in ("plain", "uniform", "skewed"):
        holders[name] = fresh_state(placement, params, tx)
    for run in runners.values():  # compile and warm up
        jax.block_until_ready(run())
    samples = {k: [] for k in runners}
    for _ in range(args.repeats):
        for k, run in runners.items():
            start = time.perf_counter()
            jax.block_until_ready(run())
            samples[k].append(time.perf_counter() - start)
    med = {k: float(np.median(v)) for k, v in samples.items()}
    base = med["homogeneous (plain jit)"]
    print(f"\n1. global batch {b} on {d} devices (inputs already placed; medians)")
    for k, v in med.items():
        print(f"   {k:26s} {v * 1e3:8.2f} ms   speed ratio {base / v:5.3f}")
    return med


def per_device_times(args, apply, params, tx, x, y) -> dict:
    """Each device's compute time for the skewed split (median over repeats)."""
    d, b = len(jax.devices()), args.batch
    if d < 2:  # one GPU: no device can hold more rows than another
        print("\n2. per-device compute time: skipped, it needs 2 devices or more")
        return {"skipped": f"{d} device: per-device times need 2 devices or more"}
    placement, steps, layout = block_steps(apply, params, tx, x, b)
    sizes = skewed_split(b, d)
    blocks = placement.split(layout, sizes, x[:b], y[:b])
    state = fresh_state(placement, params, tx)
    samples = []
    for i in range(args.repeats + 2):
        stacked, times = steps.run_local(state.params, blocks, timed=True)
        state, metrics = steps.finish(state, stacked)
        jax.block_until_ready(metrics)
        if i >= 2:  # the first two warm up (compile the finish)
            samples.append(times)
    med = np.median(samples, axis=0)
    rows = [b.rows for b in blocks]
    print(f"\n2. per-device compute time, split {sizes.tolist()} (medians of {args.repeats})")
    for k in range(d):
        print(
            f"   device {k}: {int(sizes[k]):4d} rows, bucket {rows[k]:4d}: "
            f"{med[k] * 1e3:8.2f} ms ({med[k] / med[0]:5.2f}x device 0)"
        )
    others = float(np.median(med[:-1]))  # the light devices' typical time
    print(
        f"   busiest / median of the others: {med[-1] / others:.2f}x measured; "
        f"{sizes[-1] / sizes[0]:.0f}x the rows, {rows[-1] / rows[0]:.0f}x the rows computed"
    )
    return {
        "sizes": sizes.tolist(),
        "buckets": rows,
        "device_seconds": med.tolist(),
        "ratio_busiest_to_others": float(med[-1] / others),
        "ideal_rows_ratio": float(sizes[-1] / sizes[0]),
        "computed_rows_ratio": float(rows[-1] / rows[0]),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cpu_devices", type=int, default=8)
    args = parser.parse_args(argv)
    at_least(parser, repeats=(args.repeats, 1), batch=(args.batch, 1))
    if args.cpu_devices < 1:  # JAX's "Unable to initialize backend 'cpu'" traceback
        parser.error(f"--cpu_devices must be >= 1, got {args.cpu_devices}")
    if args.batch % args.cpu_devices:  # a sharding error after building and compiling
        parser.error(
            f"--batch {args.batch} must be a multiple of --cpu_devices {args.cpu_devices} (the "
            "plain step splits it evenly over the devices)"
        )
    model_name(parser, args.model, images=True)
    return args


def setup(args: argparse.Namespace):
    """Model, optimiser and random data of the benchmark: (apply, params, tx, x, y, shape)."""
    rng = np.random.default_rng(0)
    shape = (16, 16, 3)
    x = rng.standard_normal((args.batch, *shape), dtype=np.float32)
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
    per_device_times(args, apply, params, tx, x, y)


if __name__ == "__main__":
    main()
