"""Devices, the data mesh, and putting batches and state where each backend wants them."""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from omnilearn_jax.engine import step

BACKENDS = ("shard_map", "pmap")


def check_backend(name: str) -> None:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; valid backends: {', '.join(BACKENDS)}")


def select_devices(num_devices: int) -> list:
    """`num_devices` devices (0: all of them), ordered by (process, id): each process's devices
    are then contiguous on the data axis, which `Placement` needs (`jax.devices()` alone does
    not promise it, on larger TPU slices for one). With several processes each gives its first
    `num_devices / processes` devices: a process with none in the mesh cannot take part."""
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    if num_devices < 0 or num_devices > len(devices):
        raise ValueError(
            f"num_devices={num_devices} but {len(devices)} {devices[0].platform} device(s) "
            f"are available"
        )
    by_process: dict[int, list] = {}
    for d in devices:
        by_process.setdefault(d.process_index, []).append(d)
    if not num_devices or len(by_process) == 1:
        return devices[: num_devices or len(devices)]
    each = check_process_share(
        num_devices, len(by_process), min(len(v) for v in by_process.values())
    )
    return [d for mine in by_process.values() for d in mine[:each]]


def check_process_share(num_devices: int, num_processes: int, fewest: int) -> int:
    """Devices each process gives to a mesh of `num_devices` (`fewest`: the fewest devices a
    process has); raises ValueError when the processes cannot give equal shares."""
    each, extra = divmod(num_devices, num_processes)
    if extra or not 1 <= each <= fewest:
        raise ValueError(
            f"num_devices={num_devices} on {num_processes} processes: each process gives the "
            f"same number of its own devices, so set num_devices to a multiple of "
            f"{num_processes} up to {num_processes * fewest} (or 0: all of them)"
        )
    return each


class Placement:
    """Builds a backend's steps and places its inputs: batches split over the data axis,
    train state replicated."""

    def __init__(self, backend: str, devices: list):
        check_backend(backend)
        self.backend = backend
        self.devices = devices
        # pmap returns replicated results on a mesh of Auto axes; placing its state on the
        # same kind of mesh makes the first output match the input and avoids a recompile.
        kind = jax.sharding.AxisType.Auto if backend == "pmap" else jax.sharding.AxisType.Explicit
        # The data axis in the order of `devices` (position p is devices[p]): what the
        # per-device placement, the per-device constants and the evaluation's rows assume.
        # (`jax.make_mesh` may reorder devices for a TPU slice's topology.)
        self.mesh = Mesh(np.asarray(devices), (step.AXIS,), axis_types=(kind,))
        self._data = NamedSharding(self.mesh, P(step.AXIS))
        self._replicated = NamedSharding(self.mesh, P())
        self._kept_mask: tuple[list, jax.Array] | None = None  # `_mask_of`
        # This process's devices, as positions on the data axis. In a multi-process run each
        # process builds and transfers only these rows of every batch.
        me = jax.process_index()
        self.local_positions = np.array(
            [i for i, d in enumerate(devices) if d.process_index == me], dtype=np.int64
        )
        if np.any(np.diff(self.local_positions) != 1):
            raise ValueError("this process's devices must be contiguous on the data axis")
        self.multi_process = jax.process_count() > 1

    def steps(
        self, apply, tx, *, chunk: int, inject: bool = False, host_wait: bool = False
    ) -> step.Steps:
        """The backend's steps; blocks over `chunk` rows are computed in chunks, `inject`
        adds an injected delay input to every local program (hetero.inject) and `host_wait`
        waits it out on the host instead (`Steps.run_local`)."""
        return step.Steps(apply, tx, self, chunk, inject, host_wait)

    def blocks(
        self, blocks, xs: list, ys: list, masks: list, delays=None, shared: int = 0, place=True
    ):
        """Places each device's block on its own device (nothing for an empty device), with
        a leading axis of 1; returns `step.Blocks` of `step.DeviceBlock`s in the order of
        `blocks`. `shared`: the bucket every device computes, when they all compute one
        (buckets.shared_bucket), else 0; in one process such a step's fields are placed
        whole over the data axis instead (`whole`). Without `place`, in one process, an
        uneven step's fields stay on the host (placed masks stay placed) for each device's
        program to take as it launches (`Engine.batch`)."""
        if shared and (order := self.whole_order(blocks)) is not None:
            x, y = (np.stack([f[i] for i in order]) for f in (xs, ys))
            return self.whole(blocks, order, x, y, masks, delays, shared)
        full = [i for i, b in enumerate(blocks) if b.rows > 0]

        def host(i: int) -> list:  # what goes to device i: a placed mask is there already
            out = [xs[i][None], ys[i][None]]
            out += [] if isinstance(masks[i], jax.Array) else [np.asarray(masks[i])[None]]
            return out + ([] if delays is None else [np.float32([delays[blocks[i].position]])])

        where = [self.devices[blocks[i].position] for i in full]
        sent = [host(i) for i in full]
        if place or self.multi_process:
            sent = jax.device_put(sent, where)  # one call: each costs ~0.1 ms
        placed = {}
        for i, got in zip(full, sent, strict=True):
            mask = masks[i] if isinstance(masks[i], jax.Array) else got.pop(2)
            placed[i] = (got[0], got[1], mask, *got[2:])
        empty = (None, None, None, None)  # a device with no rows: nothing placed
        out = step.Blocks(
            step.DeviceBlock(b.position, b.rows, *(tuple(placed.get(i, empty)) + (None,))[:4])
            for i, b in enumerate(blocks)
        )
        out.shared = shared
        return out

    def whole_order(self, blocks) -> list[int] | None:
        """Where a step whose devices all compute one bucket goes over whole (one process,
        every device holding rows): `blocks`' indexes in the mesh's row order (row r of the
        data axis is the mesh's r-th device, not always `devices[r]`: a TPU mesh may order
        its devices otherwise); else None."""
        if self.multi_process or len(blocks) != len(self.devices):
            return None
        if any(b.rows == 0 for b in blocks):
            return None
        at = {self.devices[b.position]: i for i, b in enumerate(blocks)}
        return [at[d] for d in self.mesh.devices.flat]

    def whole(self, blocks, order: list[int], x, y, masks: list, delays, shared: int):
        """`blocks` of a step whose devices all compute the bucket `shared`, in one process,
        with their rows x [D, shared, ...] and y [D, shared] stacked in the mesh's row order
        (`order`, from `whole_order`): each field goes over as one array on the data axis
        (one transfer a field, where device by device took one a device and field and then
        assembling them: 0.83-0.93x the time for the paper job's 4 CNN blocks of 32 rows,
        `benchmarks.placement_cost`), and each device's block holds its shards. Masks
        already placed (one a device, kept by the engine for the split) are assembled once
        and the whole mask is kept while the same ones come back (`_mask_of`)."""
        host = [x, y]
        placed = all(isinstance(m, jax.Array) for m in masks)
        host += [] if placed else [np.stack([np.asarray(masks[i]).reshape(-1) for i in order])]
        if delays is not None:
            host.append(np.asarray([delays[blocks[i].position] for i in order], np.float32))
        sent = jax.device_put(host, self._data)  # one call: every field, every device
        if placed:
            sent.insert(2, self._mask_of([masks[i] for i in order]))
        # Shard r of a field is row r (addressable_data follows the mesh's device order);
        # a placed mask's shards are the masks themselves.
        rows = {i: r for r, i in enumerate(order)}
        fields = [[a.addressable_data(r) for r in range(len(order))] for a in sent]
        if placed:
            fields[2] = [masks[i] for i in order]
        out = step.Blocks(
            step.DeviceBlock(b.position, b.rows, *(f[rows[i]] for f in fields),
                             *([None] * (4 - len(fields))))
            for i, b in enumerate(blocks)
        )  # fmt: skip
        out.shared, out.whole = shared, tuple(sent)
        return out

    def _mask_of(self, masks: list) -> jax.Array:
        """Placed per-device masks [1, rows] (in the mesh's device order) as one mask [D,
        rows] over the data axis, assembled again only when other masks come (the engine
        keeps a split's placed masks while the split holds: 124 us a step saved on the
        paper job's loop, 2026-12-05)."""
        kept = self._kept_mask
        if (
            kept is None
            or len(kept[0]) != len(masks)
            or any(a is not b for a, b in zip(kept[0], masks, strict=True))
        ):
            shape = (len(masks), *masks[0].shape[1:])
            whole = jax.make_array_from_single_device_arrays(shape, self._data, masks)
            kept = self._kept_mask = (list(masks), whole)
        return kept[1]

    def split(self, layout, sizes, x: np.ndarray, y: np.ndarray, fill: float = 0.0):
        """The blocks of rows x [B, ...], y [B] under the split `sizes`, placed (for tests
        and tools; the trainer gathers straight from its data set). Padded slots get
        `fill` before the step zeroes them (tests use NaN to prove it)."""
        from omnilearn_jax.engine import buckets

        blocks = buckets.pack(np.asarray(sizes), layout, self.local_positions)
        xs, ys = zip(*(buckets.gather(x, y, b, fill) for b in blocks), strict=True)
        shared = buckets.shared_bucket(np.asarray(sizes), layout)
        return self.blocks(blocks, list(xs), list(ys), [b.mask for b in blocks], None, shared)

    def batch(self, local: dict[str, np.ndarray]):
        """Places this process's rows [local devices, ...] of a batch on the data axis."""
        if self.backend == "pmap" and self.multi_process:
            return local  # multi-process pmap takes each process's local slice as it is
        if self.multi_process:
            d = len(self.devices)
            return {
                k: jax.make_array_from_process_local_data(self._data, v, (d, *v.shape[1:]))
                for k, v in local.items()
            }
        return jax.device_put(local, self._data)

    def replicate(self, tree):
        return jax.device_put(tree, self._replicated)
