"""Work kept instead of done again: host work of the last step, which depends only on a
value that changes rarely (the split, the speeds: `Last`), and programs a process builds
for every run of one config (`Kept`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np


def key_of(a: np.ndarray) -> bytes:
    """An array's values and dtype, as a cache key."""
    return a.tobytes() + a.dtype.str.encode()


class Last:
    """The value built for the last key seen; built again only when the key changes."""

    def __init__(self):
        self.key: bytes | None = None
        self.value: Any = None

    def get(self, key: bytes, build: Callable[[], Any]) -> Any:
        if key != self.key:
            self.value, self.key = build(), key
        return self.value


class Kept:
    """Values built once a process by key, the last `keep` of them (oldest out first): for
    jitted programs and what they close over, so that a process that trains several runs of
    one config traces each program once (jax.jit caches by function)."""

    def __init__(self, keep: int):
        self.keep = keep
        self.values: dict[Any, Any] = {}

    def get(self, key: Any, build: Callable[[], Any]) -> Any:
        """The value kept for `key`, built now if there is none; `key` None: not kept."""
        if key is None:
            return build()
        if key not in self.values:
            while self.values and len(self.values) >= self.keep:
                del self.values[next(iter(self.values))]
            self.values[key] = build()
        return self.values[key]


def plain_key(*values: Any) -> str | None:
    """The repr of `values` where all of them are plain config data (numbers, strings, None,
    and mappings and sequences of them; mappings sorted), which tells 1, 1.0 and True
    apart; None (no key) where any is not."""

    def plain(v: Any) -> Any:
        if hasattr(v, "to_dict"):  # a ConfigDict
            v = v.to_dict()
        if isinstance(v, Mapping):
            return sorted((str(k), plain(x)) for k, x in v.items())
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        if v is None or isinstance(v, bool | int | float | str):
            return v
        raise TypeError(type(v).__name__)

    try:
        return repr(plain(list(values)))
    except TypeError:
        return None
