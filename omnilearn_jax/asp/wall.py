"""Async on the wall clock: gradients in flight whose compute time is not measured yet.

With `clock=wall` an update lands at (clock when its worker started) + (its charged compute
seconds) + (the parameter transfer), and the server applies updates in that order. The host
need not wait for every gradient it started before it applies the next update: it waits only
while some worker still computing could land before the earliest update whose time is known.

What a worker will be charged is bounded below while it computes. The measured-time guard
(faults.TimeGuard) either accepts the reading, which is at least the compute seconds elapsed
so far, or replaces it by the worker's reference rate times its rows, which is fixed while
the worker computes (the guard's memory is per worker, and a worker has one gradient in
flight); so the charge is at least min(elapsed, that fallback). A planted time
(`faults.bad_times`) can be anything, so such a worker is waited for. The elapsed seconds
alone are not a bound: an earlier version used them as one, and under load the guard's
smaller fallback let a later update be applied first (2026-12-01). Workers compute at the
same time, each on its own device, and the order of updates is exactly the order of their
charged times.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait

Measured = Callable[[int, float], None]  # (worker, clock at its start) -> None
Floor = Callable[[int], tuple[float, float]]  # worker -> (charge bound now, its limit)


def charge_floor(elapsed: float, per_sample: float, rows: int, planted: bool):
    """(a lower bound of the compute seconds a worker still computing will be charged, the
    largest value that bound can reach before its time is measured), from the seconds it has
    computed so far, its guard's reference rate (NaN: none yet), its rows, and whether a time
    is planted for it. The guard (faults.TimeGuard) accepts the reading, at least `elapsed`,
    or replaces it by rate * rows; with no rate yet, a positive reading is accepted."""
    if planted:
        return 0.0, 0.0
    fallback = float(per_sample * float(rows))  # as the guard computes it
    if not math.isfinite(fallback):
        fallback = math.inf
    return min(elapsed, fallback), fallback


class Unmeasured:
    """Worker -> (clock at its start, its future)."""

    def __init__(self):
        self.flights: dict[int, tuple[float, Future]] = {}

    def add(self, k: int, clock: float, future: Future) -> None:
        self.flights[k] = (clock, future)

    def settle(
        self,
        first: Callable[[], tuple | None],
        comm: float,
        measured: Measured,
        floor: Floor,
    ) -> None:
        """Calls `measured(k, clock at its start)` for each worker whose time is known, until
        no worker still computing could land before the earliest measured event `first()`
        ((finish, worker, ...), or None: then it waits for one). `floor(k)`: a lower bound
        of the compute seconds worker k will be charged, as known now, and the largest value
        that bound can reach before k's time is measured."""
        while self.flights:
            done = [k for k, (_, f) in self.flights.items() if f.done()]
            for k in done:
                self._done(k, measured)
            if done:
                continue
            head = first()
            if head is None:
                wait([f for _, f in self.flights.values()], return_when=FIRST_COMPLETED)
                continue
            early, timeout = [], None
            for k, (clock, future) in self.flights.items():
                bound, limit = floor(k)
                if (clock + (bound + comm), k) >= head[:2]:
                    continue  # its charge, at least `bound`, lands it after the head
                early.append(future)
                short = head[0] - clock - comm - bound  # elapsed seconds it still needs
                if clock + (limit + comm) > head[0]:  # its bound can get there: look again
                    timeout = short if timeout is None else min(timeout, short)
            if not early:
                return
            wait(early, timeout=None if timeout is None else max(timeout, 2e-5),
                 return_when=FIRST_COMPLETED)  # fmt: skip

    def settle_all(self, measured: Measured) -> None:
        for k in list(self.flights):
            self.flights[k][1].result()
            self._done(k, measured)

    def _done(self, k: int, measured: Measured) -> None:
        clock, _ = self.flights.pop(k)
        measured(k, clock)
