"""A measured cost curve: seconds of one device's train step against the rows it computes.

The curve is a list of knots (batch size, seconds at speed 1), measured by `measure_curve`
on the running device or read back from JSON (`load_curve`), so a curve measured on one
machine drives the virtual clock on another. Between knots the time is linear; below the
first knot it is the first knot's time (a device computes at least its smallest block);
past the last knot it continues with the last segment's slope. A worker with 0 rows takes
0 s. `CostModel` divides it by the worker's speed and applies the memory limit.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from omnilearn_jax.cluster.defaults import is_whole
from omnilearn_jax.config.args import suggest

FORMAT = "omnilearn-cost-curve/1"
RUN_FILE = "cost_curve.json"  # the curve a run used, kept in its run directory
MEASURE = "measure"  # cost.curve value: profile the real step at start


@dataclasses.dataclass(frozen=True)
class CostCurve:
    batch_sizes: tuple[int, ...]  # increasing knots, > 0
    seconds: tuple[float, ...]  # time at each knot (speed 1), > 0
    source: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # where, what, when

    def __post_init__(self) -> None:
        b = np.asarray(self.batch_sizes, np.float64)
        t = np.asarray(self.seconds, np.float64)
        if b.ndim != 1 or b.shape != t.shape or b.size < 2:
            raise ValueError(
                f"a cost curve needs >= 2 knots with one time each, got batch sizes "
                f"{list(self.batch_sizes)} and seconds {list(self.seconds)}"
            )
        if np.any(b <= 0) or np.any(np.diff(b) <= 0):
            raise ValueError(f"curve batch sizes must be > 0 and increasing: {b.tolist()}")
        if not np.all(np.isfinite(t)) or np.any(t <= 0):
            raise ValueError(f"curve times must be finite and > 0: {t.tolist()}")
        if np.any(np.diff(t) < 0):  # a larger block never costs less; continued past the
            # last knot, a falling curve gave negative times and a run on a clock of zeros
            raise ValueError(f"curve times must not fall as the batch grows: {t.tolist()}")

    def time(self, sizes: Any) -> np.ndarray:
        """Seconds at speed 1 for each size (any shape); 0 for size 0."""
        b = np.asarray(sizes, np.float64)
        knots = np.asarray(self.batch_sizes, np.float64)
        t = np.asarray(self.seconds, np.float64)
        slope = (t[-1] - t[-2]) / (knots[-1] - knots[-2])
        inside = np.interp(b, knots, t)
        out = np.where(b > knots[-1], t[-1] + slope * (b - knots[-1]), inside)
        return np.where(b > 0, out, 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "batch_sizes": [int(b) for b in self.batch_sizes],
            "seconds": [float(s) for s in self.seconds],
            "source": dict(self.source),
        }

    def save(self, path: str) -> None:
        """Writes the curve as JSON (atomically: a reader never sees half a file)."""
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.to_dict(), f, indent=1)
            f.write("\n")
        os.replace(tmp, path)


def curve_from_dict(values: Mapping[str, Any]) -> CostCurve:
    if not isinstance(values, Mapping):  # a JSON list had been an AttributeError
        raise ValueError(f"not a cost curve: a JSON {type(values).__name__}, want an object")
    if values.get("format") != FORMAT:
        raise ValueError(f"not a cost curve: format {values.get('format')!r}, want {FORMAT!r}")
    sizes = values["batch_sizes"]
    if not isinstance(sizes, list) or not all(is_whole(b) for b in sizes):
        # 16.7 was cut to 16, true read as 1, the string "816" as the sizes 8, 1 and 6
        raise ValueError(f"batch_sizes must be a list of whole numbers, got {sizes!r}")
    return CostCurve(
        tuple(int(b) for b in sizes),
        tuple(float(s) for s in values["seconds"]),
        dict(values.get("source", {})),
    )


def load_curve(path: str) -> CostCurve:
    """Reads a curve written by `CostCurve.save`; errors name the file."""
    try:
        with open(path) as f:
            return curve_from_dict(json.load(f))
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        # A misspelt `measure` is not a file either: say what was likely meant.
        hint = suggest(path, [MEASURE]) if not os.path.exists(path) else ""
        raise ValueError(f"cost curve {path}: {e}{hint}") from None


def measure_curve(
    run_rows: Callable[[int], float],
    batch_sizes: Sequence[int],
    *,
    repeats: int = 5,
    source: Mapping[str, Any] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> CostCurve:
    """Times `run_rows(b)` (one device computing b rows, returning its own compute seconds)
        at each size, after one untimed call; keeps the median of `repeats` calls per size.

        The median, not the mean or the minimum: a shared machine's load only adds time, but a
        minimum rewards one lucky call, and the clock should model a typical step. Times are
        made nondecreasing in b by isotonic regression (a larger block never costs less, so a dip
    is noise: the sizes out of order share their mean, where a running maximum would let one
    slow reading at a small size hide the whole curve).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    sizes = sorted({int(b) for b in batch_sizes})
    seconds = []
    start = clock()
    for b in sizes:
        run_rows(b)  # warm: the first call of a program may still load or allocate
        seconds.append(float(np.median([run_rows(b) for _ in range(repeats)])))
    seconds = nondecreasing(np.asarray(seconds))
    info = {
        "repeats": repeats,
        "measured": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "profiling_seconds": round(clock() - start, 3),
        **dict(source or {}),
    }
    return CostCurve(tuple(sizes), tuple(float(s) for s in seconds), info)


def nondecreasing(values: np.ndarray) -> np.ndarray:
    """The least-squares nondecreasing fit (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, count] of pooled runs
    for v in np.asarray(values, np.float64):
        blocks.append([float(v), 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m2, n2), (m1, n1) = blocks.pop(), blocks.pop()
            blocks.append([(m1 * n1 + m2 * n2) / (n1 + n2), n1 + n2])
    return np.concatenate([np.full(int(n), m) for m, n in blocks])
