"""PI's integral sums to zero, so the split it asks for is one the rows can take."""

import jax
import numpy as np

import controllers
from controllers import sim
from experiments.curves import ablate


def test_pi_integral_sums_to_zero_and_the_split_stops_hunting():
    """The cost curves' fixed-cost plant at HL2 with 1 % noise (modelled, key 1): two equal
    workers whose targets both lie near x.6 rows. Integrating only the errors beyond the
    noise, the integrals grew on every side (their sum reached 168 rows), `wanted` summed
    to 135 of 128 rows, and the split traded a row between the equal workers on 163 of steps
    100-299; now the integral sums to zero and the split changes on 8."""
    times, limit = ablate.curves()["fixed"]
    plant = ablate.plant(times, limit, "HL2", 300, 0.01)
    out, integral = sim.simulate(
        controllers.make("pi", **ablate.BOUNDS),
        plant,
        global_batch=ablate.B,
        num_steps=300,
        key=jax.random.key(1),
        record=lambda s: s.integral,
    )
    sizes, integral = np.asarray(out.batch_sizes), np.asarray(integral)
    assert np.abs(integral.sum(axis=1)).max() < 1e-3, np.abs(integral.sum(axis=1)).max()
    changes = int((sizes[100:] != sizes[99:-1]).any(axis=1).sum())
    assert changes <= 16, changes
