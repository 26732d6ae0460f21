"""The exported W&B sweep logs online unless asked otherwise, whatever the ablation says."""

import yaml

from experiments import ablate

ABLATION = "configs/ablation_default.py"  # its overrides set wandb.mode=offline for local runs


def _mode(path) -> str:
    sweep = yaml.safe_load(path.read_text())
    return sweep["parameters"]["config.wandb.mode"]["value"]


def test_exported_sweep_logs_online_by_default(tmp_path, capsys):
    path = tmp_path / "sweep.yaml"
    assert ablate.main([f"--config={ABLATION}", f"--export_sweep={path}"]) == 0
    assert _mode(path) == "online"
    assert "wandb.mode online" in capsys.readouterr().out


def test_exported_sweep_mode_can_be_chosen(tmp_path):
    path = tmp_path / "sweep.yaml"
    args = [f"--config={ABLATION}", f"--export_sweep={path}", "--sweep_wandb_mode=offline"]
    assert ablate.main(args) == 0
    assert _mode(path) == "offline"


def test_a_text_ablations_sweep_minimises_perplexity(tmp_path):
    """The LM ablation's sweep was told to maximise final_eval_accuracy, which text runs do
    not report (docs/lm.md: perplexity, lower is better)."""
    lm, cnn = tmp_path / "lm.yaml", tmp_path / "cnn.yaml"
    assert ablate.main(["--config=configs/ablation_lm.py:mode=bsp", f"--export_sweep={lm}"]) == 0
    assert yaml.safe_load(lm.read_text())["metric"] == {
        "name": "final_eval_perplexity",
        "goal": "minimize",
    }
    assert ablate.main([f"--config={ABLATION}", f"--export_sweep={cnn}"]) == 0
    assert yaml.safe_load(cnn.read_text())["metric"]["goal"] == "maximize"


def test_a_sweep_refuses_a_project_wandb_refuses_and_a_dry_run(tmp_path, capsys):
    path = tmp_path / "sweep.yaml"
    args = [f"--config={ABLATION}", f"--export_sweep={path}"]
    assert ablate.main([*args, "--project=team/proj"]) == 2
    assert "wandb.project='team/proj' holds '/'" in capsys.readouterr().err
    assert ablate.main([*args, "--dry_run"]) == 2  # the sweep was written, the flag dropped
    assert "give one" in capsys.readouterr().err and not path.exists()


def test_a_sweep_runs_under_the_given_workdir_and_refuses_parallel(tmp_path, capsys):
    path = tmp_path / "sweep.yaml"
    args = [f"--config={ABLATION}", f"--export_sweep={path}"]
    assert ablate.main([*args, "--parallel=2"]) == 2  # agents run the cells, not this command
    assert "--parallel runs cells here" in capsys.readouterr().err and not path.exists()
    assert ablate.main([*args, f"--workdir={tmp_path}/cells"]) == 0
    script = yaml.safe_load(path.read_text())["command"][3]
    assert f'--workdir={tmp_path}/cells/"$WANDB_RUN_ID"' in script  # it was runs/<group>/...
