"""Where runs come from: local run stores, W&B offline logs, the W&B public API.

Each source finds its runs as `RunRef`s (a name, what to read, and a fingerprint that
changes when the run's files change) and parses one run into the flat rows, config and
summary that `frames.run_frames` turns into the tidy frames.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from typing import Any

from omnilearn_jax import tracking
from omnilearn_jax.run.runstore import whole_records

STORE_FILES = ("config.json", "metrics.jsonl", "summary.json")
# Directories that never hold runs of their own; skipping them keeps a walk over a large
# ablation (checkpoints, W&B's file copies) fast.
_SKIP_DIRS = {"wandb", "checkpoints", ".analysis_cache", "__pycache__", ".git"}


@dataclasses.dataclass(frozen=True)
class RunRef:
    name: str  # the `run` column: path relative to the analysed root ('.' -> its basename)
    location: Any  # run dir (store), list of offline-run dirs (offline), API run object
    fingerprint: str  # equal fingerprints mean the parsed frames may be reused


@dataclasses.dataclass
class Parsed:
    rows: list[dict[str, Any]]
    config: dict[str, Any]
    summary: dict[str, Any]


def _tail(path: str) -> str:
    # Two components: a resumed W&B run has one `run-<id>.wandb` per offline directory.
    return "/".join(os.path.normpath(path).split(os.sep)[-2:])


def _stat_key(paths: list[str]) -> str:
    parts = []
    for path in paths:
        try:
            st = os.stat(path)
            parts.append(f"{_tail(path)}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{_tail(path)}:-")
    return "|".join(parts)


def _walk(root: str) -> Iterator[str]:
    for dirpath, dirnames, _ in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        yield dirpath


def _name(root: str, run_dir: str) -> str:
    rel = os.path.relpath(run_dir, root)
    if rel == ".":
        return os.path.basename(os.path.abspath(root))
    return rel.replace(os.sep, "/")


# --- local run stores --------------------------------------------------------------------


def find_store_runs(root: str) -> list[RunRef]:
    """Every directory under `root` (itself included) holding a metrics.jsonl."""
    refs = []
    for run_dir in _walk(root):
        if os.path.isfile(os.path.join(run_dir, "metrics.jsonl")):
            paths = [os.path.join(run_dir, f) for f in STORE_FILES]
            refs.append(RunRef(_name(root, run_dir), run_dir, _stat_key(paths)))
    return refs


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as err:  # it did not say which file
        raise ValueError(f"{path} is not JSON: {err}") from None


def parse_store_run(run_dir: str) -> Parsed:
    """A run store as W&B rows: each record flattened with the tracker's own function (a run
    killed mid-write leaves a torn last line, left out; `whole_records`)."""
    rows = []
    path = os.path.join(run_dir, "metrics.jsonl")
    for _, record in whole_records(path):
        if "step" not in record:
            raise ValueError(f"{path}: a record without 'step': {json.dumps(record)[:120]}")
        rows.append({"step": int(record["step"]), **tracking.flatten_record(record)})
    config = _read_json(os.path.join(run_dir, "config.json"))
    summary = _read_json(os.path.join(run_dir, "summary.json"))
    return Parsed(rows, config, summary)


# --- W&B offline logs --------------------------------------------------------------------


def find_offline_runs(root: str) -> list[RunRef]:
    """Runs under `root` with W&B offline logs; the run is the directory holding `wandb/`.

    `root` may also be one `offline-run-*` directory. A resumed run has several offline
    directories of one W&B run id; they are read together, oldest first. Directories of other
    ids beside them (a fresh rerun in the same workdir, a shared `wandb.dir`) are other runs:
    a workdir's run is the id its summary.json names (else the newest), and a directory of
    several runs and no summary gives one run per id (named `DIR/ID`). They had been read as
    one run, the new run's steps followed by the old one's.
    """
    root = os.path.normpath(root)
    if os.path.basename(root) == "wandb":  # the wandb/ directory itself: its run is above
        root = os.path.dirname(root)
    groups: dict[str, list[str]] = {}
    if os.path.basename(root).startswith("offline-run-"):
        base = os.path.dirname(os.path.dirname(root))
        groups[base] = [root]
    else:
        base = root
        for run_dir in _walk(root):
            for name, dirs in _by_run_id(run_dir, tracking.find_offline_runs(run_dir)).items():
                groups[name] = dirs
    refs = []
    for run_dir, dirs in groups.items():
        # A run stopped while W&B was starting leaves an offline directory without its log
        # (run-*.wandb): nothing was logged there, so it is no segment (the read had failed
        # with FileNotFoundError), and a run with no log at all is no run.
        logged = {d: [f for f in sorted(os.listdir(d)) if f.endswith(".wandb")] for d in dirs}
        dirs = [d for d in dirs if logged[d]]
        if dirs:
            logs = [os.path.join(d, f) for d in dirs for f in logged[d]]
            refs.append(RunRef(_name(base, run_dir), dirs, _stat_key(logs)))
    return refs


def _by_run_id(run_dir: str, found: list[str]) -> dict[str, list[str]]:
    """{name: its offline directories} for the offline runs found under `run_dir`."""
    ids: dict[str, list[str]] = {}
    for d in found:  # oldest first, kept so within each id
        ids.setdefault(tracking.run_id_of(d), []).append(d)
    if len(ids) <= 1:
        return {run_dir: found} if found else {}
    summary = _read_json(os.path.join(run_dir, "summary.json")) or {}
    own = summary.get("wandb_run_id")
    if own in ids or os.path.exists(os.path.join(run_dir, "metrics.jsonl")):
        newest = tracking.run_id_of(found[-1])
        return {run_dir: ids[own if own in ids else newest]}
    return {os.path.join(run_dir, run_id): dirs for run_id, dirs in ids.items()}


def parse_offline_run(run_dirs: list[str]) -> Parsed:
    rows: list[dict[str, Any]] = []
    config: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    for run_dir in run_dirs:
        rows += tracking.read_offline_history(run_dir)
        config = tracking.read_offline_config(run_dir) or config
        # The last segment's summary replaces an earlier one whole, as summary.json is
        # rewritten: merged, a resumed run kept its interrupted segment's `error`.
        summary = tracking.read_offline_summary(run_dir) or summary
    return Parsed(rows, config, summary)


# --- W&B public API ----------------------------------------------------------------------


def find_api_runs(project: str, api: Any = None, filters: dict | None = None) -> list[RunRef]:
    """Runs of `entity/project` through `wandb.Api()` (network; needs an API key)."""
    if api is None:
        import wandb  # lazy: only this source needs the client

        api = wandb.Api()
    refs, seen = [], set()
    for run in api.runs(project, filters=filters):
        name = str(run.name or run.id)
        if name in seen:  # reruns keep their workdir name; the id tells them apart
            name = f"{name}-{run.id}"
        seen.add(name)
        marks = [run.id, run.state, getattr(run, "lastHistoryStep", ""), _attr(run, "heartbeatAt")]
        refs.append(RunRef(name, run, "|".join(str(m) for m in marks)))
    return refs


def _attr(run: Any, key: str) -> Any:
    try:
        return getattr(run, key)
    except (AttributeError, KeyError):
        return ""


def parse_api_run(run: Any) -> Parsed:
    rows = []
    for row in run.scan_history():
        row = dict(row)
        row["step"] = int(row.get("_step", len(rows)))
        rows.append(row)
    summary = run.summary
    summary = dict(summary.items()) if hasattr(summary, "items") else dict(summary)
    return Parsed(rows, dict(run.config), summary)
