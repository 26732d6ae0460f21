"""The cost-curves study's plants and settle time (experiments/curves/ablate.py)."""

import numpy as np

from experiments.curves import ablate


def test_the_dynamic_cliff_is_on_the_worker_fastest_at_its_fastest():
    """The first segment (HL1) has four equal speeds: argmax over it put the 64-row cliff on
    worker 0, slow in every later segment, which never took 64 rows (no cliff measured)."""
    times, limit = ablate.curves()["cliff"]
    for level in ("dynamic", "HL2", "HL4", "HL8"):
        assert ablate.plant(times, limit, level, 50, 0.0).limits.tolist() == [0, 0, 0, 64]


def test_settle_counts_from_each_speed_change_to_the_next():
    """A static level was cut into eight 50-step slices (its settle time divided by eight, a
    late excursion reset only its slice); the dynamic schedule's HL8 -> HL8 is no change."""
    assert ablate.changes("HL4", 50) == [0]
    assert ablate.changes("dynamic", 50) == [0, 50, 100, 150, 250, 300, 350]
    ratio = np.ones(400)
    ratio[:19] = 1.1  # settles at step 19 ...
    ratio[339] = 1.05  # ... and leaves the band again at step 339: settled at 340
    assert ablate.settling(ratio, [0]) == 340
    assert ablate.settling(ratio, [0, 200]) == (19 + 140) / 2
    ratio[-1] = 1.05  # never stays within to the end
    assert np.isnan(ablate.settling(ratio, [0]))
