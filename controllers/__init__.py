"""Batch-size controllers: policies that split a fixed global batch over heterogeneous workers.

Use `make(name, **kwargs)` or `make_from_config(section)`; add a policy with `@register(name)`.
"""

# Importing a policy module registers it; nothing else happens at import time.
from controllers import oracle, pi, predictive, proportional, static  # noqa: F401
from controllers.allocate import allocate, check_bounds
from controllers.base import (
    NO_UPPER_BOUND,
    PAPER_BOUND,
    Controller,
    Observation,
    initial_sizes,
    is_concrete,
    linear_time_table,
    resolve_bounds,
)
from controllers.registry import (
    accepted_kwargs,
    available,
    default_kwargs,
    load_plugin,
    make,
    make_from_config,
    named,
    register,
    shared_from_config,
)

# The policies the Quickstart ablation sweeps (`predictive` is registered too but left out
# of it, so the measured Quickstart tables stay comparable; plug-ins add to `available()`).
BUILT_IN = ("static", "proportional", "pi", "oracle")

__all__ = [
    "BUILT_IN",
    "NO_UPPER_BOUND",
    "PAPER_BOUND",
    "Controller",
    "Observation",
    "accepted_kwargs",
    "allocate",
    "available",
    "check_bounds",
    "default_kwargs",
    "initial_sizes",
    "is_concrete",
    "linear_time_table",
    "load_plugin",
    "make",
    "make_from_config",
    "named",
    "register",
    "resolve_bounds",
    "shared_from_config",
]
