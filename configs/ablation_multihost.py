"""Ablation for tests: one cell run as 2 JAX processes x 2 CPU devices (4 workers).

python -m experiments.ablate --config=configs/ablation_multihost.py --workdir=/tmp/abl_mh

Each cell goes through `omnilearn_jax.launch --num_processes=2`; the runner splits the
base's cpu_devices=4 into 2 a process, so the cell computes what the same config computes
in one process with 4 devices (tests/test_multiprocess.py compares 2 processes with 1).
"""

import ml_collections

from omnilearn_jax.config.args import parse_arg


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    parse_arg(arg)  # no variants: reject any
    c = ml_collections.ConfigDict()
    c.base = "configs/paper_bsp.py:runlocal,model=mlp"  # 4 workers, cpu_devices=4, HL8
    c.group = "multihost"
    # HL8 with an adaptive controller, so the processes must agree on splits that move.
    c.grid = ml_collections.ConfigDict(
        {"controller.name": ("proportional",), "seed": (0,)}, allow_dotted_keys=True
    )
    c.overrides = ml_collections.ConfigDict(
        {"train.num_steps": 8, "train.eval_every": 4, "train.log_every": 4},
        allow_dotted_keys=True,
    )
    c.num_processes = 2
    return c
