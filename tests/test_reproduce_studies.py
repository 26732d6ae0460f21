"""`make report` runs every study that has a generator of its own (a study dropped from
reproduce.py fails here), each study's document carries the stamp of the runs that produced
it, and each committed document is its committed JSON rendered (issue 28, point 1)."""

from __future__ import annotations

import json
import os
import re

import pytest

from benchmarks import controller_heldout_seeds
from experiments import async_fair_doc
from experiments.paper import reproduce, stamp
from experiments.paper.results_doc import STUDIES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "docs", "results")


def _read(name: str) -> str:
    with open(os.path.join(RESULTS, name)) as f:
        return f.read()


def _flags(cmd: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in cmd if a.startswith("--") and "=" in a)


def _written(cmd: list[str]) -> list[str]:
    """The paths a command writes: --out (not the runs' log), --doc, --figure, and --data
    except where async_fair_doc reads it (without --runs)."""
    flags = _flags(cmd)
    paths = [flags[k] for k in ("out", "doc", "figure") if k in flags]
    if "data" in flags and (cmd[2] != "experiments.async_fair_doc" or "runs" in flags):
        paths.append(flags["data"])
    return [p for p in paths if not p.endswith(".jsonl")]


def _outputs(commands: list[list[str]]) -> set[str]:
    """The documents and JSON a study's commands write."""
    return {os.path.basename(p) for cmd in commands for p in _written(cmd) if "figures" not in p}


# Every study make report reruns, in order, and the modules of its commands (issue 28: every
# number traces to a committed file; a study dropped from reproduce fails here).
MODULES = {
    "async_fair": ["experiments.async_fair", "experiments.async_fair_doc"],
    "heldout": ["benchmarks.controller_heldout_seeds"],
    "predictive_trainer": [
        "experiments.ablate",
        "experiments.ablate",
        "experiments.predictive_trainer",
        "experiments.predictive_study",
    ],
    "controller_heldout": ["benchmarks.controller_heldout"],
    "async_staleness": ["experiments.async_staleness"],
    "cost_curves": ["experiments.curves.ablate"],
    "lm": ["experiments.ablate", "experiments.ablate", "experiments.lm_results"],
    "lm_curve": ["experiments.ablate", "experiments.ablate", "experiments.lm_results"],
}


def test_report_runs_every_study_and_each_writes_its_files(tmp_path):
    args = reproduce.parse_args([f"--workdir={tmp_path}", f"--docs={tmp_path / 'docs'}"])
    assert args.studies == list(MODULES) == list(STUDIES)
    commands = {name: reproduce.study_commands(name, args) for name in args.studies}
    assert {name: [c[2] for c in cmds] for name, cmds in commands.items()} == MODULES
    written = set().union(*(_outputs(c) for c in commands.values()))
    assert written == {f for files in STUDIES.values() for f in files}
    for name in ("controller_heldout", "async_staleness", "cost_curves", "lm", "lm_curve"):
        assert _outputs(commands[name]) == set(STUDIES[name]), name
    # The async runs resume from their JSON lines in the workdir, not in a temp folder.
    run = commands["async_fair"][0]
    assert f"--out={tmp_path / 'async_fair' / 'async_fair.jsonl'}" in run
    # Every command writes into the documents folder asked for, none into the checkout's.
    for cmds in commands.values():
        for cmd in cmds:
            for path in _written(cmd):
                assert path.startswith(str(tmp_path / "docs")), (cmd, path)


def test_lm_studies_resume_in_the_workdir_and_collect_what_they_ran(tmp_path):
    """Each LM study's two ablations (BSP, async) run into WORKDIR/<study>/<mode> (a rerun
    finishes only missing cells) and lm_results reads exactly those directories; the
    cost-curve study tabulates the predictive_trainer study's own trainer runs."""
    args = reproduce.parse_args([f"--workdir={tmp_path}", f"--docs={tmp_path / 'docs'}"])
    for name, controllers in (("lm", 5), ("lm_curve", 3)):
        *runs, collect = reproduce.study_commands(name, args)
        dirs = [_flags(r)["workdir"] for r in runs]
        assert [os.path.abspath(d) for d in dirs] == [
            str(tmp_path / name / mode) for mode in ("bsp", "asp")
        ]
        flags = _flags(collect)
        assert [flags["bsp"], flags["asp"]] == dirs
        configs = [_flags(r)["config"] for r in runs]
        assert [c.split(":")[1].split(",")[0] for c in configs] == ["mode=bsp", "mode=asp"]
        for c in configs:
            chosen = dict(kv.split("=") for kv in c.split(":")[1].split(","))["controllers"]
            assert len(chosen.split("+")) == controllers, c
        assert ("curve=data/curves/cpu_gpt_text.json" in configs[1]) == (name == "lm_curve")
        assert f"(`make report`, part {name})" in flags["note"]
    trainer_dirs = [
        os.path.abspath(_flags(c)["workdir"])
        for c in reproduce.study_commands("predictive_trainer", args)
        if c[2] == "experiments.ablate"
    ]
    (curves,) = reproduce.study_commands("cost_curves", args)
    read = [os.path.abspath(d) for d in _flags(curves)["trainer_runs"].split(",")]
    assert read == trainer_dirs


def test_skip_and_only_choose_the_studies(tmp_path):
    w = f"--workdir={tmp_path}"
    assert reproduce.parse_args([w, "--skip_study=heldout"]).studies == [
        n for n in MODULES if n != "heldout"
    ]
    assert reproduce.parse_args([w, "--skip_study=all"]).studies == []
    assert reproduce.parse_args([w, "--only=bsp_levels"]).studies == []
    only = reproduce.parse_args([w, "--only=heldout"])
    assert (only.studies, only.names) == (["heldout"], [])
    # Alone, the held-out study also rewrites the predictive document that reads its JSON.
    assert [c[2] for c in reproduce.study_commands("heldout", only)] == [
        "benchmarks.controller_heldout_seeds",
        "experiments.predictive_study",
    ]
    skipped = reproduce.parse_args([w, "--skip_study=lm,lm_curve,async_fair"]).studies
    assert skipped == [n for n in MODULES if n not in ("lm", "lm_curve", "async_fair")]
    only = reproduce.parse_args([w, "--only=cost_curves,lm_curve"])
    assert (only.studies, only.names) == (["cost_curves", "lm_curve"], [])
    with pytest.raises(SystemExit):
        reproduce.parse_args([w, "--skip_study=nope"])
    with pytest.raises(SystemExit):  # nothing left to run: it said "done" and exit 0
        reproduce.parse_args([w, "--only=lm", "--skip_study=lm"])


def test_small_runs_no_study_but_renders_their_documents_from_committed_json(tmp_path):
    args = reproduce.parse_args(["--small", f"--workdir={tmp_path}"])
    commands = {name: reproduce.study_commands(name, args) for name in args.studies}
    assert [c[2] for cmds in commands.values() for c in cmds] == [
        "experiments.async_fair_doc",
        "experiments.predictive_study",
        "benchmarks.controller_heldout",
        "experiments.async_staleness",
        "experiments.curves.ablate",
        "experiments.lm_results",
        "experiments.lm_results",
    ]
    for cmds in commands.values():
        for cmd in cmds:
            assert not any(a.startswith("--runs=") for a in cmd)  # the committed data stay
            read = [
                a.split("=", 1)[1]
                for a in cmd
                if a.startswith(("--data=", "--heldout=", "--render="))
            ]
            assert read and all(p.startswith(RESULTS) for p in read)


# (study, the module whose main() renders it from the committed JSON, the flag of the document)
RENDERED = (
    ("controller_heldout", "benchmarks.controller_heldout", "--doc"),
    ("async_staleness", "experiments.async_staleness", "--out"),
    ("cost_curves", "experiments.curves.ablate", "--out"),
    ("lm", "experiments.lm_results", "--out"),
    ("lm_curve", "experiments.lm_results", "--out"),
)


@pytest.mark.parametrize(("name", "mod", "flag"), RENDERED, ids=[r[0] for r in RENDERED])
def test_committed_document_is_its_committed_json_rendered(name, mod, flag, tmp_path, capsys):
    """Every number of the committed document comes from the committed JSON: rendering the
    JSON alone (what --small does) gives the committed document, byte for byte."""
    import importlib

    json_file, doc_file = STUDIES[name]
    out = tmp_path / doc_file
    importlib.import_module(mod).main(
        [f"--render={os.path.join(RESULTS, json_file)}", f"{flag}={out}"]
    )
    capsys.readouterr()
    assert out.read_text() == _read(doc_file)


def test_a_pinned_stamp_is_what_every_part_records(monkeypatch):
    monkeypatch.setenv(stamp.PIN, "abc1234:clean")
    assert stamp.commit() == ("abc1234", False)
    assert controller_heldout_seeds.commit() == "abc1234"
    monkeypatch.setenv(stamp.PIN, "abc1234:dirty")
    assert stamp.stamp()["dirty"] is True
    assert controller_heldout_seeds.commit() == "abc1234+dirty"


def test_provenance_names_every_commit_the_runs_ran_at():
    def rec(head, dirty, when):
        return {"stamp": {"commit": head, "dirty": dirty, "generated": when}}

    records = [
        rec("aaa1111", False, "2026-12-02 01:00 UTC"),
        rec("bbb2222", True, "2026-12-02 02:00 UTC"),
        rec("aaa1111", False, "2026-12-02 01:30 UTC"),
    ]
    commits, dates = async_fair_doc.provenance(records)
    assert commits == "aaa1111, bbb2222 (dirty)"
    assert dates == "2026-12-02 01:00 UTC to 2026-12-02 02:00 UTC"
    assert async_fair_doc.provenance([{"seed": 0}]) == ("", "")


COMMIT = r"[0-9a-f]{7,}"


def test_committed_study_documents_carry_the_stamps_of_their_runs():
    data = json.loads(_read("async_fair.json"))
    assert all(r.get("stamp", {}).get("commit") for r in data["records"])
    commits, _ = async_fair_doc.provenance(data["records"])
    assert data["meta"]["commit"] == commits
    doc = _read("async_fair.md")
    assert f"runs at commit `{commits}`" in doc
    assert f"document generated at {stamp.line(data['meta']['stamp'])}" in doc

    heldout = json.loads(_read("controller_heldout_seeds.json"))
    assert re.fullmatch(COMMIT + r"(\+dirty)?", heldout["commit"])
    predictive = _read("predictive_seeds.md")
    assert f"ran at commit `{heldout['commit']}`, {heldout['date']}" in predictive
    trainer = json.loads(_read("predictive_trainer.json"))
    for study in trainer["studies"]:
        assert re.fullmatch(COMMIT, study["stamp"]["commit"])
        assert f"ran at {stamp.line(study['stamp'])}" in predictive

    single = json.loads(_read("controller_heldout.json"))
    assert re.fullmatch(COMMIT + r"(\+dirty)?", single["commit"])
    assert f"commit `{single['commit']}`" in _read("controller_heldout.md")
    for name in ("async_staleness", "cost_curves"):
        data = json.loads(_read(f"{name}.json"))
        assert re.fullmatch(COMMIT, data["stamp"]["commit"]), name
        assert f"commit `{data['stamp']['commit']}`" in _read(f"{name}.md"), name
    for name in ("lm", "lm_curve"):
        meta = json.loads(_read(f"{name}.json"))["meta"]
        commits = {s["commit"] for s in meta["stamps"]}
        assert len(meta["stamps"]) == 2 and all(re.fullmatch(COMMIT, c) for c in commits)
        ran = "the cells ran at " + ", ".join(f"commit `{c}`" for c in sorted(commits))
        assert ran in _read(f"{name}.md")


def test_a_resumed_ablation_that_ran_no_cell_keeps_the_stamp_of_the_commit_that_did(
    tmp_path, monkeypatch
):
    """A resumed `make report` at a later commit must not claim cells it found complete ran
    there: stamp.json is rewritten only where a cell finished during this run."""
    cell = tmp_path / "cell_a"
    cell.mkdir()
    (cell / "summary.json").write_text(json.dumps({"status": "complete"}))
    os.utime(cell / "summary.json", (1_000_000, 1_000_000))  # finished long ago
    (tmp_path / "stamp.json").write_text(json.dumps({"commit": "old1234"}))
    monkeypatch.setattr(stamp, "stamp", lambda: {"commit": "new5678"})

    def commit() -> str:
        return json.loads((tmp_path / "stamp.json").read_text())["commit"]

    assert reproduce.stamp_if_ran(str(tmp_path), since=2_000_000) is False
    assert commit() == "old1234"
    os.utime(cell / "summary.json", (3_000_000, 3_000_000))  # this run finished it
    assert reproduce.stamp_if_ran(str(tmp_path), since=2_000_000) is True
    assert commit() == "new5678"


def test_lm_documents_name_their_paths_as_typed_from_the_checkout():
    """make report hands lm_results absolute paths (a worktree's, say): the recorded command
    names the ones inside the repository relative to it, and leaves others as they are."""
    from experiments import lm_results

    inside = os.path.join(REPO, "docs", "results", "lm.md")
    assert lm_results._as_typed(f"--out={inside}") == "--out=docs/results/lm.md"
    assert lm_results._as_typed("--out=/elsewhere/lm.md") == "--out=/elsewhere/lm.md"
    assert lm_results._as_typed("--target=15.0") == "--target=15.0"
    for name in ("lm", "lm_curve"):
        assert "/tmp/" not in json.loads(_read(f"{name}.json"))["meta"]["command"]


def test_a_trial_of_the_curves_study_leaves_the_committed_document_alone(tmp_path, monkeypatch):
    """`python -m experiments.curves.ablate --steps 2` rewrote docs/results/cost_curves.md
    with a 2-step table that its committed JSON contradicted; the default --out is runs/."""
    from experiments.curves import ablate

    data = os.path.join(REPO, "docs", "results", "cost_curves.json")
    monkeypatch.chdir(tmp_path)
    ablate.main(["--render", data])
    assert (tmp_path / "runs" / "curves" / "cost_curves.md").read_text().startswith("## ")


def test_studies_refuse_unfinished_runs_and_bad_counts_before_writing(tmp_path, capsys):
    """predictive_trainer over an ablation with no complete cell wrote '0 runs' over the
    committed study; controller_heldout_seeds wrote into docs/results by default and took
    --tune-plants 0 to a late TypeError."""
    from experiments import predictive_trainer

    (tmp_path / "abl").mkdir()
    cells = [{"name": "controller-static__seed-0"}, {"name": "controller-pi__seed-0"}]
    (tmp_path / "abl" / "ablation.json").write_text(json.dumps({"cells": cells}))
    out = tmp_path / "out.json"
    for argv, message in [
        (
            ["--runs", str(tmp_path / "abl"), "--out", str(out)],
            "abl: no complete cell",
        ),
        (["--runs", str(tmp_path / "none"), "--out", str(out)], "no ablation.json there"),
    ]:
        with pytest.raises(SystemExit):
            predictive_trainer.main(argv)
        assert message in capsys.readouterr().err
    assert not out.exists()
    cell = tmp_path / "abl" / cells[0]["name"]  # one of two cells complete
    cell.mkdir()
    (cell / "summary.json").write_text(
        json.dumps({"status": "complete", "total_time": 1.0, "final_eval_accuracy": 0.9})
    )
    config = {"controller": {"name": "static"}, "seed": 0, "cost": {}, "hetero": {},
              "train": {"num_steps": 4}}  # fmt: skip
    (cell / "config.json").write_text(json.dumps(config))
    argv = ["--runs", str(tmp_path / "abl"), "--out", str(out)]
    with pytest.raises(SystemExit):
        predictive_trainer.main(argv)
    assert "complete cells missing: abl (1 of 2)" in capsys.readouterr().err
    assert predictive_trainer.main([*argv, "--allow_missing"]) == 0
    (study,) = json.loads(out.read_text())["studies"]
    assert (len(study["runs"]), study["cells"]) == (1, 2)
    for argv, message in [
        (["--tune-plants", "0"], "--plants and --tune-plants must be >= 1"),
        (["--seeds", "a"], "--seeds takes integers"),
    ]:
        with pytest.raises(SystemExit):
            controller_heldout_seeds.main(argv)
        assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [(["--only", ","], "--only names no part"), (["--parallel", "0"], "--parallel must be >= 1")],
)
def test_reproduce_refuses_an_empty_only_and_no_parallel_cells(argv, message, capsys):
    """`--only ,` ran all 12 ablations and 8 studies (hours); --parallel 0 printed ablate's
    usage under reproduce's name after the studies had started."""
    with pytest.raises(SystemExit):
        reproduce.parse_args(argv)
    assert message in capsys.readouterr().err


def test_the_curves_trainer_command_runs_the_seeds_its_table_means():
    """It named configs/ablation_curves.py alone (one seed) under a table of five seeds."""
    with open(os.path.join(REPO, "docs", "results", "cost_curves.md")) as f:
        text = f.read()
    for variant, means in re.findall(
        r"ablation_curves\.py(\S*) --workdir.*?means over (\d+) seed", text
    ):
        assert f"seeds={means}" in variant
    assert len(re.findall(r"ablation_curves\.py\S* --workdir", text)) == 2
