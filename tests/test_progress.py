"""Start-up lines come before the slow parts, and the ETA leaves the first step's compiles out."""

import re

import pytest

from omnilearn_jax.run.job import train_and_evaluate
from omnilearn_jax.run.loop import Loop
from tests.test_train import smoke_config


def test_eta_starts_after_the_first_step(tmp_path, monkeypatch, capsys):
    """On a planted clock (the loop's perf_counter: a first step of 4 s, its compiles, then
    0.1 s a step), the ETA at step 10 of 40 is the 30 steps left at 0.1 s: 3 s exactly.
    Counting the compile it would be 4.9 s / 10 steps * 30 = 15 s. (It had timed real steps
    and asserted at most 3 s, which a loaded machine could break with the right ETA.)"""
    from omnilearn_jax.run import loop as loop_module

    config = smoke_config()
    config.train.num_steps, config.train.log_every, config.train.eval_every = 40, 10, 40
    step, now = Loop.step, [0.0]

    def planted(self, index, cstate, sizes):
        now[0] += 4.0 if index == 0 else 0.1
        return step(self, index, cstate, sizes)

    class Clock:
        @staticmethod
        def perf_counter() -> float:
            return now[0]

    monkeypatch.setattr(Loop, "step", planted)
    monkeypatch.setattr(loop_module, "time", Clock)
    train_and_evaluate(config, str(tmp_path))
    out = capsys.readouterr().out.splitlines()
    compiling = next(i for i, line in enumerate(out) if line.startswith("compiling the mlp"))
    training = next(i for i, line in enumerate(out) if line.startswith("training mlp"))
    assert compiling < training
    first = next(line for line in out if line.startswith("step 10/40"))
    assert first.endswith("wall 0m05s ETA 0m03s"), first  # 4.9 s in, 30 steps of 0.1 s left


def test_each_progress_line_is_said_once_with_its_own_steps_loss(tmp_path, monkeypatch, capsys):
    """A flush between evaluations writes only computed records (`Runner.due`), so a step's
    progress line may wait for its record (planted: steps 5 and 15 not computed at their
    first one and two flushes): every line still comes once, in order, with that step's own
    loss and clock as the run store has them, and before the evaluation of its step."""
    from omnilearn_jax.run.loop import Runner
    from omnilearn_jax.run.runstore import read_metrics

    due, late = Runner.due, {5: 1, 15: 2}

    def planted(self, wait, value, upto=0):  # step k's record not computed yet
        pending = {r[0] for r in self.pending}
        for k in late:
            if not wait and late[k] > 0 and k in pending and k <= (upto or k):
                late[k] -= 1
                upto = k - 1  # only the records before it are due
        return due(self, wait, value, upto)

    monkeypatch.setattr(Runner, "due", planted)
    config = smoke_config()
    config.train.num_steps, config.train.log_every, config.train.eval_every = 20, 5, 10
    train_and_evaluate(config, str(tmp_path))
    assert late == {5: 0, 15: 0}  # the planted delays were taken
    out = capsys.readouterr().out.splitlines()
    lines = [line for line in out if re.match(r"step \d+/20 ", line)]
    assert [int(line.split()[1].split("/")[0]) for line in lines] == [5, 10, 15, 20]
    train = {r["step"]: r for r in read_metrics(str(tmp_path)) if "accuracy" in r}
    assert sorted(train) == list(range(1, 21))
    for line in lines:
        step = int(line.split()[1].split("/")[0])
        assert float(line.split()[3]) == round(train[step]["loss"], 4), line
        assert line.split("clock ")[1].startswith(f"{train[step]['time']:.2f}s"), line
    for step in (10, 20):
        said = out.index(next(line for line in lines if line.startswith(f"step {step}/")))
        assert said < next(i for i, line in enumerate(out) if f"eval step {step}:" in line)


def test_a_resumed_run_says_each_line_once_when_a_record_is_late(tmp_path, monkeypatch, capsys):
    """A run resumed at step 4 whose step-5 record is not computed at its first flush (one
    line a step) says steps 5 to 12 once each, in order: the lines wait on the records
    written since the resume, not on a record of the first session."""
    from omnilearn_jax.run.loop import Runner

    config = smoke_config()
    config.train.num_steps, config.train.log_every, config.train.eval_every = 12, 1, 100
    config.train.checkpoint_every = 4
    step, due, held = Loop.step, Runner.due, []

    def crash(self, index, cstate, sizes):
        if index == 6:
            raise RuntimeError("planted crash")
        return step(self, index, cstate, sizes)

    monkeypatch.setattr(Loop, "step", crash)
    with pytest.raises(RuntimeError, match="planted crash"):
        train_and_evaluate(config, str(tmp_path))
    monkeypatch.setattr(Loop, "step", step)
    capsys.readouterr()

    def late(self, wait, value, upto=0):  # step 5's record is not computed at first
        if not wait and not held and self.pending and self.pending[0][0] == 5:
            held.append(5)
            return []
        return due(self, wait, value, upto)

    monkeypatch.setattr(Runner, "due", late)
    train_and_evaluate(config, str(tmp_path))
    out = capsys.readouterr().out.splitlines()
    assert held == [5]
    said = [int(line.split()[1].split("/")[0]) for line in out if re.match(r"step \d+/12 ", line)]
    assert said == list(range(5, 13))


def test_records_are_written_when_progress_lines_are_far_apart(tmp_path, monkeypatch):
    """With log_every, eval_every and checkpoint_every beyond the run, every record waited for
    the end in memory (200 MB a 10,000 steps of the smoke config; metrics.jsonl empty until
    then). At PENDING_LIMIT unwritten records the loop flushes (here 4, each record taken as
    computed so that the flush writes them all)."""
    from omnilearn_jax.run import loop
    from omnilearn_jax.run.loop import Runner

    monkeypatch.setattr(loop, "PENDING_LIMIT", 4)
    due, held = Runner.due, []
    monkeypatch.setattr(
        Runner, "due", lambda self, wait, value, upto=0: due(self, True, value, upto)
    )
    step = Loop.step

    def counted(self, index, cstate, sizes):
        held.append(len(self.pending))
        return step(self, index, cstate, sizes)

    monkeypatch.setattr(Loop, "step", counted)
    config = smoke_config()
    config.train.num_steps = 30
    config.train.log_every = config.train.eval_every = config.train.checkpoint_every = 1000
    train_and_evaluate(config, str(tmp_path))
    assert len(held) == 30 and max(held) == 3, held
