"""Benchmarks and studies refuse counts they cannot run with, before any work (one line)."""

import importlib
import sys

import pytest

CASES = [
    ("benchmarks.controller_cost", ["--steps", "0"], "--steps must be >= 1, got 0"),
    ("benchmarks.multiprocess_step", ["--reps", "0"], "--reps must be >= 1, got 0"),
    ("benchmarks.multiprocess_step", ["--steps", "5"], "--steps must be >= 6, got 5"),
    ("benchmarks.step_overhead", ["--steps", "5"], "--steps must be >= 6, got 5"),
    ("benchmarks.step_overhead", ["--reps", "0"], "--reps must be >= 1, got 0"),
    ("benchmarks.step_bench", ["--repeats", "0"], "--repeats must be >= 1, got 0"),
    ("benchmarks.placement_cost", ["--rounds", "0"], "--rounds must be >= 1, got 0"),
    ("benchmarks.checkpoint_cadence", ["--reps", "0"], "--reps must be >= 1, got 0"),
    ("benchmarks.unplaced_step", ["--rounds", "0"], "--rounds must be >= 1, got 0"),
    ("benchmarks.async_bench", ["--rounds", "0"], "--rounds must be >= 1, got 0"),
    # Tracebacks from inside the first run before (a ValueError, JAX's backend error):
    ("benchmarks.step_bench", ["--model", "nosuch"], "--model: unknown model 'nosuch'"),
    ("benchmarks.step_bench", ["--cpu_devices", "0"], "--cpu_devices must be >= 1, got 0"),
    ("benchmarks.async_bench", ["--workers", "0"], "--workers must be >= 1, got 0"),
    ("benchmarks.async_bench", ["--clocks", "bogus"], "--clocks takes virtual and/or wall"),
    ("benchmarks.async_bench", ["--batch", "2"], "--batch (2) must be >= --workers (4)"),
    ("benchmarks.async_bench", ["--model", "transformer"], "takes token sequences"),
    ("benchmarks.async_bench", ["--json", "/nonexistent/x.json"], "no folder /nonexistent"),
    ("benchmarks.controller_noise_bound", ["--draws", "0"], "--draws must be >= 1, got 0"),
    ("benchmarks.predictive_tuning", ["--kw", "jump=0.3"], "--kw 'jump=0.3'"),
    ("benchmarks.predictive_tuning", ["--kw", '{"bogus": 1}'], "unknown argument"),
    ("benchmarks.predictive_tuning", ["--seeds", "0,7"], "--seeds [7] are held-out families"),
    ("benchmarks.predictive_tuning", ["--at-steps", "30,500"], "each step in [0, 500)"),
    ("benchmarks.predictive_tuning", ["--at-steps", "x"], "--at-steps: invalid literal"),
    ("benchmarks.predictive_tuning", ["--change", "5"], "--change must be >= 10, got 5"),
    (
        "benchmarks.predictive_tuning",
        ["--change", "480"],
        "--change 480: at most 440 (room for 5 decisions",
    ),
    ("experiments.async_seeds", ["--seeds", "1"], "--seeds must be >= 2 for an interval"),
    ("benchmarks.bias_step_length", ["--noise", "abc"], "--noise takes comma-separated numbers"),
    ("benchmarks.controller_cost", ["--config", "nosuch.py"], "--config nosuch.py: no such file"),
    ("experiments.hl_levels", ["--cpu_devices", "0"], "--cpu_devices must be >= 4"),
    # the first run's "num_devices=4 but only 2 device(s) are available"
    ("experiments.hl_levels", ["--cpu_devices", "2"], "--cpu_devices must be >= 4"),
    ("experiments.lm_results", ["--bsp", "configs"], "configs: no ablation.json: --bsp and"),
    (  # dropped without a word: a rendering reads the saved JSON alone
        "experiments.lm_results",
        ["--render", "docs/results/lm.json", "--target", "10"],
        "--render writes --out from its JSON alone; drop --target",
    ),
    ("benchmarks.identical_split", ["--cpus", "bogus"], "invalid choice: 'bogus'"),
    (  # a table of "time to perplexity -3 (s)", 0 of n reached, had been written
        "experiments.lm_results",
        ["--render", "docs/results/lm.json", "--target", "-3"],
        "--target must be a perplexity > 0, got -3.0",
    ),
    ("experiments.async_seeds", ["--weighting", "bogus"], "--weighting is one of share, lr"),
    ("experiments.async_staleness", ["--updates", "4", "--settle", "10"], "--settle (10) must"),
    ("experiments.async_staleness", ["--render", "/nonexistent.json"], "no such file"),
    # An empty or mistyped list: a bare "invalid literal for int()", an IndexError after the
    # runs, or (controller_sim) nothing timed and exit 0.
    ("benchmarks.checkpoint_cadence", ["--every", ""], "--every takes integers separated"),
    ("benchmarks.step_overhead", ["--sizes", ""], "--sizes takes integers separated"),
    ("benchmarks.fixed_cost_splits", ["--seeds", ""], "--seeds takes integers separated"),
    ("benchmarks.quota_period", ["--sizes", ""], "--sizes takes integers separated"),
    ("benchmarks.quota_period", ["--quota", "0"], "--quota and --seconds must be > 0"),
    ("benchmarks.quota_period", ["--periods", "4000,-1"], "--periods: each value must be >= 1"),
    ("benchmarks.controller_sim", ["--controllers", ","], "--controllers names none"),
    # After building the model (a ValueError, JAX's sharding error) or a whole run:
    ("benchmarks.placement_cost", ["--devices", "0"], "--devices must be >= 1, got 0"),
    ("benchmarks.placement_cost", ["--rows", "0"], "--rows must be >= 1, got 0"),
    (
        "benchmarks.step_bench",
        ["--batch", "12"],
        "--batch 12 must be a multiple of --cpu_devices 8",
    ),
    ("benchmarks.launch_stagger", ["--steps", "8"], "--steps must be >= 50, got 8"),
    # A TypeError from a tree map (--plants 0: after the tuning pass), a FileNotFoundError,
    # numpy's "expected non-negative integer" (controller_heldout_seeds: after tuning).
    ("benchmarks.controller_heldout", ["--tune-plants", "0"], "--tune-plants must be >= 1"),
    ("benchmarks.controller_heldout", ["--plants", "0"], "--plants must be >= 1, got 0"),
    ("benchmarks.controller_heldout", ["--render", "/nonexistent.json"], "no such file"),
    ("benchmarks.controller_heldout_seeds", ["--seeds=-1"], "each value must be >= 0"),
    ("benchmarks.predictive_tuning", ["--seeds=0,-1"], "each value must be >= 0"),
    # The first run's config check (a ValueError traceback); the first run of the benchmark's
    # images (the transformer's ValueError, a child's traceback after the models before it).
    ("benchmarks.step_overhead", ["--sizes", "16,16,16,16"], "4 rows summing to 128"),
    ("benchmarks.step_overhead", ["--sizes", "32,32,64"], "4 rows summing to 128"),
    ("benchmarks.step_overhead", ["--json", "/nonexistent/x.json"], "no folder /nonexistent"),
    ("benchmarks.step_bench", ["--model", "transformer"], "takes token sequences"),
    ("benchmarks.share_cost", ["--models", "mlp,cnnn"], "--models: unknown model 'cnnn'"),
    ("benchmarks.share_cost", ["--models", "transformer"], "takes token sequences"),
    # Inside jit after the curves were measured; a FileNotFoundError; the trainer's table
    # dropped without a word (exit 0).
    ("experiments.curves.ablate", ["--steps", "0"], "--steps must be >= 1, got 0"),
    ("experiments.curves.ablate", ["--render", "/nonexistent.json"], "no such file"),
    ("experiments.curves.ablate", ["--trainer_runs", "/nonexistent"], "no such folder"),
    # "wrote ...: 0 runs" over the committed study (exit 0); a FileNotFoundError traceback.
    ("experiments.predictive_trainer", ["--runs", ","], "--runs ',' names no ablation workdir"),
    ("experiments.predictive_study", ["--heldout", "/nonexistent.json"], "no such file"),
    # The first run's config check (ValueError tracebacks); "invalid literal for int()", a
    # division by 0 in the worker processes, the JSON opened after every measurement.
    ("benchmarks.launch_stagger", ["--level", "3"], "--level 3: the paper's levels are"),
    ("benchmarks.launch_stagger", ["--inject", "-1"], "--inject takes seconds a sample >= 0"),
    ("benchmarks.collective_cost", ["--sizes", "1,,64"], "--sizes takes integers separated"),
    ("benchmarks.collective_cost", ["--calls", "0"], "--calls must be >= 1, got 0"),
    ("benchmarks.collective_cost", ["--json", "/nonexistent/x.json"], "no folder /nonexistent"),
    # A KeyError (the study's document JSON), an IsADirectoryError, a FileNotFoundError.
    (
        "experiments.async_fair",
        ["--out", "docs/results/async_fair.json"],
        "holds no runs of this study (one JSON object a line)",
    ),
    ("experiments.async_fair", ["--out", "docs"], "--out docs is a folder"),
    ("experiments.real_hetero", ["--render", "/nonexistent.json", "--md", "x.md"], "no such file"),
]


@pytest.mark.parametrize("module, argv, message", CASES, ids=[f"{m}{a}" for m, a, _ in CASES])
def test_a_count_a_run_cannot_do_without_is_one_line(module, argv, message, monkeypatch, capsys):
    """Each had printed a table of NaN (exit 0) or failed late: a StatisticsError after its
    runs, an IndexError after compiling, a TypeError from jax.tree.map, a JSON traceback."""
    main = importlib.import_module(module).main
    monkeypatch.setattr(sys, "argv", [module, *argv])  # some read sys.argv themselves
    with pytest.raises(SystemExit) as stop:
        main() if main.__code__.co_argcount == 0 else main(argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--batch", "8"], "--batch must be over 8"),
        (["--repeats", "0"], "--repeats >= 1"),
        (["--config", "configs/nope.py"], "--config: no such file 'configs/nope.py'"),
        (["--set", "train.no_such=1"], "--config/--set:"),
        (["--out", "/tmp"], "--out /tmp: a folder; give the curve's file name"),
        (["--out", "/nonexistent/c.json"], "--out /nonexistent/c.json: no folder /nonexistent"),
    ],
)
def test_measuring_a_curve_checks_its_arguments_before_timing(argv, message, capsys):
    """--batch 8 timed every size, then failed: one bucket is no curve."""
    from experiments.curves import measure

    base = ["--config", "configs/smoke.py", "--out", "/tmp/unused.json"]
    with pytest.raises(SystemExit):
        measure.main([*base, *argv])
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "module, argv, message",
    [
        ("experiments.notebooks.run_analysis", ["--runs", "EMPTY", "--out", "x"], "no run store"),
        ("experiments.notebooks.run_analysis", ["--runs", ".", "--out", "x", "--timeout", "0"],
         "--timeout must be >= 1"),
        ("experiments.lm_results", ["--bsp", "/nonexistent"], "no such file or directory"),
        ("experiments.paper.fragments", ["--docs", "/nonexistent"], "no RESULTS.md there"),
        ("experiments.real_hetero", ["--render", "x.json"], "--render rewrites --md"),
    ],
)  # fmt: skip
def test_missing_inputs_are_one_line(module, argv, message, tmp_path, capsys):
    """An empty --runs ran the notebook into 40 lines of coloured traceback; the others were
    tracebacks (open('') for real_hetero's --render without --md)."""
    argv = [str(tmp_path) if a == "EMPTY" else a for a in argv]
    with pytest.raises(SystemExit) as stop:
        importlib.import_module(module).main(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_a_trainer_study_that_is_not_there_is_said_to_be_left_out(tmp_path, capsys):
    """A mistyped --trainer dropped the predictive document's trainer section without a word
    (exit 0); it is optional (make report may render before its runs), so it is said."""
    from experiments import predictive_study

    out = tmp_path / "doc.md"
    argv = ["--trainer", str(tmp_path / "typo.json"), "--out", str(out)]
    assert predictive_study.main(argv) == 0
    assert "typo.json: no such file; the trainer section is left out" in capsys.readouterr().out
    assert predictive_study.main(["--out", str(out)]) == 0  # the committed study: no such line
    assert "left out" not in capsys.readouterr().out
