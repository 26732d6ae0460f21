"""The sections of docs/RESULTS.md, one function each: BSP levels, a dynamic cluster,
asynchronous training, scale-out and ResNet. Each writes its markdown into a `Doc` and
returns the numbers the summary and the discussion use."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from experiments.paper import groups as G
from experiments.paper import paper_facts as paper
from experiments.paper.common import LEVELS, TARGET, hl_cores
from experiments.paper.fmt import fmt, md_table, pct, signed
from experiments.paper.tracedoc import Doc, compare
from omnilearn_jax.cluster import uniform_vs_balanced_reduction


def _runs_text(groups: list[G.Group]) -> str:
    """'N seed(s), S steps' read from the groups' summaries (so --small says what it ran)."""
    seeds = max((len(g.summaries) for g in groups), default=0)
    steps = sorted({int(s["steps"]) for g in groups for s in g.summaries})
    span = "-".join(str(v) for v in (steps[:1] + steps[-1:] if len(steps) > 1 else steps))
    return f"{seeds} seed{'s' if seeds != 1 else ''}, {span or '?'} steps"


FORMULA = "the formula of every table, (0.05 + 0.01 b) / cores"


def charged(curve: str, model: str) -> str:
    """What the virtual clock charged a table: the formula, or `model`'s measured `curve`
    (a `*_curve` ablation, common.on_curve)."""
    if not curve:
        return f"modelled: the virtual clock charges {FORMULA}"
    return (
        f"modelled: the virtual clock charges the measured CPU {model} curve `{curve}` over "
        "each worker's cores, read at the bucket each device computes (padding charged)"
    )


def _titled(title: str, curve: str) -> str:
    """A table's heading; a curve table's names the curve it charges."""
    return f"{title}: the CNN's measured cost curve" if curve else title


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
            doc.reduction("bsp", label, g, ref, cut, stat)
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


def dynamic_section(doc: Doc, runs: list[G.Group], curve: str = "") -> dict[str, Any]:
    """The dynamic cluster; `curve`: the measured curve the clock charged ('' the formula)."""
    table = "dynamic curve" if curve else "dynamic"
    ref = G.find(runs, controller__name="static")
    rows, facts = [], {}
    for g in runs:
        name = g.values["controller.name"]
        cut, stat = compare(g, ref)
        facts[name] = cut
        label = f"{table} {name}"
        doc.reduction(table, label, g, ref, cut, stat)
        rows.append(
            [
                name,
                doc.num(table, label, g, "time_to_target"),
                g.row["target_reached"],
                doc.num(table, label, g, "total_time"),
                pct(cut) + ("" if stat == "time_to_target" else " (total)"),
                doc.num(table, label, g, "final_eval_accuracy"),
            ]
        )
    doc.add(
        _titled("## Dynamic heterogeneity: HL 1, 2, 4, 8, 8, 4, 2, 1", curve),
        "",
        "The paper's dynamic run: the level changes every epoch (11 steps) through 1, 2, 4, 8, "
        "8, 4, 2, 1 (`hetero.name=schedule`); same job and bounds as the BSP section, "
        f"{_runs_text(runs)}; {charged(curve, 'CNN')}. *Reduction* as in the BSP table.",
        "",
        md_table(
            ["policy", "time to target", "reached", "total time", "reduction", "final accuracy"],
            rows,
        ),
    )
    return facts


def rows_staleness(cell: str) -> float | None:
    """A run's staleness in rows applied between pull and push, per sample (its metrics)."""
    from omnilearn_jax.analysis.staleness import rows_between, weighted_mean
    from omnilearn_jax.run.runstore import read_metrics

    try:
        train = [r for r in read_metrics(cell) if "staleness" in r]
    except (OSError, ValueError):
        return None
    if not train:
        return None
    s = np.array([r["staleness"] for r in train])
    b = np.array([r["worker_batch"] for r in train])
    return weighted_mean(rows_between(s, b), b)


def async_section(doc: Doc, runs: list[G.Group], curve: str = "") -> dict[str, Any]:
    """Accuracy at equal time; `curve`: the measured curve the clock charged ('' the formula)."""
    table = "async curve" if curve else "async"
    rows, facts = [], {"gain": {}, "noise": {}, "spread": {}, "rows": {}, "versions": {}}
    for g in runs:
        name, level = g.values["controller.name"], g.values["hetero.level"]
        # Staleness spread: slowest worker's mean staleness / fastest's (1 = uniform).
        spreads = [
            max(w) / min(w)
            for w in (s.get("staleness_mean_per_worker") for s in g.summaries)
            if w and None not in w and min(w) > 0  # None: a worker that applied nothing
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
        label = f"{table} HL{level} {name}"
        if stale:
            facts["versions"][(level, name)] = float(np.mean(stale))
        in_rows = doc.derived(table, label, g, "staleness_rows_by_sample", rows_staleness)
        if in_rows != "-":  # the value just recorded, for the discussion
            facts["rows"][(level, name)] = doc.traced[-1]["mean"]
        rows.append(
            [
                f"HL{level}",
                name,
                doc.num(table, label, g, "final_eval_accuracy"),
                "-" if name == "static" else f"{signed(100 * gain, 1)} points",
                fmt(float(np.mean(stale))) if stale else "-",
                in_rows,
                fmt(facts["spread"][(level, name)]),
                doc.num(table, label, g, "total_time"),
            ]
        )
    budgets = sorted(
        {float(s["time_budget"]) for g in runs for s in g.summaries if s.get("time_budget")}
    )
    doc.add(
        _titled("## Asynchronous training: accuracy at equal time", curve),
        "",
        "configs/paper_asp.py: parameter server on the virtual clock, the paper's async core "
        "tables (HL2 8/8/8/16, HL4 10/10/4/16, HL8 4/4/4/28), plain SGD, updates weighted by "
        "batch share, no bounds; every run stops at the same virtual time and the accuracy "
        "there is the result. *Mean staleness* counts versions (updates applied between a "
        "worker's pull and its push, of any size); *in rows* counts the samples those updates "
        "held, per sample (each update weighted by its rows), which compares between splits. "
        "*Staleness spread* is the most stale worker's mean staleness "
        f"over the least stale one's (1 = even). Same CNN on digits, {_runs_text(runs)} "
        f"(updates), budget {'/'.join(f'{b:g}' for b in budgets) or '?'} s; "
        f"{charged(curve, 'CNN')}"
        + (
            ", plus the cost model's push and pull of the parameters, which at this step "
            "length is most of an update: the budget is on the curve's scale, chosen so that "
            "uniform batching at HL2 makes about as many updates as under the formula"
            if curve
            else ""
        )
        + ".",
        "",
        md_table(
            [
                "level",
                "policy",
                "accuracy at budget",
                "gain vs static",
                "mean staleness",
                "in rows per sample",
                "staleness spread",
                "time",
            ],
            rows,
        ),
    )
    return facts


def scaleout_section(doc: Doc, runs: list[G.Group], curve: str = "") -> dict[str, Any]:
    """The 32-worker scale-out; `curve`: the measured curve the clock charged ('' the
    formula)."""
    from experiments.paper.scaleout import BATCH, CORES, WORKERS

    table = "scaleout curve" if curve else "scaleout"
    rows, facts = [], {}
    ideal = _ideal(CORES, BATCH)
    for g in runs:
        name, b_min = g.values["controller.name"], g.values["controller.b_min"]
        ref = G.find(runs, controller__name="static", controller__b_min=b_min)
        cut, _ = compare(g, ref, "total_time")  # evaluated every 2 steps: too coarse a target
        facts[(b_min, name)] = cut
        label = f"scale-out{' curve' if curve else ''} b_min {b_min} {name}"
        doc.reduction(table, label, g, ref, cut, "total_time")
        rows.append(
            [
                b_min,
                name,
                doc.num(table, label, g, "total_time"),
                pct(cut),
                pct(ideal),
                doc.num(table, label, g, "final_eval_accuracy"),
            ]
        )
    facts["ideal"] = ideal
    doc.add(
        _titled(f"## Scale-out: {WORKERS} workers, 2 to 32 cores", curve),
        "",
        f"{WORKERS} workers on 8 devices, cores {min(CORES)}..{max(CORES)} (geometric, sum "
        f"{sum(CORES)}), B = {BATCH} (16 a worker), b_max = 48, b_min 8 (the paper's B/(2W)) "
        f"or 0; CNN on digits, {_runs_text(runs)}; {charged(curve, 'CNN')}. *Ideal* is that "
        "of a linear cost without bounds, as in the BSP table.",
        "",
        md_table(
            ["b_min", "policy", "total time", "reduction (total time)", "ideal", "final accuracy"],
            rows,
        ),
    )
    return facts


def resnet_section(doc: Doc, runs: list[G.Group], curve: str = "") -> dict[str, Any]:
    """The ACSOS'20 comparison; `curve`: the measured cost curve the clock charged (the
    resnet_curve ablation), '' for the formula (0.05 + 0.01 b) / cores."""
    rows, facts = [], {}
    for g in runs:
        cores, name = g.values["hetero.cores"], g.values["controller.name"]
        level = int(max(cores) // min(cores))
        ref = G.find(runs, controller__name="static", hetero__cores=cores)
        speedup = ref.get("total_time_mean") / g.get("total_time_mean")
        facts[(level, name)] = speedup
        ceiling = sum(cores) / (len(cores) * min(cores))
        label = f"resnet{' curve' if curve else ''} HL{level} {name}"
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
        "## ResNet-18 on 3 workers (ACSOS'20 set-up)"
        + (": the measured ResNet-18 cost curve" if curve else ""),
        "",
        "Runlocal ResNet-18 (stem width 8, CIFAR-shaped synthetic 16x16x3 input), 3 workers, "
        f"B = 96, bounds 16..96, {_runs_text(runs)}; {charged(curve, 'ResNet-18')}. *Ceiling* "
        "is the "
        "largest speed-up any split can give under a linear cost without bounds, "
        "sum(cores) / (W min(cores)).",
        "",
        md_table(
            ["cluster (cores)", "policy", "total time", "speed-up", "ACSOS'20", "ceiling"], rows
        ),
    )
    return facts
