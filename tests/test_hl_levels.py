"""Controllers against the paper's heterogeneity levels, through the real trainer.

The controllers' dynamics (settling, adjustments, jumps, PI against P) are proven on the
controller-only simulation (test_controllers_policies.py, test_controllers_sim.py); this is
the one trainer-level proof that the trainer feeds them the same plant: the schedule's
speeds, the virtual clock and the per-step decisions.
"""

import numpy as np

from experiments.hl_levels import level_config
from omnilearn_jax.cluster import hl_speeds
from omnilearn_jax.run.job import train_and_evaluate
from omnilearn_jax.run.runstore import read_metrics


def test_controllers_follow_the_dynamic_schedule(tmp_path):
    """HL1, 2, 4, 8, 8, 4, 2, 1, one level every 12 steps: the oracle's step time is the
    balanced optimum of each level from its first step; after each change proportional's
    step time is back within 5% of the oracle's within 6 steps."""
    segment, budget, levels = 12, 6, (1, 2, 4, 8, 8, 4, 2, 1)
    runs = {}
    for name in ("proportional", "oracle"):
        config = level_config(1, name, 8 * segment)
        config.hetero.name = "schedule"
        config.hetero.levels = levels
        config.hetero.segment = segment
        config.hetero.unit = "steps"
        train_and_evaluate(config, str(tmp_path / name))
        runs[name] = [r for r in read_metrics(tmp_path / name) if "step_time" in r]
    p, o = runs["proportional"], runs["oracle"]
    assert len(p) == len(o) == 8 * segment
    speeds = np.array([r["speeds"] for r in o])
    changes = [t for t in range(1, len(o)) if not np.array_equal(speeds[t], speeds[t - 1])]
    assert changes == [12, 24, 36, 60, 72, 84]  # 8 -> 8 is no change
    # Linear cost, free communication: a perfect split takes B * cost / sum(speeds); the
    # integer oracle is at most 1% above it (HL8: 86/32 against 128/48 per unit cost).
    cost = config.cost.per_sample_cost
    for t, level in enumerate(np.repeat(levels, segment)):
        np.testing.assert_array_equal(speeds[t], hl_speeds(level, "bsp", 4))
        optimum = 128 * cost / speeds[t].sum()
        assert optimum <= o[t]["step_time"] <= 1.01 * optimum, (t, o[t]["step_time"], optimum)
    for start in [0, *changes]:
        end = min([c for c in changes if c > start], default=len(o))
        ratios = [p[t]["step_time"] / o[t]["step_time"] for t in range(start + budget, end)]
        assert max(ratios) <= 1.05, (start, ratios)
    # The oracle knows each step's speeds; proportional must first measure the change.
    lag = [p[c]["step_time"] / o[c]["step_time"] for c in changes]
    assert min(lag) > 1.05, lag


def test_settling_past_the_steps_is_refused_and_a_rerun_of_other_steps_gets_its_own_runs(
    tmp_path, monkeypatch, capsys
):
    """--steps 20 with the default --settle 30 ran 16 runs, then printed a table of NaN; a
    rerun with other --steps into the same workdir met the first run's checkpoints."""
    import pytest

    from experiments import hl_levels

    with pytest.raises(SystemExit):
        hl_levels.main(["--steps", "20", "--workdir", str(tmp_path)])
    assert "--settle (30) must be in [0, --steps) (20)" in capsys.readouterr().err
    made = []
    monkeypatch.setattr(hl_levels, "settled_step_time", lambda *a: 1.0)
    monkeypatch.setattr(
        "omnilearn_jax.run.job.train_and_evaluate", lambda config, run_dir: made.append(run_dir)
    )
    for steps in (4, 6):
        hl_levels.run_levels((2,), ("static",), steps=steps, settle=1, workdir=str(tmp_path))
    assert made == [str(tmp_path / "hl2_static_4steps"), str(tmp_path / "hl2_static_6steps")]
