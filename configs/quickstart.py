"""The Quickstart job: 4 workers whose speeds change during the run, a small MLP on digits.

    python -m omnilearn_jax.main --config=configs/quickstart.py --workdir=runs/quickstart

`make train` runs it with the proportional controller; `configs/ablation_default.py` runs it
once per built-in controller and seed (`make run`). It is the paper's BSP job run locally
(configs/paper_bsp.py:runlocal,model=mlp: B = 128, 8 epochs = 88 steps on the virtual clock)
on a cluster chosen so that the controllers differ:
- speeds change: the paper's core tables HL2 (12/12/8/16) for 2 epochs, HL8 (6/6/4/32) for
  4, HL4 (9/9/6/24) for 2, so a controller has to follow them;
- 5% timing noise (`cost.noise`), which a controller must not chase;
- 0.05 s of per-step work that a smaller batch does not shorten (`cost.overhead`: input
  pipeline, optimizer, launches), so time is not proportional to the batch and the
  proportional rule, which assumes it is, approaches the balanced split in several steps;
- bounds that do not bind: every worker keeps at least 4 samples (the balanced split gives
  the slowest 7 at HL8) and none has an upper bound. Under the paper's 16..96 the slowest
  worker sits at 16 at HL8 and every adaptive controller ends up at the same split.

Variants: controller=NAME (default proportional), hetero=changing|hl1|hl2|hl4|hl8 (a fixed
level instead of the changing cluster), model=mlp|cnn, e.g.
`--config=configs/quickstart.py:controller=pi,hetero=hl8`.
"""

import importlib.util
import os

import ml_collections

import controllers
from omnilearn_jax.config.args import check_choice, parse_arg

HETERO = ("changing", "hl1", "hl2", "hl4", "hl8")
LEVELS = (2, 8, 8, 4)  # one level per 2 epochs of the 8


def _paper_bsp():
    """configs/paper_bsp.py, found beside this file wherever the command runs from."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "paper_bsp.py")
    spec = importlib.util.spec_from_file_location("_quickstart_paper_bsp", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    a = parse_arg(arg, controller="proportional", hetero="changing", model="mlp")
    hetero = check_choice("hetero", a.hetero, HETERO)
    model = check_choice("model", a.model, ("mlp", "cnn"))
    level = "hl8" if hetero == "changing" else hetero
    c = _paper_bsp().get_config(f"runlocal,model={model},hetero={level},epochs=8")
    c.controller.name = check_choice("controller", a.controller, controllers.available())
    if hetero == "changing":
        c.hetero.name, c.hetero.levels = "schedule", LEVELS
        c.hetero.segment, c.hetero.unit = 2, "epochs"
    c.cost.noise = 0.05
    c.cost.overhead = 0.05
    c.controller.b_min, c.controller.b_max = 4, 0
    c.train.target_accuracy = 0.85
    return c
