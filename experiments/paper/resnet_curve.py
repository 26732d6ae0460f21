"""The ResNet-18 ablation of resnet.py with the clock charging a measured ResNet-18 curve.

    python -m experiments.ablate --config=experiments/paper/resnet_curve.py \
        --workdir=runs/paper/resnet_curve --parallel 2

resnet.py's clock charges ResNet-18 the formula every paper table uses, (0.05 + 0.01 b) /
cores. Here each worker's compute time is the CPU ResNet-18 curve shipped in
data/curves/cpu_resnet18.json (measured on a real device, docs/cluster.md) over its speed, so
the ACSOS'20 comparison rests on this model's own cost (issue 28, point 3). Each device is
charged the curve at the bucket it computes, padding included (cluster/cost.py).
"""

import os

import ml_collections

from experiments.paper import common, resnet

CURVE = os.path.join(common.CURVES, "cpu_resnet18.json")


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    return common.on_curve(resnet.get_config(arg), CURVE)
