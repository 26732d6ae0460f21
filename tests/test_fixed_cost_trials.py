"""A right move beside a fixed cost is not undone to the uniform split (P and PI).

On the paper's HL2 cluster with a fixed cost of 4-8 time units beside a compute of 2.7 (the
wall clock's launches, reduction and update), a move answers its rows' plan at R of about 0.3,
near `response.ANSWERED`. P and PI decide after one or two samples, and their trial took the
mean of those samples before the move as exact: two samples low by chance made the right move
read as unanswered, it was undone and the uniform split held for the trial's hold, 1.12-1.20x
the oracle's step (benchmarks/fixed_cost_splits.py, seed 2). The refusal now counts that
mean's standard error too, as predictive's trials do.
"""

import pytest

from benchmarks.fixed_cost_splits import one


@pytest.mark.parametrize(
    "name, overhead, noise",
    [("proportional", 4.0, 0.02), ("pi", 4.0, 0.05), ("proportional", 8.0, 0.05)],
)
def test_a_right_move_beside_a_fixed_cost_stands(name, overhead, noise):
    run = one(name, overhead, noise, seed=2, steps=60)
    assert not run["uniform"]  # each ended uniform, at 1.196x, 1.196x and 1.123x the oracle
    assert run["ratio"] < 1.10  # now 1.065, 1.028 and 1.088
