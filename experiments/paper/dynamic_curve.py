"""The dynamic cluster of dynamic.py with the clock charging the CNN's own measured curve.

    python -m experiments.ablate --config=experiments/paper/dynamic_curve.py \
        --workdir=runs/paper/dynamic_curve --parallel 2

dynamic.py's clock charges the formula (0.05 + 0.01 b) / cores; here each device's compute
time is the CPU curve of this CNN, data/curves/cpu_cnn_digits.json, at the bucket it computes,
over its worker's cores (common.on_curve; issue 28, point 3). Same levels, steps and seeds.
"""

import ml_collections

from experiments.paper import common, dynamic


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    return common.on_curve(dynamic.get_config(arg), common.cnn_curve(arg))
