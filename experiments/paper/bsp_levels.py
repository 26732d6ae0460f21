"""BSP at the paper's HL1/2/4/8: uniform `static` vs `proportional`, `pi` and `oracle`.

    python -m experiments.ablate --config=experiments/paper/bsp_levels.py \
        --workdir=runs/paper/bsp_levels --parallel 2

4 workers, B = 128, paper bounds 16..96, CNN on digits, 10 epochs, 3 seeds: 48 cells.
`:small` runs static and proportional at HL8, one seed, 6 steps.
"""

import ml_collections

from experiments.paper import common


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    small = common.is_small(arg)
    controllers = ("static", "proportional") if small else ("static", *common.ADAPTIVE)
    grid = {"controller.name": controllers, "hetero.level": (8,) if small else common.LEVELS}
    return common.ablation(common.CNN_BASE, "paper_bsp_levels", grid, common.CNN, small=small)
