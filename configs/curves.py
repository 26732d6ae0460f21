"""The Quickstart job on a measured cost curve: the virtual clock charges curve(b) / speed.

    python -m omnilearn_jax.main --config=configs/curves.py:controller=predictive \
        --workdir=runs/curves

The Quickstart cluster (configs/quickstart.py: 4 workers, HL2 -> HL8 -> HL4, 5% timing
noise, b_min 4, no b_max), but each worker's compute time comes from a cost curve measured
on a real device instead of the formula (docs/cluster.md, "Measured cost curves"), and
without the Quickstart's per-step overhead.

Variants: curve=resnet18|mlp|measure (default resnet18: data/curves/cpu_resnet18.json, a
CPU ResNet-18 curve shipped with the code; mlp: the smoke MLP's launch-bound curve; measure:
profile this run's own model at start), limit=N (the fastest worker's memory limit in rows:
past it its time is multiplied by 3; default 0 = none), controller=NAME, hetero= as for the
Quickstart. The curve used is kept in the run directory as cost_curve.json.
"""

import importlib.util
import os

import ml_collections

from omnilearn_jax.config.args import check_choice, parse_arg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CURVES = {
    "resnet18": os.path.join(ROOT, "data", "curves", "cpu_resnet18.json"),
    "mlp": os.path.join(ROOT, "data", "curves", "cpu_mlp_digits.json"),
    "measure": "measure",
}


def _quickstart():
    path = os.path.join(ROOT, "configs", "quickstart.py")
    spec = importlib.util.spec_from_file_location("_curves_quickstart", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    a = parse_arg(arg, curve="resnet18", limit=0, controller="predictive", hetero="changing")
    curve = check_choice("curve", a.curve, tuple(CURVES))
    c = _quickstart().get_config(f"controller={a.controller},hetero={a.hetero}")
    c.cost.curve = CURVES[curve]
    # The Quickstart's 0.05 s of speed-independent work per step stood in for a nonlinear
    # cost; the measured curve is the real one (and that overhead would dwarf it: a 32-row
    # ResNet-18 block takes about 20 ms at speed 1 on the CPU it was measured on).
    c.cost.overhead = 0.0
    if a.limit < 0:
        raise ValueError(f"limit must be >= 0 rows (0 = none), got {a.limit}")
    if a.limit:
        # The fastest worker of the paper's tables is the last of each group of four.
        c.cost.memory_limits = tuple(a.limit if k % 4 == 3 else 0 for k in range(c.num_workers))
        c.cost.memory_factor = 3.0
    return c
