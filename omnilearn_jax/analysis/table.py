"""The results table: speed-up over uniform `static` batching and efficiency against `oracle`.

Same definitions as the ablation runner's table (experiments/ablation/table.py), so the two
agree on an ablation workdir: complete runs only; mean and sample std (ddof=1, NaN with
one seed) over seeds; time_to_target over the seeds that reached it; ratios of means over
the seeds both groups completed. What the runner cannot give, this adds: the spread of the
speed-up over seeds, as the min and max of the per-seed ratios (`static` time of seed s /
this group's time of seed s). A tree can hold one seed of a group twice (a rerun in another
folder): its runs are averaged into one seed, with a warning, so `seeds` counts seeds.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import pandas as pd

from omnilearn_jax.analysis import settings
from omnilearn_jax.analysis.frames import RUN_COLUMNS

STATS = (
    "final_eval_accuracy",
    "total_time",
    "time_to_target",
    "mean_idle_fraction",
    "final_eval_perplexity",  # text runs; lower is better (NaN for classifiers)
)
REFERENCES = (("speedup_vs_static", "static"), ("efficiency_vs_oracle", "oracle"))


def group_columns(summaries: pd.DataFrame) -> list[str]:
    """Run-level columns that vary across runs, except run and seed, then the config keys
    that do (`settings.expand`: an ablation's grid keys beyond them); always `controller`
    (the tables and conclusions compare controllers, even when only one was run)."""
    extra = sorted(c for c in summaries.columns if settings.is_setting(c, summaries))
    return [
        c
        for c in (*RUN_COLUMNS, *extra)
        if c == "controller"
        or (c not in ("run", "seed") and summaries[c].nunique(dropna=False) > 1)
    ]


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def reached_text(summaries: Sequence[dict]) -> str:
    """'k/n': of n complete runs, k reached their target; 'no target' where every run says it
    had none (target_accuracy 0 and no target_perplexity), which '0/n' read as n misses. Runs
    from before the summary kept its target count as targeted (the ablation runner's table
    and this one both say it so). '-' where no run completed (it said '0/0')."""
    if not summaries:
        return "-"
    reached = sum(not math.isnan(_number(s.get("time_to_target"))) for s in summaries)
    none = [
        _number(s.get("target_accuracy")) == 0 and not _number(s.get("target_perplexity")) > 0
        for s in summaries
    ]
    return "no target" if none and all(none) else f"{reached}/{len(summaries)}"


def without_rounding(std: float, mean: float) -> float:
    """`std`, or 0 where it is only the float rounding of equal values (three seeds of
    10.977806796539252 s have a std of 2.2e-15)."""
    return 0.0 if abs(std) <= 1e-9 * max(1.0, abs(mean)) else std


def _std(values: pd.Series) -> float:
    if len(values) < 2:
        return math.nan
    return without_rounding(float(values.std(ddof=1)), float(values.mean()))


def speedup_table(summaries: pd.DataFrame, by: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per group of runs (all `by` columns equal; default `group_columns`)."""
    keys = list(by) if by is not None else group_columns(summaries)
    summaries = summaries.reset_index(drop=True)  # a group's rows are found by index label
    done = summaries[summaries["status"] == "complete"]
    rows = []
    for gid, group in summaries.groupby(keys, sort=True, dropna=False):
        runs = done.loc[done.index.intersection(group.index)]
        row = dict(zip(keys, gid, strict=True))
        seeds = _by_seed(runs, row)
        row["seeds"] = len(seeds)
        row["missing"] = len(group) - len(runs)
        for stat in STATS:  # a stat no run reports (perplexity of a classifier) is NaN
            values = seeds[stat].dropna() if stat in seeds else pd.Series(dtype=float)
            row[f"{stat}_mean"] = float(values.mean()) if len(values) else math.nan
            row[f"{stat}_std"] = _std(values)
        row["target_reached"] = reached_text(seeds.to_dict("records"))
        rows.append(row)
    table = pd.DataFrame(rows)
    if "controller" in keys:
        for column, reference in REFERENCES:
            _add_ratio(table, done, keys, column, reference)
    return table


def _by_seed(runs: pd.DataFrame, where: dict) -> pd.DataFrame:
    """One row a seed: the runs of a seed run twice averaged (a warning names them); the
    other columns from its first run. Runs without a seed column are one seed each."""
    if "seed" not in runs or runs["seed"].isna().any() or runs["seed"].is_unique:
        return runs
    twice = sorted(runs["seed"][runs["seed"].duplicated()].unique())
    warnings.warn(
        f"{where}: seed(s) {', '.join(map(str, twice))} appear in more than one run "
        f"({', '.join(map(str, runs[runs['seed'].isin(twice)].get('run', runs.index)))}); "
        "each seed's runs are averaged into one",
        stacklevel=3,
    )
    first = runs.groupby("seed", sort=False).head(1).set_index("seed")
    stats = [s for s in STATS if s in runs]
    first[stats] = runs.groupby("seed", sort=False)[stats].mean()
    return first.reset_index()


def _add_ratio(table: pd.DataFrame, done: pd.DataFrame, keys: list[str], column: str, ref: str):
    others = [k for k in keys if k != "controller"]
    ratio, lo, hi = [], [], []
    for _, row in table.iterrows():
        match = (table["controller"] == ref).to_numpy().copy()
        mine = done["controller"] == row["controller"]
        theirs = done["controller"] == ref
        for k in others:
            match &= equal_to(table[k], row[k]).to_numpy()
            mine &= equal_to(done[k], row[k])
            theirs &= equal_to(done[k], row[k])
        # Runs a time budget stopped all end at one time: no speed-up (as the runner's table).
        budgeted = bool(mine.any()) and all(stopped_by_budget(r) for _, r in done[mine].iterrows())
        # Pairs of the same seed (same data order, same noise draws); the ratio of means
        # over the seeds both completed, as the runner's table.
        seed_time = lambda rows: rows.groupby("seed")["total_time"].mean()  # noqa: E731
        pairs = pd.concat([seed_time(done[theirs]), seed_time(done[mine])], axis=1).dropna()
        ok = match.sum() == 1 and len(pairs) and pairs.iloc[:, 1].mean() and not budgeted
        ratio.append(float(pairs.iloc[:, 0].mean() / pairs.iloc[:, 1].mean()) if ok else math.nan)
        per_seed = pairs.iloc[:, 0] / pairs.iloc[:, 1] if not budgeted else pairs.iloc[:0, 0]
        lo.append(float(per_seed.min()) if len(per_seed) else math.nan)
        hi.append(float(per_seed.max()) if len(per_seed) else math.nan)
    table[column] = ratio
    table[f"{column}_min"] = lo
    table[f"{column}_max"] = hi


def stopped_by_budget(summary) -> bool:
    """Whether an async run's time budget ended it, from its summary (a dict, or a frame's
    row, where a missing value is NaN); summaries before `stopped_by`: whether it had one.
    Such runs all stop at one time, so they compare by accuracy, not by speed."""
    by = summary.get("stopped_by")
    if isinstance(by, str):
        return by == "time_budget"
    budget = summary.get("time_budget")
    return summary.get("mode") == "asp" and budget is not None and budget == budget and budget > 0


def ties(high: float, low: float) -> bool:
    """Two perplexities within 1e-4 (relative) of each other: the float rounding of different
    splits of one update, not a difference (shared by experiments/lm_results.py and the
    ablation table)."""
    return high <= low * (1 + 1e-4)


def equal_to(column: pd.Series, value: object) -> pd.Series:
    """Where `column` equals `value`, a missing value equal to a missing one (as groupby's
    dropna=False groups them; `==` says False, and such a group found no reference)."""
    if pd.isna(value):
        return column.isna()
    return (column == value).fillna(False).astype(bool)


def _text(value: object, digits: int = 4) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.{digits}g}"
    return "" if value is None or value is pd.NA else str(value)


# Units shown after a column's name in the Markdown table (the CSV keeps bare names).
_UNITS = (
    ("total_time", " (s, run clock)"),
    ("time_to_target", " (s, run clock)"),
    ("speedup_vs_static", " (x)"),
    ("efficiency_vs_oracle", " (oracle time / own)"),
)


def header(column: str) -> str:
    """`column` with its unit, e.g. 'total_time_mean (s, run clock)'."""
    unit = next((u for prefix, u in _UNITS if column.startswith(prefix)), "")
    return column + unit


def to_markdown(table: pd.DataFrame, columns: Sequence[str] | None = None) -> str:
    """A GitHub table (4 significant digits, blanks for NaN, units in the headers); no
    `tabulate` needed."""
    columns = list(columns) if columns is not None else list(table.columns)
    names = [header(c) for c in columns]
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(columns)]
    for _, row in table.iterrows():
        lines.append("| " + " | ".join(_text(row[c]) for c in columns) + " |")
    return "\n".join(lines) + "\n"
