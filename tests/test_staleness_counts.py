"""An async run's staleness summary from counts (asp/staleness.py): the figures every update's
list gave, in memory and checkpoint size bounded by the largest staleness."""

import numpy as np

from omnilearn_jax.asp.staleness import StalenessCounts


def listed(per_worker):  # the summary as the loop computed it from every update's staleness
    every = [s for per in per_worker for s in per]
    return {
        "staleness_mean": float(np.mean(every)) if every else 0.0,
        "staleness_max": int(max(every, default=0)),
        "staleness_mean_per_worker": [float(np.mean(p)) if p else None for p in per_worker],
        "staleness_histogram": np.bincount(every, minlength=1).tolist() if every else [],
    }


def test_counts_give_the_lists_summary_exactly_and_stay_small():
    rng = np.random.default_rng(0)
    per_worker = [rng.poisson(lam, 25_000).tolist() for lam in (0.5, 2.0, 6.0)] + [[]]
    counts = StalenessCounts(4)
    for k, values in enumerate(per_worker):
        for s in values:
            counts.add(k, s)
    assert counts.summary() == listed(per_worker)
    assert counts.summary()["staleness_mean_per_worker"][3] is None
    # 75,000 updates, held as one count a staleness value seen
    assert [len(c) for c in counts.state()] == [max(v) + 1 if v else 0 for v in per_worker]
    assert sum(map(sum, counts.state())) == 75_000


def test_a_checkpoint_of_either_form_restores_the_same_summary():
    per_worker = [[0, 1, 1, 3], [2, 2], []]
    old = StalenessCounts(3)
    old.load({"staleness": per_worker})  # checkpoints before the counts: every value
    new = StalenessCounts(3)
    new.load({"staleness_counts": old.state()})
    assert old.summary() == new.summary() == listed(per_worker)
    assert old.summary()["staleness_histogram"] == [1, 2, 2, 1]


def test_no_update_yet_is_an_empty_histogram():
    assert StalenessCounts(2).summary() == listed([[], []])
