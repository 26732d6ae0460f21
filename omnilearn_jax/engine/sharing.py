"""One compile per program shape, loaded onto every device that runs it.

A jitted function called on single-device inputs compiles once per device: the executable
is bound to its device. The per-device local programs (step.py) have the same code on every
device, so compiling each bucket D times would multiply warm-up by D (80 compiles instead
of 10 for the default config on 8 devices). Instead the program is compiled once, serialised,
and loaded onto each device with that device's assignment, which takes milliseconds. JAX
does the same for GPUs in its persistent compilation cache.

The serialised program is kept by a fingerprint of the lowered module, the JAX version and
platform, and the XLA flags that shape code generation (all of `XLA_FLAGS` but the forced CPU
device count: a program compiled at another optimisation level rounds differently): in
memory, and beside JAX's persistent compilation cache when one is configured. That second
copy matters: an executable that JAX itself read back from its cache cannot be serialised
again on CPU (its code is not kept), so when JAX reports a cache hit for the first compile
and no serialised copy of ours exists, each device compiles (or reads JAX's cache) on its
own, which is always correct, only slower.

Loading uses `jax.experimental.serialize_executable` and two of its internals; if they
change or a backend cannot serialise, each device compiles on its own as well. Tests run
both paths and compare them bit for bit.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.monitoring

FALLBACK_ERRORS = (AttributeError, ImportError, NotImplementedError, TypeError, ValueError)
_HIT_EVENT = "/jax/compilation_cache/cache_hits"
_memory: dict[str, tuple] = {}  # fingerprint -> (serialised program, in_tree, out_tree)


def compile_for(
    jitted, args_for: Callable[[Any], tuple], devices: Sequence, portable: bool = True
) -> dict:
    """{device: compiled} for `jitted` lowered with `args_for(device)`, compiled once."""
    lowered = jitted.lower(*args_for(devices[0]))
    if portable:
        try:
            return _portable(lowered, devices)
        except (*FALLBACK_ERRORS, jax.errors.JaxRuntimeError):
            pass
    out = {devices[0]: lowered.compile()}
    for device in devices[1:]:
        out[device] = jitted.lower(*args_for(device)).compile()
    return out


def _portable(lowered, devices: Sequence) -> dict:
    from jax.experimental import serialize_executable

    text = lowered.as_text()
    key = _fingerprint(text, devices[0])
    # A program with a host callback (hetero.inject) refers to Python objects of this
    # process: it is kept in memory only, never on disk (JAX's own cache skips them too).
    disk = "callback" not in text
    stored = _memory.get(key) or (_read(key) if disk else None)
    if stored is None:
        hits = []
        listener = lambda event, **kw: hits.append(event) if event == _HIT_EVENT else None  # noqa: E731
        jax.monitoring.register_event_listener(listener)
        try:
            first = lowered.compile()
        finally:
            jax.monitoring.unregister_event_listener(listener)
        if hits:  # read back from JAX's cache: cannot be serialised again
            raise NotImplementedError("no serialisable copy of a cached executable")
        stored = serialize_executable.serialize(first)
        if disk:
            _write(key, stored)
    _memory[key] = stored
    return {device: _load(*stored, device) for device in devices}


def _fingerprint(text: str, device) -> str:
    where = f"{jax.__version__}|{device.platform}|{device.client.platform_version}"
    return hashlib.sha256((where + "|" + _codegen_flags() + "\n" + text).encode()).hexdigest()


def _codegen_flags() -> str:
    """XLA_FLAGS without the forced CPU device count (it does not change a program's code)."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    return " ".join(sorted(f for f in flags if "force_host_platform_device_count" not in f))


def _disk_path(key: str) -> str | None:
    root = jax.config.jax_compilation_cache_dir
    return os.path.join(root, "omnilearn-portable", key) if root else None


def _read(key: str) -> tuple | None:
    import pickle

    path = _disk_path(key)
    if path is None or not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return pickle.load(f)  # written by _write below, like JAX's own cache entries


def _write(key: str, stored: tuple) -> None:
    import pickle

    path = _disk_path(key)
    if path is None:
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        pickle.dump(stored, f)
    os.replace(tmp, path)  # atomic: a concurrent reader sees all or nothing


def _load(blob: bytes, in_tree, out_tree, device):
    """The serialised executable, loaded to run on `device` alone."""
    from jax._src import compiler
    from jax.experimental import serialize_executable

    class OnDevice(serialize_executable._JaxPjrtUnpickler):
        def persistent_load(self, pid):
            if pid[0] == "device":  # every device the executable names becomes `device`
                return device
            if pid[0] == "exec":
                options = compiler.get_compile_options(
                    num_replicas=1, num_partitions=1, device_assignment=[device]
                )
                return self.backend.deserialize_executable(
                    pid[1], executable_devices=self.execution_devices, compile_options=options
                )
            return super().persistent_load(pid)

    unloaded, args_info, no_kwargs = OnDevice(io.BytesIO(blob), device.client, [device]).load()
    return jax.stages.Compiled(
        unloaded.load(), [], in_tree.unflatten(args_info), out_tree, no_kwargs=no_kwargs
    )
