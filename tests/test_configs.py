"""Config variants, lazy derived values, and one-line errors for malformed configs."""

import json
import os

import ml_collections
import pytest
from absl import flags
from ml_collections import config_flags

from configs import ablation_default, ablation_smoke, default, paper_asp, paper_bsp, smoke
from experiments.ablation import spec
from omnilearn_jax.config.args import parse_arg
from omnilearn_jax.config.checks import check_config, check_config_types
from omnilearn_jax.config.schema import base_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIGITS_TRAIN = 1438  # 1797 digits minus the 359 test rows


def parse_cli(*args):
    """The real command-line path: config_flags loads the file and applies overrides."""
    argv = ["prog", *args]
    fv = flags.FlagValues()
    config_flags.DEFINE_config_file("config", None, "", flag_values=fv, sys_argv=argv)
    fv(argv)
    return fv.config


def test_parse_arg_types_and_flags():
    a = parse_arg(
        "hetero=hl4, epochs=3,target=0.5,runlocal",
        hetero="hl8",
        epochs=10,
        target=0.0,
        runlocal=False,
        fast=True,
    )
    assert (a.hetero, a.epochs, a.target, a.runlocal, a.fast) == ("hl4", 3, 0.5, True, True)
    assert parse_arg("fast=false", fast=True).fast is False
    assert parse_arg("", epochs=10).epochs == 10


def test_paper_bsp_variant_matches_the_paper_setup():
    c = paper_bsp.get_config("hetero=hl8,controller=pi,model=resnet18")
    assert (c.num_workers, c.global_batch_size) == (4, 128)
    assert (c.controller.b_min, c.controller.b_max) == (16, 96)
    assert (c.hetero.name, c.hetero.level, c.controller.name, c.model.name) == (
        "hl",
        8,
        "pi",
        "resnet18",
    )
    assert c.train.num_steps == 10 * (10240 // 128)
    check_config(c)
    local = paper_bsp.get_config("runlocal,model=mlp,epochs=2")
    assert local.dataset.name == "digits"
    assert local.train.num_steps == 2 * (DIGITS_TRAIN // 128) == 22
    # An epoch follows the test fraction (898 training rows at 0.5): it was fixed at 0.2's
    # 1438, so epochs=1 ran 1.57 epochs and evaluated off the epoch's end.
    local.dataset.test_fraction = 0.5
    assert (local.train.num_steps, local.train.eval_every) == (2 * (898 // 128), 898 // 128)
    assert paper_bsp.get_config("hetero=uniform").hetero.name == "uniform"


CONTRACT = {  # design.md: the keys every config has, and their allowed values
    "seed": int,
    "dataset.name": str,
    "model.name": str,
    "num_workers": int,
    "global_batch_size": int,
    "train.num_steps": int,
    "optimizer.name": str,
    "controller.name": str,
    "hetero.name": str,
    "clock": ("virtual", "wall"),
    "mode": ("bsp", "asp"),
    "backend": ("shard_map", "pmap"),
    "wandb.mode": ("online", "offline", "disabled"),
    "wandb.project": str,
}


@pytest.mark.parametrize("make", [default.get_config, smoke.get_config, paper_bsp.get_config])
def test_shipped_configs_have_the_contract_keys_and_pass_the_checks(make):
    c = make()
    for key, allowed in CONTRACT.items():
        section, _, leaf = key.rpartition(".")
        value = (c[section] if section else c)[leaf]
        ok = value in allowed if isinstance(allowed, tuple) else type(value) is allowed
        assert ok, (key, value)
    assert c.num_workers >= 1 and c.global_batch_size >= c.num_workers
    assert check_config(c) is None  # raises on any violation
    c.train.num_step = 3  # the same config with one misspelt key is rejected: the check ran
    with pytest.raises(ValueError, match=r"unknown config key 'train.num_step'"):
        check_config(c)


def test_ablation_configs_expand_and_their_cells_pass_the_checks():
    for module, cells in ((ablation_smoke, 4), (ablation_default, 8)):
        ablation = spec.from_config(module.get_config())
        assert len(ablation.cells()) == cells
        spec.check_cells(ablation)


def test_overriding_the_batch_size_leaves_no_stale_derived_value():
    c = parse_cli("--config=configs/paper_bsp.py:epochs=3", "--config.global_batch_size=256")
    assert c.train.num_steps == 3 * (10240 // 256) == 120
    assert c.train.eval_every == 40
    assert (c.controller.b_min, c.controller.b_max) == (32, 192)
    c = parse_cli("--config=configs/paper_bsp.py", "--config.dataset.num_train=2560")
    assert c.train.num_steps == 10 * 20
    # An explicit override of a derived value wins, and the rest still follow B.
    c = parse_cli(
        "--config=configs/paper_bsp.py",
        "--config.train.num_steps=7",
        "--config.global_batch_size=64",
    )
    assert (c.train.num_steps, c.controller.b_min) == (7, 8)
    # The async update cap is 4 W times BSP's steps, following B and W too (it kept the
    # number computed at B = 128)
    c = parse_cli(
        "--config=configs/paper_asp.py:epochs=3,runlocal", "--config.global_batch_size=256"
    )
    assert c.train.num_steps == 4 * 4 * 3 * ((1797 - int(0.2 * 1797)) // 256) == 240
    c = parse_cli("--config=configs/paper_asp.py:epochs=3", "--config.num_workers=8")
    assert c.train.num_steps == 4 * 8 * 3 * (10240 // 128)


def test_run_with_overridden_batch_size_uses_the_new_derived_values(tmp_path):
    from omnilearn_jax.run.job import train_and_evaluate

    c = paper_bsp.get_config("runlocal,model=mlp,epochs=2")
    c.num_devices = 4  # the tests have 8 CPU devices; 4 workers on 4 of them
    c.global_batch_size = 256
    summary = train_and_evaluate(c, str(tmp_path))
    assert summary["steps"] == 2 * (DIGITS_TRAIN // 256) == 10
    resolved = json.loads((tmp_path / "config.json").read_text())
    assert resolved["resolved"]["steps_per_epoch"] == 5
    assert (resolved["controller"]["b_min"], resolved["controller"]["b_max"]) == (32, 192)
    assert resolved["train"]["num_steps"] == 10


def _loose(c):
    """A copy whose sections accept values of any type, as a hand-built config might."""
    return ml_collections.ConfigDict(c.to_dict(), type_safe=False)


def _paper(**changes):
    c = paper_bsp.get_config("runlocal,model=mlp")
    for key, value in changes.items():
        section, _, leaf = key.rpartition(".")
        (c[section] if section else c)[leaf] = value
    return c


def _grid(grid, **extra):
    cfg = {"base": "configs/paper_bsp.py:runlocal,model=mlp", "grid": grid, **extra}
    spec.check_cells(spec.from_config(cfg))


def _unknown_key():
    c = _paper()
    c.train.num_step = 3
    check_config(c)


def _wrong_type():
    c = _loose(_paper())
    c.model.hidden = "wide"
    check_config_types(c, base_config())


def _float_in_int_tuple():
    c = _loose(base_config())
    c.model.features = (8, 16.5)
    check_config_types(c)


def _bool_for_int():
    c = _loose(_paper())
    c.num_workers = True
    check_config_types(c)


MALFORMED = [
    (_unknown_key, r"unknown config key 'train.num_step' \(did you mean 'train.num_steps'\?\)"),
    (_wrong_type, r"'model.hidden' should be int, got str 'wide'"),
    (_bool_for_int, r"'num_workers' should be int, got bool"),
    (  # it said "should be tuple, got tuple (8, 16.5)"
        _float_in_int_tuple,
        r"'model.features' should be a tuple of ints, got \(8, 16.5\) \(holding float 16.5\)",
    ),
    (
        lambda: check_config(_paper(**{"controller.name": "propotional"})),
        r"unknown controller 'propotional' \(did you mean 'proportional'\?\)",
    ),
    (
        lambda: check_config(_paper(**{"hetero.name": "hll"})),
        r"unknown hetero.name 'hll' \(did you mean 'hl'\?\)",
    ),
    (
        lambda: check_config(_paper(**{"controller.b_min": 40})),
        r"4 workers x b_min sum to 160 > global batch 128",
    ),
    (
        lambda: check_config(_paper(**{"controller.b_max": 20})),
        r"4 workers x b_max sum to 80 < global batch 128",
    ),
    (lambda: check_config(_paper(**{"model.name": "vgg"})), r"unknown model 'vgg'"),
    (
        lambda: paper_bsp.get_config("hetro=hl8"),
        r"unknown variant key 'hetro' in 'hetro=hl8' \(did you mean 'hetero'\?\); valid keys",
    ),
    (  # paper_asp's own key is listed too (it listed paper_bsp's alone)
        lambda: paper_asp.get_config("runlocal,budgt=5"),
        r"'budgt' .*\(did you mean 'budget'\?\); valid keys: budget, controller, data,",
    ),
    (lambda: paper_bsp.get_config("hetero=hl3"), r"unknown hetero 'hl3'.*valid values: uniform"),
    (lambda: paper_bsp.get_config("epochs=ten"), r"variant epochs='ten'.*expected int"),
    (lambda: paper_bsp.get_config("model"), r"variant key 'model' .* needs a value"),
    (lambda: paper_bsp.get_config("controller=bogus"), r"unknown controller 'bogus'"),
    (
        lambda: _grid({"controler.name": ("static",)}),
        r"unknown config key 'controler.name' \(did you mean 'controller.name'\?\)",
    ),
    (lambda: _grid({"seed": ()}), r"grid\['seed'\] has no values"),
    (lambda: _grid({"seed": 3}), r"grid\['seed'\] must be a tuple of values"),
    (lambda: _grid({"seed": ("zero",)}), r"config key 'seed'='zero'"),
    (lambda: _grid({}), r"ablation grid is empty"),
    (lambda: _grid({"seed": (0,)}, grids={}), r"unknown ablation key\(s\) \['grids'\]"),
    (  # listed the run config's 23 sections as "unknown ablation keys"
        lambda: spec.from_config(_paper().to_dict()),
        r"this is a run's config .*: run it with python -m omnilearn_jax.main",
    ),
    (lambda: _grid({"seed": (0,)}, overrides={"seed": 1}), r"both in grid and overrides"),
    (lambda: _grid({"controller.name": ("static", "magic")}), r"cell .*magic.*unknown controller"),
]


@pytest.mark.parametrize("make,message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_configs_fail_with_a_clear_one_line_error(make, message):
    with pytest.raises(ValueError, match=message) as info:
        make()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"controller.b_min": 40}, r"b_min sum to 160 > global batch 128"),
        ({"hetero.name": "hll"}, r"unknown hetero.name 'hll'; valid names: \['uniform', 'hl'"),
        ({"controller.name": "nope"}, r"unknown controller 'nope'"),
    ],
)
def test_the_trainer_rejects_the_same_configs(tmp_path, changes, message):
    from omnilearn_jax.run.train import Trainer

    c = _paper(**changes)
    c.num_devices = 4
    with pytest.raises(ValueError, match=message):
        Trainer(c, str(tmp_path))


def test_overriding_one_derived_key_leaves_the_others_alone():
    from configs import paper_bsp

    c = paper_bsp.get_config("runlocal,model=mlp,epochs=10")
    steps = c.train.num_steps
    c.train.eval_every = 3  # its own reference: num_steps must not follow it
    assert (c.train.num_steps, c.train.eval_every, c.train.log_every) == (steps, 3, steps // 10)


@pytest.mark.parametrize(
    "changes",
    [
        {"controller.b_min": -1, "controller.b_max": -1},  # the paper's rule (PAPER_BOUND)
        {"controller.b_min": 0, "controller.b_max": 0},  # no bounds
        {"train.checkpoint_every": 0},  # only at the end (configs/paper_lm.py)
        {"train.max_skipped": 0},  # unused under nan_policy=stop
        {"train.nan_policy": "skip", "train.max_skipped": 1},
        {"train.log_every": 1, "train.eval_every": 1, "train.eval_batch_size": 1},
        {"mode": "asp", "asp.time_budget": 0.0, "asp.staleness_bound": -1},  # no budget, ASP
        {"mode": "asp", "asp.time_budget": 2.5, "asp.staleness_bound": 0},  # BSP-like SSP
    ],
    ids=str,
)
def test_documented_sentinels_and_smallest_values_pass_the_checks(changes):
    c = _paper(**changes)
    c.num_devices = c.num_workers  # mode=asp: one worker a device
    assert check_config(c) is None


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"train.eval_every": 0}, r"train.eval_every must be >= 1 \(steps between evaluations\)"),
        ({"train.keep_checkpoints": 0}, r"train.keep_checkpoints must be >= 1"),
        ({"controller.b_min": -3}, r"controller.b_min must be >= 0 or -1 .*, got -3"),
        ({"mode": "asp", "asp.time_budget": -1.0}, r"asp.time_budget must be >= 0 seconds"),
        ({"mode": "asp", "asp.staleness_bound": -5}, r"asp.staleness_bound must be >= 0 or -1"),
    ],
)
def test_check_config_rejects_out_of_range_values(changes, message):
    c = _paper(**changes)
    c.num_devices = c.num_workers
    with pytest.raises(ValueError, match=message) as info:
        check_config(c)
    assert "\n" not in str(info.value)


def test_every_config_file_rejects_a_variant_it_does_not_take():
    """configs/ablation_asp.py dropped its argument: `:seeds=1,hetro=hl8` ran all 18 cells."""
    import importlib.util
    import pathlib

    for path in sorted(pathlib.Path(ROOT, "configs").glob("*.py")):
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        with pytest.raises(ValueError, match="unknown variant key 'no_such_key'"):
            module.get_config("no_such_key=1")


def test_paper_lm_takes_a_given_step_count_with_runlocal():
    """`runlocal,steps=3` ran 8 steps: runlocal's own count replaced the one given."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "paper_lm", os.path.join(ROOT, "configs/paper_lm.py")
    )
    paper_lm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(paper_lm)
    assert paper_lm.get_config("runlocal,steps=3").train.num_steps == 3
    assert paper_lm.get_config("runlocal").train.num_steps == 8
    assert paper_lm.get_config("").train.num_steps == 300


def _paper_lm():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "paper_lm", os.path.join(ROOT, "configs/paper_lm.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_paper_lm_refuses_a_budget_for_bsp():
    """`budget=0.1` in BSP mode was ignored: the run went its 300 steps without a word."""
    paper_lm = _paper_lm()
    with pytest.raises(ValueError, match="budget=0.1 is for mode=asp"):
        paper_lm.get_config("runlocal,budget=0.1")
    assert paper_lm.get_config("runlocal,mode=asp,budget=0.1").asp.time_budget == 0.1
    from configs import ablation_lm  # its BSP cells dropped a budget= without a word

    with pytest.raises(ValueError, match="budget=3 is for mode=asp"):
        ablation_lm.get_config("mode=bsp,budget=3")
    with pytest.raises(ValueError, match="budget=8 is for mode=asp"):  # the default, given
        ablation_lm.get_config("mode=bsp,budget=8")


def test_a_dataset_key_the_data_set_does_not_read_is_warned():
    """`dataset.num_classes=100` on text (its vocabulary is its 256 bytes) ran silently; the
    shipped configs set no key their data set ignores (paper_bsp's runlocal set the synthetic
    set's input_shape, num_train and num_test for digits)."""
    from omnilearn_jax.config.unread import unread_dataset_keys

    config = _paper_lm().get_config("runlocal")
    assert unread_dataset_keys(config) == []
    config.dataset.num_classes = 100
    assert unread_dataset_keys(config) == [
        "dataset.num_classes is set but dataset.name='text' does not read it (it reads "
        "path, seq_len, num_train, num_test)"
    ]
    for make in (default.get_config, smoke.get_config, paper_bsp.get_config):
        for arg in ("", "runlocal") if make is paper_bsp.get_config else ("",):
            assert unread_dataset_keys(make(arg) if arg else make()) == [], (make, arg)
    from configs import quickstart

    assert unread_dataset_keys(quickstart.get_config()) == []


def test_an_optimizer_key_the_optimiser_or_schedule_does_not_read_is_warned():
    """`optimizer.warmup_steps=50` under the constant schedule trained at the full rate from
    step 1 without a word; the shipped configs set no key their optimiser ignores."""
    from omnilearn_jax.config.unread import unread_optimizer_keys

    config = default.get_config()
    assert unread_optimizer_keys(config) == []
    config.optimizer.warmup_steps = 50
    assert unread_optimizer_keys(config) == [
        "optimizer.warmup_steps=50 is set but optimizer.schedule='constant' has no warm-up; "
        "set optimizer.schedule=warmup_cosine to use it"
    ]
    config.optimizer.schedule = "warmup_cosine"
    assert unread_optimizer_keys(config) == []
    config.optimizer.name, config.optimizer.nesterov = "adamw", True
    assert unread_optimizer_keys(config) == [
        "optimizer.nesterov is set but optimizer.name='adamw' does not read it"
    ]
    config = smoke.get_config()
    config.optimizer.b2 = 0.99
    assert unread_optimizer_keys(config) == [
        "optimizer.b2 is set but optimizer.name='sgd' does not read it"
    ]
    for make in (smoke.get_config, paper_bsp.get_config, _paper_lm().get_config):
        assert unread_optimizer_keys(make()) == [], make
    from configs import quickstart

    assert unread_optimizer_keys(quickstart.get_config()) == []


def test_cost_keys_the_times_do_not_read_are_warned():
    """`cost.linear=True` beside a fixed cost and a cliff, `cliff_penalty` without a cliff, a
    memory factor without limits, and on the wall clock every cost key and a profile's speeds
    without `hetero.inject` (the workers then run at the machine's speed while metrics.jsonl
    records the profile's) ran without a word."""
    from omnilearn_jax.config.unread import unread_keys

    config = smoke.get_config()
    config.cost.linear, config.cost.fixed_cost, config.cost.cliff_batch = True, 1.0, 2
    config.cost.memory_factor = 3.0
    assert unread_keys(config) == {
        "cost.fixed_cost": "cost.fixed_cost is set but cost.linear=True does not read it",
        "cost.cliff_batch": "cost.cliff_batch is set but cost.linear=True does not read it",
        "cost.memory_factor": "cost.memory_factor is set but cost.memory_limits is empty, so "
        "it does nothing",
    }
    config = smoke.get_config()
    config.cost.cliff_penalty = 2.0
    assert list(unread_keys(config)) == ["cost.cliff_penalty"]
    config.cost.cliff_batch = 16  # now a cliff: read
    assert unread_keys(config) == {}
    config.clock, config.cost.noise = "wall", 0.5
    config.hetero.name, config.hetero.level = "hl", 8
    found = unread_keys(config)
    assert set(found) == {"cost.cliff_batch", "cost.cliff_penalty", "cost.noise", "hetero.name"}
    assert found["cost.noise"] == (
        "cost.noise is set but the wall clock measures each step's times (only the oracle's "
        "time table reads the cost model)"
    )
    assert found["hetero.name"].startswith(
        "hetero.name='hl' on the wall clock with hetero.inject=0"
    )
    config.hetero.inject = 0.003  # emulated: the speeds are applied
    assert "hetero.name" not in unread_keys(config)
    config.controller.name = "oracle"  # reads the cost model's table
    assert unread_keys(config) == {}
    config.hetero.inject_order = "after"  # read: a wait to order, in a BSP step
    assert unread_keys(config) == {}
    config.mode = "asp"
    assert unread_keys(config) == {
        "hetero.inject_order": "hetero.inject_order='after' is set but async workers wait "
        "before they compute, in their own programs"
    }
    config.mode, config.hetero.inject = "bsp", 0.0
    assert list(unread_keys(config)) == ["hetero.inject_order"]


def test_a_calibrated_cost_beside_a_fixed_cost_is_said():
    """Calibrated from the whole measured step, the per-sample cost sat beside the default
    fixed cost of 0.05 s, ~98 % of a smoke job's modelled time, without a word."""
    from omnilearn_jax.config.unread import calibration_notes

    config = smoke.get_config()
    assert calibration_notes(config) == []  # a cost given: nothing calibrated
    config.cost.per_sample_cost = 0.0
    assert calibration_notes(config) == [
        "cost.per_sample_cost=0 calibrates the per-sample cost from the whole measured step, "
        "and cost.fixed_cost=0.05 s (at speed 1) is added on top of it; set cost.fixed_cost=0 "
        "for a model of the measurement alone"
    ]
    config.cost.fixed_cost = 0.0
    assert calibration_notes(config) == []


def test_asp_keys_of_a_synchronous_run_are_warned():
    """`asp.time_budget=1` without `mode=asp` ran a BSP run, its budget dropped without a word
    (paper_lm set asp keys for its BSP runs too)."""
    from omnilearn_jax.config.unread import unread_keys

    config = smoke.get_config()
    config.asp.time_budget = 1.0
    assert unread_keys(config) == {
        "asp.time_budget": "asp.time_budget is set but mode='bsp' does not read it (set "
        "mode=asp for asynchronous training)"
    }
    config.mode = "asp"
    assert unread_keys(config) == {}
    assert unread_keys(_paper_lm().get_config("runlocal")) == {}
    # its async variant took paper_asp's momentum 0, which adamw does not read
    assert unread_keys(_paper_lm().get_config("runlocal,mode=asp")) == {}
    assert _paper_lm().get_config("runlocal,mode=asp").asp.weighting == "lr"


def test_a_capacity_is_checked_against_the_devices_a_run_will_have():
    """check_config (the ablation's pre-check) assumed one device a worker: capacity 20 for
    8 workers passed, and the trainer on 4 devices refused the cell at run time. Without a
    device count the check waits for the trainer's; with one it is made at once."""
    config = _paper(num_workers=8, capacity=20)
    check_config(config)  # B = 128 over devices not known yet
    config.num_devices = 4
    with pytest.raises(ValueError, match="capacity=20 rows a device x 4 devices cannot hold"):
        check_config(config)
