"""Datasets by name and the deterministic global-batch sampler.

Every dataset is a `Dataset` of host numpy arrays. The sampler decides which B examples
form the global batch of step t from (seed, step) alone, so the data a run sees never
depends on how a controller splits the batch across workers.
"""

from __future__ import annotations

import os
import sys
import zipfile
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np


class Dataset(NamedTuple):
    x_train: np.ndarray  # [N, *input_shape] float32 (text: int32 tokens [N, L])
    y_train: np.ndarray  # [N] int32 (text: the next tokens [N, L])
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


_LOADERS: dict[str, Callable[[Mapping[str, Any]], Dataset]] = {}
_READS: dict[str, tuple[str, ...]] = {}  # the `dataset` keys each loader reads


def _loader(name: str, reads: tuple[str, ...] = ()):
    def wrap(fn):
        _LOADERS[name], _READS[name] = fn, ("name", *reads)
        return fn

    return wrap


def reads(name: str) -> tuple[str, ...]:
    """The keys of the config's `dataset` section that data set `name` reads."""
    check_name(name)
    return _READS[name]


def unread(name: str, keys) -> set[str]:
    """Those of `keys` (of the `dataset` section) that data set `name` does not read; none
    for a name no data set has (it is refused where the data are loaded)."""
    return set(keys) - set(reads(name)) if name in _READS else set()


def available() -> tuple[str, ...]:
    return tuple(sorted(_LOADERS))


def check_name(name: str) -> None:
    if name not in _LOADERS:
        raise ValueError(f"unknown dataset {name!r}; valid names: {', '.join(available())}")


def load(section: Mapping[str, Any]) -> Dataset:
    """Loads the dataset named by `section['name']` (the config's `dataset` section)."""
    check_name(section["name"])
    return _LOADERS[section["name"]](section)


def _finish(x_train, y_train, x_test, y_test, num_classes: int | None = None) -> Dataset:
    y_train = np.asarray(y_train, np.int32)
    y_test = np.asarray(y_test, np.int32)
    if num_classes is None:
        num_classes = int(max(y_train.max(), y_test.max())) + 1
    return Dataset(
        np.asarray(x_train, np.float32),
        y_train,
        np.asarray(x_test, np.float32),
        y_test,
        int(num_classes),
    )


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as (images [1797, 8, 8] float64, labels int), read straight from
    the CSV that scikit-learn ships: importing scikit-learn costs seconds (SciPy), every
    process that loads the data would pay it, and the file is all that `load_digits` reads.
    Falls back to `load_digits` where the file is not at its usual place."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn")  # locates the package without importing it
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "datasets", "data", "digits.csv.gz")
        if os.path.exists(path):
            table = np.loadtxt(path, delimiter=",")
            return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(int)
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return bunch.images, bunch.target


DIGITS = 1797  # scikit-learn's digits


def _digits_test_rows(fraction: float, total: int = DIGITS) -> int:
    """The digits held out for evaluation at `dataset.test_fraction`."""
    if not 0 < fraction < 1:  # 0 left nothing to evaluate on, after compiling
        raise ValueError(f"dataset.test_fraction must be in (0, 1), got {fraction}")
    n_test = int(fraction * total)
    if not 1 <= n_test < total:  # a fraction that rounds to no test (or no train) image
        raise ValueError(
            f"dataset.test_fraction={fraction} leaves {n_test} of {total} digits to evaluate "
            f"on; give at least {1 / total:.6f} and below {1 - 1 / total:.6f}"
        )
    return n_test


def _synthetic_sizes(section: Mapping[str, Any]) -> tuple[tuple[int, ...], int, int, int]:
    """The synthetic set's (input_shape, num_classes, num_train, num_test), checked."""
    shape = tuple(int(s) for s in section.get("input_shape", (32, 32, 3)))
    num_classes = int(section.get("num_classes", 10))
    n_train = int(section.get("num_train", 4096))
    n_test = int(section.get("num_test", 1024))
    if min(shape, default=0) <= 0 or num_classes < 2 or n_train <= 0 or n_test <= 0:
        raise ValueError(
            f"synthetic dataset needs positive input_shape, num_train, num_test and "
            f"num_classes >= 2; got input_shape={shape}, num_classes={num_classes}, "
            f"num_train={n_train}, num_test={n_test}"
        )
    return shape, num_classes, n_train, n_test


def check_sizes(section: Mapping[str, Any], global_batch: int) -> None:
    """Before anything is loaded: the values of a set whose sizes the config fixes (digits,
    synthetic), and a global batch that its training rows can fill. Checked after the
    training steps, a bad value was blamed on a key derived from it (paper_bsp's
    `train.num_steps`: "must be >= 1, got -80" for test_fraction 1.5)."""
    if section["name"] == "digits":
        rows = DIGITS - _digits_test_rows(section.get("test_fraction", 0.2))
    elif section["name"] == "synthetic":
        rows = _synthetic_sizes(section)[2]
    else:
        return
    if global_batch > rows:
        raise ValueError(
            f"global_batch_size={global_batch} exceeds the {rows} training examples of "
            f"dataset {section['name']}: give a smaller batch"
        )


@_loader("digits", reads=("test_fraction",))
def _digits(section: Mapping[str, Any]) -> Dataset:
    """scikit-learn's shipped 8x8 digits (1,797 images), as [N, 8, 8, 1] in [0, 1]."""
    images, y = digits_arrays()
    x = (images / 16.0).astype(np.float32)[..., None]
    # A fixed split (independent of the run seed) so every run evaluates on the same images.
    order = np.random.default_rng(0).permutation(len(y))
    n_test = _digits_test_rows(section.get("test_fraction", 0.2), len(y))
    test, train = order[:n_test], order[n_test:]
    return _finish(x[train], y[train], x[test], y[test], 10)


@_loader("mnist1d", reads=("data_dir",))
def _mnist1d(section: Mapping[str, Any]) -> Dataset:
    """MNIST-1D generated locally (never downloaded), cached as an npz under `data_dir`."""
    data_dir = section.get("data_dir", "data_cache")
    path = os.path.join(data_dir, "mnist1d.npz")
    if not os.path.exists(path):
        from mnist1d.data import get_dataset_args, make_dataset

        # make_dataset reseeds numpy's global RNG; keep the caller's global state intact.
        saved = np.random.get_state()
        try:
            raw = make_dataset(get_dataset_args())
        finally:
            np.random.set_state(saved)
        os.makedirs(data_dir, exist_ok=True)
        tmp = path + f".tmp{os.getpid()}.npz"
        np.savez(
            tmp, x_train=raw["x"], y_train=raw["y"], x_test=raw["x_test"], y_test=raw["y_test"]
        )
        os.replace(tmp, path)  # atomic: concurrent runs never read a half-written cache
    with np.load(path) as f:
        arrays = [
            f[k][..., None] if k.startswith("x") else f[k]
            for k in ("x_train", "y_train", "x_test", "y_test")
        ]
    return _finish(*arrays, 10)


@_loader("synthetic", reads=("input_shape", "num_classes", "num_train", "num_test", "data_seed"))
def _synthetic(section: Mapping[str, Any]) -> Dataset:
    """Random inputs of any shape, labelled by a fixed random linear teacher (learnable)."""
    shape, num_classes, n_train, n_test = _synthetic_sizes(section)
    rng = np.random.default_rng(int(section.get("data_seed", 0)))
    x = rng.standard_normal((n_train + n_test, *shape), dtype=np.float32)
    teacher = rng.standard_normal((int(np.prod(shape)), num_classes), dtype=np.float32)
    y = np.argmax(x.reshape(len(x), -1) @ teacher, axis=1)
    return _finish(x[:n_train], y[:n_train], x[n_train:], y[n_train:], num_classes)


@_loader("text", reads=("path", "seq_len", "num_train", "num_test"))
def _text(section: Mapping[str, Any]) -> Dataset:
    """Byte-level sequences of the Python standard library's source (omnilearn_jax/data/text.py):
    inputs [N, seq_len] int32 tokens, targets the next token at every position."""
    from omnilearn_jax.data import text

    return Dataset(*text.load(section), text.VOCAB)


_NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")


_X = ("x_train", "x_test")


@_loader("npz", reads=("path",))
def _npz(section: Mapping[str, Any]) -> Dataset:
    """A user's local file holding x_train, y_train, x_test, y_test (e.g. CIFAR-10)."""
    path = section.get("path", "")
    if not path:
        raise ValueError("dataset.name=npz needs dataset.path (a local .npz file)")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"dataset file {path!r} does not exist")
    unreadable = f"dataset file {path!r} is not a readable .npz archive (np.savez writes one)"
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as e:  # corrupt, or no npz
        raise ValueError(f"{unreadable}: {type(e).__name__}") from e
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"dataset file {path!r} is a single .npy array, not an .npz archive")
    with archive as f:
        missing = [k for k in _NPZ_KEYS if k not in f.files]
        if missing:
            raise ValueError(
                f"dataset file {path!r} lacks array(s) {', '.join(missing)}; "
                f"it has: {', '.join(f.files) or 'nothing'}"
            )
        try:  # a truncated or corrupted member fails only here, as it is read
            arrays = {k: f[k] for k in _NPZ_KEYS}
        except (OSError, EOFError, ValueError, zipfile.BadZipFile) as e:
            raise ValueError(f"{unreadable}: {type(e).__name__}: {e}") from e
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim < 2 or y.ndim != 1 or len(x) != len(y) or len(x) == 0:
            raise ValueError(
                f"dataset file {path!r}: x_{split} {x.shape} and y_{split} {y.shape} must be "
                f"[N, ...] and [N] with the same N > 0"
            )
        if not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= 2**31:
            raise ValueError(
                f"dataset file {path!r}: y_{split} must hold integer labels in [0, 2^31)"
            )
        if 0 in x.shape[1:]:  # a model of no inputs failed in its initialiser
            raise ValueError(f"dataset file {path!r}: x_{split} {x.shape} holds no features")
        real = np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)
        if not (real or x.dtype == np.bool_):  # strings failed unnamed; complex lost a part
            raise ValueError(f"dataset file {path!r}: x_{split} holds {x.dtype}, not numbers")
        if not np.isfinite(x).all():  # a NaN input failed as a non-finite loss, the run blamed
            raise ValueError(f"dataset file {path!r}: x_{split} holds NaN or infinite values")
    if arrays["x_train"].shape[1:] != arrays["x_test"].shape[1:]:
        raise ValueError(f"dataset file {path!r}: train and test inputs differ in shape")
    classes = np.unique(np.concatenate([arrays["y_train"].ravel(), arrays["y_test"].ravel()]))
    if len(classes) < 2:  # every metric trivially 1 (all 1s had passed: only all 0s failed)
        raise ValueError(
            f"dataset file {path!r}: its labels are all {classes[0]}; a classifier needs 2+"
        )
    # Images stored as bytes are scaled to [0, 1], each split by its own dtype (a float test
    # split beside byte training images had been divided by 255 a second time). In float32
    # at once, the bits of the float64 division's: through float64, a CIFAR-sized file
    # (50,000 images) peaked at 3.25x the memory its data takes, 2.3 GiB.
    scaled = {
        k: np.divide(arrays[k], np.float32(255), dtype=np.float32)
        if arrays[k].dtype == np.uint8
        else arrays[k]
        for k in _X
    }
    x_train, x_test = scaled["x_train"], scaled["x_test"]
    _warn_sparse_labels(path, arrays["y_train"], arrays["y_test"])
    return _finish(x_train, arrays["y_train"], x_test, arrays["y_test"])


def _warn_sparse_labels(path: str, *labels: np.ndarray) -> None:
    """The model gets the largest label + 1 outputs: a stray label (255 among ten classes)
    widened it without a word. Said when fewer than half of those classes appear."""
    present = np.unique(np.concatenate([np.unique(y) for y in labels]))
    classes = int(present[-1]) + 1
    if classes > 2 and 2 * len(present) < classes:
        print(
            f"warning: dataset file {path!r}: labels run to {classes - 1} but only "
            f"{len(present)} distinct values appear; the model gets {classes} outputs (the "
            f"largest label + 1)",
            file=sys.stderr,
            flush=True,
        )


class GlobalBatchSampler:
    """Indices of the B examples of step t, a function of (seed, step) only.

    Each epoch is a fresh permutation of the training set seeded by (seed, epoch); step t
    takes the (t mod steps_per_epoch)-th block of B indices. The tail that does not fill a
    whole batch is dropped, so every step sees exactly B examples.
    """

    def __init__(self, num_examples: int, global_batch_size: int, seed: int):
        if global_batch_size > num_examples:
            raise ValueError(
                f"global_batch_size {global_batch_size} exceeds the {num_examples} training "
                f"examples"
            )
        self.num_examples = num_examples
        self.global_batch_size = global_batch_size
        self.seed = seed
        self.steps_per_epoch = num_examples // global_batch_size
        self._epoch, self._perm = -1, None

    def indices(self, step: int) -> np.ndarray:
        epoch, pos = divmod(step, self.steps_per_epoch)
        if epoch != self._epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.num_examples)
            self._epoch = epoch
        b = self.global_batch_size
        return self._perm[pos * b : (pos + 1) * b]

    def stream(self, start: int, count: int) -> np.ndarray:
        """Rows [start, start + count) of the sample stream: the per-step global batches laid
        end to end (so BSP step t is stream(t * B, B)). Asynchronous workers take their
        batches from this stream in the order they start computing."""
        b = self.global_batch_size
        first, last = start // b, (start + count - 1) // b
        rows = (
            np.concatenate([self.indices(s) for s in range(first, last + 1)])
            if count
            else (np.zeros(0, np.int64))
        )
        return rows[start - first * b : start - first * b + count]

    def is_epoch_end(self, step: int) -> bool:
        return (step + 1) % self.steps_per_epoch == 0
