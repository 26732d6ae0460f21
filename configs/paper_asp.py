"""The paper's asynchronous set-up: parameter-server training at the async HL core tables.

    python -m omnilearn_jax.main --workdir=runs/asp_hl8_p \
        --config=configs/paper_asp.py:hetero=hl8,controller=proportional,runlocal

Same variants as configs/paper_bsp.py (hetero, controller, model, data, epochs, target,
runlocal), plus `budget=SECONDS`: every run stops at the same virtual time (unless the update
cap below comes first: the run then says so), and the final accuracy at that budget is the
result (OmniLearn reports accuracy at equal time for async). The HL levels use OmniLearn's
async core tables (HL8 = 4/4/4/28). Updates are weighted by batch share (b_k / B), weight decay
included (docs/async.md: W updates at staleness 0 are one BSP step); with no lower bound a
worker may get 0 rows, and then it pushes nothing. The update count is capped at 4 W times the
BSP step count.
"""

import ml_collections

from configs import paper_bsp
from omnilearn_jax.config.args import parse_arg


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    a = parse_arg(arg, **paper_bsp.VARIANTS, budget=0.0)
    c = paper_bsp.build(a)
    c.mode = "asp"
    c.hetero.variant = "asp"
    c.controller.b_min = 0  # async workers run freely; bounds only as the user sets them
    c.controller.b_max = 0
    c.optimizer.momentum = 0.0  # plain SGD on the server, as in parameter-server ASGD
    c.optimizer.schedule = "constant"
    # Updates, not steps: a generous cap; the time budget ends the run. A reference, as BSP's
    # step count is (a number computed here kept its B = 128 value under
    # --config.global_batch_size=256, twice 4 W times BSP's steps).
    c.train.num_steps = a.epochs * paper_bsp.steps_per_epoch(c) * c.get_ref("num_workers") * 4
    c.asp.time_budget = a.budget or (3.0 if a.runlocal else 60.0)
    return c
