"""A staleness-free control for async training (issue 28, point 5).

The same schedule as an async run on the virtual clock: the same update order, the same
workers, the same rows and update sizes, the same weights; but each worker's gradient is
computed when the server applies it, at the server's current parameters, instead of at the
parameters it pulled when it started. So an arm's accuracy with this control differs from its
async accuracy by what staleness costs, and the control's accuracy differs between arms by
what the update sizes and order cost.

On the virtual clock the schedule does not depend on parameter values (asp/loop.py), so
moving the gradient's computation from `start` to `apply` changes nothing but the parameters
it is taken at. It runs event by event (asp/eager.py's executor), the reference execution.
"""

from __future__ import annotations

from contextlib import contextmanager

from omnilearn_jax.asp import loop
from omnilearn_jax.asp.eager import EagerServer


class FreshServer(EagerServer):
    """EagerServer whose workers take their gradient at the parameters current at apply."""

    def __init__(self, trainer, l2: float, length: int = 0):
        del length  # BatchedServer's argument, unused event by event
        super().__init__(trainer, l2, timed=False)
        self.waiting: dict[int, tuple] = {}  # worker -> (rows, step index, speeds, coef, weight)

    def start(self, k: int, rows, step_index: int, speeds, coefficient: float, weight: float):
        self.waiting[k] = (rows, step_index, speeds, coefficient, weight)

    def apply(self, k: int, weight: float, step_scale: float):
        super().start(k, *self.waiting.pop(k))  # pulls the current version now
        return super().apply(k, weight, step_scale)

    def in_flight(self, k: int):
        """For a checkpoint: worker k's push at the current parameters (a resumed control
        would apply it as is, so a resume is not exact; the study never resumes)."""
        if k not in self.pushes:
            super().start(k, *self.waiting[k])
        return super().in_flight(k)


@contextmanager
def fresh_gradients():
    """Within the block, virtual-clock async runs use FreshServer (the control)."""
    saved = loop.BatchedServer
    loop.BatchedServer = FreshServer
    try:
        yield
    finally:
        loop.BatchedServer = saved
