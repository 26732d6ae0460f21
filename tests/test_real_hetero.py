"""The CPU-quota study's pure parts: packing quotas onto cores, and the verdict it prints."""

import json
import re

import pytest

from experiments import real_hetero


def test_quotas_are_packed_onto_cores_first_fit():
    assert real_hetero.pinning([1.0, 0.25], 2) == "0,1"
    assert real_hetero.pinning([0.5, 0.5, 0.5, 0.125], 2) == "0,0,1,1"
    assert real_hetero.pinning([0.25, 0.25, 0.25, 0.25], 1) == "0,0,0,0"
    with pytest.raises(ValueError, match=r"do not fit on the 2 cores \[0, 1\]"):
        real_hetero.pinning([1.0, 1.0, 0.5], 2)
    # A quota over one core gets that many whole cores (2 had been packed onto core 0).
    assert real_hetero.pinning([2.0, 0.5], 4) == "0-1,2"
    assert real_hetero.pinning([0.5, 1.5, 1.0], 4) == "0,1-2,3"
    # The cores this process may use, not 0.. (under `taskset -c 1` the launcher refused 0).
    assert real_hetero.pinning([0.5, 0.25], [1]) == "1,1"
    assert real_hetero.pinning([0.5, 2.0, 1.0], [1, 3, 4, 6]) == "1,3-4,6"  # a range in a row
    with pytest.raises(ValueError, match=r"do not fit on the 2 cores \[0, 1\]"):
        real_hetero.pinning([0.5, 2.0], 2)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--clusters", "1.0/0"], r"--cpu_quota 0.0 is outside"),
        (["--clusters", "1.0/x"], "not quotas like 1.0/0.25"),
        (["--clusters", "1.0/1.0", "--steps", "5"], "--steps must be over 5"),
        (["--clusters", "2.0/0.5", "--unpinned"], r"2.5 cores in all"),
        (["--controllers", "static,propotional"], r"unknown controller 'propotional'"),
    ],
)
def test_bad_clusters_stop_before_any_run(argv, message, monkeypatch, capsys):
    """A bad cluster failed as a traceback after the runs before it (--steps 2: 2 min 20 s,
    then a TypeError, and no JSON)."""
    monkeypatch.setattr(real_hetero, "run", lambda *a, **k: pytest.fail("a run started"))
    monkeypatch.setattr(real_hetero.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(real_hetero.cgroups, "confine", _on_two_cores(real_hetero.cgroups.confine))
    with pytest.raises(SystemExit) as stop:
        real_hetero.main(argv)
    assert stop.value.code == 2
    assert re.search(message, capsys.readouterr().err)


def _on_two_cores(confine):
    return lambda quotas, cpus, n: confine(quotas, cpus, n, allowed={0, 1})


def _cell(ratios, predicted):
    pairs = [
        {"controller": {"time_to_target": None, "load": 1.5, "final_accuracy": 0.9 - 0.1 * i},
         "static": {"final_accuracy": 0.8 + 0.01 * i}}
        for i in range(len(ratios))
    ]  # fmt: skip
    median = sorted(ratios)[len(ratios) // 2]
    return {
        "quotas": [1.0, 0.25], "controller": "proportional", "speeds": [1.0, 0.25],
        "pairs": pairs, "median_ratio": median, "worst_ratio": max(ratios),
        "predicted_reduction": predicted, "measured_reduction": 1 - median,
        "delivered": (1 - median) / predicted,
    }  # fmt: skip


def test_the_goal_sentence_follows_the_numbers():
    met = real_hetero.document([_cell([0.70, 0.74, 0.72], 0.5)], "cmd")
    assert "in 0.72x the time of uniform batches (median of 3; worst 0.74x): it meets" in met
    assert "predicts a 50% reduction" in met and "delivers 28%" in met
    missed = real_hetero.document([_cell([0.9, 1.2, 0.8], 0.48)], "cmd")
    assert "in 0.90x" in missed and "worst 1.20x" in missed and "it misses the goal" in missed
    row = "| cnn | 1.0/0.25 | proportional | 1.00/0.25 | 0.900 | 1.200 | 48.0% | 10.0% | 21% |"
    assert row in missed


def test_the_load_beside_each_run_is_printed():
    text = real_hetero.document([_cell([0.9, 1.2, 0.8], 0.48)], "cmd")
    loads = "Load average after each controller run: cnn 1.0/0.25 proportional 1.50 / 1.50 / 1.50."
    assert loads in text


def test_a_merged_study_keeps_other_clusters_and_replaces_a_cell_measured_again():
    old_goal, other = _cell([0.9, 1.2, 0.8], 0.48), _cell([0.8, 0.8, 0.8], 0.3)
    other["quotas"] = [1.0, 0.5]
    old = {"command": "first", "cells": [old_goal, other]}
    new_goal = _cell([0.70, 0.74, 0.72], 0.5)
    saved = real_hetero.merged(old, [new_goal], "second")
    assert [c["quotas"] for c in saved["cells"]] == [[1.0, 0.5], [1.0, 0.25]]
    assert saved["cells"][1]["median_ratio"] == 0.72 and saved["commands"] == ["first", "second"]
    text = real_hetero.document(saved["cells"], saved["commands"])
    assert "Commands: `first`; `second`" in text and "it meets the goal" in text
    # Every old cell measured again: the old command produced nothing that is kept.
    again = real_hetero.merged(saved, [_cell([0.7] * 3, 0.5), other], "third")
    assert again["commands"] == ["third"] and len(again["cells"]) == 2


def test_a_job_is_a_cell_of_its_own_with_its_own_verdict():
    """The wider CNN's cell sits beside the runlocal CNN's at the same quotas and controller:
    merging one does not replace the other, and each gets its own goal sentence."""
    small, wide = _cell([0.9, 1.2, 0.8], 0.48), _cell([0.70, 0.74, 0.72], 0.5)
    wide["job"] = "cnn64"
    saved = real_hetero.merged({"commands": ["first"], "cells": [small]}, [wide], "second")
    assert [c.get("job", "cnn") for c in saved["cells"]] == ["cnn", "cnn64"]
    text = real_hetero.document(saved["cells"], saved["commands"])
    assert "Job `cnn`: at quotas 1.0/0.25, proportional finishes the same steps in 0.90x" in text
    assert "Job `cnn64`: at quotas 1.0/0.25, proportional finishes the same steps in 0.72x" in text
    assert text.count("it misses the goal") == 1 and text.count("it meets the goal") == 1
    assert real_hetero.job_args("static", 2, 10, 0.8, job="cnn64")[1:3] == list(
        real_hetero.JOBS["cnn64"]
    )


def test_an_unpinned_cell_sits_beside_the_pinned_one_of_its_job():
    """The same job measured with the quotas alone (no --cpus) is a cell of its own."""
    pinned, loose = _cell([0.76, 0.82, 0.73], 0.49), _cell([0.70, 0.74, 0.72], 0.49)
    pinned["job"], loose["job"], loose["pinned"] = "cnn64", "cnn64", False
    saved = real_hetero.merged({"commands": ["a"], "cells": [pinned]}, [loose], "b")
    assert len(saved["cells"]) == 2
    text = real_hetero.document(saved["cells"], saved["commands"])
    assert "| cnn64, unpinned | 1.0/0.25 | proportional |" in text
    assert "Job `cnn64, unpinned`: at quotas 1.0/0.25, proportional finishes" in text
    assert "Job `cnn64`: at quotas 1.0/0.25, proportional finishes the same steps in 0.76x" in text


def test_a_cell_whose_quota_applied_from_the_first_step_is_one_of_its_own(monkeypatch):
    """`--quota_from steps` reaches the launcher, and its cells sit beside those whose quota
    applied from the start, named so in the table."""
    import subprocess

    seen = []

    def fake_run(cmd, **_):
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, "", "stopped here")

    monkeypatch.setattr(real_hetero.subprocess, "run", fake_run)
    setting = real_hetero.Setting("cnn64", pinned=False, quota_from="steps")
    with pytest.raises(RuntimeError, match="stopped here"):
        real_hetero.run([1.0, 0.25], "static", 10, 0.8, None, setting)
    launcher = seen[0][: seen[0].index("--")]
    assert launcher[-3:] == ["--cpu_quota=1.0,0.25", "--cpus=none", "--quota_from=steps"]
    start, steps = _cell([0.76, 0.82, 0.73], 0.49), _cell([0.70, 0.74, 0.72], 0.49)
    steps.update({"job": "cnn64", "pinned": False, "quota_from": "steps"})
    saved = real_hetero.merged({"commands": ["a"], "cells": [start]}, [steps], "b")
    assert len(saved["cells"]) == 2
    text = real_hetero.document(saved["cells"], saved["commands"])
    assert "| cnn64, unpinned, quota from steps | 1.0/0.25 | proportional |" in text


def test_a_run_keeps_its_splits_as_changes_and_its_step_times_in_ms():
    train = [
        {"step": s, "batch_sizes": split, "step_time": t, "worker_times": [t / 2, t / 3]}
        for s, split, t in [(1, [64, 64], 0.04), (2, [64, 64], 0.03), (3, [96, 32], 0.02),
                            (4, [96, 32], 0.0201), (5, [64, 64], 0.05)]
    ]  # fmt: skip
    got = real_hetero.trajectory(train)
    assert got["splits"] == [[1, [64, 64]], [3, [96, 32]], [5, [64, 64]]]
    assert got["step_ms"] == [40.0, 30.0, 20.0, 20.1, 50.0]
    assert got["slowest_ms"] == [20.0, 15.0, 10.0, 10.1, 25.0]


def test_an_async_cell_has_its_own_row_its_accuracy_and_no_bsp_goal():
    cell = {**_cell([0.9, 1.1, 1.3], 0.02), "mode": "asp", "job": "cnn64"}
    text = real_hetero.document([cell], "cmd")
    assert "| cnn64, async | 1.0/0.25 | proportional |" in text
    assert "| 0.800 / 0.810 |" in text  # median final accuracy, controller / static
    assert "the goal of 0.75x" not in text  # the goal is the BSP cell's
    assert real_hetero._key(cell) != real_hetero._key({**cell, "mode": "bsp"})
    args = real_hetero.job_args("static", 2, 150, 0.8, job="cnn64", mode="asp")
    assert args[0].startswith("--config=configs/paper_asp.py:runlocal")
    assert "--config.train.num_steps=300" in args and "--config.asp.time_budget=0" in args


def test_the_study_file_keeps_each_list_of_numbers_on_one_line():
    saved = {"cells": [{"step_ms": [40.0, 30.5, -1e-05], "splits": [[1, [64, 64]]], "x": []}]}
    text = real_hetero.dumps(saved)
    assert json.loads(text) == saved
    assert '"step_ms": [40.0, 30.5, -1e-05]' in text and "[64, 64]" in text


def test_step_threads_counts_each_threads_cpu_a_step():
    from benchmarks import step_threads

    before = {10: ("main.py", 1.0), 11: ("main.py", 2.0), 12: ("gone", 1.0)}
    after = {10: ("main.py", 1.5), 11: ("main.py", 3.0), 13: ("new", 9.0)}
    got = step_threads.per_step(before, after, steps=100, pid=10)
    assert got == {"main": 5.0, "main.py:11": 10.0, "total": 15.0}  # ms a step


def test_a_cell_predicted_to_change_nothing_delivers_no_fraction():
    cell = {**_cell([1.4, 1.2, 1.45], 0.002), "mode": "asp"}
    row = next(line for line in real_hetero.table([cell]).splitlines() if "proportional" in line)
    assert "| 0.2% | -40.0% | n/a |" in row


def test_a_server_of_its_own_is_process_0_with_its_quota_and_a_cell_of_its_own(monkeypatch):
    """`--server_quota`: W + 1 processes, the server's quota first and packed onto a core
    with the workers', the job told so; its cells sit beside the server-beside-worker-0 ones."""
    import subprocess

    seen = []
    monkeypatch.setattr(real_hetero.subprocess, "run", lambda cmd, **_: seen.append(cmd) or
                        subprocess.CompletedProcess(cmd, 1, "", "stopped"))  # fmt: skip
    monkeypatch.setattr(real_hetero.os, "cpu_count", lambda: 2)
    setting = real_hetero.Setting("cnn64", quota_from="steps", mode="asp", server=0.75)
    with pytest.raises(RuntimeError, match="stopped"):
        real_hetero.run([1.0, 0.25], "static", 10, 0.8, None, setting)
    cmd = seen[0]
    assert cmd[3:5] == ["--num_processes=3", "--devices_per_process=1"]
    assert "--cpu_quota=0.75,1.0,0.25" in cmd and "--cpus=0,1,0" in cmd
    assert "--config.asp.server_process=True" in cmd and "--config.num_workers=2" in cmd
    beside = {**_cell([1.5, 1.5, 1.6], 0.02), "mode": "asp", "job": "cnn64"}
    alone = {**beside, "server": 0.75}
    saved = real_hetero.merged({"commands": ["a"], "cells": [beside]}, [alone], "b")
    assert len(saved["cells"]) == 2
    text = real_hetero.document(saved["cells"], saved["commands"])
    assert "| cnn64, async, server alone at 0.75 | 1.0/0.25 | proportional |" in text
    with pytest.raises(SystemExit):
        real_hetero.main(["--server_quota", "0.75"])  # an async run's option


def test_a_number_list_with_nan_is_one_line_at_once():
    """A worker that held no rows has NaN seconds a row; the old pattern took hours over a
    long list holding one (it tried every split of the digits). Every list still reads back.
    The pattern itself is unambiguous: a number list matches one way or fails at once, so a
    list with a stray token is left as JSON wrote it, with nothing timed (a bound of 5 s on
    the call had been a speed assertion a loaded machine could break)."""
    saved = {"cells": [{"step_ms": [12.5] * 3000 + [float("nan")], "splits": [[1, [64, 0]]]}]}
    text = real_hetero.dumps(saved)
    assert "[12.5, 12.5" in text and "12.5, NaN]" in text and "[64, 0]" in text
    back = json.loads(text)["cells"][0]
    assert back["step_ms"][:3000] == [12.5] * 3000 and len(back["step_ms"]) == 3001
    mixed = json.dumps({"x": [1.5, "a", 2]}, indent=1)
    assert (
        real_hetero.NUMBER_LIST.search(mixed) is None
        and real_hetero.dumps({"x": [1.5, "a", 2]}) == mixed
    )


def test_cells_of_two_wall_time_kinds_are_not_merged_and_the_text_says_which():
    """steps_wall_time leaves periodic evaluations and saves out since 2026-12-05: a cell
    measured so beside one that counted them would have been one table."""
    old = _cell([0.9, 0.9, 0.9], 0.5)  # measured before: no `wall`
    new = _cell([0.8, 0.8, 0.8], 0.5)
    new["quotas"] = [1.0, 0.5]  # another cell, kept beside the old one by --merge
    for pair in new["pairs"]:
        pair["controller"]["wall"] = real_hetero.STEPS_ONLY
    with pytest.raises(ValueError, match="measure the saved cells again"):
        real_hetero.merged({"cells": [old]}, [new], "cmd")
    assert "periodic evaluations and checkpoints left out" in real_hetero.document([new], "c")
    assert "periodic evaluations" not in real_hetero.document([old], "c")


def test_time_to_target_is_the_median_of_every_run_with_how_many_reached_it():
    """Runs at 2.87 s, missed, missed: the median of those that reached it said '2.87 s'."""
    cell = _cell([0.9, 0.9, 0.9], 0.2)
    lines = lambda: real_hetero.table([cell]).splitlines()  # noqa: E731
    row = lambda: next(line for line in lines() if "proportional" in line)  # noqa: E731
    cell["pairs"][0]["controller"]["time_to_target"] = 2.87
    assert "| not reached (1/3) |" in row()
    cell["pairs"][1]["controller"]["time_to_target"] = 3.5
    assert "| 3.50 s (2/3) |" in row()  # a miss counts as never: the median of 2.87, 3.5, inf


def test_pairs_alternate_who_goes_first_and_the_prediction_holds_the_wall_clocks_persist(
    monkeypatch,
):
    """The controller's run always went first (the docstring said interleaved: a steady drift
    favoured one side every time); the virtual prediction ran with the virtual clock's persist
    (0) where the measured runs had the wall clock's (0.1)."""
    order = []

    def fake_run(quotas, controller, *rest):
        order.append(controller)
        return {"seconds_per_row": [1.0, 4.0], "wall_s": 1.0, "final_split": [64, 64],
                "load": 0.0, "final_accuracy": 0.9, "time_to_target": None}  # fmt: skip

    monkeypatch.setattr(real_hetero, "run", fake_run)
    monkeypatch.setattr(real_hetero, "predicted", lambda c, *a: 1.0 if c == "static" else 0.5)
    real_hetero.study([[1.0, 0.25]], ["proportional"], 4, 10, 0.8)
    assert order == ["static"] * 4 + ["proportional", "static", "static", "proportional"] * 2
    seen = {}

    def fake_train(config, workdir):
        seen[config.controller.name] = config.controller.get("persist")
        return {"total_time": 1.0}

    import omnilearn_jax.run.job as job

    monkeypatch.undo()
    monkeypatch.setattr(job, "train_and_evaluate", fake_train)
    for name in ("pi", "static"):
        real_hetero.predicted(name, [1.0, 0.25], 10)
    assert seen["pi"] == 0.1 != seen["static"]  # static takes none: left at its default


def test_a_zero_row_step_leaves_a_workers_speed_and_no_reps_is_refused(capsys):
    steps = [{"batch_sizes": [64, 64], "worker_times": [0.064, 0.128]} for _ in range(8)]
    steps[6] = {"batch_sizes": [128, 0], "worker_times": [0.128, 0.0]}
    summary = {"steps_wall_time": 1.0, "total_time": 1.0, "final_eval_accuracy": 0.9}
    got = real_hetero.measured([{**s, "step": i, "step_time": 0.1} for i, s in
                                enumerate(steps)], summary)["seconds_per_row"]  # fmt: skip
    assert got == pytest.approx([0.001, 0.002])  # [0.001, nan] with a plain median
    with pytest.raises(SystemExit):
        real_hetero.main(["--reps", "0"])
    assert "--reps must be >= 1, got 0" in capsys.readouterr().err
