"""benchmarks.report's command line: a failure keeps the last good result; empty --only."""

import json
import os

import pytest

from benchmarks import report


def test_a_failing_benchmark_keeps_the_last_good_result(tmp_path, monkeypatch, capsys):
    """A benchmark that failed (8 workers on 3 devices, in a second) replaced its committed
    JSON with an error record and BENCHMARKS.md's table with 'Failed'."""
    committed = os.path.join(os.path.dirname(__file__), "..", "docs", "benchmarks")
    with open(os.path.join(committed, "controller_cost.json")) as f:
        good = json.load(f)  # a real result, which the document can render
    (tmp_path / "controller_cost.json").write_text(json.dumps(good))

    def broken(small):
        raise ValueError("8 workers on 3 devices")

    monkeypatch.setitem(report.BENCHMARKS, "controller_cost", broken)
    monkeypatch.setattr(report.jax.config, "update", lambda *a: None)  # devices made already
    monkeypatch.setattr("experiments.paper.bench_doc.render", lambda out, stamped: "doc\n")
    argv = ["--only", "controller_cost", "--out", str(tmp_path), "--doc", str(tmp_path / "B.md")]
    assert report.main(argv) == 1
    assert json.loads((tmp_path / "controller_cost.json").read_text()) == good
    failed = json.loads((tmp_path / "controller_cost.failed.json").read_text())
    assert failed["error"] == "ValueError: 8 workers on 3 devices"
    assert "the last good result is kept" in capsys.readouterr().out
    # The document says so; a later good run removes the failure it stood in for.
    from experiments.paper import bench_doc

    monkeypatch.undo()
    assert "**The latest run failed** (`ValueError: 8 workers on 3 devices`" in (
        bench_doc.render(str(tmp_path), {"commit": "", "dirty": False, "generated": "now"})
    )
    monkeypatch.setattr(report.jax.config, "update", lambda *a: None)
    monkeypatch.setitem(report.BENCHMARKS, "controller_cost", lambda small: {"kept": False})
    monkeypatch.setattr("experiments.paper.bench_doc.render", lambda out, stamped: "doc\n")
    assert report.main(argv) == 0
    assert not (tmp_path / "controller_cost.failed.json").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--only", ","], "--only names no benchmark"),
        (["--cpu_devices", "0"], "--cpu_devices must be >= 1, got 0"),
    ],
)
def test_an_empty_only_or_no_devices_is_refused(argv, message, capsys):
    """`--only ,` (an unset $VAR) ran all 11 benchmarks at full size into docs/benchmarks."""
    with pytest.raises(SystemExit):
        report.main(argv)
    assert message in capsys.readouterr().err


def test_a_decision_is_timed_beside_the_step_it_is_a_fraction_of():
    """The steps were timed in one block and the decisions in another: each fraction divided
    two moments of the machine's load (the same step read 7-16 ms across controllers)."""
    from benchmarks import controller_cost

    order = []
    step, decide = (lambda: order.append("step") or 0), (lambda: order.append("decide") or 0)
    medians = controller_cost._median_times([step, decide], 3)
    assert order == ["step", "decide"] * 3 and len(medians) == 2
