"""Config checks that run before anything is loaded or compiled.

`check_config_types(config)` compares a config against the base config (every key with its
typed default): a key the base does not have is almost always a typo that would otherwise be
ignored, so it is an error with the closest known key; a value of the wrong type is an error
naming both types. ml_collections already rejects unknown keys given on the command line, but
a config built in Python can still carry them.

`check_config(config)` adds the name and feasibility checks that need no devices or data
(controller, profile, dataset, model, bounds), so a runner can vet every cell of a grid at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ml_collections
import numpy as np

import controllers
from omnilearn_jax.config_args import check_choice, suggest

_SECTION = "section"

# Keys of earlier versions, and what replaced them: one mechanism (per-device buckets) took
# the place of the layouts and their knobs.
REMOVED = {
    "layout": "every device now computes a block of its own rows (docs/trainer.md); drop it",
    "micro_batch_size": "use memory_rows (the most rows a device computes at once)",
    "capacity_buckets": "use bucket_ratio (per-device buckets are always on)",
}


def _kind(value: Any) -> str:
    if isinstance(value, Mapping | ml_collections.ConfigDict):
        return _SECTION
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | np.integer):
        return "int"
    if isinstance(value, float | np.floating):
        return "float"
    if isinstance(value, tuple | list):
        return "tuple"
    return type(value).__name__


def _flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """{'a.b': leaf, ...} plus an entry for every section itself."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        full = f"{prefix}{key}"
        out[full] = value
        if _kind(value) == _SECTION:
            out.update(_flatten(value, f"{full}."))
    return out


def _compatible(expected: Any, got: Any) -> bool:
    want, have = _kind(expected), _kind(got)
    if want == "None":
        return True
    if want == "float" and have == "int":
        return True  # ml_collections widens int to float too
    if want != have:
        return False
    if want == "tuple" and expected:  # elements like the default's (ints fit a float tuple)
        return all(
            _compatible(expected[0] if len(set(map(_kind, expected))) == 1 else None, v)
            for v in got
        )
    return True


def default_reference(config: Any = None) -> ml_collections.ConfigDict:
    """The base config, after importing the config's controller plug-in (if it names one), so
    the plug-in's keyword arguments count as known keys."""
    plugin = ""
    if config is not None and "controller" in config:
        plugin = config["controller"].get("plugin", "") or ""
    controllers.load_plugin(plugin)
    from omnilearn_jax.config_base import base_config

    return base_config()


def check_config_types(config: Any, reference: Any = None) -> None:
    """Raises one ValueError line listing unknown keys (with the closest known key) and values
    whose type differs from the reference's (the base config when None)."""
    reference = default_reference(config) if reference is None else reference
    known, given = _flatten(reference), _flatten(config)
    problems = []
    for key, value in given.items():
        parent = key.rpartition(".")[0]
        if parent and parent in given and _kind(known.get(parent)) != _SECTION:
            continue  # inside an unknown section or a leaf: reported once, at the top
        if key in REMOVED and key not in known:
            problems.append(f"config key {key!r} was removed: {REMOVED[key]}")
        elif key not in known:
            problems.append(f"unknown config key {key!r}{suggest(key, known)}")
        elif not _compatible(known[key], value):
            want, have = _kind(known[key]), _kind(value)
            detail = f"{have} {value!r}" if have != _SECTION else "a section"
            expect = want if want != _SECTION else "a section"
            problems.append(f"config key {key!r} should be {expect}, got {detail}")
    if problems:
        raise ValueError("; ".join(problems))


def check_config(config: Any) -> None:
    """Types, then every check that needs neither devices nor data; raises ValueError."""
    check_config_types(config)
    import controllers
    from omnilearn_jax import cluster, validate

    check_choice("controller", config.controller.name, controllers.available())
    check_choice("hetero profile", config.hetero.name, cluster.available_profiles())
    # Devices are checked by the trainer; here assume the requested count (or one a worker).
    validate.check_config(config, config.num_devices or config.num_workers)
    w, b = config.num_workers, config.global_batch_size
    controllers.check_bounds(w, b, config.controller.b_min, config.controller.b_max)
    try:
        controllers.make_from_config(config.controller)
    except TypeError as e:  # unknown keyword argument of the policy
        raise ValueError(str(e)) from None
