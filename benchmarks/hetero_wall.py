"""End to end on the wall clock: what balancing really saves on this machine, beside what
the virtual clock predicts for the same cluster.

    python -m benchmarks.hetero_wall [--levels 2,4,8] [--steps 30] [--inject 0.02]

The paper's BSP job (configs/paper_bsp.py, runlocal, CNN on digits, 4 workers on 4 devices,
B = 128, bounds 16..96) runs at each heterogeneity level twice with `clock=wall` and the
default layout: static uniform batches, then the proportional controller. Heterogeneity is
injected on the devices (`hetero.inject`: worker k sleeps inject * b_k / speed_k before it
computes), so a slow worker's iteration really takes longer, and a worker given fewer rows
really computes fewer. The wall-time reduction of proportional against uniform is printed
beside the reduction the virtual clock predicts for the same profile (a linear cost of
`inject` seconds per sample at speed 1, the same bounds and controller): the goal is that
the engine delivers at least 80% of the prediction.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import jax


def job(level: int, controller: str, clock: str, steps: int, inject: float):
    from configs import paper_bsp

    c = paper_bsp.get_config(f"runlocal,model=cnn,hetero=hl{level},controller={controller}")
    # One device a worker where there are enough (CPU: 8 fake devices), else share them.
    c.num_devices = next(d for d in (4, 2, 1) if d <= len(jax.devices()))
    c.clock = clock
    c.train.num_steps = steps
    c.train.eval_every = steps
    c.train.log_every = steps
    c.train.checkpoint_every = 0
    if clock == "wall":
        c.hetero.inject = inject
    else:  # the same cluster as the virtual clock models it
        c.cost.linear = True
        c.cost.per_sample_cost = inject
        c.cost.fixed_cost = 0.0
    return c


def total_time(config) -> float:
    from omnilearn_jax.run.job import train_and_evaluate

    with tempfile.TemporaryDirectory() as tmp:
        train_and_evaluate(config, tmp)
        with open(os.path.join(tmp, "summary.json")) as f:
            return float(json.load(f)["total_time"])


def measure(levels, steps: int, inject: float) -> dict:
    out = {}
    for level in levels:
        row = {}
        for clock in ("wall", "virtual"):
            times = {
                c: total_time(job(level, c, clock, steps, inject))
                for c in ("static", "proportional")
            }
            row[clock] = {
                "static_seconds": times["static"],
                "proportional_seconds": times["proportional"],
                "reduction": 1.0 - times["proportional"] / times["static"],
            }
        row["delivered"] = row["wall"]["reduction"] / row["virtual"]["reduction"]
        out[f"HL{level}"] = row
        print(
            f"HL{level}: wall {row['wall']['static_seconds']:.2f} s -> "
            f"{row['wall']['proportional_seconds']:.2f} s ({100 * row['wall']['reduction']:.1f}% "
            f"less); virtual clock predicts {100 * row['virtual']['reduction']:.1f}% less; "
            f"delivered {100 * row['delivered']:.0f}% of the prediction",
            flush=True,
        )
    return out


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="2,4,8")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--inject", type=float, default=0.02, help="seconds a sample at speed 1")
    parser.add_argument("--cpu_devices", type=int, default=8)
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    measure([int(v) for v in args.levels.split(",")], args.steps, args.inject)


if __name__ == "__main__":
    main()
