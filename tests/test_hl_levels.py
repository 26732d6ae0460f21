"""Controllers against the paper's heterogeneity levels, through the real trainer."""

import numpy as np

from experiments.hl_levels import level_config, run_levels
from omnilearn_jax.cluster import hl_speeds, uniform_vs_balanced_reduction
from omnilearn_jax.runstore import read_metrics
from omnilearn_jax.train import train_and_evaluate


def test_p_and_pi_within_5_percent_of_oracle_at_hl2_and_hl8(tmp_path):
    names = ("static", "proportional", "pi", "oracle")
    results = run_levels((2, 8), names, steps=24, settle=12, workdir=str(tmp_path))
    for level in (2, 8):
        oracle = results[level, "oracle"]
        for name in ("proportional", "pi"):
            assert results[level, name] <= 1.05 * oracle, (level, name, results)
        reduction = 1 - oracle / results[level, "static"]
        analytic = uniform_vs_balanced_reduction(hl_speeds(level, "bsp", 4), 128)
        assert abs(reduction - analytic) < 0.01, (level, reduction, analytic)


def test_controllers_follow_the_dynamic_schedule(tmp_path):
    """HL1, 2, 4, 8, 8, 4, 2, 1, one level every 12 steps: after each change proportional's
    step time is back within 5% of the oracle's within 6 steps."""
    segment, budget = 12, 6
    runs = {}
    for name in ("proportional", "oracle"):
        config = level_config(1, name, 8 * segment)
        config.hetero.name = "schedule"
        config.hetero.levels = (1, 2, 4, 8, 8, 4, 2, 1)
        config.hetero.segment = segment
        config.hetero.unit = "steps"
        train_and_evaluate(config, str(tmp_path / name))
        runs[name] = [r for r in read_metrics(tmp_path / name) if "step_time" in r]
    p, o = runs["proportional"], runs["oracle"]
    speeds = np.array([r["speeds"] for r in o])
    changes = [t for t in range(1, len(o)) if not np.array_equal(speeds[t], speeds[t - 1])]
    assert changes == [12, 24, 36, 60, 72, 84]  # 8 -> 8 is no change
    for start in [0, *changes]:
        end = min([c for c in changes if c > start], default=len(o))
        ratios = [p[t]["step_time"] / o[t]["step_time"] for t in range(start + budget, end)]
        assert max(ratios) <= 1.05, (start, ratios)
    # The oracle knows each step's speeds; proportional must first measure the change.
    lag = [p[c]["step_time"] / o[c]["step_time"] for c in changes]
    assert min(lag) > 1.05, lag
