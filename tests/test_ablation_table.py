"""The ablation table a person reads: units in the headers and a summary line under it."""

import json

from experiments.ablation import table


def _workdir(tmp_path, times: dict[str, tuple[float, float]], accuracy: float = 0.95, **extra):
    tmp_path.mkdir(parents=True, exist_ok=True)
    cells = []
    for controller, per_seed in times.items():
        for seed, total in enumerate(per_seed):
            name = f"name-{controller}__seed-{seed}"
            cells.append({"name": name, "values": {"controller.name": controller, "seed": seed}})
            cell = tmp_path / name
            cell.mkdir()
            summary = {
                "status": "complete",
                "total_time": total,
                "final_eval_accuracy": accuracy,
                "time_to_target": total / 2,
                "steps": 10,
                **extra,
            }
            (cell / "summary.json").write_text(json.dumps(summary))
            (cell / "config.json").write_text(json.dumps({"clock": "virtual"}))
    grid = {"controller.name": list(times), "seed": [0, 1]}
    (tmp_path / "ablation.json").write_text(json.dumps({"grid": grid, "cells": cells}))
    return str(tmp_path)


def test_markdown_has_units_and_a_summary_line(tmp_path):
    times = {
        "static": (10.0, 10.0),
        "proportional": (8.0, 8.0),
        "pi": (7.9, 8.1),
        "oracle": (5.0, 5.0),
    }
    workdir = _workdir(tmp_path, times)
    rows = table.write_results(workdir)
    text = (tmp_path / "results.md").read_text()
    header = text.splitlines()[0]
    assert (
        "total time (s, virtual clock)" in header and "time to target (s, virtual clock)" in header
    )
    assert "| proportional | 8 ± 0 | 1.25x | 62% | 4 ± 0 | 2/2 | 0.95 ± 0 | 2 |" in text
    summary = text.strip().splitlines()[-1]
    assert summary == (
        "Against uniform batching (static, 10 s), oracle finishes 2.00x faster, "
        "proportional 1.25x, pi 1.25x; proportional and pi, which only measure times, reach "
        "62% and 62% of the speed of the oracle, which is told the speeds in advance; final "
        "accuracy is the same for every controller (0.950), since a split changes how long a "
        "step takes, not the update."
    )
    assert [r["controller.name"] for r in rows] == list(times)  # the CSV keeps its columns
    assert "total_time_mean" in (tmp_path / "results.csv").read_text().splitlines()[0]


def test_async_cells_are_compared_by_accuracy_not_by_their_budgets_overshoot(tmp_path):
    """Every async cell stops at its time budget (3 s plus the last update's overshoot): the
    table gave "proportional finishes 1.01x faster" from those times."""
    times = {"static": (3.02, 3.02), "proportional": (3.0, 3.0), "oracle": (3.01, 3.01)}
    rows = table.build_table(_workdir(tmp_path / "b", times, mode="asp", stopped_by="time_budget"))
    assert all(r["speedup_vs_static"] != r["speedup_vs_static"] for r in rows)  # NaN
    assert all(r["efficiency_vs_oracle"] != r["efficiency_vs_oracle"] for r in rows)
    assert table.summary_lines(rows) == [
        "Asynchronous runs stop at a time budget, so they are compared by accuracy at equal "
        "time, not by speed; final accuracy is the same for every controller (0.950)."
    ]
    # Without a budget an async run stops after its updates: its time compares.
    rows = table.build_table(_workdir(tmp_path / "n", times, mode="asp", stopped_by="num_steps"))
    assert [round(r["speedup_vs_static"], 4) for r in rows] == [1.0, 1.0067, 1.0033]
    # Summaries from before `stopped_by`: a budget set means the budget stopped them.
    rows = table.build_table(_workdir(tmp_path / "o", times, mode="asp", time_budget=3.0))
    assert all(r["speedup_vs_static"] != r["speedup_vs_static"] for r in rows)


def test_summary_says_when_accuracy_differs(tmp_path):
    workdir = _workdir(tmp_path, {"static": (2.0, 2.0), "proportional": (1.0, 1.0)})
    rows = table.build_table(workdir)
    rows[1]["final_eval_accuracy_mean"] = 0.9
    (line,) = table.summary_lines(rows)
    assert line.endswith("final accuracy ranges from 0.900 to 0.950.")
    assert "proportional finishes 2.00x faster" in line


def test_summary_names_a_controller_with_no_complete_cell(tmp_path):
    """A controller whose every cell failed was counted among those whose accuracy agrees."""
    workdir = _workdir(tmp_path, {"static": (2.0, 2.0), "broken": (1.0, 1.0)})
    for seed in (0, 1):
        summary = tmp_path / f"name-broken__seed-{seed}" / "summary.json"
        summary.write_text(json.dumps({"status": "failed", "steps": 1}))
    (line,) = table.summary_lines(table.build_table(workdir))
    assert "Final accuracy 0.950;" in line and "the same for every" not in line  # one result
    assert line.endswith("; no complete cell for broken.")


def test_one_controller_is_not_said_to_agree_with_others(tmp_path):
    """A sweep of one controller: "final accuracy is the same for every controller" compared
    it with none."""
    (line,) = table.summary_lines(table.build_table(_workdir(tmp_path, {"pi": (2.0, 2.0)})))
    assert line == "Final accuracy 0.950."


def test_runs_without_a_target_say_so_not_zero_of_n(tmp_path):
    """A sweep with no target set showed "reached target 0/2", as if both runs had missed it;
    the notebook's table (omnilearn_jax/analysis/table.py) says the same as this one."""
    import math

    from omnilearn_jax.analysis.table import reached_text

    times = {"static": (2.0, 2.0), "pi": (1.0, 1.0)}
    rows = table.build_table(
        _workdir(tmp_path / "none", times, target_accuracy=0.0, time_to_target=None)
    )
    assert [r["target_reached"] for r in rows] == ["no target", "no target"]
    rows = table.build_table(_workdir(tmp_path / "set", times, target_accuracy=0.9))
    assert [r["target_reached"] for r in rows] == ["2/2", "2/2"]
    old = table.build_table(_workdir(tmp_path / "old", times))  # no target key: as before
    assert [r["target_reached"] for r in old] == ["2/2", "2/2"]
    frame_rows = [{"time_to_target": math.nan, "target_accuracy": 0.0, "target_perplexity": 15.0}]
    assert reached_text(frame_rows) == "0/1"  # a text run's perplexity target is a target


def test_speedup_is_a_ratio_over_the_seeds_both_groups_completed(tmp_path):
    """Static 10 and 20 s, proportional 5 s with its seed 1 failed: the pair says 2x; the
    ratio of means over every completed seed said 3x."""
    workdir = _workdir(tmp_path, {"static": (10.0, 20.0), "proportional": (5.0, 10.0)})
    (tmp_path / "name-proportional__seed-1" / "summary.json").unlink()
    rows = {r["controller.name"]: r for r in table.build_table(workdir)}
    assert rows["proportional"]["speedup_vs_static"] == 2.0
    assert rows["proportional"]["missing"] == 1


def test_equal_seeds_show_no_spread_not_float_rounding(tmp_path):
    """Three seeds of 10.977806796539252 s (a noiseless virtual clock): '10.98 ± 2.2e-15'."""
    import pandas as pd

    from omnilearn_jax import analysis

    t = 10.977806796539252
    workdir = _workdir(tmp_path, {"static": (t, t, t), "proportional": (t / 3,) * 3})
    rows = {r["controller.name"]: r for r in table.build_table(workdir)}
    assert rows["static"]["total_time_std"] == 0.0  # was 2.2e-15
    assert "| static | 10.98 ± 0 |" in table.to_markdown(list(rows.values()))
    frame = pd.DataFrame({"controller": "static", "seed": [0, 1, 2], "total_time": t})
    frame = frame.assign(status="complete", run=["a", "b", "c"])
    assert analysis.speedup_table(frame, by=["controller"])["total_time_std"].tolist() == [0.0]


def test_the_summary_sentence_gives_static_time_as_the_table_does(tmp_path):
    workdir = _workdir(tmp_path, {"static": (10.98, 10.98), "proportional": (5.49, 5.49)})
    text = table.to_markdown(table.build_table(workdir))
    assert "| static | 10.98 ± 0 |" in text
    assert "Against uniform batching (static, 10.98 s)" in text  # it said 11 s


def test_a_slower_controller_takes_longer_and_one_without_a_paired_seed_is_named(tmp_path):
    """It said "proportional finishes 0.82x faster" of a controller 1.22x as slow, and
    "nanx faster" of one with no seed in common with static."""
    times = {"static": (10.0, 10.0), "pi": (8.0, 8.0), "proportional": (12.0, 12.5)}
    (line,) = table.summary_lines(table.build_table(_workdir(tmp_path / "a", times)))
    assert (
        "(static, 10 s), pi finishes 1.25x faster, while proportional takes 1.22x as long" in line
    )
    rows = table.build_table(_workdir(tmp_path / "b", times))
    rows[1]["speedup_vs_static"] = float("nan")  # pi, as with no seed in common
    (line,) = table.summary_lines(rows)
    assert "proportional takes 1.22x as long (pi: no seed in common with static)" in line
    assert "nan" not in line
    times = {"static": (10.0, 10.0), "pi": (8.0, 8.0), "proportional": (10.01, 10.0)}
    (line,) = table.summary_lines(table.build_table(_workdir(tmp_path / "c", times)))
    assert "pi finishes 1.25x faster, while proportional takes as long (1.00x)" in line


def test_a_controller_with_no_complete_run_shows_no_target_count(tmp_path):
    """Its only cells failed: "reached target 0/0" where every other row said "no target"."""
    from omnilearn_jax.analysis.table import reached_text

    assert reached_text([]) == "-"
    times = {"static": (10.0, 10.0), "pi": (8.0, 8.0)}
    workdir = _workdir(tmp_path, times, target_accuracy=0.0, time_to_target=None)
    for seed in (0, 1):
        (tmp_path / f"name-pi__seed-{seed}" / "summary.json").unlink()
    rows = {r["controller.name"]: r for r in table.build_table(workdir)}
    assert rows["pi"]["target_reached"] == "-" and rows["static"]["target_reached"] == "no target"
