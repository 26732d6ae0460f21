"""Every built-in controller at the paper's HL8, two seeds, on the paper set-up run locally.

    python -m experiments.ablate --config=configs/ablation_default.py --workdir=runs/abl \
        --parallel 2

Variants: `level=1|2|4|8` (HL level, default 8), `seeds=N` (default 2), e.g.
`--config=configs/ablation_default.py:level=4,seeds=3`.

4 workers, B = 128, bounds 16..96, HL8 cores 6/6/4/32; an MLP on digits for 8 epochs (88
steps) per cell. 8 cells; about a minute on 2 CPU cores with --parallel 2 (docs/ablations.md).
"""

import ml_collections

import controllers
from omnilearn_jax.config_args import check_choice, parse_arg


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    a = parse_arg(arg, level=8, seeds=2)
    level = check_choice("level", str(a.level), ("1", "2", "4", "8"))
    if a.seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {a.seeds}")
    c = ml_collections.ConfigDict()
    c.base = f"configs/paper_bsp.py:runlocal,model=mlp,hetero=hl{level},epochs=8"
    c.group = f"controllers_hl{level}"
    c.grid = ml_collections.ConfigDict(
        {"controller.name": controllers.BUILT_IN, "seed": tuple(range(a.seeds))},
        allow_dotted_keys=True,
    )
    # Every cell logs to W&B offline (no account, no network); sync later (docs/wandb.md).
    c.overrides = ml_collections.ConfigDict({"wandb.mode": "offline"}, allow_dotted_keys=True)
    c.target_accuracy = 0.85
    return c
