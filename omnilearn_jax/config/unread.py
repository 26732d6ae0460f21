"""Config keys a run sets but does not read, each with the warning that says so (the run's
start prints them; `experiments.ablate` refuses a grid or override key no cell reads): the
policy's, the data set's, the optimiser's or its schedule's, the cost model's and the clock's,
`asp` keys in a synchronous run, and `hetero.inject_order` without a wait. The `hetero`
profiles' own unread keys are the cluster's (omnilearn_jax/cluster/registry.py)."""

from __future__ import annotations

import ml_collections

import controllers
from omnilearn_jax.cluster import cost_defaults, hetero_defaults
from omnilearn_jax.cluster.defaults import set_away
from omnilearn_jax.config.schema import base_config


def unread_keys(config: ml_collections.ConfigDict) -> dict[str, str]:
    """Each key set in `config` that the run does not read (the module's list), dotted, with
    the sentence that warns of it."""
    return {
        **dict(_unread_controller(config)),
        **dict(_unread_dataset(config)),
        **dict(_unread_optimizer(config)),
        **dict(_unread_cost(config)),
        **dict(_unread_asp(config)),
        **dict(_unread_inject_order(config)),
    }


def _unread_inject_order(config: ml_collections.ConfigDict) -> list[tuple[str, str]]:
    """`hetero.inject_order` set without an injected wait, or in async mode (whose workers
    wait before they compute, in their own programs): it did nothing, without a word."""
    order = config.hetero.get("inject_order", hetero_defaults()["inject_order"])
    if not set_away(order, hetero_defaults()["inject_order"]):
        return []
    if not config.hetero.get("inject", 0.0):
        why = "hetero.inject is 0 (no wait to order)"
    elif config.get("mode", "bsp") == "asp":
        why = "async workers wait before they compute, in their own programs"
    else:
        return []
    return [("hetero.inject_order", f"hetero.inject_order={order!r} is set but {why}")]


def _unread_asp(config: ml_collections.ConfigDict) -> list[tuple[str, str]]:
    """(key, sentence) for each `asp` key set while the run is synchronous: a time budget or
    staleness bound given without `mode=asp` ran a BSP run without a word."""
    if config.get("mode", "bsp") == "asp" or "asp" not in config:
        return []
    defaults = base_config().asp
    return [
        (f"asp.{key}", f"asp.{key} is set but mode={config.mode!r} does not read it (set "
         "mode=asp for asynchronous training)")
        for key, value in config.asp.items()
        if set_away(value, defaults.get(key))
    ]  # fmt: skip


def unread_controller_keys(config: ml_collections.ConfigDict) -> list[str]:
    """The warnings of `_unread_controller`."""
    return [sentence for _, sentence in _unread_controller(config)]


def unread_dataset_keys(config: ml_collections.ConfigDict) -> list[str]:
    """The warnings of `_unread_dataset`."""
    return [sentence for _, sentence in _unread_dataset(config)]


def unread_optimizer_keys(config: ml_collections.ConfigDict) -> list[str]:
    """The warnings of `_unread_optimizer`."""
    return [sentence for _, sentence in _unread_optimizer(config)]


def _unread_controller(config: ml_collections.ConfigDict) -> list[tuple[str, str]]:
    """(key, sentence) naming each controller key set (away from `base_config`'s value) that the
    policy `controller.name` does not take: it is dropped (`gain` of a plug-in whose name was
    not given ran `static`; `deadband` under predictive). A warning, not an error: an
    ablation over `controller.name` sets one policy's keys for every cell."""
    name = config.controller.name
    own = {*controllers.accepted_kwargs(name), "name", "plugin"}
    defaults = base_config().controller

    out = []
    for key, value in config.controller.items():
        if key in own or not set_away(value, defaults.get(key)):
            continue
        takers = [n for n in controllers.available() if key in controllers.accepted_kwargs(n)]
        out.append((
            f"controller.{key}",
            f"controller.{key} is set but controller.name={name!r} does not take it (taken by "
            f"{', '.join(takers)}); set controller.name to one of those to use it",
        ))  # fmt: skip
    return out


def _unread_dataset(config: ml_collections.ConfigDict) -> list[tuple[str, str]]:
    """(key, sentence) naming each dataset key set (away from `base_config`'s value) that the data
    set `dataset.name` does not read (`dataset.num_classes=100` for text, whose vocabulary is
    its 256 bytes, ran without a word)."""
    from omnilearn_jax.data import datasets

    name, defaults = config.dataset.name, base_config().dataset
    # Sizes are left out: configs derive step counts from num_train whatever the data set
    # (paper_bsp's documented npz command keeps its synthetic num_train for eval_every).
    unread = datasets.unread(name, config.dataset.keys()) - {"num_train", "num_test"}
    reads = ", ".join(k for k in datasets.reads(name) if k != "name") or "no other key"
    return [
        (
            f"dataset.{key}",
            f"dataset.{key} is set but dataset.name={name!r} does not read it (it reads {reads})",
        )
        for key, value in config.dataset.items()
        if key in unread and set_away(value, defaults.get(key))
    ]


def _unread_optimizer(config: ml_collections.ConfigDict) -> list[tuple[str, str]]:
    """(key, sentence) naming each optimizer key set (away from `base_config`'s value) that the
    optimiser or the schedule does not read (engine/optim.py): `warmup_steps` outside
    `warmup_cosine` trained at the full rate from step 1 without a word; sgd's `momentum` and
    `nesterov` under adamw; adamw's `b1` and `b2` under sgd."""
    section, defaults = config.optimizer, base_config().optimizer
    name, schedule = section.name, section.get("schedule", "constant")
    unread = {"momentum", "nesterov"} if name == "adamw" else {"b1", "b2"}
    out = [
        (f"optimizer.{key}", f"optimizer.{key} is set but optimizer.name={name!r} does not read it")
        for key, value in section.items()
        if key in unread and set_away(value, defaults.get(key))
    ]
    if schedule != "warmup_cosine" and set_away(section.get("warmup_steps", 0), 0):
        out.append((
            "optimizer.warmup_steps",
            f"optimizer.warmup_steps={section.warmup_steps} is set but optimizer.schedule="
            f"{schedule!r} has no warm-up; set optimizer.schedule=warmup_cosine to use it",
        ))  # fmt: skip
    return out


# What a cost model in each mode leaves unread (omnilearn_jax/cluster/cost.py): `linear` is
# b * per_sample_cost / speed exactly; a measured curve replaces the formula but keeps overhead.
_COST_UNREAD = {
    "linear": ("fixed_cost", "overhead", "cliff_batch", "cliff_penalty"),
    "curve": ("per_sample_cost", "fixed_cost", "cliff_batch", "cliff_penalty"),
}


def _unread_cost(config: ml_collections.ConfigDict) -> list[tuple[str, str]]:
    """(key, sentence) naming each cost key set (away from its default) that the run's times
    do not read: the formula's keys beside `linear` or a measured `curve`, `cliff_penalty`
    without `cliff_batch`, `memory_factor` without `memory_limits`; and on the wall clock
    (which measures each step) every cost key and a profile's speeds without `hetero.inject`,
    where only the oracle's time table reads them. Each ran without a word."""
    cost, defaults = config.cost, cost_defaults()

    def set_keys(keys) -> list[str]:
        return [k for k in keys if set_away(cost.get(k, defaults[k]), defaults[k])]

    out = []
    mode = "curve" if cost.get("curve", "") else "linear" if cost.get("linear", False) else ""
    if mode:
        said = f"cost.curve={cost.curve!r}" if mode == "curve" else "cost.linear=True"
        for key in set_keys(_COST_UNREAD[mode]):
            out.append((f"cost.{key}", f"cost.{key} is set but {said} does not read it"))
    if not cost.get("cliff_batch", 0) and set_keys(("cliff_penalty",)) and mode != "linear":
        out.append(("cost.cliff_penalty", "cost.cliff_penalty is set but cost.cliff_batch is 0 "
                    "(no cliff), so it does nothing"))  # fmt: skip
    if not len(cost.get("memory_limits", ())) and set_keys(("memory_factor",)):
        out.append(("cost.memory_factor", "cost.memory_factor is set but cost.memory_limits is "
                    "empty, so it does nothing"))  # fmt: skip
    if config.clock != "wall" or config.controller.name == "oracle":
        return out
    said = {key for key, _ in out}
    for key in set_keys(k for k in defaults if k != "curve"):
        if f"cost.{key}" not in said:
            sentence = (
                f"cost.{key} is set but the wall clock measures each step's times (only the "
                "oracle's time table reads the cost model)"
            )
            out.append((f"cost.{key}", sentence))
    name = config.hetero.get("name", "uniform")
    if name != "uniform" and not config.hetero.get("inject", 0.0):
        out.append(("hetero.name", f"hetero.name={name!r} on the wall clock with hetero.inject=0: "
                    "the workers compute at the machine's own speeds; the profile's are only "
                    "recorded (metrics' speeds) and read by the oracle; set hetero.inject "
                    "(seconds a sample) to emulate them"))  # fmt: skip
    return out


def calibration_notes(config: ml_collections.ConfigDict) -> list[str]:
    """Sentences for a calibrated cost (`cost.per_sample_cost=0`) beside a fixed cost: the
    measured step already holds its fixed work, and the default 0.05 s at speed 1 made ~98 %
    of a smoke job's modelled time (calibrated 1.2e-4 s a sample, 8 rows a worker)."""
    cost = config.cost
    if cost.get("per_sample_cost", 1.0) != 0 or not cost.get("fixed_cost", 0.0):
        return []
    if cost.get("curve", "") or cost.get("linear", False):
        return []  # neither reads fixed_cost (refused or warned elsewhere)
    return [
        f"cost.per_sample_cost=0 calibrates the per-sample cost from the whole measured step, "
        f"and cost.fixed_cost={cost.fixed_cost} s (at speed 1) is added on top of it; set "
        f"cost.fixed_cost=0 for a model of the measurement alone"
    ]
