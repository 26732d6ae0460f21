"""Async mode: workers without rows, each update as a share of one BSP step, and the
virtual clock's batched execution against the event-by-event one."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from omnilearn_jax.asp.loop import AsyncLoop
from omnilearn_jax.config import checks
from omnilearn_jax.engine import optim
from omnilearn_jax.engine.compiles import CompileCounter
from omnilearn_jax.run.job import train_and_evaluate
from omnilearn_jax.run.runstore import read_metrics
from omnilearn_jax.run.train import Trainer
from tests.test_async import _async4, _config, _max_diff, _params
from tests.test_train import FEW_BUCKETS


def _run(path, **kw):
    summary = train_and_evaluate(_config(train__eval_every=100, **kw), str(path))
    records = [r for r in read_metrics(path) if "staleness" in r]
    return summary, records, _params(path)


def test_zero_row_workers_push_nothing(tmp_path):
    """Workers 2 and 3 hold no rows: only workers 0 (44 rows, 0.44 s) and 1 (20 rows, 0.2 s)
    push, on the two-worker hand schedule; no empty updates, no extra versions."""
    summary, records, _ = _run(
        tmp_path,
        num_workers=4,
        num_devices=4,
        global_batch_size=64,
        bucket_ratio=FEW_BUCKETS,
        mode="asp",
        train__num_steps=12,
        controller__name="static",
        controller__b_min=0,
        controller__sizes=(44, 20, 0, 0),
    )
    assert summary["updates_per_worker"] == [4, 8, 0, 0]
    # Workers that applied nothing have no staleness (0.0 had read as perfectly fresh).
    assert summary["staleness_mean_per_worker"] == [2.0, 3 / 8, None, None]
    assert [(r["worker"], r["staleness"]) for r in records] == [
        (1, 0), (1, 0), (0, 2), (1, 1), (1, 0), (0, 2),
        (1, 1), (1, 0), (0, 2), (1, 1), (1, 0), (0, 2),
    ]  # fmt: skip
    times = [0.2, 0.4, 0.44, 0.6, 0.8, 0.88, 1.0, 1.2, 1.32, 1.4, 1.6, 1.76]
    assert [r["time"] for r in records] == pytest.approx(times, abs=1e-9)


def test_a_lost_worker_pushes_nothing_then_rejoins(tmp_path):
    """Worker 3 is lost (speed 0) in BSP-equivalent steps [2, 5): once its update in flight
    lands it is given no rows and pushes nothing (no empty updates, no extra versions); it
    rejoins when its speed comes back."""
    config = _config(
        num_workers=4, num_devices=4, mode="asp", train__num_steps=32, train__eval_every=100
    )
    config.bucket_ratio = FEW_BUCKETS
    config.controller.name, config.controller.b_min = "static", 0
    config.hetero.preempt_worker, config.hetero.preempt_intervals = 3, (2, 5)
    config.hetero.preempt_trickle = 0.0
    summary = train_and_evaluate(config, str(tmp_path))
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


def test_rounds_with_weight_decay_equal_bsp_steps(tmp_path):
    """Staleness bound 0, an uneven split, sgd with weight decay 0.05: the W updates of a
    round are exactly one BSP step (the decay is a share of a step, taken at the pulled
    parameters), under `weighting=share` and `weighting=lr` alike."""
    common = dict(
        num_workers=4,
        num_devices=4,
        global_batch_size=64,
        bucket_ratio=FEW_BUCKETS,
        controller__name="static",
        controller__sizes=(8, 8, 16, 32),
        optimizer__momentum=0.0,
        optimizer__weight_decay=0.05,
        optimizer__learning_rate=0.2,
    )
    *_, bsp = _run(tmp_path / "bsp", train__num_steps=4, **common)
    for weighting in ("share", "lr"):
        kw = dict(asp__staleness_bound=0, asp__weighting=weighting, **common)
        *_, asp = _run(tmp_path / weighting, mode="asp", train__num_steps=16, **kw)
        assert _max_diff(bsp, asp) <= 1e-5, weighting


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
        checks.check_for_devices(config, 8)
    config.asp.weighting = "mean"
    checks.check_for_devices(config, 8)


def _unequal(**kw):
    """Four workers at speeds 1, 1, 2, 4 under the proportional controller (so the split
    moves off the uniform one), staleness bound 1, sgd with momentum and weight decay."""
    config = _async4(
        train__num_steps=16,
        train__eval_every=100,
        asp__staleness_bound=1,
        optimizer__momentum=0.9,
        optimizer__weight_decay=0.05,
        controller__name="proportional",
        **kw,
    )
    config.hetero.name = "cores"
    config.hetero.cores = (1.0, 1.0, 2.0, 4.0)
    return config


def test_batched_execution_equals_event_by_event(tmp_path):
    """The virtual clock's batches (a wave's gradients in one call, the updates between
    waves in one loop) give the parameters and records of the event-by-event execution,
    through waves on the shared bucket (one program over the mesh) and per device."""
    ran = {"mesh": 0, "per_device": 0}
    runs = {}
    for batched in (True, False):
        loop = AsyncLoop(Trainer(_unequal(), str(tmp_path / str(batched))), batched=batched)
        assert loop.exec.engine is loop.t.engine  # one engine serves both executors
        if batched:
            mesh, per_device = loop.exec.wave_program, loop.exec._wave_per_device

            def count(name, fn):
                return lambda *a: (ran.__setitem__(name, ran[name] + 1), fn(*a))[1]

            loop.exec.wave_program = count("mesh", mesh)
            loop.exec._wave_per_device = count("per_device", per_device)
        loop.run()
        records = [r for r in read_metrics(tmp_path / str(batched)) if "staleness" in r]
        runs[batched] = records, _params(tmp_path / str(batched))
    (batched, params), (eager, reference) = runs[True], runs[False]
    assert ran["mesh"] > 0 and ran["per_device"] > 0, ran
    assert _max_diff(params, reference) <= 1e-6
    keys = ("step", "time", "worker", "staleness", "worker_batch", "batch_sizes")
    assert [[r[k] for k in keys] for r in batched] == [[r[k] for k in keys] for r in eager]
    assert len({r["staleness"] for r in batched}) > 2  # stale pushes of several ages
    assert len({tuple(r["batch_sizes"]) for r in batched}) > 1  # the split moved
    assert np.allclose([r["loss"] for r in batched], [r["loss"] for r in eager], atol=1e-6)


def test_execution_compiles_nothing_when_the_split_changes(tmp_path):
    """After warm-up, splits that take the mesh path, the per-device path, and a worker with
    no rows run without a compile, batched and event by event (the wall clock's path, where
    a compile would be timed as a worker's compute)."""
    splits = [(16, 16, 16, 16), (8, 8, 16, 32), (0, 24, 8, 32), (16, 16, 16, 16)]
    for batched in (True, False):
        trainer = Trainer(_unequal(controller__b_min=0), str(tmp_path / str(batched)))
        loop = AsyncLoop(trainer, batched=batched)
        loop.warm_up(np.full(4, 16))
        with CompileCounter() as compiles:
            for sizes in splits:
                for _ in range(6):
                    loop.start_ready(np.array(sizes))
                    loop.apply_next()
            state = loop.server_state()
        assert compiles.count == 0, batched
        assert int(state.step) == 6 * len(splits)


@pytest.mark.parametrize("decide_every", [1, 4])
def test_an_epochs_end_reaches_one_async_decision_when_its_updates_are_done(
    tmp_path, monkeypatch, decide_every
):
    """controller.every=0 decides at epoch ends. Async said an epoch ended one round early
    (is_epoch_end of the rounds done) and, deciding more often than every W updates, at every
    decision of that round: four decisions on one epoch end at asp.controller_every=1."""
    seen = []
    observe = Trainer.observe

    def spy(self, step_index, sizes, times, speeds, epoch_end=None):
        obs = observe(self, step_index, sizes, times, speeds, epoch_end)
        seen.append(bool(obs.epoch_end))
        return obs

    monkeypatch.setattr(Trainer, "observe", spy)
    config = _async4(
        global_batch_size=512,  # 1438 digits: 2 steps an epoch, 8 updates of 4 workers
        train__num_steps=24,
        train__eval_every=100,
        controller__name="proportional",
        controller__every=0,
        asp__controller_every=decide_every,
        bucket_ratio=FEW_BUCKETS,
    )
    train_and_evaluate(config, str(tmp_path))
    # seen[0] is warm-up's made-up observation; decision i comes after i * decide_every updates
    ends = [i * decide_every for i, end in enumerate(seen) if end and i]
    assert ends == [8, 16, 24]


def test_a_schedule_over_the_update_cap_under_a_time_budget_is_warned():
    from omnilearn_jax.run.train import budget_schedule

    config = _async4(asp__time_budget=0.5, optimizer__schedule="cosine")
    (sentence,) = budget_schedule(config)
    assert sentence.startswith("optimizer.schedule=cosine runs over train.num_steps=")
    config.optimizer.schedule = "constant"
    assert budget_schedule(config) == []
    config.optimizer.schedule, config.asp.time_budget = "cosine", 0.0
    assert budget_schedule(config) == []  # the cap ends the run: the schedule fits it


def test_a_budgeted_runs_progress_counts_to_the_budget_not_the_cap():
    from omnilearn_jax.asp.loop import updates_left

    assert updates_left(55, 0.5, 3.0, 1760) == 275.0  # 55 updates a 0.5 s: 2.5 s left
    assert updates_left(55, 0.5, 0.0, 1760) == 1705  # no budget: to the cap
    assert updates_left(1700, 0.5, 3.0, 1760) == 60  # the cap comes first
    assert updates_left(300, 3.1, 3.0, 1760) == 0.0  # past the budget


def test_update_weights_of_each_weighting():
    """(gradient coefficient, decay weight, step scale) of an update of b_k of B samples over
    W workers; no test had read them (linear scaling without its x W made every update of a
    `weighting=mean, lr_scaling=linear` run 4x too small unseen)."""
    from omnilearn_jax.asp.loop import update_weights

    assert update_weights("mean", "linear", 48, 128, 4) == pytest.approx((1 / 48, 1.0, 1.5))
    assert update_weights("mean", "none", 48, 128, 4) == pytest.approx((1 / 48, 1.0, 1.0))
    assert update_weights("lr", "none", 32, 128, 4) == pytest.approx((1 / 32, 1.0, 0.25))
    assert update_weights("share", "none", 32, 128, 4) == pytest.approx((1 / 128, 0.25, 1.0))


def test_staleness_is_averaged_over_updates_not_workers():
    """A fast worker's 10 fresh updates and a slow one's update 6 stale: 6/11, not 3 (the
    mean of the workers' means passed every test)."""
    from types import SimpleNamespace

    from omnilearn_jax.asp.staleness import StalenessCounts

    counts = StalenessCounts(2)
    for k, s in [(0, 0)] * 10 + [(1, 6)]:
        counts.add(k, s)
    loop = SimpleNamespace(staleness=counts, applied=np.array([10, 1]))
    summary = AsyncLoop.staleness_summary(loop)
    assert summary["staleness_mean"] == pytest.approx(6 / 11)
    assert (summary["staleness_max"], summary["staleness_mean_per_worker"]) == (6, [0.0, 6.0])
    assert summary["staleness_histogram"] == [10, 0, 0, 0, 0, 0, 1]


def test_ties_go_to_the_lower_worker_index_whatever_the_float_sums(tmp_path):
    """Speeds 6 and 1, 24 rows each: worker 0's six 0.04 s iterations and worker 1's one
    0.24 s iteration end together. The sum came to 0.24000000000000002, so worker 1 was
    applied first (staleness 5), then worker 0 (staleness 1)."""
    two = {"num_workers": 2, "num_devices": 2, "global_batch_size": 48, "mode": "asp"}
    static = {"controller__name": "static", "controller__sizes": (24, 24)}
    cores = {"hetero__name": "cores", "hetero__cores": (6.0, 1.0)}
    _, records, _ = _run(
        tmp_path, bucket_ratio=FEW_BUCKETS, train__num_steps=8, **two, **static, **cores
    )
    assert [(r["worker"], r["staleness"]) for r in records[5:8]] == [(0, 0), (1, 6), (0, 1)]
    assert [r["time"] for r in records[5:7]] == [0.24, 0.24]


def test_each_async_computation_draws_its_own_timing_noise(tmp_path):
    """Worker 1 computes 6 times a round of 2 updates at speeds 6 and 1; the noise was keyed
    by round, so its computations in one round were charged one time (24 distinct times in
    its 41 updates)."""
    two = {"num_workers": 2, "num_devices": 2, "global_batch_size": 48, "mode": "asp"}
    static = {"controller__name": "static", "controller__sizes": (24, 24)}
    cores = {"hetero__name": "cores", "hetero__cores": (1.0, 6.0), "cost__noise": 0.2}
    _, records, _ = _run(
        tmp_path, bucket_ratio=FEW_BUCKETS, train__num_steps=48, **two, **static, **cores
    )
    fast = [r["worker_times"][1] for r in records if r["worker"] == 1]
    assert len(fast) > 30 and len(set(fast)) == len(fast)


def test_a_worker_rejoins_at_the_slowest_active_workers_clock(tmp_path):
    """Speeds 8, 4, 1, staleness bound 2: worker 1 holds no rows for three splits, then
    rejoins while worker 2, which has just lost its rows, still computes its last update.
    The rejoin's floor counted that busy worker (no update done), so worker 1 came back at 1,
    behind worker 0 (3), the one active worker, and once worker 2 was parked it held worker
    0 at the bound as the slowest worker counted."""
    config = _config(
        num_workers=3,
        num_devices=3,
        global_batch_size=48,
        mode="asp",
        bucket_ratio=FEW_BUCKETS,
        train__num_steps=100,
        train__eval_every=1000,
        asp__staleness_bound=2,
        controller__name="static",
        controller__b_min=0,
    )
    config.hetero.name, config.hetero.cores = "cores", (8.0, 4.0, 1.0)
    loop = AsyncLoop(Trainer(config, str(tmp_path)), batched=False)
    loop.warm_up(np.full(3, 16))
    rejoined = None
    for sizes in [(16, 16, 16)] + [(24, 0, 24)] * 3 + [(24, 24, 0)] * 2:
        parked, before = bool(loop.parked[1]), loop.iterations.copy()
        loop.start_ready(np.array(sizes))
        if parked and sizes[1]:
            rejoined = (int(before[1]), int(loop.iterations[1]), int(before[0]))
        loop.apply_next()
    # 1 update done, set forward to worker 0's 3 (it stayed at 1: worker 2, busy, had 0)
    assert rejoined == (1, 3, 3)
