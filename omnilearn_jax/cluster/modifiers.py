"""Modifiers: time-varying multipliers applied on top of a base profile.

All modifiers multiply the base speeds, so their order does not matter and any subset can
be combined. Each is a pure function of the step (seeded noise uses counter-based draws),
so asking for the same step twice gives the same speeds.
"""

import math

import numpy as np

from omnilearn_jax.cluster import _rng
from omnilearn_jax.cluster.profiles import Profile


class Modifier:
    """A per-step factor [W] that multiplies the base speeds."""

    description = "modifier"

    def factor(self, step: int) -> np.ndarray:
        raise NotImplementedError

    def unreached(self, num_steps: int, unit: str = "steps") -> list[str]:
        """What this modifier sets at or after `num_steps`, which never applies (Profile's)."""
        del num_steps, unit
        return []


class SpeedNoise(Modifier):
    """Independent mean-one lognormal factor per (step, worker): exp(sigma z - sigma^2 / 2)."""

    def __init__(self, sigma: float, *, num_workers: int, seed: int) -> None:
        if not (math.isfinite(sigma) and sigma >= 0):  # NaN speeds read as 0 times
            raise ValueError(f"hetero.noise must be a finite number >= 0, got {sigma}")
        self.sigma = float(sigma)
        self._workers = np.arange(num_workers)
        self._seed = seed
        self.description = f"noise(sigma={self.sigma:g})"

    def factor(self, step: int) -> np.ndarray:
        z = _rng.normals(self._seed, _rng.STREAM_SPEED_NOISE, step, self._workers)
        return np.exp(self.sigma * z - 0.5 * self.sigma**2)


class RandomWalk(Modifier):
    """A multiplicative random walk per worker, clipped to [lo, hi] of the base speed.

    log m_k(0) = 0 and log m_k(t) = clip(log m_k(t-1) + sigma z_k(t), log lo, log hi).
    The path is computed once for the run's steps (clipping makes it sequential); steps
    past the end keep the last factor.
    """

    def __init__(
        self, sigma: float, lo: float, hi: float, *, num_workers: int, num_steps: int, seed: int
    ) -> None:
        if not (math.isfinite(sigma) and sigma >= 0):
            raise ValueError(f"hetero.walk_sigma must be a finite number >= 0, got {sigma}")
        if not 0 < lo <= 1 <= hi:
            raise ValueError(f"need 0 < hetero.walk_min <= 1 <= hetero.walk_max, got {lo}, {hi}")
        steps = np.arange(1, max(num_steps, 1))[:, None]
        z = _rng.normals(seed, _rng.STREAM_RANDOM_WALK, steps, np.arange(num_workers)[None, :])
        log_lo, log_hi = np.log(lo), np.log(hi)
        path = np.zeros((max(num_steps, 1), num_workers))
        for t in range(1, path.shape[0]):
            path[t] = np.clip(path[t - 1] + sigma * z[t - 1], log_lo, log_hi)
        self._factors = np.exp(path)
        self.description = f"random_walk(sigma={sigma:g}, clip=[{lo:g}, {hi:g}])"

    def factor(self, step: int) -> np.ndarray:
        return self._factors[min(step, self._factors.shape[0] - 1)]


class Preempt(Modifier):
    """One worker drops to `trickle` of its speed inside [start, end) step intervals.

    `intervals` is a flat tuple (start0, end0, start1, end1, ...). trickle = 0 models a lost
    worker (speed 0): the cost model then gives it infinite time for any samples, so the
    controller must move all of its work elsewhere.
    """

    def __init__(self, worker: int, intervals: tuple, trickle: float, *, num_workers: int) -> None:
        if not 0 <= worker < num_workers:
            raise ValueError(
                f"hetero.preempt_worker={worker} out of range for num_workers={num_workers}"
            )
        if len(intervals) % 2:
            raise ValueError(
                f"hetero.preempt_intervals must be start,end pairs; got {tuple(intervals)}"
            )
        if not 0 <= trickle < 1:  # NaN too
            raise ValueError(f"hetero.preempt_trickle must be in [0, 1), got {trickle}")
        if not all(math.isfinite(x) and float(x).is_integer() for x in intervals):  # 1.7: step 1
            raise ValueError(f"hetero.preempt_intervals are whole steps; got {tuple(intervals)}")
        pairs = np.asarray(intervals, dtype=np.int64).reshape(-1, 2)
        if np.any(pairs[:, 0] < 0) or np.any(pairs[:, 1] <= pairs[:, 0]):
            raise ValueError(f"preempt intervals need 0 <= start < end; got {pairs.tolist()}")
        self._worker = worker
        self._pairs = pairs
        self._trickle = float(trickle)
        spans = ", ".join(f"[{a}, {b})" for a, b in pairs)
        self.description = f"preempt(worker={worker}, steps {spans}, trickle={trickle:g})"
        self._num_workers = num_workers

    def factor(self, step: int) -> np.ndarray:
        out = np.ones(self._num_workers)
        if np.any((self._pairs[:, 0] <= step) & (step < self._pairs[:, 1])):
            out[self._worker] = self._trickle
        return out

    def unreached(self, num_steps: int, unit: str = "steps") -> list[str]:
        late = self._pairs[self._pairs[:, 0] >= num_steps]
        if not len(late):
            return []
        spans = ", ".join(f"[{a}, {b})" for a, b in late)
        return [f"{self.description}: interval(s) {spans} start after the run's {num_steps} {unit}"]


class ModifiedProfile(Profile):
    """Base profile speeds times the product of its modifiers' factors."""

    def __init__(self, base: Profile, modifiers: list[Modifier]) -> None:
        text = " * ".join([base.describe()] + [m.description for m in modifiers])
        super().__init__(base.num_workers, text)
        self.base = base
        self.modifiers = list(modifiers)

    def _speeds(self, step: int) -> np.ndarray:
        speeds = self.base.speeds(step)
        for m in self.modifiers:
            speeds = speeds * m.factor(step)
        return speeds

    def unreached(self, num_steps: int, unit: str = "steps") -> list[str]:
        said = self.base.unreached(num_steps, unit)
        for m in self.modifiers:
            said += m.unreached(num_steps, unit)
        return said
