"""What an async controller sees: each worker's time beside the rows it was measured at."""

import numpy as np

from omnilearn_jax.run.job import train_and_evaluate
from omnilearn_jax.run.train import Trainer
from tests.test_async import hl8_config


def test_a_time_measured_under_the_previous_split_is_not_read_against_the_new_one(
    tmp_path, monkeypatch
):
    """Linear cost, no noise: a worker's time is its rows times a per-sample cost fixed by
    its speed, so every time the controller sees, over the rows it is paired with, must give
    that worker's one per-sample cost. A worker still running the rows it pulled before a
    move reported that old iteration's time beside its new rows: per-sample costs off by the
    rows' ratio (2.46x here: a 4-core worker's 80 ms for 32 rows, read as 13 rows' time); now
    such a time is withheld (0: not measured) until an iteration of the new rows reports."""
    seen = []
    observe = Trainer.observe

    def spy(self, step_index, sizes, times, speeds, epoch_end=None):
        obs = observe(self, step_index, sizes, times, speeds, epoch_end)
        seen.append((np.asarray(obs.batch_sizes), np.asarray(obs.worker_times)))
        return obs

    monkeypatch.setattr(Trainer, "observe", spy)
    config = hl8_config("proportional", 120)
    train_and_evaluate(config, str(tmp_path))
    sizes = np.stack([s for s, _ in seen[1:]])  # seen[0]: warm-up's made-up observation
    times = np.stack([t for _, t in seen[1:]])
    assert len({tuple(s) for s in sizes}) >= 2  # the split moved (the case in question)
    shown = times > 0
    per_sample = np.where(shown, times / np.maximum(sizes, 1), np.nan)
    spread = np.nanmax(per_sample, axis=0) / np.nanmin(per_sample, axis=0)
    assert np.all(spread < 1 + 1e-5), spread
    # Withheld only for a while: every worker is seen at most decisions.
    assert shown.mean(axis=0).min() > 0.5, shown.mean(axis=0)
