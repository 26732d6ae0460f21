"""The local run store: config.json, metrics.jsonl and summary.json in the workdir.

It is written whatever W&B does, and by process 0 only. Records are appended one JSON object
a line and flushed, so a reader (or a resumed run) always sees whole lines. `measured.json`
keeps what a run measured about the machine at start (the calibrated cost), so a resumed run
models the same machine as the run it continues (a measured cost curve is kept beside it as
cost_curve.json).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np


def plain(value: Any) -> Any:
    """numpy and JAX scalars/arrays to JSON-ready Python values (NaN and inf as null)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):
        return plain(np.asarray(value).tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _write_json(path: str, obj: Any) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(plain(obj), f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)  # atomic: a killed run never leaves half a file


class RunStore:
    def __init__(self, workdir: str, *, append: bool = False):
        """A fresh run truncates metrics.jsonl; `append=True` continues it (resume)."""
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.metrics_path = os.path.join(workdir, "metrics.jsonl")
        self._metrics = open(self.metrics_path, "a" if append else "w")  # noqa: SIM115

    def write_config(self, config: Mapping[str, Any]) -> None:
        _write_json(os.path.join(self.workdir, "config.json"), config)

    def append(self, record: Mapping[str, Any]) -> None:
        self._metrics.write(json.dumps(plain(record), sort_keys=True) + "\n")
        self._metrics.flush()

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        _write_json(os.path.join(self.workdir, "summary.json"), summary)

    def close(self) -> None:
        self._metrics.close()


MEASURED_FILE = "measured.json"
FINAL_PARAMS = "final_params.npz"  # train.save_params: the parameters at the run's end


def read_json(path: str) -> Any:
    """A run store's JSON file, one that is empty or torn named with its remedy (it had been
    a bare "Expecting value: line 1 column 1 (char 0)")."""
    with open(path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{path} is not JSON ({err}); restore or remove it, or use "
                "--config.train.resume=False to start afresh there"
            ) from None


def read_measured(workdir: str) -> dict[str, Any]:
    """What the run in `workdir` measured at its start ({} when nothing)."""
    path = os.path.join(workdir, MEASURED_FILE)
    return read_json(path) if os.path.exists(path) else {}


def start_measured(workdir: str, *, resuming: bool, also: tuple[str, ...] = ()) -> dict[str, Any]:
    """At a run's start: what the run being resumed measured; or, for a fresh run, {} after
    removing what an earlier run in `workdir` measured or left (measured.json and the files
    `also` names: a cost curve, final parameters), so nothing of another run is reused or
    left beside this one's results. Process 0 only."""
    if resuming:
        return read_measured(workdir)
    for name in (MEASURED_FILE, *also):
        path = os.path.join(workdir, name)
        if os.path.exists(path):
            os.remove(path)
    return {}


def write_measured(workdir: str, values: Mapping[str, Any]) -> None:
    os.makedirs(workdir, exist_ok=True)
    _write_json(os.path.join(workdir, MEASURED_FILE), values)


def complete_summary(workdir: str) -> dict[str, Any] | None:
    """The summary of the complete run in `workdir` (None: no run there completed)."""
    path = os.path.join(workdir, "summary.json")
    if not os.path.exists(path):
        return None
    summary = read_json(path)
    return summary if summary.get("status") == "complete" else None


def last_checkpoint_step(workdir: str) -> int | None:
    """The step of the newest whole checkpoint in WORKDIR/checkpoints (None: none). Orbax
    names a finished step's directory by its number; one still being written carries a
    temporary suffix. Reads only the directory (no JAX, no collective)."""
    directory = os.path.join(workdir, "checkpoints")
    names = os.listdir(directory) if os.path.isdir(directory) else []
    return max((int(n) for n in names if n.isdigit()), default=None)


def read_metrics(workdir: str) -> list[dict]:
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def whole_records(path: str) -> Iterator[tuple[str, dict]]:
    """(line, record) of a metrics file up to a half-written last line (the line a kill cut
    short; nothing after it was written). A line that is not JSON with records after it is
    damage, not a kill: a ValueError naming the file and line (the read had stopped there
    without a word, a complete run of 6 steps loaded with 2)."""
    with open(path) as f:
        lines = f.readlines()
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            if any(rest.strip() for rest in lines[number:]):
                raise ValueError(
                    f"{path}: line {number} is not JSON ({err.msg}) and records follow it: "
                    "the file is damaged"
                ) from None
            return
        yield line, record


def truncate_metrics(workdir: str, last_step: int) -> int:
    """Keeps the records of steps <= last_step (and drops a half-written last line).

    A run killed after its last checkpoint may have logged steps past it; the resumed run
    logs them again, so they are removed first: no duplicated and no missing lines.
    Returns the number of records kept.
    """
    path = os.path.join(workdir, "metrics.jsonl")
    if not os.path.exists(path):
        return 0
    kept = [
        line if line.endswith("\n") else line + "\n"
        for line, record in whole_records(path)
        if record.get("step", 0) <= last_step
    ]
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.writelines(kept)
    os.replace(tmp, path)
    return len(kept)
