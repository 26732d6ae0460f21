"""Config keys beyond the run-level columns that tell loaded runs apart.

Two runs that differ only in, say, `controller.b_min` share every `frames.RUN_KEYS` column;
grouped by those alone they would be averaged as two seeds of one setting. Each run's summary
row therefore keeps its whole config (`SETTINGS`, a JSON string), and `expand` adds, to every
frame, one column per dotted config key whose value differs between the loaded runs (an
ablation's grid keys, for one). Keys that never change a run's result are left out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import pandas as pd

SETTINGS = "settings"  # the summaries column holding each run's config as JSON
# Bookkeeping: where a run logs and checkpoints, derived values, what the W&B side adds
# (`meta`: workdir, host), and the shape of the launch (one process or several, the CPU
# devices a process makes), which changes no update beyond float rounding; whether a run
# resumed and kept its parameters (a resumed run's updates are the same).
IGNORED = (
    "wandb.", "resolved.", "meta.", "distributed.", "cpu_devices",
    "train.log_every", "train.checkpoint_every", "train.keep_checkpoints",
    "train.resume", "train.save_params",
    # A sweep's parameters (experiments/ablation/sweep.py names them `config.<key>`), which the
    # W&B agent writes into the run's config beside the run's own keys: read back, each was a
    # grid key of its own (an extra column, no speed-up against static, a seed per group).
    "config.",
)  # fmt: skip
# ... except the CPU quotas a launched run's processes ran under: another machine, in effect.
KEPT = ("resolved.cpu_quota",)


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            out |= flatten(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def to_json(config: Mapping[str, Any], covered: set[str]) -> str:
    """The config's keys that may tell runs apart (not `covered`: the run-level columns'). An
    absolute path counts by its file name: the same file from two checkouts or hosts."""
    flat = flatten(config)
    kept = {  # keys starting with "_" are W&B's own
        k: os.path.basename(v) if isinstance(v, str) and os.path.isabs(v) else v
        for k, v in flat.items()
        if k not in covered and (k in KEPT or not k.startswith(IGNORED)) and not k.startswith("_")
    }
    return json.dumps(kept, sort_keys=True, default=str)


def varying(summaries: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """{dotted key: {run: value}} for the keys whose value differs between runs. Only keys
    every run has: a key some runs lack comes from another version of the code (a key added
    since), and a group of runs without it could find no reference group to compare with."""
    if SETTINGS not in summaries or summaries.empty:
        return {}
    per_run = {
        run: json.loads(text) if isinstance(text, str) else {}
        for run, text in zip(summaries["run"], summaries[SETTINGS], strict=True)
    }
    keys = sorted(set.intersection(*(set(flat) for flat in per_run.values())))
    out = {}
    for key in keys:
        values = {run: _hashable(flat[key]) for run, flat in per_run.items()}
        if len(set(values.values())) > 1:
            out[key] = values
    return out


def expand(frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """`frames` with one column per varying key (`varying`), named by the key; the summaries
    lose their `SETTINGS` column."""
    columns = varying(frames["summaries"])
    out = {}
    for name, frame in frames.items():
        frame = frame.drop(columns=[SETTINGS], errors="ignore").copy()
        for key, values in columns.items():
            frame[key] = _column(frame["run"].map(values))
        frame.attrs[SETTINGS] = sorted(columns)  # top-level keys (bucket_ratio) have no dot
        out[name] = frame
    return out


def is_setting(column: str, frame: pd.DataFrame | None = None) -> bool:
    """A column `expand` added to `frame`: a dotted config key (no other column has a dot),
    or a top-level one (`bucket_ratio`, `backend`, `capacity`), which `frame.attrs` names."""
    return "." in column or column in (frame.attrs.get(SETTINGS, ()) if frame is not None else ())


def _column(values: pd.Series) -> pd.Series:
    """Numbers as Int64 where all are whole, else float64 (missing where a run lacks the key),
    anything else as strings, so the column sorts and groups whatever mix of types the runs
    hold."""
    present = values.dropna()
    numeric = present.map(lambda v: isinstance(v, int | float) and not isinstance(v, bool))
    if numeric.all():
        whole = present.map(lambda v: float(v).is_integer()).all()
        return pd.to_numeric(values, errors="coerce").astype("Int64" if whole else "float64")
    return values.map(lambda v: None if v is None else str(v)).astype("string")


def _hashable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, list | dict) else value
