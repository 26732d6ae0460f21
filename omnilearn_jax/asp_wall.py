"""Async on the wall clock: gradients in flight whose compute time is not measured yet.

With `clock=wall` an update lands at (clock when its worker started) + (its measured compute
seconds) + (the parameter transfer), and the server applies updates in that order. The host
need not wait for every gradient it started before it applies the next update: an update
cannot land before start + transfer, so the server waits only for the workers that started
early enough to land before the earliest measured update. Their elapsed compute time is not
a lower bound of the time they will be charged: the measured-time guard may replace a
far-off reading by a smaller one from the worker's last good rate, and planted faults may
replace it by anything (an elapsed bound let a later update be applied first under load,
2026-12-01). So workers compute at the same time, each on its own device, and the order of
updates is exactly the order of their accepted times.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait

Measured = Callable[[int, float], None]  # (worker, clock at its start) -> None


class Unmeasured:
    """Worker -> (clock at its start, its future)."""

    def __init__(self):
        self.flights: dict[int, tuple[float, Future]] = {}

    def add(self, k: int, clock: float, future: Future) -> None:
        self.flights[k] = (clock, future)

    def settle(self, first: Callable[[], tuple | None], comm: float, measured: Measured) -> None:
        """Calls `measured(k, clock at its start)` for each worker whose time is known, until
        no worker still computing could land before the earliest measured event `first()`
        ((finish, worker, ...), or None: then it waits for one)."""
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
            early = [f for k, (clock, f) in self.flights.items() if (clock + comm, k) < head[:2]]
            if not early:
                return
            wait(early, return_when=FIRST_COMPLETED)

    def settle_all(self, measured: Measured) -> None:
        for k in list(self.flights):
            self.flights[k][1].result()
            self._done(k, measured)

    def _done(self, k: int, measured: Measured) -> None:
        clock, _ = self.flights.pop(k)
        measured(k, clock)
