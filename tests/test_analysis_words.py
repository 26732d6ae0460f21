"""The analysis reads like a person wrote it: ties named, shared scales, a picked run explained."""

import pandas as pd
import pytest

from omnilearn_jax import analysis
from omnilearn_jax.analysis import plots, report
from omnilearn_jax.analysis.frames import RUN_COLUMNS
from omnilearn_jax.analysis.load import Runs


def _runs(times: dict[str, float], accuracy: float = 0.9) -> Runs:
    """Two seeds a controller; `static` twice as slow on worker 1, the others balanced."""
    summaries, steps, workers = [], [], []
    for controller, total in times.items():
        for seed in (0, 1):
            run = f"{controller}-{seed}"
            summaries.append(
                {
                    "run": run,
                    "controller": controller,
                    "seed": seed,
                    "status": "complete",
                    "steps": 2,
                    "total_time": total,
                    "final_eval_accuracy": accuracy,
                    "final_eval_loss": 0.3,
                    "time_to_target": None,
                    "mean_idle_fraction": 0.1,
                }
            )
            for step in (1, 2):
                steps.append(
                    {
                        "run": run,
                        "controller": controller,
                        "seed": seed,
                        "step": step,
                        "time": total * step / 2,
                        "eval_accuracy": accuracy * step / 2,
                    }
                )
                slow = 2.0 if controller == "static" else 1.0
                for worker, t in enumerate((1.0, slow)):
                    workers.append(
                        {
                            "run": run,
                            "controller": controller,
                            "seed": seed,
                            "step": step,
                            "worker": worker,
                            "batch_size": 8,
                            "worker_time": t,
                            "idle_time": slow - t,
                            "speed": 1.0 + worker,
                        }
                    )
    summaries = pd.DataFrame(summaries)
    for column in RUN_COLUMNS:  # run-level columns that do not vary: one value for all
        if column not in summaries:
            summaries[column] = "same"
    return Runs(pd.DataFrame(steps), pd.DataFrame(workers), summaries)


def test_conclusions_read_as_sentences():
    runs = _runs({"static": 4.0, "proportional": 2.0, "pi": 2.0, "oracle": 1.6})
    text = analysis.conclusions(analysis.speedup_table(runs.summaries), runs)
    assert "- `oracle` is the fastest, at 1.6 s on the run's clock." in text
    assert "`pi` is 2.00x as fast as uniform `static` (2.00x in every seed)" in text  # as tables
    assert (
        "`pi` and `proportional` come closest to the oracle" in text and "80% of its speed" in text
    )
    assert "Final accuracy is the same for every controller (0.9)" in text
    assert "differs by 0" not in text and "1 of its speed" not in text


def test_a_controller_without_a_complete_run_is_named_not_compared():
    """A group of failed runs crashed the conclusions (IndexError: its NaN time tied with
    nothing); failed `static` runs made "`proportional` is n/ax as fast as uniform"."""
    runs = _runs({"static": 4.0, "proportional": 2.0})
    runs.summaries.loc[runs.summaries["controller"] == "static", "status"] = "failed"
    text = analysis.conclusions(analysis.speedup_table(runs.summaries), runs)
    assert "- `static` has no complete run (2 failed or unfinished): left out below." in text
    assert "- `proportional` is the fastest, at 2 s on the run's clock." in text
    assert "n/a" not in text and "as fast as uniform" not in text
    runs.summaries["status"] = "failed"  # nothing complete at all (one interrupted run)
    text = analysis.conclusions(analysis.speedup_table(runs.summaries), runs)
    assert "`proportional` and `static` have no complete run (4 failed" in text
    assert "fastest" not in text


def test_the_same_update_is_said_of_bsp_facets_of_several_controllers_only():
    """An async facet (the split changes the updates there) and a facet of one controller
    (nothing to compare) were told "the same for every controller ...: the split changes how
    long a step takes, not the update"."""
    runs = _runs({"static": 4.0, "proportional": 2.0})
    runs.summaries["mode"] = "bsp"
    text = analysis.conclusions(analysis.speedup_table(runs.summaries), runs)
    assert f"Final accuracy is the same for every controller (0.9){report.SAME_UPDATE}." in text
    runs.summaries["mode"] = "asp"
    text = analysis.conclusions(analysis.speedup_table(runs.summaries), runs)
    assert "Final accuracy is the same for every controller (0.9)." in text
    assert report.SAME_UPDATE not in text
    one = _runs({"static": 4.0})
    assert "Final accuracy" not in analysis.conclusions(analysis.speedup_table(one.summaries), one)


def test_async_conclusions_compare_accuracy_not_speed():
    """Async runs all stop at one time budget: their total times (budget plus overshoot) said
    "`static` is the fastest" and "0.979x as fast ... wait at the barrier n/a"."""
    runs = _runs({"static": 1.0, "proportional": 1.02})
    runs.summaries["mode"], runs.summaries["time_budget"] = "asp", 1.0
    runs.summaries["stopped_by"] = "time_budget"
    table = analysis.speedup_table(runs.summaries)
    # No speed-up either (the ablation runner's table leaves it blank; this one said 0.98).
    assert table["speedup_vs_static"].isna().all() and table["speedup_vs_static_min"].isna().all()
    text = analysis.conclusions(table, runs)
    assert "- Asynchronous runs stop at a time budget: they are compared by accuracy" in text
    assert "Final accuracy is the same for every controller (0.9)." in text
    assert "fastest" not in text and "as fast" not in text and "barrier" not in text
    # Text runs: by perplexity (it said "by accuracy", with the accuracy sentence alone).
    runs.summaries["final_eval_perplexity"] = [13.8, 13.8, 15.1, 15.1]
    text = analysis.conclusions(analysis.speedup_table(runs.summaries), runs)
    assert "they are compared by perplexity at equal time" in text
    assert "Final perplexity (lower is better) is lowest for `static` (13.8)" in text
    bsp = _runs({"static": 1.0, "proportional": 1.02})
    bsp.summaries["mode"] = "bsp"
    assert "`static` is the fastest" in analysis.conclusions(
        analysis.speedup_table(bsp.summaries), bsp
    )
    # An async run without a budget stops after its updates: its time compares.
    runs.summaries["stopped_by"], runs.summaries["time_budget"] = "num_steps", 0.0
    assert "`static` is the fastest" in analysis.conclusions(
        analysis.speedup_table(runs.summaries), runs
    )
    runs.summaries = runs.summaries.drop(columns="stopped_by").assign(time_budget=1.0)
    assert "Asynchronous runs stop" in analysis.conclusions(  # a summary from before stopped_by
        analysis.speedup_table(runs.summaries), runs
    )


def test_tied_lines_are_marked_and_drawn_differently():
    runs = _runs({"static": 4.0, "proportional": 2.0, "pi": 2.0})
    fig = analysis.plot_accuracy_vs_time(runs)
    (ax,) = fig.axes
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["pi", "proportional (= pi)", "static"]
    styles = {(line.get_linestyle(), line.get_marker()) for line in ax.get_lines()}
    assert len(styles) == 3  # a line on top of another still shows its own dashes and marks


def test_worker_time_panels_share_one_y_scale():
    runs = _runs({"static": 4.0, "proportional": 2.0})
    fig = analysis.plot_worker_times(runs)
    limits = {ax.get_ylim() for ax in fig.axes}
    assert len(fig.axes) == 2 and len(limits) == 1  # static's taller bars set both panels


def test_the_batch_size_figure_says_why_its_run_was_picked():
    runs = _runs({"static": 4.0, "proportional": 2.0, "oracle": 1.6})
    fig = analysis.plot_batch_sizes(runs)
    title = fig.axes[0].get_title()
    assert title.startswith("proportional-0\n(picked: the first run of a controller that measures")
    assert plots.pick_run(runs) == "proportional-0"


def test_the_analysis_table_headers_carry_units():
    runs = _runs({"static": 4.0, "proportional": 2.0})
    text = analysis.to_markdown(analysis.speedup_table(runs.summaries))
    header = text.splitlines()[0]
    assert "| total_time_mean (s, run clock) |" in header
    assert "| speedup_vs_static (x) |" in header and "| seeds |" in header


def test_a_group_whose_setting_is_missing_finds_its_reference():
    """A setting column missing for a group (groupby keeps it as its own group) compared as
    never equal, so that group had no static to be sped up against."""
    runs = _runs({"static": 4.0, "proportional": 2.0})
    summaries = pd.concat([runs.summaries, runs.summaries.assign(run=lambda f: f.run + "b")])
    summaries["x.y"] = pd.array([None] * 4 + [1] * 4, dtype="Int64")
    summaries.loc[summaries.run.str.endswith("b"), "total_time"] *= 2
    table = analysis.speedup_table(summaries).set_index(["controller", "x.y"], drop=False)
    assert table["speedup_vs_static"].tolist() == [2.0, 2.0, 1.0, 1.0]


def _async_steps(finals: dict[str, tuple[int, float]]) -> Runs:
    """Runs of `pi`, one a name: seed, then evaluations every 10 updates to its last update,
    accuracy rising 0.1 an evaluation to its final value at its last one."""
    steps = []
    for run, (seed, last, final) in finals.items():
        points = list(range(10, last, 10)) + [last]
        for i, step in enumerate(points):
            value = final - 0.1 * (len(points) - 1 - i)
            steps.append({"run": run, "controller": "pi", "seed": seed, "step": step,
                          "time": step / 100, "eval_accuracy": value})  # fmt: skip
    summaries = pd.DataFrame(
        [{"run": r, "controller": "pi", "seed": s, "status": "complete"} for r, (s, *_) in
         finals.items()]
    )  # fmt: skip
    for column in RUN_COLUMNS:
        if column not in summaries:
            summaries[column] = "same"
    return Runs(pd.DataFrame(steps), pd.DataFrame(columns=["run", "step"]), summaries)


def test_an_async_curve_ends_at_the_seeds_mean_final_value():
    """Seeds a time budget stopped at updates 30, 40 and 31: the tail's points were each one
    seed's or two (times going back and forth), and the curve did not end at the table's
    mean final accuracy; a seed run twice counted twice."""
    runs = _async_steps({"a": (0, 30, 0.6), "b": (1, 40, 0.9), "c": (2, 31, 0.3),
                         "a2": (0, 30, 0.8)})  # fmt: skip
    (line,) = analysis.plot_accuracy_vs_time(runs).axes[0].get_lines()
    x, y = line.get_xdata(), line.get_ydata()
    assert list(x[:3]) == pytest.approx([0.1, 0.2, 0.3])  # the updates every seed reached
    # at 10: seed 0's two runs (0.4, 0.6) as one (0.5), seed 1's 0.6, seed 2's 0.0
    assert y[0] == pytest.approx((0.5 + 0.6 + 0.0) / 3)
    assert len(x) == 4 and y[-1] == pytest.approx((0.7 + 0.9 + 0.3) / 3)  # the seeds' finals
    assert x[-1] == pytest.approx((0.30 + 0.40 + 0.31) / 3)


def test_a_facet_with_a_missing_setting_and_staleness_per_facet_get_their_sentences():
    """A facet whose key is missing (runs of older code) had no sentence; staleness was one
    sentence a controller over every facet (HL2's mean with HL8's maximum) and unfinished
    runs."""
    runs = _runs({"static": 4.0, "proportional": 2.0})
    summaries = pd.concat([runs.summaries, runs.summaries.assign(run=lambda f: f.run + "b")])
    summaries["x.y"] = pd.array([None] * 4 + [1] * 4, dtype="Int64")
    summaries["staleness_mean"] = [1.0, 1.0, 2.0, 2.0, 5.0, 5.0, 6.0, 6.0]
    summaries["staleness_max"] = [3, 3, 4, 4, 9, 9, 12, 15]
    summaries.iloc[7, summaries.columns.get_loc("status")] = "failed"
    runs = Runs(runs.steps, runs.workers, summaries.reset_index(drop=True))
    text = analysis.conclusions(analysis.speedup_table(runs.summaries), runs)
    assert "**x.y=nan**: `proportional` is the fastest" in text
    assert "**x.y=1.0**: `proportional` is the fastest" in text
    assert (
        "**x.y=nan**: Under asynchronous `static`, an update is on average 1 updates stale (max 3)"
        in text
    )
    stale = "Under asynchronous `proportional`, an update is on average 6 updates stale"
    assert f"**x.y=1.0**: {stale} (max 12)" in text


def test_bookkeeping_keys_and_an_unread_level_tell_no_runs_apart():
    from omnilearn_jax.analysis import frames, settings

    config = {"train": {"resume": False, "save_params": True, "num_steps": 5}}
    assert settings.to_json(config, set()) == '{"train.num_steps": 5}'
    # A W&B sweep's parameters, echoed into the run's config by its agent
    swept = {**config, "config.seed": 1, "config": {"controller.name": "pi"}}
    assert settings.to_json(swept, set()) == '{"train.num_steps": 5}'
    level = {
        "schedule": {"name": "schedule", "level": 8},
        "hl": {"name": "hl", "level": 2},
        "noise over hl": {"name": "noise", "base": "hl", "level": 4},
        "noise over uniform": {"name": "noise", "base": "uniform", "level": 8},
    }
    got = {k: frames.run_columns("r", {"hetero": h})["level"] for k, h in level.items()}
    assert got == {"schedule": None, "hl": 2, "noise over hl": 4, "noise over uniform": None}
