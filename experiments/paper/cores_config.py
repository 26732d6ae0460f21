"""configs/paper_bsp.py with the cluster given as core counts, and `static` split by them.

    python -m omnilearn_jax.main --workdir=runs/hl8_cores \
        --config=experiments/paper/cores_config.py:runlocal,model=cnn,controller=static

Same variants as configs/paper_bsp.py, plus `level=1|2|4|8` (default 8): the paper's BSP core
table that `hetero.cores` starts from. `controller.capacities` is a reference to
`hetero.cores`, so `--config.hetero.cores=(9,9,6,24)` moves both at once: `static` then
splits B in proportion to each worker's cores (the best fixed split a user could pick from
the cluster's specification), while the adaptive controllers ignore `capacities`.
"""

import ml_collections

from configs import paper_bsp
from experiments.paper.common import hl_cores
from omnilearn_jax.config.args import parse_arg


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    a = parse_arg(arg, **paper_bsp.VARIANTS, level=8)
    c = paper_bsp.build(a)
    c.hetero.name = "cores"
    c.hetero.cores = hl_cores(int(a.level))
    c.controller.capacities = c.hetero.get_ref("cores")
    return c
