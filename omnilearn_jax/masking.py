"""Turning per-worker batch sizes into fixed-shape, masked per-device arrays.

W logical workers live on D devices (W a multiple of D, r = W / D workers a device). Worker k
takes rows [offset_k, offset_k + b_k) of the global batch, so device d holds the contiguous
rows of its r workers. Each device's rows go into a buffer of `num_micro` micro-batches of
`micro_batch` rows, [D, num_micro, micro_batch, ...]; only the last used micro-batch is
partly padded, and `trips[d]` says how many micro-batches device d really has. Shapes depend
on the layout only, never on the sizes, so a new split never recompiles the step.

Layouts:
  micro:  micro_batch = m from the config, num_micro = ceil(capacity / m); the step runs a
          `lax.while_loop` of `trips[d]` iterations, so a device with fewer samples computes
          less (the point of uneven batches on heterogeneous hardware).
  padded: one micro-batch of `capacity` rows; every device computes all its rows, padded
          or not. Exact, simple, and the baseline the micro layout is measured against.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

LAYOUTS = ("micro", "padded")


class Layout(NamedTuple):
    kind: str  # "micro" or "padded"
    num_devices: int
    workers_per_device: int
    capacity: int  # rows a device can hold
    micro_batch: int
    num_micro: int


def make_layout(
    kind: str, *, num_workers: int, num_devices: int, capacity: int, micro_batch: int
) -> Layout:
    """`capacity` is the most rows one device may hold (at most B in practice)."""
    if kind not in LAYOUTS:
        raise ValueError(f"unknown layout {kind!r}; valid layouts: {', '.join(LAYOUTS)}")
    if num_workers % num_devices:
        raise ValueError(
            f"num_workers={num_workers} is not a multiple of the {num_devices} devices; use "
            f"a worker count that is, or set num_devices to a divisor of it"
        )
    if capacity <= 0:
        raise ValueError(f"device capacity must be positive, got {capacity}")
    if kind == "padded":
        micro_batch, num_micro = capacity, 1
    else:
        if micro_batch <= 0:
            raise ValueError(f"micro_batch_size must be positive, got {micro_batch}")
        micro_batch = min(micro_batch, capacity)
        num_micro = math.ceil(capacity / micro_batch)
    return Layout(kind, num_devices, num_workers // num_devices, capacity, micro_batch, num_micro)


def device_counts(sizes: np.ndarray, layout: Layout) -> np.ndarray:
    """Rows per device: the sum of its workers' sizes."""
    return np.asarray(sizes, np.int64).reshape(layout.num_devices, -1).sum(axis=1)


def check_sizes(sizes, global_batch: int, layout: Layout) -> np.ndarray:
    """Validates a split on the host, before it reaches the device; returns it as int32."""
    sizes = np.asarray(sizes)
    num_workers = layout.num_devices * layout.workers_per_device
    if sizes.shape != (num_workers,):
        raise ValueError(f"expected {num_workers} batch sizes, got shape {sizes.shape}")
    if not np.issubdtype(sizes.dtype, np.integer):
        raise ValueError(f"batch sizes must be integers, got {sizes.tolist()}")
    if (sizes < 0).any():
        raise ValueError(f"batch sizes must be >= 0, got {sizes.tolist()}")
    if int(sizes.sum()) != global_batch:
        raise ValueError(
            f"batch sizes {sizes.tolist()} sum to {int(sizes.sum())}, not the global batch "
            f"{global_batch}"
        )
    per_device = device_counts(sizes, layout)
    if per_device.max() > layout.capacity:
        raise ValueError(
            f"batch sizes {sizes.tolist()} put {int(per_device.max())} rows on one device, "
            f"over its capacity of {layout.capacity}"
        )
    return sizes.astype(np.int32)


class Packed(NamedTuple):
    index: np.ndarray  # [D, num_micro, micro_batch] row of the global batch (0 where padded)
    mask: np.ndarray  # [D, num_micro, micro_batch] bool, True on valid rows
    trips: np.ndarray  # [D] int32, micro-batches each device really runs


def pack_indices(sizes: np.ndarray, layout: Layout, devices: np.ndarray | None = None) -> Packed:
    """Where each global-batch row goes: the gather index and mask of every device slot.

    `devices` (positions on the data axis) keeps only those devices' slots: a process of a
    multi-process run packs only its own devices' rows.
    """
    counts = device_counts(sizes, layout)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slots = np.arange(layout.num_micro * layout.micro_batch)
    mask = slots[None, :] < counts[:, None]
    index = np.where(mask, starts[:, None] + slots[None, :], 0)
    shape = (layout.num_devices, layout.num_micro, layout.micro_batch)
    trips = -(-counts // layout.micro_batch)  # ceil: only the last micro-batch is padded
    packed = Packed(index.reshape(shape), mask.reshape(shape), trips.astype(np.int32))
    if devices is None:
        return packed
    return Packed(*(a[devices] for a in packed))


def gather(
    x: np.ndarray, y: np.ndarray, packed: Packed, fill: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Lays global-batch rows x [B, ...], y [B] out as [D, num_micro, micro_batch, ...].

    Padded slots get `fill` (tests use NaN and 1e30 to prove they never reach the result).
    """
    xs = x[packed.index]
    ys = y[packed.index]
    xs[~packed.mask] = fill
    ys[~packed.mask] = 0
    return xs, ys


def bucket_layouts(layout: Layout, global_batch: int, count: int, align: int = 8) -> tuple:
    """Padded layouts of `count` capacities from the uniform share to `layout.capacity`.

    A padded device computes every row of its buffer, valid or not, so a buffer sized for
    the largest split a controller may pick (b_max) wastes compute whenever the split is
    closer to uniform. With buckets, each step uses the smallest capacity that holds its
    busiest device. Capacities are spaced evenly from ceil(B / D) (no split needs less) to
    the layout's, rounded up to a multiple of `align` (friendlier tiles on accelerators), so
    there are at most `count` of them; each compiles once. `count=1` is the layout alone.
    """
    if count < 1:
        raise ValueError(f"capacity_buckets must be >= 1, got {count}")
    if layout.kind != "padded" and count > 1:
        raise ValueError("capacity_buckets > 1 needs layout=padded (micro already adapts)")
    if count == 1:
        return (layout,)
    top = min(layout.capacity, global_batch)  # no device ever holds more than B rows
    low = min(-(-global_batch // layout.num_devices), top)
    steps = [low + (top - low) * k / (count - 1) for k in range(count)]  # the last is top
    caps = sorted({min(top, -(-math.ceil(s) // align) * align) for s in steps})
    return tuple(layout._replace(capacity=c, micro_batch=c) for c in caps)


def pick_layout(layouts: tuple, sizes: np.ndarray) -> Layout:
    """The smallest of `layouts` (ascending capacities) that holds the busiest device."""
    need = int(device_counts(sizes, layouts[-1]).max())
    return next((lay for lay in layouts if lay.capacity >= need), layouts[-1])
