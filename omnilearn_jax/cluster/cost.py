"""Compute and communication cost of one step on workers of given speeds.

Compute time of worker k with b_k > 0 samples and speed s_k (ACSOS'20 measured that
throughput rises with batch size, then falls at a memory limit):

    t_k = overhead + (fixed_cost + b_k * per_sample_cost * m(b_k)) / s_k
    m(b) = 1 + cliff_penalty * max(0, b - cliff_batch) / cliff_batch   (1 if cliff_batch = 0)

times a mean-one lognormal noise factor exp(noise * z - noise^2 / 2), z a pure function of
(seed, step, worker). `fixed_cost` is per-step work that a larger batch amortises, so b / t
rises with b; past the cliff every sample gets dearer (paging, smaller kernels), so b / t
falls right past the cliff when
cliff_penalty * cliff_batch * per_sample_cost > fixed_cost + overhead * s_k.

With a measured `curve` (curve.py) the work term is the curve's instead. Given the run's
bucket `layout` (engine/buckets.py), it is what the device really computes: device d holds
n_d rows (the sum of its workers' b_k) and computes its whole bucket c_d = bucket(n_d), so
t_k = overhead + (b_k / n_d) curve(c_d) / s_k, each worker charged its share of the
device's block by rows (as the wall clock shares a device's measured time). Padding is then
charged: with buckets 1.25x apart a device may compute up to 1.25x its rows. Without a
layout the curve is read at the worker's own rows, t_k = overhead + curve(b_k) / s_k. The
formula above never sees buckets: it models a cluster, not this engine. Either way, past
worker k's memory limit (`memory_limits[k]` > 0) the work is multiplied by `memory_factor`:
a jump, where the cliff above is a slope.

A worker with 0 samples takes 0 s: it launches nothing and only waits for the all-reduce.
A worker with speed 0 (lost) and b > 0 takes inf; see `unavailable_workers`.
With `linear=True` the time is exactly b * per_sample_cost / s (noise still applies if set).
"""

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from omnilearn_jax.cluster import _rng
from omnilearn_jax.cluster.curve import MEASURE, CostCurve, load_curve
from omnilearn_jax.cluster.defaults import cost_defaults, read_section
from omnilearn_jax.engine.buckets import Layout, device_buckets, device_counts


def ring_allreduce_time(
    param_bytes: float, num_workers: int, latency: float, bandwidth: float
) -> float:
    """Ring all-reduce: 2 (W - 1) latency + 2 (W - 1) / W * bytes / bandwidth.

    The standard bandwidth-optimal ring (reduce-scatter then all-gather, Patarasuk and
    Yuan 2009; Thakur et al. 2005): 2 (W - 1) rounds, each sending a 1/W chunk per link.
    """
    if num_workers < 1 or latency < 0 or bandwidth <= 0 or param_bytes < 0:
        raise ValueError(
            "need num_workers >= 1, latency >= 0, bandwidth > 0, param_bytes >= 0; got "
            f"{num_workers}, {latency}, {bandwidth}, {param_bytes}"
        )
    w = num_workers
    return 2 * (w - 1) * latency + 2 * (w - 1) / w * param_bytes / bandwidth


def unavailable_workers(sizes: np.ndarray, speeds: np.ndarray) -> list[int]:
    """Workers given samples while their speed is 0: their time is infinite.

    A step with such a worker never finishes under BSP; the controller must give them 0.
    """
    sizes, speeds = np.asarray(sizes), np.asarray(speeds)
    return [int(k) for k in np.flatnonzero((speeds <= 0) & (sizes > 0))]


@dataclasses.dataclass(frozen=True)
class CostModel:
    """Per-worker compute time model; see the module docstring for the formula."""

    per_sample_cost: float = 0.01
    fixed_cost: float = 0.05
    overhead: float = 0.0
    cliff_batch: int = 0
    cliff_penalty: float = 1.0
    noise: float = 0.0
    linear: bool = False
    latency: float = 5e-5
    bandwidth: float = 1.25e9
    seed: int = 0
    curve: CostCurve | None = None
    memory_limits: tuple[int, ...] = ()
    memory_factor: float = 2.0
    layout: Layout | None = None  # the run's buckets: a curve charges the bucket computed

    def __post_init__(self) -> None:
        checks = {
            "per_sample_cost > 0": self.per_sample_cost > 0,
            "fixed_cost >= 0": self.fixed_cost >= 0,
            "overhead >= 0": self.overhead >= 0,
            "cliff_batch >= 0": self.cliff_batch >= 0,
            "cliff_penalty >= 0": self.cliff_penalty >= 0,
            "noise >= 0": self.noise >= 0,
            "latency >= 0": self.latency >= 0,
            "bandwidth > 0": self.bandwidth > 0,
            "memory_limits >= 0": all(m >= 0 for m in self.memory_limits),
            "memory_factor >= 1": self.memory_factor >= 1,
        }
        # Finite too (NaN fails every comparison above; inf passed them, and an infinite
        # latency ran to the end with every time inf); bandwidth may be inf (no cost a byte)
        finite = ("per_sample_cost", "fixed_cost", "overhead", "cliff_penalty", "noise")
        finite += ("latency", "memory_factor")
        checks |= {f"{name} finite": math.isfinite(getattr(self, name)) for name in finite}
        # A measured curve gives the times itself: `linear` beside it was ignored in silence
        checks["not linear with a curve"] = not (self.linear and self.curve is not None)
        failed = [k for k, ok in checks.items() if not ok]
        if failed:
            raise ValueError(f"bad cost config: need {failed}; got {self}")

    @classmethod
    def from_config(
        cls,
        cost: Mapping[str, Any] | Any,
        *,
        seed: int,
        curve: CostCurve | None = None,
        layout: Layout | None = None,
    ) -> "CostModel":
        """Build from a `cost` config section (ConfigDict or dict) and the run seed.

        `curve` (measured, or kept by the run) wins; else `cost.curve` names a JSON file
        ('measure' without a curve given builds the formula model, for checks before the
        measurement). `layout` (the run's buckets) makes a curve charge each device's bucket.
        """
        c = read_section(cost, cost_defaults(), "cost")
        path = str(c["curve"])
        if curve is None and path not in ("", MEASURE):
            curve = load_curve(path)
        return cls(
            per_sample_cost=float(c["per_sample_cost"]),
            fixed_cost=float(c["fixed_cost"]),
            overhead=float(c["overhead"]),
            cliff_batch=int(c["cliff_batch"]),
            cliff_penalty=float(c["cliff_penalty"]),
            noise=float(c["noise"]),
            linear=bool(c["linear"]),
            latency=float(c["latency"]),
            bandwidth=float(c["bandwidth"]),
            seed=int(seed),
            curve=curve,
            memory_limits=tuple(int(m) for m in c["memory_limits"]),
            memory_factor=float(c["memory_factor"]),
            layout=layout,
        )

    def _curve_work(self, b: np.ndarray, device_rows: np.ndarray | None) -> np.ndarray:
        """Seconds at speed 1 of each worker's share of its device's block (module doc)."""
        if self.layout is None:
            return self.curve.time(b)
        n = b if device_rows is None else np.asarray(device_rows, np.float64)
        bucket = device_buckets(np.asarray(n, np.int64), self.layout)
        bucket = np.where(n > self.layout.buckets[-1], n, bucket)  # past capacity (oracles'
        # tables only: a step refuses it): the rows themselves, never a smaller block
        share = np.divide(b, n, out=np.zeros_like(b), where=n > 0)
        return share * self.curve.time(bucket)

    def _model(
        self, sizes: np.ndarray, speeds: np.ndarray, device_rows: np.ndarray | None = None
    ) -> np.ndarray:
        """Noise-free times; sizes and speeds broadcast against each other. `device_rows`
        (same shape as sizes) are the rows of each worker's device; default its own."""
        b = np.asarray(sizes, dtype=np.float64)
        s = np.asarray(speeds, dtype=np.float64)
        if np.any(b < 0) or np.any(s < 0):
            raise ValueError(f"sizes and speeds must be >= 0; got {b.tolist()}, {s.tolist()}")
        if self.curve is not None:
            work, fixed = self._curve_work(b, device_rows), self.overhead
        elif self.linear:
            work, fixed = b * self.per_sample_cost, 0.0
        else:
            mult = 1.0
            if self.cliff_batch > 0:
                over = np.maximum(b - self.cliff_batch, 0.0) / self.cliff_batch
                mult = 1.0 + self.cliff_penalty * over
            work, fixed = self.fixed_cost + b * self.per_sample_cost * mult, self.overhead
        if self.memory_limits:
            limits = np.asarray(self.memory_limits, np.float64)
            if limits.size != s.shape[0]:
                raise ValueError(
                    f"cost.memory_limits has {limits.size} entries for {s.shape[0]} workers"
                )
            limits = limits.reshape(s.shape[:1] + (1,) * (s.ndim - 1))
            work = work * np.where((limits > 0) & (b > limits), self.memory_factor, 1.0)
        # Speed 0 with samples is a lost worker: inf is the honest answer, not a warning.
        with np.errstate(divide="ignore", invalid="ignore"):
            t = fixed + work / s
        return np.where(b > 0, t, 0.0)

    def worker_times(
        self, step: int, sizes: np.ndarray, speeds: np.ndarray, draws: np.ndarray | None = None
    ) -> np.ndarray:
        """Emulated compute seconds [W] of each worker at `step` (noisy if noise > 0). The
        noise of worker k is drawn for (step, k), or for (draws[k], k) when `draws` is given:
        async training passes each worker's iteration count, since a fast worker computes
        several times in one round of W updates and each computation has noise of its own."""
        sizes, speeds = np.asarray(sizes), np.asarray(speeds)
        if sizes.shape != speeds.shape or sizes.ndim != 1:
            raise ValueError(f"sizes {sizes.shape} and speeds {speeds.shape} must both be [W]")
        device_rows = None
        if self.layout is not None:  # each worker's device: the layout's contiguous groups
            per_device = device_counts(sizes, self.layout)
            device_rows = np.repeat(per_device, self.layout.workers_per_device)
        t = self._model(sizes, speeds, device_rows)
        if self.noise > 0:
            keys = step if draws is None else np.asarray(draws)
            z = _rng.normals(self.seed, _rng.STREAM_COST_NOISE, keys, np.arange(t.shape[0]))
            t = t * np.exp(self.noise * z - 0.5 * self.noise**2)
        return t

    def time_table(self, speeds: np.ndarray, global_batch: int) -> np.ndarray:
        """Noise-free time [W, B + 1] of worker k with b = 0..B samples (for oracles). With a
        layout of m workers a device, worker k at b rows is charged as if each of the other
        m - 1 workers on its device held b rows too: its share 1/m of the block of m b rows
        (exact at one worker a device, and for a split that gives a device's workers equal
        rows). A worker's time depends on its neighbours' rows, which a table by worker
        cannot hold; taken alone instead, a worker would be charged a whole block's fixed
        cost for a few rows, and the oracle would keep rows on slow workers."""
        speeds = np.asarray(speeds, dtype=np.float64)
        b = np.arange(global_batch + 1, dtype=np.float64)[None, :]
        m = self.layout.workers_per_device if self.layout is not None else 1
        return self._model(b, speeds[:, None], m * b if m > 1 else None)

    def allreduce_time(
        self,
        param_bytes: float,
        num_workers: int,
        latency: float | None = None,
        bandwidth: float | None = None,
    ) -> float:
        """Ring all-reduce seconds; latency and bandwidth default to this model's config."""
        return ring_allreduce_time(
            param_bytes,
            num_workers,
            self.latency if latency is None else latency,
            self.bandwidth if bandwidth is None else bandwidth,
        )
