"""Each generated claim of RESULTS.md agrees with the table it speaks of (issue 28, point 4).

No training: the claims are recomputed from their facts (the clock's cost, the core tables)
and checked against the committed RESULTS.md tables and docs/results/cost_curves.md.
"""

from __future__ import annotations

import os
import re

import pytest

from experiments.paper import claims
from experiments.paper.common import hl_cores

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COST = {"fixed_cost": 0.05, "per_sample_cost": 0.01}


def _read(*parts: str) -> str:
    with open(os.path.join(REPO, *parts)) as f:
        return f.read()


def _bsp_rows() -> dict[tuple[int, str, str], list[str]]:
    """RESULTS.md's BSP table: (level, policy, bounds) -> cells."""
    text = _read("docs", "RESULTS.md").split("## Synchronous training (BSP)", 1)[1]
    rows = {}
    for line in text.split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| HL") and len(cells) == 9:
            rows[(int(cells[0][2:]), cells[1], cells[2])] = cells
    return rows


def _pct(cell: str) -> float:
    return float(re.match(r"(-?[0-9.]+)%", cell).group(1)) / 100


def test_balanced_share_under_the_clock_cost():
    facts = claims.bound_facts({lvl: hl_cores(lvl) for lvl in (2, 4, 8)}, COST, 128, 16, 96)
    # HL4 9/9/6/24: T = (128 * 0.01 + 4 * 0.05) / 48, b = 100 T 6 - 5 = 13.5 < 16.
    assert facts[4]["slow_share"] == pytest.approx(13.5)
    assert facts[4]["slow_cores"] == 6 and facts[4]["binds"]
    assert facts[8]["slow_share"] == pytest.approx(148 / 48 * 4 - 5) and facts[8]["binds"]
    assert facts[2]["slow_share"] == pytest.approx(148 / 48 * 8 - 5)  # 19.67: inside
    assert not facts[2]["binds"]
    for f in facts.values():
        assert sum(f["shares"]) == pytest.approx(128)


def test_bounds_sentence_agrees_with_the_bsp_table():
    rows = _bsp_rows()
    levels = sorted({lvl for lvl, _, _ in rows if lvl > 1})
    facts = claims.bound_facts({lvl: hl_cores(lvl) for lvl in levels}, COST, 128, 16, 96)
    text = _read("docs", "RESULTS.md")
    sentence = next(ln for ln in text.splitlines() if ln.startswith("- **Bounds"))
    for lvl in levels:
        oracle = _pct(rows[(lvl, "oracle", "16..96")][6])
        prop = _pct(rows[(lvl, "proportional", "16..96")][6])
        ideal = _pct(rows[(lvl, "oracle", "16..96")][7])
        if facts[lvl]["binds"]:
            # The sentence names the level, the binding share, and the table's reductions.
            assert f"at HL{lvl} (" in sentence
            assert f"balanced share is {facts[lvl]['slow_share']:.1f} rows" in sentence
            assert f"saves {100 * prop:.1f}% and the oracle {100 * oracle:.1f}%" in sentence
            assert oracle < ideal - 0.03  # the bound costs the oracle at least 3 points
        else:
            assert re.search(
                rf"At [HL0-9, ]*HL{lvl}\b every balanced share.*?change nothing", sentence
            )
            assert oracle > ideal - 0.02  # no bound: the oracle comes within 2 points
    assert "At HL1-HL4" not in text  # the old, false sentence


def test_acsos_sentence_agrees_with_the_cost_curve_table():
    curves = claims.acsos_curves()
    column = {k: v["H2 (1,1,2)"] for k, v in curves.items()}
    assert column["saturating"] <= column["linear"]  # rising throughput gives no more
    assert max(column.values()) < 2.0
    sentence = claims.acsos_sentence(curves)
    best = max(column, key=column.get)
    assert f"the most any gives is {column[best]:.2f}x (`{best}`)" in sentence
    assert f"gives {column['saturating']:.2f}x, no more than the linear" in sentence
    assert "none of them reaches" in sentence
    results = _read("docs", "RESULTS.md")
    assert sentence in results
    assert "throughput rising with batch size" not in results


def test_acsos_sentence_follows_its_numbers():
    """A table where a curve reaches the claim says so: the words follow the numbers."""
    curves = {"linear": {"H2 (1,1,2)": 1.33}, "saturating": {"H2 (1,1,2)": 1.5}}
    curves["kink"] = {"H2 (1,1,2)": 2.1}
    sentence = claims.acsos_sentence(curves)
    assert "gives 1.50x, more than the linear 1.33x" in sentence
    assert "is 2.10x (`kink`), so `kink` reaches" in sentence


def test_the_scale_out_sentence_counts_the_clocks_fixed_cost():
    """It said a 2-core worker's balanced share is 2.9 rows (B x 2 / 350, the fixed cost left
    out); under (0.05 + 0.01 b) / cores it is (512 * 0.01 + 32 * 0.05) / 350 * 2 / 0.01 - 5 =
    -1.16: no rows at all."""
    from experiments.paper import discussion

    text = discussion._slowest_share(COST)
    assert "gives a 2-core worker no rows at all (its share, -1.2, is below zero" in text
    linear = discussion._slowest_share({"fixed_cost": 0.0, "per_sample_cost": 0.01})
    assert linear == "against a balanced share of 2.9 rows for a 2-core worker"
    assert "no rows at all (its share, -1.2" in _read("docs", "RESULTS.md")


def test_a_value_that_rounds_to_zero_has_no_minus_sign():
    from experiments.paper.fmt import fixed, signed

    assert signed(-2.2e-15) == "+0.00" and fixed(-2.2e-15) == "0.00"  # printed as -0.00
    assert (
        signed(-0.006) == "-0.01" and signed(1.25, 1) == "+1.2" and fixed(-3.14159, 3) == "-3.142"
    )
    assert not re.search(r"-0\.0+(?![0-9])", _read("docs", "RESULTS.md"))
