"""Tracking: what the trainer's records become in W&B, read back from offline runs.

No test touches the network: the API key is removed and HOME points at an empty directory
(no netrc login), so online mode must fall back before any connection is attempted.
"""

import json
import os
import subprocess
import sys

import ml_collections
import numpy as np
import pytest

from omnilearn_jax import tracking
from omnilearn_jax.tracking import trackers

W = 4
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _no_network_credentials(monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NETRC", str(tmp_path / "home" / ".netrc"))
    monkeypatch.setenv("WANDB_MODE", "offline")  # belt and braces if a mode arg were lost


def _config(mode: str = "offline") -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.seed = 3
    c.global_batch_size = 128
    c.controller = ml_collections.ConfigDict({"name": "proportional", "deadband": 0.2})
    c.wandb = ml_collections.ConfigDict({"mode": mode, "project": "omnilearn-test"})
    return c


def _train_record(step: int) -> dict:
    sizes = [16 + step, 32, 40, 40 - step]
    return {
        "step": step,
        "time": 0.25 * step + 0.1,
        "loss": 2.0 / (step + 1),
        "accuracy": 0.1 * step,
        "batch_sizes": sizes,
        "worker_times": [0.01 * (k + 1) + 0.001 * step for k in range(W)],
        "speeds": np.array([1.0, 1.0, 0.5, 2.0]),
        "step_time": 0.04 + 0.001 * step,
        "idle_fraction": 0.125,
    }


def test_importing_tracking_does_not_import_wandb():
    code = "import sys, omnilearn_jax.tracking; print('wandb' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=_ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_flatten_record_maps_worker_lists_to_per_worker_keys():
    flat = tracking.flatten_record(
        {
            "step": 7,
            "loss": np.float32(0.5),
            "batch_sizes": [8, 24],
            "worker_times": (0.1, 0.3),
            "speeds": np.array([1.0, 2.0]),
            "losses": [1.5, 2.5],
            "extra": {"grad_norm": 3.0},
            "skipped": None,
        }
    )
    assert flat == {
        "loss": 0.5,
        "worker/0/batch_size": 8,
        "worker/1/batch_size": 24,
        "worker/0/time": 0.1,
        "worker/1/time": 0.3,
        "worker/0/speed": 1.0,
        "worker/1/speed": 2.0,
        "worker/0/loss": 1.5,
        "worker/1/loss": 2.5,
        "extra/grad_norm": 3.0,
    }
    assert type(flat["worker/1/batch_size"]) is int


def test_offline_run_reads_back_history_config_and_summary(tmp_path):
    workdir = str(tmp_path / "cell")
    tracker = tracking.make_tracker(_config(), workdir, group="proportional", tags=("hl8",))
    assert isinstance(tracker, tracking.WandbTracker) and tracker.mode == "offline"
    records = [_train_record(s) for s in range(5)]
    evals = {2: 0.625, 4: 0.8125}  # evals land at the step of the last train record
    for r in records:
        tracker.log_train(r)
        if r["step"] in evals:
            tracker.log_eval(
                {
                    "step": r["step"],
                    "time": r["time"],
                    "eval_loss": 1.0 - evals[r["step"]],
                    "eval_accuracy": evals[r["step"]],
                }
            )
    tracker.summary({"final_eval_accuracy": 0.8125, "total_time": 1.1, "steps": 5})
    run_id = tracker.run_id
    tracker.close()

    runs = tracking.find_offline_runs(workdir)
    assert len(runs) == 1 and runs[0].endswith(run_id)
    assert runs[0].startswith(os.path.join(workdir, "wandb", "offline-run-"))
    rows = tracking.read_offline_history(runs[0])
    assert [row["step"] for row in rows] == [0, 1, 2, 3, 4]  # one row per step: evals merged
    for row, r in zip(rows, records, strict=True):
        assert row["loss"] == pytest.approx(r["loss"], abs=1e-6)
        assert row["worker/2/batch_size"] == r["batch_sizes"][2] == 40
        assert row["worker/0/batch_size"] == r["batch_sizes"][0]
        assert row["worker/3/time"] == pytest.approx(r["worker_times"][3], abs=1e-6)
        assert row["worker/3/speed"] == pytest.approx(2.0)
        if r["step"] in evals:
            assert row["eval_accuracy"] == pytest.approx(evals[r["step"]], abs=1e-6)
        else:
            assert "eval_accuracy" not in row

    config = tracking.read_offline_config(runs[0])
    assert config["seed"] == 3 and config["controller"]["deadband"] == 0.2
    assert config["wandb"]["project"] == "omnilearn-test"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_ROOT, capture_output=True, text=True)
    expected = head.stdout.strip() if head.returncode == 0 else ""
    assert config["meta"]["git_commit"] == expected  # a 40-hex sha in a checkout, else ''
    assert config["meta"]["versions"]["jax"] and config["meta"]["versions"]["wandb"]

    summary = tracking.read_offline_summary(runs[0])
    assert summary["final_eval_accuracy"] == pytest.approx(0.8125)
    assert summary["steps"] == 5
    assert summary["loss"] == pytest.approx(records[-1]["loss"])  # last logged value


def test_protobuf_reader_agrees_with_wandb_leet(tmp_path):
    workdir = str(tmp_path)
    tracker = tracking.make_tracker(_config(), workdir)
    for s in range(3):
        tracker.log_train(_train_record(s))
    tracker.close()
    (run,) = tracking.find_offline_runs(workdir)
    from omnilearn_jax.tracking import offline

    ours = [r for kind, r in offline._records_protobuf(run) if kind == "history"]
    try:
        theirs = [r for kind, r in offline._records_leet(run) if kind == "history"]
    except (FileNotFoundError, RuntimeError) as e:
        pytest.skip(f"wandb leet unavailable: {e}")
    assert len(ours) == 3 and ours == theirs


def test_online_without_api_key_falls_back_to_offline(tmp_path, capsys):
    tracker = tracking.make_tracker(_config("online"), str(tmp_path))
    tracker.log_train(_train_record(0))
    tracker.close()
    assert isinstance(tracker, tracking.WandbTracker) and tracker.mode == "offline"
    out = capsys.readouterr()
    assert "online mode but no API key" in out.out
    assert len(tracking.find_offline_runs(str(tmp_path))) == 1


def test_online_unreachable_and_broken_offline_degrade(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(trackers, "_has_api_key", lambda: True)
    monkeypatch.setattr(trackers, "_reachable", lambda timeout: False)
    tracker = tracking.make_tracker(_config("online"), str(tmp_path / "a"))
    tracker.close()
    assert tracker.mode == "offline" and "unreachable" in capsys.readouterr().out

    def broken(mode, kwargs, init_timeout):
        raise RuntimeError("disk full")

    monkeypatch.setattr(trackers, "_init_run", broken)
    monkeypatch.setattr(trackers, "_reachable", lambda timeout: True)
    tracker = tracking.make_tracker(_config("online"), str(tmp_path / "b"))
    out = capsys.readouterr().out
    assert isinstance(tracker, tracking.NullTracker)
    assert "wandb.init failed (RuntimeError: disk full)" in out and "not tracking" in out


def test_logging_failure_turns_tracking_off_instead_of_raising(capsys):
    class BrokenRun:
        id, dir = "abc", "/nonexistent/run/files"
        finished: list[int] = []

        def log(self, data, step):
            raise ConnectionError("wandb-core died")

        def finish(self, exit_code=0):
            self.finished.append(exit_code)

    run = BrokenRun()
    t = tracking.WandbTracker(run, "offline")
    t.log_train(_train_record(0))
    t.log_train(_train_record(1))  # silently ignored: tracking is off
    t.close()
    assert run.finished == [1]
    assert capsys.readouterr().out.count("logging failed, tracking off") == 1


def test_disabled_and_other_processes_track_nothing(tmp_path):
    disabled = tracking.make_tracker(_config("disabled"), str(tmp_path / "d"))
    worker = tracking.make_tracker(_config("offline"), str(tmp_path / "p"), process_index=1)
    for t in (disabled, worker):
        assert isinstance(t, tracking.NullTracker) and t.run_id == ""
        t.log_train(_train_record(0))
        t.summary({"steps": 1})
        t.close()
    assert not (tmp_path / "d").exists() and not (tmp_path / "p").exists()


def test_memory_tracker_records_everything():
    t = tracking.MemoryTracker()
    assert isinstance(t, tracking.Tracker)
    t.log_train(_train_record(1))
    t.log_eval({"step": 1, "time": 0.35, "eval_loss": 0.5, "eval_accuracy": 0.75})
    t.summary({"steps": 2})
    t.summary({"final_eval_accuracy": 0.75})
    t.close()
    assert [r["step"] for r in t.train_records] == [1] and t.eval_records[0][
        "eval_accuracy"
    ] == 0.75
    step, row = t.rows[0]
    expected = {"time": 0.35, "loss": 1.0, "accuracy": 0.1, "step_time": 0.041}
    expected |= {"idle_fraction": 0.125}
    for k, (size, time, speed) in enumerate(
        zip([17, 32, 40, 39], [0.011, 0.021, 0.031, 0.041], [1.0, 1.0, 0.5, 2.0], strict=True)
    ):
        expected |= {f"worker/{k}/batch_size": size, f"worker/{k}/speed": speed}
        expected |= {f"worker/{k}/time": time}
    assert step == 1 and row.keys() == expected.keys()
    assert row == pytest.approx(expected, rel=1e-12)
    assert all(type(row[f"worker/{k}/batch_size"]) is int for k in range(W))
    assert t.rows[1] == (1, {"time": 0.35, "eval_loss": 0.5, "eval_accuracy": 0.75})
    assert t.summaries == {"steps": 2, "final_eval_accuracy": 0.75} and t.closed


def test_two_runs_in_one_process_stay_separate(tmp_path):
    ids = []
    for loss in (1.5, 0.5):
        t = tracking.make_tracker(_config(), str(tmp_path))
        t.log_train({"step": 0, "loss": loss})
        ids.append(t.run_id)
        t.close()
    runs = tracking.find_offline_runs(str(tmp_path))
    assert len(runs) == 2 and ids[0] != ids[1]
    by_id = {r.rsplit("-", 1)[-1]: r for r in runs}
    assert [tracking.read_offline_history(by_id[i])[0]["loss"] for i in ids] == [1.5, 0.5]


def test_resume_id_continues_the_named_run(tmp_path):
    first = tracking.make_tracker(_config(), str(tmp_path))
    first.log_train({"step": 0, "loss": 1.0})
    first.close()
    again = tracking.make_tracker(_config(), str(tmp_path), resume_id=first.run_id)
    again.log_train({"step": 5, "loss": 0.25})
    again.close()
    assert again.run_id == first.run_id
    last = tracking.find_offline_runs(str(tmp_path))[-1]
    assert [(r["step"], r["loss"]) for r in tracking.read_offline_history(last)] == [(5, 0.25)]


def test_offline_runs_of_other_ids_in_one_directory_are_read_apart(tmp_path):
    """A fresh rerun in a workdir (or two runs sharing wandb.dir) left offline runs of two
    ids there; the analysis read them as one run, the new run's steps followed by the old
    one's. A workdir's run is the id its summary names; without a run store, one run an id."""
    from omnilearn_jax.analysis import sources

    shared = tmp_path / "shared"
    ids = []
    for steps in (3, 2):
        t = tracking.make_tracker(_config(), str(shared))
        for s in range(steps):
            t.log_train({"step": s, "loss": float(steps)})
        ids.append(t.run_id)
        t.close()
    refs = {ref.name: ref for ref in sources.find_offline_runs(str(tmp_path))}
    assert sorted(refs) == sorted(f"shared/{i}" for i in ids)
    rows = sources.parse_offline_run(refs[f"shared/{ids[0]}"].location).rows
    assert [(r["step"], r["loss"]) for r in rows] == [(0, 3.0), (1, 3.0), (2, 3.0)]
    # A workdir: its summary names the run (the older one here), else the newest id.
    (shared / "metrics.jsonl").write_text("")
    (shared / "summary.json").write_text(json.dumps({"wandb_run_id": ids[0]}))
    (ref,) = sources.find_offline_runs(str(shared))
    assert [os.path.basename(d).rsplit("-", 1)[-1] for d in ref.location] == [ids[0]]
    (shared / "summary.json").write_text("{}")
    (ref,) = sources.find_offline_runs(str(shared))
    assert [os.path.basename(d).rsplit("-", 1)[-1] for d in ref.location] == [ids[1]]


def test_a_failed_run_is_not_finished_in_wandb(tmp_path):
    """A failed or interrupted run logged exit code 0: W&B showed it 'finished'."""
    from omnilearn_jax.run.runlog import RunLog
    from omnilearn_jax.tracking import offline

    codes = {}
    for status in ("complete", "failed", "interrupted"):
        tracker = tracking.make_tracker(_config(), str(tmp_path / status))
        log = RunLog(str(tmp_path / status), tracker=tracker)
        log.summary({"status": status, "steps": 1})
        log.close()
        (run_dir,) = tracking.find_offline_runs(str(tmp_path / status))
        offline.wait_until_written(run_dir)
        codes[status] = [v for kind, v in offline._records(run_dir) if kind == "exit"]
    assert codes == {"complete": [0], "failed": [1], "interrupted": [1]}


def test_a_run_id_with_dashes_is_read_whole_and_disabled_wandb_checks_no_names():
    """`WANDB_RUN_ID=exp-1` was read as '1' (the text after the last dash), so the summary's
    id never matched; a project name W&B would refuse stopped runs that never start W&B."""
    from omnilearn_jax.config import checks

    assert tracking.run_id_of("/w/wandb/offline-run-20260101_000000-exp-1") == "exp-1"
    assert tracking.run_id_of("offline-run-20260101_000000-abc123") == "abc123"
    config = _config("disabled")
    config.wandb.project = "ablation:hl8"
    config.wandb.update(tags=(), init_timeout=30.0)
    section = config.wandb
    with pytest.raises(ValueError, match="holds ':'"):
        checks.check_wandb(section)
    from omnilearn_jax.config.schema import base_config

    full = base_config()
    full.wandb.project = "ablation:hl8"  # disabled (the default): not checked
    checks.check_config(full)


def test_a_second_directory_of_a_run_started_in_the_same_second_is_the_same_run(tmp_path):
    # W&B adds "-1" to the directory of a resumed session that starts within the second the
    # first one did; read from the name, its id was "abc123-1", another run, and the analysis
    # kept the first segment alone (half the steps, status interrupted).
    from omnilearn_jax.analysis import sources

    wandb = tmp_path / "run" / "wandb"
    first, second = (wandb / f"offline-run-20260101_000000-abc123{s}" for s in ("", "-1"))
    for d in (first, second):
        d.mkdir(parents=True)
        (d / "run-abc123.wandb").write_bytes(b"")
    assert tracking.run_id_of(str(second)) == "abc123"
    assert tracking.run_id_of(str(tmp_path / "offline-run-20260101_000000-x-1")) == "x-1"
    found = sources._by_run_id(str(tmp_path / "run"), [str(first), str(second)])
    assert found == {str(tmp_path / "run"): [str(first), str(second)]}
