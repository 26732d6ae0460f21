"""docs/RESULTS.md from the run directories of `experiments.paper.reproduce`.

Every number of ours is computed here from the ablations' run stores (through the runner's
own `build_table`), written next to the paper's figure, and listed in `results.json` with
the cell directories it averages, so a reader (or tests/test_paper_pipeline.py) can
recompute it. The discussion is templated; its numbers come from the same tables.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from experiments.paper import groups as G
from experiments.paper import paper_facts as paper
from experiments.paper.common import LEVELS, TARGET, hl_cores
from experiments.paper.discussion import discussion, pct_range
from experiments.paper.fmt import fmt, md_table, pct, pm, rel
from omnilearn_jax.cluster import uniform_vs_balanced_reduction

ABLATIONS = (
    "bsp_levels",
    "bsp_static_cores",
    "bsp_nobounds",
    "dynamic",
    "async_levels",
    "scaleout",
    "resnet",
)


class Doc:
    """Collects markdown and the traced numbers behind it."""

    def __init__(self):
        self.lines: list[str] = []
        self.traced: list[dict[str, Any]] = []

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def num(self, table: str, label: str, group: G.Group | None, stat: str) -> str:
        """`mean ± std` of a build_table statistic, recorded with its cells."""
        if group is None:
            return "-"
        mean, std = group.get(f"{stat}_mean"), group.get(f"{stat}_std")
        if not math.isnan(mean):
            self.traced.append(
                {
                    "table": table,
                    "label": label,
                    "stat": stat,
                    "mean": mean,
                    "text": fmt(mean),
                    "cells": [rel(c) for c in group.cells],
                }
            )
        return pm(mean, std)


def compare(g: G.Group | None, ref: G.Group | None, stat: str = "") -> tuple[float, str]:
    """(1 - time / reference time, statistic): by default time to target when every seed of
    both reached it, else total time (equal steps: in BSP every split does the same updates)."""
    if g is None or ref is None:
        return math.nan, ""
    if not stat:
        stat = "time_to_target" if g.all_reached() and ref.all_reached() else "total_time"
    mine, theirs = g.get(f"{stat}_mean"), ref.get(f"{stat}_mean")
    return (1 - mine / theirs if theirs else math.nan), stat


def _runs_text(groups: list[G.Group]) -> str:
    """'N seed(s), S steps' read from the groups' summaries (so --small says what it ran)."""
    seeds = max((len(g.summaries) for g in groups), default=0)
    steps = sorted({int(s["steps"]) for g in groups for s in g.summaries})
    span = "-".join(str(v) for v in (steps[:1] + steps[-1:] if len(steps) > 1 else steps))
    return f"{seeds} seed{'s' if seeds != 1 else ''}, {span or '?'} steps"


def _cost(workdir: str) -> dict:
    """The cost model of the first complete BSP cell (what the virtual clock charged)."""
    for g in G.load(os.path.join(workdir, "bsp_levels")):
        for cell in g.cells:
            try:
                with open(os.path.join(cell, "config.json")) as f:
                    return json.load(f)["cost"]
            except (OSError, ValueError, KeyError):
                continue
    return {}


def _ideal(cores, batch: int) -> float:
    return uniform_vs_balanced_reduction(np.asarray(cores, float), batch)


def bsp_section(doc: Doc, runs: dict[str, list[G.Group]]) -> dict[str, Any]:
    levels, cores, nob = runs["bsp_levels"], runs["bsp_static_cores"], runs["bsp_nobounds"]
    facts: dict[str, Any] = {"prop": {}, "ideal": {}, "oracle": {}, "cores": {}}
    rows = []
    for level in LEVELS:
        ref = G.find(levels, controller__name="static", hetero__level=level)
        if ref is None:
            continue
        ideal = _ideal(hl_cores(level), 128)
        facts["ideal"][level] = ideal
        entries = [
            ("static (uniform)", "16..96", ref),
            ("static (by cores)", "16..96", G.find(cores, hetero__cores=hl_cores(level))),
            *(
                (name, "16..96", G.find(levels, controller__name=name, hetero__level=level))
                for name in ("proportional", "pi", "oracle")
            ),
        ]
        if level == 8:
            entries += [
                (
                    f"{name}{' (by cores)' if name == 'static' else ''}",
                    "none",
                    G.find(nob, controller__name=name),
                )
                for name in ("static", "proportional", "pi", "oracle")
            ]
        for name, bounds, g in entries:
            if g is None:
                continue
            cut, stat = compare(g, ref)
            label = f"HL{level} {name} bounds {bounds}"
            if name == "proportional":
                facts["prop"][(level, bounds)] = cut
            if name == "oracle":
                facts["oracle"][(level, bounds)] = cut
            if name == "static (by cores)" and bounds == "16..96":
                facts["cores"][level] = cut
            rows.append(
                [
                    f"HL{level}",
                    name,
                    bounds,
                    doc.num("bsp", label, g, "time_to_target"),
                    g.row["target_reached"],
                    doc.num("bsp", label, g, "total_time"),
                    pct(cut) + ("" if stat == "time_to_target" else " (total)"),
                    pct(ideal),
                    doc.num("bsp", label, g, "final_eval_accuracy"),
                ]
            )
    doc.add(
        "## Synchronous training (BSP) at HL1, 2, 4, 8",
        "",
        f"{paper.SETUP}; CNN on digits (16/32 channels), {_runs_text(levels)}, target "
        f"accuracy {TARGET}, mean ± sample std over seeds, times in seconds of the virtual clock. "
        "*Reduction* is 1 - time / time of uniform `static` at the same level (time to "
        "target when every seed of both reached it, else total time). *Ideal* is the "
        "analytic reduction of a perfect real-valued split under a linear cost without "
        "bounds, 1 - (B / sum s) / max_k (B / W / s_k) (docs/cluster.md).",
        "",
        md_table(
            [
                "level",
                "policy",
                "bounds",
                "time to target",
                "reached",
                "total time",
                "reduction",
                "ideal",
                "final accuracy",
            ],
            rows,
        ),
    )
    return facts


def dynamic_section(doc: Doc, runs: list[G.Group]) -> dict[str, Any]:
    ref = G.find(runs, controller__name="static")
    rows, facts = [], {}
    for g in runs:
        name = g.values["controller.name"]
        cut, stat = compare(g, ref)
        facts[name] = cut
        label = f"dynamic {name}"
        rows.append(
            [
                name,
                doc.num("dynamic", label, g, "time_to_target"),
                g.row["target_reached"],
                doc.num("dynamic", label, g, "total_time"),
                pct(cut) + ("" if stat == "time_to_target" else " (total)"),
                doc.num("dynamic", label, g, "final_eval_accuracy"),
            ]
        )
    doc.add(
        "## Dynamic heterogeneity: HL 1, 2, 4, 8, 8, 4, 2, 1",
        "",
        "The paper's dynamic run: the level changes every epoch (11 steps) through 1, 2, 4, 8, "
        "8, 4, 2, 1 (`hetero.name=schedule`); same job and bounds as the BSP section, "
        f"{_runs_text(runs)}.",
        "",
        md_table(
            ["policy", "time to target", "reached", "total time", "reduction", "final accuracy"],
            rows,
        ),
    )
    return facts


def async_section(doc: Doc, runs: list[G.Group]) -> dict[str, Any]:
    rows, facts = [], {"gain": {}, "noise": {}, "spread": {}}
    for g in runs:
        name, level = g.values["controller.name"], g.values["hetero.level"]
        # Staleness spread: slowest worker's mean staleness / fastest's (1 = uniform).
        spreads = [
            max(w) / min(w)
            for w in (s.get("staleness_mean_per_worker") for s in g.summaries)
            if w and min(w) > 0
        ]
        facts["spread"][(level, name)] = float(np.mean(spreads)) if spreads else math.nan
        ref = G.find(runs, controller__name="static", hetero__level=level)
        gain = g.get("final_eval_accuracy_mean") - ref.get("final_eval_accuracy_mean")
        noise = max(g.get("final_eval_accuracy_std"), ref.get("final_eval_accuracy_std"))
        facts["gain"][(level, name)] = gain
        facts["noise"][(level, name)] = noise
        stale = [
            s.get("staleness_mean") for s in g.summaries if s.get("staleness_mean") is not None
        ]
        label = f"async HL{level} {name}"
        rows.append(
            [
                f"HL{level}",
                name,
                doc.num("async", label, g, "final_eval_accuracy"),
                "-" if name == "static" else f"{100 * gain:+.1f} points",
                fmt(float(np.mean(stale))) if stale else "-",
                fmt(facts["spread"][(level, name)]),
                doc.num("async", label, g, "total_time"),
            ]
        )
    doc.add(
        "## Asynchronous training: accuracy at equal time",
        "",
        "configs/paper_asp.py: parameter server on the virtual clock, the paper's async core "
        "tables (HL2 8/8/8/16, HL4 10/10/4/16, HL8 4/4/4/28), plain SGD, updates weighted by "
        "batch share, no bounds; every run stops at the same virtual time and the accuracy "
        "there is the result. *Staleness spread* is the most stale worker's mean staleness "
        f"over the least stale one's (1 = even). Same CNN on digits, {_runs_text(runs)} "
        "(updates).",
        "",
        md_table(
            [
                "level",
                "policy",
                "accuracy at budget",
                "gain vs static",
                "mean staleness",
                "staleness spread",
                "time",
            ],
            rows,
        ),
    )
    return facts


def scaleout_section(doc: Doc, runs: list[G.Group]) -> dict[str, Any]:
    from experiments.paper.scaleout import BATCH, CORES, WORKERS

    rows, facts = [], {}
    ideal = _ideal(CORES, BATCH)
    for g in runs:
        name, b_min = g.values["controller.name"], g.values["controller.b_min"]
        ref = G.find(runs, controller__name="static", controller__b_min=b_min)
        cut, _ = compare(g, ref, "total_time")  # evaluated every 2 steps: too coarse a target
        facts[(b_min, name)] = cut
        label = f"scale-out b_min {b_min} {name}"
        rows.append(
            [
                b_min,
                name,
                doc.num("scaleout", label, g, "total_time"),
                pct(cut),
                pct(ideal),
                doc.num("scaleout", label, g, "final_eval_accuracy"),
            ]
        )
    facts["ideal"] = ideal
    facts["slow_share"] = BATCH * min(CORES) / sum(CORES)
    doc.add(
        f"## Scale-out: {WORKERS} workers, 2 to 32 cores",
        "",
        f"{WORKERS} workers on 8 devices, cores {min(CORES)}..{max(CORES)} (geometric, sum "
        f"{sum(CORES)}), B = {BATCH} (16 a worker), b_max = 48, b_min 8 (the paper's B/(2W)) "
        f"or 0; CNN on digits, {_runs_text(runs)}.",
        "",
        md_table(
            ["b_min", "policy", "total time", "reduction (total time)", "ideal", "final accuracy"],
            rows,
        ),
    )
    return facts


def resnet_section(doc: Doc, runs: list[G.Group]) -> dict[str, Any]:
    rows, facts = [], {}
    for g in runs:
        cores, name = g.values["hetero.cores"], g.values["controller.name"]
        level = int(max(cores) // min(cores))
        ref = G.find(runs, controller__name="static", hetero__cores=cores)
        speedup = ref.get("total_time_mean") / g.get("total_time_mean")
        facts[(level, name)] = speedup
        ceiling = sum(cores) / (len(cores) * min(cores))
        label = f"resnet HL{level} {name}"
        rows.append(
            [
                f"HL{level} {'/'.join(map(str, cores))}",
                name,
                doc.num("resnet", label, g, "total_time"),
                f"{speedup:.2f}x",
                f"{paper.ACSOS_SPEEDUP.get(level, math.nan):.1f}x" if name != "static" else "-",
                f"{ceiling:.2f}x",
            ]
        )
    doc.add(
        "## ResNet-18 on 3 workers (ACSOS'20 set-up)",
        "",
        "Runlocal ResNet-18 (stem width 8, CIFAR-shaped synthetic 16x16x3 input), 3 workers, "
        f"B = 96, bounds 16..96, {_runs_text(runs)}. *Ceiling* is the largest speed-up any "
        "split can give under a linear cost without bounds, sum(cores) / (W min(cores)).",
        "",
        md_table(
            ["cluster (cores)", "policy", "total time", "speed-up", "ACSOS'20", "ceiling"], rows
        ),
    )
    return facts


def sources(doc: Doc, workdir: str, bench_dir: str, timings: dict) -> None:
    lines = ["## Sources", ""]
    lines.append(
        "Every number above is computed by `experiments/paper/results_doc.py` from these "
        "ablation directories (each cell: `config.json`, `metrics.jsonl`, `summary.json`, "
        "and `log.txt` whose first line is the cell's command); "
        f"`{rel(os.path.join(workdir, 'results.json'))}` lists each number with the cells it "
        "averages."
    )
    lines.append("")
    for name in ABLATIONS:
        path = os.path.join(workdir, name)
        if os.path.exists(os.path.join(path, "ablation.json")):
            wall = timings.get(name)
            took = f", {wall:.0f} s wall" if wall is not None else ""
            lines.append(
                f"- `{rel(path)}/` (config `experiments/paper/{name}.py`{took}; table "
                f"`{rel(path)}/results.md`)"
            )
    if bench_dir and os.path.isdir(bench_dir):
        wall = timings.get("benchmarks")
        took = f", {wall:.0f} s wall" if wall is not None else ""
        lines.append(f"- benchmarks: `{rel(bench_dir)}/*.json` (rendered in BENCHMARKS.md{took})")
    doc.add(*lines, "")


def summary_table(doc: Doc, bsp: dict, asy: dict, res: dict) -> None:
    prop = [v for k, v in bsp["prop"].items() if k[1] == "16..96" and k[0] > 1]
    gains = [v for k, v in asy["gain"].items() if k[1] != "static"]
    rows = [
        [
            "BSP: training time vs uniform batching",
            f"{paper.BSP_REDUCTION[0]:.0%}-{paper.BSP_REDUCTION[1]:.0%} less",
            f"{pct_range(prop)} less (`proportional`, HL2-HL8)",
        ],
        [
            "Async: accuracy at equal time vs uniform",
            f"up to +{100 * paper.ASYNC_GAIN:.1f}%",
            f"{100 * max(gains):+.1f} points at best" if gains else "-",
        ],
    ]
    for level, claimed in sorted(paper.ACSOS_SPEEDUP.items()):
        ours = res.get((level, "proportional"))
        rows.append(
            [
                f"ResNet, 3 CPU workers, H-level {level} (ACSOS'20)",
                f"{claimed:.1f}x faster",
                f"{ours:.2f}x faster" if ours is not None else "-",
            ]
        )
    doc.add(
        "## Summary: the papers' figures and ours",
        "",
        md_table(["result", "paper", "ours (this run)"], rows),
        f"Papers: {paper.OMNILEARN}; {paper.ACSOS}. Details, tables and the reasons for the "
        "differences below.",
        "",
    )


def build(
    workdir: str, figures: list[tuple[str, str]], bench_dir: str, timings: dict
) -> tuple[str, list[dict]]:
    """(markdown, traced numbers) for the run directories under `workdir`."""
    runs = {name: G.load(os.path.join(workdir, name)) for name in ABLATIONS}
    body = Doc()
    bsp = bsp_section(body, runs)
    dyn = dynamic_section(body, runs["dynamic"]) if runs["dynamic"] else {}
    asy = (
        async_section(body, runs["async_levels"])
        if runs["async_levels"]
        else {"gain": {}, "noise": {}}
    )
    scale = scaleout_section(body, runs["scaleout"]) if runs["scaleout"] else {}
    res = resnet_section(body, runs["resnet"]) if runs["resnet"] else {}
    discussion(body, bsp, dyn, asy, scale, res, _cost(workdir))
    if figures:
        body.add("## Figures", "")
        for title, path in figures:
            body.add(f"**{title}**", "", f"![{title}]({path})", "")
    sources(body, workdir, bench_dir, timings)
    head = Doc()
    total = timings.get("total")
    head.add(
        "# Results: OmniLearn reproduced side by side",
        "",
        "Generated by `make report` (`python -m experiments.paper.reproduce`) from the run "
        "directories listed under Sources; do not edit by hand. All runs are on CPU with the "
        "virtual clock (docs/cluster.md): worker times come from the cluster model, so the "
        "times below are seconds of modelled training, identical on any machine for a given "
        "seed, while accuracies come from real training."
        + (
            f" The command took {total / 60:.1f} min of wall time on the machine of "
            "BENCHMARKS.md (ablations and benchmarks; each part's time is under Sources)."
            if total
            else ""
        ),
        "",
    )
    summary_table(head, bsp, asy, res)
    head.add(
        "To regenerate: `make report` (this document, docs/BENCHMARKS.md and the figures; "
        "a rerun finishes only missing cells, so delete runs/paper for fresh runs), or "
        "`python -m experiments.paper.reproduce --small` for a quick check of the pipeline "
        "into a temporary directory (tests/test_paper_pipeline.py runs it). Each ablation "
        "is also an ordinary ablation config: `python -m experiments.ablate "
        "--config=experiments/paper/bsp_levels.py --workdir=... --parallel 2`.",
        "",
    )
    return "\n".join(head.lines + body.lines) + "\n", body.traced


def write(
    workdir: str, doc_path: str, figures: list[tuple[str, str]], bench_dir: str, timings: dict
) -> list[dict]:
    """Writes the document and WORKDIR/results.json (each number with its cells)."""
    text, traced = build(workdir, figures, bench_dir, timings)
    with open(doc_path, "w") as f:
        f.write(text)
    with open(os.path.join(workdir, "results.json"), "w") as f:
        json.dump({"document": rel(doc_path), "timings_s": timings, "numbers": traced}, f, indent=1)
    return traced
