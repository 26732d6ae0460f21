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


def test_lm_results_compare_at_the_earliest_end_time(tmp_path):
    """experiments/lm_results.py: perplexity at T (the earliest end of a level's runs) is
    each run's latest eval at or before T; intervals are 95% Student-t over seeds."""
    from experiments import lm_results

    curves = {  # (controller, seed) -> [(time, perplexity)]
        ("static", 0): [(2.0, 20.0), (4.0, 16.0), (6.0, 14.0)],
        ("static", 1): [(2.0, 22.0), (4.0, 18.0), (6.0, 15.0)],
        ("proportional", 0): [(1.0, 20.0), (2.0, 16.0), (3.0, 14.0)],
        ("proportional", 1): [(1.0, 21.0), (2.0, 15.0), (3.0, 13.0)],
    }
    cells = []
    for (controller, seed), curve in curves.items():
        name = f"{controller}-{seed}"
        values = {"controller.name": controller, "hetero.level": 8, "seed": seed}
        cells.append({"name": name, "values": values})
        (tmp_path / name).mkdir()
        summary = {"status": "complete", "total_time": curve[-1][0]}
        (tmp_path / name / "summary.json").write_text(json.dumps(summary))
        lines = [json.dumps({"time": t, "eval_perplexity": p}) for t, p in curve]
        (tmp_path / name / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "ablation.json").write_text(json.dumps({"grid": {}, "cells": cells}))
    result = lm_results.summarise(lm_results.read_runs(str(tmp_path)), target=15.0)[8]
    assert result["T"] == 3.0
    static, prop = result["rows"]["static"], result["rows"]["proportional"]
    assert static["at_time"][:1] == (21.0,)  # 20 and 22, its evals at 2 s
    assert prop["at_time"][:1] == (13.5,)  # 14 and 13, at 3 s
    # t(0.975, 1 dof) = 12.706 times std / sqrt(2): 0.5 for (14, 13), 1 for (20, 22).
    assert prop["at_time"][1] == pytest.approx(12.706 * 0.5, rel=1e-4)
    assert static["at_time"][1] == pytest.approx(12.706, rel=1e-4)
    assert static["to_target"][:1] == (6.0,) and static["reached"] == "2/2"
    assert prop["to_target"][:1] == (2.5,)  # 3.0 and 2.0
