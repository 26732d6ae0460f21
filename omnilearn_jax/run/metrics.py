"""Which way an evaluation metric improves, and the time a run first reaches a target.

Accuracy improves upwards; loss and perplexity downwards. Code that compares runs (the
summary's time_to_target, the ablation table, the notebook) asks here instead of assuming
that higher is better.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

LOWER_IS_BETTER = frozenset(
    {"eval_loss", "eval_perplexity", "final_eval_loss", "final_eval_perplexity"}
)


def lower_is_better(metric: str) -> bool:
    return metric in LOWER_IS_BETTER


def reached(value: float, target: float, metric: str) -> bool:
    """True when `value` is at or past `target` in the metric's good direction (NaN: never)."""
    if math.isnan(value):
        return False
    return value <= target if lower_is_better(metric) else value >= target


def time_to_target(
    eval_records: Iterable[Mapping[str, Any]], target: float, metric: str = "eval_accuracy"
) -> float | None:
    """Earliest `time` of an eval record whose `metric` reached `target`, else None (JSON
    null). Records need not be sorted; records without the metric never count."""
    hits = [
        float(r["time"])
        for r in eval_records
        if r.get(metric) is not None and reached(float(r[metric]), target, metric)
    ]
    return min(hits) if hits else None
