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

import ml_collections

from experiments.paper import bsp_levels, common

CURVE = common.CNN_CURVE


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    return common.on_curve(bsp_levels.get_config(arg), common.cnn_curve(arg))
