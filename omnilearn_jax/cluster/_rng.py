"""Counter-based standard normals for the cluster model.

The trainer asks for speeds and times of arbitrary steps (after a restart, or twice for
logging), so noise must be a pure function of (seed, stream, step, worker) rather than a
sequential generator whose output depends on how often it was called. A splitmix64 hash of
those four integers gives two uniforms per draw; Box-Muller turns them into a normal.
"""

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser; uint64 arrays wrap on overflow, which is the intent."""
    x = (x ^ (x >> np.uint64(30))) * _MUL1
    x = (x ^ (x >> np.uint64(27))) * _MUL2
    return x ^ (x >> np.uint64(31))


def _hash(*keys: np.ndarray) -> np.ndarray:
    h = np.zeros(np.broadcast_shapes(*(np.shape(k) for k in keys)), dtype=np.uint64)
    # 0-d arrays warn on wrap-around where larger arrays do not; wrapping is wanted here.
    with np.errstate(over="ignore"):
        for key in keys:
            h = _mix(h + _GOLDEN + np.asarray(key).astype(np.uint64))
    return h


def _unit(h: np.ndarray) -> np.ndarray:
    # Top 53 bits -> (0, 1]; never exactly 0 so log() below stays finite.
    return ((h >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0**-53


def normals(seed: int, stream: int, steps: np.ndarray, workers: np.ndarray) -> np.ndarray:
    """Standard normals indexed by broadcast (steps, workers); same inputs, same outputs."""
    steps = np.asarray(steps, dtype=np.int64)
    workers = np.asarray(workers, dtype=np.int64)
    # Seeds may be negative in user configs; reinterpreting the bits keeps them distinct.
    base = np.asarray(seed, dtype=np.int64).view(np.uint64)
    h1 = _hash(base, np.uint64(stream), steps, workers, np.uint64(1))
    h2 = _hash(base, np.uint64(stream), steps, workers, np.uint64(2))
    u1, u2 = _unit(h1), _unit(h2)
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


# Stream tags keep the noise sources independent even when they share a seed.
STREAM_SPEED_NOISE = 1
STREAM_RANDOM_WALK = 2
STREAM_COST_NOISE = 3
