"""The figures of RESULTS.md: the analysis package's plots of the paper ablations, plus one
bar chart of the BSP time reductions against the paper's range."""

from __future__ import annotations

import math
import os

from experiments.paper import groups as G
from experiments.paper import paper_facts as paper
from experiments.paper.common import LEVELS, hl_cores
from experiments.paper.tracedoc import compare
from omnilearn_jax import analysis

POLICIES = ("static (by cores)", "proportional", "pi", "oracle")


def reduction_figure(workdir: str):
    """Reduction of training time against uniform `static`, per level and policy."""
    from matplotlib.figure import Figure

    levels = G.load(os.path.join(workdir, "bsp_levels"))
    cores = G.load(os.path.join(workdir, "bsp_static_cores"))
    fig = Figure(figsize=(7.0, 3.8), layout="constrained")
    ax = fig.subplots()
    ax.axhspan(
        100 * paper.BSP_REDUCTION[0],
        100 * paper.BSP_REDUCTION[1],
        color="grey",
        alpha=0.15,
        label="OmniLearn paper range",
    )
    width = 0.8 / len(POLICIES)
    for i, name in enumerate(POLICIES):
        xs, ys = [], []
        for j, level in enumerate(LEVELS):
            ref = G.find(levels, controller__name="static", hetero__level=level)
            if name == "static (by cores)":
                g = G.find(cores, hetero__cores=hl_cores(level))
            else:
                g = G.find(levels, controller__name=name, hetero__level=level)
            cut, _ = compare(g, ref)
            if not math.isnan(cut):
                xs.append(j + (i - (len(POLICIES) - 1) / 2) * width)
                ys.append(100 * cut)
        ax.bar(xs, ys, width, label=name)
    ax.set_xticks(range(len(LEVELS)), [f"HL{level}" for level in LEVELS])
    ax.set_ylabel("less training time than uniform (%)")
    ax.set_title("BSP, CNN on digits, 4 workers, B = 128, bounds 16..96", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    return fig


def make_figures(workdir: str, out_dir: str, doc_dir: str) -> list[tuple[str, str]]:
    """Writes results_*.png into out_dir; (title, path relative to doc_dir) of each."""
    made: list[tuple[str, str]] = []

    def save(fig, name: str, title: str) -> None:
        if fig is None:
            return
        path = analysis.save_figure(fig, out_dir, f"results_{name}")
        made.append((title, os.path.relpath(path, doc_dir)))

    def runs(name: str):
        path = os.path.join(workdir, name)
        return analysis.load_runs(path) if os.path.isdir(path) else None

    if os.path.isdir(os.path.join(workdir, "bsp_levels")):
        save(
            reduction_figure(workdir),
            "bsp_reduction",
            "BSP: less training time than uniform batching",
        )
    bsp = runs("bsp_levels")
    if bsp is not None:
        save(
            analysis.plot_accuracy_vs_time(bsp),
            "bsp_accuracy",
            "BSP: eval accuracy against virtual time",
        )
    dyn = runs("dynamic")
    if dyn is not None:
        s = dyn.summaries
        pick = s[(s["controller"] == "proportional")]["run"]
        run = str(pick.iloc[0]) if len(pick) else None
        save(
            analysis.plot_batch_sizes(dyn, run),
            "dynamic_batch_sizes",
            "Dynamic cluster: proportional's batch sizes follow HL 1, 2, 4, 8, 8, 4, 2, 1",
        )
    asy = runs("async_levels")
    if asy is not None:
        save(
            analysis.plot_accuracy_vs_time(asy),
            "async_accuracy",
            "Async: eval accuracy against virtual time (equal budget)",
        )
    scale = runs("scaleout")
    if scale is not None:
        # One figure of the runs without the lower bound (cell names start with b_min-0__);
        # both bounds would make two panels (controller.b_min is a frame column).
        free = [n for n in scale.names if os.path.basename(n).startswith("b_min-0__")]
        if free:
            save(
                analysis.plot_balance(_only(scale, free)),
                "scaleout_balance",
                "Scale-out (32 workers, b_min = 0): balance, max / mean worker time",
            )
    return made


def _only(runs: analysis.Runs, names: list[str]) -> analysis.Runs:
    """`runs` restricted to the runs called `names` (all three frames)."""
    keep = set(names)
    return analysis.Runs(
        *(frame[frame["run"].isin(keep)] for frame in (runs.steps, runs.workers, runs.summaries)),
        source=runs.source,
    )
