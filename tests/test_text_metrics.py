"""A metric where lower is better (perplexity): time_to_target, the ablation table and the
notebook's conclusions pick the lowest, not the highest."""

import json
import math

import pandas as pd
import pytest

from experiments.ablation import table
from omnilearn_jax.analysis import report
from omnilearn_jax.run import metrics

EVALS = [
    {"time": 1.0, "eval_accuracy": 0.2, "eval_perplexity": 30.0},
    {"time": 2.0, "eval_accuracy": 0.3, "eval_perplexity": 15.5},
    {"time": 3.0, "eval_accuracy": 0.35, "eval_perplexity": 14.9},
    {"time": 4.0, "eval_accuracy": 0.36, "eval_perplexity": 14.0},
]


def test_time_to_target_goes_down_for_perplexity_and_up_for_accuracy():
    assert metrics.time_to_target(EVALS, 15.0, "eval_perplexity") == 3.0
    assert metrics.time_to_target(EVALS, 14.0, "eval_perplexity") == 4.0  # at the target
    assert metrics.time_to_target(EVALS, 13.9, "eval_perplexity") is None
    assert metrics.time_to_target(EVALS, 0.3, "eval_accuracy") == 2.0
    assert metrics.time_to_target(list(reversed(EVALS)), 15.0, "eval_perplexity") == 3.0
    nan = [{"time": 0.5, "eval_perplexity": math.nan}, *EVALS]
    assert metrics.time_to_target(nan, 100.0, "eval_perplexity") == 1.0  # NaN never counts


def _ablation(tmp_path, perplexity: dict[str, float] | None):
    cells = []
    for controller, total in (("static", 10.0), ("proportional", 5.0)):
        for seed in (0, 1):
            name = f"name-{controller}__seed-{seed}"
            cells.append({"name": name, "values": {"controller.name": controller, "seed": seed}})
            (tmp_path / name).mkdir()
            summary = {"status": "complete", "total_time": total, "final_eval_accuracy": 0.4}
            summary |= {"time_to_target": None, "steps": 10}
            if perplexity is not None:
                summary["final_eval_perplexity"] = perplexity[controller] + seed
            (tmp_path / name / "summary.json").write_text(json.dumps(summary))
    grid = {"controller.name": ["static", "proportional"], "seed": [0, 1]}
    (tmp_path / "ablation.json").write_text(json.dumps({"grid": grid, "cells": cells}))
    return table.build_table(str(tmp_path))


def test_ablation_table_shows_perplexity_and_names_the_lowest(tmp_path):
    rows = _ablation(tmp_path, {"static": 20.0, "proportional": 12.0})
    assert [r["final_eval_perplexity_mean"] for r in rows] == [20.5, 12.5]
    text = table.to_markdown(rows)
    assert "final perplexity (lower is better)" in text.splitlines()[0]
    assert "| 12.5 ± 0.71 | 2 |" in text
    assert "final perplexity (lower is better) ranges from 12.500 (proportional) to 20.500 " in (
        text
    )


def test_equal_perplexities_are_one_value_not_a_range(tmp_path):
    """BSP text runs end at the same perplexity under every split: the table and the
    notebook's conclusions say so ('ranges from 29.130 (static) to 29.130 (proportional)' and
    'lowest for `proportional` and `static` (29.13) and highest for ... (29.13)' before)."""
    rows = _ablation(tmp_path, {"static": 29.13, "proportional": 29.13 * (1 + 1e-6)})
    text = table.to_markdown(rows)
    assert "final perplexity is the same for every controller (29.630)" in text
    assert "ranges from" not in text
    frame = pd.DataFrame(
        {
            "controller": ["static", "proportional"],
            "seeds": [2, 2],
            "total_time_mean": [10.0, 5.0],
            "speedup_vs_static": [1.0, 2.0],
            "speedup_vs_static_min": [1.0, 2.0],
            "speedup_vs_static_max": [1.0, 2.0],
            "mean_idle_fraction_mean": [0.5, 0.1],
            "final_eval_accuracy_mean": [0.387, 0.387],
            "final_eval_perplexity_mean": [29.13, 29.13],
        }
    )
    text = report.conclusions(frame)
    assert "Final perplexity is the same for every controller (29.13): the split" in text
    assert "lowest for" not in text


def test_async_text_runs_are_compared_by_perplexity_at_equal_time(tmp_path):
    for row in (rows := _ablation(tmp_path, {"static": 20.0, "proportional": 12.0})):
        row["budgeted"] = True  # stopped by asp.time_budget
    text = table.to_markdown(rows)
    assert "compared by perplexity at equal time" in text and "by accuracy" not in text


def test_classifier_tables_have_no_perplexity_column(tmp_path):
    text = table.to_markdown(_ablation(tmp_path, None))
    assert "perplexity" not in text


def test_conclusions_name_the_lowest_perplexity():
    frame = pd.DataFrame(
        {
            "controller": ["static", "proportional", "pi"],
            "seeds": [2, 2, 2],
            "total_time_mean": [10.0, 5.0, 6.0],
            "speedup_vs_static": [1.0, 2.0, 1.6],
            "speedup_vs_static_min": [1.0, 2.0, 1.6],
            "speedup_vs_static_max": [1.0, 2.0, 1.6],
            "mean_idle_fraction_mean": [0.5, 0.1, 0.2],
            "final_eval_accuracy_mean": [0.3, 0.35, 0.34],
            "final_eval_perplexity_mean": [20.0, 12.0, 13.0],
        }
    )
    text = report.conclusions(frame)
    assert "lowest for `proportional` (12) and highest for `static` (20)" in text


def _lm_ablation(path, curves, mode="bsp"):
    """An ablation workdir of complete text cells: {(controller, seed): [(time, ppl)]}."""
    cells = []
    for (controller, seed), curve in curves.items():
        name = f"{controller}-{seed}"
        values = {"controller.name": controller, "hetero.level": 8, "seed": seed}
        cells.append({"name": name, "values": values})
        (path / name).mkdir()
        summary = {"status": "complete", "total_time": curve[-1][0]}
        (path / name / "summary.json").write_text(json.dumps(summary))
        (path / name / "config.json").write_text(json.dumps({"mode": mode}))
        lines = [json.dumps({"time": t, "eval_perplexity": p}) for t, p in curve]
        (path / name / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (path / "ablation.json").write_text(json.dumps({"grid": {}, "cells": cells}))
    return str(path)


def test_lm_results_compare_at_the_earliest_end_time(tmp_path):
    """experiments/lm_results.py: perplexity at T (the earliest end of a level's runs) is
    each run's eval perplexity at T, log-linear in time between its evals either side;
    intervals are 95% Student-t over seeds."""
    from experiments import lm_results

    curves = {  # (controller, seed) -> [(time, perplexity)]
        ("static", 0): [(2.0, 20.0), (4.0, 16.0), (6.0, 14.0)],
        ("static", 1): [(2.0, 22.0), (4.0, 18.0), (6.0, 15.0)],
        ("proportional", 0): [(1.0, 20.0), (2.0, 16.0), (3.0, 14.0)],
        ("proportional", 1): [(1.0, 21.0), (2.0, 15.0), (3.0, 13.0)],
    }
    runs = lm_results.read_runs(_lm_ablation(tmp_path, curves))
    result = lm_results.summarise(runs, target=15.0)[8]
    assert result["T"] == 3.0
    static, prop = result["rows"]["static"], result["rows"]["proportional"]
    # Half-way between 2 s and 4 s: the geometric means sqrt(20 * 16) and sqrt(22 * 18).
    assert static["at_time"][0] == pytest.approx((math.sqrt(320) + math.sqrt(396)) / 2)
    assert prop["at_time"][:1] == (13.5,)  # 14 and 13, at 3 s
    # t(0.975, 1 dof) = 12.706 times std / sqrt(2): 0.5 for (14, 13).
    assert prop["at_time"][1] == pytest.approx(12.706 * 0.5, rel=1e-4)
    assert static["to_target"][:1] == (6.0,) and static["reached"] == "2/2"
    assert prop["to_target"][:1] == (2.5,)  # 3.0 and 2.0


def test_lm_results_read_a_budget_run_at_the_budget_not_an_eval_interval_early(tmp_path):
    """Two async runs stopped by an 8 s budget, the last evals 1 ms and 4 ms past it: both
    are read at their final perplexity (14), not one of them 100 updates earlier (40)."""
    from experiments import lm_results

    curves = {
        ("static", 0): [(4.0, 40.0), (8.001, 14.0)],
        ("proportional", 0): [(4.0, 40.0), (8.004, 14.0)],
    }
    runs = lm_results.read_runs(_lm_ablation(tmp_path, curves, mode="asp"))
    rows = lm_results.summarise(runs, target=15.0)[8]["rows"]
    assert rows["static"]["at_time"][0] == 14.0
    assert rows["proportional"]["at_time"][0] == pytest.approx(14.0, rel=1e-3)  # 40 before


def test_lm_results_sentences_say_what_the_seeds_allow(tmp_path):
    """One seed has no interval (it was said 'their intervals do not overlap'); equal
    perplexities are one value, not a lowest and a highest; a time-to-target ratio is over
    the seeds both controllers reached (static's mean over 3 seeds against proportional's
    over the 1 that reached it had said 0.51x of a mean over other seeds)."""
    from experiments import lm_results

    one = {
        ("static", 0): [(1.0, 20.0), (4.0, 14.0)],
        ("proportional", 0): [(1.0, 20.0), (4.0, 16.0)],
    }
    (tmp_path / "one").mkdir()
    runs = lm_results.read_runs(_lm_ablation(tmp_path / "one", one))
    text = lm_results.findings("bsp", lm_results.summarise(runs, 15.0))[0]
    assert "one seed: no interval" in text and "do not overlap" not in text

    same = {("static", 0): [(1.0, 20.0)], ("proportional", 0): [(1.0, 20.0)]}
    (tmp_path / "same").mkdir()
    runs = lm_results.read_runs(_lm_ablation(tmp_path / "same", same))
    text = lm_results.findings("bsp", lm_results.summarise(runs, 15.0))[0]
    assert "every controller has the same perplexity (20.000)" in text
    assert "the highest" not in text

    reach = {("static", s): [(1.0, 20.0), (4.0, 14.0)] for s in range(3)}
    reach[("proportional", 0)] = [(1.0, 20.0), (7.87, 14.0)]
    for s in (1, 2):
        reach[("proportional", s)] = [(1.0, 20.0), (8.0, 16.0)]
    (tmp_path / "reach").mkdir()
    runs = lm_results.read_runs(_lm_ablation(tmp_path / "reach", reach))
    rows = lm_results.summarise(runs, 15.0)[8]["rows"]
    ratio, k, n = lm_results.to_target_ratio(rows, "proportional")
    assert (k, n) == (1, 3) and ratio == pytest.approx(4.0 / 7.87)
    assert (
        "`proportional` 0.51x (1/3 seeds)"
        in lm_results.findings("bsp", {8: {"T": 4.0, "rows": rows}})[0]
    )


def test_lm_results_refuse_cells_of_another_mode_or_no_text(tmp_path, capsys):
    from experiments import lm_results

    asp = tmp_path / "asp"
    asp.mkdir()
    _lm_ablation(asp, {("static", 0): [(1.0, 20.0)]}, mode="asp")
    with pytest.raises(SystemExit) as e:
        lm_results.main(["--bsp", str(asp), "--out", str(tmp_path / "x.md")])
    assert e.value.code == 2 and "its cells ran with mode=asp" in capsys.readouterr().err

    digits = tmp_path / "digits"
    digits.mkdir()
    _lm_ablation(digits, {("static", 0): [(1.0, 20.0)]})
    (digits / "static-0" / "metrics.jsonl").write_text(json.dumps({"time": 1.0}) + "\n")
    with pytest.raises(SystemExit) as e:
        lm_results.main(["--bsp", str(digits), "--out", str(tmp_path / "x.md")])
    assert e.value.code == 2 and "no complete text cell" in capsys.readouterr().err


def test_an_async_reach_in_the_overrun_past_the_budget_does_not_count(tmp_path):
    """Async runs pass the 8 s budget by different amounts: proportional reaching perplexity
    15 at 8.012 s (static's run ended at 8.001) counted as reached, 0.48x static's time."""
    from experiments import lm_results

    curves = {
        ("static", 0): [(4.0, 14.0), (8.001, 13.0)],
        ("proportional", 0): [(4.0, 40.0), (8.012, 14.0)],
    }
    (tmp_path / "a").mkdir()
    runs = lm_results.read_runs(_lm_ablation(tmp_path / "a", curves, mode="asp"))
    rows = lm_results.summarise(runs, target=15.0, asp=True)[8]["rows"]
    assert rows["proportional"]["reached"] == "0/1" and rows["static"]["reached"] == "1/1"
    rows = lm_results.summarise(runs, target=15.0)[8]["rows"]  # BSP: each in its own time
    assert rows["proportional"]["reached"] == "1/1"
