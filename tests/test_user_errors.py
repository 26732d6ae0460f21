"""User errors on the command line: exit status 2, one line on stderr, a "did you mean"."""

import json
import os

import pytest

from omnilearn_jax.config import errors
from omnilearn_jax.run import launch
from tests import cli


def main(workdir, *args, env_extra=None, fresh=False):
    """The command line (forked from one imported process; `fresh`: a new interpreter)."""
    env = launch.child_env()  # main.py makes its devices; other XLA flags stay
    env.pop(errors.VERBOSE_ENV, None)
    env.update(env_extra or {})
    return cli.main([f"--workdir={workdir}", *args], env, fresh=fresh, timeout=120)


# (arguments, the one stderr line must contain this); each is a name given wrong one way.
CASES = [
    (
        ["--config=configs/smoke.py", "--config.controller.name=proportinal"],
        "unknown controller 'proportinal' (did you mean 'proportional'?)",
    ),
    (
        ["--config=configs/paper_bsp.py:controller=proportinal"],
        "unknown controller 'proportinal' (did you mean 'proportional'?)",
    ),
    (
        ["--config=configs/smoke.py", "--config.train.num_step=3"],
        "unknown config key 'train.num_step' (did you mean 'train.num_steps'?); "
        "omnilearn_jax/config/schema.py lists every key",
    ),
    (
        ["--config=configs/smoke.py", "--config.trian.num_steps=3"],
        "unknown config key 'trian.num_steps' (did you mean 'train.num_steps'?)",
    ),
    (
        ["--config=configs/paper_bsp.py:epoch=3"],
        "unknown variant key 'epoch' in 'epoch=3' (did you mean 'epochs'?)",
    ),
    (
        ["--config=configs/smoke.py", "--config.model.name=mpl"],
        "unknown model 'mpl' (did you mean 'mlp'?)",
    ),
    (
        ["--config=configs/smoke.py", "--config.hetero.name=shedule"],
        "unknown hetero.name 'shedule' (did you mean 'schedule'?)",
    ),
    (
        ["--config=configs/smoke.py", "--config.controller.sizes=(8,8)"],
        "controller.sizes has 2 entries for 8 workers",
    ),
    (["--config=configs/nope.py"], "No such file or directory: 'configs/nope.py'"),
    (["--config", "configs/nope.py"], "No such file or directory: 'configs/nope.py'"),  # absl's
    (  # named a replacement only in a config file; on the command line "unknown config key"
        ["--config=configs/smoke.py", "--config.micro_batch_size=8"],
        "config key 'micro_batch_size' was removed: use memory_rows",
    ),
    # Values out of range: before these checks a zero period crashed after compiling and a
    # negative budget ran 0 steps and reported the run complete.
    (
        ["--config=configs/smoke.py", "--config.train.log_every=0"],
        "train.log_every must be >= 1 (steps between progress lines), got 0",
    ),
    (
        ["--config=configs/smoke.py", "--config.mode=asp", "--config.asp.time_budget=-1"],
        "asp.time_budget must be >= 0 seconds (0 = no budget: stop after train.num_steps "
        "updates), got -1.0",
    ),
    (  # a ZeroDivisionError traceback before: the paper configs divide their rows by B
        ["--config=configs/quickstart.py:hetero=hl8", "--config.global_batch_size=0"],
        "global_batch_size must be >= 1, got 0",
    ),
    # cpu_devices 0: a traceback as the CPU backend started; num_devices -1 passed until the
    # trainer counted devices; data_seed -1: numpy's "expected non-negative integer".
    (["--config=configs/smoke.py", "--config.cpu_devices=0"], "cpu_devices must be >= 1, got 0"),
    (["--config=configs/smoke.py", "--config.num_devices=-1"], "num_devices must be >= 0, got -1"),
    (
        ["--config=configs/smoke.py", "--config.dataset.data_seed=-1"],
        "dataset.data_seed must be >= 0, got -1",
    ),
    # A dataset's value was blamed on a key derived from it (paper_bsp's train.num_steps:
    # "must be >= 1, got -80" for test_fraction 1.5, "got 0" for a batch over the rows).
    (
        ["--config=configs/quickstart.py", "--config.dataset.test_fraction=1.5"],
        "dataset.test_fraction must be in (0, 1), got 1.5",
    ),
    (
        ["--config=configs/quickstart.py", "--config.global_batch_size=2000"],
        "global_batch_size=2000 exceeds the 1438 training examples of dataset digits",
    ),
    (
        [
            "--config=configs/paper_bsp.py:runlocal,model=mlp,data=synthetic",
            "--config.dataset.num_train=100",
        ],
        "global_batch_size=128 exceeds the 100 training examples of dataset synthetic",
    ),  # fmt: skip
    (["--config=configs/paper_bsp.py:runlocal,epochs=-3"], "paper_bsp: epochs must be >= 1"),
    (  # a 30-line AttributeError traceback ("'distributed'") before
        ["--config=configs/ablation_smoke.py"],
        "configs/ablation_smoke.py is an ablation (it has base and grid): run it with python -m "
        "experiments.ablate",
    ),
]


def test_help_lists_the_flags(tmp_path):
    """`--help` printed only the module's docstring and "Try --helpfull" (the flags are
    defined in omnilearn_jax/run/main.py, absl lists the __main__ module's)."""
    proc = main(tmp_path / "run", "--help", fresh=True)
    for flag in ("--config: Config file", "--workdir: Directory", "--[no]verbose"):
        assert flag in proc.stdout, proc.stdout


@pytest.mark.parametrize("args,message", CASES, ids=[str(i) for i in range(len(CASES))])
def test_a_user_error_is_one_line_on_stderr_with_status_2(tmp_path, args, message):
    proc = main(tmp_path / "run", *args, fresh=args == CASES[0][0])  # one in a new interpreter
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("error: ") and message in lines[0], lines[0]
    assert "\\n" not in lines[0]  # no escaped newline from a KeyError's repr
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
    # Found before the first line, which announces loading and compiling
    assert "starting" not in proc.stdout, proc.stdout


def test_a_config_that_is_not_a_training_config_is_one_line(tmp_path):
    path = tmp_path / "other.py"
    path.write_text("import ml_collections\n\ndef get_config():\n"
                    "    return ml_collections.ConfigDict({'x': 1})\n")  # fmt: skip
    proc = main(tmp_path / "run", f"--config={path}")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "the config has no " in proc.stderr and "distributed, " in proc.stderr
    # Every section the run reads: a config without `dataset` was an AttributeError.
    path.write_text("from omnilearn_jax.config.schema import base_config\n\ndef get_config():\n"
                    "    c = base_config()\n    del c.dataset\n    return c\n")  # fmt: skip
    proc = main(tmp_path / "run", f"--config={path}")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "the config has no dataset: a training config starts from" in proc.stderr


def test_a_cpu_quota_on_the_virtual_clock_is_said_to_change_nothing(tmp_path):
    """`launch --cpu_quota` on the default virtual clock ran without a word, its quotas
    without effect on any number."""
    from omnilearn_jax.run import cgroups

    proc = main(
        tmp_path / "run", "--config=configs/smoke.py", "--config.train.num_steps=1",
        env_extra={cgroups.QUOTA_ENV: "0.25"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "warning: this process runs under a CPU quota of 0.25 of a core, but the virtual" in (
        proc.stderr
    )


def test_verbose_shows_the_traceback(tmp_path):
    args = ["--config=configs/smoke.py", "--config.controller.name=proportinal"]
    # --verbose=True is absl's true too (it had been taken by absl and missed here)
    for extra, env in (
        (["--verbose"], None),
        (["--verbose=True"], None),
        ([], {errors.VERBOSE_ENV: "1"}),
    ):
        proc = main(tmp_path / "run", *args, *extra, env_extra=env)
        assert proc.returncode == 2  # still a user error's status (it was 1 with --verbose)
        assert "Traceback (most recent call last)" in proc.stderr
        assert "unknown controller 'proportinal'" in proc.stderr
        assert "(did you mean 'proportional'?)" in proc.stderr  # lost with the traceback


def test_a_workdir_holding_another_run_is_a_user_error(tmp_path):
    run = tmp_path / "run"
    first = main(run, "--config=configs/smoke.py", "--config.train.num_steps=2")
    assert first.returncode == 0, first.stderr[-2000:]
    assert json.loads((run / "summary.json").read_text())["status"] == "complete"
    proc = main(run, "--config=configs/smoke.py", "--config.train.num_steps=3")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "holds a checkpoint of a run with a different config (train.num_steps: 2 -> 3)" in line
    # An empty summary.json, then an empty config.json: each is named, with its remedy (a
    # bare "Expecting value: line 1 column 1 (char 0)" named neither).
    (run / "summary.json").write_text("")
    for damaged in ("summary.json", "config.json"):
        proc = main(run, "--config=configs/smoke.py", "--config.train.num_steps=2")
        assert proc.returncode == 2, proc.stderr[-2000:]
        (line,) = proc.stderr.strip().splitlines()
        assert f"{run / damaged} is not JSON (Expecting value" in line, line
        assert line.endswith("restore or remove it, or use --config.train.resume=False to "
                             "start afresh there")  # fmt: skip
        (run / "summary.json").unlink(missing_ok=True)
        (run / "config.json").write_text("")


def test_a_workdir_that_is_a_file_is_one_line_before_anything_is_built(tmp_path):
    (tmp_path / "f").write_text("hi")
    for workdir, where in (
        (tmp_path / "f", "is"),
        (tmp_path / "f" / "run", f"is under {tmp_path / 'f'},"),
    ):
        proc = main(workdir, "--config=configs/smoke.py")
        assert proc.returncode == 2, proc.stderr[-2000:]
        (line,) = proc.stderr.strip().splitlines()
        assert line == f"error: --workdir={workdir} {where} a file, not a directory"
        assert "starting" not in proc.stdout  # before the data is loaded


def test_suggestions_are_added_to_any_unknown_name_with_a_list():
    add = errors.with_suggestion
    assert add("unknown dataset 'digit'; valid names: digits, mnist1d") == (
        "unknown dataset 'digit' (did you mean 'digits'?); valid names: digits, mnist1d"
    )
    assert add("unknown controller 'pii'; registered: ['oracle', 'pi']").startswith(
        "unknown controller 'pii' (did you mean 'pi'?)"
    )
    text = "unknown clock 'xyz'; valid values: virtual, wall"
    assert add(text) == text  # nothing close: no guess
    assert add("x (did you mean 'y'?)") == "x (did you mean 'y'?)"


def test_a_non_finite_loss_stops_the_command_with_one_line_and_status_1(tmp_path):
    """Not a user error (status 1, not 2), but said as plainly: it was a 28-line traceback."""
    args = ["--config=configs/smoke.py", "--config.train.num_steps=6", "--config.faults.nan_step=2"]
    proc = main(tmp_path / "run", *args)
    assert proc.returncode == 1, proc.stderr[-2000:]
    (line,) = [s for s in proc.stderr.strip().splitlines() if not s.startswith("warning")]
    assert line.startswith("error: non-finite loss (nan) at step 3; last good checkpoint: none")
    assert "train.nan_policy=skip" in line
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["steps"] >= 3


def test_a_plug_in_policy_or_argument_without_its_module_says_how_to_load_it(tmp_path):
    for extra in ("--config.controller.name=nudge", "--config.controller.shift=2"):
        proc = main(tmp_path / "run", "--config=configs/smoke.py", extra)
        assert proc.returncode == 2, proc.stderr[-2000:]
        (line,) = proc.stderr.strip().splitlines()
        assert "--config.controller.plugin=MODULE" in line, line


def test_an_unknown_key_set_inside_a_config_file_gets_a_suggestion(tmp_path):
    config = tmp_path / "mine.py"
    config.write_text(
        "from omnilearn_jax.config.schema import base_config\n\n\n"
        "def get_config(arg=''):\n    c = base_config()\n    c.data.name = 'digits'\n    return c\n"
    )
    proc = main(tmp_path / "run", f"--config={config}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line == "error: unknown config key 'data' (did you mean 'dataset'?)"


def test_a_plug_in_that_breaks_the_registration_rules_is_one_line(tmp_path):
    """register's rules (keyword-only arguments, each with a default other than None) broken
    by a plug-in: the message was clear but came at the end of a traceback through its import,
    with exit status 1."""
    (tmp_path / "none_default_probe.py").write_text(
        "import controllers\n\n\n@controllers.register('none_default_probe')\n"
        "def probe(*, gain=None, b_min=0, b_max=0):\n    raise AssertionError\n"
    )
    proc = main(
        tmp_path / "run", "--config=configs/smoke.py",
        "--config.controller.plugin=none_default_probe",
        env_extra={"PYTHONPATH": f"{tmp_path}{os.pathsep}{cli.ROOT}"},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: controller 'none_default_probe': arguments ['gain'] default to "
                           "None"), line  # fmt: skip
