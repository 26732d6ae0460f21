"""The CI variant of `make report`: the whole pipeline end to end, small, into tmp_path.

Runs `python -m experiments.paper.reproduce --small` (paper ablations shrunk to a few steps,
the quick benchmarks, both documents) and checks that the documents have their sections and
that a number of RESULTS.md is the one recomputed from the run's summary.json. Only the
ablations whose numbers are asserted run (`--only`): the BSP levels (the traced number, the
figure), the asynchronous levels (another trainer, another table) and the dynamic cluster on a
measured cost curve (a curve table; its formula twin not run); a section whose ablation has
no runs is left out of RESULTS.md, which is checked too. The studies run too, in their
`--small` form: their documents rendered from the committed JSON and spliced in. The cells
share the test session's compilation cache (conftest.py) instead of one of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from experiments.paper.fmt import fmt

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RESULTS_SECTIONS = (
    "# Results: OmniLearn reproduced side by side",
    "## Summary: the papers' figures and ours",
    "## Synchronous training (BSP) at HL1, 2, 4, 8",
    "## Asynchronous training: accuracy at equal time",
    "## Where we agree with the papers, and where not",
    "## Figures",
    "## Sources",
)
# The ablations whose numbers are asserted below (bsp_levels: the BSP table and figure,
# async_levels: the asynchronous table, dynamic_curve: a table on a measured cost curve).
ASSERTED_ABLATIONS = ("bsp_levels", "async_levels", "dynamic_curve")
# The studies with generators of their own: under --small none runs, and their documents are
# rendered from the committed JSON (a few seconds).
STUDIES = ("async_fair", "heldout", "predictive_trainer")
CURVE_SECTION = "## Dynamic heterogeneity: HL 1, 2, 4, 8, 8, 4, 2, 1: the CNN's measured cost curve"
NOT_RUN_SECTIONS = (
    "## Dynamic heterogeneity: HL 1, 2, 4, 8, 8, 4, 2, 1\n",
    "## Scale-out",
    "## ResNet-18",
)
BENCH_SECTIONS = (
    "# Benchmarks",
    "## 2. Compilations across split changes",
    "## 4. Controller-only simulation",
    "## 5. End to end: trainer loop vs a plain Flax/optax loop",
    "## Sources",
)


@pytest.fixture(scope="module")
def small_report(tmp_path_factory) -> str:
    workdir = str(tmp_path_factory.mktemp("paper_small"))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.paper.reproduce",
            "--small",
            f"--workdir={workdir}",
            f"--only={','.join(ASSERTED_ABLATIONS + STUDIES)}",
            f"--jax_cache={os.environ['JAX_COMPILATION_CACHE_DIR']}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return workdir


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


@pytest.mark.slow
def test_documents_have_their_sections(small_report):
    results = _read(os.path.join(small_report, "RESULTS.md"))
    bench = _read(os.path.join(small_report, "BENCHMARKS.md"))
    for heading in RESULTS_SECTIONS:
        assert heading in results, heading
    for heading in NOT_RUN_SECTIONS:
        assert heading not in results, heading
    for heading in BENCH_SECTIONS:
        assert heading in bench, heading
    assert "Machine: " in bench and "jax " in bench
    # Figures are written and linked relative to the document.
    assert os.path.exists(os.path.join(small_report, "figures", "results_bsp_reduction.png"))
    assert "](figures/results_bsp_reduction.png)" in results


@pytest.mark.slow
def test_a_results_number_traces_to_its_summaries(small_report):
    results = _read(os.path.join(small_report, "RESULTS.md"))
    traced = json.loads(_read(os.path.join(small_report, "results.json")))["numbers"]
    entry = next(
        e
        for e in traced
        if e["label"] == "HL8 proportional bounds 16..96" and e["stat"] == "total_time"
    )
    times = [
        json.loads(_read(os.path.join(c, "summary.json")))["total_time"] for c in entry["cells"]
    ]
    recomputed = sum(times) / len(times)
    assert recomputed == pytest.approx(entry["mean"], rel=1e-12)
    # The BSP table's HL8 proportional row shows that very number.
    row = next(
        line for line in results.splitlines() if line.startswith("| HL8 | proportional | 16..96 |")
    )
    assert fmt(recomputed) in row.split("|")[6]
    # Every traced number is in the document, and its cells are named under Sources.
    assert {e["table"] for e in traced} == {"bsp", "async", "dynamic curve"}
    for e in traced:
        assert e["text"] in results, e
    assert os.path.join(small_report, "bsp_levels") in results
    assert os.path.join(small_report, "async_levels") in results


@pytest.mark.slow
def test_a_curve_table_charges_the_curve_it_names(small_report):
    """The dynamic_curve cells ran with the clock on the shipped MLP curve (`small` trains an
    MLP), the section and the header name that file, and the formula's twin (not run) is
    absent; a step on the curve costs what the curve says, far below the formula's."""
    results = _read(os.path.join(small_report, "RESULTS.md"))
    assert CURVE_SECTION in results
    section = results.split(CURVE_SECTION, 1)[1].split("\n## ", 1)[0]
    assert "`data/curves/cpu_mlp_digits.json`" in section
    header = results.splitlines()[2]
    assert "second table of the dynamic cluster (`data/curves/cpu_mlp_digits.json`)" in header
    traced = json.loads(_read(os.path.join(small_report, "results.json")))["numbers"]
    entry = next(
        e
        for e in traced
        if e["label"] == "dynamic curve proportional" and e["stat"] == "total_time"
    )
    for cell in entry["cells"]:
        config = json.loads(_read(os.path.join(cell, "config.json")))
        assert config["cost"]["curve"].endswith(
            os.path.join("data", "curves", "cpu_mlp_digits.json")
        )
    steps = json.loads(_read(os.path.join(entry["cells"][0], "summary.json")))["steps"]
    # The formula charges at least 0.05 s / 12 cores a step; the MLP curve a few ms at most.
    assert entry["mean"] < 0.05 / 12 * steps
    row = next(line for line in section.splitlines() if line.startswith("| proportional |"))
    assert fmt(entry["mean"]) in row.split("|")[4]


@pytest.mark.slow
def test_benchmark_json_holds_what_the_document_shows(small_report):
    record = json.loads(_read(os.path.join(small_report, "benchmarks", "compiles.json")))
    assert "error" not in record, record.get("error")
    assert record["result"]["compiles_after_warmup"] == 0  # a new split never recompiles
    assert record["result"]["distinct_splits"] > 1
    assert record["machine"]["backend"] == "cpu"


@pytest.mark.slow
def test_the_studies_documents_are_rendered_and_spliced(small_report):
    results = _read(os.path.join(small_report, "RESULTS.md"))
    timings = json.loads(_read(os.path.join(small_report, "timings.json")))
    assert {"async_fair", "predictive_trainer"} <= set(timings)  # heldout: nothing under --small
    for name in ("async_fair.md", "predictive_seeds.md"):
        text = _read(os.path.join(small_report, "results", name))
        assert text.splitlines()[0] in results, name  # spliced under its heading
    assert os.path.exists(os.path.join(small_report, "figures", "async_fair_curves.png"))
    assert "- study `async_fair` (rerun by `make report`;" in results


def test_a_partial_rerun_leaves_results_md_as_it_is(tmp_path, capsys, monkeypatch):
    """`reproduce --docs_only` (or `--only=STUDY`) where the ablations' run directories are
    missing (a fresh clone) rendered RESULTS.md from nothing: its tables emptied, exit 0. An
    ablation whose manifest exists but no cell finished (an interrupted `make report`) counts
    as missing."""
    from experiments.paper import reproduce, stamp

    monkeypatch.setenv(stamp.PIN, "")  # main pins the stamp and moves to the repository
    monkeypatch.chdir(REPO)
    docs, work = tmp_path / "docs", tmp_path / "w"
    docs.mkdir()
    (docs / "RESULTS.md").write_text("the committed document\n")
    (work / "resnet").mkdir(parents=True)
    (work / "resnet" / "ablation.json").write_text("{}")  # a manifest, no cell finished
    # A cell with a summary but no metrics (a run store copied without them): the tables and
    # figures read the metrics, and the figures had ended the command in a FileNotFoundError.
    (work / "bsp_levels" / "name-static__seed-0").mkdir(parents=True)
    (work / "bsp_levels" / "name-static__seed-0" / "summary.json").write_text("{}")
    code = reproduce.main(["--docs_only", f"--workdir={work}", f"--docs={docs}"])
    assert code == 1 and (docs / "RESULTS.md").read_text() == "the committed document\n"
    said = capsys.readouterr().out
    assert "RESULTS.md left as it is:" in said and "resnet" in said
    named = said.split("has no runs of ", 1)[1].split(" (run them", 1)[0].split(", ")
    assert "bsp_levels" in named and "resnet" in named
