"""Words and files for a notebook: set-up and conclusions computed from the frames, saving.

Every sentence here is built from the numbers of the table it describes, so a notebook's
conclusions can never disagree with the table above them.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

import pandas as pd

from omnilearn_jax.analysis.load import Runs
from omnilearn_jax.analysis.table import equal_to, stopped_by_budget, ties, to_markdown

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _values(frame: pd.DataFrame, column: str) -> str:
    values = sorted({str(v) for v in frame[column].dropna()})
    return ", ".join(values) if values else "-"


def describe_setup(runs: Runs) -> str:
    """A markdown paragraph: what was run, how many seeds, on what cluster."""
    s = runs.summaries
    steps = runs.steps.groupby("run")["step"].max()
    # Runs stopped before their first step log none (an empty metrics.jsonl): counted, not
    # ranged (their NaN had failed int()).
    logged = f"{int(steps.min())}-{int(steps.max())} steps a run" if len(steps) else "no steps"
    if 0 < len(steps) < len(s):
        logged += f" ({len(s) - len(steps)} of them logged none)"
    return (
        f"{len(s)} runs ({runs.source}): controllers {_values(s, 'controller')}; "
        f"heterogeneity {_values(s, 'hetero')}{_level(s)}; "
        f"seeds {_values(s, 'seed')}; mode {_values(s, 'mode')}, clock {_values(s, 'clock')}. "
        f"Model {_values(s, 'model')} on {_values(s, 'dataset')}, "
        f"{_values(s, 'num_workers')} workers, global batch {_values(s, 'global_batch_size')}, "
        f"{logged}; "
        f"{int((s['status'] == 'complete').sum())} of {len(s)} complete."
    )


def _level(s: pd.DataFrame) -> str:
    """' (level 2, 8)' where a profile read hetero.level (hl), else '' (a schedule said
    'level 8', the default it never ran)."""
    return f" (level {_values(s, 'level')})" if s["level"].notna().any() else ""


def _fmt(value: float, digits: int = 3) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}g}"


def _ratio(value: float) -> str:
    """A speed-up as the tables show one: two decimals (1.30x, where 3 digits gave 1.3x)."""
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}"


def _names(names: list[str]) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _percent(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.0%}"


def conclusions(table: pd.DataFrame, runs: Runs | None = None) -> str:
    """Markdown bullets read off `table` (from `speedup_table`), one set per facet, written
    as sentences: ties named as ties, ratios as "x as fast" or percentages, and an accuracy
    that does not change said in words rather than as "differs by 0"."""
    others = [c for c in table.columns[: list(table.columns).index("seeds")] if c != "controller"]
    lines = []
    # dropna=False, as the table groups: a facet whose key is missing (runs of older code)
    # was in the table and had no sentence
    facets = table.groupby(others, sort=True, dropna=False) if others else [((), table)]
    for values, rows in facets:
        where = ", ".join(f"{k}={v}" for k, v in zip(others, values, strict=True))
        prefix = f"**{where}**: " if where else ""
        where_values = dict(zip(others, values, strict=True)) if others else {}
        if _budgeted(runs, where_values):
            # Every async run stops at the same time budget: its total time is the budget plus
            # the last update's overshoot, and there is no barrier to wait at.
            text_runs = "final_eval_perplexity_mean" in rows and bool(
                rows["final_eval_perplexity_mean"].notna().any()
            )
            lines.append(
                f"- {prefix}Asynchronous runs stop at a time budget: they are compared by "
                f"{'perplexity' if text_runs else 'accuracy'} at equal time, not by speed."
            )
            lines += _perplexity(rows, prefix, "") if text_runs else _accuracy(rows, prefix, "")
            lines += _staleness(runs, where_values, prefix)
            continue
        # A controller with no complete run (failed, interrupted) has no time to compare.
        empty = rows[rows["seeds"] == 0]
        if len(empty):
            lines.append(
                f"- {prefix}{_names(list(empty['controller']))} "
                f"{'has' if len(empty) == 1 else 'have'} no complete run "
                f"({int(empty['missing'].sum())} failed or unfinished): left out below."
            )
        rows = rows[rows["seeds"] > 0]
        if rows.empty:
            continue
        best = rows["total_time_mean"].min()
        # Ties are common (uniform clusters, or a bound that binds for every policy).
        tied = list(rows[rows["total_time_mean"] <= best * (1 + 1e-9)]["controller"])
        verb = "is the fastest" if len(tied) == 1 else "tie as the fastest"
        lines.append(f"- {prefix}{_names(tied)} {verb}, at {_fmt(best, 4)} s on the run's clock.")
        static = rows[rows["controller"] == "static"]
        for _, row in rows.iterrows():
            if row["controller"] == "static" or static.empty:
                continue
            ref = static.iloc[0]
            low, high = row["speedup_vs_static_min"], row["speedup_vs_static_max"]
            spread = (
                f"{_ratio(low)}x in every seed"
                if _ratio(low) == _ratio(high)
                else f"{_ratio(low)}x to {_ratio(high)}x across seeds"
            )
            lines.append(
                f"- {prefix}`{row['controller']}` is {_ratio(row['speedup_vs_static'])}x as fast "
                f"as uniform `static` ({spread}); its workers wait at the barrier "
                f"{_percent(row['mean_idle_fraction_mean'])} of a step on average, against "
                f"{_percent(ref['mean_idle_fraction_mean'])} under `static`."
            )
        measured = rows[rows["controller"] != "oracle"]
        if "efficiency_vs_oracle" in rows and measured["efficiency_vs_oracle"].notna().any():
            top = measured["efficiency_vs_oracle"].max()
            closest = list(measured[measured["efficiency_vs_oracle"] >= top - 1e-9]["controller"])
            verb = "comes" if len(closest) == 1 else "come"
            lines.append(
                f"- {prefix}{_names(closest)} {verb} closest to the oracle, which is told the "
                f"speeds in advance: {_percent(top)} of its speed."
            )
        # In BSP a split changes how long a step takes, not the update; in async it does.
        bsp = runs is None or "asp" not in set(_facet(runs, where_values)["mode"].dropna())
        lines += _accuracy(rows, prefix, reason=SAME_UPDATE if bsp else "")
        lines += _perplexity(rows, prefix, SAME_UPDATE if bsp else "")
        lines += _staleness(runs, where_values, prefix)
    return "\n".join(lines) + "\n"


def _staleness(runs: Runs | None, where: dict, prefix: str) -> list[str]:
    """A facet's staleness sentences, one a controller, over its complete async runs (over
    every run of a controller, HL2's mean and HL8's maximum were given as one setting's)."""
    if runs is None or "staleness_mean" not in runs.summaries:
        return []
    s = _facet(runs, where)
    stale = s[(s["status"] == "complete") & s["staleness_mean"].notna()]
    return [
        f"- {prefix}Under asynchronous `{controller}`, an update is on average "
        f"{_fmt(rows['staleness_mean'].mean())} updates stale "
        f"(max {int(rows['staleness_max'].max())})."
        for controller, rows in stale.groupby("controller", sort=True)
    ]


SAME_UPDATE = ": the split changes how long a step takes, not the update"


def _facet(runs: Runs, where: dict) -> pd.DataFrame:
    """The summaries of a facet's runs (its `where` column values)."""
    s = runs.summaries
    for key, value in where.items():
        s = s[equal_to(s[key], value)]
    return s


def _budgeted(runs: Runs | None, where: dict) -> bool:
    """Whether every run of a facet (its `where` column values) is an async run that its time
    budget stopped (`table.stopped_by_budget`)."""
    if runs is None:
        return False
    s = _facet(runs, where)
    return not s.empty and all(stopped_by_budget(row) for _, row in s.iterrows())


def _perplexity(rows: pd.DataFrame, prefix: str, reason: str) -> list[str]:
    """The final-perplexity sentence of a facet of text runs (lower is better; `reason`
    follows a tie)."""
    perplexity = rows.set_index("controller").get("final_eval_perplexity_mean")
    if perplexity is None or perplexity.notna().sum() < 2:  # nothing to compare
        return []
    perplexity = perplexity.dropna()
    low, high = perplexity.min(), perplexity.max()
    if ties(high, low):  # every one within the rounding of a split
        same = f"the same for every controller ({_fmt(high, 4)})"
        return [f"- {prefix}Final perplexity is {same}{reason}."]
    lowest = list(perplexity[[ties(v, low) for v in perplexity]].index)  # ties named
    highest = list(perplexity[[ties(high, v) for v in perplexity]].index)
    return [
        f"- {prefix}Final perplexity (lower is better) is lowest for {_names(lowest)} "
        f"({_fmt(low, 4)}) and highest for {_names(highest)} ({_fmt(high, 4)})."
    ]


def _accuracy(rows: pd.DataFrame, prefix: str, reason: str) -> list[str]:
    """The final-accuracy sentence of a facet (`reason` follows a tie)."""
    accuracy = rows["final_eval_accuracy_mean"].dropna()
    if len(accuracy) < 2:  # one controller: nothing to compare ("the same for every" one)
        return []
    low, high = accuracy.min(), accuracy.max()
    missing = list(rows[rows["final_eval_accuracy_mean"].isna()]["controller"])
    if high - low < 5e-4:
        every = "every controller with results" if missing else "every controller"
        return [f"- {prefix}Final accuracy is the same for {every} ({_fmt(high)}){reason}."]
    at = rows.set_index("controller")["final_eval_accuracy_mean"]
    return [
        f"- {prefix}Final accuracy ranges from {_fmt(low)} (`{at.idxmin()}`) to "
        f"{_fmt(high)} (`{at.idxmax()}`)."
    ]


def save_figure(fig: Figure | None, out_dir: str, name: str) -> str:
    """Writes `out_dir/name.png` (nothing when out_dir is '' or fig is None); the path."""
    if fig is None or not out_dir:
        return ""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.png")
    fig.savefig(path, dpi=110)
    return path


def show(fig: Figure | None, name: str, out_dir: str = "") -> None:
    """Saves the figure when `out_dir` is set and displays it inline in a notebook.

    The PNG bytes are displayed rather than the Figure object, because our figures are
    not pyplot figures and IPython's inline backend only renders those by itself.
    """
    if fig is None:
        print(f"({name}: nothing to plot)")
        return
    save_figure(fig, out_dir, name)
    try:
        from IPython.display import Image, display  # lazy: only notebooks need IPython
    except ImportError:
        return
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    display(Image(data=buffer.getvalue()))


def write_table(table: pd.DataFrame, out_dir: str, name: str = "results") -> list[str]:
    """`out_dir/name.csv` (full precision) and `out_dir/name.md`; the paths written."""
    if not out_dir:
        return []
    os.makedirs(out_dir, exist_ok=True)
    csv_path, md_path = (os.path.join(out_dir, f"{name}.{ext}") for ext in ("csv", "md"))
    table.to_csv(csv_path, index=False)
    with open(md_path, "w") as f:
        f.write(to_markdown(table))
    return [csv_path, md_path]
