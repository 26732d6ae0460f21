"""A deterministic virtual clock for synchronous (BSP) data-parallel steps.

A BSP step ends when the slowest worker has finished and the all-reduce is done:
step_time = max_k t_k + comm_time. Worker k then waits (is idle) for max_j t_j - t_k;
communication counts as neither compute nor idle time. Asynchronous (ASP) ordering is an
event simulation that belongs to the trainer; it can still use `CostModel` times.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from omnilearn_jax.cluster.cost import unavailable_workers


class VirtualClock:
    """Accumulates per-worker compute and idle seconds over BSP steps."""

    def __init__(self, num_workers: int) -> None:
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self.num_workers = int(num_workers)
        self.time = 0.0
        self.steps = 0
        self.compute = np.zeros(self.num_workers)
        self.idle = np.zeros(self.num_workers)
        self.comm = 0.0
        self._idle_fraction_sum = 0.0

    def state(self) -> dict[str, np.ndarray]:
        """Everything the clock has accumulated, as arrays (checkpointed with the run)."""
        return {
            "time": np.asarray(self.time, np.float64),
            "steps": np.asarray(self.steps, np.int64),
            "compute": self.compute.copy(),
            "idle": self.idle.copy(),
            "comm": np.asarray(self.comm, np.float64),
            "idle_fraction_sum": np.asarray(self._idle_fraction_sum, np.float64),
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continues from `state()`; exact, so a resumed run's clock equals an unbroken one."""
        self.time = float(state["time"])
        self.steps = int(state["steps"])
        self.compute = np.asarray(state["compute"], np.float64).copy()
        self.idle = np.asarray(state["idle"], np.float64).copy()
        self.comm = float(state["comm"])
        self._idle_fraction_sum = float(state["idle_fraction_sum"])

    def step(
        self,
        worker_times: np.ndarray,
        comm_time: float = 0.0,
        *,
        batch_sizes: np.ndarray | None = None,
        speeds: np.ndarray | None = None,
    ) -> dict[str, Any]:
        """Advance by one BSP step and return its record (plain floats and lists).

        Record keys: step_time, time (clock after the step), worker_times, worker_idle,
        idle_fraction = sum(idle) / (W * step_time), balance = max / mean of the times of
        workers with samples (those with batch_sizes > 0, or with time > 0 if sizes are not
        given; 1.0 when none), comm_time. Pass speeds to get a clear error for lost workers.
        """
        t = np.asarray(worker_times, dtype=np.float64)
        if t.shape != (self.num_workers,):
            raise ValueError(f"worker_times must have shape ({self.num_workers},), got {t.shape}")
        for name, value in (("batch_sizes", batch_sizes), ("speeds", speeds)):
            if value is not None and np.shape(value) != (self.num_workers,):
                raise ValueError(
                    f"{name} must have shape ({self.num_workers},), got {np.shape(value)}"
                )
        if not np.all(np.isfinite(t)) or np.any(t < 0):
            lost = []
            if batch_sizes is not None and speeds is not None:
                lost = unavailable_workers(batch_sizes, speeds)
            hint = f"; worker(s) {lost} have speed 0 but were given samples" if lost else ""
            raise ValueError(f"worker times must be finite and >= 0, got {t.tolist()}{hint}")
        if not np.isfinite(comm_time) or comm_time < 0:
            raise ValueError(f"comm_time must be finite and >= 0, got {comm_time}")

        slowest = float(t.max())
        step_time = slowest + float(comm_time)
        idle = slowest - t
        idle_fraction = float(idle.sum() / (self.num_workers * step_time)) if step_time else 0.0
        active = (np.asarray(batch_sizes) > 0) if batch_sizes is not None else (t > 0)
        busy = t[active]
        balance = float(busy.max() / busy.mean()) if busy.size and busy.mean() > 0 else 1.0

        self.time += step_time
        self.steps += 1
        self.compute += t
        self.idle += idle
        self.comm += float(comm_time)
        self._idle_fraction_sum += idle_fraction
        return {
            "step_time": step_time,
            "time": self.time,
            "worker_times": t.tolist(),
            "worker_idle": idle.tolist(),
            "idle_fraction": idle_fraction,
            "balance": balance,
            "comm_time": float(comm_time),
        }

    def totals(self) -> dict[str, Any]:
        """Run totals: total_time, steps, compute_time [W], idle_time [W], comm_time,
        mean_idle_fraction (mean of per-step fractions) and idle_fraction (time-weighted:
        sum of idle / (W * total_time))."""
        denom = self.num_workers * self.time
        return {
            "total_time": self.time,
            "steps": self.steps,
            "compute_time": self.compute.tolist(),
            "idle_time": self.idle.tolist(),
            "comm_time": self.comm,
            "mean_idle_fraction": self._idle_fraction_sum / self.steps if self.steps else 0.0,
            "idle_fraction": float(self.idle.sum() / denom) if denom else 0.0,
        }
