"""Planted faults (for robustness experiments and tests) and the guard on measured times.

Steps are counted from 0 here, as the loop indexes them (records and messages count from 1):
`faults.nan_step` fills every input of that step with NaN (token ids with one past any
vocabulary, whose embedding is NaN), so its loss is NaN (`nan_step=7`:
the 8th step, `non-finite loss (nan) at step 8`). `faults.crash_step` raises before that
step, after `crash_step` steps are done, as a killed process would stop there (`crash_step=9`:
`planted crash after step 9`, the records of steps 1-9 written).
`faults.bad_times` is a flat tuple of (step, worker, seconds) triples: the measured time of
that worker at that step is replaced by the given value (0, negative, NaN, huge...), as a
broken timer would report it.

`TimeGuard` rejects measured times that cannot be right: not finite, zero or negative for a
worker that had samples, or more than `outlier_factor` times away from that worker's
reference per-sample time (unless the next reading is as far off too: then the worker really
changed speed, the second reading is accepted and becomes the reference alone). The
reference is the median of the worker's last `MEMORY` accepted per-sample times, not the last
one: with the last one, a spike inside the factor (8.8x, measured under a noisy neighbour on
2026-12-02) became the reference, the next normal reading was rejected as an outlier and
replaced by the spike's time, and the controller saw the spike twice. A rejected time is
replaced by the reference times the worker's current batch, and a warning names it; the
clock and the controller see only accepted times, so one bad reading cannot corrupt the
controller's state. Its memory (recent accepted per-sample times, the reference, pending
suspects) is part of a checkpoint (`state`/`load_state`), so a resumed run rejects exactly
what an unbroken one does.
"""

from __future__ import annotations

import math
import sys

import numpy as np


class PlantedFaults:
    def __init__(self, section):
        self.nan_step = int(section.get("nan_step", -1))
        self.crash_step = int(section.get("crash_step", -1))
        triples = tuple(section.get("bad_times", ()))
        if len(triples) % 3:
            raise ValueError(
                f"faults.bad_times must hold (step, worker, seconds) triples, got {triples}"
            )
        self.bad_times = {
            (int(triples[i]), int(triples[i + 1])): float(triples[i + 2])
            for i in range(0, len(triples), 3)
        }

    def check(self, num_workers: int) -> None:
        """Each planted time names a worker of the run and a step >= 0 (an index past the
        workers raised an IndexError mid-run, after compiling; a negative step never fired;
        a step past the run's end is not checked: it never fires either)."""
        for key, step in (("nan_step", self.nan_step), ("crash_step", self.crash_step)):
            if step < -1:  # never fired, like -1, without a word
                raise ValueError(f"faults.{key} must be a step >= 0, or -1 (never), got {step}")
        for step, worker in self.bad_times:
            if not 0 <= worker < num_workers or step < 0:
                raise ValueError(
                    f"faults.bad_times plants a time for worker {worker} at step {step}: a "
                    f"worker must be in 0..{num_workers - 1} (num_workers={num_workers}) and a "
                    f"step >= 0"
                )

    def crash(self, step: int) -> None:
        if step == self.crash_step:
            raise RuntimeError(f"planted crash after step {step} (faults.crash_step={step})")

    def times(self, step: int, times: np.ndarray) -> np.ndarray:
        for (s, w), value in self.bad_times.items():
            if s == step:
                times = times.copy()
                times[w] = value
        return times

    def untouched(self, step: int, num_workers: int) -> np.ndarray:
        """bool [W]: the workers whose time at `step` no fault replaces."""
        out = np.ones(num_workers, bool)
        for s, w in self.bad_times:
            out[w] &= s != step
        return out

    def inputs(self, step: int, x: np.ndarray) -> np.ndarray:
        if step != self.nan_step:
            return x
        if np.issubdtype(x.dtype, np.integer):
            # Token ids: past any vocabulary, where the embedding's gather is NaN (JAX fills
            # an out-of-bounds gather with NaN). NaN cast to int32 had given INT_MIN with a
            # NumPy RuntimeWarning, NaN only as a side effect of that negative id.
            return np.full_like(x, np.iinfo(x.dtype).max)
        return np.full_like(x, np.nan)


MEMORY = 5  # accepted per-sample times a worker's reference is the median of
WARNINGS = 10  # steps whose rejected times are said (each in one line); later ones counted


def row_medians(a: np.ndarray) -> np.ndarray:
    """The median of each row's finite entries (NaN where a row has none): np.nanmedian's
    values at a twelfth of its cost, which it spends on masked arrays (8 µs against 100 µs
    for 2 rows of 5; the guard runs every step on every process)."""
    s = np.sort(a, axis=1)  # NaN sorts last
    n = np.isfinite(s).sum(axis=1)
    m = a.shape[1]
    if n.min(initial=m) == m:  # every row full (a run's usual case): the middle columns
        return (s[:, (m - 1) // 2] + s[:, m // 2]) / 2
    rows = np.arange(len(s))
    lo, hi = s[rows, np.maximum(n - 1, 0) // 2], s[rows, n // 2 - (n == 0)]
    return np.where(n > 0, (lo + hi) / 2, np.nan)


class TimeGuard:
    def __init__(self, num_workers: int, outlier_factor: float = 10.0, unit: str = "step"):
        if outlier_factor <= 1:
            raise ValueError(f"train.outlier_factor must be > 1, got {outlier_factor}")
        self.factor = outlier_factor
        # What `step` (0-based) counts, in the warning, which counts from 1 as records do
        # (async: rounds of W updates).
        self.unit = unit
        self.per_sample = np.full(num_workers, np.nan)  # the reference, per worker
        self.recent = np.full((num_workers, MEMORY), np.nan)  # accepted, newest last
        self.suspect = np.zeros(num_workers, bool)  # last reading was an outlier
        self.rejected = 0  # readings replaced (summary.json: rejected_times; kept by checkpoints)
        self.warnings = 0  # lines said of them (WARNINGS at most)

    def warn(self, text: str) -> None:
        """One line a step of what was rejected, the first WARNINGS steps only: on the wall
        clock every device of a CPU host shares its cores, so one hiccup rejects all of them,
        and a 20,000-step run said 2,136 lines."""
        self.warnings += 1
        if self.warnings <= WARNINGS:
            more = (
                " (further rejections are counted in summary.json's rejected_times, not said)"
                if self.warnings == WARNINGS
                else ""
            )
            print(f"warning: {text}{more}", file=sys.stderr, flush=True)

    def state(self) -> dict[str, np.ndarray]:
        return {
            "per_sample": self.per_sample.copy(),
            "recent": self.recent.copy(),
            "suspect": self.suspect.astype(np.int32),
        }

    def load_state(self, state) -> None:
        self.per_sample = np.asarray(state["per_sample"], np.float64).copy()
        if "recent" in state:
            self.recent = np.asarray(state["recent"], np.float64).copy()
        else:  # a checkpoint from before the median: its last accepted time alone
            self.recent = np.full((self.per_sample.size, MEMORY), np.nan)
            self.recent[:, -1] = self.per_sample
        self.suspect = np.asarray(state["suspect"]).astype(bool)

    def __call__(
        self, step: int, times: np.ndarray, sizes: np.ndarray, trusted: np.ndarray | None = None
    ) -> np.ndarray:
        """`times` with unusable readings replaced. `trusted` [W]: readings that are exact
        (the virtual clock's modelled times): one far off is a real change at once (a
        preemption, a trace's drop), not a spike, and is never replaced."""
        times = np.array(times, np.float64)
        sizes = np.asarray(sizes, np.float64)
        busy = sizes > 0
        bad = busy & ~(np.isfinite(times) & (times > 0))
        known = busy & ~bad & np.isfinite(self.per_sample)
        # (where= rather than np.errstate: this runs once an async update, and the context
        # manager costs more than the arithmetic; entries left NaN are never read)
        rate = np.divide(times, sizes, out=np.full_like(times, np.nan), where=busy & ~bad)
        ratio = np.divide(rate, self.per_sample, out=np.full_like(times, np.nan), where=known)
        # A reading far below a reference of one reading is taken: a first timed step can be
        # slow (15 ms against 1.4 ms after it, a wall run), never fast, and the next step's
        # normal times were rejected and replaced by the slow one. Far above, a spike.
        once = np.isfinite(self.recent).sum(axis=1) < 2
        outlier = known & ((ratio > self.factor) | ((ratio < 1 / self.factor) & ~once))
        # One far-off reading is rejected; a second in a row means the worker really changed
        # speed (a preempted node), so it is accepted: the guard filters spikes, not trends.
        confirmed = outlier & (self.suspect if trusted is None else self.suspect | trusted)
        # Only the workers read now change their flag: async on the wall clock checks one
        # worker a call, and a flag cleared by the others' calls would never confirm.
        self.suspect = np.where(busy, outlier & ~confirmed, self.suspect)
        bad |= outlier & ~confirmed
        said = []
        for k in np.flatnonzero(bad):
            fallback = self.per_sample[k] * sizes[k]
            said.append(
                f"rejected measured time {float(times[k])!r}s of worker {k} (batch "
                f"{int(sizes[k])}); using {fallback:.6g}s from its recent good readings"
            )
            times[k] = fallback if math.isfinite(fallback) else 0.0
        if said:
            self.rejected += len(said)
            self.warn(f"{self.unit} {step + 1}: " + "; ".join(said))
        good = busy & ~bad
        if good.all() and not confirmed.any():  # the usual step: every row moves in place
            self.recent[:, :-1] = self.recent[:, 1:]
            self.recent[:, -1] = rate
            self.per_sample = row_medians(self.recent)
        elif good.any():
            self.recent[good & confirmed] = np.nan  # a real change: old readings no longer apply
            kept = np.roll(self.recent[good], -1, axis=1)
            kept[:, -1] = rate[good]
            self.recent[good] = kept
            self.per_sample[good] = row_medians(kept)
        if not busy.all():
            times[~busy] = np.where(np.isfinite(times[~busy]), times[~busy], 0.0)
        return times
