"""Does a lasting bias that rows do not answer move the split, whatever the step length?

Run: python -m benchmarks.bias_step_length [--steps 300] [--seeds 3] [--noise 0.25]

Modelled on the failing live runs of issue 26, point 3 (docs/results/identical_split.md):
8 identical workers in 2 processes of 4, the smoke config's controllers on the wall clock
(`persist` 0.1 s), each step's time the same for every worker of a process, lognormal host
noise of 25 % that does not follow the rows, and process 1 slower by a bias of 1.14x that
lasts the run. tests/test_identical_devices.py replays the recorded times at their own
1.5 ms a step; this script draws such noise at several step lengths. For each policy and
step length: the largest distance of a worker's batch from uniform at the end (as a
fraction of the uniform batch; the dead-band plus a row is 0.225) and the split changes,
worst over the seeds.

On 2026-12-06 (at cae4e7b, 3 seeds, 16 s) every policy stayed within the dead-band at
1.5 ms (worst skew 0.125) but none at 30 ms: P and PI ended at 0.625 ([13]*4 + [3]*4 rows,
5 changes), predictive at 0.750 (11 changes; 0.250 already at 6 ms). A one-row move's trial
is judged once its samples number 2 x `confirm` and span `persist`: at 1.5 ms steps about
60 samples, at 30 ms 6, too few at this noise to refuse it, so it stands and the next move
follows. Predictive's patient trials did not stop it either. Traced on seed 7 at 30 ms (it
reaches [16] * 4 + [0] * 4 at step 103 and ends 11 rows from uniform; 4 other seeds of 10
end 3-6 rows from it): the first decision came at step 7, once the steps spanned `persist`,
when each worker's noise estimate (0.08) was under half the noise it sees (process 0's and
1's 25 % draws, relative to their middle: about 0.18); three low samples of process 0
(0.6-0.7x) then confirmed as a speed change at step 11, which closed the move's trial
unjudged and rescaled process 0's curve, so the next decision moved two rows more. A stress
case (row-blind noise of 25 % at 30 ms a step), kept as a measurement, not a test: it is not
fixed.

`--noise` sets the levels. At 5 and 10 % (`--seeds 10 --noise 0.05,0.1,0.25`, 2026-12-06,
about 2 minutes) P stayed within a row of uniform at 5 % (3 rows at worst at 10 %, 30 ms):
the bias is inside its dead-band. PI did not: its integral read the bias as a residual and
its creeps were not tried, so each stood: a median of 2-3 rows from uniform at every step
length, 4 at worst. Its creeps are tried since then (controllers/pi.py), on the noise
measured before them: median 0-1 rows at 5 % noise (worst 1 at 1.5 and 6 ms, 3 at 30 ms),
1-2 at 10 % (worst 2; 5 at 30 ms). At 30 ms a moved worker's jump per sample can be
confirmed as a speed change, which closes the trial unjudged (traced on seed 0 at 5 %: the
creep of step 143 stood so). Predictive stayed within 2 rows at 5-10 %. Since its table
keeps 50 samples instead of 20 (`memory` 0.02, and `min_gain` 0.02; 2026-12-06, for its
held-out plants) a smaller move passes its gain's error threshold: the same command gives a
worst of 2 rows at 5 %, 3 at 10 % (1.5 ms; 2 before), and at 25 % 5 rows at 1.5 ms (2
before), 7 at 6 ms (5), 8 at 30 ms (11; 17 split changes -> 11). The lower `min_gain` alone
does not do it (the same figures at 0.03); the noise estimate kept at the rate 0.05 takes
back part (a scratch edit: 2 rows at 10 %; 3 and 7 at 25 %, 1.5 and 6 ms).
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

import controllers
from benchmarks.args import at_least
from configs import smoke
from omnilearn_jax.config import schema

WORKERS, BATCH = 8, 64
NOISE, BIAS = 0.25, 1.14
STEP_MS = (1.5, 6.0, 30.0)
POLICIES = ("proportional", "pi", "predictive")


def replay(name: str, step_ms: float, steps: int, seed: int, noise: float = NOISE) -> np.ndarray:
    """The splits [steps, W] the smoke config's `name` picks on the biased, row-blind times."""
    config = smoke.get_config()
    config.controller.name, config.clock = name, "wall"
    ctrl = schema.make_controller(config)
    update = jax.jit(ctrl.update)
    state = ctrl.init(WORKERS, BATCH)
    rng = np.random.default_rng(seed)
    sizes, splits = np.full(WORKERS, BATCH // WORKERS), []
    for step in range(steps):
        pair = step_ms * 1e-3 * np.exp(noise * rng.standard_normal(2)) * np.array([1.0, BIAS])
        times = np.repeat(pair, WORKERS // 2)
        obs = controllers.Observation.make(step, sizes, times, global_batch=BATCH)
        new, state = update(state, obs)
        sizes = np.asarray(new)
        splits.append(sizes)
    return np.array(splits)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--noise", default=str(NOISE), help="comma-separated noise levels (sigma)")
    args = p.parse_args(argv)
    at_least(p, steps=(args.steps, 1), seeds=(args.seeds, 1))
    try:  # a ValueError traceback before
        levels = [float(x) for x in args.noise.split(",")]
    except ValueError:
        p.error(f"--noise takes comma-separated numbers, got {args.noise!r}")
    if any(not 0 <= x < 2 for x in levels):
        p.error(f"--noise: each level must be in [0, 2), got {args.noise}")
    uniform = BATCH // WORKERS
    print("policy        noise  step (ms)  final skew (median, worst)  split changes (worst)")
    for name in POLICIES:
        for level in levels:
            for step_ms in STEP_MS:
                skews, changes = [], []
                for seed in range(args.seeds):
                    s = replay(name, step_ms, args.steps, seed, level)
                    skews.append(np.abs(s[-1] - uniform).max() / uniform)
                    changes.append(int((s[1:] != s[:-1]).any(axis=1).sum()))
                print(
                    f"{name:12s} {level:5.2f} {step_ms:9.1f}  {np.median(skews):12.3f} "
                    f"{max(skews):13.3f}  {max(changes):21d}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
