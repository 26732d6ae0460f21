"""Every number of RESULTS.md's tables traces to a committed file (issue 28, point 1).

`make report` writes docs/results/paper/<ablation>.json (every cell: grid values, summary,
eval curve) and docs/results/paper/numbers.json (each number of the tables with the cells it
averages). Here each number is recomputed from those files alone, and both documents carry
the commit and date they were generated at. No training.
"""

from __future__ import annotations

import json
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPER = os.path.join(REPO, "docs", "results", "paper")
STAMP = re.compile(r"Generated at commit `([0-9a-f]{7,})`( \(dirty[^)]*\))?, on (\d{4}-\d\d-\d\d)")


def _json(path: str):
    with open(path) as f:
        return json.load(f)


def _read(*parts: str) -> str:
    with open(os.path.join(REPO, *parts)) as f:
        return f.read()


def _cells() -> dict[str, dict]:
    """'docs/results/paper/<file>#<cell>' -> the cell's summary (complete cells only)."""
    out = {}
    for name in os.listdir(PAPER):
        if name.endswith(".json") and name != "numbers.json":
            for cell in _json(os.path.join(PAPER, name))["cells"]:
                if cell["summary"].get("status") == "complete":
                    # derived: values computed from the run's records (async staleness in rows)
                    summary = {**cell["summary"], **cell.get("derived", {})}
                    out[f"docs/results/paper/{name}#{cell['cell']}"] = summary
    return out


def _mean(cells: dict, names: list[str], stat: str) -> float:
    values = [cells[c][stat] for c in names if c in cells and cells[c].get(stat) is not None]
    assert values, (stat, names)
    return sum(values) / len(values)


def test_each_number_recomputes_from_the_committed_cells():
    numbers = _json(os.path.join(PAPER, "numbers.json"))
    cells = _cells()
    results = _read("docs", "RESULTS.md")
    assert len(numbers["numbers"]) > 50
    tables = set()
    for e in numbers["numbers"]:
        tables.add(e["table"])
        if e["stat"] == "reduction":
            got = 1 - _mean(cells, e["cells"], e["of"]) / _mean(
                cells, e["reference_cells"], e["of"]
            )
        else:
            got = _mean(cells, e["cells"], e["stat"])
        assert got == pytest.approx(e["mean"], rel=1e-9, abs=1e-12), e
        assert e["text"] in results, e
    assert {"bsp", "async"} <= tables
    assert any(e["stat"] == "staleness_rows_by_sample" for e in numbers["numbers"])


CURVE_TABLES = {"bsp curve", "dynamic curve", "async curve", "scaleout curve", "resnet"}


def test_each_table_charged_the_cost_it_names():
    """Issue 28, point 3: a `... curve` table's cells ran on a measured cost curve shipped in
    data/curves/, the one its section names; every other table's (but the second ResNet
    table, labelled `resnet curve ...`) on the formula, as the document's header says."""
    numbers = _json(os.path.join(PAPER, "numbers.json"))["numbers"]
    curve_of = {
        f"docs/results/paper/{name}#{cell['cell']}": cell.get("cost_curve")
        for name in os.listdir(PAPER)
        if name.endswith(".json") and name != "numbers.json"
        for cell in _json(os.path.join(PAPER, name))["cells"]
    }
    results = _read("docs", "RESULTS.md")
    on_curve = set()
    for e in numbers:
        curves = {curve_of[c] for c in e["cells"] + e.get("reference_cells", [])}
        assert len(curves) == 1, e  # one cost per number
        (curve,) = curves
        is_curve = e["table"].endswith(" curve") or e["label"].startswith("resnet curve")
        if is_curve:
            assert curve and curve.startswith("data/curves/"), e
            assert os.path.exists(os.path.join(REPO, curve)), curve
            assert f"`{curve}`" in results, curve  # the section names it
            on_curve.add(e["table"])
        else:
            assert curve == "", e
    assert on_curve >= CURVE_TABLES


def test_documents_are_stamped_with_the_commit_they_come_from():
    numbers = _json(os.path.join(PAPER, "numbers.json"))
    head = _read("docs", "RESULTS.md").splitlines()[2]
    m = STAMP.search(head)
    assert m, head
    assert m.group(1) == numbers["commit"]
    assert m.group(3) == numbers["generated"][:10]
    assert STAMP.search(_read("docs", "BENCHMARKS.md").splitlines()[2])
    for name in os.listdir(PAPER):  # each ablation names the commit its cells ran at
        if name.endswith(".json") and name != "numbers.json":
            ran = _json(os.path.join(PAPER, name))["ran_at"]
            assert re.fullmatch(r"[0-9a-f]{7,}", ran["commit"]), name
