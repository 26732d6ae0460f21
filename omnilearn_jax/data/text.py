"""A byte-level text corpus that every machine has offline, cut into fixed-length sequences.

The corpus is the Python standard library's own source: the top-level `*.py` files of the
running interpreter's library directory, in sorted order, joined by newlines (Python 3.11:
168 files, 4.7 MB). It needs no download and no package. It is fixed for a given Python
version, so runs on one interpreter see the same bytes. `dataset.path` names a local text
file to use instead.

Tokens are bytes (vocabulary 256). An example is a window of `seq_len + 1` bytes: its input
is the first `seq_len` and its target the last `seq_len` (each position predicts the next
byte). Windows start every `seq_len` bytes, so inputs never overlap. Training windows come
from the start of the corpus and test windows from its end (for the standard library:
different files), never sharing a byte.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

VOCAB = 256  # byte-level tokens


def stdlib_files() -> list[str]:
    """The standard library's top-level source files, sorted (the default corpus)."""
    return sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))


def corpus(path: str = "") -> np.ndarray:
    """The corpus as bytes (uint8): the file at `path`, or the standard library's source."""
    if path:
        if not os.path.isfile(path):  # a folder had been said not to exist
            what = "is a folder, not a file" if os.path.isdir(path) else "does not exist"
            raise FileNotFoundError(f"text corpus {path!r} {what}")
        with open(path, "rb") as f:
            raw = f.read()
    else:
        parts = []
        for name in stdlib_files():
            with open(name, "rb") as f:
                parts.append(f.read())
        raw = b"\n".join(parts)
    return np.frombuffer(raw, np.uint8)


def windows(tokens: np.ndarray, seq_len: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` inputs [count, seq_len] and next-token targets [count, seq_len] (int32) from
    consecutive windows of `tokens` starting every `seq_len` tokens."""
    starts = np.arange(count)[:, None] * seq_len + np.arange(seq_len + 1)[None, :]
    rows = tokens[starts].astype(np.int32)
    return rows[:, :-1], rows[:, 1:]


def load(section: Mapping[str, Any]) -> tuple[np.ndarray, ...]:
    """(x_train, y_train, x_test, y_test) for the config's `dataset` section: `seq_len`,
    `num_train` and `num_test` sequences, and `path` (optional)."""
    seq_len = int(section.get("seq_len", 64))
    n_train = int(section.get("num_train", 4096))
    n_test = int(section.get("num_test", 1024))
    if min(seq_len, n_train, n_test) <= 0:
        raise ValueError(
            f"text dataset needs positive seq_len, num_train and num_test; got "
            f"seq_len={seq_len}, num_train={n_train}, num_test={n_test}"
        )
    tokens = corpus(section.get("path", ""))
    need = (n_train + n_test) * seq_len + 2
    if len(tokens) < need:
        raise ValueError(
            f"text corpus has {len(tokens)} bytes; {n_train} train and {n_test} test "
            f"sequences of {seq_len} need {need}; lower dataset.num_train, num_test or "
            f"seq_len"
        )
    x_train, y_train = windows(tokens, seq_len, n_train)
    tail = tokens[len(tokens) - (n_test * seq_len + 1) :]
    x_test, y_test = windows(tail, seq_len, n_test)
    return x_train, y_train, x_test, y_test
