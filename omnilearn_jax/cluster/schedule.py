"""Piecewise speed schedules (the paper's dynamic runs) and replayed CSV traces."""

import csv
import math
from pathlib import Path

import numpy as np

from omnilearn_jax.cluster.defaults import is_whole
from omnilearn_jax.cluster.profiles import PiecewiseProfile, hl_speeds


def schedule_profile(
    *,
    levels: tuple,
    segment_speeds: tuple,
    variant: str,
    segment: int,
    unit: str,
    num_workers: int,
    num_steps: int,
    steps_per_epoch: int,
) -> PiecewiseProfile:
    """Segments of equal length, each at one HL level or one list of W speeds.

    Exactly one of `levels` (paper levels, e.g. (1, 2, 4, 8, 8, 4, 2, 1)) and
    `segment_speeds` (W speeds per segment, flattened row by row) must be given. Segment i
    covers steps [i * L, (i + 1) * L) with L = segment steps, or segment * steps_per_epoch
    when unit == 'epochs'. A run longer than the schedule keeps the last segment; a
    schedule longer than the run is an error, because its tail would never be seen.
    """
    if bool(len(levels)) == bool(len(segment_speeds)):
        raise ValueError(
            "schedule needs exactly one of hetero.levels (HL levels per segment) and "
            f"hetero.segment_speeds (W speeds per segment); got levels={tuple(levels)}, "
            f"segment_speeds={tuple(segment_speeds)}"
        )
    if unit not in ("steps", "epochs"):
        raise ValueError(f"hetero.unit must be 'steps' or 'epochs', got {unit!r}")
    if segment < 1:
        raise ValueError(f"hetero.segment must be >= 1, got {segment}")
    if unit == "epochs" and steps_per_epoch < 1:
        raise ValueError(f"unit='epochs' needs steps_per_epoch >= 1, got {steps_per_epoch}")

    if len(levels):
        bad = [lv for lv in levels if not is_whole(lv)]
        if bad:  # 2.5 was cut to level 2 without a word (hetero.level=2.5 is refused)
            raise ValueError(f"hetero.levels must be whole HL levels, got {bad[0]!r}")
        table = np.stack([hl_speeds(int(lv), variant, num_workers) for lv in levels])
        what = f"levels={tuple(int(lv) for lv in levels)} ({variant})"
    else:
        flat = np.asarray(segment_speeds, dtype=np.float64)
        if flat.size % num_workers:
            raise ValueError(
                f"hetero.segment_speeds has {flat.size} values, not a multiple of "
                f"num_workers={num_workers} (give W speeds per segment, flattened)"
            )
        table = flat.reshape(-1, num_workers)
        what = f"{table.shape[0]} speed segments"

    seg_steps = segment * (steps_per_epoch if unit == "epochs" else 1)
    total = seg_steps * table.shape[0]
    if total > num_steps:
        raise ValueError(
            f"schedule is longer than the run: {table.shape[0]} segments x {segment} {unit} "
            f"= {total} steps, but the run has num_steps={num_steps}; set train.num_steps >= "
            f"{total}, or shorten the schedule (hetero.segment, fewer hetero.levels or "
            f"hetero.unit=steps), or a fixed level (hetero.name=hl, hetero.level=8)"
        )
    change_steps = np.arange(table.shape[0]) * seg_steps
    return PiecewiseProfile(
        change_steps, table, f"schedule {what}, {segment} {unit} per segment ({seg_steps} steps)"
    )


# The largest step a trace may name: far past any run, and within int64 (a step of 1e20 was
# an OverflowError without file or line, one of 2**63 - 1 a wrong "must increase").
MAX_STEP = 2**53


def _parse(text: str, kind: type, column: str, where: str) -> int | float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where}: column {column!r} is not a number: {text!r}") from None
    if kind is int:
        if not value.is_integer():
            raise ValueError(f"{where}: column {column!r} must be an integer, got {text!r}")
        try:  # exact where the text is an integer literal (a float holds 53 bits)
            whole = int(text.strip())
        except ValueError:
            whole = int(value)
        if abs(whole) > MAX_STEP:
            raise ValueError(f"{where}: column {column!r} is {text!r}, over {MAX_STEP}")
        return whole
    return value


def trace_profile(path: str, *, num_workers: int) -> PiecewiseProfile:
    """Replay a CSV with header `step,worker,speed` (extra columns are ignored).

    Each row sets one worker's speed from that step on, holding until its next row. Rows
    must be in non-decreasing step order and every worker needs a row at step 0, so the
    speed at every step is defined. Blank lines and lines starting with '#' are skipped.
    Errors name the file and the 1-based line number.
    """
    file = Path(path)
    if not path or not file.is_file():
        raise ValueError(f"trace file not found: {path!r} (set hetero.path)")
    rows: list[tuple[int, int, float]] = []
    try:  # a UTF-16 export had been a bare UnicodeDecodeError, naming no file
        file.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e}); save the trace as UTF-8 CSV") from None
    with file.open(newline="", encoding="utf-8-sig") as fh:  # a spreadsheet's BOM, if any
        reader = csv.reader(fh)
        header = None
        for row in reader:
            lineno = reader.line_num
            if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
                continue
            cells = [c.strip() for c in row]
            where = f"{path}:{lineno}"
            if header is None:
                header = cells
                missing = [c for c in ("step", "worker", "speed") if c not in header]
                if missing:
                    raise ValueError(
                        f"{where}: trace header is missing column(s) {missing}; "
                        f"need step,worker,speed, got {header}"
                    )
                twice = sorted({c for c in header if header.count(c) > 1})
                if twice:  # the last one was read, and its values blamed on the rows
                    raise ValueError(f"{where}: trace header names column(s) {twice} twice")
                continue
            if len(cells) != len(header):
                raise ValueError(f"{where}: expected {len(header)} fields, got {len(cells)}")
            rec = dict(zip(header, cells, strict=True))
            step = _parse(rec["step"], int, "step", where)
            worker = _parse(rec["worker"], int, "worker", where)
            speed = _parse(rec["speed"], float, "speed", where)
            if step < 0:
                raise ValueError(f"{where}: step must be >= 0, got {step}")
            if not 0 <= worker < num_workers:
                raise ValueError(
                    f"{where}: unknown worker {worker}; valid 0..{num_workers - 1} "
                    f"for num_workers={num_workers}"
                )
            if not (math.isfinite(speed) and speed > 0):
                raise ValueError(f"{where}: speed must be finite and > 0, got {speed}")
            if rows and step < rows[-1][0]:
                raise ValueError(
                    f"{where}: steps must be non-decreasing; step {step} follows {rows[-1][0]}"
                )
            if any(r[0] == step and r[1] == worker for r in rows[-num_workers:]):
                raise ValueError(f"{where}: worker {worker} set twice at step {step}")
            rows.append((step, worker, speed))
    if header is None:
        raise ValueError(f"{path}: trace is empty (need a step,worker,speed header)")

    at_zero = {w for s, w, _ in rows if s == 0}
    missing = sorted(set(range(num_workers)) - at_zero)
    if missing:
        raise ValueError(f"{path}: worker(s) {missing} have no speed at step 0")

    change_steps = np.unique([s for s, _, _ in rows])
    table = np.empty((change_steps.size, num_workers))
    current = np.zeros(num_workers)
    i = 0
    for r, step in enumerate(change_steps):
        while i < len(rows) and rows[i][0] == step:
            current[rows[i][1]] = rows[i][2]
            i += 1
        table[r] = current
    return PiecewiseProfile(change_steps, table, f"trace {path} ({len(rows)} entries)")
