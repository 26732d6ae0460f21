"""Asynchronous (parameter-server) training at the paper's async HL2/4/8: accuracy at equal time.

    python -m experiments.ablate --config=experiments/paper/async_levels.py \
        --workdir=runs/paper/async_levels --parallel 2

configs/paper_asp.py (async core tables, plain SGD, updates weighted by batch share, no
bounds), CNN on digits; every run stops at the same virtual time (3 s), and the final
accuracy there is the result, as in OmniLearn's async comparison. 27 cells.
"""

import ml_collections

from experiments.paper import common

BUDGET = 3.0  # virtual seconds under the formula (0.05 + 0.01 b) / cores


def get_config(arg: str = "", budget: float = BUDGET) -> ml_collections.ConfigDict:
    """`budget`: the virtual time every run stops at (`small`: a tenth of it)."""
    small = common.is_small(arg)
    budget = budget / 10 if small else budget
    base = f"configs/paper_asp.py:runlocal,model=cnn,epochs=10,budget={budget}"
    grid = {
        "controller.name": ("static", "proportional")
        if small
        else ("static", "proportional", "oracle"),
        "hetero.level": (8,) if small else (2, 4, 8),
    }
    c = common.ablation(base, "paper_async", grid, common.CNN, small=small)
    if small:  # the time budget ends an async run; keep the update cap from paper_asp
        for key in ("train.num_steps", "train.eval_every", "train.log_every"):
            del c.overrides[key]
    return c
