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
    model = _initialiser(cls, kwargs, tuple(input_shape), num_classes, seed)()
    graphdef, params = nnx.split(model, nnx.Param)

    def apply(params, x):
        return nnx.merge(graphdef, params)(x)

    return apply, nnx.to_pure_dict(params)


# The last few models' jitted initialisers, kept for the process: a second run of a model and
# seed traces nothing (0.1-0.3 s a run otherwise). Oldest out first past KEEP_INITIALISERS.
_INITIALISERS: dict[tuple, Callable[[], nnx.Module]] = {}
KEEP_INITIALISERS = 16


def _initialiser(cls, kwargs: dict, input_shape: tuple, num_classes: int, seed: int):
    """The jitted () -> model of `cls(**kwargs, ...)` for `seed`: one compiled program
    instead of one tiny compile per parameter. Kept by class, seed and the arguments' repr
    (which tells 1, 1.0 and True apart) where every argument is plain config data."""

    def build() -> nnx.Module:
        return cls(input_shape=input_shape, num_classes=num_classes, rngs=nnx.Rngs(seed), **kwargs)

    if not all(_plain(v) for v in (*kwargs.values(), input_shape, num_classes, seed)):
        return nnx.jit(build)
    key = (cls, seed, repr((sorted(kwargs.items()), input_shape, num_classes)))
    if key not in _INITIALISERS:
        kwargs = copy.deepcopy(kwargs)  # the caller's may change later
        while len(_INITIALISERS) >= KEEP_INITIALISERS:
            del _INITIALISERS[next(iter(_INITIALISERS))]
        _INITIALISERS[key] = nnx.jit(build)
    return _INITIALISERS[key]


def _plain(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, bool | int | float | str)


def param_count(params) -> int:
    return sum(int(p.size) for p in jax.tree.leaves(params))


def param_bytes(params) -> int:
    return sum(int(p.size) * p.dtype.itemsize for p in jax.tree.leaves(params))
