"""Ablation for tests: 2 controllers x 2 seeds at HL8, a few steps each (4 cells), logged to
W&B offline.

python -m experiments.ablate --config=configs/ablation_smoke.py --workdir=/tmp/abl_smoke
"""

import ml_collections

from omnilearn_jax.config.args import parse_arg


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    parse_arg(arg)  # no variants: reject any
    c = ml_collections.ConfigDict()
    c.base = "configs/paper_bsp.py:runlocal,model=mlp"
    c.group = "smoke"
    c.grid = ml_collections.ConfigDict(
        {
            "controller.name": ("static", "proportional"),
            "seed": (0, 1),
        },
        allow_dotted_keys=True,
    )
    c.overrides = ml_collections.ConfigDict(
        {
            "hetero.name": "hl",
            "hetero.level": 8,
            "train.num_steps": 6,
            "train.eval_every": 3,
            "bucket_ratio": 8.0,  # buckets of few sizes: few programs to compile a cell
            "wandb.mode": "offline",
        },
        allow_dotted_keys=True,
    )
    c.target_accuracy = 0.2
    return c
