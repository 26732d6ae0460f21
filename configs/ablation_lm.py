"""The LM ablation (docs/lm.md): static, proportional, pi and oracle at HL4 and HL8, three
seeds, the small GPT of configs/paper_lm.py on byte-level text; BSP or async.

    python -m experiments.ablate --config=configs/ablation_lm.py:mode=bsp \
        --workdir=runs/abl_lm_bsp --parallel 1
    python -m experiments.ablate --config=configs/ablation_lm.py:mode=asp \
        --workdir=runs/abl_lm_asp --parallel 1

Variants: `mode=bsp|asp`, `seeds=N` (default 3), `target=F` (the perplexity for
time_to_target, default 15), `budget=SECONDS` (async: every run stops at this virtual time,
default 8), `controllers=A+B` (default static+proportional+pi+oracle; e.g.
`controllers=predictive` runs the predictive controller's cells in a workdir of their own),
`curve=PATH` (the virtual clock charges this measured cost curve, e.g. the GPT's own
data/curves/cpu_gpt_text.json, instead of the formula (0.05 + 0.01 b) / cores; give async a
`budget` on that curve's scale).
`experiments/lm_results.py` turns the ablations into docs/results/lm.md.
"""

import ml_collections

import controllers
from omnilearn_jax.config.args import check_choice, parse_arg

CONTROLLERS = ("static", "proportional", "pi", "oracle")


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    a = parse_arg(
        arg,
        mode="bsp",
        seeds=3,
        target=15.0,
        budget=8.0,
        controllers="+".join(CONTROLLERS),
        curve="",
    )
    mode = check_choice("mode", a.mode, ("bsp", "asp"))
    names = tuple(
        check_choice("controller", n, controllers.available()) for n in a.controllers.split("+")
    )
    if a.seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {a.seeds}")
    c = ml_collections.ConfigDict()
    given = {item.split("=", 1)[0].strip() for item in arg.split(",") if item.strip()}
    if mode == "bsp" and "budget" in given:  # BSP runs its steps (paper_lm refuses it too;
        # budget=8, the default, given by hand had passed)
        raise ValueError(f"budget={a.budget:g} is for mode=asp; BSP cells run their steps")
    budget = f",budget={a.budget}" if mode == "asp" else ""
    c.base = f"configs/paper_lm.py:mode={mode}{budget},target={a.target}"
    c.group = f"lm_{mode}" + ("_curve" if a.curve else "")
    c.grid = ml_collections.ConfigDict(
        {
            "controller.name": names,
            "hetero.level": (4, 8),
            "seed": tuple(range(a.seeds)),
        },
        allow_dotted_keys=True,
    )
    every = 100 if mode == "asp" else 20  # async counts updates (W a BSP step)
    c.overrides = ml_collections.ConfigDict(
        {
            "train.eval_every": every,
            "train.log_every": 5 * every,
            **({"cost.curve": a.curve} if a.curve else {}),
        },
        allow_dotted_keys=True,
    )
    return c
