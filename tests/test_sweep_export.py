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
