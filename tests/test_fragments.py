"""Studies under docs/results/ are spliced into RESULTS.md between markers, idempotently."""

import pytest

from experiments.paper import fragments

DOC = "# Results\n\nintro\n\n## Where we agree\n\ntext\n\n## Sources\n\n- a\n"


def _studies(tmp_path, **files):
    (tmp_path / "results").mkdir()
    for name, text in files.items():
        (tmp_path / "results" / f"{name}.md").write_text(text)
    return fragments.collect(str(tmp_path))


def test_studies_go_before_the_discussion_in_name_order_and_a_rerun_replaces_them(tmp_path):
    studies = _studies(tmp_path, b_lm="## LM\n\nppl 3.1\n", a_async="## Async\n\n+1.2\n")
    assert [s.splitlines()[0] for s in studies] == ["## Async", "## LM"]
    once = fragments.splice(DOC, studies)
    assert once.index("## Async") < once.index("## LM") < once.index("## Where we agree")
    assert once.startswith("# Results\n\nintro\n\n" + fragments.START)
    assert fragments.splice(once, studies) == once
    again = fragments.splice(once, ["## LM\n\nppl 2.9"])
    assert "ppl 3.1" not in again and "## Async" not in again and "ppl 2.9" in again
    assert again.count(fragments.START) == 1 and again.endswith("## Sources\n\n- a\n")


def test_a_study_without_a_heading_and_a_document_missing_its_end_marker_are_refused(tmp_path):
    with pytest.raises(ValueError, match="must start with a '## ' heading"):
        _studies(tmp_path, x="no heading\n")
    with pytest.raises(ValueError, match="but no '<!-- end of studies -->'"):
        fragments.splice("a\n" + fragments.START + "\nb\n", [])


def test_a_document_of_its_own_is_linked_not_spliced(tmp_path):
    studies = _studies(tmp_path, heldout="# Held-out plants\n\n| a | b |\n")
    assert studies == [
        "## Held-out plants\n\nA document of its own: "
        "[docs/results/heldout.md](results/heldout.md)."
    ]


def test_an_untracked_study_in_a_checkout_is_left_out(tmp_path):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert _studies(tmp_path, new="## New\n\n1\n") == []
