"""Checkpoint and resume, numerical and measurement faults, worker loss."""

import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from omnilearn_jax.run import launch, train
from omnilearn_jax.run.job import train_and_evaluate
from omnilearn_jax.run.runstore import read_metrics, start_measured, write_measured
from omnilearn_jax.run.train import Trainer
from tests.test_train import FEW_BUCKETS, ROOT, run_main, smoke_config

STEPS = 12
ARGS = (
    f"--config.train.num_steps={STEPS}",
    "--config.train.eval_every=10",
    "--config.train.checkpoint_every=4",
    "--config.train.log_every=1",
    "--config.train.save_params=True",
    "--config.controller.name=proportional",
    "--config.hetero.name=hl",
    "--config.hetero.level=8",
    "--config.num_workers=4",
    "--config.num_devices=4",
    "--config.cost.noise=0.1",
    f"--config.bucket_ratio={FEW_BUCKETS}",
)


def _summary(path):
    summary = json.loads((path / "summary.json").read_text())
    summary.pop("wall_time")  # this machine's seconds: never equal across runs
    summary.pop("steps_wall_time")
    summary.pop("resumed_from", None)  # where the killed run resumed: said, not a result
    return summary


def _params(path):
    with np.load(path / "final_params.npz") as f:
        return {k: f[k] for k in f.files}


@pytest.mark.slow
def test_sigkill_at_a_random_step_then_resume_equals_an_unbroken_run(tmp_path, rng):
    run_main(tmp_path / "clean", *ARGS)
    kill_at = int(rng.integers(6, STEPS - 1))  # seeded: the fixture prints the seed
    print(f"killed at step {kill_at}")
    workdir = tmp_path / "killed"
    env = launch.child_env()  # main.py makes its devices; other XLA flags stay
    cmd = [
        sys.executable,
        "-m",
        "omnilearn_jax.main",
        "--config=configs/smoke.py",
        f"--workdir={workdir}",
        *ARGS,
    ]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    for line in proc.stdout:
        if line.startswith(f"step {kill_at}/"):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"run ended before step {kill_at}"
    # Killed without a chance to say so: the run store still reads "running".
    assert json.loads((workdir / "summary.json").read_text())["status"] == "running"
    resumed = run_main(workdir, *ARGS)
    assert "resumed at step" in resumed.stdout
    clean, killed = tmp_path / "clean", workdir
    assert (killed / "metrics.jsonl").read_bytes() == (clean / "metrics.jsonl").read_bytes()
    assert _summary(killed) == _summary(clean)
    a, b = _params(clean), _params(killed)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("mode", ["bsp", "asp"])
def test_resuming_twice_equals_an_unbroken_run_calibrated_and_across_rejected_times(
    tmp_path, monkeypatch, capsys, mode
):
    """Crash twice, resume twice: the metrics equal an unbroken run's record for record, with
    a calibrated cost (measured once, kept in measured.json, not measured again on resume)
    and planted bad times that the guard rejects at the first step after each resume point
    (it needs the memory it had at the checkpoint to tell them from real times)."""
    calls = []

    def calibrate(*args, **kwargs):  # a second measurement would give another clock
        calls.append(1)
        return 1e-3 * len(calls)

    monkeypatch.setattr(train, "calibrate_per_sample_cost", calibrate)
    config = smoke_config(few_buckets=True)
    config.mode = mode
    config.num_workers = config.num_devices = 4
    config.controller.name = "proportional"
    config.hetero.name = "hl"
    config.hetero.level = 8
    config.cost.per_sample_cost = 0.0
    # (step, worker, seconds); async runs index them by round (4 updates), BSP by step.
    config.faults.bad_times = (1, 1, 1e6, 2, 2, 1e6, 4, 1, 1e6, 8, 2, 1e6)
    config.train.num_steps = 12
    config.train.checkpoint_every = 4
    config.train.eval_every = 6
    ref = train_and_evaluate(config, str(tmp_path / "ref"))
    rejected = capsys.readouterr().err.count("rejected measured time")
    assert rejected >= 2
    calls.clear()
    for crash in (6, 10):  # crash after step 6 (resume at 4), then after 10 (resume at 8)
        config.faults.crash_step = crash
        with pytest.raises(RuntimeError, match=f"planted crash after step {crash}"):
            train_and_evaluate(config, str(tmp_path / "parts"))
    config.faults.crash_step = -1
    train_and_evaluate(config, str(tmp_path / "parts"))
    assert len(calls) == 1  # the resumes read the cost back
    measured = json.loads((tmp_path / "parts" / "measured.json").read_text())
    assert measured["per_sample_cost"] == 1e-3
    metrics = read_metrics(tmp_path / "parts")
    assert [r["step"] for r in metrics if "loss" in r] == list(range(1, 13))
    assert metrics == read_metrics(tmp_path / "ref")
    summary = json.loads((tmp_path / "parts" / "summary.json").read_text())
    assert summary["final_eval_accuracy"] == ref["final_eval_accuracy"]
    assert summary["total_time"] == ref["total_time"]
    # The planted times, one rejection each, counted across the resumes (checkpoint metadata;
    # async's 12 updates are 3 rounds, which reach 2 of them)
    assert summary["rejected_times"] == ref["rejected_times"] == (4 if mode == "bsp" else 2)
    # Resuming the finished run again changes nothing.
    parts = tmp_path / "parts"
    before = (parts / "metrics.jsonl").read_bytes(), (parts / "summary.json").read_bytes()
    capsys.readouterr()
    train_and_evaluate(config, str(parts))
    done = f"already complete ({summary['steps']} steps); nothing to do"
    assert done in capsys.readouterr().out
    assert before == ((parts / "metrics.jsonl").read_bytes(), (parts / "summary.json").read_bytes())


def test_a_fresh_run_forgets_what_an_earlier_run_in_its_workdir_measured(tmp_path):
    write_measured(str(tmp_path), {"per_sample_cost": 0.25})
    (tmp_path / "cost_curve.json").write_text("{}")
    assert start_measured(str(tmp_path), resuming=True) == {"per_sample_cost": 0.25}
    assert start_measured(str(tmp_path), resuming=False, also=("cost_curve.json",)) == {}
    assert os.listdir(tmp_path) == []


def test_a_planted_nan_stops_the_run_at_its_step(tmp_path):
    config = smoke_config(few_buckets=True)
    config.train.checkpoint_every = 5
    config.faults.nan_step = 7  # 0-based: the 8th update
    with pytest.raises(FloatingPointError) as err:
        train_and_evaluate(config, str(tmp_path))
    assert "non-finite loss (nan) at step 8; last good checkpoint: step 5 in" in str(err.value)
    # The advice is one a rerun can follow (this checkpoint cannot continue under skip).
    assert "rerun with --config.train.nan_policy=skip in a new workdir" in str(err.value)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["last_checkpoint"] == 5
    losses = [r["loss"] for r in read_metrics(tmp_path) if "loss" in r]
    assert len(losses) == 8 and losses[7] is None and all(np.isfinite(losses[:7]))


def test_a_failed_run_writes_the_records_of_the_steps_it_finished(tmp_path):
    """No flush comes before the crash (lines, evaluations and checkpoints only at the
    end): the records of the steps done were pending, and the run store keeps them."""
    config = smoke_config(few_buckets=True)
    config.train.num_steps = config.train.eval_every = config.train.log_every = 20
    config.train.checkpoint_every = 0
    config.faults.crash_step = 9
    with pytest.raises(RuntimeError, match="planted crash after step 9"):
        train_and_evaluate(config, str(tmp_path))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["steps"] == 9
    assert [r["step"] for r in read_metrics(tmp_path)] == list(range(1, 10))


def test_skip_policy_drops_the_nan_update_and_continues(tmp_path):
    config = smoke_config(few_buckets=True)
    config.train.nan_policy = "skip"
    config.faults.nan_step = 7
    summary = train_and_evaluate(config, str(tmp_path))
    assert summary["status"] == "complete" and np.isfinite(summary["final_eval_loss"])
    records = [r for r in read_metrics(tmp_path) if "loss" in r]
    losses = [r["loss"] for r in records]
    assert losses[7] is None and sum(v is None for v in losses) == 1
    # Its accuracy too: argmax over NaN logits had read as the batch's share of class 0.
    assert [r["accuracy"] is None for r in records] == [v is None for v in losses]


def test_a_failure_inside_a_decision_writes_no_record_past_the_steps_counted(tmp_path, monkeypatch):
    """A step's record is pending before its decision and `done` counts the step after it:
    a signal there (the launched Ctrl-C test caught one, 1 run in ~10) wrote the record of a
    step the summary did not count (metrics up to 21, `steps` 20)."""
    calls = []
    real = Trainer.next_sizes

    def next_sizes(self, *args):
        calls.append(1)
        if len(calls) == 9:  # inside step 9's decision: its record is pending already
            raise RuntimeError("planted failure inside a decision")
        return real(self, *args)

    monkeypatch.setattr(Trainer, "next_sizes", next_sizes)
    config = smoke_config(few_buckets=True)
    config.train.num_steps = config.train.eval_every = config.train.log_every = 20
    config.train.checkpoint_every = 0
    with pytest.raises(RuntimeError, match="planted failure inside a decision"):
        train_and_evaluate(config, str(tmp_path))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"] == 8
    assert [r["step"] for r in read_metrics(tmp_path)] == list(range(1, 9))


def test_skipping_stops_the_run_once_optax_would_apply_a_non_finite_update(tmp_path):
    """A learning rate that blows the parameters up after the first step: every later loss is
    non-finite. `optax.apply_if_finite` skips `max_skipped` such updates in a row and applies
    the next; the run stops there (it went on saying "its update was skipped")."""
    config = smoke_config(few_buckets=True)
    config.train.nan_policy = "skip"
    config.train.max_skipped = 2
    config.optimizer.learning_rate = 1e30
    config.train.checkpoint_every = 0
    with pytest.raises(FloatingPointError) as err:
        train_and_evaluate(config, str(tmp_path))
    assert "at step 4, 3 in a row: past train.max_skipped=2 the update is applied" in str(err.value)
    losses = [r["loss"] for r in read_metrics(tmp_path) if "loss" in r]
    assert len(losses) == 4 and np.isfinite(losses[0]) and all(v is None for v in losses[1:])


def test_a_run_resumed_inside_a_streak_of_skipped_updates_counts_on_from_it(tmp_path):
    """As above with max_skipped=3 and a checkpoint at step 3 (steps 2 and 3 skipped), a crash
    after step 4, and a resume: step 5 is the 4th non-finite loss in a row, as in an unbroken
    run. The count had restarted at 0, so the run went on to step 7 over parameters that
    optax's own (checkpointed) count had let a non-finite update into at step 5."""
    config = smoke_config(few_buckets=True)
    config.train.nan_policy = "skip"
    config.train.max_skipped = 3
    config.optimizer.learning_rate = 1e30
    config.train.checkpoint_every = 3
    config.faults.crash_step = 4
    with pytest.raises(RuntimeError, match="planted crash after step 4"):
        train_and_evaluate(config, str(tmp_path))
    config.faults.crash_step = -1
    with pytest.raises(FloatingPointError) as err:
        train_and_evaluate(config, str(tmp_path))
    assert "at step 5, 4 in a row: past train.max_skipped=3 the update is applied" in str(err.value)


def test_planted_bad_timings_leave_the_controller_decisions_unchanged(tmp_path):
    def run(name, bad):
        config = smoke_config(few_buckets=True)
        config.num_workers = 4
        config.num_devices = 4
        config.hetero.name = "hl"
        config.hetero.level = 8
        config.cost.linear = True  # the guard's fallback is then exactly the true time
        config.controller.name = "proportional"
        config.faults.bad_times = bad
        train_and_evaluate(config, str(tmp_path / name))
        return [r["batch_sizes"] for r in read_metrics(tmp_path / name) if "loss" in r]

    clean = run("clean", ())
    bad = (2, 0, 0.0, 3, 1, -1.0, 5, 2, float("nan"), 8, 3, 1e6, 9, 0, 1e-9, 11, 2, float("inf"))
    assert run("bad", bad) == clean
    assert len({tuple(s) for s in clean}) > 1  # the controller did move during those steps


def test_a_lost_worker_hands_its_samples_to_the_others(tmp_path):
    config = smoke_config(few_buckets=True)
    config.controller.name = "proportional"
    config.hetero.name = "preempt"
    config.hetero.preempt_worker = 2
    config.hetero.preempt_intervals = (5, 12)
    config.hetero.preempt_trickle = 0.0  # unavailable, not just slow
    summary = train_and_evaluate(config, str(tmp_path))
    assert summary["status"] == "complete" and summary["steps"] == 20
    records = [r for r in read_metrics(tmp_path) if "loss" in r]
    for r in records:
        away = r["speeds"][2] == 0
        assert sum(r["batch_sizes"]) == 64
        assert (r["batch_sizes"][2] == 0) == away, r
    assert sum(r["speeds"][2] == 0 for r in records) == 7
    assert records[-1]["batch_sizes"][2] > 0  # it gets samples again when it returns


def test_a_lost_worker_with_a_binding_lower_bound_is_a_clear_error(tmp_path):
    config = smoke_config(few_buckets=True)
    config.controller.b_min = 4
    config.hetero.name = "preempt"
    config.hetero.preempt_intervals = (3, 5)
    config.hetero.preempt_trickle = 0.0
    # The interval's start 3 counts from 0: the 4th step, as messages count (it said 3).
    with pytest.raises(ValueError, match="worker 0 is unavailable .* at step 4 but b_min=4"):
        train_and_evaluate(config, str(tmp_path))
    # Found from the profile before anything compiled or was written: it was found at that
    # step, beside a run store whose summary said failed.
    assert not (tmp_path / "summary.json").exists() and not (tmp_path / "metrics.jsonl").exists()
    # Async: the 4th round of W updates (it said round 5: the round of the speeds, plus 1).
    config.mode, config.num_workers, config.num_devices = "asp", 4, 4
    with pytest.raises(ValueError, match="unavailable .* at update round 4 but b_min=4"):
        train_and_evaluate(config, str(tmp_path / "asp"))


def _four_steps():
    config = smoke_config(few_buckets=True)
    config.train.num_steps = 4
    return config


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished run of `_four_steps()`, made once: a test copies it before writing there."""
    workdir = tmp_path_factory.mktemp("finished")
    train_and_evaluate(_four_steps(), str(workdir))
    return workdir


def test_resume_refuses_a_different_config(tmp_path, finished_run):
    shutil.copytree(finished_run, tmp_path, dirs_exist_ok=True)
    config = _four_steps()
    config.optimizer.learning_rate = 0.5
    with pytest.raises(ValueError, match="optimizer.learning_rate: 0.1 -> 0.5"):
        train_and_evaluate(config, str(tmp_path))


def test_a_workdir_of_another_config_is_refused_before_anything_is_built(
    tmp_path, finished_run, monkeypatch
):
    """The check ran after the trainer had loaded, compiled and measured (writing its files
    into the other run's workdir); a finished run whose checkpoints were deleted was trained
    afresh over, under any config; a copied checkpoints folder (no config.json) carried on
    under another config, silently."""
    from omnilearn_jax.run import job

    monkeypatch.setattr(job, "Trainer", lambda *a: pytest.fail("the trainer was built"))
    shutil.copytree(finished_run, tmp_path, dirs_exist_ok=True)
    shutil.rmtree(tmp_path / "checkpoints")
    before = sorted(os.listdir(tmp_path))
    assert train_and_evaluate(_four_steps(), str(tmp_path))["status"] == "complete"
    config = _four_steps()
    config.optimizer.learning_rate = 0.5
    with pytest.raises(ValueError, match="holds a finished run with a different config "):
        train_and_evaluate(config, str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == before
    copied = tmp_path / "copied"
    shutil.copytree(finished_run / "checkpoints", copied / "checkpoints")
    with pytest.raises(ValueError, match="holds checkpoints but no config.json"):
        train_and_evaluate(config, str(copied))


def test_an_unreadable_checkpoint_is_one_line_naming_it_and_the_one_before(tmp_path, finished_run):
    """A half-copied or damaged newest checkpoint gave a KeyError traceback, a bare JSON
    error or kilobytes of tensorstore spec."""
    shutil.copytree(finished_run, tmp_path, dirs_exist_ok=True)
    os.remove(tmp_path / "summary.json")  # an interrupted run, as far as the files say
    (tmp_path / "checkpoints" / "9").mkdir()
    with pytest.raises(ValueError) as err:
        train_and_evaluate(_four_steps(), str(tmp_path))
    message = str(err.value)
    assert "checkpoints/9 cannot be read (" in message and "\n" not in message
    assert message.endswith(
        "remove that folder to resume from step 4, or use --config.train.resume=False (or a "
        "new workdir)"
    )


def test_a_complete_run_keeps_its_final_parameters_whoever_builds_its_trainer(
    tmp_path, finished_run
):
    """An async run across processes builds its trainer before it says "already complete";
    without checkpoints the trainer took the finished run for a fresh one and deleted its
    final_params.npz (and what it had measured)."""
    shutil.copytree(finished_run, tmp_path, dirs_exist_ok=True)
    shutil.rmtree(tmp_path / "checkpoints")
    (tmp_path / "final_params.npz").write_bytes(b"the finished run's parameters")
    Trainer(_four_steps(), str(tmp_path))
    assert (tmp_path / "final_params.npz").read_bytes() == b"the finished run's parameters"


def test_a_fresh_start_removes_the_final_parameters_an_earlier_run_left(tmp_path, finished_run):
    shutil.copytree(finished_run, tmp_path, dirs_exist_ok=True)
    (tmp_path / "final_params.npz").write_bytes(b"an earlier run's parameters")
    config = _four_steps()
    config.train.resume = False
    assert train_and_evaluate(config, str(tmp_path))["status"] == "complete"
    assert not (tmp_path / "final_params.npz").exists()


def test_a_resumed_run_says_running_over_the_summary_of_the_session_before(
    tmp_path, finished_run, monkeypatch
):
    """A resumed run left the summary of the session before in place while it ran, so a
    launcher recording its later death kept that session's failed process, exit code and
    error (launch.mark_failed keeps the keys it finds)."""
    from omnilearn_jax.run.runlog import RunLog

    shutil.copytree(finished_run, tmp_path, dirs_exist_ok=True)
    old = {"status": "failed", "steps": 2, "failed_process": 1, "error": "the session before"}
    (tmp_path / "summary.json").write_text(json.dumps(old))
    written = []
    real = RunLog.summary
    monkeypatch.setattr(RunLog, "summary", lambda self, s: (written.append(s), real(self, s)))
    assert train_and_evaluate(_four_steps(), str(tmp_path))["status"] == "complete"
    assert written[0] == {"status": "running", "steps": 4, "resumed_from": 4}
    # Kept in the final summary too: W&B merges summary updates, so its summary of a resumed
    # run kept the key while summary.json dropped it (the two sources' frames differed).
    assert written[-1]["status"] == "complete" and written[-1]["resumed_from"] == 4


def test_a_dataset_key_the_data_set_does_not_read_changes_no_run(tmp_path, finished_run):
    """Runs on digits stored the synthetic set's num_train and input_shape (paper_bsp set
    them for every data set until it set them for the synthetic one alone); such a finished
    run is still complete under today's config, while a key digits reads still counts."""
    shutil.copytree(finished_run, tmp_path, dirs_exist_ok=True)
    stored = json.loads((tmp_path / "config.json").read_text())
    stored["dataset"].update(num_train=1024, input_shape=[16, 16, 3])
    (tmp_path / "config.json").write_text(json.dumps(stored))
    assert train_and_evaluate(_four_steps(), str(tmp_path))["status"] == "complete"
    config = _four_steps()
    config.dataset.test_fraction = 0.3
    with pytest.raises(ValueError, match=r"dataset.test_fraction: 0.2 -> 0.3"):
        train_and_evaluate(config, str(tmp_path))


def test_a_key_the_stored_config_lacks_is_unchanged_at_its_default(tmp_path, finished_run):
    """A checkpoint written before a config key existed resumes while the key keeps its
    default; giving it another value is a change like any other."""
    shutil.copytree(finished_run, tmp_path, dirs_exist_ok=True)
    config = _four_steps()
    stored = json.loads((tmp_path / "config.json").read_text())
    del stored["memory_rows"]
    (tmp_path / "config.json").write_text(json.dumps(stored))
    assert train_and_evaluate(config, str(tmp_path))["status"] == "complete"
    config.memory_rows = 16
    with pytest.raises(ValueError, match="memory_rows: None -> 16"):
        train_and_evaluate(config, str(tmp_path))


def test_losing_a_worker_does_not_compile_the_decision_again(tmp_path):
    import jax

    import controllers
    from omnilearn_jax.engine.compiles import CompileCounter

    config = smoke_config()
    config.controller.name = "proportional"
    t = Trainer(config, str(tmp_path))
    w, b = config.num_workers, config.global_batch_size
    cstate = jax.jit(t.controller.init, static_argnums=(0, 1))(w, b)
    sizes = controllers.initial_sizes(cstate, w, b)
    speeds = np.ones(w)
    sizes, cstate = t.next_sizes(cstate, t.observe(0, sizes, np.full(w, 0.1), speeds))
    speeds[3] = 0.0  # worker 3 is lost for the step being decided
    with CompileCounter() as compiles:
        sizes, cstate = t.next_sizes(cstate, t.observe(1, sizes, np.full(w, 0.1), speeds))
    assert compiles.count == 0
    assert sizes[3] == 0 and sizes.sum() == b


def test_a_controller_state_holding_a_typed_prng_key_is_checkpointed_and_resumed(
    tmp_path, monkeypatch
):
    """A plug-in whose state held `jax.random.key(0)` passed the contract suite and trained,
    then died at its first checkpoint ("JAX array with PRNGKey dtype cannot be converted to a
    NumPy array"). Its key is saved as its data and rebuilt: the resumed run's splits, drawn
    from the key, are the unbroken run's."""
    from typing import NamedTuple

    import jax
    import jax.numpy as jnp

    import controllers
    from controllers import registry

    class Keyed(NamedTuple):
        sizes: jax.Array
        key: jax.Array

    def keyed(*, b_min: int = 0, b_max: int = 0) -> controllers.Controller:
        def init(w, b):
            return Keyed(controllers.allocate(jnp.ones(w), b, b_min, b_max), jax.random.key(0))

        def update(state, obs):
            key, draw = jax.random.split(state.key)
            shares = 1.0 + jax.random.uniform(draw, obs.batch_sizes.shape)
            b = obs.time_table.shape[-1] - 1
            sizes = controllers.allocate(shares, b, b_min, b_max)
            return sizes, Keyed(sizes, key)

        return controllers.Controller(init, update)

    monkeypatch.setitem(registry._FACTORIES, "keyed_test", keyed)
    config = smoke_config(few_buckets=True)
    config.controller.name = "keyed_test"
    config.train.num_steps, config.train.checkpoint_every = 6, 2
    train_and_evaluate(config, str(tmp_path / "whole"))
    config.faults.crash_step = 3
    with pytest.raises(RuntimeError, match="planted crash"):
        train_and_evaluate(config, str(tmp_path / "broken"))
    config.faults.crash_step = -1
    assert train_and_evaluate(config, str(tmp_path / "broken"))["status"] == "complete"
    splits = [
        [r["batch_sizes"] for r in read_metrics(tmp_path / name) if "loss" in r]
        for name in ("whole", "broken")
    ]
    assert splits[0] == splits[1] and len({tuple(s) for s in splits[0]}) > 2  # moved each step


def test_a_failure_that_is_not_the_checkpoints_fault_is_not_blamed_on_it(tmp_path, finished_run):
    """Out of memory while restoring said the checkpoint "cannot be read; remove that
    folder" of a checkpoint that was fine."""
    from omnilearn_jax.run.checkpoint import Checkpointer

    ckpt = Checkpointer(str(finished_run))

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory")

    ckpt.manager.restore = out_of_memory
    ckpt._mismatch = lambda step, like: ""  # the arrays match: only the memory failed
    for read in (lambda: ckpt.restore_meta(4), lambda: ckpt.restore(4, {})):
        with pytest.raises(RuntimeError, match="RESOURCE_EXHAUSTED"):
            read()


def test_steps_wall_time_leaves_out_periodic_checkpoints_and_evaluations(tmp_path, monkeypatch):
    """'What a run's steps cost' counted every periodic save and evaluation: 10x the steps'
    time with checkpoint_every=2. On a clock that only the saves and the steps' finishing
    move, the steps cost their finishing alone."""
    import types

    from omnilearn_jax.run import loop

    clock = types.SimpleNamespace(now=0.0)
    monkeypatch.setattr(loop, "time", types.SimpleNamespace(perf_counter=lambda: clock.now))
    save = loop.Runner.save

    def slow_save(self, *args):
        save(self, *args)
        clock.now += 100.0  # a save that takes 100 s

    monkeypatch.setattr(loop.Runner, "save", slow_save)
    block = loop.jax.block_until_ready

    def steps_finish(tree):  # the steps dispatched ahead take 1 s to finish
        clock.now += 1.0
        return block(tree)

    monkeypatch.setattr(loop.jax, "block_until_ready", steps_finish)
    config = _four_steps()
    config.train.checkpoint_every = 1
    summary = train_and_evaluate(config, str(tmp_path))
    # The saves (400 s) are out; the steps' own finishing, waited for before each periodic
    # save and at the end (4 s), is in: a flush inside the save had waited for it and that
    # time was subtracted with the save's (0.13 s left of 1.6 s of steps, measured).
    assert summary["steps_wall_time"] == 4.0 and summary["wall_time"] >= 404.0


def test_a_failed_run_names_its_last_checkpoint_keeps_as_asked_and_resumes_on_new_log_every(
    tmp_path,
):
    """Checkpoints every 2 steps, 3 kept, a crash after step 9: the summary says to resume
    from 8 (not 9, the steps done), the folders 4, 6 and 8 remain, and a rerun that changes
    only log_every, checkpoint_every and keep_checkpoints (resumable changes: a workdir of
    the old default checkpoint_every of 50 was refused) resumes there, ends with the two
    newest kept, and writes an unbroken run's metrics."""
    config = smoke_config(few_buckets=True)
    config.train.num_steps, config.train.checkpoint_every = 12, 2
    config.train.keep_checkpoints, config.faults.crash_step = 3, 9
    with pytest.raises(RuntimeError, match="planted crash after step 9"):
        train_and_evaluate(config, str(tmp_path))
    summary = json.loads((tmp_path / "summary.json").read_text())
    said = {k: summary[k] for k in ("status", "steps", "last_checkpoint", "resume_step")}
    assert said == {"status": "failed", "steps": 9, "last_checkpoint": 8, "resume_step": 8}
    kept = lambda: sorted(int(p) for p in os.listdir(tmp_path / "checkpoints") if p.isdigit())  # noqa: E731
    assert kept() == [4, 6, 8]
    # log_every, checkpoint_every and keep_checkpoints change nothing a run computes
    config.faults.crash_step, config.train.log_every = -1, 5
    config.train.checkpoint_every, config.train.keep_checkpoints = 3, 2
    assert train_and_evaluate(config, str(tmp_path))["steps"] == 12
    assert kept() == [9, 12]
    unbroken = smoke_config(few_buckets=True)
    unbroken.train.num_steps = 12
    train_and_evaluate(unbroken, str(tmp_path / "unbroken"))
    assert read_metrics(tmp_path) == read_metrics(tmp_path / "unbroken")


def test_a_checkpoints_rejection_count_includes_what_saving_settles():
    """Async on the wall clock settles the times in flight as it saves (extra_meta), and the
    guard may reject one of them: the count was read before, so a resume lost it."""
    from types import SimpleNamespace

    from omnilearn_jax.run.loop import Runner

    guard, saved = SimpleNamespace(rejected=3), {}

    def settle():
        guard.rejected += 1
        return {"events": []}

    fake = SimpleNamespace(
        t=SimpleNamespace(
            agreement=SimpleNamespace(check=lambda at: None),
            timer=SimpleNamespace(guard=guard),
            repaired_splits=2,
        ),
        unit="update",
        done=8,
        evals=[],
        skipped=0,
        extra_meta=settle,
        arrays=lambda cstate, sizes: {},
        ckpt=SimpleNamespace(save=lambda step, arrays, meta: saved.update(meta)),
    )
    Runner.save(fake, None, None, "id")
    assert saved["rejected_times"] == guard.rejected == 4 and fake.last_saved == 8
    assert saved["repaired_splits"] == 2  # a resume counts on from it


def test_a_trace_edited_between_sessions_is_refused_not_followed(tmp_path):
    """The config names the trace file, not what it held: edited after a crash, it was read
    afresh on resume, and the resumed run followed another cluster (step 9's speeds 0.1
    where the run had 0.5)."""
    trace = tmp_path / "speeds.csv"

    def write(late: float) -> None:
        rows = [f"{s},{w},{(0.5 if s < 8 else late) if w == 0 else 1.0}" for s in range(12)
                for w in range(4)]  # fmt: skip
        trace.write_text("step,worker,speed\n" + "\n".join(rows) + "\n")

    config = smoke_config(few_buckets=True)
    config.num_workers = config.num_devices = 4
    config.hetero.name, config.hetero.path = "trace", str(trace)
    config.train.num_steps, config.train.checkpoint_every = 12, 4
    write(0.5)
    config.faults.crash_step = 6
    with pytest.raises(RuntimeError, match="planted crash"):
        train_and_evaluate(config, str(tmp_path / "run"))
    write(0.1)
    config.faults.crash_step = -1
    with pytest.raises(ValueError, match=r"hetero.path=.* changed since the run started"):
        train_and_evaluate(config, str(tmp_path / "run"))
    write(0.5)  # the file as it was: the run resumes
    assert train_and_evaluate(config, str(tmp_path / "run"))["status"] == "complete"


def test_a_resume_whose_measured_cost_is_gone_is_refused_not_measured_again(tmp_path, monkeypatch):
    """measured.json deleted after a crash: the resume measured the machine again, and the
    run's clock changed where it resumed (0.01406 s a step before, 0.01531 s after, on the
    same split)."""
    monkeypatch.setattr(train, "calibrate_per_sample_cost", lambda *a, **k: 1e-3)
    config = smoke_config(few_buckets=True)
    config.cost.per_sample_cost = 0.0
    config.train.num_steps, config.train.checkpoint_every, config.faults.crash_step = 8, 4, 6
    with pytest.raises(RuntimeError, match="planted crash"):
        train_and_evaluate(config, str(tmp_path))
    os.remove(tmp_path / "measured.json")
    config.faults.crash_step = -1
    with pytest.raises(ValueError, match=r"calibrated cost \(measured.json\) is gone"):
        train_and_evaluate(config, str(tmp_path))
