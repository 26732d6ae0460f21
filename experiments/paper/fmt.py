"""Number and table formatting shared by the generated documents (one rule everywhere, so a
test can find a number of the document by formatting the recomputed value the same way)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from omnilearn_jax.analysis.table import without_rounding


def fmt(value: Any, digits: int = 3) -> str:
    """`digits` significant digits; '-' for missing values (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, int | str):
        return str(value)
    return f"{value:.{digits}g}"


def fixed(value: float, digits: int = 2, sign: str = "") -> str:
    """`value` to `digits` decimals (`sign` "+": with its sign); a value that rounds to zero
    is 0.00, +0.00 (a paired mean of -2.2e-17 printed as -0.00)."""
    return f"{round(value, digits) + 0.0:{sign}.{digits}f}"


def signed(value: float, digits: int = 2) -> str:
    """`fixed` with its sign: +0.00 for a value that rounds to zero."""
    return fixed(value, digits, "+")


def pct(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{100 * value:.1f}%"


def pm(mean: float, std: float, digits: int = 3) -> str:
    """mean ± sample std (the std left out with one seed)."""
    if std is None or (isinstance(std, float) and math.isnan(std)):
        return fmt(mean, digits)
    return f"{fmt(mean, digits)} ± {fmt(without_rounding(std, mean), 2)}"


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rel(path: str) -> str:
    """`path` relative to the repository root when inside it (as a reader types it from the
    checkout), else absolute (a temporary directory of the CI run)."""
    path = os.path.abspath(path)
    inside = os.path.commonpath([path, REPO]) == REPO
    return os.path.relpath(path, REPO) if inside else path


def curve_name(path: str) -> str:
    """A cost curve's path as the document names it: repository-relative, also for a cell
    that ran from another checkout (its own copy of data/curves/)."""
    path = rel(path)
    marker = f"{os.sep}data{os.sep}curves{os.sep}"
    if os.path.isabs(path) and marker in path:
        return "data/curves/" + path.split(marker, 1)[1]
    return path
