"""`controller.persist` follows the clock unless a config sets it (config/schema.py).

On the virtual clock a run's controller gets persist 0: the modelled times have no host
bursts to guard against, so persist only held every decision back. On the wall clock it is
DEFAULT_PERSIST (0.1 s); a value a config sets is kept on either clock.
"""

import pytest

from controllers.tracking import DEFAULT_PERSIST
from omnilearn_jax.config import schema
from omnilearn_jax.run.job import train_and_evaluate
from omnilearn_jax.run.runstore import read_metrics
from tests.test_train import smoke_config


@pytest.mark.parametrize(
    ("clock", "given", "want"),
    [
        ("virtual", None, 0.0),
        ("wall", None, DEFAULT_PERSIST),
        ("virtual", 0.1, 0.1),  # set explicitly, even to the wall clock's default: kept
        ("virtual", 0.05, 0.05),
        ("wall", 0, 0.0),
    ],
)
def test_the_controller_persist_is_the_clocks_unless_the_config_sets_it(clock, given, want):
    config = smoke_config()
    config.clock, config.controller.name = clock, "proportional"
    if given is not None:
        config.controller.persist = given
    assert config.controller.persist == (schema.PERSIST_BY_CLOCK if given is None else given)
    assert schema.controller_section(config)["persist"] == want


def _first_move_and_total_time(tmp_path, persist):
    """A 6-step virtual-clock run at HL8 (steps of 32.5 ms on the uniform split, 20 ms and
    then 15 ms once it follows the speeds): its first non-uniform step, its virtual time."""
    config = smoke_config()
    config.hetero.name, config.hetero.level = "hl", 8
    config.controller.name = "proportional"
    config.train.num_steps = config.train.eval_every = 6
    config.train.checkpoint_every = 0
    if persist is not None:
        config.controller.persist = persist
    summary = train_and_evaluate(config, str(tmp_path))
    records = [r for r in read_metrics(tmp_path) if "batch_sizes" in r]
    moved = [r["step"] for r in records if len(set(r["batch_sizes"])) > 1]
    return moved[0], summary["total_time"]


def test_a_virtual_clock_run_follows_a_speed_difference_two_steps_sooner(tmp_path):
    """By the clock (persist 0) the split moves once the noise is known (2 samples, step 3);
    with persist 0.1 s the steps must also span 0.1 s (4 steps of 32.5 ms, step 5)."""
    by_clock = _first_move_and_total_time(tmp_path / "by_clock", None)
    held = _first_move_and_total_time(tmp_path / "held", 0.1)
    assert by_clock[0] == 3 and held[0] == 5
    # Steps 3 and 4 took 20 ms instead of 32.5 ms, step 6 15 ms instead of 20 ms.
    assert by_clock[1] == pytest.approx(0.1443, abs=1e-4)
    assert held[1] - by_clock[1] == pytest.approx(2 * 0.0125 + 0.005, abs=1e-9)
