"""The optimiser named in the config's `optimizer` section (optax)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optax

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
    if section["learning_rate"] <= 0:
        raise ValueError(f"optimizer.learning_rate must be > 0, got {section['learning_rate']}")


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
    section: Mapping[str, Any], num_steps: int, *, skip_nonfinite: int = 0
) -> optax.GradientTransformation:
    """sgd (momentum, optional nesterov, L2 via add_decayed_weights) or adamw.

    `skip_nonfinite > 0` drops any update whose gradient is not finite (parameters and
    optimiser state stay as they were), up to that many times in a row.
    """
    check(section)
    tx = _create(section, num_steps)
    return optax.apply_if_finite(tx, skip_nonfinite) if skip_nonfinite > 0 else tx


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
