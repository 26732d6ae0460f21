"""BSP at HL8 without the paper's bounds (b_min 0, b_max 0 = none).

    python -m experiments.ablate --config=experiments/paper/bsp_nobounds.py \
        --workdir=runs/paper/bsp_nobounds --parallel 2

Under a cost proportional to the batch HL8 is the only level where the paper's bounds bind
(cores 6/6/4/32: the 4-core worker's proportional share of B = 128 is 10.7 < b_min = 16).
Under the clock's cost, (0.05 + 0.01 b) / cores, they bind at HL4 too (the 6-core worker's
balanced share is 13.5 rows; docs/RESULTS.md, "Bounds bind"), which this ablation, at HL8
only, leaves out.
`static` here splits by cores (its capacities follow hetero.cores); the uniform reference is
the HL8 `static` cell of bsp_levels (32 samples each, inside either set of bounds). 12 cells.
"""

import ml_collections

from experiments.paper import common

BASE = "experiments/paper/cores_config.py:runlocal,model=cnn,epochs=10,level=8"


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    small = common.is_small(arg)
    controllers = ("proportional",) if small else ("static", *common.ADAPTIVE)
    overrides = {**common.CNN, "controller.b_min": 0, "controller.b_max": 0}
    grid = {"controller.name": controllers}
    return common.ablation(BASE, "paper_bsp_nobounds", grid, overrides, small=small)
