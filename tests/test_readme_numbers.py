"""The figures the README quotes equal the committed files they come from (issue 28, point 4).

Each test finds a sentence of README.md by its words, reads its numbers, and recomputes them
from the file the sentence names: docs/results/paper/numbers.json (RESULTS.md's tables),
docs/benchmarks/hetero_wall.json and async_round.json, docs/results/async_fair.json and
docs/results/real_hetero.json.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

from experiments import async_fair_doc, async_seeds, real_hetero
from experiments.paper.fmt import signed

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme() -> str:
    with open(os.path.join(REPO, "README.md")) as f:
        return " ".join(f.read().split())  # sentences may wrap anywhere


def _json(*parts: str):
    with open(os.path.join(REPO, *parts)) as f:
        return json.load(f)


def _find(pattern: str) -> re.Match:
    m = re.search(pattern, _readme())
    assert m, pattern
    return m


def test_modelled_bsp_reduction_is_the_results_table():
    m = _find(
        r"\*\*modelled\*\*.*?`proportional` needs ([0-9.]+)%-([0-9.]+)% less training time "
        r"than uniform batching at HL2-HL8"
    )
    numbers = _json("docs", "results", "paper", "numbers.json")["numbers"]
    cuts = [
        e["mean"]
        for e in numbers
        if e["stat"] == "reduction"
        and e["label"] in {f"HL{lvl} proportional bounds 16..96" for lvl in (2, 4, 8)}
    ]
    assert len(cuts) == 3
    assert (m.group(1), m.group(2)) == (f"{100 * min(cuts):.1f}", f"{100 * max(cuts):.1f}")


def test_measured_curve_reduction_is_the_curve_table():
    m = _find(r"and ([0-9.]+)%-([0-9.]+)% less on the CNN's measured curve")
    numbers = _json("docs", "results", "paper", "numbers.json")["numbers"]
    cuts = [
        e["mean"]
        for e in numbers
        if e["table"] == "bsp curve"
        and e["stat"] == "reduction"
        and e["label"] in {f"HL{lvl} proportional curve" for lvl in (2, 4, 8)}
    ]
    assert len(cuts) == 3
    assert (m.group(1), m.group(2)) == (f"{100 * min(cuts):.1f}", f"{100 * max(cuts):.1f}")


def test_lm_speedups_are_the_two_lm_studies():
    """The GPT's time-to-perplexity speed-ups the README quotes, under the formula and on its
    measured curve, recomputed from the committed eval curves (docs/results/lm*.json)."""
    from experiments import lm_results

    m = _find(
        r"reaches perplexity 15 sooner than with uniform batches by ([0-9.]+)x and ([0-9.]+)x "
        r"\(BSP, HL4 and HL8\) under the formula and by ([0-9.]+)x and ([0-9.]+)x on its own "
        r"measured curve; in async mode ([0-9.]+)x at HL4 under the formula \(no seed at HL8 "
        r"reaches the target by the budget\) and ([0-9.]+)x and ([0-9.]+)x on the curve .*?"
        r"in async mode ([0-9]) of 3 at HL4 under the formula, ([0-9]) of 3 at HL4 and ([0-9]) "
        r"of 3 at HL8 on the curve"
    )

    def speedups(name: str, mode: str) -> list[tuple[str, int]]:
        runs = [
            {**r, "evals": [{"time": t, "eval_perplexity": p} for t, p in r["evals"]]}
            for r in _json("docs", "results", name)[mode]
        ]
        out = []
        for level in (4, 8):
            rows = lm_results.summarise(runs, 15.0, asp=mode == "asp")[level]["rows"]
            ratio, reached, _ = lm_results.to_target_ratio(rows, "proportional")
            out.append((f"{ratio:.2f}", reached))
        return out

    bsp = [*speedups("lm.json", "bsp"), *speedups("lm_curve.json", "bsp")]
    (hl4, hl8), curve = speedups("lm.json", "asp"), speedups("lm_curve.json", "asp")
    assert list(m.groups()[:7]) == [r for r, _ in bsp] + [hl4[0]] + [r for r, _ in curve]
    assert all(reached == 3 for _, reached in bsp)  # "3 of 3 in BSP"
    assert hl8 == ("nan", 0)  # "no seed at HL8 reaches the target by the budget"
    assert [int(g) for g in m.groups()[7:]] == [hl4[1], curve[0][1], curve[1][1]]


def test_emulated_reduction_is_the_hetero_wall_file():
    m = _find(
        r"\*\*emulated\*\* \(injected waits of ([0-9.]+) s a sample.*?`proportional` takes "
        r"([0-9.]+)x and ([0-9.]+)x the wall time of uniform batching at HL4 and HL8 \(median; "
        r"worst ([0-9.]+)x and ([0-9.]+)x\), ([0-9.]+)% and ([0-9.]+)% less, against ([0-9.]+)% "
        r"and ([0-9.]+)% predicted"
    )
    cells = _json("docs", "benchmarks", "hetero_wall.json")["result"]["cells"]
    inject = float(m.group(1))
    by_level = {
        c["level"]: c
        for c in cells
        if c["controller"] == "proportional" and abs(c["inject"] - inject) < 1e-12
    }
    hl4, hl8 = by_level[4], by_level[8]
    want = [
        f"{hl4['all']['median']:.2f}", f"{hl8['all']['median']:.2f}",
        f"{hl4['all']['worst']:.2f}", f"{hl8['all']['worst']:.2f}",
        f"{100 * hl4['reduction']:.1f}", f"{100 * hl8['reduction']:.1f}",
        f"{100 * hl4['predicted']:.1f}", f"{100 * hl8['predicted']:.1f}",
    ]  # fmt: skip
    assert list(m.groups()[1:]) == want


def test_async_gain_is_the_fair_study():
    m = _find(
        r"proportional minus uniform at the budget is ([-+][0-9.]+) to ([-+][0-9.]+) points "
        r"over (\d) settings, (\d) significant"
    )
    _, summary = async_fair_doc.build(_json("docs", "results", "async_fair.json"))
    finals = [v for (_, what, key), v in summary.items() if key == "final" and "async" in what]
    significant = sum(1 for _, lo, hi in finals if lo > 0 or hi < 0)
    assert m.group(1) == signed(100 * min(v[0] for v in finals))
    assert m.group(2) == signed(100 * max(v[0] for v in finals))
    assert (int(m.group(3)), int(m.group(4))) == (len(finals), significant)


def test_async_round_cost_is_the_async_round_file():
    readme = _readme()
    assert "on both clocks" not in readme
    m = _find(
        r"a round of W updates costs ([0-9.]+)x a BSP step over the same samples on the "
        r"virtual clock and ([0-9.]+)x on the wall clock"
    )
    clocks = _json("docs", "benchmarks", "async_round.json")["clocks"]
    assert m.group(1) == f"{clocks['virtual']['ratio']:.2f}"
    assert m.group(2) == f"{clocks['wall']['ratio']:.2f}"


def test_quickstart_table_is_the_committed_seeds():
    """The Quickstart table's total time, speed-up and final accuracy per controller are the
    means over the seeds in docs/results/ablation_default.json."""
    cells = _json("docs", "results", "ablation_default.json")["cells"]
    by = {}
    for c in cells:
        by.setdefault(c["values"]["controller.name"], []).append(c["summary"])
    mean = {k: {s: sum(x[s] for x in v) / len(v) for s in ("total_time", "final_eval_accuracy")}
            for k, v in by.items()}  # fmt: skip
    with open(os.path.join(REPO, "README.md")) as f:
        rows = [ln for ln in f if re.match(r"\| (static|proportional|pi|oracle) \| ", ln)]
    assert len(rows) == 4
    for row in rows:
        cols = [c.strip() for c in row.strip().strip("|").split("|")]
        name, total, speedup, _, _, _, accuracy, seeds = cols
        assert int(seeds) == len(by[name])
        assert total.split(" ± ")[0] == f"{mean[name]['total_time']:.4g}", name
        assert accuracy.split(" ± ")[0] == f"{mean[name]['final_eval_accuracy']:.4g}", name
        ratio = mean["static"]["total_time"] / mean[name]["total_time"]
        assert speedup == f"{ratio:.2f}x", name


def test_plugin_example_times_are_the_committed_runs():
    m = _find(
        r"finishes in ([0-9.]+) s of virtual time against ([0-9.]+) s for `make train`'s "
        r"proportional controller \(modelled"
    )
    runs = _json("docs", "results", "readme_examples.json")["runs"]
    assert m.group(1) == f"{runs['damped']['summary']['total_time']:.2f}"
    assert m.group(2) == f"{runs['make_train']['summary']['total_time']:.2f}"
    assert "--config.controller.name=damped" in runs["damped"]["command"]


def _quota_cell(job: str, controller: str = "proportional", quotas=(1.0, 0.25)) -> dict:
    """The study file's cell of `controller` at `quotas` of `job`, named as its table names
    it (experiments/real_hetero.py)."""
    cells = _json("docs", "results", "real_hetero.json")["cells"]
    return next(c for c in cells if real_hetero._key(c) == (job, tuple(quotas), controller))


def _assert_quoted(m, cell: dict, first: int) -> None:
    """Groups first, first + 1 and first + 2 of `m` quote the cell's median, its number of
    paired runs and its worst, as the README prints them."""
    quoted = m.group(first, first + 1, first + 2)
    assert quoted == (f"{cell['median_ratio']:.2f}", str(len(cell["pairs"])),
                      f"{cell['worst_ratio']:.2f}")  # fmt: skip


def test_measured_quota_figure_is_the_study_file():
    m = _find(
        r"\*\*measured\*\* \(CPU quotas per worker, or a GPU\): at quotas 1\.0/0\.25.*?"
        r"`proportional` took ([0-9.]+)x the wall time of uniform batches \(median of (\d+) "
        r"paired runs; worst ([0-9.]+)x\).*?the virtual clock predicted ([0-9.]+)% less"
    )
    cell = _quota_cell("cnn")
    _assert_quoted(m, cell, 1)
    assert m.group(4) == f"{100 * cell['predicted_reduction']:.0f}"


def test_measured_wide_cnn_quota_figure_is_the_study_file():
    m = _find(
        r"With the CNN 8x wider \(`--job cnn64`\)[\s\S]*?`proportional`\s+took\s+([0-9.]+)x"
        r"\s+\(median\s+of\s+(\d+);\s+worst\s+([0-9.]+)x\)"
    )
    cell = _quota_cell("cnn64")
    _assert_quoted(m, cell, 1)


def test_measured_wide_cnn_unpinned_quota_figure_is_the_study_file():
    m = _find(
        r"delivering \d+% of the predicted reduction, and ([0-9.]+)x \(median of (\d+);\s+"
        r"worst ([0-9.]+)x\) unpinned[\s\S]*?spread from ([0-9.]+)x to ([0-9.]+)x"
    )
    cell = _quota_cell("cnn64, unpinned")
    ratios = [p["controller"]["wall_s"] / p["static"]["wall_s"] for p in cell["pairs"]]
    _assert_quoted(m, cell, 1)
    assert (m.group(4), m.group(5)) == (f"{min(ratios):.2f}", f"{max(ratios):.2f}")


def test_measured_quota_from_steps_figures_are_the_study_file():
    """Every controller on the wide CNN with the quota from the first step, and the
    four-process cluster, as the README quotes them."""
    job = "cnn64, quota from steps"
    m = _find(
        r"every controller ran on the wide CNN pinned: `proportional` ([0-9.]+)x \(median of "
        r"(\d+); worst ([0-9.]+)x\), `pi` ([0-9.]+)x \(worst ([0-9.]+)x\), `predictive` "
        r"([0-9.]+)x \(worst ([0-9.]+)x\) and the oracle ([0-9.]+)x\s+\(worst ([0-9.]+)x\), "
        r"all at the bound split \[96, 32\]"
    )
    quoted = iter(m.groups())
    for controller in ("proportional", "pi", "predictive", "oracle"):
        cell = _quota_cell(job, controller)
        assert next(quoted) == f"{cell['median_ratio']:.2f}", controller
        if controller == "proportional":
            assert int(next(quoted)) == len(cell["pairs"])
        assert next(quoted) == f"{cell['worst_ratio']:.2f}", controller
        assert {tuple(p["controller"]["final_split"]) for p in cell["pairs"]} == {(96, 32)}
    four = _find(
        r"0\.5/0\.5/0\.5/0\.125 balancing delivered almost nothing of a predicted (\d+-\d+)%: "
        r"`proportional` ([0-9.]+)x \(worst ([0-9.]+)x\), "
        r"the oracle ([0-9.]+)x\s+\(worst ([0-9.]+)x;"
    )
    quotas = (0.5, 0.5, 0.5, 0.125)
    cells = [_quota_cell(job, c, quotas) for c in ("proportional", "oracle")]
    assert four.groups()[1:] == tuple(
        f"{c[k]:.2f}" for c in cells for k in ("median_ratio", "worst_ratio")
    )
    everyone = [_quota_cell(job, c, quotas) for c in ("proportional", "pi", "predictive", "oracle")]
    predicted = [100 * c["predicted_reduction"] for c in everyone]
    assert f"{min(predicted):.0f}-{max(predicted):.0f}" == four.group(1)
    assert all(c["measured_reduction"] < 0.1 for c in everyone)  # "almost nothing"


def test_measured_async_quota_figures_are_the_study_file():
    """The async cells at quotas 1.0/0.25 as the README quotes them: the range of the
    balancing controllers' median wall-time ratios, and the mean and 95% t-interval of
    controller minus static final accuracy over every pair."""
    m = _find(
        r"balancing took ([0-9.]+)x-([0-9.]+)x uniform's wall time \(medians of (\d+); the "
        r"virtual\s+clock predicted no change\), and final accuracy differed from uniform's "
        r"by (-?[0-9.]+) on\s+average \(95% interval (-?[0-9.]+) to (-?[0-9.]+) over (\d+) "
        r"pairs\): no significant difference"
    )
    half_core = _find(
        r"at quotas\s+1\.0/0\.5, ([0-9.]+)x-([0-9.]+)x \(every balancing controller\) "
        r"and (-?[0-9.]+) \(95% interval (-?[0-9.]+)\s+to (-?[0-9.]+) over (\d+) pairs\)"
    )
    job = "cnn64, quota from steps, async"
    every = ("proportional", "pi", "predictive", "oracle")
    for found, quotas, names, first in ((m, (1.0, 0.25), every, 4),
                                        (half_core, (1.0, 0.5), every, 3)):  # fmt: skip
        cells = [_quota_cell(job, c, quotas) for c in names]
        medians = [c["median_ratio"] for c in cells]
        assert found.group(1, 2) == (f"{min(medians):.2f}", f"{max(medians):.2f}")
        assert all(len(c["pairs"]) == 3 for c in cells) and m.group(3) == "3"
        assert all(abs(c["predicted_reduction"]) < 0.01 for c in cells)  # "no change"
        diffs = np.array([
            p["controller"]["final_accuracy"] - p["static"]["final_accuracy"]
            for c in cells for p in c["pairs"]
        ])  # fmt: skip
        mean, half = async_seeds.interval(diffs)
        quoted = found.group(first, first + 1, first + 2)
        assert quoted == tuple(f"{v:.3f}" for v in (mean, mean - half, mean + half))
        assert int(found.group(first + 3)) == len(diffs)
        assert mean - half < 0 < mean + half  # "no significant difference"


def test_measured_half_core_and_server_alone_figures_are_the_study_file():
    """BSP at quotas 1.0/0.5 on the wide CNN, and async with the server in a process of its
    own, as the README quotes them: each controller's median and worst."""
    bsp = _find(
        r"At quotas 1\.0/0\.5 \(the virtual clock predicting (\d+)% less\), `proportional` "
        r"took ([0-9.]+)x \(worst ([0-9.]+)x\), `pi` ([0-9.]+)x \(worst ([0-9.]+)x\), "
        r"`predictive` ([0-9.]+)x \(worst ([0-9.]+)x\) and the oracle ([0-9.]+)x \(worst "
        r"([0-9.]+)x\)"
    )
    cells = [_quota_cell("cnn64, quota from steps", c, (1.0, 0.5))
             for c in ("proportional", "pi", "predictive", "oracle")]  # fmt: skip
    assert bsp.group(1) == f"{100 * cells[0]['predicted_reduction']:.0f}"
    assert bsp.groups()[1:] == tuple(
        f"{c[k]:.2f}" for c in cells for k in ("median_ratio", "worst_ratio")
    )
    alone = _find(
        r"With the server in a process of its own \(`asp\.server_process`, at a quota of "
        r"0\.75\), `proportional` took ([0-9.]+)x \(worst ([0-9.]+)x\) and the oracle "
        r"([0-9.]+)x \(worst ([0-9.]+)x\)"
    )
    job = "cnn64, quota from steps, async, server alone at 0.75"
    cells = [_quota_cell(job, c) for c in ("proportional", "oracle")]
    assert alone.groups() == tuple(
        f"{c[k]:.2f}" for c in cells for k in ("median_ratio", "worst_ratio")
    )
    assert all(c["median_ratio"] > 1 for c in cells)  # still slower than uniform


def test_async_figures_after_the_spare_device_fix_are_their_study_file():
    """The async cell rerun once remote updates and decisions left device 0, as the README
    quotes it: each controller's median and worst over its 3 pairs."""
    m = _find(
        r"after it, at quotas 1\.0/0\.25, `proportional` took ([0-9.]+)x \(worst ([0-9.]+)x\), "
        r"`pi`\s+([0-9.]+)x \(worst ([0-9.]+)x\), `predictive` ([0-9.]+)x \(worst ([0-9.]+)x; "
        r"it gave the slow worker no rows in\s+two runs of three\) and the oracle ([0-9.]+)x "
        r"\(worst ([0-9.]+)x\) uniform's wall time"
    )
    names = ("proportional", "pi", "predictive", "oracle")
    cells = _json("docs", "results", "real_hetero_spare.json")["cells"]
    by = {c["controller"]: c for c in cells if c["quotas"] == [1.0, 0.25] and c["mode"] == "asp"}
    assert all(len(by[c]["pairs"]) == 3 for c in names)
    assert m.groups() == tuple(
        f"{by[c][k]:.2f}" for c in names for k in ("median_ratio", "worst_ratio")
    )
    splits = [p["controller"]["final_split"] for p in by["predictive"]["pairs"]]
    assert [0 in split for split in splits].count(True) == 2  # "no rows" in two runs of three
