"""An ablation: a base run config, a grid of config keys, and the cells it expands to.

An ablation config file's `get_config(arg)` returns a ConfigDict (or dict) with
  base             the run config, 'configs/NAME.py' or 'configs/NAME.py:ARG'
  grid             {config key: tuple of values}; cells are the cartesian product
  overrides        optional {config key: value} applied to every cell
  group            optional name (default: the ablation file's stem)
  target_accuracy  optional; passed to every cell as train.target_accuracy when > 0
  num_processes    optional int >= 1 (default 1); > 1 runs each cell through
                   `omnilearn_jax.launch` as that many JAX processes sharing the cell's
                   `cpu_devices` (so the cell's total device count does not change)
  cpu_quota        optional tuple, a share of a core for each of the num_processes
                   processes, e.g. (1.0, 0.25): the launcher's --cpu_quota, a real
                   heterogeneous cluster from CPU quotas (docs/cluster_quotas.md)
  cpus             optional string, the cores of each process, e.g. '0,1': --cpus
  quota_from       optional, 'start' (default) or 'steps': when cpu_quota applies
                   (--quota_from; 'steps' compiles at full speed, then every step runs
                   under the quota)
Dotted keys need `ConfigDict(..., allow_dotted_keys=True)` or a plain dict.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import os
import re
from collections.abc import Mapping
from typing import Any

import ml_collections

import controllers
from omnilearn_jax.config.args import suggest
from omnilearn_jax.run import cgroups

_KNOWN = (
    "base",
    "grid",
    "overrides",
    "group",
    "target_accuracy",
    "num_processes",
    "cpu_quota",
    "cpus",
    "quota_from",
)


@dataclasses.dataclass(frozen=True)
class Cell:
    name: str  # directory name under the ablation workdir
    values: dict[str, Any]  # grid key -> value


@dataclasses.dataclass(frozen=True)
class Ablation:
    base: str
    grid: dict[str, tuple]
    overrides: dict[str, Any]
    group: str
    target_accuracy: float
    num_processes: int = 1
    cpu_quota: tuple[float, ...] = ()
    cpus: str = ""
    quota_from: str = "start"

    def cells(self) -> list[Cell]:
        keys = list(self.grid)
        labels = _labels(keys)
        cells, names = [], set()
        for combo in itertools.product(*(self.grid[k] for k in keys)):
            name = "__".join(f"{labels[k]}-{_safe(v)}" for k, v in zip(keys, combo, strict=True))
            if name in names:
                raise ValueError(f"two grid cells share the directory name {name!r}")
            if len(name.encode()) > MAX_NAME:  # an OSError traceback once the cells ran
                raise ValueError(
                    f"grid cell name {name[:60]}... is {len(name.encode())} bytes, over the "
                    f"file system's {MAX_NAME}: give the long values fewer elements, or ablate "
                    "them as named variants of the base config"
                )
            names.add(name)
            cells.append(Cell(name or "base", dict(zip(keys, combo, strict=True))))
        return cells

    def fixed_overrides(self) -> dict[str, Any]:
        """Keys every cell sets: the target accuracy (when > 0), then `overrides`."""
        out: dict[str, Any] = {}
        if self.target_accuracy > 0:
            out["train.target_accuracy"] = float(self.target_accuracy)
        out.update(self.overrides)
        return out

    def cell_overrides(self, cell: Cell) -> dict[str, Any]:
        """Every key a cell sets: the fixed overrides, then its grid values."""
        return {**self.fixed_overrides(), **cell.values}


# The longest file name most file systems take, in bytes (a cell is a directory).
MAX_NAME = 255


def _equal_values(values) -> bool:
    """Whether two of `values` are equal numbers (1 and 1.0; not 1 and '1')."""
    numbers = [v for v in values if isinstance(v, int | float)]
    return len(set(numbers)) < len(numbers)


def _labels(keys: list[str]) -> dict[str, str]:
    """Short directory labels: the last key component unless two keys share it."""
    last = [k.rpartition(".")[2] for k in keys]
    return {
        k: (s if last.count(s) == 1 else k.replace(".", "-"))
        for k, s in zip(keys, last, strict=True)
    }


def _safe(value: Any) -> str:
    if isinstance(value, tuple | list):
        value = "-".join(str(v) for v in value)
    return re.sub(r"[^A-Za-z0-9._+-]", "_", str(value)) or "empty"


def format_value(value: Any, inside: bool = False) -> str:
    """A value as `--config.KEY=VALUE` text that ml_collections parses back to the same value.
    A string inside a tuple is quoted: `(hl8,paper)` is read as the one string '(hl8,paper)',
    and every cell of an ablation with `wandb.tags=('hl8','paper')` failed."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        inner = ",".join(format_value(v, inside=True) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, str) and inside:
        return repr(value)
    return repr(value) if isinstance(value, float) else str(value)


def load_config_file(spec: str, module_name: str = "_loaded_config") -> Any:
    """Calls `get_config(arg)` of 'path/to/file.py[:arg]' (arg '' when absent)."""
    path, _, arg = spec.partition(":")
    if not os.path.isfile(path):
        raise ValueError(f"config file {path!r} not found")
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    if not hasattr(module, "get_config"):
        raise ValueError(f"config file {path!r} has no get_config(arg)")
    return module.get_config(arg) if arg else module.get_config()


def _plain(mapping: Any, what: str) -> dict[str, Any]:
    if mapping is None:
        return {}
    if isinstance(mapping, ml_collections.ConfigDict):
        return mapping.to_dict()
    if isinstance(mapping, Mapping):
        return dict(mapping)
    raise ValueError(f"ablation {what} must be a dict of config key -> value, got {mapping!r}")


def _dotted(mapping: dict[str, Any], what: str) -> None:
    """A nested section (`c.grid.controller.name = (...)`, `c.overrides.train.num_steps = 2`)
    is refused: keys are dotted config keys. A grid's got a fix that made no sense ("must be a
    tuple of values ... e.g. ({'name': ...},)"), an override's replaced the whole section and
    failed on the first key it had dropped (an AttributeError traceback)."""
    for key, value in mapping.items():
        if isinstance(value, Mapping):
            first = next(iter(value), "name")
            raise ValueError(
                f"{what}[{key!r}] is a section ({dict(value)!r}); {what} keys are dotted config "
                f"keys: write {what}={{'{key}.{first}': ...}} (a dict, or a "
                f"ConfigDict(..., allow_dotted_keys=True))"
            )


def from_config(config: Any, default_group: str = "ablation") -> Ablation:
    """Validates the ablation file's shape (not yet the run configs; see `check_cells`)."""
    config = _plain(config, "config")
    if "base" not in config and {"train", "model"} <= set(config):
        raise ValueError(
            "this is a run's config (it has train and model, no base and grid): run it with "
            "python -m omnilearn_jax.main --config=FILE --workdir=DIR, or ablate it from an "
            "ablation whose base it is (docs/ablations.md)"
        )
    unknown = sorted(set(config) - set(_KNOWN))
    if unknown:
        raise ValueError(
            f"unknown ablation key(s) {unknown}{suggest(unknown[0], _KNOWN)}; "
            f"valid keys: {', '.join(_KNOWN)}"
        )
    if not config.get("base"):
        raise ValueError("ablation config needs 'base', e.g. 'configs/smoke.py'")
    grid = _plain(config.get("grid"), "grid")
    _dotted(grid, "grid")
    if not grid:
        raise ValueError("ablation grid is empty; give at least one key with values")
    for key, values in grid.items():
        if not isinstance(values, tuple | list):
            raise ValueError(
                f"grid[{key!r}] must be a tuple of values, got {values!r}; e.g. {(values,)!r}"
            )
        if not values:
            raise ValueError(f"grid[{key!r}] has no values; give at least one")
        # by repr (0.1 and "0.1" differ) and by value (1 and 1.0, True and 1: one config
        # run twice, its two cells then averaged as two seeds of one setting by the table)
        if len(set(map(repr, values))) != len(values) or _equal_values(values):
            raise ValueError(f"grid[{key!r}] repeats a value: {tuple(values)!r}")
    overrides = _plain(config.get("overrides"), "overrides")
    _dotted(overrides, "overrides")
    both = sorted(set(grid) & set(overrides))
    if both:
        raise ValueError(f"key(s) {both} are both in grid and overrides; keep one")
    num_processes = config.get("num_processes", 1)
    # bool is an int subclass; True would silently mean one process.
    if isinstance(num_processes, bool) or not isinstance(num_processes, int) or num_processes < 1:
        raise ValueError(f"ablation num_processes must be an int >= 1, got {num_processes!r}")
    cpu_quota, cpus = _confinement(config, num_processes)
    quota_from = str(config.get("quota_from") or "start")
    if quota_from not in cgroups.QUOTA_FROM:
        raise ValueError(f"ablation quota_from is one of {cgroups.QUOTA_FROM}, got {quota_from!r}")
    if quota_from != "start" and not cpu_quota:
        raise ValueError("ablation quota_from says when cpu_quota applies: give cpu_quota too")
    return Ablation(
        base=str(config["base"]),
        grid={k: tuple(v) for k, v in grid.items()},
        overrides=overrides,
        group=str(config.get("group") or default_group),
        target_accuracy=float(config.get("target_accuracy") or 0.0),
        num_processes=num_processes,
        cpu_quota=cpu_quota,
        cpus=cpus,
        quota_from=quota_from,
    )


def _confinement(config: dict[str, Any], num_processes: int) -> tuple[tuple[float, ...], str]:
    """The ablation's `cpu_quota` and `cpus`, checked as the launcher checks them."""
    quota, cpus = config.get("cpu_quota") or (), str(config.get("cpus") or "")
    if not isinstance(quota, tuple | list):
        raise ValueError(f"ablation cpu_quota must be a tuple, one per process, got {quota!r}")
    if (quota or cpus) and num_processes == 1:
        raise ValueError("ablation cpu_quota and cpus need num_processes > 1 (one each)")
    try:
        quota = cgroups.confine(quota, cpus or "fit", num_processes)[0]
    except ValueError as e:
        raise ValueError(f"ablation {str(e).removeprefix('--')}") from None
    return tuple(quota), cpus


def launcher_options(ablation: Ablation) -> list[str]:
    """The launcher's --cpu_quota and --cpus for every cell (none if not set)."""
    options = []
    if ablation.cpu_quota:
        options.append("--cpu_quota=" + ",".join(map(str, ablation.cpu_quota)))
    if ablation.cpus:
        options.append(f"--cpus={ablation.cpus}")
    if ablation.quota_from != "start":
        options.append(f"--quota_from={ablation.quota_from}")
    return options


def load(spec: str) -> Ablation:
    path = spec.partition(":")[0]
    stem = os.path.splitext(os.path.basename(path))[0]
    return from_config(load_config_file(spec, "_ablation_config"), default_group=stem)


def apply_overrides(config: ml_collections.ConfigDict, overrides: Mapping[str, Any]) -> None:
    """Sets dotted keys on a run config; unknown keys and wrong types are one-line ValueErrors."""
    from omnilearn_jax.config.checks import default_reference

    known = _leaf_keys(default_reference(config))
    for key, value in overrides.items():
        parent, _, leaf = key.rpartition(".")
        try:
            section = config
            for part in parent.split(".") if parent else ():
                section = section[part]
            if leaf not in section:
                raise KeyError(key)
            section[leaf] = tuple(value) if isinstance(value, list) else value
        except KeyError:
            raise ValueError(f"unknown config key {key!r}{suggest(key, known)}") from None
        except TypeError as e:
            raise ValueError(f"config key {key!r}={value!r}: {e}") from None


def _leaf_keys(config: Any, prefix: str = "") -> list[str]:
    keys = []
    for k, v in config.items():
        if isinstance(v, ml_collections.ConfigDict):
            keys += _leaf_keys(v, f"{prefix}{k}.")
        else:
            keys.append(f"{prefix}{k}")
    return keys


def run_config(ablation: Ablation, cell: Cell | None = None) -> ml_collections.ConfigDict:
    """A cell's run config, built in-process; without a cell, what every cell shares."""
    overrides = ablation.cell_overrides(cell) if cell else ablation.fixed_overrides()
    # A plug-in named in the overrides registers first, so its arguments are config keys too.
    controllers.load_plugin(overrides.get("controller.plugin", ""))
    config = load_config_file(ablation.base, "_base_config")
    apply_overrides(config, overrides)
    return config


def split_devices(config: ml_collections.ConfigDict, num_processes: int) -> int:
    """CPU devices each process of a multi-process cell gets: the run's `cpu_devices` split
    evenly, so N processes x K devices is the same device count (and the same maths) as the
    one-process run of the same config."""
    total = int(config.cpu_devices)
    if total % num_processes:
        raise ValueError(
            f"cpu_devices={total} is not a multiple of num_processes={num_processes}; "
            "set cpu_devices in overrides to one that is"
        )
    return total // num_processes


def devices_per_process(ablation: Ablation, cell: Cell | None = None) -> int:
    return split_devices(run_config(ablation, cell), ablation.num_processes)


def check_cells(ablation: Ablation) -> list[str]:
    """Builds every cell's run config in-process and checks it before anything runs.

    A grid or override key that no cell reads (`controller.ki` over static and proportional:
    every cell ran, in pairs the table showed as two settings) is an error; one that some
    cells do not read (a policy's own key over several policies) is returned as a warning,
    once for the ablation where each cell's log had said it."""
    from omnilearn_jax.config.checks import check_config
    from omnilearn_jax.config.unread import unread_keys

    cells = ablation.cells()
    unread: dict[str, list[str]] = {}
    for cell in cells:
        try:
            config = run_config(ablation, cell)
            check_config(config)
            if ablation.num_processes > 1:
                split_devices(config, ablation.num_processes)
        except ValueError as e:
            raise ValueError(f"cell {cell.name}: {e}") from None
        for key, sentence in unread_keys(config).items():
            unread.setdefault(key, []).append(sentence)
    warnings = []
    for key in [*ablation.grid, *ablation.overrides]:
        found = unread.get(key, [])
        where = "grid key" if key in ablation.grid else "override"
        if len(found) == len(cells):
            raise ValueError(f"{where} {key} is read by no cell: {found[0]}")
        if found:
            warnings.append(
                f"{where} {key} is not read in {len(found)} of {len(cells)} cells: {found[0]}"
            )
    return warnings
