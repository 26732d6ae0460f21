"""RESULTS.md's BSP table on the CNN's own measured cost curve (the bsp_levels_curve ablation)."""

from __future__ import annotations

from typing import Any

from experiments.paper import groups as G
from experiments.paper.common import LEVELS, TARGET
from experiments.paper.fmt import md_table, pct
from experiments.paper.tracedoc import Doc, compare

POLICIES = ("proportional", "pi", "oracle")


def bsp_curve_section(doc: Doc, runs: list[G.Group], curve: str) -> dict[str, Any]:
    """Each level's reductions against uniform `static` when the clock charges `curve`;
    returns {policy: {level: reduction}}."""
    facts: dict[str, Any] = {name: {} for name in POLICIES}
    rows = []
    for level in LEVELS:
        ref = G.find(runs, controller__name="static", hetero__level=level)
        if ref is None:
            continue
        for name in ("static", *POLICIES):
            g = G.find(runs, controller__name=name, hetero__level=level)
            if g is None:
                continue
            cut, stat = compare(g, ref)
            label = f"HL{level} {name} curve"
            doc.reduction("bsp curve", label, g, ref, cut, stat)
            if name in facts:
                facts[name][level] = cut
            rows.append(
                [
                    f"HL{level}",
                    "static (uniform)" if name == "static" else name,
                    doc.num("bsp curve", label, g, "time_to_target"),
                    g.row["target_reached"],
                    doc.num("bsp curve", label, g, "total_time"),
                    pct(cut) + ("" if stat == "time_to_target" else " (total)"),
                    doc.num("bsp curve", label, g, "final_eval_accuracy"),
                ]
            )
    if not rows:
        return facts
    doc.add(
        "## Synchronous training (BSP) at HL1, 2, 4, 8: the CNN's measured cost curve",
        "",
        "The set-up of the BSP table above (bounds 16..96), but modelled on the CNN's own "
        f"cost: the virtual clock charges the measured CPU curve `{curve}` of this CNN, read "
        "at the bucket each device computes (its rows rounded up to the engine's bucket, so "
        "padding is charged), over each worker's cores, plus the cost model's ring all-reduce. "
        f"Target accuracy {TARGET}; times in seconds of the virtual clock (a step is about a "
        "millisecond here, against a few tenths of a second under the formula); *reduction* "
        "as above. So short a step leaves the cost model's ring all-reduce, which no split "
        "shortens, a large part of every step, and the slowest workers sit at b_min = 16: "
        "both cap what balancing saves here.",
        "",
        md_table(
            [
                "level",
                "policy",
                "time to target",
                "reached",
                "total time",
                "reduction",
                "final accuracy",
            ],
            rows,
        ),
    )
    return facts
