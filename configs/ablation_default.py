"""The Quickstart ablation (`make run`): every built-in controller, two seeds, on the
Quickstart job (configs/quickstart.py: 4 workers whose speeds change, HL2 -> HL8 -> HL4, with
timing noise, a per-step overhead and bounds that do not bind; an MLP on digits, 88 steps).

    python -m experiments.ablate --config=configs/ablation_default.py --workdir=runs/abl \
        --parallel 2

Variants: `hetero=changing|hl1|hl2|hl4|hl8` (default changing), `seeds=N` (default 2), e.g.
`--config=configs/ablation_default.py:hetero=hl8,seeds=3`. 8 cells; the time `make run` takes
is measured in docs/ablations.md.
"""

import ml_collections

import controllers
from omnilearn_jax.config.args import check_choice, parse_arg


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    a = parse_arg(arg, hetero="changing", seeds=2)
    hetero = check_choice("hetero", a.hetero, ("changing", "hl1", "hl2", "hl4", "hl8"))
    if a.seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {a.seeds}")
    c = ml_collections.ConfigDict()
    c.base = f"configs/quickstart.py:hetero={hetero}"
    c.group = f"controllers_{hetero}"
    c.grid = ml_collections.ConfigDict(
        {"controller.name": controllers.BUILT_IN, "seed": tuple(range(a.seeds))},
        allow_dotted_keys=True,
    )
    # Every cell logs to W&B offline (no account, no network); sync later (docs/wandb.md).
    c.overrides = ml_collections.ConfigDict({"wandb.mode": "offline"}, allow_dotted_keys=True)
    c.target_accuracy = 0.85
    return c
