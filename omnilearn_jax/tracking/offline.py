"""Read offline W&B runs back without network: history rows, config and summary.

A run writes one transaction log, `<workdir>/wandb/offline-run-*/run-<id>.wandb`: a 7-byte
header (`:W&B`, magic 0xBEE1, version 0) followed by LevelDB-style log blocks of 32 KiB, each
holding records framed as (crc32c:4, length:2 little-endian, type:1) + payload, where a
payload is one serialized `wandb_internal_pb2.Record`. We parse it in-process with the
protobuf classes that ship with wandb: no subprocess, works on runs that crashed mid-write
(the torn tail is ignored). If that ever fails (e.g. wandb moves its protobuf module), we
fall back to wandb's own reader, `wandb leet inspect --json PATH`, which prints one JSON
object per record.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

_BLOCK = 32 * 1024
_HEADER = struct.Struct("<IHB")  # crc32c, payload length, chunk type
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_FILE_HEADER_LEN = 7


def run_id_of(offline_dir: str) -> str:
    """The W&B run id of an `offline-run-<YYYYmmdd_HHMMSS>-<id>` directory (an id may hold
    dashes: WANDB_RUN_ID=exp-1): its log's name, `run-<id>.wandb`, where it has one. W&B
    names a second directory of one run started in the same second `...-<id>-1`; read from
    the directory's name, a resumed segment was another run's, and dropped."""
    logs = glob.glob(os.path.join(glob.escape(offline_dir), "run-*.wandb"))
    if len(logs) == 1:
        return os.path.basename(logs[0])[len("run-") : -len(".wandb")]
    match = re.fullmatch(r"offline-run-\d{8}_\d{6}-(.+)", os.path.basename(offline_dir))
    return match.group(1) if match else os.path.basename(offline_dir)


def find_offline_runs(workdir: str) -> list[str]:
    """Offline run directories under `workdir/wandb` (or `workdir` itself), oldest first."""
    runs = glob.glob(os.path.join(workdir, "wandb", "offline-run-*"))
    runs += glob.glob(os.path.join(workdir, "offline-run-*"))
    # Directory names start with the start time (YYYYmmdd_HHMMSS), so name order is time
    # order; mtime breaks ties between runs started within the same second.
    return sorted(set(runs), key=lambda p: (os.path.basename(p)[:27], os.path.getmtime(p)))


def _log_file(path: str) -> str:
    if os.path.isfile(path):
        return path
    files = sorted(glob.glob(os.path.join(path, "run-*.wandb")))
    if not files:
        raise FileNotFoundError(f"no run-*.wandb file in {path}")
    return files[0]


def _chunks(data: bytes) -> Iterator[bytes]:
    """Whole record payloads, reassembling records split across 32 KiB blocks."""
    pos, pending = _FILE_HEADER_LEN, b""
    while pos + _HEADER.size <= len(data):
        room = _BLOCK - pos % _BLOCK
        if room < _HEADER.size:  # block trailer too small for a header: zero padding
            pos += room
            continue
        _, length, kind = _HEADER.unpack_from(data, pos)
        start, end = pos + _HEADER.size, pos + _HEADER.size + length
        if kind == 0 or end > len(data):  # preallocated zeros or a torn final write
            return
        pos = end
        if kind == _FULL:
            yield data[start:end]
        elif kind == _FIRST:
            pending = data[start:end]
        elif kind in (_MIDDLE, _LAST):
            pending += data[start:end]
            if kind == _LAST:
                yield pending
                pending = b""


def _item_value(item: Any) -> Any:
    which = item.WhichOneof("value") if item.DESCRIPTOR.oneofs else None
    if which is None:
        return json.loads(item.value_json) if item.value_json else None
    if which == "none":
        return None
    if which == "json":
        return json.loads(item.json)
    return getattr(item, which)


def _item_key(item: Any) -> str:
    return item.key or ".".join(item.nested_key)


def _records_protobuf(path: str) -> Iterator[tuple[str, Any]]:
    from wandb.proto import wandb_internal_pb2 as pb  # lazy: pulls in protobuf

    with open(_log_file(path), "rb") as f:
        data = f.read()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a W&B transaction log")
    for payload in _chunks(data):
        record = pb.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "history":
            row = {_item_key(i): _item_value(i) for i in record.history.item}
            yield "history", row
        elif kind in ("config", "run"):
            items = record.config.update if kind == "config" else record.run.config.update
            yield "config", [(list(i.nested_key) or [i.key], _item_value(i)) for i in items]
        elif kind == "summary":
            yield "summary", {_item_key(i): _item_value(i) for i in record.summary.update}
        elif kind == "exit":
            yield "exit", record.exit.exit_code


def _records_leet(path: str) -> Iterator[tuple[str, Any]]:
    """The same stream from `wandb leet inspect --json` (one JSON record per line)."""
    exe = shutil.which("wandb", path=os.path.dirname(sys.executable)) or shutil.which("wandb")
    if exe is None:
        raise FileNotFoundError("the wandb command is not installed")
    out = subprocess.run(
        [exe, "leet", "inspect", "--json", path], capture_output=True, text=True, timeout=120
    )
    if out.returncode != 0:
        raise RuntimeError(f"wandb leet inspect failed: {out.stderr.strip()}")
    for line in out.stdout.splitlines():
        record = json.loads(line)
        kind = record.get("type")
        if kind == "history":
            yield "history", dict(record["history"].get("item", {}))
        elif kind in ("config", "run"):
            update = record[kind].get("update", {}) if kind == "config" else {}
            if kind == "run":
                update = record["run"].get("config", {}).get("update", {})
            yield "config", [([k], v) for k, v in update.items()]
        elif kind == "summary":
            yield "summary", dict(record["summary"].get("update", {}))
        elif kind == "exit":
            yield "exit", int(record["exit"].get("exit_code", 0))


def _records(path: str) -> Iterator[tuple[str, Any]]:
    try:
        records = list(_records_protobuf(path))
    except (ImportError, ValueError, AttributeError) as e:
        print(f"W&B read-back: protobuf reader failed ({e}); using `wandb leet`.", flush=True)
        records = list(_records_leet(path))
    return iter(records)


def wait_until_written(run_dir: str, timeout: float = 10.0) -> bool:
    """Wait until the run's log ends with its exit record; False if `timeout` ran out.

    In offline mode `run.finish()` can return while wandb-core is still writing the last
    records (seen under CPU load: history missing right after finish, present 1 s later),
    so a reader that runs right after a run ends must wait for the exit record.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            if any(kind == "exit" for kind, _ in _records_protobuf(run_dir)):
                return True
        except (OSError, ValueError):
            pass  # file not created or header not written yet
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def read_offline_history(run_dir: str) -> list[dict]:
    """Logged history rows in order, each with `step` (W&B's `_step`) and the metric keys.

    `run_dir` is an `offline-run-*` directory or its `run-*.wandb` file. Keys are as logged
    (`loss`, `worker/2/batch_size`, `eval_accuracy`, ...) plus W&B's `_step`, `_runtime`,
    `_timestamp`; an eval logged at the step of a train record shares its row.
    """
    rows = []
    for kind, row in _records(run_dir):
        if kind == "history":
            row = dict(row)
            row["step"] = row.get("_step", len(rows))
            rows.append(row)
    return rows


def read_offline_config(run_dir: str) -> dict:
    """The run's config as logged (the resolved config plus `meta`), W&B's `_wandb` removed."""
    config: dict = {}
    for kind, items in _records(run_dir):
        if kind != "config":
            continue
        for path, value in items:
            node = config
            for key in path[:-1]:
                node = node.setdefault(key, {})
            node[path[-1]] = value
    config.pop("_wandb", None)
    return config


def read_offline_summary(run_dir: str) -> dict:
    """The run's final summary: the last value of each metric, updated by `summary()`."""
    summary: dict = {}
    for kind, update in _records(run_dir):
        if kind == "summary":
            summary.update(update)
    return summary
