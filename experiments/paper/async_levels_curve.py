"""The async levels of async_levels.py with the clock charging the CNN's own measured curve.

    python -m experiments.ablate --config=experiments/paper/async_levels_curve.py \
        --workdir=runs/paper/async_levels_curve --parallel 2

async_levels.py's clock charges the formula (0.05 + 0.01 b) / cores and stops every run at
3 virtual seconds. Here each update's compute time is the CPU curve of this CNN,
data/curves/cpu_cnn_digits.json, at the bucket it computes, over its worker's cores
(common.on_curve; issue 28, point 3), plus the cost model's push and pull. A step is then
about a millisecond, not a few tenths of a second, so the budget is on that scale: 0.03 s,
chosen so that uniform batching at HL2 makes about as many updates (about 300) as in 3 s
under the formula (a 0.05 s probe made 508). Same grid and seeds.
"""

import ml_collections

from experiments.paper import async_levels, common

BUDGET = 0.03  # virtual seconds on the curve


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    return common.on_curve(async_levels.get_config(arg, BUDGET), common.cnn_curve(arg))
