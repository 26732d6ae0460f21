"""ResNet-18 on CIFAR-shaped synthetic input, 3 workers at H-level 2 and 10 (ACSOS'20 set-up).

    python -m experiments.ablate --config=experiments/paper/resnet.py \
        --workdir=runs/paper/resnet --parallel 2

ACSOS'20 reports ResNet 2x faster at H-level 2 and 2.4x at H-level 10 on 3 CPU workers. We
run the runlocal ResNet-18 (stem width 8, 16x16x3 inputs), B = 96 (32 per worker), paper
bounds 16..96, cores (8, 8, 16) and (4, 4, 40); 2 epochs (20 steps), one seed (BSP: the
controller changes time, not the updates, so time to any accuracy scales with total time).
3 controllers x 2 levels = 6 cells. Not run by `--small` (compiling ResNet-18 alone takes
longer than the CI budget).
"""

import ml_collections

from experiments.paper import common

CORES = ((8, 8, 16), (4, 4, 40))  # H-level 2 and 10 (max / min cores)


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    small = common.is_small(arg)
    base = "configs/paper_bsp.py:runlocal,model=resnet18,data=synthetic,epochs=2"
    overrides = {
        "num_workers": 3,
        "cpu_devices": 3,
        "global_batch_size": 96,
        "hetero.name": "cores",
    }
    grid = {"hetero.cores": CORES, "controller.name": ("static", "proportional", "oracle")}
    c = common.ablation(base, "paper_resnet", grid, overrides, small=small, target=0.0)
    c.grid.seed = (0,)
    return c
