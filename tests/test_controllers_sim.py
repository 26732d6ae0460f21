"""The simulation and its control metrics: definitions checked on hand-made traces."""

import jax
import jax.numpy as jnp
import numpy as np

import controllers
from controllers import metrics, oracle, sim
from tests.helpers import assert_mean_one_lognormal

_control_metrics = jax.jit(metrics.control_metrics, static_argnames=("tolerance", "start", "tail"))
_simulate = jax.jit(
    sim.simulate, static_argnums=0, static_argnames=("global_batch", "num_steps", "epoch_length")
)
_optimal = jax.jit(metrics.optimal_step_times, static_argnames=("global_batch",))


def _trace(sizes, model_times):
    sizes = jnp.asarray(sizes, jnp.int32)
    model_times = jnp.asarray(model_times, jnp.float32)
    speeds = jnp.ones_like(model_times)
    return sim.Trace(sizes, model_times, model_times, speeds)


def test_metric_definitions():
    # Optimum 1.0 s each step. Balance: 2.0, 1.2, 0.9 (!), 1.04, 1.2, 1.0, 1.0, 1.0
    slowest = [2.0, 1.2, 0.9, 1.04, 1.2, 1.0, 1.0, 1.0]
    times = [[s, 0.5] for s in slowest]
    sizes = [[10, 10], [4, 16], [2, 18], [3, 17], [3, 17], [3, 17], [3, 17], [3, 17]]
    m = _control_metrics(_trace(sizes, times), jnp.ones(8), tail=2)
    assert int(m.settling_steps) == 5  # the last step above 1.05 is step 4
    assert int(m.adjustments) == 3  # steps 1, 2, 3
    # Worker 0 moves 10 -> 3 (7 samples) and dips to 2: 1/7 past its final size.
    assert float(m.overshoot) == np.float32(1 / 7)
    assert float(m.steady_state_imbalance) == np.float32(1.0 / 0.75)


def test_settling_counts_from_start():
    balance = jnp.array([1.5, 1.5, 1.0, 1.0, 1.3, 1.0, 1.0])
    times = jnp.stack([balance, balance], -1)
    m = _control_metrics(_trace(jnp.full((7, 2), 4), times), jnp.ones(7), start=4)
    assert int(m.settling_steps) == 1 and int(m.adjustments) == 0


def test_optimal_step_times_track_speed_changes():
    plant = sim.paper_plant(8, changes=((3, (6.0, 6.0, 4.0, 8.0)),))
    controller = controllers.make("static")
    trace = _simulate(controller, plant, global_batch=128, num_steps=5)
    optimum = np.asarray(_optimal(trace, plant, global_batch=128))
    np.testing.assert_allclose(optimum[:3], 86 / 32)  # see test_oracle_is_optimal...
    np.testing.assert_allclose(optimum[3:], 43 / 8)  # 32/32/21/43: the 8-core worker is slowest


def test_noise_is_seeded_unbiased_and_vmaps_over_seeds():
    plant = sim.paper_plant(1, noise=0.3)
    controller = controllers.make("static")
    run = jax.jit(
        jax.vmap(
            lambda key: sim.simulate(controller, plant, global_batch=128, num_steps=1000, key=key)
        )
    )
    keys = jax.random.split(jax.random.key(3), 2)
    first, again = run(keys), run(keys)
    np.testing.assert_array_equal(first.worker_times, again.worker_times)
    assert not np.array_equal(first.worker_times[0], first.worker_times[1])
    # float32 draws; 8000 of them: the -sigma^2 / 2 correction is 13 standard errors.
    ratio = np.asarray(first.worker_times / first.model_times, np.float64)
    assert_mean_one_lognormal(ratio, 0.3)


def test_pi_beats_p_under_fixed_overhead_vmapped_over_gains():
    """0.5 s per step whatever the batch: t is not proportional to b, so the P move falls
    short and its dead-band then holds a residual; the integral (ki > 0; 0.1 is the default)
    removes it. One compile serves every gain."""
    plant = sim.paper_plant(8, overhead=0.5)

    def final_imbalance(ki):
        controller = controllers.make("pi", ki=ki, b_min=0, b_max=0)
        trace = sim.simulate(controller, plant, global_batch=128, num_steps=150)
        return metrics.imbalance(trace.model_times[-1], trace.batch_sizes[-1])

    result = np.asarray(jax.jit(jax.vmap(final_imbalance))(jnp.array([0.0, 0.1, 0.3])))
    # ki = 0 is plain P (test_pi_without_integral_is_proportional), stuck in its dead-band;
    # integral action closes the gap (the integer optimum here is 1.018).
    assert result[0] > 1.03 and result[1] < 1.025 and result[2] < 1.025


def test_epoch_cadence_adjusts_only_at_epoch_end():
    plant = sim.paper_plant(8)
    controller = controllers.make("proportional", every=0, b_min=0, b_max=0)
    trace = _simulate(controller, plant, global_batch=128, num_steps=40, epoch_length=10)
    sizes = np.asarray(trace.batch_sizes)
    moves = np.flatnonzero(np.any(sizes[1:] != sizes[:-1], axis=-1)) + 1
    assert moves.tolist() == [10]  # decided on step 9 (the epoch's last), used from step 10


def test_oracle_reads_the_plants_true_curve():
    """A plant with a fixed cost and a 3x memory jump past 64 rows on the fastest worker: the
    oracle's solver on the plant's table (what simulate hands the oracle, and what the
    metrics' optimum solves) gives the brute-force optimum of the true cost, with the fast
    worker at 64 rows, not the 99 a linear model would give it."""
    plant = sim.paper_plant(
        8, curve=((0.0, 128.0), (0.08, 1.36)), limits=(0, 0, 0, 64), limit_factor=3.0
    )
    table = sim.plant_table(plant, plant.speeds[0], 128)
    lo, hi = controllers.resolve_bounds(4, 128, 1, 0)
    sizes = np.asarray(jax.jit(oracle.solve_min_max)(table, lo, hi))
    table = np.asarray(table)
    a, b, c = np.meshgrid(np.arange(1, 64), np.arange(1, 64), np.arange(1, 40), indexing="ij")
    d = 128 - a - b - c
    slowest = np.maximum.reduce(
        [table[0, a], table[1, b], table[2, c], table[3, np.clip(d, 0, 128)]]
    )
    assert sizes.sum() == 128 and sizes[3] == 64
    assert table[np.arange(4), sizes].max() == slowest[d >= 1].min()


def test_bad_plants_and_benchmark_arguments_are_one_line(capsys):
    """A level without a paper cluster was a bare KeyError, a change of the wrong length the
    raw "All input arrays must have the same shape", decreasing knots were interpolated as
    nonsense; benchmarks.controller_sim could time neither predictive nor a plug-in."""
    import pytest

    from benchmarks import controller_sim

    with pytest.raises(
        ValueError, match=r"no paper cluster level 3; levels \(ints\): \[1, 2, 4, 8\]"
    ):
        sim.paper_plant(3)
    with pytest.raises(ValueError, match=r"no paper cluster level '8'; levels \(ints\)"):
        sim.paper_plant("8")  # it said "no paper cluster HL8", which exists
    # A zero, negative or NaN speed gave inf, negative or NaN times without a word; a speed per
    # worker as a scalar or a matrix, and no steps, failed deep inside the simulation.
    for speeds in ([1.0, 0.0, 2.0], [1.0, -1.0, 2.0], [1.0, float("nan"), 2.0]):
        with pytest.raises(ValueError, match="speeds must be finite and > 0"):
            sim.make_plant(speeds)
    with pytest.raises(ValueError, match="speeds must be finite and > 0"):
        sim.make_plant([1.0, 2.0], changes=((5, [1.0, 0.0]),))
    for speeds in (1.0, [[1.0, 2.0], [3.0, 4.0]]):
        with pytest.raises(ValueError, match="speeds must be a list of one speed a worker"):
            sim.make_plant(speeds)
    with pytest.raises(ValueError, match="noise .* must be >= 0, got -0.1"):
        sim.make_plant([1.0, 2.0], noise=-0.1)
    plant, static = sim.make_plant([1.0, 2.0]), controllers.make("static")
    with pytest.raises(ValueError, match="num_steps must be an int >= 1, got 0"):
        sim.simulate(static, plant, global_batch=8, num_steps=0)
    for sizes in ([4, 4, 0], [5, 4]):
        with pytest.raises(ValueError, match="sizes must be 2 nonnegative sizes summing to"):
            sim.simulate(static, plant, global_batch=8, num_steps=3, sizes=jnp.array(sizes))
    with pytest.raises(ValueError, match="the speed change at step 5 gives 3 speeds for 4"):
        sim.make_plant([1.0] * 4, changes=((5, [1.0] * 3),))
    with pytest.raises(ValueError, match="knot batch sizes must increase"):
        sim.make_plant([1.0] * 4, curve=((0.0, 64.0, 32.0), (0.0, 1.0, 2.0)))
    for argv, message in [
        (["--steps", "0"], "--steps and --workers must be >= 1"),
        (["--controllers", "nope"], "unknown controller 'nope'"),
        (["--plugin", "no_such_module_here"], "cannot import it"),
    ]:
        with pytest.raises(SystemExit):
            controller_sim.main(argv)
        assert message in capsys.readouterr().err
    controller_sim.main(
        ["--steps", "20", "--workers", "4", "--controllers", "predictive,damped",
         "--plugin", "experiments.examples.damped"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert "   predictive:" in out and "       damped:" in out and "steps/s" in out


def test_control_metrics_refuse_an_empty_window():
    import pytest

    from controllers.metrics import control_metrics

    plant = sim.paper_plant(8)
    trace = sim.simulate(controllers.make("static"), plant, global_batch=128, num_steps=20)
    optimum = jnp.ones(20)
    with pytest.raises(
        ValueError, match=r"start must be a step of the trace, in \[0, 20\), got 30"
    ):
        control_metrics(trace, optimum, start=30)
    with pytest.raises(ValueError, match="tail must be >= 1 steps, got 0"):
        control_metrics(trace, optimum, tail=0)
