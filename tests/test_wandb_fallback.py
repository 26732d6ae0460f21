"""W&B online without a network: one line of ours, W&B's own banner off (stubs only)."""

import os
import sys
import time
import types

import ml_collections

from omnilearn_jax.tracking import trackers


class _FakeRun:
    def __init__(self, directory):
        self.id, self.url = "fake", "https://wandb.example/run/fake"
        self.dir = os.path.join(directory, "wandb", "offline-run-x", "files")
        self.summary = {}

    def log(self, *a, **k):
        pass

    def finish(self, *a, **k):
        pass


def _install_fake_wandb(monkeypatch, calls):
    fake = types.ModuleType("wandb")

    class Settings(dict):
        def __init__(self, **kwargs):
            super().__init__(kwargs)

    def init(mode, settings, dir, **kwargs):
        calls.append((mode, settings))
        return _FakeRun(dir)

    fake.Settings, fake.init = Settings, init
    monkeypatch.setitem(sys.modules, "wandb", fake)


def _config(mode):
    return ml_collections.ConfigDict({"wandb": {"mode": mode, "project": "p"}})


def test_unreachable_online_run_says_one_line_and_silences_wandb(tmp_path, capsys, monkeypatch):
    calls = []
    _install_fake_wandb(monkeypatch, calls)
    monkeypatch.setattr(trackers, "_has_api_key", lambda: True)
    monkeypatch.setattr(trackers, "_reachable", lambda timeout: False)
    tracker = trackers.make_tracker(_config("online"), str(tmp_path))
    assert tracker.mode == "offline"
    assert [mode for mode, _ in calls] == ["offline"]  # online was never tried
    settings = calls[0][1]
    assert settings["silent"] is True and settings["console"] == "off"
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [
        f"W&B: online mode but https://api.wandb.ai is unreachable; logging offline under "
        f"{tmp_path}/wandb; upload later with `wandb sync {tmp_path}/wandb/offline-run-*`"
    ]
    assert "wandb online" not in lines[0]  # nothing tells the user to do what they did


def test_online_run_names_its_page(tmp_path, capsys, monkeypatch):
    calls = []
    _install_fake_wandb(monkeypatch, calls)
    monkeypatch.setattr(trackers, "_has_api_key", lambda: True)
    monkeypatch.setattr(trackers, "_reachable", lambda timeout: True)
    tracker = trackers.make_tracker(_config("online"), str(tmp_path))
    assert tracker.mode == "online" and calls[0][1]["silent"] is True
    assert capsys.readouterr().out.strip() == (
        "W&B: logging online to https://wandb.example/run/fake"
    )


def test_reachability_check_is_bounded_even_when_name_lookup_hangs(monkeypatch):
    def hang(*args, **kwargs):
        time.sleep(5)  # far past the timeout; then fail as a lookup without a network does
        raise OSError("name lookup timed out")

    monkeypatch.setattr(trackers.socket, "create_connection", hang)
    start = time.perf_counter()
    assert trackers._reachable(timeout=0.5) is False
    assert time.perf_counter() - start < 2.0
