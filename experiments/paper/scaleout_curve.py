"""The 32-worker scale-out of scaleout.py with the clock charging the CNN's measured curve.

    python -m experiments.ablate --config=experiments/paper/scaleout_curve.py \
        --workdir=runs/paper/scaleout_curve --parallel 2

scaleout.py's clock charges the formula (0.05 + 0.01 b) / cores; here each device's compute
time is the CPU curve of this CNN, data/curves/cpu_cnn_digits.json, at the bucket it computes
(4 workers share each of the 8 devices, so a worker is charged its rows' share of the
device's block), over its worker's cores (common.on_curve; issue 28, point 3). Same cores,
bounds, steps and seeds.
"""

import ml_collections

from experiments.paper import common, scaleout


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    return common.on_curve(scaleout.get_config(arg), common.cnn_curve(arg))
