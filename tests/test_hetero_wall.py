"""The wall-clock acceptance benchmark's arithmetic (benchmarks/wall_acceptance.py) on
planted run times: pairing, median and worst ratios, reductions and verdicts. No timing."""

import pytest

from benchmarks import wall_acceptance as wa


def run(mode, level, inject, controller, rep, seconds, load=1.0, pair=None):
    r = {"mode": mode, "level": level, "inject": inject, "controller": controller, "rep": rep}
    r.update(seconds=seconds, load=[load, 0.0, 0.0])
    return {**r, "pair": pair} if pair else r


def pairs_of(mode, level, inject, controller, statics, ctrls, loads=None):
    """Repetition i: a static run of statics[i] s beside a controller run of ctrls[i] s."""
    loads = loads or [1.0] * len(statics)
    out = []
    for i, (s, c, load) in enumerate(zip(statics, ctrls, loads, strict=True)):
        out.append(run(mode, level, inject, "static", i, s, load, pair=controller))
        out.append(run(mode, level, inject, controller, i, c, 1.0))
    return out


def test_each_controller_run_is_divided_by_its_own_static_neighbour():
    # Load drifts: repetition 1 runs twice as slow on both sides; its ratio stays 0.5.
    runs = pairs_of("in-process", 4, 0.003, "pi", [2.0, 4.0], [1.0, 2.0], loads=[1.0, 6.5])
    runs += pairs_of("in-process", 4, 0.003, "proportional", [3.0, 3.0], [2.4, 3.3])
    by = {(p["controller"], p["rep"]): p for p in wa.pair_ratios(runs[::-1])}  # order-free
    assert by["pi", 0]["ratio"] == pytest.approx(0.5)
    assert by["pi", 1]["ratio"] == pytest.approx(0.5)
    assert by["pi", 1]["load"] == 6.5  # the higher load of the pair
    assert by["proportional", 0]["ratio"] == pytest.approx(0.8)
    assert by["proportional", 1]["ratio"] == pytest.approx(1.1)
    with pytest.raises(ValueError, match="no static run"):
        wa.pair_ratios([run("fresh", 2, 0.02, "pi", 0, 1.0)])
    with pytest.raises(ValueError, match="without a controller run"):
        wa.pair_ratios([run("fresh", 2, 0.02, "static", 0, 1.0, pair="pi")])


def test_median_worst_reduction_and_verdicts():
    runs = pairs_of("in-process", 4, 0.003, "pi", [1.0, 1.0, 1.0], [0.60, 0.50, 0.70])
    runs += pairs_of("fresh", 4, 0.003, "pi", [2.0, 2.0, 2.0], [1.0, 1.2, 2.03])
    # HL8 at 0.003: a median reduction of 20% against 40% predicted is half: FAIL.
    runs += pairs_of("fresh", 8, 0.003, "proportional", [1.0, 1.0, 1.0], [0.8, 0.8, 0.9])
    # HL2 and inject 0.02 are not judged on the delivered fraction; the worst still is.
    runs += pairs_of("fresh", 2, 0.003, "pi", [1.0, 1.0, 1.0], [1.019, 1.0, 0.9])
    runs += pairs_of("fresh", 4, 0.02, "pi", [1.0, 1.0, 1.0], [0.5, 0.5, 0.5])
    predicted = {(4, 0.003, "pi"): 0.45, (8, 0.003, "proportional"): 0.4, (2, 0.003, "pi"): 0.3}
    rows = {
        (r["level"], r["inject"], r["controller"]): r
        for r in wa.summarise(wa.pair_ratios(runs), predicted)
    }
    hl4 = rows[4, 0.003, "pi"]
    assert hl4["in-process"] == {"n": 3, "median": pytest.approx(0.6), "worst": pytest.approx(0.7)}
    assert hl4["fresh"] == {"n": 3, "median": pytest.approx(0.6), "worst": pytest.approx(1.015)}
    # All six ratios: 0.5, 0.5, 0.6, 0.6, 0.7, 1.015 -> median 0.6, a 40% reduction.
    assert hl4["all"]["median"] == pytest.approx(0.6)
    assert hl4["reduction"] == pytest.approx(0.4)
    assert hl4["delivered"] == pytest.approx(0.4 / 0.45)
    assert (hl4["worst_ok"], hl4["delivered_ok"]) == (True, True)
    hl8 = rows[8, 0.003, "proportional"]
    assert hl8["in-process"] is None and hl8["delivered"] == pytest.approx(0.5)
    assert (hl8["worst_ok"], hl8["delivered_ok"]) == (True, False)
    assert (rows[2, 0.003, "pi"]["worst_ok"], rows[2, 0.003, "pi"]["delivered_ok"]) == (True, None)
    # No prediction for the inject 0.02 cell: delivered unknown, but not judged there.
    assert rows[4, 0.02, "pi"]["delivered"] is None and rows[4, 0.02, "pi"]["delivered_ok"] is None
    assert not wa.passed(list(rows.values()))  # HL8 fails its delivered goal
    assert wa.passed([rows[4, 0.003, "pi"], rows[2, 0.003, "pi"]])
    # One run 2.1% slower than its static neighbour fails the cell, whatever the median.
    slow = pairs_of("fresh", 2, 0.02, "pi", [1.0, 1.0, 1.0], [0.5, 0.5, 1.021])
    (row,) = wa.summarise(wa.pair_ratios(slow), {(2, 0.02, "pi"): 0.3})
    assert row["all"]["worst"] == pytest.approx(1.021) and row["worst_ok"] is False
    table = wa.markdown([row, hl4])
    assert table.count("\n") == 4 and "| HL2 | 0.02 | pi | - | - | 0.500 | 1.021 |" in table
    assert "| FAIL | n/a |" in table and "| PASS | PASS |" in table


def test_schedule_keeps_each_pair_together_and_alternates_who_goes_first():
    plan = wa.schedule([2, 8], [0.003], ["pi", "predictive"], reps=2, modes=("in-process", "fresh"))
    assert len(plan) == 2 * 2 * 2 * 2 * 2
    for a, b in zip(plan[::2], plan[1::2], strict=True):
        static, other = (a, b) if a["controller"] == "static" else (b, a)
        assert static["pair"] == other["controller"] != "static"
        assert {k: static[k] for k in ("mode", "level", "inject", "rep")} == {
            k: other[k] for k in ("mode", "level", "inject", "rep")
        }
        assert (a is static) == (a["rep"] % 2 == 0)
    assert [r["mode"] for r in plan[:8]] == ["in-process"] * 8


def test_runtime_estimate_adds_start_up_and_the_injected_waits():
    speeds = {4: [9.0, 9.0, 6.0, 24.0]}
    # Uniform: 32 rows each, the slowest (speed 6) waits 0.003 * 32 / 6 = 16 ms a step;
    # balanced: 0.003 * 128 / 48 = 8 ms a step.
    assert wa.step_seconds(0.003, speeds[4], 128, balanced=False) == pytest.approx(0.016)
    assert wa.step_seconds(0.003, speeds[4], 128, balanced=True) == pytest.approx(0.008)
    plan = wa.schedule([4], [0.003], ["pi"], reps=1, modes=("in-process", "fresh"))
    expected = wa.IN_PROCESS_START * 2 + wa.FRESH_START * 2
    expected += 2 * 10 * (0.016 + wa.STEP_OVERHEAD) + 2 * 10 * (0.008 + wa.STEP_OVERHEAD)
    assert wa.estimate_seconds(plan, 10, speeds, 128) == pytest.approx(expected)


def test_seconds_the_injected_wait_does_not_explain_and_both_predictions():
    # Speeds 1 and 3 at inject 0.003, 32 rows each: the slowest wait is 96 ms; planted steps
    # take 2.5 ms more, after five warm-up steps that are left out.
    speeds = [1.0, 3.0]
    steady = {"batch_sizes": [32, 32], "step_time": 0.0985}
    warm = {"batch_sizes": [32, 32], "step_time": 1.0}
    assert wa.unexplained_seconds([warm] * 5 + [steady] * 4, 0.003, speeds) == pytest.approx(0.0025)
    # A balanced split (rows 16 and 48: both wait 48 ms) and the same 2.5 ms.
    balanced = {"batch_sizes": [16, 48], "step_time": 0.0505}
    assert wa.unexplained_seconds([warm] * 5 + [balanced], 0.003, speeds) == pytest.approx(0.0025)
    # A run's trace: its last split, the steps that changed it (warm -> balanced once,
    # back to 32/32 once), and its medians after the first five steps.
    moved = [warm] * 5 + [balanced, balanced, steady]
    assert wa.trace(moved, 0.003, speeds) == {
        "final_sizes": [32, 32],
        "split_changes": 2,
        "median_step": pytest.approx(0.0505),
        "median_excess": pytest.approx(0.0025),
    }
    # Delivered against both predictions; only the first is judged.
    runs = pairs_of("in-process", 4, 0.003, "pi", [1.0, 1.0, 1.0], [0.7, 0.7, 0.7])
    (row,) = wa.summarise(wa.pair_ratios(runs), {(4, 0.003, "pi"): 0.5}, {(4, 0.003, "pi"): 0.4})
    assert row["delivered"] == pytest.approx(0.6) and row["delivered_ok"] is False
    assert row["predicted_compute"] == 0.4 and row["delivered_compute"] == pytest.approx(0.75)
    assert "| 30.0% | 50.0% | 60.0% | 40.0% | 75.0% |" in wa.markdown([row])


def test_set_overrides_every_job_and_travels_to_fresh_runs(monkeypatch):
    from benchmarks import hetero_wall as hw

    args = hw.parse_args(["--set", "controller.persist=0", "--set=controller.confirm=4"])
    assert args.settings == {"controller.persist": 0, "controller.confirm": 4}
    monkeypatch.setattr(hw, "SETTINGS", dict(args.settings))
    for clock in ("wall", "virtual"):
        c = hw.job(4, "proportional", clock, 10, 0.003)
        assert (c.controller.persist, c.controller.confirm) == (0.0, 4)
    seen = []

    def fake_run(cmd, **kwargs):
        seen.extend(cmd)
        raise SystemExit  # the command is all this test wants

    monkeypatch.setattr(hw.subprocess, "run", fake_run)
    with pytest.raises(SystemExit):
        hw.run_fresh({"level": 4, "inject": 0.003, "controller": "pi"}, 10, 8)
    assert "--set=controller.persist=0" in seen and "--set=controller.confirm=4" in seen
    with pytest.raises(SystemExit):
        hw.parse_args(["--set", "controller.persist"])
    with pytest.raises(SystemExit):  # a typo ran, then failed its first run with a traceback
        hw.parse_args(["--controllers", "proportinal", "--dry_run"])


def test_outputs_and_one_run_flags_are_checked_before_any_run(tmp_path, capsys):
    """A --json or --md in a missing folder failed after every run (111 min for the grid) with
    a traceback, the other file written; --one dropped --dry_run, --json and --md silently."""
    from benchmarks import hetero_wall as hw

    missing = tmp_path / "nodir" / "hw.md"
    with pytest.raises(SystemExit) as stop:
        hw.parse_args(["--json", str(tmp_path / "hw.json"), "--md", str(missing)])
    assert stop.value.code == 2
    assert f"--md {missing}: no folder {missing.parent}" in capsys.readouterr().err
    for extra in (["--dry_run"], ["--json", str(tmp_path / "one.json")]):
        with pytest.raises(SystemExit):
            hw.parse_args(["--one", *extra])
        assert "--one runs one job and prints one line" in capsys.readouterr().err
    assert hw.parse_args(["--json", str(tmp_path / "hw.json")]).json  # a folder that exists


def test_the_prediction_runs_the_controller_the_wall_clock_runs():
    """The virtual clock's own persist is 0 (schema.controller_section); the prediction of a
    wall-clock run holds the wall clock's, or it would predict a faster controller."""
    from benchmarks import hetero_wall as hw
    from omnilearn_jax.config.schema import controller_section

    wall, virtual = (hw.job(4, "pi", clock, 10, 0.003) for clock in ("wall", "virtual"))
    assert controller_section(wall)["persist"] == controller_section(virtual)["persist"] == 0.1
    # static takes no persist: setting it printed a warning the user could not act on
    from omnilearn_jax.config.unread import unread_controller_keys

    assert unread_controller_keys(hw.job(4, "static", "virtual", 10, 0.003)) == []


def test_the_section_names_the_wait_order_and_the_grid_cells_not_run():
    cells = [{"level": lv, "inject": 0.003} for lv in (4, 8)]
    missing = wa.not_run(cells)
    assert missing.count("HL") == 4  # HL2 at both injects, HL4 and HL8 at 0.02
    assert "HL2 at inject 0.003" in missing and "HL8 at inject 0.02" in missing
    full = [{"level": lv, "inject": i} for lv in (2, 4, 8) for i in (0.003, 0.02)]
    assert wa.not_run(full) == ""
    result = {"job": "j", "steps": 60, "reps": 3, "modes": ["in-process"], "passed": True}
    old = wa.section({**result, "cells": []})
    assert "seconds before it computes" in old  # results without the key waited first
    alone = wa.section({**result, "cells": [], "inject_order": "alone"})
    assert "after it computed alone" in alone


def _result(level, inject, statics, ctrls, predicted, controller="pi", **over):
    runs = pairs_of("fresh", level, inject, controller, statics, ctrls)
    key = {"level": level, "inject": inject, "controller": controller}
    rows = wa.summarise(wa.pair_ratios(runs), {(level, inject, controller): predicted})
    same = {"job": "j", "steps": 60, "reps": 3, "modes": ["fresh"], "settings": {}}
    same["inject_order"] = "alone"
    return {**same, "estimate_seconds": 10.0, "predicted": [{**key, "reduction": predicted}],
            "predicted_with_compute": [], "runs": runs, "cells": rows,
            "passed": wa.passed(rows), **over}  # fmt: skip


def _joined(*parts):
    """Results joined in order (a later one's cells replace an earlier one's)."""
    out = dict(parts[0])
    for k in ("runs", "predicted", "predicted_with_compute", "cells"):
        out[k] = [x for p in parts for x in p[k]]
    return out


def test_merge_joins_cells_measured_apart_and_judges_them_afresh():
    # HL4 at 0.003 passes alone (0.6 against 0.5 predicted: 80%); HL2 at 0.02 has a run 3%
    # slower than its neighbour, so the joined table fails.
    a = _result(4, 0.003, [1.0, 1.0, 1.0], [0.6, 0.6, 0.7], 0.5)
    b = _result(2, 0.02, [1.0, 1.0, 1.0], [0.8, 1.03, 0.8], 0.3)
    assert a["passed"] and not b["passed"]
    m = wa.merge([a, b], ["a.json", "b.json"])
    cells = {(c["level"], c["inject"]): c for c in m["cells"]}
    assert sorted(cells) == [(2, 0.02), (4, 0.003)] and len(m["runs"]) == 12
    assert cells[4, 0.003]["delivered"] == pytest.approx(0.8)
    assert cells[2, 0.02]["all"]["worst"] == pytest.approx(1.03) and m["passed"] is False
    assert m["estimate_seconds"] == 20.0 and m["inject_order"] == "alone"
    said = wa.joined(m)
    assert "Joined from 2 runs" in said and "HL4 at 0.003 (pi) from a.json" in said
    assert "HL2 at 0.02 (pi) from b.json" in said and wa.joined(a) == ""
    other = _result(8, 0.003, [1.0] * 3, [0.5] * 3, 0.5, inject_order="after")
    with pytest.raises(ValueError, match="differs from a.json in inject_order"):
        wa.merge([a, other], ["a.json", "o.json"])


def test_merge_replaces_a_controllers_cell_with_its_rerun_and_keeps_the_others():
    # A first run of HL2 at 0.003 with pi and predictive; predictive rerun later, slower.
    first = _joined(
        _result(2, 0.003, [1.0] * 3, [0.8, 0.8, 0.8], 0.25),
        _result(2, 0.003, [1.0] * 3, [0.7, 0.7, 1.05], 0.25, controller="predictive"),
    )
    rerun = _result(2, 0.003, [2.0] * 3, [1.5, 1.6, 1.7], 0.3, controller="predictive")
    m = wa.merge([first, rerun], ["first.json", "rerun.json"])
    rows = {c["controller"]: c for c in m["cells"]}
    assert rows["pi"]["all"]["median"] == pytest.approx(0.8)  # kept from the first run
    assert rows["predictive"]["all"]["median"] == pytest.approx(0.8)  # 1.6 / 2.0, the rerun's
    assert rows["predictive"]["predicted"] == 0.3 and rows["predictive"]["worst_ok"] is True
    assert len(m["runs"]) == 12 and sum(r["seconds"] == 1.05 for r in m["runs"]) == 0
    assert m["passed"] is True  # the first run's 1.05 is gone with its cell
    assert [p["cells"] for p in m["parts"]] == [[(2, 0.003, "pi")], [(2, 0.003, "predictive")]]
    said = wa.joined(m)
    assert "HL2 at 0.003 (pi) from first.json; HL2 at 0.003 (predictive) from rerun.json" in said


def test_merge_with_pool_keeps_every_files_runs_of_a_cell():
    # HL4 at 0.003, pi, measured twice: ratios 0.5, 0.5, 0.9 then 0.7, 0.8, 0.8; pooled, the
    # median of the six is 0.75 (the first alone: 0.5, the second: 0.8) and the worst 0.9.
    a = _result(4, 0.003, [1.0] * 3, [0.5, 0.5, 0.9], 0.4)
    b = _result(4, 0.003, [2.0] * 3, [1.4, 1.6, 1.6], 0.5)
    m = wa.merge([a, b], ["a.json", "b.json"], pool=True)
    (row,) = m["cells"]
    assert row["fresh"]["n"] == 6 and row["all"]["median"] == pytest.approx(0.75)
    assert row["all"]["worst"] == pytest.approx(0.9)
    assert row["predicted"] == pytest.approx(0.45)  # the mean of the two predictions
    assert sorted({r["rep"] for r in m["runs"]}) == [0, 1, 2, 3, 4, 5]
    assert m["pooled"] == [(4, 0.003, "pi")]
    assert "HL4 at 0.003 (pi): the runs of every file that has the cell, pooled" in wa.joined(m)
    replaced = wa.merge([a, b], ["a.json", "b.json"])  # without pool the later file's alone
    assert replaced["cells"][0]["all"]["median"] == pytest.approx(0.8) and replaced["pooled"] == []
    assert replaced["cells"][0]["fresh"]["n"] == 3


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--steps", "5"], "--steps over 5"),  # a late StatisticsError after the predictions
        (["--controllers", ","], "--controllers names none"),  # zero runs passed every goal
        (["--levels", "3"], "--levels [3]: the paper's levels are [1, 2, 4, 8]"),
        (["--levels", "abc"], "--levels and --injects take numbers"),
        (["--levels", "4,4"], "--levels repeats a value: [4, 4]"),
        (["--injects", "0.003,0.0030"], "--injects repeats a value"),
        (["--controllers", "pi,pi"], "names pi more than once"),
        (["--injects", "0"], "--injects takes seconds a sample > 0, got [0.0]"),
        (["--injects", "0.003,nan"], "got [nan]"),
        (["--injects", "-0.003"], "got [-0.003]"),
        (["--pool"], "--pool pools the runs of --merge's files"),
        (["--merge", "/nonexistent.json", "--json", "x"], "no such file '/nonexistent.json'"),
        (["--dry_run", "--json", "x.json"], "--dry_run prints the plan and writes nothing"),
    ],
)
def test_bad_arguments_stop_before_any_run(argv, message, capsys):
    from benchmarks import hetero_wall as hw

    with pytest.raises(SystemExit):
        hw.parse_args(argv)
    assert message in capsys.readouterr().err


def test_a_failed_run_keeps_the_runs_before_it_and_the_same_command_goes_on(
    tmp_path, monkeypatch, capsys
):
    """One failed run lost every run before it (only in memory); a rerun of the command now
    runs only what is missing, and a half-made pair again whole."""
    from benchmarks import hetero_wall as hw

    out = tmp_path / "hw.json"
    argv = ["--levels", "4", "--injects", "0.003", "--controllers", "pi", "--reps", "2"]
    args = hw.parse_args([*argv, "--json", str(out), "--set", "controller.sizes=(16,16,16,80)"])
    monkeypatch.setattr(hw, "SETTINGS", dict(args.settings))  # a tuple: a list once saved
    made = []

    def fake(run, steps, *more):
        made.append((run["mode"], run["rep"], run["controller"]))
        if len(made) == fails_at:
            raise RuntimeError("planted failure")
        return {**run, "seconds": 1.0 if run["controller"] == "static" else 0.6, "load": [0.0]}

    monkeypatch.setattr(hw, "run_here", fake)
    monkeypatch.setattr(hw, "run_fresh", fake)
    monkeypatch.setattr(hw, "predictions", lambda *a: {(4, 0.003, "pi"): 0.5})
    monkeypatch.setattr(hw, "compute_predictions", lambda *a: {})
    fails_at = 6  # 8 runs: 2 reps x 2 modes x (static, pi); the 6th is half of a pair
    with pytest.raises(RuntimeError, match="planted"):
        hw.acceptance(args)
    assert "5 runs kept in" in capsys.readouterr().err
    partial = tmp_path / "hw.json.partial"
    assert len(hw.json.loads(partial.read_text())["runs"]) == 5
    made.clear()
    fails_at = 0
    result = hw.acceptance(args)
    assert "4 runs kept from" in capsys.readouterr().out  # the 5th's partner failed
    assert len(made) == 4 and len(result["runs"]) == 8 and not partial.exists()
    (row,) = result["cells"]
    assert row["all"]["n"] == 4 and row["all"]["median"] == pytest.approx(0.6)
    other = hw.parse_args([*argv, "--steps", "30", "--json", str(out)])
    partial.write_text(hw.json.dumps({"setup": {"steps": 60}, "runs": []}))
    with pytest.raises(SystemExit, match="holds runs of another set-up"):
        hw.acceptance(other)


def test_a_mistyped_setting_and_a_foreign_merge_file_stop_with_one_line(tmp_path, monkeypatch):
    from benchmarks import hetero_wall as hw

    args = hw.parse_args(["--levels", "4", "--set", "controller.persit=0", "--dry_run"])
    monkeypatch.setattr(hw, "SETTINGS", dict(args.settings))
    with pytest.raises(SystemExit, match="did you mean 'controller.persist'"):
        hw.check_settings(args)
    foreign = tmp_path / "other.json"
    foreign.write_text('{"benchmark": "step_bench", "result": {}}')
    with pytest.raises(SystemExit, match="is not a result of this benchmark"):
        hw.merged_record([str(foreign)])


def test_no_fraction_delivered_of_a_reduction_not_predicted():
    """Over a prediction of -1 % a controller 1.5 % slower than static "delivered" 150 % and
    passed the judged cell; over 1e-9 it delivered -1.5e7."""
    runs = pairs_of("fresh", 4, 0.003, "pi", [1.0] * 3, [1.015] * 3)
    for predicted in (-0.01, 1e-9, 0.01):
        (row,) = wa.summarise(wa.pair_ratios(runs), {(4, 0.003, "pi"): predicted})
        assert row["delivered"] is None and row["delivered_ok"] is False
    assert not wa.passed([row])
    (row,) = wa.summarise(wa.pair_ratios(runs), {(4, 0.003, "pi"): 0.02}, {(4, 0.003, "pi"): -0.5})
    assert row["delivered"] == pytest.approx(-0.75) and row["delivered_compute"] is None


def test_a_pooled_table_says_how_many_runs_its_cells_hold_and_pools_again_in_any_order():
    a = _result(4, 0.003, [1.0] * 3, [0.5, 0.5, 0.9], 0.4)
    b = _result(4, 0.003, [2.0] * 3, [1.4, 1.6, 1.6], 0.5)
    c = _result(4, 0.003, [1.0] * 3, [0.6, 0.6, 0.6], 0.5)
    pooled = wa.merge([a, b], ["a.json", "b.json"], pool=True)
    assert ", 6 repetitions in each mode" in wa.section(pooled)  # it said 3
    hl8 = _result(8, 0.003, [1.0] * 3, [0.5] * 3, 0.5)
    assert ", 3-6 repetitions in each mode" in wa.section(wa.merge([pooled, hl8], ["p", "h"]))
    for parts in ([pooled, c], [c, pooled]):  # the second order met repetition 3 twice
        m = wa.merge(parts, ["x", "y"], pool=True)
        assert sorted(r["rep"] for r in m["runs"] if r["controller"] == "pi") == list(range(9))
        assert m["cells"][0]["fresh"]["n"] == 9
        assert m["cells"][0]["all"]["median"] == pytest.approx(0.6)  # the 5th of the nine
