"""`load_runs` / `load_wandb_project`: any set of runs -> one `Runs` of three tidy frames."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import pandas as pd

from omnilearn_jax.analysis import cache, frames, settings, sources

SOURCES = ("store", "wandb-offline")


@dataclasses.dataclass
class Runs:
    """Three tidy frames; run-level columns (`frames.RUN_COLUMNS`) repeat on every row.

    steps      one row per (run, step): time, loss, accuracy, step_time, idle_fraction,
               balance, eval_loss, eval_accuracy (NaN on steps without an eval), plus any
               other scalar the run logged (async: applied_worker, staleness, ...)
    workers    one row per (run, step, worker): batch_size, worker_time, speed, idle_time,
               plus any other per-worker list the run logged (singular name)
    summaries  one row per run: status, steps, total_time, final_eval_accuracy, ...
    """

    steps: pd.DataFrame
    workers: pd.DataFrame
    summaries: pd.DataFrame
    source: str = ""

    @property
    def names(self) -> list[str]:
        return self.summaries["run"].tolist()

    def select(self, **where: Any) -> Runs:
        """The runs whose run-level columns equal the given values, e.g. controller='pi'."""
        keep = self.summaries
        for column, value in where.items():
            keep = keep[keep[column] == value]
        names = set(keep["run"])
        pick = lambda f: f[f["run"].isin(names)].reset_index(drop=True)  # noqa: E731
        return Runs(pick(self.steps), pick(self.workers), pick(self.summaries), self.source)


def detect_source(path: str) -> str:
    if sources.find_store_runs(path):
        return "store"
    if sources.find_offline_runs(path):
        return "wandb-offline"
    raise FileNotFoundError(f"no run store (metrics.jsonl) or W&B offline run under {path}")


def load_runs(
    path: str, *, source: str = "auto", cache_dir: str | None = None, use_cache: bool = True
) -> Runs:
    """Every run under `path`: one run directory, a tree of them, or an ablation workdir.

    source: 'store' (config.json, metrics.jsonl, summary.json), 'wandb-offline' (the
    `wandb/offline-run-*` logs beside them) or 'auto' (store when there is one). The cache
    lives in `<path>/.analysis_cache/<source>/` unless `cache_dir` says otherwise.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} does not exist")
    if source == "auto":
        source = detect_source(path)
    if source == "store":
        refs, parse = sources.find_store_runs(path), sources.parse_store_run
    elif source == "wandb-offline":
        refs, parse = sources.find_offline_runs(path), sources.parse_offline_run
    else:
        raise ValueError(f"source must be auto or one of {SOURCES}, got {source!r}")
    if not refs:
        raise FileNotFoundError(f"no {source} runs under {path}")
    if cache_dir is None:
        root = path if os.path.isdir(path) else os.path.dirname(path)
        if os.path.basename(os.path.normpath(root)).startswith("offline-run-"):
            root = os.path.dirname(os.path.dirname(os.path.normpath(root)))  # the run's dir
        cache_dir = os.path.join(root, ".analysis_cache", source)
    return _load(refs, parse, cache_dir if use_cache else None, source)


def load_wandb_project(
    project: str,
    *,
    filters: dict | None = None,
    api: Any = None,
    cache_dir: str | None = None,
) -> Runs:
    """The runs of a W&B project ('entity/project') through the public API (online).

    `filters` is passed to `Api.runs` (e.g. {'group': 'smoke'}); `api` defaults to
    `wandb.Api()`. Nothing is cached unless `cache_dir` is given; a run is re-read when its
    state, last history step or heartbeat changes.
    """
    refs = sources.find_api_runs(project, api=api, filters=filters)
    if not refs:
        raise FileNotFoundError(f"no runs in W&B project {project!r} (filters {filters})")
    return _load(refs, sources.parse_api_run, cache_dir, "wandb-api")


def _load(
    refs: list[sources.RunRef],
    parse: Callable[[Any], sources.Parsed],
    cache_dir: str | None,
    source: str,
) -> Runs:
    index, cached = cache.read(cache_dir) if cache_dir else ({}, {})
    fresh = {r.name for r in refs if cached and index.get(r.name) == r.fingerprint}
    pieces: dict[str, list[pd.DataFrame]] = {name: [] for name in cache.FRAMES}
    if fresh:
        for name in cache.FRAMES:
            pieces[name].append(cached[name][cached[name]["run"].isin(fresh)])
    for ref in refs:
        if ref.name not in fresh:
            parsed = parse(ref.location)
            # Every run of ours has the section; a W&B folder may hold another project's runs
            # (a row with no controller, 'has no complete run', exit 0). A store run without
            # config.json is a damaged run of ours, named as such further on.
            if source != "store" and "controller" not in parsed.config:
                raise ValueError(
                    f"run {ref.name!r} ({source}) is not a run of this project (its config has no "
                    f"controller section: another project's W&B run?); analyse a folder of "
                    f"runs from omnilearn_jax.main or experiments.ablate"
                )
            run = frames.run_frames(ref.name, parsed.config, parsed.rows, parsed.summary)
            for name, frame in zip(cache.FRAMES, run, strict=True):
                pieces[name].append(frame)
    steps, workers, summaries = (_assemble(name, pieces[name]) for name in cache.FRAMES)
    fingerprints = {r.name: r.fingerprint for r in refs}
    if cache_dir and (len(fresh) < len(refs) or fingerprints != index):
        cache.write(
            cache_dir, fingerprints, {"steps": steps, "workers": workers, "summaries": summaries}
        )
    expanded = settings.expand({"steps": steps, "workers": workers, "summaries": summaries})
    steps, workers, summaries = (expanded[name] for name in cache.FRAMES)
    workers = frames.add_idle_time(workers, steps)
    return Runs(steps, workers, summaries, source)


_LAYOUT = {
    "steps": (frames.RUN_COLUMNS + frames.STEP_COLUMNS, ["run", "step"]),
    "workers": (frames.RUN_COLUMNS + frames.WORKER_COLUMNS, ["run", "step", "worker"]),
    "summaries": (frames.RUN_COLUMNS + frames.SUMMARY_COLUMNS, ["run"]),
}


def _assemble(name: str, parts: list[pd.DataFrame]) -> pd.DataFrame:
    first, sort = _LAYOUT[name]
    parts = [p for p in parts if not p.empty]
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(first))
    return frames.normalise(frame.drop(columns=["idle_time"], errors="ignore"), first, sort)
