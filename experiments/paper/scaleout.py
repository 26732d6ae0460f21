"""Scale-out: 32 workers with 2 to 32 cores each on 8 devices, with and without bounds.

    python -m experiments.ablate --config=experiments/paper/scaleout.py \
        --workdir=runs/paper/scaleout --parallel 2

Cores grow geometrically from 2 to 32 (sum 350). The global batch grows with the cluster to
B = 512 (16 per worker on average, so the smallest share stays a whole number of samples):
the paper's rule then gives b_min = B/(2W) = 8 and b_max = 3B/W = 48. With b_min = 8 the
2- and 3-core workers cannot shed enough work (their proportional share is 3-4 samples), so
the grid also runs b_min = 0. 30 epochs = 60 steps (evaluated every epoch, 2 steps);
3 controllers x 2 bounds x 3 seeds = 18 cells.
"""

import ml_collections
import numpy as np

from experiments.paper import common

WORKERS = 32
CORES = tuple(int(c) for c in np.round(np.geomspace(2, 32, WORKERS)))
BATCH = 512


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    small = common.is_small(arg)
    base = common.CNN_BASE.replace("epochs=10", "epochs=30")  # 2 steps an epoch at B = 512
    overrides = {
        **common.CNN,
        "num_workers": WORKERS,
        "cpu_devices": 8,
        "global_batch_size": BATCH,
        "hetero.name": "cores",
        "hetero.cores": CORES,
        # train.eval_every/log_every stay at once an epoch (2 steps at B = 512).
    }
    grid = {
        "controller.name": ("proportional",) if small else ("static", "proportional", "oracle"),
        "controller.b_min": (0,) if small else (BATCH // (2 * WORKERS), 0),
    }
    return common.ablation(base, "paper_scaleout", grid, overrides, small=small)
