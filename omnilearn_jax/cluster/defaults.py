"""Typed defaults for the `hetero` and `cost` config sections.

Every key has a non-None default of the type the command line must parse (tuples for
lists, strings for paths), so `--config.hetero.level=8` works on any config built from
these. Configs should start from `hetero_defaults()` / `cost_defaults()` and override.
"""

import math
import numbers
from collections.abc import Mapping
from typing import Any

_HETERO: dict[str, Any] = {
    # Base profile: uniform | hl | cores | schedule | trace, or a modifier name
    # (noise | random_walk | preempt) meaning `base` with that modifier switched on.
    "name": "uniform",
    "base": "uniform",
    # hl / schedule-by-levels: paper level (1, 2, 4, 8) and core table (bsp | asp).
    "level": 1,
    "variant": "bsp",
    # cores: one relative speed per worker.
    "cores": (),
    # schedule: either HL levels per segment or W speeds per segment (flattened).
    "levels": (),
    "segment_speeds": (),
    "segment": 1,
    "unit": "epochs",
    # trace: CSV with header step,worker,speed.
    "path": "",
    # Modifiers, each on when its strength is set; all multiply the base speeds.
    "noise": 0.0,
    "walk_sigma": 0.0,
    "walk_min": 0.25,
    "walk_max": 4.0,
    "preempt_worker": 0,
    "preempt_intervals": (),
    "preempt_trickle": 0.01,
    # clock=wall only: a worker also waits inject * b / speed seconds, so one machine shows
    # real heterogeneity (0 = nothing injected, for real mixed hardware). In BSP the devices
    # compute one at a time, each alone, and each wait follows its compute ('alone', as on
    # hardware of their own); or all compute at once from the step's start ('after'); or each
    # waits first and then computes ('before'). Async workers wait before they compute.
    "inject": 0.0,
    "inject_order": "alone",
}

_COST: dict[str, Any] = {
    "per_sample_cost": 0.01,  # seconds per sample at speed 1
    "fixed_cost": 0.05,  # seconds per step at speed 1 (kernel launches, amortised by b)
    "overhead": 0.0,  # seconds per step, independent of speed
    "cliff_batch": 0,  # per-sample cost grows past this batch size; 0 disables
    "cliff_penalty": 1.0,  # per-sample multiplier slope past the cliff
    "noise": 0.0,  # lognormal sigma of multiplicative time noise
    "linear": False,  # True: time = b * per_sample_cost / speed exactly
    # A measured cost curve replaces the formula above (per_sample_cost, fixed_cost, cliff):
    # '' = none, 'measure' = profile the real step at start, else a JSON file (curve.py).
    "curve": "",
    # Per-worker memory limits in rows (() = none): past its limit a worker's compute time is
    # multiplied by memory_factor (paging, or the batch run in pieces).
    "memory_limits": (),
    "memory_factor": 2.0,
    "latency": 5e-5,  # seconds per ring hop
    "bandwidth": 1.25e9,  # bytes per second per link (10 Gbit/s)
}


def hetero_defaults() -> dict[str, Any]:
    """A fresh copy of the `hetero` section defaults."""
    return dict(_HETERO)


def cost_defaults() -> dict[str, Any]:
    """A fresh copy of the `cost` section defaults."""
    return dict(_COST)


def is_whole(value: Any) -> bool:
    """A finite whole number, Python's or NumPy's, not a bool (the check behind hetero.level,
    hetero.levels and a cost curve's batch sizes, each once cut to an int without a word)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return math.isfinite(value) and int(value) == value


def set_away(value: Any, default: Any) -> bool:
    """Whether a config value differs from its default (a list read back from JSON equals
    the default's tuple): the test of the unread-key warnings (hetero's, the controller's)."""

    def plain(v: Any) -> Any:
        return tuple(v) if isinstance(v, list | tuple) else v

    return plain(value) != plain(default)


def read_section(section: Mapping[str, Any] | Any, defaults: dict[str, Any], label: str) -> dict:
    """Merge a config section (ConfigDict or dict) over its defaults, rejecting typos.

    An unknown key is almost always a misspelt override that would otherwise be ignored
    silently, leaving the run on the default profile.
    """
    section = {} if section is None else section
    keys = list(section.keys())
    unknown = sorted(k for k in keys if k not in defaults)
    if unknown:
        raise ValueError(f"unknown {label} key(s) {unknown}; known keys: {sorted(defaults)}")
    return {k: section.get(k, v) for k, v in defaults.items()}
