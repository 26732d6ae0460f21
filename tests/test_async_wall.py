"""The wall clock's async wait rule (asp/wall.py): a bound on what a worker still computing
will be charged, and the server waiting only for workers that could land first."""

import threading
import time
from concurrent.futures import Future

import numpy as np

from omnilearn_jax.asp.wall import Unmeasured, charge_floor
from omnilearn_jax.engine.faults import TimeGuard


def test_the_charge_floor_never_exceeds_what_the_guard_charges():
    """For any guard memory and any reading at least the elapsed seconds, the guard's charge
    is at least the floor; and the floor is tight: it equals the charge in some cases."""
    rng = np.random.default_rng(0)
    tight = 0
    for trial in range(2000):
        guard = TimeGuard(2, outlier_factor=float(rng.uniform(1.5, 20)))
        rows = int(rng.integers(1, 64))
        if trial % 4:  # a last good rate, sometimes with a pending outlier
            guard.per_sample[1] = rng.uniform(1e-5, 1e-3)
            guard.suspect[1] = bool(rng.integers(2))
        elapsed = float(rng.uniform(1e-6, 0.05))
        reading = elapsed * float(rng.choice([1.0, rng.uniform(1, 100)]))
        bound, limit = charge_floor(elapsed, guard.per_sample[1], rows, planted=False)
        rate = guard.per_sample[1]
        sizes = np.array([0, rows])
        charged = guard(0, np.array([0.0, reading]), sizes)[1]
        assert bound <= limit
        assert charged >= bound, (trial, elapsed, reading, rate, charged, bound)
        tight += charged == bound
    assert tight > 100  # the bound is reached, not merely safe
    assert charge_floor(0.5, 1e-3, 10, planted=True) == (0.0, 0.0)  # a planted time: any
    assert charge_floor(0.5, np.nan, 10, planted=False) == (0.5, float("inf"))


def _flight(unmeasured, k, clock):
    future = Future()
    unmeasured.add(k, clock, future)
    return future


def test_settle_returns_once_no_worker_computing_can_land_before_the_head():
    """Head: worker 1 lands at 10.0. Worker 0 started at 9.0, transfer 0.5: it lands first
    only if charged under 0.5 s. Its bound grows 0.2, 0.4, 0.6 as it computes."""
    unmeasured, measured = Unmeasured(), []
    pending = _flight(unmeasured, 0, 9.0)
    bounds = iter([0.2, 0.4, 0.6])
    calls = []

    def floor(k):
        calls.append(k)
        return next(bounds), float("inf")

    start = time.perf_counter()
    unmeasured.settle(lambda: (10.0, 1), 0.5, lambda k, c: measured.append(k), floor)
    assert calls == [0, 0, 0]  # looked again until the bound passed 0.5
    assert not pending.done() and measured == [] and 0 in unmeasured.flights
    assert time.perf_counter() - start < 5  # each look waits about what is still needed


def test_settle_waits_for_a_worker_whose_bound_cannot_pass_the_head():
    """The guard's fallback (0.3 s) is under the 0.5 s needed: only its measured time can
    tell, so the server waits for it; a planted time (limit 0) likewise."""
    for limit in (0.3, 0.0):
        unmeasured, measured = Unmeasured(), []
        pending = _flight(unmeasured, 0, 9.0)
        threading.Timer(0.05, pending.set_result, args=(0.0,)).start()
        floor = lambda k, limit=limit: (min(0.1, limit), limit)  # noqa: E731
        record = lambda k, c, out=measured: out.append((k, c))  # noqa: E731
        unmeasured.settle(lambda: (10.0, 1), 0.5, record, floor)
        assert measured == [(0, 9.0)] and not unmeasured.flights


def test_settle_ties_go_to_the_lower_worker():
    """A worker that would land exactly at the head's time lands first when its index is
    lower (the server's tie rule), so it is waited for; a higher index is not."""
    for k, waits in ((0, True), (2, False)):
        unmeasured, measured = Unmeasured(), []
        pending = _flight(unmeasured, k, 9.0)
        if waits:
            threading.Timer(0.05, pending.set_result, args=(0.0,)).start()
        floor = lambda j: (0.5, 0.5)  # noqa: E731  lands at exactly 9.0 + 0.5 + 0.5
        record = lambda j, c, out=measured: out.append(j)  # noqa: E731
        unmeasured.settle(lambda: (10.0, 1), 0.5, record, floor)
        assert measured == ([k] if waits else [])


def test_injected_waits_of_async_workers_run_side_by_side(tmp_path, monkeypatch):
    """A program that sleeps in a host callback (hetero.inject) may run in its launching
    thread on XLA:CPU: launched from the loop's thread, the workers' waits ran one after
    another (3.55 s of steps for a 0.65 s clock). Each is now launched from a thread of its
    own, as BSP's devices are."""
    import threading

    from omnilearn_jax.asp.eager import EagerServer
    from omnilearn_jax.run.job import train_and_evaluate
    from tests.test_async import _async4

    launched = []
    compute = EagerServer.compute

    def spy(self, k, params, rows, step_index, delay, *rest):
        if delay is not None:
            launched.append(threading.current_thread().name)
        return compute(self, k, params, rows, step_index, delay, *rest)

    monkeypatch.setattr(EagerServer, "compute", spy)
    config = _async4(clock="wall", train__num_steps=8, train__eval_every=100)
    config.hetero.inject = 0.001
    train_and_evaluate(config, str(tmp_path))
    assert len(launched) >= 8 and all(name.startswith("inject") for name in launched), launched
