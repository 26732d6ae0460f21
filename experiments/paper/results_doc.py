"""docs/RESULTS.md from the run directories of `experiments.paper.reproduce`.

Every number of ours is computed here from the ablations' run stores (through the runner's
own `build_table`), written next to the paper's figure, and listed in `results.json` with
the cell directories it averages, so a reader (or tests/test_paper_pipeline.py) can
recompute it. The discussion is templated; its numbers come from the same tables.
"""

from __future__ import annotations

import glob
import json
import os

from experiments.paper import bsp_levels_curve, export, fragments, resnet_curve, stamp
from experiments.paper import groups as G
from experiments.paper import paper_facts as paper
from experiments.paper.curve_section import bsp_curve_section
from experiments.paper.discussion import discussion, pct_range
from experiments.paper.fmt import curve_name, fmt, md_table, rel, signed
from experiments.paper.sections import (
    async_section,
    bsp_section,
    dynamic_section,
    resnet_section,
    scaleout_section,
)
from experiments.paper.tracedoc import Doc

ABLATIONS = (
    "bsp_levels",
    "bsp_static_cores",
    "bsp_nobounds",
    "dynamic",
    "async_levels",
    "scaleout",
    "resnet",
    "resnet_curve",
    "bsp_levels_curve",
    "dynamic_curve",
    "async_levels_curve",
    "scaleout_curve",
)

# The studies with generators of their own that `make report` reruns (reproduce.py), and the
# files under docs/results/ each writes; every other docs/results/*.md is spliced as committed.
STUDIES = {
    "async_fair": ("async_fair.json", "async_fair.md"),
    "heldout": ("controller_heldout_seeds.json", "predictive_seeds.md"),
    "predictive_trainer": ("predictive_trainer.json", "predictive_seeds.md"),
    "controller_heldout": ("controller_heldout.json", "controller_heldout.md"),
    "async_staleness": ("async_staleness.json", "async_staleness.md"),
    "cost_curves": ("cost_curves.json", "cost_curves.md"),  # reads predictive_trainer's runs
    "lm": ("lm.json", "lm.md"),
    "lm_curve": ("lm_curve.json", "lm_curve.md"),
}
MEASURED = "real_hetero.md"  # the quota study: the wall clock under root cgroups, not rerun


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


def _curve(groups: list, default: str) -> str:
    """The cost curve the first cell of `groups` charged (its config.json), repo-relative."""
    for g in groups:
        for cell in g.cells:
            try:
                with open(os.path.join(cell, "config.json")) as f:
                    path = json.load(f)["cost"]["curve"]
            except (OSError, ValueError, KeyError):
                continue
            if not path:
                return default
            return curve_name(path)
    return default


# (ablation, its table) of the set-ups run on the formula and again on a measured curve.
CURVE_TABLES = (
    ("bsp_levels", "the BSP levels"),
    ("dynamic", "the dynamic cluster"),
    ("async_levels", "asynchronous training"),
    ("scaleout", "the scale-out"),
    ("resnet", "ResNet-18"),
)
GPT_CURVE = "data/curves/cpu_gpt_text.json"  # the language-model study's (docs/results/lm_curve.md)
LM_FORMULA = "## A small GPT on offline text: perplexity, BSP and async\n"  # lm.md's heading


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _how_charged(runs: dict, cost: dict, studies) -> str:
    """Which tables the virtual clock charged the formula and which a measured curve, from
    the run directories present (and the spliced studies)."""
    formula = [name for key, name in CURVE_TABLES if runs.get(key)]
    curved = [
        f"{name} (`{_curve(runs[key + '_curve'], '?')}`)"
        for key, name in CURVE_TABLES
        if runs.get(key + "_curve")
    ]
    if any(s.startswith(LM_FORMULA) for s in studies):
        formula.append("the language-model study (docs/results/lm.md)")
    if any(GPT_CURVE in s for s in studies):
        curved.append(f"the language-model study (docs/results/lm_curve.md, `{GPT_CURVE}`)")
    text = (
        f"every time, reduction and speed-up of the first table of {_and(formula)} is "
        f"*{modelled(cost)}*, the same formula for every model (the CNN, ResNet-18, the GPT)"
        if formula
        else "no formula table was run"
    )
    if curved:
        text += (
            f"; the second table of {_and(curved)} is *modelled: virtual clock, that model's "
            "own measured CPU cost curve*, read at the bucket each device computes (its "
            "heading says so)"
        )
    return text + (
        "; the other studies spliced in from docs/results/ say what they charge (the "
        "controller simulations their plants' curves, the cost-curve study and the "
        "predictive study's trainer runs the measured curves they name, the tuned async study "
        "the formula)."
    )


def _ran_at(path: str) -> str:
    """', last run at commit `abc1234` (dirty) on DATE' from the ablation's stamp.json."""
    try:
        with open(os.path.join(path, "stamp.json")) as f:
            return ", last run at " + stamp.line(json.load(f))
    except (OSError, ValueError, KeyError):
        return ""


def study_sources(docs: str, timings: dict) -> list[str]:
    """Sources lines for docs/results/: the studies make report reruns (with their latest
    wall time), then every other document spliced as committed (with its last commit)."""
    results = os.path.join(docs, "results")
    lines = []
    for name, files in STUDIES.items():
        wall = timings.get(name)
        took = (
            f"{wall:.0f} s wall in the latest `make report` that ran it"
            if wall
            else "not rerun in these runs: its document names the commit its runs ran at"
        )
        listed = ", ".join(f"`{rel(os.path.join(results, f))}`" for f in files)
        lines.append(f"- study `{name}` (rerun by `make report`; {took}): {listed}")
    rerun = {f for files in STUDIES.values() for f in files}
    for path in sorted(glob.glob(os.path.join(results, "*.md"))):
        if os.path.basename(path) in rerun:
            continue
        head, day = stamp.file_commit(path)
        when = f"last committed at `{head}` on {day}" if head else "not committed"
        how = (
            "measured on the wall clock under CPU quotas (root cgroups), so "
            if os.path.basename(path) == MEASURED
            else ""
        )
        lines.append(
            f"- `{rel(path)}`: {how}not rerun by `make report`; spliced as committed "
            f"({when}; its section names the command that produced it)"
        )
    return lines


def sources(
    doc: Doc, workdir: str, bench_dir: str, timings: dict, exported: str = "", docs: str = ""
) -> None:
    lines = ["## Sources", ""]
    lines.append(
        "Every number above is computed by `experiments/paper/results_doc.py` (its sections "
        "in `experiments/paper/sections.py`) from these "
        "ablation directories (each cell: `config.json`, `metrics.jsonl`, `summary.json`, "
        "and `log.txt` whose first line is the cell's command); "
        f"`{rel(os.path.join(workdir, 'results.json'))}` lists each number with the cells it "
        "averages."
        + (
            f" `runs/` is not in the repository: `{rel(exported)}/<ablation>.json` holds "
            "every cell of each (grid values, summary.json, eval curve) and "
            f"`{rel(exported)}/numbers.json` each number of the tables with the cells it "
            "averages, named `<file>#<cell>` (tests/test_results_trace.py recomputes them)."
            if exported
            else ""
        )
    )
    lines.append("")
    for name in ABLATIONS:
        path = os.path.join(workdir, name)
        if os.path.exists(os.path.join(path, "ablation.json")):
            wall = timings.get(name)
            took = f", {wall:.0f} s wall" if wall is not None else ""
            ran = _ran_at(path)
            lines.append(
                f"- `{rel(path)}/` (config `experiments/paper/{name}.py`{took}{ran}; table "
                f"`{rel(path)}/results.md`)"
            )
    if bench_dir and os.path.isdir(bench_dir):
        wall = timings.get("benchmarks")
        took = f", {wall:.0f} s wall" if wall is not None else ""
        lines.append(f"- benchmarks: `{rel(bench_dir)}/*.json` (rendered in BENCHMARKS.md{took})")
    if docs:
        lines += study_sources(docs, timings)
    doc.add(*lines, "")


def modelled(cost: dict) -> str:
    """How a speed-up of these ablations was obtained: the virtual clock and its cost."""
    if not cost:
        return "modelled: virtual clock"
    return (
        f"modelled: virtual clock, ({fmt(cost.get('fixed_cost'))} + "
        f"{fmt(cost.get('per_sample_cost'))} b)/cores"
    )


def _fair_text(fair: dict | None, label: str) -> str:
    """The fair async study's paired differences at the budget (docs/results/async_fair.md)."""
    if not fair:
        return ""
    finals = [v for (_, what, key), v in fair.items() if key == "final" and what.endswith("async")]
    if not finals:
        return ""
    sig = sum(1 for _, lo, hi in finals if lo > 0 or hi < 0)
    lo, hi = min(m for m, _, _ in finals), max(m for m, _, _ in finals)
    return (
        f"{signed(100 * lo)} to {signed(100 * hi)} points over {len(finals)} tuned settings, "
        f"{sig} significant (paired 95% intervals; docs/results/async_fair.md; time {label})"
    )


def summary_table(
    doc: Doc,
    bsp: dict,
    asy: dict,
    res: dict,
    cost: dict | None = None,
    fair: dict | None = None,
    res_curve: dict | None = None,
    bsp_curve: dict | None = None,
    cnn_curve: str = "",
    asy_curve: dict | None = None,
) -> None:
    label = modelled(cost or {})
    curve_label = (
        "modelled: virtual clock, the measured CPU CNN curve "
        f"{cnn_curve or rel(bsp_levels_curve.CURVE)}"
    )
    gains_curve = [v for k, v in (asy_curve or {}).get("gain", {}).items() if k[1] != "static"]
    prop = [v for k, v in bsp["prop"].items() if k[1] == "16..96" and k[0] > 1]
    on_curve = [v for k, v in (bsp_curve or {}).get("proportional", {}).items() if k > 1]
    gains = [v for k, v in asy["gain"].items() if k[1] != "static"]
    rows = [
        [
            "BSP: training time vs uniform batching",
            f"{paper.BSP_REDUCTION[0]:.0%}-{paper.BSP_REDUCTION[1]:.0%} less",
            (f"{pct_range(prop)} less (`proportional`, HL2-HL8; {label})" if prop else "-")
            + (f"; {pct_range(on_curve)} less ({curve_label})" if on_curve else ""),
        ],
        [
            "Async: accuracy at equal time vs uniform",
            f"up to +{100 * paper.ASYNC_GAIN:.1f}%",
            (
                _fair_text(fair, label)
                or (
                    f"{signed(100 * max(gains), 1)} points at best of {len(gains)} cells "
                    f"(time {label})"
                    if gains
                    else "-"
                )
            )
            + (
                f"; one untuned learning rate (the two asynchronous tables): "
                f"{signed(100 * min(gains), 1)} to {signed(100 * max(gains), 1)} points over "
                f"{len(gains)} "
                f"cells under the formula, {signed(100 * min(gains_curve), 1)} to "
                f"{signed(100 * max(gains_curve), 1)} over {len(gains_curve)} on the curve "
                f"({curve_label})"
                if gains_curve and gains
                else ""
            ),
        ],
    ]
    for level, claimed in sorted(paper.ACSOS_SPEEDUP.items()):
        ours = res.get((level, "proportional"))
        rows.append(
            [
                f"ResNet, 3 CPU workers, H-level {level} (ACSOS'20)",
                f"{claimed:.1f}x faster",
                (
                    f"{ours:.2f}x faster ({label}, the same cost for every model)"
                    if ours is not None
                    else "-"
                )
                + (
                    f"; {res_curve[(level, 'proportional')]:.2f}x (modelled: virtual clock, "
                    f"the measured CPU ResNet-18 curve {rel(resnet_curve.CURVE)})"
                    if (res_curve or {}).get((level, "proportional")) is not None
                    else ""
                ),
            ]
        )
    doc.add(
        "## Summary: the papers' figures and ours",
        "",
        md_table(["result", "paper", "ours (this run; how obtained)"], rows),
        f"Papers: {paper.OMNILEARN}; {paper.ACSOS}. Details, tables and the reasons for the "
        "differences below.",
        "",
    )


def build(
    workdir: str,
    figures: list[tuple[str, str]],
    bench_dir: str,
    timings: dict,
    studies: list[str] = (),
    exported: str = "",
    stamped: dict | None = None,
    fair: dict | None = None,
    docs: str = "",
) -> tuple[str, list[dict]]:
    """(markdown, traced numbers) for the run directories under `workdir`."""
    runs = {name: G.load(os.path.join(workdir, name)) for name in ABLATIONS}
    body = Doc()
    bsp = bsp_section(body, runs)
    cnn_curve = _curve(runs["bsp_levels_curve"], rel(bsp_levels_curve.CURVE))
    bsp_curve = (
        bsp_curve_section(body, runs["bsp_levels_curve"], cnn_curve)
        if runs["bsp_levels_curve"]
        else {}
    )
    dyn = dynamic_section(body, runs["dynamic"]) if runs["dynamic"] else {}
    dyn_curve = (
        dynamic_section(body, runs["dynamic_curve"], _curve(runs["dynamic_curve"], cnn_curve))
        if runs["dynamic_curve"]
        else {}
    )
    asy = (
        async_section(body, runs["async_levels"])
        if runs["async_levels"]
        else {"gain": {}, "noise": {}}
    )
    asy_curve = (
        async_section(
            body, runs["async_levels_curve"], _curve(runs["async_levels_curve"], cnn_curve)
        )
        if runs["async_levels_curve"]
        else {}
    )
    scale = scaleout_section(body, runs["scaleout"]) if runs["scaleout"] else {}
    scale_curve = (
        scaleout_section(body, runs["scaleout_curve"], _curve(runs["scaleout_curve"], cnn_curve))
        if runs["scaleout_curve"]
        else {}
    )
    res = resnet_section(body, runs["resnet"]) if runs["resnet"] else {}
    res_curve = (
        resnet_section(body, runs["resnet_curve"], rel(resnet_curve.CURVE))
        if runs["resnet_curve"]
        else {}
    )
    body.add(fragments.block(list(studies)))
    curves = {"dynamic": dyn_curve, "async": asy_curve, "scaleout": scale_curve}
    discussion(body, bsp, dyn, asy, scale, res, _cost(workdir), fair, res_curve, bsp_curve, curves)
    if figures:
        body.add("## Figures", "")
        for title, path in figures:
            body.add(f"**{title}**", "", f"![{title}]({path})", "")
    sources(body, workdir, bench_dir, timings, exported, docs)
    head = Doc()
    cost = _cost(workdir)
    total = timings.get("total")
    stamped = stamped or stamp.stamp()
    head.add(
        "# Results: OmniLearn reproduced side by side",
        "",
        f"Generated at {stamp.line(stamped)}, by `make report` "
        "(`python -m experiments.paper.reproduce`) from the run "
        "directories listed under Sources; do not edit by hand. All runs are on CPU with the "
        "virtual clock (docs/cluster.md): worker times come from the cluster model, so the "
        "times below are seconds of modelled training, identical on any machine for a given "
        "seed, while accuracies come from real training. **How each speed-up was obtained:** "
        + _how_charged(runs, cost, studies)
        + " The study 'Measured on CPU-quota heterogeneity' is *measured* "
        "(CPU quotas per worker process, the wall clock); `make report` does not rerun it (it "
        "needs root cgroups and a quiet machine): its section names its commands, and Sources "
        "the commit that last changed it. None is *emulated* (injected "
        "waits, `hetero.inject`): those checks are in "
        "BENCHMARKS.md (wall-clock saving with injected heterogeneity)."
        + (
            f" Its parts took {total / 60:.1f} min of wall time in all, each in its latest run ("
            + "ablations"
            + (
                ", benchmarks"
                if "benchmarks" in timings
                else " (the benchmarks were not rerun: BENCHMARKS.md names the commit that "
                "holds each of their files)"
            )
            + (
                ", and the studies " + _and([f"`{n}`" for n in STUDIES if n in timings])
                if any(n in timings for n in STUDIES)
                else ", no study rerun"
            )
            + "; each part's time is under Sources)."
            if total
            else ""
        ),
        "",
    )
    summary_table(head, bsp, asy, res, cost, fair, res_curve, bsp_curve, cnn_curve, asy_curve)
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


def _fair(path: str) -> dict | None:
    """The fair async study's paired intervals, computed from its committed JSON."""
    if not os.path.exists(path):
        return None
    from experiments import async_fair_doc

    with open(path) as f:
        return async_fair_doc.build(json.load(f))[1]


def write(
    workdir: str,
    doc_path: str,
    figures: list[tuple[str, str]],
    bench_dir: str,
    timings: dict,
    stamped: dict | None = None,
) -> list[dict]:
    """Writes the document and WORKDIR/results.json (each number with its cells). `stamped`:
    the tree's state before anything was written (what is written here would make it dirty)."""
    docs = os.path.dirname(doc_path) or "."
    studies = fragments.collect(docs)
    out_dir = os.path.join(docs, "results", "paper")
    exported = [export.export(workdir, name, out_dir) for name in ABLATIONS]
    stamped = stamped or stamp.stamp()
    fair = _fair(os.path.join(docs, "results", "async_fair.json"))
    text, traced = build(
        workdir,
        figures,
        bench_dir,
        timings,
        studies,
        out_dir if any(exported) else "",
        stamped,
        fair,
        docs,
    )
    with open(doc_path, "w") as f:
        f.write(text)
    record = {"document": rel(doc_path), **stamped, "timings_s": timings}
    with open(os.path.join(workdir, "results.json"), "w") as f:
        json.dump({**record, "numbers": traced}, f, indent=1)
    if any(exported):
        with open(os.path.join(out_dir, "numbers.json"), "w") as f:
            json.dump({**record, "numbers": export.retarget(traced, out_dir)}, f, indent=1)
    return traced
