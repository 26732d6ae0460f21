"""The optimiser named in the config's `optimizer` section (optax)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax
import optax

from omnilearn_jax.engine.memo import Kept, plain_key

OPTIMIZERS = ("sgd", "adamw")
SCHEDULES = ("constant", "cosine", "warmup_cosine")


def check(section: Mapping[str, Any]) -> None:
    if section["name"] not in OPTIMIZERS:
        raise ValueError(
            f"unknown optimizer {section['name']!r}; valid names: {', '.join(OPTIMIZERS)}"
        )
    schedule = section.get("schedule", "constant")
    if schedule not in SCHEDULES:
        raise ValueError(
            f"unknown optimizer.schedule {schedule!r}; valid schedules: {', '.join(SCHEDULES)}"
        )
    # NaN passed `<= 0` and failed after compiling as a "non-finite loss" at step 2
    if not (math.isfinite(section["learning_rate"]) and section["learning_rate"] > 0):
        raise ValueError(
            f"optimizer.learning_rate must be a finite number > 0, got {section['learning_rate']}"
        )
    # Each out-of-range value trained to the end (momentum 1.5 diverges, a negative weight
    # decay grows the weights, negative warm-up steps left optax's schedule undefined)
    ranges = {
        "momentum": (lambda v: 0 <= v < 1, "in [0, 1)"),
        "weight_decay": (lambda v: v >= 0, ">= 0"),
        "warmup_steps": (lambda v: v >= 0, ">= 0"),
        "b1": (lambda v: 0 <= v < 1, "in [0, 1)"),
        "b2": (lambda v: 0 <= v < 1, "in [0, 1)"),
    }
    for key, (ok, says) in ranges.items():
        if key in section and not ok(section[key]):
            raise ValueError(f"optimizer.{key} must be {says}, got {section[key]}")


def learning_rate(section: Mapping[str, Any], num_steps: int) -> optax.Schedule | float:
    lr = float(section["learning_rate"])
    schedule = section.get("schedule", "constant")
    if schedule == "cosine":
        return optax.cosine_decay_schedule(lr, max(num_steps, 1))
    if schedule == "warmup_cosine":
        warmup = int(section.get("warmup_steps", 0))
        return optax.warmup_cosine_decay_schedule(0.0, lr, warmup, max(num_steps, warmup + 1))
    return lr


def create(
    section: Mapping[str, Any], num_steps: int, *, skip_nonfinite: int = 0, weighted: bool = False
) -> optax.GradientTransformation:
    """sgd (momentum, optional nesterov, L2 via add_decayed_weights) or adamw.

    `skip_nonfinite > 0` drops any update whose gradient is not finite (parameters and
    optimiser state stay as they were), up to that many times in a row.

    `weighted=True` builds the optimiser of an asynchronous server (see `weighted`).
    """
    check(section)

    def build() -> optax.GradientTransformation:
        tx = _weighted(section, num_steps) if weighted else _create(section, num_steps)
        return optax.apply_if_finite(tx, skip_nonfinite) if skip_nonfinite > 0 else tx

    # The same transformation again for the same arguments (read when it is built): programs
    # traced over it are reused by a process's later runs (memo.Kept).
    return _KEPT.get(plain_key(section, num_steps, skip_nonfinite, weighted), build)


_KEPT = Kept(16)


def coupled_decay(section: Mapping[str, Any]) -> float:
    """The L2 coefficient that is part of the loss (sgd's weight_decay; adamw's is decoupled).

    Under a weighted (async) optimiser this term is the workers' to add: worker k adds
    `weight_k * coupled_decay * pulled_params` to the gradient it pushes, so that with
    staleness 0 the W contributions of a round sum to one BSP step's gradient exactly.
    """
    return float(section.get("weight_decay", 0.0)) if section["name"] == "sgd" else 0.0


def _weighted(section: Mapping[str, Any], num_steps: int) -> optax.GradientTransformation:
    """An optimiser whose update stands for a share of one BSP step.

    `update(grads, state, params, *, weight=1.0, step_scale=1.0)`: adamw's decoupled weight
    decay is scaled by `weight` (the share of a BSP step's work the update stands for), and
    the whole update by `step_scale` (the learning rate scaled per update: what makes a
    share meaningful under a scale-invariant optimiser such as Adam). sgd's L2 term is
    left out here: it belongs to the loss, so the workers add it (`coupled_decay`).
    With weight = step_scale = 1 this is the optimiser `create` builds, minus sgd's L2.
    """
    lr = learning_rate(section, num_steps)
    if section["name"] == "adamw":
        inner = optax.chain(
            optax.scale_by_adam(b1=section.get("b1", 0.9), b2=section.get("b2", 0.999)),
            _weighted_decay(float(section.get("weight_decay", 0.0))),
            optax.scale_by_learning_rate(lr),
        )
    else:
        momentum = float(section.get("momentum", 0.0))
        inner = optax.sgd(
            lr, momentum=momentum or None, nesterov=bool(section.get("nesterov", False))
        )
    return optax.chain(inner, _scale_by_step())


def _weighted_decay(rate: float) -> optax.GradientTransformationExtraArgs:
    def update(updates, state, params=None, *, weight=1.0, **extra):
        del extra
        if not rate:
            return updates, state
        return jax.tree.map(lambda u, p: u + weight * rate * p, updates, params), state

    return optax.GradientTransformationExtraArgs(lambda params: optax.EmptyState(), update)


def _scale_by_step() -> optax.GradientTransformationExtraArgs:
    def update(updates, state, params=None, *, step_scale=1.0, **extra):
        del params, extra
        return jax.tree.map(lambda u: step_scale * u, updates), state

    return optax.GradientTransformationExtraArgs(lambda params: optax.EmptyState(), update)


def _create(section: Mapping[str, Any], num_steps: int) -> optax.GradientTransformation:
    lr = learning_rate(section, num_steps)
    weight_decay = float(section.get("weight_decay", 0.0))
    if section["name"] == "adamw":
        return optax.adamw(
            lr, b1=section.get("b1", 0.9), b2=section.get("b2", 0.999), weight_decay=weight_decay
        )
    momentum = float(section.get("momentum", 0.0))
    sgd = optax.sgd(lr, momentum=momentum or None, nesterov=bool(section.get("nesterov", False)))
    if weight_decay:
        return optax.chain(optax.add_decayed_weights(weight_decay), sgd)
    return sgd
