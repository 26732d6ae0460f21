"""Async mode: workers without rows, and each update as a share of one BSP step."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from omnilearn_jax import optim, validate
from omnilearn_jax.runstore import read_metrics
from omnilearn_jax.train import Trainer
from tests.test_async import _config, _max_diff, _params


def _run(path, **kw):
    summary = Trainer(_config(train__eval_every=100, **kw), str(path)).run()
    records = [r for r in read_metrics(path) if "staleness" in r]
    return summary, records, _params(path)


def test_zero_row_workers_push_nothing_and_match_a_run_without_them(tmp_path):
    """Workers 2 and 3 hold no rows: the run is exactly the two-worker run."""
    common = dict(global_batch_size=64, mode="asp", train__num_steps=12, controller__b_min=0)
    common.update(controller__name="static")
    four, rec4, p4 = _run(
        tmp_path / "four", num_workers=4, num_devices=4, controller__sizes=(40, 24, 0, 0), **common
    )
    two, rec2, p2 = _run(
        tmp_path / "two", num_workers=2, num_devices=2, controller__sizes=(40, 24), **common
    )
    assert four["updates_per_worker"] == [4, 8, 0, 0]
    assert two["updates_per_worker"] == [4, 8]
    assert [(r["worker"], r["staleness"], r["time"]) for r in rec4] == [
        (r["worker"], r["staleness"], r["time"]) for r in rec2
    ]
    assert _max_diff(p4, p2) <= 1e-6


def test_a_lost_worker_pushes_nothing_then_rejoins(tmp_path):
    """Worker 3 is lost (speed 0) in BSP-equivalent steps [2, 5): once its update in flight
    lands it is given no rows and pushes nothing (no empty updates, no extra versions); it
    rejoins when its speed comes back."""
    config = _config(
        num_workers=4, num_devices=4, mode="asp", train__num_steps=32, train__eval_every=100
    )
    config.controller.name, config.controller.b_min = "static", 0
    config.hetero.preempt_worker, config.hetero.preempt_intervals = 3, (2, 5)
    config.hetero.preempt_trickle = 0.0
    summary = Trainer(config, str(tmp_path)).run()
    records = [r for r in read_metrics(tmp_path) if "staleness" in r]
    pushes = [r["step"] for r in records if r["worker"] == 3]
    # Rounds of four updates. At update 8 (round 2) the controller sees worker 3 lost and
    # gives it no rows: update 8 was its last in flight; from round 5 (update 20) it has
    # rows again and pushes from update 22 on.
    assert pushes == [4, 8, 22, 26, 30], pushes
    assert summary["updates_per_worker"] == [9, 9, 9, 5]
    # Meanwhile three workers take turns: each update two versions stale, not three.
    assert [r["staleness"] for r in records if 14 < r["step"] <= 20] == [2] * 6
    assert [r["worker_batch"] for r in records if r["step"] in (21, 22)] == [16, 16]


@pytest.mark.parametrize("weighting", ["share", "lr"])
def test_rounds_with_weight_decay_equal_bsp_steps(tmp_path, weighting):
    """Staleness bound 0, an uneven split, sgd with weight decay 0.05: the W updates of a
    round are exactly one BSP step (the decay is a share of a step, taken at the pulled
    parameters)."""
    common = dict(
        num_workers=4,
        num_devices=4,
        global_batch_size=64,
        controller__name="static",
        controller__sizes=(8, 8, 16, 32),
        optimizer__momentum=0.0,
        optimizer__weight_decay=0.05,
        optimizer__learning_rate=0.2,
    )
    *_, bsp = _run(tmp_path / "bsp", train__num_steps=5, **common)
    kw = dict(asp__staleness_bound=0, asp__weighting=weighting, **common)
    *_, asp = _run(tmp_path / "asp", mode="asp", train__num_steps=20, **kw)
    assert _max_diff(bsp, asp) <= 1e-5
    *_, plain = _run(
        tmp_path / "plain", train__num_steps=5, **{**common, "optimizer__weight_decay": 0.0}
    )
    assert _max_diff(bsp, plain) > 1e-3  # the decay is there to be matched


def _adamw(**kw):
    section = {"name": "adamw", "learning_rate": 0.01, "weight_decay": 0.0, **kw}
    return optim.create(section, 10, weighted=True)


def test_share_is_invisible_to_adam_and_lr_weighting_is_not():
    params = {"w": jnp.array([1.0, -2.0, 3.0])}
    grad = {"w": jnp.array([0.3, -0.1, 0.2])}
    tx = _adamw()
    state = tx.init(params)
    full, _ = tx.update(grad, state, params)
    quarter_grad, _ = tx.update(jax.tree.map(lambda g: 0.25 * g, grad), state, params)
    quarter_step, _ = tx.update(grad, state, params, step_scale=0.25)
    # A gradient scaled by a share moves Adam's first step by the same amount ...
    assert np.allclose(quarter_grad["w"], full["w"], rtol=1e-5)
    # ... a step scaled by the share (weighting=lr) moves it by the share.
    assert np.allclose(quarter_step["w"], 0.25 * full["w"], rtol=1e-6)
    decayed = _adamw(weight_decay=0.1)
    d_full, _ = decayed.update(grad, decayed.init(params), params)
    d_quarter, _ = decayed.update(grad, decayed.init(params), params, weight=0.25)
    # Decoupled decay: -lr * 0.1 * p in full, a quarter of it for a quarter share.
    decay = np.asarray(d_full["w"] - full["w"])
    assert np.allclose(decay, -0.01 * 0.1 * np.asarray(params["w"]), rtol=1e-5)
    assert np.allclose(d_quarter["w"] - full["w"], 0.25 * decay, rtol=1e-5)


def test_linear_lr_scaling_with_share_weighting_is_rejected():
    config = _config(num_workers=4, num_devices=4, mode="asp")
    config.asp.lr_scaling = "linear"
    with pytest.raises(ValueError, match="twice"):
        validate.check_config(config, 8)
    config.asp.weighting = "mean"
    validate.check_config(config, 8)
