"""What program sharing saves at warm-up: one compile a bucket loaded onto every device
(engine/sharing.py, two JAX internals) against a compile a device and bucket (public APIs
only, `Steps.share = False`).

    python -m benchmarks.share_cost [--models mlp,cnn] [--devices 8] [--reps 2]

Each measurement runs in a fresh process with no persistent compilation cache (so nothing
is read back), compiles the local programs of every bucket of the default layout for
`--devices` workers on as many fake CPU devices (`Steps.compile`), and reports the
process's CPU seconds and wall seconds for it. Printed: the median of `--reps` per model
and path, and the ratio per-device / shared. Measured on this machine's CPU; on GPU, JAX's
own persistent cache (when configured) already shares a single-device program between
devices (it leaves the device assignment out of its key there), which is why sharing.py
steps aside when a compile was read back from that cache.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks.args import model_name

MARK = "share_cost: "
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure(model: str, share: bool) -> dict:
    """CPU and wall seconds of compiling every bucket's local programs in this process."""
    import jax
    import numpy as np
    import optax
    from flax.training.train_state import TrainState

    from omnilearn_jax.engine import buckets
    from omnilearn_jax.engine.mesh import Placement
    from omnilearn_jax.models import create

    shape = (40,) if model == "mlp" else (28, 28, 1)
    apply, params = create({"name": model}, shape, 10, 0)
    devices = jax.devices()
    layout = buckets.make_layout(num_workers=len(devices), num_devices=len(devices), capacity=32)
    placement = Placement("shard_map", devices)
    tx = optax.sgd(0.1)
    steps = placement.steps(apply, tx, chunk=32)
    steps.share = share
    state = placement.replicate(TrainState.create(apply_fn=apply, params=params, tx=tx))
    example = np.zeros((1, *shape), np.float32)
    wall, cpu = time.perf_counter(), time.process_time()
    steps.compile(state, example, layout.buckets)
    return {
        "cpu": time.process_time() - cpu,
        "wall": time.perf_counter() - wall,
        "buckets": list(layout.buckets),
    }


def fresh(model: str, share: bool, devices: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, "-m", "benchmarks.share_cost", "--one", model, str(int(share))]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len(MARK) :])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--one", nargs=2, metavar=("MODEL", "SHARE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(MARK + json.dumps(measure(args.one[0], args.one[1] == "1")), flush=True)
        return
    if args.reps < 1 or args.devices < 2:
        parser.error("--reps must be >= 1 and --devices >= 2")
    for model in args.models.split(","):  # all before the first (a child's traceback after)
        model_name(parser, model, "models", images=True)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print("model  buckets         shared cpu/wall s  per-device cpu/wall s  ratio (cpu)")
    for model in args.models.split(","):
        runs = {True: [], False: []}
        for _ in range(args.reps):  # alternated, side by side
            for share in (True, False):
                runs[share].append(fresh(model, share, args.devices))

        def med(share, key, runs=runs):
            return statistics.median(r[key] for r in runs[share])

        print(
            f"{model:6s} {str(runs[True][0]['buckets']):15s} "
            f"{med(True, 'cpu'):7.2f} / {med(True, 'wall'):5.2f}      "
            f"{med(False, 'cpu'):7.2f} / {med(False, 'wall'):5.2f}        "
            f"{med(False, 'cpu') / med(True, 'cpu'):.2f}x"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
