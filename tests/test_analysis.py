"""Analysis: loader (store, W&B offline, W&B API), cache, table, plots and the notebook.

One tiny real ablation (2 controllers x 2 seeds, 8 steps, the cluster's speeds change at
step 5) is trained in-process with W&B offline; every number the analysis shows is checked
against the run's own files.
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from omnilearn_jax import analysis, tracking
from omnilearn_jax.analysis import sources
from tests.test_train import smoke_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTROLLERS = ("static", "proportional")
SEEDS = (0, 1)
FIGURES = ("accuracy_vs_time", "loss_vs_time", "batch_sizes", "worker_times", "balance")


@pytest.fixture(scope="module")
def ablation(tmp_path_factory):
    from omnilearn_jax.run.job import train_and_evaluate

    root = str(tmp_path_factory.mktemp("abl"))
    for controller in CONTROLLERS:
        for seed in SEEDS:
            c = smoke_config(few_buckets=True)  # half the programs to compile
            c.num_workers, c.num_devices, c.seed = 4, 4, seed
            c.controller.name = controller
            # HL8 for steps 1-4, HL2 from step 5: a speed change the plots must mark.
            c.hetero.name, c.hetero.levels = "schedule", (8, 2)
            c.hetero.unit, c.hetero.segment = "steps", 4
            c.train.num_steps, c.train.eval_every, c.train.log_every = 8, 4, 4
            c.train.target_accuracy = 0.3
            c.wandb.mode = "offline"
            train_and_evaluate(c, os.path.join(root, f"controller-{controller}__seed-{seed}"))
    return root


def run_files(root):
    """{run name: (train records, eval records, summary)} straight from the run stores."""
    out = {}
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, "metrics.jsonl")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            records = [json.loads(line) for line in f]
        with open(os.path.join(root, name, "summary.json")) as f:
            summary = json.load(f)
        train = [r for r in records if "loss" in r]
        evals = [r for r in records if "eval_accuracy" in r]
        out[name] = (train, evals, summary)
    return out


def expected_table(root):
    """Mean total time, accuracy and speed-up per controller, recomputed from summary.json."""
    by = {c: {} for c in CONTROLLERS}
    for name, (_, _, summary) in run_files(root).items():
        controller, seed = name.split("__")
        by[controller.removeprefix("controller-")][int(seed.removeprefix("seed-"))] = summary
    out = {}
    for controller, per_seed in by.items():
        times = [per_seed[s]["total_time"] for s in SEEDS]
        accuracy = [per_seed[s]["final_eval_accuracy"] for s in SEEDS]
        ratios = [by["static"][s]["total_time"] / per_seed[s]["total_time"] for s in SEEDS]
        out[controller] = {
            "total_time_mean": np.mean(times),
            "total_time_std": np.std(times, ddof=1),
            "final_eval_accuracy_mean": np.mean(accuracy),
            "speedup_vs_static": np.mean([by["static"][s]["total_time"] for s in SEEDS])
            / np.mean(times),
            "speedup_vs_static_min": min(ratios),
            "speedup_vs_static_max": max(ratios),
        }
    return out


def assert_runs_equal(a, b):
    for name in ("steps", "workers", "summaries"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), rtol=1e-12)


def test_importing_analysis_pulls_in_neither_jax_nor_matplotlib():
    code = "import sys, omnilearn_jax.analysis; "
    code += "print('jax' in sys.modules, 'matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.split() == ["False", "False"], out.stderr


def test_frames_hold_the_run_store_numbers(ablation):
    runs = analysis.load_runs(ablation, use_cache=False)
    files = run_files(ablation)
    assert runs.names == sorted(files)
    for name, (train, evals, summary) in files.items():
        steps = runs.steps[runs.steps["run"] == name].set_index("step")
        assert list(steps.index) == [r["step"] for r in train]  # evals share train steps
        np.testing.assert_allclose(steps["loss"], [r["loss"] for r in train], rtol=1e-12)
        ev = steps.dropna(subset=["eval_accuracy"])
        assert list(ev.index) == [4, 8]
        np.testing.assert_allclose(ev["eval_accuracy"], [r["eval_accuracy"] for r in evals])
        workers = runs.workers[runs.workers["run"] == name]
        sizes = workers.pivot(index="step", columns="worker", values="batch_size")
        assert sizes.to_numpy().tolist() == [r["batch_sizes"] for r in train]
        assert (sizes.sum(axis=1) == 64).all()
        step_minus = [r["step_time"] - t for r in train for t in r["worker_times"]]
        np.testing.assert_allclose(workers["idle_time"], step_minus, rtol=1e-12)
        assert workers["idle_time"].min() >= 0.0
        assert analysis.speed_changes(workers) == [5]
        row = runs.summaries[runs.summaries["run"] == name].iloc[0]
        assert row["total_time"] == pytest.approx(summary["total_time"], rel=1e-15)
        assert row["controller"] == name.split("__")[0].removeprefix("controller-")
        assert (row["num_workers"], row["hetero"], row["status"]) == (4, "schedule", "complete")


def test_store_and_wandb_offline_give_equal_frames(ablation):
    store = analysis.load_runs(ablation, source="store", use_cache=False)
    offline = analysis.load_runs(ablation, source="wandb-offline", use_cache=False)
    assert (store.source, offline.source) == ("store", "wandb-offline")
    assert len(store.workers) == 4 * 8 * 4
    assert_runs_equal(store, offline)
    # One offline-run directory on its own loads as the run that holds it.
    one = tracking.find_offline_runs(os.path.join(ablation, store.names[0]))[0]
    single = analysis.load_runs(one, use_cache=False)
    assert single.names == [store.names[0]]
    assert_runs_equal(single, store.select(run=store.names[0]))


class FakeRun:
    """What `wandb.Api().runs()` yields, built from what W&B stored offline for a run."""

    def __init__(self, offline_dir):
        self._dir = offline_dir
        self.config = tracking.read_offline_config(offline_dir)
        self.summary = tracking.read_offline_summary(offline_dir)
        self.id = self.summary["wandb_run_id"]
        self.name = self.config["meta"]["workdir"].rstrip("/").rsplit("/", 1)[-1]
        self.state = "finished"
        self.lastHistoryStep = 8  # noqa: N815 (the client's own attribute name)

    def scan_history(self):
        for row in tracking.read_offline_history(self._dir):
            yield {k: v for k, v in row.items() if k != "step"}  # the API has `_step` only


class FakeApi:
    calls = []

    def __init__(self, root):
        self._root = root

    def runs(self, path, filters=None):
        self.calls.append((path, filters))
        for cell in sorted(os.listdir(self._root)):
            yield FakeRun(tracking.find_offline_runs(os.path.join(self._root, cell))[-1])


def test_wandb_api_path_matches_the_store(ablation, monkeypatch, tmp_path):
    import wandb

    monkeypatch.setattr(wandb, "Api", lambda: FakeApi(ablation))
    FakeApi.calls.clear()
    api_runs = analysis.load_wandb_project(
        "me/omnilearn", filters={"group": "g"}, cache_dir=str(tmp_path)
    )
    assert FakeApi.calls == [("me/omnilearn", {"group": "g"})]
    assert api_runs.source == "wandb-api"
    assert_runs_equal(api_runs, analysis.load_runs(ablation, use_cache=False))
    # Cached by fingerprint (id, state, last step): an unchanged project is not re-read.
    monkeypatch.setattr(sources, "parse_api_run", _fail)
    assert_runs_equal(
        api_runs, analysis.load_wandb_project("me/omnilearn", cache_dir=str(tmp_path))
    )


def _fail(*args):
    raise AssertionError("re-parsed a run that should have come from the cache")


def test_cache_is_reused_and_invalidated_by_a_changed_run(ablation, tmp_path, monkeypatch):
    root = str(tmp_path / "abl")
    shutil.copytree(ablation, root, ignore=shutil.ignore_patterns("wandb", "checkpoints"))
    first = analysis.load_runs(root)
    assert os.path.exists(os.path.join(root, ".analysis_cache", "store", "steps.parquet"))

    real = sources.parse_store_run
    monkeypatch.setattr(sources, "parse_store_run", _fail)
    assert_runs_equal(first, analysis.load_runs(root))  # all four from the cache

    parsed = []
    monkeypatch.setattr(sources, "parse_store_run", lambda d: parsed.append(d) or real(d))
    touched = os.path.join(root, first.names[1], "metrics.jsonl")
    st = os.stat(touched)
    os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert_runs_equal(first, analysis.load_runs(root))
    assert [os.path.basename(p) for p in parsed] == [first.names[1]]

    # A real change shows up: drop the last step of one run.
    with open(touched) as f:
        lines = f.readlines()
    with open(touched, "w") as f:
        f.writelines(line for line in lines if json.loads(line)["step"] < 8)
    changed = analysis.load_runs(root)
    assert len(changed.steps) == len(first.steps) - 1
    assert analysis.load_runs(root, use_cache=False).steps.equals(changed.steps)


def test_table_equals_numbers_recomputed_from_the_files(ablation):
    runs = analysis.load_runs(ablation, use_cache=False)
    table = analysis.speedup_table(runs.summaries).set_index("controller")
    assert analysis.group_columns(runs.summaries) == ["controller"]
    for controller, expected in expected_table(ablation).items():
        for column, value in expected.items():
            assert table.loc[controller, column] == pytest.approx(value, rel=1e-12), column
    assert table.loc["proportional", "speedup_vs_static"] > 1.05  # HL8 then HL2: it helps
    assert table["efficiency_vs_oracle"].isna().all()  # no oracle in this grid


def test_table_agrees_with_the_ablation_runner(ablation, tmp_path):
    from experiments.ablation import table as runner_table

    root = str(tmp_path / "abl")
    shutil.copytree(ablation, root, ignore=shutil.ignore_patterns("wandb", "checkpoints"))
    cells = [
        {"name": f"controller-{c}__seed-{s}", "values": {"controller.name": c, "seed": s}}
        for c in CONTROLLERS
        for s in SEEDS
    ]
    grid = {"controller.name": list(CONTROLLERS), "seed": list(SEEDS)}
    with open(os.path.join(root, "ablation.json"), "w") as f:
        json.dump({"grid": grid, "cells": cells}, f)
    theirs = {r["controller.name"]: r for r in runner_table.build_table(root)}
    ours = analysis.speedup_table(analysis.load_runs(root).summaries).set_index("controller")
    for controller, row in theirs.items():
        for column in ("total_time_mean", "final_eval_accuracy_std", "speedup_vs_static"):
            assert ours.loc[controller, column] == pytest.approx(row[column], rel=1e-12)
        assert ours.loc[controller, "target_reached"] == row["target_reached"]


def test_runs_that_differ_in_a_grid_key_are_not_averaged_as_seeds(ablation, tmp_path):
    """Seed 0 of static and proportional, copied as two cells of `controller.b_min` (4, and
    16 with times doubled): two rows a controller, one seed each, each cell's own speed-up.
    The table had merged them into one row of 2 "seeds" with a speed-up no cell has."""
    root = tmp_path / "bmin"
    for b_min, scale in ((4, 1.0), (16, 2.0)):
        for controller in ("static", "proportional"):
            run = root / f"controller-{controller}__b_min-{b_min}"
            source = f"controller-{controller}__seed-0"
            shutil.copytree(
                os.path.join(ablation, source),
                run,
                ignore=shutil.ignore_patterns("wandb", "checkpoints"),
            )
            config = json.loads((run / "config.json").read_text())
            config["controller"]["b_min"] = b_min
            (run / "config.json").write_text(json.dumps(config))
            summary = json.loads((run / "summary.json").read_text())
            summary["total_time"] *= scale if controller == "proportional" else 1.0
            (run / "summary.json").write_text(json.dumps(summary))
    summaries = analysis.load_runs(str(root), use_cache=False).summaries
    assert analysis.group_columns(summaries) == ["controller", "controller.b_min"]
    table = analysis.speedup_table(summaries).set_index(["controller", "controller.b_min"])
    assert table["seeds"].tolist() == [1, 1, 1, 1]
    files = run_files(ablation)
    static, prop = (
        files[f"controller-{c}__seed-0"][2]["total_time"] for c in ("static", "proportional")
    )
    assert table.loc[("proportional", 4), "speedup_vs_static"] == pytest.approx(static / prop)
    assert table.loc[("proportional", 16), "speedup_vs_static"] == pytest.approx(static / prop / 2)
    # A key some runs lack (code from before it) tells no runs apart; an absolute path counts
    # by its file name (the same file from another checkout); the launch's shape is no setting.
    for i, run in enumerate(sorted(root.iterdir())):
        config = json.loads((run / "config.json").read_text())
        config["cost"]["curve"] = f"/checkout{i}/data/curve.json"
        config["cpu_devices"] = 4 + i
        if i % 2:
            config["controller"].pop("deadband", None)
        (run / "config.json").write_text(json.dumps(config))
    summaries = analysis.load_runs(str(root), use_cache=False).summaries
    assert analysis.group_columns(summaries) == ["controller", "controller.b_min"]
    # Derived values are no setting either, but the CPU quotas a launched run's processes ran
    # under are (`launch --cpu_quota`): quota 0.25 on two runs makes them a setting apart.
    for i, run in enumerate(sorted(root.iterdir())):
        config = json.loads((run / "config.json").read_text())
        config["resolved"]["param_count"] = 100 + i
        config["resolved"]["cpu_quota"] = [1.0, 0.25 if i < 2 else 1.0]
        (run / "config.json").write_text(json.dumps(config))
    summaries = analysis.load_runs(str(root), use_cache=False).summaries
    columns = ["controller", "controller.b_min", "resolved.cpu_quota"]
    assert analysis.group_columns(summaries) == columns
    assert analysis.speedup_table(summaries)["seeds"].tolist() == [1, 1, 1, 1]
    # A top-level key (no dot: bucket_ratio, backend, capacity) is a setting too; runs that
    # differed only in one were averaged as seeds of one setting.
    for i, run in enumerate(sorted(root.iterdir())):
        config = json.loads((run / "config.json").read_text())
        config["resolved"]["cpu_quota"] = []
        config["controller"]["b_min"] = 4
        config["bucket_ratio"] = 1.25 if i % 2 else 2.0
        (run / "config.json").write_text(json.dumps(config))
    summaries = analysis.load_runs(str(root), use_cache=False).summaries
    assert analysis.group_columns(summaries) == ["controller", "bucket_ratio"]
    assert analysis.speedup_table(summaries)["seeds"].tolist() == [1, 1, 1, 1]


def test_a_resumed_runs_offline_summary_is_its_last_segments(monkeypatch):
    """A run interrupted, then resumed, has two W&B offline segments; its summary is the
    second's, as summary.json is rewritten: merged, the complete run kept the first's
    `error: Interrupted: SIGTERM` and `resume_step`."""
    from omnilearn_jax import tracking

    summaries = {
        "a": {"status": "interrupted", "error": "Interrupted: SIGTERM", "resume_step": 748},
        "b": {"status": "complete", "steps": 3000},
        "c": {},  # a segment that wrote no summary leaves the last one standing
    }
    monkeypatch.setattr(tracking, "read_offline_history", lambda d: [])
    monkeypatch.setattr(tracking, "read_offline_config", lambda d: {"seed": 0})
    monkeypatch.setattr(tracking, "read_offline_summary", lambda d: summaries[d])
    assert sources.parse_offline_run(["a", "b", "c"]).summary == summaries["b"]


def write_async_run(path, staleness):
    """A hand-made async run store: per-update records with `worker` and `staleness`."""
    os.makedirs(path)
    config = {"controller": {"name": "static"}, "hetero": {"name": "hl", "level": 2}}
    config.update(mode="asp", seed=0, num_workers=2, global_batch_size=8)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(path, "metrics.jsonl"), "w") as f:
        for i, s in enumerate(staleness):
            record = {"step": i + 1, "time": 0.5 * (i + 1), "loss": 1.0, "worker": i % 2}
            record.update(staleness=s, step_time=0.5, batch_sizes=[4, 4], worker_times=[1, 2])
            f.write(json.dumps(record) + "\n")
    summary = {"status": "complete", "total_time": 0.5 * len(staleness), "steps": len(staleness)}
    summary.update(staleness_mean=float(np.mean(staleness)), staleness_max=max(staleness))
    with open(os.path.join(path, "summary.json"), "w") as f:
        json.dump(summary, f)


def test_one_controller_over_two_levels_keeps_the_controller_column(ablation):
    """Only the level varies: the table still names the controller, and the conclusions
    compare the level facets instead of failing on a missing column."""
    runs = analysis.load_runs(ablation, use_cache=False)
    one = runs.summaries[runs.summaries["controller"] == "static"].copy()
    one["level"] = [2, 8]  # seeds 0 and 1, as if run at two levels
    assert analysis.group_columns(one) == ["controller", "level"]
    table = analysis.speedup_table(one)
    assert table["controller"].tolist() == ["static", "static"]
    assert table["level"].tolist() == [2, 8] and table["seeds"].tolist() == [1, 1]
    text = analysis.conclusions(table)
    assert "**level=2**: `static` is the fastest" in text and "**level=8**" in text


def test_async_staleness_columns_and_histogram(tmp_path, ablation):
    write_async_run(str(tmp_path / "asp"), [0, 1, 1, 2, 1, 0])
    runs = analysis.load_runs(str(tmp_path / "asp"), use_cache=False)
    assert runs.steps["applied_worker"].tolist() == [0, 1, 0, 1, 0, 1]
    assert runs.steps["staleness"].tolist() == [0, 1, 1, 2, 1, 0]
    assert runs.workers["idle_time"].isna().all()  # no barrier in async training
    assert runs.summaries.loc[0, "staleness_max"] == 2
    fig = analysis.plot_staleness(runs)
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert heights == pytest.approx([2 / 6, 3 / 6, 1 / 6])
    assert "max 2" in analysis.conclusions(analysis.speedup_table(runs.summaries), runs)
    empty = analysis.plot_balance(runs)  # async: no step balance, one panel saying so
    assert [t.get_text() for t in empty.axes[0].texts] == [
        "these runs record no 'balance' (async runs have no step balance)"
    ]
    bsp = analysis.load_runs(ablation, use_cache=False)
    assert len(analysis.plot_balance(bsp).axes[0].lines) >= 2  # one line a controller
    assert analysis.plot_staleness(bsp) is None  # skipped gracefully without staleness


def test_notebook_runs_headless_and_writes_figures_and_table(ablation, tmp_path):
    from experiments.notebooks import run_analysis

    out = str(tmp_path / "out")
    assert run_analysis.main(["--runs", ablation, "--out", out]) == 0
    for name in FIGURES:
        path = os.path.join(out, f"{name}.png")
        assert os.path.getsize(path) > 5000, name
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert not os.path.exists(os.path.join(out, "staleness.png"))  # BSP only
    table = pd.read_csv(os.path.join(out, "results.csv")).set_index("controller")
    expected = expected_table(ablation)
    for controller, values in expected.items():
        for column, value in values.items():
            assert table.loc[controller, column] == pytest.approx(value, rel=1e-12), column
    with open(os.path.join(out, "results.md")) as f:
        assert "| proportional | 2 | 0 |" in f.read()
    with open(os.path.join(out, "conclusions.md")) as f:
        findings = f.read()
    assert f"{expected['proportional']['speedup_vs_static']:.3g}x as fast" in findings
    # The repository copy stays output-free; the executed copy has outputs.
    import nbformat

    source = nbformat.read(run_analysis.NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in source.cells if c.cell_type == "code")
    executed = nbformat.read(os.path.join(out, "analysis.ipynb"), as_version=4)
    assert sum(bool(c.get("outputs")) for c in executed.cells if c.cell_type == "code") >= 5


def test_a_missing_runs_path_is_one_line_before_the_notebook_starts(tmp_path, capsys):
    from experiments.notebooks import run_analysis

    with pytest.raises(SystemExit) as err:
        run_analysis.main(["--runs", str(tmp_path / "nonexist"), "--out", str(tmp_path / "o")])
    assert err.value.code == 2
    assert f"--runs {tmp_path / 'nonexist'}: no such file or directory" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # no half-run notebook left behind


def test_an_out_file_and_a_failing_cell_are_one_line(ablation, tmp_path, monkeypatch, capsys):
    """`--out` naming a file was a FileExistsError traceback; a failing cell (`--wandb_project`
    without an API key: `UsageError: No API key configured`) printed the cell's whole
    coloured traceback, some 100 lines."""
    from nbclient.exceptions import CellExecutionError

    from experiments.notebooks import run_analysis

    (tmp_path / "afile").write_text("")
    with pytest.raises(SystemExit) as err:
        run_analysis.main(["--runs", ablation, "--out", str(tmp_path / "afile")])
    assert err.value.code == 2
    assert f"--out {tmp_path / 'afile'}: a file, not a folder" in capsys.readouterr().err

    def fail(notebook, params, out_dir, timeout):
        raise CellExecutionError("\x1b[31mmany lines\nof traceback", "UsageError", "No API key")

    monkeypatch.setattr(run_analysis, "execute", fail)
    assert run_analysis.main(["--runs", ablation, "--out", str(tmp_path / "o")]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "run_analysis: a notebook cell failed: UsageError: No API key (its traceback: "
        f"{tmp_path / 'o' / 'analysis.ipynb'})"
    ]


def test_another_projects_wandb_run_is_named_not_analysed(ablation):
    """A folder of W&B runs that are not this project's was analysed, exit 0: a row with an
    empty controller, and '`<NA>` has no complete run'."""
    from omnilearn_jax.analysis import load

    foreign = sources.Parsed(rows=[{"_step": 0, "acc": 0.5}], config={"lr": 0.1}, summary={})
    refs = [sources.RunRef("wandb/offline-run-x", ["somewhere"], "f")]
    with pytest.raises(ValueError) as err:
        load._load(refs, lambda location: foreign, None, "wandb-offline")
    assert str(err.value).startswith(
        "run 'wandb/offline-run-x' (wandb-offline) is not a run of this project (its config has "
        "no controller section"
    )
    assert analysis.load_runs(ablation, source="wandb-offline", use_cache=False).summaries.shape[0]


def test_figures_show_complete_runs_only(ablation, tmp_path):
    """A failed run's partial curve was averaged into its controller's line (the mean jumped
    where it stopped) and picked as the run to show, though the tables leave it out."""
    from omnilearn_jax.analysis import plots

    root = tmp_path / "abl"
    shutil.copytree(ablation, root)
    failed = root / "controller-proportional__seed-0"
    summary = json.loads((failed / "summary.json").read_text())
    (failed / "summary.json").write_text(json.dumps({**summary, "status": "failed"}))
    runs = analysis.load_runs(str(root), use_cache=False)
    assert plots.pick_run(runs) == "controller-proportional__seed-1"
    fig = plots.plot_metric_vs_time(runs, "eval_accuracy")
    (line,) = [ln for ln in fig.axes[0].lines if ln.get_label().startswith("proportional")]
    evals = run_files(str(root))["controller-proportional__seed-1"][1]
    assert list(line.get_ydata()) == [r["eval_accuracy"] for r in evals]  # seed 1's alone
    # The per-worker bars leave it out too (a failed run's 100 s steps had raised them).
    workers = runs.workers
    workers.loc[workers["run"] == "controller-proportional__seed-0", "worker_time"] = 100.0
    fig = plots.plot_worker_times(runs)
    heights = [p.get_height() for ax in fig.axes for p in ax.patches]
    assert heights and max(heights) < 10.0


def test_speedup_table_counts_complete_runs_and_spreads_over_seeds():
    """A failed run is no seed of its setting (its 1 s had raised the speed-up 1.765 -> 2.222
    unseen), and the speed-up's spread is the lowest and highest seed's (the lower end read
    the median, 2.0 for 1.25, unseen)."""
    rows = [
        {
            "run": f"s{i}",
            "controller": "static",
            "seed": i,
            "status": "complete",
            "total_time": 10.0,
        }
        for i in range(3)
    ]
    rows += [
        {"run": f"p{i}", "controller": "omni", "seed": i, "status": "complete", "total_time": t}
        for i, t in enumerate((5.0, 8.0, 4.0))
    ]
    rows.append(
        {"run": "p3", "controller": "omni", "seed": 3, "status": "failed", "total_time": 1.0}
    )
    frame = pd.DataFrame(rows).assign(
        time_to_target=None, final_eval_accuracy=0.9, mean_idle_fraction=0.1, steps=10
    )
    table = analysis.speedup_table(frame, by=["controller"]).set_index("controller")
    omni = table.loc["omni"]
    assert (omni["seeds"], omni["missing"]) == (3, 1)
    assert omni["total_time_mean"] == pytest.approx(17 / 3)
    assert omni["speedup_vs_static"] == pytest.approx(10 / (17 / 3))
    assert (omni["speedup_vs_static_min"], omni["speedup_vs_static_max"]) == (1.25, 2.5)


def test_runs_stopped_before_their_first_step_are_counted_not_failed_on(ablation, tmp_path):
    """A run interrupted while compiling (an empty metrics.jsonl) failed the notebook's first
    cell (int() of a NaN step count) and the worker-time plot (ZeroDivisionError); a sweep
    stopped while W&B was starting left an offline directory without its log, which failed
    the W&B-offline read (FileNotFoundError)."""
    from omnilearn_jax.analysis import plots, report

    root = tmp_path / "abl"
    shutil.copytree(ablation, root)
    empty = root / "controller-static__seed-9"
    empty.mkdir()
    shutil.copy(root / "controller-static__seed-0" / "config.json", empty)
    (empty / "metrics.jsonl").write_text("")
    stopped = {"status": "interrupted", "steps": 0, "error": "Interrupted: SIGINT"}
    (empty / "summary.json").write_text(json.dumps(stopped))
    (root / "controller-pi__seed-0" / "wandb" / "offline-run-20990101_000000-abcd1234").mkdir(
        parents=True
    )
    runs = analysis.load_runs(str(root), use_cache=False)
    assert len(runs.summaries) == 5 and runs.steps["run"].nunique() == 4
    assert "8-8 steps a run (1 of them logged none); 4 of 5 complete" in report.describe_setup(runs)
    # a schedule reads no hetero.level: it was described as 'level 8', the default
    assert "heterogeneity schedule; seeds" in report.describe_setup(runs)
    alone = analysis.load_runs(str(empty), use_cache=False)
    assert "no steps; 0 of 1 complete" in report.describe_setup(alone)
    assert not plots.plot_worker_times(alone).axes[0].axison  # says why, as an empty panel
    offline = analysis.load_runs(str(root), source="wandb-offline", use_cache=False)
    assert sorted(offline.summaries["run"]) == sorted(analysis.load_runs(str(ablation)).names)


def test_a_damaged_run_store_is_named_not_read_short(ablation, tmp_path):
    """A line that is not JSON with records after it stopped the read there without a word (a
    complete run loaded with part of its steps); a record without 'step' and a summary.json
    that is not JSON failed without naming the file. A torn last line (a kill mid-write) is
    still left out."""
    root = tmp_path / "abl"
    shutil.copytree(ablation, root)
    metrics = root / "controller-static__seed-0" / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.write_text("".join(lines) + '{"step": 9, "lo')  # torn: read as before
    runs = analysis.load_runs(str(root), use_cache=False)
    assert (runs.steps["run"] == "controller-static__seed-0").sum() == 8
    metrics.write_text("".join(lines[:2]) + "garbage\n" + "".join(lines[2:]))
    with pytest.raises(ValueError, match=r"metrics.jsonl: line 3 is not JSON .* records follow"):
        analysis.load_runs(str(root), use_cache=False)
    metrics.write_text("".join(lines[:2]) + '{"loss": 1.0}\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl: a record without 'step'"):
        analysis.load_runs(str(root), use_cache=False)
    metrics.write_text("".join(lines))
    (metrics.parent / "summary.json").write_text('{"status": "comp\tlete"}')
    with pytest.raises(ValueError, match=r"seed-0/summary.json is not JSON"):
        analysis.load_runs(str(root), use_cache=False)


def test_speedup_pairs_seeds_and_counts_a_seed_run_twice_once():
    """Static seeds 10, 10, 20 s, proportional 5, 5 s (its seed 2 failed): every pair is 2x,
    but the ratio of means over all seeds said 2.67x. A seed run twice (a rerun in another
    folder) counted as two seeds: static 10, 10 (seed 0 twice), 14 gave 3 seeds, mean 11.33."""
    rows = [("static", 0, 10.0), ("static", 1, 10.0), ("static", 2, 20.0)]
    rows += [("proportional", 0, 5.0), ("proportional", 1, 5.0)]
    frame = pd.DataFrame(
        [{"run": f"{c}{s}", "controller": c, "seed": s, "total_time": t} for c, s, t in rows]
    ).assign(
        status="complete", time_to_target=None, final_eval_accuracy=0.9, mean_idle_fraction=0.1
    )
    table = analysis.speedup_table(frame, by=["controller"]).set_index("controller")
    assert table.loc["proportional", "speedup_vs_static"] == pytest.approx(2.0)  # was 2.67
    twice = pd.concat([frame, frame.iloc[[0]].assign(run="rerun/static0")], ignore_index=True)
    twice.loc[1, "total_time"] = 14.0
    with pytest.warns(UserWarning, match=r"seed\(s\) 0 appear in more than one run"):
        table = analysis.speedup_table(twice, by=["controller"]).set_index("controller")
    assert table.loc["static", "seeds"] == 3  # seeds 0, 1, 2 (it said 4)
    assert table.loc["static", "total_time_mean"] == pytest.approx((10 + 14 + 20) / 3)
