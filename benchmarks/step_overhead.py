"""What an uneven step costs beyond its busiest device's compute, on the wall clock.

    python -m benchmarks.step_overhead [--steps 200] [--sizes 16,16,16,80] [--reps 3]

Runs the paper's BSP job (configs/paper_bsp.py, runlocal, CNN on digits, 4 workers on 4
devices, B = 128) with `clock=wall` and a static split, and reads from the run store each
step's wall time (from the first launch until the updated state is ready) and each worker's
compute time (from its device's own launch until its sums are ready). Prints the median step,
the median busiest device, and the overhead = step / busiest - 1 (goal: at most 15%), for the
given uneven split and for the uniform one, with the load average beside each figure. Each run
is paired with one whose reduction and update are dispatched only after every device's time
is read (`WallTimer.finish_early = False`, the step before they were dispatched at the last
launch): the ratio of the two median steps is measured side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import jax
import numpy as np

from benchmarks.args import SKIPPED, at_least, ints, writable


def job():
    """The benchmark's job before its split and step count (touches no JAX device)."""
    from configs import paper_bsp

    return paper_bsp.get_config("runlocal,model=cnn,hetero=uniform,controller=static")


def config(sizes: tuple[int, ...], steps: int):
    c = job()
    c.num_devices = min(4, len(jax.devices()))
    c.controller.sizes = tuple(sizes)
    c.clock = "wall"
    c.train.num_steps = steps
    c.train.eval_every = steps
    c.train.log_every = steps
    c.train.checkpoint_every = 0
    return c


def overhead(sizes: tuple[int, ...], steps: int, early: bool = True) -> dict:
    """Median step and busiest-device times (seconds) over the run's steps, the first
    five left out (the controller's and the allocator's first decisions). `early`: the
    reduction and update dispatched at the last launch (else after the times are read)."""
    from omnilearn_jax.engine.timing import WallTimer
    from omnilearn_jax.run.job import train_and_evaluate
    from omnilearn_jax.run.runstore import read_metrics

    with tempfile.TemporaryDirectory() as tmp:
        WallTimer.finish_early = early
        try:
            train_and_evaluate(config(sizes, steps), tmp)
        finally:
            WallTimer.finish_early = True
        train = [r for r in read_metrics(tmp) if "worker_times" in r][SKIPPED:]
    step = float(np.median([r["step_time"] for r in train]))
    busiest = float(np.median([max(r["worker_times"]) for r in train]))
    return {"sizes": list(sizes), "early": early, "step_ms": 1e3 * step,
            "busiest_ms": 1e3 * busiest, "overhead": step / busiest - 1,
            "load": os.getloadavg()[0]}  # fmt: skip


def measure(uneven: tuple[int, ...], steps: int, reps: int, echo=print) -> dict:
    """The uneven split and the uniform one, `reps` runs each with the reduction and
    update dispatched early and late, interleaved (a change in machine load hits all): every
    run, and per split the median and worst overhead and the early / late step ratio."""
    uniform = (sum(uneven) // len(uneven),) * len(uneven)
    rows = []
    for rep in range(reps):
        for sizes in (uneven, uniform):
            for early in (True, False):
                r = overhead(sizes, steps, early) | {"rep": rep}
                rows.append(r)
                echo(
                    f"sizes {r['sizes']} {'early' if early else 'late '}  step "
                    f"{r['step_ms']:.2f} ms  busiest device {r['busiest_ms']:.2f} ms  "
                    f"overhead {100 * r['overhead']:.0f}%  (load {r['load']:.2f})"
                )
    splits = {}
    for name, sizes in (("uneven", uneven), ("uniform", uniform)):
        mine = [r for r in rows if tuple(r["sizes"]) == sizes and r["early"]]
        late = [r for r in rows if tuple(r["sizes"]) == sizes and not r["early"]]
        over = [r["overhead"] for r in mine]
        ratios = [a["step_ms"] / b["step_ms"] for a, b in zip(mine, late, strict=True)]
        splits[name] = {
            "sizes": list(sizes),
            "step_ms": float(np.median([r["step_ms"] for r in mine])),
            "busiest_ms": float(np.median([r["busiest_ms"] for r in mine])),
            "overhead_median": float(np.median(over)),
            "overhead_worst": float(max(over)),
            "late_step_ms": float(np.median([r["step_ms"] for r in late])),
            "late_overhead_median": float(np.median([r["overhead"] for r in late])),
            "early_over_late": float(np.median(ratios)),
            "early_over_late_worst": float(max(ratios)),
        }
        echo(f"{list(sizes)}: overhead median {100 * np.median(over):.0f}%, "
             f"worst {100 * max(over):.0f}% over {len(over)} runs (goal <= 15%); step "
             f"early / late {np.median(ratios):.3f} (worst {max(ratios):.3f})")  # fmt: skip
    return {"steps": steps, "reps": reps, "runs": rows, "splits": splits}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--sizes", default="16,16,16,80")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    at_least(p, steps=(args.steps, SKIPPED + 1), reps=(args.reps, 1))
    uneven = tuple(ints(p, "sizes", args.sizes, least=0))
    spec = job()
    workers, batch = spec.num_workers, spec.global_batch_size
    if len(uneven) != workers or sum(uneven) != batch:
        p.error(  # a ValueError traceback from the first run's config check before
            f"--sizes takes {workers} rows summing to {batch} (the job's workers and B), "
            f"got {args.sizes!r}"
        )
    writable(p, json=args.json)
    jax.config.update("jax_num_cpu_devices", 8)  # before any JAX operation
    out = measure(uneven, args.steps, args.reps, lambda line: print(line, flush=True))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
