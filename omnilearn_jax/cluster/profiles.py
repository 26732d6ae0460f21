"""Speed profiles: relative worker speeds as a function of the training step.

A speed is a relative compute rate (the paper uses container CPU-core limits), so a worker
with speed 2 finishes the same work in half the time of a worker with speed 1.
"""

import numpy as np

# Core limits per worker from the OmniLearn paper (4 workers); HL = max/min cores, except the
# async HL8 as the paper gives it, 4/4/4/28 (7x; 40 cores in all, like the other async levels).
HL_TABLES: dict[str, dict[int, tuple[float, ...]]] = {
    "bsp": {
        1: (12.0, 12.0, 12.0, 12.0),
        2: (12.0, 12.0, 8.0, 16.0),
        4: (9.0, 9.0, 6.0, 24.0),
        8: (6.0, 6.0, 4.0, 32.0),
    },
    "asp": {
        1: (10.0, 10.0, 10.0, 10.0),
        2: (8.0, 8.0, 8.0, 16.0),
        4: (10.0, 10.0, 4.0, 16.0),
        8: (4.0, 4.0, 4.0, 28.0),
    },
}


def check_speeds(speeds: np.ndarray, what: str, *, allow_zero: bool = False) -> np.ndarray:
    """Return `speeds` as float64, raising if any is non-finite or not positive."""
    speeds = np.asarray(speeds, dtype=np.float64)
    bad = ~np.isfinite(speeds) | (speeds < 0 if allow_zero else speeds <= 0)
    if bad.any():
        idx = [int(i) for i in np.flatnonzero(bad.reshape(-1))]
        need = ">= 0" if allow_zero else "> 0"
        raise ValueError(
            f"{what}: speeds must be finite and {need}; got {speeds.reshape(-1).tolist()} "
            f"(bad entries at flat index {idx})"
        )
    return speeds


def hl_speeds(level: int, variant: str, num_workers: int) -> np.ndarray:
    """Paper core counts for a heterogeneity level, tiled to `num_workers`.

    Worker k gets entry k mod 4 of the 4-worker table, so W = 8 is the table twice. When W
    is a multiple of 4 max/min is the table's (the level, but 7 for the async HL8); for
    W < 4 the table is cut short and the level is lost (W = 2 gives two equal workers), so
    prefer `cores` there.
    """
    if variant not in HL_TABLES:
        raise ValueError(f"unknown hl variant {variant!r}; valid: {sorted(HL_TABLES)}")
    table = HL_TABLES[variant]
    if level not in table:
        raise ValueError(f"unknown hl level {level!r}; valid levels: {sorted(table)}")
    pattern = np.asarray(table[level], dtype=np.float64)
    return pattern[np.arange(num_workers) % len(pattern)]


class Profile:
    """Relative speeds per worker over steps; subclasses implement `_speeds`."""

    def __init__(self, num_workers: int, description: str) -> None:
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self.num_workers = int(num_workers)
        self._description = description

    def speeds(self, step: int) -> np.ndarray:
        """Float64 speeds [W] at `step` (a fresh array: callers may modify it)."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        return np.array(self._speeds(int(step)), dtype=np.float64)

    def describe(self) -> str:
        """One line saying what this profile is, for logs and run summaries."""
        return self._description

    def unreached(self, num_steps: int, unit: str = "steps") -> list[str]:
        """Sentences naming the changes this profile makes at or after `num_steps` (the run's
        length in `unit`), which never apply: a trace or an interval set past the run's end
        ran without them, and without a word."""
        del num_steps, unit
        return []

    def _speeds(self, step: int) -> np.ndarray:
        raise NotImplementedError


class StaticProfile(Profile):
    """The same speeds at every step."""

    def __init__(self, speeds: np.ndarray, description: str) -> None:
        speeds = check_speeds(speeds, description)
        super().__init__(speeds.shape[0], description)
        self._value = speeds

    def _speeds(self, step: int) -> np.ndarray:
        return self._value


class PiecewiseProfile(Profile):
    """Speeds that change at given steps and hold until the next change.

    `change_steps` is increasing and starts at 0; row i of `table` applies from
    change_steps[i] until change_steps[i + 1] (the last row holds forever).
    """

    def __init__(self, change_steps: np.ndarray, table: np.ndarray, description: str) -> None:
        change_steps = np.asarray(change_steps, dtype=np.int64)
        table = check_speeds(table, description)
        if table.ndim != 2 or table.shape[0] != change_steps.shape[0]:
            raise ValueError(f"{description}: table rows must match change steps")
        if change_steps[0] != 0 or np.any(np.diff(change_steps) <= 0):
            raise ValueError(f"{description}: change steps must start at 0 and increase")
        super().__init__(table.shape[1], description)
        self._change_steps = change_steps
        self._table = table

    def _speeds(self, step: int) -> np.ndarray:
        row = np.searchsorted(self._change_steps, step, side="right") - 1
        return self._table[row]

    def unreached(self, num_steps: int, unit: str = "steps") -> list[str]:
        late = self._change_steps[self._change_steps >= num_steps]
        if not late.size:
            return []
        shown = ", ".join(str(int(s)) for s in late[:3]) + (", ..." if late.size > 3 else "")
        return [
            f"{self._description}: its speed changes at step(s) {shown} never apply, the run "
            f"has {num_steps} {unit}"
        ]
