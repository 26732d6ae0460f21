"""The fair async study's document is what its committed data give (issue 28, points 4, 5)."""

import json
import os

import pytest

from experiments import async_fair_doc as doc

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_committed_document_is_built_from_committed_data():
    with open(os.path.join(REPO, "docs", "results", "async_fair.json")) as f:
        data = json.load(f)
    with open(os.path.join(REPO, "docs", "results", "async_fair.md")) as f:
        committed = f.read()
    text, summary = doc.build(data)
    assert committed == text + "\n"
    # 5 paired seeds for every comparison of every setting.
    assert len(summary) == 3 * 4 * 3


def test_interval_and_verdict():
    mean, lo, hi = doc.interval([1.0, 2.0, 3.0, 4.0, 5.0])
    # mean 3, sample std sqrt(2.5), t(4) = 2.7764: half-width 2.7764 * 1.5811 / sqrt(5).
    assert mean == 3.0 and hi - mean == pytest.approx(2.7764 * 2.5**0.5 / 5**0.5, rel=1e-4)
    assert doc.verdict(0.1, 0.5).startswith("significant")
    assert doc.verdict(-0.1, 0.5).startswith("not significant")


def test_curve_reading():
    curve = [[0.5, 0.6], [1.0, 0.9], [1.5, 0.96]]
    # linear between the evals either side (it read 0.9, the eval before: arms whose evals
    # fall at other times were read at other times)
    assert doc.at_time(curve, 1.2) == pytest.approx(0.9 + 0.4 * 0.06)
    assert doc.at_time(curve, 0.2) == 0.6 and doc.at_time(curve, 2.0) == 0.96
    assert doc.time_to(curve, 0.95) == 1.5
    assert doc.time_to(curve, 0.99) != doc.time_to(curve, 0.99)  # NaN: never reached


def test_a_control_gap_of_the_other_sign_is_no_gap_that_stays():
    share = doc._staleness_share
    async_gap = (1.0, 0.5, 1.5)
    assert share(async_gap, (-1.0, -1.5, -0.5)) == "the gap reverses without staleness"
    assert share(async_gap, (0.8, 0.2, 1.4)).startswith("the gap stays without staleness")
    assert share(async_gap, (0.1, -0.3, 0.5)) == "the gap goes with staleness"
    assert share((0.2, -0.1, 0.5), (0.8, 0.2, 1.4)) == "there is no async gap to explain"


def _committed_runs(tmp_path, seeds):
    """The committed study's runs of the evaluation `seeds` (and the tuning seeds), as the
    JSON lines experiments.async_fair writes."""
    with open(os.path.join(REPO, "docs", "results", "async_fair.json")) as f:
        records = json.load(f)["records"]
    keep = [r for r in records if r["seed"] in seeds or r["seed"] >= 100]
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in keep))
    return path


def test_bad_runs_are_refused_before_the_committed_files_are_touched(tmp_path, capsys):
    # --data and --out default to the committed files: an empty runs file (a study stopped
    # before its first run) replaced them with an empty study, then failed in matplotlib.
    data, out = tmp_path / "data.json", tmp_path / "out.md"
    data.write_text("kept"), out.write_text("kept")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    three = _committed_runs(tmp_path, {0, 1, 2})
    paths = ["--data", str(data), "--out", str(out), "--figure", str(tmp_path / "f.png")]
    for argv, message in [
        (["--runs", str(empty)], "holds no runs"),
        (["--runs", str(tmp_path / "missing.jsonl")], "no such file"),
        (["--runs", str(three), "--seeds", "5"], "--seeds 5: the runs hold evaluation seeds 0..2"),
        (["--seeds", "3"], "--seeds goes with --runs"),
    ]:
        with pytest.raises(SystemExit):
            doc.main(argv + paths)
        assert message in capsys.readouterr().err
        assert data.read_text() == out.read_text() == "kept"


def test_the_document_names_the_seeds_its_runs_hold(tmp_path):
    # Runs of 3 evaluation seeds, --seeds left out: the document said "seeds 0..4" (the
    # default 5) beside cells of n = 3.
    three = _committed_runs(tmp_path, {0, 1, 2})
    data, out = tmp_path / "data.json", tmp_path / "out.md"
    argv = ["--runs", str(three), "--data", str(data), "--out", str(out)]
    assert doc.main(argv + ["--figure", str(tmp_path / "f.png")]) == 0
    assert json.loads(data.read_text())["meta"]["seeds"] == 3
    text = out.read_text()
    assert "run on seeds 0..2" in text and "0..4" not in text
