"""A small GPT on offline text (docs/lm.md): the paper's 4 workers and bounds, byte-level
sequences of the Python standard library's source, BSP or async.

    python -m omnilearn_jax.main --workdir=runs/lm_hl8_p \
        --config=configs/paper_lm.py:hetero=hl8,controller=proportional

Variants (after ':', comma separated):
  mode=bsp|asp                      synchronous, or parameter-server async (as paper_asp.py)
  hetero=uniform|hl1|hl2|hl4|hl8    heterogeneity level (BSP or async core tables)
  controller=NAME                   any registered controller
  steps=N                           BSP steps, default 300 (8 with runlocal); async: the
                                    update cap is 4 W times this
  budget=SECONDS                    async: stop at this virtual time (0: after the update cap)
  target=F                          perplexity for time_to_target (lower is better; 0 = none)
  runlocal                          a tiny model and corpus slice: runs in seconds on a CPU

The model is GPT-2-like (models/transformer.py) and its sizes are config keys:
`model.width`, `model.depth` (blocks), `model.num_heads`, `model.mlp_ratio`; the context is
`dataset.seq_len`. Evaluation reports loss (nats a token) and perplexity.
"""

import ml_collections

from configs import paper_asp, paper_bsp
from omnilearn_jax.config.args import check_choice, parse_arg
from omnilearn_jax.config.schema import base_config


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    a = parse_arg(
        arg,
        mode="bsp",
        hetero="hl8",
        controller="proportional",
        steps=0,  # 0: 300, or 8 with runlocal
        budget=0.0,
        target=0.0,
        runlocal=False,
    )
    # The paper's workers, bounds (B/(2W) and 3B/W) and core tables, from the image set-ups.
    mode = check_choice("mode", a.mode, ("bsp", "asp"))
    if a.budget and mode == "bsp":  # it was ignored: BSP runs its steps
        raise ValueError(f"budget={a.budget:g} is for mode=asp; a BSP run trains steps=N steps")
    paper = paper_asp if mode == "asp" else paper_bsp
    c = paper.get_config(f"hetero={a.hetero},controller={a.controller},model=mlp")
    c.global_batch_size = 64  # bounds 8..48

    c.dataset.name = "text"
    c.dataset.seq_len = 16 if a.runlocal else 32
    c.dataset.num_train = 512 if a.runlocal else 8192
    c.dataset.num_test = 64 if a.runlocal else 512
    c.model.name = "transformer"
    c.model.width = 16 if a.runlocal else 32
    c.model.depth = 1 if a.runlocal else 2
    c.model.num_heads = 2 if a.runlocal else 4
    c.model.mlp_ratio = 4

    steps = a.steps or (8 if a.runlocal else 300)  # a given steps=N wins over runlocal's
    # Async counts updates, not steps: a generous cap (W updates a step, 4x), as paper_asp.
    c.train.num_steps = steps * (4 * c.num_workers if mode == "asp" else 1)
    c.train.eval_every = 4 if a.runlocal else 25
    c.train.log_every = 4 if a.runlocal else 50
    c.train.eval_batch_size = 512
    c.train.checkpoint_every = 0
    c.train.target_accuracy = 0.0
    c.train.target_perplexity = a.target
    if mode == "asp":  # a BSP run reads no asp key (each would be warned as unread)
        c.asp.time_budget = a.budget
        # Adam normalises a gradient's scale away, so weighting an async update by its share
        # of the batch must scale its step instead (docs/async.md): weighting=lr.
        c.asp.weighting = "lr"

    c.optimizer.name = "adamw"
    # paper_asp's plain SGD sets momentum 0, which adamw does not read (warned as unread)
    c.optimizer.momentum = base_config().optimizer.momentum
    c.optimizer.learning_rate = 3e-3
    c.optimizer.weight_decay = 0.0
    c.optimizer.schedule = "constant"
    return c
