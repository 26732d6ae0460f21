"""BSP with `static` split in proportion to the core counts (the best a fixed split can do).

    python -m experiments.ablate --config=experiments/paper/bsp_static_cores.py \
        --workdir=runs/paper/bsp_static_cores --parallel 2

The cluster is given as `hetero.cores` (the paper's HL tables) and `controller.capacities`
follows it (experiments/paper/cores_config.py), so one grid key moves both. Paper bounds
16..96, which bind at HL8 (the 4-core worker's share, 10.7, is raised to 16). 12 cells.
"""

import ml_collections

from experiments.paper import common

BASE = "experiments/paper/cores_config.py:runlocal,model=cnn,epochs=10,controller=static"


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    small = common.is_small(arg)
    levels = (8,) if small else common.LEVELS
    grid = {"hetero.cores": tuple(common.hl_cores(level) for level in levels)}
    return common.ablation(BASE, "paper_bsp_static_cores", grid, common.CNN, small=small)
