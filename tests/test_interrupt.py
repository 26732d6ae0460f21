"""Ctrl-C / SIGTERM: the run saves at a step boundary, says where, and resumes from there."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from omnilearn_jax.run import launch
from omnilearn_jax.run.interrupt import Interrupted
from omnilearn_jax.run.job import train_and_evaluate
from omnilearn_jax.run.loop import Loop
from omnilearn_jax.run.runstore import read_metrics
from tests.test_train import FEW_BUCKETS, ROOT, smoke_config


def _summary(workdir) -> dict:
    return json.loads((workdir / "summary.json").read_text())


def signal_in_step(index: int, signum: int = signal.SIGINT):
    """Loop.step that sends `signum` to this process inside step `index` (0-based)."""
    step = Loop.step

    def step_then_signal(self, i, cstate, sizes):
        out = step(self, i, cstate, sizes)
        if i == index:
            os.kill(os.getpid(), signum)
        return out

    return step_then_signal


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_saves_the_step_reached_and_the_same_run_resumes_there(
    tmp_path, monkeypatch, capsys, signum
):
    config = smoke_config(few_buckets=True)
    config.train.num_steps, config.train.checkpoint_every = 8, 0  # no periodic checkpoint
    step = Loop.step
    # the signal arrives inside step 5; the loop stops after it
    monkeypatch.setattr(Loop, "step", signal_in_step(4, signum))
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN where pytest runs under nohup
    with pytest.raises(Interrupted) as stopped:
        train_and_evaluate(config, str(tmp_path))
    assert stopped.value.exit_code == 128 + signum
    summary = _summary(tmp_path)
    assert (summary["status"], summary["steps"], summary["resume_step"]) == ("interrupted", 5, 5)
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == "interrupted at step 5/8; run the same command again to resume from step 5"
    assert signal.getsignal(signal.SIGINT) is before  # handlers restored

    monkeypatch.setattr(Loop, "step", step)
    done = train_and_evaluate(config, str(tmp_path))
    assert done["status"] == "complete" and done["steps"] == 8
    assert "resumed at step 5" in capsys.readouterr().out
    steps = [r["step"] for r in read_metrics(str(tmp_path)) if "loss" in r]
    assert steps == list(range(1, 9))  # each step once: nothing lost, nothing repeated


def test_ctrl_c_on_the_command_line_is_one_line_and_status_130(tmp_path):
    env = launch.child_env()  # main.py makes its devices; other XLA flags stay
    cmd = [sys.executable, "-m", "omnilearn_jax.main", "--config=configs/smoke.py"]
    cmd += [f"--workdir={tmp_path}", "--config.train.num_steps=1000000"]
    cmd += [f"--config.bucket_ratio={FEW_BUCKETS}"]
    cmd += ["--config.train.log_every=20", "--config.train.eval_every=1000000"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until training has started
        lines.append(proc.stdout.readline().decode())
        if lines[-1].startswith("step "):
            break
    assert lines[0].startswith("starting mlp on digits: 8 workers")  # at once, before compiling
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()[-2000:]
    assert "Traceback" not in err.decode()
    summary = _summary(tmp_path)
    assert summary["status"] == "interrupted" and summary["resume_step"] == summary["steps"] > 0
    last = out.decode().strip().splitlines()[-1]
    n = summary["steps"]
    assert (
        last
        == f"interrupted at step {n}/1000000; run the same command again to resume from step {n}"
    )


def test_an_interrupted_ablation_says_how_many_cells_are_left(tmp_path, monkeypatch, capsys):
    from experiments import ablate
    from experiments.ablation import runner
    from omnilearn_jax.run import interrupt

    def stopped(self):
        raise interrupt.Interrupted(signal.SIGTERM)

    monkeypatch.setattr(interrupt, "raise_on_signals", lambda: None)  # keep pytest's handlers
    monkeypatch.setattr(runner.Runner, "run", stopped)
    args = ["--config=configs/ablation_smoke.py", f"--workdir={tmp_path}"]
    assert ablate.main(args) == 128 + signal.SIGTERM
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "[ablate] interrupted: 0 of 4 cells complete; run the same command again to run the "
        "other 4 (an unfinished cell starts afresh)"
    ]


def test_an_async_run_stops_at_an_update_and_resumes_there(tmp_path, monkeypatch, capsys):
    from omnilearn_jax.asp.loop import AsyncLoop

    config = smoke_config(few_buckets=True)
    config.mode, config.num_workers, config.num_devices = "asp", 4, 4
    config.train.num_steps, config.train.checkpoint_every = 12, 0
    apply_next = AsyncLoop.apply_next

    def apply_then_signal(self):
        record = apply_next(self)
        if self.version == 5:
            os.kill(os.getpid(), signal.SIGTERM)
        return record

    monkeypatch.setattr(AsyncLoop, "apply_next", apply_then_signal)
    with pytest.raises(Interrupted):
        train_and_evaluate(config, str(tmp_path))
    summary = _summary(tmp_path)
    assert (summary["status"], summary["steps"], summary["resume_step"]) == ("interrupted", 5, 5)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "interrupted at update 5/12; run the same command again to resume from update 5"
    monkeypatch.setattr(AsyncLoop, "apply_next", apply_next)
    assert train_and_evaluate(config, str(tmp_path))["steps"] == 12


def test_a_joined_process_that_stops_leaves_without_the_interpreters_shutdown(
    tmp_path, monkeypatch, capsys
):
    """A process of a run joined over several that is interrupted or fails exits at once
    (os._exit): the interpreter's shutdown ran JAX's distributed shutdown, which waited in a
    barrier for peers stopping or gone (a Ctrl-C to the launcher took its whole --grace; a
    SIGINT to one process ended in a SIGABRT 30 s later). A one-process run returns."""
    from omnilearn_jax.run import interrupt, main

    exits = []

    def stopped(*args, **kwargs):
        raise interrupt.Interrupted(signal.SIGINT)

    def failed(*args, **kwargs):
        raise RuntimeError("Gloo AllGather failed: the peer is gone")

    monkeypatch.setattr(interrupt, "raise_on_signals", lambda: None)  # keep pytest's handlers
    monkeypatch.setattr(main.os, "_exit", exits.append)
    argv = ["main", "--config=configs/smoke.py", f"--workdir={tmp_path}"]
    monkeypatch.setattr(main.app, "run", stopped)
    assert main.run(argv) == 130 and exits == []  # one process: no early exit
    monkeypatch.setattr(main.jax.distributed, "is_initialized", lambda: True)
    assert main.run(argv) == 130 and exits == []  # initialised, but a run of one process
    monkeypatch.setattr(main.jax, "process_count", lambda: 2)
    main.run(argv)
    monkeypatch.setattr(main.app, "run", failed)
    main.run(argv)
    assert exits == [130, 1]
    assert "RuntimeError: Gloo AllGather failed" in capsys.readouterr().err
    monkeypatch.setattr(main.app, "run", lambda *a, **k: sys.exit(None))  # as app.run ends
    assert main.run(argv) == 0 and exits == [130, 1]  # success: the usual exit


def test_an_interrupt_before_the_first_step_says_so(tmp_path, monkeypatch, capsys):
    """Ctrl-C while loading or compiling exited 130 without a word."""
    from omnilearn_jax.run import interrupt, main

    def stopped(*args, **kwargs):
        raise interrupt.Interrupted(signal.SIGINT)

    monkeypatch.setattr(interrupt, "raise_on_signals", lambda: None)  # keep pytest's handlers
    monkeypatch.setattr(main.app, "run", stopped)
    assert main.run(["main", "--config=configs/smoke.py", f"--workdir={tmp_path}"]) == 130
    said = "interrupted before the first step (loading or compiling); run the same command again"
    assert capsys.readouterr().out == f"{said} to start\n"
    (tmp_path / "checkpoints" / "4").mkdir(parents=True)
    argv = ["--config=configs/smoke.py", f"--workdir={tmp_path}"]
    assert interrupt.before_steps(argv) == f"{said} to resume from its step 4"
    assert (
        interrupt.before_steps([*argv, "--config.train.resume=False"]) == f"{said} to start afresh"
    )
    assert interrupt.before_steps([*argv, "--config.distributed.process_id=1"]) == ""


def test_a_save_the_signal_cuts_short_still_leaves_an_interrupted_summary(tmp_path, monkeypatch):
    """The save at the signal failed (a remote worker gone, say): no summary was written, and
    the run store said nothing of the interruption. The last checkpoint stands."""
    config = smoke_config(few_buckets=True)
    config.train.num_steps, config.train.checkpoint_every = 8, 2
    save = Loop.save

    def save_unless_stopping(self, *args):
        if self.done == 5:  # the save at the signal, after step 5
            raise RuntimeError("worker 1's process went away")
        return save(self, *args)

    monkeypatch.setattr(Loop, "step", signal_in_step(4))
    monkeypatch.setattr(Loop, "save", save_unless_stopping)
    with pytest.raises(Interrupted):
        train_and_evaluate(config, str(tmp_path))
    summary = _summary(tmp_path)
    assert (summary["status"], summary["resume_step"], summary["steps"]) == ("interrupted", 4, 5)


def test_a_second_signal_during_the_save_or_one_while_closing_leaves_the_right_summary(
    tmp_path, monkeypatch
):
    """A second Ctrl-C during the save the first asked for, and a Ctrl-C while the run store
    closed (the tracker's finish) after a complete run, each left summary.json "running",
    steps 0, and the command line said the run stopped before its first step."""
    from omnilearn_jax.tracking import trackers

    config = smoke_config(few_buckets=True)
    config.train.num_steps, config.train.checkpoint_every = 8, 0
    step, save = Loop.step, Loop.save

    def save_twice_stopped(self, *args):
        if self.done == 5:  # the second Ctrl-C, during the save
            os.kill(os.getpid(), signal.SIGINT)
        return save(self, *args)

    monkeypatch.setattr(Loop, "step", signal_in_step(4))
    monkeypatch.setattr(Loop, "save", save_twice_stopped)
    with pytest.raises(Interrupted):
        train_and_evaluate(config, str(tmp_path / "a"))
    summary = _summary(tmp_path / "a")
    assert (summary["status"], summary["steps"], summary["resume_step"]) == ("interrupted", 5, 0)
    monkeypatch.setattr(Loop, "step", step)
    monkeypatch.setattr(Loop, "save", save)
    closed = []

    def close_stopped(self, exit_code=0):
        closed.append(exit_code)
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(trackers.NullTracker, "close", close_stopped)
    done = train_and_evaluate(config, str(tmp_path / "b"))
    assert closed == [0] and done["status"] == "complete"
    summary = _summary(tmp_path / "b")
    assert (summary["status"], summary["steps"]) == ("complete", 8)


def test_a_non_finite_loss_stops_the_run_at_its_step_and_is_no_interruption(tmp_path, monkeypatch):
    """The summary said the steps done (20) where the non-finite loss was found at step 2,
    its records written lazily; found by the save a Ctrl-C asked for, it was reported as an
    interruption."""
    from omnilearn_jax.run.loop import NonFiniteLoss

    config = smoke_config(few_buckets=True)
    config.optimizer.learning_rate = 1e30
    config.train.num_steps, config.train.log_every, config.train.eval_every = 40, 20, 20
    with pytest.raises(NonFiniteLoss) as stop:
        train_and_evaluate(config, str(tmp_path / "a"))
    recorded = [r["step"] for r in read_metrics(str(tmp_path / "a")) if "loss" in r]
    assert _summary(tmp_path / "a")["steps"] == stop.value.step == recorded[-1] < 20
    config = smoke_config(few_buckets=True)
    config.train.num_steps, config.train.checkpoint_every = 12, 5
    config.faults.nan_step = 6
    monkeypatch.setattr(Loop, "step", signal_in_step(6))
    with pytest.raises(NonFiniteLoss):
        train_and_evaluate(config, str(tmp_path / "b"))
    summary = _summary(tmp_path / "b")
    assert (summary["status"], summary["steps"], summary["resume_step"]) == ("failed", 7, 5)
    assert summary["error"].startswith("NonFiniteLoss: non-finite loss (nan) at step 7")


def test_a_resumed_run_that_completes_clears_the_stop_from_the_trackers_summary(tmp_path):
    """W&B merges a run's summary updates: the finished run kept the error, last checkpoint
    and resume step of the session a signal had stopped."""
    from omnilearn_jax.run.runlog import RunLog
    from omnilearn_jax.tracking.trackers import MemoryTracker

    tracker = MemoryTracker()
    log = RunLog(str(tmp_path), tracker=tracker)
    log.summary({"status": "interrupted", "error": "Interrupted: SIGINT", "resume_step": 3})
    log.summary({"status": "complete", "steps": 8})
    assert tracker.summaries["error"] is None and tracker.summaries["resume_step"] is None
    assert tracker.summaries["status"] == "complete"
