"""The held-out evaluation's definitions (benchmarks/controller_heldout.py), on hand-made data."""

import numpy as np

from benchmarks import controller_heldout as heldout
from benchmarks import controller_plants as plants


def test_checkpoints_are_one_past_the_deciding_step():
    steps = heldout.STEPS
    # One decision on every third step, from step 2 (predictive with settle = 3).
    decisions = np.cumsum((np.arange(steps) % 3) == 2)[None, :]
    at = heldout.checkpoints(decisions)
    # The 5th decision is made on step 14, so its split is used from step 15.
    assert at["after_5"].tolist() == [15]
    assert at["after_60"].tolist() == [180]
    # 83 decisions by step 249; the 88th (5 after the change) is made on step 263.
    assert at["after_change_5"].tolist() == [264]


def test_families_are_seeded_and_disjoint():
    tuning = plants.family(0, 8, change=heldout.CHANGE)
    again = plants.family(0, 8, change=heldout.CHANGE)
    held = plants.family(1, 8, change=heldout.CHANGE)
    assert tuning == again
    assert not {tuple(p["speeds"]) for p in tuning} & {tuple(p["speeds"]) for p in held}
    for plant in tuning + held:
        assert all(2.0 <= s <= 32.0 for s in plant["speeds"])
        assert 0.0 <= plant["noise"] <= 0.2
        if plant["cliff"]:
            # The cliff sits below the fastest worker's proportional share, so it binds.
            fastest = int(np.argmax(plant["speeds"]))
            share = 128 * plant["speeds"][fastest] / sum(plant["speeds"])
            assert 0 < plant["limits"][fastest] < share
