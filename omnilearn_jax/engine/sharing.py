"""One compile per program shape, loaded onto every device that runs it, verified first.

A jitted function called on single-device inputs compiles once per device: the executable
is bound to its device, and JAX's persistent cache keys it by device too. The per-device
programs (step.py) have the same code on every device, so compiling each bucket D times would
multiply warm-up by D (80 compiles instead of 10 for the default config on 8 devices).
Instead a bucket is compiled once, on the first device, serialised
(`jax.experimental.serialize_executable`), and loaded onto each other device with that
device's assignment, which takes milliseconds.

Trust, in order:
- A loaded copy is used only after it ran once and gave the same bits as the freshly
  compiled program on the same inputs (`_verified`). Anything else (an exception, other
  bits) and every device compiles on its own, which is always correct, only slower.
- A copy is written to disk (beside JAX's persistent cache, when one is configured) only
  after that check, so that a later process whose first compile JAX reads back from its
  own cache (such an executable cannot be serialised again on CPU) still loads in
  milliseconds. A copy read from disk is run once before it is used; one that fails or
  cannot be read is deleted and the program compiled afresh.
- The key is everything that makes a binary differ: the lowered module, the JAX and jaxlib
  versions, the platform and its version, the device kind, the topology (devices per
  process and processes), and the XLA flags that shape code generation.

Loading onto another device needs two internals of `serialize_executable` (its unpickler
and the compile options): no public JAX API loads an executable onto a device other than
the one it was compiled for. They are used only with the JAX versions the tests ran on
(`TESTED_JAX`); with any other version, or where a backend cannot serialise, each device
compiles on its own. `share=False` does the same (tests compare both paths bit for bit).
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.monitoring
import numpy as np

TESTED_JAX = ("0.10.",)  # version prefixes the loader's internals were tested with
FALLBACK_ERRORS = (AttributeError, ImportError, KeyError, NotImplementedError, TypeError,
                   ValueError, RuntimeError, pickle.UnpicklingError, EOFError, OSError)  # fmt: skip
_HIT_EVENT = "/jax/compilation_cache/cache_hits"
_memory: dict[str, tuple] = {}  # key -> (serialised program, in_tree, out_tree), verified


def compile_for(
    jitted, args_for: Callable[[Any], tuple], devices: Sequence, share: bool = True
) -> dict:
    """{device: compiled} for `jitted` lowered with `args_for(device)` (avals with a
    single-device sharding each), compiled once and shared where that is verified."""
    lowered = jitted.lower(*args_for(devices[0]))
    if share and len(devices) > 1 and jax.__version__.startswith(TESTED_JAX):
        try:
            shared = _shared(lowered, args_for, devices)
        except FALLBACK_ERRORS:
            shared = None
        if shared is not None:
            return shared
    out = {devices[0]: lowered.compile()}
    for device in devices[1:]:
        out[device] = jitted.lower(*args_for(device)).compile()
    return out


def _shared(lowered, args_for, devices: Sequence) -> dict | None:
    from jax.experimental import serialize_executable

    key = fingerprint(lowered.as_text(), devices[0])
    stored = _memory.get(key) or _read_checked(key, args_for(devices[-1]), devices[-1])
    if stored is None:
        hits: list[str] = []
        listener = lambda event, **kw: hits.append(event) if event == _HIT_EVENT else None  # noqa: E731
        jax.monitoring.register_event_listener(listener)
        try:
            fresh = lowered.compile()
        finally:
            jax.monitoring.unregister_event_listener(listener)
        if hits:  # read back from JAX's cache: no code to serialise on CPU
            return None
        stored = serialize_executable.serialize(fresh)
        if not _verified(fresh, load(*stored, devices[-1]), args_for, devices):
            return None
        write(key, stored)
    _memory[key] = stored
    return {device: load(*stored, device) for device in devices}


def example_inputs(avals: tuple, device) -> tuple:
    """Deterministic inputs of the given avals on `device`: floats drawn at random from
    [0, 0.01) (small, and never a negative wait), booleans true, integers zero (a label
    every class has), so a run exercises every row."""
    rng = np.random.default_rng(0)

    def one(a):
        dtype = np.dtype(a.dtype)
        if np.issubdtype(dtype, np.floating):
            host = (rng.random(a.shape) * 0.01).astype(dtype)
        elif dtype == np.bool_:
            host = np.ones(a.shape, np.bool_)
        else:
            host = np.zeros(a.shape, dtype)
        return jax.device_put(host, device)

    return jax.tree.map(one, avals)


def _run(compiled, avals, device):
    return jax.device_get(compiled(*example_inputs(avals, device)))


def _verified(fresh, loaded, args_for, devices: Sequence) -> bool:
    """The copy loaded on the last device gives the bits of the program freshly compiled
    for the first, on the same inputs."""
    expected = _run(fresh, args_for(devices[0]), devices[0])
    got = _run(loaded, args_for(devices[-1]), devices[-1])
    same = jax.tree.map(lambda a, b: np.array_equal(a, b, equal_nan=True), expected, got)
    return all(jax.tree.leaves(same))


def fingerprint(text: str, device) -> str:
    """The key of a program's binary: the module and everything that shapes its code."""
    import jaxlib

    topology = f"{jax.local_device_count()}x{jax.process_count()}"
    where = "|".join(
        (jax.__version__, jaxlib.__version__, device.platform, device.client.platform_version,
         device.device_kind, topology, _codegen_flags())
    )  # fmt: skip
    return hashlib.sha256((where + "\n" + text).encode()).hexdigest()


def _codegen_flags() -> str:
    """XLA_FLAGS without the forced CPU device count (it does not change a program's code;
    the topology is in the key on its own)."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    return " ".join(sorted(f for f in flags if "force_host_platform_device_count" not in f))


def disk_path(key: str) -> str | None:
    root = jax.config.jax_compilation_cache_dir
    return os.path.join(root, "omnilearn-shared", key) if root else None


def _read_checked(key: str, avals, device) -> tuple | None:
    """The copy on disk, after it loaded and ran once on `device`; a broken one is deleted."""
    path = disk_path(key)
    if path is None or not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as f:
            stored = pickle.load(f)  # written by `write` below, like JAX's own cache entries
        _run(load(*stored, device), avals, device)
        return stored
    except FALLBACK_ERRORS:
        os.remove(path)
        return None


def write(key: str, stored: tuple) -> None:
    path = disk_path(key)
    if path is None:
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        pickle.dump(stored, f)
    os.replace(tmp, path)  # atomic: a concurrent reader sees all or nothing


def load(blob: bytes, in_tree, out_tree, device):
    """The serialised executable, loaded to run on `device` alone (see the module
    docstring for the two internals this needs)."""
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
