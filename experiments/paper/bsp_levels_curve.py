"""The BSP levels of bsp_levels.py with the clock charging the CNN's own measured curve.

    python -m experiments.ablate --config=experiments/paper/bsp_levels_curve.py \
        --workdir=runs/paper/bsp_levels_curve --parallel 2

bsp_levels.py's clock charges the formula (0.05 + 0.01 b) / cores. Here each device's compute
time is the CPU curve of this very CNN (16/32 channels, digits) shipped in
data/curves/cpu_cnn_digits.json, read at the bucket the device computes (its rows rounded up
to the layout's bucket, cluster/cost.py) over its worker's cores, so the BSP table also rests
on the model's own cost (issue 28, point 3). The ring all-reduce is still the cost model's
(`cost.latency`, `cost.bandwidth`). `:small` (an MLP) charges the MLP's curve instead.
"""

import os

import ml_collections

from experiments.paper import bsp_levels, common

CURVES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "data", "curves"
)
CURVE = os.path.join(CURVES, "cpu_cnn_digits.json")
SMALL_CURVE = os.path.join(CURVES, "cpu_mlp_digits.json")


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    c = bsp_levels.get_config(arg)
    c.group = "paper_bsp_levels_curve"
    c.overrides["cost.curve"] = SMALL_CURVE if common.is_small(arg) else CURVE
    return c
