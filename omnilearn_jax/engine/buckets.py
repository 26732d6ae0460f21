"""Per-device blocks: each device computes a bucket-sized block for its own rows only.

W logical workers live on D devices (W a multiple of D, r = W / D workers a device). Worker k
takes rows [offset_k, offset_k + b_k) of the global batch, so device d holds the contiguous
rows of its r workers, n_d of them. Device d computes one block of `bucket(n_d)` rows: the
smallest of a few precompiled sizes that holds n_d (0 rows: nothing to compute). The padded
rows of a block are zeroed and masked, so they never touch the result.

  device   rows n_d   bucket   rows computed
  0        4          8        8
  7        100        104      104

Buckets run from 8 rows to the device capacity, about `ratio` apart and multiples of 8, so a
device computes at most about `ratio` times its rows, and a slow device that holds few rows
really computes few. Shapes depend on the bucket only, never on the split, so with every
(device, bucket) program compiled once at warm-up, no split recompiles.

`memory_rows` > 0 bounds the rows computed at once: a block larger than that is computed as
equal chunks of at most `memory_rows` rows whose sums accumulate (memory decoupled from
compute, as per-GPU gradient accumulation does); buckets above it are multiples of the chunk.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

ALIGN = 8  # rows: bucket sizes are multiples of this (friendlier tiles on accelerators)


class Layout(NamedTuple):
    num_devices: int
    workers_per_device: int
    capacity: int  # most rows one device may hold
    buckets: tuple[int, ...]  # ascending block sizes a device may compute
    chunk: int  # rows computed at once inside a block (>= the largest bucket: no limit)

    @property
    def num_workers(self) -> int:
        return self.num_devices * self.workers_per_device


def bucket_sizes(capacity: int, ratio: float = 1.25, memory_rows: int = 0) -> tuple[int, ...]:
    """Block sizes from ALIGN rows up to `capacity` rounded up to ALIGN, each the previous
    times `ratio` rounded up to a multiple of ALIGN (or of the chunk, past `memory_rows`)."""
    if capacity < 1:
        raise ValueError(f"device capacity must be positive, got {capacity}")
    if not 1 < ratio < math.inf:  # NaN and inf too (an OverflowError below)
        raise ValueError(f"bucket_ratio must be a finite number > 1, got {ratio}")
    chunk = _chunk(memory_rows)

    def up(rows: float) -> int:
        step = chunk if chunk and rows > chunk else ALIGN
        return math.ceil(rows / step) * step

    top = up(capacity)
    sizes = [ALIGN]
    while sizes[-1] < top:
        sizes.append(min(max(up(sizes[-1] * ratio), sizes[-1] + ALIGN), top))
    return tuple(sizes)


def _chunk(memory_rows: int) -> int:
    if memory_rows < 0:
        raise ValueError(f"memory_rows must be >= 0 (0 = no limit), got {memory_rows}")
    return math.ceil(memory_rows / ALIGN) * ALIGN if memory_rows else 0


def make_layout(
    *,
    num_workers: int,
    num_devices: int,
    capacity: int,
    ratio: float = 1.25,
    memory_rows: int = 0,
) -> Layout:
    """`capacity` is the most rows one device may hold (at most B in practice)."""
    if num_workers % num_devices:
        raise ValueError(
            f"num_workers={num_workers} is not a multiple of the {num_devices} devices; use "
            f"a worker count that is, or set num_devices to a divisor of it"
        )
    buckets = bucket_sizes(capacity, ratio, memory_rows)
    chunk = _chunk(memory_rows) or buckets[-1]
    return Layout(num_devices, num_workers // num_devices, capacity, buckets, chunk)


def device_counts(sizes: np.ndarray, layout: Layout) -> np.ndarray:
    """Rows per device: the sum of its workers' sizes."""
    return np.asarray(sizes, np.int64).reshape(layout.num_devices, -1).sum(axis=1)


def device_buckets(counts: np.ndarray, layout: Layout) -> np.ndarray:
    """The block each device computes: the smallest bucket holding its rows (0 for none)."""
    buckets = np.asarray(layout.buckets)
    picked = buckets[np.minimum(np.searchsorted(buckets, counts), len(buckets) - 1)]
    return np.where(np.asarray(counts) > 0, picked, 0)


def shared_bucket(sizes: np.ndarray, layout: Layout) -> int:
    """The bucket every device computes when they all compute the same one, else 0.

    All D devices share a bucket c only when D * (bucket before c) < B <= D * c, so for a
    given B one bucket alone can be shared: that of the uniform share ceil(B / D). Such a
    step runs as one program over the whole mesh (step.py), as a plain step would.
    """
    buckets = device_buckets(device_counts(sizes, layout), layout)
    return int(buckets[0]) if (buckets == buckets[0]).all() else 0


def uniform_bucket(global_batch: int, layout: Layout) -> int:
    """The only bucket all devices can share for a global batch (see shared_bucket)."""
    share = -(-global_batch // layout.num_devices)
    return int(device_buckets(np.array([share]), layout)[0])


def check_sizes(sizes, global_batch: int, layout: Layout) -> np.ndarray:
    """Validates a split on the host, before it reaches the device; returns it as int32."""
    sizes = np.asarray(sizes)
    num_workers = layout.num_workers
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


class Block(NamedTuple):
    """What one device computes: `rows` slots (its bucket; 0 = nothing)."""

    position: int  # the device's position on the data axis
    rows: int
    index: np.ndarray  # [rows] row of the global batch (0 where padded)
    mask: np.ndarray  # [rows] bool, True on valid rows


def pack(sizes: np.ndarray, layout: Layout, positions=None) -> tuple[Block, ...]:
    """Every device's block for the split `sizes` (only `positions` when given: a process
    of a multi-process run packs only its own devices). Rows above the largest bucket are
    refused: a block holds at most its bucket, and silently dropping rows would change the
    gradient."""
    counts = device_counts(sizes, layout)
    over = np.flatnonzero(counts > layout.buckets[-1])
    if over.size:
        d = int(over[0])
        raise ValueError(
            f"device {d} holds {int(counts[d])} rows, above the largest bucket "
            f"({layout.buckets[-1]}); the split {np.asarray(sizes).tolist()} exceeds capacity"
        )
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    buckets = device_buckets(counts, layout)
    positions = range(layout.num_devices) if positions is None else positions
    blocks = []
    for d in positions:
        slots = np.arange(buckets[d])
        mask = slots < counts[d]
        index = np.where(mask, starts[d] + slots, 0)
        for a in (index, mask):  # shared by every step with this split: never written
            a.flags.writeable = False
        blocks.append(Block(int(d), int(buckets[d]), index, mask))
    return tuple(blocks)


def gather(
    x: np.ndarray, y: np.ndarray, block: Block, fill: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """A block's rows of x [B, ...] and y [B]; padded slots get `fill` (tests use NaN and
    1e30 to prove they never reach the result) and label 0."""
    xs = x[block.index]
    ys = y[block.index]
    xs[~block.mask] = fill
    ys[~block.mask] = 0
    return xs, ys


def uniform_blocks(num_rows: int, num_devices: int, rows: int) -> tuple[np.ndarray, ...]:
    """Index [D, rows] and mask of `num_rows` rows spread evenly over the devices (the
    evaluation layout: one shape for the whole mesh)."""
    counts = np.full(num_devices, num_rows // num_devices)
    counts[: num_rows % num_devices] += 1
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slots = np.arange(rows)
    mask = slots[None, :] < counts[:, None]
    return np.where(mask, starts[:, None] + slots[None, :], 0), mask
