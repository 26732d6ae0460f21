"""A multi-process ablation cell: the runner launches it as 2 JAX processes x 2 CPU devices,
sharing its cores, and the cell's run is whole. That two processes compute what one does is
test_multiprocess.py's comparison (a moving split, zero-row workers), not repeated here."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import yaml

from experiments import ablate
from experiments.ablation import spec
from experiments.ablation.runner import cell_command
from omnilearn_jax.run.runstore import read_metrics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MULTIHOST = "configs/ablation_multihost.py"


def test_cell_command_uses_the_launcher_only_for_several_processes(tmp_path):
    two = spec.load(MULTIHOST)
    (cell,) = two.cells()
    cmd = cell_command(two, cell, str(tmp_path))
    # cpu_devices=4 of paper_bsp split over 2 processes, not the launcher's 8 // N default.
    assert cmd[1:6] == [
        "-m",
        "omnilearn_jax.launch",
        "--num_processes=2",
        "--devices_per_process=2",
        "--",
    ]
    one = cell_command(dataclasses.replace(two, num_processes=1), cell, str(tmp_path))
    assert one[1:3] == ["-m", "omnilearn_jax.main"] and cmd[6:] == one[3:]
    # A cell's cpu_devices reaches the launcher as --devices_per_process alone (the launcher
    # refuses a count of its own after --, which each process's count overrode silently).
    eight = dataclasses.replace(two, overrides={**two.overrides, "cpu_devices": 8})
    cmd = cell_command(eight, cell, str(tmp_path))
    assert "--devices_per_process=4" in cmd and not any("cpu_devices" in a for a in cmd)
    from omnilearn_jax.run import launch

    assert launch.parse(cmd[3:])[0].devices_per_process == 4


@pytest.mark.parametrize("bad", [0, -2, True, 1.5, "2"])
def test_num_processes_must_be_a_positive_int(bad):
    config = {"base": "configs/smoke.py", "grid": {"seed": (0,)}, "num_processes": bad}
    with pytest.raises(ValueError, match=r"^ablation num_processes must be an int >= 1, got "):
        spec.from_config(config)


def test_devices_that_do_not_split_evenly_stop_before_any_cell(tmp_path, capsys):
    config = tmp_path / "abl_three.py"
    config.write_text(
        "def get_config(arg=''):\n"
        "    return {'base': 'configs/paper_bsp.py:runlocal,model=mlp',\n"
        "            'grid': {'seed': (0,)}, 'num_processes': 3}\n"
    )
    # paper_bsp has cpu_devices=4: three processes cannot share it evenly.
    assert ablate.main([f"--config={config}", f"--workdir={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "ablate: cell seed-0: cpu_devices=4 is not a multiple of num_processes=3; "
        "set cpu_devices in overrides to one that is\n"
    )
    assert not (tmp_path / "run").exists()


def test_quotas_run_one_cell_at_a_time(tmp_path, capsys):
    # Checked against the machine's cores, the quotas passed; each cell's launcher, pinned to
    # its slot of them (one core each at --parallel 2), refused them, and every cell failed.
    config = tmp_path / "abl_quota.py"
    config.write_text(
        "def get_config(arg=''):\n"
        "    return {'base': 'configs/paper_bsp.py:runlocal,model=mlp',\n"
        "            'grid': {'seed': (0, 1)}, 'num_processes': 2, 'cpu_quota': (0.5, 0.25),\n"
        "            'cpus': 'none'}\n"
    )
    workdir = tmp_path / "run"
    assert ablate.main([f"--config={config}", f"--workdir={workdir}", "--parallel=2"]) == 2
    assert "give --parallel 1" in capsys.readouterr().err
    assert not workdir.exists()
    dry = ablate.main([f"--config={config}", f"--workdir={workdir}", "--dry_run"])
    assert dry == 0 and "--cpu_quota=0.5,0.25" in capsys.readouterr().out


def test_exported_sweep_runs_the_launcher(tmp_path):
    path = tmp_path / "sweep.yaml"
    assert ablate.main([f"--config={MULTIHOST}", f"--export_sweep={path}"]) == 0
    script = yaml.safe_load(path.read_text())["command"][3]
    assert script.startswith(
        "py=python; [ -x .venv/bin/python ] && py=.venv/bin/python; "
        'exec "$py" -m omnilearn_jax.launch --num_processes=2 --devices_per_process=2 -- '
        "--config=configs/paper_bsp.py:runlocal,model=mlp "
    )
    swept = dataclasses.replace(spec.load(MULTIHOST), grid={"cpu_devices": (2, 4)})
    with pytest.raises(ValueError, match="cannot sweep cpu_devices"):
        from experiments.ablation.sweep import sweep_dict

        sweep_dict(swept)


@pytest.mark.slow
def test_two_process_cell_matches_the_one_process_run(tmp_path):
    workdir = tmp_path / "abl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.ablate",
            f"--config={MULTIHOST}",
            f"--workdir={workdir}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ablation = spec.load(MULTIHOST)
    (cell,) = ablation.cells()
    cell_dir = workdir / cell.name
    assert json.loads((cell_dir / "summary.json").read_text())["status"] == "complete"
    # Both processes of the cell share its cores, one thread each on a 2-core slot.
    threads = max(1, len(os.sched_getaffinity(0)) // 2)
    assert f"2 processes x {threads} thread(s)" in proc.stdout
    log = (cell_dir / "log.txt").read_text()
    header = log.splitlines()[0].split()  # "# <the cell's exact command>"; no spaced args
    launcher = ["-m", "omnilearn_jax.launch", "--num_processes=2", "--devices_per_process=2"]
    assert header[:7] == ["#", sys.executable, *launcher, "--"]
    # Process 1 prints nothing of its own (only process 0 reports), so the launcher's lines
    # are what show that both ran and finished.
    assert "[launch] started process 0" in log and "[launch] started process 1" in log
    assert "[p0] training mlp" in log and "4 workers on 4 cpu devices (2 process(es))" in log
    assert "[launch] all 2 processes finished" in log

    # That two processes compute what one does is test_multiprocess.py's comparison; here,
    # that the cell's run is whole: every step logged, the batch kept, the splits moving.
    b = [r for r in read_metrics(cell_dir) if "loss" in r]
    assert [r["step"] for r in b] == list(range(1, 9))
    assert all(sum(r["batch_sizes"]) == 128 for r in b)
    assert len({tuple(r["batch_sizes"]) for r in b}) > 1  # HL8: the controller moved samples
    assert len([r for r in read_metrics(cell_dir) if "eval_loss" in r]) == 2
