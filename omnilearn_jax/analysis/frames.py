"""The tidy schema: flat W&B-style rows of one run -> its `steps`, `workers` and summary rows.

Every source (run store, W&B offline log, W&B API) is first turned into the rows W&B would
hold: `{'step': int, 'loss': ..., 'worker/2/batch_size': ..., ...}`, one per step, train
and eval records of the same step merged (what W&B does). One converter then builds the
frames, so the sources cannot drift apart. Run stores are flattened with the tracker's own
`flatten_record`, the function that produced the W&B keys in the first place.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from omnilearn_jax.analysis import settings
from omnilearn_jax.cluster.registry import MODIFIER_PROFILES

# Run-level columns, taken from the resolved config and repeated on every row so that a
# `groupby('controller')` needs no join. (column, dotted config key)
RUN_KEYS: tuple[tuple[str, str], ...] = (
    ("controller", "controller.name"),
    ("hetero", "hetero.name"),
    ("level", "hetero.level"),
    ("seed", "seed"),
    ("mode", "mode"),
    ("clock", "clock"),
    ("model", "model.name"),
    ("dataset", "dataset.name"),
    ("num_workers", "num_workers"),
    ("global_batch_size", "global_batch_size"),
)
RUN_COLUMNS: tuple[str, ...] = ("run", *(name for name, _ in RUN_KEYS))
# Per-step columns every frame has (NaN where a run did not log them), in this order.
STEP_COLUMNS: tuple[str, ...] = (
    "step",
    "time",
    "loss",
    "accuracy",
    "step_time",
    "idle_fraction",
    "balance",
    "eval_loss",
    "eval_accuracy",
)
WORKER_COLUMNS: tuple[str, ...] = ("step", "worker", "batch_size", "worker_time", "speed")
SUMMARY_COLUMNS: tuple[str, ...] = (
    "status",
    "steps",
    "total_time",
    "final_eval_accuracy",
    "final_eval_loss",
    "time_to_target",
    "mean_idle_fraction",
    "final_eval_perplexity",  # text runs only (lower is better)
)
# Integer-valued columns; nullable Int64 because a column may exist for some runs only.
INT_COLUMNS = frozenset(
    {"seed", "level", "num_workers", "global_batch_size", "step", "worker", "batch_size"}
    | {"applied_worker", "staleness", "staleness_max", "worker_batch", "steps"}
)
STRING_COLUMNS = frozenset({"run", "controller", "hetero", "mode", "clock", "model", "dataset"})
# W&B leaf names of per-worker lists whose frame column differs (`worker_times` is logged
# as `worker/k/time`, which would read as wall-clock time next to `step`).
_LEAF_COLUMNS = {"time": "worker_time"}
# An async train record's scalar `worker` (who applied the update) would clash with the
# `worker` index of the workers frame.
_STEP_RENAMES = {"worker": "applied_worker"}


def config_value(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def run_columns(name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"run": name}
    for column, key in RUN_KEYS:
        out[column] = config_value(config, key)
    # hetero.level is read by the hl profile alone (or a modifier over it): a schedule's runs
    # were described as the default level 8 they never ran
    name = out["hetero"]
    base = config_value(config, "hetero.base") if name in MODIFIER_PROFILES else name
    if base != "hl":
        out["level"] = None
    return out


def merge_by_step(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per step, later values winning, in step order (W&B's row semantics)."""
    merged: dict[int, dict[str, Any]] = {}
    for row in rows:
        step = int(row["step"])
        merged.setdefault(step, {}).update(row)
        merged[step]["step"] = step
    return [merged[s] for s in sorted(merged)]


def _scalar(value: Any) -> bool:
    return isinstance(value, bool | int | float | str) or value is None


def split_rows(rows: list[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    """Flat rows -> (step records, worker records); W&B internals (`_step`, ...) dropped."""
    steps, workers = [], []
    for row in rows:
        step_rec: dict[str, Any] = {}
        per_worker: dict[int, dict[str, Any]] = {}
        for key, value in row.items():
            if key.startswith("_") or not _scalar(value):
                continue
            parts = key.split("/")
            if len(parts) == 3 and parts[0] == "worker" and parts[1].isdigit():
                leaf = _LEAF_COLUMNS.get(parts[2], parts[2])
                per_worker.setdefault(int(parts[1]), {})[leaf] = value
            else:
                step_rec[_STEP_RENAMES.get(key, key)] = value
        steps.append(step_rec)
        for k in sorted(per_worker):
            workers.append({"step": row["step"], "worker": k, **per_worker[k]})
    return steps, workers


def summary_row(summary: Mapping[str, Any], history_keys: set[str]) -> dict[str, Any]:
    """Scalar summary fields; W&B's copies of the last metric values are left out, and so is
    a null beyond the standard columns (a key cleared in W&B's merged summary: a resumed run
    that completes clears its earlier stop's `error`, `resume_step`, ...)."""
    out: dict[str, Any] = {c: None for c in SUMMARY_COLUMNS}
    for key, value in summary.items():
        if key.startswith("_") or "/" in key or key in history_keys or not _scalar(value):
            continue
        if value is None and key not in out:
            continue
        out[key] = value
    return out


def run_frames(
    name: str,
    config: Mapping[str, Any],
    rows: Iterable[Mapping[str, Any]],
    summary: Mapping[str, Any],
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(steps, workers, summaries) of one run from its flat rows, config and summary."""
    merged = merge_by_step(rows)
    history_keys = {k for row in merged for k in row}
    step_recs, worker_recs = split_rows(merged)
    ident = run_columns(name, config)
    steps = pd.DataFrame([{**ident, **r} for r in step_recs])
    workers = pd.DataFrame([{**ident, **r} for r in worker_recs])
    covered = {key for _, key in RUN_KEYS}
    row = {**ident, settings.SETTINGS: settings.to_json(config, covered)}
    summaries = pd.DataFrame([{**row, **summary_row(summary, history_keys)}])
    return steps, workers, summaries


def _ordered(frame: pd.DataFrame, first: tuple[str, ...]) -> pd.DataFrame:
    for column in first:
        if column not in frame.columns:
            frame[column] = math.nan
    rest = sorted(c for c in frame.columns if c not in first)
    return frame[list(first) + rest]


def normalise(frame: pd.DataFrame, first: tuple[str, ...], sort: list[str]) -> pd.DataFrame:
    """Fixed column order and dtypes, so frames from any source (or the cache) compare equal.

    Numbers are float64 (W&B returns an integral float such as `time = 50.0` as the int 50),
    integer columns nullable Int64, names strings.
    """
    frame = _ordered(frame.copy(), first)
    for column in frame.columns:
        values = frame[column]
        if column in STRING_COLUMNS:
            frame[column] = values.astype("string")
        elif column in INT_COLUMNS:
            frame[column] = pd.to_numeric(values, errors="coerce").round().astype("Int64")
        elif values.map(lambda v: isinstance(v, str)).any():
            frame[column] = values.astype("string")
        else:
            frame[column] = pd.to_numeric(values, errors="coerce").astype("float64")
    return frame.sort_values(sort, kind="stable").reset_index(drop=True)


def add_idle_time(workers: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """`idle_time` per worker and step: a logged `idle` when there is one, else, in BSP,
    the step time minus the worker's compute time (it waits at the barrier for the rest).

    Async updates have no barrier, so there it stays NaN unless logged.
    """
    if workers.empty:
        workers["idle_time"] = pd.Series(dtype="float64")
        return workers
    keys = ["run", "step"]
    joined = workers.merge(steps[[*keys, "step_time"]], on=keys, how="left")
    bsp = joined["mode"].fillna("bsp").ne("asp").to_numpy()
    derived = (joined["step_time"] - joined["worker_time"]).where(bsp)
    if "idle" in workers.columns:
        derived = joined["idle"].astype("float64").fillna(derived)
    workers = workers.copy()
    workers["idle_time"] = derived.astype("float64").to_numpy()
    return workers
