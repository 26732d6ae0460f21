"""Measures a cost curve of the real train step on this machine and writes it as JSON.

    python -m experiments.curves.measure --config=configs/paper_bsp.py:runlocal \
        --out=data/curves/cpu_resnet18.json [--batch 128] [--repeats 5] [--bucket-ratio 1.25] \
        [--set model.features=(16,32) --set model.hidden=64]

One worker on one device, so the device's block runs every bucket size from 8 rows up to
`--batch` (the trainer's layout, engine/buckets.py); each size is timed as the wall clock times a
run's step (cluster/measure.py). Replay the file on any machine with
`--config.cost.curve=PATH` (the virtual clock then charges curve(b) / speed).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile

from benchmarks.args import writable


def load_config(spec: str):
    """`path/to/config.py[:arg]` -> the ConfigDict its get_config(arg) returns."""
    path, _, arg = spec.partition(":")
    module_spec = importlib.util.spec_from_file_location("measured_config", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.get_config(arg) if arg else module.get_config()


def set_value(config, key: str, value: str) -> None:
    """`--set a.b=VALUE`: VALUE read as a Python literal (a bare word stays a string)."""
    from omnilearn_jax.config.args import literal

    parsed = literal(value)
    *parents, leaf = key.split(".")
    for name in parents:
        config = config[name]
    if leaf not in config:  # a new key would fail later, in the trainer's checks
        raise KeyError(f"unknown config key {key!r}")
    config[leaf] = parsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bucket-ratio", type=float, default=1.25)
    parser.add_argument(
        "--set", action="append", default=[], help="KEY=VALUE config override (repeatable)"
    )
    args = parser.parse_args(argv)
    # Checked before the trainer is built and every size timed: --batch 8 had measured one
    # knot, then failed ("a cost curve needs >= 2 knots"); a bad --set or file, a traceback.
    if args.batch <= 8 or args.repeats < 1 or not args.bucket_ratio > 1:
        parser.error("--batch must be over 8 (two buckets or more), --repeats >= 1 and "
                     "--bucket-ratio > 1")  # fmt: skip
    if not os.path.isfile(args.config.partition(":")[0]):
        parser.error(f"--config: no such file {args.config.partition(':')[0]!r}")
    if os.path.isdir(args.out):  # an IsADirectoryError traceback after measuring
        parser.error(f"--out {args.out}: a folder; give the curve's file name")
    writable(parser, out=args.out)

    try:  # a config file and its keys start no JAX backend
        config = load_config(args.config)
        for item in args.set:
            key, _, value = item.partition("=")
            set_value(config, key, value)
    except (KeyError, AttributeError, ValueError) as e:
        parser.error(f"--config/--set: {e}")
    import jax

    jax.config.update("jax_num_cpu_devices", 1)
    from omnilearn_jax.cluster.measure import run_curve
    from omnilearn_jax.run.train import Trainer

    config.num_workers = 1
    config.num_devices = 1
    config.global_batch_size = args.batch
    config.bucket_ratio = args.bucket_ratio
    config.controller.name = "static"
    config.controller.b_min, config.controller.b_max = 0, 0
    config.clock = "virtual"
    config.cost.curve = "measure"
    config.wandb.mode = "disabled"
    with tempfile.TemporaryDirectory() as workdir:
        config.cost.curve = ""  # the trainer builds without measuring; measured below
        trainer = Trainer(config, workdir)
        config.cost.curve = "measure"
        curve = run_curve(trainer, repeats=args.repeats)
    import sys

    words = sys.argv[1:] if argv is None else argv
    command = " ".join(["python -m experiments.curves.measure", *words])
    source = dict(curve.source, config=args.config, command=command)
    curve = type(curve)(curve.batch_sizes, curve.seconds, source)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    curve.save(args.out)
    per_row = [s / b for b, s in zip(curve.batch_sizes, curve.seconds, strict=True)]
    for b, s, r in zip(curve.batch_sizes, curve.seconds, per_row, strict=True):
        print(f"{b:5d} rows  {s * 1e3:9.3f} ms  {r * 1e6:9.1f} us/row")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
