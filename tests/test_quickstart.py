"""The Quickstart job moves samples to the fast worker, and so does the plug-in example."""

import importlib.util
import os

import pytest

from omnilearn_jax.run.job import train_and_evaluate
from omnilearn_jax.run.runstore import read_metrics
from tests.test_train import ROOT


def quickstart(arg: str):
    path = os.path.join(ROOT, "configs", "quickstart.py")
    spec = importlib.util.spec_from_file_location("_quickstart_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.get_config(arg)
    config.train.num_steps, config.train.eval_every = 12, 12
    config.num_devices = 4  # the test process has 8 CPU devices; one a worker here
    return config


def test_the_quickstart_cluster_is_not_bound_by_its_bounds():
    config = quickstart("")
    # The balanced split at HL8 (cores 6/6/4/32) gives the slowest worker 128 * 4/48 = 10.7
    # samples; a lower bound above that would pin it and tie every adaptive controller.
    assert config.controller.b_min < 128 * 4 / 48 and config.controller.b_max == 0
    assert config.hetero.name == "schedule" and len(set(config.hetero.levels)) > 1
    assert config.cost.noise > 0 and config.cost.overhead > 0


@pytest.mark.parametrize("plugin", ["", "experiments.examples.damped"])
def test_a_controller_moves_samples_to_the_fast_worker(tmp_path, plugin):
    config = quickstart("hetero=hl8")
    if plugin:
        config.controller.plugin, config.controller.name = plugin, "damped"
    train_and_evaluate(config, str(tmp_path))
    sizes = [r["batch_sizes"] for r in read_metrics(str(tmp_path)) if "loss" in r]
    assert sizes[0] == [32, 32, 32, 32]
    assert sizes[-1][3] >= 2 * max(sizes[-1][:3]), sizes[-1]  # 32 cores against 4 to 6
    assert sizes[-1][2] < 32  # the 4-core worker gives samples away
