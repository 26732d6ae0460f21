"""Parses the variant argument of a config file: `configs/x.py:hetero=hl8,controller=pi,runlocal`.

In the big_vision manner, `get_config(arg)` receives everything after the first ':' of the
`--config` flag. `parse_arg(arg, **defaults)` turns it into a ConfigDict of variant values,
typed like the defaults: `key=value` sets a value, a bare `flag` sets a bool key to True.
Unknown keys, missing values and unparsable values raise a one-line ValueError that names the
valid keys (and the closest one), so a typo never silently runs the default variant.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

import ml_collections

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def suggest(word: str, candidates: Iterable[str]) -> str:
    """' (did you mean X?)' for the closest candidate, or '' when nothing is close."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def literal(text: str) -> Any:
    """A `--set KEY=VALUE` value as Python reads it (20, 0.5, (1, 2), True), true/false as
    booleans, and a bare word as itself ('hl8'): for tools that set config keys from text
    without a default to type them (experiments.ablate, experiments.curves.measure)."""
    import ast

    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _convert(key: str, text: str, default: Any, arg: str) -> Any:
    kind = type(default)
    if kind is bool:
        low = text.lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise ValueError(
            f"variant {key}={text!r} in {arg!r}: expected a bool ({'/'.join(_TRUE + _FALSE)})"
        )
    try:
        return kind(text)
    except ValueError:
        raise ValueError(
            f"variant {key}={text!r} in {arg!r}: expected {kind.__name__} (default {default!r})"
        ) from None


def parse_arg(arg: str | None, **defaults: Any) -> ml_collections.ConfigDict:
    """Variant values from `arg` ('k=v,flag,...') over `defaults` (which give keys and types).

    Supported types: bool, int, float, str. An empty or None `arg` gives the defaults.
    """
    for key, default in defaults.items():
        if type(default) not in (bool, int, float, str):
            raise TypeError(f"variant {key!r}: default {default!r} is not bool/int/float/str")
    values = dict(defaults)
    seen: set[str] = set()
    for token in (t.strip() for t in (arg or "").split(",")):
        if not token:
            continue
        key, has_value, text = token.partition("=")
        key = key.strip()
        if key not in defaults:
            valid = ", ".join(sorted(defaults)) or "none (this config takes no variants)"
            raise ValueError(
                f"unknown variant key {key!r} in {arg!r}{suggest(key, defaults)}; "
                f"valid keys: {valid}"
            )
        if key in seen:
            raise ValueError(f"variant key {key!r} given twice in {arg!r}")
        seen.add(key)
        if not has_value:
            if type(defaults[key]) is not bool:
                raise ValueError(
                    f"variant key {key!r} in {arg!r} needs a value ({key}=...); "
                    f"only bool keys may be given bare"
                )
            values[key] = True
        else:
            values[key] = _convert(key, text.strip(), defaults[key], arg or "")
    return ml_collections.ConfigDict(values)


def check_choice(key: str, value: str, valid: Iterable[str]) -> str:
    """Returns `value` if it is one of `valid`, else a one-line ValueError with a suggestion."""
    valid = tuple(valid)
    if value not in valid:
        raise ValueError(
            f"unknown {key} {value!r}{suggest(value, valid)}; valid values: {', '.join(valid)}"
        )
    return value
