"""An uneven step on the virtual clock with its rows left for the devices' programs to take
(`Engine.batch(place=False)`, what `Loop.train_step` does off the wall clock) against the
same step placed first, side by side in one process.

    python -m benchmarks.unplaced_step [--rounds 8] [--steps 200]

The paper job (configs/paper_bsp.py:runlocal, CNN on digits, 4 workers on 4 devices, B =
128, capacity 96) with the split 16/16/16/80, alternated blocks of `--steps` steps; prints
each variant's median wall time and host CPU (`time.thread_time`) a step and the median of
the rounds' paired ratios (unplaced / placed).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from benchmarks.args import at_least


def measure(rounds: int, steps: int) -> dict:
    import jax
    import numpy as np

    from benchmarks.report import paper_trainer

    with tempfile.TemporaryDirectory() as tmp:
        t = paper_trainer(tmp, steps=10**6, capacity=96)
        sizes, at = np.array([16, 16, 16, 80]), [0]

        def block(place: bool, n: int) -> tuple[float, float]:
            start, cpu = time.perf_counter(), time.thread_time()
            for _ in range(n):
                at[0] += 1
                t.state, _ = t.engine.steps.train(t.state, t.batch(at[0], sizes, None, place))
            jax.block_until_ready(t.state)
            return (time.perf_counter() - start) / n, (time.thread_time() - cpu) / n

        block(True, 20), block(False, 20)  # first transfers, warm caches
        runs: dict = {True: [], False: []}
        for _ in range(rounds):
            for place in (True, False):
                runs[place].append(block(place, steps))
    med = {p: np.median(np.array(r), axis=0) * 1e3 for p, r in runs.items()}
    paired = [u[0] / p[0] for p, u in zip(runs[True], runs[False], strict=True)]
    return {
        "placed_ms": float(med[True][0]),
        "unplaced_ms": float(med[False][0]),
        "placed_host_cpu_ms": float(med[True][1]),
        "unplaced_host_cpu_ms": float(med[False][1]),
        "paired_ratio_median": float(np.median(paired)),
        "paired_ratio_worst": float(np.max(paired)),
        "load": os.getloadavg()[0],
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)
    at_least(parser, rounds=(args.rounds, 1), steps=(args.steps, 1))
    import jax

    jax.config.update("jax_num_cpu_devices", 8)  # the job's 4 devices; before any JAX work
    r = measure(args.rounds, args.steps)
    print(
        f"uneven step 16/16/16/80: placed {r['placed_ms']:.3f} ms, unplaced "
        f"{r['unplaced_ms']:.3f} ms a step; host CPU {r['placed_host_cpu_ms']:.3f} / "
        f"{r['unplaced_host_cpu_ms']:.3f} ms; unplaced / placed paired median "
        f"{r['paired_ratio_median']:.3f} (worst {r['paired_ratio_worst']:.3f}, "
        f"load {r['load']:.1f})"
    )


if __name__ == "__main__":
    main()
