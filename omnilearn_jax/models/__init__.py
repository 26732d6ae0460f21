"""Models by name (Flax NNX), turned into a pure `apply(params, x) -> logits` pair.

No model keeps batch statistics: normalisation is GroupNorm (or, in the transformer,
LayerNorm), which normalises each example on its own, so padded rows cannot leak into valid
ones and the result is the same under any split of the global batch (docs/trainer.md,
"Models and normalisation", explains the choice).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import jax
from flax import nnx

from omnilearn_jax.engine.memo import Kept, plain_key
from omnilearn_jax.models.cnn import CNN
from omnilearn_jax.models.mlp import MLP
from omnilearn_jax.models.resnet import ResNet18
from omnilearn_jax.models.transformer import Transformer

_MODELS: dict[str, Callable[..., nnx.Module]] = {
    "mlp": MLP,
    "cnn": CNN,
    "resnet18": ResNet18,
    "transformer": Transformer,
}

ApplyFn = Callable[[Any, jax.Array], jax.Array]


def available() -> tuple[str, ...]:
    return tuple(sorted(_MODELS))


def check_name(name: str) -> None:
    if name not in _MODELS:
        raise ValueError(f"unknown model {name!r}; valid names: {', '.join(available())}")


def check_sizes(section: Mapping[str, Any]) -> None:
    """A model section's sizes, checked before anything is built: a raw ZeroDivisionError or
    GroupNorm's "Number of groups (8) does not divide the number of channels (12)" before."""
    name = section["name"]
    sizes = () if name == "transformer" else ("hidden", "width")  # it checks its own
    for key in sizes:
        if key in section and int(section[key]) < 1:
            raise ValueError(f"model.{key} must be >= 1, got {section[key]}")
    if name == "mlp" and int(section.get("depth", 1)) < 0:  # 0: a linear model
        raise ValueError(f"model.depth must be >= 0 hidden layers, got {section['depth']}")
    # GroupNorm takes min(8, channels) groups (cnn.group_norm): above 8, a multiple of 8.
    channels = ()
    if name == "cnn" and section.get("norm", True):
        channels = tuple(section.get("features", ()))
    elif name == "resnet18":
        channels = tuple(int(section["width"]) * k for k in (1, 2, 4, 8))
    key = "features" if name == "cnn" else "width"
    if name == "cnn" and not all(int(c) >= 1 for c in section.get("features", ())):
        # without a norm, a ZeroDivisionError from the initialiser after the run started
        raise ValueError(f"model.features must all be >= 1 channels, got {section['features']}")
    for c in channels:
        if c < 1 or (c > 8 and c % 8):
            raise ValueError(
                f"model.{key}={section[key]!r} gives {c} channels; {name}'s group norm needs "
                f"each channel count at most 8 or a multiple of 8"
            )


def create(
    section: Mapping[str, Any], input_shape: tuple[int, ...], num_classes: int, seed: int
) -> tuple[ApplyFn, Any]:
    """Builds the model named in the config's `model` section.

    Returns `(apply, params)`: `apply(params, x)` maps a batch [n, *input_shape] to logits
    [n, num_classes] (the transformer: token ids [n, L] to logits [n, L, num_classes], the
    vocabulary) and is a pure function, so the train step can differentiate it and run
    it inside `shard_map`, `pmap` and `lax.while_loop`.
    """
    check_name(section["name"])
    kwargs = {k: v for k, v in dict(section).items() if k != "name"}
    cls = _MODELS[section["name"]]
    shape = tuple(input_shape)
    key = plain_key(kwargs, shape, num_classes)

    def initialiser():  # one compiled program instead of one tiny compile per parameter
        args = copy.deepcopy(kwargs)  # the caller's may change later
        return nnx.jit(
            lambda: cls(input_shape=shape, num_classes=num_classes, rngs=nnx.Rngs(seed), **args)
        )

    seeded = plain_key(kwargs, shape, num_classes, seed)
    model = _INITIALISERS.get(seeded and (cls, seeded), initialiser)()
    graphdef, params = nnx.split(model, nnx.Param)

    def apply(params, x):
        return nnx.merge(graphdef, params)(x)

    # apply depends on the graph alone (not the seed): the same function for the same graph
    # lets jax.jit reuse every program traced over it.
    return _APPLY.get(key and (cls, graphdef, key), lambda: apply), nnx.to_pure_dict(params)


# What a process keeps for its next run of a model (oldest out first): each seed's jitted
# initialiser (a second run of a model and seed traces nothing: 0.1-0.3 s a run otherwise)
# and each graph's `apply`. Keyed by class and the arguments' repr (1, 1.0 and True differ);
# arguments that are not plain config data are not kept.
KEEP_INITIALISERS = 16
_INITIALISERS = Kept(KEEP_INITIALISERS)
_APPLY = Kept(KEEP_INITIALISERS)


def param_count(params) -> int:
    return sum(int(p.size) for p in jax.tree.leaves(params))


def param_bytes(params) -> int:
    return sum(int(p.size) * p.dtype.itemsize for p in jax.tree.leaves(params))
