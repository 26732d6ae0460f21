"""The whole loop: command line, run store, uneven splits, bad input."""

import json
import os
import subprocess
import sys

import pytest

from omnilearn_jax.run import launch
from omnilearn_jax.run.job import train_and_evaluate
from omnilearn_jax.run.runstore import read_metrics
from omnilearn_jax.run.train import Trainer
from tests import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_main(workdir, *overrides, config="configs/smoke.py", fresh=False):
    """Runs the real command line (it sets up its own 8 CPU devices) in a child forked from
    one process that imported it (tests/cli.py); `fresh`: in a new interpreter."""
    env = launch.child_env()  # main.py makes its devices; other XLA flags stay
    argv = [f"--config={config}", f"--workdir={workdir}", *overrides]
    proc = cli.main(argv, env, fresh=fresh)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


# Buckets of 8 and 64 rows (configs/smoke.py has 8, 16, 32, 64): half the programs a run
# compiles and loads, for tests whose assertions do not depend on the buckets (the virtual
# clock's cost formula charges rows, not buckets, and padding is exact).
FEW_BUCKETS = 8.0


def smoke_config(few_buckets: bool = False):
    sys.path.insert(0, ROOT)
    from configs import smoke

    config = smoke.get_config()
    if few_buckets:
        config.bucket_ratio = FEW_BUCKETS
    return config


def test_uniform_and_skewed_split_give_the_same_loss_curve(tmp_path):
    uniform = run_main(tmp_path / "uniform", fresh=True)  # the README's command, as typed
    skewed_sizes = "(0,1,2,3,4,5,6,43)"
    run_main(
        tmp_path / "skewed",
        "--config.controller.name=static",
        f"--config.controller.sizes={skewed_sizes}",
    )
    a, b = read_metrics(tmp_path / "uniform"), read_metrics(tmp_path / "skewed")
    train_a = [r for r in a if "loss" in r]
    train_b = [r for r in b if "loss" in r]
    assert [r["step"] for r in train_a] == list(range(1, 21))
    assert all(r["batch_sizes"] == [0, 1, 2, 3, 4, 5, 6, 43] for r in train_b)
    assert all(r["batch_sizes"] == [8] * 8 for r in train_a)
    diffs = [abs(x["loss"] - y["loss"]) for x, y in zip(train_a, train_b, strict=True)]
    assert max(diffs) <= 1e-5
    evals_a = [r["eval_accuracy"] for r in a if "eval_accuracy" in r]
    evals_b = [r["eval_accuracy"] for r in b if "eval_accuracy" in r]
    assert len(evals_a) == 2 and evals_a == pytest.approx(evals_b, abs=1e-6)
    # The run store of design.md, and the closing line says where it is.
    summary = json.loads((tmp_path / "uniform" / "summary.json").read_text())
    assert summary["steps"] == 20 and summary["final_eval_accuracy"] == evals_a[-1]
    config = json.loads((tmp_path / "uniform" / "config.json").read_text())
    assert config["resolved"]["num_devices"] == 8 and config["global_batch_size"] == 64
    assert str(tmp_path / "uniform") in uniform.stdout and "ETA" in uniform.stdout


def test_many_workers_per_device_and_pmap_match_shard_map(tmp_path):
    """32 workers on 8 devices, pmap backend, skewed static split: same curve as the default."""
    config = smoke_config()
    config.train.num_steps = 6
    config.train.eval_every = 6
    ref = train_and_evaluate(config, str(tmp_path / "ref"))
    config.num_workers = 32
    config.backend = "pmap"
    config.controller.capacities = tuple(float(k % 5 + 1) for k in range(32))
    other = train_and_evaluate(config, str(tmp_path / "other"))
    a, b = read_metrics(tmp_path / "ref"), read_metrics(tmp_path / "other")
    sizes = b[0]["batch_sizes"]
    assert len(sizes) == 32 and sum(sizes) == 64 and len(set(sizes)) > 1
    losses = [(x["loss"], y["loss"]) for x, y in zip(a, b, strict=True) if "loss" in x]
    assert max(abs(x - y) for x, y in losses) <= 1e-5
    assert ref["final_eval_accuracy"] == pytest.approx(other["final_eval_accuracy"], abs=1e-6)


def test_a_user_controller_runs_through_the_command_line_by_config_override(tmp_path):
    """experiments/examples/damped.py is registered and selected with two overrides only, and
    its own argument `gain` is set from the command line like any built-in key."""
    run_main(
        tmp_path,
        "--config.controller.plugin=experiments.examples.damped",
        "--config.controller.name=damped",
        "--config.controller.gain=1.0",
        "--config.hetero.name=cores",
        "--config.hetero.cores=(1,1,1,1,1,1,1,4)",
        "--config.cost.linear=True",
    )
    records = [r for r in read_metrics(tmp_path) if "loss" in r]
    assert records[0]["batch_sizes"] == [8] * 8
    # gain 1 closes the whole gap after one observation: 64 * 4/11 = 23.3 for the fast worker
    # (the default gain 0.5 would stop half-way, near 16).
    assert 22 <= records[1]["batch_sizes"][7] <= 24, records[1]
    final = records[-1]["batch_sizes"]
    assert sum(final) == 64 and final[7] >= 3 * max(final[:7])  # 4x faster: ~4x the samples
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["controller"]["name"] == "damped"
    assert config["controller"]["gain"] == 1.0


def test_an_unimportable_controller_plugin_is_named_before_anything_runs(tmp_path):
    argv = ["--config=configs/smoke.py", f"--workdir={tmp_path}"]
    proc = cli.main([*argv, "--config.controller.plugin=experiments.no_such_policy"], os.environ)
    assert proc.returncode != 0
    assert "controller.plugin=experiments.no_such_policy: cannot import it" in (proc.stderr)
    assert not (tmp_path / "metrics.jsonl").exists()


def test_per_step_caches_follow_the_split_and_the_speeds(tmp_path):
    """The blocks, the checked split and the oracle's time table are kept from the last
    step; a new split or new speeds must rebuild them, never reuse a stale one."""
    import numpy as np

    from omnilearn_jax.engine import buckets

    config = smoke_config()
    t = Trainer(config, str(tmp_path))
    uniform, skewed = np.full(8, 8, np.int32), np.array([0, 1, 2, 3, 4, 5, 6, 43], np.int32)
    for step, sizes in enumerate([uniform, skewed, skewed, uniform]):
        batch = t.batch(step, sizes)
        want = buckets.pack(sizes, t.layout)
        assert [b.rows for b in batch] == [b.rows for b in want]
        for got, block in zip(batch, want, strict=True):
            if block.rows:
                np.testing.assert_array_equal(np.asarray(got.mask)[0], block.mask)
        rows = t.sampler.indices(step)
        x = np.concatenate(
            [np.asarray(b.x)[0][w.mask] for b, w in zip(batch, want, strict=True) if w.rows]
        )
        np.testing.assert_array_equal(x, t.dataset.x_train[rows])  # global-batch order
        assert t.checked(sizes).tolist() == sizes.tolist()
    with pytest.raises(ValueError, match="sum to 63"):
        t.checked(np.array([8] * 7 + [7]))  # a bad split is still caught after good ones
    slow, fast = np.ones(8), np.full(8, 2.0)
    a, b, c = t.time_table(slow), t.time_table(fast), t.time_table(slow)
    assert a is not b
    np.testing.assert_allclose(np.asarray(b), t.timer.time_table(fast), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(c), t.timer.time_table(slow), rtol=1e-6)
    assert float(np.asarray(a)[0, 8]) == pytest.approx(2 * float(np.asarray(b)[0, 8]), rel=1e-6)


def test_a_plugin_that_runs_jax_when_imported_is_a_clear_error(tmp_path):
    (tmp_path / "eager_policy_probe.py").write_text(
        "import jax.numpy as jnp\n\nWEIGHTS = jnp.ones(8)  # a JAX operation at import\n"
    )
    cmd = [sys.executable, "-m", "omnilearn_jax.main", "--config=configs/smoke.py"]
    cmd += [f"--workdir={tmp_path / 'run'}", "--config.controller.plugin=eager_policy_probe"]
    env = launch.child_env({**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "eager_policy_probe ran a JAX operation when imported" in proc.stderr, proc.stderr
    assert not (tmp_path / "run").exists()


def test_a_bsp_trainer_holds_its_state_flat_and_an_async_one_as_trees(tmp_path):
    """BSP steps take one parameter buffer (engine/state.py); checkpoints hold the trees
    (test_resume.py resumes through them); the async executors keep their own states."""
    import jax

    from omnilearn_jax.engine.state import FlatState, TrainState, params_of, plain

    t = Trainer(smoke_config(), str(tmp_path / "bsp"))
    assert isinstance(t.state, FlatState) and len(jax.tree.leaves(params_of(t.state))) == 1
    tree = plain(t.state)
    assert isinstance(tree, TrainState) and len(jax.tree.leaves(tree.params)) > 1
    config = smoke_config()
    config.mode = "asp"
    a = Trainer(config, str(tmp_path / "asp"))
    assert isinstance(a.state, TrainState)


def test_a_periodic_flush_writes_only_the_computed_records_in_order():
    """Between evaluations a flush does not wait for the devices: it writes the oldest
    records whose metrics are computed and keeps the rest, in order, for the next flush;
    a flush that waits (evaluation, checkpoint, the end) writes every one."""
    from omnilearn_jax.run.loop import Runner

    class Metric:
        def __init__(self, ready: bool):
            self.ready = ready

        def is_ready(self) -> bool:
            return self.ready

    runner = Runner.__new__(Runner)
    runner.step_of = lambda record: record[0]  # a mode's records name their step
    runner.pending = [(1, Metric(True)), (2, Metric(True)), (3, Metric(False)), (4, Metric(True))]
    due = [r[0] for r in runner.due(False, lambda r: r[1])]
    assert due == [1, 2] and [r[0] for r in runner.pending] == [3, 4]
    assert runner.due(False, lambda r: r[1]) == []
    runner.pending[0][1].ready = True
    runner.pending.append((5, Metric(False)))
    assert [r[0] for r in runner.due(False, lambda r: r[1])] == [3, 4]
    assert [r[0] for r in runner.due(True, lambda r: r[1])] == [5] and runner.pending == []
    # Up to a step (a progress line's): the pending records are the steps done last.
    runner.done, runner.pending = 8, [(6, Metric(True)), (7, Metric(True)), (8, Metric(True))]
    assert runner.written() == 5
    assert [r[0] for r in runner.due(False, lambda r: r[1], upto=7)] == [6, 7]
    assert runner.written() == 7
    assert [r[0] for r in runner.due(True, lambda r: r[1], upto=7)] == []
    assert [r[0] for r in runner.due(True, lambda r: r[1])] == [8]


def test_workers_sharing_a_device_keep_their_bounds_unless_the_capacity_binds():
    """4 workers on 1 device (one GPU): b_max (3B/W = 48) stays each worker's bound, as on 4
    devices; it was capacity // 4 = 16 = B/W, so no controller could move the split."""
    from omnilearn_jax.run.train import worker_bounds

    config = smoke_config()  # B = 64
    config.num_workers, config.controller.b_min, config.controller.b_max = 4, -1, -1  # paper's
    lo, hi, capacity = worker_bounds(config, per_device=4)
    assert hi.tolist() == [48] * 4 and lo.tolist() == [8] * 4 and capacity == 64
    lo, hi, capacity = worker_bounds(config, per_device=1)
    assert hi.tolist() == [48] * 4 and capacity == 48
    config.capacity = 40  # a device holds 40 rows: its 4 workers share them
    assert worker_bounds(config, per_device=4)[1].tolist() == [10] * 4
    assert worker_bounds(config, per_device=1)[1].tolist() == [40] * 4
    config.capacity, config.controller.b_max = 40, 10  # 4 x 10 cannot overfill it
    assert worker_bounds(config, per_device=4)[1].tolist() == [10] * 4
    # A remainder goes to a device's first workers (42 rows: 11, 11, 10, 10, not 10 each:
    # the device could not have held its capacity); under a row a worker, one line.
    config.capacity, config.controller.b_max = 42, -1
    assert worker_bounds(config, per_device=4)[1].tolist() == [11, 11, 10, 10]
    # A capacity above what a device's workers can hold is that amount: a larger one only
    # added buckets (4096 for B = 64: 25 buckets, each compiled on every device, against 7).
    config.capacity, config.controller.b_max = 4096, -1
    assert worker_bounds(config, per_device=4)[2] == 64
    assert worker_bounds(config, per_device=1)[2] == 48
    assert worker_bounds(config, per_device=4)[1].tolist() == [48] * 4
    config.capacity = 3
    with pytest.raises(ValueError, match="capacity=3 is below the 4 workers a device holds"):
        worker_bounds(config, per_device=4)
    # Not split (the default capacity, B under the workers a device holds): each worker keeps
    # its own bound (8 workers, B = 4 on one device had been refused, naming a key never set).
    config.num_workers, config.capacity, config.global_batch_size = 8, 0, 4
    config.controller.b_min = 0
    assert worker_bounds(config, per_device=8)[1].tolist() == [1] * 8  # 3B/W, the paper's


def test_a_cpu_run_from_python_takes_its_configs_cpu_devices(monkeypatch, capsys):
    """In a process with 8 CPU devices (a notebook after another run, these tests), the
    Quickstart's 4 workers failed ("not a multiple of the 8 devices") and a cpu_devices=2
    config ran on 1 device where the command line made 2: train_and_evaluate ignored
    cpu_devices. It now takes that many devices, as the command line creates."""
    import jax

    from configs import quickstart
    from omnilearn_jax.data import datasets
    from omnilearn_jax.run import train

    config = quickstart.get_config()
    assert config.cpu_devices == 4 and train.own_cpus(config) == 4
    chosen = []
    monkeypatch.setattr(train, "select_devices", lambda n: chosen.append(n) or jax.devices()[:n])

    def stop(section):
        raise StopIteration  # the rest of the trainer is not needed here

    monkeypatch.setattr(datasets, "load", stop)
    with pytest.raises(StopIteration):
        train.Trainer(config, "unused")
    assert chosen == [4]
    config.num_devices = 2  # given: used as it is
    assert train.own_cpus(config) == 0
    config.num_devices, config.cpu_devices = 0, 16  # more than the process has: all, said
    assert train.own_cpus(config) == 0
    assert "warning: cpu_devices=16 but this process has 8 CPU device(s)" in capsys.readouterr().err
