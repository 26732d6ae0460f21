"""Joining a multi-process JAX run (`distributed.*` config keys).

`jax.distributed.initialize` is called only when `distributed.enabled` is true. Empty or
negative values are left to JAX, which detects them on SLURM, TPU pods and some Kubernetes
set-ups (its cluster auto-detection); on one machine the launcher (`omnilearn_jax.launch`)
passes them explicitly. Must run before the first JAX operation.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from typing import Any

import jax
import numpy as np


def barrier(name: str) -> None:
    """Returns once every process has called it (at once in a one-process run). The loop
    calls it after warm-up, so that every process starts its clock together: without it a
    process that finished compiling first would count its peers' compiling in its first
    step (seconds under a quarter-core quota), as the wait in the step's all-reduce."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def async_across(config) -> bool:
    """Whether this is an async run across processes: its processes do not join one JAX
    run but talk over sockets (asp/remote.py), each with the run's devices."""
    section = config.distributed
    return config.mode == "asp" and bool(section.enabled) and int(section.num_processes) > 1


def cpu_devices(config) -> int:
    """How many CPU devices a process of this run creates (`jax_num_cpu_devices`; on GPU or
    TPU they only shape the CPU backend): `config.cpu_devices`, or in an async run across
    processes the run's W devices and one spare, on which the controller decides
    (`Engine.host`): on device 0 a decision queued behind the server's update there and the
    loop waited for it (a tenth of the server's loop, py-spy, 2026-12-02)."""
    return config.num_workers + 1 if async_across(config) else config.cpu_devices


def async_worker(config) -> bool:
    """Whether this process is a worker (not the server) of an async run across processes."""
    return async_across(config) and int(config.distributed.process_id) > 0


def first_remote(config) -> int:
    """The first worker of an async run across processes that runs in a process of its own:
    1 (the server shares process 0 with worker 0), or 0 with `asp.server_process`, where
    process 0 is the server's alone and worker k runs in process k + 1."""
    return 0 if bool(config.asp.server_process) else 1


def worker_index(config) -> int:
    """The worker a worker process of an async run across processes runs."""
    return int(config.distributed.process_id) - 1 + first_remote(config)


def initialize(section) -> bool:
    """Joins the run described by the config's `distributed` section; True if it did."""
    if not section.enabled:
        return False
    kwargs = {
        "initialization_timeout": int(section.initialization_timeout),
        "heartbeat_timeout_seconds": int(section.heartbeat_timeout),
        "shutdown_timeout_seconds": int(section.shutdown_timeout),
    }
    if section.coordinator_address:
        kwargs["coordinator_address"] = section.coordinator_address
    if section.num_processes > 0:
        kwargs["num_processes"] = int(section.num_processes)
    if section.process_id >= 0:
        kwargs["process_id"] = int(section.process_id)
    if section.local_device_ids:
        kwargs["local_device_ids"] = list(section.local_device_ids)
    # Collectives between CPU processes need an implementation; it does nothing on GPU/TPU.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(**kwargs)
    return True


def from_main(compute: Callable[[], Any]) -> Any:
    """`compute()` on process 0 only, its value (anything JSON can carry) on every process.

    For what a run measures about the machine at start: one measurement, so every process
    models the same cluster. Two broadcasts (length, then bytes), once; nothing per step.
    `compute` must not run a collective (the other processes are waiting in the broadcast).
    If it raises, the others raise the same error rather than wait for a value that will
    not come (a user error stays one line on every process).
    """
    if jax.process_count() == 1:
        return compute()
    from jax.experimental import multihost_utils

    failure = None
    if jax.process_index() == 0:
        try:
            payload = {"value": compute()}
        except Exception as e:  # sent to the others, then raised here
            failure, payload = e, {"error": [type(e).__name__, str(e)]}
        data = json.dumps(payload).encode()
    else:
        data = b""
    size = multihost_utils.broadcast_one_to_all(np.asarray([len(data)], np.int64))
    buffer = np.zeros(int(np.asarray(size)[0]), np.uint8)
    buffer[: len(data)] = np.frombuffer(data, np.uint8)
    got = json.loads(np.asarray(multihost_utils.broadcast_one_to_all(buffer)).tobytes())
    if failure is not None:
        raise failure
    if "error" in got:
        name, message = got["error"]
        kind = {"ValueError": ValueError, "FileNotFoundError": FileNotFoundError}
        raise kind.get(name, RuntimeError)(f"{message} (raised on process 0)")
    return got["value"]


def main_value(value: Any) -> Any:
    """Process 0's `value` (JSON-ready) on every process: a measurement that all processes
    had to take part in (a collective step), made one number for all."""
    return from_main(lambda: value)


class Agreement:
    """A running digest of what each process decided (the split) and from what (the worker
    times), before process 0's decision replaced its own (`Steps.broadcast`); `check`
    compares the digests across processes (one all-gather, at checkpoints), so a divergence
    is reported, not hidden, within one checkpoint interval."""

    def __init__(self):
        self.digest = 0
        self.count = 0

    def add(self, *arrays: np.ndarray) -> None:
        for a in arrays:
            a = np.ascontiguousarray(a)
            self.digest = zlib.crc32(a.tobytes() + a.dtype.str.encode(), self.digest)
        self.count += 1

    def check(self, where: str) -> None:
        if jax.process_count() == 1:
            return
        from jax.experimental import multihost_utils

        mine = np.asarray([self.digest, self.count], np.uint32)  # JAX's default: 32 bits
        every = np.asarray(multihost_utils.process_allgather(mine)).reshape(-1, 2)
        if (every != every[0]).any():
            raise RuntimeError(
                f"processes decided different splits (or saw different worker times) by the "
                f"checkpoint at {where}: [digest, decisions] per process {every.tolist()}; "
                f"their inputs differ (a cost or curve measured per process?), so the run "
                f"cannot continue"
            )
