"""The ablation runner: resumable parallel cells, the results table, the W&B sweep export."""

import csv
import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml
from absl import flags
from ml_collections import config_flags

from experiments import ablate
from experiments.ablation import spec, table
from experiments.ablation.runner import cpu_slots

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMOKE = "configs/ablation_smoke.py"


def ablate_cmd(workdir, config=SMOKE, parallel=2):
    return [
        sys.executable,
        "-m",
        "experiments.ablate",
        f"--config={config}",
        f"--workdir={workdir}",
        f"--parallel={parallel}",
    ]


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read_text(path):
    with open(path) as f:
        return f.read()


def summaries(workdir):
    out = {}
    for cell in spec.load(SMOKE).cells():
        path = os.path.join(workdir, cell.name, "summary.json")
        if os.path.exists(path) and read_json(path).get("status") == "complete":
            out[cell.name] = path
    return out


def started(workdir):
    """Cells begun (a log.txt) and not complete."""
    cells = [c.name for c in spec.load(SMOKE).cells()]
    begun = [n for n in cells if os.path.exists(os.path.join(workdir, n, "log.txt"))]
    return [n for n in begun if n not in summaries(workdir)]


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    """Runs the smoke grid, kills the runner alone (SIGKILL) after two cells, while a third
    runs, and reruns it; returns whether that cell outlived the runner by 2 s."""
    workdir = str(tmp_path_factory.mktemp("abl"))
    first = subprocess.Popen(
        ablate_cmd(workdir),
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 150
    while time.time() < deadline and first.poll() is None:
        if len(summaries(workdir)) >= 2 and started(workdir):
            break
        time.sleep(0.05)
    running = bool(started(workdir))
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    deadline = time.time() + 2.0
    while group_alive(first.pid) and time.time() < deadline:
        time.sleep(0.05)
    orphaned = group_alive(first.pid)
    if orphaned:
        os.killpg(first.pid, signal.SIGKILL)
        time.sleep(0.5)
    done_before = summaries(workdir)
    mtimes = {name: os.stat(path).st_mtime_ns for name, path in done_before.items()}
    second = subprocess.run(
        ablate_cmd(workdir), cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    return workdir, mtimes, second, (running, orphaned)


def test_a_cell_dies_with_a_runner_killed_by_sigkill(resumed):
    """An orphaned cell went on writing into the directory a rerun had cleared and started
    again, and the rerun counted the orphan's summary.json as its own run."""
    running, orphaned = resumed[3]
    assert running and not orphaned


def test_rerun_after_kill_finishes_only_the_missing_cells(resumed):
    workdir, mtimes, second, _ = resumed
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert 2 <= len(mtimes) < 4
    assert f"{len(mtimes)} of 4 cells already complete" in second.stdout
    done = summaries(workdir)
    assert len(done) == 4
    for name, mtime in mtimes.items():  # completed cells were not rerun
        assert os.stat(done[name]).st_mtime_ns == mtime
    started = [line for line in second.stdout.splitlines() if line.startswith("[ablate] start")]
    assert len(started) == 4 - len(mtimes)
    for name in done:  # each cell log holds one run, partial runs were started afresh
        log = read_text(os.path.join(workdir, name, "log.txt"))
        assert log.count("training mlp") == 1


def test_a_rerun_with_another_command_for_a_complete_cell_stops_before_running(
    resumed, tmp_path, capsys
):
    """A changed ablation file (here: one cell's logged command) must not have its complete
    cells skipped and reported as the new ablation's results (they were)."""
    import shutil

    workdir = str(tmp_path / "copy")
    shutil.copytree(resumed[0], workdir)  # moved: its cells still resume
    assert ablate.main([f"--config={SMOKE}", f"--workdir={workdir}"]) == 0
    assert "4 of 4 cells already complete" in capsys.readouterr().out
    name = spec.load(SMOKE).cells()[0].name
    log = os.path.join(workdir, name, "log.txt")
    text = read_text(log)
    head, rest = text.split("\n", 1)
    with open(log, "w") as f:
        f.write(head + " --config.train.num_steps=5\n" + rest)
    before = read_text(os.path.join(workdir, name, "summary.json"))
    assert ablate.main([f"--config={SMOKE}", f"--workdir={workdir}"]) == 2
    assert f"1 complete cell(s) run with another command than this ablation gives them ({name}" in (
        capsys.readouterr().err
    )
    assert read_text(os.path.join(workdir, name, "summary.json")) == before


def test_another_ablation_in_a_complete_workdir_and_the_dry_run_say_what_a_run_would_do(
    resumed, tmp_path, capsys
):
    """Another ablation's cells in the workdir were accepted without a word (the table then
    showed the new cells alone and the analysis loaded both as one sweep), and `--dry_run`
    listed every command with status 0 where the run refuses or skips them."""
    import shutil

    workdir = str(tmp_path / "copy")
    shutil.copytree(resumed[0], workdir)
    assert ablate.main([f"--config={SMOKE}", f"--workdir={workdir}", "--dry_run"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("# complete, skipped: ") for line in lines)
    changed = [f"--config={SMOKE}", f"--workdir={workdir}", "--set", "train.num_steps=4"]
    assert ablate.main([*changed, "--dry_run"]) == 2
    assert "4 complete cell(s) run with another command" in capsys.readouterr().err
    other = tmp_path / "other.py"
    other.write_text(
        "def get_config(arg=''):\n"
        "    return dict(base='configs/paper_bsp.py:runlocal,model=mlp', group='other',\n"
        "                grid={'controller.name': ('pi',), 'seed': (7,)},\n"
        "                overrides={'train.num_steps': 3, 'train.eval_every': 3})\n"
    )
    before = sorted(os.listdir(workdir))
    assert ablate.main([f"--config={other}", f"--workdir={workdir}"]) == 2
    err = capsys.readouterr().err
    assert f"{workdir} holds 4 complete cell(s) this ablation does not have" in err
    assert sorted(os.listdir(workdir)) == before  # nothing run, nothing rewritten


def test_every_cell_has_an_offline_wandb_run_matching_its_metrics(resumed):
    from omnilearn_jax.run.runstore import read_metrics
    from omnilearn_jax.tracking import find_offline_runs, read_offline_history

    workdir = resumed[0]
    cells = spec.load(SMOKE).cells()
    assert len(cells) == 4
    for cell in cells:
        cell_dir = os.path.join(workdir, cell.name)
        runs = find_offline_runs(cell_dir)
        assert len(runs) == 1, (cell.name, runs)
        history = {row["step"]: row for row in read_offline_history(runs[0])}
        records = read_metrics(cell_dir)
        train = [r for r in records if "loss" in r]
        evals = [r for r in records if "eval_accuracy" in r]
        # Every record is a train or an eval record; each kind is present and fully logged.
        assert len(train) == 6 and len(evals) >= 1 and len(train) + len(evals) == len(records)
        for record in train:
            row = history[record["step"]]
            for key in ("loss", "step_time"):
                assert row[key] == pytest.approx(record[key], rel=1e-9, abs=1e-12)
            sizes = [row[f"worker/{k}/batch_size"] for k in range(4)]  # paper_bsp: 4 workers
            assert sizes == record["batch_sizes"] and "worker/4/batch_size" not in row
        for record in evals:
            value = history[record["step"]]["eval_accuracy"]
            assert value == pytest.approx(record["eval_accuracy"], rel=1e-9, abs=1e-12)
        assert sorted(history) == sorted({r["step"] for r in records})


def test_table_equals_values_recomputed_from_the_summaries(resumed):
    workdir, _, second, _ = resumed
    cells = spec.load(SMOKE).cells()
    by_group = {}
    for cell in cells:
        s = read_json(os.path.join(workdir, cell.name, "summary.json"))
        by_group.setdefault(cell.values["controller.name"], []).append(s)
    rows = list(csv.DictReader(read_text(os.path.join(workdir, "results.csv")).splitlines()))
    reached_any = False
    assert len(rows) == 2 and rows == list(
        csv.DictReader(table.to_csv(table.build_table(workdir)).splitlines())
    )
    for row in rows:
        group = by_group[row["controller.name"]]
        assert int(row["seeds"]) == 2 and int(row["missing"]) == 0
        acc = [s["final_eval_accuracy"] for s in group]
        tot = [s["total_time"] for s in group]
        assert float(row["final_eval_accuracy_mean"]) == pytest.approx(np.mean(acc), abs=1e-12)
        assert float(row["final_eval_accuracy_std"]) == pytest.approx(
            np.std(acc, ddof=1), abs=1e-12
        )
        assert float(row["total_time_mean"]) == pytest.approx(np.mean(tot), abs=1e-12)
        reached = [s["time_to_target"] for s in group if s["time_to_target"] is not None]
        assert row["target_reached"] == f"{len(reached)}/2"
        expected = np.mean(reached) if reached else math.nan  # over the seeds that reached it
        assert float(row["time_to_target_mean"] or "nan") == pytest.approx(expected, nan_ok=True)
        reached_any = reached_any or bool(reached)
        static = np.mean([s["total_time"] for s in by_group["static"]])
        assert float(row["speedup_vs_static"]) == pytest.approx(static / np.mean(tot))
        assert row["efficiency_vs_oracle"] == ""  # no oracle cells in this grid
    assert reached_any  # the time-to-target mean was checked on real values
    # Under HL8 the proportional controller beats uniform batching.
    speed = {r["controller.name"]: float(r["speedup_vs_static"]) for r in rows}
    assert speed["static"] == 1.0 and speed["proportional"] > 1.2
    markdown = read_text(os.path.join(workdir, "results.md"))
    assert markdown in second.stdout


def test_a_failing_cell_is_reported_and_does_not_stop_the_others(tmp_path):
    config = tmp_path / "abl_fail.py"
    config.write_text(
        "def get_config(arg=''):\n"
        "    return {'base': 'configs/paper_bsp.py:runlocal,model=mlp',\n"
        "            'grid': {'dataset.name': ('digits', 'npz')},\n"
        "            'overrides': {'dataset.path': '/nonexistent/data.npz',\n"
        "                          'train.num_steps': 2, 'train.eval_every': 2}}\n"
    )
    workdir = tmp_path / "run"
    proc = subprocess.run(
        ablate_cmd(workdir, config=str(config)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert proc.returncode == 1
    failed_log = workdir / "name-npz" / "log.txt"
    # A user error found in the cell (a missing data file: the runner's check of every cell
    # loads no data) exits with status 2, saying so.
    assert f"FAILED name-npz (exit 2); log: {failed_log}" in proc.stdout
    assert "dataset file '/nonexistent/data.npz' does not exist" in failed_log.read_text()
    ok = read_json(workdir / "name-digits" / "summary.json")
    assert ok["status"] == "complete" and ok["steps"] == 2
    rows = table.build_table(str(workdir))
    assert [(r["dataset.name"], r["seeds"], r["missing"]) for r in rows] == [
        ("digits", 1, 0),
        ("npz", 0, 1),
    ]


def test_exported_sweep_lists_exactly_the_grid_cells(tmp_path):
    path = tmp_path / "sweep.yaml"
    assert ablate.main([f"--config={SMOKE}", f"--export_sweep={path}"]) == 0
    sweep = yaml.safe_load(path.read_text())
    assert sweep["method"] == "grid"
    assert "omnilearn_jax.main" in " ".join(sweep["command"]) and "${args}" in sweep["command"]
    params = sweep["parameters"]
    swept = {k: p["values"] for k, p in params.items() if "values" in p}
    fixed = {k: p["value"] for k, p in params.items() if "value" in p}
    ablation = spec.load(SMOKE)
    keys = [f"config.{k}" for k in ablation.grid]
    assert sorted(swept) == sorted(keys)
    runs = {
        tuple(zip(keys, combo, strict=True))
        for combo in itertools.product(*(swept[k] for k in keys))
    }
    cells = {tuple((f"config.{k}", v) for k, v in c.values.items()) for c in ablation.cells()}
    assert runs == cells and len(runs) == 4
    assert fixed["config.train.num_steps"] == 6 and fixed["config.hetero.level"] == 8
    assert fixed["config.hetero.name"] == "hl"
    assert fixed["config.train.target_accuracy"] == 0.2
    # What the agent's ${args} expands to parses back through the real config flags.
    argv = ["prog", f"--config={ablation.base}"] + [
        f"--{k}={v}" for k, v in {**fixed, **dict(next(iter(runs)))}.items()
    ]
    fv = flags.FlagValues()
    config_flags.DEFINE_config_file("config", None, "", flag_values=fv, sys_argv=argv)
    fv(argv)
    for key, value in {**fixed, **dict(next(iter(runs)))}.items():
        section, _, leaf = key.removeprefix("config.").rpartition(".")
        got = (fv.config[section] if section else fv.config)[leaf]
        assert got == value or (isinstance(value, float) and math.isclose(got, value))


def test_a_sweep_runs_the_checkouts_interpreter_and_logs_to_the_ablations_project(tmp_path, capsys):
    """The agent ran `python` (W&B's own interpreter macro is a bare `python` too): outside an
    activated venv every run failed on its first import. The ablation's own wandb.project went
    into the runs' config while the sweep (whose project the agent logs to) named the base
    config's. An export into a missing folder was a FileNotFoundError traceback."""
    path = tmp_path / "sweep.yaml"
    args = [f"--config={SMOKE}", f"--export_sweep={path}"]
    assert ablate.main([*args, "--set", "wandb.project=mine"]) == 0
    sweep = yaml.safe_load(path.read_text())
    assert sweep["project"] == "mine"
    assert sweep["parameters"]["config.wandb.project"] == {"value": "mine"}
    assert ablate.main([*args, "--set", "wandb.project=mine", "--project", "other"]) == 2
    assert "--project other but the ablation sets wandb.project=mine" in capsys.readouterr().err
    env, bash, flag, script, name, _ = sweep["command"]
    fake = tmp_path / "checkout" / ".venv" / "bin"
    fake.mkdir(parents=True)
    (fake / "python").write_text('#!/bin/sh\necho "venv $*"\n')
    (fake / "python").chmod(0o755)
    path_python = tmp_path / "path"
    path_python.mkdir()
    (path_python / "python").write_text('#!/bin/sh\necho "path $*"\n')
    (path_python / "python").chmod(0o755)
    environ = {"PATH": f"{path_python}:/usr/bin:/bin", "WANDB_RUN_ID": "r1"}
    for cwd, which in ((fake.parent.parent, "venv"), (tmp_path, "path")):
        out = subprocess.run([bash, flag, script, name, "--config.seed=0"], cwd=cwd,
                             env=environ, capture_output=True, text=True, check=True)  # fmt: skip
        assert out.stdout.split() == [
            which, "-m", "omnilearn_jax.main", f"--config={spec.load(SMOKE).base}",
            f"--workdir=runs/{spec.load(SMOKE).group}/r1", "--config.seed=0",
        ]  # fmt: skip
    with pytest.raises(SystemExit) as stop:
        ablate.main([f"--config={SMOKE}", f"--export_sweep={tmp_path}/no/s.yaml"])
    assert stop.value.code == 2
    assert (
        f"--export_sweep {tmp_path}/no/s.yaml: no folder {tmp_path}/no" in capsys.readouterr().err
    )


def test_cell_names_are_unique_and_filesystem_safe():
    ablation = spec.from_config(
        {
            "base": "configs/smoke.py",
            "grid": {
                "controller.name": ("static",),
                "hetero.name": ("hl",),
                "controller.sizes": ((8,) * 8, (16, 0) * 4),
                "seed": (0,),
            },
        }
    )
    names = [c.name for c in ablation.cells()]
    assert names[1] == "controller-name-static__hetero-name-hl__sizes-16-0-16-0-16-0-16-0__seed-0"
    assert len(set(names)) == 2 and all("/" not in n and " " not in n for n in names)


def test_cpu_slots_are_disjoint_while_cores_suffice_and_wrap_when_cells_outnumber_them():
    assert cpu_slots(2, [0, 1]) == [[0], [1]]
    assert cpu_slots(2, [0, 1, 2, 3]) == [[0, 1], [2, 3]]
    assert cpu_slots(2, [4, 5, 6, 7, 8]) == [[4, 5], [6, 7]]  # the odd core is left idle
    # More cells than cores: slots wrap around and share cores, one core each.
    assert cpu_slots(3, [0, 1]) == [[0], [1], [0]]
    assert cpu_slots(1, []) == [[]]  # no affinity information: no pinning


def test_a_plugin_controllers_own_arguments_can_be_swept(tmp_path, monkeypatch):
    """A grid over a plug-in's keyword argument: the plug-in named in the overrides is
    imported before the base config is built, so its argument is a config key."""
    (tmp_path / "sweep_probe_policy.py").write_text(
        "import controllers\n\n\n"
        "@controllers.register('sweep_probe')\n"
        "def sweep_probe(*, tilt: float = 0.0, b_min: int = 0, b_max: int = 0):\n"
        "    return controllers.make('static', b_min=b_min, b_max=b_max)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    ablation = spec.from_config(
        {
            "base": "configs/smoke.py",
            "overrides": {"controller.plugin": "sweep_probe_policy"},
            "grid": {"controller.name": ("sweep_probe",), "controller.tilt": (0.25, 0.5)},
        }
    )
    spec.check_cells(ablation)
    tilts = [spec.run_config(ablation, cell).controller.tilt for cell in ablation.cells()]
    assert tilts == [0.25, 0.5]


def test_set_gives_every_cell_a_key_a_grid_key_cannot_be_set(tmp_path, capsys):
    """A shipped ablation could not be shortened without copying its file."""
    workdir = str(tmp_path / "w")
    args = [f"--config={SMOKE}", f"--workdir={workdir}", "--dry_run"]
    assert ablate.main([*args, "--set", "train.num_steps=3", "--set", "hetero.level=4"]) == 0
    commands = capsys.readouterr().out.strip().splitlines()
    assert len(commands) == 4
    for command in commands:
        words = command.split()
        assert "--config.train.num_steps=3" in words and "--config.train.num_steps=6" not in words
        assert "--config.hetero.level=4" in words
    assert ablate.main([*args, "--set", "controller.name=pi"]) == 2
    assert "--set controller.name: a grid key" in capsys.readouterr().err
    # A string key set to digits stays a string (it was read as the int 2024 and refused with
    # ml_collections' "cannot be casted to type <class 'str'>"); a number key still parses.
    assert ablate.main([*args, "--set", "wandb.group=2024", "--set", "train.num_steps=3"]) == 0
    for command in capsys.readouterr().out.strip().splitlines():
        assert "--config.wandb.group=2024" in command.split()


def test_a_missing_cost_curve_stops_the_ablation_before_any_cell(tmp_path, capsys):
    """Every cell started and failed on it, and the runner wrote a table of empty rows."""
    config = "configs/ablation_lm.py:mode=asp,seeds=1,controllers=static,curve=/nonexistent.json"
    workdir = tmp_path / "w"
    assert ablate.main([f"--config={config}", f"--workdir={workdir}"]) == 2
    assert "cost curve /nonexistent.json: [Errno 2]" in capsys.readouterr().err
    assert not workdir.exists()


def test_strings_in_a_tuple_are_quoted_and_equal_or_overlong_grid_values_refused():
    """`(hl8,paper)` is one string to ml_collections: every cell of an ablation with
    wandb.tags=('hl8','paper') failed; grid values 1 and 1.0 ran one config twice, which the
    table averaged as two seeds; a cell name over 255 bytes failed as an OSError traceback."""
    text = spec.format_value(("hl8", "paper"))
    assert text == "('hl8','paper')"
    argv = ["prog", "--config=configs/smoke.py", f"--config.wandb.tags={text}"]
    holder = flags.FlagValues()
    config_flags.DEFINE_config_file("config", None, "", flag_values=holder, sys_argv=argv)
    holder(argv)
    assert tuple(holder.config.wandb.tags) == ("hl8", "paper")
    base = {"base": "configs/smoke.py"}
    with pytest.raises(ValueError, match=r"repeats a value: \(1, 1.0\)"):
        spec.from_config({**base, "grid": {"optimizer.learning_rate": (1, 1.0)}})
    long = {"controller.sizes": ((1,) * 64 + (0,) * 64, (0,) * 64 + (1,) * 64)}
    with pytest.raises(ValueError, match="bytes, over the file system's 255"):
        spec.from_config({**base, "grid": long}).cells()


def test_a_complete_cell_in_a_workdir_with_a_space_is_skipped_on_a_rerun(tmp_path):
    """The log header was joined with spaces and split on them: a rerun read the workdir as
    two arguments and refused its own complete cells as run with another command."""
    from experiments.ablation import runner

    ablation = spec.from_config({"base": "configs/smoke.py", "grid": {"seed": (0,)}})
    workdir = str(tmp_path / "a b")
    (cell,) = ablation.cells()
    os.makedirs(os.path.join(workdir, cell.name))
    cmd = runner.cell_command(ablation, cell, workdir)
    with open(os.path.join(workdir, cell.name, "log.txt"), "w") as f:
        f.write("# " + __import__("shlex").join([*cmd, "--config.wandb.group=a b"]) + "\n")
    with open(os.path.join(workdir, cell.name, "summary.json"), "w") as f:
        json.dump({"status": "complete"}, f)
    assert runner.stale_cells(ablation, workdir) == [cell.name]  # another group: stale
    with open(os.path.join(workdir, cell.name, "log.txt"), "w") as f:
        f.write("# " + __import__("shlex").join(cmd) + "\n")
    assert runner.stale_cells(ablation, workdir) == []


def test_a_key_no_cell_reads_is_refused_and_one_some_cells_ignore_is_said_once(tmp_path, capsys):
    """`controller.ki` (pi's) over static and proportional ran every cell, in pairs that the
    table showed as two settings each, and only each cell's log.txt said the key was unread."""
    grid = {"controller.name": ("static", "proportional"), "controller.ki": (0.05, 0.5)}
    ablation = spec.from_config({"base": "configs/smoke.py", "grid": grid})
    with pytest.raises(ValueError) as err:
        spec.check_cells(ablation)
    assert str(err.value) == (
        "grid key controller.ki is read by no cell: controller.ki is set but "
        "controller.name='static' does not take it (taken by pi); set controller.name to one "
        "of those to use it"
    )
    overrides = {"optimizer.warmup_steps": 5}  # under the default constant schedule
    ablation = spec.from_config(
        {"base": "configs/smoke.py", "grid": {"seed": (0, 1)}, "overrides": overrides}
    )
    with pytest.raises(ValueError, match="override optimizer.warmup_steps is read by no cell"):
        spec.check_cells(ablation)
    config = tmp_path / "some.py"
    config.write_text(
        "def get_config(arg=''):\n"
        "    return dict(base='configs/smoke.py', grid={'controller.name': ('static', 'pi'),\n"
        "                'controller.ki': (0.05, 0.5)}, overrides={'train.num_steps': 2})\n"
    )
    args = [f"--config={config}", f"--workdir={tmp_path / 'run'}", "--dry_run"]
    assert ablate.main(args) == 0
    assert capsys.readouterr().err.splitlines() == [
        "ablate: warning: grid key controller.ki is not read in 2 of 4 cells: controller.ki is "
        "set but controller.name='static' does not take it (taken by pi); set controller.name "
        "to one of those to use it"
    ]


def test_a_nested_section_in_the_grid_or_the_overrides_is_refused_with_the_dotted_key():
    """`c.grid.controller.name = (...)` was told 'must be a tuple of values, ... e.g.
    ({'name': ...},)'; `c.overrides.train.num_steps = 2` replaced the whole train section and
    failed on its first dropped key, an AttributeError traceback."""
    import ml_collections

    grid = ml_collections.ConfigDict({"controller": {"name": ("static", "pi")}})
    with pytest.raises(ValueError) as err:
        spec.from_config({"base": "configs/smoke.py", "grid": grid})
    assert str(err.value) == (
        "grid['controller'] is a section ({'name': ('static', 'pi')}); grid keys are dotted "
        "config keys: write grid={'controller.name': ...} (a dict, or a "
        "ConfigDict(..., allow_dotted_keys=True))"
    )
    nested = {"base": "configs/smoke.py", "grid": {"seed": (0,)}}
    with pytest.raises(ValueError, match=r"write overrides=\{'train.num_steps': \.\.\.\}"):
        spec.from_config({**nested, "overrides": {"train": {"num_steps": 2}}})


def test_the_same_overrides_in_another_order_skip_a_complete_cell(tmp_path):
    """`--set seed=3 --set train.log_every=1`, then the same flags swapped (or an ablation
    file's overrides reordered): the same config, refused as 'run with another command'."""
    from experiments.ablation import runner

    def ablation(overrides: dict) -> spec.Ablation:
        return spec.from_config(
            {"base": "configs/smoke.py", "grid": {"seed": (0,)}, "overrides": overrides}
        )

    first = ablation({"train.num_steps": 3, "train.log_every": 1})
    workdir = str(tmp_path / "abl")
    (cell,) = first.cells()
    os.makedirs(os.path.join(workdir, cell.name))
    with open(os.path.join(workdir, cell.name, "log.txt"), "w") as f:
        f.write("# " + __import__("shlex").join(runner.cell_command(first, cell, workdir)) + "\n")
    with open(os.path.join(workdir, cell.name, "summary.json"), "w") as f:
        json.dump({"status": "complete"}, f)
    swapped = ablation({"train.log_every": 1, "train.num_steps": 3})
    assert runner.stale_cells(swapped, workdir) == []
    other = ablation({"train.log_every": 2, "train.num_steps": 3})
    assert runner.stale_cells(other, workdir) == [cell.name]


@pytest.mark.parametrize(
    "override, message",
    [
        ("hetero.level=3", "unknown hl level 3"),
        ("cost.noise=-1.0", r"need \['noise >= 0'\]"),
    ],
)
def test_bad_cluster_values_stop_the_ablation_before_any_cell(tmp_path, capsys, override, message):
    """The runner's check of every cell passed them; each cell then failed as it started."""
    config = "configs/ablation_smoke.py"
    workdir = tmp_path / "w"
    assert ablate.main([f"--config={config}", f"--workdir={workdir}", "--set", override]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not workdir.exists()
