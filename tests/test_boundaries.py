"""Input checks at their exact limits, and the values the run store writes at the edges.

Each case is a mutant that no test had caught (an audit planted 52 in config/, data/,
tracking/ and run/ on 2026-12-05; these survived): a limit moved by one, a case-sensitive
comparison, a check dropped.
"""

import json
import os

import numpy as np
import pytest

from omnilearn_jax.config import errors
from omnilearn_jax.config.args import literal, parse_arg
from omnilearn_jax.config.checks import check_config, check_static_sizes
from omnilearn_jax.config.unread import unread_dataset_keys
from omnilearn_jax.data import datasets
from omnilearn_jax.run.loop import format_duration
from omnilearn_jax.run.runstore import plain
from tests.test_configs import _paper as paper


def _paper(**changes):
    c = paper(**changes)
    c.num_devices = c.num_workers
    return c


def test_a_variant_key_given_twice_is_refused():
    """`quickstart.py:controller=pi,controller=static` ran static without a word."""
    with pytest.raises(ValueError, match="variant key 'a' given twice"):
        parse_arg("a=1,a=2", a=0)
    assert parse_arg("fast", fast=True).fast is True  # a bare bool key sets True


@pytest.mark.parametrize("text,value", [("True", True), ("FALSE", False), ("true", True)])
def test_set_values_read_booleans_in_any_case(text, value):
    """`--set train.save_params=True` put save_params=false in every cell."""
    assert literal(text) is value


@pytest.mark.parametrize("length,refused", [(128, False), (129, True)])
def test_a_wandb_project_of_129_characters_is_refused_before_the_run(length, refused):
    """W&B refuses it only at init; the run then trained untracked after one line."""
    c = _paper(**{"wandb.mode": "offline", "wandb.project": "p" * length})
    if refused:
        with pytest.raises(ValueError, match="is over 128 characters"):
            check_config(c)
    else:
        assert check_config(c) is None


def test_a_static_size_at_its_bound_is_accepted_and_one_above_refused():
    c = _paper(**{"controller.name": "static", "num_workers": 4})
    c.controller.sizes = (96, 16, 16, 0)
    assert check_static_sizes(c, lo=[0] * 4, hi=[96] * 4) is None
    c.controller.sizes = (97, 15, 16, 0)
    with pytest.raises(ValueError, match=r"controller.sizes\[0\]=97 is outside the bounds"):
        check_static_sizes(c, lo=[0] * 4, hi=[96] * 4)


@pytest.mark.parametrize(
    "changes,message",
    [
        (
            {"train.outlier_factor": 1.0},
            "train.outlier_factor must be a finite number > 1, got 1.0",
        ),
        ({"memory_rows": -1}, "memory_rows must be >= 0"),
        # one row short of B: the ablation's vetting must say so, not the trainer later
        (
            {"global_batch_size": 125, "capacity": 31, "num_workers": 4},
            "capacity=31 rows a device x 4 devices cannot hold global_batch_size=125",
        ),
    ],
    ids=str,
)
def test_check_config_refuses_values_just_past_their_limit(changes, message):
    with pytest.raises(ValueError, match=message):
        check_config(_paper(**changes))


def test_a_capacity_exactly_holding_b_passes():
    assert check_config(_paper(global_batch_size=124, capacity=31, num_workers=4)) is None


def test_sizes_set_for_a_data_set_that_ignores_them_are_not_warned_of():
    """Configs derive step counts from num_train whatever the data set."""
    c = _paper(**{"dataset.name": "digits", "dataset.num_train": 2048, "dataset.num_test": 64})
    assert unread_dataset_keys(c) == []


@pytest.mark.parametrize("value,verbose", [("0", False), ("", False), ("1", True)])
def test_omnilearn_verbose_0_means_off(monkeypatch, value, verbose):
    monkeypatch.setenv(errors.VERBOSE_ENV, value)
    assert errors.verbose_requested([]) is verbose


def test_synthetic_data_needs_two_classes():
    """One class trained to accuracy 1.0000 and loss 0.0000."""
    with pytest.raises(ValueError, match="num_classes >= 2"):
        datasets.load({"name": "synthetic", "num_classes": 1, "input_shape": (4,)})


def test_npz_labels_below_zero_are_refused(tmp_path):
    y = np.arange(20) % 3
    y[::7] = -1
    path = tmp_path / "d.npz"
    np.savez(path, x_train=np.ones((20, 4)), y_train=y, x_test=np.ones((5, 4)), y_test=y[:5])
    with pytest.raises(ValueError, match=r"y_train must hold integer labels in \[0, 2\^31\)"):
        datasets.load({"name": "npz", "path": str(path)})


def test_a_global_batch_one_over_the_examples_is_refused():
    with pytest.raises(ValueError, match="global_batch_size 128 exceeds the 127 training"):
        datasets.GlobalBatchSampler(127, 128, 0)
    assert datasets.GlobalBatchSampler(128, 128, 0).steps_per_epoch == 1


def test_long_wandb_tags_are_cut_to_64_characters(tmp_path, monkeypatch):
    """W&B refused an 80-character tag at init, and the run went untracked."""
    from omnilearn_jax import tracking
    from omnilearn_jax.tracking import trackers
    from tests.test_tracking import _config

    seen = {}

    class Run:
        id, dir, url = "x", str(tmp_path), ""

        def finish(self, exit_code=0):
            pass

    def init(mode, kwargs, init_timeout):
        seen.update(kwargs)
        return Run()

    monkeypatch.setattr(trackers, "_init_run", init)
    c = _config("offline")
    c.wandb.tags = ("t" * 80, "short")
    tracker = tracking.make_tracker(c, str(tmp_path))
    assert not isinstance(tracker, tracking.NullTracker)
    assert [len(t) for t in seen["tags"]] == [64, 5]


def test_offline_runs_are_ordered_by_their_start_time_not_by_when_they_were_touched(tmp_path):
    from omnilearn_jax.tracking.offline import find_offline_runs

    old = tmp_path / "wandb" / "offline-run-20260101_120000-aaaa"
    new = tmp_path / "wandb" / "offline-run-20260102_120000-bbbb"
    new.mkdir(parents=True)
    old.mkdir()
    os.utime(new, (1e9, 1e9))  # the later run's folder is the older one on disk
    assert find_offline_runs(str(tmp_path)) == [str(old), str(new)]


def test_non_finite_values_are_written_as_null():
    """An overflowing loss wrote `Infinity`, which strict JSON parsers refuse."""
    line = json.dumps(plain({"loss": float("inf"), "x": [float("-inf"), float("nan"), 1.5]}))
    assert json.loads(line, parse_constant=lambda c: pytest.fail(c)) == {
        "loss": None,
        "x": [None, None, 1.5],
    }


def test_durations_pad_their_seconds():
    assert [format_duration(s) for s in (65, 5, 600.4)] == ["1m05s", "0m05s", "10m00s"]
