"""Per-worker times for each step: modelled on a virtual clock, or measured (wall clock).

Virtual: the cluster model gives each worker's compute time from its batch size and its speed
at that step; the BSP step takes the slowest worker plus a ring all-reduce. Deterministic, so
the same config and seed give byte-identical run stores.
"""

from __future__ import annotations

import numpy as np

from omnilearn_jax.cluster import CostModel, VirtualClock, make_profile


class VirtualTimer:
    def __init__(self, config, *, steps_per_epoch: int, param_bytes: int):
        w = config.num_workers
        self.profile = make_profile(
            config.hetero,
            num_workers=w,
            num_steps=config.train.num_steps,
            steps_per_epoch=steps_per_epoch,
            seed=config.seed,
        )
        self.cost = CostModel.from_config(config.cost, seed=config.seed)
        self.clock = VirtualClock(w)
        self.comm_time = self.cost.allreduce_time(param_bytes, w) if w > 1 else 0.0
        self.global_batch = config.global_batch_size

    def speeds(self, step: int) -> np.ndarray:
        return self.profile.speeds(step)

    def time_table(self, speeds: np.ndarray) -> np.ndarray:
        return self.cost.time_table(speeds, self.global_batch)

    def record(self, step: int, sizes: np.ndarray, speeds: np.ndarray) -> dict:
        """Advances the clock by one step run with `sizes`; returns the step's record."""
        times = self.cost.worker_times(step, sizes, speeds)
        return self.clock.step(times, self.comm_time, batch_sizes=sizes, speeds=speeds)

    @property
    def time(self) -> float:
        return self.clock.time

    def totals(self) -> dict:
        return self.clock.totals()
