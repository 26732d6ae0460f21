"""Plots of a `Runs`: each helper returns a matplotlib Figure and changes no global state.

Figures are built with `matplotlib.figure.Figure` directly, not pyplot: no backend is
selected or switched (saving a PNG uses Agg), nothing accumulates in pyplot's figure
list, and the helpers behave the same in a notebook, a script or a test.

Runs are grouped by `table.group_columns` (the run-level columns that vary, seed
excluded). Keys other than `controller` become panels ("facets"); controllers are lines
or bars within a panel. Seeds are combined per step: the line is the mean over seeds at
that step, drawn at the seeds' mean time; the band is the min-max over seeds
(`band='std'`: mean +- one sample standard deviation).

Controllers often give identical curves (in BSP every split gives the same update, so
accuracy against the step is the same), so each controller has its own line style and
marker, and a line equal to an earlier one says so in the legend ("pi (= proportional)").
Panels that are compared side by side share their y-scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from omnilearn_jax.analysis.load import Runs
from omnilearn_jax.analysis.table import group_columns

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_LABELS = {
    "eval_accuracy": "eval accuracy",
    "eval_loss": "eval loss",
    "eval_perplexity": "eval perplexity (lower is better)",
    "loss": "train loss",
    "balance": "balance (max / mean worker time)",
    "idle_fraction": "idle fraction",
}


_MAX_COLUMNS = 4  # wider grids wrap onto more rows, so a big ablation stays readable
# One style per controller (in sorted order), so lines that coincide stay distinguishable.
_LINESTYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v", "P")


def _figure(
    panels: int,
    *,
    columns: int = 0,
    width: float = 5.0,
    height: float = 3.6,
    sharey: bool = False,
) -> Figure:
    """A figure whose `axes` are exactly `panels` panels, at most `columns` a row;
    `sharey` gives every panel the same y-scale (for panels that are compared)."""
    from matplotlib.figure import Figure  # lazy: importing the package costs no matplotlib

    cols = min(panels, columns or _MAX_COLUMNS)
    rows = -(-panels // cols)
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    for ax in fig.subplots(rows, cols, squeeze=False, sharey=sharey).ravel()[panels:]:
        fig.delaxes(ax)
    return fig


def _nothing_to_plot(reason: str) -> Figure:
    """One empty panel that says why, so a notebook cell shows the reason instead of failing."""
    fig = _figure(1)
    ax = fig.axes[0]
    ax.text(0.5, 0.5, reason, ha="center", va="center", wrap=True, transform=ax.transAxes)
    ax.set_axis_off()
    return fig


def _style(index: int, points: int) -> dict:
    """Line style and marker of the index-th controller; about 8 markers a line."""
    return {
        "linestyle": _LINESTYLES[index % len(_LINESTYLES)],
        "marker": _MARKERS[index % len(_MARKERS)],
        "markevery": max(1, points // 8),
        "markersize": 5,
        "markerfacecolor": "none",
    }


def same_as(series: dict[str, pd.DataFrame | pd.Series]) -> dict[str, str]:
    """{name: the earlier name whose values (x and y) it equals} for lines that coincide
    exactly, in the order given."""
    out: dict[str, str] = {}
    names = list(series)
    for i, name in enumerate(names):
        for earlier in names[:i]:
            a, b = series[name], series[earlier]
            if earlier not in out and a.shape == b.shape and (a.to_numpy() == b.to_numpy()).all():
                out[name] = earlier
                break
    return out


def _facets(frame: pd.DataFrame, keys: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """(title, rows) per combination of the non-controller group keys."""
    others = [k for k in keys if k != "controller"]
    if not others:
        return [("", frame)]
    out = []
    for values, rows in frame.groupby(others, sort=True, dropna=False):
        title = ", ".join(f"{k}={v}" for k, v in zip(others, values, strict=True))
        out.append((title, rows))
    return out


def _keys(runs: Runs, by: Sequence[str] | None) -> list[str]:
    keys = list(by) if by is not None else group_columns(runs.summaries)
    return keys if "controller" in keys else ["controller", *keys]


def plot_metric_vs_time(
    runs: Runs,
    metric: str = "eval_accuracy",
    *,
    by: Sequence[str] | None = None,
    band: str = "minmax",
) -> Figure:
    """`metric` against the run's clock, one line per controller, a panel per facet."""
    if band not in ("minmax", "std"):
        raise ValueError(f"band must be 'minmax' or 'std', got {band!r}")
    keys = _keys(runs, by)
    if metric not in runs.steps or runs.steps[metric].isna().all():
        return _nothing_to_plot(
            f"these runs record no {metric!r} (async runs have no step balance)"
        )
    data = runs.steps.dropna(subset=[metric])
    data = _shown(data, runs)  # a failed run's partial curve left out
    facets = _facets(data, keys)
    fig = _figure(len(facets), sharey=True)
    for ax, (title, rows) in zip(fig.axes, facets, strict=True):
        lines = {}
        for controller, per in rows.groupby("controller", sort=True, dropna=False):
            agg = _across_seeds(per, metric)
            if band == "std":
                agg["low"], agg["high"] = agg["mean"] - agg["std"], agg["mean"] + agg["std"]
            lines[str(controller)] = agg
        tied = same_as({name: agg[["time", "mean"]] for name, agg in lines.items()})
        for i, (name, agg) in enumerate(lines.items()):
            label = f"{name} (= {tied[name]})" if name in tied else name
            (line,) = ax.plot(agg["time"], agg["mean"], label=label, **_style(i, len(agg)))
            ax.fill_between(agg["time"], agg["low"], agg["high"], alpha=0.2, color=line.get_color())
        _label(ax, "time (s, run clock)", _LABELS.get(metric, metric), title)
    return fig


def _across_seeds(per: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One controller's curve over its seeds, indexed by step (time, mean, low, high, std):
    a seed run twice averaged first, as the table does; the steps every seed reached; and
    where the seeds stopped at different steps (async runs a time budget stopped), their last
    values as one last point at their mean time, so the curve ends at the table's mean final
    value. Grouped by step alone, the tail's points were one seed's or two, their times going
    back and forth, and a seed run twice counted twice."""
    by_seed = per.groupby(["seed", "step"], dropna=False)[["time", metric]].mean().reset_index()
    seeds = by_seed["seed"].nunique(dropna=False)
    reached = by_seed.groupby("step")["seed"].transform("size") == seeds
    stats = {"time": ("time", "mean"), "mean": (metric, "mean"), "low": (metric, "min")}
    stats |= {"high": (metric, "max"), "std": (metric, "std")}
    agg = by_seed[reached].groupby("step").agg(**stats)
    last = by_seed.sort_values("step").groupby("seed", dropna=False).tail(1)
    if last["step"].nunique() > 1:
        end = last.assign(step=last["step"].max()).groupby("step").agg(**stats)
        agg = pd.concat([agg, end])
    return agg


def plot_accuracy_vs_time(runs: Runs, **kwargs) -> Figure:
    return plot_metric_vs_time(runs, "eval_accuracy", **kwargs)


def plot_loss_vs_time(runs: Runs, **kwargs) -> Figure:
    return plot_metric_vs_time(runs, "eval_loss", **kwargs)


def plot_perplexity_vs_time(runs: Runs, **kwargs) -> Figure | None:
    """Eval perplexity (text runs; lower is better) against time; None when no run has it."""
    steps = runs.steps
    if "eval_perplexity" not in steps or steps["eval_perplexity"].isna().all():
        return None
    return plot_metric_vs_time(runs, "eval_perplexity", **kwargs)


def plot_balance(runs: Runs, **kwargs) -> Figure:
    """max / mean worker time per step: 1 is a perfectly balanced step."""
    fig = plot_metric_vs_time(runs, "balance", **kwargs)
    for ax in fig.axes:
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    return fig


def _shown(frame: pd.DataFrame, runs: Runs) -> pd.DataFrame:
    """`frame`'s rows of the runs a figure shows: the complete ones, as the tables count (a
    failed or interrupted run's partial curve had been averaged into its controller's line,
    and picked as the run to show); every run where none is complete."""
    s = runs.summaries
    if "status" in s and (s["status"] == "complete").any():
        s = s[s["status"] == "complete"]
    return frame[frame["run"].isin(set(s["run"]))]


def pick_run(runs: Runs) -> str:
    """A run worth showing: one whose worker speeds differ, run by an adaptive controller
    (the oracle only when nothing else adapts: it shows the target, not a policy)."""
    return pick_run_and_reason(runs)[0]


def pick_run_and_reason(runs: Runs) -> tuple[str, str]:
    """(`pick_run`'s run, why it was picked, in words for a figure title)."""
    spread = runs.workers.groupby("run")["speed"].agg(lambda s: s.max() - s.min())
    s = _shown(runs.summaries, runs)
    hetero = s[s["run"].map(lambda n: spread.get(n, 0) > 0)]
    pools = (
        (
            hetero[~hetero["controller"].isin(["static", "oracle"])],
            "the first run of a "
            "controller that measures times, on a cluster whose workers differ in speed",
        ),
        (hetero, "the first run on a cluster whose workers differ in speed"),
        (s, "the first run (every worker has the same speed)"),
    )
    for pool, reason in pools:
        if len(pool):
            return str(pool["run"].iloc[0]), reason
    raise ValueError("no runs")


def speed_changes(workers: pd.DataFrame) -> list[int]:
    """Steps at which any worker's speed differs from the step before (one run's rows)."""
    speeds = workers.pivot_table(index="step", columns="worker", values="speed")
    changed = speeds.ne(speeds.shift()).any(axis=1) & speeds.shift().notna().all(axis=1)
    return [int(s) for s in speeds.index[changed.to_numpy()]]


def plot_batch_sizes(runs: Runs, run: str | None = None) -> Figure:
    """One run's per-worker batch sizes (top) and speeds (bottom) against the step.

    Dashed vertical lines mark the steps where the cluster's speeds changed, so the
    controller's reaction time can be read off.
    """
    name, reason = (run, "") if run else pick_run_and_reason(runs)
    rows = runs.workers[runs.workers["run"] == name]
    fig = _figure(2, columns=1, width=7.0, height=2.8)
    top, bottom = fig.axes
    styles = ("-", "--", "-.", ":")  # workers with equal sizes would hide each other
    for i, (worker, per) in enumerate(rows.groupby("worker", sort=True)):
        style = {"where": "post", "label": f"worker {worker}", "linestyle": styles[i % 4]}
        top.step(per["step"], per["batch_size"], **style)
        if per["speed"].notna().any():
            bottom.step(per["step"], per["speed"], **style)
    for step in speed_changes(rows):
        for ax in (top, bottom):
            ax.axvline(step, color="grey", linestyle="--", linewidth=0.8)
    _label(top, "", "batch size", f"{name}\n(picked: {reason})" if reason else name)
    _label(bottom, "step", "speed (relative)", "")
    return fig


def plot_worker_times(runs: Runs, *, by: Sequence[str] | None = None) -> Figure:
    """Mean compute and idle seconds per worker and step (stacked bars), a panel per group.

    Idle is the wait at the barrier (`idle_time`, see `frames.add_idle_time`); in async
    runs it is NaN and only compute is drawn.
    """
    keys = _keys(runs, by)
    workers = _shown(runs.workers, runs)
    groups = list(workers.groupby(keys, sort=True, dropna=False))
    if not groups:  # runs stopped before their first step (a ZeroDivisionError before)
        return _nothing_to_plot("these runs logged no step")
    fig = _figure(len(groups), width=3.6, sharey=True)  # panels compare controllers
    for ax, (values, rows) in zip(fig.axes, groups, strict=True):
        means = rows.groupby("worker")[["worker_time", "idle_time"]].mean()
        x = means.index.to_numpy()
        ax.bar(x, means["worker_time"], label="compute")
        ax.bar(x, means["idle_time"].fillna(0.0), bottom=means["worker_time"], label="idle")
        ax.set_xticks(x)
        title = ", ".join(str(v) for v in values)
        _label(ax, "worker", "seconds per step", title)
    return fig


def plot_staleness(runs: Runs, *, by: Sequence[str] | None = None) -> Figure | None:
    """Histogram of update staleness per group (async runs); None when no run logged it."""
    if "staleness" not in runs.steps or runs.steps["staleness"].isna().all():
        return None
    keys = _keys(runs, by)
    data = runs.steps.dropna(subset=["staleness"])
    data = _shown(data, runs)
    groups = list(data.groupby(keys, sort=True, dropna=False))
    fig = _figure(len(groups), width=3.6, sharey=True)
    for ax, (values, rows) in zip(fig.axes, groups, strict=True):
        counts = rows["staleness"].astype(int).value_counts(normalize=True).sort_index()
        ax.bar(counts.index.to_numpy(), counts.to_numpy())
        mean = float(rows["staleness"].mean())
        ax.axvline(mean, color="black", linestyle="--", linewidth=0.8, label=f"mean {mean:.2f}")
        title = ", ".join(str(v) for v in values)
        _label(ax, "staleness (updates)", "fraction of updates", title)
    return fig


def _label(ax: Axes, xlabel: str, ylabel: str, title: str) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
