"""Every controller, predictive included, on the Quickstart job with a measured cost curve.

    python -m experiments.ablate --config=configs/ablation_curves.py --workdir=runs/abl_curves

The cells run configs/curves.py (the CPU ResNet-18 curve in data/curves/ drives the virtual
clock; the model trained is the Quickstart MLP, whose update does not depend on the split).
Variants: curve=resnet18|mlp, limit=N (fastest worker's memory limit in rows, 0 = none),
hetero=changing|hl2|hl4|hl8, seeds=N (default 1). 5 cells per seed.
"""

import ml_collections

from omnilearn_jax.config.args import check_choice, parse_arg

CONTROLLERS = ("static", "proportional", "pi", "predictive", "oracle")


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    a = parse_arg(arg, curve="resnet18", limit=0, hetero="changing", seeds=1)
    curve = check_choice("curve", a.curve, ("resnet18", "mlp"))
    if a.seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {a.seeds}")
    c = ml_collections.ConfigDict()
    c.base = f"configs/curves.py:curve={curve},limit={a.limit},hetero={a.hetero}"
    c.group = f"curves_{curve}_{a.hetero}"
    c.grid = ml_collections.ConfigDict(
        {"controller.name": CONTROLLERS, "seed": tuple(range(a.seeds))}, allow_dotted_keys=True
    )
    c.overrides = ml_collections.ConfigDict({"wandb.mode": "disabled"}, allow_dotted_keys=True)
    c.target_accuracy = 0.85
    return c
