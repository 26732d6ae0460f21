"""BSP on the paper's dynamic cluster: HL 1, 2, 4, 8, 8, 4, 2, 1, one level an epoch.

    python -m experiments.ablate --config=experiments/paper/dynamic.py \
        --workdir=runs/paper/dynamic --parallel 2

8 epochs (88 steps) of the CNN on digits, so each level lasts 11 steps; 4 controllers x 3
seeds = 12 cells. `:small` changes level every step for 6 steps.
"""

import ml_collections

from experiments.paper import common

LEVELS = (1, 2, 4, 8, 8, 4, 2, 1)


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    small = common.is_small(arg)
    base = common.CNN_BASE.replace("epochs=10", f"epochs={len(LEVELS)}")
    overrides = {
        **common.CNN,
        "hetero.name": "schedule",
        "hetero.levels": LEVELS[:6] if small else LEVELS,
        "hetero.segment": 1,
        "hetero.unit": "steps" if small else "epochs",
    }
    controllers = ("static", "proportional") if small else ("static", *common.ADAPTIVE)
    grid = {"controller.name": controllers}
    return common.ablation(base, "paper_dynamic", grid, overrides, small=small)
