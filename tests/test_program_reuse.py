"""A process's later runs of a config reuse the programs its earlier runs traced (memo.Kept):
the model's apply, the optimiser, the state's shape and so every jitted program over them are
the same objects, and jax.jit caches by function."""

from omnilearn_jax.engine import step
from omnilearn_jax.run.train import Trainer
from tests.test_train import smoke_config


def test_a_second_trainer_of_a_config_traces_no_step_program(tmp_path, monkeypatch):
    traced = []
    block_sums = step.block_sums

    def counted(*args):
        traced.append(args[1])  # the chunk
        return block_sums(*args)

    monkeypatch.setattr(step, "block_sums", counted)  # read when a local program is traced
    config = smoke_config(few_buckets=True)
    config.model.hidden = 24  # a model no other test of this process has traced
    first = Trainer(config, str(tmp_path / "a"))
    assert first.compile_variants() > 0 and traced
    count = len(traced)
    second = Trainer(config, str(tmp_path / "b"))
    assert second.compile_variants() > 0 and len(traced) == count  # compiled, not traced
    assert second.engine.steps._programs() is first.engine.steps._programs()
    config.model.hidden = 40  # another model (none of this process's tests has it, unlike
    # the smoke config's 32, traced before this test when another file ran first)
    third = Trainer(config, str(tmp_path / "c"))
    third.compile_variants()
    assert len(traced) > count
    assert third.engine.steps._programs() is not first.engine.steps._programs()
